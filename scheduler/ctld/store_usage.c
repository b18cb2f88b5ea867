/*
 * The accounting part of the store: what each guest of a job used (its
 * node's report at teardown), and the ended jobs with it, for `vhpc
 * history`.  A guest whose node never reported (it was down, or restarted
 * and forgot) has no row: unknown, which history says, never 0.
 */
#include "lib/err.h"
#include "lib/grow.h"
#include "store.h"
#include "store_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bind_known(sqlite3_stmt *st, int i, int64_t v)
{
	if (v >= 0)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int store_usage_put(struct store *s, int64_t job, const struct store_usage *u, int n, struct verr *err)
{
	sqlite3_stmt *st;
	int rc = SQLITE_DONE;

	if (n <= 0)
		return 0;
	if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return store_db_error(s, err, "begin usage");
	if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO job_usage (job, guest, node, cpu_usec, mem_peak)"
			       " VALUES (?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
		rc = store_db_error(s, err, "prepare usage");
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	for (int i = 0; i < n && rc == SQLITE_DONE; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, job);
		sqlite3_bind_int(st, 2, u[i].guest);
		sqlite3_bind_text(st, 3, u[i].node, -1, SQLITE_STATIC);
		bind_known(st, 4, u[i].cpu_usec);
		bind_known(st, 5, u[i].mem_peak);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE || sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = store_db_error(s, err, "record usage");
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return 0;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? strdup((const char *)t) : NULL;
}

static void history_from(sqlite3_stmt *st, struct history_row *h)
{
	const unsigned char *t;
	double cpu;

	memset(h, 0, sizeof(*h));
	h->id = sqlite3_column_int64(st, 0);
	h->uid = (uid_t)sqlite3_column_int64(st, 1);
	t = sqlite3_column_text(st, 2);
	snprintf(h->name, sizeof(h->name), "%s", t ? (const char *)t : "");
	h->state = (enum job_state)sqlite3_column_int(st, 3);
	if ((int)h->state < 0 || h->state >= JOB_STATE_MAX)
		h->state = JOB_FAILED;
	h->spec_json = col_dup(st, 4);
	h->alloc_json = col_dup(st, 5);
	h->submitted = sqlite3_column_int64(st, 6);
	h->started = sqlite3_column_int64(st, 7);
	h->ended = sqlite3_column_int64(st, 8);
	h->exit_status = sqlite3_column_int(st, 9);
	t = sqlite3_column_text(st, 10);
	snprintf(h->reason, sizeof(h->reason), "%s", t ? (const char *)t : "");
	h->cpu_guests = sqlite3_column_int(st, 11);
	/* TOTAL: a float sum, which cannot overflow as SUM of 4096 large
	 * integers could. */
	cpu = sqlite3_column_double(st, 12);
	h->cpu_usec = cpu >= 0 && cpu < 9e18 ? (int64_t)(cpu + 0.5) : INT64_MAX;
	h->mem_guests = sqlite3_column_int(st, 13);
	h->mem_peak = sqlite3_column_int64(st, 14);
}

int store_history(struct store *s, int64_t uid, int64_t since, int64_t below_id, int limit,
		  struct history_row **out, size_t *n, struct verr *err)
{
	struct history_row *v = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	char sql[1200];
	int rc;

	/* The newest `limit` jobs by id, each with its guests' usage from
	 * job_usage's key (job, guest): no GROUP BY over the whole table, so
	 * a page costs its rows, and one user's page uses jobs_uid. */
	snprintf(sql, sizeof(sql),
		 "SELECT * FROM (SELECT j.id, j.uid, j.name, j.state, j.spec, j.alloc, j.submitted, j.started, j.ended,"
		 " j.exit_status, j.reason,"
		 " (SELECT COUNT(cpu_usec) FROM job_usage u WHERE u.job = j.id),"
		 " (SELECT TOTAL(cpu_usec) FROM job_usage u WHERE u.job = j.id),"
		 " (SELECT COUNT(mem_peak) FROM job_usage u WHERE u.job = j.id),"
		 " (SELECT COALESCE(MAX(mem_peak), 0) FROM job_usage u WHERE u.job = j.id)"
		 " FROM jobs j WHERE j.state >= ?1 AND j.id < ?2 AND %s COALESCE(j.ended, 0) >= ?4"
		 " ORDER BY j.id DESC LIMIT ?5) ORDER BY 1",
		 uid >= 0 ? "j.uid = ?3 AND" : "?3 < 0 AND");
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare history");
	sqlite3_bind_int(st, 1, JOB_COMPLETED);
	sqlite3_bind_int64(st, 2, below_id);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, since);
	sqlite3_bind_int(st, 5, limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 64) < 0) {
			sqlite3_finalize(st);
			store_history_free(v, cnt);
			return verr_set(err, "out of memory");
		}
		history_from(st, &v[cnt++]);
	}
	if (rc != SQLITE_DONE) {
		rc = store_db_error(s, err, "history");
		sqlite3_finalize(st);
		store_history_free(v, cnt);
		return rc;
	}
	sqlite3_finalize(st);
	*out = v;
	*n = cnt;
	return 0;
}

void store_history_free(struct history_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].spec_json);
		free(v[i].alloc_json);
	}
	free(v);
}
