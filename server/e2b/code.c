/*
 * The code interpreter's port (49999) of E2B's sandboxes: what the official
 * @e2b/code-interpreter SDK sends (docs/e2b-wire.md 4), under /e2b-sandbox
 * with E2b-Sandbox-Port: 49999, or in domain mode at 49999-ID.DOMAIN.
 *
 * It is not a byte proxy to the guest: each call is the engine's
 * saas_code_* (the engine reads the guest's code server within its bounds),
 * and each answer is written here in E2B's shapes: POST /execute as NDJSON
 * events as they come, /contexts as JSON, 404s as E2B's plain text. So the
 * face keeps the engine's bounds on bytes and time, and the guest's bytes
 * never reach the SDK unread.
 *
 * A run's end is the SDK's to choose: it closes the connection at its
 * timeout (JS: timeoutMs for the whole run; Python: timeout between two
 * lines). A silent run writes nothing to notice that by, so the engine's
 * ticks (a second of silence) look at the client's socket and cancel the
 * run then: it is interrupted and its context kept. No keepalive line is
 * written (E2B's server writes none): one would defeat Python's timeout.
 *
 * Tokens: /execute carries X-Access-Token (the envdAccessToken), /contexts*
 * carry none, only E2B-Traffic-Access-Token (every request does when the
 * sandbox has a trafficAccessToken, and libsaas always gives one). Either is
 * a per-sandbox secret and either is accepted; none, and nothing is served.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "e2b/internal.h"
#include "pipe.h"

/* A run that names no timeout (E2B's wire has none: the SDK closes the connection at its own) ends here. */
#define AAS_E2B_CODE_TIMEOUT_MS (10 * 60 * 1000)

bool aas_e2b_code_wanted(struct aas_req *r)
{
	const char *port = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	const char *domain = aas_e2b_state.cfg ? aas_e2b_state.cfg->e2b_domain : NULL;
	char id[SAAS_ID_MAX + 1];
	unsigned int p;

	if (domain && aas_e2b_host_parse(host, domain, &p, id))
		return p == SAAS_CODE_PORT;
	return port && strcmp(port, "49999") == 0;
}

bool aas_e2b_code_token(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *access = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	const char *traffic = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2B-Traffic-Access-Token");
	const char *sid = *t->e2b_id ? t->e2b_id : MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	char id[SAAS_ID_MAX + 1], account[SAAS_ID_MAX + 1];

	if (access)
		return true; /* aas_e2b_target_open checks it */
	if (traffic && sid && aas_e2b_id_to_saas(id, sid) && aas_e2b_traffic_token_check(traffic, id, account)) {
		/* The traffic token proved the sandbox and its account: serve it as that sandbox's envd token would. */
		aas_e2b_envd_token(t->token, id, account);
		return true;
	}
	aas_e2b_error(out, 401, "unauthorized access: the code interpreter needs the sandbox's envdAccessToken "
	              "(X-Access-Token) or its trafficAccessToken (E2B-Traffic-Access-Token)");
	return false;
}

/* ---- replies in E2B's shapes ---- */

static void reply_body(struct aas_reply *out, unsigned int status, const char *ctype, const char *text)
{
	char *copy = strdup(text);

	out->status = status;
	out->response = copy ? MHD_create_response_from_buffer(strlen(copy), copy, MHD_RESPMEM_MUST_FREE) : NULL;
	if (!out->response) {
		free(copy);
		return;
	}
	MHD_add_response_header(out->response, "Content-Type", ctype);
	aas_reply_common_headers(out->response);
}

/* The code interpreter's errors are plain text (FastAPI's); the SDK shows the body of a 404. */
static void reply_text(struct aas_reply *out, unsigned int status, const char *text)
{
	reply_body(out, status, "text/plain; charset=utf-8", text);
}

/* A JSON body that is not an object or array (FastAPI's "OK" and null), as its text. */
static void reply_literal(struct aas_reply *out, unsigned int status, const char *json)
{
	reply_body(out, status, "application/json", json);
}

/*
 * A libsaas failure, msg its tenant's words (aas_tenant_message, maybe of
 * another thread), in the shapes the SDKs map to their classes: 404 as the
 * code server's text (NotFoundError), a timeout as 502 (TimeoutError), the
 * rest with their status and E2B's JSON error (SandboxError "STATUS TEXT",
 * with the body when the SDK shows diagnostics): 400 a bad request, 429 too
 * many contexts, 413 too large, 503 the code server busy, 500 it failed.
 */
static void reply_failure(struct aas_reply *out, int rc, const char *msg)
{
	if (rc == SAAS_ENOTFOUND)
		reply_text(out, 404, msg);
	else if (rc == SAAS_EINVAL)
		reply_text(out, 400, msg);
	else if (rc == SAAS_ETIMEOUT)
		aas_e2b_error(out, 502, "%s", msg);
	else
		aas_e2b_error(out, aas_status_for(rc), "%s", msg);
}

static json_t *context_json(const saas_code_context *c)
{
	return json_pack("{s:s,s:s,s:s}", "id", c->id, "language", c->language, "cwd", c->cwd);
}

/* {"language","cwd"} with nulls for absent (the Python SDK sends them). */
static const char *opt_string(json_t *o, const char *key, bool *ok)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
		*ok = false;
		return NULL;
	}
	return json_string_value(v);
}

static void contexts(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *rest)
{
	char cid[SAAS_CODE_CONTEXT_ID_MAX + 1], why[64];
	bool ok = true;
	int rc;

	if (!*rest && strcmp(r->method, "GET") == 0) {
		saas_code_context_list *l = NULL;
		json_t *a;
		if ((rc = saas_code_context_list_get(&l, t->client, t->id, 0)) < 0) {
			reply_failure(out, rc, aas_tenant_message(rc, "e2b: code contexts"));
			return;
		}
		a = json_array();
		for (size_t i = 0; a && i < l->count; i++)
			json_array_append_new(a, context_json(l->items[i]));
		saas_code_context_list_free(l);
		aas_e2b_json(out, 200, a);
		return;
	}
	if (!*rest && strcmp(r->method, "POST") == 0) {
		saas_code_context_options o = SAAS_CODE_CONTEXT_OPTIONS_INIT;
		saas_code_context *c = NULL;
		json_t *body = NULL;
		if (!aas_e2b_body(r, out, &body))
			return;
		o.language = opt_string(body, "language", &ok);
		o.cwd = opt_string(body, "cwd", &ok);
		if (!ok)
			reply_text(out, 400, "language and cwd must be strings");
		else if ((rc = saas_code_context_create(&c, t->client, t->id, &o, 0)) < 0)
			reply_failure(out, rc, aas_tenant_message(rc, "e2b: code contexts"));
		else
			aas_e2b_json(out, 200, context_json(c));
		saas_code_context_free(c);
		json_decref(body);
		return;
	}
	/* "/{id}" or "/{id}/restart" */
	size_t n = *rest == '/' ? strcspn(rest + 1, "/") : 0;
	if (n == 0 || n > SAAS_CODE_CONTEXT_ID_MAX) {
		reply_text(out, 404, "Not Found");
		return;
	}
	memcpy(cid, rest + 1, n);
	cid[n] = '\0';
	rest += 1 + n;
	if (strcmp(rest, "/restart") == 0 && strcmp(r->method, "POST") == 0) {
		if ((rc = saas_code_context_restart(t->client, t->id, cid, 0)) < 0)
			reply_failure(out, rc, aas_tenant_message(rc, "e2b: code contexts"));
		else
			reply_literal(out, 200, "null");
	} else if (!*rest && strcmp(r->method, "DELETE") == 0) {
		if ((rc = saas_code_context_delete(t->client, t->id, cid, 0)) < 0)
			reply_failure(out, rc, aas_tenant_message(rc, "e2b: code contexts"));
		else
			aas_e2b_json(out, 204, NULL);
	} else {
		snprintf(why, sizeof(why), "Method Not Allowed");
		reply_text(out, 405, why);
	}
}

/* ---- /execute: the run's events as NDJSON ---- */

struct run {
	saas_client *client;
	char sandbox[SAAS_ID_MAX + 1];
	char *code, *language, *context_id;
	char **env;
	struct aas_pipe pipe;
	pthread_t thread;
	bool running;
	int fd;                 /* the client's socket, a copy (aas_client_fd), or -1 */
	/* What a run failed with (set before its error line is written), and the events told before. */
	int rc;
	unsigned int events;
	char msg[512];
	/* The first bytes, read before the answer's status was chosen. */
	char first[4096];
	size_t first_len, first_off;
	struct aas_req *req;
};

static bool line(struct run *s, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	bool ok = text && aas_pipe_write(&s->pipe, text, strlen(text)) == 0 && aas_pipe_write(&s->pipe, "\n", 1) == 0;

	free(text);
	json_decref(o);
	return ok;
}

static void now_iso(char out[32])
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

/* Our MIME types back to E2B's result keys. */
static const struct {
	const char *mime, *key;
	bool json;
} keys[] = {
	{ "text/plain", "text", false },       { "text/html", "html", false },
	{ "text/markdown", "markdown", false }, { "image/svg+xml", "svg", false },
	{ "image/png", "png", false },          { "image/jpeg", "jpeg", false },
	{ "application/pdf", "pdf", false },    { "text/latex", "latex", false },
	{ "application/json", "json", true },   { "application/javascript", "javascript", false },
	{ "e2b/data", "data", true },           { "e2b/chart", "chart", true },
};

static json_t *result_json(const saas_code_result *res)
{
	json_t *o = json_pack("{s:s,s:b}", "type", "result", "is_main_result", res->is_main), *extra = NULL;

	for (size_t i = 0; o && i < res->count; i++) {
		const saas_code_format *f = res->formats[i];
		const char *key = NULL;
		bool as_json = false, binary = saas__wire_code_binary(f->mime);
		json_t *v;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strcmp(f->mime, keys[k].mime) == 0) {
				key = keys[k].key;
				as_json = keys[k].json;
			}
		if (binary) {
			char *b64 = saas_base64_encode(f->data, f->len);
			v = b64 ? json_string(b64) : NULL;
			saas_free(b64);
		} else if (as_json) {
			v = json_loadb((const char *)f->data, f->len, JSON_DECODE_ANY, NULL);
		} else {
			v = json_stringn((const char *)f->data, f->len);
		}
		if (!v)
			continue; /* a format E2B's shape cannot carry (not UTF-8): left out */
		if (key) {
			json_object_set_new(o, key, v);
		} else {
			if (!extra && (extra = json_object()))
				json_object_set_new(o, "extra", extra);
			if (extra)
				json_object_set_new(extra, f->mime, v);
			else
				json_decref(v);
		}
	}
	return o;
}

static int on_event(void *ud, const saas_code_event *ev)
{
	struct run *s = ud;
	char ts[32];
	bool ok = true;

	if (ev->type == SAAS_CODE_EVENT_TICK)
		return aas_fd_gone(s->fd); /* not an event of the run: the answer's status is not chosen by it */
	__atomic_add_fetch(&s->events, 1, __ATOMIC_SEQ_CST);
	switch (ev->type) {
	case SAAS_CODE_EVENT_COUNT:
		ok = line(s, json_pack("{s:s,s:I}", "type", "number_of_executions", "execution_count",
		                       (json_int_t)ev->execution_count));
		break;
	case SAAS_CODE_EVENT_STDOUT:
	case SAAS_CODE_EVENT_STDERR:
		/* Python's SDK reads the timestamp whenever a callback is set: always one. */
		now_iso(ts);
		ok = line(s, json_pack("{s:s,s:s%,s:s}", "type", ev->type == SAAS_CODE_EVENT_STDOUT ? "stdout" : "stderr",
		                       "text", ev->text, ev->len, "timestamp", ts));
		break;
	case SAAS_CODE_EVENT_RESULT:
		ok = line(s, result_json(ev->result));
		break;
	case SAAS_CODE_EVENT_ERROR:
		ok = line(s, json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", ev->error->name, "value",
		                       ev->error->value, "traceback", ev->error->traceback));
		break;
	default:
		break;
	}
	return !ok; /* the SDK left (its timeout, or a reset): cancel, which interrupts the run and keeps its context */
}

static void *run_worker(void *arg)
{
	struct run *s = arg;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *x = NULL;
	int rc;

	o.language = s->language;
	o.context_id = s->context_id;
	o.env = (const char *const *)s->env;
	o.timeout_ms = AAS_E2B_CODE_TIMEOUT_MS;
	o.on_event = on_event;
	o.userdata = s;
	rc = saas_code_run(&x, s->client, s->sandbox, s->code, &o, 0);
	if (rc < 0) {
		snprintf(s->msg, sizeof(s->msg), "%s", aas_tenant_message(rc, "e2b: running code"));
		__atomic_store_n(&s->rc, rc, __ATOMIC_SEQ_CST);
		/* After the first line the status is sent: the failure is an event E2B's server would send too. */
		line(s, json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", "UnexpectedEndOfExecution", "value", s->msg,
		                  "traceback", ""));
		line(s, json_pack("{s:s}", "type", "unexpected_end_of_execution"));
	} else {
		if (x->status == SAAS_CODE_TIMEDOUT)
			line(s, json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", "TimeoutError", "value",
			                  "the run outlived the server's bound and was interrupted; its context stays",
			                  "traceback", ""));
		line(s, json_pack("{s:s}", "type", "end_of_execution"));
	}
	saas_code_execution_free(x);
	aas_pipe_set(&s->pipe, true, false);
	return NULL;
}

static void run_free(void *cls)
{
	struct run *s = cls;
	size_t i;

	aas_pipe_set(&s->pipe, false, true);
	if (s->running)
		pthread_join(s->thread, NULL);
	aas_pipe_destroy(&s->pipe);
	if (s->fd >= 0)
		close(s->fd);
	saas_client_free(s->client);
	for (i = 0; s->env && s->env[i]; i++)
		free(s->env[i]);
	free(s->env);
	free(s->code);
	free(s->language);
	free(s->context_id);
	free(s);
}

static ssize_t run_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct run *s = cls;
	long n;

	(void)pos;
	if (s->first_off < s->first_len) {
		size_t k = s->first_len - s->first_off < max ? s->first_len - s->first_off : max;
		memcpy(buf, s->first + s->first_off, k);
		s->first_off += k;
		return (ssize_t)k;
	}
	n = aas_pipe_read(&s->pipe, buf, max);
	if (n > 0)
		return (ssize_t)n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static bool env_of(json_t *body, char ***out, struct aas_reply *reply)
{
	json_t *env = json_object_get(body, "env_vars"), *v;
	const char *k;
	size_t n = 0;

	*out = NULL;
	if (!env || json_is_null(env))
		return true;
	if (!json_is_object(env) || json_object_size(env) > 256 || !(*out = calloc(json_object_size(env) + 1, sizeof(char *)))) {
		reply_text(reply, 400, "env_vars must be an object of at most 256 strings");
		return false;
	}
	json_object_foreach(env, k, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) || !*k || strchr(k, '=') ||
		    asprintf(&(*out)[n], "%s=%s", k, json_string_value(v)) < 0) {
			(*out)[n] = NULL;
			reply_text(reply, 400, "env_vars must map names to strings");
			return false;
		}
		n++;
	}
	return true;
}

static void execute(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	struct run *s = NULL;
	json_t *body = NULL, *code;
	bool ok = true;
	const char *language, *context_id;
	long n;

	if (strcmp(r->method, "POST") != 0) {
		reply_text(out, 405, "Method Not Allowed");
		return;
	}
	if (!aas_e2b_body(r, out, &body))
		return;
	code = json_object_get(body, "code");
	language = opt_string(body, "language", &ok);
	context_id = opt_string(body, "context_id", &ok);
	if (!json_is_string(code) || !ok) {
		reply_text(out, 400, "code must be a string; language and context_id strings or null");
		goto out;
	}
	if (language && context_id) {
		reply_text(out, 400, "Only one of context_id or language can be provided");
		goto out;
	}
	if (!(s = calloc(1, sizeof(*s))) || aas_pipe_init(&s->pipe) < 0) {
		if (s)
			aas_pipe_destroy(&s->pipe);
		free(s);
		s = NULL;
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	s->fd = aas_client_fd(r);
	if (!env_of(body, &s->env, out))
		goto out;
	if (!(s->code = strdup(json_string_value(code))) || (language && !(s->language = strdup(language))) ||
	    (context_id && !(s->context_id = strdup(context_id)))) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	/* Its own client: the stream may outlive the request's (data.c frees that with the request). */
	if (saas_client_open_account(&s->client, aas_e2b_state.engine, t->account, 0) < 0) {
		s->client = NULL;
		aas_e2b_error_saas(out, saas_error_last()->code, "e2b: opening a sandbox's account");
		goto out;
	}
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", t->id);
	if (pthread_create(&s->thread, NULL, run_worker, s) != 0) {
		aas_e2b_error(out, 503, "the server cannot start a thread for the run; try again");
		goto out;
	}
	s->running = true;
	/*
	 * The status is chosen by the first bytes: a run refused before it began
	 * (an unknown context, a bad language) is the code server's 404 or 400,
	 * as the SDK expects; once a line came, the answer is a 200 stream.
	 */
	n = aas_pipe_read(&s->pipe, s->first, sizeof(s->first));
	if (n > 0 && __atomic_load_n(&s->rc, __ATOMIC_SEQ_CST) < 0 && __atomic_load_n(&s->events, __ATOMIC_SEQ_CST) == 0) {
		/* Failed before any event of the run: the error line is ours, the reply the status. */
		while (aas_pipe_read(&s->pipe, s->first, sizeof(s->first)) > 0)
			;
		reply_failure(out, s->rc, s->msg);
		goto out;
	}
	if (n <= 0) {
		aas_e2b_error(out, 502, "the run ended without an answer");
		goto out;
	}
	s->first_len = (size_t)n;
	if (!(out->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, run_read, s, run_free))) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	s = NULL; /* the response's */
	out->status = 200;
	MHD_add_response_header(out->response, "Content-Type", "application/json");
	aas_reply_common_headers(out->response);
out:
	if (s)
		run_free(s);
	json_decref(body);
}

void aas_e2b_code(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	if (strcmp(path, "/health") == 0)
		reply_literal(out, 200, "\"OK\"");
	else if (strcmp(path, "/execute") == 0)
		execute(r, out, t);
	else if (strncmp(path, "/contexts", 9) == 0 && (path[9] == '\0' || path[9] == '/'))
		contexts(r, out, t, path + 9);
	else
		reply_text(out, 404, "Not Found");
}
