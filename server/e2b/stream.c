/*
 * The server streams of E2B's daemon protocol (process.Process's Start and
 * Connect, filesystem.Filesystem's WatchDir): what they follow (a command's
 * execution, a terminal, a directory watcher's execution) turned into
 * Connect frames as the client reads, the keepalives and the deadline, the
 * per-account slots they hold, and a client that leaves. Split from
 * process.c so the watcher's stream (watch.c) is the same machinery.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

/* Streams open at once, in all and per account (each holds a connection's thread); more are refused. */
#define STREAMS_MAX 256
#define STREAMS_PER_ACCOUNT 32
/* The keepalive a stream sends after this much silence when the client names none (envd's default is 90 s). */
#define KEEPALIVE_DEFAULT_MS 50000
/*
 * A stream with nothing to send looks this often whether its client is
 * still there: one that disconnected frees its slot (and thread) within
 * this, not at the next keepalive.
 */
#define GONE_POLL_MS 1000
/*
 * A command's start event waits for its guest to run it (envd's comes after
 * the spawn), but no longer than this: past it the start goes out anyway
 * (the SDK gives up on a start after 60 s), the command still handed over.
 */
#define START_HOLD_MAX_MS 10000
/* A follower's buffer stops filling past this; the client's reading drains it. */
#define STREAM_BUF_MAX ((size_t)256 << 10)

/* A header's decimal value, at most max (digits only); def when absent or not one. */
uint64_t aas_e2b_header_uint(struct aas_req *r, const char *name, uint64_t max, uint64_t def)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
	uint64_t v = 0;

	if (!h || !*h || strlen(h) > 19)
		return def;
	for (const char *p = h; *p; p++) {
		if (*p < '0' || *p > '9')
			return def;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return v > max ? max : v;
}

/* ---- streams ---- */

static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned int streams;
/* The accounts with streams open, and how many each: at most STREAMS_MAX of them. */
static struct {
	char account[SAAS_ID_MAX + 1];
	unsigned int n;
} slots[STREAMS_MAX];

bool aas_e2b_slot_take(const char *account, struct aas_reply *out)
{
	size_t i, free_slot = STREAMS_MAX;
	bool ok = false;
	unsigned int mine = 0;

	pthread_mutex_lock(&streams_mu);
	for (i = 0; i < STREAMS_MAX; i++) {
		if (slots[i].n && strcmp(slots[i].account, account) == 0)
			break;
		if (!slots[i].n && free_slot == STREAMS_MAX)
			free_slot = i;
	}
	if (i == STREAMS_MAX)
		i = free_slot;
	/* Every stream is some account's, so a free slot exists while streams < STREAMS_MAX. */
	if (streams < STREAMS_MAX && i < STREAMS_MAX && slots[i].n < STREAMS_PER_ACCOUNT) {
		snprintf(slots[i].account, sizeof(slots[i].account), "%s", account);
		slots[i].n++;
		streams++;
		ok = true;
	} else if (i < STREAMS_MAX) {
		mine = slots[i].n;
	}
	pthread_mutex_unlock(&streams_mu);
	if (!ok && mine >= STREAMS_PER_ACCOUNT)
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "this account has %d streams open (commands, "
		                           "terminals, watches), the most it may; disconnect one (or run in the "
		                           "background and reconnect)",
		                           STREAMS_PER_ACCOUNT);
	else if (!ok)
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "%d streams are open on this server, the "
		                           "most it takes; try again", STREAMS_MAX);
	return ok;
}

void aas_e2b_slot_release(const char *account)
{
	pthread_mutex_lock(&streams_mu);
	for (size_t i = 0; i < STREAMS_MAX; i++) {
		if (slots[i].n && strcmp(slots[i].account, account) == 0) {
			slots[i].n--;
			streams--;
			break;
		}
	}
	pthread_mutex_unlock(&streams_mu);
}

struct stream {
	char account[SAAS_ID_MAX + 1];  /* its slot's */
	int fd;                         /* the connection's socket, to see the client leave; -1: unknown */
	saas_client *client;
	char exe[SAAS_ID_MAX + 1];
	saas_exec_cursor cur;
	struct aas_e2b_pty *pty;        /* a terminal's stream (a reference), else a command's */
	uint64_t pty_offset;
	bool watch, started;            /* a WatchDir stream (exe is its watcher), and its start sent */
	uint32_t pid;                   /* a command's, for its start event */
	int64_t start_by_ms;            /* a command's start event not sent yet: sent by then at the latest */
	struct aas_e2b_watch_parser parser;
	char failed[16];                /* the watcher's failure word, before its start */
	unsigned long events;
	unsigned char *buf;
	size_t len, off, cap;
	bool ended, oom, first, ending;
	int64_t deadline_ms;              /* Connect-Timeout-Ms from the start; 0: none */
	unsigned int keepalive_ms;
	int64_t quiet_since_ms;
};

static void put_bytes(struct stream *s, const void *data, size_t n)
{
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		unsigned char *p;
		while (cap < s->len + n)
			cap *= 2;
		if (!(p = realloc(s->buf, cap))) {
			s->oom = true;
			return;
		}
		s->buf = p;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
}

/* One frame of flags with the JSON message (stolen). */
static void put_frame(struct stream *s, unsigned int flags, json_t *msg)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	unsigned char *frame;
	size_t len;

	json_decref(msg);
	if (!text || !(frame = aas_connect_frame(flags, text, strlen(text), &len))) {
		free(text);
		s->oom = true;
		return;
	}
	put_bytes(s, frame, len);
	free(frame);
	free(text);
}

static void put_end_stream(struct stream *s, int code, const char *message)
{
	char *payload = aas_connect_end_payload(code, message);

	put_frame(s, AAS_CONNECT_FLAG_END, payload ? json_loads(payload, 0, NULL) : NULL);
	free(payload);
	s->ended = true;
}

/* A process event ({"event":{kind:body}}), or a watch's ({kind:body}: its oneof is the message's own). */
static void put_event(struct stream *s, const char *kind, json_t *body)
{
	if (s->watch)
		put_frame(s, 0, json_pack("{s:o}", kind, body ? body : json_object()));
	else
		put_frame(s, 0, json_pack("{s:{s:o}}", "event", kind, body ? body : json_object()));
}

/* A line of the watcher's: its start, its failure, or an event (as WatchDir's filesystem message). */
static int on_watch_line(void *ud, int kind, const char *type, const char *name)
{
	struct stream *s = ud;

	if (kind == AAS_E2B_WATCH_STARTED && !s->started) {
		s->started = true;
		put_event(s, "start", NULL);
	} else if (kind == AAS_E2B_WATCH_FAILED && !s->started) {
		snprintf(s->failed, sizeof(s->failed), "%s", name);
		return 1;
	} else if (kind == AAS_E2B_WATCH_EVENT && s->started) {
		if (++s->events > AAS_E2B_WATCH_EVENTS_MAX)
			return 1;
		put_event(s, "filesystem", json_pack("{s:s,s:s}", "name", name, "type", type));
	} else {
		return 1; /* out of order: not our watcher's output */
	}
	return 0;
}

/*
 * The end of a watch stream: its failure at the start as the SDK maps it
 * (a missing directory is FileNotFoundError, not one InvalidArgumentError),
 * the bound, or a watcher that ended by itself or spoke garbage.
 */
static void put_watch_end(struct stream *s, const char *why)
{
	if (strcmp(s->failed, "notfound") == 0)
		put_end_stream(s, AAS_CONNECT_NOT_FOUND, "the directory to watch does not exist");
	else if (strcmp(s->failed, "notdir") == 0)
		put_end_stream(s, AAS_CONNECT_INVALID_ARGUMENT, "the path to watch is not a directory");
	else if (*s->failed)
		put_end_stream(s, AAS_CONNECT_FAILED_PRECONDITION, "the directory could not be watched (inotify: too many "
		               "watches, or no permission)");
	else if (s->events > AAS_E2B_WATCH_EVENTS_MAX) {
		char msg[96];
		snprintf(msg, sizeof(msg), "a watch delivers at most %d events; watch again", AAS_E2B_WATCH_EVENTS_MAX);
		put_end_stream(s, AAS_CONNECT_RESOURCE_EXHAUSTED, msg);
	} else
		put_end_stream(s, AAS_CONNECT_INTERNAL, why);
}

static int on_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct stream *s = ud;
	char *b64;

	if (stream == SAAS_EXEC_STDOUT)
		s->cur.stdout_offset = offset + len;
	else
		s->cur.stderr_offset = offset + len;
	if (s->watch) {
		char why[128];
		/* Its stderr is Python's, not ours to pass on; its stdout is parsed as hostile. */
		if (stream == SAAS_EXEC_STDOUT && !s->ended &&
		    aas_e2b_watch_feed(&s->parser, data, len, on_watch_line, s, why, sizeof(why)) != 0)
			put_watch_end(s, "the watcher's output is not a watcher's: the watch ends");
		return s->first || s->oom || s->ended || s->len >= STREAM_BUF_MAX;
	}
	if (!(b64 = saas_base64_encode(data, len))) {
		s->oom = true;
		return 1;
	}
	put_event(s, "data", json_pack("{s:s}", stream == SAAS_EXEC_STDOUT ? "stdout" : "stderr", b64));
	saas_free(b64);
	return s->first || s->oom || s->len >= STREAM_BUF_MAX;
}

/* The end event as envd words it: "exit status N", or a kill's "signal: killed" with -1. */
static void on_exit_(void *ud, const saas_execution *x)
{
	struct stream *s = ud;
	char status[64];
	json_t *end;

	if (s->watch) {
		s->ending = true;
		if (s->ended)
			return;
		if (!s->started && x->status == SAAS_EXEC_EXITED && x->exit_code == 127)
			put_end_stream(s, AAS_CONNECT_FAILED_PRECONDITION, "watchDir needs python3 in the sandbox's image "
			               "(the default image has it; docs/e2b.md)");
		else if (x->status == SAAS_EXEC_TIMEDOUT || (s->deadline_ms && aas_now_ms() >= s->deadline_ms))
			put_end_stream(s, AAS_CONNECT_DEADLINE_EXCEEDED, "the call's deadline (Connect-Timeout-Ms) passed");
		else
			put_watch_end(s, "the watcher ended");
		return;
	}
	if (x->status == SAAS_EXEC_EXITED) {
		snprintf(status, sizeof(status), "exit status %d", x->exit_code);
		end = json_pack("{s:i,s:b,s:s}", "exitCode", x->exit_code, "exited", 1, "status", status);
		if (end && x->exit_code != 0)
			json_object_set_new(end, "error", json_string(status));
	} else {
		const char *why = x->status == SAAS_EXEC_TIMEDOUT ? "signal: killed" : x->error && *x->error ? x->error
		                                                                                               : "failed";
		end = json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status",
		                x->status == SAAS_EXEC_TIMEDOUT ? "signal: killed" : "failed", "error", why);
	}
	put_event(s, "end", end);
	s->ending = true;
}

/* The end event of a terminal: its shell's exit status, or a hang-up as envd words a kill. */
static void put_pty_end(struct stream *s, int rc, int status)
{
	char text[64];
	json_t *end;

	if (rc == 1) {
		snprintf(text, sizeof(text), "exit status %d", status);
		end = json_pack("{s:i,s:b,s:s}", "exitCode", status, "exited", 1, "status", text);
		if (end && status != 0)
			json_object_set_new(end, "error", json_string(text));
	} else {
		end = json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status", "signal: killed", "error",
		                "signal: killed");
	}
	put_event(s, "end", end);
}

/* follow_more for a terminal: its output since the stream's offset, as pty data events. */
static void follow_pty(struct stream *s)
{
	unsigned char chunk[32768];
	int64_t now = aas_now_ms(), wait = s->keepalive_ms - (now - s->quiet_since_ms);
	size_t got = 0;
	int status = -1, rc;

	if (wait > GONE_POLL_MS)
		wait = GONE_POLL_MS;
	if (s->deadline_ms && s->deadline_ms - now < wait)
		wait = s->deadline_ms - now;
	s->len = s->off = 0;
	rc = aas_e2b_pty_follow(s->pty, &s->pty_offset, chunk, sizeof(chunk), &got, &status,
	                        wait > 0 ? (unsigned int)wait : 0);
	now = aas_now_ms();
	if (got) {
		char *b64 = saas_base64_encode(chunk, got);
		if (!b64)
			s->oom = true;
		else
			put_event(s, "data", json_pack("{s:s}", "pty", b64));
		saas_free(b64);
		s->quiet_since_ms = now;
	} else if (rc) {
		put_pty_end(s, rc, status);
		put_end_stream(s, AAS_CONNECT_OK, NULL);
		return;
	} else if (s->deadline_ms && now >= s->deadline_ms) {
		/* The terminal is hung up on at the same deadline (its reader's), and says so to later subscribers. */
		put_end_stream(s, AAS_CONNECT_DEADLINE_EXCEEDED, "the call's deadline (Connect-Timeout-Ms) passed");
		return;
	} else if (now - s->quiet_since_ms >= s->keepalive_ms) {
		put_event(s, "keepalive", NULL);
		s->quiet_since_ms = now;
	}
	if (s->oom)
		put_end_stream(s, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
}

/*
 * A command's start event, once its guest runs it (or it ended, or the
 * hold ran out): true when it is sent. Else it waited up to `wait` ms and
 * nothing is to send yet (the reader looks again, after checking the client
 * is still there). Neither the client's work on the event nor the writing
 * of it then shares the machine with a command that has not begun.
 */
static bool start_when_run(struct stream *s, int64_t wait)
{
	saas_execution *x = NULL;
	saas_exec_cursor peek = s->cur; /* what comes meanwhile is read again by the follow proper */
	int64_t now = aas_now_ms();
	bool run = false;

	if (s->start_by_ms - now < wait)
		wait = s->start_by_ms - now;
	if (s->deadline_ms && s->deadline_ms - now < wait)
		wait = s->deadline_ms - now;
	if (wait > 0 && saas_execution_follow(&x, s->client, s->exe, &peek, NULL, (unsigned int)wait,
	                                      SAAS_FOLLOW_WAIT | SAAS_FOLLOW_STARTED) == SAAS_OK)
		run = x->started || x->status != SAAS_EXEC_RUNNING;
	else
		run = true; /* out of time, or following fails: the start, then the follow proper says why */
	saas_execution_free(x);
	now = aas_now_ms();
	if (!run && now < s->start_by_ms && !(s->deadline_ms && now >= s->deadline_ms))
		return false;
	put_event(s, "start", json_pack("{s:I}", "pid", (json_int_t)s->pid));
	s->started = true;
	s->quiet_since_ms = now;
	return true;
}

/*
 * Fill the buffer, as /v1's follower does (api/exec.c): what the
 * execution has now; else the first chunk to come, waiting up to the
 * keepalive or the deadline; else a keepalive, or the deadline's end.
 */
static void follow_more(struct stream *s)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	saas_exec_cursor cur = s->cur;
	int64_t now = aas_now_ms(), wait = s->keepalive_ms - (now - s->quiet_since_ms);
	int rc;

	if (s->pty) {
		follow_pty(s);
		return;
	}
	/* Short waits: between them the reader looks whether the client is still there (stream_read). */
	if (wait > GONE_POLL_MS)
		wait = GONE_POLL_MS;
	cb.output = on_output;
	cb.exit = on_exit_;
	cb.userdata = s;
	s->len = s->off = 0;
	if (!s->watch && !s->started && !start_when_run(s, wait))
		return;
	s->first = false;
	rc = saas_execution_follow(NULL, s->client, s->exe, &cur, &cb, 0, 0);
	if (rc == SAAS_OK && !s->len && !s->ending) {
		if (s->deadline_ms && s->deadline_ms - now < wait)
			wait = s->deadline_ms - now;
		if (wait > 0) {
			s->first = true;
			cur = s->cur;
			rc = saas_execution_follow(NULL, s->client, s->exe, &cur, &cb, (unsigned int)wait, SAAS_FOLLOW_WAIT);
		}
	}
	now = aas_now_ms();
	if (s->ended)
		return; /* a watch's end, said by its parser or its exit */
	if (rc < 0) {
		put_end_stream(s, aas_connect_code_from_saas(rc), aas_tenant_message(rc, "e2b: following a command"));
		return;
	}
	if (s->ending) {
		put_end_stream(s, AAS_CONNECT_OK, NULL);
		return;
	}
	if (s->len) {
		s->quiet_since_ms = now;
	} else if (s->deadline_ms && now >= s->deadline_ms) {
		/* The client's deadline: the stream ends; the command ends at its own timeout, the same moment. */
		put_end_stream(s, AAS_CONNECT_DEADLINE_EXCEEDED, "the call's deadline (Connect-Timeout-Ms) passed");
		return;
	} else if (now - s->quiet_since_ms >= s->keepalive_ms && (!s->watch || s->started)) {
		put_event(s, "keepalive", NULL);
		s->quiet_since_ms = now;
	}
	if (s->oom)
		put_end_stream(s, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	size_t n;

	(void)pos;
	while (s->off == s->len) {
		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		/* Nothing else reads the socket while the answer streams: a FIN or a reset waits there. */
		if (aas_fd_gone(s->fd))
			return MHD_CONTENT_READER_END_WITH_ERROR; /* the command runs on; its slot is free at once */
		follow_more(s);
	}
	n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(buf, s->buf + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;

	/* A watch ends with its stream (envd's does); a command runs on either way (envd detaches too). */
	if (s->watch)
		aas_e2b_watch_release(s->client, s->exe);
	aas_e2b_slot_release(s->account);
	aas_e2b_pty_unref(s->pty);
	saas_client_free(s->client);
	free(s->buf);
	free(s);
}

void aas_e2b_reply_stream(struct aas_req *r, struct aas_reply *out, saas_client *client, const char *account,
                          const struct aas_e2b_follow *f)
{
	const char *exe = f->exe ? f->exe : "";
	struct aas_e2b_pty *pty = f->pty;
	struct stream *s = NULL;
	uint64_t timeout_ms = aas_e2b_header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	uint64_t keepalive_s = aas_e2b_header_uint(r, "Keepalive-Ping-Interval", 3600, 0);
	const union MHD_ConnectionInfo *ci;

	if (!(s = calloc(1, sizeof(*s)))) {
		if (f->watch)
			aas_e2b_watch_release(client, exe);
		aas_e2b_pty_unref(pty);
		saas_client_free(client);
		aas_e2b_slot_release(account);
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	snprintf(s->account, sizeof(s->account), "%s", account);
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	s->fd = ci ? ci->connect_fd : -1;
	s->client = client;
	snprintf(s->exe, sizeof(s->exe), "%s", exe);
	s->cur = f->cur;
	if ((s->pty = pty))
		s->pty_offset = f->cur.stdout_offset;
	s->watch = f->watch;
	s->keepalive_ms = keepalive_s ? (unsigned int)keepalive_s * 1000 : KEEPALIVE_DEFAULT_MS;
	s->deadline_ms = timeout_ms ? aas_now_ms() + (int64_t)timeout_ms : 0;
	s->quiet_since_ms = aas_now_ms();
	/*
	 * The SDK waits for the start event before anything else (60 s at
	 * most). A command's comes once its guest runs it (start_when_run), a
	 * terminal's at once (its shell runs), a watch's when its watcher says it
	 * watches, so that no change after the SDK's start is missed and a
	 * missing directory is the start's error.
	 */
	s->pid = f->pid;
	s->start_by_ms = aas_now_ms() + START_HOLD_MAX_MS;
	if (s->pty) {
		put_event(s, "start", json_pack("{s:I}", "pid", (json_int_t)f->pid));
		s->started = true;
	}
	if (!(out->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s,
	                                                        stream_free))) {
		stream_free(s);
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	out->status = 200;
	MHD_add_response_header(out->response, "Content-Type", "application/connect+json");
	aas_reply_common_headers(out->response);
}

