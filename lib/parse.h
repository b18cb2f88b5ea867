/*
 * Parsing and formatting of sizes, numbers, cpulists and identifiers.
 */
#ifndef VHPC_LIB_PARSE_H
#define VHPC_LIB_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "4096", "64K", "512M", "2G", "1GiB", "1T" -> bytes.  Rejects overflow. */
int parse_size(const char *s, uint64_t *out);
/* Decimal integer within [min,max], whole string. */
int parse_ll(const char *s, long long min, long long max, long long *out);
/* Formats bytes as "1.5 GiB". */
const char *fmt_size(uint64_t bytes, char *buf, size_t len);

/* Linux cpulist "0-3,8,10-11" <-> array of ids (sorted, unique). */
int cpulist_parse(const char *s, int *ids, size_t max, size_t *n);
const char *cpulist_format(const int *ids, size_t n, char *buf, size_t len);

/* Safe identifier check: [A-Za-z0-9][A-Za-z0-9._-]{0,max-1}. */
bool ident_ok(const char *s, size_t max);

#endif
