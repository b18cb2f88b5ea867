/*
 * What vhpc bench reads that others wrote: a benchmark run's output (from a
 * guest: hostile) through each suite's parser, and a results.json (for
 * compare) through the loader.  The first byte picks the reader; the rest
 * is its input.  Each output is parsed for two repetitions and both sides,
 * so repeats across repetitions are exercised as well as within one.  Each
 * output is also tried after a valid result line of its suite, so the
 * fuzzer starts from accepted input without a seed corpus.
 */
#include "lib/err.h"
#include "lib/log.h"
#include <json-c/json.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/bh.h"

static const struct bench_opts opts = { .suite = "net", .reps = 2 };

static const char *const valid[] = {
	"# Benchmarking PingPong \n# #processes = 2 \n       #bytes #repetitions      t[usec]   Mbytes/sec\n"
	"            1         1000         0.41         2.43\n",
	"vhpc-bench {\"test\":\"stream\",\"size\":4096,\"value\":900.5,\"unit\":\"Mbit/s\"}\n",
	"vhpc-bench {\"test\":\"memtouch\",\"size\":16777216,\"ms\":9.5,\"t_start\":2000,\"t_done\":3000}\n",
	"vhpc-bench {\"test\":\"pipe\",\"copies\":2,\"value\":1366172.3,\"unit\":\"loops/s\"}\n",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bh_suite *const suites[] = { &bh_suite_mpi, &bh_suite_net, &bh_suite_mem, &bh_suite_sys };
	long long sizes[] = { 1, 4096, 16 << 20 };
	struct bh_ctx c;
	struct bh_run run = { .tag = "", .x = 16 << 20 };
	struct verr err;
	char *text, *spliced;
	size_t vl;

	if (size < 1)
		return 0;
	vlog_set_level(VLOG_ERR);
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	{
		/* The guests' vmshm counters (transport.c): a line read or not. */
		struct bh_vmshm_sent vs;

		bh_vmshm_sent(text, size - 1, &vs);
		if (vs.guest0[sizeof(vs.guest0) - 1] || vs.guest1[sizeof(vs.guest1) - 1] || (!vs.seen && vs.bytes))
			abort();
	}
	if (data[0] % 5 == 4) {
		struct json_object *j = json_tokener_parse(text);
		struct bh_results r;

		if (j && bh_results_from_json(j, 1 + data[0] / 5 % 3, "fuzz.json", &r, &err) == 0) {
			struct json_object *back = bh_results_to_json(&r);

			for (size_t i = 0; i < r.n; i++)
				if (r.m[i].ratio.ok && !(r.m[i].ratio.median > 0))
					abort();
			json_object_put(back);
			bh_results_free(&r);
		}
		json_object_put(j);
		free(text);
		return 0;
	}
	memset(&c, 0, sizeof(c));
	c.o = &opts;
	c.s = suites[data[0] % 5];
	c.guests = 1;
	c.ranks = 2;
	c.reps = 2;
	c.sizes = sizes;
	c.nsizes = 3;
	c.benches[0] = "PingPong";
	c.nbenches = 1;
	bh_results_init(&c.res, 2);
	vl = strlen(valid[data[0] % 5]);
	spliced = malloc(vl + size);
	if (!spliced) {
		free(text);
		bh_results_free(&c.res);
		return 0;
	}
	memcpy(spliced, valid[data[0] % 5], vl);
	memcpy(spliced + vl, text, size);
	for (size_t rep = 0; rep < 2; rep++)
		for (int side = 0; side < BH_NSIDES; side++) {
			run.side = (enum bh_side)side;
			c.s->parse(&c, &run, rep, "fuzz", rep ? spliced : text, rep ? vl + size - 1 : size - 1,
				   1000, 1ull << 62, &err);
		}
	free(spliced);
	bh_results_finish(&c.res);
	/* Whatever was accepted is a number a table and a plot can take. */
	for (size_t i = 0; i < c.res.n; i++)
		for (int s = 0; s < BH_NSIDES; s++)
			for (size_t k = 0; k < 2; k++)
				if (!isnan(c.res.m[i].v[s][k]) && !(c.res.m[i].v[s][k] >= 0 && c.res.m[i].v[s][k] <= 1e18))
					abort();
	bh_results_free(&c.res);
	free(text);
	return 0;
}
