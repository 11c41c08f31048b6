/*
 * UTF-8 validation (saas__valid_utf8, which decides whether output travels
 * as text or base64, and which commands are accepted) against two others: a
 * decoder written from the Unicode standard's definition (Table 3-7: shortest
 * form, no surrogates, at most U+10FFFF), and jansson's, which guards every
 * JSON string the server and MCP write.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool reference(const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n;
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if ((s[i] & 0xe0) == 0xc0) {
			n = 2;
			cp = s[i] & 0x1fu;
		} else if ((s[i] & 0xf0) == 0xe0) {
			n = 3;
			cp = s[i] & 0x0fu;
		} else if ((s[i] & 0xf8) == 0xf0) {
			n = 4;
			cp = s[i] & 0x07u;
		} else {
			return false;
		}
		if (len - i < n)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3fu);
		}
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool ours = saas__valid_utf8((const char *)data, size);
	json_t *j = json_stringn((const char *)data, size);

	if (ours != reference(data, size) || ours != (j != NULL))
		abort();
	json_decref(j);
	return 0;
}
