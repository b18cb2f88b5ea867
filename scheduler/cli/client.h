/* The vhpc CLI's side of scheduler/PROTOCOL.md: finding the controller and
 * asking it things. */
#ifndef VHPC_SCHED_CLIENT_H
#define VHPC_SCHED_CLIENT_H

#include "lib/err.h"
#include <stdint.h>
#include <stddef.h>

struct json_object;

/* HOST:PORT of vhpc-ctld: $VHPC_CONTROLLER, else `controller:` of the
 * cluster file ($VHPC_CLUSTER or configs/cluster.yaml), else the local
 * service's (service_controller).  Returns 1 with
 * the address in buf, 0 when no cluster is configured (embedded mode), -1
 * when the setting is malformed. */
int client_controller(char *buf, size_t len, struct verr *err);
/* The local service's controller (vhpc service start): 1 with HOST:PORT in
 * buf while it runs, 0 when it does not. */
int service_controller(char *buf, size_t len);
/* The same for commands that need a cluster: 0, or EXIT_USAGE after
 * saying on stderr why there is no controller to ask. */
int client_need_controller(const char *cmd, char *buf, size_t len);
/* One request; *reply is the controller's answer (an error reply becomes
 * rc -1 with its text in err, and *reply NULL).  The reply must come from
 * root: a controller runs as root. */
int client_call(const char *ctl, struct json_object *req, struct json_object **reply,
		int timeout_ms, struct verr *err);
/* A reply field, or a default. */
long long client_int(struct json_object *o, const char *key, long long dflt);
const char *client_str(struct json_object *o, const char *key, const char *dflt);
/* A record's uid as this machine names it, else the number (in buf). */
const char *client_user_name(long long uid, char *buf, size_t len);
/* Prints a JSON value (pretty) and a newline on stdout. */
void client_print_json(struct json_object *o);
/* "123" -> 123; else an error naming what was given. */
int client_job_id(const char *cmd, const char *s, int64_t *id);
/* Asks for the job's output from *offset on and writes it to fd; state
 * (may be NULL) gets the job's state.  Returns 1 when the job has ended and
 * all of its output was written, 2 when more is waiting, 0 when there is
 * nothing new yet, -1 when the call failed (err). */
int client_output_step(const char *ctl, int64_t id, int64_t *offset, int fd, char *state,
		       size_t slen, struct verr *err);
/* The exit status `vhpc wait` and `vhpc run` give for a finished job. */
int client_job_status(struct json_object *job);

#endif
