/*
 * A node's report of what a job's guests used (the `usage` of its
 * `stopped` reply, scheduler/PROTOCOL.md), checked as every message is: a
 * node may speak only for its own guests of the job, each once, with
 * numbers in range, and no field the protocol lacks.  Pure (fuzzed with
 * the other messages, tests/cluster/fuzz_cluster_msg.c).
 */
#include "lib/err.h"
#include "lib/jf.h"
#include "ctld.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* What cgroups count fits a JSON number exactly below 2^53. */
#define USAGE_MAX (1ll << 53)

int ctld_usage_parse(struct json_object *reply, const int *guest_node, int nguests, int node,
		     struct store_usage *out, int *n, struct verr *err)
{
	static const char *const f[] = { "guest", "cpu_usec", "mem_peak", NULL };
	struct json_object *a;
	bool *seen;
	int rc = 0;

	*n = 0;
	if (!json_object_is_type(reply, json_type_object) || jf_array(reply, "usage", false, (size_t)nguests, &a, err) < 0)
		return -1;
	if (!json_object_object_get_ex(reply, "usage", NULL))
		return 0;
	if (!(seen = calloc((size_t)nguests + 1, sizeof(bool))))
		return verr_set(err, "out of memory");
	for (size_t i = 0; i < json_object_array_length(a) && rc == 0; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		long long g, cpu = -1, mem = -1;

		if (!json_object_is_type(e, json_type_object)) {
			rc = verr_set(err, "usage entry %zu: not an object", i);
		} else if (jf_only(e, "usage entry", f, err) < 0 || jf_int(e, "guest", true, 0, nguests - 1, &g, err) < 0 ||
			   jf_int(e, "cpu_usec", false, 0, USAGE_MAX, &cpu, err) < 0 ||
			   jf_int(e, "mem_peak", false, 0, USAGE_MAX, &mem, err) < 0) {
			rc = verr_wrap(err, "usage entry %zu", i);
		} else if (guest_node[g] != node) {
			rc = verr_set(err, "usage entry %zu: guest %lld of the job is not on this node", i, g);
		} else if (seen[g]) {
			rc = verr_set(err, "usage entry %zu: guest %lld a second time", i, g);
		} else {
			seen[g] = true;
			out[*n].guest = (int)g;
			out[*n].node[0] = 0;
			out[*n].cpu_usec = cpu;
			out[*n].mem_peak = mem;
			(*n)++;
		}
	}
	free(seen);
	if (rc < 0)
		*n = 0;
	return rc;
}
