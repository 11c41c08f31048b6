/*
 * Times (lib/util/time.c): saas_time_parse and saas_time_format.
 * A text the parser takes, formatted and parsed again, is the same instant;
 * and any instant of years 0000-9999 (the input's first 8 bytes), formatted,
 * parses back to itself. Formatted times are always 24 characters of RFC 3339.
 */
#include <stdlib.h>
#include <string.h>

#include <saas.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Format ms; if it can be written, it must read back as ms. */
static void round_trip(int64_t ms)
{
	char buf[64];
	int64_t back = 0;

	saas_time_format(buf, sizeof(buf), ms);
	if (!buf[0])
		return;
	if (strlen(buf) != 24 || buf[4] != '-' || buf[10] != 'T' || buf[23] != 'Z')
		abort();
	if (saas_time_parse(&back, buf, 0) != SAAS_OK || back != ms)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int flags[] = { 0, SAAS_TIME_DAY_END };
	char text[80];
	int64_t ms;

	if (size >= sizeof(int64_t)) {
		memcpy(&ms, data, sizeof(ms));
		/* Years 0000 to 9999: what four-digit years can say. */
		ms %= 315569520000000LL;
		round_trip(ms);
	}
	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		ms = 0;
		if (saas_time_parse(&ms, text, flags[i]) == SAAS_OK)
			round_trip(ms);
		else if (saas_error_last()->code != SAAS_EINVAL)
			abort();
	}
	return 0;
}
