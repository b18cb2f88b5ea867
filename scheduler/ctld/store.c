#include "lib/err.h"
#include "lib/grow.h"
#include "store.h"
#include "store_db.h"

#include <stddef.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const store_job_state_names[] = {
	"PENDING", "STARTING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
	"CHECKPOINTED", NULL
};

bool store_job_state_final(enum job_state s)
{
	return s >= JOB_COMPLETED;
}

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS jobs ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, name TEXT NOT NULL,"
	" state INTEGER NOT NULL, spec TEXT NOT NULL, alloc TEXT, net TEXT,"
	" submitted INTEGER NOT NULL, started INTEGER, ended INTEGER,"
	" exit_status INTEGER, reason TEXT, cleanup TEXT, attempts INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);"
	"CREATE TABLE IF NOT EXISTS nodes ("
	" name TEXT PRIMARY KEY, addr TEXT NOT NULL, up INTEGER NOT NULL,"
	" last_seen INTEGER NOT NULL, info TEXT);"
	"CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);"
	"INSERT OR IGNORE INTO meta VALUES ('schema', '4');"
	/* Schema 3: what each guest used (store_usage.c), NULL where its node
	 * did not say; a guest without a row is unknown too. */
	"CREATE TABLE IF NOT EXISTS job_usage ("
	" job INTEGER NOT NULL, guest INTEGER NOT NULL, node TEXT NOT NULL,"
	" cpu_usec INTEGER, mem_peak INTEGER, PRIMARY KEY (job, guest));"
	"CREATE INDEX IF NOT EXISTS jobs_uid ON jobs(uid, id);"
	/* Schema 4: jobs' checkpoints (store_ckpt.c), each recorded before
	 * any node is asked to pause or save. */
	"CREATE TABLE IF NOT EXISTS checkpoints ("
	" name TEXT PRIMARY KEY, job INTEGER NOT NULL, seq INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" state INTEGER NOT NULL, stop INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0,"
	" created INTEGER NOT NULL, standstill_ms INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL,"
	" damaged TEXT);"
	"CREATE INDEX IF NOT EXISTS checkpoints_job ON checkpoints(job, seq);";

/* Schema 1 lacked the columns vhpc-ctld's crash recovery needs; schemas 2
 * and 3 the job_usage and checkpoints tables, which `schema` has made by
 * now (their jobs keep no usage: unknown; and have no checkpoints), and
 * jobs.restart: the checkpoint a job restarts from (none for theirs), and
 * nodes.drained: no new jobs go there (vhpc node drain), and
 * checkpoints.damaged: why a node refused to restore from it (none known
 * for theirs). */
static int migrate(sqlite3 *db, char **msg)
{
	sqlite3_stmt *st;
	bool have = false;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('jobs') WHERE name='cleanup'", -1, &st, NULL) != SQLITE_OK)
		return -1;
	have = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!have && sqlite3_exec(db, "BEGIN; ALTER TABLE jobs ADD COLUMN cleanup TEXT;"
				  " ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;"
				  " UPDATE meta SET value='2' WHERE key='schema'; COMMIT;", NULL, NULL, msg) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('jobs') WHERE name='restart'", -1, &st, NULL) != SQLITE_OK)
		return -1;
	have = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!have && sqlite3_exec(db, "ALTER TABLE jobs ADD COLUMN restart TEXT", NULL, NULL, msg) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('nodes') WHERE name='drained'", -1, &st, NULL) != SQLITE_OK)
		return -1;
	have = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!have && sqlite3_exec(db, "ALTER TABLE nodes ADD COLUMN drained INTEGER NOT NULL DEFAULT 0", NULL, NULL,
				  msg) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('checkpoints') WHERE name='damaged'", -1, &st,
			       NULL) != SQLITE_OK)
		return -1;
	have = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!have && sqlite3_exec(db, "ALTER TABLE checkpoints ADD COLUMN damaged TEXT", NULL, NULL, msg) != SQLITE_OK)
		return -1;
	return sqlite3_exec(db, "UPDATE meta SET value='4' WHERE key='schema' AND CAST(value AS INTEGER) < 4",
			    NULL, NULL, msg) == SQLITE_OK ? 0 : -1;
}

/* SQLite reports a full disk as SQLITE_FULL (its unix VFS maps ENOSPC to
 * it): callers tell that from other failures (STORE_FULL). */
int store_db_error(struct store *s, struct verr *err, const char *what)
{
	verr_set(err, "state store: %s: %s", what, sqlite3_errmsg(s->db));
	return (sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_FULL ? STORE_FULL : -1;
}

static bool damaged(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

/* What to do about a damaged store: it is not opened, let alone written. */
static int refuse_damaged(const char *path, const char *what, struct verr *err)
{
	return verr_set(err, "state store %s is damaged (%s); vhpc-ctld does not start on it: restore it from a "
			"backup, or move %s and its -wal and -shm files aside to start with an empty queue",
			path, what, path);
}

/* PRAGMA quick_check: the pages and their b-trees are whole (O(size) of
 * the file, without the index-against-table comparison of integrity_check).
 * Its first findings go into the error. */
static int check_integrity(sqlite3 *db, const char *path, struct verr *err)
{
	char found[600] = "";
	size_t len = 0;
	sqlite3_stmt *st;
	int rc, n = 0;

	rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(3)", -1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (!t || !strcmp(t, "ok"))
			continue;
		/* One line: its findings are lines, each after a header. */
		for (const char *p = t; *p && len + 1 < sizeof(found); p++) {
			if (!strncmp(p, "*** in database ", 16) && (p = strstr(p, "***\n")) && (p += 3))
				continue;
			if (*p != '\n')
				found[len++] = *p;
			else if (len && len + 2 < sizeof(found))
				len += (size_t)snprintf(found + len, 3, "; ");
		}
		found[len] = 0;
		n++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	if (rc != SQLITE_OK && !n)
		snprintf(found, sizeof(found), "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	if (n || damaged(rc))
		return refuse_damaged(path, n ? found : found[0] ? found : "unreadable", err);
	if (rc != SQLITE_OK)
		return verr_set(err, "state store %s: cannot check it: %s", path, found);
	return 0;
}

/* WAL is what makes a commit survive kill -9 without a rollback journal
 * per write; SQLite answers the pragma with the mode it kept, which is not
 * WAL where it cannot be (a filesystem without shared memory maps, another
 * process holding the file). */
static int set_wal(sqlite3 *db, const char *path, struct verr *err)
{
	sqlite3_stmt *st;
	char mode[32] = "";
	int rc;

	rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (damaged(rc))
		return refuse_damaged(path, sqlite3_errmsg(db), err);
	if (rc != SQLITE_ROW)
		return verr_set(err, "state store %s: cannot set its journal mode to WAL: %s", path, sqlite3_errmsg(db));
	if (strcmp(mode, "wal"))
		return verr_set(err, "state store %s: SQLite kept the journal mode '%s' instead of WAL (is another "
				"program using the file, or is it on a filesystem without shared memory maps?)", path, mode);
	return 0;
}

int store_open(struct store **out, const char *path, struct verr *err)
{
	struct store *s = calloc(1, sizeof(*s));
	char *msg = NULL;
	int rc = SQLITE_OK;

	if (!s)
		return verr_set(err, "out of memory");
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		verr_set(err, "state store %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "cannot open");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* Checked before anything is written to it; FULL syncs each commit. */
	if (check_integrity(s->db, path, err) < 0 || set_wal(s->db, path, err) < 0)
		goto fail;
	if ((rc = sqlite3_exec(s->db, "PRAGMA synchronous=FULL;", NULL, NULL, &msg)) != SQLITE_OK ||
	    (rc = sqlite3_exec(s->db, schema, NULL, NULL, &msg)) != SQLITE_OK || migrate(s->db, &msg) < 0) {
		if (damaged(rc ? rc : sqlite3_errcode(s->db)))
			refuse_damaged(path, msg ? msg : sqlite3_errmsg(s->db), err);
		else
			verr_set(err, "state store %s: %s", path, msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	sqlite3_close(s->db);
	free(s);
	return -1;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}

int store_job_add(struct store *s, uid_t uid, const char *name, const char *spec_json,
		  int64_t now, int64_t *id, struct verr *err)
{
	return store_job_add_restart(s, uid, name, spec_json, now, NULL, id, err);
}

int store_job_add_restart(struct store *s, uid_t uid, const char *name, const char *spec_json,
			  int64_t now, const char *restart, int64_t *id, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO jobs (uid, name, state, spec, submitted, restart) VALUES (?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare insert");
	sqlite3_bind_int64(st, 1, uid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, JOB_PENDING);
	sqlite3_bind_text(st, 4, spec_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, now);
	if (restart)
		sqlite3_bind_text(st, 6, restart, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 6);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_db_error(s, err, "insert job");
	*id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

int store_job_update(struct store *s, const struct job_row *j, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db,
			       "UPDATE jobs SET state=?, alloc=COALESCE(?, alloc), net=COALESCE(?, net),"
			       " started=COALESCE(?, started), ended=COALESCE(?, ended),"
			       " exit_status=COALESCE(?, exit_status), reason=?, cleanup=COALESCE(?, cleanup),"
			       " attempts=? WHERE id=?",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare update");
	sqlite3_bind_int(st, 1, j->state);
	bind_text_or_null(st, 2, j->alloc_json);
	bind_text_or_null(st, 3, j->net_json);
	if (j->started > 0)
		sqlite3_bind_int64(st, 4, j->started);
	else
		sqlite3_bind_null(st, 4);
	if (j->ended > 0)
		sqlite3_bind_int64(st, 5, j->ended);
	else
		sqlite3_bind_null(st, 5);
	if (store_job_state_final(j->state))
		sqlite3_bind_int(st, 6, j->exit_status);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_text(st, 7, j->reason, -1, SQLITE_STATIC);
	bind_text_or_null(st, 8, j->cleanup_json);
	sqlite3_bind_int(st, 9, j->attempts);
	sqlite3_bind_int64(st, 10, j->id);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_db_error(s, err, "update job");
	if (sqlite3_changes(s->db) != 1)
		return verr_set(err, "state store: no job %lld", (long long)j->id);
	return 0;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? strdup((const char *)t) : NULL;
}

static void row_from(sqlite3_stmt *st, struct job_row *j)
{
	const unsigned char *t;

	memset(j, 0, sizeof(*j));
	j->id = sqlite3_column_int64(st, 0);
	j->uid = (uid_t)sqlite3_column_int64(st, 1);
	t = sqlite3_column_text(st, 2);
	snprintf(j->name, sizeof(j->name), "%s", t ? (const char *)t : "");
	j->state = (enum job_state)sqlite3_column_int(st, 3);
	if ((int)j->state < 0 || j->state >= JOB_STATE_MAX)
		j->state = JOB_FAILED;
	j->spec_json = col_dup(st, 4);
	j->alloc_json = col_dup(st, 5);
	j->net_json = col_dup(st, 6);
	j->submitted = sqlite3_column_int64(st, 7);
	j->started = sqlite3_column_int64(st, 8);
	j->ended = sqlite3_column_int64(st, 9);
	j->exit_status = sqlite3_column_int(st, 10);
	t = sqlite3_column_text(st, 11);
	snprintf(j->reason, sizeof(j->reason), "%s", t ? (const char *)t : "");
	j->cleanup_json = col_dup(st, 12);
	j->attempts = sqlite3_column_int(st, 13);
	t = sqlite3_column_text(st, 14);
	snprintf(j->restart, sizeof(j->restart), "%s", t ? (const char *)t : "");
}

#define JOB_COLS "id, uid, name, state, spec, alloc, net, submitted, started, ended, exit_status, reason, cleanup, attempts, restart"

int store_job_get(struct store *s, int64_t id, struct job_row *out, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT " JOB_COLS " FROM jobs WHERE id=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare select");
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		row_from(st, out);
		sqlite3_finalize(st);
		return 0;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		return verr_set(err, "no job %lld", (long long)id);
	return store_db_error(s, err, "select job");
}

/* Rows of a prepared SELECT of JOB_COLS, in its order. */
static int job_rows(struct store *s, sqlite3_stmt *st, struct job_row **out, size_t *n, struct verr *err)
{
	struct job_row *v = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 32) < 0) {
			sqlite3_finalize(st);
			store_job_rows_free(v, cnt);
			return verr_set(err, "out of memory");
		}
		row_from(st, &v[cnt++]);
	}
	if (rc != SQLITE_DONE) {
		rc = store_db_error(s, err, "list jobs");
		sqlite3_finalize(st);
		store_job_rows_free(v, cnt);
		return rc;
	}
	sqlite3_finalize(st);
	*out = v;
	*n = cnt;
	return 0;
}

int store_jobs_list(struct store *s, int64_t ended_since, struct job_row **out, size_t *n,
		    struct verr *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "SELECT " JOB_COLS " FROM jobs WHERE state < ?1 OR ended >= ?2"
			       " OR (state >= ?1 AND cleanup IS NOT NULL AND cleanup <> '[]') ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare list");
	sqlite3_bind_int(st, 1, JOB_COMPLETED);
	sqlite3_bind_int64(st, 2, ended_since);
	return job_rows(s, st, out, n, err);
}

int store_jobs_ended(struct store *s, int64_t uid, int64_t below_id, int limit, struct job_row **out,
		     size_t *n, struct verr *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "SELECT * FROM (SELECT " JOB_COLS " FROM jobs WHERE id < ?1 AND state >= ?2"
			       " AND (?3 < 0 OR uid = ?3) ORDER BY id DESC LIMIT ?4) ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare list");
	sqlite3_bind_int64(st, 1, below_id);
	sqlite3_bind_int(st, 2, JOB_COMPLETED);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int(st, 4, limit);
	return job_rows(s, st, out, n, err);
}

void store_job_row_free(struct job_row *j)
{
	free(j->spec_json);
	free(j->alloc_json);
	free(j->net_json);
	free(j->cleanup_json);
	j->spec_json = j->alloc_json = j->net_json = j->cleanup_json = NULL;
}

void store_job_rows_free(struct job_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_job_row_free(&v[i]);
	free(v);
}

int store_node_put(struct store *s, const struct node_row *n, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO nodes (name, addr, up, last_seen, info, drained) VALUES (?,?,?,?,?,?)"
			       " ON CONFLICT(name) DO UPDATE SET addr=excluded.addr, up=excluded.up,"
			       " last_seen=excluded.last_seen, info=COALESCE(excluded.info, info), drained=excluded.drained",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare node");
	sqlite3_bind_text(st, 1, n->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, n->addr, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, n->up);
	sqlite3_bind_int64(st, 4, n->last_seen);
	bind_text_or_null(st, 5, n->info_json);
	sqlite3_bind_int(st, 6, n->drained);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_db_error(s, err, "store node");
	return 0;
}

int store_node_id(struct store *s, const char *name, int64_t *id, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT rowid FROM nodes WHERE name=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare node id");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 0;
	return rc == SQLITE_DONE ? verr_set(err, "no node %s", name) : store_db_error(s, err, "node id");
}

int store_nodes_list(struct store *s, struct node_row **out, size_t *n, struct verr *err)
{
	sqlite3_stmt *st;
	struct node_row *v = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT name, addr, up, last_seen, info, rowid, drained FROM nodes ORDER BY name",
			       -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare nodes");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t;

		if (grow(&v, &cap, cnt + 1, sizeof(*v), 16) < 0) {
			sqlite3_finalize(st);
			store_node_rows_free(v, cnt);
			return verr_set(err, "out of memory");
		}
		memset(&v[cnt], 0, sizeof(v[cnt]));
		t = sqlite3_column_text(st, 0);
		snprintf(v[cnt].name, sizeof(v[cnt].name), "%s", t ? (const char *)t : "");
		t = sqlite3_column_text(st, 1);
		snprintf(v[cnt].addr, sizeof(v[cnt].addr), "%s", t ? (const char *)t : "");
		v[cnt].up = sqlite3_column_int(st, 2);
		v[cnt].last_seen = sqlite3_column_int64(st, 3);
		v[cnt].info_json = col_dup(st, 4);
		v[cnt].id = sqlite3_column_int64(st, 5);
		v[cnt].drained = sqlite3_column_int(st, 6) != 0;
		cnt++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		store_node_rows_free(v, cnt);
		return store_db_error(s, err, "list nodes");
	}
	*out = v;
	*n = cnt;
	return 0;
}

void store_node_rows_free(struct node_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].info_json);
	free(v);
}
