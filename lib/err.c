#include "lib/err.h"

#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int verr_set(struct verr *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int verr_errno(struct verr *e, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	size_t n;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return -1;
}

int verr_wrap(struct verr *e, const char *fmt, ...)
{
	char prefix[512], old[sizeof(e->msg)];
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	return -1;
}
