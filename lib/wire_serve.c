/*
 * The daemons' side of the wire: a thread per connection, so a peer that is
 * slow to send (or a handler that waits on a node) never holds up another's
 * message.  What is the same for vhpc-ctld and vhpcd lives here: naming the
 * peer, the limits, rejecting what fails to decode, replying.
 *
 * Limits, so that no peer can take the daemon's threads, descriptors or
 * memory: connections at once, in total and per peer address (a connection
 * over either gets a notice and is closed at once, before any thread or
 * buffer is spent on it); a deadline to send the request and another to
 * take the reply.  Before munged has checked its credential, a connection
 * costs its thread and WIRE_MAX_CRED bytes of stack (lib/wire.c).
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Descriptors kept for the daemon's own files beside its connections. */
#define FD_RESERVE 256

static struct {
	int max, per_addr, timeout_ms;
} lim = { 1024, 256, 10000 };

/* The peer addresses of the connections alive now, one slot each. */
static struct {
	pthread_mutex_t mu;
	struct in6_addr *addr;
	bool *used;
} live = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct conn {
	int fd, slot;
	wire_handler handle;
	void *ctx;
};

static int env_int(const char *name, long long min, long long max, int dflt)
{
	const char *s = getenv(name);
	long long v;

	if (!s || !*s)
		return dflt;
	if (parse_ll(s, min, max, &v) < 0) {
		log_err("$%s is '%s': expected a number in %lld..%lld", name, s, min, max);
		exit(2);
	}
	return (int)v;
}

/* The limits from the environment; descriptors enough for them. */
static void setup_limits(void)
{
	struct rlimit rl;
	rlim_t need;

	lim.max = env_int("VHPC_WIRE_MAX_CONNS", 1, 1 << 20, lim.max);
	lim.per_addr = env_int("VHPC_WIRE_MAX_CONNS_PER_ADDR", 1, 1 << 20, lim.per_addr);
	lim.timeout_ms = env_int("VHPC_WIRE_TIMEOUT_MS", 100, 3600000, lim.timeout_ms);
	need = (rlim_t)lim.max + FD_RESERVE;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
		rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < need) {
			lim.max = rl.rlim_cur > 2 * FD_RESERVE ? (int)(rl.rlim_cur - FD_RESERVE) : (int)rl.rlim_cur / 2;
			log_warn("only %llu descriptors (RLIMIT_NOFILE): at most %d connections at once",
				 (unsigned long long)rl.rlim_cur, lim.max);
		}
	}
	live.addr = calloc((size_t)lim.max, sizeof(*live.addr));
	live.used = calloc((size_t)lim.max, sizeof(*live.used));
	if (!live.addr || !live.used) {
		log_err("out of memory for %d connections", lim.max);
		exit(1);
	}
	log_info("connections: at most %d at once, %d per peer address; %d ms to send a request, and to take "
		 "a reply", lim.max, lim.per_addr, lim.timeout_ms);
}

/* IPv4 peers as mapped IPv6 addresses: one key for both. */
static struct in6_addr addr_key(const struct sockaddr_storage *ss)
{
	struct in6_addr a = { 0 };

	if (ss->ss_family == AF_INET6) {
		a = ((const struct sockaddr_in6 *)ss)->sin6_addr;
	} else if (ss->ss_family == AF_INET) {
		a.s6_addr[10] = a.s6_addr[11] = 0xff;
		memcpy(&a.s6_addr[12], &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
	return a;
}

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, a, sizeof(a));
		port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof(a));
		port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	}
	snprintf(buf, len, "%s:%u", a, port);
}

/* A slot for a connection from a, or -1 with why (over which limit). */
static int slot_take(const struct in6_addr *a, char *why, size_t len)
{
	int slot = -1, same = 0;

	pthread_mutex_lock(&live.mu);
	for (int i = 0; i < lim.max; i++) {
		if (!live.used[i]) {
			if (slot < 0)
				slot = i;
		} else if (!memcmp(&live.addr[i], a, sizeof(*a))) {
			same++;
		}
	}
	if (slot < 0) {
		snprintf(why, len, "busy: %d connections at once, the limit", lim.max);
	} else if (same >= lim.per_addr) {
		snprintf(why, len, "busy: %d connections from this address at once, the limit", lim.per_addr);
		slot = -1;
	} else {
		live.used[slot] = true;
		live.addr[slot] = *a;
	}
	pthread_mutex_unlock(&live.mu);
	return slot;
}

static void slot_give(int i)
{
	pthread_mutex_lock(&live.mu);
	live.used[i] = false;
	pthread_mutex_unlock(&live.mu);
}

/* A refused connection: a line in the log (one a second at most: a flood
 * must not fill the disk), a notice to the peer, and the close. */
static void refuse(int fd, const char *who, const char *why)
{
	static uint64_t last_ns;
	static unsigned quiet;
	char junk[2048];
	uint64_t now = now_ns();

	pthread_mutex_lock(&live.mu);
	if (now - last_ns >= 1000000000ull) {
		if (quiet)
			log_warn("%s: refused: %s (and %u more refused since the last such line, %.1f s ago)", who, why, quiet,
				 (double)(now - last_ns) / 1e9);
		else
			log_warn("%s: refused: %s", who, why);
		last_ns = now;
		quiet = 0;
	} else {
		quiet++;
	}
	pthread_mutex_unlock(&live.mu);
	wire_notice(fd, why);
	/* What the peer sent already, read, so that closing does not reset
	 * the connection before the notice arrives. */
	if (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) < 0)
		errno = 0;
	close(fd);
}

/* Set by a handler (wire_serve_takeover) for its own connection. */
static __thread wire_takeover_fn take_fn;
static __thread void *take_arg;

void wire_serve_takeover(wire_takeover_fn fn, void *arg)
{
	take_fn = fn;
	take_arg = arg;
}

static void *conn_thread(void *arg)
{
	struct conn c = *(struct conn *)arg;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct json_object *msg = NULL, *r;
	struct wire_peer peer;
	struct verr e;
	char who[64];
	int rc;

	free(arg);
	if (getpeername(c.fd, (struct sockaddr *)&ss, &sl) < 0)
		ss.ss_family = AF_UNSPEC;
	addr_str(&ss, who, sizeof(who));
	rc = wire_recv(c.fd, &msg, &peer, NULL, lim.timeout_ms, &e);
	if (rc == 0) {
		/* The reply goes to the sender's uid only, and names its request. */
		struct wire_to to = { .uid = peer.uid, .reply = true };

		snprintf(to.id, sizeof(to.id), "%s", peer.id);
		take_fn = NULL;
		r = c.handle(msg, &peer, who, c.ctx);
		if (!r)
			r = wire_error("unhandled message");
		if (wire_send(c.fd, r, &to, lim.timeout_ms, &e) < 0) {
			/* Reset rather than close: the kernel would otherwise
			 * keep what the peer did not take, for minutes. */
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			log_warn("%s (uid %u): reply: %s", who, (unsigned)peer.uid, e.msg);
			if (take_fn)
				take_fn(-1, take_arg);
		} else if (take_fn) {
			json_object_put(r);
			r = NULL;
			json_object_put(msg);
			msg = NULL;
			take_fn(c.fd, take_arg);
		}
		take_fn = NULL;
		json_object_put(r);
	} else if (rc < 0) {
		log_warn("%s: %s", who, e.msg);
		wire_notice(c.fd, e.msg);
	}
	json_object_put(msg);
	close(c.fd);
	slot_give(c.slot);
	return NULL;
}

void wire_serve(int lfd, size_t stack, wire_handler handle, void *ctx)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_attr_t a;

	/* One set of limits for every listener of the daemon. */
	pthread_once(&once, setup_limits);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (stack)
		pthread_attr_setstacksize(&a, stack);
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		struct in6_addr key;
		char why[128], who[64];
		struct conn *c;
		pthread_t th;
		int slot, rc;

		if (fd < 0) {
			/* Out of descriptors or memory: wait for some to come back. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(100000);
			continue;
		}
		key = addr_key(&ss);
		slot = slot_take(&key, why, sizeof(why));
		if (slot < 0) {
			addr_str(&ss, who, sizeof(who));
			refuse(fd, who, why);
			continue;
		}
		c = malloc(sizeof(*c));
		if (!c) {
			slot_give(slot);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->slot = slot;
		c->handle = handle;
		c->ctx = ctx;
		if ((rc = pthread_create(&th, &a, conn_thread, c)) != 0) {
			addr_str(&ss, who, sizeof(who));
			snprintf(why, sizeof(why), "busy: no thread for a connection (%s)", strerror(rc));
			free(c);
			slot_give(slot);
			refuse(fd, who, why);
		}
	}
}
