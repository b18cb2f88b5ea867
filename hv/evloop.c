/* Device event loops: one epoll thread per device.  A device's queues,
 * backend fds and connection state are touched only from its own thread;
 * vCPU threads reach it with evloop_call (start, reset), which runs a
 * function there between two callbacks.  Handlers removed while a batch of
 * events is being dispatched are marked dead and freed after the batch, so
 * a callback never runs for a removed fd.
 *
 * With vm->manual_loops (fuzzer, benchmark) no thread is started: the
 * caller dispatches with evloop_run_once/evloop_run_all.
 *
 * A held loop (a paused guest's) dispatches nothing but evloop_call: its
 * fds keep their readiness in the kernel (none is edge-triggered), so
 * whatever arrived meanwhile is handled once it is released. */
#include "lib/err.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct ev_handler {
	int fd;
	ev_cb cb;
	void *opaque;
	bool dead;
	struct ev_handler *next;
};

struct evloop {
	struct vm *vm;
	char name[16];
	int epfd, wake_fd;
	pthread_t thread;
	bool has_thread;
	atomic_bool stop;
	pthread_mutex_t lock;          /* handlers list, call slot */
	struct ev_handler *handlers;
	bool dispatching;
	/* One synchronous call at a time. */
	pthread_mutex_t call_lock;
	pthread_cond_t call_done;
	void (*call_fn)(void *);
	void *call_arg;
	bool call_pending;
	bool held;                     /* the loop thread's own: set by evloop_call */
	struct evloop *next;           /* vm->loops */
};

static struct ev_handler *find(struct evloop *l, int fd)
{
	for (struct ev_handler *h = l->handlers; h; h = h->next)
		if (h->fd == fd && !h->dead)
			return h;
	return NULL;
}

static void reap(struct evloop *l)
{
	struct ev_handler **pp = &l->handlers;

	while (*pp) {
		struct ev_handler *h = *pp;

		if (h->dead) {
			*pp = h->next;
			free(h);
		} else {
			pp = &h->next;
		}
	}
}

int evloop_add(struct evloop *l, int fd, uint32_t events, ev_cb cb, void *opaque)
{
	struct ev_handler *h = calloc(1, sizeof(*h));
	struct epoll_event ev = { .events = events };

	if (!h)
		return -1;
	h->fd = fd;
	h->cb = cb;
	h->opaque = opaque;
	ev.data.ptr = h;
	pthread_mutex_lock(&l->lock);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		pthread_mutex_unlock(&l->lock);
		free(h);
		return -1;
	}
	h->next = l->handlers;
	l->handlers = h;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

int evloop_mod(struct evloop *l, int fd, uint32_t events)
{
	struct ev_handler *h;
	int rc = -1;

	pthread_mutex_lock(&l->lock);
	h = find(l, fd);
	if (h) {
		struct epoll_event ev = { .events = events, .data.ptr = h };

		rc = epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void evloop_del(struct evloop *l, int fd)
{
	struct ev_handler *h;

	pthread_mutex_lock(&l->lock);
	h = find(l, fd);
	if (h) {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		h->dead = true;
		if (!l->dispatching)
			reap(l);
	}
	pthread_mutex_unlock(&l->lock);
}

static void run_call(struct evloop *l)
{
	void (*fn)(void *);
	void *arg;

	pthread_mutex_lock(&l->lock);
	fn = l->call_pending ? l->call_fn : NULL;
	arg = l->call_arg;
	pthread_mutex_unlock(&l->lock);
	if (!fn)
		return;
	fn(arg);
	pthread_mutex_lock(&l->lock);
	l->call_pending = false;
	pthread_cond_broadcast(&l->call_done);
	pthread_mutex_unlock(&l->lock);
}

int evloop_run_once(struct evloop *l, int timeout_ms)
{
	struct epoll_event ev[32];
	int n = epoll_wait(l->epfd, ev, 32, timeout_ms);

	if (n <= 0)
		return 0;
	pthread_mutex_lock(&l->lock);
	l->dispatching = true;
	pthread_mutex_unlock(&l->lock);
	for (int i = 0; i < n; i++) {
		struct ev_handler *h = ev[i].data.ptr;
		bool dead;

		if (!h) {               /* the wake eventfd */
			uint64_t v;

			if (read(l->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending: spurious */
			}
			run_call(l);
			if (l->held)
				break;          /* the rest stays ready in the kernel */
			continue;
		}
		pthread_mutex_lock(&l->lock);
		dead = h->dead;
		pthread_mutex_unlock(&l->lock);
		if (!dead)
			h->cb(h->opaque, ev[i].events);
	}
	pthread_mutex_lock(&l->lock);
	l->dispatching = false;
	reap(l);
	pthread_mutex_unlock(&l->lock);
	return n;
}

void evloop_call(struct evloop *l, void (*fn)(void *), void *arg)
{
	uint64_t one = 1;

	if (!l->has_thread || pthread_equal(pthread_self(), l->thread)) {
		fn(arg);
		return;
	}
	pthread_mutex_lock(&l->call_lock);
	pthread_mutex_lock(&l->lock);
	l->call_fn = fn;
	l->call_arg = arg;
	l->call_pending = true;
	if (write(l->wake_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write only fails on overflow, which one write cannot cause */
	}
	while (l->call_pending)
		pthread_cond_wait(&l->call_done, &l->lock);
	pthread_mutex_unlock(&l->lock);
	pthread_mutex_unlock(&l->call_lock);
}

/* Held: only calls run, until one releases the loop. */
static void wait_call(struct evloop *l)
{
	struct pollfd p = { .fd = l->wake_fd, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, -1) <= 0)
		return;
	if (read(l->wake_fd, &v, sizeof(v)) < 0) {
		/* spurious */
	}
	run_call(l);
}

static void *loop_thread(void *arg)
{
	struct evloop *l = arg;

	while (!atomic_load(&l->stop)) {
		if (l->held)
			wait_call(l);
		else
			evloop_run_once(l, -1);
	}
	return NULL;
}

static void hold_on(void *arg) { ((struct evloop *)arg)->held = true; }
static void hold_off(void *arg) { ((struct evloop *)arg)->held = false; }

void evloop_hold_all(struct vm *vm, bool on)
{
	pthread_mutex_lock(&vm->loops_lock);
	for (struct evloop *l = vm->loops; l; l = l->next)
		if (l->has_thread)
			evloop_call(l, on ? hold_on : hold_off, l);
	pthread_mutex_unlock(&vm->loops_lock);
}

static void stop_now(void *arg)
{
	atomic_store(&((struct evloop *)arg)->stop, true);
}

struct evloop *evloop_new(struct vm *vm, const char *name, struct verr *err)
{
	struct evloop *l = calloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (!l) {
		verr_set(err, "out of memory");
		return NULL;
	}
	l->vm = vm;
	snprintf(l->name, sizeof(l->name), "%s", name);
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_init(&l->call_lock, NULL);
	pthread_cond_init(&l->call_done, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->epfd < 0 || l->wake_fd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake_fd, &ev) < 0) {
		verr_errno(err, "%s: epoll/eventfd", name);
		if (l->epfd >= 0)
			close(l->epfd);
		if (l->wake_fd >= 0)
			close(l->wake_fd);
		free(l);
		return NULL;
	}
	pthread_mutex_lock(&vm->loops_lock);
	l->next = vm->loops;
	vm->loops = l;
	pthread_mutex_unlock(&vm->loops_lock);
	return l;
}

int evloop_start(struct evloop *l, struct verr *err)
{
	int e;

	if (l->vm->manual_loops || l->has_thread)
		return 0;
	e = pthread_create(&l->thread, NULL, loop_thread, l);
	if (e) {
		errno = e;
		return verr_errno(err, "%s: starting the device thread", l->name);
	}
	pthread_setname_np(l->thread, l->name);
	l->has_thread = true;
	return 0;
}

int evloop_run_all(struct vm *vm)
{
	int n = 0;

	pthread_mutex_lock(&vm->loops_lock);
	for (struct evloop *l = vm->loops; l; l = l->next)
		n += evloop_run_once(l, 0);
	pthread_mutex_unlock(&vm->loops_lock);
	return n;
}

void evloop_free(struct evloop *l)
{
	struct vm *vm;

	if (!l)
		return;
	vm = l->vm;
	if (l->has_thread) {
		evloop_call(l, stop_now, l);
		pthread_join(l->thread, NULL);
		l->has_thread = false;
	}
	pthread_mutex_lock(&vm->loops_lock);
	for (struct evloop **pp = &vm->loops; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	pthread_mutex_unlock(&vm->loops_lock);
	for (struct ev_handler *h = l->handlers, *n; h; h = n) {
		n = h->next;
		free(h);
	}
	close(l->epfd);
	close(l->wake_fd);
	pthread_mutex_destroy(&l->lock);
	pthread_mutex_destroy(&l->call_lock);
	pthread_cond_destroy(&l->call_done);
	free(l);
}
