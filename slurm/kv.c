/*
 * The "KEY VALUE" files the plugin and vhpc-slurmjob exchange (slurm.h).
 * A line format rather than JSON: the plugin runs inside Slurm's
 * processes and links no library beyond libc, and these files are a few
 * dozen lines that only vhpc writes.  Strict all the same: the opts file
 * carries values the job's user chose.
 */
#include "slurm/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KV_MAX_BYTES (1u << 20)
#define KV_MAX_LINES 4096

int vs_fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

static bool key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n < 1 || n > 31)
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || *k == '_'))
			return false;
	return true;
}

static bool value_ok(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return false;
	return true;
}

int vs_kv_parse(const char *text, size_t len, const char *magic, struct vs_kvfile *out, char *why, size_t wlen)
{
	char *p, *line;
	int lineno = 1;

	memset(out, 0, sizeof(*out));
	if (len > KV_MAX_BYTES)
		return vs_fail(why, wlen, "%zu bytes: more than %u", len, KV_MAX_BYTES);
	if (memchr(text, 0, len))
		return vs_fail(why, wlen, "a NUL byte in the text");
	if (!(out->buf = malloc(len + 1)) || !(out->v = calloc(KV_MAX_LINES, sizeof(*out->v)))) {
		vs_kv_free(out);
		return vs_fail(why, wlen, "out of memory");
	}
	memcpy(out->buf, text, len);
	out->buf[len] = 0;
	p = out->buf;
	line = strsep(&p, "\n");
	if (strcmp(line, magic)) {
		vs_kv_free(out);
		return vs_fail(why, wlen, "line 1: expected '%s'", magic);
	}
	while (p && *p) {
		char *sp;

		line = strsep(&p, "\n");
		lineno++;
		sp = strchr(line, ' ');
		if (!sp || out->n == KV_MAX_LINES) {
			vs_kv_free(out);
			return vs_fail(why, wlen, "line %d: %s", lineno, sp ? "too many lines" : "expected KEY VALUE");
		}
		*sp = 0;
		if (!key_ok(line) || !value_ok(sp + 1)) {
			bool key = key_ok(line);

			vs_kv_free(out);
			return vs_fail(why, wlen, "line %d: bad %s", lineno, key ? "value" : "key");
		}
		out->v[out->n++] = (struct vs_kv){ line, sp + 1 };
	}
	return 0;
}

int vs_file_read(const char *path, char **text, size_t *n, char *why, size_t wlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char *buf = NULL;
	size_t len = 0;
	struct stat st;

	*text = NULL;
	*n = 0;
	if (fd < 0)
		return vs_fail(why, wlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > KV_MAX_BYTES) {
		close(fd);
		return vs_fail(why, wlen, "%s: not a file of at most %u bytes", path, KV_MAX_BYTES);
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return vs_fail(why, wlen, "out of memory");
	}
	while (len < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + len, (size_t)st.st_size - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = 0;
	*text = buf;
	*n = len;
	return 0;
}

int vs_file_write(const char *path, const char *text, const unsigned owner[2], char *why, size_t wlen)
{
	char tmp[PATH_MAX];
	size_t len = strlen(text), done = 0;
	int fd, e;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return vs_fail(why, wlen, "%s: path too long", path);
	/* A leftover of a writer killed mid-way; the folder is root's. */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return vs_fail(why, wlen, "%s: %s", tmp, strerror(errno));
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	e = done < len ? (errno ? errno : EIO) : 0;
	if (!e && owner && fchown(fd, (uid_t)owner[0], (gid_t)owner[1]) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	if (!e && rename(tmp, path) < 0)
		e = errno;
	if (e) {
		unlink(tmp);
		return vs_fail(why, wlen, "%s: %s", path, strerror(e));
	}
	return 0;
}

int vs_kv_load(const char *path, const char *magic, struct vs_kvfile *out, char *why, size_t wlen)
{
	char *text;
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	if (vs_file_read(path, &text, &n, why, wlen) < 0)
		return -1;
	rc = vs_kv_parse(text, n, magic, out, why, wlen);
	free(text);
	return rc < 0 ? vs_fail_in(path, why, wlen) : 0;
}

int vs_fail_in(const char *path, char *why, size_t len)
{
	char m[600];

	snprintf(m, sizeof(m), "%s: %s", path, why);
	snprintf(why, len, "%s", m);
	return -1;
}

const char *vs_kv_get(const struct vs_kvfile *f, const char *key)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].key, key))
			return f->v[i].val;
	return NULL;
}

void vs_kv_free(struct vs_kvfile *f)
{
	free(f->buf);
	free(f->v);
	memset(f, 0, sizeof(*f));
}
