/*
 * Internal: XXH64 (Yann Collet's xxHash, 64-bit), incremental. The check on
 * the bytes of a file moved over the control port: both ends hash what they
 * sent or received and compare. Not a MAC (nothing stands between the engine
 * and the guest's helper to forge one against), but a 64-bit hash whose every
 * output bit depends on every input bit, so a byte lost, changed or moved
 * goes unseen once in 2^64; and it costs a few instructions per 8 bytes,
 * which an emulated guest CPU (TCG) runs at memory speed where it runs
 * SHA-256's rounds at ~37 MB/s. Self-contained (the C library only):
 * images/build compiles xxh64.c into the guest's aas-control too.
 */
#ifndef SAAS_XXH64_H
#define SAAS_XXH64_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint64_t v[4];
	uint64_t total;                /* bytes fed so far */
	unsigned char mem[32];         /* a partial stripe: total % 32 bytes of it */
} saas__xxh64_ctx;

void saas__xxh64_init(saas__xxh64_ctx *c, uint64_t seed);
void saas__xxh64_update(saas__xxh64_ctx *c, const void *data, size_t len);
/* The hash of everything fed so far (c may be fed more after). */
uint64_t saas__xxh64_digest(const saas__xxh64_ctx *c);

#endif
