/*
 * What the preview proxy's files share and no other room may call: a guest's
 * HTTP/1.x answer read in place (guest_http.c, pure) and the cookie filters
 * (proxy.c), each tested on its own.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_PREVIEW_INTERNAL_H
#define AAS_PREVIEW_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the cookies that may cross (proxy.c) ---- */

/* May a guest's Set-Cookie header (its value) reach a browser that asked `host` (lowercase, no port)? */
bool aas_preview_cookie_ok(const char *set_cookie, const char *host);
/*
 * Is a cookie of a request's Cookie header (its "name=value", len bytes) one of
 * this server's own, "aas_*" or "__Host-aas_*" (--secure-cookies)? Those never
 * reach a guest.
 */
bool aas_preview_cookie_ours(const char *pair, size_t len);

/* ---- a guest's HTTP/1.x answer (guest_http.c): pure, in place ---- */

enum aas_http_body {
	AAS_HTTP_BODY_NONE,     /* 1xx, 204, 304 */
	AAS_HTTP_BODY_LENGTH,   /* Content-Length bytes */
	AAS_HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
	AAS_HTTP_BODY_CLOSE     /* until the server closes */
};

struct aas_http_field {
	char *name, *value;     /* into the parsed head; names as sent, values unfolded and trimmed */
};

struct aas_http_head {
	unsigned int status;
	enum aas_http_body body;
	int64_t length;         /* Content-Length, or -1 */
	size_t nfields;
	struct aas_http_field *fields; /* every field line but those that are none (no colon, no token) */
};

/*
 * Where the head in buf[0..len) ends (the length up to and with its empty
 * line), 0 while it has not ended. *from keeps the scan's place between calls
 * on a growing buffer; start it at 0.
 */
size_t aas_http_head_end(const char *buf, size_t len, size_t *from);
/*
 * Parse a whole head (aas_http_head_end's length of buf), in place. 0, or -1
 * with *why saying what made it unreadable (static text). Free with aas_http_head_free.
 */
int aas_http_head_parse(char *buf, size_t len, struct aas_http_head *h, const char **why);
void aas_http_head_free(struct aas_http_head *h);

/* A chunked body being decoded; start zeroed. */
struct aas_http_chunked {
	int state;
	unsigned int digits;
	size_t ext;
	bool cr, semi;
	uint64_t left;
};
/*
 * Decode the next len bytes in place: the payload's length at buf, or -1 for
 * bad framing (after the payload that came before it in the same bytes).
 */
ssize_t aas_http_chunked(struct aas_http_chunked *c, char *buf, size_t len);
/* Has the last chunk (and its trailer) gone by? What follows it is ignored. */
bool aas_http_chunked_done(const struct aas_http_chunked *c);

#endif
