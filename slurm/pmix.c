/*
 * A task in a guest reaches Slurm's PMIx server through a relay: a
 * listening socket on the guest's loopback, served by a process of the
 * job's user that stays in the node's network namespace and connects each
 * client to the server on the node's loopback.  PMIx's TCP transport
 * carries its own handshake and credentials, so the relay only copies
 * bytes.
 */
#include "slurm/plugin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int vs_pmix_uri_rewrite(const char *uri, int relay_port, char *out, size_t len, int *server_port)
{
	static const char lo[] = "tcp4://127.0.0.1:";
	const char *p = strstr(uri, lo), *q;
	long port = 0;

	if (!p)
		return -1;
	q = p + sizeof(lo) - 1;
	if (*q < '0' || *q > '9')
		return -1;
	while (*q >= '0' && *q <= '9' && port <= 65535)
		port = port * 10 + (*q++ - '0');
	if (port < 1 || port > 65535 || *q)
		return -1;
	*server_port = (int)port;
	return snprintf(out, len, "%.*s%s%d", (int)(p - uri), uri, lo, relay_port) < (int)len ? 0 : -1;
}

/* Copies both ways until either side closes. */
static void pump(int a, int b)
{
	char buf[65536];
	struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n, off = 0;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0)
				return;
			while (off < n) {
				ssize_t w = write(p[1 - i].fd, buf + off, (size_t)(n - off));

				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					return;
				off += w;
			}
		}
	}
}

static int connect_server(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* The relay process (listeners on fds 3..): waits for the server ports,
 * then serves each client in a process of its own until the task's
 * processes are gone. */
static void relay_main(int aim) __attribute__((noreturn));
static void relay_main(int aim)
{
	struct pollfd p[VS_RELAY_PORTS];
	int port[VS_RELAY_PORTS] = { 0 }, any = 0;
	char buf[64] = "";
	ssize_t n;

	do
		n = read(aim, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	close(aim);
	if (n > 0 && sscanf(buf, "%d %d %d %d", &port[0], &port[1], &port[2], &port[3]) < 1)
		_exit(1);
	for (int i = 0; i < VS_RELAY_PORTS; i++) {
		p[i] = (struct pollfd){ .fd = port[i] > 0 && port[i] < 65536 ? 3 + i : -1, .events = POLLIN };
		any |= p[i].fd >= 0;
	}
	/* No port: the task was not one of a PMIx step. */
	if (!any)
		_exit(0);
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		if (poll(p, VS_RELAY_PORTS, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (int i = 0; i < VS_RELAY_PORTS; i++) {
			int c, s;

			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			if ((c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
				continue;
			if (fork() == 0) {
				for (int k = 0; k < VS_RELAY_PORTS; k++)
					close(3 + k);
				if ((s = connect_server(port[i])) >= 0)
					pump(c, s);
				_exit(0);
			}
			close(c);
		}
	}
}

static int listen_lo(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* VS_RELAY_PORTS sockets listening on 127.0.0.1 inside the network
 * namespace at path, into fd[]. */
static int listen_in(const char *path, int fd[VS_RELAY_PORTS], int port[VS_RELAY_PORTS], char *why, size_t len)
{
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns = open(path, O_RDONLY | O_CLOEXEC), rc = -1, i;

	for (i = 0; i < VS_RELAY_PORTS; i++)
		fd[i] = -1;
	if (own < 0 || ns < 0) {
		vs_fail(why, len, "%s: %s", own < 0 ? "/proc/self/ns/net" : path, strerror(errno));
		goto out;
	}
	if (setns(ns, CLONE_NEWNET) < 0) {
		vs_fail(why, len, "joining %s: %s", path, strerror(errno));
		goto out;
	}
	for (i = 0; i < VS_RELAY_PORTS; i++)
		if ((fd[i] = listen_lo(&port[i])) < 0)
			break;
	rc = i == VS_RELAY_PORTS ? 0 : vs_fail(why, len, "a socket on the guest's 127.0.0.1: %s", strerror(errno));
	/* Back in the node's namespace whatever happened. */
	if (setns(own, CLONE_NEWNET) < 0)
		rc = vs_fail(why, len, "returning to the node's network namespace: %s", strerror(errno));
out:
	if (rc < 0)
		for (i = 0; i < VS_RELAY_PORTS; i++)
			if (fd[i] >= 0)
				close(fd[i]);
	if (own >= 0)
		close(own);
	if (ns >= 0)
		close(ns);
	return rc;
}

int vs_relay_start(const char *guest_netns, uid_t uid, gid_t gid, struct vs_relay *r, char *why, size_t len)
{
	char path[128];
	int p[2], lfd[VS_RELAY_PORTS];

	memset(r, 0, sizeof(*r));
	r->aim_fd = -1;
	snprintf(path, sizeof(path), "/run/netns/%s", guest_netns);
	if (listen_in(path, lfd, r->port, why, len) < 0)
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		vs_fail(why, len, "pipe: %s", strerror(errno));
		goto fail;
	}
	r->pid = fork();
	if (r->pid < 0) {
		close(p[0]);
		close(p[1]);
		vs_fail(why, len, "fork: %s", strerror(errno));
		goto fail;
	}
	if (r->pid == 0) {
		int nul = open("/dev/null", O_RDWR), aim = VS_RELAY_PORTS + 3;

		/* The user's, with nothing of the task's: not its stdio, not
		 * slurmstepd's descriptors. */
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 || dup2(p[0], 50) < 0)
			_exit(1);
		for (int i = 0; i < VS_RELAY_PORTS; i++)
			if (dup2(lfd[i], 3 + i) < 0)
				_exit(1);
		if (dup2(50, aim) < 0)
			_exit(1);
		close_range((unsigned)aim + 1, ~0u, 0);
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
			_exit(1);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		relay_main(aim);
	}
	for (int i = 0; i < VS_RELAY_PORTS; i++)
		close(lfd[i]);
	close(p[0]);
	r->aim_fd = p[1];
	return 0;
fail:
	for (int i = 0; i < VS_RELAY_PORTS; i++)
		close(lfd[i]);
	return -1;
}

int vs_relay_aim(struct vs_relay *r, const int server[VS_RELAY_PORTS], char *why, size_t len)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%d %d %d %d\n", server[0], server[1], server[2], server[3]);

	if (r->aim_fd < 0 || write(r->aim_fd, buf, (size_t)n) != n)
		return vs_fail(why, len, "telling the PMIx relay its server: %s", strerror(errno));
	close(r->aim_fd);
	r->aim_fd = -1;
	return 0;
}
