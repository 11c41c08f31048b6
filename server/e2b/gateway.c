/*
 * The E2B face's front door: its two prefixes, its replies, its state, and
 * the side table of what a create gave that the engine does not keep yet.
 *
 * The face has one route of the server's table per prefix (aas_e2b_route):
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

void aas_e2b_envd_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *sandbox_id, const char *account_id)
{
	char subject[2 * SAAS_ID_MAX + 2], mac[65];

	/* '/' is in neither id: the subject is one pair only. */
	snprintf(subject, sizeof(subject), "%s/%s", sandbox_id, account_id);
	aas_e2b_token(mac, aas_e2b_state.secret, AAS_E2B_TOKEN_ENVD, subject);
	snprintf(out, AAS_E2B_ENVD_TOKEN_SIZE, "%s.%s", account_id, mac);
}

bool aas_e2b_envd_token_check(const char *token, const char *sandbox_id, char account[SAAS_ID_MAX + 1])
{
	char expected[AAS_E2B_ENVD_TOKEN_SIZE];
	const char *dot = token ? strrchr(token, '.') : NULL;
	size_t n = dot ? (size_t)(dot - token) : 0;

	account[0] = '\0';
	if (!dot || n == 0 || n > SAAS_ID_MAX || strcspn(token, "/") < n)
		return false;
	memcpy(account, token, n);
	account[n] = '\0';
	aas_e2b_envd_token(expected, sandbox_id, account);
	if (!aas_e2b_token_equal(token, expected)) {
		account[0] = '\0';
		return false;
	}
	return true;
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

void aas_e2b_error_saas(struct aas_reply *out, int rc, const char *where)
{
	const saas_error *e = saas_error_last();
	int64_t retry_ms = rc == SAAS_ELIMIT && e->code == rc ? e->retry_after_ms : 0;
	char msg[1024], value[24];
	unsigned int status;

	/* A wrong state is E2B's 409 (pause of a paused sandbox: the SDK's pause() then says false). */
	status = rc == SAAS_ESTATE ? 409 : (unsigned int)saas_error_http_status(rc);
	snprintf(msg, sizeof(msg), "%s", aas_tenant_message(rc, where));
	error_text(out, status, msg);
	if (out->response && rc == SAAS_ELIMIT) {
		/* Whole seconds, at least 1: the JS SDK retries after it (integer seconds only). */
		snprintf(value, sizeof(value), "%lld", retry_ms > 0 ? (long long)((retry_ms + 999) / 1000) : 1LL);
		MHD_add_response_header(out->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
	}
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

/* ---- the side table ---- */

struct side_entry {
	char id[SAAS_ID_MAX + 1];
	struct aas_e2b_side side;
	struct side_entry *next;
};

static pthread_mutex_t side_mu = PTHREAD_MUTEX_INITIALIZER;
static struct side_entry *side_list;
static size_t side_count;

void aas_e2b_side_free(struct aas_e2b_side *side)
{
	free(side->template_name);
	json_decref(side->metadata);
	json_decref(side->envs);
	memset(side, 0, sizeof(*side));
}

int aas_e2b_side_put(const char *id, struct aas_e2b_side *side)
{
	struct side_entry *e;
	int rc = SAAS_OK;

	pthread_mutex_lock(&side_mu);
	if (side_count >= AAS_E2B_SIDE_MAX) {
		rc = SAAS_ELIMIT;
		goto out;
	}
	if (!(e = calloc(1, sizeof(*e)))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	snprintf(e->id, sizeof(e->id), "%s", id);
	e->side = *side;
	memset(side, 0, sizeof(*side));
	e->next = side_list;
	side_list = e;
	side_count++;
out:
	pthread_mutex_unlock(&side_mu);
	aas_e2b_side_free(side);
	return rc;
}

void aas_e2b_side_get(const char *id, struct aas_e2b_side *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&side_mu);
	for (struct side_entry *e = side_list; e; e = e->next) {
		if (strcmp(e->id, id) != 0)
			continue;
		/* Deep copies, made under the lock: jansson's references are not to be shared across threads. */
		out->template_name = e->side.template_name ? strdup(e->side.template_name) : NULL;
		out->metadata = e->side.metadata ? json_deep_copy(e->side.metadata) : NULL;
		out->envs = e->side.envs ? json_deep_copy(e->side.envs) : NULL;
		break;
	}
	pthread_mutex_unlock(&side_mu);
}

void aas_e2b_side_drop(const char *id)
{
	pthread_mutex_lock(&side_mu);
	for (struct side_entry **p = &side_list; *p; p = &(*p)->next) {
		struct side_entry *e = *p;
		if (strcmp(e->id, id) == 0) {
			*p = e->next;
			aas_e2b_side_free(&e->side);
			free(e);
			side_count--;
			break;
		}
	}
	pthread_mutex_unlock(&side_mu);
}

void aas_e2b_side_clear(void)
{
	pthread_mutex_lock(&side_mu);
	while (side_list) {
		struct side_entry *e = side_list;
		side_list = e->next;
		aas_e2b_side_free(&e->side);
		free(e);
	}
	side_count = 0;
	pthread_mutex_unlock(&side_mu);
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
	return aas_e2b_data_start(r, out, r->path + strlen(AAS_E2B_SANDBOX_PREFIX));
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

static const struct aas_route api_route = { "*", AAS_E2B_API_PREFIX, AAS_R_STREAM, dispatch_api, start_api,
	                                    body_data };
static const struct aas_route sandbox_route = { "*", AAS_E2B_SANDBOX_PREFIX, AAS_R_STREAM | AAS_R_RATED,
	                                        dispatch_sandbox, start_sandbox, body_data };

static bool under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

const struct aas_route *aas_e2b_route(const char *path)
{
	if (!aas_e2b_state.engine)
		return NULL;
	if (under(path, AAS_E2B_API_PREFIX))
		return &api_route;
	if (under(path, AAS_E2B_SANDBOX_PREFIX))
		return &sandbox_route;
	return NULL;
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
	aas_e2b_side_clear();
}

/* ---- aas-server e2b-key ---- */

int aas_e2b_key_main(int argc, char **argv)
{
	char line[AAS_SAAS_KEY_MAX + 64], spelled[AAS_E2B_KEY_MAX + 1];
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
	if (aas_e2b_key_encode(spelled, sizeof(spelled), line)) {
		printf("%s\n", spelled);
		rc = 0;
	} else {
		fprintf(stderr, "aas-server e2b-key: that is not an API key (aas_sk_ and %d letters and digits)\n",
		        AAS_SAAS_KEY_CHARS);
	}
	sodium_memzero(line, sizeof(line));
	sodium_memzero(spelled, sizeof(spelled));
	return rc;
}
