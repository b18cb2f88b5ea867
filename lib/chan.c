/*
 * Authenticated frames over a stream socket.  Wire format of one frame:
 *
 *   u32 length (big-endian, payload bytes) | u8 type | payload | 32-byte MAC
 *
 * MAC = HMAC-SHA256(key, session nonce || direction || u64 seq || u8 type ||
 * u32 length || payload).  The session nonce is 16 random bytes from each
 * side, so neither end alone can make a session repeat an earlier one.
 */
#include "lib/chan.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = "VHPCCH1";

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
}

int chan_key_load(const char *path, uint8_t key[CHAN_KEY_LEN], struct verr *err)
{
	char *buf;
	size_t len;
	struct stat st;

	if (stat(path, &st) < 0)
		return verr_errno(err, "job key %s", path);
	if (st.st_mode & 077)
		return verr_set(err, "job key %s is readable by group or others (mode %o); refusing it",
				path, st.st_mode & 0777);
	if (read_file(path, &buf, &len, 256, err) < 0)
		return -1;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = 0;
	if (hex_decode(buf, key, CHAN_KEY_LEN) < 0) {
		free(buf);
		return verr_set(err, "job key %s: expected %d hex digits", path, 2 * CHAN_KEY_LEN);
	}
	sodium_memzero(buf, len);
	free(buf);
	return 0;
}

int chan_key_create(const char *path, uint8_t key[CHAN_KEY_LEN], struct verr *err)
{
	char hex[2 * CHAN_KEY_LEN + 2];

	random_bytes(key, CHAN_KEY_LEN);
	hex_encode(key, CHAN_KEY_LEN, hex);
	strcat(hex, "\n");
	if (write_file_atomic(path, hex, strlen(hex), 0600, err) < 0)
		return -1;
	sodium_memzero(hex, sizeof(hex));
	return 0;
}

static void chan_init(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN], bool server)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->server = server;
	memcpy(c->key, key, CHAN_KEY_LEN);
}

/* Both sides send magic + 8 bytes of their half of the nonce; the session
 * nonce is server half || client half. */
static int handshake(struct chan *c, int timeout_ms, struct verr *err)
{
	uint8_t mine[16], theirs[16];
	uint64_t deadline = deadline_of(timeout_ms);
	bool eof;

	if (sodium_init() < 0)
		return verr_set(err, "libsodium failed to initialise");
	memcpy(mine, magic, 8);
	randombytes_buf(mine + 8, 8);
	if (send_full(c->fd, mine, sizeof(mine)) < 0)
		return verr_errno(err, "channel handshake: send");
	if (read_full_deadline(c->fd, theirs, sizeof(theirs), deadline, &eof) < 0)
		return verr_errno(err, "channel handshake: receive");
	if (memcmp(theirs, magic, 8))
		return verr_set(err, "channel handshake: the peer does not speak the vhpc channel protocol");
	memcpy(c->nonce, c->server ? mine + 8 : theirs + 8, 8);
	memcpy(c->nonce + 8, c->server ? theirs + 8 : mine + 8, 8);
	return 0;
}

int chan_server(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN],
		int timeout_ms, struct verr *err)
{
	chan_init(c, fd, key, true);
	return handshake(c, timeout_ms, err);
}

int chan_client(struct chan *c, int fd, const uint8_t key[CHAN_KEY_LEN],
		int timeout_ms, struct verr *err)
{
	chan_init(c, fd, key, false);
	return handshake(c, timeout_ms, err);
}

static void frame_mac(const struct chan *c, bool from_server, uint64_t seq,
		      const uint8_t hdr[5], const void *payload, size_t len,
		      uint8_t mac[crypto_auth_hmacsha256_BYTES])
{
	crypto_auth_hmacsha256_state st;
	uint8_t pre[16 + 1 + 8];

	memcpy(pre, c->nonce, 16);
	pre[16] = from_server ? 'S' : 'C';
	for (int i = 0; i < 8; i++)
		pre[17 + i] = (uint8_t)(seq >> (56 - 8 * i));
	crypto_auth_hmacsha256_init(&st, c->key, CHAN_KEY_LEN);
	crypto_auth_hmacsha256_update(&st, pre, sizeof(pre));
	crypto_auth_hmacsha256_update(&st, hdr, 5);
	crypto_auth_hmacsha256_update(&st, payload, len);
	crypto_auth_hmacsha256_final(&st, mac);
}

int chan_send(struct chan *c, uint8_t type, const void *buf, size_t len,
	      struct verr *err)
{
	uint8_t hdr[5], mac[crypto_auth_hmacsha256_BYTES];
	uint32_t nlen = htonl((uint32_t)len);

	if (len > CHAN_MAX_FRAME)
		return verr_set(err, "frame of %zu bytes exceeds the %u-byte limit", len, CHAN_MAX_FRAME);
	memcpy(hdr, &nlen, 4);
	hdr[4] = type;
	frame_mac(c, c->server, c->tx_seq++, hdr, buf, len, mac);
	if (send_full(c->fd, hdr, 5) < 0 || (len && send_full(c->fd, buf, len) < 0) ||
	    send_full(c->fd, mac, sizeof(mac)) < 0)
		return verr_errno(err, "channel send");
	return 0;
}

int chan_recv(struct chan *c, uint8_t *type, char **buf, size_t *len,
	      int timeout_ms, struct verr *err)
{
	return chan_recv_max(c, type, buf, len, CHAN_MAX_FRAME, timeout_ms, err);
}

int chan_recv_max(struct chan *c, uint8_t *type, char **buf, size_t *len, size_t max,
		  int timeout_ms, struct verr *err)
{
	uint8_t hdr[5], mac[crypto_auth_hmacsha256_BYTES], want[sizeof(mac)];
	uint64_t deadline = deadline_of(timeout_ms);
	uint32_t nlen;
	char *b;
	bool eof;

	if (read_full_deadline(c->fd, hdr, 5, deadline, &eof) < 0) {
		if (eof)
			return 1;
		return verr_errno(err, "channel receive");
	}
	memcpy(&nlen, hdr, 4);
	nlen = ntohl(nlen);
	if (max > CHAN_MAX_FRAME)
		max = CHAN_MAX_FRAME;
	if (nlen > max)
		return verr_set(err, "channel receive: frame of %u bytes exceeds the %zu-byte limit",
				nlen, max);
	b = malloc((size_t)nlen + 1);
	if (!b)
		return verr_set(err, "out of memory");
	if ((nlen && read_full_deadline(c->fd, b, nlen, deadline, &eof) < 0) ||
	    read_full_deadline(c->fd, mac, sizeof(mac), deadline, &eof) < 0) {
		free(b);
		return verr_errno(err, "channel receive: truncated frame");
	}
	frame_mac(c, !c->server, c->rx_seq, hdr, b, nlen, want);
	if (sodium_memcmp(mac, want, sizeof(mac)) != 0) {
		free(b);
		return verr_set(err, "channel receive: bad message authentication code (wrong key, replay or tampering)");
	}
	c->rx_seq++;
	b[nlen] = 0;
	*type = hdr[4];
	*buf = b;
	*len = nlen;
	return 0;
}

void chan_close(struct chan *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	sodium_memzero(c->key, sizeof(c->key));
}

int chan_close_wait(struct chan *c, int timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int rc = -1;

	if (c->fd >= 0 && shutdown(c->fd, SHUT_WR) == 0) {
		for (;;) {
			uint64_t now = now_ns();
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			char buf[4096];
			ssize_t n;

			if (now >= end)
				break;
			if (poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0)
				continue;
			n = read(c->fd, buf, sizeof(buf));
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
				rc = n == 0 || errno == ECONNRESET ? 0 : -1;
				break;
			}
		}
	}
	chan_close(c);
	return rc;
}
