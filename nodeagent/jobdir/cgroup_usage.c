/*
 * What a guest used, read from its cgroups before they are removed.  CPU
 * time: cgroup2's cpu.stat usage_usec, which every cgroup2 cgroup has with
 * or without the cpu controller (so also the "unified" mount of a hybrid
 * host), else cgroup v1's cpuacct.usage.  Memory: cgroup2's memory.peak
 * (Linux 5.19 on; the memory controller enabled there, as on a pure
 * cgroup2 host such as Debian 12's), else v1's memory.max_usage_in_bytes.
 * A container guest's cgroup holds every process of the guest; a kvm
 * guest's holds its vhpc-hv (the vCPU threads and the device model) and
 * its virtiofsd daemons.
 */
#include "lib/err.h"
#include "nodeagent/jobdir/jobdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A cgroup file, whole (they are small); NULL when there is none.  The
 * guest's user may own files of its delegated cgroup: never a link. */
static char *read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	size_t got = 0;
	ssize_t r;

	if (fd < 0)
		return NULL;
	while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return NULL;
		}
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	return buf;
}

/* A decimal count at s, up to a newline or the end; -1 if it is not one. */
static int64_t count_at(const char *s)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || (*end && *end != '\n') || v > INT64_MAX)
		return -1;
	return (int64_t)v;
}

/* The value of line "key N" in a flat-keyed file, or -1. */
static int64_t keyed(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return count_at(p + kl + 1);
	return -1;
}

/* The first hierarchy's answer for <mnt>/<rel>/<file>: a keyed line when
 * key is given, else the file's one number. */
static int64_t first(char **mnts, int n, const char *rel, const char *file, const char *key)
{
	char path[PATH_MAX], buf[4096];

	for (int i = 0; i < n; i++) {
		int64_t v;

		snprintf(path, sizeof(path), "%s/%s/%s", mnts[i], rel, file);
		if (!read_small(path, buf, sizeof(buf)))
			continue;
		if ((v = key ? keyed(buf, key) : count_at(buf)) >= 0)
			return v;
	}
	return -1;
}

void na_cgroup_usage_in(char **mnts, int n, const char *rel, int64_t *cpu_usec, int64_t *mem_peak)
{
	int64_t ns;

	*cpu_usec = *mem_peak = -1;
	if (!rel[0] || rel[0] == '/' || strstr(rel, ".."))
		return;
	if ((*cpu_usec = first(mnts, n, rel, "cpu.stat", "usage_usec")) < 0 &&
	    (ns = first(mnts, n, rel, "cpuacct.usage", NULL)) >= 0)
		*cpu_usec = ns / 1000;
	if ((*mem_peak = first(mnts, n, rel, "memory.peak", NULL)) < 0)
		*mem_peak = first(mnts, n, rel, "memory.max_usage_in_bytes", NULL);
}

void na_cgroup_usage(const char *rel, int64_t *cpu_usec, int64_t *mem_peak)
{
	char **mnts;
	int n;
	struct verr e;

	*cpu_usec = *mem_peak = -1;
	if (na_cgroup_mounts(&mnts, &n, &e) < 0)
		return;
	na_cgroup_usage_in(mnts, n, rel, cpu_usec, mem_peak);
	na_cgroup_mounts_free(mnts, n);
}
