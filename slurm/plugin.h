/*
 * The SPANK plugin's own pieces (private to slurm/): what a task does to
 * run inside its guest (task.c) and the relay that lets it reach Slurm's
 * PMIx server from there (pmix.c).  Plain libc: this code runs inside
 * slurmstepd's task processes.
 */
#ifndef VHPC_SLURM_PLUGIN_H
#define VHPC_SLURM_PLUGIN_H

#include "slurm/slurm.h"

#include <stddef.h>
#include <sys/types.h>

/* task.c.  As root in the task's process (task_init_privileged): joins
 * guest g's network, UTS, IPC and mount namespaces, and its pid namespace
 * for the task's children, and takes its init's RLIMIT_MEMLOCK (soft and
 * hard: what the guest may pin).  The guest's init must still be the pid
 * the state names (its network namespace is checked against the guest's). */
int vs_enter_guest(const struct vs_guest *g, char *why, size_t len);
/* As the user, just before exec (task_init): pins the task to the guest's
 * CPUs and memory nodes, then forks.  The child, in the guest's pid
 * namespace with no new privileges, returns 0 and becomes the task; the
 * parent forwards every signal it gets to it and exits as it did, so
 * Slurm's signals, exit codes and accounting see the task as if it had
 * not moved.  Returns -1 (why set) only before the fork. */
int vs_become_guest_task(const struct vs_guest *g, char *why, size_t len);

/* pmix.c.  Slurm's PMIx server listens on the node's 127.0.0.1 (a port
 * per protocol version it offers: PMIX_SERVER_URI4, _URI41, ...), which a
 * task in a guest's network namespace cannot reach.  vs_relay_start (root,
 * before joining the guest) listens on VS_RELAY_PORTS ports of the guest's
 * 127.0.0.1 and forks a relay process of the job's user in the node's
 * namespace; vs_relay_aim (task_init, once Slurm has put the URIs in the
 * environment) tells it which server port each of its ports leads to. */
#define VS_RELAY_PORTS 4
struct vs_relay {
	int port[VS_RELAY_PORTS];  /* on the guest's 127.0.0.1 */
	int aim_fd;                /* write end: the server's ports, as text */
	pid_t pid;
};
int vs_relay_start(const char *guest_netns, uid_t uid, gid_t gid, struct vs_relay *r, char *why, size_t len);
/* server[i]: where relay port i leads (0: nowhere). */
int vs_relay_aim(struct vs_relay *r, const int server[VS_RELAY_PORTS], char *why, size_t len);
/* A PMIX_SERVER_URI* value ("pmix-server.PID;tcp4://127.0.0.1:PORT")
 * with the relay's port instead; *server_port gets the old one.  -1 when
 * it does not name a server on 127.0.0.1. */
int vs_pmix_uri_rewrite(const char *uri, int relay_port, char *out, size_t len, int *server_port);

#endif
