#!/usr/bin/env python3
"""ckpt_cksum's checksum lines, computed again from the definition in
tests/mpi/README.md without any of its C code, so that a test can show
the MPI run and its --reference agree with something written apart.

usage: ckpt_cksum_ref.py --ranks P --rounds N [--bytes B] [--every K] [--scratch]
Slow (pure Python): for a few rounds of a few KiB.
"""
import argparse

M64 = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MSG, ALLRED, DISK = 1, 2, 3
ALLRED_WORDS = 4


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def seed(kind, rnd, a, b):
    x = mix(0x636B70745F636B73 ^ kind)
    x = mix(x ^ rnd)
    x = mix(x ^ a)
    return mix(x ^ b)


def words(st, n):
    out = []
    for _ in range(n):
        st = (st + 0x9E3779B97F4A7C15) & M64
        out.append(mix(st))
    return out


def stream(st, length):
    data = b"".join(w.to_bytes(8, "little") for w in words(st, (length + 7) // 8))
    return data[:length]


def fnv(h, data):
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & M64
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--scratch", action="store_true")
    o = ap.parse_args()
    h = [FNV_OFFSET] * o.ranks
    for r in range(1, o.rounds + 1):
        total = [0] * ALLRED_WORDS
        for q in range(o.ranks):
            total = [(t + w) & M64 for t, w in zip(total, words(seed(ALLRED, r, q, 0), ALLRED_WORDS))]
        reduced = b"".join(t.to_bytes(8, "little") for t in total)
        for s in range(o.ranks):
            for d in range(o.ranks):
                if d != s:
                    h[s] = fnv(h[s], stream(seed(MSG, r, d, s), o.bytes))
            h[s] = fnv(h[s], reduced)
            if o.scratch:
                h[s] = fnv(h[s], stream(seed(DISK, r, s, 0), o.bytes))
        if r % o.every == 0 or r == o.rounds:
            c = fnv(FNV_OFFSET, b"".join(x.to_bytes(8, "little") for x in h))
            if r % o.every == 0:
                print("round %d checksum %016x" % (r, c))
            if r == o.rounds:
                print("final checksum %016x rounds %d ranks %d" % (c, o.rounds, o.ranks))


main()
