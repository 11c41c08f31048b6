/*
 * WebSocket framing (lib/wire/ws.c), both directions.
 *
 * Reading: the input is what a peer sends after the handshake, taken frame by
 * frame as the server's terminal route and the remote client take it. Each
 * head read is checked against RFC 6455 5.2 written out again here: the
 * reserved bits clear, a known opcode, a control frame final and at most 125
 * bytes, a 64-bit length with its top bit clear, and the head's length from
 * the length's form and the mask bit; no shorter prefix of a head is whole,
 * and none of a good head's is refused. A head in the shortest form is what
 * saas__ws_head() writes for its fields. Unmasking in pieces, cut where the
 * input says, is unmasking in one; twice is not at all.
 *
 * Writing: the input's first bytes also say an opcode, a length and a mask;
 * the head written for them reads back as the same fields.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* RFC 6455 5.2, independently: 1 whole (the head's length in *head), 0 more needed, -1 refused. */
static int reference(const unsigned char *b, size_t n, size_t *head)
{
	int op, fin;
	uint64_t len;
	size_t need = 2;

	if (n < 2)
		return 0;
	fin = b[0] >> 7;
	op = b[0] & 15;
	len = b[1] & 127;
	if (b[0] & 0x70)
		return -1;
	if (!(op == 0 || op == 1 || op == 2 || op == 8 || op == 9 || op == 10))
		return -1;
	if (op >= 8 && (!fin || len > 125))
		return -1;
	need += len == 126 ? 2 : len == 127 ? 8 : 0;
	need += (b[1] & 128) ? 4 : 0;
	if (n < need)
		return 0;
	if (len == 127 && (b[2] & 0x80))
		return -1;
	*head = need;
	return 1;
}

static void check_head(const unsigned char *buf, size_t len)
{
	struct saas__ws_frame f;
	size_t want_head = 0;
	int r = saas__ws_frame_parse(buf, len, &f), want = reference(buf, len, &want_head);

	if (r != want)
		abort();
	if (r != 1)
		return;
	if (f.head != want_head || f.fin != buf[0] >> 7 || f.opcode != (buf[0] & 15) || f.masked != buf[1] >> 7 ||
	    f.len >> 63 || (f.opcode >= SAAS_WS_CLOSE && f.len > 125))
		abort();
	if (f.masked && memcmp(f.mask, buf + f.head - 4, 4) != 0)
		abort();
	/* Every shorter prefix needs more, never is refused: a reader may wait for a good head byte by byte. */
	for (size_t k = 0; k < f.head; k++) {
		struct saas__ws_frame g;
		if (saas__ws_frame_parse(buf, k, &g) != 0)
			abort();
	}
	/* The shortest form is the one we write. */
	if (f.fin && ((buf[1] & 127) < 126 || ((buf[1] & 127) == 126 && f.len >= 126) ||
	              ((buf[1] & 127) == 127 && f.len > 0xffff))) {
		unsigned char again[SAAS_WS_HEAD_MAX];
		size_t n = saas__ws_head(again, f.opcode, f.len, f.masked ? f.mask : NULL);
		if (n != f.head || memcmp(again, buf, n) != 0)
			abort();
	}
}

/* Unmask len bytes in pieces of `step`, and in one, and twice. */
static void check_unmask(const unsigned char *src, size_t len, const unsigned char mask[4], size_t step)
{
	unsigned char *one = malloc(len + 1), *pieces = malloc(len + 1);

	memcpy(one, src, len);
	memcpy(pieces, src, len);
	saas__ws_unmask(one, len, mask, 0);
	for (size_t off = 0; off < len; off += step)
		saas__ws_unmask(pieces + off, len - off < step ? len - off : step, mask, off);
	if (memcmp(one, pieces, len) != 0)
		abort();
	for (size_t i = 0; i < len; i++)
		if (one[i] != (src[i] ^ mask[i % 4]))
			abort();
	saas__ws_unmask(one, len, mask, 0);
	if (memcmp(one, src, len) != 0)
		abort();
	free(one);
	free(pieces);
}

static void check_write(const uint8_t *data, size_t size)
{
	static const int ops[] = { SAAS_WS_CONT, SAAS_WS_TEXT, SAAS_WS_BINARY, SAAS_WS_CLOSE, SAAS_WS_PING, SAAS_WS_PONG };
	unsigned char head[SAAS_WS_HEAD_MAX], mask[4];
	struct saas__ws_frame f;
	uint64_t len = 0;
	int op;
	size_t n;

	if (size < 13)
		return;
	op = ops[data[0] % 6];
	for (int i = 0; i < 8; i++)
		len = len << 8 | data[1 + i];
	len >>= 1 + data[0] % 63;  /* every length form, not only huge ones */
	if (op >= SAAS_WS_CLOSE)
		len %= 126;
	memcpy(mask, data + 9, 4);
	n = saas__ws_head(head, op, len, (data[0] & 0x80) ? mask : NULL);
	if (n > SAAS_WS_HEAD_MAX || saas__ws_frame_parse(head, n, &f) != 1)
		abort();
	if (f.head != n || !f.fin || f.opcode != op || f.len != len || f.masked != !!(data[0] & 0x80) ||
	    (f.masked && memcmp(f.mask, mask, 4) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	check_write(data, size);
	/* The frames, one after another, as a reader takes them. */
	while (off < size) {
		struct saas__ws_frame f;
		int r;

		check_head(data + off, size - off);
		if ((r = saas__ws_frame_parse(data + off, size - off, &f)) != 1)
			break;
		if (size - off - f.head < f.len)
			break;
		if (f.masked)
			check_unmask(data + off + f.head, (size_t)f.len, f.mask, (size_t)(data[off] & 7) + 1);
		off += f.head + (size_t)f.len;
	}
	return 0;
}
