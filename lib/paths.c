/*
 * Where vhpc finds its programs, configs, state and runtime files.
 */
#include "lib/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *self_dir(void)
{
	static char dir[PATH_MAX];

	if (!dir[0]) {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
		char *slash;

		if (n <= 0) {
			strcpy(dir, ".");
			return dir;
		}
		dir[n] = 0;
		slash = strrchr(dir, '/');
		if (slash && slash != dir)
			*slash = 0;
	}
	return dir;
}

const char *vhpc_config_dir(void)
{
	static char dir[PATH_MAX];
	const char *env = getenv("VHPC_CONFIG_DIR");
	struct stat st;

	if (env && *env)
		return env;
	if (!dir[0]) {
		/* The checkout's configs only for programs of a build tree,
		 * which the build's stamp marks: installed into /usr/local/bin,
		 * <self>/../../configs would be whatever /usr/configs is. */
		snprintf(dir, sizeof(dir), "%s/../deps.mk", self_dir());
		if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
			snprintf(dir, sizeof(dir), "%s/../../configs", self_dir());
			if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
				return dir;
		}
		snprintf(dir, sizeof(dir), "/etc/vhpc");
	}
	return dir;
}

const char *vhpc_state_dir(void)
{
	const char *env = getenv("VHPC_STATE_DIR");

	return env && *env ? env : "/var/lib/vhpc";
}

const char *vhpc_run_dir(void)
{
	const char *env = getenv("VHPC_RUN_DIR");

	return env && *env ? env : "/run/vhpc";
}

const char *vhpc_service_dir(void)
{
	const char *env = getenv("VHPC_SERVICE_DIR");

	return env && *env ? env : "/run/vhpc-service";
}

const char *vhpc_prog(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", self_dir(), name);
	if (access(buf, X_OK) == 0)
		return buf;
	snprintf(buf, len, "%s", name);
	return buf;
}
