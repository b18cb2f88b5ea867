/* The durable state store: what was committed survives the writer being
 * killed with SIGKILL, and reads back the same; a store SQLite cannot keep
 * in WAL mode, or a damaged one, is refused at open. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "scheduler/ctld/store.h"
#include <fcntl.h>
#include <sqlite3.h>

static char dir[64];
static char path[300];

static int setup(void **state)
{
	(void)state;
	if (fx_tmpdir(dir, sizeof(dir), "store") < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(dir);
}

static void jobs_round_trip(void **state)
{
	struct store *s;
	struct verr err;
	struct job_row j, *v;
	size_t n;
	int64_t id;

	(void)state;
	assert_int_equal(store_open(&s, path, &err), 0);
	assert_int_equal(store_job_add(s, 1000, "pp", "{\"guests\":2}", 111, &id, &err), 0);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_int_equal(j.uid, 1000);
	assert_string_equal(j.name, "pp");
	assert_int_equal(j.state, JOB_PENDING);
	assert_string_equal(j.spec_json, "{\"guests\":2}");
	assert_null(j.alloc_json);
	store_job_row_free(&j);

	memset(&j, 0, sizeof(j));
	j.id = id;
	j.state = JOB_RUNNING;
	j.started = 120;
	j.alloc_json = "{\"nodes\":[\"n1\"]}";
	assert_int_equal(store_job_update(s, &j, &err), 0);
	j.alloc_json = NULL;
	j.state = JOB_COMPLETED;
	j.ended = 130;
	j.exit_status = 3;
	snprintf(j.reason, sizeof(j.reason), "done");
	assert_int_equal(store_job_update(s, &j, &err), 0);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_int_equal(j.state, JOB_COMPLETED);
	assert_int_equal(j.started, 120);
	assert_int_equal(j.ended, 130);
	assert_int_equal(j.exit_status, 3);
	assert_string_equal(j.alloc_json, "{\"nodes\":[\"n1\"]}");
	store_job_row_free(&j);
	assert_int_equal(store_jobs_list(s, INT64_MAX, &v, &n, &err), 0);
	assert_int_equal(n, 0);
	store_job_rows_free(v, n);
	assert_int_equal(store_job_get(s, 9999, &j, &err), -1);
	assert_non_null(strstr(err.msg, "no job 9999"));
	store_close(s);
}

static void committed_jobs_survive_sigkill(void **state)
{
	int p[2], st;
	pid_t pid;
	int64_t ids[50], got;
	struct store *s;
	struct verr err;
	struct job_row *v;
	size_t n, found = 0;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct store *cs;

		if (store_open(&cs, path, &err) < 0)
			_exit(2);
		for (int i = 0;; i++) {
			int64_t id;

			if (store_job_add(cs, 0, "k", "{}", i, &id, &err) < 0)
				_exit(3);
			/* Acknowledged = committed: the parent counts it. */
			if (write(p[1], &id, sizeof(id)) != sizeof(id))
				_exit(4);
			if (i == 49)
				raise(SIGKILL);
		}
	}
	close(p[1]);
	for (int i = 0; i < 50; i++)
		assert_int_equal(read(p[0], &ids[i], sizeof(ids[i])), sizeof(ids[i]));
	assert_int_equal(read(p[0], &got, sizeof(got)), 0);
	waitpid(pid, &st, 0);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(store_open(&s, path, &err), 0);
	assert_int_equal(store_jobs_list(s, INT64_MAX, &v, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 50; k++)
			found += v[i].id == ids[k];
	assert_int_equal(found, 50);
	store_job_rows_free(v, n);
	store_close(s);
}

static void nodes_upsert(void **state)
{
	struct store *s;
	struct verr err;
	struct node_row n = { .up = true, .last_seen = 5 }, *v;
	size_t cnt;

	(void)state;
	snprintf(n.name, sizeof(n.name), "n1");
	snprintf(n.addr, sizeof(n.addr), "10.0.0.1:6818");
	n.info_json = "{\"cores\":8}";
	assert_int_equal(store_open(&s, path, &err), 0);
	assert_int_equal(store_node_put(s, &n, &err), 0);
	n.up = false;
	n.last_seen = 9;
	n.info_json = NULL;
	assert_int_equal(store_node_put(s, &n, &err), 0);
	assert_int_equal(store_nodes_list(s, &v, &cnt, &err), 0);
	assert_int_equal(cnt, 1);
	assert_false(v[0].up);
	assert_int_equal(v[0].last_seen, 9);
	assert_string_equal(v[0].info_json, "{\"cores\":8}");
	/* A node's number stays what it got first: local job ids use it. */
	{
		int64_t id1, id2;

		assert_int_equal(store_node_id(s, "n1", &id1, &err), 0);
		assert_int_equal(id1, v[0].id);
		snprintf(n.name, sizeof(n.name), "n2");
		assert_int_equal(store_node_put(s, &n, &err), 0);
		assert_int_equal(store_node_id(s, "n2", &id2, &err), 0);
		assert_int_not_equal(id1, id2);
		snprintf(n.name, sizeof(n.name), "n1");
		n.up = true;
		assert_int_equal(store_node_put(s, &n, &err), 0);
		assert_int_equal(store_node_id(s, "n1", &id2, &err), 0);
		assert_int_equal(id1, id2);
		assert_int_equal(store_node_id(s, "ghost", &id2, &err), -1);
	}
	store_node_rows_free(v, cnt);
	store_close(s);
}

static void cleanup_and_attempts_round_trip(void **state)
{
	struct store *s;
	struct verr err;
	struct job_row j;
	int64_t id;

	(void)state;
	assert_int_equal(store_open(&s, path, &err), 0);
	assert_int_equal(store_job_add(s, 0, "c", "{}", 1, &id, &err), 0);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_null(j.cleanup_json);
	assert_int_equal(j.attempts, 0);
	j.state = JOB_CANCELLED;
	j.attempts = 2;
	j.cleanup_json = strdup("[\"n1\",\"n2\"]");
	assert_int_equal(store_job_update(s, &j, &err), 0);
	store_job_row_free(&j);
	/* NULL keeps what is there; "[]" clears it */
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	free(j.cleanup_json);
	j.cleanup_json = NULL;
	assert_int_equal(store_job_update(s, &j, &err), 0);
	store_job_row_free(&j);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_string_equal(j.cleanup_json, "[\"n1\",\"n2\"]");
	assert_int_equal(j.attempts, 2);
	free(j.cleanup_json);
	j.cleanup_json = strdup("[]");
	assert_int_equal(store_job_update(s, &j, &err), 0);
	store_job_row_free(&j);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_string_equal(j.cleanup_json, "[]");
	store_job_row_free(&j);
	store_close(s);
}

/* A state file of schema 1 (before the cleanup and attempts columns)
 * opens and gains them. */
static void schema_1_is_migrated(void **state)
{
	char cmd[1024], old[600];
	struct store *s;
	struct verr err;
	struct job_row j;

	(void)state;
	snprintf(old, sizeof(old), "%s.v1", path);
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 '%s' \"CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL,"
		 " name TEXT NOT NULL, state INTEGER NOT NULL, spec TEXT NOT NULL, alloc TEXT, net TEXT,"
		 " submitted INTEGER NOT NULL, started INTEGER, ended INTEGER, exit_status INTEGER, reason TEXT);"
		 " CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('schema','1');"
		 " INSERT INTO jobs (uid, name, state, spec, submitted) VALUES (0, 'old', 0, '{}', 1);\"", old);
	if (system("command -v sqlite3 >/dev/null") != 0)
		skip();
	assert_int_equal(system(cmd), 0);
	assert_int_equal(store_open(&s, old, &err), 0);
	assert_int_equal(store_job_get(s, 1, &j, &err), 0);
	assert_string_equal(j.name, "old");
	assert_int_equal(j.attempts, 0);
	store_job_row_free(&j);
	store_close(s);
	unlink(old);
}

/* Schema 3 (before checkpoints) opens as 4: its jobs and nodes kept, no
 * restart, not drained.  Checkpoint rows: names <job>.<seq>, a seq never
 * given twice for a job (not even after its row was removed), states and
 * records updated, listed per owner. */
static void schema_3_is_migrated_and_checkpoints(void **state)
{
	static const char v3[] =
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, name TEXT NOT NULL,"
		" state INTEGER NOT NULL, spec TEXT NOT NULL, alloc TEXT, net TEXT, submitted INTEGER NOT NULL,"
		" started INTEGER, ended INTEGER, exit_status INTEGER, reason TEXT, cleanup TEXT,"
		" attempts INTEGER NOT NULL DEFAULT 0);"
		"CREATE TABLE nodes (name TEXT PRIMARY KEY, addr TEXT NOT NULL, up INTEGER NOT NULL,"
		" last_seen INTEGER NOT NULL, info TEXT);"
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('schema','3');"
		"CREATE TABLE job_usage (job INTEGER NOT NULL, guest INTEGER NOT NULL, node TEXT NOT NULL,"
		" cpu_usec INTEGER, mem_peak INTEGER, PRIMARY KEY (job, guest));"
		"INSERT INTO nodes VALUES ('n1', '1.2.3.4:5', 1, 7, NULL);"
		"INSERT INTO jobs (uid, name, state, spec, submitted) VALUES (1000, 'old', 2, '{}', 10);";
	struct ckpt_row c = { .job = 1, .uid = 1000, .state = CKPT_SAVING, .stop = true, .created = 99 }, g, *v;
	struct node_row *nv;
	struct job_row j;
	struct store *s;
	struct verr err;
	sqlite3 *db;
	sqlite3_stmt *st;
	size_t n;
	int64_t id;
	char old[600];

	(void)state;
	snprintf(old, sizeof(old), "%s.v3", path);
	assert_int_equal(sqlite3_open(old, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, v3, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(store_open(&s, old, &err), 0);
	assert_int_equal(store_job_get(s, 1, &j, &err), 0);
	assert_string_equal(j.name, "old");
	assert_string_equal(j.restart, "");
	store_job_row_free(&j);
	assert_int_equal(store_nodes_list(s, &nv, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_false(nv[0].drained);
	nv[0].drained = true;
	assert_int_equal(store_node_put(s, &nv[0], &err), 0);
	store_node_rows_free(nv, n);
	assert_int_equal(store_nodes_list(s, &nv, &n, &err), 0);
	assert_true(nv[0].drained);
	store_node_rows_free(nv, n);

	assert_int_equal(store_ckpt_add(s, &c, &err), 0);
	assert_string_equal(c.name, "1.1");
	assert_int_equal(store_ckpt_delete(s, "1.1", &err), 0);
	assert_int_equal(store_ckpt_add(s, &c, &err), 0);
	assert_string_equal(c.name, "1.2");   /* 1.1 is never given again */
	c.state = CKPT_DONE;
	c.bytes = 1 << 20;
	c.standstill_ms = 42;
	c.record = "{\"parts\":[]}";
	assert_int_equal(store_ckpt_update(s, &c, &err), 0);
	assert_int_equal(store_ckpt_get(s, "1.2", &g, &err), 0);
	assert_true(g.job == 1 && g.seq == 2 && g.uid == 1000 && g.state == CKPT_DONE && g.stop && g.bytes == 1 << 20 &&
		    g.standstill_ms == 42 && g.created == 99);
	assert_string_equal(g.record, "{\"parts\":[]}");
	free(g.record);
	assert_int_equal(store_ckpt_get(s, "1.1", &g, &err), -1);
	assert_non_null(strstr(err.msg, "no checkpoint 1.1"));
	assert_int_equal(store_ckpt_list(s, 1000, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	store_ckpt_rows_free(v, n);
	assert_int_equal(store_ckpt_list(s, 1001, &v, &n, &err), 0);
	assert_int_equal(n, 0);
	store_ckpt_rows_free(v, n);

	/* a restart names its checkpoint */
	assert_int_equal(store_job_add_restart(s, 1000, "r", "{}", 100, "1.2", &id, &err), 0);
	assert_int_equal(store_job_get(s, id, &j, &err), 0);
	assert_string_equal(j.restart, "1.2");
	store_job_row_free(&j);
	store_close(s);
	assert_int_equal(sqlite3_open(old, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "4");
	sqlite3_finalize(st);
	sqlite3_close(db);
	unlink(old);
}

/* Schema 2 (before accounting) opens as the current one (4) with its jobs; their usage is
 * unknown.  What guests used sums per job; the history filters by user,
 * end time and id. */
static void schema_2_is_migrated_and_usage_sums(void **state)
{
	static const char v2[] =
		"CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, name TEXT NOT NULL,"
		" state INTEGER NOT NULL, spec TEXT NOT NULL, alloc TEXT, net TEXT, submitted INTEGER NOT NULL,"
		" started INTEGER, ended INTEGER, exit_status INTEGER, reason TEXT, cleanup TEXT,"
		" attempts INTEGER NOT NULL DEFAULT 0);"
		"CREATE TABLE nodes (name TEXT PRIMARY KEY, addr TEXT NOT NULL, up INTEGER NOT NULL,"
		" last_seen INTEGER NOT NULL, info TEXT);"
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('schema','2');"
		"INSERT INTO jobs (uid, name, state, spec, submitted, started, ended, exit_status, cleanup)"
		" VALUES (1000, 'old', 3, '{\"guests\":1}', 10, 20, 30, 0, '[]');";
	struct store_usage u[3] = {
		{ 0, "n1", 100, 10 }, { 1, "n2", 200, 30 }, { 2, "n2", -1, -1 },
	};
	struct history_row *h;
	struct job_row j;
	struct store *s;
	struct verr err;
	sqlite3 *db;
	sqlite3_stmt *st;
	size_t n;
	int64_t id;
	char old[600];

	(void)state;
	snprintf(old, sizeof(old), "%s.v2", path);
	assert_int_equal(sqlite3_open(old, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, v2, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(store_open(&s, old, &err), 0);
	assert_int_equal(store_job_get(s, 1, &j, &err), 0);
	assert_string_equal(j.name, "old");
	store_job_row_free(&j);
	assert_int_equal(store_history(s, -1, 0, INT64_MAX, 10, &h, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_true(h[0].id == 1 && h[0].uid == 1000 && h[0].state == JOB_COMPLETED && h[0].ended == 30);
	assert_true(h[0].cpu_guests == 0 && h[0].mem_guests == 0);
	store_history_free(h, n);

	/* a job of 3 guests: two reported, one not (its node was down) */
	assert_int_equal(store_job_add(s, 0, "three", "{\"guests\":3}", 40, &id, &err), 0);
	j = (struct job_row){ .id = id, .state = JOB_COMPLETED, .started = 41, .ended = 50, .exit_status = 0 };
	assert_int_equal(store_job_update(s, &j, &err), 0);
	assert_int_equal(store_usage_put(s, id, u, 3, &err), 0);
	u[0].cpu_usec = 150;    /* a report again: the last one counts */
	assert_int_equal(store_usage_put(s, id, u, 1, &err), 0);
	assert_int_equal(store_history(s, 0, 0, INT64_MAX, 10, &h, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(h[0].id, id);
	assert_int_equal(h[0].cpu_guests, 2);
	assert_int_equal(h[0].cpu_usec, 350);
	assert_int_equal(h[0].mem_guests, 2);
	assert_int_equal(h[0].mem_peak, 30);
	store_history_free(h, n);
	/* since, below and limit */
	assert_int_equal(store_history(s, -1, 31, INT64_MAX, 10, &h, &n, &err), 0);
	assert_true(n == 1 && h[0].id == id);
	store_history_free(h, n);
	assert_int_equal(store_history(s, -1, 0, id, 10, &h, &n, &err), 0);
	assert_true(n == 1 && h[0].id == 1);
	store_history_free(h, n);
	assert_int_equal(store_history(s, -1, 0, INT64_MAX, 1, &h, &n, &err), 0);
	assert_true(n == 1 && h[0].id == id);
	store_history_free(h, n);
	store_close(s);

	assert_int_equal(sqlite3_open(old, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "4");
	sqlite3_finalize(st);
	sqlite3_close(db);
	unlink(old);
}

static void unusable_path_is_named(void **state)
{
	struct store *s;
	struct verr err;

	(void)state;
	assert_int_equal(store_open(&s, "/nonexistent/dir/state.db", &err), -1);
	assert_non_null(strstr(err.msg, "/nonexistent/dir/state.db"));
}

/* Ended jobs: those that ended since a time, or still owe a teardown,
 * come with the jobs that have not ended; the newest ended ones of a uid
 * come by themselves (what `vhpc queue --all` shows of jobs that left
 * vhpc-ctld's memory). */
static void ended_jobs_by_time_and_uid(void **state)
{
	char p2[600];
	struct store *s;
	struct verr err;
	struct job_row j = { 0 }, *v;
	size_t n;
	int64_t id[6];

	(void)state;
	snprintf(p2, sizeof(p2), "%s/ended.db", dir);
	assert_int_equal(store_open(&s, p2, &err), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(store_job_add(s, i % 2 ? 1000 : 1001, "e", "{}", 1, &id[i], &err), 0);
		if (i == 5)
			break;   /* the last one is still queued */
		j.id = id[i];
		j.state = JOB_COMPLETED;
		j.ended = 100 + i;
		j.cleanup_json = i == 0 ? "[\"n1\"]" : "[]";
		assert_int_equal(store_job_update(s, &j, &err), 0);
	}
	assert_int_equal(store_jobs_list(s, 103, &v, &n, &err), 0);
	assert_int_equal(n, 4);   /* 0 owes a stop, 3 and 4 ended at 103.., 5 is queued */
	assert_int_equal(v[0].id, id[0]);
	assert_int_equal(v[1].id, id[3]);
	assert_int_equal(v[2].id, id[4]);
	assert_int_equal(v[3].id, id[5]);
	store_job_rows_free(v, n);
	assert_int_equal(store_jobs_ended(s, 1000, INT64_MAX, 1, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].id, id[3]);
	store_job_rows_free(v, n);
	assert_int_equal(store_jobs_ended(s, -1, INT64_MAX, 10, &v, &n, &err), 0);
	assert_int_equal(n, 5);
	assert_int_equal(v[0].id, id[0]);
	assert_int_equal(v[4].id, id[4]);
	store_job_rows_free(v, n);
	store_close(s);
}

/* SQLite answers PRAGMA journal_mode=WAL with the mode it kept; a VFS
 * without shared memory (unix-dotfile, named through an SQLite URI) keeps
 * "delete", and the store is refused rather than run without WAL. */
static void journal_mode_not_wal_is_refused(void **state)
{
	char uri[700];
	struct store *s;
	struct verr err;

	(void)state;
	snprintf(uri, sizeof(uri), "file:%s/dotfile.db?vfs=unix-dotfile", dir);
	assert_int_equal(store_open(&s, uri, &err), -1);
	assert_non_null(strstr(err.msg, "kept the journal mode 'delete' instead of WAL"));
	assert_non_null(strstr(err.msg, uri));
}

/* Overwrites page `page` (1-based, 4096 bytes) of the file from byte 8. */
static void scribble(const char *file, int page)
{
	char junk[512];
	int fd = open(file, O_WRONLY);

	assert_true(fd >= 0);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)(page - 1) * 4096 + 8), sizeof(junk));
	close(fd);
}

/* A damaged file is refused at open, naming it and what the check found,
 * even where the damage is in a page no start-up query reads (the
 * AUTOINCREMENT counter: the first submit would be the first to fail). */
static void damaged_store_is_refused(void **state)
{
	char p2[600];
	struct store *s;
	struct verr err;
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t id;
	int page;

	(void)state;
	snprintf(p2, sizeof(p2), "%s/damaged.db", dir);
	assert_int_equal(store_open(&s, p2, &err), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(store_job_add(s, 0, "d", "{}", 1, &id, &err), 0);
	store_close(s);
	assert_int_equal(sqlite3_open(p2, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name='sqlite_sequence'",
					    -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	page = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	scribble(p2, page);
	assert_int_equal(store_open(&s, p2, &err), -1);
	assert_non_null(strstr(err.msg, "is damaged ("));
	assert_non_null(strstr(err.msg, p2));
	assert_null(strchr(err.msg, '\n'));
	/* not a database at all */
	scribble(p2, 1);
	assert_int_equal(store_open(&s, p2, &err), -1);
	assert_non_null(strstr(err.msg, "is damaged (file is not a database)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(jobs_round_trip),
		cmocka_unit_test(committed_jobs_survive_sigkill),
		cmocka_unit_test(nodes_upsert),
		cmocka_unit_test(cleanup_and_attempts_round_trip),
		cmocka_unit_test(schema_1_is_migrated),
		cmocka_unit_test(schema_2_is_migrated_and_usage_sums),
		cmocka_unit_test(schema_3_is_migrated_and_checkpoints),
		cmocka_unit_test(unusable_path_is_named),
		cmocka_unit_test(ended_jobs_by_time_and_uid),
		cmocka_unit_test(journal_mode_not_wal_is_refused),
		cmocka_unit_test(damaged_store_is_refused),
	};
	return cmocka_run_group_tests_name("store", tests, setup, teardown);
}
