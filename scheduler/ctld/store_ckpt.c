/*
 * The checkpoints part of the store: one row per checkpoint of a job,
 * written before any node is asked to save it and moved on as the save
 * goes (SAVING, SAVED, DONE), so a restarted controller knows which jobs'
 * guests it may have left paused.
 */
#include "lib/err.h"
#include "lib/grow.h"
#include "store.h"
#include "store_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_ckpt_add(struct store *s, struct ckpt_row *c, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return store_db_error(s, err, "begin checkpoint");
	/* The next seq of the job, never one it had: a removed checkpoint's
	 * folder may still be on a node that the controller does not see.
	 * The last one given is kept in meta ("ckpt_seq.<job>"). */
	if (sqlite3_prepare_v2(s->db, "SELECT MAX(COALESCE((SELECT MAX(seq) FROM checkpoints WHERE job=?1), 0),"
			       " COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key='ckpt_seq.' || ?1), 0)) + 1",
			       -1, &st, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, c->job);
	rc = sqlite3_step(st);
	c->seq = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 1;
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		goto fail;
	if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('ckpt_seq.' || ?1, ?2)", -1, &st,
			       NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, c->job);
	sqlite3_bind_int64(st, 2, c->seq);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto fail;
	snprintf(c->name, sizeof(c->name), "%lld.%lld", (long long)c->job, (long long)c->seq);
	if (sqlite3_prepare_v2(s->db, "INSERT INTO checkpoints (name, job, seq, uid, state, stop, bytes, created,"
			       " standstill_ms, record) VALUES (?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, c->job);
	sqlite3_bind_int64(st, 3, c->seq);
	sqlite3_bind_int64(st, 4, c->uid);
	sqlite3_bind_int(st, 5, c->state);
	sqlite3_bind_int(st, 6, c->stop);
	sqlite3_bind_int64(st, 7, c->bytes);
	sqlite3_bind_int64(st, 8, c->created);
	sqlite3_bind_int64(st, 9, c->standstill_ms);
	sqlite3_bind_text(st, 10, c->record ? c->record : "{}", -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE || sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	rc = store_db_error(s, err, "add checkpoint");
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int store_ckpt_update(struct store *s, const struct ckpt_row *c, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "UPDATE checkpoints SET state=?, bytes=?, standstill_ms=?,"
			       " record=COALESCE(?, record) WHERE name=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare checkpoint update");
	sqlite3_bind_int(st, 1, c->state);
	sqlite3_bind_int64(st, 2, c->bytes);
	sqlite3_bind_int64(st, 3, c->standstill_ms);
	if (c->record)
		sqlite3_bind_text(st, 4, c->record, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 4);
	sqlite3_bind_text(st, 5, c->name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_db_error(s, err, "update checkpoint");
	if (sqlite3_changes(s->db) != 1)
		return verr_set(err, "state store: no checkpoint %s", c->name);
	return 0;
}

#define CKPT_COLS "name, job, seq, uid, state, stop, bytes, created, standstill_ms, record, damaged"

static void row_from(sqlite3_stmt *st, struct ckpt_row *c)
{
	const unsigned char *t = sqlite3_column_text(st, 0);

	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", t ? (const char *)t : "");
	c->job = sqlite3_column_int64(st, 1);
	c->seq = sqlite3_column_int64(st, 2);
	c->uid = (uid_t)sqlite3_column_int64(st, 3);
	c->state = (enum ckpt_state)sqlite3_column_int(st, 4);
	if ((int)c->state < CKPT_SAVING || c->state > CKPT_DONE)
		c->state = CKPT_SAVING;
	c->stop = sqlite3_column_int(st, 5) != 0;
	c->bytes = sqlite3_column_int64(st, 6);
	c->created = sqlite3_column_int64(st, 7);
	c->standstill_ms = sqlite3_column_int64(st, 8);
	t = sqlite3_column_text(st, 10);
	snprintf(c->damaged, sizeof(c->damaged), "%s", t ? (const char *)t : "");
	t = sqlite3_column_text(st, 9);
	c->record = strdup(t ? (const char *)t : "{}");
}

int store_ckpt_get(struct store *s, const char *name, struct ckpt_row *out, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT " CKPT_COLS " FROM checkpoints WHERE name=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare checkpoint select");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		row_from(st, out);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return out->record ? 0 : verr_set(err, "out of memory");
	if (rc == SQLITE_DONE)
		return verr_set(err, "no checkpoint %s", name);
	return store_db_error(s, err, "select checkpoint");
}

int store_ckpt_list(struct store *s, int64_t uid, struct ckpt_row **out, size_t *n, struct verr *err)
{
	struct ckpt_row *v = NULL;
	size_t cap = 0, cnt = 0;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT " CKPT_COLS " FROM checkpoints WHERE ?1 < 0 OR uid = ?1"
			       " ORDER BY job, seq", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare checkpoint list");
	sqlite3_bind_int64(st, 1, uid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow(&v, &cap, cnt + 1, sizeof(*v), 16) < 0) {
			sqlite3_finalize(st);
			store_ckpt_rows_free(v, cnt);
			return verr_set(err, "out of memory");
		}
		row_from(st, &v[cnt++]);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		store_ckpt_rows_free(v, cnt);
		return store_db_error(s, err, "list checkpoints");
	}
	*out = v;
	*n = cnt;
	return 0;
}

int store_ckpt_delete(struct store *s, const char *name, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "DELETE FROM checkpoints WHERE name=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare checkpoint delete");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_db_error(s, err, "delete checkpoint");
}

int store_ckpt_set_damaged(struct store *s, const char *name, const char *why, struct verr *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "UPDATE checkpoints SET damaged=? WHERE name=?", -1, &st, NULL) != SQLITE_OK)
		return store_db_error(s, err, "prepare checkpoint damaged");
	sqlite3_bind_text(st, 1, why, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_db_error(s, err, "mark checkpoint damaged");
}

void store_ckpt_rows_free(struct ckpt_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].record);
	free(v);
}
