/*
 * What every node of a Slurm job must agree on without talking to the
 * others: the job network's VXLAN id and the job's guest channel key, both
 * from the job id and the site's secret (a file the admin gives every
 * node, as munge's key).  HMAC-SHA256 (libsodium): the key or VNI of one
 * job tells nothing about another's, and without the secret nobody
 * predicts either.
 */
#include "lib/consts.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/secret.h"
#include "slurm/holder.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

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

/* One round of the permutation below: 12 bits from the secret, the round
 * and the other half. */
static uint32_t vni_round(const uint8_t *secret, size_t slen, int round, uint32_t half)
{
	char what[16];
	uint8_t m[32];
	uint32_t f;

	snprintf(what, sizeof(what), "vni round %d", round);
	mac(secret, slen, what, half, m);
	f = ((uint32_t)m[0] << 8 | m[1]) & 0xfff;
	sodium_memzero(m, sizeof(m));
	return f;
}

/* A keyed permutation of 24-bit numbers: a balanced Feistel network of 8
 * rounds (the construction of NIST's FF1, on 12-bit halves) whose round
 * function is HMAC-SHA256 under the site secret. */
static uint32_t vni_permute(const uint8_t *secret, size_t slen, uint32_t x)
{
	uint32_t l = x >> 12, r = x & 0xfff;

	for (int i = 0; i < 8; i++) {
		uint32_t t = l ^ vni_round(secret, slen, i, r);

		l = r;
		r = t;
	}
	return l << 12 | r;
}

uint32_t vs_job_vni(const uint8_t *secret, size_t slen, uint32_t job)
{
	/* The job id (1..2^24-1 after the modulo) through a keyed permutation:
	 * distinct ids among the next 2^24 - 1 never share a VNI, and without
	 * the secret one job's VNI tells nothing of another's (an offset, as
	 * before, gave every VNI away with one).  0 is no VNI: walking the
	 * permutation's cycle on past it keeps the map one-to-one. */
	uint32_t v = job % VHPC_VNI_MAX + 1;

	do
		v = vni_permute(secret, slen, v);
	while (v == 0);
	return v;
}

int vs_secret_load(const char *path, uint8_t *buf, size_t max, size_t *len, struct verr *err)
{
	return secret_load(path, buf, max, len, err);
}
