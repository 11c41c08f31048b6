/*
 * The E2B face's readers of what a client sends (server/e2b): Connect
 * envelopes and the request messages in them, and the spellings taken from
 * headers, paths and queries (keys, sandbox ids, templates, %-escapes),
 * and a directory watcher's output (watch.c: the guest's, so the tenant's).
 *
 * The first byte picks the reader (multipart uploads too); the rest is its input. Oracles, besides
 * the sanitizers: an envelope stream read whole and read in pieces cut where
 * the input says gives the same frames and the same verdict; no frame is
 * over its bound; a key spelling that decodes encodes back to itself; an id
 * taken has "sbx-" and only [a-z0-9] after it; a sandbox host (domain mode)
 * taken spells itself back; a watcher's output read whole and in pieces
 * gives the same lines and verdict, every event's name a NUL-free string of
 * at most 4096 bytes and its type one of E2B's five; a multipart upload read
 * whole and in pieces gives its sink the same parts, bytes and verdict; a
 * gzip upload (gzip.h) inflated whole and in pieces gives the same bytes and
 * verdict within its bounds, and what zlib compresses (one member or two)
 * inflates back to itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/connect.h"
#include "e2b/gzip.h"
#include "e2b/internal.h"
#include "multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * s as a Host header in domain mode (server.h's aas_host_label, the one
 * reader of hosts): a sandbox host taken is PORT-ID under the domain, the
 * port 1..65535 and the id one a libsaas id can be, and spells s back
 * (case aside, without a port); and s signs as a URL's path, in E2B's shape.
 */
static void hosts(const char *s)
{
	static const char *const domains[] = { "e2b.localhost", "localhost:8080", "x" };
	char e2b_id[SAAS_ID_MAX + 1], id[SAAS_ID_MAX + 1], label[64], back[320], sig[AAS_E2B_SIGNATURE_SIZE];
	unsigned int port;

	for (size_t d = 0; d < sizeof(domains) / sizeof(domains[0]); d++) {
		bool one = aas_host_label(label, sizeof(label), s, domains[d]);
		if (one && strlen(label) >= sizeof(label))
			abort();
		if (!aas_e2b_host_parse(s, domains[d], &port, e2b_id))
			continue;
		if (!one || port == 0 || port > 65535 || !aas_e2b_id_to_saas(id, e2b_id))
			abort();
		snprintf(back, sizeof(back), "%u-%s.%.*s", port, e2b_id, (int)strcspn(domains[d], ":"), domains[d]);
		if (strncasecmp(back, s, strlen(back)) != 0 || (s[strlen(back)] != '\0' && s[strlen(back)] != ':'))
			abort();
	}
	aas_e2b_signature(sig, s, "read", "", "token", NULL);
	if (strlen(sig) != AAS_E2B_SIGNATURE_SIZE - 1 || strncmp(sig, "v1_", 3) != 0)
		abort();
}

/* The largest payload the fuzzed reader takes: small, so that the bound is met often. */
#define FUZZ_MAX 512

struct digest {
	uint64_t hash;
	unsigned int frames;
};

static int on_frame(void *ud, unsigned int flags, const char *payload, size_t len)
{
	struct digest *d = ud;
	char why[128];
	json_t *o = NULL;

	if (len > FUZZ_MAX || payload[len] != '\0' || (flags & ~AAS_CONNECT_FLAG_END))
		abort();
	d->hash = (d->hash ^ flags) * 1099511628211ULL;
	for (size_t i = 0; i < len; i++)
		d->hash = (d->hash ^ (unsigned char)payload[i]) * 1099511628211ULL;
	d->frames++;
	/* Each message as the gateway parses it. */
	if (aas_connect_json(&o, payload, len, FUZZ_MAX, why, sizeof(why)) == AAS_CONNECT_OK && !json_is_object(o))
		abort();
	json_decref(o);
	return 0;
}

static void envelopes(const uint8_t *data, size_t size)
{
	struct aas_connect_reader whole = { .max = FUZZ_MAX }, parts = { .max = FUZZ_MAX };
	struct digest a = { 14695981039346656037ULL, 0 }, b = { 14695981039346656037ULL, 0 };
	const char *why;
	int ra, rb = 0;
	size_t cut, at = 0;

	if (size < 1)
		return;
	/* The first byte is where the pieces are cut (every cut-th byte). */
	cut = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	ra = aas_connect_read(&whole, data, size, on_frame, &a, &why);
	while (at < size && rb == 0) {
		size_t n = size - at < cut ? size - at : cut;
		rb = aas_connect_read(&parts, data + at, n, on_frame, &b, &why);
		at += n;
	}
	if (ra != rb || a.hash != b.hash || a.frames != b.frames ||
	    aas_connect_reader_idle(&whole) != aas_connect_reader_idle(&parts))
		abort();
	aas_connect_reader_free(&whole);
	aas_connect_reader_free(&parts);
}

static void unwrap(const uint8_t *data, size_t size)
{
	char why[256];
	json_t *o = NULL;
	int rc = aas_connect_unwrap(&o, (const char *)data, size, FUZZ_MAX, why, sizeof(why));

	if ((rc == AAS_CONNECT_OK) != (o != NULL) || (o && !json_is_object(o)))
		abort();
	json_decref(o);
}

static void spellings(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), key[SAAS_KEY_LEN + 1], back[SAAS_KEY_E2B_LEN + 1], id[SAAS_ID_MAX + 1];
	struct aas_e2b_templates t;
	size_t n;

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	if (saas_key_from_e2b(key, s) == SAAS_OK) {
		if (saas_key_to_e2b(back, key) != SAAS_OK || strcmp(back, s) != 0)
			abort();
	}
	if (saas_key_to_e2b(back, s) == SAAS_OK) {
		if (saas_key_from_e2b(key, back) != SAAS_OK || strcmp(key, s) != 0)
			abort();
	}
	if (aas_e2b_id_to_saas(id, s)) {
		if (strncmp(id, "sbx-", 4) != 0 || strcmp(aas_e2b_id_from_saas(id), s) != 0 ||
		    strspn(id + 4, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(id + 4))
			abort();
	}
	if (aas_e2b_templates_parse(&t, s, back, sizeof(back)) == 0 && (t.count == 0 || t.count > AAS_E2B_TEMPLATES_MAX))
		abort();
	aas_e2b_templates_free(&t);
	hosts(s);
	{
		/* A time taken is digits only, at most AAS_E2B_SECONDS_DIGITS of them, and their value. */
		int64_t secs = -1, want = 0;
		if (aas_e2b_seconds_parse(s, &secs)) {
			if (!*s || strlen(s) > AAS_E2B_SECONDS_DIGITS || strspn(s, "0123456789") != strlen(s))
				abort();
			for (const char *c = s; *c; c++)
				want = want * 10 + (*c - '0');
			if (secs != want)
				abort();
		}
	}
	{
		/* A list's items, cut at commas, cover the text and never run past it. */
		const char *p = s, *end = s + strlen(s);
		size_t seen = 0, items = 0;
		while (*p) {
			const char *at = p;
			size_t len = aas_e2b_list_next(&p);
			if (p <= at || p > end || memchr(at, ',', len))
				abort();
			seen += len;
			items++;
		}
		if (seen + items < strlen(s))
			abort();
	}
	if (aas_e2b_unescape(s, &n, s, size) && (n > size || strlen(s) != n))
		abort();
	free(s);
}

/* What a multipart reader gave its sink, as a digest that does not depend on how the body was cut. */
struct mp_digest {
	uint64_t hash;
	size_t begins, ends, bytes, calls, stop_at; /* stop_at: the call to stop at (0: never) */
	bool in_part;
};

static void mp_mix(struct mp_digest *d, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		d->hash = (d->hash ^ c[i]) * 1099511628211u;
}

/* Counts the call; nonzero to stop. No call may come once the reader was told to stop. */
static int mp_call(struct mp_digest *d)
{
	if (d->stop_at && d->calls >= d->stop_at)
		abort();
	return d->stop_at && ++d->calls == d->stop_at;
}

static int mp_begin(void *ud, const struct aas_multipart_part *p)
{
	struct mp_digest *d = ud;
	char name[AAS_MULTIPART_HEAD_MAX + 1];

	if (d->in_part || p->name_len > AAS_MULTIPART_HEAD_MAX || p->filename_len > AAS_MULTIPART_HEAD_MAX ||
	    (p->name_len && !p->name) || (p->filename_len && !p->filename))
		abort();
	if (p->filename && aas_multipart_filename(name, p->filename, p->filename_len) &&
	    strlen(name) > p->filename_len)
		abort();
	d->in_part = true;
	d->begins++;
	mp_mix(d, "B", 1);
	mp_mix(d, &p->name_len, sizeof(p->name_len));
	mp_mix(d, p->name ? p->name : "", p->name_len);
	mp_mix(d, &p->filename_len, sizeof(p->filename_len));
	mp_mix(d, p->filename ? p->filename : "", p->filename_len);
	return mp_call(d);
}

static int mp_data(void *ud, const char *data, size_t len)
{
	struct mp_digest *d = ud;

	if (!d->in_part || len == 0)
		abort();
	d->bytes += len;
	mp_mix(d, data, len);
	return mp_call(d);
}

static int mp_end(void *ud)
{
	struct mp_digest *d = ud;

	if (!d->in_part)
		abort();
	d->in_part = false;
	d->ends++;
	mp_mix(d, "E", 1);
	return mp_call(d);
}

static const struct aas_multipart_sink mp_sink = { mp_begin, mp_data, mp_end };

/* A hash of the input, never 0: where it is cut, and what else the run draws. */
static uint64_t seed_of(const uint8_t *data, size_t size)
{
	uint64_t seed = 88172645463325252u;

	for (size_t i = 0; i < size; i++)
		seed = (seed ^ data[i]) * 1099511628211u;
	return seed | 1;
}

/*
 * body fed to feed(ctx, ...) while it answers `more`: whole (seed 0) or in
 * pieces of sizes the seed draws, mostly small (a delimiter, a head or a
 * gzip header split anywhere), now and then a large one; each piece its own
 * copy, freed at once (nothing of it may be read later: ASan). Its last answer.
 */
static int feed_pieces(const void *body, size_t size, uint64_t seed, int (*feed)(void *ctx, const char *p, size_t n),
                       void *ctx, int more)
{
	int rc = more;

	for (size_t at = 0; at < size && rc == more;) {
		size_t n = size - at;
		if (seed) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			size_t want = seed % 8 == 0 ? 1 + (size_t)(seed >> 8) % 4096 : 1 + (size_t)(seed >> 8) % 9;
			n = want < n ? want : n;
		}
		char *copy = malloc(n);
		if (!copy)
			abort();
		memcpy(copy, (const char *)body + at, n);
		rc = feed(ctx, copy, n);
		free(copy);
		at += n;
	}
	return rc;
}

static int mp_feed(void *ctx, const char *p, size_t n)
{
	return aas_multipart_feed(ctx, p, n);
}

/* body read whole (seed 0) or in pieces of sizes the seed draws, each its own copy freed at once. */
static int mp_run(const char *body, size_t size, uint64_t seed, struct mp_digest *d, const char **why)
{
	struct aas_multipart *mp = malloc(sizeof(*mp));
	int rc;

	if (!mp)
		abort();
	if (!aas_multipart_init(mp, "XB", 8, &mp_sink, d))
		abort();
	rc = feed_pieces(body, size, seed, mp_feed, mp, AAS_MULTIPART_MORE);
	if (rc == AAS_MULTIPART_MORE)
		rc = aas_multipart_finish(mp);
	if (rc != aas_multipart_feed(mp, "--XB--", 6) || (rc != AAS_MULTIPART_MORE && rc != aas_multipart_finish(mp)))
		abort(); /* once not MORE, it stays */
	*why = rc == AAS_MULTIPART_FAILED ? mp->why : NULL;
	free(mp);
	return rc;
}

/*
 * An upload's body with boundary "XB", at most 8 parts: read whole and read
 * in pieces (cut as a hash of the input says), the same parts, bytes and
 * verdict; never more parts than the room, nor more bytes than the body;
 * a reader told to stop calls no more.
 */
static void multipart(const uint8_t *data, size_t size)
{
	struct mp_digest whole = { 14695981039346656037u, 0, 0, 0, 0, 0, false }, cut = whole, stopped = whole;
	const char *body = (const char *)data, *why_whole, *why_cut, *why_stop;
	uint64_t seed = seed_of(data, size);
	int rc;

	rc = mp_run(body, size, 0, &whole, &why_whole);
	if (rc == AAS_MULTIPART_STOPPED || whole.begins > 8 || whole.bytes > size ||
	    (rc == AAS_MULTIPART_DONE && whole.begins != whole.ends) || (rc == AAS_MULTIPART_FAILED && !why_whole))
		abort();
	if (mp_run(body, size, seed | 1, &cut, &why_cut) != rc || cut.hash != whole.hash || cut.begins != whole.begins ||
	    cut.ends != whole.ends || cut.bytes != whole.bytes || why_cut != why_whole)
		abort();
	stopped.stop_at = 1 + (size_t)(seed % 7);
	rc = mp_run(body, size, seed * 31 | 1, &stopped, &why_stop);
	if (rc == AAS_MULTIPART_STOPPED && stopped.calls != stopped.stop_at)
		abort();
}

static int on_watch(void *ud, int kind, const char *type, const char *name)
{
	struct digest *d = ud;
	static const char *const types[] = { "EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE",
		                             "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD" };
	bool known = false;

	if (kind == AAS_E2B_WATCH_EVENT) {
		for (size_t i = 0; i < 5; i++)
			known = known || strcmp(type, types[i]) == 0;
		if (!known || strlen(name) > 4096)
			abort();
	} else if (kind == AAS_E2B_WATCH_FAILED) {
		if (!*name || strlen(name) > 15)
			abort();
	} else if (kind != AAS_E2B_WATCH_STARTED) {
		abort();
	}
	d->hash = (d->hash ^ (uint64_t)kind) * 1099511628211ULL;
	for (const char *p = name ? name : ""; *p; p++)
		d->hash = (d->hash ^ (unsigned char)*p) * 1099511628211ULL;
	d->frames++;
	/* The watch's end, now and then, as a bound would. */
	return d->frames == 1000;
}

static void watcher(const uint8_t *data, size_t size)
{
	struct aas_e2b_watch_parser *whole = calloc(1, sizeof(*whole)), *parts = calloc(1, sizeof(*parts));
	struct digest a = { 14695981039346656037ULL, 0 }, b = { 14695981039346656037ULL, 0 };
	char why[128];
	size_t cut, at = 0;
	int ra, rb = 0;

	if (!whole || !parts || size < 1)
		goto out;
	cut = (size_t)data[0] % 23 + 1;
	data++;
	size--;
	ra = aas_e2b_watch_feed(whole, data, size, on_watch, &a, why, sizeof(why));
	while (at < size && rb == 0) {
		size_t n = size - at < cut ? size - at : cut;
		rb = aas_e2b_watch_feed(parts, data + at, n, on_watch, &b, why, sizeof(why));
		at += n;
	}
	if (ra != rb || a.hash != b.hash || a.frames != b.frames || whole->len > AAS_E2B_WATCH_LINE_MAX)
		abort();
out:
	free(whole);
	free(parts);
}

/* What a gzip reader gave its sink: a hash and a count, the bytes kept when `keep` has room. */
struct gz_digest {
	uint64_t hash;
	size_t bytes, calls, stop_at; /* stop_at: the call to stop at (0: never) */
	unsigned char *keep;
	size_t keep_size;
};

static int gz_sink(void *ud, const char *data, size_t len)
{
	struct gz_digest *d = ud;

	if (len == 0 || len > AAS_GZIP_CHUNK || (d->stop_at && d->calls >= d->stop_at))
		abort();
	if (d->keep && d->bytes + len <= d->keep_size)
		memcpy(d->keep + d->bytes, data, len);
	d->bytes += len;
	for (size_t i = 0; i < len; i++)
		d->hash = (d->hash ^ (unsigned char)data[i]) * 1099511628211u;
	return d->stop_at && ++d->calls == d->stop_at;
}

static int gz_feed(void *ctx, const char *p, size_t n)
{
	return aas_gzip_feed(ctx, p, n);
}

/* body inflated whole (seed 0) or in pieces the seed draws (feed_pieces); the verdict, *why copied. */
static int gz_run(const unsigned char *body, size_t size, uint64_t seed, struct gz_digest *d, char *why, bool *too_big)
{
	struct aas_gzip *g = malloc(sizeof(*g));
	int rc;

	if (!g || aas_gzip_init(g, gz_sink, d) < 0)
		abort();
	rc = feed_pieces(body, size, seed, gz_feed, g, AAS_GZIP_MORE);
	if (rc == AAS_GZIP_MORE)
		rc = aas_gzip_finish(g);
	/* Once failed, it stays failed; the bounds hold whatever came. */
	if ((rc == AAS_GZIP_FAILED && (aas_gzip_feed(g, "x", 1) != AAS_GZIP_FAILED || !g->why[0])) ||
	    g->out > AAS_GZIP_OUT_MAX || (g->out > AAS_GZIP_FREE_OUT && g->out > g->in * AAS_GZIP_RATIO_MAX) ||
	    (int64_t)d->bytes != g->out)
		abort();
	snprintf(why, 160, "%s", g->why);
	*too_big = g->too_big;
	aas_gzip_end(g);
	free(g);
	return rc;
}

/*
 * Any bytes as a gzip body: whole and in pieces, the same bytes and verdict,
 * but where a bound cuts it (zlib's read-ahead moves that by how the body
 * came; gz_run checks the bounds themselves); a sink told to stop is not
 * called again.
 */
static void gzip_any(const uint8_t *data, size_t size)
{
	struct gz_digest whole = { 14695981039346656037u, 0, 0, 0, NULL, 0 }, cut = whole, stopped = whole;
	char why_whole[160], why_cut[160], why_stop[160];
	bool big_whole, big_cut, big_stop;
	uint64_t seed = seed_of(data, size);
	int rc, rc_cut;

	rc = gz_run(data, size, 0, &whole, why_whole, &big_whole);
	if (rc == AAS_GZIP_STOPPED)
		abort();
	rc_cut = gz_run(data, size, seed, &cut, why_cut, &big_cut);
	if (!big_whole && !big_cut && (rc_cut != rc || cut.hash != whole.hash || cut.bytes != whole.bytes ||
	                               strcmp(why_cut, why_whole) != 0))
		abort();
	stopped.stop_at = 1 + (size_t)(seed % 3);
	if (gz_run(data, size, seed * 31 | 1, &stopped, why_stop, &big_stop) == AAS_GZIP_STOPPED &&
	    stopped.calls != stopped.stop_at)
		abort();
}

/* zlib's own gzip of src (level from the seed) appended at out[*at], within cap. */
static void gz_member(unsigned char *out, size_t cap, size_t *at, const uint8_t *src, size_t n, int level)
{
	z_stream z;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	z.next_in = (Bytef *)(uintptr_t)src;
	z.avail_in = (uInt)n;
	z.next_out = out + *at;
	z.avail_out = (uInt)(cap - *at);
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		abort();
	*at = cap - z.avail_out;
	deflateEnd(&z);
}

/* data gzipped by zlib, as one member or two: inflated whole and in pieces, data again. */
static void gzip_round(const uint8_t *data, size_t size)
{
	uint64_t seed = seed_of(data, size);
	size_t cap = 2 * (size_t)compressBound((uLong)size) + 64, at = 0, first = 0;
	size_t split = (size_t)(seed >> 4) % (size + 1);
	unsigned char *gz = malloc(cap), *back = malloc(size + 1);
	struct gz_digest whole = { 14695981039346656037u, 0, 0, 0, back, size }, cut = whole;
	char why[160];
	bool big;

	if (!gz || !back)
		abort();
	if (seed % 2) {
		gz_member(gz, cap, &at, data, size, (int)(seed % 10));
	} else {
		gz_member(gz, cap, &at, data, split, (int)(seed % 10));
		first = at;
		gz_member(gz, cap, &at, data + split, size - split, (int)((seed >> 8) % 10));
	}
	if (gz_run(gz, at, 0, &whole, why, &big) != AAS_GZIP_MORE || whole.bytes != size ||
	    (size && memcmp(back, data, size) != 0))
		abort();
	cut.keep = NULL;
	if (gz_run(gz, at, seed, &cut, why, &big) != AAS_GZIP_MORE || cut.hash != whole.hash || cut.bytes != size)
		abort();
	/* Cut short anywhere in its last member, it is refused (at the first member's end it is a whole body). */
	cut.bytes = 0;
	if (gz_run(gz, first + 1 + (size_t)(seed >> 16) % (at - first - 1), seed, &cut, why, &big) != AAS_GZIP_FAILED)
		abort();
	free(gz);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* Seeds start with 0 to 6: the reader. */
	switch (data[0] % 7) {
	case 0: envelopes(data + 1, size - 1); break;
	case 1: unwrap(data + 1, size - 1); break;
	case 2: spellings(data + 1, size - 1); break;
	case 3: multipart(data + 1, size - 1); break;
	case 4: watcher(data + 1, size - 1); break;
	case 5: gzip_any(data + 1, size - 1); break;
	default: gzip_round(data + 1, size - 1); break;
	}
	return 0;
}
