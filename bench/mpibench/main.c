/*
 * vhpc-mpibench: IMB-MPI1's methodology and output for PingPong, PingPing,
 * Sendrecv, Exchange, Allreduce, Bcast and Barrier.
 *
 * Arguments are parsed before MPI_Init, so a bad command line fails fast and
 * the same way on every rank, with or without mpirun.  A -msglen file is
 * read by rank 0 only and broadcast, because in a virtual cluster the other
 * ranks run in guests that may not see the file.
 */
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "mpibench.h"

#define ME "vhpc-mpibench"

/* Before MPI_Init the rank is only known from the launcher's environment;
 * only rank 0 (or a process started without a launcher) prints errors. */
static bool rank0_by_env(void)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL };

	for (int i = 0; vars[i]; i++) {
		const char *v = getenv(vars[i]);

		if (v)
			return !strcmp(v, "0");
	}
	return true;
}

/* VHPC_MPIBENCH_TEST_CORRUPT=RANK[:BENCHMARK] -- for tests only: in check
 * mode, RANK flips one received byte per sample, so tests can prove that
 * corruption is detected.  Never set it for real measurements. */
static int parse_corrupt(struct mb_ctx *c, struct verr *err)
{
	const char *v = getenv("VHPC_MPIBENCH_TEST_CORRUPT"), *colon;
	char num[16];
	long long r;

	c->corrupt_rank = -1;
	c->corrupt_bench = -1;
	if (!v || !*v)
		return 0;
	colon = strchr(v, ':');
	snprintf(num, sizeof(num), "%.*s", colon ? (int)(colon - v) : (int)strlen(v), v);
	if (parse_ll(num, 0, 1 << 30, &r) < 0)
		return verr_set(err, "VHPC_MPIBENCH_TEST_CORRUPT='%s': expected RANK[:BENCHMARK]", v);
	if (colon && (c->corrupt_bench = mb_bench_lookup(colon + 1)) < 0)
		return verr_set(err, "VHPC_MPIBENCH_TEST_CORRUPT='%s': unknown benchmark", v);
	c->corrupt_rank = (int)r;
	return 0;
}

/* Rank 0 reads and parses the -msglen file; everyone gets the lengths or
 * the error. */
static int load_lengths(const struct mb_opts *o, int rank, long long **lens, size_t *n,
			struct verr *err)
{
	long long cnt = 0;
	int rc = 0;

	*lens = NULL;
	*n = 0;
	if (rank == 0) {
		char *text = NULL;
		size_t len;

		if (read_file(o->msglen_file, &text, &len, MB_MAX_MSGLEN_FILE, err) < 0)
			rc = verr_wrap(err, "-msglen");
		else if (mb_parse_msglen(o->msglen_file, text, lens, n, err) < 0)
			rc = -1;
		free(text);
		cnt = rc < 0 ? -1 : (long long)*n;
	}
	MPI_Bcast(&cnt, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	if (cnt < 0)
		return -1;     /* rank 0 has the message */
	if (rank != 0) {
		*lens = malloc((size_t)cnt * sizeof(**lens));
		if (!*lens) {
			fprintf(stderr, ME ": out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		*n = (size_t)cnt;
	}
	MPI_Bcast(*lens, (int)cnt, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	return 0;
}

static void sample(struct mb_ctx *c, enum mb_bench b, MPI_Comm comm, long long size)
{
	long long reps = imb_reps(size, c->o->iter, c->o->overall_vol), defects = 0;
	double t, tmin = 0, tmax = 0, tsum = 0;
	int rank, n;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &n);
	c->defects = 0;
	t = mb_measure(c, b, comm, size, reps);
	MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
	MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
	MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
	MPI_Reduce(&c->defects, &defects, 1, MPI_LONG_LONG, MPI_SUM, 0, comm);
	c->defects_total += c->defects;
	if (rank == 0)
		mb_print_row(b, size, reps, tmin, tmax, tsum / n, defects, c->o->check);
}

static void run_bench(struct mb_ctx *c, enum mb_bench b, const long long *sizes, size_t nsizes)
{
	int counts[64], ncounts;

	if (b == MB_PINGPONG || b == MB_PINGPING) {
		if (c->wsize < 2) {
			if (c->wrank == 0)
				printf("\n# %s skipped: it needs 2 processes, this run has 1\n",
				       mb_bench_names[b]);
			return;
		}
		counts[0] = 2;
		ncounts = 1;
	} else {
		ncounts = mb_proc_counts(c->wsize, c->o->npmin, c->o->np_only, counts, 64);
	}
	for (int k = 0; k < ncounts; k++) {
		int p = counts[k];
		MPI_Comm comm;

		/* The first p ranks run; the others wait in MPI_Barrier, as in IMB. */
		MPI_Comm_split(MPI_COMM_WORLD, c->wrank < p ? 0 : MPI_UNDEFINED, c->wrank, &comm);
		if (c->wrank == 0)
			mb_print_table_header(b, p, c->wsize - p, c->o->check);
		if (comm != MPI_COMM_NULL) {
			if (b == MB_BARRIER) {
				sample(c, b, comm, 0);
			} else {
				for (size_t i = 0; i < nsizes; i++) {
					/* Reductions work on floats: IMB skips sizes that are not whole floats. */
					if (b == MB_ALLREDUCE && sizes[i] % (long long)sizeof(float))
						continue;
					sample(c, b, comm, sizes[i]);
				}
			}
			MPI_Comm_free(&comm);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
}

static int alloc_buffers(struct mb_ctx *c, long long maxsize)
{
	size_t bytes = 2 * (size_t)(maxsize > 64 ? maxsize : 64);
	void *s = NULL, *r = NULL;
	int bad = 0, anybad = 0;

	if (posix_memalign(&s, 4096, bytes) || posix_memalign(&r, 4096, bytes))
		bad = 1;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (anybad) {
		if (c->wrank == 0)
			fprintf(stderr, ME ": cannot allocate 2 x %zu bytes of message buffers on some rank (lower -msglog/-maxsize)\n",
				bytes);
		free(s);
		free(r);
		return -1;
	}
	/* Touch every page now, not during the first measurement. */
	memset(s, 0, bytes);
	memset(r, 0, bytes);
	c->sbuf = s;
	c->rbuf = r;
	return 0;
}

int main(int argc, char **argv)
{
	struct mb_opts o;
	struct mb_ctx c;
	struct verr err;
	long long *lens = NULL, *sizes = NULL, total = 0;
	size_t nlens = 0, nsizes = 0;
	int rc = 0;

	memset(&c, 0, sizeof(c));
	c.o = &o;
	if (mb_parse_args(argc, argv, &o, &err) < 0 || parse_corrupt(&c, &err) < 0) {
		if (rank0_by_env())
			fprintf(stderr, ME ": %s\n", err.msg);
		return 2;
	}
	if (o.help) {
		if (rank0_by_env())
			mb_usage(stdout);
		return 0;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &c.wrank);
	MPI_Comm_size(MPI_COMM_WORLD, &c.wsize);
	if ((o.msglen_file && load_lengths(&o, c.wrank, &lens, &nlens, &err) < 0) ||
	    mb_sizes(&o, o.msglen_file ? lens : NULL, nlens, &sizes, &nsizes, &err) < 0) {
		if (c.wrank == 0)
			fprintf(stderr, ME ": %s\n", err.msg);
		free(lens);
		MPI_Finalize();
		return 2;
	}
	if (alloc_buffers(&c, sizes[nsizes - 1]) < 0) {
		free(lens);
		free(sizes);
		MPI_Finalize();
		return 1;
	}
	if (c.wrank == 0)
		mb_print_header(&o, argc, argv, sizes, nsizes, o.msglen_file != NULL);
	if (o.show_hosts)
		mb_show_hosts(MPI_COMM_WORLD);
	for (int b = 0; b < MB_NBENCH; b++)
		if (o.run[b])
			run_bench(&c, (enum mb_bench)b, sizes, nsizes);
	MPI_Allreduce(&c.defects_total, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (c.wrank == 0) {
		if (o.check && total)
			printf("\n# Data check FAILED: %lld wrong bytes received\n", total);
		else if (o.check)
			printf("\n# Data check: every received byte was as sent\n");
		mb_print_footer();
		if (total)
			fprintf(stderr, ME ": data check failed: %lld wrong bytes received (see above)\n",
				total);
	}
	if (total)
		rc = 1;
	free(lens);
	free(sizes);
	free(c.sbuf);
	free(c.rbuf);
	MPI_Finalize();
	return rc;
}
