/*
 * What the store's files share (store.c: jobs and nodes; store_usage.c:
 * what jobs used, and the history of ended jobs): the database handle and
 * how SQLite's errors become the store's.  Private to scheduler/ctld/store*.c.
 */
#ifndef VHPC_SCHED_STORE_DB_H
#define VHPC_SCHED_STORE_DB_H

#include <sqlite3.h>
#include "lib/err.h"

struct store {
	sqlite3 *db;
};

/* Sets err from the handle's last error; STORE_FULL for a full disk, else -1. */
int store_db_error(struct store *s, struct verr *err, const char *what);

#endif
