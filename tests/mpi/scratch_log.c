/*
 * scratch_log: keeps a guest busy writing its scratch disk while a test
 * checkpoints it (issue 36, item 4), then says whether every record it
 * wrote is still there and intact after the restore.  `write FILE'
 * appends numbered records, each with its own checksum, fdatasync'ing
 * each, and prints how many are on the disk once a second (a test takes
 * the count it saw before the checkpoint as what must survive); it stops
 * at SIGTERM.  `check FILE' reads them all back.  Plain C, no MPI: it runs
 * in the guests of tests/cluster/kvm-ckpt-more.t beside ckpt_cksum.
 */
#include "cksum_fold.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* "NNNNNNNNNN PAYLOAD--16-HEX FNV1A---16-HEX\n": the payload comes from
 * the record's number, the checksum covers everything before it. */
#define REC_LEN 45
/* Between records: busy, but leaving a 1-vCPU guest under TCG its MPI rank. */
#define PAUSE_NS 5000000L

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void record(uint64_t n, char out[REC_LEN + 1])
{
	uint64_t s = ck_seed(CK_DISK, n, 0x5c, 0x10);
	int k = snprintf(out, REC_LEN + 1, "%010" PRIu64 " %016" PRIx64 " ", n, ck_next(&s));

	snprintf(out + k, REC_LEN + 1 - k, "%016" PRIx64 "\n", ck_fnv(CK_FNV_OFFSET, out, (size_t)k));
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int do_write(const char *path)
{
	struct sigaction sa = { .sa_handler = on_term };
	struct timespec pause = { 0, PAUSE_NS };
	char rec[REC_LEN + 1];
	uint64_t n = 0;
	double last = now();
	int fd;

	sigaction(SIGTERM, &sa, NULL);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "scratch_log %s: cannot create it: %s\n", path, strerror(errno));
		return 1;
	}
	while (!stop) {
		record(n + 1, rec);
		if (write(fd, rec, REC_LEN) != REC_LEN || fdatasync(fd) != 0) {
			fprintf(stderr, "scratch_log %s: record %" PRIu64 ": %s\n", path, n + 1,
				errno ? strerror(errno) : "short write");
			close(fd);
			return 1;
		}
		n++;
		if (now() - last >= 1.0) {
			printf("scratch_log %s: %" PRIu64 " records\n", path, n);
			fflush(stdout);
			last = now();
		}
		nanosleep(&pause, NULL);
	}
	close(fd);
	printf("scratch_log %s: wrote %" PRIu64 " records\n", path, n);
	return 0;
}

static int do_check(const char *path)
{
	char want[REC_LEN + 1], got[REC_LEN];
	uint64_t n = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		printf("scratch_log %s: cannot open it: %s\n", path, strerror(errno));
		return 1;
	}
	for (;;) {
		size_t have = 0;

		while (have < REC_LEN && (r = read(fd, got + have, REC_LEN - have)) > 0)
			have += (size_t)r;
		if (have == 0)
			break;
		record(n + 1, want);
		if (have < REC_LEN || memcmp(got, want, REC_LEN) != 0) {
			printf("scratch_log %s: record %" PRIu64 " (byte %" PRIu64 ") is not what was written\n", path,
			       n + 1, n * REC_LEN);
			close(fd);
			return 1;
		}
		n++;
	}
	close(fd);
	printf("scratch_log %s: %" PRIu64 " records intact\n", path, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2]);
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return do_check(argv[2]);
	fprintf(stderr, "usage: scratch_log write FILE | scratch_log check FILE\n");
	return 2;
}
