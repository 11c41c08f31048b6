/*
 * aas-control's pure parts (aas-control.c): the request parser and the line
 * reader, which tests/unit/test_control.c drives with the engine's side. The
 * protocol itself is lib/transport/control_proto.h, which both ends include.
 */
#ifndef AAS_CONTROL_H
#define AAS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/control_proto.h"

#define AAS_CONTROL_RATE_MAX 8         /* requests served per second; more wait for the next second */

struct aas_fixup {
	char nonce[CONTROL_NONCE_LEN + 1];
	char hostname[CONTROL_HOSTNAME_MAX + 1];
	long long seconds;
	long nanos;
	unsigned char seed[CONTROL_SEED_MAX / 2];
	size_t seed_len;
};

/*
 * A request line (without its '\n'), n bytes at line: "fixup NONCE HOSTNAME
 * SECONDS[.NANOS] HEX_SEED", one space between words. 0, or -1 with *why
 * saying what is wrong (and out->nonce set when the nonce itself was well
 * formed, for the answer).
 */
int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why);

/* Whose files a put or a get touches, and who runs a command. */
#define AAS_FILES_USER "sandbox"

/* sshd's PATH for a user's command (Debian's OpenSSH), which a command over the port gets too. */
#define AAS_EXEC_PATH "/usr/local/bin:/usr/bin:/bin:/usr/games"

enum aas_request { AAS_REQ_FIXUP, AAS_REQ_FILES, AAS_REQ_PUT, AAS_REQ_GET, AAS_REQ_EXEC, AAS_REQ_CONNECT };

struct aas_file_req {
	int kind;                      /* AAS_REQ_FILES, _PUT, _GET, _EXEC or _CONNECT */
	char nonce[CONTROL_NONCE_LEN + 1];
	unsigned int mode;             /* put */
	long long max;                 /* get: the most bytes the engine takes (0: any) */
	size_t path_len;               /* put, get: the path's length; exec: the script's */
	unsigned int port;             /* connect: 127.0.0.1's port (0: the probe) */
};

/* Which request a line is (by its first word): enum aas_request, or -1. */
int aas_request_kind(const char *line, size_t n);

/*
 * A files, put, get, exec or connect line (without its '\n'): 0, or -1 with *why saying what
 * is wrong (out->nonce set when the nonce itself was well formed).
 */
int aas_files_parse(const char *line, size_t n, struct aas_file_req *out, const char **why);

/*
 * The line reader: bytes in, whole lines out. A line longer than
 * CONTROL_LINE_MAX - 1 bytes is dropped whole (reported once, as
 * overlong), never cut into requests.
 */
struct aas_lines {
	char buf[CONTROL_LINE_MAX];
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
