/*
 * A restored guest's network, given at the one moment it can be: runc
 * restores a container's network namespace empty (it passes CRIU
 * --empty-ns net: "runc doesn't manage network devices"), and CRIU then
 * reconnects the guest's TCP sockets, which needs the guest's address and
 * route already there.  Between the two, CRIU calls runc back
 * ("setup-namespaces"), and runc runs the config's prestart hooks with
 * the restored init's pid: that is where the guest's eth0 goes in
 * (na_net_guest_move, as between `runc create` and `runc start`).
 *
 * The hook is the host's /bin/sh, so that no program of ours has to be
 * found by path from runc: it copies runc's state (its pid) into a FIFO
 * of the agent's and waits on a second FIFO for the word "ok".  A thread
 * of the agent reads the first, does the work and answers on the second.
 * Both FIFOs are in a folder of root's (the job's criu<i>), which no
 * guest reaches.
 */
#include "lib/err.h"
#include "lib/log.h"
#include "nodeagent/drivers/container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* From runc restore's start to the hook: CRIU has read the images of
 * the guest's memory by then. */
#define HOOK_WAIT_MS 240000
#define STATE_MAX 65536

struct na_ctr_nethook {
	const struct na_ctr_spec *s;
	char state[PATH_MAX], reply[PATH_MAX];
	int stop[2];
	pthread_t th;
	bool started, given;
	struct verr err;
};

/* The pid in runc's state; 0 when there is none. */
static pid_t state_pid(const char *text)
{
	struct json_object *o = json_tokener_parse(text), *v;
	pid_t pid = 0;

	if (o && json_object_object_get_ex(o, "pid", &v) && json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) > 1 && json_object_get_int64(v) <= INT32_MAX)
		pid = (pid_t)json_object_get_int64(v);
	json_object_put(o);
	return pid;
}

/* Reads the state until its writer closes, or stop, or the deadline. */
static ssize_t read_state(struct na_ctr_nethook *h, int fd, char *buf, size_t max)
{
	size_t n = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = h->stop[0], .events = POLLIN } };
		ssize_t r;
		int e = poll(p, 2, HOOK_WAIT_MS);

		if (e < 0 && errno == EINTR)
			continue;
		if (e <= 0)
			return verr_set(&h->err, "runc's setup-namespaces hook never came (%d s)", HOOK_WAIT_MS / 1000);
		if (p[1].revents)
			return verr_set(&h->err, "runc restore ended before its setup-namespaces hook ran");
		r = read(fd, buf + n, max - 1 - n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return verr_errno(&h->err, "%s", h->state);
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == max - 1)
			return verr_set(&h->err, "runc's state is over %d bytes", STATE_MAX);
	}
	buf[n] = 0;
	return (ssize_t)n;
}

/* The hook reads the reply once its state is written: a writer's open
 * fails (ENXIO) until then. */
static void answer(struct na_ctr_nethook *h, const char *word)
{
	for (int i = 0; i < 500; i++) {
		int fd = open(h->reply, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd >= 0) {
			if (write(fd, word, strlen(word)) < 0)
				log_warn("%s: %s", h->reply, strerror(errno));
			close(fd);
			return;
		}
		if (errno != ENXIO && errno != EINTR)
			break;
		usleep(10000);
	}
	log_warn("runc's setup-namespaces hook took no answer at %s", h->reply);
}

static void *wait_hook(void *arg)
{
	struct na_ctr_nethook *h = arg;
	char *buf = malloc(STATE_MAX), path[64];
	pid_t pid;
	int fd, ns;

	/* Non-blocking, so that a hook that never comes cannot hold the
	 * open; a FIFO no writer has opened yet polls as empty, not hung up. */
	fd = open(h->state, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (!buf || fd < 0) {
		verr_set(&h->err, "%s: %s", h->state, buf ? strerror(errno) : "out of memory");
		goto out;
	}
	if (read_state(h, fd, buf, STATE_MAX) < 0)
		goto out;
	if ((pid = state_pid(buf)) == 0) {
		verr_set(&h->err, "runc's setup-namespaces hook gave no pid");
		answer(h, "fail\n");
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		verr_errno(&h->err, "the restored init's network namespace %s", path);
		answer(h, "fail\n");
		goto out;
	}
	h->given = h->s->own_netns(h->s->own_netns_arg, ns, &h->err) == 0;
	close(ns);
	answer(h, h->given ? "ok\n" : "fail\n");
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

int na_ctr_nethook_begin(const struct na_ctr_spec *s, const char *dir, struct json_object *conf,
			 struct na_ctr_nethook **out, struct verr *err)
{
	struct na_ctr_nethook *h = calloc(1, sizeof(*h));
	struct json_object *hooks, *pre, *hook, *args;
	char script[64];

	*out = NULL;
	if (!h)
		return verr_set(err, "out of memory");
	h->s = s;
	h->stop[0] = h->stop[1] = -1;
	snprintf(h->state, sizeof(h->state), "%s/hook.state", dir);
	snprintf(h->reply, sizeof(h->reply), "%s/hook.reply", dir);
	unlink(h->state);
	unlink(h->reply);
	if (mkfifo(h->state, 0600) < 0 || mkfifo(h->reply, 0600) < 0 || pipe2(h->stop, O_CLOEXEC) < 0) {
		verr_errno(err, "the restore's network hook in %s", dir);
		na_ctr_nethook_end(h, NULL);
		return -1;
	}
	/* runc's state on stdin into the first FIFO; then the answer. */
	snprintf(script, sizeof(script), "cat >\"$1\" && read -r r <\"$2\" && [ \"$r\" = ok ]");
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string("sh"));
	json_object_array_add(args, json_object_new_string("-c"));
	json_object_array_add(args, json_object_new_string(script));
	json_object_array_add(args, json_object_new_string("vhpc-restore-net"));
	json_object_array_add(args, json_object_new_string(h->state));
	json_object_array_add(args, json_object_new_string(h->reply));
	hook = json_object_new_object();
	json_object_object_add(hook, "path", json_object_new_string("/bin/sh"));
	json_object_object_add(hook, "args", args);
	json_object_object_add(hook, "timeout", json_object_new_int(HOOK_WAIT_MS / 1000));
	pre = json_object_new_array();
	json_object_array_add(pre, hook);
	hooks = json_object_new_object();
	json_object_object_add(hooks, "prestart", pre);
	json_object_object_add(conf, "hooks", hooks);
	if (pthread_create(&h->th, NULL, wait_hook, h) != 0) {
		verr_set(err, "cannot start the restore's network thread");
		na_ctr_nethook_end(h, NULL);
		return -1;
	}
	h->started = true;
	*out = h;
	return 0;
}

int na_ctr_nethook_end(struct na_ctr_nethook *h, struct verr *err)
{
	int rc = 0;

	if (!h)
		return 0;
	if (h->started) {
		if (write(h->stop[1], "x", 1) < 0)
			log_warn("the restore's network thread: %s", strerror(errno));
		pthread_join(h->th, NULL);
		if (!h->given && err)
			rc = verr_set(err, "%s", h->err.msg);
	}
	if (h->stop[0] >= 0)
		close(h->stop[0]);
	if (h->stop[1] >= 0)
		close(h->stop[1]);
	unlink(h->state);
	unlink(h->reply);
	free(h);
	return rc;
}
