/* getopt_long's arrays and --help's option lines, made from option rows
 * (struct opt, lib/jobopts.h), so a command's options are written once. */
#ifndef VHPC_SCHED_OPTGEN_H
#define VHPC_SCHED_OPTGEN_H

#include <getopt.h>
#include <stdio.h>
#include "lib/jobopts.h"

#define OPTGEN_MAX 48

/* The rows one command takes, in its --help order. */
struct optset {
	const struct opt *v[OPTGEN_MAX];
	size_t n;
};

/* Adds a row; the set is a fixed array sized for the largest command. */
void optset_add(struct optset *s, const struct opt *o);
/* The job rows a front-end (JO_RUN, JO_BENCH, JO_SLURM) offers. */
void optset_jobs(struct optset *s, unsigned front);
/* A command's rows, in its order, into rows (n of them) and s: a row of
 * words with a job option's id that front offers is that option
 * (lib/jobopts.c) with these words, for a command whose defaults differ. */
void optset_words(struct optset *s, struct opt *rows, const struct opt *words, size_t n, unsigned front);
/* longs: at least s->n + 1 entries, ending with a zeroed one; shorts:
 * start ("+:" or ":"), then each letter, with ':' when it takes a value. */
void optset_getopt(const struct optset *s, const char *start, struct option *longs,
		   char *shorts, size_t len);
/* "  -N, --guests N   help..." lines, the help starting at column col. */
void optset_help(const struct optset *s, int col, FILE *f);
/* How errors name an option: "-N" for one with a letter, else "--NAME". */
const char *opt_spelling(const struct opt *o, char *buf, size_t len);

#endif
