/*
 * What every node of a Slurm job must agree on without talking to the
 * others: the job network's VXLAN id and the job's guest channel key, both
 * from the job id and the site's secret (a file the admin gives every
 * node, as munge's key).  HMAC-SHA256 (libsodium): the key of one job
 * tells nothing about another's, and without the secret nobody predicts
 * either.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "slurm/holder.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void mac(const uint8_t *secret, size_t slen, const char *what, uint32_t job, uint8_t out[32])
{
	crypto_auth_hmacsha256_state st;
	char msg[64];
	int n = snprintf(msg, sizeof(msg), "vhpc-slurm %s %u", what, job);

	crypto_auth_hmacsha256_init(&st, secret, slen);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)msg, (size_t)n);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

void vs_job_key(const uint8_t *secret, size_t slen, uint32_t job, uint8_t key[CHAN_KEY_LEN])
{
	uint8_t m[32];

	mac(secret, slen, "job key", job, m);
	memcpy(key, m, CHAN_KEY_LEN);
	sodium_memzero(m, sizeof(m));
}

uint32_t vs_job_vni(const uint8_t *secret, size_t slen, uint32_t job)
{
	uint8_t m[32];
	uint32_t off;

	/* An offset rather than a hash of the id: consecutive jobs, which are
	 * the ones that run at the same time, never share a VNI until 2^24 - 1
	 * job ids later; the secret only moves where the count starts. */
	mac(secret, slen, "vni", 0, m);
	off = (uint32_t)m[0] << 16 | (uint32_t)m[1] << 8 | m[2];
	return (uint32_t)(((uint64_t)job + off) % VHPC_VNI_MAX) + 1;
}

int vs_secret_load(const char *path, uint8_t *buf, size_t max, size_t *len, struct verr *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	ssize_t r;

	if (fd < 0)
		return verr_errno(err, "the site secret %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		close(fd);
		return verr_set(err, "the site secret %s must be a file of root's that only root reads (mode 0600)", path);
	}
	r = read(fd, buf, max);
	close(fd);
	if (r < 16)
		return verr_set(err, "the site secret %s holds %zd bytes: at least 16 expected (e.g. head -c 64 /dev/urandom)",
				path, r < 0 ? (ssize_t)0 : r);
	*len = (size_t)r;
	return 0;
}
