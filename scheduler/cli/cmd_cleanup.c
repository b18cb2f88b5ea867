/* vhpc cleanup: what a killed `vhpc run` or agent left behind. */
#include "lib/err.h"
#include "lib/log.h"
#include "cli.h"
#include "nodeagent/nodeagent.h"

#include <stdio.h>
#include <string.h>

int cmd_cleanup(int argc, char **argv)
{
	struct verr err;
	int removed = 0;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: vhpc cleanup\n"
		       "Removes the guests, network namespaces, links, cgroups, mounts and shm files\n"
		       "of jobs whose owner is gone (killed, crashed).  Running jobs are not touched.\n");
		return 0;
	}
	if (argc > 1)
		return usage_error("cleanup", "takes no arguments");
	if (na_cleanup_stale(&removed, &err) < 0) {
		log_err("%s", err.msg);
		return 1;
	}
	printf("removed %d leftover resource%s\n", removed, removed == 1 ? "" : "s");
	return 0;
}
