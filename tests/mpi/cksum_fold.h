/*
 * What ckpt_cksum computes, apart from how it moves the data: every byte
 * any rank sends or writes is a pure function of (kind, round, a, b), and
 * each rank folds what it receives into a running FNV-1a in a fixed order,
 * so the result cannot depend on timing, host, pid or address.  The MPI
 * run (ckpt_cksum.c), its single-process reference (cksum_ref.c) and the
 * independent Python copy (ckpt_cksum_ref.py) all follow this definition;
 * README.md in this folder spells it out.
 */
#ifndef VHPC_TESTS_CKSUM_FOLD_H
#define VHPC_TESTS_CKSUM_FOLD_H

#include <stddef.h>
#include <stdint.h>

#define CK_FNV_OFFSET 0xcbf29ce484222325ull
#define CK_FNV_PRIME 0x100000001b3ull

/* Kinds of data: one stream each, so no two can coincide. */
enum ck_kind { CK_MSG = 1, CK_ALLRED = 2, CK_DISK = 3 };

/* Words of each rank's allreduce contribution per round. */
#define CK_ALLRED_WORDS 4
/* A scratch file holds the blocks of this many rounds, one slot each. */
#define CK_DISK_SLOTS 16

/* The stream's starting state for (kind, round, a, b). */
uint64_t ck_seed(enum ck_kind kind, uint64_t round, uint64_t a, uint64_t b);
/* splitmix64: the next word of a stream. */
uint64_t ck_next(uint64_t *state);
/* LEN bytes of the stream from SEED: its words little-endian, the last
 * one cut short. */
void ck_fill(uint64_t seed, unsigned char *buf, size_t len);
/* FNV-1a over LEN bytes, continuing from H. */
uint64_t ck_fnv(uint64_t h, const void *buf, size_t len);
/* The same over V's 8 bytes, little-endian. */
uint64_t ck_fnv_u64(uint64_t h, uint64_t v);
/* Offset of LEN bytes of DATA that differ from the stream SEED would
 * give, or (size_t)-1 if none. */
size_t ck_mismatch(uint64_t seed, const unsigned char *data, size_t len);

/* The options of a run that the checksum depends on. */
struct ck_params {
	uint64_t rounds;
	uint64_t bytes;   /* per message, and per scratch block */
	uint64_t every;   /* a progress line each EVERY rounds */
	int ranks;
	int scratch;      /* with --scratch: each round's disk block folded in */
};

/* The job-wide checksum from every rank's running one (H[0..ranks-1]):
 * FNV-1a over them in rank order. */
uint64_t ck_combine(const uint64_t *h, int ranks);

/* Single-process reference: calls EMIT(round, checksum, arg) at each
 * progress point (every EVERY rounds and the last), returns the final
 * checksum, or sets *ERR (static text) on running out of memory. */
uint64_t ck_reference(const struct ck_params *p, void (*emit)(uint64_t, uint64_t, void *), void *arg,
		      const char **err);

#endif
