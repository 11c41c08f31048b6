/*
 * aas-control's protocol and its pure parts (aas-control.c): the request
 * parser and the line reader, which tests/unit/test_control.c drives with
 * the engine's side (lib/driver/libvirt/control.h, whose constants must
 * match these: the test checks).
 */
#ifndef AAS_CONTROL_H
#define AAS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#define AAS_CONTROL_PORT_NAME "org.libsaas.control.0"
#define AAS_CONTROL_LINE_MAX 256       /* a request line, '\n' included; a longer one is refused whole */
#define AAS_CONTROL_HOSTNAME_MAX 63
#define AAS_CONTROL_NONCE_LEN 16
#define AAS_CONTROL_SEED_MIN 32        /* hex digits: 16 bytes at least, 64 at most */
#define AAS_CONTROL_SEED_MAX 128
#define AAS_CONTROL_RATE_MAX 8         /* requests served per second; more wait for the next second */

struct aas_fixup {
	char nonce[AAS_CONTROL_NONCE_LEN + 1];
	char hostname[AAS_CONTROL_HOSTNAME_MAX + 1];
	long long seconds;
	long nanos;
	unsigned char seed[AAS_CONTROL_SEED_MAX / 2];
	size_t seed_len;
};

/*
 * A request line (without its '\n'), n bytes at line: "fixup NONCE HOSTNAME
 * SECONDS[.NANOS] HEX_SEED", one space between words. 0, or -1 with *why
 * saying what is wrong (and out->nonce set when the nonce itself was well
 * formed, for the answer).
 */
int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why);

/*
 * The line reader: bytes in, whole lines out. A line longer than
 * AAS_CONTROL_LINE_MAX - 1 bytes is dropped whole (reported once, as
 * overlong), never cut into requests.
 */
struct aas_lines {
	char buf[AAS_CONTROL_LINE_MAX];
	size_t len;
	bool overlong;                 /* dropping the rest of a line too long */
};

/*
 * Feed n bytes; for each complete line, fn(line, len, overlong, ud). Returns
 * how many bytes were consumed: all of them, unless fn returned non-zero (then
 * the bytes after that line are left for the next call).
 */
size_t aas_lines_feed(struct aas_lines *r, const char *b, size_t n,
                      int (*fn)(const char *line, size_t len, bool overlong, void *ud), void *ud);

/* Forget a half line: one from a host that went away is no request. */
void aas_lines_reset(struct aas_lines *r);

#endif
