#include "lib/argv.h"
#include "lib/grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void argv_add(struct argv_b *a, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	if (a->oom)
		return;
	if (grow(&a->v, &a->cap, a->n + 2, sizeof(*a->v), 32) < 0) {
		a->oom = true;
		return;
	}
	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (rc < 0) {
		a->oom = true;
		return;
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

char **argv_finish(struct argv_b *a)
{
	if (a->oom) {
		argv_free(a->v);
		a->v = NULL;
	}
	return a->v;
}

void argv_free(char **argv)
{
	for (char **p = argv; p && *p; p++)
		free(*p);
	free(argv);
}
