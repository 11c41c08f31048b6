/*
 * A gzip body inflated as it comes (E2B's `files.write(..., {gzip: true})`:
 * Content-Encoding: gzip on POST /files), bounded against decompression
 * bombs: what it inflates to is at most AAS_GZIP_OUT_MAX bytes in all, and
 * past AAS_GZIP_FREE_OUT at most AAS_GZIP_RATIO_MAX times the compressed
 * bytes inflate has read so far. Where the ratio cuts a stream may move
 * by a chunk with how it arrived (zlib reads a few bytes ahead of what it
 * has used); what is inflated short of it does not. Several members one after the other are one body, as
 * envd's reader (Go's gzip.Reader) takes them; anything else after a member
 * is refused, as there. Fuzzed by fuzz_e2b: any input whole and cut
 * anywhere gives the same bytes and verdict (but where a bound cuts it),
 * and what zlib compresses comes back as it was.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_GZIP_H
#define AAS_E2B_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

/* The most a body inflates to: the bound of an upload's body, SAAS_FILE_MAX (1 GiB). */
#define AAS_GZIP_OUT_MAX ((int64_t)1 << 30)
/*
 * The most it inflates to per compressed byte, past AAS_GZIP_FREE_OUT.
 * deflate reaches ~1030:1 on runs of one byte; text and code rarely pass
 * 20:1, so 128 refuses only bombs and files that are nearly all one byte
 * (those can go without gzip).
 */
#define AAS_GZIP_RATIO_MAX 128
/* What any body may inflate to whatever its ratio: small files of zeros are fine. */
#define AAS_GZIP_FREE_OUT ((int64_t)1 << 20)
/* Inflated bytes handed to the sink at a time. */
#define AAS_GZIP_CHUNK (64 * 1024)

enum {
	AAS_GZIP_MORE = 0,     /* all taken; more may come */
	AAS_GZIP_STOPPED = 1,  /* the sink said stop (its own failure, recorded by it) */
	AAS_GZIP_FAILED = 2,   /* not gzip, corrupt, cut short, or over a bound: why says which */
};

/* Takes the inflated bytes: 0 to go on, non-zero to stop. */
typedef int (*aas_gzip_sink)(void *ud, const char *data, size_t len);

struct aas_gzip {
	z_stream z;
	bool open;           /* inflateInit2 done: aas_gzip_end() frees it */
	bool member_end;     /* the last member ended (the body may end here) */
	bool too_big;        /* failed on a bound (413), not on the bytes (400) */
	int64_t in, out;     /* compressed bytes inflate read; inflated bytes given to the sink (within the bounds) */
	aas_gzip_sink sink;
	void *ud;
	unsigned char *buf;  /* AAS_GZIP_CHUNK */
	char why[160];
};

/* 0, or -1 out of memory (then aas_gzip_end all the same). */
int aas_gzip_init(struct aas_gzip *g, aas_gzip_sink sink, void *ud);
/* The next compressed bytes: AAS_GZIP_MORE, _STOPPED or _FAILED (then nothing more is taken). */
int aas_gzip_feed(struct aas_gzip *g, const void *data, size_t len);
/* The body's end: AAS_GZIP_MORE when it ended at a member's end, else AAS_GZIP_FAILED (cut short). */
int aas_gzip_finish(struct aas_gzip *g);
void aas_gzip_end(struct aas_gzip *g);

#endif
