/*
 * vhpc-sysexec: how vhpc's guest programs run in an imported image, whose
 * C library may be older than the one they were built against.  The image
 * gets them with every library they need, the dynamic loader included, in
 * VHPC_SYS_DIR; this static program, installed as /usr/local/bin/<name>,
 * runs <name> from there through that loader.  What they start (orted,
 * mpirun, the job's ranks) runs on the image's own libraries: the loader's
 * --library-path is not inherited.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VHPC_SYS_DIR "/usr/local/lib/vhpc/sys"

int main(int argc, char **argv)
{
	static const char *const allowed[] = { "vhpc-guestd", "vhpc-rsh", NULL };
	const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;
	char prog[512];
	char **v;
	int k = 0;

	name = name ? name + 1 : argc > 0 ? argv[0] : "";
	for (k = 0; allowed[k] && strcmp(allowed[k], name); k++)
		;
	if (!allowed[k]) {
		fprintf(stderr, "vhpc-sysexec: runs vhpc-guestd or vhpc-rsh (as which it is installed), not '%s'\n", name);
		return 127;
	}
	snprintf(prog, sizeof(prog), "%s/%s", VHPC_SYS_DIR, name);
	v = calloc((size_t)argc + 8, sizeof(char *));
	if (!v)
		return 127;
	k = 0;
	v[k++] = VHPC_SYS_DIR "/ld.so";
	v[k++] = "--library-path";
	v[k++] = VHPC_SYS_DIR;
	v[k++] = "--argv0";
	v[k++] = argv[0];
	v[k++] = prog;
	for (int i = 1; i < argc; i++)
		v[k++] = argv[i];
	v[k] = NULL;
	execv(v[0], v);
	fprintf(stderr, "vhpc-sysexec: cannot run %s through %s: %s\n", prog, v[0], strerror(errno));
	return 127;
}
