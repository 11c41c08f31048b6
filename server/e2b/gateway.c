/*
 * The E2B face's front door: its two prefixes, its replies and its state.
 *
 * The face has one route of the server's table per prefix (aas_e2b_route),
 * one for /files at the root (signed URLs) and, in domain mode, one per kind
 * of host (api.DOMAIN, 49983-ID.DOMAIN; urls.c has the other ports):
 * http.c hands it the headers (to authenticate before the body), the body
 * (kept whole, bounded per call) and the end, and the face routes within
 * and authenticates itself, because E2B's SDKs read errors in E2B's shape
 * ({"code":404,"message":...}), not the REST API's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

struct aas_e2b aas_e2b_state;

/* ---- tokens ---- */

/* A sandbox's token under one label: "ACCOUNT.HEX", HEX the HMAC of the pair (internal.h). */
static void sandbox_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *label, const char *sandbox_id,
                          const char *account_id)
{
	char subject[2 * SAAS_ID_MAX + 2], mac[65];

	/* '/' is in neither id: the subject is one pair only. */
	snprintf(subject, sizeof(subject), "%s/%s", sandbox_id, account_id);
	aas_e2b_token(mac, aas_e2b_state.secret, label, subject);
	snprintf(out, AAS_E2B_ENVD_TOKEN_SIZE, "%s.%s", account_id, mac);
}

static bool sandbox_token_check(const char *token, const char *label, const char *sandbox_id,
                                char account[SAAS_ID_MAX + 1])
{
	char expected[AAS_E2B_ENVD_TOKEN_SIZE];
	const char *dot = token ? strrchr(token, '.') : NULL;
	size_t n = dot ? (size_t)(dot - token) : 0;

	account[0] = '\0';
	if (!dot || n == 0 || n > SAAS_ID_MAX || strcspn(token, "/") < n)
		return false;
	memcpy(account, token, n);
	account[n] = '\0';
	sandbox_token(expected, label, sandbox_id, account);
	if (!aas_e2b_token_equal(token, expected)) {
		account[0] = '\0';
		return false;
	}
	return true;
}

void aas_e2b_envd_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *sandbox_id, const char *account_id)
{
	sandbox_token(out, AAS_E2B_TOKEN_ENVD, sandbox_id, account_id);
}

bool aas_e2b_envd_token_check(const char *token, const char *sandbox_id, char account[SAAS_ID_MAX + 1])
{
	return sandbox_token_check(token, AAS_E2B_TOKEN_ENVD, sandbox_id, account);
}

void aas_e2b_traffic_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *sandbox_id, const char *account_id)
{
	sandbox_token(out, AAS_E2B_TOKEN_TRAFFIC, sandbox_id, account_id);
}

bool aas_e2b_traffic_token_check(const char *token, const char *sandbox_id, char account[SAAS_ID_MAX + 1])
{
	return sandbox_token_check(token, AAS_E2B_TOKEN_TRAFFIC, sandbox_id, account);
}

/* ---- replies ---- */

void aas_e2b_json(struct aas_reply *out, unsigned int status, json_t *body)
{
	if (!body) {
		out->status = status;
		out->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		if (out->response)
			aas_reply_common_headers(out->response);
		return;
	}
	aas_reply_json(out, status, body);
}

static void error_text(struct aas_reply *out, unsigned int status, char *msg)
{
	json_t *body = json_pack("{s:i,s:s}", "code", (int)status, "message", msg);

	if (!body) {
		/* A client's bytes echoed in msg that are not UTF-8, which JSON cannot carry. */
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		body = json_pack("{s:i,s:s}", "code", (int)status, "message", msg);
	}
	aas_reply_json(out, status, body);
}

void aas_e2b_error(struct aas_reply *out, unsigned int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	error_text(out, status, msg);
}

long long aas_e2b_retry_after_s(int rc)
{
	const saas_error *e = saas_error_last();
	int64_t ms = e->code == rc ? e->retry_after_ms : 0;

	/* Whole seconds, rounded up: the JS SDK reads integer seconds only. A limit always says (at least 1). */
	if (rc == SAAS_ELIMIT)
		return ms > 0 ? (long long)((ms + 999) / 1000) : 1LL;
	return rc == SAAS_EBUSY && ms > 0 ? (long long)((ms + 999) / 1000) : 0;
}

void aas_e2b_retry_after(struct aas_reply *out, long long secs)
{
	char value[24];

	if (!out->response || secs <= 0)
		return;
	snprintf(value, sizeof(value), "%lld", secs);
	MHD_add_response_header(out->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
}

void aas_e2b_error_saas(struct aas_reply *out, int rc, const char *where)
{
	long long secs = aas_e2b_retry_after_s(rc);
	char msg[1024];
	unsigned int status;

	/*
	 * A wrong state is E2B's 409 (pause of a paused sandbox: the SDK's pause() then says false).
	 * Busy stays 503, E2B's own for no room now: the JS SDK's ServiceBusyError (docs/e2b.md).
	 */
	status = rc == SAAS_ESTATE ? 409 : (unsigned int)saas_error_http_status(rc);
	snprintf(msg, sizeof(msg), "%s", aas_tenant_message(rc, where));
	/* The SDK's error shows the message, not the header: a busy one says when there too. */
	if (rc == SAAS_EBUSY && secs > 0)
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "; try again in %lld s", secs);
	error_text(out, status, msg);
	aas_e2b_retry_after(out, secs);
}

bool aas_e2b_body(struct aas_req *r, struct aas_reply *out, json_t **obj)
{
	char why[256];
	int code;

	if (r->too_big || r->body_len > AAS_E2B_BODY_MAX) {
		aas_e2b_error(out, 413, "the body is over %zu bytes", AAS_E2B_BODY_MAX);
		return false;
	}
	code = aas_connect_json(obj, r->body, r->body_len, AAS_E2B_BODY_MAX, why, sizeof(why));
	if (code != AAS_CONNECT_OK) {
		aas_e2b_error(out, code == AAS_CONNECT_RESOURCE_EXHAUSTED ? 413 : 400, "%s", why);
		return false;
	}
	return true;
}

/* ---- the prefixes ---- */

static void dispatch_api(struct aas_req *r, struct aas_reply *out)
{
	aas_e2b_control(r, out, r->path + strlen(AAS_E2B_API_PREFIX));
}

static void dispatch_sandbox(struct aas_req *r, struct aas_reply *out)
{
	aas_e2b_data(r, out, r->path + strlen(AAS_E2B_SANDBOX_PREFIX));
}

/*
 * The routes take their bodies as streams (AAS_R_STREAM) for one reason:
 * the start runs with the headers, so a request is authenticated before
 * any of its body is held, and each holds at most what its call may send.
 */
static int start_api(struct aas_req *r, struct aas_reply *out)
{
	if (!aas_e2b_authenticate(r, out))
		return -1;
	r->body_max = AAS_E2B_BODY_MAX;
	return 0;
}

static int start_sandbox(struct aas_req *r, struct aas_reply *out)
{
	return aas_e2b_data_start(r, out, r->path + strlen(AAS_E2B_SANDBOX_PREFIX), NULL);
}

/*
 * Domain mode (--e2b-domain): 49983-ID.DOMAIN is the data plane with its
 * paths at the root and the sandbox in the Host, and api.DOMAIN the control
 * plane at the root (E2B's default API URL). Other ports are the floor's to
 * send to aas_e2b_port_handle.
 */
static void dispatch_host(struct aas_req *r, struct aas_reply *out)
{
	aas_e2b_data(r, out, r->path);
}

static int start_host(struct aas_req *r, struct aas_reply *out)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	char id[SAAS_ID_MAX + 1];
	unsigned int port;

	/* The route was picked by this Host: it parses again, the same. */
	if (!aas_e2b_host_parse(host, aas_e2b_state.cfg->e2b_domain, &port, id) ||
	    (port != AAS_E2B_ENVD_PORT && port != SAAS_CODE_PORT)) {
		aas_e2b_error(out, 404, "no sandbox host %s", host ? host : "");
		return -1;
	}
	return aas_e2b_data_start(r, out, r->path, id);
}

static void dispatch_api_host(struct aas_req *r, struct aas_reply *out)
{
	aas_e2b_control(r, out, r->path);
}

/* /files at the root: a signed URL made with E2B_SANDBOX_URL (the SDK drops the URL's path), found by its signature. */
static void dispatch_files(struct aas_req *r, struct aas_reply *out)
{
	aas_e2b_data(r, out, "/files");
}

static int start_files(struct aas_req *r, struct aas_reply *out)
{
	return aas_e2b_data_start(r, out, "/files", NULL);
}

/* A piece of the body, kept whole up to r->body_max: nonzero past it (http.c drops the rest; the call says 413). */
static int body_data(struct aas_req *r, const char *data, size_t len)
{
	if (r->body_len + len > r->body_max) {
		r->too_big = true;
		return 1;
	}
	if (r->body_len + len + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		char *p;
		while (cap < r->body_len + len + 1)
			cap *= 2;
		if (!(p = realloc(r->body, cap))) {
			r->too_big = true;
			return 1;
		}
		r->body = p;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return 0;
}

/* The data plane's: a POST /files streams into its files as it comes (files.c); anything else is held as above. */
static int sandbox_data(struct aas_req *r, const char *data, size_t len)
{
	struct aas_e2b_target *t = r->stream;

	return t && t->upload ? aas_e2b_files_data(t, data, len) : body_data(r, data, len);
}

static const struct aas_route api_route = { "*", AAS_E2B_API_PREFIX, AAS_R_STREAM, dispatch_api, start_api,
	                                    body_data };
static const struct aas_route sandbox_route = { "*", AAS_E2B_SANDBOX_PREFIX, AAS_R_STREAM | AAS_R_RATED,
	                                        dispatch_sandbox, start_sandbox, sandbox_data };

static const struct aas_route host_route = { "*", AAS_E2B_SANDBOX_PREFIX, AAS_R_STREAM | AAS_R_RATED, dispatch_host,
	                                     start_host, sandbox_data };
static const struct aas_route api_host_route = { "*", AAS_E2B_API_PREFIX, AAS_R_STREAM, dispatch_api_host, start_api,
	                                         body_data };
static const struct aas_route files_route = { "*", "/files", AAS_R_STREAM | AAS_R_RATED, dispatch_files, start_files,
	                                      sandbox_data };

static bool under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

const struct aas_route *aas_e2b_route(const char *path, const char *host)
{
	const char *domain = aas_e2b_state.cfg ? aas_e2b_state.cfg->e2b_domain : NULL;
	char id[SAAS_ID_MAX + 1], label[8];
	unsigned int port;

	if (!aas_e2b_state.engine)
		return NULL;
	/* envd's port and the code interpreter's (code.c) are the face's; other ports are the guest's. */
	if (domain && aas_e2b_host_parse(host, domain, &port, id) && (port == AAS_E2B_ENVD_PORT || port == SAAS_CODE_PORT))
		return &host_route;
	if (domain && aas_host_label(label, sizeof(label), host, domain) && strcmp(label, "api") == 0)
		return &api_host_route;
	if (under(path, AAS_E2B_API_PREFIX))
		return &api_route;
	if (under(path, AAS_E2B_SANDBOX_PREFIX))
		return &sandbox_route;
	if (strcmp(path, "/files") == 0)
		return &files_route;
	return NULL;
}

bool aas_e2b_port_host(const char *host)
{
	const char *domain = aas_e2b_state.cfg ? aas_e2b_state.cfg->e2b_domain : NULL;
	char id[SAAS_ID_MAX + 1];
	unsigned int port;

	return aas_e2b_state.engine && domain && aas_e2b_host_parse(host, domain, &port, id) &&
	       port != AAS_E2B_ENVD_PORT && port != SAAS_CODE_PORT;
}

/* ---- start and stop ---- */

/* The secret tokens are derived from: a file's SHA-256 (servers on one store share the file), else random. */
static int load_secret(const char *file)
{
	unsigned char buf[4096];
	crypto_hash_sha256_state st;
	size_t total = 0;
	ssize_t n;
	int fd, rc = -1;

	if (!file) {
		randombytes_buf(aas_e2b_state.secret, sizeof(aas_e2b_state.secret));
		aas_log(SAAS_LOG_WARN, "e2b: no --e2b-secret-file: sandboxes' E2B access tokens change when this server "
		        "restarts, and other servers on the store do not accept them (docs/e2b.md)");
		return 0;
	}
	if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		aas_log(SAAS_LOG_ERROR, "e2b: cannot read --e2b-secret-file %s: %s", file, strerror(errno));
		return -1;
	}
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof(buf))) > 0 && total < ((size_t)1 << 20)) {
		crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
		total += (size_t)n;
	}
	if (n < 0)
		aas_log(SAAS_LOG_ERROR, "e2b: cannot read --e2b-secret-file %s: %s", file, strerror(errno));
	else if (total < AAS_E2B_SECRET_LEN)
		aas_log(SAAS_LOG_ERROR, "e2b: --e2b-secret-file %s holds %zu bytes; it needs at least %d random ones "
		        "(head -c 32 /dev/urandom)", file, total, AAS_E2B_SECRET_LEN);
	else
		rc = 0;
	crypto_hash_sha256_final(&st, aas_e2b_state.secret);
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* Room under 255 for "PORT-ID." before the domain (a host name's bound). */
#define DOMAIN_MAX 180

/* --e2b-domain: a lower-case DNS name (a wildcard certificate then covers one label under it), and a port. */
static bool domain_ok(const char *d)
{
	size_t n = strcspn(d, ":");
	const char *port = d + n;

	if (n == 0 || n > DOMAIN_MAX || d[0] == '.' || d[0] == '-' || d[n - 1] == '.' || d[n - 1] == '-' ||
	    strstr(d, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((d[i] >= 'a' && d[i] <= 'z') || (d[i] >= '0' && d[i] <= '9') || d[i] == '-' || d[i] == '.'))
			return false;
	if (*port) {
		char *end;
		unsigned long p = strtoul(port + 1, &end, 10);
		if (!port[1] || *end || port[1] < '1' || port[1] > '9' || p > 65535)
			return false;
	}
	return true;
}

int aas_e2b_init(saas_engine *engine, const struct aas_config *cfg)
{
	const char *spec = cfg->e2b_templates ? cfg->e2b_templates : AAS_E2B_TEMPLATES_DEFAULT;
	char why[256];

	if (sodium_init() < 0) {
		aas_log(SAAS_LOG_ERROR, "e2b: libsodium would not start");
		return -1;
	}
	if (aas_e2b_templates_parse(&aas_e2b_state.templates, spec, why, sizeof(why)) < 0) {
		aas_log(SAAS_LOG_ERROR, "e2b: --e2b-templates: %s", why);
		aas_e2b_templates_free(&aas_e2b_state.templates);
		return -1;
	}
	if (cfg->e2b_domain && !domain_ok(cfg->e2b_domain)) {
		aas_log(SAAS_LOG_ERROR, "e2b: --e2b-domain \"%s\" is not a domain name (lower-case letters, digits, '-' "
		        "and '.', at most %d bytes, and an optional :PORT)", cfg->e2b_domain, DOMAIN_MAX);
		aas_e2b_templates_free(&aas_e2b_state.templates);
		return -1;
	}
	if (load_secret(cfg->e2b_secret_file) < 0) {
		aas_e2b_templates_free(&aas_e2b_state.templates);
		return -1;
	}
	aas_e2b_state.cfg = cfg;
	aas_e2b_state.engine = engine;
	return 0;
}

void aas_e2b_shutdown(void)
{
	aas_e2b_state.engine = NULL;
	aas_e2b_process_shutdown();
	aas_e2b_watch_shutdown();
	aas_e2b_templates_free(&aas_e2b_state.templates);
	sodium_memzero(aas_e2b_state.secret, sizeof(aas_e2b_state.secret));
}

/* ---- aas-server e2b-key ---- */

int aas_e2b_key_main(int argc, char **argv)
{
	char line[SAAS_KEY_LEN + 64], spelled[SAAS_KEY_E2B_LEN + 1];
	int rc = 2;

	(void)argv;
	if (argc > 2) {
		fprintf(stderr, "usage: aas-server e2b-key < KEYFILE   print an API key's e2b_ spelling (docs/e2b.md)\n");
		return 2;
	}
	if (!fgets(line, sizeof(line), stdin)) {
		fprintf(stderr, "aas-server e2b-key: give the key (aas_sk_...) on stdin\n");
		return 2;
	}
	line[strcspn(line, "\r\n")] = '\0';
	if (saas_key_to_e2b(spelled, line) == SAAS_OK) {
		printf("%s\n", spelled);
		rc = 0;
	} else {
		fprintf(stderr, "aas-server e2b-key: %s\n", saas_error_last()->message);
	}
	sodium_memzero(line, sizeof(line));
	sodium_memzero(spelled, sizeof(spelled));
	return rc;
}
