/* vhpc exec and vhpc shell: a guestd channel to one guest of a running
 * job, through vhpc-ctld and the guest's node (scheduler/PROTOCOL.md,
 * exec; guest/PROTOCOL.md for what runs on it). */
#ifndef VHPC_SCHED_EXEC_STREAM_H
#define VHPC_SCHED_EXEC_STREAM_H

#include "lib/chan.h"
#include "lib/err.h"
#include "lib/wirepipe.h"
#include <pthread.h>
#include <stdint.h>

struct exec_stream {
	struct chan c;             /* the channel to the guest's agent */
	char cwd[4096];            /* the ranks' working folder there */
	char **env;                /* and what their environment adds */
	char node[65];
	/* private */
	int conn, sv[2];
	uint8_t pk[WPIPE_KEY_LEN];
	pthread_t pump;
	bool pumping;
};
/* Asks ctl for guest `guest` of job id and runs the channel's handshake;
 * errors are the controller's (denied, ended, ...) or the stream's. */
int exec_stream_open(const char *ctl, int64_t id, int guest, struct exec_stream *x, struct verr *err);
/* Ends the channel and waits (briefly) for the stream to wind down. */
void exec_stream_close(struct exec_stream *x);
/* How many guests job id has (its record's "guests"), for --all. */
int exec_job_guests(const char *ctl, int64_t id, int *n, struct verr *err);

#endif
