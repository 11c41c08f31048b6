/*
 * Internal: SHA-256 (FIPS 180-4), incremental, for what streams its bytes;
 * util.h's saas__sha256 and saas__sha256_hex hash a buffer whole. Needs
 * nothing but the C library.
 */
#ifndef SAAS_SHA256_H
#define SAAS_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SAAS_SHA256_LEN 32

typedef struct {
	uint32_t h[8];
	uint64_t len;                  /* bytes fed so far */
	uint8_t buf[64];               /* a partial block: len % 64 bytes of it */
} saas__sha256_ctx;

void saas__sha256_init(saas__sha256_ctx *c);
void saas__sha256_update(saas__sha256_ctx *c, const void *data, size_t len);
/* The digest; c is spent (init it again to reuse it). */
void saas__sha256_final(saas__sha256_ctx *c, uint8_t out[SAAS_SHA256_LEN]);
/* A digest as 64 lowercase hex digits and a NUL. */
void saas__sha256_tohex(char out[2 * SAAS_SHA256_LEN + 1], const uint8_t digest[SAAS_SHA256_LEN]);

#endif
