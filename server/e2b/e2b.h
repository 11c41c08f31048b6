/*
 * The E2B-compatible face of aas-server (docs/e2b.md): E2B's REST API under
 * /e2b and its in-sandbox daemon's protocol under /e2b-sandbox, each call
 * made a call of libsaas's public API on the server's one engine. This
 * header is what the rest of the server sees of it, and the pure pieces the
 * unit tests reach.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_H
#define AAS_E2B_H

#include <stdbool.h>
#include <stddef.h>

#include <saas.h>

struct aas_config;
struct aas_req;
struct aas_reply;
struct aas_route;

/* The prefixes: E2B_API_URL=http://HOST:PORT/e2b, E2B_SANDBOX_URL=http://HOST:PORT/e2b-sandbox. */
#define AAS_E2B_API_PREFIX "/e2b"
#define AAS_E2B_SANDBOX_PREFIX "/e2b-sandbox"

/* ---- the server's hooks (gateway.c) ---- */

/* Take the engine and the options (templates, the token secret); 0, or -1 after logging. */
int aas_e2b_init(saas_engine *engine, const struct aas_config *cfg);
void aas_e2b_shutdown(void);
/*
 * The route that serves a path under one of the prefixes (every method: the
 * face routes within), or NULL for a path that is not the face's.
 */
const struct aas_route *aas_e2b_route(const char *path);

/*
 * `aas-server e2b-key`: read a key (aas_sk_...) on stdin, never on the
 * command line (every local user can read that in /proc), and print its
 * e2b_ spelling. 0, or 2 after a one-line error.
 */
int aas_e2b_key_main(int argc, char **argv);

/* ---- spellings (names.c): pure ---- */

#define AAS_E2B_KEY_PREFIX "e2b_"
#define AAS_SAAS_KEY_PREFIX "aas_sk_"
#define AAS_SAAS_KEY_CHARS 43
/* The longest e2b_ key: the prefix and two hex digits per character of an aas_sk_ key's secret part. */
#define AAS_E2B_KEY_MAX (sizeof(AAS_E2B_KEY_PREFIX) - 1 + 2 * AAS_SAAS_KEY_CHARS)
#define AAS_SAAS_KEY_MAX (sizeof(AAS_SAAS_KEY_PREFIX) - 1 + AAS_SAAS_KEY_CHARS)

/*
 * The E2B spelling of a libsaas key: "e2b_" and the lower-case hex of the
 * 43 characters after "aas_sk_". false when key is not an aas_sk_ key of
 * that shape (out is then ""); out holds at least AAS_E2B_KEY_MAX + 1.
 */
bool aas_e2b_key_encode(char *out, size_t size, const char *key);
/*
 * The libsaas key an E2B spelling stands for (the inverse of the above):
 * false when e2b_key is not exactly such a spelling (out is then "");
 * out holds at least AAS_SAAS_KEY_MAX + 1.
 */
bool aas_e2b_key_decode(char *out, size_t size, const char *e2b_key);

/* E2B's id of a libsaas sandbox: its id without "sbx-" (borrowed from id), or NULL when it has no such prefix. */
const char *aas_e2b_id_from_saas(const char *id);
/* The libsaas id of an E2B id ("sbx-" put back): false when it cannot be one (not [a-z0-9], empty, too long). */
bool aas_e2b_id_to_saas(char out[SAAS_ID_MAX + 1], const char *e2b_id);

/* The server secret tokens are derived from. */
#define AAS_E2B_SECRET_LEN 32
/* Labels that keep the tokens of one sandbox apart. */
#define AAS_E2B_TOKEN_ENVD "e2b-envd-token"
#define AAS_E2B_TOKEN_TRAFFIC "e2b-traffic-token"
/* A sandbox's token: hex(HMAC-SHA256(secret, label "\0" sandbox_id)), 64 digits and a NUL. */
void aas_e2b_token(char out[65], const unsigned char secret[AAS_E2B_SECRET_LEN], const char *label,
                   const char *sandbox_id);
/* Is given the token expected (compared in constant time; a length that differs is false)? */
bool aas_e2b_token_equal(const char *given, const char *expected);

/* A template: an E2B name and the libsaas size and image (NULL: the server's default) it makes. */
struct aas_e2b_template {
	char *name;
	char *size;
	char *image;
};
struct aas_e2b_templates {
	size_t count;
	struct aas_e2b_template *items;
};
#define AAS_E2B_TEMPLATES_DEFAULT "base=small"
#define AAS_E2B_TEMPLATES_MAX 64
#define AAS_E2B_TEMPLATE_NAME_MAX 64
/*
 * Parse "NAME=SIZE[:IMAGE],..." (names [a-z0-9._-], each once, at most
 * AAS_E2B_TEMPLATES_MAX). 0, or -1 with why filled; free with
 * aas_e2b_templates_free() either way.
 */
int aas_e2b_templates_parse(struct aas_e2b_templates *out, const char *spec, char *why, size_t whysize);
const struct aas_e2b_template *aas_e2b_template_find(const struct aas_e2b_templates *t, const char *name);
void aas_e2b_templates_free(struct aas_e2b_templates *t);

/*
 * Decode %XX escapes and '+' (a space) of s[0..len) into out, as Go's
 * QueryUnescape (E2B's server) does: false for a bad escape or a NUL.
 * out holds at least len + 1 bytes; *out_len gets the length.
 */
bool aas_e2b_unescape(char *out, size_t *out_len, const char *s, size_t len);

#endif
