/*
 * The seccomp filter of container guests, as the OCI config's
 * linux.seccomp (runc loads it with libseccomp just before guestd starts).
 *
 * An allowlist: any system call not named here fails with EPERM, so one
 * that a newer kernel adds is denied until someone decides otherwise.  It
 * holds every x86-64 system call of the kernel headers this was written
 * against except those that reach state no namespace isolates, or that
 * exist to escape one:
 *   - kernel keyrings (add_key, request_key, keyctl), bpf, perf_event_open,
 *     io_uring_*, userfaultfd, kcmp, pidfd_getfd, process_madvise,
 *     memfd_secret, modify_ldt, ioperm, iopl;
 *   - the clock (clock_settime, clock_adjtime, settimeofday, adjtimex);
 *   - modules, kexec, reboot, swap, quotas, syslog, acct;
 *   - mounts and namespaces (mount, umount2, pivot_root, the fsopen/
 *     open_tree family, setns, unshare; clone only without CLONE_NEW*
 *     flags, and clone3 answered ENOSYS so that libc falls back to clone);
 *   - file handles (name_to_handle_at, open_by_handle_at);
 *   - personality other than Linux's own and the query;
 *   - syscalls that are obsolete or never implemented.
 * That is the set Docker's default profile denies to a container without
 * extra capabilities, and more (io_uring, modify_ldt).  Unlike Docker's
 * profile, the NUMA calls (mbind, set_mempolicy, get_mempolicy, move_pages,
 * migrate_pages) stay allowed: MPI and hwloc bind memory with them, and
 * the guest's cpuset.mems still bounds what they can reach.  ptrace and
 * process_vm_readv/writev stay allowed as in Docker's profile (debuggers;
 * single-copy MPI): the guest's own PID namespace and uid confine them, or
 * in a pod the pod's, which holds only its job's guests on that host.
 */
#include "lib/err.h"
#include "nodeagent/drivers/container/container.h"

#include <json-c/json.h>
#include <sched.h>
#include <stdint.h>

static const char *const allowed[] = {
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget",
	"capset", "chdir", "chmod", "chown", "chroot", "clock_getres", "clock_gettime",
	"clock_nanosleep", "close", "close_range", "connect", "copy_file_range", "creat",
	"dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
	"epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
	"execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64",
	"fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown", "fchownat",
	"fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr",
	"fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv",
	"futimesat", "get_mempolicy", "get_robust_list", "get_thread_area", "getcpu",
	"getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups",
	"getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid",
	"getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
	"inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
	"io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit", "ioctl",
	"ioprio_get", "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen",
	"listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise",
	"mbind", "membarrier", "memfd_create", "migrate_pages", "mincore", "mkdir", "mkdirat",
	"mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "move_pages", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend",
	"mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock",
	"munlockall", "munmap", "nanosleep", "newfstatat", "open", "openat", "openat2",
	"pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
	"pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv",
	"preadv2", "prlimit64", "process_mrelease", "process_vm_readv", "process_vm_writev",
	"pselect6", "ptrace", "pwrite64", "pwritev", "pwritev2", "read", "readahead",
	"readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
	"remap_file_pages", "removexattr", "rename", "renameat", "renameat2",
	"restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
	"rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min",
	"sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler",
	"sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam",
	"sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop",
	"semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto", "set_mempolicy",
	"set_mempolicy_home_node", "set_robust_list", "set_thread_area", "set_tid_address",
	"setdomainname", "setfsgid", "setfsuid", "setgid", "setgroups", "sethostname",
	"setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid",
	"setreuid", "setrlimit", "setsid", "setsockopt", "setuid", "setxattr", "shmat",
	"shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4",
	"socket", "socketpair", "splice", "stat", "statfs", "statx", "symlink", "symlinkat",
	"sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time",
	"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate",
	"umask", "uname", "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork",
	"vmsplice", "wait4", "waitid", "write", "writev",
	NULL
};

static struct json_object *names(const char *const *v)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; v[i]; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

static struct json_object *rule(const char *name, const char *action)
{
	struct json_object *r = json_object_new_object();

	json_object_object_add(r, "names", names((const char *const[]){ name, NULL }));
	json_object_object_add(r, "action", json_object_new_string(action));
	return r;
}

static struct json_object *arg(unsigned index, uint64_t value, uint64_t value2, const char *op)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "index", json_object_new_int((int)index));
	json_object_object_add(a, "value", json_object_new_uint64(value));
	json_object_object_add(a, "valueTwo", json_object_new_uint64(value2));
	json_object_object_add(a, "op", json_object_new_string(op));
	return a;
}

struct json_object *na_seccomp_profile(void)
{
	/* Every flag that makes clone create a namespace. */
	const uint64_t newns = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
			       CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
	static const uint64_t personas[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };
	struct json_object *p = json_object_new_object(), *rules = json_object_new_array(), *r, *args;

	json_object_object_add(p, "defaultAction", json_object_new_string("SCMP_ACT_ERRNO"));
	json_object_object_add(p, "defaultErrnoRet", json_object_new_int(1)); /* EPERM */
	json_object_object_add(p, "architectures", names((const char *const[]){ "SCMP_ARCH_X86_64", NULL }));
	r = json_object_new_object();
	json_object_object_add(r, "names", names(allowed));
	json_object_object_add(r, "action", json_object_new_string("SCMP_ACT_ALLOW"));
	json_object_array_add(rules, r);

	r = rule("clone", "SCMP_ACT_ALLOW");
	args = json_object_new_array();
	json_object_array_add(args, arg(0, newns, 0, "SCMP_CMP_MASKED_EQ"));
	json_object_object_add(r, "args", args);
	json_object_array_add(rules, r);

	r = rule("clone3", "SCMP_ACT_ERRNO");
	json_object_object_add(r, "errnoRet", json_object_new_int(38)); /* ENOSYS */
	json_object_array_add(rules, r);

	/* One rule per value: the arguments of one rule are ANDed. */
	for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++) {
		r = rule("personality", "SCMP_ACT_ALLOW");
		args = json_object_new_array();
		json_object_array_add(args, arg(0, personas[i], 0, "SCMP_CMP_EQ"));
		json_object_object_add(r, "args", args);
		json_object_array_add(rules, r);
	}
	json_object_object_add(p, "syscalls", rules);
	return p;
}
