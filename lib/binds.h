/*
 * Host paths shared into a job's guests: the cluster's site paths, the
 * user's home and submission directory, and the job's own --bind SRC[:DST[:ro]].
 * Pure: the words and rules here; whether a path exists, and whether the
 * job's user may read it, is each node's to check (nodeagent).
 */
#ifndef VHPC_LIB_BINDS_H
#define VHPC_LIB_BINDS_H

#include <stdbool.h>
#include <stddef.h>

#define BIND_MAX 32
#define BIND_PATH_MAX 256

struct bind {
	char src[BIND_PATH_MAX];   /* on the host */
	char dst[BIND_PATH_MAX];   /* in the guest */
	bool ro;
};

struct bind_list {
	struct bind v[BIND_MAX];
	int n;
};

/* A path a bind may name: absolute, at most BIND_PATH_MAX - 1 bytes,
 * without "//", "." or ".." components or a trailing "/", and of the
 * characters A-Z a-z 0-9 and . _ - + @ % = ~ / (virtiofsd's -o options and
 * overlayfs split at ',' and ':'; the guest's init reads words).  what names it in the error. */
int bind_path_check(const char *what, const char *p, char *why, size_t len);
/* An image directory a guest needs, that no bind may cover or replace:
 * returns it, or NULL when dst may be a bind's destination. */
const char *bind_dst_protected(const char *dst);
/* Whether p is dir or below it ("/" holds everything). */
bool bind_path_under(const char *p, const char *dir);
/* "SRC", "SRC:DST", "SRC:ro", "SRC:DST:ro" (or :rw); 0, or -1 with why. */
int bind_parse(const char *spec, struct bind *out, char *why, size_t len);

/* What a job's guests get, from the cluster file and the job. */
struct bind_req {
	const char *const *site;    /* cluster file "binds": SRC[:DST][:ro] each */
	size_t nsite;
	const char *const *allow;   /* cluster file "bind_allow": where a job's own
	                             * binds may come from; none = anywhere */
	size_t nallow;
	const char *const *user;    /* the job's --bind / binds: */
	size_t nuser;
	const char *home;           /* the user's home, when it is shared; or NULL */
	const char *workdir;        /* where the job was submitted; or NULL */
};

/* The binds, parents before what they hold, and the directory the job runs
 * in (wdir: the workdir, or the home, or /tmp when neither can be shared;
 * note then says why).  Errors name the bind and the rule. */
int bind_plan(const struct bind_req *r, struct bind_list *out, char *wdir, size_t wlen,
	      char *note, size_t nlen, char *why, size_t len);
/* Where guest path p comes from on the host, through out; NULL when no
 * bind holds it. */
const struct bind *bind_holding(const struct bind_list *l, const char *p);

#endif
