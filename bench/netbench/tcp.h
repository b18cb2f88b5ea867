/*
 * The TCP tests both of vhpc-netbench's modes run, in netperf's terms:
 * stream (TCP_STREAM: the client sends), maerts (TCP_MAERTS: the server
 * sends) and rr (TCP_RR: request and response of one size).  Each test is
 * one fresh connection that starts with a header naming the test and the
 * size, so a server needs no other channel to know what to do.
 */
#ifndef VHPC_NETBENCH_TCP_H
#define VHPC_NETBENCH_TCP_H

#include <stdint.h>

#include "lib/err.h"

#define NB_MAX_MSG (16u << 20)
#define NB_IO_TIMEOUT_MS 30000

enum { NB_STREAM = 1, NB_RR = 2, NB_MAERTS = 3, NB_STOP = 4 };

struct nb_hdr { uint32_t magic, test; uint64_t size; };

/* "stream", "rr", "maerts"; NULL for anything else. */
const char *nb_test_name(int test);
int nb_test_parse(const char *s);

int nb_listen(uint32_t addr, uint16_t port, uint16_t *bound, struct verr *err);
int nb_accept(int lfd, int timeout_ms, struct verr *err);
int nb_connect(uint32_t addr, uint16_t port, int timeout_ms, struct verr *err);

/* Server side: reads the header from a new connection and checks it (a
 * peer's header is not trusted: unknown tests and sizes over NB_MAX_MSG
 * are refused by name).  *h gets what was asked. */
int nb_read_hdr(int fd, struct nb_hdr *h, struct verr *err);
/* Serves the test in h on fd until the client is done. */
int nb_serve(int fd, const struct nb_hdr *h, struct verr *err);
/* Client side: sends the header and runs the test for `seconds`.
 * res: the figure (Mbit/s, or usec per round trip), then bytes or
 * transactions, then seconds. */
int nb_run(int fd, int test, long long size, double seconds, double res[3], struct verr *err);

/* The line vhpc bench parses. */
void nb_print(int test, long long size, const double res[3]);

#endif
