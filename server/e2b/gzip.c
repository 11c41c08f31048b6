/*
 * A gzip body inflated as it comes, bounded (gzip.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/gzip.h"

/* zlib's windowBits for a gzip wrapper only (no zlib or raw deflate: envd takes gzip alone). */
#define GZIP_WINDOW (16 + MAX_WBITS)

int aas_gzip_init(struct aas_gzip *g, aas_gzip_sink sink, void *ud)
{
	memset(g, 0, sizeof(*g));
	g->sink = sink;
	g->ud = ud;
	if (!(g->buf = malloc(AAS_GZIP_CHUNK)))
		return -1;
	if (inflateInit2(&g->z, GZIP_WINDOW) != Z_OK)
		return -1;
	g->open = true;
	return 0;
}

void aas_gzip_end(struct aas_gzip *g)
{
	if (g->open)
		inflateEnd(&g->z);
	g->open = false;
	free(g->buf);
	g->buf = NULL;
}

static int fail(struct aas_gzip *g, bool too_big, const char *why)
{
	g->too_big = too_big;
	snprintf(g->why, sizeof(g->why), "%s", why);
	return AAS_GZIP_FAILED;
}

/* Inflated bytes within the bounds go to the sink (and count in g->out); past them none of them does. */
static int give(struct aas_gzip *g, size_t n)
{
	int64_t out = g->out + (int64_t)n;
	char why[sizeof(g->why)];

	if (out > AAS_GZIP_OUT_MAX) {
		snprintf(why, sizeof(why), "it inflates to more than %lld bytes, the most an upload may be",
		         (long long)AAS_GZIP_OUT_MAX);
		return fail(g, true, why);
	}
	/* in <= 1 GiB (the body's bound) and the ratio 128: no overflow. */
	if (out > AAS_GZIP_FREE_OUT && out > g->in * AAS_GZIP_RATIO_MAX) {
		snprintf(why, sizeof(why), "it inflates to more than %d times its size (a decompression bomb?); upload "
		         "it without gzip", AAS_GZIP_RATIO_MAX);
		return fail(g, true, why);
	}
	g->out = out;
	return g->sink(g->ud, (const char *)g->buf, n) ? AAS_GZIP_STOPPED : AAS_GZIP_MORE;
}

int aas_gzip_feed(struct aas_gzip *g, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (g->why[0])
		return AAS_GZIP_FAILED;
	if (!g->open)
		return fail(g, false, "out of memory");
	while (len) {
		/* zlib counts input in uInt: hand it at most that much at a time. */
		uInt take = len > (size_t)UINT_MAX ? UINT_MAX : (uInt)len;
		int rc;

		g->z.next_in = (Bytef *)(uintptr_t)p;
		g->z.avail_in = take;
		p += take;
		len -= take;
		for (;;) {
			size_t n;
			int zr;

			if (g->member_end) {
				if (!g->z.avail_in)
					break;
				/* Another member follows: inflate it as the same body. */
				if (inflateReset(&g->z) != Z_OK)
					return fail(g, false, "the gzip stream cannot go on");
				g->member_end = false;
			}
			uInt before = g->z.avail_in;

			g->z.next_out = g->buf;
			g->z.avail_out = AAS_GZIP_CHUNK;
			zr = inflate(&g->z, Z_NO_FLUSH);
			/* What inflate read, not what came: the ratio is the stream's, however it was cut. */
			g->in += before - g->z.avail_in;
			n = AAS_GZIP_CHUNK - g->z.avail_out;
			/*
			 * What came before an error is the stream's all the same: given
			 * first, so that what the sink gets does not hang on whether the
			 * error came in the call that inflated it or in a later one.
			 */
			if (n && (rc = give(g, n)) != AAS_GZIP_MORE)
				return rc;
			if (zr == Z_STREAM_END) {
				g->member_end = true;
			} else if (zr == Z_NEED_DICT || zr == Z_DATA_ERROR || zr == Z_STREAM_ERROR) {
				char why[sizeof(g->why)];
				snprintf(why, sizeof(why), "it is not a valid gzip stream (%s)",
				         g->z.msg ? g->z.msg : "corrupt");
				return fail(g, false, why);
			} else if (zr == Z_MEM_ERROR) {
				return fail(g, false, "out of memory");
			}
			/* Z_BUF_ERROR: no progress without more input; Z_OK: maybe more output. */
			if (zr == Z_BUF_ERROR || (!g->z.avail_in && g->z.avail_out))
				break;
		}
	}
	return AAS_GZIP_MORE;
}

int aas_gzip_finish(struct aas_gzip *g)
{
	if (g->why[0])
		return AAS_GZIP_FAILED;
	if (!g->member_end)
		return fail(g, false, g->in ? "the gzip stream ends early (cut short)" : "the gzip body is empty");
	return AAS_GZIP_MORE;
}
