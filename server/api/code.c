/*
 * Code contexts: POST /v1/sandboxes/{id}/code/run (the whole execution as
 * JSON, or with "Accept: text/event-stream" its events as they come), and
 * /v1/sandboxes/{id}/code/contexts: list, create, restart, delete.
 *
 * An event stream runs the code on a worker thread (saas_code_run blocks
 * with its callback) that writes the events into a bounded pipe the
 * connection reads; a client that leaves aborts the pipe, the callback then
 * cancels the run (its context stays), and the stream's slot is given back.
 * Streams share exec's slots (AAS_STREAMS_PER_ACCOUNT, AAS_STREAMS_MAX).
 *
 * A silent run writes nothing, so nothing would notice its client gone
 * before the run ended: the engine's ticks (SAAS_CODE_EVENT_TICK, every
 * second of silence) look at the client's socket and cancel then, and
 * every AAS_CODE_KEEPALIVE_MS of silence the stream gets a comment, so
 * that proxies keep it. A plain JSON run's ticks look at its socket too.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/internal.h"
#include "pipe.h"

/* A ": keepalive" comment after this much silence on a run's event stream (as exec's streams). */
#define AAS_CODE_KEEPALIVE_MS 15000

/* {"K":"V"} into a NULL-terminated "K=V" list (the library checks names and sizes); false after a 400. */
static bool env_of(json_t *body, char ***envp, struct aas_reply *out)
{
	json_t *env = json_object_get(body, "env"), *v;
	const char *k;
	char **list;
	size_t n = 0;

	*envp = NULL;
	if (!env || json_is_null(env))
		return true;
	if (!json_is_object(env) || json_object_size(env) > 256) {
		aas_reply_error(out, 400, "invalid_argument", "field \"env\" must be an object of at most 256 strings");
		return false;
	}
	if (!(list = calloc(json_object_size(env) + 1, sizeof(*list)))) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return false;
	}
	*envp = list;
	json_object_foreach(env, k, v) {
		size_t len;
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) || !*k || strchr(k, '=')) {
			aas_reply_error(out, 400, "invalid_argument",
			                "field \"env\" must map names (not empty, without '=') to strings without NUL");
			return false;
		}
		len = strlen(k) + json_string_length(v) + 2;
		if (!(list[n] = malloc(len))) {
			aas_reply_error(out, 500, "out_of_memory", "out of memory");
			return false;
		}
		snprintf(list[n++], len, "%s=%s", k, json_string_value(v));
	}
	return true;
}

static void env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* ---- the event stream of a run ---- */

struct run_stream {
	struct aas_cached_client *auth;
	saas_client *client;
	char account[SAAS_ID_MAX + 1];
	char sandbox[SAAS_ID_MAX + 1];
	char *code, *language, *context_id;
	char **env;
	saas_code_run_options o;
	struct aas_pipe pipe;
	pthread_t thread;
	bool running;
	int fd;                 /* the client's socket, a copy (aas_client_fd), or -1 */
	int64_t wrote_ms;       /* when the last event went into the pipe */
};

/* One event into the pipe (data stolen): false when the reader left. */
static bool put_event(struct run_stream *s, const char *name, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	char head[64];
	int n = snprintf(head, sizeof(head), "event: %s\ndata: ", name);
	bool ok;

	json_decref(data);
	if (!text)
		return false;
	ok = aas_pipe_write(&s->pipe, head, (size_t)n) == 0 && aas_pipe_write(&s->pipe, text, strlen(text)) == 0 &&
	     aas_pipe_write(&s->pipe, "\n\n", 2) == 0;
	free(text);
	s->wrote_ms = aas_now_ms();
	return ok;
}

/* A run's silence: false (cancel) once its client is gone; a comment now and then. */
static bool on_tick(struct run_stream *s)
{
	if (aas_fd_gone(s->fd))
		return false;
	if (aas_now_ms() - s->wrote_ms < AAS_CODE_KEEPALIVE_MS)
		return true;
	s->wrote_ms = aas_now_ms();
	return aas_pipe_write(&s->pipe, ": keepalive\n\n", 13) == 0;
}

static int on_event(void *ud, const saas_code_event *ev)
{
	struct run_stream *s = ud;
	bool ok = true;

	switch (ev->type) {
	case SAAS_CODE_EVENT_STDOUT:
	case SAAS_CODE_EVENT_STDERR:
		ok = put_event(s, ev->type == SAAS_CODE_EVENT_STDOUT ? "stdout" : "stderr",
		               json_pack("{s:s%}", "text", ev->text, ev->len));
		break;
	case SAAS_CODE_EVENT_RESULT:
		ok = put_event(s, "result", saas__wire_code_result(ev->result));
		break;
	case SAAS_CODE_EVENT_ERROR:
		ok = put_event(s, "error", saas__wire_code_error(ev->error));
		break;
	case SAAS_CODE_EVENT_COUNT:
		ok = put_event(s, "execution_count", json_pack("{s:I}", "execution_count", (json_int_t)ev->execution_count));
		break;
	case SAAS_CODE_EVENT_TICK:
		ok = on_tick(s);
		break;
	default:
		break;
	}
	return !ok; /* the client left: cancel, which interrupts the run and keeps its context */
}

static void *run_worker(void *arg)
{
	struct run_stream *s = arg;
	saas_code_execution *x = NULL;
	int rc = saas_code_run(&x, s->client, s->sandbox, s->code, &s->o, 0);

	if (rc == SAAS_OK)
		put_event(s, "end", saas__wire_code_execution(x, true));
	else
		put_event(s, "failed", json_pack("{s:{s:s,s:s}}", "error", "code", saas_error_name(rc), "message",
		                                 aas_tenant_message(rc, "running code")));
	saas_code_execution_free(x);
	aas_pipe_set(&s->pipe, true, false);
	return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct run_stream *s = cls;
	long n = aas_pipe_read(&s->pipe, buf, max);

	(void)pos;
	if (n > 0)
		return (ssize_t)n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls)
{
	struct run_stream *s = cls;

	aas_pipe_set(&s->pipe, false, true); /* wakes a worker waiting for room: its next event cancels */
	if (s->running)
		pthread_join(s->thread, NULL);
	aas_pipe_destroy(&s->pipe);
	if (s->fd >= 0)
		close(s->fd);
	aas_stream_slot_release(s->account);
	aas_auth_release(s->auth);
	env_free(s->env);
	free(s->code);
	free(s->language);
	free(s->context_id);
	free(s);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Answer with the run's events; the slot is taken (given to the stream, or released here). */
static void reply_events(struct aas_req *r, struct aas_reply *out, const char *code, const saas_code_run_options *o,
                         char **env)
{
	struct run_stream *s = calloc(1, sizeof(*s));

	if (s)
		s->fd = -1;
	if (!s || aas_pipe_init(&s->pipe) < 0 || !(s->code = strdup(code)) ||
	    (o->language && !(s->language = strdup(o->language))) ||
	    (o->context_id && !(s->context_id = dup_or_null(o->context_id)))) {
		if (s) {
			aas_pipe_destroy(&s->pipe);
			free(s->code), free(s->language), free(s);
		}
		env_free(env);
		aas_stream_slot_release(r->account_id);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	s->auth = r->auth;
	aas_auth_ref(s->auth);
	s->client = r->client;
	snprintf(s->account, sizeof(s->account), "%s", r->account_id);
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", r->route_id);
	s->env = env;
	s->o = *o;
	s->o.language = s->language;
	s->o.context_id = s->context_id;
	s->o.env = (const char *const *)env;
	s->o.on_event = on_event;
	s->o.userdata = s;
	s->fd = aas_client_fd(r);
	s->wrote_ms = aas_now_ms();
	if (pthread_create(&s->thread, NULL, run_worker, s) != 0) {
		stream_free(s);
		aas_reply_error(out, 503, "unavailable", "the server cannot start a thread for the stream; try again");
		return;
	}
	s->running = true;
	aas_reply_event_stream(out, stream_read, s, stream_free);
}

/* ---- the routes ---- */

/* A plain JSON run's events: none is written until the end, but a silent run whose client left is cancelled. */
static int on_json_event(void *ud, const saas_code_event *ev)
{
	return ev->type == SAAS_CODE_EVENT_TICK && aas_client_gone(ud);
}

static void reply_empty(struct aas_reply *out)
{
	out->status = 204;
	out->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (out->response)
		aas_reply_common_headers(out->response);
}

void aas_h_code_run(struct aas_req *r, struct aas_reply *out)
{
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *x = NULL;
	const char *code = NULL;
	int64_t max_output = 0, max_result = 0;
	json_t *body = NULL;
	char **env = NULL;
	bool present;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_string(body, "code", &code, out) ||
	    !aas_field_string(body, "language", &o.language, out) ||
	    !aas_field_string(body, "context_id", &o.context_id, out) ||
	    !aas_field_int(body, "timeout_ms", &o.timeout_ms, &present, out) ||
	    !aas_field_int(body, "max_output", &max_output, &present, out) ||
	    !aas_field_int(body, "max_result", &max_result, &present, out) || !env_of(body, &env, out))
		goto out;
	if (!code || !*code) {
		aas_reply_error(out, 400, "invalid_argument", "field \"code\" is required");
		goto out;
	}
	if (max_output < 0 || max_output > (int64_t)SAAS_CODE_OUTPUT_MAX || max_result < 0 ||
	    max_result > (int64_t)SAAS_CODE_RESULT_MAX) {
		aas_reply_error(out, 400, "invalid_argument", "\"max_output\" is at most %u and \"max_result\" at most %u",
		                SAAS_CODE_OUTPUT_MAX, SAAS_CODE_RESULT_MAX);
		goto out;
	}
	o.max_output = (size_t)max_output;
	o.max_result = (size_t)max_result;
	o.env = (const char *const *)env;
	if (aas_wants_events(r)) {
		/*
		 * The library checks the rest once the worker runs (a bad value is
		 * then a "failed" event); the commonest mistake is a 400 here.
		 */
		if (o.context_id && o.language) {
			aas_reply_error(out, 400, "invalid_argument", "give \"language\" or \"context_id\", not both");
			goto out;
		}
		if (!aas_stream_slot_take(r->account_id, out))
			goto out;
		reply_events(r, out, code, &o, env);
		env = NULL; /* the stream's */
		goto out;
	}
	o.on_event = on_json_event;
	o.userdata = r;
	if ((rc = saas_code_run(&x, r->client, r->route_id, code, &o, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json_stream(out, 200, saas__wire_code_execution(x, false));
out:
	saas_code_execution_free(x);
	env_free(env);
	json_decref(body);
}

/* The {cid} of ".../code/contexts/{cid}[/restart]": the segment after "contexts/". */
static bool context_id(struct aas_req *r, char *out, size_t size, struct aas_reply *reply)
{
	const char *p = strstr(r->path, "/code/contexts/");
	size_t n;

	if (!p) {
		aas_reply_error(reply, 404, "not_found", "no such route");
		return false;
	}
	p += strlen("/code/contexts/");
	n = strcspn(p, "/");
	if (n == 0 || n >= size) {
		aas_reply_error(reply, 400, "invalid_argument", "the context id is missing or longer than %d bytes",
		                SAAS_CODE_CONTEXT_ID_MAX);
		return false;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

void aas_h_code_context_list(struct aas_req *r, struct aas_reply *out)
{
	saas_code_context_list *l = NULL;
	int rc = saas_code_context_list_get(&l, r->client, r->route_id, 0);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_code_context_list(l));
	saas_code_context_list_free(l);
}

void aas_h_code_context_create(struct aas_req *r, struct aas_reply *out)
{
	saas_code_context_options o = SAAS_CODE_CONTEXT_OPTIONS_INIT;
	saas_code_context *c = NULL;
	json_t *body = NULL;
	char **env = NULL;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_string(body, "language", &o.language, out) ||
	    !aas_field_string(body, "cwd", &o.cwd, out) || !env_of(body, &env, out))
		goto out;
	o.env = (const char *const *)env;
	if ((rc = saas_code_context_create(&c, r->client, r->route_id, &o, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 201, saas__wire_code_context(c));
out:
	saas_code_context_free(c);
	env_free(env);
	json_decref(body);
}

void aas_h_code_context_restart(struct aas_req *r, struct aas_reply *out)
{
	char cid[SAAS_CODE_CONTEXT_ID_MAX + 1];
	int rc;

	if (!context_id(r, cid, sizeof(cid), out))
		return;
	if ((rc = saas_code_context_restart(r->client, r->route_id, cid, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_empty(out);
}

void aas_h_code_context_delete(struct aas_req *r, struct aas_reply *out)
{
	char cid[SAAS_CODE_CONTEXT_ID_MAX + 1];
	int rc;

	if (!context_id(r, cid, sizeof(cid), out))
		return;
	if ((rc = saas_code_context_delete(r->client, r->route_id, cid, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_empty(out);
}
