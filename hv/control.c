/* The control socket: a unix stream socket (mode 0600, peers checked with
 * SO_PEERCRED) speaking one JSON object per line (hv/hv.h).  It lives in
 * the main loop, so requests are handled one at a time. */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "snapshot.h"
#include "virtio.h"
#include "vm.h"

#include <errno.h>
#include <json-c/json.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 8
#define MAX_LINE 4096

struct client {
	int fd;
	int passed_fd;             /* the last descriptor it sent (SCM_RIGHTS), or -1 */
	char buf[MAX_LINE];
	size_t len;
};

static struct {
	int lfd;
	char path[108];
	struct client cl[MAX_CLIENTS];
} ctl = { .lfd = -1 };

static int host_cpu_of(int tid)
{
	char path[64], *buf, *p;
	size_t len;
	struct verr e;
	int cpu = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	if (read_file(path, &buf, &len, 4096, &e) < 0)
		return -1;
	/* Field 39 (processor); the command name may contain spaces, so count
	 * from the last ')'. */
	p = strrchr(buf, ')');
	for (int f = 2; p && f < 39; f++)
		p = strchr(p + 1, ' ');
	if (p)
		cpu = atoi(p + 1);
	free(buf);
	return cpu;
}

/* Where the pages of [addr, addr+len) are, sampled: move_pages without
 * target nodes only reports. */
static json_object *page_nodes(uint8_t *addr, uint64_t len, uint64_t page)
{
	enum { SAMPLES = 256 };
	void *pages[SAMPLES];
	int status[SAMPLES], counts[64] = { 0 }, absent = 0;
	uint64_t n = len / page, step;
	unsigned long cnt = 0;
	json_object *o = json_object_new_object();

	if (!n)
		return o;
	step = n > SAMPLES ? n / SAMPLES : 1;
	for (uint64_t i = 0; i < n && cnt < SAMPLES; i += step)
		pages[cnt++] = addr + i * page;
	if (syscall(SYS_move_pages, 0, cnt, pages, NULL, status, 0) < 0)
		return o;
	for (unsigned long i = 0; i < cnt; i++) {
		if (status[i] >= 0 && status[i] < 64)
			counts[status[i]]++;
		else
			absent++;
	}
	for (int i = 0; i < 64; i++)
		if (counts[i]) {
			char k[16];
			snprintf(k, sizeof(k), "%d", i);
			json_object_object_add(o, k, json_object_new_int(counts[i]));
		}
	if (absent)
		json_object_object_add(o, "absent", json_object_new_int(absent));
	return o;
}

static json_object *status_json(struct vm *vm)
{
	json_object *r = json_object_new_object(), *va = json_object_new_array(), *ma = json_object_new_array();

	json_object_object_add(r, "ok", json_object_new_boolean(1));
	pthread_mutex_lock(&vm->lock);
	json_object_object_add(r, "state", json_object_new_string(vm_state_name(vm->state)));
	pthread_mutex_unlock(&vm->lock);
	json_object_object_add(r, "pid", json_object_new_int(getpid()));
	json_object_object_add(r, "uptime_ms", json_object_new_int64((int64_t)((now_ns() - vm->t0_ns) / 1000000)));
	for (int i = 0; i < vm->nvcpus; i++) {
		const struct vcpu *c = &vm->vcpu[i];
		json_object *v = json_object_new_object();
		int tid = atomic_load(&c->tid);
		cpu_set_t set;
		char aff[1024] = "";

		json_object_object_add(v, "id", json_object_new_int(i));
		json_object_object_add(v, "apic_id", json_object_new_int((int)c->apic_id));
		json_object_object_add(v, "guest_node", json_object_new_int(vm->plan->vcpu_node[i]));
		json_object_object_add(v, "tid", json_object_new_int(tid));
		if (tid > 0 && sched_getaffinity(tid, sizeof(set), &set) == 0) {
			int ids[CPU_SETSIZE];
			size_t n = 0;

			for (int k = 0; k < CPU_SETSIZE; k++)
				if (CPU_ISSET(k, &set))
					ids[n++] = k;
			cpulist_format(ids, n, aff, sizeof(aff));
		}
		json_object_object_add(v, "affinity", json_object_new_string(aff));
		json_object_object_add(v, "pinned", c->host_cpu >= 0 ? json_object_new_int(c->host_cpu) : NULL);
		json_object_object_add(v, "host_cpu", json_object_new_int(tid > 0 ? host_cpu_of(tid) : -1));
		json_object_array_add(va, v);
	}
	json_object_object_add(r, "vcpus", va);
	for (int n = 0; n < vm->plan->nnodes; n++) {
		const struct hv_gnode *g = &vm->plan->node[n];
		json_object *m = json_object_new_object(), *ranges = json_object_new_array();
		uint64_t gpa[2], len[2];
		int k = mem_range_gpa(&vm->mem, g->ram_off, g->size, gpa, len);

		json_object_object_add(m, "guest_node", json_object_new_int(n));
		for (int j = 0; j < k; j++) {
			json_object *p = json_object_new_array();
			json_object_array_add(p, json_object_new_int64((int64_t)gpa[j]));
			json_object_array_add(p, json_object_new_int64((int64_t)(gpa[j] + len[j])));
			json_object_array_add(ranges, p);
		}
		json_object_object_add(m, "gpa_ranges", ranges);
		json_object_object_add(m, "size", json_object_new_int64((int64_t)g->size));
		json_object_object_add(m, "host_node", g->host_node >= 0 ? json_object_new_int(g->host_node) : NULL);
		json_object_object_add(m, "hugepages", json_object_new_boolean(vm->mem.page_size > 4096));
		json_object_object_add(m, "pages_on_host_node",
				       page_nodes(vm->mem.host + g->ram_off, g->size, vm->mem.page_size));
		json_object_array_add(ma, m);
	}
	json_object_object_add(r, "memory", ma);
	{
		json_object *na = json_object_new_array();
		struct vnet_status st;

		for (int k = 0; virtio_net_status(vm, k, &st); k++) {
			json_object *o = json_object_new_object();

			json_object_object_add(o, "name", json_object_new_string(st.name));
			json_object_object_add(o, "datapath", json_object_new_string(st.vhost ? "vhost-net" : "userspace"));
#define NUM(f) json_object_object_add(o, #f, json_object_new_int64((int64_t)st.f))
			NUM(rx_frames); NUM(tx_frames); NUM(rx_drops); NUM(tx_drops); NUM(vhost_starts); NUM(vhost_refused);
#undef NUM
			json_object_array_add(na, o);
		}
		json_object_object_add(r, "net", na);
	}
	return r;
}

static json_object *error_json(const char *msg)
{
	json_object *r = json_object_new_object();

	json_object_object_add(r, "ok", json_object_new_boolean(0));
	json_object_object_add(r, "error", json_object_new_string(msg));
	return r;
}

static json_object *state_json(struct vm *vm)
{
	json_object *r = json_object_new_object();

	json_object_object_add(r, "ok", json_object_new_boolean(1));
	pthread_mutex_lock(&vm->lock);
	json_object_object_add(r, "state", json_object_new_string(vm_state_name(vm->state)));
	pthread_mutex_unlock(&vm->lock);
	return r;
}

/* The file comes as a descriptor with the request: vhpc-hv opens no
 * paths (jail, seccomp). */
static json_object *snapshot_json(struct vm *vm, struct client *cl)
{
	struct snap_stats st;
	struct verr err;
	json_object *r;
	int fd = cl ? cl->passed_fd : -1;

	if (fd < 0)
		return error_json("snapshot: send the file's descriptor with the request (SCM_RIGHTS)");
	cl->passed_fd = -1;
	if (snap_save(vm, fd, &st, &err) < 0) {
		close(fd);
		return error_json(err.msg);
	}
	close(fd);
	r = json_object_new_object();
	json_object_object_add(r, "ok", json_object_new_boolean(1));
	json_object_object_add(r, "bytes", json_object_new_int64((int64_t)st.bytes));
	json_object_object_add(r, "ram_bytes", json_object_new_int64((int64_t)st.ram_bytes));
	json_object_object_add(r, "ms", json_object_new_int64((int64_t)st.ms));
	return r;
}

static json_object *handle(struct vm *vm, const char *line, struct client *cl)
{
	json_tokener *tok = json_tokener_new();
	json_object *req, *cmd;
	struct verr err;
	const char *c;
	json_object *r;

	if (!tok)
		return error_json("out of memory");
	req = json_tokener_parse_ex(tok, line, (int)strlen(line));
	if (!req || json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(req, json_type_object)) {
		json_tokener_free(tok);
		json_object_put(req);
		return error_json("request is not a JSON object");
	}
	json_tokener_free(tok);
	if (!json_object_object_get_ex(req, "cmd", &cmd) || !json_object_is_type(cmd, json_type_string)) {
		json_object_put(req);
		return error_json("request has no \"cmd\" string");
	}
	c = json_object_get_string(cmd);
	if (!strcmp(c, "status")) {
		r = status_json(vm);
	} else if (!strcmp(c, "pause")) {
		r = vm_pause(vm, &err) < 0 ? error_json(err.msg) : state_json(vm);
	} else if (!strcmp(c, "resume")) {
		r = vm_resume(vm, &err) < 0 ? error_json(err.msg) : state_json(vm);
	} else if (!strcmp(c, "poweroff")) {
		ged_power_button(vm);
		r = state_json(vm);
		json_object_object_add(r, "note", json_object_new_string("power button pressed; the guest decides"));
	} else if (!strcmp(c, "snapshot")) {
		r = snapshot_json(vm, cl);
	} else if (!strcmp(c, "snapshot_check")) {
		r = snap_check(vm, &err) < 0 ? error_json(err.msg) : state_json(vm);
	} else if (!strcmp(c, "kill")) {
		vm_request_exit(vm, HV_EXIT_KILLED, "killed through the control socket");
		r = state_json(vm);
	} else {
		char msg[160];

		snprintf(msg, sizeof(msg), "unknown cmd '%.60s' (status, pause, resume, snapshot, snapshot_check, poweroff, kill)", c);
		r = error_json(msg);
	}
	json_object_put(req);
	return r;
}

char *control_reply(struct vm *vm, const char *line)
{
	json_object *r = handle(vm, line, NULL);
	char *s = strdup(json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN));

	json_object_put(r);
	return s;
}

static void drop_client(struct vm *vm, struct client *c)
{
	vm_unwatch_fd(vm, c->fd);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	c->fd = c->passed_fd = -1;
	c->len = 0;
}

static void client_ready(struct vm *vm, int fd, void *opaque)
{
	struct client *c = opaque;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = { c->buf + c->len, sizeof(c->buf) - 1 - c->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm, .msg_controllen = sizeof(cm) };
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	char *nl;

	/* Descriptors a client sends: the last one is kept for its next
	 * request ("snapshot"); any others are closed. */
	for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; k < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int pfd;

			memcpy(&pfd, CMSG_DATA(h) + k * sizeof(int), sizeof(int));
			if (c->passed_fd >= 0)
				close(c->passed_fd);
			c->passed_fd = pfd;
		}
	}
	if (n <= 0) {
		if (n < 0 && errno == EINTR)
			return;
		drop_client(vm, c);
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = 0;
	while ((nl = memchr(c->buf, '\n', c->len))) {
		json_object *r;
		const char *s;

		*nl = 0;
		r = handle(vm, c->buf, c);
		s = json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN);
		if (write_full(fd, s, strlen(s)) < 0 || write_full(fd, "\n", 1) < 0) {
			json_object_put(r);
			drop_client(vm, c);
			return;
		}
		json_object_put(r);
		c->len -= (size_t)(nl + 1 - c->buf);
		memmove(c->buf, nl + 1, c->len);
	}
	if (c->len == sizeof(c->buf) - 1) {
		const char *e = "{\"ok\":false,\"error\":\"request line too long\"}\n";

		write_full(fd, e, strlen(e));
		drop_client(vm, c);
	}
}

static void accept_ready(struct vm *vm, int fd, void *opaque)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	int slot = -1;

	(void)opaque;
	if (cfd < 0)
		return;
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || (cr.uid != 0 && cr.uid != getuid())) {
		log_warn("control: refused a connection from uid %d", (int)cr.uid);
		close(cfd);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (ctl.cl[i].fd < 0)
			slot = i;
	if (slot < 0 || vm_watch_fd(vm, cfd, client_ready, &ctl.cl[slot]) < 0) {
		const char *e = "{\"ok\":false,\"error\":\"too many control connections\"}\n";

		write_full(cfd, e, strlen(e));
		close(cfd);
		return;
	}
	ctl.cl[slot].fd = cfd;
	ctl.cl[slot].passed_fd = -1;
	ctl.cl[slot].len = 0;
}

int control_start(struct vm *vm, const char *path, struct verr *err)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		ctl.cl[i].fd = ctl.cl[i].passed_fd = -1;
	ctl.lfd = uds_listen(path, SOCK_STREAM, 8, err);
	if (ctl.lfd < 0)
		return verr_wrap(err, "control socket");
	snprintf(ctl.path, sizeof(ctl.path), "%s", path);
	if (vm_watch_fd(vm, ctl.lfd, accept_ready, NULL) < 0)
		return verr_set(err, "control socket: too many watched fds");
	return 0;
}

void control_stop(void)
{
	if (ctl.lfd < 0)
		return;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (ctl.cl[i].fd >= 0) {
			close(ctl.cl[i].fd);
			ctl.cl[i].fd = -1;
			if (ctl.cl[i].passed_fd >= 0)
				close(ctl.cl[i].passed_fd);
			ctl.cl[i].passed_fd = -1;
		}
	if (ctl.lfd >= 0) {
		close(ctl.lfd);
		ctl.lfd = -1;
		unlink(ctl.path);
	}
}
