/*
 * The E2B face's pure parts (server/e2b): the Connect envelope reader and
 * writer at and past their bounds, codes and statuses (every libsaas status
 * has its Connect code), request messages, and the spellings: keys, ids,
 * tokens, templates, query unescaping.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "e2b/connect.h"
#include "e2b/internal.h"
#include "multipart.h"

/* ---- codes ---- */

static void test_codes(void **state)
{
	(void)state;
	for (int c = 0; c <= AAS_CONNECT_CODE_MAX; c++) {
		const char *name = aas_connect_code_name(c);
		assert_non_null(name);
		assert_int_equal(aas_connect_code_from_name(name), c);
	}
	assert_null(aas_connect_code_name(-1));
	assert_null(aas_connect_code_name(AAS_CONNECT_CODE_MAX + 1));
	assert_int_equal(aas_connect_code_from_name("nope"), -1);
	assert_int_equal(aas_connect_code_from_name(NULL), -1);
	/* Connect's table (the SDK maps these back to its classes). */
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_INVALID_ARGUMENT), 400);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_NOT_FOUND), 404);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_UNAUTHENTICATED), 401);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_RESOURCE_EXHAUSTED), 429);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_DEADLINE_EXCEEDED), 504);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_UNIMPLEMENTED), 501);
	assert_int_equal(aas_connect_http_status(AAS_CONNECT_CANCELED), 499);
	assert_int_equal(aas_connect_http_status(99), 500);
	assert_int_equal(aas_connect_code_from_http(401), AAS_CONNECT_UNAUTHENTICATED);
	assert_int_equal(aas_connect_code_from_http(502), AAS_CONNECT_UNAVAILABLE);
	assert_int_equal(aas_connect_code_from_http(404), AAS_CONNECT_UNIMPLEMENTED);
	assert_int_equal(aas_connect_code_from_http(418), AAS_CONNECT_UNKNOWN);
}

/* Every status of SAAS_STATUS_LIST has a Connect code; OK alone is OK, and the SDK-visible ones are what docs/e2b.md says. */
static void test_codes_from_saas(void **state)
{
#define ROW(code, name, text, http) { code, name },
	static const struct {
		int code;
		const char *name;
	} rows[] = { SAAS_STATUS_LIST(ROW) };
#undef ROW
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int c = aas_connect_code_from_saas(rows[i].code);
		assert_true(c >= 0 && c <= AAS_CONNECT_CODE_MAX);
		if (rows[i].code == SAAS_OK)
			assert_int_equal(c, AAS_CONNECT_OK);
		else
			assert_int_not_equal(c, AAS_CONNECT_OK);
	}
	assert_int_equal(aas_connect_code_from_saas(SAAS_ENOTFOUND), AAS_CONNECT_NOT_FOUND);
	assert_int_equal(aas_connect_code_from_saas(SAAS_EINVAL), AAS_CONNECT_INVALID_ARGUMENT);
	assert_int_equal(aas_connect_code_from_saas(SAAS_EAUTH), AAS_CONNECT_UNAUTHENTICATED);
	assert_int_equal(aas_connect_code_from_saas(SAAS_ELIMIT), AAS_CONNECT_RESOURCE_EXHAUSTED);
	assert_int_equal(aas_connect_code_from_saas(SAAS_ETIMEOUT), AAS_CONNECT_DEADLINE_EXCEEDED);
	/* A code newer than this build: unknown, never OK. */
	assert_int_equal(aas_connect_code_from_saas(-SAAS_STATUS_COUNT), AAS_CONNECT_UNKNOWN);
	assert_int_equal(aas_connect_code_from_saas(1), AAS_CONNECT_UNKNOWN);
}

/* ---- envelopes ---- */

struct frames {
	unsigned int n;
	unsigned int flags[8];
	char payload[8][64];
	size_t len[8];
	int stop_at;       /* return nonzero at this frame (1-based), 0: never */
};

static int on_frame(void *ud, unsigned int flags, const char *payload, size_t len)
{
	struct frames *f = ud;

	assert_true(f->n < 8);
	assert_int_equal(payload[len], '\0'); /* the JSON parser may take it as a string */
	f->flags[f->n] = flags;
	f->len[f->n] = len;
	memcpy(f->payload[f->n], payload, len < 63 ? len : 63);
	f->n++;
	return f->stop_at && (int)f->n == f->stop_at ? 7 : 0;
}

static size_t put(unsigned char *buf, unsigned int flags, const char *payload)
{
	size_t len, n = strlen(payload);
	unsigned char *f = aas_connect_frame(flags, payload, n, &len);

	assert_non_null(f);
	assert_int_equal(len, n + 5);
	memcpy(buf, f, len);
	free(f);
	return len;
}

static void test_envelope_roundtrip(void **state)
{
	unsigned char buf[256];
	size_t n = 0;
	const char *why;

	(void)state;
	n += put(buf + n, 0, "{\"a\":1}");
	n += put(buf + n, 0, "");
	n += put(buf + n, AAS_CONNECT_FLAG_END, "{}");
	assert_int_equal(buf[0], 0);
	assert_int_equal(buf[4], 7); /* big-endian length */
	/* Whole, and then one byte at a time: the same frames. */
	for (int pass = 0; pass < 2; pass++) {
		struct aas_connect_reader r = { 0 };
		struct frames f = { 0 };
		if (pass == 0) {
			assert_int_equal(aas_connect_read(&r, buf, n, on_frame, &f, &why), 0);
		} else {
			for (size_t i = 0; i < n; i++)
				assert_int_equal(aas_connect_read(&r, buf + i, 1, on_frame, &f, &why), 0);
		}
		assert_int_equal(f.n, 3);
		assert_string_equal(f.payload[0], "{\"a\":1}");
		assert_int_equal(f.len[1], 0);
		assert_int_equal(f.flags[2], AAS_CONNECT_FLAG_END);
		assert_true(aas_connect_reader_idle(&r));
		aas_connect_reader_free(&r);
	}
}

static void test_envelope_bounds(void **state)
{
	unsigned char head[5] = { 0, 0, 0, 0, 0 };
	struct aas_connect_reader r = { .max = 16 };
	struct frames f = { 0 };
	const char *why;
	char payload[17];

	(void)state;
	/* Exactly max is taken. */
	memset(payload, 'x', sizeof(payload));
	head[4] = 16;
	assert_int_equal(aas_connect_read(&r, head, 5, on_frame, &f, &why), 0);
	assert_false(aas_connect_reader_idle(&r));
	assert_int_equal(aas_connect_read(&r, payload, 16, on_frame, &f, &why), 0);
	assert_int_equal(f.n, 1);
	/* max + 1 is refused on the head, before any payload is held; the reader stays refused. */
	head[4] = 17;
	assert_int_equal(aas_connect_read(&r, head, 5, on_frame, &f, &why), -1);
	assert_non_null(why);
	assert_null(r.payload);
	assert_int_equal(aas_connect_read(&r, "x", 1, on_frame, &f, &why), -1);
	assert_false(aas_connect_reader_idle(&r));
	aas_connect_reader_free(&r);

	/* The largest length a head can say, with the default bound. */
	struct aas_connect_reader big = { 0 };
	unsigned char huge[5] = { 0, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(aas_connect_read(&big, huge, 5, on_frame, &f, &why), -1);
	aas_connect_reader_free(&big);

	/* Compressed, and unknown flags. */
	unsigned char comp[5] = { AAS_CONNECT_FLAG_COMPRESSED, 0, 0, 0, 1 };
	struct aas_connect_reader c1 = { 0 };
	assert_int_equal(aas_connect_read(&c1, comp, 5, on_frame, &f, &why), -1);
	assert_non_null(strstr(why, "compressed"));
	aas_connect_reader_free(&c1);
	unsigned char odd[5] = { 0x80, 0, 0, 0, 0 };
	struct aas_connect_reader c2 = { 0 };
	assert_int_equal(aas_connect_read(&c2, odd, 5, on_frame, &f, &why), -1);
	aas_connect_reader_free(&c2);
}

static void test_envelope_stop(void **state)
{
	unsigned char buf[64];
	size_t n = 0;
	struct aas_connect_reader r = { 0 };
	struct frames f = { .stop_at = 1 };
	const char *why;

	(void)state;
	n += put(buf + n, 0, "{}");
	n += put(buf + n, 0, "{}");
	assert_int_equal(aas_connect_read(&r, buf, n, on_frame, &f, &why), 7);
	assert_int_equal(f.n, 1);
	aas_connect_reader_free(&r);
}

static void test_end_payload(void **state)
{
	char *s;

	(void)state;
	s = aas_connect_end_payload(AAS_CONNECT_OK, NULL);
	assert_string_equal(s, "{}");
	free(s);
	s = aas_connect_end_payload(AAS_CONNECT_NOT_FOUND, "process with pid 7 not found");
	assert_string_equal(s, "{\"error\":{\"code\":\"not_found\",\"message\":\"process with pid 7 not found\"}}");
	free(s);
	/* Bytes that are not UTF-8 are not sent raw. */
	s = aas_connect_end_payload(AAS_CONNECT_INVALID_ARGUMENT, "bad \xff path");
	assert_string_equal(s, "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"bad ? path\"}}");
	free(s);
	s = aas_connect_error_body(AAS_CONNECT_UNAUTHENTICATED, "no token");
	assert_string_equal(s, "{\"code\":\"unauthenticated\",\"message\":\"no token\"}");
	free(s);
}

static void test_request_json(void **state)
{
	char why[256];
	json_t *o;
	unsigned char buf[128];
	size_t n;

	(void)state;
	assert_int_equal(aas_connect_json(&o, "", 0, 100, why, sizeof(why)), AAS_CONNECT_OK);
	assert_true(json_is_object(o) && json_object_size(o) == 0);
	json_decref(o);
	assert_int_equal(aas_connect_json(&o, "{\"path\":\"/x\"}", 13, 100, why, sizeof(why)), AAS_CONNECT_OK);
	json_decref(o);
	assert_int_equal(aas_connect_json(&o, "[1]", 3, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	assert_null(o);
	assert_int_equal(aas_connect_json(&o, "{\"a\":1,\"a\":2}", 13, 100, why, sizeof(why)),
	                 AAS_CONNECT_INVALID_ARGUMENT);
	assert_int_equal(aas_connect_json(&o, "{bad", 4, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	assert_int_equal(aas_connect_json(&o, "{}", 2, 1, why, sizeof(why)), AAS_CONNECT_RESOURCE_EXHAUSTED);
	/* Depth past the REST API's bound. */
	char deep[400];
	memset(deep, '[', 200);
	memset(deep + 200, ']', 200);
	deep[0] = '{';
	assert_int_equal(aas_connect_json(&o, deep, 1, 1000, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	char nest[1000];
	size_t k = 0;
	nest[k++] = '{';
	nest[k++] = '"';
	nest[k++] = 'a';
	nest[k++] = '"';
	nest[k++] = ':';
	for (int i = 0; i < 100; i++)
		nest[k++] = '[';
	for (int i = 0; i < 100; i++)
		nest[k++] = ']';
	nest[k++] = '}';
	assert_int_equal(aas_connect_json(&o, nest, k, 1000, why, sizeof(why)), AAS_CONNECT_RESOURCE_EXHAUSTED);

	/* A stream's request: one envelope, exactly. */
	n = put(buf, 0, "{\"process\":{\"pid\":1}}");
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, n, 100, why, sizeof(why)), AAS_CONNECT_OK);
	assert_non_null(json_object_get(o, "process"));
	json_decref(o);
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, n - 1, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, 0, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	n += put(buf + n, 0, "{}");
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, n, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	n = put(buf, AAS_CONNECT_FLAG_END, "{}");
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, n, 100, why, sizeof(why)), AAS_CONNECT_INVALID_ARGUMENT);
	n = put(buf, 0, "{\"path\":\"/a/long/path\"}");
	assert_int_equal(aas_connect_unwrap(&o, (char *)buf, n, 8, why, sizeof(why)), AAS_CONNECT_RESOURCE_EXHAUSTED);
	assert_null(o);
}

/* ---- spellings ---- */

static void test_keys(void **state)
{
	const char *key = "aas_sk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg";
	char e2b[SAAS_KEY_E2B_LEN + 1], back[SAAS_KEY_LEN + 1];

	(void)state;
	/* 43 characters after the prefix. */
	char k43[64];
	snprintf(k43, sizeof(k43), "aas_sk_%.*s", 43, key + 7);
	assert_int_equal(saas_key_to_e2b(e2b, k43), SAAS_OK);
	assert_int_equal(strlen(e2b), SAAS_KEY_E2B_LEN);
	assert_memory_equal(e2b, "e2b_416243", 10); /* "AbC" in hex */
	/* Only lower-case hex after the prefix: what the Python SDK checks. */
	for (const char *p = e2b + 4; *p; p++)
		assert_true((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
	assert_int_equal(saas_key_from_e2b(back, e2b), SAAS_OK);
	assert_string_equal(back, k43);

	/* Not a key of that shape. */
	assert_int_equal(saas_key_to_e2b(e2b, "aas_sk_short"), SAAS_EINVAL);
	assert_string_equal(e2b, "");
	assert_int_equal(saas_key_to_e2b(e2b, "e2b_00"), SAAS_EINVAL);
	char bad[64];
	snprintf(bad, sizeof(bad), "aas_sk_%.*s-", 42, key + 7);
	assert_int_equal(saas_key_to_e2b(e2b, bad), SAAS_EINVAL);

	/* Spellings that are not one. */
	char d[SAAS_KEY_E2B_LEN + 2];
	assert_int_equal(saas_key_to_e2b(d, k43), SAAS_OK);
	d[4] = '$'; /* not a hex digit where the high nibble is (the fuzzer's find: no shift of -1) */
	assert_int_equal(saas_key_from_e2b(back, d), SAAS_EINVAL);
	assert_int_equal(saas_key_to_e2b(d, k43), SAAS_OK);
	d[10] = 'A'; /* upper case: one spelling per key */
	assert_int_equal(saas_key_from_e2b(back, d), SAAS_EINVAL);
	assert_string_equal(back, "");
	assert_int_equal(saas_key_to_e2b(d, k43), SAAS_OK);
	d[4] = '2';
	d[5] = 'd'; /* "-", not alphanumeric */
	assert_int_equal(saas_key_from_e2b(back, d), SAAS_EINVAL);
	assert_int_equal(saas_key_to_e2b(d, k43), SAAS_OK);
	d[SAAS_KEY_E2B_LEN - 1] = '\0'; /* odd length */
	assert_int_equal(saas_key_from_e2b(back, d), SAAS_EINVAL);
	assert_int_equal(saas_key_from_e2b(back, "e2b_" "0000000000000000000000000000000000000000"), SAAS_EINVAL);
	assert_int_equal(saas_key_from_e2b(back, "aas_sk_x"), SAAS_EINVAL);
	assert_int_equal(saas_key_from_e2b(back, NULL), SAAS_EINVAL);
	assert_int_equal(saas_key_from_e2b(NULL, e2b), SAAS_EINVAL);
	assert_int_equal(saas_key_to_e2b(NULL, k43), SAAS_EINVAL);
	/* The hex of a NUL must not cut the key short. */
	char z[SAAS_KEY_E2B_LEN + 1];
	assert_int_equal(saas_key_to_e2b(z, k43), SAAS_OK);
	z[4] = '0';
	z[5] = '0';
	assert_int_equal(saas_key_from_e2b(back, z), SAAS_EINVAL);
}

static void test_ids(void **state)
{
	char id[SAAS_ID_MAX + 1], longid[SAAS_ID_MAX + 8];

	(void)state;
	assert_string_equal(aas_e2b_id_from_saas("sbx-abc234"), "abc234");
	assert_null(aas_e2b_id_from_saas("exe-abc"));
	assert_null(aas_e2b_id_from_saas("sbx-"));
	assert_null(aas_e2b_id_from_saas(NULL));
	assert_true(aas_e2b_id_to_saas(id, "abc234"));
	assert_string_equal(id, "sbx-abc234");
	assert_false(aas_e2b_id_to_saas(id, ""));
	assert_false(aas_e2b_id_to_saas(id, "sbx-abc"));
	assert_false(aas_e2b_id_to_saas(id, "ABC"));
	assert_false(aas_e2b_id_to_saas(id, "a/b"));
	assert_false(aas_e2b_id_to_saas(id, NULL));
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	assert_false(aas_e2b_id_to_saas(id, longid));
	longid[SAAS_ID_MAX - 4] = '\0';
	assert_true(aas_e2b_id_to_saas(id, longid));
	longid[SAAS_ID_MAX - 4] = 'a';
	longid[SAAS_ID_MAX - 3] = '\0';
	assert_false(aas_e2b_id_to_saas(id, longid));
}

static void test_tokens(void **state)
{
	unsigned char secret[AAS_E2B_SECRET_LEN], other[AAS_E2B_SECRET_LEN];
	char a[65], b[65], c[65], d[65];

	(void)state;
	memset(secret, 1, sizeof(secret));
	memset(other, 2, sizeof(other));
	aas_e2b_token(a, secret, AAS_E2B_TOKEN_ENVD, "sbx-aaaa");
	aas_e2b_token(b, secret, AAS_E2B_TOKEN_ENVD, "sbx-aaaa");
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), 64);
	aas_e2b_token(b, secret, AAS_E2B_TOKEN_ENVD, "sbx-aaab");
	aas_e2b_token(c, secret, AAS_E2B_TOKEN_TRAFFIC, "sbx-aaaa");
	aas_e2b_token(d, other, AAS_E2B_TOKEN_ENVD, "sbx-aaaa");
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(a, d);
	/* Fixed vectors, computed independently (Python's hmac): HMAC-SHA256(secret, label "\0" id). */
	assert_string_equal(a, "f8c2e635d34e3d27ac8780a211ea88d3c7a00044c71cd0c9297c2ba6379ad73f");
	unsigned char zero[AAS_E2B_SECRET_LEN] = { 0 };
	aas_e2b_token(d, zero, "", "");
	assert_string_equal(d, "6620b31f2924b8c01547745f41825d322336f83ebb13d723678789d554d8a3ef");
	assert_true(aas_e2b_token_equal(a, a));
	assert_false(aas_e2b_token_equal(b, a));
	assert_false(aas_e2b_token_equal("", a));
	assert_false(aas_e2b_token_equal(NULL, a));
	char shorter[65];
	memcpy(shorter, a, 64);
	shorter[63] = '\0';
	assert_false(aas_e2b_token_equal(shorter, a));
}

/* Domain mode's hosts: PORT-ID under the domain, one spelling each; the floor's reader of labels under it. */
static void test_hosts(void **state)
{
	char id[SAAS_ID_MAX + 1], label[8];
	unsigned int port;

	(void)state;
	assert_true(aas_e2b_host_parse("49983-abc123.e2b.localhost", "e2b.localhost", &port, id));
	assert_int_equal(port, 49983);
	assert_string_equal(id, "abc123");
	/* Case, a port on the host or on the domain: the same host. */
	assert_true(aas_e2b_host_parse("3000-ABC.E2B.example.com:8443", "e2b.example.com:8443", &port, id));
	assert_int_equal(port, 3000);
	assert_string_equal(id, "abc");
	assert_true(aas_e2b_host_parse("65535-a.d", "d", &port, id));
	static const char *const refused[] = {
		"0-abc.d", "03000-abc.d", "65536-abc.d", "123456-abc.d", "-abc.d", "3000abc.d", "3000-.d", "3000-a_b.d",
		"3000-a-b.d", "3000-abc.x.d", "3000-abc.dd", "3000-abc.d.", "d", ".d", "3000-abc", "",
		"3000-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.d",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_false(aas_e2b_host_parse(refused[i], "d", &port, id));
		assert_int_equal(port, 0);
		assert_string_equal(id, "");
	}
	assert_false(aas_e2b_host_parse(NULL, "d", &port, id));
	/* The floor's reader: one label, lowercased; one too long for the room is the domain's still, and "". */
	assert_true(aas_host_label(label, sizeof(label), "API.d:80", "d"));
	assert_string_equal(label, "api");
	assert_true(aas_host_label(label, sizeof(label), "longerthan7.d", "d"));
	assert_string_equal(label, "");
	assert_false(aas_host_label(label, sizeof(label), "a.b.d", "d"));
	assert_false(aas_host_label(label, sizeof(label), "d", "d"));
	assert_false(aas_host_label(label, sizeof(label), "a.d", ""));
}

/* E2B's file URL signatures: fixed vectors computed independently (Python's hashlib and base64). */
static void test_signatures(void **state)
{
	char sig[AAS_E2B_SIGNATURE_SIZE];

	(void)state;
	aas_e2b_signature(sig, "/home/user/a.txt", "read", "", "acc-1.abc", NULL);
	assert_string_equal(sig, "v1_nzpPj4qGlDrA7MUliJ+2EqmcuURVVp+ciqVW9PV9fjc");
	aas_e2b_signature(sig, "/workspace/doc one.txt", "write", "user", "tok", "1700000000");
	assert_string_equal(sig, "v1_JJ49TV6WobIr6HnJCAOrnHyEwnoE6m5CuylG0717D8s");
	aas_e2b_signature(sig, "", "read", "", "", NULL);
	assert_string_equal(sig, "v1_C7+NupbDAIwikcNXhNkhkXQo7jVzhmElKieFp0oChf8");
	assert_int_equal(strlen(sig), AAS_E2B_SIGNATURE_SIZE - 1);
}

static void test_templates(void **state)
{
	struct aas_e2b_templates t;
	const struct aas_e2b_template *x;
	char why[256];

	(void)state;
	assert_int_equal(aas_e2b_templates_parse(&t, AAS_E2B_TEMPLATES_DEFAULT, why, sizeof(why)), 0);
	assert_int_equal(t.count, 2);
	x = aas_e2b_template_find(&t, "base");
	assert_non_null(x);
	assert_string_equal(x->size, "small");
	assert_null(x->image);
	/* What @e2b/code-interpreter's Sandbox.create() asks. */
	x = aas_e2b_template_find(&t, "code-interpreter-v1");
	assert_non_null(x);
	assert_string_equal(x->size, "small");
	assert_null(x->image);
	assert_null(aas_e2b_template_find(&t, "other"));
	aas_e2b_templates_free(&t);

	assert_int_equal(aas_e2b_templates_parse(&t, "base=small,code-interpreter-v1=medium:python", why, sizeof(why)), 0);
	x = aas_e2b_template_find(&t, "code-interpreter-v1");
	assert_string_equal(x->size, "medium");
	assert_string_equal(x->image, "python");
	aas_e2b_templates_free(&t);

	static const char *const bad[] = { "", "base", "base=", "base=small:", "Base=small", "a=b,a=c", "=small",
		                           "a b=small", ",", "base=small,,x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(aas_e2b_templates_parse(&t, bad[i], why, sizeof(why)), -1);
		assert_true(why[0] != '\0');
		aas_e2b_templates_free(&t);
	}
	assert_int_equal(aas_e2b_templates_parse(&t, NULL, why, sizeof(why)), -1);
	aas_e2b_templates_free(&t);

	/* At the bound, and past it. */
	char spec[AAS_E2B_TEMPLATES_MAX * 16 + 32] = "";
	for (int i = 0; i < AAS_E2B_TEMPLATES_MAX; i++)
		snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "%st%d=small", i ? "," : "", i);
	assert_int_equal(aas_e2b_templates_parse(&t, spec, why, sizeof(why)), 0);
	assert_int_equal(t.count, AAS_E2B_TEMPLATES_MAX);
	aas_e2b_templates_free(&t);
	strcat(spec, ",one-more=small");
	assert_int_equal(aas_e2b_templates_parse(&t, spec, why, sizeof(why)), -1);
	aas_e2b_templates_free(&t);
}

static void test_unescape(void **state)
{
	char out[64];
	size_t n;

	(void)state;
	/* The metadata filter's second decode, as the SDK sends {'a b':'c&d=e'} (docs/e2b.md). */
	const char *once = "a%2520b=c%2526d%253De";
	assert_true(aas_e2b_unescape(out, &n, once, strlen(once)));
	assert_string_equal(out, "a%20b=c%26d%3De");
	assert_true(aas_e2b_unescape(out, &n, "a+b%41", 6));
	assert_string_equal(out, "a bA");
	assert_int_equal(n, 4);
	assert_false(aas_e2b_unescape(out, &n, "%", 1));
	assert_false(aas_e2b_unescape(out, &n, "%4", 2));
	assert_false(aas_e2b_unescape(out, &n, "%zz", 3));
	assert_false(aas_e2b_unescape(out, &n, "a%00", 4));
	assert_true(aas_e2b_unescape(out, &n, "", 0));
	assert_string_equal(out, "");
}

/* ---- multipart ---- */

/* getMetrics' start and end (unix seconds) and /sandboxes/metrics' ids, at their bounds. */
static void test_metrics_params(void **state)
{
	const char *p;
	int64_t s = -1;

	(void)state;
	assert_true(aas_e2b_seconds_parse("1733390000", &s) && s == 1733390000);
	assert_true(aas_e2b_seconds_parse("0", &s) && s == 0);
	assert_true(aas_e2b_seconds_parse("999999999999", &s) && s == 999999999999LL); /* 12 digits: the most */
	assert_false(aas_e2b_seconds_parse("1000000000000", &s));                     /* 13 */
	assert_false(aas_e2b_seconds_parse("", &s));
	assert_false(aas_e2b_seconds_parse("-1", &s));
	assert_false(aas_e2b_seconds_parse("12 ", &s));
	assert_false(aas_e2b_seconds_parse("1.5", &s));
	p = "a,bc,,d";
	assert_int_equal(aas_e2b_list_next(&p), 1);
	assert_int_equal(aas_e2b_list_next(&p), 2);
	assert_int_equal(aas_e2b_list_next(&p), 0);
	assert_int_equal(aas_e2b_list_next(&p), 1);
	assert_string_equal(p, "");
}

static void test_multipart_boundary(void **state)
{
	char b[AAS_MULTIPART_BOUNDARY_MAX + 1], long_ct[200];

	(void)state;
	assert_true(aas_multipart_boundary(b, "multipart/form-data; boundary=----formdata-undici-0123"));
	assert_string_equal(b, "----formdata-undici-0123");
	assert_true(aas_multipart_boundary(b, "Multipart/Form-Data; charset=x; boundary=\"a b\""));
	assert_string_equal(b, "a b");
	assert_false(aas_multipart_boundary(b, "application/json"));
	assert_false(aas_multipart_boundary(b, "multipart/form-data"));
	assert_false(aas_multipart_boundary(b, "multipart/form-data; boundary="));
	assert_false(aas_multipart_boundary(b, "multipart/form-data; boundary=\"open"));
	assert_false(aas_multipart_boundary(b, "multipart/form-data; boundary=a<b"));
	assert_false(aas_multipart_boundary(b, NULL));
	/* At the bound (70), and past it. */
	snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%0*d", 70, 0);
	assert_true(aas_multipart_boundary(b, long_ct));
	snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%0*d", 71, 0);
	assert_false(aas_multipart_boundary(b, long_ct));
}

/* What a multipart reader gave its sink, as text: "B name|filename;" at a head, the bytes, "E;" at a part's end. */
struct mp_log {
	char text[4096];
	size_t len;
	unsigned int stop_at, calls; /* stop (nonzero) at this call, counted from 1; 0: never */
};

static int mp_put(struct mp_log *l, const char *s, size_t n)
{
	assert_true(l->len + n < sizeof(l->text));
	memcpy(l->text + l->len, s, n);
	l->len += n;
	l->text[l->len] = '\0';
	return l->stop_at && ++l->calls == l->stop_at;
}

static int mp_begin(void *ud, const struct aas_multipart_part *p)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "B %.*s|%.*s;", (int)p->name_len, p->name ? p->name : "",
	                 (int)p->filename_len, p->filename ? p->filename : "");
	return mp_put(ud, buf, (size_t)n);
}

static int mp_data(void *ud, const char *d, size_t n)
{
	assert_true(n > 0);
	return mp_put(ud, d, n);
}

static int mp_end(void *ud)
{
	return mp_put(ud, "E;", 2);
}

static const struct aas_multipart_sink mp_sink = { mp_begin, mp_data, mp_end };

/* body read in pieces of `piece` bytes (0: whole), then its end: the verdict, the log in l. */
static int mp_read(struct mp_log *l, const char *body, size_t len, size_t piece, size_t max, const char **why)
{
	struct aas_multipart *mp = malloc(sizeof(*mp));
	int rc = AAS_MULTIPART_MORE;

	assert_non_null(mp);
	l->len = 0;
	l->text[0] = '\0';
	l->calls = 0;
	assert_true(aas_multipart_init(mp, "XB", max, &mp_sink, l));
	for (size_t off = 0; off < len && rc == AAS_MULTIPART_MORE;) {
		size_t n = piece && len - off > piece ? piece : len - off;
		/* Each piece its own copy, freed at once: nothing of it may be read later (ASan). */
		char *copy = malloc(n);
		memcpy(copy, body + off, n);
		rc = aas_multipart_feed(mp, copy, n);
		free(copy);
		off += n;
	}
	if (rc == AAS_MULTIPART_MORE)
		rc = aas_multipart_finish(mp);
	*why = rc == AAS_MULTIPART_FAILED ? mp->why : NULL;
	free(mp);
	return rc;
}

static void test_multipart_parse(void **state)
{
	static const char body[] = "--XB\r\n"
	                           "Content-Disposition: form-data; name=\"file\"; filename=\"/w/a%22b\"\r\n"
	                           "Content-Type: application/octet-stream\r\n\r\n"
	                           "one\r\n--XBnot\r\n--XB-x\r\r\n\r"
	                           "\r\n--XB\r\n"
	                           "Content-Disposition: form-data; name=\"file\"; filename=\"rel/m2\"\r\n\r\n"
	                           "\r\n"
	                           "--XB\r\n"
	                           "Content-Disposition: form-data; name=\"other\"\r\n\r\n"
	                           "x\r\n"
	                           "--XB--\r\nthe epilogue, ignored";
	static const char want[] = "B file|/w/a%22b;one\r\n--XBnot\r\n--XB-x\r\r\n\rE;B file|rel/m2;E;B other|;xE;";
	struct aas_multipart mp;
	struct mp_log l = { .stop_at = 0 };
	const char *why;
	char name[64];

	(void)state;
	/* Whole, and cut in pieces of every size: the same parts, the same bytes. */
	for (size_t piece = 0; piece < sizeof(body); piece++) {
		assert_int_equal(mp_read(&l, body, sizeof(body) - 1, piece, 4, &why), AAS_MULTIPART_DONE);
		assert_string_equal(l.text, want);
	}
	assert_true(aas_multipart_filename(name, "/w/a%22b", 8));
	assert_string_equal(name, "/w/a\"b");
	/* Too many parts for the room given: refused at the third's head, the two before given. */
	assert_int_equal(mp_read(&l, body, sizeof(body) - 1, 0, 2, &why), AAS_MULTIPART_FAILED);
	assert_string_equal(why, "too many parts");
	/* Cut short anywhere before the closing "--": refused, whatever the pieces. */
	for (size_t cut = 0; cut < (size_t)(strstr(body, "--XB--") - body) + 5; cut++)
		for (size_t piece = 0; piece < 8; piece++)
			assert_int_equal(mp_read(&l, body, cut, piece, 4, &why), AAS_MULTIPART_FAILED);
	/* The sink stops the reader; it stays stopped. */
	l.stop_at = 2;
	assert_int_equal(mp_read(&l, body, sizeof(body) - 1, 3, 4, &why), AAS_MULTIPART_STOPPED);
	l.stop_at = 0;
	/* A preamble is skipped; a first delimiter followed by neither CRLF nor "--" is refused. */
	assert_int_equal(mp_read(&l, "junk\r\n--XB\r\n\r\nd\r\n--XB--", 23, 1, 4, &why), AAS_MULTIPART_DONE);
	assert_string_equal(l.text, "B |;dE;");
	assert_int_equal(mp_read(&l, "--XBx\r\n", 7, 0, 4, &why), AAS_MULTIPART_FAILED);
	assert_string_equal(why, "a delimiter not followed by CRLF or \"--\"");
	assert_int_equal(mp_read(&l, "--XB--", 6, 0, 4, &why), AAS_MULTIPART_DONE);
	assert_string_equal(l.text, "");
	assert_int_equal(mp_read(&l, "--XB\r\nno colon\r\n\r\nx\r\n--XB--", 27, 0, 4, &why), AAS_MULTIPART_FAILED);
	/* Bounds: a head of 8 KiB at most, 8 KiB of preamble at most. */
	{
		size_t n = AAS_MULTIPART_HEAD_MAX + 64;
		char *big = malloc(n + 64);
		int h = snprintf(big, 64, "--XB\r\nX-A: ");
		memset(big + h, 'a', n - (size_t)h);
		/* At the bound: the head with its CRLF CRLF is 8 KiB. */
		memcpy(big + 6 + AAS_MULTIPART_HEAD_MAX - 4, "\r\n\r\n", 4);
		memcpy(big + 6 + AAS_MULTIPART_HEAD_MAX, "\r\n--XB--", 8);
		assert_int_equal(mp_read(&l, big, 6 + AAS_MULTIPART_HEAD_MAX + 8, 1000, 4, &why), AAS_MULTIPART_DONE);
		/* One byte past it. */
		memset(big + h, 'a', n - (size_t)h);
		memcpy(big + 6 + AAS_MULTIPART_HEAD_MAX - 3, "\r\n\r\n", 4);
		memcpy(big + 6 + AAS_MULTIPART_HEAD_MAX + 1, "\r\n--XB--", 8);
		assert_int_equal(mp_read(&l, big, 6 + AAS_MULTIPART_HEAD_MAX + 9, 1000, 4, &why), AAS_MULTIPART_FAILED);
		assert_string_equal(why, "a part's head has no end (or is over 8 KiB)");
		memset(big, 'p', n);
		assert_int_equal(mp_read(&l, big, n, 0, 4, &why), AAS_MULTIPART_FAILED);
		assert_string_equal(why, "no boundary in the body's first 8 KiB");
		free(big);
	}
	/* A boundary RFC 2046 does not allow is refused by init. */
	assert_false(aas_multipart_init(&mp, "a\rb", 4, &mp_sink, &l));
	assert_false(aas_multipart_init(&mp, "", 4, &mp_sink, &l));
	assert_false(aas_multipart_filename(name, "a%0Ab", 5));
	assert_false(aas_multipart_filename(name, "a\tb", 3));
	assert_true(aas_multipart_filename(name, "100%", 4));
	assert_string_equal(name, "100%");
}

/* A watcher's output (watch.c): what the parser makes of it, line by line. */
struct seen {
	char log[8192];
	unsigned int stop_at, n;
};

static int on_line(void *ud, int kind, const char *type, const char *name)
{
	struct seen *s = ud;
	size_t k = strlen(s->log);

	snprintf(s->log + k, sizeof(s->log) - k, "%s%s%s%s|", kind == AAS_E2B_WATCH_STARTED ? "start" : kind ==
	         AAS_E2B_WATCH_FAILED ? "failed " : "", type ? type : "", type ? " " : "", name ? name : "");
	return ++s->n == s->stop_at;
}

static void test_watch_parse(void **state)
{
	struct aas_e2b_watch_parser *p = calloc(1, sizeof(*p));
	struct seen s = { "", 0, 0 };
	static const char out[] = "S\nC 612e747874\nW 612e747874\nR 7375622f78\nM 79\nA 7a\n"
	                          "C ff\nC 6100\nC c3a9\nE notfound\nC 61";
	char why[128], *line;

	(void)state;
	assert_non_null(p);
	/* In pieces of one byte: the same as whole; the last line waits for its newline. */
	for (size_t i = 0; i < sizeof(out) - 1; i++)
		assert_int_equal(aas_e2b_watch_feed(p, out + i, 1, on_line, &s, why, sizeof(why)), 0);
	assert_string_equal(s.log, "start|EVENT_TYPE_CREATE a.txt|EVENT_TYPE_WRITE a.txt|EVENT_TYPE_REMOVE sub/x|"
	                           "EVENT_TYPE_RENAME y|EVENT_TYPE_CHMOD z|EVENT_TYPE_CREATE \xc3\xa9|failed notfound|");
	assert_int_equal(p->len, 4);
	/* A callback's stop is returned. */
	memset(p, 0, sizeof(*p));
	s = (struct seen){ "", 2, 0 };
	assert_int_equal(aas_e2b_watch_feed(p, "S\nC 61\nC 62\n", 13, on_line, &s, why, sizeof(why)), 1);
	/* What is not a watcher's line ends it. */
	memset(p, 0, sizeof(*p));
	assert_int_equal(aas_e2b_watch_feed(p, "X 61\n", 5, on_line, &s, why, sizeof(why)), -1);
	memset(p, 0, sizeof(*p));
	assert_int_equal(aas_e2b_watch_feed(p, "C 6\n", 4, on_line, &s, why, sizeof(why)), -1);
	memset(p, 0, sizeof(*p));
	assert_int_equal(aas_e2b_watch_feed(p, "C 6g\n", 5, on_line, &s, why, sizeof(why)), -1);
	memset(p, 0, sizeof(*p));
	assert_int_equal(aas_e2b_watch_feed(p, "E NotALowerWord\n", 16, on_line, &s, why, sizeof(why)), -1);
	/* The bound: a line of AAS_E2B_WATCH_LINE_MAX bytes is taken, one more is not. */
	line = malloc(AAS_E2B_WATCH_LINE_MAX + 2);
	assert_non_null(line);
	memset(line, '6', AAS_E2B_WATCH_LINE_MAX + 1);
	line[0] = 'C';
	line[1] = ' ';
	line[AAS_E2B_WATCH_LINE_MAX] = '\n';
	memset(p, 0, sizeof(*p));
	s = (struct seen){ "", 0, 0 };
	assert_int_equal(aas_e2b_watch_feed(p, line, AAS_E2B_WATCH_LINE_MAX + 1, on_line, &s, why, sizeof(why)), 0);
	assert_int_equal(strlen(s.log), strlen("EVENT_TYPE_CREATE ") + 4096 + 1);
	line[AAS_E2B_WATCH_LINE_MAX] = '6';
	line[AAS_E2B_WATCH_LINE_MAX + 1] = '\n';
	memset(p, 0, sizeof(*p));
	assert_int_equal(aas_e2b_watch_feed(p, line, AAS_E2B_WATCH_LINE_MAX + 2, on_line, &s, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "over"));
	free(line);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codes),
		cmocka_unit_test(test_codes_from_saas),
		cmocka_unit_test(test_envelope_roundtrip),
		cmocka_unit_test(test_envelope_bounds),
		cmocka_unit_test(test_envelope_stop),
		cmocka_unit_test(test_end_payload),
		cmocka_unit_test(test_request_json),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_signatures),
		cmocka_unit_test(test_templates),
		cmocka_unit_test(test_unescape),
		cmocka_unit_test(test_metrics_params),
		cmocka_unit_test(test_multipart_boundary),
		cmocka_unit_test(test_multipart_parse),
		cmocka_unit_test(test_watch_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
