/*
 * Commands: POST /v1/sandboxes/{id}/exec (JSON, or an event stream of the
 * output as it comes), and /v1/executions/{id}: read (from a cursor), follow
 * (events), stdin, signal, cancel; the running list of a sandbox.
 *
 * An event stream holds a thread (one per connection) and a follower's buffer
 * of at most STREAM_BUF_MAX; how many are open at once is bounded per account
 * (AAS_STREAMS_PER_ACCOUNT: 429) and in all (AAS_STREAMS_MAX: 503). The
 * output it follows is the engine's, bounded per execution (saas/exec.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/internal.h"

/* Event streams open at once, per account and in all (docs/rest.md). */
#define AAS_STREAMS_PER_ACCOUNT 16
#define AAS_STREAMS_MAX 256
/* A follower stops filling its buffer past this; the client's reading drains it. */
#define STREAM_BUF_MAX ((size_t)256 << 10)
/* A stream with nothing to say says so this often, so that proxies and the client know it lives. */
#define STREAM_KEEPALIVE_MS 15000
/* The longest long poll of GET /v1/executions/{id}?wait_ms=. */
#define POLL_WAIT_MAX_MS 30000

/* {"K":"V"} into a NULL-terminated "K=V" list; false after replying 400. */
static bool parse_env(json_t *body, char ***envp, struct aas_reply *out)
{
	json_t *env = json_object_get(body, "env"), *v;
	const char *k;
	char **list;
	size_t n = 0;

	*envp = NULL;
	if (!env || json_is_null(env))
		return true;
	if (!json_is_object(env)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"env\" must be an object of strings");
		return false;
	}
	if (!(list = calloc(json_object_size(env) + 1, sizeof(*list)))) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return false;
	}
	*envp = list;
	json_object_foreach(env, k, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			aas_reply_error(out, 400, "invalid_argument", "field \"env.%s\" must be a string without NUL", k);
			return false;
		}
		if (!*k || strchr(k, '=')) {
			aas_reply_error(out, 400, "invalid_argument", "env names may not be empty or contain '='");
			return false;
		}
		size_t len = strlen(k) + json_string_length(v) + 2;
		if (!(list[n] = malloc(len))) {
			aas_reply_error(out, 500, "out_of_memory", "out of memory");
			return false;
		}
		snprintf(list[n++], len, "%s=%s", k, json_string_value(v));
	}
	return true;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* "stdin" is UTF-8 text; "stdin_base64" carries bytes. */
static bool parse_stdin(json_t *body, saas_exec_options *o, unsigned char **bytes, struct aas_reply *out)
{
	json_t *s = json_object_get(body, "stdin"), *b = json_object_get(body, "stdin_base64");

	*bytes = NULL;
	if (s && !json_is_null(s)) {
		if (!json_is_string(s)) {
			aas_reply_error(out, 400, "invalid_argument", "field \"stdin\" must be a string");
			return false;
		}
		o->stdin_data = json_string_value(s);
		o->stdin_len = json_string_length(s);
	}
	if (b && !json_is_null(b)) {
		size_t len;
		if (o->stdin_data) {
			aas_reply_error(out, 400, "invalid_argument", "give \"stdin\" or \"stdin_base64\", not both");
			return false;
		}
		if (!json_is_string(b) || saas_base64_decode((void **)bytes, &len, json_string_value(b), json_string_length(b)) < 0) {
			aas_reply_error(out, 400, "invalid_argument", "field \"stdin_base64\" must be a base64 string");
			return false;
		}
		o->stdin_data = *bytes;
		o->stdin_len = len;
	}
	return true;
}


/* ---- stream slots ---- */

struct slot {
	struct slot *next;
	char account[SAAS_ID_MAX + 1];
	unsigned int n;
};

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static unsigned int slots_total;

/* Take a stream slot for the account; false after replying 429 or 503. */
static bool slot_take(const char *account, struct aas_reply *out)
{
	struct slot *s;

	pthread_mutex_lock(&slots_mu);
	for (s = slots; s && strcmp(s->account, account); s = s->next)
		;
	if (slots_total >= AAS_STREAMS_MAX) {
		pthread_mutex_unlock(&slots_mu);
		aas_reply_error(out, 503, "unavailable",
		                "the server follows %u event streams already; try again later, or read without "
		                "\"Accept: text/event-stream\"",
		                AAS_STREAMS_MAX);
		return false;
	}
	if (s && s->n >= AAS_STREAMS_PER_ACCOUNT) {
		pthread_mutex_unlock(&slots_mu);
		aas_reply_limit(out, "streams", 1000,
		                "this account has %u event streams open, the most it may; close one, or poll "
		                "GET /v1/executions/{id} with a cursor",
		                AAS_STREAMS_PER_ACCOUNT);
		return false;
	}
	if (!s) {
		if (!(s = calloc(1, sizeof(*s)))) {
			pthread_mutex_unlock(&slots_mu);
			aas_reply_error(out, 500, "out_of_memory", "out of memory");
			return false;
		}
		snprintf(s->account, sizeof(s->account), "%s", account);
		s->next = slots;
		slots = s;
	}
	s->n++;
	slots_total++;
	pthread_mutex_unlock(&slots_mu);
	return true;
}

static void slot_release(const char *account)
{
	pthread_mutex_lock(&slots_mu);
	for (struct slot **p = &slots; *p; p = &(*p)->next) {
		struct slot *s = *p;
		if (strcmp(s->account, account))
			continue;
		slots_total--;
		if (--s->n == 0) {
			*p = s->next;
			free(s);
		}
		break;
	}
	pthread_mutex_unlock(&slots_mu);
}

bool aas_stream_slot_take(const char *account, struct aas_reply *out)
{
	return slot_take(account, out);
}

void aas_stream_slot_release(const char *account)
{
	slot_release(account);
}

/* ---- the event stream of an execution ---- */

/*
 * Events (docs/rest.md): "started" (the execution, without output), "stdout"
 * and "stderr" (a chunk: its offset and its bytes, UTF-8 or base64), "lost"
 * (a follower too far behind), "exit" (the execution, without output) and
 * "error". Each event's id is the cursor after it, "STDOUT,STDERR": what a
 * reconnect sends back (Last-Event-ID, or ?stdout_offset=&stderr_offset=).
 */
struct follower {
	struct aas_cached_client *auth;
	saas_client *client;
	char account[SAAS_ID_MAX + 1];
	char id[SAAS_ID_MAX + 1];
	saas_exec_cursor cur;
	char *buf;
	size_t len, off, cap;
	bool ended, oom;
	bool first;                    /* a waiting follow: stop at the first chunk, so that it goes out now */
};

static void put(struct follower *f, const char *s, size_t n)
{
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		char *p;
		while (cap < f->len + n)
			cap *= 2;
		if (!(p = realloc(f->buf, cap))) {
			f->oom = true;
			return;
		}
		f->buf = p;
		f->cap = cap;
	}
	memcpy(f->buf + f->len, s, n);
	f->len += n;
}

/* One event: its name, the cursor as its id, the JSON (stolen) as its data. */
static void put_event(struct follower *f, const char *name, json_t *data)
{
	char head[128];
	char *text = data ? json_dumps(data, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	int n = snprintf(head, sizeof(head), "event: %s\nid: %" PRIu64 ",%" PRIu64 "\ndata: ", name,
	                 f->cur.stdout_offset, f->cur.stderr_offset);

	json_decref(data);
	if (!text) {
		f->oom = true;
		return;
	}
	put(f, head, (size_t)n);
	put(f, text, strlen(text));
	put(f, "\n\n", 2);
	free(text);
}

static int on_chunk(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct follower *f = ud;

	/* The id must be the cursor after this chunk, whatever the engine moved meanwhile. */
	if (stream == SAAS_EXEC_STDOUT)
		f->cur.stdout_offset = offset + len;
	else
		f->cur.stderr_offset = offset + len;
	put_event(f, stream == SAAS_EXEC_STDOUT ? "stdout" : "stderr", saas__wire_exec_chunk(stream, offset, data, len));
	return f->first || f->oom || f->len >= STREAM_BUF_MAX;
}

static void on_gap(void *ud, int stream, uint64_t offset, uint64_t len)
{
	struct follower *f = ud;

	put_event(f, "lost", json_pack("{s:s,s:I,s:I}", "stream", stream == SAAS_EXEC_STDOUT ? "stdout" : "stderr",
	                               "offset", (json_int_t)offset, "length", (json_int_t)len));
}

static void on_end(void *ud, const saas_execution *x)
{
	struct follower *f = ud;

	put_event(f, "exit", saas__wire_execution_brief(x));
	f->ended = true;
}

/*
 * Fill the buffer: what the execution has for the cursor now; or, when it has
 * nothing yet, the first chunk to come, waiting for it up to the keepalive.
 * A waiting follow runs until the end or its deadline, whatever its callbacks
 * were given on the way: one that went on after a chunk would hold that chunk
 * here, out of the client's sight, until the command ended. So the wait stops
 * at the first chunk (it goes out at once), and the next fill takes whatever
 * followed it from both streams without waiting, so that a busy stdout
 * cannot keep stderr back.
 */
static void follow_more(struct follower *f)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	saas_exec_cursor cur = f->cur;
	int rc;

	cb.output = on_chunk;
	cb.lost = on_gap;
	cb.exit = on_end;
	cb.userdata = f;
	f->len = f->off = 0;
	f->first = false;
	rc = saas_execution_follow(NULL, f->client, f->id, &cur, &cb, 0, 0);
	if (rc == SAAS_OK && !f->len && !f->ended) {
		f->first = true;
		cur = f->cur;
		rc = saas_execution_follow(NULL, f->client, f->id, &cur, &cb, STREAM_KEEPALIVE_MS, SAAS_FOLLOW_WAIT);
	}
	if (rc < 0) {
		put_event(f, "error", json_pack("{s:{s:s,s:s}}", "error", "code", saas_error_name(rc), "message",
		                                aas_tenant_message(rc, "an execution's event stream")));
		f->ended = true;
	} else if (!f->len && !f->ended) {
		put(f, ": keepalive\n\n", 13);
	}
	if (f->oom)
		f->ended = true; /* what is buffered goes out; the client reconnects from its last id */
}

static ssize_t follower_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct follower *f = cls;
	size_t n;

	(void)pos;
	while (f->off == f->len) {
		if (f->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		follow_more(f);
	}
	n = f->len - f->off < max ? f->len - f->off : max;
	memcpy(buf, f->buf + f->off, n);
	f->off += n;
	return (ssize_t)n;
}

static void follower_free(void *cls)
{
	struct follower *f = cls;

	/* The client left or the stream ended; the command runs on either way. */
	slot_release(f->account);
	aas_auth_release(f->auth);
	free(f->buf);
	free(f);
}

/*
 * Answer with the event stream of execution `id` from `cur`, the slot taken
 * (given to the stream, or released here on failure). `started`: the first
 * event (stolen), or NULL.
 */
static void reply_events(struct aas_req *r, struct aas_reply *out, const char *id, const saas_exec_cursor *cur,
                         json_t *started)
{
	struct follower *f = calloc(1, sizeof(*f));

	if (!f) {
		json_decref(started);
		slot_release(r->account_id);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	f->auth = r->auth;
	aas_auth_ref(f->auth);
	f->client = r->client;
	snprintf(f->account, sizeof(f->account), "%s", r->account_id);
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->cur = *cur;
	if (started)
		put_event(f, "started", started);
	aas_reply_event_stream(out, follower_read, f, follower_free);
}

bool aas_reply_event_stream(struct aas_reply *out, MHD_ContentReaderCallback reader, void *cls,
                            MHD_ContentReaderFreeCallback free_cls)
{
	if (!(out->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, cls, free_cls))) {
		free_cls(cls);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return false;
	}
	out->status = 200;
	MHD_add_response_header(out->response, "Content-Type", "text/event-stream");
	MHD_add_response_header(out->response, "Cache-Control", "no-cache");
	MHD_add_response_header(out->response, "X-Accel-Buffering", "no");
	return true;
}

bool aas_wants_events(struct aas_req *r)
{
	const char *a = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");

	return a && strstr(a, "text/event-stream") && !strstr(a, "application/json");
}

/* ---- the routes ---- */

void aas_h_exec(struct aas_req *r, struct aas_reply *out)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	const char *command = NULL;
	unsigned char *stdin_bytes = NULL;
	char **env = NULL;
	json_t *body = NULL;
	bool background = false, stdin_open = false, events = aas_wants_events(r), slot = false, present;
	int64_t max_output = 0;
	unsigned int flags;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_string(body, "command", &command, out) ||
	    !aas_field_string(body, "cwd", &o.cwd, out) ||
	    !aas_field_int(body, "timeout", &o.timeout_s, &present, out) ||
	    !aas_field_int(body, "max_output", &max_output, &present, out) ||
	    !aas_field_bool(body, "background", &background, out) ||
	    !aas_field_bool(body, "stdin_open", &stdin_open, out) || !parse_env(body, &env, out) ||
	    !parse_stdin(body, &o, &stdin_bytes, out))
		goto out;
	if (!command || !*command) {
		aas_reply_error(out, 400, "invalid_argument", "field \"command\" is required");
		goto out;
	}
	if (o.timeout_s < 0 || max_output < 0 || max_output > (int64_t)SAAS_EXEC_OUTPUT_MAX) {
		aas_reply_error(out, 400, "invalid_argument", "\"timeout\" and \"max_output\" may not be negative or too large");
		goto out;
	}
	o.max_output = (size_t)max_output;
	o.env = (const char *const *)env;
	/*
	 * An event stream follows a background execution: the command is the
	 * engine's, the stream only reads it, so a client that loses the stream
	 * reconnects to the same command (GET /v1/executions/{id}/events).
	 */
	if (events && !(slot = slot_take(r->account_id, out)))
		goto out;
	flags = (background || events ? SAAS_EXEC_BACKGROUND : 0) | (stdin_open ? SAAS_EXEC_STDIN_OPEN : 0);
	rc = saas_exec(&x, r->client, r->route_id, command, &o, flags);
	if (rc < 0) {
		aas_reply_saas(out, rc);
	} else if (events) {
		saas_exec_cursor cur = { 0, 0 };
		slot = false; /* the stream's now */
		reply_events(r, out, x->id, &cur, saas__wire_execution_brief(x));
	} else {
		aas_reply_json_stream(out, background ? 202 : 200, saas__wire_execution(x));
	}
out:
	if (slot)
		slot_release(r->account_id);
	saas_execution_free(x);
	free_env(env);
	saas_free(stdin_bytes);
	json_decref(body);
}

/* A byte offset from the query (digits only), else 400; absent leaves *val. */
static bool query_offset(struct aas_req *r, const char *name, uint64_t *val, struct aas_reply *out)
{
	const char *v;
	char *end;
	unsigned long long n;

	if (!aas_query(r, name, &v, out))
		return false;
	if (!v)
		return true;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (!*v || *v < '0' || *v > '9' || *end || errno || strlen(v) > 19) {
		aas_reply_error(out, 400, "invalid_argument", "query parameter \"%s\" must be a byte offset", name);
		return false;
	}
	*val = n;
	return true;
}

/* The cursor of a reconnect: ?stdout_offset=&stderr_offset=, or else Last-Event-ID ("STDOUT,STDERR"). */
static bool read_cursor(struct aas_req *r, saas_exec_cursor *cur, bool *given, struct aas_reply *out)
{
	const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
	const char *so = NULL, *se = NULL;

	cur->stdout_offset = cur->stderr_offset = 0;
	if (!aas_query(r, "stdout_offset", &so, out) || !aas_query(r, "stderr_offset", &se, out) ||
	    !query_offset(r, "stdout_offset", &cur->stdout_offset, out) ||
	    !query_offset(r, "stderr_offset", &cur->stderr_offset, out))
		return false;
	*given = so || se;
	if (!*given && last && *last) {
		unsigned long long a, b;
		int n = 0;
		if (sscanf(last, "%19llu,%19llu%n", &a, &b, &n) != 2 || last[n]) {
			aas_reply_error(out, 400, "invalid_argument", "Last-Event-ID must be an event id of this stream");
			return false;
		}
		cur->stdout_offset = a;
		cur->stderr_offset = b;
		*given = true;
	}
	return true;
}

/* What a reader of GET /v1/executions/{id} from a cursor collects. */
struct collect {
	char *data[2];
	size_t len[2];
	uint64_t from[2];
	bool any, oom;
	bool first;                    /* the long poll's wait: stop at the first chunk */
};

static int collect_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct collect *c = ud;
	int s = stream == SAAS_EXEC_STDERR;
	char *p = realloc(c->data[s], c->len[s] + len + 1);

	if (!p) {
		c->oom = true;
		return 1;
	}
	if (!c->len[s])
		c->from[s] = offset;
	memcpy(p + c->len[s], data, len);
	c->len[s] += len;
	p[c->len[s]] = '\0';
	c->data[s] = p;
	c->any = true;
	return c->first;
}

static void collect_lost(void *ud, int stream, uint64_t offset, uint64_t len)
{
	struct collect *c = ud;

	(void)stream;
	(void)offset;
	(void)len;
	c->any = true;
}

/*
 * GET /v1/executions/{id}: the execution, its output so far while it runs.
 * With a cursor, the output from there (stdout_offset and stderr_offset say
 * where what is returned starts); with wait_ms, a long poll that returns as
 * soon as there is something new, or the end.
 */
void aas_h_execution_get(struct aas_req *r, struct aas_reply *out)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	struct collect col;
	saas_exec_cursor cur;
	saas_execution *x = NULL;
	unsigned int wait_ms = 0;
	bool given = false;
	int rc;

	memset(&col, 0, sizeof(col));
	if (!read_cursor(r, &cur, &given, out) || !aas_query_uint(r, "wait_ms", 0, POLL_WAIT_MAX_MS, &wait_ms, out))
		return;
	if (!given && !wait_ms) {
		if ((rc = saas_execution_get(&x, r->client, r->route_id)) < 0)
			aas_reply_saas(out, rc);
		else
			aas_reply_json_stream(out, 200, saas__wire_execution(x));
		saas_execution_free(x);
		return;
	}
	cb.output = collect_output;
	cb.lost = collect_lost;
	cb.userdata = &col;
	col.from[0] = cur.stdout_offset;
	col.from[1] = cur.stderr_offset;
	rc = saas_execution_follow(&x, r->client, r->route_id, &cur, &cb, 0, 0);
	/* Nothing new yet: wait for the first thing, at most wait_ms. */
	while (rc == SAAS_OK && wait_ms && !col.any && !col.oom && x->status == SAAS_EXEC_RUNNING) {
		saas_execution_free(x);
		x = NULL;
		cb.output = collect_output;
		/* A waiting follow goes on to the end or wait_ms unless its callback stops it at the first chunk. */
		col.first = true;
		rc = saas_execution_follow(&x, r->client, r->route_id, &cur, &cb, wait_ms, SAAS_FOLLOW_WAIT);
		wait_ms = 0;
	}
	if (rc < 0) {
		aas_reply_saas(out, rc);
	} else if (col.oom) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
	} else {
		json_t *o;
		for (int s = 0; s < 2; s++) {
			char **data = s ? &x->stderr_data : &x->stdout_data;
			size_t *len = s ? &x->stderr_len : &x->stdout_len;
			free(*data);
			*data = col.data[s] ? col.data[s] : strdup("");
			*len = col.len[s];
			col.data[s] = NULL;
		}
		if (!x->stdout_data || !x->stderr_data) {
			aas_reply_error(out, 500, "out_of_memory", "out of memory");
		} else if ((o = saas__wire_execution(x))) {
			json_object_set_new(o, "stdout_offset", json_integer((json_int_t)col.from[0]));
			json_object_set_new(o, "stderr_offset", json_integer((json_int_t)col.from[1]));
			aas_reply_json_stream(out, 200, o);
		} else {
			aas_reply_error(out, 500, "out_of_memory", "out of memory");
		}
	}
	free(col.data[0]);
	free(col.data[1]);
	saas_execution_free(x);
}

/* GET /v1/executions/{id}/events: follow it from a cursor, as an event stream. */
void aas_h_execution_events(struct aas_req *r, struct aas_reply *out)
{
	saas_exec_cursor cur;
	saas_execution *x = NULL;
	bool given;
	int rc;

	if (!read_cursor(r, &cur, &given, out))
		return;
	/* Unknown ids are a 404, not a stream with an error in it. */
	if ((rc = saas_execution_get(&x, r->client, r->route_id)) < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	saas_execution_free(x);
	if (!slot_take(r->account_id, out))
		return;
	reply_events(r, out, r->route_id, &cur, NULL);
}

/* The answer of stdin, signal and cancel: the execution as it stands, without its output. */
static void reply_brief(struct aas_req *r, struct aas_reply *out)
{
	saas_execution *x = NULL;
	int rc = saas_execution_get(&x, r->client, r->route_id);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_execution_brief(x));
	saas_execution_free(x);
}

/* POST /v1/executions/{id}/stdin {"stdin" | "stdin_base64", "close"} */
void aas_h_execution_stdin(struct aas_req *r, struct aas_reply *out)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	unsigned char *bytes = NULL;
	json_t *body = NULL;
	bool close = false;
	int rc;

	if (!aas_body_object(r, out, &body) || !parse_stdin(body, &o, &bytes, out) ||
	    !aas_field_bool(body, "close", &close, out))
		goto out;
	if (!o.stdin_len && !close) {
		aas_reply_error(out, 400, "invalid_argument", "send \"stdin\" or \"stdin_base64\", or \"close\": true");
		goto out;
	}
	if ((rc = saas_execution_stdin(r->client, r->route_id, o.stdin_data, o.stdin_len,
	                               close ? SAAS_STDIN_CLOSE : 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_brief(r, out);
out:
	saas_free(bytes);
	json_decref(body);
}

/* POST /v1/executions/{id}/signal {"signal": "TERM", "group": true} */
void aas_h_execution_signal(struct aas_req *r, struct aas_reply *out)
{
	const char *sig = NULL;
	json_t *body = NULL;
	bool group = true;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_string(body, "signal", &sig, out) ||
	    !aas_field_bool(body, "group", &group, out))
		goto out;
	if (!sig) {
		aas_reply_error(out, 400, "invalid_argument", "field \"signal\" is required: TERM, KILL, INT or HUP");
		goto out;
	}
	if ((rc = saas_execution_signal(r->client, r->route_id, sig, group ? SAAS_SIGNAL_GROUP : 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_brief(r, out);
out:
	json_decref(body);
}

/* POST /v1/executions/{id}/cancel */
void aas_h_execution_cancel(struct aas_req *r, struct aas_reply *out)
{
	int rc = saas_execution_cancel(r->client, r->route_id, 0);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		reply_brief(r, out);
}

/*
 * GET /v1/sandboxes/{id}/executions: the history, newest first, a page at a
 * time (limit, cursor); ?running=true: only the running ones, oldest first.
 */
void aas_h_execution_list(struct aas_req *r, struct aas_reply *out)
{
	saas_execution_list *list = NULL;
	const char *cursor;
	bool running = false;
	unsigned int limit = 0;
	int rc;

	if (!aas_query_bool(r, "running", &running, out) || !aas_query(r, "cursor", &cursor, out) ||
	    !aas_query_uint(r, "limit", 1, SAAS_EXECUTION_LIST_MAX, &limit, out))
		return;
	if (running && (cursor || limit)) {
		aas_reply_error(out, 400, "invalid_argument",
		                "running=true lists every running execution: it takes no limit or cursor");
		return;
	}
	if (cursor && !*cursor)
		cursor = NULL;
	if (running)
		rc = saas_execution_list_running(&list, r->client, r->route_id, 0);
	else
		rc = saas_execution_list_get(&list, r->client, r->route_id, cursor, limit, 0);
	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_execution_list(list));
	saas_execution_list_free(list);
}
