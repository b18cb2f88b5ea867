/*
 * IPv4 addresses, networks and TCP endpoints (host byte order).
 */
#ifndef VHPC_LIB_INET_H
#define VHPC_LIB_INET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/err.h"

struct ipv4net { uint32_t addr; int prefix; };
/* "10.213.0.0/16"; host bits must be zero unless allow_host. */
int ipv4net_parse(const char *s, bool allow_host, struct ipv4net *out);
const char *ipv4_format(uint32_t addr, char *buf, size_t len);
/* "a.b.c.d" to host byte order. */
int ipv4_parse(const char *s, uint32_t *out);
/* "HOST:PORT" (HOST a name or an IPv4 address, PORT 1..65535; with
 * allow_zero also 0). */
int hostport_parse(const char *s, bool allow_zero, char *host, size_t hlen, int *port);
/* A listening TCP socket on "ADDR:PORT" (ADDR may be empty or *: every
 * address); the port it got (useful with 0) in *port. */
int tcp_listen(const char *spec, int *port, struct verr *err);
int tcp_connect(const char *hostport, int timeout_ms, struct verr *err);

#endif
