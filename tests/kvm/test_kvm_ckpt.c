/*
 * The kvm driver's side of a checkpoint (nodeagent/drivers/kvm/kvm_ckpt.c),
 * on the host: the scratch disk's sparse copy, vhpc-hv's argv for a
 * restore, what a restore refuses to open (another image, a symlink or a
 * FIFO planted in the folder), and the control requests: the snapshot's
 * file passed by SCM_RIGHTS, and vhpc-hv's refusals and states taken at
 * their word.  The peer of the control requests is a socket in the test
 * that answers as hv/hv.h says vhpc-hv does; vhpc-hv's own snapshot runs
 * in tests/hv/snapshot.t (the lab).
 */
#include "lib/argv.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/fixture.h"

#include "images/images.h"
#include "nodeagent/drivers/drivers.h"
#include "nodeagent/drivers/kvm/kvm_int.h"
#include "nodeagent/place/place.h"

static char tmp[PATH_MAX];

/* An expected success, or the error that stopped it. */
#define assert_ok(call, e) do { \
		if ((call) != 0) \
			fail_msg("%s: %s", #call, (e).msg); \
	} while (0)

static int setup(void **state)
{
	(void)state;
	return fx_tmpdir(tmp, sizeof(tmp), "kvmckpt");
}

static int teardown(void **state)
{
	(void)state;
	return fx_rmdir(tmp);
}

static int open_in(const char *name, int flags)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	return open(p, flags | O_CLOEXEC, 0600);
}

/* Two islands of data in 64 MiB: the copy has them, at their offsets,
 * the same size, and no more blocks than the data. */
static void copy_keeps_holes(void **state)
{
	char a[4096], b[4096];
	struct stat si, so;
	uint64_t n;
	struct verr e;
	int in = open_in("disk", O_RDWR | O_CREAT | O_TRUNC), out = open_in("copy", O_RDWR | O_CREAT | O_TRUNC);

	(void)state;
	assert_true(in >= 0 && out >= 0);
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	assert_int_equal(pwrite(in, a, sizeof(a), 0), sizeof(a));
	assert_int_equal(pwrite(in, b, sizeof(b), 40 << 20), sizeof(b));
	assert_int_equal(ftruncate(in, 64 << 20), 0);
	/* The copy's old content must not survive where the disk has holes. */
	assert_int_equal(pwrite(out, b, sizeof(b), 8 << 20), sizeof(b));
	assert_int_equal(ftruncate(out, 0), 0);
	assert_int_equal(na_copy_sparse(in, out, &n, &e), 0);
	assert_true(fstat(in, &si) == 0 && fstat(out, &so) == 0);
	assert_int_equal(so.st_size, 64 << 20);
	assert_true(n >= 8192 && n < (4u << 20));
	assert_true(so.st_blocks * 512 < (8 << 20));
	{
		char got[4096], zero[4096] = { 0 };

		assert_int_equal(pread(out, got, sizeof(got), 0), sizeof(got));
		assert_memory_equal(got, a, sizeof(a));
		assert_int_equal(pread(out, got, sizeof(got), 40 << 20), sizeof(got));
		assert_memory_equal(got, b, sizeof(b));
		assert_int_equal(pread(out, got, sizeof(got), 8 << 20), sizeof(got));
		assert_memory_equal(got, zero, sizeof(zero));
	}
	/* An empty disk copies to an empty file of its size. */
	assert_int_equal(ftruncate(in, 0), 0);
	assert_int_equal(ftruncate(in, 1 << 20), 0);
	assert_int_equal(ftruncate(out, 0), 0);
	assert_int_equal(na_copy_sparse(in, out, &n, &e), 0);
	assert_int_equal(n, 0);
	assert_true(fstat(out, &so) == 0 && so.st_size == 1 << 20);
	close(in);
	close(out);
}

static const char *joined(char **argv)
{
	static char buf[4096];
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; argv[i]; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? "|" : "", argv[i]);
	return buf;
}

/* A restore: the snapshot passed open, --paused, the same machine. */
static void argv_restore(void **state)
{
	struct image_info img = { .kvm = true };
	struct na_placement p = { .ncpus = 1, .cpus = { 2 }, .nmems = 1, .mems = { 0 } };
	struct na_kvm_spec s = {
		.job = "ab12", .index = 0, .name = "g0", .img = &img, .place = &p, .mem = 256ull << 20,
		.addr = 0x0ad50002, .prefix = 24, .mtu = 1500, .guest_port = 7707,
		.config_disk = "/proc/self/fd/7", .hv_path = "/usr/bin/vhpc-hv", .restore = "/proc/self/fd/9",
	};
	struct na_kvm_fds f = NA_KVM_FDS_NONE(5);
	char **argv;
	struct verr e;

	(void)state;
	snprintf(img.kernel, sizeof(img.kernel), "/img/kvm/vmlinuz");
	snprintf(img.initrd, sizeof(img.initrd), "/img/kvm/initramfs.img");
	snprintf(img.disk, sizeof(img.disk), "/img/kvm/rootfs.ext4");
	f.restore = 12;
	f.config = 13;
	assert_ok(na_kvm_argv(&s, "/run/j/kvm0", &f, &argv, &e), e);
	assert_non_null(strstr(joined(argv), "|--blk|path=/dev/fd/13,ro,serial=vhpc-config|"));
	assert_non_null(strstr(joined(argv), "|--restore|/dev/fd/12|--paused|--seccomp"));
	argv_free(argv);
	/* A fresh start has neither. */
	s.restore = NULL;
	assert_ok(na_kvm_argv(&s, "/run/j/kvm0", &f, &argv, &e), e);
	assert_null(strstr(joined(argv), "--restore"));
	assert_null(strstr(joined(argv), "--paused"));
	argv_free(argv);
	/* A path that could smuggle a device option is refused. */
	s.restore = "/run/a,ro/snapshot";
	assert_int_equal(na_kvm_argv(&s, "/run/j/kvm0", &f, &argv, &e), -1);
	assert_non_null(strstr(e.msg, "snapshot"));
}

static int mkfile(int dfd, const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	if (write_full(fd, text, strlen(text)) < 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static void restore_refuses(void **state)
{
	char d[PATH_MAX + 8];
	int dfd;
	struct kvm_restore_fds r;
	struct verr e;

	(void)state;
	snprintf(d, sizeof(d), "%s/g0", tmp);
	assert_int_equal(mkdir(d, 0700), 0);
	dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(mkfile(dfd, "image", "1111\n"), 0);
	assert_int_equal(mkfile(dfd, "snapshot", "VHPCSNAP"), 0);
	assert_int_equal(mkfile(dfd, "config.ext4", "cfg"), 0);

	/* Another image than the one the guest ran. */
	assert_int_equal(kvm_restore_open(dfd, "2222", false, &r, &e), -1);
	assert_non_null(strstr(e.msg, "saved running image 1111, this job has image 2222"));
	assert_int_equal(r.snapshot, -1);

	assert_int_equal(kvm_restore_open(dfd, "1111", false, &r, &e), 0);
	assert_true(r.snapshot >= 0 && r.config >= 0 && r.scratch == -1);
	kvm_restore_close(&r);
	assert_int_equal(r.snapshot, -1);

	/* A job with a scratch disk needs the saved one. */
	assert_int_equal(kvm_restore_open(dfd, "1111", true, &r, &e), -1);
	assert_non_null(strstr(e.msg, "scratch.img"));
	assert_int_equal(r.snapshot, -1);

	/* A symlink in the folder's place of the snapshot, to a host file:
	 * never followed. */
	assert_int_equal(unlinkat(dfd, "snapshot", 0), 0);
	assert_int_equal(symlinkat("/etc/shadow", dfd, "snapshot"), 0);
	assert_int_equal(kvm_restore_open(dfd, "1111", false, &r, &e), -1);
	assert_non_null(strstr(e.msg, "snapshot"));
	assert_non_null(strstr(e.msg, strerror(ELOOP)));
	/* A FIFO: refused at once, not waited on. */
	assert_int_equal(unlinkat(dfd, "snapshot", 0), 0);
	assert_int_equal(mkfifoat(dfd, "snapshot", 0600), 0);
	assert_int_equal(kvm_restore_open(dfd, "1111", false, &r, &e), -1);
	assert_non_null(strstr(e.msg, "snapshot: not a regular file"));
	/* A symlinked image record is not read either. */
	assert_int_equal(unlinkat(dfd, "image", 0), 0);
	assert_int_equal(symlinkat("/etc/hostname", dfd, "image"), 0);
	assert_int_equal(kvm_restore_open(dfd, "1111", false, &r, &e), -1);
	assert_non_null(strstr(e.msg, "image"));
	close(dfd);
}

/* The control socket's peer: answers n requests, one per connection.
 * A "snapshot" request must come with a descriptor; into it goes
 * "SNAP", as vhpc-hv would write its snapshot. */
static pid_t peer(const char *path, int n, const char *const *replies)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		return -1;
	pid = fork();
	if (pid != 0) {
		close(l);
		return pid;
	}
	/* A failed check ends the test before every request came: the peer
	 * must not outlive it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(30);
	for (int i = 0; i < n; i++) {
		char buf[256];
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm;
		struct iovec iov = { buf, sizeof(buf) - 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b) };
		int c = accept(l, NULL, NULL), fd = -1;
		ssize_t r;

		if (c < 0)
			_exit(1);
		r = recvmsg(c, &m, 0);
		if (r <= 0)
			_exit(2);
		buf[r] = 0;
		if (m.msg_controllen && CMSG_FIRSTHDR(&m)->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
		if (strstr(buf, "\"snapshot\"")) {
			if (fd < 0 || write(fd, "SNAP", 4) != 4) {
				dprintf(c, "{\"ok\":false,\"error\":\"no descriptor\"}\n");
				close(c);
				continue;
			}
		}
		dprintf(c, "%s\n", replies[i]);
		close(c);
		if (fd >= 0)
			close(fd);
	}
	_exit(0);
}

static void reap_peer(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void control_pause_and_save(void **state)
{
	const char *const replies[] = {
		"{\"ok\":true,\"state\":\"paused\"}",
		"{\"ok\":true,\"state\":\"running\"}",                 /* a pause that did not take */
		"{\"ok\":false,\"error\":\"the guest is running: pause it first\"}",
		"{\"ok\":true,\"bytes\":4,\"ram_bytes\":0,\"ms\":1}",
		"{\"ok\":false,\"error\":\"device virtio-blk cannot be snapshotted (it saves no state)\"}",
	};
	struct na_kvm k = { .name = "g0" };
	char d[PATH_MAX + 8], cfg[PATH_MAX + 16], got[16];
	int dfd, sfd, fd;
	uint64_t bytes;
	struct verr e;
	pid_t pid;
	struct kvm_save_in in = { .image_id = "abcd", .config_disk = cfg, .mem = 128ull << 20 };

	(void)state;
	setenv("VHPC_KVM_TIME_SCALE", "1", 1);
	snprintf(k.ctl, sizeof(k.ctl), "%s/ctl", tmp);
	snprintf(cfg, sizeof(cfg), "%s/config.ext4", tmp);
	assert_int_equal(mkfile(AT_FDCWD, cfg, "config disk"), 0);
	sfd = open_in("scratch", O_RDWR | O_CREAT | O_TRUNC);
	assert_true(sfd >= 0);
	assert_int_equal(pwrite(sfd, "data", 4, 1 << 20), 4);
	in.scratch_fd = sfd;
	pid = peer(k.ctl, 5, replies);
	assert_true(pid > 0);

	assert_ok(kvm_pause(&k, true, &e), e);
	assert_int_equal(kvm_pause(&k, true, &e), -1);
	assert_non_null(strstr(e.msg, "guest g0: vhpc-hv is running after pause"));

	/* vhpc-hv's refusal in its own words. */
	snprintf(d, sizeof(d), "%s/g1", tmp);
	assert_int_equal(mkdir(d, 0700), 0);
	dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(kvm_save(&k, &in, dfd, &bytes, &e), -1);
	assert_non_null(strstr(e.msg, "snapshot: vhpc-hv: the guest is running: pause it first"));
	assert_int_equal(unlinkat(dfd, "snapshot", 0), 0);
	assert_int_equal(unlinkat(dfd, "image", 0), 0);

	/* Saved: the file vhpc-hv got is the folder's snapshot. */
	assert_ok(kvm_save(&k, &in, dfd, &bytes, &e), e);
	fd = openat(dfd, "snapshot", O_RDONLY);
	assert_int_equal(read(fd, got, sizeof(got)), 4);
	assert_memory_equal(got, "SNAP", 4);
	close(fd);
	fd = openat(dfd, "image", O_RDONLY);
	assert_int_equal(read(fd, got, sizeof(got)), 5);
	assert_memory_equal(got, "abcd\n", 5);
	close(fd);
	fd = openat(dfd, "config.ext4", O_RDONLY);
	assert_int_equal(read(fd, got, sizeof(got)), 11);
	close(fd);
	{
		struct stat st;

		assert_int_equal(fstatat(dfd, "scratch.img", &st, 0), 0);
		assert_int_equal(st.st_size, (1 << 20) + 4);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	assert_int_equal(bytes, 4 + 11 + 4);
	/* Saved again into the same folder: refused, nothing overwritten. */
	assert_int_equal(kvm_save(&k, &in, dfd, &bytes, &e), -1);
	assert_non_null(strstr(e.msg, "image"));
	assert_non_null(strstr(e.msg, strerror(EEXIST)));

	/* A device vhpc-hv cannot save: its words, the folder left to the
	 * caller to clear. */
	for (const char *const *n = (const char *const[]){ "image", "snapshot", "config.ext4", "scratch.img", NULL }; *n; n++)
		assert_int_equal(unlinkat(dfd, *n, 0), 0);
	assert_int_equal(kvm_save(&k, &in, dfd, &bytes, &e), -1);
	assert_non_null(strstr(e.msg, "device virtio-blk cannot be snapshotted"));
	close(dfd);
	close(sfd);
	reap_peer(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(copy_keeps_holes),
		cmocka_unit_test(argv_restore),
		cmocka_unit_test(restore_refuses),
		cmocka_unit_test(control_pause_and_save),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
