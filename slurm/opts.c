/*
 * --vhpc-* values (the JO_SLURM rows of lib/jobopts.c): checked where the
 * user typed them (srun, sbatch, salloc), carried to the nodes as one line
 * of words, and checked again there by vhpc-slurmjob, which trusts nothing
 * the job's user could set.
 */
#include "lib/consts.h"
#include "lib/drivers.h"
#include "lib/fabric.h"
#include "lib/jobopts.h"
#include "lib/parse.h"
#include "slurm/slurm.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_MIN (64ull << 20)
#define MEM_MAX (4ull << 40)

const struct job_opt *vs_opt_row(int i)
{
	for (const struct job_opt *r = job_opts; r->o.id; r++)
		if ((r->fronts & JO_SLURM) && i-- == 0)
			return r;
	return NULL;
}

int vs_opt_index(int id)
{
	for (int i = 0; i < VS_NOPTS; i++)
		if (vs_opt_row(i)->o.id == id)
			return i;
	return -1;
}

/* --vhpc-device CLASS[:N], repeatable; SLURM_VHPC_DEVICE and the opts
 * line carry several, comma-separated.  Each is checked as vhpc run checks
 * it; a class given again replaces its count. */
static int add_devices(struct vs_opts *o, const char *where, const char *val, char *why, size_t len)
{
	char buf[sizeof(o->devices)], *save = NULL;

	if (!val || !*val || strlen(val) >= sizeof(buf))
		return vs_fail(why, len, "%s '%.40s': expected CLASS[:N] such as gpu:2", where, val ? val : "");
	snprintf(buf, sizeof(buf), "%s", val);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		char cls[FABRIC_CLASS_MAX + 1], other[FABRIC_CLASS_MAX + 1], msg[256], out[sizeof(o->devices)];
		char list[sizeof(o->devices)], *s2 = NULL;
		int n, cnt = 0;
		size_t used = 0;

		if (job_device_parse(w, cls, &n, msg, sizeof(msg)) < 0)
			return vs_fail(why, len, "%s: %s", where, msg);
		out[0] = 0;
		snprintf(list, sizeof(list), "%s", o->devices);
		for (char *e = strtok_r(list, ",", &s2); e; e = strtok_r(NULL, ",", &s2)) {
			if (job_device_parse(e, other, &n, msg, sizeof(msg)) == 0 && !strcmp(other, cls))
				continue;
			used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%s", used ? "," : "", e);
			cnt++;
		}
		if (cnt >= JOB_DEVICES_MAX)
			return vs_fail(why, len, "%s: a job names at most %d classes", where, JOB_DEVICES_MAX);
		if (used + strlen(w) + 2 > sizeof(out))
			return vs_fail(why, len, "%s: too many devices", where);
		snprintf(out + used, sizeof(out) - used, "%s%s", used ? "," : "", w);
		snprintf(o->devices, sizeof(o->devices), "%s", out);
	}
	return 0;
}

/* Slurm's own checks of the rows' values, with its limits (a node's
 * guest has at most VHPC_MAX_VCPUS) and words; where: "--vhpc-mem" or
 * "SLURM_VHPC_MEM". */
static int set_value(struct vs_opts *o, int id, const char *where, const char *val, char *why, size_t len)
{
	long long n;
	uint64_t sz;

	switch (id) {
	case JO_IMAGE:
		if (!val || !ident_ok(val, 64))
			return vs_fail(why, len, "%s '%s': expected an image name (letters, digits, '.', '_', '-'; "
				   "at most 64, as `vhpc image list` shows them)", where, val ? val : "");
		snprintf(o->image, sizeof(o->image), "%s", val);
		return 0;
	case JO_DRIVER:
		if (vhpc_driver_index(val) < 0)
			return vs_fail(why, len, "%s '%s': expected " VHPC_DRIVER_CHOICES, where, val ? val : "");
		snprintf(o->driver, sizeof(o->driver), "%s", val);
		return 0;
	case JO_VCPUS:
		if (parse_ll(val, 1, VHPC_MAX_VCPUS, &n) < 0)
			return vs_fail(why, len, "%s '%s': expected vCPUs per guest, 1..%d", where, val ? val : "",
				   VHPC_MAX_VCPUS);
		o->vcpus = (int)n;
		return 0;
	case JO_MEM:
		if (parse_size(val, &sz) < 0 || sz < MEM_MIN || sz > MEM_MAX)
			return vs_fail(why, len, "%s '%s': expected memory per guest from 64M to 4T (e.g. 512M, 2G)", where,
				   val ? val : "");
		o->mem = sz;
		return 0;
	case JO_DEVICE:
		return add_devices(o, where, val, why, len);
	default:
		/* A flag: from the environment 1 or 0, on the command line none. */
		if (val && strcmp(val, "1") && strcmp(val, "0"))
			return vs_fail(why, len, "%s '%s': expected 1 or 0", where, val);
		if (id == JO_NOVMSHM)
			o->no_vmshm = !val || !strcmp(val, "1");
		else if (id == JO_NOSINGLECOPY)
			o->no_single_copy = !val || !strcmp(val, "1");
		else if (!val || !strcmp(val, "1"))
			o->rdma = id == JO_RDMA ? JOB_RDMA_ON : JOB_RDMA_OFF;
		return 0;
	}
}

int vs_opt_set(struct vs_opts *o, const char *name, const char *val, char *why, size_t len)
{
	char where[48];

	for (int i = 0; i < VS_NOPTS; i++) {
		const struct job_opt *r = vs_opt_row(i);

		if (strcmp(name, r->o.name))
			continue;
		snprintf(where, sizeof(where), "--vhpc-%s", name);
		if (!r->o.arg && val)
			return vs_fail(why, len, "%s takes no value", where);
		if (set_value(o, r->o.id, where, val, why, len) < 0)
			return -1;
		o->set = true;
		return 0;
	}
	return vs_fail(why, len, "--vhpc-%s: no such option", name);
}

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

/* --vhpc-no-vmshm's default is SLURM_VHPC_NO_VMSHM. */
static void env_name(const struct job_opt *r, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "SLURM_VHPC_");

	for (const char *p = r->o.name; *p && n + 1 < len; p++)
		buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	buf[n] = 0;
}

int vs_opts_env(struct vs_opts *o, const bool given[VS_NOPTS], char *const *env, char *why, size_t len)
{
	for (int i = 0; i < VS_NOPTS; i++) {
		const struct job_opt *r = vs_opt_row(i);
		char name[48];
		const char *v;

		env_name(r, name, sizeof(name));
		v = env_get(env, name);
		if (given[i] || !v || !*v)
			continue;
		if (set_value(o, r->o.id, name, v, why, len) < 0)
			return -1;
		/* Only an image makes a job run in guests; the others are
		 * defaults for jobs that do. */
		if (r->o.id == JO_IMAGE)
			o->set = true;
	}
	return 0;
}

int vs_opts_format(const struct vs_opts *o, char *buf, size_t len)
{
	int n = snprintf(buf, len, "image=%s driver=%s vcpus=%d mem=%llu vmshm=%d rdma=%s devices=%s single_copy=%d",
			 o->image, o->driver, o->vcpus, (unsigned long long)o->mem, o->no_vmshm ? 0 : 1,
			 job_rdma_names[o->rdma], o->devices, o->no_single_copy ? 0 : 1);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

#define NKEYS 8
int vs_opts_parse(const char *s, struct vs_opts *o, char *why, size_t len)
{
	/* single_copy, the last, came after the others: a line without it is
	 * an older prolog's, whose jobs had the pod. */
	static const char *const keys[NKEYS] = { "image", "driver", "vcpus", "mem", "vmshm", "rdma", "devices",
						 "single_copy" };
	static const int ids[NKEYS] = { JO_IMAGE, JO_DRIVER, JO_VCPUS, JO_MEM, JO_NOVMSHM, 0, JO_DEVICE,
					JO_NOSINGLECOPY };
	bool seen[NKEYS] = { 0 };
	char buf[512], *save = NULL;

	memset(o, 0, sizeof(*o));
	if (!s || strlen(s) >= sizeof(buf))
		return vs_fail(why, len, "options: missing or too long");
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');
		int i;

		if (!eq)
			return vs_fail(why, len, "options: '%.40s' is not KEY=VALUE", w);
		*eq++ = 0;
		for (i = 0; i < NKEYS && strcmp(w, keys[i]); i++)
			;
		if (i == NKEYS || seen[i])
			return vs_fail(why, len, "options: %s '%.40s'", i == NKEYS ? "unknown key" : "repeated key", w);
		seen[i] = true;
		if (i == 4 || i == 7) {
			/* the job's setting, where the flag says its opposite */
			if (strcmp(eq, "0") && strcmp(eq, "1"))
				return vs_fail(why, len, "options: %s '%.20s': expected 0 or 1", keys[i], eq);
			*(i == 4 ? &o->no_vmshm : &o->no_single_copy) = !strcmp(eq, "0");
			continue;
		}
		if (i == 5) {
			for (o->rdma = 0; job_rdma_names[o->rdma] && strcmp(job_rdma_names[o->rdma], eq); o->rdma++)
				;
			if (!job_rdma_names[o->rdma])
				return vs_fail(why, len, "options: rdma '%.20s': expected auto, on or off", eq);
			continue;
		}
		/* Empty and zero are the defaults. */
		if (!*eq || ((i == 2 || i == 3) && !strcmp(eq, "0")))
			continue;
		if (i == 3) {
			long long n;

			/* bytes, as vs_opts_format wrote them */
			if (parse_ll(eq, (long long)MEM_MIN, (long long)MEM_MAX, &n) < 0)
				return vs_fail(why, len, "options: mem '%.30s': expected bytes from 64 MiB to 4 TiB", eq);
			o->mem = (uint64_t)n;
			continue;
		}
		if (set_value(o, ids[i], keys[i], eq, why, len) < 0)
			return -1;
	}
	for (int i = 0; i < NKEYS - 1; i++)
		if (!seen[i])
			return vs_fail(why, len, "options: %s missing", keys[i]);
	o->set = true;
	return 0;
}
