/*
 * Talking to vhpc-hv's control socket (hv/hv.h: one JSON object per line):
 * the driver asks for "status" once a guest starts and checks that every
 * vCPU thread runs where placement pinned it.
 *
 * The socket is in hv/, the folder vhpc-hv (the job's user) owns: root
 * reaches it through an O_PATH|O_NOFOLLOW descriptor (gexec_unix_open), so
 * a symlink the user plants in its place is refused rather than followed
 * to another socket of the host.
 */
#include "nodeagent/job.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/gexec.h"
#include "kvm_int.h"
#include "nodeagent/place/place.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request line in one sendmsg, with fd (>= 0) as its SCM_RIGHTS
 * ancillary data: vhpc-hv takes a snapshot's file only with the request
 * that names it. */
static int send_req(int sock, const char *req, int fd)
{
	size_t n = strlen(req);
	char *line = malloc(n + 1);
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t w;

	if (!line) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(line, req, n);
	line[n] = '\n';
	iov = (struct iovec){ line, n + 1 };
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		m.msg_control = cm.buf;
		m.msg_controllen = sizeof(cm.buf);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &fd, sizeof(int));
	}
	do
		w = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	/* The descriptor went with the first bytes; the rest is plain. */
	if (w >= 0 && (size_t)w < n + 1)
		w = send_full(sock, line + w, n + 1 - (size_t)w) < 0 ? -1 : (ssize_t)(n + 1);
	free(line);
	return w < 0 ? -1 : 0;
}

int kvm_control(const char *sock, const char *req, char **reply, int timeout_ms, struct verr *err)
{
	return kvm_control_fd(sock, req, -1, reply, timeout_ms, err);
}

int kvm_control_fd(const char *sock, const char *req, int pass_fd, char **reply, int timeout_ms, struct verr *err)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	size_t cap = 4096, n = 0;
	char *buf, what[160];
	int fd;

	*reply = NULL;
	snprintf(what, sizeof(what), "control socket %s", sock);
	fd = gexec_unix_open(sock, deadline, what, err);
	if (fd < 0)
		return -1;
	if (send_req(fd, req, pass_fd) < 0) {
		verr_errno(err, "control socket %s", sock);
		close(fd);
		return -1;
	}
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return verr_set(err, "out of memory");
	}
	for (;;) {
		bool eof;

		if (n + 1 == cap) {
			char *nb = cap < (1u << 20) ? realloc(buf, cap * 2) : NULL;

			if (!nb) {
				free(buf);
				close(fd);
				return verr_set(err, "control socket %s: reply too long", sock);
			}
			buf = nb;
			cap *= 2;
		}
		if (read_full_deadline(fd, buf + n, 1, deadline, &eof) < 0) {
			free(buf);
			close(fd);
			return verr_set(err, "control socket %s: %s", sock,
					eof ? "closed without a reply" : strerror(errno));
		}
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	close(fd);
	*reply = buf;
	return 0;
}

/* Every vCPU thread's affinity is its placed CPU, as vhpc-hv reports it. */
int kvm_check_pinning(const char *ctl, const struct na_placement *p, struct verr *err)
{
	char *reply;
	struct json_object *o, *vcpus, *v;
	int rc = 0;
	size_t n;

	if (kvm_control(ctl, "{\"cmd\":\"status\"}", &reply, 5000, err) < 0)
		return -1;
	o = json_tokener_parse(reply);
	if (!o || !json_object_object_get_ex(o, "vcpus", &vcpus) ||
	    !json_object_is_type(vcpus, json_type_array)) {
		rc = verr_set(err, "vhpc-hv's status has no vCPU list: %.200s", reply);
		goto out;
	}
	n = json_object_array_length(vcpus);
	if (n != (size_t)p->ncpus) {
		rc = verr_set(err, "vhpc-hv reports %zu vCPUs, placement gave %d", n, p->ncpus);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char want[16];
		const char *got = "?";

		snprintf(want, sizeof(want), "%d", p->cpus[i]);
		if (json_object_object_get_ex(json_object_array_get_idx(vcpus, i), "affinity", &v))
			got = json_object_get_string(v);
		if (strcmp(got, want)) {
			rc = verr_set(err, "vCPU %zu runs on CPUs %s, placement pinned it to %s", i, got, want);
			goto out;
		}
	}
out:
	json_object_put(o);
	free(reply);
	return rc;
}
