/* Feeds arbitrary bytes to the IMB output parser, then runs the sanity
 * checks and the JSON writer on whatever it accepted.  Useful seeds:
 * the files in tests/bench/data/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

static void ignore(void *ctx, const struct imb_table *t, const struct imb_row *r, const char *msg)
{
	(void)ctx;
	(void)t;
	(void)r;
	(void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct imb_output o;
	struct imb_check_opts opts;
	struct verr err;
	char *js;

	if (imb_parse("fuzz", (const char *)data, size, &o, &err) < 0)
		return 0;
	imb_check_defaults(&opts);
	opts.mbyte = imb_guess_mbyte(&o);
	imb_check(&o, &opts, ignore, NULL);
	opts.fewer_reps_ok = true;
	imb_check(&o, &opts, NULL, NULL);
	js = imb_output_json(&o);
	free(js);
	imb_output_free(&o);
	return 0;
}
