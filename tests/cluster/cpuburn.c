/*
 * A job of known cost for tests/cluster/history.t: touches MIB MiB of
 * memory (every page, so it is resident and counted), then spins until
 * this process has used SECONDS of CPU time by its own clock, and says
 * what it used.  Built without sanitizers: it runs in guests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double want, used;
	long mib;
	char *mem, *end;
	volatile unsigned long spin = 0;

	if (argc != 3 || (want = strtod(argv[1], &end)) <= 0 || *end || (mib = strtol(argv[2], &end, 10)) < 0 || *end) {
		fprintf(stderr, "usage: cpuburn SECONDS MIB\n");
		return 2;
	}
	if (!(mem = malloc((size_t)mib << 20 | 1))) {
		perror("cpuburn: malloc");
		return 1;
	}
	memset(mem, 0x5a, (size_t)mib << 20);
	while ((used = cpu_s()) < want)
		for (int i = 0; i < 1000000; i++)
			spin++;
	printf("cpuburn: %.3f s of CPU, %ld MiB touched (%d)\n", used, mib, mem[mib << 19]);
	free(mem);
	return 0;
}
