/* Feeds arbitrary bytes to the bind rules: up to four NUL-separated specs,
 * the first a site bind, the next job binds, the last the workdir. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/binds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char buf[2048], why[512], wdir[256], note[256];
	const char *f[4] = { "", "", "", "" };
	struct bind b;
	static struct bind_list l;
	int n = 0;

	if (size >= sizeof(buf))
		size = sizeof(buf) - 1;
	memcpy(buf, data, size);
	buf[size] = 0;
	for (char *s = buf; n < 4; n++) {
		f[n] = s;
		s += strlen(s);
		if (s >= buf + size)
			break;
		s++;
	}
	bind_parse(f[0], &b, why, sizeof(why));
	struct bind_req r = { .site = f, .nsite = 1, .allow = f + 1, .nallow = 1, .user = f + 1, .nuser = 2,
			      .home = f[2], .workdir = f[3] };
	if (bind_plan(&r, &l, wdir, sizeof(wdir), note, sizeof(note), why, sizeof(why)) == 0)
		for (int i = 0; i < l.n; i++)
			bind_holding(&l, l.v[i].dst);
	return 0;
}
