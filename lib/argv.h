/*
 * An argv built one printf-formatted word at a time, for the programs
 * vhpc starts (vhpc-hv's command line, mpirun's): NULL-terminated after
 * every word, and a failed allocation remembered, so that a builder checks
 * once at the end.
 */
#ifndef VHPC_LIB_ARGV_H
#define VHPC_LIB_ARGV_H

#include <stdbool.h>
#include <stddef.h>

struct argv_b {
	char **v;
	size_t n, cap;
	bool oom;
};

void argv_add(struct argv_b *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The argv (the caller's: argv_free), or NULL with everything freed when
 * a word could not be added. */
char **argv_finish(struct argv_b *a);
void argv_free(char **argv);

#endif
