/*
 * The attack on a node's memory through a kvm guest: vhpc-hv and the
 * guest's virtiofsd ran in cgroups with a cpuset and no memory limit, so
 * a guest that drives its device models (or a vhpc-hv it took over) into
 * allocating took the node's memory, and the node's OOM killer chose
 * among everyone's processes.  Here a process joins the cgroups
 * kvm_cgroups_prepare makes for a guest, as vhpc-hv does before it execs,
 * and allocates four times the limit: the cgroup's OOM killer must stop
 * it, and the limit must be what kvm_mem_limit says for the guest.
 *
 * The scratch-disk half of the same hole (a sparse file in the job dir,
 * on the run dir's tmpfs) is unit-kvm's scratch_disk_* tests; the whole
 * path with real guests is tests/kvm/devices.t (lab).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/fsutil.h"
#include "nodeagent/drivers/kvm/kvm_int.h"
#include "nodeagent/jobdir/jobdir.h"

#define JOB "kvmmemt"
#define LIMIT (64ull << 20)

static bool memory_controller(void)
{
	char **m;
	int n;
	bool any = false;
	struct verr e;

	if (na_cgroup_mounts(&m, &n, &e) < 0)
		return false;
	for (int i = 0; i < n; i++) {
		char p[4096];

		snprintf(p, sizeof(p), "%s/memory.limit_in_bytes", m[i]);
		any |= access(p, F_OK) == 0;
		snprintf(p, sizeof(p), "%s/cgroup.controllers", m[i]);
		if (access(p, F_OK) == 0) {
			char *t = NULL;
			size_t len;

			any |= read_file(p, &t, &len, 4096, &e) == 0 && strstr(t, "memory");
			free(t);
		}
	}
	na_cgroup_mounts_free(m, n);
	return any;
}

/* Joins the cgroups through fds, then touches `bytes` of fresh memory in
 * MiB steps; exits 0 if it got them all. */
static pid_t hog(const int *fds, int n, uint64_t bytes)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < n; i++)
			if (write(fds[i], "0", 1) != 1)
				_exit(3);
		for (uint64_t done = 0; done < bytes; done += 1 << 20) {
			char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED)
				_exit(4);
			memset(p, 0x5a, 1 << 20);
		}
		_exit(0);
	}
	return pid;
}

static void guest_memory_is_limited(void **state)
{
	struct na_placement p = { .ncpus = 1, .cpus = { 0 }, .nmems = 1, .mems = { 0 } };
	int fds[8], n, st, removed = 0;
	struct verr e;
	pid_t pid;

	(void)state;
	if (!memory_controller())
		skip();
	assert_int_equal(kvm_cgroups_prepare(JOB, 0, &p, LIMIT, fds, 8, &n, &e), 0);
	pid = hog(fds, n, 4 * LIMIT);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		fail_msg("a process in the guest's cgroups touched %llu MiB past a %llu MiB limit (%s %d)",
			 (unsigned long long)(4 * LIMIT >> 20), (unsigned long long)(LIMIT >> 20),
			 WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	/* What the end-of-guest log line reports: at most the limit. */
	assert_true(kvm_mem_peak(JOB, 0) > LIMIT / 2);
	assert_true(kvm_mem_peak(JOB, 0) <= LIMIT);
	assert_int_equal(na_cgroup_remove("vhpc/" JOB "/0", true, &removed, &e), 0);
	na_cgroup_rmdir_job(JOB);
}

/* A guest's limit: its RAM, the vmshm region it maps, and room for
 * vhpc-hv and its virtiofsd. */
static void limit_covers_ram_region_and_overhead(void **state)
{
	(void)state;
	assert_int_equal(kvm_mem_limit(512ull << 20, 0), (512ull << 20) + KVM_MEM_OVERHEAD + (16ull << 20));
	assert_int_equal(kvm_mem_limit(4ull << 30, 1ull << 30), (5ull << 30) + KVM_MEM_OVERHEAD + (128ull << 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(guest_memory_is_limited),
		cmocka_unit_test(limit_covers_ram_region_and_overhead),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (cgroups)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
