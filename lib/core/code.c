/*
 * Code contexts, the local provider: the engine talks HTTP/1.1 to the
 * sandbox's code server (SAAS_CODE_PORT on the guest's loopback) through
 * the driver's port tunnel, one connection a call, and reads its answer
 * with code_wire.c. No port is exposed for it: the tunnel is the engine's.
 *
 * A run's deadline covers everything from the connect to the last byte;
 * at the deadline, or when the caller's callback cancels, the connection is
 * closed, which the code server takes as "interrupt the run" (the context
 * and its variables stay: docs/code.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "core/code_wire.h"
#include "core/core.h"

/* How long a context call (create, list, restart, delete) may take: starting an interpreter takes seconds. */
#define CODE_CALL_TIMEOUT_MS 60000

static int code_connect(saas_client *c, const char *id, int *fd)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	void *ctx;
	int rc;

	*fd = -1;
	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	if (!e->driver->port_connect)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot reach a guest port",
		                   e->driver->name);
	if ((rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	if ((rc = e->driver->port_connect(ctx, sb.id, SAAS_CODE_PORT, fd)) < 0) {
		*fd = -1;
		if (rc == SAAS_EBACKEND)
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0,
			                   "sandbox '%s' has no code server on port %d (%s): its image lacks one, or it "
			                   "has not started (docs/code.md)",
			                   id, SAAS_CODE_PORT, saas_error_last()->message);
		return rc;
	}
	/* Non-blocking: every wait below is a poll() with what is left of the deadline. */
	if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "fcntl(O_NONBLOCK) on the code server's tunnel");
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/*
 * Wait until fd is ready for events, or until `until` (at most the deadline):
 * SAAS_OK (ready), 1 (until came first), SAAS_ETIMEOUT (the deadline,
 * unrecorded) or an error.
 */
static int wait_fd(int fd, short events, int64_t deadline_ms, int64_t until_ms)
{
	for (;;) {
		int64_t now = saas__now_ms(), left = deadline_ms - now;
		struct pollfd p = { fd, events, 0 };
		int n;

		if (left <= 0)
			return SAAS_ETIMEOUT;
		if (until_ms <= now)
			return 1;
		if (left > until_ms - now)
			left = until_ms - now;
		n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (n > 0)
			return SAAS_OK;
		if (n < 0 && errno != EINTR)
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "poll on the code server's tunnel");
	}
}

/* The request, whole; SAAS_ETIMEOUT unrecorded (the caller says what timed out). */
static int send_all(int fd, const char *p, size_t len, int64_t deadline_ms)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		int rc;

		if (n > 0) {
			p += n, len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if ((rc = wait_fd(fd, POLLOUT, deadline_ms, INT64_MAX)) < 0)
				return rc;
			continue;
		}
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, errno,
		                   "the code server hung up before it took the request");
	}
	return SAAS_OK;
}

/*
 * Read the answer into r until its body is done, the connection closes, or
 * the deadline: 0 (done), a callback's non-zero, SAAS_ETIMEOUT (unrecorded),
 * or an error (recorded, in the code server's terms). With a run (s), once
 * its events flow (a 200), a silence of SAAS_CODE_TICK_MS without an event
 * told is told as SAAS_CODE_EVENT_TICK: the guest's own keepalives come
 * only every 15 s, and output past max_output is not told, so a caller
 * waiting for an event to notice its client gone would wait for the run.
 */
static int read_answer(int fd, struct saas__code_reader *r, struct saas__code_run *s, int64_t deadline_ms)
{
	char buf[64 * 1024];
	int64_t quiet_since = saas__now_ms();
	unsigned long told = 0;
	int rc;

	while (!r->done) {
		ssize_t n;

		if (s && r->status == 200) {
			int64_t now = saas__now_ms();
			if (s->told != told) {
				told = s->told;
				quiet_since = now;
			} else if (now - quiet_since >= SAAS_CODE_TICK_MS) {
				rc = saas__code_run_tick(s);
				told = s->told;
				quiet_since = now;
				if (rc)
					return rc;
			}
		}
		n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0) {
			rc = saas__code_reader_feed(r, buf, (size_t)n);
		} else if (n == 0) {
			rc = saas__code_reader_eof(r);
			if (rc == 0 && !r->done)
				r->done = true;
			if (rc == 0)
				break;
		} else if (errno == EINTR) {
			continue;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int64_t until = s && r->status == 200 ? quiet_since + SAAS_CODE_TICK_MS : INT64_MAX;
			if ((rc = wait_fd(fd, POLLIN, deadline_ms, until)) < 0)
				return rc;
			continue;
		} else {
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, errno, "reading the code server's answer");
		}
		/* The reader's own complaint; a line's (the run's) is its caller's to say. */
		if (rc == SAAS_EPROTOCOL && r->why[0])
			return saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_GUEST, 0, "%s", r->why);
		if (rc == SAAS_ETOOBIG)
			return saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_GUEST, 0,
			                   "the code server's answer is over %u bytes", SAAS__CODE_BODY_MAX);
		if (rc == SAAS_ENOMEM)
			return saas__oom();
		if (rc)
			return rc;
	}
	return 0;
}

/* The code server's error text, made safe to show: printable ASCII, at most 200 bytes. */
static void error_text(char *out, size_t size, const saas__buf *body)
{
	size_t n = 0;

	for (size_t i = 0; i < body->len && n + 1 < size && n < 200; i++) {
		unsigned char ch = (unsigned char)body->data[i];
		out[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
	}
	while (n && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
	if (!n)
		snprintf(out, size, "(no text)");
}

/*
 * A non-2xx answer as a libsaas error, its text the code server's (made
 * safe): what it refuses is the caller's to fix and the tenant's to read, so
 * none of it is EBACKEND, which a server hides as its own failure.
 */
static int status_error(const struct saas__code_reader *r, const char *what)
{
	char text[256];

	error_text(text, sizeof(text), &r->body);
	switch (r->status) {
	case 404: /* "Context <id> not found" */
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 404, "%s: %s", what, text);
	case 400: /* a language it has not, a cwd that is no directory, a default context deleted */
	case 422:
		return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, r->status, "%s: %s", what, text);
	case 409: /* its --max-contexts */
	case 429:
		saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, r->status, "%s: %s", what, text);
		saas__error_set_limit("code_contexts", 0);
		return SAAS_ELIMIT;
	case 413: /* its --max-body */
	case 431:
		return saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, r->status, "%s: %s", what, text);
	case 503: /* starting (its default context warming up), or its --max-connections */
		return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_GUEST, 503, "%s: the code server is busy: %s; try again", what,
		                   text);
	default:
		/* A kernel that cannot start (500 "cannot start a python kernel: ..."), or the code server's own fault. */
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, r->status, "%s: the code server failed (%d): %s", what,
		                   r->status, text);
	}
}

/* "METHOD PATH" with a JSON body (or none), the connection closed after the answer. */
static char *request_text(const char *method, const char *path, const char *body, size_t *len)
{
	saas__buf b = SAAS__BUF_INIT;
	size_t blen = body ? strlen(body) : 0;

	if (saas__buf_printf(&b,
	                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: libsaas/%s\r\nConnection: close\r\n"
	                     "Content-Length: %zu\r\n%s\r\n",
	                     method, path, SAAS_CODE_PORT, SAAS_VERSION_STRING, blen,
	                     body ? "Content-Type: application/json\r\n" : "") < 0 ||
	    (blen && saas__buf_put(&b, body, blen) < 0)) {
		saas__buf_free(&b);
		return NULL;
	}
	return saas__buf_detach(&b, len);
}

/*
 * One context call: its answer's body (a 2xx's, kept whole up to
 * SAAS__CODE_BODY_MAX) into *answer when asked, or the error.
 */
static int call(saas_client *c, const char *id, const char *method, const char *path, json_t *body, const char *what,
                saas__buf *answer)
{
	int64_t deadline = saas__now_ms() + CODE_CALL_TIMEOUT_MS;
	struct saas__code_reader r;
	char *text = NULL, *req = NULL;
	size_t len = 0;
	int fd = -1, rc;

	saas__code_reader_init(&r, false, 0, NULL, NULL);
	if (body && !(text = json_dumps(body, JSON_COMPACT))) {
		rc = saas__oom();
		goto out;
	}
	if (!(req = request_text(method, path, text, &len))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = code_connect(c, id, &fd)) < 0)
		goto out;
	if ((rc = send_all(fd, req, len, deadline)) == 0)
		rc = read_answer(fd, &r, NULL, deadline);
	if (rc == SAAS_ETIMEOUT) {
		rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "%s: the code server did not answer in %d s", what,
		                 CODE_CALL_TIMEOUT_MS / 1000);
		goto out;
	}
	if (rc < 0)
		goto out;
	if (r.status < 200 || r.status > 299) {
		rc = status_error(&r, what);
		goto out;
	}
	if (answer) {
		*answer = r.body;
		memset(&r.body, 0, sizeof(r.body));
	}
out:
	if (fd >= 0)
		close(fd);
	saas__code_reader_free(&r);
	free(req);
	free(text);
	return rc;
}

/* A guest path: absolute as given, relative under the workspace. */
static char *guest_path(const char *p)
{
	char *out;

	if (!p)
		return saas__strdup(SAAS_WORKSPACE);
	if (*p == '/')
		return saas__strdup(p);
	if (asprintf(&out, "%s/%s", SAAS_WORKSPACE, p) < 0)
		return NULL;
	return out;
}

/* {"NAME":"VALUE",...} of a checked "NAME=VALUE" list (NULL: none). */
static int env_object(json_t *o, const char *key, const char *const *env)
{
	json_t *e;

	if (!env || !*env)
		return 0;
	if (!(e = json_object()) || json_object_set_new(o, key, e) < 0)
		return saas__oom();
	for (; *env; env++) {
		const char *eq = strchr(*env, '=');
		if (json_object_setn_new(e, *env, (size_t)(eq - *env), json_string(eq + 1)) < 0)
			return saas__oom();
	}
	return 0;
}

int saas__local_code_context_create(saas_client *c, const char *id, const saas_code_context_options *o,
                                    saas_code_context **out)
{
	saas_code_context_list *have = NULL;
	saas__buf answer = SAAS__BUF_INIT;
	json_t *body = json_object();
	char *cwd = guest_path(o->cwd), why[256];
	int rc;

	if (!body || !cwd || json_object_set_new(body, "language", json_string(o->language ? o->language : "python")) < 0 ||
	    json_object_set_new(body, "cwd", json_string(cwd)) < 0) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = env_object(body, "env_vars", o->env)) < 0)
		goto out;
	/* The bound is the engine's: a guest that would hold more is not asked to. */
	if ((rc = saas__local_code_context_list(c, id, &have)) < 0)
		goto out;
	if (have->count >= SAAS_CODE_CONTEXTS_MAX) {
		rc = saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, 0,
		                 "sandbox '%s' holds %u code contexts, the most it may; delete one first", id,
		                 SAAS_CODE_CONTEXTS_MAX);
		saas__error_set_limit("code_contexts", 0);
		goto out;
	}
	if ((rc = call(c, id, "POST", "/contexts", body, "creating a code context", &answer)) < 0)
		goto out;
	if ((rc = saas__code_context_parse(out, answer.data ? answer.data : "", answer.len, why, sizeof(why))) ==
	    SAAS_EPROTOCOL)
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_GUEST, 0, "%s", why);
out:
	saas_code_context_list_free(have);
	saas__buf_free(&answer);
	json_decref(body);
	free(cwd);
	return rc;
}

int saas__local_code_context_list(saas_client *c, const char *id, saas_code_context_list **out)
{
	saas__buf answer = SAAS__BUF_INIT;
	char why[256];
	int rc;

	if ((rc = call(c, id, "GET", "/contexts", NULL, "listing code contexts", &answer)) < 0)
		goto out;
	/* Room over the bound: contexts made before it was lowered are still listed, but not without end. */
	if ((rc = saas__code_context_list_parse(out, answer.data ? answer.data : "", answer.len,
	                                        4 * SAAS_CODE_CONTEXTS_MAX, why, sizeof(why))) == SAAS_EPROTOCOL)
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_GUEST, 0, "%s", why);
out:
	saas__buf_free(&answer);
	return rc;
}

int saas__local_code_context_restart(saas_client *c, const char *id, const char *context_id)
{
	char path[SAAS_CODE_CONTEXT_ID_MAX + 32];

	/* The id's alphabet is checked ([A-Za-z0-9._-]): it goes into the path as it is. */
	snprintf(path, sizeof(path), "/contexts/%s/restart", context_id);
	return call(c, id, "POST", path, NULL, "restarting a code context", NULL);
}

int saas__local_code_context_delete(saas_client *c, const char *id, const char *context_id)
{
	char path[SAAS_CODE_CONTEXT_ID_MAX + 32];

	snprintf(path, sizeof(path), "/contexts/%s", context_id);
	return call(c, id, "DELETE", path, NULL, "deleting a code context", NULL);
}

/* The longest NDJSON line a run reads: a result of max_result as base64, or a text of max_output escaped, and room. */
static size_t line_bound(size_t max_output, size_t max_result)
{
	size_t big = max_result > max_output ? max_result : max_output;

	return big / 3 * 4 + (64u << 10);
}

int saas__local_code_run(saas_client *c, const char *id, const char *code, const saas_code_run_options *o,
                         saas_code_execution **out)
{
	int64_t t0 = saas__now_ms(), deadline = t0 + o->timeout_ms;
	struct saas__code_reader r;
	struct saas__code_run s;
	json_t *body = json_object();
	char *text = NULL, *req = NULL;
	size_t len = 0;
	int fd = -1, rc;

	memset(&s, 0, sizeof(s));
	saas__code_reader_init(&r, true, line_bound(o->max_output, o->max_result), saas__code_run_line, &s);
	if (!body || json_object_set_new(body, "code", json_string(code)) < 0 ||
	    (o->context_id && json_object_set_new(body, "context_id", json_string(o->context_id)) < 0) ||
	    (o->language && json_object_set_new(body, "language", json_string(o->language)) < 0)) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = env_object(body, "env_vars", o->env)) < 0)
		goto out;
	if (!(text = json_dumps(body, JSON_COMPACT)) || !(req = request_text("POST", "/execute", text, &len))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__code_run_init(&s, o->max_output, o->max_result, o->on_event, o->userdata)) < 0)
		goto out;
	if ((rc = code_connect(c, id, &fd)) < 0)
		goto out;
	if ((rc = send_all(fd, req, len, deadline)) == 0)
		rc = read_answer(fd, &r, &s, deadline);
	if (rc == SAAS_ETIMEOUT) {
		/* Closing the connection (below) is what interrupts the run; what came until now stands. */
		s.x->status = SAAS_CODE_TIMEDOUT;
		rc = SAAS_OK;
	} else if (rc > 0 && s.cancelled) {
		s.x->status = SAAS_CODE_CANCELLED;
		rc = SAAS_OK;
	} else if (rc == SAAS_EPROTOCOL && s.why[0]) {
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_GUEST, 0, "%s", s.why);
		goto out;
	} else if (rc < 0) {
		goto out;
	} else if (r.status != 200) {
		rc = status_error(&r, "running code");
		goto out;
	} else if (!s.ended) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0,
		                 "the code server ended its answer before the run's end (no end_of_execution)");
		goto out;
	} else {
		s.x->status = SAAS_CODE_DONE;
	}
	if (r.dropped)
		s.x->results_truncated = 1;
	s.x->duration_ms = saas__now_ms() - t0;
	*out = s.x;
	s.x = NULL;
out:
	if (fd >= 0)
		close(fd);
	saas_code_execution_free(s.x);
	saas__code_reader_free(&r);
	json_decref(body);
	free(req);
	free(text);
	return rc;
}
