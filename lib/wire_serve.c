/*
 * The daemons' side of the wire: a thread per connection, so a peer that is
 * slow to send (or a handler that waits on a node) never holds up another's
 * message.  What is the same for vhpc-ctld and vhpcd lives here: naming the
 * peer, the receive deadline, rejecting what fails to decode, replying.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "lib/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A peer gets this long to send its one message after connecting. */
#define RECV_TIMEOUT_MS 10000

struct conn {
	int fd;
	wire_handler handle;
};

static void peer_str(int fd, char *buf, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char a[INET_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET)
		inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, ntohs(sa.sin_port));
}

static void *conn_thread(void *arg)
{
	struct conn c = *(struct conn *)arg;
	struct json_object *msg = NULL, *r;
	struct wire_peer peer;
	struct verr e;
	char who[64];
	int rc;

	free(arg);
	peer_str(c.fd, who, sizeof(who));
	rc = wire_recv(c.fd, &msg, &peer, RECV_TIMEOUT_MS, &e);
	if (rc == 0) {
		r = c.handle(msg, &peer, who);
		wire_reply(c.fd, r ? r : wire_error("unhandled message"), who);
	} else if (rc < 0) {
		log_warn("%s: %s", who, e.msg);
		r = wire_error("%s", e.msg);
		json_object_object_add(r, "code", json_object_new_string("rejected"));
		wire_reply(c.fd, r, who);
	}
	json_object_put(msg);
	close(c.fd);
	return NULL;
}

void wire_serve(int lfd, size_t stack, wire_handler handle)
{
	pthread_attr_t a;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (stack)
		pthread_attr_setstacksize(&a, stack);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		struct conn *c;
		pthread_t th;

		if (fd < 0) {
			/* Out of descriptors or memory: wait for some to come back. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(100000);
			continue;
		}
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->handle = handle;
		if (pthread_create(&th, &a, conn_thread, c) != 0) {
			log_warn("no thread for a connection: %s", strerror(errno));
			free(c);
			close(fd);
		}
	}
}
