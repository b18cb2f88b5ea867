#include "tests/fixture.h"
#include "lib/err.h"
#include "lib/fsutil.h"

#include <stdio.h>
#include <stdlib.h>

int fx_tmpdir(char *dir, size_t len, const char *tag)
{
	int n = snprintf(dir, len, "/tmp/vhpc-%s-XXXXXX", tag);

	if (n < 0 || (size_t)n >= len)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

int fx_rmdir(const char *dir)
{
	struct verr err;

	if (rm_rf(dir, &err) < 0) {
		fprintf(stderr, "fx_rmdir: %s\n", err.msg);
		return -1;
	}
	return 0;
}
