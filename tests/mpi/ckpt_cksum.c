/*
 * ckpt_cksum: a deterministic MPI program for the checkpoint tests (issue
 * 36): a job that can be interrupted mid-exchange, checkpointed, killed,
 * restarted elsewhere, and must still end with the checksum an
 * uninterrupted run prints.  Each round every rank sends every other rank
 * data derived from (round, sender, receiver), receives theirs and checks
 * it byte for byte, takes part in an allreduce, optionally writes and
 * re-reads a block of a scratch file, and folds all it received into its
 * running FNV-1a (cksum_fold.h).  Rank 0 prints the job-wide checksum
 * every --every rounds and at the end; nothing it prints as a checksum
 * depends on timing, host, pid or address.  --reference computes the same
 * lines in one process without MPI.  README.md in this folder has the
 * options and the definition.
 */
#include "cksum_fold.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 1000000000ull
#define MAX_BYTES (64ull << 20)
#define MAX_SLEEP_MS 3600000ull
#define MAX_RANKS 4096ull
/* Send and receive buffers of one rank together, at most. */
#define MAX_BUFFERS (1ull << 30)

struct opts {
	struct ck_params p;
	uint64_t sleep_ms;
	const char *state;
	const char *scratch_dir;
	int reference;
};

static const char usage[] =
	"usage: ckpt_cksum --rounds N [--bytes B] [--every K] [--sleep-ms M] [--state FILE] [--scratch DIR]\n"
	"       ckpt_cksum --reference --ranks P --rounds N [the same options]\n";

/* A whole number from LO to HI, or -1 (MSG says why, naming the option). */
static int num(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *msg, size_t n)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!s) {
		snprintf(msg, n, "%s needs a value", opt);
		return -1;
	}
	v = strtoull(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end || errno || v < lo || v > hi) {
		snprintf(msg, n, "%s: '%.40s' is not a whole number from %" PRIu64 " to %" PRIu64, opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o, char *msg, size_t n)
{
	uint64_t v;
	int have_rounds = 0, have_ranks = 0;

	memset(o, 0, sizeof(*o));
	o->p.bytes = 4096;
	o->p.every = 10;
	o->p.ranks = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--reference")) {
			o->reference = 1;
			continue;
		}
		if (!strcmp(a, "--rounds")) {
			if (num(a, val, 1, MAX_ROUNDS, &o->p.rounds, msg, n) < 0)
				return -1;
			have_rounds = 1;
		} else if (!strcmp(a, "--bytes")) {
			if (num(a, val, 1, MAX_BYTES, &o->p.bytes, msg, n) < 0)
				return -1;
		} else if (!strcmp(a, "--every")) {
			if (num(a, val, 1, MAX_ROUNDS, &o->p.every, msg, n) < 0)
				return -1;
		} else if (!strcmp(a, "--sleep-ms")) {
			if (num(a, val, 0, MAX_SLEEP_MS, &o->sleep_ms, msg, n) < 0)
				return -1;
		} else if (!strcmp(a, "--ranks")) {
			if (num(a, val, 1, MAX_RANKS, &v, msg, n) < 0)
				return -1;
			o->p.ranks = (int)v;
			have_ranks = 1;
		} else if (!strcmp(a, "--state") || !strcmp(a, "--scratch")) {
			if (!val || !*val) {
				snprintf(msg, n, "%s needs a path", a);
				return -1;
			}
			if (!strcmp(a, "--state"))
				o->state = val;
			else
				o->scratch_dir = val;
		} else {
			snprintf(msg, n, "unknown argument '%.60s'", a);
			return -1;
		}
		i++;
	}
	if (!have_rounds) {
		snprintf(msg, n, "--rounds is required");
		return -1;
	}
	if (o->reference && !have_ranks) {
		snprintf(msg, n, "--reference needs --ranks P (the number of ranks of the run it stands for)");
		return -1;
	}
	if (!o->reference && have_ranks) {
		snprintf(msg, n, "--ranks is for --reference only: under mpirun the ranks are mpirun's");
		return -1;
	}
	o->p.scratch = o->scratch_dir != NULL;
	return 0;
}

static void print_round(uint64_t round, uint64_t sum, const struct ck_params *p)
{
	if (round % p->every == 0)
		printf("round %" PRIu64 " checksum %016" PRIx64 "\n", round, sum);
	if (round == p->rounds)
		printf("final checksum %016" PRIx64 " rounds %" PRIu64 " ranks %d\n", sum, p->rounds, p->ranks);
}

static void ref_emit(uint64_t round, uint64_t sum, void *arg)
{
	print_round(round, sum, arg);
}

/* The state file says how far the run got, for a test to wait on (a new
 * file renamed over the old, so a reader never sees half a line).  Only
 * open while it is written: a checkpoint finds no descriptor of it. */
static int write_state(const char *path, uint64_t round, uint64_t sum, const struct ck_params *p)
{
	char tmp[4096], line[160];
	int fd, len, ok;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	len = snprintf(line, sizeof(line), "round %" PRIu64 " of %" PRIu64 " checksum %016" PRIx64 " ranks %d%s\n",
		       round, p->rounds, sum, p->ranks, round == p->rounds ? " final" : "");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ok = write(fd, line, (size_t)len) == len;
	ok = close(fd) == 0 && ok;
	return ok && rename(tmp, path) == 0 ? 0 : -1;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A rank that finds something wrong says what and where, in one write (so
 * mpirun's own messages cannot split the line), and ends the job with
 * CODE. */
__attribute__((format(printf, 4, 5), noreturn)) static void die(int rank, uint64_t round, int code, const char *fmt, ...)
{
	char line[1024];
	int n;
	va_list ap;

	n = snprintf(line, sizeof(line), "ckpt_cksum: rank %d round %" PRIu64 ": ", rank, round);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	if (write(STDERR_FILENO, line, strlen(line)) < 0)
		perror("ckpt_cksum");
	MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

static int full_io(int write_it, int fd, unsigned char *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = write_it ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Round R's block of the scratch file: written into its slot, synced (so
 * the guest really writes its disk), read back and checked, and the block
 * of round R-1 read and checked too: a restore that lost what was written
 * before the checkpoint fails here, naming the file. */
static uint64_t scratch_round(const char *path, int rank, uint64_t r, unsigned char *blk, size_t len, uint64_t h)
{
	off_t here = (off_t)(((r - 1) % CK_DISK_SLOTS) * len), before = (off_t)(((r + CK_DISK_SLOTS - 2) % CK_DISK_SLOTS) * len);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (r == 1 ? O_TRUNC : 0), 0600);

	if (fd < 0)
		die(rank, r, 4, "cannot open %s: %s", path, strerror(errno));
	ck_fill(ck_seed(CK_DISK, r, (uint64_t)rank, 0), blk, len);
	errno = 0;
	if (full_io(1, fd, blk, len, here) < 0 || fdatasync(fd) < 0)
		die(rank, r, 4, "cannot write %s: %s", path, errno ? strerror(errno) : "short write");
	memset(blk, 0, len);
	if (full_io(0, fd, blk, len, here) < 0)
		die(rank, r, 5, "cannot read back this round's block of %s", path);
	if (ck_mismatch(ck_seed(CK_DISK, r, (uint64_t)rank, 0), blk, len) != (size_t)-1)
		die(rank, r, 5, "this round's block of %s reads back different from what was written", path);
	h = ck_fnv(h, blk, len);
	if (r >= 2 && full_io(0, fd, blk, len, before) < 0)
		die(rank, r, 5, "cannot read the previous round's block of %s (truncated?)", path);
	if (r >= 2 && ck_mismatch(ck_seed(CK_DISK, r - 1, (uint64_t)rank, 0), blk, len) != (size_t)-1)
		die(rank, r, 5, "the previous round's block of %s is not what was written", path);
	close(fd);
	return h;
}

/* Where each rank runs, and so which BTL Open MPI should pick between
 * two of them; Open MPI itself says what it picked with
 * OMPI_MCA_btl_base_verbose=1 and the vmshm BTL's counters with
 * OMPI_MCA_btl_vmshm_stats=1 (README.md). */
#define WHERE_LEN 192
static void print_placement(int rank, int size)
{
	char mine[WHERE_LEN], host[64] = "?", *all = NULL;
	const char *node = getenv("VHPC_HOST_ID"), *region = getenv("VHPC_VMSHM_PATH");

	gethostname(host, sizeof(host) - 1);
	memset(mine, 0, sizeof(mine));
	snprintf(mine, sizeof(mine), "%.60s %.60s %d", host, node && *node ? node : "-", region && *region ? 1 : 0);
	if (rank == 0 && !(all = malloc((size_t)size * WHERE_LEN)))
		die(rank, 0, 1, "out of memory");
	MPI_Gather(mine, WHERE_LEN, MPI_CHAR, all, WHERE_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	for (int a = 0; a < size; a++) {
		char ha[64], na[64];
		int va;

		if (sscanf(all + a * WHERE_LEN, "%63s %63s %d", ha, na, &va) != 3)
			continue;
		printf("# rank %d: guest %s, host %s, vmshm region %s\n", a, ha, na, va ? "yes" : "no");
		for (int b = a + 1; b < size; b++) {
			char hb[64], nb[64];
			int vb;

			if (sscanf(all + b * WHERE_LEN, "%63s %63s %d", hb, nb, &vb) != 3)
				continue;
			printf("#   rank %d <-> rank %d: %s\n", a, b,
			       !strcmp(ha, hb)                             ? "same guest: vader expected"
			       : strcmp(na, "-") && !strcmp(na, nb) && va && vb ? "same host, two guests: vmshm expected"
										: "tcp expected");
		}
	}
	free(all);
}

static int run_mpi(const struct opts *o)
{
	int rank, size, peers;
	struct ck_params p = o->p;
	unsigned char *sbuf, *rbuf, *blk = NULL;
	uint64_t h = CK_FNV_OFFSET, *all = NULL;
	MPI_Request *req;
	char scratch_path[4096] = "";

	MPI_Init(NULL, NULL);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	p.ranks = size;
	peers = size - 1;
	if ((uint64_t)peers * p.bytes * 2 + (p.scratch ? p.bytes : 0) > MAX_BUFFERS) {
		if (rank == 0)
			fprintf(stderr, "ckpt_cksum: --bytes %" PRIu64 " with %d ranks needs more than %llu MiB of buffers per rank\n",
				p.bytes, size, MAX_BUFFERS >> 20);
		MPI_Finalize();
		return 2;
	}
	if (p.scratch && snprintf(scratch_path, sizeof(scratch_path), "%s/ckpt_cksum.%d", o->scratch_dir, rank) >=
				 (int)sizeof(scratch_path)) {
		if (rank == 0)
			fprintf(stderr, "ckpt_cksum: --scratch: the path is too long\n");
		MPI_Finalize();
		return 2;
	}
	sbuf = malloc((size_t)(peers ? peers : 1) * p.bytes);
	rbuf = malloc((size_t)(peers ? peers : 1) * p.bytes);
	req = malloc(sizeof(*req) * (size_t)(2 * peers + 1));
	if (p.scratch)
		blk = malloc(p.bytes);
	if (rank == 0)
		all = malloc(sizeof(*all) * (size_t)size);
	if (!sbuf || !rbuf || !req || (p.scratch && !blk) || (rank == 0 && !all))
		die(rank, 0, 1, "out of memory");
	print_placement(rank, size);

	for (uint64_t r = 1; r <= p.rounds; r++) {
		uint64_t mine[CK_ALLRED_WORDS], sum[CK_ALLRED_WORDS], st;
		int n = 0, tag = (int)(r % 32768);

		/* Every send is posted before the sleep, so a checkpoint taken
		 * while the ranks sleep finds messages in flight. */
		for (int i = 0, d = 0; d < size; d++) {
			if (d == rank)
				continue;
			MPI_Irecv(rbuf + (size_t)i * p.bytes, (int)p.bytes, MPI_BYTE, d, tag, MPI_COMM_WORLD, &req[n++]);
			i++;
		}
		for (int i = 0, d = 0; d < size; d++) {
			if (d == rank)
				continue;
			ck_fill(ck_seed(CK_MSG, r, (uint64_t)rank, (uint64_t)d), sbuf + (size_t)i * p.bytes, p.bytes);
			MPI_Isend(sbuf + (size_t)i * p.bytes, (int)p.bytes, MPI_BYTE, d, tag, MPI_COMM_WORLD, &req[n++]);
			i++;
		}
		if (o->sleep_ms)
			sleep_ms(o->sleep_ms);
		MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
		for (int i = 0, d = 0; d < size; d++) {
			size_t bad;

			if (d == rank)
				continue;
			bad = ck_mismatch(ck_seed(CK_MSG, r, (uint64_t)d, (uint64_t)rank), rbuf + (size_t)i * p.bytes, p.bytes);
			if (bad != (size_t)-1)
				die(rank, r, 3, "the %" PRIu64 " bytes from rank %d differ from what it sent, first at byte %zu",
				    p.bytes, d, bad);
			h = ck_fnv(h, rbuf + (size_t)i * p.bytes, p.bytes);
			i++;
		}
		st = ck_seed(CK_ALLRED, r, (uint64_t)rank, 0);
		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			mine[i] = ck_next(&st);
		MPI_Allreduce(mine, sum, CK_ALLRED_WORDS, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		for (int i = 0; i < CK_ALLRED_WORDS; i++)
			h = ck_fnv_u64(h, sum[i]);
		if (p.scratch)
			h = scratch_round(scratch_path, rank, r, blk, p.bytes, h);
		if (r % p.every == 0 || r == p.rounds) {
			MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
			if (rank == 0) {
				uint64_t c = ck_combine(all, size);

				print_round(r, c, &p);
				if (o->state && write_state(o->state, r, c, &p) < 0)
					fprintf(stderr, "ckpt_cksum: cannot write the state file %s: %s\n", o->state,
						strerror(errno));
			}
		}
	}
	free(sbuf);
	free(rbuf);
	free(req);
	free(blk);
	free(all);
	MPI_Finalize();
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	char msg[256];
	const char *err = NULL, *wr = getenv("OMPI_COMM_WORLD_RANK");

	/* Progress lines reach mpirun (and the job's spool) as they are made. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse(argc, argv, &o, msg, sizeof(msg)) < 0) {
		/* Every rank fails alike; one says why. */
		if (!wr || !strcmp(wr, "0"))
			fprintf(stderr, "ckpt_cksum: %s\n%s", msg, usage);
		return 2;
	}
	if (o.reference) {
		ck_reference(&o.p, ref_emit, &o.p, &err);
		if (err) {
			fprintf(stderr, "ckpt_cksum: --reference: %s\n", err);
			return 1;
		}
		return 0;
	}
	return run_mpi(&o);
}
