/*
 * The remote provider's executions as they run: an exec read as the server's
 * event stream (docs/rest.md), a follow from a cursor (the events route, or
 * one GET from the cursor when the caller does not wait), stdin, signals,
 * cancel and the running list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/http.h"
#include "remote/sse.h"
#include "wire/wire.h"

static struct saas_remote *R(saas_client *c)
{
	return c->provider;
}

/* Read an event stream; SAAS_OK at its end (or, with `timeout_ok`, when curl's timeout ends it). */
static int sse_read(struct saas__sse *s, struct saas_http_req *req, bool timeout_ok)
{
	int rc;

	req->accept = "text/event-stream";
	req->writer = saas__sse_write;
	req->writer_ud = s;
	req->writer_says = true;
	req->max = INT64_MAX;
	rc = saas__http(R(s->client), req, NULL);
	if (s->fail)
		rc = s->fail;
	else if (s->stopped && s->follow)
		rc = SAAS_OK; /* we ended the read */
	else if (rc == SAAS_ETIMEOUT && timeout_ok)
		rc = SAAS_OK;
	saas__sse_free(s);
	return rc;
}

static int get_execution(saas_client *c, const char *id, saas_execution **out)
{
	return c->ops->execution_get(c, id, out);
}

int saas__remote_exec_stream(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                             const saas_exec_callbacks *cb, unsigned int flags, saas_execution **out)
{
	struct saas_http_req req = { 0 };
	saas_exec_cursor cur = { 0, 0 };
	struct saas__sse s;
	char *path = saas__remote_path("sandboxes", id, "/exec");
	json_t *body = NULL;
	int64_t t = o->timeout_s ? o->timeout_s : SAAS_EXEC_TIMEOUT_DEFAULT;
	int rc;

	memset(&s, 0, sizeof(s));
	s.client = c;
	s.cb = cb;
	s.cur = &cur;
	s.cancel_on_stop = true;
	if (!path)
		return SAAS_ENOMEM;
	if ((rc = saas__remote_exec_body(command, o, flags, &body)) < 0)
		goto out;
	req.method = "POST";
	req.path = path;
	req.body = body;
	req.timeout_ms = (long)(t * 1000 + SAAS_REMOTE_EXEC_MARGIN_MS);
	if ((rc = sse_read(&s, &req, false)) < 0)
		goto out;
	if (!s.id[0] || !s.ended) {
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 200, "the server's event stream ended before the %s",
		                 s.id[0] ? "command" : "command started");
		goto out;
	}
	/* The exit event carries no output: the record, whole, is the answer (as saas_exec's). */
	if ((rc = get_execution(c, s.id, out)) == SAAS_OK && cb->exit)
		cb->exit(cb->userdata, *out);
out:
	json_decref(body);
	free(path);
	return rc;
}

int saas__remote_execution_follow(saas_client *c, const char *id, saas_exec_cursor *cur,
                                  const saas_exec_callbacks *cb, unsigned int wait_ms, unsigned int flags,
                                  saas_execution **out)
{
	struct saas_http_req req = { 0 };
	saas_execution *x = NULL;
	char *path = NULL;
	int rc;

	/* When the server's guest took it is not said here: what there is, at once (the wire counts it started). */
	if (flags & SAAS_FOLLOW_STARTED)
		flags = 0;
	if (flags & SAAS_FOLLOW_WAIT) {
		struct saas__sse s;
		memset(&s, 0, sizeof(s));
		s.client = c;
		s.cb = cb;
		s.cur = cur;
		s.follow = true;
		snprintf(s.id, sizeof(s.id), "%s", id);
		if (!(path = saas__remote_path("executions", id, "/events")))
			return SAAS_ENOMEM;
		char *full = NULL;
		if (asprintf(&full, "%s?stdout_offset=%llu&stderr_offset=%llu", path,
		             (unsigned long long)cur->stdout_offset, (unsigned long long)cur->stderr_offset) < 0) {
			free(path);
			return saas__oom();
		}
		free(path);
		path = full;
		req.method = "GET";
		req.path = path;
		req.idempotent = true;
		req.timeout_ms = wait_ms ? (long)wait_ms : SAAS_EXEC_FOLLOW_WAIT_MAX;
		if ((rc = sse_read(&s, &req, true)) < 0)
			goto out;
		if ((out || (s.ended && cb->exit)) && (rc = get_execution(c, id, &x)) < 0)
			goto out;
		if (s.ended && !s.stopped && cb->exit)
			cb->exit(cb->userdata, x);
	} else {
		/* What there is now: one read from the cursor. */
		const char *bad = NULL;
		json_t *ans = NULL;
		char *base = saas__remote_path("executions", id, NULL);
		if (!base)
			return SAAS_ENOMEM;
		if (asprintf(&path, "%s?stdout_offset=%llu&stderr_offset=%llu", base, (unsigned long long)cur->stdout_offset,
		             (unsigned long long)cur->stderr_offset) < 0) {
			free(base);
			return saas__oom();
		}
		free(base);
		req.method = "GET";
		req.path = path;
		req.idempotent = true;
		if ((rc = saas__http(R(c), &req, &ans)) == SAAS_OK)
			rc = saas__remote_decoded(saas__wire_execution_decode(&x, ans, &bad), bad);
		if (rc == SAAS_OK) {
			json_int_t so = json_integer_value(json_object_get(ans, "stdout_offset"));
			json_int_t se = json_integer_value(json_object_get(ans, "stderr_offset"));
			bool stop = false;
			if (so > (json_int_t)cur->stdout_offset && cb->lost)
				cb->lost(cb->userdata, SAAS_EXEC_STDOUT, cur->stdout_offset, (uint64_t)so - cur->stdout_offset);
			if (se > (json_int_t)cur->stderr_offset && cb->lost)
				cb->lost(cb->userdata, SAAS_EXEC_STDERR, cur->stderr_offset, (uint64_t)se - cur->stderr_offset);
			if (so >= 0 && x->stdout_len) {
				cur->stdout_offset = (uint64_t)so + x->stdout_len;
				stop = cb->output && cb->output(cb->userdata, SAAS_EXEC_STDOUT, (uint64_t)so, x->stdout_data,
				                                x->stdout_len);
			}
			if (se >= 0 && x->stderr_len && !stop) {
				cur->stderr_offset = (uint64_t)se + x->stderr_len;
				stop = cb->output && cb->output(cb->userdata, SAAS_EXEC_STDERR, (uint64_t)se, x->stderr_data,
				                                x->stderr_len);
			}
			if (!stop && x->status != SAAS_EXEC_RUNNING && cb->exit) {
				/* The record whole, as a local follow gives it. */
				saas_execution *whole = NULL;
				if ((rc = get_execution(c, id, &whole)) == SAAS_OK)
					cb->exit(cb->userdata, whole);
				saas_execution_free(x);
				x = whole;
			}
		}
		json_decref(ans);
		if (rc < 0)
			goto out;
	}
	rc = SAAS_OK;
	if (out) {
		*out = x;
		x = NULL;
	}
out:
	saas_execution_free(x);
	free(path);
	return rc;
}

/* A POST on /v1/executions/ID/SUFFIX whose answer is not needed. */
static int execution_post(saas_client *c, const char *id, const char *suffix, json_t *body)
{
	struct saas_http_req req = { 0 };
	char *path = saas__remote_path("executions", id, suffix);
	json_t *ans = NULL;
	int rc;

	if (!path) {
		json_decref(body);
		return SAAS_ENOMEM;
	}
	req.method = "POST";
	req.path = path;
	req.body = body;
	rc = saas__http(R(c), &req, &ans);
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}

int saas__remote_execution_stdin(saas_client *c, const char *id, const void *data, size_t len, unsigned int flags)
{
	json_t *body = json_object();
	char *b = NULL;

	if (!body)
		return saas__oom();
	if (len) {
		/* Always base64: stdin is bytes. */
		if (!(b = saas_base64_encode(data, len)) || json_object_set_new(body, "stdin_base64", json_string(b)) < 0)
			goto oom;
		saas_free(b);
		b = NULL;
	}
	if ((flags & SAAS_STDIN_CLOSE) && json_object_set_new(body, "close", json_true()) < 0)
		goto oom;
	return execution_post(c, id, "/stdin", body);
oom:
	saas_free(b);
	json_decref(body);
	return saas__oom();
}

int saas__remote_execution_signal(saas_client *c, const char *id, int signum, unsigned int flags)
{
	static const struct { int num; const char *name; } names[] = { { 1, "HUP" }, { 2, "INT" }, { 9, "KILL" }, { 15, "TERM" } };
	const char *name = NULL;
	json_t *body;

	for (size_t i = 0; i < SAAS_ARRAY_SIZE(names); i++)
		if (names[i].num == signum)
			name = names[i].name;
	if (!name)
		return saas__inval("signal %d cannot be sent", signum);
	if (!(body = json_pack("{s:s,s:b}", "signal", name, "group", (flags & SAAS_SIGNAL_GROUP) != 0)))
		return saas__oom();
	return execution_post(c, id, "/signal", body);
}

int saas__remote_execution_cancel(saas_client *c, const char *id)
{
	return execution_post(c, id, "/cancel", NULL);
}

/* GET a list of executions at `path` (owned: freed here). */
static int execution_list_at(saas_client *c, char *path, saas_execution_list **out)
{
	struct saas_http_req req = { 0 };
	saas_execution_list *list = NULL;
	const json_t *a, *v, *next;
	const char *bad = NULL;
	json_t *ans = NULL;
	size_t i;
	int rc;

	if (!path)
		return SAAS_ENOMEM;
	req.method = "GET";
	req.path = path;
	req.idempotent = true;
	if ((rc = saas__http(R(c), &req, &ans)) < 0)
		goto out;
	a = json_object_get(ans, "executions");
	if (!json_is_array(a)) {
		rc = saas__remote_decoded(SAAS_EPROTOCOL, "executions");
		goto out;
	}
	if (!(list = calloc(1, sizeof(*list))) || !(list->items = calloc(json_array_size(a) + 1, sizeof(*list->items)))) {
		rc = saas__oom();
		goto out;
	}
	json_array_foreach(a, i, v) {
		if ((rc = saas__remote_decoded(saas__wire_execution_decode(&list->items[i], v, &bad), bad)) < 0)
			goto out;
		list->count++;
	}
	next = json_object_get(ans, "next_cursor");
	if (json_is_string(next) && !(list->next_cursor = strdup(json_string_value(next)))) {
		rc = saas__oom();
		goto out;
	}
	*out = list;
	list = NULL;
out:
	saas_execution_list_free(list);
	json_decref(ans);
	free(path);
	return rc;
}

int saas__remote_execution_list_running(saas_client *c, const char *sandbox_id, saas_execution_list **out)
{
	return execution_list_at(c, saas__remote_path("sandboxes", sandbox_id, "/executions?running=true"), out);
}

int saas__remote_execution_list(saas_client *c, const char *sandbox_id, const char *cursor, unsigned int limit,
                                saas_execution_list **out)
{
	char *ecur = cursor ? saas__url_escape(cursor) : NULL, *suffix = NULL;
	int rc;

	if (cursor && !ecur)
		return saas__oom();
	if (asprintf(&suffix, "/executions?limit=%u%s%s", limit, ecur ? "&cursor=" : "", ecur ? ecur : "") < 0) {
		free(ecur);
		return saas__oom();
	}
	rc = execution_list_at(c, saas__remote_path("sandboxes", sandbox_id, suffix), out);
	free(ecur);
	free(suffix);
	return rc;
}
