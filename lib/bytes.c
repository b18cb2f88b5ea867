/*
 * Random bytes and hex.
 */
#include "lib/bytes.h"

#include <sodium.h>
#include <string.h>

void random_bytes(void *buf, size_t len)
{
	/* sodium_init is idempotent and thread-safe; randombytes needs it. */
	if (sodium_init() < 0)
		abort();
	randombytes_buf(buf, len);
}

void hex_encode(const void *buf, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * len] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_decode(const char *hex, void *buf, size_t len)
{
	uint8_t *b = buf;

	if (strlen(hex) != 2 * len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

bool sha256_hex_ok(const char *s)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return s && n == 64;
}
