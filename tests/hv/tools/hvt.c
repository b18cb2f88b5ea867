/* hvt: the host side of the hv device tests (the tests/hv .t files).
 *
 *   hvt pattern FILE SIZE SEED           write SIZE bytes of test pattern
 *   hvt checkpat FILE OFF LEN SEED       exit 0 if FILE[OFF, OFF+LEN) holds it
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The same formula as tests/hv/kit/virtio.h. */
static uint8_t pattern_byte(uint64_t o, unsigned seed)
{
	uint32_t x = (uint32_t)o * 2654435761u + seed * 40503u + (uint32_t)(o >> 32);

	return (uint8_t)(x >> 24 ^ x >> 11);
}

static int die(const char *what)
{
	fprintf(stderr, "hvt: %s: %s\n", what, strerror(errno));
	return 2;
}

static int cmd_pattern(char **a)
{
	uint64_t size = strtoull(a[1], NULL, 0);
	unsigned seed = (unsigned)strtoul(a[2], NULL, 0);
	int fd = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	uint8_t buf[4096];

	if (fd < 0)
		return die(a[0]);
	for (uint64_t o = 0; o < size; o += sizeof(buf)) {
		size_t n = size - o < sizeof(buf) ? size - o : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern_byte(o + i, seed);
		if (write(fd, buf, n) != (ssize_t)n)
			return die(a[0]);
	}
	return close(fd) < 0 ? die(a[0]) : 0;
}

static int cmd_checkpat(char **a)
{
	uint64_t off = strtoull(a[1], NULL, 0), len = strtoull(a[2], NULL, 0);
	unsigned seed = (unsigned)strtoul(a[3], NULL, 0);
	int fd = open(a[0], O_RDONLY);
	uint8_t b;

	if (fd < 0)
		return die(a[0]);
	for (uint64_t i = 0; i < len; i++) {
		if (pread(fd, &b, 1, (off_t)(off + i)) != 1)
			return die(a[0]);
		if (b != pattern_byte(off + i, seed)) {
			fprintf(stderr, "hvt: %s: byte at %llu is 0x%02x, pattern %u says 0x%02x\n", a[0],
				(unsigned long long)(off + i), b, seed, pattern_byte(off + i, seed));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "pattern"))
		return cmd_pattern(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "checkpat"))
		return cmd_checkpat(argv + 2);
	fprintf(stderr, "usage: hvt pattern FILE SIZE SEED | checkpat FILE OFF LEN SEED\n");
	return 2;
}
