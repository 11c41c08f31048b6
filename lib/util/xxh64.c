/*
 * XXH64, as its specification describes it (xxhash.com, "xxHash fast digest
 * algorithm", XXH64): four lanes over 32-byte stripes, merged, the tail of
 * fewer than 32 bytes folded in, then the avalanche. Little-endian reads
 * byte by byte: the same on every host and in the guest.
 */
#include <string.h>

#include "util/xxh64.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t rotl(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

static uint64_t read64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static uint32_t read32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

static uint64_t round64(uint64_t acc, uint64_t input)
{
	acc += input * P2;
	acc = rotl(acc, 31);
	return acc * P1;
}

static uint64_t merge(uint64_t acc, uint64_t v)
{
	acc ^= round64(0, v);
	return acc * P1 + P4;
}

static void stripe(uint64_t v[4], const unsigned char *p)
{
	v[0] = round64(v[0], read64(p));
	v[1] = round64(v[1], read64(p + 8));
	v[2] = round64(v[2], read64(p + 16));
	v[3] = round64(v[3], read64(p + 24));
}

void saas__xxh64_init(saas__xxh64_ctx *c, uint64_t seed)
{
	c->v[0] = seed + P1 + P2;
	c->v[1] = seed + P2;
	c->v[2] = seed;
	c->v[3] = seed - P1;
	c->total = 0;
}

void saas__xxh64_update(saas__xxh64_ctx *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t have = (size_t)(c->total % 32);

	c->total += len;
	if (have) {
		size_t take = 32 - have < len ? 32 - have : len;
		memcpy(c->mem + have, p, take);
		p += take;
		len -= take;
		if (have + take < 32)
			return;
		stripe(c->v, c->mem);
	}
	for (; len >= 32; p += 32, len -= 32)
		stripe(c->v, p);
	if (len)
		memcpy(c->mem, p, len);
}

uint64_t saas__xxh64_digest(const saas__xxh64_ctx *c)
{
	const unsigned char *p = c->mem;
	size_t left = (size_t)(c->total % 32);
	uint64_t h;

	if (c->total >= 32) {
		h = rotl(c->v[0], 1) + rotl(c->v[1], 7) + rotl(c->v[2], 12) + rotl(c->v[3], 18);
		for (int i = 0; i < 4; i++)
			h = merge(h, c->v[i]);
	} else {
		h = c->v[2] /* the seed */ + P5;
	}
	h += c->total;
	for (; left >= 8; p += 8, left -= 8)
		h = rotl(h ^ round64(0, read64(p)), 27) * P1 + P4;
	if (left >= 4) {
		h = rotl(h ^ (uint64_t)read32(p) * P1, 23) * P2 + P3;
		p += 4;
		left -= 4;
	}
	for (; left; p++, left--)
		h = rotl(h ^ *p * P5, 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}
