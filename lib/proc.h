/*
 * Running a helper program and capturing what it prints.
 */
#ifndef VHPC_LIB_PROC_H
#define VHPC_LIB_PROC_H

#include <signal.h>
#include <stddef.h>
#include "lib/err.h"

/* TERM, INT and HUP (what asks a daemon or a job's holder to stop) into
 * *set, blocked in this thread and the threads it starts after: they are
 * taken with sigwait or sigtimedwait, never in a handler, so a teardown
 * never races a set-up. */
void proc_block_stop_signals(sigset_t *set);

/* Runs argv (PATH lookup, no shell, stdin /dev/null) and captures up to max
 * bytes of stdout into *out (malloc'd, NUL-terminated; out may be NULL).
 * Returns the exit status (err set when non-zero, quoting the program's
 * stderr), or -1 when it could not run, was killed, or timed out. */
int run_capture(const char *const *argv, char **out, size_t *out_len,
		size_t max, int timeout_ms, struct verr *err);

#endif
