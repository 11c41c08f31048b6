/*
 * The egress channel's protocol (lib/transport/egress_mux.c) read from
 * hostile bytes: the input's first byte says which end reads (the server
 * reading a guest, or the guest reading a server), the rest is the stream,
 * fed in pieces whose sizes the input also picks (a reader must take a
 * frame split anywhere). Each frame read goes through the reader's rules
 * as its end would; an OPEN's payload is read and written back.
 *
 * Oracle: a frame read lies inside the bytes given and within its type's
 * bounds; a frame written from a read OPEN reads back the same; the
 * connection table never holds more than MUX_CONNS_MAX, never two of an id,
 * never a window past MUX_WINDOW; after an error nothing more is read (as
 * the ends do: the channel ends).
 */
#include <stdlib.h>
#include <string.h>

#include "transport/egress_mux.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void table_ok(struct saas__mux_track *t)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++) {
		const struct saas__mux_conn *c = &t->c[i];
		if (c->state == MUX_C_FREE)
			continue;
		n++;
		if (c->id == 0 || c->state > MUX_C_CLOSING || c->credit_in > MUX_WINDOW || c->credit_out > MUX_WINDOW)
			abort();
		for (unsigned int j = i + 1; j < MUX_CONNS_MAX; j++)
			if (t->c[j].state != MUX_C_FREE && t->c[j].id == c->id)
				abort();
	}
	if (n != t->n)
		abort();
}

static void open_roundtrip(const struct saas__mux_frame *f)
{
	struct saas__mux_open o, back;
	struct saas__mux_frame g;
	uint8_t out[MUX_HEADER + 2 + MUX_NAME_MAX];
	size_t n;

	if (saas__mux_open_read(f, &o) < 0)
		return;
	if (o.family == 0 && !saas__mux_name_ok(o.name, strlen(o.name)))
		abort();
	n = saas__mux_open_write(out, sizeof(out), f->id, &o);
	if (n != MUX_HEADER + f->len || memcmp(out + MUX_HEADER, f->payload, f->len) != 0)
		abort();
	if (saas__mux_frame_read(out, n, MUX_GUEST, &g) != (long)n || saas__mux_open_read(&g, &back) < 0 ||
	    memcmp(&o, &back, sizeof(o)) != 0)
		abort();
}

/*
 * What the reading end sends back, so that the stream can reach every
 * state: the server answers each OPEN (refusing ids that are multiples of
 * 5), both give back the window of each DATA, and close ids that are
 * multiples of 7 at their first DATA. What the end's own rules refuse is a
 * bug of the ends, not of the input.
 */
static void respond(struct saas__mux_track *t, const struct saas__mux_frame *f, enum saas__mux_verdict v)
{
	if (v != MUX_V_OK)
		return;
	if (f->type == MUX_OPEN_ADDR || f->type == MUX_OPEN_NAME) {
		if (saas__mux_track_sent(t, MUX_OPENED, f->id, 1, f->id % 5 ? MUX_ST_OK : MUX_ST_REFUSED) < 0)
			abort();
	} else if (f->type == MUX_DATA) {
		if (f->id % 7 == 0) {
			if (saas__mux_track_sent(t, MUX_CLOSE, f->id, 0, 0) < 0)
				abort();
		} else if (saas__mux_track_sent(t, MUX_WINDOW_UPDATE, f->id, 4, f->len) < 0) {
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[2 * MUX_FRAME_MAX];
	struct saas__mux_track t;
	enum saas__mux_role self;
	size_t have = 0, at = 2;
	unsigned int piece;

	if (size < 2)
		return 0;
	self = data[0] & 1 ? MUX_GUEST : MUX_SERVER;
	piece = 1 + data[1] * 37u;
	saas__mux_track_init(&t, self);
	if (saas__mux_track_sent(&t, MUX_HELLO, 0, 2, MUX_VERSION) < 0)
		abort();
	/* A guest reading the server has opened ids 1 to 8 (what the seeds answer). */
	for (uint32_t id = 1; self == MUX_GUEST && id <= 8; id++)
		if (saas__mux_track_sent(&t, MUX_OPEN_NAME, id, 11, 0) < 0)
			abort();
	while (at < size) {
		size_t take = size - at < piece ? size - at : piece, used = 0;
		struct saas__mux_frame f;
		long n;

		if (take > sizeof(buf) - have)
			take = sizeof(buf) - have;
		memcpy(buf + have, data + at, take);
		have += take;
		at += take;
		while ((n = saas__mux_frame_read(buf + used, have - used, self == MUX_GUEST ? MUX_SERVER : MUX_GUEST,
		                                 &f)) > 0) {
			if ((size_t)n > have - used || (size_t)n > MUX_FRAME_MAX || f.payload != buf + used + MUX_HEADER ||
			    f.len + MUX_HEADER != (size_t)n)
				abort();
			if ((f.type == MUX_OPEN_ADDR || f.type == MUX_OPEN_NAME) && self == MUX_SERVER)
				open_roundtrip(&f);
			enum saas__mux_verdict v = saas__mux_track_received(&t, &f);
			if (v == MUX_V_ERROR)
				return 0;
			respond(&t, &f, v);
			table_ok(&t);
			used += (size_t)n;
		}
		if (n < 0)
			return 0;
		/* A partial frame is never longer than a whole one: what is left fits again. */
		if (have - used >= MUX_FRAME_MAX)
			abort();
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	return 0;
}
