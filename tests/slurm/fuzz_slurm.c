/* Feeds arbitrary bytes to every parser of slurm/ that takes what a job's
 * user can influence: the first byte picks one of the opts file, the state
 * file, the options line, a hostlist and a CPUs-per-node list. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vs_state st;
	char why[1024], *s, **names;
	struct vs_kvfile f;
	struct vs_opts o;
	int v[64], n;

	if (size < 1)
		return 0;
	if (!(s = malloc(size)))
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	switch (data[0] % 5) {
	case 0:
		if (vs_kv_parse(s, size - 1, VS_OPTS_MAGIC, &f, why, sizeof(why)) == 0) {
			vs_kv_get(&f, "options");
			vs_kv_free(&f);
		}
		break;
	case 1:
		vs_state_parse(s, size - 1, &st, why, sizeof(why));
		break;
	case 2:
		vs_opts_parse(s, &o, why, sizeof(why));
		break;
	case 3:
		if (vs_hostlist_expand(s, &names, &n, why, sizeof(why)) == 0)
			free(names);
		break;
	default:
		vs_cpus_per_node(s, v, 64, &n, why, sizeof(why));
		break;
	}
	free(s);
	return 0;
}
