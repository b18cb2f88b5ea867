/*
 * Errors: struct verr carries one human-readable message up the stack, so
 * the place that detects a problem names it and the place that reports it
 * does not have to guess.
 */
#ifndef VHPC_LIB_ERR_H
#define VHPC_LIB_ERR_H


struct verr {
	char msg[1024];
};

/* Sets the message and returns -1 so callers can `return verr_set(...)`. */
int verr_set(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Same, appending ": strerror(errno)". */
int verr_errno(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prefixes an existing message ("context: old message"). */
int verr_wrap(struct verr *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
