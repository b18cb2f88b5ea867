/*
 * swap-paths A B PERIOD_US SECONDS: exchanges the names A and B
 * (renameat2 RENAME_EXCHANGE, one atomic step) every PERIOD_US
 * microseconds for SECONDS, as the user who runs it.  The attack of
 * bind-symlink-swap.t: one name is a folder of the user's, the other a
 * symlink to a folder only root can reach, so that a path through A is
 * the user's folder at one moment and root's at the next.  The two states
 * last about as long as each other, which is what gives a check-then-use
 * race its best odds when the attacker cannot see when each side looks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	struct timespec period, end, now;
	long long swaps = 0;
	char *e1, *e2;
	long us, secs;

	if (argc != 5) {
		fprintf(stderr, "usage: swap-paths A B PERIOD_US SECONDS\n");
		return 2;
	}
	us = strtol(argv[3], &e1, 10);
	secs = strtol(argv[4], &e2, 10);
	if (*e1 || *e2 || us < 0 || us > 1000000 || secs < 1) {
		fprintf(stderr, "swap-paths: PERIOD_US 0..1000000 and SECONDS >= 1\n");
		return 2;
	}
	period.tv_sec = 0;
	period.tv_nsec = us * 1000;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	do {
		if (renameat2(AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) < 0) {
			fprintf(stderr, "swap-paths: exchanging %s and %s: %s\n", argv[1], argv[2], strerror(errno));
			return 1;
		}
		swaps++;
		if (us)
			nanosleep(&period, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	/* An even count leaves A where it started. */
	if (swaps % 2 && renameat2(AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) == 0)
		swaps++;
	printf("%lld swaps\n", swaps);
	return 0;
}
