/*
 * WebSocket framing (ws.h). SHA-1 is here only for the handshake's accept
 * value, which RFC 6455 fixes: it protects nothing.
 */
#include <string.h>

#include "ws.h"

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20])
{
	uint32_t h[5] = { 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0 };
	uint64_t bits = (uint64_t)len * 8;
	size_t total = ((len + 8) / 64 + 1) * 64;

	for (size_t off = 0; off < total; off += 64) {
		uint32_t w[80], a, b, c, d, e;
		unsigned char blk[64];

		for (size_t i = 0; i < 64; i++) {
			size_t k = off + i;
			blk[i] = k < len ? msg[k] : k == len ? 0x80 : 0;
		}
		if (off + 64 == total)
			for (int i = 0; i < 8; i++)
				blk[63 - i] = (unsigned char)(bits >> (8 * i));
		for (int i = 0; i < 16; i++)
			w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 | (uint32_t)blk[4 * i + 2] << 8 |
			       blk[4 * i + 3];
		for (int i = 16; i < 80; i++) {
			uint32_t x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16];
			w[i] = x << 1 | x >> 31;
		}
		a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
		for (int i = 0; i < 80; i++) {
			uint32_t f, k, t;
			if (i < 20)
				f = (b & c) | (~b & d), k = 0x5A827999;
			else if (i < 40)
				f = b ^ c ^ d, k = 0x6ED9EBA1;
			else if (i < 60)
				f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
			else
				f = b ^ c ^ d, k = 0xCA62C1D6;
			t = (a << 5 | a >> 27) + f + e + k + w[i];
			e = d, d = c, c = b << 30 | b >> 2, b = a, a = t;
		}
		h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
	}
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

void saas__ws_accept(const char *key, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char src[128 + sizeof(guid)], dig[21];
	size_t klen = strnlen(key, 128), o = 0;

	memcpy(src, key, klen);
	memcpy(src + klen, guid, sizeof(guid) - 1);
	sha1(src, klen + sizeof(guid) - 1, dig);
	dig[20] = 0;
	for (size_t i = 0; i < 21; i += 3) {
		uint32_t v = (uint32_t)dig[i] << 16 | (uint32_t)(i + 1 < 21 ? dig[i + 1] : 0) << 8 | (i + 2 < 21 ? dig[i + 2] : 0);
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = b64[v >> 6 & 63];
		out[o++] = b64[v & 63];
	}
	/* 20 bytes are 27 characters and one '=' of padding. */
	out[27] = '=';
	out[28] = '\0';
}

size_t saas__ws_head(unsigned char out[SAAS_WS_HEAD_MAX], int opcode, uint64_t len, const unsigned char *mask)
{
	size_t n = 0;
	unsigned char m = mask ? 0x80 : 0;

	out[n++] = (unsigned char)(0x80 | (opcode & 0x0f));
	if (len < 126) {
		out[n++] = (unsigned char)(m | len);
	} else if (len <= 0xffff) {
		out[n++] = m | 126;
		out[n++] = (unsigned char)(len >> 8);
		out[n++] = (unsigned char)len;
	} else {
		out[n++] = m | 127;
		for (int i = 7; i >= 0; i--)
			out[n++] = (unsigned char)(len >> (8 * i));
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

int saas__ws_frame_parse(const unsigned char *buf, size_t len, struct saas__ws_frame *f)
{
	size_t need = 2;

	if (len < 2)
		return 0;
	if (buf[0] & 0x70)
		return -1; /* no extension was agreed */
	f->fin = !!(buf[0] & 0x80);
	f->opcode = buf[0] & 0x0f;
	f->masked = !!(buf[1] & 0x80);
	f->len = buf[1] & 0x7f;
	if (!(f->opcode <= SAAS_WS_BINARY || (f->opcode >= SAAS_WS_CLOSE && f->opcode <= SAAS_WS_PONG)))
		return -1;
	if (f->opcode >= SAAS_WS_CLOSE && (!f->fin || f->len > 125))
		return -1;
	if (f->len == 126)
		need += 2;
	else if (f->len == 127)
		need += 8;
	if (f->masked)
		need += 4;
	if (len < need)
		return 0;
	if (f->len == 126) {
		f->len = (uint64_t)buf[2] << 8 | buf[3];
	} else if (f->len == 127) {
		f->len = 0;
		for (int i = 0; i < 8; i++)
			f->len = f->len << 8 | buf[2 + i];
		if (f->len >> 63)
			return -1;
	}
	if (f->masked)
		memcpy(f->mask, buf + need - 4, 4);
	f->head = need;
	return 1;
}

void saas__ws_unmask(unsigned char *data, size_t len, const unsigned char mask[4], uint64_t offset)
{
	for (size_t i = 0; i < len; i++)
		data[i] ^= mask[(offset + i) & 3];
}
