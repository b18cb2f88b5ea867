/*
 * Files of "NAME VALUE" lines the admin gives, one line per node, and what
 * they say: where a node of the job is on the underlay, for the job
 * network's VXLAN.
 * Slurm's own NodeAddr is not at hand outside slurmctld, and a site's
 * fast network is often not the one its node names resolve to, so the
 * admin may give a file (plugstack.conf: peers=FILE) of "NAME ADDRESS"
 * lines; without one, the node's name is resolved as IPv4.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "slurm/holder.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vs_node_value(const char *path, const char *node, char *val, size_t len, struct verr *err)
{
	char *text, *p, *line;
	size_t n;
	int lineno = 0, rc = 1;

	if (read_file(path, &text, &n, 1 << 20, err) < 0)
		return -1;
	for (p = text; (line = strsep(&p, "\n"));) {
		char name[128], v[256], extra[8];
		int w;

		lineno++;
		line[strcspn(line, "#")] = 0;
		w = sscanf(line, "%127s %255s %7s", name, v, extra);
		if (w <= 0)
			continue;
		if (w != 2) {
			verr_set(err, "%s:%d: expected NAME VALUE", path, lineno);
			rc = -1;
			break;
		}
		if (!strcmp(name, node)) {
			snprintf(val, len, "%s", v);
			rc = 0;
			break;
		}
	}
	free(text);
	if (rc > 0)
		rc = verr_set(err, "%s names no node %s", path, node);
	return rc;
}

int vs_underlay_addr(const char *peers_file, const char *node, uint32_t *addr, struct verr *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *res = NULL;
	int rc;

	if (peers_file && *peers_file) {
		char v[256];

		if (vs_node_value(peers_file, node, v, sizeof(v), err) < 0)
			return -1;
		if (ipv4_parse(v, addr) < 0)
			return verr_set(err, "%s: node %s: '%s' is not an IPv4 address", peers_file, node, v);
		return 0;
	}
	rc = getaddrinfo(node, NULL, &hints, &res);
	if (rc != 0 || !res)
		return verr_set(err, "node %s has no IPv4 address (%s): give the plugin a peers file (plugstack.conf: peers=FILE)",
				node, gai_strerror(rc));
	*addr = ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr);
	freeaddrinfo(res);
	return 0;
}

int vs_local_id(uint32_t job, int node, char *buf, size_t len)
{
	static const char b32[] = "0123456789abcdefghijklmnopqrstuv";
	char n[8];
	int i = (int)sizeof(n) - 1;

	if (node < 0 || node >= 32 * 32 * 32 || job > 99999999)
		return -1;
	n[i] = 0;
	do {
		n[--i] = b32[node % 32];
		node /= 32;
	} while (node);
	return snprintf(buf, len, "%us%s", job, n + i) >= (int)len ? -1 : 0;
}
