/* What every guest of a job reads about the others, formatted in one place
 * for whoever writes it (the node agent on each node, the launch plan). */
#include "lib/inet.h"
#include "lib/jobspec.h"

#include <stdio.h>
#include <stdlib.h>

char *job_hosts_text(const uint32_t *addrs, int n)
{
	size_t cap = 32 + (size_t)n * 32, len;
	char *s = malloc(cap), ip[20];

	if (!s)
		return NULL;
	len = (size_t)snprintf(s, cap, "127.0.0.1 localhost\n");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s g%d\n", ipv4_format(addrs[i], ip, sizeof(ip)), i);
	return s;
}

char *job_hostfile_text(const int *ranks, int n)
{
	size_t cap = 1 + (size_t)n * 48, len = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	s[0] = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "g%d slots=%d max_slots=%d\n", i, ranks[i], ranks[i]);
	return s;
}
