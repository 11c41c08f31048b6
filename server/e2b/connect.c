/*
 * The Connect protocol's floor: codes, envelopes, request messages
 * (connect.h). Pure: no HTTP library, no engine.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <saas.h>

#include "aas_mcp.h"
#include "e2b/connect.h"

/* Indexed by code: the wire name, and the HTTP status Connect sends a unary error of it with. */
static const struct {
	const char *name;
	unsigned int status;
} codes[] = {
	[AAS_CONNECT_OK] = { "ok", 200 },
	[AAS_CONNECT_CANCELED] = { "canceled", 499 },
	[AAS_CONNECT_UNKNOWN] = { "unknown", 500 },
	[AAS_CONNECT_INVALID_ARGUMENT] = { "invalid_argument", 400 },
	[AAS_CONNECT_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
	[AAS_CONNECT_NOT_FOUND] = { "not_found", 404 },
	[AAS_CONNECT_ALREADY_EXISTS] = { "already_exists", 409 },
	[AAS_CONNECT_PERMISSION_DENIED] = { "permission_denied", 403 },
	[AAS_CONNECT_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
	[AAS_CONNECT_FAILED_PRECONDITION] = { "failed_precondition", 400 },
	[AAS_CONNECT_ABORTED] = { "aborted", 409 },
	[AAS_CONNECT_OUT_OF_RANGE] = { "out_of_range", 400 },
	[AAS_CONNECT_UNIMPLEMENTED] = { "unimplemented", 501 },
	[AAS_CONNECT_INTERNAL] = { "internal", 500 },
	[AAS_CONNECT_UNAVAILABLE] = { "unavailable", 503 },
	[AAS_CONNECT_DATA_LOSS] = { "data_loss", 500 },
	[AAS_CONNECT_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

const char *aas_connect_code_name(int code)
{
	return code >= 0 && code <= AAS_CONNECT_CODE_MAX ? codes[code].name : NULL;
}

int aas_connect_code_from_name(const char *name)
{
	for (int c = 0; name && c <= AAS_CONNECT_CODE_MAX; c++)
		if (strcmp(codes[c].name, name) == 0)
			return c;
	return -1;
}

unsigned int aas_connect_http_status(int code)
{
	return code >= 0 && code <= AAS_CONNECT_CODE_MAX ? codes[code].status : 500;
}

/* What connect-web reads from a status when the body names no code (its http-status.js). */
int aas_connect_code_from_http(unsigned int status)
{
	switch (status) {
	case 200: return AAS_CONNECT_OK;
	case 400: return AAS_CONNECT_INTERNAL;
	case 401: return AAS_CONNECT_UNAUTHENTICATED;
	case 403: return AAS_CONNECT_PERMISSION_DENIED;
	case 404: return AAS_CONNECT_UNIMPLEMENTED;
	case 429: case 502: case 503: case 504: return AAS_CONNECT_UNAVAILABLE;
	default: return AAS_CONNECT_UNKNOWN;
	}
}

/*
 * The Connect column of SAAS_STATUS_LIST, indexed by -code: a code appended
 * there without a row here fails the unit test (test_e2b), as every other
 * column's consumer does. The choices are what the SDK then raises
 * (docs/e2b.md): not_found a NotFoundError or FileNotFoundError,
 * invalid_argument an InvalidArgumentError, resource_exhausted a
 * RateLimitError, deadline_exceeded a TimeoutError.
 */
static const int from_saas[] = {
	[0] = AAS_CONNECT_OK,                               /* SAAS_OK */
	[1] = AAS_CONNECT_UNKNOWN,                          /* SAAS_ERROR */
	[2] = AAS_CONNECT_INVALID_ARGUMENT,                 /* SAAS_EINVAL */
	[3] = AAS_CONNECT_RESOURCE_EXHAUSTED,               /* SAAS_ENOMEM */
	[4] = AAS_CONNECT_NOT_FOUND,                        /* SAAS_ENOTFOUND */
	[5] = AAS_CONNECT_ALREADY_EXISTS,                   /* SAAS_EEXISTS */
	[6] = AAS_CONNECT_UNAUTHENTICATED,                  /* SAAS_EAUTH */
	[7] = AAS_CONNECT_FAILED_PRECONDITION,              /* SAAS_ECREDIT */
	[8] = AAS_CONNECT_RESOURCE_EXHAUSTED,               /* SAAS_ELIMIT */
	[9] = AAS_CONNECT_FAILED_PRECONDITION,              /* SAAS_ESTATE */
	[10] = AAS_CONNECT_DEADLINE_EXCEEDED,               /* SAAS_ETIMEOUT */
	[11] = AAS_CONNECT_UNAVAILABLE,                     /* SAAS_EBACKEND */
	[12] = AAS_CONNECT_UNAVAILABLE,                     /* SAAS_ESTORE */
	[13] = AAS_CONNECT_INTERNAL,                        /* SAAS_EIO */
	[14] = AAS_CONNECT_UNIMPLEMENTED,                   /* SAAS_ENOTSUP */
	[15] = AAS_CONNECT_RESOURCE_EXHAUSTED,              /* SAAS_ETOOBIG */
	[16] = AAS_CONNECT_INVALID_ARGUMENT,                /* SAAS_EISDIR */
	[17] = AAS_CONNECT_UNAVAILABLE,                     /* SAAS_ENETWORK */
	[18] = AAS_CONNECT_INTERNAL,                        /* SAAS_EPROTOCOL */
	[19] = AAS_CONNECT_UNAVAILABLE,                     /* SAAS_EBUSY */
	[20] = AAS_CONNECT_PERMISSION_DENIED,               /* SAAS_EPERM */
};
_Static_assert(sizeof(from_saas) / sizeof(from_saas[0]) == SAAS_STATUS_COUNT,
               "every libsaas status needs its Connect code (server/e2b/connect.c)");

int aas_connect_code_from_saas(int rc)
{
	if (rc > 0 || -rc >= (int)(sizeof(from_saas) / sizeof(from_saas[0])))
		return AAS_CONNECT_UNKNOWN;
	return from_saas[-rc];
}

/* ---- envelopes ---- */

int aas_connect_read(struct aas_connect_reader *r, const void *data, size_t len, aas_connect_frame_cb cb, void *ud,
                     const char **why)
{
	const unsigned char *p = data;
	size_t max = r->max ? r->max : AAS_CONNECT_MESSAGE_MAX;
	int rc;

	*why = NULL;
	if (r->failed) {
		*why = "the stream was refused before";
		return -1;
	}
	while (len > 0) {
		if (r->head_have < AAS_CONNECT_HEADER_LEN) {
			size_t n = AAS_CONNECT_HEADER_LEN - r->head_have;
			if (n > len)
				n = len;
			memcpy(r->head + r->head_have, p, n);
			r->head_have += n;
			p += n;
			len -= n;
			if (r->head_have < AAS_CONNECT_HEADER_LEN)
				break;
			r->len = (uint32_t)r->head[1] << 24 | (uint32_t)r->head[2] << 16 | (uint32_t)r->head[3] << 8 |
			         (uint32_t)r->head[4];
			/* Refused on the head, before a byte of the payload is held. */
			if (r->head[0] & AAS_CONNECT_FLAG_COMPRESSED)
				*why = "a compressed message (no compression was offered)";
			else if (r->head[0] & ~(AAS_CONNECT_FLAG_COMPRESSED | AAS_CONNECT_FLAG_END))
				*why = "unknown envelope flags";
			else if (r->len > max)
				*why = "a message over the size limit";
			if (*why) {
				r->failed = true;
				return -1;
			}
			if (!(r->payload = malloc((size_t)r->len + 1))) {
				*why = "out of memory";
				r->failed = true;
				return -1;
			}
			r->have = 0;
		}
		size_t n = r->len - r->have;
		if (n > len)
			n = len;
		memcpy(r->payload + r->have, p, n);
		r->have += n;
		p += n;
		len -= n;
		if (r->have < r->len)
			break;
		r->payload[r->len] = '\0';
		rc = cb(ud, r->head[0], r->payload, r->len);
		free(r->payload);
		r->payload = NULL;
		r->head_have = 0;
		r->have = 0;
		if (rc)
			return rc;
	}
	return 0;
}

bool aas_connect_reader_idle(const struct aas_connect_reader *r)
{
	return r->head_have == 0 && !r->failed;
}

void aas_connect_reader_free(struct aas_connect_reader *r)
{
	free(r->payload);
	r->payload = NULL;
	r->head_have = 0;
	r->have = 0;
}

unsigned char *aas_connect_frame(unsigned int flags, const void *payload, size_t len, size_t *out_len)
{
	unsigned char *f;

	*out_len = 0;
	if (len > UINT32_MAX || !(f = malloc(AAS_CONNECT_HEADER_LEN + len)))
		return NULL;
	f[0] = (unsigned char)flags;
	f[1] = (unsigned char)(len >> 24);
	f[2] = (unsigned char)(len >> 16);
	f[3] = (unsigned char)(len >> 8);
	f[4] = (unsigned char)len;
	if (len)
		memcpy(f + AAS_CONNECT_HEADER_LEN, payload, len);
	*out_len = AAS_CONNECT_HEADER_LEN + len;
	return f;
}

/* {"code":NAME,"message":MESSAGE}: JSON carries only UTF-8, so a message that is not becomes '?'s. */
static json_t *error_object(int code, const char *message)
{
	const char *name = aas_connect_code_name(code);
	json_t *o;
	char *copy;

	if (!name)
		name = "unknown";
	if (!message)
		message = "";
	if ((o = json_pack("{s:s,s:s}", "code", name, "message", message)))
		return o;
	if (!(copy = strdup(message)))
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	o = json_pack("{s:s,s:s}", "code", name, "message", copy);
	free(copy);
	return o;
}

char *aas_connect_end_payload(int code, const char *message)
{
	json_t *o, *err;
	char *text;

	if (code == AAS_CONNECT_OK)
		return strdup("{}");
	if (!(err = error_object(code, message)))
		return NULL;
	if (!(o = json_pack("{s:o}", "error", err)))
		return NULL;
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	return text;
}

char *aas_connect_error_body(int code, const char *message)
{
	json_t *o = error_object(code, message);
	char *text;

	if (!o)
		return NULL;
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	return text;
}

/* ---- request messages ---- */

int aas_connect_json(json_t **out, const char *text, size_t len, size_t max, char *why, size_t whysize)
{
	json_error_t err;
	char bounds[160];

	*out = NULL;
	if (whysize)
		why[0] = '\0';
	if (len > max) {
		snprintf(why, whysize, "the message is %zu bytes, over the limit of %zu", len, max);
		return AAS_CONNECT_RESOURCE_EXHAUSTED;
	}
	if (len == 0) {
		/* An empty unary body is the empty message, as connect-go reads it. */
		*out = json_object();
		return *out ? AAS_CONNECT_OK : AAS_CONNECT_RESOURCE_EXHAUSTED;
	}
	/* The tree jansson would build (20 to 40 times the text) is bounded before it is built. */
	if (!aas_json_bounds(text, len, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, bounds, sizeof(bounds))) {
		snprintf(why, whysize, "the message is refused: %s", bounds);
		return AAS_CONNECT_RESOURCE_EXHAUSTED;
	}
	if (!(*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err))) {
		snprintf(why, whysize, "the message is not valid JSON: %s (at byte %d)", err.text, err.position);
		return AAS_CONNECT_INVALID_ARGUMENT;
	}
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		snprintf(why, whysize, "the message must be a JSON object");
		return AAS_CONNECT_INVALID_ARGUMENT;
	}
	return AAS_CONNECT_OK;
}

struct unwrap {
	unsigned int frames;
	unsigned int flags;
	const char *payload;
	size_t len;
	char *copy;
};

static int unwrap_frame(void *ud, unsigned int flags, const char *payload, size_t len)
{
	struct unwrap *u = ud;

	if (u->frames++ > 0)
		return 1;
	u->flags = flags;
	u->len = len;
	/* The reader frees the payload after this call: keep a copy. */
	if (!(u->copy = malloc(len + 1)))
		return 2;
	memcpy(u->copy, payload, len);
	u->copy[len] = '\0';
	return 0;
}

int aas_connect_unwrap(json_t **out, const char *body, size_t len, size_t max, char *why, size_t whysize)
{
	struct aas_connect_reader rd = { .max = max };
	struct unwrap u = { 0 };
	const char *reason;
	int rc;

	*out = NULL;
	rc = aas_connect_read(&rd, body, len, unwrap_frame, &u, &reason);
	if (rc < 0) {
		snprintf(why, whysize, "the request's envelope is refused: %s", reason);
		rc = strcmp(reason, "a message over the size limit") == 0 ? AAS_CONNECT_RESOURCE_EXHAUSTED
		                                                          : AAS_CONNECT_INVALID_ARGUMENT;
		goto out;
	}
	if (rc == 2) {
		snprintf(why, whysize, "out of memory");
		rc = AAS_CONNECT_RESOURCE_EXHAUSTED;
		goto out;
	}
	if (rc == 1 || u.frames != 1 || !aas_connect_reader_idle(&rd)) {
		snprintf(why, whysize, "a server-streaming request is exactly one envelope (%s)",
		         u.frames == 0 ? "none came whole" : "more came");
		rc = AAS_CONNECT_INVALID_ARGUMENT;
		goto out;
	}
	if (u.flags & AAS_CONNECT_FLAG_END) {
		snprintf(why, whysize, "the request's envelope is an end-stream frame");
		rc = AAS_CONNECT_INVALID_ARGUMENT;
		goto out;
	}
	rc = aas_connect_json(out, u.copy, u.len, max, why, whysize);
out:
	aas_connect_reader_free(&rd);
	free(u.copy);
	return rc;
}
