/* Running helper programs (ldd, runc, dpkg) without a shell, so arguments
 * are never re-parsed, and with their output captured for error messages. */
#include "lib/proc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/grow.h"

#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int grow_append(char **buf, size_t *len, size_t *cap, size_t max,
		       const char *src, size_t n)
{
	if (*len + n > max)
		n = max > *len ? max - *len : 0;
	if (grow(buf, cap, *len + n + 1, 1, 4096) < 0)
		return -1;
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

int run_capture(const char *const *argv, char **out, size_t *out_len,
		size_t max, int timeout_ms, struct verr *err)
{
	int op[2] = { -1, -1 }, ep[2] = { -1, -1 }, status, rc = -1;
	char *obuf = NULL, *ebuf = NULL;
	size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
	posix_spawn_file_actions_t fa;
	uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	bool killed = false;
	pid_t pid;

	if (pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		verr_errno(err, "pipe");
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	errno = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(op[1]);
	close(ep[1]);
	op[1] = ep[1] = -1;
	if (errno) {
		verr_errno(err, "cannot run %s", argv[0]);
		goto out;
	}
	for (int open_fds = 2; open_fds > 0;) {
		struct pollfd p[2] = { { .fd = op[0], .events = POLLIN }, { .fd = ep[0], .events = POLLIN } };
		int left = -1, r;

		if (deadline) {
			uint64_t now = now_ns();

			left = now >= deadline ? 0 : (int)((deadline - now) / 1000000) + 1;
		}
		r = poll(p, 2, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		for (int i = 0; i < 2; i++) {
			char chunk[8192];
			ssize_t n;

			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, chunk, sizeof(chunk));
			if (n <= 0) {
				close(p[i].fd);
				if (i == 0)
					op[0] = -1;
				else
					ep[0] = -1;
				open_fds--;
				continue;
			}
			if (i == 0 ? grow_append(&obuf, &olen, &ocap, max, chunk, n)
				   : grow_append(&ebuf, &elen, &ecap, 4096, chunk, n)) {
				kill(pid, SIGKILL);
				killed = true;
				open_fds = 0;
				break;
			}
		}
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (killed) {
		verr_set(err, "%s did not finish within %d ms; killed", argv[0], timeout_ms);
		goto out;
	}
	if (WIFSIGNALED(status)) {
		verr_set(err, "%s was killed by signal %d%s%s", argv[0], WTERMSIG(status),
			 elen ? ": " : "", elen ? ebuf : "");
		goto out;
	}
	rc = WEXITSTATUS(status);
	if (rc != 0) {
		/* Keep the program's own words: they usually say what is wrong. */
		while (elen && (ebuf[elen - 1] == '\n' || ebuf[elen - 1] == ' '))
			ebuf[--elen] = 0;
		verr_set(err, "%s exited with status %d%s%s", argv[0], rc,
			 elen ? ": " : "", elen ? ebuf : "");
	}
	if (out) {
		if (!obuf)
			obuf = calloc(1, 1);
		*out = obuf;
		obuf = NULL;
	}
	if (out_len)
		*out_len = olen;
out:
	for (int i = 0; i < 2; i++) {
		if (op[i] >= 0)
			close(op[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	free(obuf);
	free(ebuf);
	return rc;
}

void proc_block_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}
