/*
 * Money: aas-server's aas_parse_usd (the admin commands' dollar amounts) and
 * the library's saas_usd_format. The parser agrees with a reference of the
 * documented grammar (digits, then at most six decimals after a '.'; no sign,
 * no exponent; at most AAS_USD_MAX dollars), exactly, in micro-dollars; what
 * it reads, formatted and read again, is the same amount; and every amount
 * it may hold (the input's first 8 bytes) formats to text it reads back.
 */
#include <stdlib.h>
#include <string.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int reference(int64_t *micro, const char *s)
{
	int64_t whole = 0, frac = 0;
	size_t n = 0, nf = 0;

	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		whole = whole * 10 + (s[n] - '0');
		if (whole > AAS_USD_MAX)
			return -1;
	}
	if (n == 0)
		return -1;
	if (s[n] == '.') {
		for (n++; s[n] >= '0' && s[n] <= '9'; n++, nf++) {
			if (nf == 6)
				return -1;
			frac = frac * 10 + (s[n] - '0');
		}
	}
	if (s[n])
		return -1;
	for (; nf < 6; nf++)
		frac *= 10;
	if (whole * 1000000 + frac > AAS_USD_MAX * 1000000)
		return -1;
	*micro = whole * 1000000 + frac;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[64], buf[64];
	int64_t got = -1, want = -1, back = -1;
	int rc;

	if (size >= sizeof(int64_t)) {
		int64_t m;
		memcpy(&m, data, sizeof(m));
		m = (int64_t)((uint64_t)m % ((uint64_t)AAS_USD_MAX * 1000000 + 1));
		if (aas_parse_usd(&back, saas_usd_format(buf, sizeof(buf), m)) != 0 || back != m)
			abort();
	}
	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	rc = aas_parse_usd(&got, text);
	if ((rc == 0) != (reference(&want, text) == 0) || (rc == 0 && got != want))
		abort();
	if (rc == 0 && (aas_parse_usd(&back, saas_usd_format(buf, sizeof(buf), got)) != 0 || back != got))
		abort();
	return 0;
}
