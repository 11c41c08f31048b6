/*
 * Base64 (RFC 4648), once for the whole project: the REST API, MCP, the CLI
 * and the driver's kernel command line all carry bytes as base64.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

SAAS_EXTERN(char *) saas_base64_encode(const void *data, size_t len)
{
	const unsigned char *in = data;
	char *out, *q;

	if (len > (SIZE_MAX - 1) / 4 * 3 - 3 || !(out = malloc((len + 2) / 3 * 4 + 1)))
		return NULL;
	q = out;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
		             (i + 2 < len ? in[i + 2] : 0);
		*q++ = alphabet[v >> 18 & 63];
		*q++ = alphabet[v >> 12 & 63];
		*q++ = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
		*q++ = i + 2 < len ? alphabet[v & 63] : '=';
	}
	*q = '\0';
	return out;
}

static int sextet(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/*
 * Lenient where it costs nothing, since agents write this by hand: whitespace
 * (line-wrapped text) is skipped, the URL-safe alphabet is accepted, padding
 * may be left out; but '=' only at the end, and no other character.
 */
SAAS_EXTERN(int) saas_base64_decode(void **out, size_t *out_len, const char *text, size_t text_len)
{
	unsigned char *buf;
	size_t n = 0, pad = 0, digits = 0;
	uint32_t acc = 0;
	int bits = 0;

	saas__error_clear();
	if (!out || !out_len || (!text && text_len))
		return saas__inval("out, out_len and text must not be NULL");
	*out = NULL;
	*out_len = 0;
	if (!(buf = malloc(text_len / 4 * 3 + 3)))
		return saas__oom();
	for (size_t i = 0; i < text_len; i++) {
		unsigned char c = (unsigned char)text[i];
		int v;
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		if (pad || (v = sextet(c)) < 0) {
			free(buf);
			return saas__inval("not base64: unexpected '%c' at byte %zu", c >= 0x20 && c < 0x7f ? c : '?', i);
		}
		digits++;
		acc = acc << 6 | (uint32_t)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			buf[n++] = (unsigned char)(acc >> bits);
		}
	}
	if (digits % 4 == 1 || pad > 2 || (pad && (digits + pad) % 4)) {
		free(buf);
		return saas__inval("not base64: %zu characters cannot encode whole bytes", digits);
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return SAAS_OK;
}
