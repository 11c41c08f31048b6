/*
 * The remote provider's code contexts: the public calls over REST
 * (/v1/sandboxes/{id}/code/..., docs/rest.md). A run with an event callback
 * reads the server's event stream and tells each event as it comes; one
 * without reads the plain JSON answer. A callback that cancels ends the
 * read, and the server, seeing its client gone, interrupts the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/http.h"
#include "remote/sse.h"
#include "wire/wire.h"

/* How much longer than the run's own timeout the client waits for the server's answer. */
#define CODE_MARGIN_MS 30000L

static struct saas_remote *R(saas_client *c)
{
	return c->provider;
}

static json_t *env_json(const char *const *env)
{
	json_t *o = json_object();

	for (; o && env && *env; env++) {
		const char *eq = strchr(*env, '=');
		if (json_object_setn_new(o, *env, (size_t)(eq - *env), json_string(eq + 1)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* METHOD on the sandbox's path + suffix, with body (not stolen) or none; the answer's JSON in *ans (or NULL). */
static int call(saas_client *c, const char *method, const char *id, const char *suffix, json_t *body, json_t **ans,
                long timeout_ms)
{
	char *path = saas__remote_path("sandboxes", id, suffix);
	struct saas_http_req req = { .method = method, .path = path, .body = body, .timeout_ms = timeout_ms };
	int rc = path ? saas__http(R(c), &req, ans) : saas__oom();

	free(path);
	return rc;
}

/* METHOD on a context ("/code/contexts/ID" + tail), its answer not wanted. */
static int context_call(saas_client *c, const char *method, const char *id, const char *context_id, const char *tail)
{
	char suffix[SAAS_CODE_CONTEXT_ID_MAX + 40];
	json_t *ans = NULL;
	int rc;

	/* The id's alphabet ([A-Za-z0-9._-]) needs no escaping. */
	snprintf(suffix, sizeof(suffix), "/code/contexts/%s%s", context_id, tail);
	rc = call(c, method, id, suffix, NULL, &ans, 0);
	json_decref(ans);
	return rc;
}

int saas__remote_code_context_create(saas_client *c, const char *id, const saas_code_context_options *o,
                                     saas_code_context **out)
{
	json_t *body = json_object(), *ans = NULL;
	const char *bad = NULL;
	int rc;

	if (!body || (o->language && json_object_set_new(body, "language", json_string(o->language)) < 0) ||
	    (o->cwd && json_object_set_new(body, "cwd", json_string(o->cwd)) < 0) ||
	    (o->env && json_object_set_new(body, "env", env_json(o->env)) < 0)) {
		json_decref(body);
		return saas__oom();
	}
	if ((rc = call(c, "POST", id, "/code/contexts", body, &ans, 0)) == SAAS_OK)
		rc = saas__remote_decoded(saas__wire_code_context_decode(out, ans, &bad), bad);
	json_decref(ans);
	json_decref(body);
	return rc;
}

int saas__remote_code_context_list(saas_client *c, const char *id, saas_code_context_list **out)
{
	json_t *ans = NULL;
	const char *bad = NULL;
	int rc;

	if ((rc = call(c, "GET", id, "/code/contexts", NULL, &ans, 0)) == SAAS_OK)
		rc = saas__remote_decoded(saas__wire_code_context_list_decode(out, ans, &bad), bad);
	json_decref(ans);
	return rc;
}

int saas__remote_code_context_restart(saas_client *c, const char *id, const char *context_id)
{
	return context_call(c, "POST", id, context_id, "/restart");
}

int saas__remote_code_context_delete(saas_client *c, const char *id, const char *context_id)
{
	return context_call(c, "DELETE", id, context_id, "");
}

/* ---- a run's event stream ---- */

struct events {
	const saas_code_run_options *o;
	saas_code_execution *x;
	size_t results_cap;
	size_t max;                 /* the longest event */
	struct saas__sse_frame frame;
	bool ended, cancelled;
	int fail;
	int64_t told_ms;            /* when the caller was last told something */
};

static int ev_fail(struct events *s, const char *what)
{
	s->fail = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 200, "the server's code event stream %s", what);
	return 1;
}

static int tell(struct events *s, const saas_code_event *ev)
{
	s->told_ms = saas__now_ms();
	if (s->o->on_event && s->o->on_event(s->o->userdata, ev)) {
		s->cancelled = true;
		return 1;
	}
	return 0;
}

/* stdout/stderr: kept within max_output, as the engine keeps them (the server bounds them too). */
static int ev_output(struct events *s, int type, json_t *d)
{
	json_t *t = json_object_get(d, "text");
	char **data = type == SAAS_CODE_EVENT_STDOUT ? &s->x->stdout_data : &s->x->stderr_data;
	size_t *have = type == SAAS_CODE_EVENT_STDOUT ? &s->x->stdout_len : &s->x->stderr_len;
	size_t len, room;
	saas_code_event ev;
	char *p;

	if (!json_is_string(t))
		return ev_fail(s, "sent output without its text");
	len = json_string_length(t);
	room = s->o->max_output > *have ? s->o->max_output - *have : 0;
	if (len > room) {
		len = room;
		if (type == SAAS_CODE_EVENT_STDOUT)
			s->x->stdout_truncated = 1;
		else
			s->x->stderr_truncated = 1;
	}
	if (!len)
		return 0;
	if (!(p = realloc(*data, *have + len + 1))) {
		s->fail = saas__oom();
		return 1;
	}
	memcpy(p + *have, json_string_value(t), len);
	p[*have + len] = '\0';
	*data = p;
	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.text = p + *have;
	ev.len = len;
	*have += len;
	return tell(s, &ev);
}

static int ev_dispatch(struct events *s)
{
	json_error_t jerr;
	json_t *d;
	const char *bad = NULL;
	saas_code_event ev;
	const char *ev_name = s->frame.name;
	int rc = 0;

	/* An unnamed event is none of the API's (its frame forgets it, data and all). */
	if (!ev_name[0])
		return 0;
	if (!(d = json_loadb(s->frame.data.data ? s->frame.data.data : "", s->frame.data.len, 0, &jerr)))
		return ev_fail(s, "sent an event whose data is not JSON");
	memset(&ev, 0, sizeof(ev));
	if (strcmp(ev_name, "stdout") == 0 || strcmp(ev_name, "stderr") == 0) {
		rc = ev_output(s, ev_name[3] == 'o' ? SAAS_CODE_EVENT_STDOUT : SAAS_CODE_EVENT_STDERR, d);
	} else if (strcmp(ev_name, "result") == 0) {
		saas_code_result *r = NULL;
		if (s->x->result_count >= SAAS_CODE_RESULTS_MAX) {
			s->x->results_truncated = 1;
		} else if (SAAS__ARRAY_RESERVE(s->x->results, s->results_cap, s->x->result_count + 1) < 0) {
			s->fail = SAAS_ENOMEM;
			rc = 1;
		} else if (saas__wire_code_result_decode(&r, d, &bad) < 0) {
			rc = ev_fail(s, "sent a result that is not one");
		} else {
			s->x->results[s->x->result_count++] = r;
			ev.type = SAAS_CODE_EVENT_RESULT;
			ev.result = r;
			rc = tell(s, &ev);
		}
	} else if (strcmp(ev_name, "error") == 0) {
		saas_code_error *e = NULL;
		if (saas__wire_code_error_decode(&e, d, &bad) < 0) {
			rc = ev_fail(s, "sent an error that is not one");
		} else if (s->x->error) {
			free(e->name), free(e->value), free(e->traceback), free(e);
		} else {
			s->x->error = e;
			ev.type = SAAS_CODE_EVENT_ERROR;
			ev.error = e;
			rc = tell(s, &ev);
		}
	} else if (strcmp(ev_name, "execution_count") == 0) {
		json_t *n = json_object_get(d, "execution_count");
		if (!json_is_integer(n)) {
			rc = ev_fail(s, "sent a count that is not a number");
		} else {
			s->x->execution_count = (int64_t)json_integer_value(n);
			ev.type = SAAS_CODE_EVENT_COUNT;
			ev.execution_count = s->x->execution_count;
			rc = tell(s, &ev);
		}
	} else if (strcmp(ev_name, "end") == 0) {
		if (saas__wire_code_brief_decode(s->x, d, &bad) < 0)
			rc = ev_fail(s, "ended without a valid status");
		s->ended = true;
		rc = 1; /* nothing comes after */
	} else if (strcmp(ev_name, "failed") == 0) {
		json_t *e = json_object_get(d, "error");
		const char *name = json_string_value(json_object_get(e, "code"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		int code = name ? saas__error_from_name(name) : 0;
		s->fail = saas__error(code ? code : SAAS_EBACKEND, SAAS_ERRCLASS_HTTP, 200, "%s",
		                      msg ? msg : "the run failed");
		rc = 1;
	}
	/* Other events are a newer server's: ignored. */
	json_decref(d);
	return rc;
}

/* A comment (": keepalive", after a silence) is the engine's tick, told as it; an event is read. */
static int ev_on(void *ud, int what)
{
	struct events *s = ud;
	saas_code_event ev;

	if (what == SAAS__SSE_EVENT)
		return ev_dispatch(s);
	memset(&ev, 0, sizeof(ev));
	ev.type = SAAS_CODE_EVENT_TICK;
	return tell(s, &ev);
}

/*
 * A silent run: the caller is told a tick each second, as the engine tells its
 * own callers, so that it can cancel without waiting for the server's keepalive.
 */
static int ev_idle(void *ud)
{
	struct events *s = ud;
	saas_code_event ev;

	if (saas__now_ms() - s->told_ms < SAAS_CODE_TICK_MS)
		return 0;
	memset(&ev, 0, sizeof(ev));
	ev.type = SAAS_CODE_EVENT_TICK;
	return tell(s, &ev);
}

static int ev_write(void *ud, const void *data, size_t len)
{
	struct events *s = ud;
	/* An event's data lines together within the same bound as one line: an endless event is not the API. */
	int rc = saas__sse_frame_write(&s->frame, data, len, s->max, ev_on, s);

	if (rc == SAAS_ETOOBIG)
		return ev_fail(s, "sent an event over its bound");
	if (rc == SAAS_ENOMEM) {
		s->fail = saas__oom();
		return 1;
	}
	return rc;
}

static json_t *run_body(const char *code, const saas_code_run_options *o)
{
	json_t *b = json_pack("{s:s,s:I,s:I,s:I}", "code", code, "timeout_ms", (json_int_t)o->timeout_ms, "max_output",
	                      (json_int_t)o->max_output, "max_result", (json_int_t)o->max_result);

	if (b && ((o->language && json_object_set_new(b, "language", json_string(o->language)) < 0) ||
	          (o->context_id && json_object_set_new(b, "context_id", json_string(o->context_id)) < 0) ||
	          (o->env && json_object_set_new(b, "env", env_json(o->env)) < 0))) {
		json_decref(b);
		return NULL;
	}
	return b;
}

int saas__remote_code_run(saas_client *c, const char *id, const char *code, const saas_code_run_options *o,
                          saas_code_execution **out)
{
	struct saas_http_req req = { 0 };
	struct events s;
	json_t *body = run_body(code, o), *ans = NULL;
	char *path = saas__remote_path("sandboxes", id, "/code/run");
	const char *bad = NULL;
	int rc;

	memset(&s, 0, sizeof(s));
	if (!body || !path) {
		rc = saas__oom();
		goto out;
	}
	req.method = "POST";
	req.path = path;
	req.body = body;
	req.timeout_ms = (long)o->timeout_ms + CODE_MARGIN_MS;
	if (!o->on_event) {
		if ((rc = saas__http(R(c), &req, &ans)) == SAAS_OK)
			rc = saas__remote_decoded(saas__wire_code_execution_decode(out, ans, &bad), bad);
		goto out;
	}
	s.o = o;
	/* The largest event: a result of max_result in base64 and JSON, or an output chunk, and room. */
	s.max = (o->max_result > o->max_output ? o->max_result : o->max_output) / 3 * 4 * 2 + (64u << 10);
	if (!(s.x = calloc(1, sizeof(*s.x))) || !(s.x->stdout_data = calloc(1, 1)) || !(s.x->stderr_data = calloc(1, 1))) {
		rc = saas__oom();
		goto out;
	}
	s.x->execution_count = -1;
	req.accept = "text/event-stream";
	req.writer = ev_write;
	req.idle = ev_idle;
	req.writer_ud = &s;
	req.writer_says = true;
	s.told_ms = saas__now_ms();
	req.max = INT64_MAX;
	rc = saas__http(R(c), &req, NULL);
	if (s.fail) {
		rc = s.fail;
	} else if (s.cancelled) {
		s.x->status = SAAS_CODE_CANCELLED;
		rc = SAAS_OK;
	} else if (rc == SAAS_OK || s.ended) {
		rc = s.ended ? SAAS_OK
		             : saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 200,
		                           "the server's code event stream ended before the run's end");
	}
	if (rc == SAAS_OK) {
		*out = s.x;
		s.x = NULL;
	}
out:
	saas_code_execution_free(s.x);
	saas__sse_frame_free(&s.frame);
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}
