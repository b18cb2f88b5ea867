/* Mount table walking: cgroup hierarchies, and what is mounted under a
 * job dir (read-only rootfs binds) that rm_rf must not descend into. */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "nodeagent/jobdir/jobdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

/* mountinfo escapes blanks and backslashes as \ooo. */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; ) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

int na_each_mount(int (*fn)(const char *mnt, const char *fstype, void *arg),
		      void *arg, struct verr *err)
{
	char *buf, *line, *save = NULL;
	size_t len;

	if (read_file("/proc/self/mountinfo", &buf, &len, 16u << 20, err) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[12] = { 0 }, *s2 = NULL, *sep;
		int k = 0;

		for (char *tok = strtok_r(line, " ", &s2); tok && k < 12; tok = strtok_r(NULL, " ", &s2))
			f[k++] = tok;
		if (k < 7)
			continue;
		/* optional fields end at "-", then fstype */
		sep = NULL;
		for (int i = 6; i < k; i++)
			if (!strcmp(f[i], "-")) {
				sep = i + 1 < k ? f[i + 1] : NULL;
				break;
			}
		if (!sep)
			continue;
		unescape(f[4]);
		if (fn(f[4], sep, arg) < 0)
			break;
	}
	free(buf);
	return 0;
}

struct below {
	const char *dir;
	size_t len;
	char **v;
	int n;
};

static int add_below(const char *mnt, const char *fstype, void *arg)
{
	struct below *b = arg;
	char **nv;

	(void)fstype;
	if (strncmp(mnt, b->dir, b->len) || (mnt[b->len] != '/' && mnt[b->len]))
		return 0;
	nv = realloc(b->v, sizeof(char *) * (b->n + 1));
	if (!nv)
		return -1;
	b->v = nv;
	if (!(b->v[b->n] = strdup(mnt)))
		return -1;
	b->n++;
	return 0;
}

static int by_len_desc(const void *a, const void *b)
{
	size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);

	return (x < y) - (x > y);
}

int na_umount_below(const char *dir, int *removed, struct verr *err)
{
	struct below b = { .dir = dir, .len = strlen(dir) };
	int rc = 0;

	if (b.len < 2)
		return verr_set(err, "refusing to unmount below '%s'", dir);
	if (na_each_mount(add_below, &b, err) < 0)
		return -1;
	if (b.n > 1)
		qsort(b.v, b.n, sizeof(char *), by_len_desc);
	for (int i = 0; i < b.n; i++) {
		if (umount2(b.v[i], MNT_DETACH) == 0) {
			(*removed)++;
			log_debug("unmounted %s", b.v[i]);
		} else if (errno != EINVAL && errno != ENOENT && rc == 0) {
			rc = verr_errno(err, "unmount %s", b.v[i]);
		}
		free(b.v[i]);
	}
	free(b.v);
	return rc;
}
