#include "vhpc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int read_file(const char *path, char **buf, size_t *len, size_t max,
	      struct verr *err)
{
	size_t cap = max < 4096 ? max : 4096, n = 0;
	char *b;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	b = malloc(cap + 1);
	if (!b) {
		close(fd);
		return verr_set(err, "out of memory reading %s", path);
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap >= max) {
				char extra;
				ssize_t x;

				while ((x = read(fd, &extra, 1)) < 0 && errno == EINTR)
					;
				if (x == 0)
					break;
				free(b);
				close(fd);
				return verr_set(err, "%s is larger than %zu bytes", path, max);
			}
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				close(fd);
				return verr_set(err, "out of memory reading %s", path);
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			verr_errno(err, "cannot read %s", path);
			free(b);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += r;
	}
	close(fd);
	b[n] = 0;
	*buf = b;
	if (len)
		*len = n;
	return 0;
}

int write_file(const char *path, const void *buf, size_t len, mode_t mode,
	       struct verr *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0)
		return verr_errno(err, "cannot create %s", path);
	if (write_full(fd, buf, len) < 0) {
		verr_errno(err, "cannot write %s", path);
		close(fd);
		return -1;
	}
	if (close(fd) < 0)
		return verr_errno(err, "cannot write %s", path);
	return 0;
}

int write_file_atomic(const char *path, const void *buf, size_t len,
		      mode_t mode, struct verr *err)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return verr_set(err, "path too long: %s", path);
	if (write_file(tmp, buf, len, mode, err) < 0)
		return -1;
	if (rename(tmp, path) < 0) {
		verr_errno(err, "cannot rename %s to %s", tmp, path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int mkdir_p(const char *path, mode_t mode, struct verr *err)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return verr_set(err, "bad directory path '%s'", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == 0) {
			char c = *p;

			*p = 0;
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return verr_errno(err, "cannot create directory %s", buf);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int rm_rf_at(int dirfd, const char *name, dev_t dev, int depth,
		    struct verr *err)
{
	struct stat st;
	DIR *d;
	int fd;

	if (depth > 64)
		return verr_set(err, "directory tree too deep at %s", name);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return verr_errno(err, "cannot remove %s", name);
		return 0;
	}
	if (st.st_dev != dev)
		return verr_set(err, "%s is a mount point; not removing across it", name);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "cannot open %s", name);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return verr_errno(err, "cannot read %s", name);
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (rm_rf_at(fd, e->d_name, dev, depth + 1, err) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return verr_errno(err, "cannot remove directory %s", name);
	return 0;
}

int rm_rf(const char *path, struct verr *err)
{
	struct stat st;

	if (!path || !*path || !strcmp(path, "/"))
		return verr_set(err, "refusing to remove '%s'", path ? path : "");
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : verr_errno(err, "cannot stat %s", path);
	if (rm_rf_at(AT_FDCWD, path, st.st_dev, 0, err) < 0)
		return verr_wrap(err, "removing %s", path);
	return 0;
}

int write_str(const char *path, const char *s, struct verr *err)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(s);
	ssize_t r;

	if (fd < 0)
		return verr_errno(err, "cannot open %s", path);
	r = write(fd, s, len);
	if (r < 0 || (size_t)r != len) {
		verr_errno(err, "cannot write '%s' to %s", s, path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int parse_ll(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -1;
	}
	if (shift) {
		if (!strcmp(end, "i") || !strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	} else if (!strcmp(end, "B")) {
		end++;
	}
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.*f %s", v == (long long)v ? 0 : 1, v, units[u]);
	return buf;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int cpulist_parse(const char *s, int *ids, size_t max, size_t *n)
{
	size_t cnt = 0;
	const char *p = s;

	while (*p == ' ' || *p == '\n')
		p++;
	while (*p && *p != '\n') {
		char *end;
		long a, b;

		errno = 0;
		a = strtol(p, &end, 10);
		if (end == p || errno || a < 0 || a > 65535)
			return -1;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtol(p, &end, 10);
			if (end == p || errno || b < a || b > 65535)
				return -1;
			p = end;
		}
		for (long i = a; i <= b; i++) {
			if (cnt == max)
				return -1;
			ids[cnt++] = (int)i;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -1;
	}
	qsort(ids, cnt, sizeof(*ids), cmp_int);
	size_t u = 0;
	for (size_t i = 0; i < cnt; i++)
		if (u == 0 || ids[u - 1] != ids[i])
			ids[u++] = ids[i];
	*n = u;
	return 0;
}

const char *cpulist_format(const int *ids, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int w;

		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		if (j == i)
			w = snprintf(buf + off, len - off, "%s%d", off ? "," : "", ids[i]);
		else
			w = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", ids[i], ids[j]);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += w;
		i = j + 1;
	}
	return buf;
}

double now_s(void)
{
	return now_ns() / 1e9;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

const char *self_dir(void)
{
	static char dir[PATH_MAX];

	if (!dir[0]) {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
		char *slash;

		if (n <= 0) {
			strcpy(dir, ".");
			return dir;
		}
		dir[n] = 0;
		slash = strrchr(dir, '/');
		if (slash && slash != dir)
			*slash = 0;
	}
	return dir;
}

const char *vhpc_config_dir(void)
{
	static char dir[PATH_MAX];
	const char *env = getenv("VHPC_CONFIG_DIR");
	struct stat st;

	if (env && *env)
		return env;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/../../configs", self_dir());
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			snprintf(dir, sizeof(dir), "/etc/vhpc");
	}
	return dir;
}

const char *vhpc_state_dir(void)
{
	const char *env = getenv("VHPC_STATE_DIR");

	return env && *env ? env : "/var/lib/vhpc";
}

const char *vhpc_run_dir(void)
{
	const char *env = getenv("VHPC_RUN_DIR");

	return env && *env ? env : "/run/vhpc";
}

const char *vhpc_prog(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", self_dir(), name);
	if (access(buf, X_OK) == 0)
		return buf;
	snprintf(buf, len, "%s", name);
	return buf;
}

void random_bytes(void *buf, size_t len)
{
	/* sodium_init is idempotent and thread-safe; randombytes needs it. */
	if (sodium_init() < 0)
		abort();
	randombytes_buf(buf, len);
}

void hex_encode(const void *buf, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * len] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_decode(const char *hex, void *buf, size_t len)
{
	uint8_t *b = buf;

	if (strlen(hex) != 2 * len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int read_full(int fd, void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = read(fd, (char *)buf + off, len - off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			if (off == 0)
				return 1;
			errno = EPIPE;
			return -1;
		}
		off += r;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = write(fd, (const char *)buf + off, len - off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += r;
	}
	return 0;
}

int send_full(int fd, const void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);

		if (r < 0 && errno == ENOTSOCK)
			return write_full(fd, (const char *)buf + off, len - off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += r;
	}
	return 0;
}

int read_full_deadline(int fd, void *buf, size_t len, uint64_t deadline, bool *eof_at_start)
{
	size_t off = 0;

	*eof_at_start = false;
	while (off < len) {
		ssize_t r;

		if (deadline) {
			uint64_t now = now_ns();
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int pr;

			if (now >= deadline) {
				errno = ETIMEDOUT;
				return -1;
			}
			pr = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr < 0)
				return -1;
			if (pr == 0) {
				errno = ETIMEDOUT;
				return -1;
			}
		}
		r = read(fd, (char *)buf + off, len - off);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -1;
		}
		if (r == 0) {
			*eof_at_start = off == 0;
			errno = EPIPE;
			return -1;
		}
		off += r;
	}
	return 0;
}

int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;

	for (;;) {
		int left = -1, r;

		if (deadline) {
			uint64_t now = now_ns();

			if (now >= deadline)
				return 1;
			left = (int)((deadline - now + 999999) / 1000000);
		}
		r = poll(&p, 1, left);
		if (r > 0)
			return 0;
		if (r == 0)
			return 1;
		if (errno != EINTR)
			return -1;
	}
}

bool ident_ok(const char *s, size_t max)
{
	size_t n;

	if (!s || !*s)
		return false;
	n = strlen(s);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

int ipv4net_parse(const char *s, bool allow_host, struct ipv4net *out)
{
	unsigned a, b, c, d, p;
	char tail;

	if (!s || sscanf(s, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &p, &tail) != 5)
		return -1;
	if (a > 255 || b > 255 || c > 255 || d > 255 || p > 32)
		return -1;
	/* sscanf accepts "+1" and " 1"; a canonical form must round-trip. */
	{
		char canon[32];

		snprintf(canon, sizeof(canon), "%u.%u.%u.%u/%u", a, b, c, d, p);
		if (strcmp(canon, s))
			return -1;
	}
	out->addr = a << 24 | b << 16 | c << 8 | d;
	out->prefix = (int)p;
	if (!allow_host && p < 32 && (out->addr & (p ? ~0u >> p : ~0u)))
		return -1;
	return 0;
}

const char *ipv4_format(uint32_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255,
		 (addr >> 8) & 255, addr & 255);
	return buf;
}
