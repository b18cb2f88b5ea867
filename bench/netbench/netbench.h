/* vhpc-netbench's options and its two modes: between two MPI ranks
 * (netbench.c), and between two programs without MPI (peer.c), for a
 * guest and the host, or anything else MPI does not span. */
#ifndef VHPC_NETBENCH_H
#define VHPC_NETBENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "tcp.h"

#define NB_MAX_SIZES 64
#define NB_MAX_TESTS 8

struct nb_opts {
	long long sizes[NB_MAX_SIZES];
	int nsizes;
	double seconds;
	int tests[NB_MAX_TESTS];       /* in the order given; default stream, rr */
	int ntests;
	const char *addr;              /* MPI mode: rank 0's address for rank 1 */
	/* Peer mode: exactly one of these. */
	uint32_t serve_addr, connect_addr;
	uint16_t serve_port, connect_port;
	bool serve, connect;
	double wait, idle;             /* client: retry connecting; server: exit when idle */
	bool stop;                     /* client: tell the server to exit afterwards */
};

int nb_peer_serve(const struct nb_opts *o);
int nb_peer_connect(const struct nb_opts *o);

#endif
