/*
 * Feeds the IMB output parser, then runs the sanity checks and the JSON
 * writer on whatever it accepted.  Each input is tried twice: as it is, and
 * spliced into a valid IMB output (so the fuzzer works on damaged tables
 * from the first run, without a seed corpus).  More seeds: the files in
 * tests/bench/data/.
 */
#include "lib/err.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static const char sample[] =
	"#----------------------------------------------------------------\n"
	"#    Intel(R) MPI Benchmarks 2021.3, MPI-1 part\n"
	"#----------------------------------------------------------------\n"
	"[0] MPI startup(): noise\n"
	"\n"
	"#---------------------------------------------------\n"
	"# Benchmarking PingPong \n"
	"# #processes = 2 \n"
	"# ( 2 additional processes waiting in MPI_Barrier)\n"
	"#---------------------------------------------------\n"
	"       #bytes #repetitions      t[usec]   Mbytes/sec      defects\n"
	"            0         1000         0.42         0.00         0.00\n"
	"            1         1000         0.41         2.43         0.00\n"
	"        65536          640         8.08      8112.29         0.00\n"
	"      4194304           10       471.02      8904.66         0.00\n"
	"\n"
	"#-----------------------------------------------------------------------------\n"
	"# Benchmarking Multi-Sendrecv \n"
	"# ( 2 groups of 2 processes each running simultaneous ) \n"
	"# Group  0:     0    1 \n"
	"#\n"
	"#    MODE: AGGREGATE \n"
	"#\n"
	"        Group       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]   Mbytes/sec\n"
	"\n"
	"            0            8         1000         0.50         0.60         0.55        26.67\n"
	"            1            8         1000         0.51         0.61         0.56        26.23\n"
	"            0      4194304 time-out.; Time limit is over\n"
	"\n"
	"#-----------------------------------------------------------------------------\n"
	"# Benchmarking Allreduce \n"
	"# #processes = 4; rank order (rowwise): \n"
	"#-----------------------------------------------------------------------------\n"
	"       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]\n"
	"            0         1000         0.03         0.04         0.03\n"
	"            4         1000         1.20         1.40         1.30\n"
	"      1048576           40       880.00       900.00       890.00\n"
	"\n"
	"#---------------------------------------------------\n"
	"# Benchmarking Barrier \n"
	"# #processes = 4 \n"
	"#---------------------------------------------------\n"
	" #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]\n"
	"         1000         1.51         1.55         1.53\r\n"
	"\n\n# All processes entering MPI_Finalize\n";

static void ignore(void *ctx, const struct imb_table *t, const struct imb_row *r, const char *msg)
{
	(void)ctx;
	(void)t;
	(void)r;
	(void)msg;
}

static void one(const char *text, size_t len)
{
	struct imb_output o;
	struct imb_check_opts opts;
	struct verr err;
	char *js;

	if (imb_parse("fuzz", text, len, &o, &err) < 0)
		return;
	imb_check_defaults(&opts);
	opts.mbyte = imb_guess_mbyte(&o);
	imb_check(&o, &opts, ignore, NULL);
	opts.fewer_reps_ok = true;
	imb_check(&o, &opts, NULL, NULL);
	for (size_t i = 0; i < o.ntables; i++)
		imb_find(&o, o.tables[i].name, o.tables[i].nprocs);
	js = imb_output_json(&o);
	free(js);
	imb_output_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t slen = sizeof(sample) - 1;
	size_t off, cut, n;
	char *buf;

	one((const char *)data, size);
	if (size < 3)
		return 0;
	/* bytes 0-1: where; byte 2: how many sample bytes the rest replaces */
	off = (((size_t)data[0] << 8) | data[1]) % (slen + 1);
	cut = data[2] % 64;
	if (cut > slen - off)
		cut = slen - off;
	n = off + (size - 3) + (slen - off - cut);
	buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, sample, off);
	memcpy(buf + off, data + 3, size - 3);
	memcpy(buf + off + (size - 3), sample + off + cut, slen - off - cut);
	one(buf, n);
	free(buf);
	return 0;
}
