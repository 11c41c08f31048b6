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
 * taken has "sbx-" and only [a-z0-9] after it; a watcher's output read
 * whole and in pieces gives the same lines and verdict, every event's name
 * a NUL-free string of at most 4096 bytes and its type one of E2B's five.
 */
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"
#include "e2b/internal.h"
#include "e2b/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	char *s = malloc(size + 1), key[AAS_SAAS_KEY_MAX + 1], back[AAS_E2B_KEY_MAX + 1], id[SAAS_ID_MAX + 1];
	struct aas_e2b_templates t;
	size_t n;

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	if (aas_e2b_key_decode(key, sizeof(key), s)) {
		if (!aas_e2b_key_encode(back, sizeof(back), key) || strcmp(back, s) != 0)
			abort();
	}
	if (aas_e2b_key_encode(back, sizeof(back), s)) {
		if (!aas_e2b_key_decode(key, sizeof(key), back) || strcmp(key, s) != 0)
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
	if (aas_e2b_unescape(s, &n, s, size) && (n > size || strlen(s) != n))
		abort();
	free(s);
}

/* An upload's body with boundary "XB": every part inside the body, at most the room given. */
static void multipart(const uint8_t *data, size_t size)
{
	struct aas_multipart_part parts[8];
	const char *body = (const char *)data, *why;
	char name[4096 + 1];
	size_t n;

	if (!aas_multipart_parse(body, size, "XB", parts, 8, &n, &why))
		return;
	if (n > 8)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (parts[i].data < body || parts[i].data + parts[i].len > body + size)
			abort();
		if (parts[i].filename && (parts[i].filename < body || parts[i].filename + parts[i].filename_len > body + size))
			abort();
		if (parts[i].filename && parts[i].filename_len <= 4096 &&
		    aas_multipart_filename(name, parts[i].filename, parts[i].filename_len) &&
		    strlen(name) > parts[i].filename_len)
			abort();
	}
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* Seeds start with 0 to 4: the reader. */
	switch (data[0] % 5) {
	case 0: envelopes(data + 1, size - 1); break;
	case 1: unwrap(data + 1, size - 1); break;
	case 2: spellings(data + 1, size - 1); break;
	case 3: multipart(data + 1, size - 1); break;
	default: watcher(data + 1, size - 1); break;
	}
	return 0;
}
