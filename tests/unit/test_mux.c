/*
 * The egress channel's protocol (lib/transport/egress_mux.c): frames
 * written and read back, every bound at and past its edge, and each end's
 * rules (the connection table, windows, half-close, the CLOSE handshake and
 * its crossings), with a guest's and a server's table fed each other's
 * frames.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/egress_mux.h"

static uint8_t frame[MUX_FRAME_MAX + 16];

/* A frame of type with a payload of len bytes (zeros past what p gives). */
static size_t mk(uint8_t type, uint32_t id, const void *p, uint32_t len)
{
	saas__mux_header(frame, type, id, len);
	memset(frame + MUX_HEADER, 0, len);
	if (p)
		memcpy(frame + MUX_HEADER, p, len);
	return MUX_HEADER + len;
}

static long rd(size_t n, enum saas__mux_role from, struct saas__mux_frame *f)
{
	return saas__mux_frame_read(frame, n, from, f);
}

static void test_header_bounds(void **state)
{
	struct saas__mux_frame f;
	size_t n;

	(void)state;
	/* A whole DATA frame at its bound, and every prefix of it waits for more. */
	n = mk(MUX_DATA, 7, NULL, MUX_DATA_MAX);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	assert_int_equal(f.type, MUX_DATA);
	assert_int_equal(f.id, 7);
	assert_int_equal(f.len, MUX_DATA_MAX);
	assert_ptr_equal(f.payload, frame + MUX_HEADER);
	assert_int_equal(rd(n - 1, MUX_GUEST, &f), 0);
	assert_int_equal(rd(MUX_HEADER - 1, MUX_GUEST, &f), 0);
	assert_int_equal(rd(0, MUX_GUEST, &f), 0);
	/* One byte past the bound is refused on its header alone, before its payload came. */
	mk(MUX_DATA, 7, NULL, 0);
	saas__mux_header(frame, MUX_DATA, 7, MUX_DATA_MAX + 1);
	assert_int_equal(rd(MUX_HEADER, MUX_GUEST, &f), -1);
	saas__mux_header(frame, MUX_DATA, 7, 0xffffff);
	assert_int_equal(rd(MUX_HEADER, MUX_SERVER, &f), -1);
	/* An empty DATA, unknown types. */
	n = mk(MUX_DATA, 7, NULL, 0);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(0, 1, NULL, 0);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_DNS_ANSWER + 1, 1, NULL, 0);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(0xff, 1, NULL, 0);
	assert_int_equal(rd(n, MUX_SERVER, &f), -1);
	/* Ids: HELLO's is 0, a connection's never is, a DNS tag is anything. */
	n = saas__mux_u16_frame(frame, MUX_HELLO, 0, MUX_VERSION);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	assert_int_equal(saas__mux_value(&f), MUX_VERSION);
	n = saas__mux_u16_frame(frame, MUX_HELLO, 1, MUX_VERSION);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_CLOSE, 0, NULL, 0);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_DNS_QUERY, 0, NULL, MUX_DNS_MIN);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	n = mk(MUX_DNS_QUERY, 0xffffffffu, NULL, MUX_DNS_MAX);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	n = mk(MUX_DNS_QUERY, 1, NULL, MUX_DNS_MAX + 1);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_DNS_QUERY, 1, NULL, MUX_DNS_MIN - 1);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	/* Fixed sizes. */
	n = mk(MUX_SHUT, 1, NULL, 1);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_WINDOW_UPDATE, 1, NULL, 3);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_HELLO, 0, NULL, 3);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
}

static void test_roles(void **state)
{
	struct saas__mux_frame f;
	size_t n;

	(void)state;
	/* Each type from its sender only. */
	n = saas__mux_u8_frame(frame, MUX_OPENED, 3, MUX_ST_OK);
	assert_int_equal(rd(n, MUX_SERVER, &f), (long)n);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = mk(MUX_DNS_QUERY, 3, NULL, 40);
	assert_int_equal(rd(n, MUX_SERVER, &f), -1);
	n = mk(MUX_DNS_ANSWER, 3, NULL, 40);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	assert_int_equal(rd(n, MUX_SERVER, &f), (long)n);
	n = mk(MUX_OPEN_NAME, 3, "\0\120x", 3);
	assert_int_equal(rd(n, MUX_SERVER, &f), -1);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	/* Values out of their ranges. */
	n = saas__mux_u8_frame(frame, MUX_OPENED, 3, MUX_ST_MAX + 1);
	assert_int_equal(rd(n, MUX_SERVER, &f), -1);
	n = saas__mux_u32_frame(frame, MUX_WINDOW_UPDATE, 3, 0);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = saas__mux_u32_frame(frame, MUX_WINDOW_UPDATE, 3, MUX_WINDOW + 1);
	assert_int_equal(rd(n, MUX_GUEST, &f), -1);
	n = saas__mux_u32_frame(frame, MUX_WINDOW_UPDATE, 3, MUX_WINDOW);
	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	assert_int_equal(saas__mux_value(&f), MUX_WINDOW);
}

static void test_names(void **state)
{
	char name[MUX_NAME_MAX + 2];

	(void)state;
	assert_true(saas__mux_name_ok("example.com", 11));
	assert_true(saas__mux_name_ok("a", 1));
	assert_true(saas__mux_name_ok("x_y-1.example", 13));
	assert_false(saas__mux_name_ok("", 0));
	assert_false(saas__mux_name_ok("Example.com", 11));
	assert_false(saas__mux_name_ok("example.com.", 12));
	assert_false(saas__mux_name_ok(".example.com", 12));
	assert_false(saas__mux_name_ok("a..b", 4));
	assert_false(saas__mux_name_ok("a b", 3));
	assert_false(saas__mux_name_ok("a\0b", 3));
	assert_false(saas__mux_name_ok("*.b", 3));
	assert_false(saas__mux_name_ok("1.2.3.4:80", 10));
	/* Labels of 63 and 64; names of 253 and 254. */
	memset(name, 'a', 64);
	assert_true(saas__mux_name_ok(name, 63));
	assert_false(saas__mux_name_ok(name, 64));
	for (size_t i = 0; i < sizeof(name); i++)
		name[i] = i % 50 == 49 ? '.' : 'b';
	assert_true(saas__mux_name_ok(name, MUX_NAME_MAX));
	assert_false(saas__mux_name_ok(name, MUX_NAME_MAX + 1));
}

/* A well-framed OPEN whose payload (len bytes at p) the reader refuses. */
static void open_refused(uint8_t type, const char *p, uint32_t len)
{
	struct saas__mux_frame f;
	struct saas__mux_open o;
	size_t n = mk(type, 9, p, len);

	assert_int_equal(rd(n, MUX_GUEST, &f), (long)n);
	assert_int_equal(saas__mux_open_read(&f, &o), -1);
}

/* o written as a frame of want bytes, read back into *back. */
static void roundtrip(const struct saas__mux_open *o, size_t want, struct saas__mux_open *back)
{
	uint8_t out[MUX_HEADER + 2 + MUX_NAME_MAX];
	struct saas__mux_frame f;
	size_t n = saas__mux_open_write(out, sizeof(out), 9, o);

	assert_int_equal(n, want);
	assert_int_equal(saas__mux_frame_read(out, n, MUX_GUEST, &f), (long)n);
	assert_int_equal(saas__mux_open_read(&f, back), 0);
}

static void test_open(void **state)
{
	struct saas__mux_open o = { 0 }, back;
	uint8_t out[MUX_HEADER + 2 + MUX_NAME_MAX];

	(void)state;
	o.family = 4;
	o.port = 443;
	memcpy(o.addr, "\xc0\x00\x02\x01", 4);
	roundtrip(&o, MUX_HEADER + 7, &back);
	assert_int_equal(back.family, 4);
	assert_int_equal(back.port, 443);
	assert_memory_equal(back.addr, o.addr, 4);
	o.family = 6;
	memcpy(o.addr, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	roundtrip(&o, MUX_HEADER + 19, &back);
	assert_int_equal(back.family, 6);
	assert_memory_equal(back.addr, o.addr, 16);
	/* A name, and the longest one (one byte less room and it is not written). */
	memset(&o, 0, sizeof(o));
	o.port = 80;
	strcpy(o.name, "www.example.com");
	roundtrip(&o, MUX_HEADER + 2 + 15, &back);
	assert_int_equal(back.family, 0);
	assert_int_equal(back.port, 80);
	assert_string_equal(back.name, "www.example.com");
	for (size_t i = 0; i < MUX_NAME_MAX; i++)
		o.name[i] = i % 50 == 49 ? '.' : 'c';
	o.name[MUX_NAME_MAX] = '\0';
	roundtrip(&o, sizeof(out), &back);
	assert_int_equal(saas__mux_open_write(out, sizeof(out) - 1, 9, &o), 0);
	assert_string_equal(back.name, o.name);
	/* What the writer refuses: port 0, id 0, a bad name, an unknown family. */
	o.port = 0;
	assert_int_equal(saas__mux_open_write(out, sizeof(out), 9, &o), 0);
	o.port = 80;
	assert_int_equal(saas__mux_open_write(out, sizeof(out), 0, &o), 0);
	strcpy(o.name, "Upper.example");
	assert_int_equal(saas__mux_open_write(out, sizeof(out), 9, &o), 0);
	o.family = 5;
	assert_int_equal(saas__mux_open_write(out, sizeof(out), 9, &o), 0);
	/* What the reader refuses: the same, written by hand. */
	open_refused(MUX_OPEN_ADDR, "\x05\x00\x50\x01\x02\x03\x04", 7);
	open_refused(MUX_OPEN_ADDR, "\x04\x00\x00\x01\x02\x03\x04", 7);
	open_refused(MUX_OPEN_ADDR, "\x06\x00\x50\x01\x02\x03\x04", 7);
	open_refused(MUX_OPEN_ADDR, "\x04\x00\x50\x01\x02\x03\x04\x05", 8);
	open_refused(MUX_OPEN_NAME, "\x00\x50" "a\0b", 5);
	open_refused(MUX_OPEN_NAME, "\x00\x50" "A", 3);
	open_refused(MUX_OPEN_NAME, "\x00\x00" "a", 3);
}

/* ---- the rules ------------------------------------------------------------------------------- */

/*
 * A whole frame of type at frame[]: v is HELLO's, OPENED's or
 * WINDOW_UPDATE's value, DATA's or a DNS message's length (zeros); an OPEN
 * opens a.example or 192.0.2.1. Its length.
 */
static size_t build(uint8_t type, uint32_t id, uint32_t v)
{
	struct saas__mux_open o = { .family = 4, .port = 80, .addr = { 192, 0, 2, 1 } };

	switch (type) {
	case MUX_HELLO:
		return saas__mux_u16_frame(frame, type, id, (uint16_t)v);
	case MUX_OPENED:
		return saas__mux_u8_frame(frame, type, id, (uint8_t)v);
	case MUX_WINDOW_UPDATE:
		return saas__mux_u32_frame(frame, type, id, v);
	case MUX_OPEN_NAME:
		return mk(type, id, "\x01\xbb" "a.example", 11);
	case MUX_OPEN_ADDR:
		return saas__mux_open_write(frame, sizeof(frame), id, &o);
	case MUX_SHUT:
	case MUX_CLOSE:
		return mk(type, id, NULL, 0);
	default:
		return mk(type, id, NULL, v);
	}
}

/* Frame (type, id, value or length) as received by t: its verdict. */
static int recv_v(struct saas__mux_track *t, uint8_t type, uint32_t id, uint32_t v)
{
	struct saas__mux_frame f;
	enum saas__mux_role from = t->self == MUX_GUEST ? MUX_SERVER : MUX_GUEST;
	size_t n = build(type, id, v);

	assert_int_equal(saas__mux_frame_read(frame, n, from, &f), (long)n);
	return saas__mux_track_received(t, &f);
}

static void hello(struct saas__mux_track *t, enum saas__mux_role self)
{
	saas__mux_track_init(t, self);
	assert_int_equal(saas__mux_track_sent(t, MUX_HELLO, 0, 2, MUX_VERSION), 0);
	assert_int_equal(recv_v(t, MUX_HELLO, 0, MUX_VERSION), MUX_V_OK);
}

static void test_hello(void **state)
{
	struct saas__mux_track t;

	(void)state;
	/* Nothing before HELLO, either way; a HELLO of another version; a second HELLO. */
	saas__mux_track_init(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1, 0), MUX_V_ERROR);
	assert_int_equal(recv_v(&t, MUX_DNS_QUERY, 1, 20), MUX_V_ERROR);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DNS_ANSWER, 1, 20, 0), -1);
	saas__mux_track_init(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_HELLO, 0, MUX_VERSION + 1), MUX_V_ERROR);
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_HELLO, 0, MUX_VERSION), MUX_V_ERROR);
	assert_int_equal(saas__mux_track_sent(&t, MUX_HELLO, 0, 2, MUX_VERSION), -1);
	/* DNS both ways, each from its side only. */
	assert_int_equal(recv_v(&t, MUX_DNS_QUERY, 5, 20), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DNS_ANSWER, 5, 20, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DNS_QUERY, 5, 20, 0), -1);
}

static void test_server_life(void **state)
{
	struct saas__mux_track t;
	struct saas__mux_conn *c;

	(void)state;
	hello(&t, MUX_SERVER);
	/* Nothing on an id never opened, but a CLOSE (one that crossed a failed OPENED) is dropped. */
	assert_int_equal(recv_v(&t, MUX_DATA, 1, 10), MUX_V_ERROR);
	assert_int_equal(recv_v(&t, MUX_WINDOW_UPDATE, 1, 10), MUX_V_ERROR);
	assert_int_equal(recv_v(&t, MUX_SHUT, 1, 0), MUX_V_ERROR);
	assert_int_equal(recv_v(&t, MUX_CLOSE, 1, 0), MUX_V_IGNORE);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 1, 10, 0), -1);
	/* Opened: no DATA before the OPENED, nor an id opened twice. */
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1, 0), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1, 0), MUX_V_ERROR);
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1, 0), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_DATA, 1, 10), MUX_V_ERROR);
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 1, 10, 0), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 1, 0, 0), -1); /* the server answers with OPENED */
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 1, 1, MUX_ST_OK), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 1, 1, MUX_ST_OK), -1);
	/* The window in: exactly MUX_WINDOW, then one byte more is the end. */
	for (unsigned int i = 0; i < MUX_WINDOW / MUX_DATA_MAX; i++)
		assert_int_equal(recv_v(&t, MUX_DATA, 1, MUX_DATA_MAX), MUX_V_OK);
	c = saas__mux_conn_find(&t, 1);
	assert_non_null(c);
	assert_int_equal(c->credit_in, 0);
	/* Credit given back: never more than was taken. */
	assert_int_equal(saas__mux_track_sent(&t, MUX_WINDOW_UPDATE, 1, 4, MUX_WINDOW + 1), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_WINDOW_UPDATE, 1, 4, 100), 0);
	assert_int_equal(recv_v(&t, MUX_DATA, 1, 100), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_DATA, 1, 1), MUX_V_ERROR);
	/* The window out, the same. */
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 2, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 2, 1, MUX_ST_OK), 0);
	for (unsigned int i = 0; i < MUX_WINDOW / MUX_DATA_MAX; i++)
		assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 2, MUX_DATA_MAX, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 2, 1, 0), -1);
	assert_int_equal(recv_v(&t, MUX_WINDOW_UPDATE, 2, MUX_DATA_MAX), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 2, MUX_DATA_MAX + 1, 0), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 2, MUX_DATA_MAX, 0), 0);
	assert_int_equal(recv_v(&t, MUX_WINDOW_UPDATE, 2, MUX_WINDOW), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_WINDOW_UPDATE, 2, 1), MUX_V_ERROR); /* more than it was sent */
	/* Half-close each way: no DATA after it, no second SHUT; the other half goes on. */
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 3, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 3, 1, MUX_ST_OK), 0);
	assert_int_equal(recv_v(&t, MUX_SHUT, 3, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 3, 5, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_SHUT, 3, 0, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_SHUT, 3, 0, 0), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 3, 5, 0), -1);
	assert_int_equal(recv_v(&t, MUX_DATA, 3, 5), MUX_V_ERROR);
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 3, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 3, 1, MUX_ST_OK), 0);
	assert_int_equal(recv_v(&t, MUX_SHUT, 3, 0), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_SHUT, 3, 0), MUX_V_ERROR);
}

static void test_close(void **state)
{
	struct saas__mux_track t;

	(void)state;
	/* The guest closes an open one: answered, and the id is free at once. */
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 4, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 4, 1, MUX_ST_OK), 0);
	assert_int_equal(recv_v(&t, MUX_CLOSE, 4, 0), MUX_V_CLOSE);
	assert_null(saas__mux_conn_find(&t, 4));
	assert_int_equal(t.n, 0);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 4, 0), MUX_V_OK);
	/* ... or one still connecting: answered with CLOSE, no OPENED. */
	assert_int_equal(recv_v(&t, MUX_CLOSE, 4, 0), MUX_V_CLOSE);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 4, 1, MUX_ST_OK), -1);
	/* The server closes: what crosses its CLOSE is dropped, the id free at the guest's CLOSE. */
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 5, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 5, 1, MUX_ST_OK), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 5, 0, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 5, 0, 0), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_DATA, 5, 1, 0), -1);
	assert_int_equal(recv_v(&t, MUX_DATA, 5, MUX_DATA_MAX), MUX_V_IGNORE);
	assert_int_equal(recv_v(&t, MUX_WINDOW_UPDATE, 5, 9), MUX_V_IGNORE);
	assert_int_equal(recv_v(&t, MUX_SHUT, 5, 0), MUX_V_IGNORE);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 5, 0), MUX_V_ERROR); /* not free until the guest's CLOSE */
	hello(&t, MUX_SERVER);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 5, 0), MUX_V_OK);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 5, 1, MUX_ST_OK), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 5, 0, 0), 0);
	assert_int_equal(recv_v(&t, MUX_CLOSE, 5, 0), MUX_V_OK);
	assert_int_equal(t.n, 0);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 5, 0), MUX_V_OK);
	/* A failed OPENED frees the id. */
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 5, 1, MUX_ST_REFUSED), 0);
	assert_int_equal(t.n, 0);
	assert_int_equal(recv_v(&t, MUX_CLOSE, 5, 0), MUX_V_IGNORE);
}

static void test_guest_side(void **state)
{
	struct saas__mux_track t;

	(void)state;
	hello(&t, MUX_GUEST);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 1, 11, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 1, 11, 0), -1);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 1, 1, 0), -1);
	/* The server never closes an id it has not answered, nor answers an id never opened. */
	assert_int_equal(recv_v(&t, MUX_CLOSE, 1, 0), MUX_V_ERROR);
	hello(&t, MUX_GUEST);
	assert_int_equal(recv_v(&t, MUX_OPENED, 1, MUX_ST_OK), MUX_V_ERROR);
	/* OK, then a second OPENED is wrong. */
	hello(&t, MUX_GUEST);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 1, 11, 0), 0);
	assert_int_equal(recv_v(&t, MUX_OPENED, 1, MUX_ST_OK), MUX_V_OK);
	assert_int_equal(recv_v(&t, MUX_OPENED, 1, MUX_ST_OK), MUX_V_ERROR);
	/* Refused: the id is free again. */
	hello(&t, MUX_GUEST);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 2, 11, 0), 0);
	assert_int_equal(recv_v(&t, MUX_OPENED, 2, MUX_ST_REFUSED), MUX_V_OK);
	assert_int_equal(t.n, 0);
	/* Our CLOSE crossed their OPENED: a success is answered by their CLOSE later, a failure ends it. */
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 2, 11, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 2, 0, 0), 0);
	assert_int_equal(recv_v(&t, MUX_OPENED, 2, MUX_ST_OK), MUX_V_IGNORE);
	assert_int_equal(recv_v(&t, MUX_DATA, 2, 10), MUX_V_IGNORE);
	assert_int_equal(recv_v(&t, MUX_CLOSE, 2, 0), MUX_V_OK);
	assert_int_equal(t.n, 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPEN_NAME, 2, 11, 0), 0);
	assert_int_equal(saas__mux_track_sent(&t, MUX_CLOSE, 2, 0, 0), 0);
	assert_int_equal(recv_v(&t, MUX_OPENED, 2, MUX_ST_UNREACHABLE), MUX_V_IGNORE);
	assert_int_equal(t.n, 0);
}

static void test_limit(void **state)
{
	struct saas__mux_track t, g;

	(void)state;
	hello(&t, MUX_SERVER);
	hello(&g, MUX_GUEST);
	for (uint32_t id = 1; id <= MUX_CONNS_MAX; id++) {
		assert_int_equal(saas__mux_track_sent(&g, MUX_OPEN_NAME, id, 11, 0), 0);
		assert_int_equal(recv_v(&t, MUX_OPEN_NAME, id, 0), MUX_V_OK);
	}
	assert_int_equal(t.n, MUX_CONNS_MAX);
	/* A guest's own table is as bounded as the server's; a hostile one is told so. */
	assert_int_equal(saas__mux_track_sent(&g, MUX_OPEN_NAME, 1000, 11, 0), -1);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1000, 0), MUX_V_FULL);
	assert_null(saas__mux_conn_find(&t, 1000));
	/* One ends: its slot takes the next. */
	assert_int_equal(saas__mux_track_sent(&t, MUX_OPENED, 17, 1, MUX_ST_UNREACHABLE), 0);
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1000, 0), MUX_V_OK);
	assert_non_null(saas__mux_conn_find(&t, 1000));
	assert_int_equal(recv_v(&t, MUX_OPEN_NAME, 1001, 0), MUX_V_FULL);
}

/*
 * Both ends' tables fed each other's frames, through the frame reader, over
 * a scripted exchange: they agree at every step, and every frame one sends
 * the other accepts.
 */
static void exchange(struct saas__mux_track *from, struct saas__mux_track *to, uint8_t type, uint32_t id,
                     uint32_t v, int want)
{
	struct saas__mux_frame f;
	size_t n = build(type, id, v);

	assert_int_equal(saas__mux_track_sent(from, type, id, type == MUX_DATA ? v : (uint32_t)(n - MUX_HEADER), v), 0);
	assert_int_equal(saas__mux_frame_read(frame, n, from->self, &f), (long)n);
	assert_int_equal(saas__mux_track_received(to, &f), want);
}

static void test_both_ends(void **state)
{
	struct saas__mux_track g, s;

	(void)state;
	saas__mux_track_init(&g, MUX_GUEST);
	saas__mux_track_init(&s, MUX_SERVER);
	exchange(&g, &s, MUX_HELLO, 0, MUX_VERSION, MUX_V_OK);
	exchange(&s, &g, MUX_HELLO, 0, MUX_VERSION, MUX_V_OK);
	exchange(&g, &s, MUX_DNS_QUERY, 77, 40, MUX_V_OK);
	exchange(&s, &g, MUX_DNS_ANSWER, 77, 80, MUX_V_OK);
	exchange(&g, &s, MUX_OPEN_ADDR, 1, 0, MUX_V_OK);
	exchange(&s, &g, MUX_OPENED, 1, MUX_ST_OK, MUX_V_OK);
	exchange(&g, &s, MUX_DATA, 1, 500, MUX_V_OK);
	exchange(&s, &g, MUX_WINDOW_UPDATE, 1, 500, MUX_V_OK);
	for (int i = 0; i < 20; i++) {
		exchange(&s, &g, MUX_DATA, 1, MUX_DATA_MAX, MUX_V_OK);
		exchange(&g, &s, MUX_WINDOW_UPDATE, 1, MUX_DATA_MAX, MUX_V_OK);
	}
	exchange(&g, &s, MUX_SHUT, 1, 0, MUX_V_OK);
	exchange(&s, &g, MUX_DATA, 1, 7, MUX_V_OK);
	exchange(&s, &g, MUX_SHUT, 1, 0, MUX_V_OK);
	exchange(&g, &s, MUX_CLOSE, 1, 0, MUX_V_CLOSE);
	/* The server's CLOSE back is not tracked on its side (the id is free there already). */
	{
		struct saas__mux_frame f;
		uint8_t buf[MUX_HEADER];
		saas__mux_header(buf, MUX_CLOSE, 1, 0);
		assert_int_equal(saas__mux_frame_read(buf, sizeof(buf), MUX_SERVER, &f), MUX_HEADER);
		assert_int_equal(saas__mux_track_received(&g, &f), MUX_V_OK);
	}
	assert_int_equal(g.n, 0);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_bounds), cmocka_unit_test(test_roles),       cmocka_unit_test(test_names),
		cmocka_unit_test(test_open),          cmocka_unit_test(test_hello),       cmocka_unit_test(test_server_life),
		cmocka_unit_test(test_close),         cmocka_unit_test(test_guest_side),  cmocka_unit_test(test_limit),
		cmocka_unit_test(test_both_ends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
