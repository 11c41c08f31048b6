/*
 * How the E2B face spells libsaas's things: sandbox ids, per-sandbox
 * tokens, templates (docs/e2b.md says why each is so; a key's spelling is
 * the library's, saas_key_to_e2b). Pure: no engine, no HTTP; the unit tests
 * call it directly.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "e2b/internal.h"

static const char hex[] = "0123456789abcdef";

const char *aas_e2b_id_from_saas(const char *id)
{
	return id && strncmp(id, "sbx-", 4) == 0 && id[4] ? id + 4 : NULL;
}

bool aas_e2b_id_to_saas(char out[SAAS_ID_MAX + 1], const char *e2b_id)
{
	size_t n = e2b_id ? strlen(e2b_id) : 0;

	out[0] = '\0';
	if (n == 0 || n + 4 > SAAS_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((e2b_id[i] >= 'a' && e2b_id[i] <= 'z') || (e2b_id[i] >= '0' && e2b_id[i] <= '9')))
			return false;
	memcpy(out, "sbx-", 4);
	memcpy(out + 4, e2b_id, n + 1);
	return true;
}

void aas_e2b_token(char out[65], const unsigned char secret[AAS_E2B_SECRET_LEN], const char *label,
                   const char *sandbox_id)
{
	crypto_auth_hmacsha256_state st;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];

	/* The NUL keeps label and id apart: no (label, id) pair spells another's bytes. */
	crypto_auth_hmacsha256_init(&st, secret, AAS_E2B_SECRET_LEN);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)sandbox_id, strlen(sandbox_id));
	crypto_auth_hmacsha256_final(&st, mac);
	for (size_t i = 0; i < sizeof(mac); i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[64] = '\0';
	sodium_memzero(mac, sizeof(mac));
}

bool aas_e2b_token_equal(const char *given, const char *expected)
{
	size_t n = strlen(expected);

	/* The length is no secret (every token has 64 digits); the bytes are compared in constant time. */
	if (!given || strlen(given) != n)
		return false;
	return sodium_memcmp(given, expected, n) == 0;
}

/* ---- templates ---- */

void aas_e2b_templates_free(struct aas_e2b_templates *t)
{
	for (size_t i = 0; i < t->count; i++) {
		free(t->items[i].name);
		free(t->items[i].size);
		free(t->items[i].image);
	}
	free(t->items);
	t->items = NULL;
	t->count = 0;
}

static bool template_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > AAS_E2B_TEMPLATE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' ||
		      s[i] == '-'))
			return false;
	return true;
}

int aas_e2b_templates_parse(struct aas_e2b_templates *out, const char *spec, char *why, size_t whysize)
{
	char *copy = NULL, *save = NULL, *item;
	int rc = -1;

	out->count = 0;
	out->items = NULL;
	if (!spec || !*spec) {
		snprintf(why, whysize, "no template given");
		return -1;
	}
	if (!(copy = strdup(spec)) ||
	    !(out->items = calloc(AAS_E2B_TEMPLATES_MAX, sizeof(*out->items)))) {
		snprintf(why, whysize, "out of memory");
		goto out;
	}
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '='), *colon;
		struct aas_e2b_template *t;

		if (!eq || !template_name_ok(item, (size_t)(eq - item))) {
			snprintf(why, whysize, "\"%s\" is not NAME=SIZE[:IMAGE] with NAME of [a-z0-9._-] (at most %d)", item,
			         AAS_E2B_TEMPLATE_NAME_MAX);
			goto out;
		}
		*eq = '\0';
		if (aas_e2b_template_find(out, item)) {
			snprintf(why, whysize, "template \"%s\" is given twice", item);
			goto out;
		}
		if (out->count == AAS_E2B_TEMPLATES_MAX) {
			snprintf(why, whysize, "more than %d templates", AAS_E2B_TEMPLATES_MAX);
			goto out;
		}
		if ((colon = strchr(eq + 1, ':')))
			*colon = '\0';
		/* The size and image are the engine's to check (a create names them); here only that they are there. */
		if (!eq[1] || (colon && !colon[1])) {
			snprintf(why, whysize, "template \"%s\" names no size%s", item, colon ? " or no image" : "");
			goto out;
		}
		t = &out->items[out->count++];
		if (!(t->name = strdup(item)) || !(t->size = strdup(eq + 1)) || (colon && !(t->image = strdup(colon + 1)))) {
			snprintf(why, whysize, "out of memory");
			goto out;
		}
	}
	if (out->count == 0) {
		snprintf(why, whysize, "no template given");
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

const struct aas_e2b_template *aas_e2b_template_find(const struct aas_e2b_templates *t, const char *name)
{
	for (size_t i = 0; i < t->count; i++)
		if (t->items[i].name && strcmp(t->items[i].name, name) == 0)
			return &t->items[i];
	return NULL;
}

static int hex_any(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool aas_e2b_unescape(char *out, size_t *out_len, const char *s, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			int hi, lo;
			if (len - i < 3 || (hi = hex_any(s[i + 1])) < 0 || (lo = hex_any(s[i + 2])) < 0)
				return false;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == '\0')
			return false;
		out[o++] = c;
	}
	out[o] = '\0';
	*out_len = o;
	return true;
}

/* ---- domain mode's hosts and signed file URLs ---- */

bool aas_e2b_host_parse(const char *host, const char *domain, unsigned int *port, char e2b_id[SAAS_ID_MAX + 1])
{
	char label[64], saas_id[SAAS_ID_MAX + 1];
	unsigned int p = 0;
	size_t i = 0;

	*port = 0;
	e2b_id[0] = '\0';
	/* A host label is at most 63 bytes (RFC 1035): PORT-ID's are. */
	if (!aas_host_label(label, sizeof(label), host, domain) || !label[0])
		return false;
	/* The port: 1..65535 in decimal, no leading zero (one spelling per host). */
	for (; label[i] >= '0' && label[i] <= '9' && i < 5; i++)
		p = p * 10 + (unsigned int)(label[i] - '0');
	if (i == 0 || label[i] != '-' || label[0] == '0' || p == 0 || p > 65535)
		return false;
	if (!aas_e2b_id_to_saas(saas_id, label + i + 1))
		return false;
	*port = p;
	snprintf(e2b_id, SAAS_ID_MAX + 1, "%s", label + i + 1);
	return true;
}

void aas_e2b_signature(char out[AAS_E2B_SIGNATURE_SIZE], const char *path, const char *operation, const char *user,
                       const char *token, const char *expiration)
{
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES];
	const char *parts[] = { path, ":", operation, ":", user, ":", token, expiration ? ":" : "", expiration };

	/* E2B's envd: "v1_" and SHA-256(path:operation:user:token[:expiration]) in base64 without padding. */
	crypto_hash_sha256_init(&st);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i])
			crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]));
	crypto_hash_sha256_final(&st, digest);
	memcpy(out, "v1_", 3);
	sodium_bin2base64(out + 3, AAS_E2B_SIGNATURE_SIZE - 3, digest, sizeof(digest),
	                  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
}
