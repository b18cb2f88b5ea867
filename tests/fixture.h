/*
 * What C tests share: the temporary folder a test group works in
 * (cmocka setup and teardown call these), linked into every unit test.
 */
#ifndef VHPC_TESTS_FIXTURE_H
#define VHPC_TESTS_FIXTURE_H

#include <stddef.h>

/* A new empty folder /tmp/vhpc-TAG-XXXXXX, its path into dir (len bytes);
 * 0, or -1 when it cannot be made or its name does not fit. */
int fx_tmpdir(char *dir, size_t len, const char *tag);
/* Removes dir and everything in it; 0 or -1. */
int fx_rmdir(const char *dir);

#endif
