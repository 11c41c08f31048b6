/*
 * The HTTP layer: libmicrohttpd with one thread per connection, the router,
 * authentication, request bodies, replies, the access log.
 *
 * A request's life: uri_log() allocates its state (and keeps the raw URI for
 * the preview proxy); access() is called once with the headers, once per
 * piece of body, and once more at the end, where the handler runs; done()
 * logs one line, counts it in the metrics and frees the state.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "aas_mcp.h"
#include "e2b/e2b.h"
#include "front.h"
#include "preview/preview.h"
#include "web/web.h"

static struct MHD_Daemon *daemon_;
static const struct aas_config *config;
static pthread_mutex_t inflight_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned int inflight;

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

unsigned int aas_http_inflight(void)
{
	unsigned int n;
	pthread_mutex_lock(&inflight_mu);
	n = inflight;
	pthread_mutex_unlock(&inflight_mu);
	return n;
}

/* ---- replies ---- */

void aas_reply_common_headers(struct MHD_Response *resp)
{
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

void aas_reply_json(struct aas_reply *out, unsigned int status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	size_t len;

	json_decref(body);
	if (!text) {
		static const char oom[] = "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}";
		out->status = 500;
		out->response = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
	} else {
		len = strlen(text);
		text[len] = '\0';
		out->status = status;
		out->response = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	}
	if (out->response) {
		MHD_add_response_header(out->response, "Content-Type", "application/json");
		aas_reply_common_headers(out->response);
	}
}

/*
 * The error body, {"error":{"code","message"}}, with the limit it names and
 * the seconds of its Retry-After (both when given), which it sends too.
 */
static void reply_error_with(struct aas_reply *out, unsigned int status, const char *code, const char *limit,
                             long long retry_after_s, char *msg)
{
	json_t *body, *err;

	if (!(body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg))) {
		/* A client's bytes echoed in msg (a path, a header) that are not UTF-8, which JSON cannot carry. */
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	}
	err = json_object_get(body, "error");
	if (err && limit)
		json_object_set_new(err, "limit", json_string(limit));
	if (err && retry_after_s > 0)
		json_object_set_new(err, "retry_after", json_integer((json_int_t)retry_after_s));
	aas_reply_json(out, status, body);
	if (out->response && status == 401)
		MHD_add_response_header(out->response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"aas\"");
	if (out->response && retry_after_s > 0) {
		char value[24];
		snprintf(value, sizeof(value), "%lld", retry_after_s);
		MHD_add_response_header(out->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
	}
}

void aas_reply_error(struct aas_reply *out, unsigned int status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_error_with(out, status, code, NULL, 0, msg);
}


unsigned int aas_status_for(int rc)
{
	return (unsigned int)saas_error_http_status(rc);
}

int64_t aas_retry_after_ms(int rc)
{
	const saas_error *e = saas_error_last();

	if (rc >= 0 || e->code != rc)
		return 0;
	/* A limit that names itself always says when ("at once" would be a busy loop). */
	if (rc == SAAS_ELIMIT && e->limit[0])
		return e->retry_after_ms > 0 ? e->retry_after_ms : 1;
	return rc == SAAS_EBUSY && e->retry_after_ms > 0 ? e->retry_after_ms : 0;
}

/* A failure's answer, with a Retry-After (and the body's retry_after) when retry_after_s > 0. */
static void reply_failure(struct aas_reply *out, int rc, int klass, const char *msg, long long retry_after_s)
{
	unsigned int status = aas_status_for(rc);
	char text[1024];

	if (!msg || !*msg)
		msg = saas_strerror(rc);
	/* The operator's log gets a server-side failure's detail, the tenant its fixed text. */
	if (aas_error_is_internal(rc, klass)) {
		aas_log(SAAS_LOG_WARN, "answering %u %s for: %s", status, saas_error_name(rc), msg);
		snprintf(text, sizeof(text), "%s: %s", saas_strerror(rc), aas_error_tenant_text(rc));
	} else {
		snprintf(text, sizeof(text), "%s", msg);
	}
	reply_error_with(out, status, saas_error_name(rc), NULL, retry_after_s, text);
}

void aas_reply_failure(struct aas_reply *out, int rc, int klass, const char *msg)
{
	reply_failure(out, rc, klass, msg, 0);
}

void aas_reply_limit(struct aas_reply *out, const char *limit, int64_t retry_after_ms, const char *fmt, ...)
{
	/* Whole seconds, rounded up, and never 0: "retry at once" would be a busy loop. */
	long long secs = retry_after_ms > 0 ? (retry_after_ms + 999) / 1000 : 1;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_error_with(out, 429, saas_error_name(SAAS_ELIMIT), limit ? limit : "", secs, msg);
}

void aas_reply_saas(struct aas_reply *out, int rc)
{
	const saas_error *e = saas_error_last();
	int64_t wait = aas_retry_after_ms(rc);

	if (rc == SAAS_ELIMIT && wait > 0) {
		aas_reply_limit(out, e->limit, wait, "%s", e->message);
		return;
	}
	/*
	 * A refusal for want of room, or a network change not confirmed in time
	 * (503), says when to come back: whole seconds rounded up, in
	 * Retry-After and the body's retry_after.
	 */
	if (e->code == rc)
		reply_failure(out, rc, e->klass, e->message, wait > 0 ? (wait + 999) / 1000 : 0);
	else
		reply_failure(out, rc, SAAS_ERRCLASS_NONE, NULL, 0);
}

/* ---- request bodies ---- */

bool aas_body_object(struct aas_req *r, struct aas_reply *out, json_t **obj)
{
	json_error_t err;
	char why[200];

	*obj = NULL;
	if (!r->body_len) {
		*obj = json_object();
		return true;
	}
	/* The bytes are bounded as they arrive; the tree jansson would build of them (20 to 40 times as big) here. */
	if (!aas_json_bounds(r->body, r->body_len, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, why, sizeof(why))) {
		aas_reply_error(out, 413, "too_large", "the body is refused: %s", why);
		return false;
	}
	*obj = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
	if (!*obj) {
		aas_json_error_text(why, sizeof(why), &err);
		if (json_error_code(&err) == json_error_null_character)
			aas_reply_error(out, 400, "invalid_argument", "the body is refused: %s", why);
		else
			aas_reply_error(out, 400, "invalid_json", "the body is not valid JSON: %s", why);
		return false;
	}
	if (!json_is_object(*obj)) {
		json_decref(*obj);
		*obj = NULL;
		aas_reply_error(out, 400, "invalid_json", "the body must be a JSON object");
		return false;
	}
	return true;
}

bool aas_field_string(json_t *obj, const char *name, const char **val, struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name);

	*val = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"%s\" must be a string", name);
		return false;
	}
	if (strlen(json_string_value(v)) != json_string_length(v)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"%s\" may not contain NUL", name);
		return false;
	}
	*val = json_string_value(v);
	return true;
}

bool aas_field_int(json_t *obj, const char *name, int64_t *val, bool *present, struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name);

	*present = false;
	if (!v || json_is_null(v))
		return true;
	if (!aas_json_int64(v, val)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"%s\" must be an integer", name);
		return false;
	}
	*present = true;
	return true;
}

bool aas_field_bool(json_t *obj, const char *name, bool *val, struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name);

	if (!v || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"%s\" must be true or false", name);
		return false;
	}
	*val = json_is_true(v);
	return true;
}

/* ---- query parameters ---- */

struct query_find {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
	unsigned int count;
};

static enum MHD_Result query_find_cb(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size)
{
	struct query_find *f = cls;

	(void)kind;
	if (key_size == f->name_len && memcmp(key, f->name, key_size) == 0 && f->count++ == 0) {
		f->value = value ? value : "";
		f->value_len = value ? value_size : 0;
	}
	return MHD_YES;
}

/*
 * libmicrohttpd decodes "%00" into the value and hands out C strings, and
 * answers a repeated name with its first value: either would have a handler
 * act on something else than what was sent, so both are refused.
 */
bool aas_query(struct aas_req *r, const char *name, const char **val, struct aas_reply *out)
{
	struct query_find f = { name, strlen(name), NULL, 0, 0 };

	*val = NULL;
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_find_cb, &f);
	if (f.count > 1) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"%s\" is given %u times; give it once",
		                name, f.count);
		return false;
	}
	if (f.value && strlen(f.value) != f.value_len) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"%s\" contains a NUL byte (%%00)",
		                name);
		return false;
	}
	*val = f.value;
	return true;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decode s's %XX escapes in place; false for a bad escape or a NUL. */
static bool unescape_in_place(char *s)
{
	char *w = s;

	for (const char *p = s; *p; p++) {
		if (*p != '%') {
			*w++ = *p;
			continue;
		}
		int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
		if (lo < 0 || (hi == 0 && lo == 0))
			return false;
		*w++ = (char)(hi * 16 + lo);
		p += 2;
	}
	*w = '\0';
	return true;
}

int aas_pairs_parse(const char *param, size_t max, char ***out, char *why, size_t whysize)
{
	char *buf = NULL, *save = NULL, *pair, **list = NULL;
	size_t n = 0;
	int rc = -1;

	*out = NULL;
	if (strlen(param) > AAS_PAIRS_BYTES_MAX) {
		snprintf(why, whysize, "is over %d bytes", AAS_PAIRS_BYTES_MAX);
		return -1;
	}
	if (!(buf = strdup(param)) || !(list = calloc(max + 1, sizeof(*list)))) {
		snprintf(why, whysize, "cannot be read: out of memory");
		goto out;
	}
	for (pair = strtok_r(buf, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '=');
		if (n == max) {
			snprintf(why, whysize, "has more than %zu pairs", max);
			goto out;
		}
		if (!eq || eq == pair) {
			snprintf(why, whysize, "must be KEY=VALUE pairs joined by '&'");
			goto out;
		}
		*eq = '\0';
		if (!unescape_in_place(pair) || !unescape_in_place(eq + 1)) {
			snprintf(why, whysize, "has a bad %%-escape (or a NUL)");
			goto out;
		}
		if (strchr(pair, '=')) {
			snprintf(why, whysize, "has a key with '=' in it, which no metadata key may hold");
			goto out;
		}
		if (asprintf(&list[n], "%s=%s", pair, eq + 1) < 0) {
			list[n] = NULL;
			snprintf(why, whysize, "cannot be read: out of memory");
			goto out;
		}
		n++;
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
	free(buf);
	return rc;
}

void aas_pairs_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

bool aas_query_bool(struct aas_req *r, const char *name, bool *val, struct aas_reply *out)
{
	const char *v;

	if (!aas_query(r, name, &v, out))
		return false;
	if (!v)
		return true;
	if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
		*val = true;
	} else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
		*val = false;
	} else {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"%s\" must be true or false (or 1 or 0)",
		                name);
		return false;
	}
	return true;
}

bool aas_query_uint(struct aas_req *r, const char *name, unsigned int min, unsigned int max, unsigned int *val,
                    struct aas_reply *out)
{
	unsigned long long n = 0;
	const char *v, *p;

	if (!aas_query(r, name, &v, out))
		return false;
	if (!v)
		return true;
	/* Digits only: strtoul() would take "+5", " 5" and "-1" (as a huge number). */
	for (p = v; *p >= '0' && *p <= '9' && n <= max; p++)
		n = n * 10 + (unsigned long long)(*p - '0');
	if (!*v || *p || n < min || n > max) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"%s\" must be an integer from %u to %u",
		                name, min, max);
		return false;
	}
	*val = (unsigned int)n;
	return true;
}

/* ---- routing ---- */

/*
 * Does `path` match `pattern`? A "{...}" matches one path segment; "{id}" is
 * copied into id (handlers read other segments from r->path themselves).
 * Returns 1, 0, or -1 when the id is too long.
 */
static int match(const char *pattern, const char *path, char *id, size_t idsize)
{
	while (*pattern && *path) {
		if (*pattern == '{') {
			bool is_id = strncmp(pattern, "{id}", 4) == 0;
			size_t n = strcspn(path, "/");
			if (n == 0)
				return 0;
			pattern = strchr(pattern, '}') + 1;
			if (*pattern != '\0' && *pattern != '/')
				return 0;
			if (path[n] != *pattern && !(path[n] == '/' && *pattern == '/'))
				return 0;
			if (is_id) {
				if (n >= idsize)
					return -1;
				memcpy(id, path, n);
				id[n] = '\0';
			}
			path += n;
			continue;
		}
		if (*pattern++ != *path++)
			return 0;
	}
	return *pattern == '\0' && *path == '\0';
}

static const struct aas_route *route_find(struct aas_req *r, const char *path, const char *method,
                                          char *allow, size_t allowsize, bool *too_long)
{
	const struct aas_route *found = NULL;
	char id[SAAS_ID_MAX + 1];
	const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;

	allow[0] = '\0';
	*too_long = false;
	for (size_t i = 0; i < aas_nroutes; i++) {
		int rc = match(aas_routes[i].pattern, path, id, sizeof(id));
		if (rc == 0)
			continue;
		if (rc < 0) {
			*too_long = true;
			continue;
		}
		size_t used = strlen(allow);
		snprintf(allow + used, allowsize - used, "%s%s%s", used ? ", " : "", aas_routes[i].method,
		         strcmp(aas_routes[i].method, "GET") == 0 ? ", HEAD" : "");
		if (!found && strcmp(aas_routes[i].method, m) == 0) {
			found = &aas_routes[i];
			snprintf(r->route_id, sizeof(r->route_id), "%s", strstr(aas_routes[i].pattern, "{id}") ? id : "");
		}
	}
	return found;
}

/* An API key named in the URL is refused (and, like every query, never logged). */
static bool key_in_query(struct aas_req *r)
{
	static const char *const names[] = { "api_key", "apikey", "key", "token", "access_token", "x-api-key" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, names[i]))
			return true;
	return false;
}

const char *aas_request_key(struct aas_req *r)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");

	if (h) {
		while (*h == ' ')
			h++;
		if (strncasecmp(h, "Bearer ", 7) == 0) {
			h += 7;
			while (*h == ' ')
				h++;
			return *h ? h : NULL;
		}
		return NULL;
	}
	h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-api-key");
	return h && *h ? h : NULL;
}

static bool authenticate(struct aas_req *r, struct aas_reply *out)
{
	const char *key = aas_request_key(r);
	int rc;

	if (!key) {
		aas_reply_error(out, 401, "unauthorized",
		                "an API key is required: send \"Authorization: Bearer aas_sk_...\" or \"x-api-key\"");
		return false;
	}
	rc = aas_auth_get(&r->auth, &r->client, key);
	if (rc == SAAS_EAUTH) {
		aas_reply_error(out, 401, "unauthorized", "the API key is unknown or revoked");
		return false;
	}
	if (rc < 0) {
		aas_reply_saas(out, rc);
		return false;
	}
	snprintf(r->account_id, sizeof(r->account_id), "%s", saas_client_account_id(r->client));
	return true;
}

/* AAS_R_KEY: look up the key if one was sent; an unusable one leaves no client and says why in key_status. */
static void optional_key(struct aas_req *r)
{
	const char *key = aas_request_key(r);

	if (!key)
		return;
	r->key_status = aas_auth_get(&r->auth, &r->client, key);
	if (r->key_status < 0) {
		r->auth = NULL;
		r->client = NULL;
		return;
	}
	snprintf(r->account_id, sizeof(r->account_id), "%s", saas_client_account_id(r->client));
}

static void reply_too_large(struct aas_req *r, struct aas_reply *rep)
{
	if ((r->route->flags & AAS_R_KEY) && !r->client)
		aas_reply_error(rep, 413, "too_large", "the JSON body is over %zu bytes, the most a request without a "
		                "valid API key may send", r->body_max);
	else
		aas_reply_error(rep, 413, "too_large", "the JSON body is over %zu bytes", r->body_max);
}

bool aas_fd_gone(int fd)
{
	ssize_t n;
	char c;

	if (fd < 0)
		return false;
	/*
	 * Nothing reads the socket while a handler runs (one thread per
	 * connection), so a FIN or a reset waits there: a peek sees EOF or an
	 * error. A pipelined request is data, and means the client is there.
	 */
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool aas_client_gone(struct aas_req *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci && aas_fd_gone(ci->connect_fd);
}

int aas_client_fd(struct aas_req *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
}

bool aas_wants_upgrade(struct aas_req *r)
{
	const char *c = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connection");
	const char *u = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
	return c && u && strcasestr(c, "upgrade");
}

bool aas_host_label(char *label, size_t size, const char *host, const char *domain)
{
	char h[256];
	size_t n, dl;

	if (size)
		label[0] = '\0';
	if (!host || !domain || !*domain || strlen(host) >= sizeof(h))
		return false;
	for (n = 0; host[n] && host[n] != ':'; n++)
		h[n] = (char)tolower((unsigned char)host[n]);
	h[n] = '\0';
	/* A domain given with a port ("e2b.localhost:8080", what a client is told to dial) is compared without it. */
	dl = strcspn(domain, ":");
	if (dl == 0 || n <= dl + 1 || h[n - dl - 1] != '.' || strncasecmp(h + n - dl, domain, dl) != 0)
		return false;
	n -= dl + 1;
	h[n] = '\0';
	/* One label under the domain is the caller's, found or not; deeper names are not. */
	if (strchr(h, '.'))
		return false;
	if (n < size)
		memcpy(label, h, n + 1);
	return true;
}

static uint64_t content_length(struct aas_req *r, bool *known)
{
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
	*known = cl != NULL;
	return cl ? strtoull(cl, NULL, 10) : 0;
}

enum MHD_Result aas_queue(struct aas_req *r, struct aas_reply *rep)
{
	enum MHD_Result ret;

	r->done = true;
	r->status = rep->status;
	if (!rep->response)
		return MHD_NO;
	/*
	 * Say how long an idle kept-alive connection is kept, so the client
	 * retires it before the watchdog cuts it (conn.c); not on an upgrade, nor
	 * on a response that closes its connection.
	 */
	if (rep->status != MHD_HTTP_SWITCHING_PROTOCOLS &&
	    !MHD_get_response_header(rep->response, MHD_HTTP_HEADER_CONNECTION)) {
		char ka[32];
		snprintf(ka, sizeof(ka), "timeout=%u", aas_conn_keep_alive_s());
		MHD_add_response_header(rep->response, "Keep-Alive", ka);
	}
	ret = MHD_queue_response(r->conn, rep->status, rep->response);
	MHD_destroy_response(rep->response);
	rep->response = NULL;
	return ret;
}

/* Route, authenticate and check the body's size: the first call of a request. */
static bool begin(struct aas_req *r, struct aas_reply *rep)
{
	char allow[256];
	bool too_long, known;
	uint64_t len;

	if (key_in_query(r)) {
		aas_reply_error(rep, 400, "invalid_argument",
		                "API keys are not accepted in the URL; send \"Authorization: Bearer ...\" or \"x-api-key\"");
		return false;
	}
	/* The E2B face routes within its prefixes itself (server/e2b). */
	if (!(r->route = aas_e2b_route(r->path, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host"))))
		r->route = route_find(r, r->path, r->method, allow, sizeof(allow), &too_long);
	if (!r->route) {
		if (strcmp(r->method, "OPTIONS") == 0 && allow[0]) {
			rep->status = 204;
			rep->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
			MHD_add_response_header(rep->response, "Allow", allow);
			r->route_label = "options";
		} else if (allow[0]) {
			aas_reply_error(rep, 405, "method_not_allowed", "%s is not allowed on %s; allowed: %s", r->method,
			                r->path, allow);
			MHD_add_response_header(rep->response, "Allow", allow);
		} else if (too_long) {
			aas_reply_error(rep, 404, "not_found", "no such object (the id is too long)");
		} else {
			aas_reply_error(rep, 404, "not_found", "no route %s %s", r->method, r->path);
		}
		return false;
	}
	r->route_label = r->route->pattern;
	if (!(r->route->flags & AAS_R_RATED) && !aas_ratelimit_request(r, rep, config->address_rate))
		return false;
	if ((r->route->flags & AAS_R_AUTH) && !authenticate(r, rep))
		return false;
	if (r->route->flags & AAS_R_KEY)
		optional_key(r);
	r->body_max = (r->route->flags & AAS_R_FORM)                  ? AAS_FORM_BODY_MAX
	              : (r->route->flags & AAS_R_KEY) && !r->client ? AAS_ANON_BODY_MAX
	                                                            : AAS_JSON_BODY_MAX;
	len = content_length(r, &known);
	if ((r->route->flags & AAS_R_FORM) && known && len > r->body_max) {
		aas_reply_page_error(r, rep, 413, "Too large", "The form sent is larger than any form of this site.");
		return false;
	}
	if ((r->route->flags & AAS_R_JSON) && known && len > r->body_max) {
		reply_too_large(r, rep);
		return false;
	}
	if ((r->route->flags & AAS_R_STREAM) && known && len > (uint64_t)SAAS_FILE_MAX) {
		aas_reply_error(rep, 413, "too_large", "files are at most %lld bytes", (long long)SAAS_FILE_MAX);
		return false;
	}
	if ((r->route->flags & AAS_R_STREAM) && r->route->stream_start(r, rep) < 0)
		return false;
	return true;
}

static void take_body(struct aas_req *r, const char *data, size_t len)
{
	if (r->route->flags & AAS_R_STREAM) {
		if (!r->too_big && r->route->stream_data(r, data, len))
			r->too_big = true; /* the sink stopped: drop the rest */
		return;
	}
	if (!(r->route->flags & (AAS_R_JSON | AAS_R_FORM)) || r->too_big)
		return;
	if (r->body_len + len > r->body_max) {
		r->too_big = true;
		return;
	}
	if (r->body_len + len + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + len + 1)
			cap *= 2;
		char *p = realloc(r->body, cap);
		if (!p) {
			r->too_big = true;
			return;
		}
		r->body = p;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
}

/* Every preview slot is taken: the rest of the connections are kept for the API. */
static enum MHD_Result preview_busy(struct aas_req *r)
{
	struct aas_reply rep = { 0, NULL };
	char msg[128];

	snprintf(msg, sizeof(msg), "too many preview requests at once (--preview-connections %u); try again",
	         config->preview_connections);
	reply_error_with(&rep, 503, saas_error_name(SAAS_EBUSY), NULL, 1, msg);
	if (rep.response)
		MHD_add_response_header(rep.response, MHD_HTTP_HEADER_CONNECTION, "close");
	return aas_queue(r, &rep);
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
	struct aas_req *r = *con_cls;
	struct aas_reply rep = { 0, NULL };
	char pname[SAAS_PREVIEW_NAME_LEN + 1] = "";

	(void)cls;
	(void)version;
	if (!r)
		return MHD_NO;
	aas_conn_progress(conn, !r->started, *upload_data_size);
	/* E2B's domain mode: a sandbox's port as PORT-ID.DOMAIN, proxied as a preview is once its token is checked. */
	if (!r->started && aas_e2b_port_host(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"))) {
		r->started = true;
		r->conn = conn;
		r->method = method;
		if (!(r->path = strdup(url)))
			return MHD_NO;
		r->route_label = "e2b-port";
		if (!aas_ratelimit_preview(r, &rep, config->preview_rate))
			return aas_queue(r, &rep);
		if (!aas_conn_preview_enter(conn))
			return preview_busy(r);
		return aas_e2b_port_handle(r, upload_data, upload_data_size);
	}
	if (r->proxy || (!r->started && aas_preview_match(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"),
	                                                  config->preview_domain, pname))) {
		if (!r->started) {
			r->started = true;
			r->conn = conn;
			r->method = method;
			r->path = strdup(url);
			r->route_label = "preview";
			/* A preview URL is a capability, not a key: its visitors count by address. */
			if (!aas_ratelimit_preview(r, &rep, config->preview_rate))
				return aas_queue(r, &rep);
			if (!aas_conn_preview_enter(conn))
				return preview_busy(r);
		}
		return aas_preview_handle(r, pname, upload_data, upload_data_size);
	}
	if (!r->started) {
		r->started = true;
		r->conn = conn;
		r->method = method;
		if (!(r->path = strdup(url)))
			return MHD_NO;
		/* "/v1/sandboxes/" is "/v1/sandboxes". */
		size_t n = strlen(r->path);
		if (n > 1 && r->path[n - 1] == '/')
			((char *)r->path)[n - 1] = '\0';
		if (!begin(r, &rep))
			return aas_queue(r, &rep);
		return MHD_YES;
	}
	if (r->done) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size) {
		take_body(r, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->too_big && (r->route->flags & AAS_R_JSON))
		reply_too_large(r, &rep);
	else
		r->route->handler(r, &rep);
	return aas_queue(r, &rep);
}

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct aas_req *r = calloc(1, sizeof(*r));

	(void)cls;
	(void)conn;
	if (!r)
		return NULL;
	r->raw_uri = strdup(uri ? uri : "/");
	r->start_us = now_us();
	r->route_label = "unknown";
	pthread_mutex_lock(&inflight_mu);
	inflight++;
	pthread_mutex_unlock(&inflight_mu);
	return r;
}

static void done_cb(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct aas_req *r = *con_cls;
	double secs;

	(void)cls;
	aas_conn_request_done(conn, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	if (!r)
		return;
	*con_cls = NULL;
	secs = (double)(now_us() - r->start_us) / 1e6;
	if (r->started) {
		unsigned int status = r->status ? r->status : 499;
		aas_log(SAAS_LOG_INFO, "%s %s%s %u %.1fms account=%s%s", r->method, strcmp(r->route_label, "preview") == 0 ? "preview " : "",
		        r->path ? r->path : "?", status,
		        secs * 1000.0, r->account_id[0] ? r->account_id : "-",
		        toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
		aas_metrics_request(r->route_label, r->method, status, secs);
	}
	if (r->proxy)
		aas_preview_free(r);
	if (r->stream_free)
		r->stream_free(r->stream);
	aas_auth_release(r->auth);
	free(r->body);
	free((char *)r->path);
	free(r->raw_uri);
	free(r);
	pthread_mutex_lock(&inflight_mu);
	inflight--;
	pthread_mutex_unlock(&inflight_mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[1024];

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	aas_log(SAAS_LOG_DEBUG, "http: %s", buf);
}

int aas_http_bind(const struct aas_config *cfg, unsigned int *bound_port)
{
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[16];
	int fd = -1, one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
	snprintf(port, sizeof(port), "%u", cfg->listen_port);
	if ((rc = getaddrinfo(cfg->listen_host, port, &hints, &ai)) != 0) {
		aas_log(SAAS_LOG_ERROR, "cannot listen on %s: %s (give a numeric address)", cfg->listen_host,
		        gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		aas_log(SAAS_LOG_ERROR, "cannot listen on %s:%u: %s", cfg->listen_host, cfg->listen_port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	*bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                             : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/*
 * ASan puts redzones around every local and keeps frames of its own: its
 * builds get twice the stack, so that a test passing there says the same of
 * a release build.
 */
#if defined(__SANITIZE_ADDRESS__)
#define STACK_FACTOR 2
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STACK_FACTOR 2
#endif
#endif
#ifndef STACK_FACTOR
#define STACK_FACTOR 1
#endif

int aas_http_start(const struct aas_config *cfg, int listen_fd)
{
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
	                     MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | MHD_USE_ITC;
	size_t stack = (size_t)cfg->connection_stack_kb * 1024 * STACK_FACTOR;
	unsigned int limit;

	config = cfg;
	if (aas_conn_start(cfg, &limit) < 0)
		return -1;
	/* The thread of each connection, and the daemon's own, get this stack (conn.c says why it is small). */
	daemon_ = MHD_start_daemon(flags, 0, aas_conn_accept, NULL, access_cb, NULL,
	                           MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
	                           MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
	                           MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
	                           MHD_OPTION_NOTIFY_CONNECTION, aas_conn_notify, NULL,
	                           MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	                           MHD_OPTION_CONNECTION_LIMIT, limit,
	                           MHD_OPTION_THREAD_STACK_SIZE, stack,
	                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)300,
	                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)128 * 1024,
	                           MHD_OPTION_END);
	if (!daemon_) {
		aas_log(SAAS_LOG_ERROR, "cannot start the HTTP daemon");
		aas_conn_stop();
		return -1;
	}
	aas_log(SAAS_LOG_INFO, "taking %u connections at once, %u per address, one thread each with a %zu KiB stack "
	        "(at most %zu MiB of stacks)", limit, cfg->per_ip_connections, stack / 1024,
	        (size_t)limit * (stack / 1024) / 1024);
	return 0;
}

void aas_http_quiesce(void)
{
	MHD_socket s;

	if (daemon_ && (s = MHD_quiesce_daemon(daemon_)) != MHD_INVALID_SOCKET)
		close(s);
}

void aas_http_stop(void)
{
	if (daemon_)
		MHD_stop_daemon(daemon_);
	daemon_ = NULL;
	aas_conn_stop();
}
