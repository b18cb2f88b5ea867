/*
 * lib/wirepipe.h: one thread per direction.  Blocking writes are the
 * backpressure: a reader that stops taking bytes stops that direction,
 * and only that one.
 */
#include "lib/wirepipe.h"
#include "lib/fdio.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(WPIPE_ABYTES == crypto_secretstream_xchacha20poly1305_ABYTES, "secretstream's tag size");
_Static_assert(WPIPE_KEY_LEN == crypto_kdf_KEYBYTES, "the key is a kdf master key");

enum dir_mode { DIR_SEAL, DIR_OPEN, DIR_COPY };

struct dir {
	int in, out;
	enum dir_mode mode;
	uint8_t key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
	int rc;
};

/* Ends both directions: the other thread's blocked read or write returns. */
static void fail(const struct dir *d)
{
	shutdown(d->in, SHUT_RDWR);
	shutdown(d->out, SHUT_RDWR);
}

static int seal_dir(struct dir *d, uint8_t *buf, uint8_t *ct)
{
	crypto_secretstream_xchacha20poly1305_state st;
	uint8_t hdr[crypto_secretstream_xchacha20poly1305_HEADERBYTES];

	crypto_secretstream_xchacha20poly1305_init_push(&st, hdr, d->key);
	if (send_full(d->out, hdr, sizeof(hdr)) < 0)
		return -1;
	for (;;) {
		ssize_t n = read(d->in, buf, WPIPE_CHUNK);
		unsigned long long clen;
		uint8_t tag = n > 0 ? 0 : crypto_secretstream_xchacha20poly1305_TAG_FINAL;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		crypto_secretstream_xchacha20poly1305_push(&st, ct + 4, &clen, buf, (unsigned long long)n, NULL, 0, tag);
		ct[0] = (uint8_t)(clen >> 24);
		ct[1] = (uint8_t)(clen >> 16);
		ct[2] = (uint8_t)(clen >> 8);
		ct[3] = (uint8_t)clen;
		if (send_full(d->out, ct, 4 + (size_t)clen) < 0)
			return -1;
		if (tag)
			return 0;
	}
}

static int open_dir(struct dir *d, uint8_t *buf, uint8_t *ct)
{
	crypto_secretstream_xchacha20poly1305_state st;
	uint8_t hdr[crypto_secretstream_xchacha20poly1305_HEADERBYTES];

	if (read_full(d->in, hdr, sizeof(hdr)) != 0 ||
	    crypto_secretstream_xchacha20poly1305_init_pull(&st, hdr, d->key) != 0)
		return -1;
	for (;;) {
		unsigned long long mlen;
		uint8_t lb[4], tag;
		uint32_t len;

		/* An EOF here is a cut stream: the FINAL message never came. */
		if (read_full(d->in, lb, 4) != 0)
			return -1;
		len = (uint32_t)lb[0] << 24 | (uint32_t)lb[1] << 16 | (uint32_t)lb[2] << 8 | lb[3];
		if (len < WPIPE_ABYTES || len > WPIPE_CHUNK + WPIPE_ABYTES)
			return -1;
		if (read_full(d->in, ct, len) != 0 ||
		    crypto_secretstream_xchacha20poly1305_pull(&st, buf, &mlen, &tag, ct, len, NULL, 0) != 0)
			return -1;
		if (tag == crypto_secretstream_xchacha20poly1305_TAG_FINAL)
			return mlen ? -1 : 0;
		if (tag != 0)
			return -1;
		if (mlen && write_full(d->out, buf, (size_t)mlen) < 0)
			return -1;
	}
}

static int copy_dir(struct dir *d, uint8_t *buf)
{
	for (;;) {
		ssize_t n = read(d->in, buf, WPIPE_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		if (write_full(d->out, buf, (size_t)n) < 0)
			return -1;
	}
}

static void *run_dir(void *arg)
{
	struct dir *d = arg;
	uint8_t *buf = malloc(WPIPE_CHUNK), *ct = malloc(WPIPE_CHUNK + WPIPE_ABYTES + 4);

	if (!buf || !ct)
		d->rc = -1;
	else
		d->rc = d->mode == DIR_SEAL ? seal_dir(d, buf, ct) : d->mode == DIR_OPEN ? open_dir(d, buf, ct)
									    : copy_dir(d, buf);
	free(buf);
	free(ct);
	if (d->rc == 0)
		shutdown(d->out, SHUT_WR);
	else
		fail(d);
	return NULL;
}

static void keepalive(int fd)
{
	int one = 1;

	/* a peer that vanished without a FIN is noticed, eventually */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Runs a in a thread of its own and b in this one. */
static int both(struct dir *a, struct dir *b)
{
	pthread_t th;

	if (pthread_create(&th, NULL, run_dir, a) != 0) {
		fail(a);
		return -1;
	}
	run_dir(b);
	pthread_join(th, NULL);
	return a->rc == 0 && b->rc == 0 ? 0 : -1;
}

int wpipe_relay(int plain_fd, int sealed_fd, const uint8_t key[WPIPE_KEY_LEN], bool initiator)
{
	struct dir up = { .in = plain_fd, .out = sealed_fd, .mode = DIR_SEAL };
	struct dir down = { .in = sealed_fd, .out = plain_fd, .mode = DIR_OPEN };
	int rc;

	if (sodium_init() < 0)
		return -1;
	keepalive(sealed_fd);
	/* Subkey 1 seals what the initiator sends, 2 what it receives. */
	crypto_kdf_derive_from_key(up.key, sizeof(up.key), initiator ? 1 : 2, "vhpcpipe", key);
	crypto_kdf_derive_from_key(down.key, sizeof(down.key), initiator ? 2 : 1, "vhpcpipe", key);
	rc = both(&up, &down);
	sodium_memzero(up.key, sizeof(up.key));
	sodium_memzero(down.key, sizeof(down.key));
	return rc;
}

void wpipe_splice(int a, int b)
{
	struct dir ab = { .in = a, .out = b, .mode = DIR_COPY };
	struct dir ba = { .in = b, .out = a, .mode = DIR_COPY };

	keepalive(a);
	keepalive(b);
	both(&ab, &ba);
}
