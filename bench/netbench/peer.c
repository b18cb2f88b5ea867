/*
 * Peer mode: a server and a client that find each other by address, with
 * no MPI.  This is what measures a guest against the host (the host side
 * runs in the job's network namespace), where no MPI job spans both.
 * The server takes one connection at a time, each one a test, and a bad
 * connection costs that connection only: what reaches a listening port is
 * not trusted.
 */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/inet.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "netbench.h"

#define ME "vhpc-netbench"

int nb_peer_serve(const struct nb_opts *o)
{
	struct verr err = { "" };
	uint16_t port;
	char ip[32];
	int lfd = nb_listen(o->serve_addr, o->serve_port, &port, &err);

	if (lfd < 0) {
		fprintf(stderr, ME ": %s\n", err.msg);
		return 1;
	}
	printf("# " ME ": serving on %s:%u\n", ipv4_format(o->serve_addr, ip, sizeof(ip)), port);
	fflush(stdout);
	for (;;) {
		struct nb_hdr h;
		int fd = nb_accept(lfd, o->idle > 0 ? (int)(o->idle * 1000) : -1, &err);

		if (fd < 0) {
			fprintf(stderr, ME ": %s; the server ends\n", err.msg);
			close(lfd);
			return 1;
		}
		if (nb_read_hdr(fd, &h, &err) < 0) {
			fprintf(stderr, ME ": a connection refused: %s\n", err.msg);
		} else if (h.test == NB_STOP) {
			close(fd);
			break;
		} else if (nb_serve(fd, &h, &err) < 0) {
			fprintf(stderr, ME ": %s %llu: %s\n", nb_test_name((int)h.test),
				(unsigned long long)h.size, err.msg);
		}
		close(fd);
	}
	close(lfd);
	return 0;
}

/* The server may still be starting (a guest booting): refused or
 * unreachable is retried until the wait is over. */
static int connect_wait(const struct nb_opts *o, struct verr *err)
{
	uint64_t end = now_ns() + (uint64_t)(o->wait * 1e9);

	for (;;) {
		int fd = nb_connect(o->connect_addr, o->connect_port, 2000, err);

		if (fd >= 0 || now_ns() >= end ||
		    (errno != ECONNREFUSED && errno != ENETUNREACH && errno != EHOSTUNREACH && errno != ETIMEDOUT))
			return fd;
		usleep(200000);
	}
}

int nb_peer_connect(const struct nb_opts *o)
{
	struct verr err = { "" };
	char ip[32];

	for (int t = 0; t < o->ntests; t++)
		for (int i = 0; i < o->nsizes; i++) {
			double res[3] = { 0, 0, 0 };
			int fd = connect_wait(o, &err), rc;

			if (fd < 0) {
				fprintf(stderr, ME ": %s\n", err.msg);
				return 1;
			}
			if (t == 0 && i == 0) {
				printf("# " ME ": peer mode, to %s:%u, %.3f s per test\n",
				       ipv4_format(o->connect_addr, ip, sizeof(ip)), o->connect_port, o->seconds);
				fflush(stdout);
			}
			rc = nb_run(fd, o->tests[t], o->sizes[i], o->seconds, res, &err);
			close(fd);
			if (rc < 0) {
				fprintf(stderr, ME ": %s %lld: %s\n", nb_test_name(o->tests[t]), o->sizes[i], err.msg);
				return 1;
			}
			nb_print(o->tests[t], o->sizes[i], res);
		}
	if (o->stop) {
		double res[3];
		int fd = connect_wait(o, &err);

		if (fd < 0 || nb_run(fd, NB_STOP, 1, 0, res, &err) < 0) {
			fprintf(stderr, ME ": telling the server to stop: %s\n", err.msg);
			if (fd >= 0)
				close(fd);
			return 1;
		}
		close(fd);
	}
	return 0;
}
