/*
 * What "hello" tells the node agent and tests about this guest: enough to
 * check that it is the guest they think (hostname, namespaces) and that it
 * got the placement it was given (CPUs, memory nodes), and addresses.
 */
#include "lib/clock.h"
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "internal.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void add_ns(struct json_object *o, const char *key, const char *which)
{
	char path[64], link[64];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", which);
	if (stat(path, &st) == 0)
		json_object_object_add(o, key, json_object_new_int64((int64_t)st.st_ino));
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		char k[32];

		link[n] = 0;
		snprintf(k, sizeof(k), "%s_link", key);
		json_object_object_add(o, k, json_object_new_string(link));
	}
}

static void add_cpus(struct json_object *o)
{
	cpu_set_t set;
	int ids[CPU_SETSIZE];
	size_t n = 0;
	char buf[1024];

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			ids[n++] = i;
	json_object_object_add(o, "cpus", json_object_new_string(cpulist_format(ids, n, buf, sizeof(buf))));
	json_object_object_add(o, "ncpus", json_object_new_int((int)n));
}

/* The value of "Key:\t..." in a /proc status-style file. */
static bool proc_field(const char *path, const char *key, char *out, size_t len)
{
	char *text, *p;
	size_t n, klen = strlen(key);
	struct verr e;
	bool found = false;

	if (read_file(path, &text, &n, 1 << 16, &e) < 0)
		return false;
	for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, key, klen) && p[klen] == ':') {
			char *v = p + klen + 1, *nl;

			v += strspn(v, " \t");
			nl = strchr(v, '\n');
			snprintf(out, len, "%.*s", nl ? (int)(nl - v) : (int)strlen(v), v);
			found = true;
			break;
		}
	}
	free(text);
	return found;
}

/* cpuset.mems of this process's cgroup (v1 cpuset controller, or v2). */
static bool cgroup_mems(char *out, size_t len)
{
	char *text, *line, *save = NULL;
	size_t n;
	struct verr e;
	bool found = false;

	if (read_file("/proc/self/cgroup", &text, &n, 1 << 16, &e) < 0)
		return false;
	for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char path[512], *val;
		size_t vlen;
		const char *ctrls, *cg;
		bool v1;

		if (!c2)
			continue;
		*c2 = 0;
		ctrls = c1 + 1;
		cg = c2 + 1;
		v1 = strstr(ctrls, "cpuset") != NULL;
		if (!v1 && strcmp(line, "0") != 0)
			continue;
		if (v1)
			snprintf(path, sizeof(path), "/sys/fs/cgroup/cpuset%s/cpuset.mems", cg);
		else
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpuset.mems.effective", cg);
		if (read_file(path, &val, &vlen, 4096, &e) == 0) {
			while (vlen && (val[vlen - 1] == '\n' || val[vlen - 1] == ' '))
				val[--vlen] = 0;
			if (vlen) {
				snprintf(out, len, "%s", val);
				found = true;
			}
			free(val);
		}
	}
	free(text);
	return found;
}

static void add_addrs(struct json_object *o)
{
	struct ifaddrs *ifa, *p;
	struct json_object *arr = json_object_new_array();

	if (getifaddrs(&ifa) == 0) {
		for (p = ifa; p; p = p->ifa_next) {
			char addr[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 8];
			struct json_object *e;
			int prefix = 0;

			if (!p->ifa_addr || (p->ifa_addr->sa_family != AF_INET &&
					     p->ifa_addr->sa_family != AF_INET6))
				continue;
			if (p->ifa_addr->sa_family == AF_INET) {
				inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, addr, sizeof(addr));
				if (p->ifa_netmask)
					prefix = __builtin_popcount(((struct sockaddr_in *)p->ifa_netmask)->sin_addr.s_addr);
			} else {
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)p->ifa_addr)->sin6_addr, addr, sizeof(addr));
				if (p->ifa_netmask)
					for (int i = 0; i < 16; i++)
						prefix += __builtin_popcount(((struct sockaddr_in6 *)p->ifa_netmask)->sin6_addr.s6_addr[i]);
			}
			snprintf(s, sizeof(s), "%s/%d", addr, prefix);
			e = json_object_new_object();
			json_object_object_add(e, "if", json_object_new_string(p->ifa_name));
			json_object_object_add(e, "addr", json_object_new_string(s));
			json_object_object_add(e, "up", json_object_new_boolean(!!(p->ifa_flags & IFF_UP)));
			json_object_array_add(arr, e);
		}
		freeifaddrs(ifa);
	}
	json_object_object_add(o, "addrs", arr);
}

struct json_object *gd_hello_info(const struct gd_opts *o, double started_s, pid_t main_pid)
{
	struct json_object *j = json_object_new_object();
	char host[256] = "", buf[1024], *text;
	size_t len;
	struct verr e;

	gethostname(host, sizeof(host) - 1);
	json_object_object_add(j, "name", json_object_new_string(o->name));
	json_object_object_add(j, "hostname", json_object_new_string(host));
	json_object_object_add(j, "version", json_object_new_string(VHPC_VERSION));
	json_object_object_add(j, "proto", json_object_new_int(GD_PROTO_VERSION));
	json_object_object_add(j, "pid", json_object_new_int((int)main_pid));
	json_object_object_add(j, "init", json_object_new_boolean(o->init));
	add_ns(j, "pidns", "pid");
	add_ns(j, "netns", "net");
	add_ns(j, "mntns", "mnt");
	add_ns(j, "utsns", "uts");
	add_cpus(j);
	if (proc_field("/proc/self/status", "Mems_allowed_list", buf, sizeof(buf)))
		json_object_object_add(j, "mems", json_object_new_string(buf));
	if (cgroup_mems(buf, sizeof(buf)))
		json_object_object_add(j, "cpuset_mems", json_object_new_string(buf));
	add_addrs(j);
	if (read_file("/proc/uptime", &text, &len, 256, &e) == 0) {
		json_object_object_add(j, "uptime", json_object_new_double(strtod(text, NULL)));
		free(text);
	}
	json_object_object_add(j, "guestd_uptime", json_object_new_double(now_s() - started_s));
	json_object_object_add(j, "ready", json_object_new_boolean(true));
	return j;
}
