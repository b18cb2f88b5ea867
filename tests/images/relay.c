/*
 * A TCP relay for the registry tests: listens on 127.0.0.1, on a port of
 * its own (written to PORTFILE), forwards each connection to
 * 127.0.0.1:UPSTREAM, passes what the upstream answers at most RATE bytes
 * a second per connection (0: as fast as it comes), and counts the bytes
 * each way.  Why: behind a slow relay a registry killed during a large
 * layer is killed with the layer in flight on any machine (on loopback a
 * 64 MiB layer is sent before a test can see it start), and the counts are
 * what a client received on the wire, TLS and all.  SIGUSR1 writes
 * "DOWN UP\n" to COUNTFILE; SIGTERM writes it and ends.
 *
 * usage: relay PORTFILE UPSTREAM_PORT RATE COUNTFILE
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t down_bytes, up_bytes;
static uint64_t rate;
static int upstream_port;
static const char *count_file;

struct pump {
	int from, to;
	bool limited;
	_Atomic int *refs;
	int *fds;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *pump(void *arg)
{
	struct pump *p = arg;
	char buf[16384];
	uint64_t sent = 0;
	double t0 = now();

	for (;;) {
		ssize_t n = read(p->from, buf, p->limited && rate && rate < sizeof(buf) ? rate : sizeof(buf));

		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(p->to, buf + off, n - off);

			if (w <= 0)
				goto done;
			off += w;
		}
		atomic_fetch_add(p->limited ? &down_bytes : &up_bytes, (uint64_t)n);
		sent += n;
		if (p->limited && rate) {
			double ahead = (double)sent / rate - (now() - t0);

			if (ahead > 0)
				usleep((useconds_t)(ahead * 1e6));
		}
	}
done:
	/* The other side sees the end as this side did. */
	shutdown(p->to, SHUT_WR);
	shutdown(p->from, SHUT_RD);
	if (atomic_fetch_sub(p->refs, 1) == 1) {
		close(p->fds[0]);
		close(p->fds[1]);
		free(p->fds);
		free((void *)p->refs);
	}
	free(p);
	return NULL;
}

static void write_counts(void)
{
	FILE *f = fopen(count_file, "w");

	if (f) {
		fprintf(f, "%llu %llu\n", (unsigned long long)down_bytes, (unsigned long long)up_bytes);
		fclose(f);
	}
}

static void *signals(void *arg)
{
	sigset_t *set = arg;

	for (;;) {
		int sig;

		if (sigwait(set, &sig))
			continue;
		write_counts();
		if (sig == SIGTERM)
			exit(0);
	}
	return NULL;
}

static int start(int client)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(upstream_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	_Atomic int *refs = malloc(sizeof(*refs));
	int *fds = malloc(2 * sizeof(int));

	if (up < 0 || !refs || !fds || connect(up, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (up >= 0)
			close(up);
		free((void *)refs);
		free(fds);
		return -1;
	}
	atomic_init(refs, 2);
	fds[0] = client;
	fds[1] = up;
	for (int i = 0; i < 2; i++) {
		struct pump *p = malloc(sizeof(*p));
		pthread_t t;

		if (!p)
			abort();
		*p = (struct pump){ .from = i ? client : up, .to = i ? up : client, .limited = !i, .refs = refs, .fds = fds };
		if (pthread_create(&t, NULL, pump, p))
			abort();
		pthread_detach(t);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	static sigset_t set;
	pthread_t st;
	FILE *f;
	int l;

	if (argc != 5) {
		fprintf(stderr, "usage: relay PORTFILE UPSTREAM_PORT RATE COUNTFILE\n");
		return 2;
	}
	upstream_port = atoi(argv[2]);
	rate = strtoull(argv[3], NULL, 10);
	count_file = argv[4];
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&st, NULL, signals, &set))
		return 1;
	if ((l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 64) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		perror("relay: listen");
		return 1;
	}
	write_counts();
	{
		/* Whole when the test reads it. */
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
		if (!(f = fopen(tmp, "w")) || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) ||
		    rename(tmp, argv[1]) < 0) {
			perror(argv[1]);
			return 1;
		}
	}
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("relay: accept");
			return 1;
		}
		if (start(c) < 0)
			close(c);
	}
}
