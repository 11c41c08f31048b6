/*
 * MCP over Streamable HTTP at /v1/mcp: the transport only. The protocol and
 * the tools are mcp/ (aas_mcp), shared with the stdio server.
 *
 * POST carries one JSON-RPC message (or, in 2025-03-26, a batch). A request gets its response
 * as application/json (or as one SSE event when the client accepts only
 * text/event-stream); notifications and responses get 202 and no body.
 * A request whose handling sends notifications (a create_sandbox with a
 * progressToken) is answered with an event stream instead: the call runs on a
 * thread of its own, and its notifications/progress and then its response are
 * written as events as they happen (never buffered: Cache-Control: no-cache,
 * X-Accel-Buffering: no).
 *
 * notifications/cancelled (POSTed on the same session) flags the request it
 * names if it is still running; a cancelled request gets no response (the
 * event stream ends without it; a plain request gets an empty event stream),
 * and a sandbox its create_sandbox made is destroyed (mcp/).
 * initialize issues an Mcp-Session-Id; every later POST must carry it (400
 * without, 404 when unknown or expired, so clients initialize again). DELETE
 * ends a session. GET is 405: the server never starts a stream of its own.
 *
 * Keys travel per request, as with the REST API. initialize, tools/list and
 * get_service_info need none; a keyless call of another tool is a tool result
 * with isError (never a 401, which would send clients into OAuth). So that an
 * anonymous client cannot make the server parse and answer much, the HTTP
 * layer looks the key up before it reads the body (AAS_R_KEY): without a valid
 * one, a body is at most AAS_ANON_BODY_MAX bytes. A batch is refused whole
 * unless the session's protocol version has batches (2025-03-26), and holds
 * at most AAS_MCP_BATCH_MAX messages; initialize never comes in one.
 *
 * A browser page must not drive a local server: a request with an Origin that
 * is neither this server's own loopback origin nor configured is refused (403).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "aas_mcp.h"
#include "mcp/mcp_http.h"
#include "preview/preview.h"

#define SESSION_IDLE_MS ((int64_t)24 * 3600 * 1000)
#define SESSION_PRUNE_MS ((int64_t)60 * 1000)

/* A request running on a session: what ctx.userdata points at. */
struct running {
	char session[SAAS_MCP_SESSION_ID_LEN + 1];
	struct stream *stream;   /* when it is answered as an event stream */
};

/* A request id in flight, and whether the client cancelled it. */
struct inflight {
	const struct running *run;
	json_t *id;
	bool cancelled;
	struct inflight *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* inflight, pruned_at_ms */
static struct inflight *inflight;
static saas_engine *engine_;
static unsigned int port_;
static char *origins_;       /* configured extra origins, comma-separated; NULL: none */

static const char key_hint[] =
	"an \"Authorization: Bearer aas_sk_...\" (or \"x-api-key: aas_sk_...\") HTTP header";

void aas_mcp_http_init(saas_engine *engine, const struct aas_config *cfg, unsigned int port)
{
	engine_ = engine;
	port_ = port;
	free(origins_);
	origins_ = cfg->mcp_origins ? strdup(cfg->mcp_origins) : NULL;
}

void aas_mcp_http_free(void)
{
	free(origins_);
	origins_ = NULL;
}

/* ---- sessions ---- */

/*
 * Sessions live in the engine's store (saas_mcp_session_*), so a session
 * initialized through one server is used through any other on the same
 * database. Pruning is one idempotent DELETE: each server runs it at most
 * once per SESSION_PRUNE_MS, whichever server that is.
 */
static int64_t pruned_at_ms;

static void sessions_prune(void)
{
	int64_t now = aas_now_ms(), last;

	pthread_mutex_lock(&mu);
	last = pruned_at_ms;
	if (now - last >= SESSION_PRUNE_MS)
		pruned_at_ms = now;
	pthread_mutex_unlock(&mu);
	if (now - last >= SESSION_PRUNE_MS && saas_mcp_session_prune(engine_, SESSION_IDLE_MS) < 0)
		aas_log(SAAS_LOG_WARN, "pruning idle MCP sessions failed: %s", saas_error_last()->message);
}

/* A new session's id into id (SAAS_MCP_SESSION_ID_LEN + 1 bytes); 0, or -1 after logging. */
static int session_new(char id[SAAS_MCP_SESSION_ID_LEN + 1], const char *version)
{
	char *made = NULL;

	sessions_prune();
	if (saas_mcp_session_create(&made, engine_, version, 0) < 0) {
		aas_log(SAAS_LOG_ERROR, "cannot start an MCP session: %s", saas_error_last()->message);
		return -1;
	}
	snprintf(id, SAAS_MCP_SESSION_ID_LEN + 1, "%s", made);
	saas_free(made);
	return 0;
}

/*
 * Touch a session and say whether its protocol version has batches: 1, 0 when
 * it is unknown or expired, -1 (logged) when the store cannot say.
 */
static int session_use(const char *id, bool *batches)
{
	char *version = NULL;
	int rc = saas_mcp_session_use(&version, engine_, id, SESSION_IDLE_MS);

	if (rc == SAAS_ENOTFOUND)
		return 0;
	if (rc < 0) {
		aas_log(SAAS_LOG_ERROR, "looking up an MCP session failed: %s", saas_error_last()->message);
		return -1;
	}
	*batches = aas_mcp_version_batches(version);
	saas_free(version);
	return 1;
}

/* ---- requests in flight, and their cancellation ---- */

/* Record the ids of the requests in msg as running in `run`. */
static void track(const struct running *run, const json_t *msg)
{
	const json_t *m, *id;
	struct inflight *f;
	size_t i;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			track(run, m);
		return;
	}
	if (!json_object_get(msg, "method") || !(id = json_object_get(msg, "id")) || !(f = calloc(1, sizeof(*f))))
		return; /* not a request (or no memory: it just cannot be cancelled) */
	f->run = run;
	f->id = json_incref((json_t *)id);
	pthread_mutex_lock(&mu);
	f->next = inflight;
	inflight = f;
	pthread_mutex_unlock(&mu);
}

static void untrack(const struct running *run)
{
	pthread_mutex_lock(&mu);
	for (struct inflight **pf = &inflight; *pf;) {
		struct inflight *f = *pf;
		if (f->run == run) {
			*pf = f->next;
			json_decref(f->id);
			free(f);
		} else {
			pf = &f->next;
		}
	}
	pthread_mutex_unlock(&mu);
}

static bool is_cancelled(void *userdata, const json_t *id)
{
	bool yes = false;

	pthread_mutex_lock(&mu);
	for (struct inflight *f = inflight; f && !yes; f = f->next)
		yes = f->run == userdata && f->cancelled && json_equal(f->id, (json_t *)id);
	pthread_mutex_unlock(&mu);
	return yes;
}

/* Flag what the notifications/cancelled in msg name on this session; unknown or finished ids are ignored. */
static void note_cancels(const char *session, const json_t *msg)
{
	const json_t *m, *id;
	size_t i;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			note_cancels(session, m);
		return;
	}
	if (!session || !(id = aas_mcp_cancelled_request(msg)))
		return;
	pthread_mutex_lock(&mu);
	for (struct inflight *f = inflight; f; f = f->next)
		if (strcmp(f->run->session, session) == 0 && json_equal(f->id, (json_t *)id))
			f->cancelled = true;
	pthread_mutex_unlock(&mu);
}

/* ---- checks ---- */

static bool origin_allowed(const char *origin)
{
	static const char *const hosts[] = { "127.0.0.1", "localhost", "[::1]" };
	char own[64];

	if (!origin)
		return true; /* not a browser */
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		snprintf(own, sizeof(own), "http://%s:%u", hosts[i], port_);
		if (strcasecmp(origin, own) == 0)
			return true;
	}
	if (origins_) {
		size_t n = strlen(origin);
		for (const char *p = origins_; *p;) {
			size_t len = strcspn(p, ",");
			while (len && p[0] == ' ') {
				p++;
				len--;
			}
			if ((len == 1 && *p == '*') || (len == n && strncasecmp(p, origin, n) == 0))
				return true;
			p += len;
			if (*p == ',')
				p++;
		}
	}
	return false;
}

static const char *header(struct aas_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* A JSON-RPC error with an HTTP status (transport-level refusals). */
static void reply_rpc_error(struct aas_reply *out, unsigned int status, int code, const char *msg)
{
	aas_reply_json(out, status, aas_mcp_error(NULL, code, msg));
}

static void sse_headers(struct MHD_Response *resp)
{
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
}

/* May the answer be an event stream? (A client that sends no Accept takes anything.) */
static bool accepts_sse(struct aas_req *r)
{
	const char *a = header(r, "Accept");

	return !a || !*a || strstr(a, "text/event-stream") || strstr(a, "*/*") || strstr(a, "text/*");
}

/* Answer as JSON unless the client takes only an event stream. */
static bool wants_sse(struct aas_req *r)
{
	const char *a = header(r, "Accept");

	if (!a || !*a || strstr(a, "application/json") || strstr(a, "*/*") || strstr(a, "application/*"))
		return false;
	return strstr(a, "text/event-stream") != NULL;
}

static void reply_message(struct aas_req *r, struct aas_reply *out, json_t *msg)
{
	char *text, *sse;

	if (!wants_sse(r)) {
		aas_reply_json(out, 200, msg);
		return;
	}
	text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(msg);
	if (!text || asprintf(&sse, "event: message\ndata: %s\n\n", text) < 0) {
		free(text);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	free(text);
	out->status = 200;
	out->response = MHD_create_response_from_buffer(strlen(sse), sse, MHD_RESPMEM_MUST_FREE);
	if (out->response)
		sse_headers(out->response);
}

/* An event stream with no events: the answer to a request that was cancelled. */
static void reply_no_events(struct aas_reply *out)
{
	out->status = 200;
	out->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (out->response)
		sse_headers(out->response);
}

/*
 * A call answered as an event stream: `thread` handles the message and
 * appends each notification, then the response, to `buf` as SSE events; the
 * connection's thread takes them out in stream_read() as they come. The
 * response's free callback joins the thread, so nothing outlives the request.
 */
struct stream {
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* more in buf, or eof */
	char *buf;
	size_t off, len, cap;    /* unsent: buf[off, len) */
	bool eof;                /* the call is over: nothing more comes */
	bool started;            /* the thread runs (and must be joined) */
	pthread_t thread;
	json_t *msg;
	aas_mcp_ctx ctx;
	struct aas_cached_client *auth; /* keeps ctx.client alive */
	struct running run;
};

/* Append one message as an event; takes msg. */
static void stream_push(struct stream *s, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
	size_t need;

	json_decref(msg);
	if (!text)
		return;
	need = strlen(text) + sizeof("event: message\ndata: \n\n");
	pthread_mutex_lock(&s->mu);
	if (s->off == s->len)
		s->off = s->len = 0;
	if (s->len + need > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *p;
		while (cap < s->len + need)
			cap *= 2;
		if (!(p = realloc(s->buf, cap))) {
			pthread_mutex_unlock(&s->mu);
			free(text);
			return;
		}
		s->buf = p;
		s->cap = cap;
	}
	s->len += (size_t)snprintf(s->buf + s->len, s->cap - s->len, "event: message\ndata: %s\n\n", text);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	free(text);
}

static void stream_notify(void *userdata, json_t *msg)
{
	stream_push(((struct running *)userdata)->stream, msg);
}

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	json_t *resp = aas_mcp_handle(&s->ctx, s->msg);

	if (resp)
		stream_push(s, resp);
	untrack(&s->run);
	pthread_mutex_lock(&s->mu);
	s->eof = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* MHD's content reader: block until an event or the end (one thread per connection allows it). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	size_t n;

	(void)pos;
	pthread_mutex_lock(&s->mu);
	while (s->off == s->len && !s->eof)
		pthread_cond_wait(&s->cv, &s->mu);
	if (s->off == s->len) {
		pthread_mutex_unlock(&s->mu);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(buf, s->buf + s->off, n);
	s->off += n;
	pthread_mutex_unlock(&s->mu);
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;

	/* The client may be gone; the call still runs to its end (a disconnect is not a cancellation). */
	if (s->started)
		pthread_join(s->thread, NULL);
	untrack(&s->run);
	aas_auth_release(s->auth);
	json_decref(s->msg);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->buf);
	free(s);
}

/* Answer msg as an event stream of its notifications and its response; false (nothing replied) when it cannot. */
static bool reply_stream(struct aas_req *r, struct aas_reply *out, const aas_mcp_ctx *ctx, const char *session,
                         json_t *msg)
{
	struct stream *s = calloc(1, sizeof(*s));
	struct MHD_Response *resp;

	if (!s)
		return false;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	snprintf(s->run.session, sizeof(s->run.session), "%s", session);
	s->run.stream = s;
	s->msg = json_incref(msg);
	s->ctx = *ctx;
	s->ctx.notify = stream_notify;
	s->ctx.userdata = &s->run;
	s->auth = r->auth;
	aas_auth_ref(s->auth);
	if (!(resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s, stream_free))) {
		stream_free(s);
		return false;
	}
	track(&s->run, msg);
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		MHD_destroy_response(resp); /* stream_free */
		return false;
	}
	s->started = true;
	sse_headers(resp);
	out->status = 200;
	out->response = resp;
	return true;
}

static void reply_empty(struct aas_reply *out, unsigned int status)
{
	out->status = status;
	out->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (out->response)
		MHD_add_response_header(out->response, "Cache-Control", "no-store");
}

/* Origin and MCP-Protocol-Version, common to POST and DELETE; false after replying. */
static bool precheck(struct aas_req *r, struct aas_reply *out)
{
	const char *v = header(r, "MCP-Protocol-Version");
	char msg[160];

	if (!origin_allowed(header(r, "Origin"))) {
		reply_rpc_error(out, 403, AAS_MCP_INVALID_REQUEST,
		                "Forbidden: this Origin may not use the MCP endpoint (see --mcp-allowed-origins)");
		return false;
	}
	if (v && !aas_mcp_version_supported(v)) {
		snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version \"%.32s\" (supported: "
		         "2025-11-25, 2025-06-18, 2025-03-26)", v);
		reply_rpc_error(out, 400, AAS_MCP_INVALID_REQUEST, msg);
		return false;
	}
	return true;
}

/* Mcp-Session-Id present and known (and whether its version has batches); false after replying 400 or 404. */
static bool check_session(struct aas_req *r, struct aas_reply *out, bool *batches)
{
	const char *sid = header(r, "Mcp-Session-Id");

	if (!sid || !*sid) {
		reply_rpc_error(out, 400, AAS_MCP_INVALID_REQUEST,
		                "Bad Request: Mcp-Session-Id header is required (send initialize first)");
		return false;
	}
	switch (session_use(sid, batches)) {
	case 1:
		return true;
	case 0:
		reply_rpc_error(out, 404, AAS_MCP_INVALID_REQUEST,
		                "Session not found: it ended or expired; send initialize again");
		return false;
	default:
		reply_rpc_error(out, 503, AAS_MCP_INTERNAL_ERROR,
		                "Service Unavailable: the session store cannot be reached; try again");
		return false;
	}
}

static void log_detail(const char *msg)
{
	aas_log(SAAS_LOG_WARN, "%s", msg);
}

void aas_h_mcp_post(struct aas_req *r, struct aas_reply *out)
{
	/* The key, if one came, was looked up before the body (AAS_R_KEY); an unknown one makes isError results, not 401s. */
	aas_mcp_ctx ctx = { .client = r->client, .client_status = r->key_status, .engine = engine_,
	                    .flags = AAS_MCP_SERVICE_INFO | AAS_MCP_TENANT, .key_hint = key_hint,
	                    .key_source = "this server's dashboard, its API keys page (/dashboard/keys)",
	                    .cancelled = is_cancelled, .log = log_detail,
	                    .ended = aas_preview_revoke };
	json_t *msg, *err = NULL, *resp;
	enum aas_mcp_kind kind;
	struct running run = { "", NULL };
	char sid[SAAS_MCP_SESSION_ID_LEN + 1];

	if (!precheck(r, out))
		return;
	if (!(msg = aas_mcp_parse(r->body, r->body_len, &err))) {
		/* -32700 is a syntax error; -32600 a body past the JSON bounds, too large as a longer one is. */
		bool bound = json_integer_value(json_object_get(json_object_get(err, "error"), "code")) ==
		             AAS_MCP_INVALID_REQUEST;
		aas_reply_json(out, bound ? 413 : 400, err);
		return;
	}
	kind = aas_mcp_kind(msg);
	if (kind == AAS_MCP_INVALID) {
		aas_reply_json(out, 400, aas_mcp_handle(&ctx, msg));
		json_decref(msg);
		return;
	}
	if (kind != AAS_MCP_INITIALIZE && !check_session(r, out, &ctx.batches)) {
		json_decref(msg);
		return;
	}
	/* A batch the session's version does not have, or too long a one: refused whole, before any of it counts. */
	if ((err = aas_mcp_batch_error(&ctx, msg))) {
		aas_reply_json(out, 400, err);
		json_decref(msg);
		return;
	}
	snprintf(run.session, sizeof(run.session), "%s", kind == AAS_MCP_INITIALIZE ? "" : header(r, "Mcp-Session-Id"));
	note_cancels(run.session, msg);
	if (kind == AAS_MCP_NOTIFICATION || kind == AAS_MCP_RESPONSE) {
		json_decref(msg);
		reply_empty(out, 202);
		return;
	}
	if (kind == AAS_MCP_REQUEST && aas_mcp_reports_progress(msg) && accepts_sse(r) &&
	    reply_stream(r, out, &ctx, run.session, msg)) {
		json_decref(msg);
		return;
	}
	ctx.userdata = &run;
	track(&run, msg);
	resp = aas_mcp_handle(&ctx, msg);
	untrack(&run);
	json_decref(msg);
	if (!resp) {
		/* Every request in it was cancelled: no response, but an HTTP request needs an answer. */
		reply_no_events(out);
		return;
	}
	if (kind == AAS_MCP_INITIALIZE && json_is_object(resp)) {
		const char *v = json_string_value(json_object_get(json_object_get(resp, "result"), "protocolVersion"));
		if (v) {
			if (session_new(sid, v) < 0) {
				json_decref(resp);
				reply_rpc_error(out, 503, AAS_MCP_INTERNAL_ERROR,
				                "Service Unavailable: a session could not be started; try again");
				return;
			}
			reply_message(r, out, resp);
			if (out->response)
				MHD_add_response_header(out->response, "Mcp-Session-Id", sid);
			return;
		}
	}
	reply_message(r, out, resp);
}

void aas_h_mcp_delete(struct aas_req *r, struct aas_reply *out)
{
	const char *sid;
	bool batches;

	if (!precheck(r, out))
		return;
	sid = header(r, "Mcp-Session-Id");
	if (!sid || !*sid) {
		reply_rpc_error(out, 400, AAS_MCP_INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required");
		return;
	}
	switch (session_use(sid, &batches)) {
	case 0:
		reply_rpc_error(out, 404, AAS_MCP_INVALID_REQUEST, "Session not found");
		return;
	case 1:
		if (saas_mcp_session_end(engine_, sid) == SAAS_OK)
			break;
		aas_log(SAAS_LOG_ERROR, "ending an MCP session failed: %s", saas_error_last()->message);
		/* fall through */
	default:
		reply_rpc_error(out, 503, AAS_MCP_INTERNAL_ERROR,
		                "Service Unavailable: the session store cannot be reached; try again");
		return;
	}
	reply_empty(out, 204);
}
