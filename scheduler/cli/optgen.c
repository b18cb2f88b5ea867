/* Option rows to getopt_long's arrays and to --help (optgen.h). */
#include "optgen.h"

#include <stdlib.h>
#include <string.h>

void optset_add(struct optset *s, const struct opt *o)
{
	/* A fixed size: the tables are the program's own, never input. */
	if (s->n == OPTGEN_MAX)
		abort();
	s->v[s->n++] = o;
}

void optset_jobs(struct optset *s, unsigned front)
{
	for (const struct job_opt *r = job_opts; r->o.id; r++)
		if (r->fronts & front)
			optset_add(s, &r->o);
}

void optset_words(struct optset *s, struct opt *rows, const struct opt *words, size_t n, unsigned front)
{
	for (size_t i = 0; i < n; i++) {
		const struct job_opt *r = job_opt_by_id(words[i].id);

		rows[i] = words[i];
		if (r && (r->fronts & front)) {
			rows[i] = r->o;
			rows[i].help = words[i].help;
		}
		optset_add(s, &rows[i]);
	}
}

void optset_getopt(const struct optset *s, const char *start, struct option *longs,
		   char *shorts, size_t len)
{
	size_t nl = 0, ns = strlen(start);

	memcpy(shorts, start, ns + 1);
	for (size_t i = 0; i < s->n; i++) {
		const struct opt *o = s->v[i];

		if (o->name)
			longs[nl++] = (struct option){ o->name, o->arg ? required_argument : no_argument,
						       NULL, o->id };
		if (o->letter && ns + 3 <= len) {
			shorts[ns++] = o->letter;
			if (o->arg)
				shorts[ns++] = ':';
			shorts[ns] = 0;
		}
	}
	longs[nl] = (struct option){ 0 };
}

void optset_help(const struct optset *s, int col, FILE *f)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct opt *o = s->v[i];
		const char *h = o->help;
		char left[96];
		int n;

		if (o->letter && o->name)
			n = snprintf(left, sizeof(left), "  -%c, --%s", o->letter, o->name);
		else if (o->letter)
			n = snprintf(left, sizeof(left), "  -%c", o->letter);
		else
			n = snprintf(left, sizeof(left), "      --%s", o->name);
		if (o->arg)
			n += snprintf(left + n, sizeof(left) - n, " %s", o->arg);
		/* A long left side pushes its help along rather than onto a line of its own. */
		fprintf(f, "%s%*s", left, n + 2 <= col ? col - n : 2, "");
		for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
			fprintf(f, "%.*s\n%*s", (int)(nl - h), h, col, "");
		fprintf(f, "%s\n", h);
	}
}

const char *opt_spelling(const struct opt *o, char *buf, size_t len)
{
	if (o->letter)
		snprintf(buf, len, "-%c", o->letter);
	else
		snprintf(buf, len, "--%s", o->name);
	return buf;
}
