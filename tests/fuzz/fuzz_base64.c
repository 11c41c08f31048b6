/*
 * Base64 (lib/util/base64.c). Two checks per input: the input's bytes,
 * encoded and decoded, come back unchanged; and the input read as base64
 * text is decoded exactly as a reference decoder does it (the same lenient
 * grammar, a different algorithm), or refused when the reference refuses it.
 */
#include <stdlib.h>
#include <string.h>

#include <saas.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sextet(unsigned char c)
{
	static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *p;

	if (c && (p = memchr(std, c, 64)))
		return (int)(p - std);
	if (c && (p = memchr(url, c, 64)))
		return (int)(p - url);
	return -1;
}

/*
 * Whitespace anywhere is skipped; then: sextets, then at most two '=', and
 * with padding the whole is a multiple of 4; 4k+1 sextets cannot be bytes.
 * Byte k is bits 8k..8k+7 of the sextets' concatenation. Returns the length or -1.
 */
static long reference(const char *text, size_t len, unsigned char *out)
{
	unsigned char *v = malloc(len + 1);
	size_t digits = 0, pad = 0, nbytes;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
		} else if (pad || sextet(c) < 0) {
			free(v);
			return -1;
		} else {
			v[digits++] = (unsigned char)sextet(c);
		}
	}
	if (digits % 4 == 1 || pad > 2 || (pad && (digits + pad) % 4 != 0)) {
		free(v);
		return -1;
	}
	nbytes = digits * 6 / 8;
	for (size_t k = 0; k < nbytes; k++) {
		unsigned int b = 0;
		for (size_t bit = 8 * k; bit < 8 * k + 8; bit++)
			b = b << 1 | ((v[bit / 6] >> (5 - bit % 6)) & 1u);
		out[k] = (unsigned char)b;
	}
	free(v);
	return (long)nbytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = saas_base64_encode(data, size);
	unsigned char *want = malloc(size + 1);
	void *got = NULL;
	size_t got_len = 0;
	long want_len;
	int rc;

	/* Round trip. */
	if (!text || strlen(text) != (size + 2) / 3 * 4)
		abort();
	if (saas_base64_decode(&got, &got_len, text, strlen(text)) != SAAS_OK || got_len != size ||
	    (size && memcmp(got, data, size) != 0))
		abort();
	saas_free(got);
	saas_free(text);

	/* Differential. */
	got = NULL;
	rc = saas_base64_decode(&got, &got_len, (const char *)data, size);
	want_len = reference((const char *)data, size, want);
	if ((rc == SAAS_OK) != (want_len >= 0))
		abort();
	if (rc == SAAS_OK && (got_len != (size_t)want_len || (got_len && memcmp(got, want, got_len) != 0)))
		abort();
	if (rc != SAAS_OK && (rc != SAAS_EINVAL || got))
		abort();
	saas_free(got);
	free(want);
	return 0;
}
