/* What a run ran on, kept with its results so two runs can be compared. */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/hwvirt.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/proc.h"
#include <hwloc.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench/harness/bh.h"

struct topo_sum {
	int packages, numa, cores, pus;
	uint64_t memory;
	char model[128];
};

static int topo_summary(struct topo_sum *s)
{
	hwloc_topology_t t;
	hwloc_obj_t pkg;
	const char *m;

	memset(s, 0, sizeof(*s));
	if (hwloc_topology_init(&t) < 0)
		return -1;
	if (hwloc_topology_load(t) < 0) {
		hwloc_topology_destroy(t);
		return -1;
	}
	s->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
	s->numa = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	s->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
	s->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
	s->memory = hwloc_get_root_obj(t)->total_memory;
	pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
	if (pkg && (m = hwloc_obj_get_info_by_name(pkg, "CPUModel"))) {
		size_t n;

		/* Some CPUs pad their brand string with spaces. */
		snprintf(s->model, sizeof(s->model), "%s", m);
		n = strlen(s->model);
		while (n > 0 && s->model[n - 1] == ' ')
			s->model[--n] = 0;
	}
	hwloc_topology_destroy(t);
	return 0;
}

int bh_host_cores(void)
{
	struct topo_sum s;
	long n;

	if (topo_summary(&s) == 0 && s.cores > 0)
		return s.cores;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* First line of a program's output, or NULL. */
static struct json_object *first_line(const char *const *argv)
{
	char *out = NULL, *nl;
	size_t len;
	struct verr err;
	struct json_object *o = NULL;

	if (run_capture(argv, &out, &len, 64 << 10, 10000, &err) == 0 && out) {
		if ((nl = strchr(out, '\n')))
			*nl = 0;
		if (*out)
			o = json_object_new_string(out);
	}
	free(out);
	return o;
}

static void write_topology(const struct bh_ctx *c)
{
	static const char *const argv[] = { "lstopo-no-graphics", "--of", "console", NULL };
	char *out = NULL, path[PATH_MAX + 32];
	size_t len;
	struct verr err;

	if (run_capture(argv, &out, &len, 1 << 20, 20000, &err) == 0 && out) {
		snprintf(path, sizeof(path), "%s/topology.txt", c->dir);
		if (write_file(path, out, len, 0644, &err) < 0)
			log_warn("%s", err.msg);
	}
	free(out);
}

struct json_object *bh_machine(struct bh_ctx *c)
{
	static const char *const mpirun[] = { "mpirun", "--version", NULL };
	static const char *const runc[] = { "runc", "--version", NULL };
	static const char *const gnuplot[] = { "gnuplot", "--version", NULL };
	struct json_object *o = json_object_new_object(), *v = json_object_new_object();
	struct topo_sum s;
	struct utsname u = { 0 };
	struct hwvirt h;
	char host[256] = "", kernel[512] = "", topo[256] = "", mem[32];

	gethostname(host, sizeof(host) - 1);
	if (uname(&u) == 0)
		snprintf(kernel, sizeof(kernel), "%s %s %s %s", u.sysname, u.release, u.version, u.machine);
	json_object_object_add(o, "hostname", json_object_new_string(host));
	json_object_object_add(o, "kernel", json_object_new_string(kernel));
	if (topo_summary(&s) == 0) {
		snprintf(topo, sizeof(topo), "%d package%s, %d NUMA node%s, %d cores, %d PUs, %s", s.packages,
			 s.packages == 1 ? "" : "s", s.numa, s.numa == 1 ? "" : "s", s.cores, s.pus,
			 fmt_size(s.memory, mem, sizeof(mem)));
		json_object_object_add(o, "hwloc", json_object_new_string(topo));
		json_object_object_add(o, "cpu_model", json_object_new_string(s.model));
		json_object_object_add(o, "packages", json_object_new_int(s.packages));
		json_object_object_add(o, "numa_nodes", json_object_new_int(s.numa));
		json_object_object_add(o, "cores", json_object_new_int(s.cores));
		json_object_object_add(o, "pus", json_object_new_int(s.pus));
		json_object_object_add(o, "memory_bytes", json_object_new_int64((int64_t)s.memory));
	}
	hwvirt_detect(&h);
	json_object_object_add(o, "hw_virtualization", json_object_new_boolean(h.hw));
	json_object_object_add(o, "kvm", json_object_new_string(h.why));
	json_object_object_add(o, "driver", json_object_new_string(c->driver));
	json_object_object_add(o, "driver_why", json_object_new_string(c->driver_why));
	json_object_object_add(v, "vhpc", json_object_new_string(VHPC_VERSION));
	json_object_object_add(v, "openmpi", first_line(mpirun));
	json_object_object_add(v, "runc", first_line(runc));
	json_object_object_add(v, "gnuplot", first_line(gnuplot));
	json_object_object_add(v, "hwloc", json_object_new_string(HWLOC_VERSION));
	json_object_object_add(v, "kernel", json_object_new_string(u.release));
	json_object_object_add(o, "versions", v);
	snprintf(c->machine, sizeof(c->machine), "%s: %s%s%s; Linux %s; %s driver", host, topo,
		 s.model[0] ? ", " : "", s.model, u.release, c->driver);
	write_topology(c);
	return o;
}
