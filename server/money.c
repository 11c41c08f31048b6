/*
 * The money parser of the admin API's credit amounts. The JSON shapes the
 * REST API answers with are lib/wire's (wire.h), shared with MCP, the CLI and
 * the remote client; money goes out there both as an exact decimal string
 * ("cost_usd": "0.000125") and integer micro-dollars ("cost_usd_micro": 125),
 * never a binary float.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

/* "12", "12.5", "0.000001": at most six decimals, no sign, no exponent, at most AAS_USD_MAX. */
int aas_parse_usd(int64_t *micro, const char *s)
{
	int64_t whole = 0, frac = 0;
	int nfrac = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (*p - '0');
		if (whole > AAS_USD_MAX)
			return -1;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (++nfrac > 6)
				return -1;
			frac = frac * 10 + (*p - '0');
		}
	}
	if (*p)
		return -1;
	for (; nfrac < 6; nfrac++)
		frac *= 10;
	if (whole * 1000000 + frac > AAS_USD_MAX * 1000000)
		return -1;
	*micro = whole * 1000000 + frac;
	return 0;
}
