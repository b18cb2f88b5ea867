/*
 * --metrics' HTTP server: GET /metrics, through libmicrohttpd (Debian's
 * libmicrohttpd12) rather than HTTP parsing of our own.  The endpoint is
 * outside munge and unauthenticated unless --metrics-token is given, so
 * whoever reaches it is assumed hostile:
 *
 *  - one thread of libmicrohttpd's, polling (epoll): a slow reader or a
 *    half-sent request holds a connection slot, never a thread or a lock;
 *  - at most METRICS_CONNS connections, METRICS_CONNS_PER_IP from one
 *    address; each is closed after METRICS_IDLE_S idle seconds, and a
 *    request's line and headers must fit in METRICS_REQ_MEM bytes (else
 *    431 and the connection closes);
 *  - the page is made at most once a METRICS_CACHE_MS: a flood of
 *    scrapes takes the controller's lock once a second, and the copy it
 *    writes out is the server's own (ctld_metrics_text: a snapshot
 *    first, the text after, the lock held for neither the formatting nor
 *    any write).
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "ctld.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define METRICS_CONNS        32
#define METRICS_CONNS_PER_IP 8
#define METRICS_IDLE_S       10
#define METRICS_REQ_MEM      (16u * 1024)
#define METRICS_CACHE_MS     1000
#define TOKEN_MIN            16
#define TOKEN_MAX            1024

struct http {
	struct ctld *ctl;
	bool have_token;
	unsigned char token_hash[crypto_generichash_BYTES];
	/* the page last made (only the server's one thread touches these) */
	char *page;
	size_t len;
	int64_t made_ms;
};

/* The token file: the admin's, read once as root.  It must be a regular
 * file no one but its owner reads (the token is the only secret here). */
static int read_token(struct http *h, const char *path, struct verr *err)
{
	char buf[TOKEN_MAX + 2];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return verr_errno(err, "--metrics-token %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return verr_set(err, "--metrics-token %s: not a regular file", path);
	}
	if (st.st_mode & 077) {
		close(fd);
		return verr_set(err, "--metrics-token %s: group or others may read it (mode %04o): chmod 600 it",
				path, (unsigned)(st.st_mode & 07777));
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return verr_errno(err, "--metrics-token %s", path);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n < TOKEN_MIN || n > TOKEN_MAX)
		return verr_set(err, "--metrics-token %s: expected one line of %d to %d characters", path, TOKEN_MIN,
				TOKEN_MAX);
	/* RFC 6750's token68 characters: what a scraper can send as it is. */
	for (ssize_t i = 0; i < n; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=", buf[i]))
			return verr_set(err, "--metrics-token %s: character %zd is not one a bearer token may hold "
					"(letters, digits, -._~+/=)", path, i + 1);
	crypto_generichash(h->token_hash, sizeof(h->token_hash), (const unsigned char *)buf, (size_t)n, NULL, 0);
	sodium_memzero(buf, sizeof(buf));
	h->have_token = true;
	return 0;
}

/* Whether the request carries the token: compared as hashes, in constant
 * time, so neither its bytes nor its length leak through timing. */
static bool authorized(const struct http *h, struct MHD_Connection *c)
{
	unsigned char got[crypto_generichash_BYTES];
	const char *v;

	if (!h->have_token)
		return true;
	v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!v || strncasecmp(v, "Bearer ", 7))
		return false;
	for (v += 7; *v == ' '; v++)
		;
	crypto_generichash(got, sizeof(got), (const unsigned char *)v, strlen(v), NULL, 0);
	return sodium_memcmp(got, h->token_hash, sizeof(got)) == 0;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *text, const char *hname,
				 const char *hval)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (hname)
		MHD_add_response_header(r, hname, hval);
	rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

/* The page, made again when the last is older than METRICS_CACHE_MS. */
static const char *page(struct http *h, size_t *len)
{
	int64_t now = (int64_t)(now_ns() / 1000000);
	char *p;

	if (!h->page || now - h->made_ms >= METRICS_CACHE_MS) {
		if (!(p = ctld_metrics_text(h->ctl, len)))
			return NULL;
		free(h->page);
		h->page = p;
		h->len = *len;
		h->made_ms = now;
	}
	*len = h->len;
	return h->page;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_len, void **con)
{
	struct http *h = cls;
	struct MHD_Response *r;
	enum MHD_Result rc;
	const char *text;
	size_t len;

	(void)version, (void)upload, (void)con;
	/* Answered on the first call, at the headers: a body is never read. */
	*upload_len = 0;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n",
				 MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (strcmp(url, "/metrics"))
		return send_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n", NULL, NULL);
	if (!authorized(h, c))
		return send_text(c, MHD_HTTP_UNAUTHORIZED,
				 "this controller's metrics need its token (Authorization: Bearer TOKEN)\n",
				 MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"vhpc-ctld\"");
	if (!(text = page(h, &len)))
		return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n", NULL, NULL);
	/* The page may be made again while this one is still being written:
	 * the response has a copy of its own. */
	if (!(r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY)))
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	rc = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return rc;
}

int ctld_metrics_http_start(struct ctld *ctl, int fd, const char *token_file, struct verr *err)
{
	struct http *h = calloc(1, sizeof(*h));
	struct MHD_Daemon *d;

	if (!h)
		return verr_set(err, "out of memory");
	h->ctl = ctl;
	if (sodium_init() < 0) {
		free(h);
		return verr_set(err, "--metrics: libsodium does not initialize");
	}
	if (token_file && read_token(h, token_file, err) < 0) {
		free(h);
		return -1;
	}
	/* The server lives as long as the process: h and d are never freed. */
	d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, answer, h,
			     MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_CONNS,
			     MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)METRICS_CONNS_PER_IP,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_IDLE_S,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_REQ_MEM,
			     MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
			     MHD_OPTION_END);
	if (!d) {
		free(h);
		return verr_set(err, "--metrics: the HTTP server does not start (libmicrohttpd)");
	}
	return 0;
}
