/*
 * Logging: one line per event on stderr, with program name and level.
 */
#ifndef VHPC_LIB_LOG_H
#define VHPC_LIB_LOG_H

#include <stdarg.h>

enum vlog_level { VLOG_ERR = 0, VLOG_WARN, VLOG_INFO, VLOG_DEBUG };

/* Level from $VHPC_LOG (err|warn|info|debug), default info. */
void vlog_init(const char *prog);
void vlog_set_level(enum vlog_level lvl);
enum vlog_level vlog_get_level(void);
void vlog(enum vlog_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vlogv(enum vlog_level lvl, const char *fmt, va_list ap);

#define log_err(...)   vlog(VLOG_ERR, __VA_ARGS__)
#define log_warn(...)  vlog(VLOG_WARN, __VA_ARGS__)
#define log_info(...)  vlog(VLOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (vlog_get_level() >= VLOG_DEBUG) vlog(VLOG_DEBUG, __VA_ARGS__); } while (0)

#endif
