/*
 * Commands through E2B's daemon protocol: process.Process's Start,
 * Connect, List, SendSignal, SendInput, CloseStdin and Update, as libsaas
 * executions, or (a Start with `pty`) as terminals (pty.c).
 *
 * A command is a background execution followed by the response's reader
 * (as /v1's event streams are): the start event at once, output as data
 * events, envd's end event and the end-stream frame. A client that goes
 * away detaches from it, as envd's do, and it runs on until it ends or its
 * timeout. E2B numbers processes; the pid table maps its pids to
 * executions, in memory, bounded (the oldest are forgotten first).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

/* E2B processes remembered at once (pids to executions); past it the oldest is forgotten. */
#define PIDS_MAX 4096
/* Command streams open at once, in all and per account (each holds a connection's thread); more are refused. */
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
/* A follower's buffer stops filling past this; the client's reading drains it. */
#define STREAM_BUF_MAX ((size_t)256 << 10)
/* The working directory E2B's home stands for (docs/e2b.md). */
#define HOME "/workspace"
/* An ended PTY can still be connected to this long (envd keeps an ended process's end 30 s). */
#define PTY_KEEP_MS 30000

/* ---- pids ---- */

struct proc {
	uint32_t pid;                     /* 0: a free slot */
	char sandbox[SAAS_ID_MAX + 1];
	char exe[SAAS_ID_MAX + 1];
	json_t *config;                   /* ProcessConfig as started, for List */
	struct aas_e2b_pty *pty;          /* a terminal's (exe is then ""), a reference */
};

static pthread_mutex_t pids_mu = PTHREAD_MUTEX_INITIALIZER;
static struct proc pids[PIDS_MAX];
static size_t pids_next;
static uint32_t pid_counter = 1000;

/* Forget slot p. pids_mu held. */
static void pid_forget(struct proc *p)
{
	json_decref(p->config);
	p->config = NULL;
	if (p->pty) {
		/* A terminal nobody can reach any more must not run on to its deadline. */
		aas_e2b_pty_kill(p->pty);
		aas_e2b_pty_unref(p->pty);
		p->pty = NULL;
	}
	p->pid = 0;
}

/* A command's (exe) or a terminal's (pty, referenced by the table) new pid. */
static uint32_t pid_add(const char *sandbox, const char *exe, json_t *config, struct aas_e2b_pty *pty)
{
	int64_t now = aas_now_ms();
	struct proc *p;
	uint32_t pid;

	pthread_mutex_lock(&pids_mu);
	/* Terminals past their keeping go now, not when their slot comes round: each holds its output's log. */
	for (size_t i = 0; i < PIDS_MAX; i++)
		if (pids[i].pty && aas_e2b_pty_gone(pids[i].pty, now, PTY_KEEP_MS))
			pid_forget(&pids[i]);
	p = &pids[pids_next];
	pids_next = (pids_next + 1) % PIDS_MAX;
	pid_forget(p);
	if (pty)
		aas_e2b_pty_ref(pty);
	p->pty = pty;
	/* Never 0 (proto3's "unset"), and not reused while the counter does not wrap. */
	if (++pid_counter == 0)
		pid_counter = 1000;
	pid = p->pid = pid_counter;
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
	snprintf(p->exe, sizeof(p->exe), "%s", exe);
	p->config = config ? json_deep_copy(config) : NULL;
	pthread_mutex_unlock(&pids_mu);
	return pid;
}

/*
 * The process pid of sandbox: true with exe filled (a command's) or *pty
 * (a terminal's, a reference for the caller; exe is then ""), and a copy of
 * its config if asked. A terminal ended more than PTY_KEEP_MS ago is gone.
 */
static bool pid_find(const char *sandbox, uint32_t pid, char exe[SAAS_ID_MAX + 1], json_t **config,
                     struct aas_e2b_pty **pty)
{
	int64_t now = aas_now_ms();
	bool found = false;

	*pty = NULL;
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX && !found; i++) {
		if (pids[i].pid == pid && pid && strcmp(pids[i].sandbox, sandbox) == 0) {
			if (pids[i].pty && aas_e2b_pty_gone(pids[i].pty, now, PTY_KEEP_MS)) {
				pid_forget(&pids[i]);
				break;
			}
			snprintf(exe, SAAS_ID_MAX + 1, "%s", pids[i].exe);
			if (config)
				*config = pids[i].config ? json_deep_copy(pids[i].config) : NULL;
			if ((*pty = pids[i].pty))
				aas_e2b_pty_ref(*pty);
			found = true;
		}
	}
	pthread_mutex_unlock(&pids_mu);
	return found;
}

/* The running terminals of sandbox: their pids and configs appended to procs (List's). */
static void pid_ptys(const char *sandbox, json_t *procs)
{
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX; i++) {
		if (pids[i].pid && pids[i].pty && strcmp(pids[i].sandbox, sandbox) == 0 &&
		    aas_e2b_pty_running(pids[i].pty))
			json_array_append_new(procs, json_pack("{s:O,s:I}", "config", pids[i].config, "pid",
			                                       (json_int_t)pids[i].pid));
	}
	pthread_mutex_unlock(&pids_mu);
}

/* The pid of an execution, or 0; its config copied if asked. */
static uint32_t pid_of(const char *sandbox, const char *exe, json_t **config)
{
	uint32_t pid = 0;

	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX && !pid; i++) {
		if (pids[i].pid && strcmp(pids[i].exe, exe) == 0 && strcmp(pids[i].sandbox, sandbox) == 0) {
			pid = pids[i].pid;
			if (config)
				*config = pids[i].config ? json_deep_copy(pids[i].config) : NULL;
		}
	}
	pthread_mutex_unlock(&pids_mu);
	return pid;
}

void aas_e2b_process_shutdown(void)
{
	/* Streams are over by now (the server stopped serving): hang up on the terminals, then forget all. */
	aas_e2b_pty_shutdown();
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX; i++) {
		pid_forget(&pids[i]);
		memset(&pids[i], 0, sizeof(pids[i]));
	}
	pthread_mutex_unlock(&pids_mu);
}

/* process.pid of a message ({"process":{"pid":N}}): 0 when absent or not a positive uint32. */
static uint32_t selector_pid(json_t *msg)
{
	json_t *p = json_object_get(json_object_get(msg, "process"), "pid");
	json_int_t v = json_is_integer(p) ? json_integer_value(p) : 0;

	/* The JSON codec may send a uint32 as a string too. */
	if (json_is_string(p)) {
		char *end;
		unsigned long long n = strtoull(json_string_value(p), &end, 10);
		v = *end || n > UINT32_MAX ? 0 : (json_int_t)n;
	}
	return v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
}

/* 'text' as one shell word. NULL when out of memory. */
static char *quote(char *acc, const char *text)
{
	size_t have = acc ? strlen(acc) : 0, n = strlen(text), extra = 3;
	char *p, *q;

	for (size_t i = 0; i < n; i++)
		extra += text[i] == '\'' ? 3 : 0;
	if (!(p = realloc(acc, have + n + extra + 2)))
		return NULL;
	q = p + have;
	if (have)
		*q++ = ' ';
	*q++ = '\'';
	for (size_t i = 0; i < n; i++) {
		if (text[i] == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else {
			*q++ = text[i];
		}
	}
	*q++ = '\'';
	*q = '\0';
	return p;
}

/*
 * The command line of a ProcessConfig: `bash -l -c X` (what commands.run
 * always sends) is X, since libsaas runs a command by the user's login shell
 * already; anything else is its words quoted. NULL after setting why.
 */
static char *command_of(json_t *config, char *why, size_t whysize)
{
	json_t *cmd = json_object_get(config, "cmd"), *args = json_object_get(config, "args"), *a;
	char *line = NULL;
	size_t i;

	if (!json_is_string(cmd) || !*json_string_value(cmd)) {
		snprintf(why, whysize, "process.cmd must be a non-empty string");
		return NULL;
	}
	if (args && !json_is_null(args) && !json_is_array(args)) {
		snprintf(why, whysize, "process.args must be an array of strings");
		return NULL;
	}
	json_array_foreach(args, i, a) {
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
			snprintf(why, whysize, "process.args must be strings without NUL");
			return NULL;
		}
	}
	if (strcmp(json_string_value(cmd), "/bin/bash") == 0 && json_array_size(args) == 3 &&
	    strcmp(json_string_value(json_array_get(args, 0)), "-l") == 0 &&
	    strcmp(json_string_value(json_array_get(args, 1)), "-c") == 0) {
		if (!(line = strdup(json_string_value(json_array_get(args, 2)))))
			snprintf(why, whysize, "out of memory");
		return line;
	}
	if (!(line = quote(NULL, json_string_value(cmd)))) {
		snprintf(why, whysize, "out of memory");
		return NULL;
	}
	json_array_foreach(args, i, a) {
		if (!(line = quote(line, json_string_value(a)))) {
			snprintf(why, whysize, "out of memory");
			return NULL;
		}
	}
	return line;
}

/* "K=V" strings of the sandbox's envs then the request's (later wins, as envd's order). NULL-terminated. */
static char **env_of(const char *sandbox, json_t *config, char *why, size_t whysize)
{
	struct aas_e2b_side side;
	json_t *envs = json_object_get(config, "envs"), *v, *merged = NULL;
	const char *k;
	char **list = NULL;
	size_t n = 0;

	if (envs && !json_is_null(envs) && !json_is_object(envs)) {
		snprintf(why, whysize, "process.envs must be an object of strings");
		return NULL;
	}
	aas_e2b_side_get(sandbox, &side);
	merged = side.envs ? json_incref(side.envs) : json_object();
	if (!merged || (envs && json_is_object(envs) && json_object_update(merged, envs) < 0)) {
		snprintf(why, whysize, "out of memory");
		goto out;
	}
	if (json_object_size(merged) > AAS_E2B_ENVS_MAX) {
		snprintf(why, whysize, "at most %d environment variables", AAS_E2B_ENVS_MAX);
		goto out;
	}
	if (!(list = calloc(json_object_size(merged) + 1, sizeof(*list)))) {
		snprintf(why, whysize, "out of memory");
		goto out;
	}
	json_object_foreach(merged, k, v) {
		size_t len;
		if (!json_is_string(v) || !*k || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(why, whysize, "process.envs: names must be non-empty without '=', values strings without NUL");
			goto fail;
		}
		len = strlen(k) + json_string_length(v) + 2;
		if (!(list[n] = malloc(len))) {
			snprintf(why, whysize, "out of memory");
			goto fail;
		}
		snprintf(list[n++], len, "%s=%s", k, json_string_value(v));
	}
	goto out;
fail:
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
	list = NULL;
out:
	json_decref(merged);
	aas_e2b_side_free(&side);
	return list;
}

static void env_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

/* The working directory: E2B's home (and "~") is /workspace; a relative path is under it. */
static char *cwd_of(json_t *config)
{
	json_t *c = json_object_get(config, "cwd");
	const char *s = json_is_string(c) ? json_string_value(c) : "";
	size_t len;
	char *out;

	if (!*s)
		return NULL;
	if (*s == '/')
		return strdup(s);
	if (s[0] == '~' && (s[1] == '\0' || s[1] == '/'))
		s += s[1] ? 2 : 1;
	len = strlen(HOME) + strlen(s) + 2;
	if ((out = malloc(len)))
		snprintf(out, len, "%s%s%s", HOME, *s ? "/" : "", s);
	return out;
}

/* A header's decimal value, at most max (digits only); def when absent or not one. */
static uint64_t header_uint(struct aas_req *r, const char *name, uint64_t max, uint64_t def)
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

/*
 * Take a stream's slot for account, before anything is started for it: true,
 * or false after a resource_exhausted reply (the SDK's RateLimitError).
 */
static bool slot_take(const char *account, struct aas_reply *out)
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
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "this account has %d command streams open, "
		                           "the most it may; disconnect one (or run in the background and reconnect)",
		                           STREAMS_PER_ACCOUNT);
	else if (!ok)
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "%d command streams are open on this "
		                           "server, the most it takes; try again", STREAMS_MAX);
	return ok;
}

static void slot_release(const char *account)
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

static void put_event(struct stream *s, const char *kind, json_t *body)
{
	put_frame(s, 0, json_pack("{s:{s:o}}", "event", kind, body ? body : json_object()));
}

static int on_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct stream *s = ud;
	char *b64 = saas_base64_encode(data, len);

	if (stream == SAAS_EXEC_STDOUT)
		s->cur.stdout_offset = offset + len;
	else
		s->cur.stderr_offset = offset + len;
	if (!b64) {
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
	} else if (now - s->quiet_since_ms >= s->keepalive_ms) {
		put_event(s, "keepalive", NULL);
		s->quiet_since_ms = now;
	}
	if (s->oom)
		put_end_stream(s, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
}

/*
 * Has the client closed or reset its connection? Nothing else reads the
 * socket while its answer streams (a client does not send its next request
 * before this answer ends), so a FIN or a reset waits there (as http.c's
 * aas_client_gone sees it).
 */
static bool client_gone(int fd)
{
	ssize_t n;
	char c;

	if (fd < 0)
		return false;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	size_t n;

	(void)pos;
	while (s->off == s->len) {
		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (client_gone(s->fd))
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

	/* The client left or the stream ended; the command runs on either way (envd detaches too). */
	slot_release(s->account);
	aas_e2b_pty_unref(s->pty);
	saas_client_free(s->client);
	free(s->buf);
	free(s);
}

/*
 * Answer with the command stream of execution exe from cursor cur: the start
 * event (pid), then its output, its end and the end-stream frame; for a
 * terminal (pty, whose output is then from cur->stdout_offset), the same of
 * it. Takes the client, the account's slot (slot_take) and the reference to
 * pty, given to the stream or released here on failure.
 */
static void reply_stream(struct aas_req *r, struct aas_reply *out, saas_client *client, const char *account,
                         const char *exe, struct aas_e2b_pty *pty, uint32_t pid, const saas_exec_cursor *cur)
{
	struct stream *s = NULL;
	uint64_t timeout_ms = header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	uint64_t keepalive_s = header_uint(r, "Keepalive-Ping-Interval", 3600, 0);
	const union MHD_ConnectionInfo *ci;

	if (!(s = calloc(1, sizeof(*s)))) {
		aas_e2b_pty_unref(pty);
		saas_client_free(client);
		slot_release(account);
		aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	snprintf(s->account, sizeof(s->account), "%s", account);
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	s->fd = ci ? ci->connect_fd : -1;
	s->client = client;
	snprintf(s->exe, sizeof(s->exe), "%s", exe);
	s->cur = *cur;
	if ((s->pty = pty))
		s->pty_offset = cur->stdout_offset;
	s->keepalive_ms = keepalive_s ? (unsigned int)keepalive_s * 1000 : KEEPALIVE_DEFAULT_MS;
	s->deadline_ms = timeout_ms ? aas_now_ms() + (int64_t)timeout_ms : 0;
	s->quiet_since_ms = aas_now_ms();
	/* The start event at once: the SDK waits for it before anything else (60 s at most). */
	put_event(s, "start", json_pack("{s:I}", "pid", (json_int_t)pid));
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

/* ---- the calls ---- */

/* A PTY's size ({"size":{"cols":C,"rows":R}}): false with why when it is not one of 1 to SAAS_PTY_SIZE_MAX each way. */
static bool pty_size(json_t *pty, unsigned int *cols, unsigned int *rows, char *why, size_t whysize)
{
	json_t *size = json_object_get(pty, "size");
	json_t *c = json_object_get(size, "cols"), *r = json_object_get(size, "rows");

	if (!json_is_object(pty) || !json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > SAAS_PTY_SIZE_MAX || json_integer_value(r) < 1 ||
	    json_integer_value(r) > SAAS_PTY_SIZE_MAX) {
		snprintf(why, whysize, "pty.size must have cols and rows from 1 to %d", SAAS_PTY_SIZE_MAX);
		return false;
	}
	*cols = (unsigned int)json_integer_value(c);
	*rows = (unsigned int)json_integer_value(r);
	return true;
}

/*
 * What a terminal may be asked: libsaas's terminal is the sandbox user's
 * login shell in its home (/workspace), so only the command pty.create
 * sends (`/bin/bash -i -l`) is taken, TERM is the terminal's, and the
 * locale the SDK always sends (LANG, LC_ALL) is the image's. Any other
 * variable or directory would be silently dropped: refused instead (the
 * session cannot carry them yet; docs/e2b.md). false with why.
 */
static bool pty_config(json_t *config, const char **term, char *why, size_t whysize)
{
	json_t *args = json_object_get(config, "args"), *envs = json_object_get(config, "envs"), *v;
	const char *cmd = json_string_value(json_object_get(config, "cmd")), *k;
	char *cwd = cwd_of(config);
	bool home = !cwd || strcmp(cwd, HOME) == 0 || strcmp(cwd, HOME "/") == 0;

	free(cwd);
	*term = NULL;
	if (!cmd || strcmp(cmd, "/bin/bash") != 0 || json_array_size(args) != 2 ||
	    !json_is_string(json_array_get(args, 0)) || !json_is_string(json_array_get(args, 1)) ||
	    strcmp(json_string_value(json_array_get(args, 0)), "-i") != 0 ||
	    strcmp(json_string_value(json_array_get(args, 1)), "-l") != 0) {
		snprintf(why, whysize, "a PTY runs the sandbox user's login shell: process must be /bin/bash -i -l, as "
		         "pty.create sends");
		return false;
	}
	if (!home) {
		snprintf(why, whysize, "a PTY starts in the sandbox user's home (/workspace); cwd is not served for "
		         "terminals yet (cd in the terminal instead)");
		return false;
	}
	if (envs && !json_is_null(envs) && !json_is_object(envs)) {
		snprintf(why, whysize, "process.envs must be an object of strings");
		return false;
	}
	json_object_foreach(envs, k, v) {
		if (!json_is_string(v)) {
			snprintf(why, whysize, "process.envs must be an object of strings");
			return false;
		}
		if (strcmp(k, "TERM") == 0)
			*term = json_string_value(v);
		else if (strcmp(k, "LANG") != 0 && strcmp(k, "LC_ALL") != 0) {
			snprintf(why, whysize, "a PTY's environment is the sandbox user's login environment and TERM; envs "
			         "(\"%.64s\") are not served for terminals yet (export them in the terminal instead)", k);
			return false;
		}
	}
	return true;
}

/* process.Process/Start with `pty`: a terminal, followed by the answer as a command is. */
static void start_pty(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *config,
                      json_t *pty_msg)
{
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_exec_cursor cur = { 0, 0 };
	struct aas_e2b_pty *pty = NULL;
	uint64_t timeout_ms = header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	char why[512];
	uint32_t pid;
	int rc;

	if (!pty_size(pty_msg, &o.cols, &o.rows, why, sizeof(why)) || !pty_config(config, &o.term, why, sizeof(why))) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		return;
	}
	if (!slot_take(t->account, out))
		return;
	/* The call's deadline ends the terminal (envd's does); none is a command's longest, not for ever. */
	if (!timeout_ms || timeout_ms > (uint64_t)SAAS_EXEC_TIMEOUT_MAX * 1000)
		timeout_ms = (uint64_t)SAAS_EXEC_TIMEOUT_MAX * 1000;
	if ((rc = aas_e2b_pty_open(&pty, t->client, t->id, t->account, &o, aas_now_ms() + (int64_t)timeout_ms, why,
	                           sizeof(why))) < 0) {
		slot_release(t->account);
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", why);
		return;
	}
	pid = pid_add(t->id, "", config, pty);
	reply_stream(r, out, t->client, t->account, "", pty, pid, &cur);
	t->client = NULL;
}

/* process.Process/Start: a command, as a background execution followed by the answer. */
static void rpc_start(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_cursor cur = { 0, 0 };
	saas_execution *x = NULL;
	json_t *config = json_object_get(msg, "process"), *pty = json_object_get(msg, "pty");
	char why[512], *command = NULL, *cwd = NULL, **env = NULL;
	uint64_t timeout_ms = header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	unsigned int flags = SAAS_EXEC_BACKGROUND;
	bool taken = false;
	uint32_t pid;
	int rc;

	if (!json_is_object(config)) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process (a ProcessConfig) is required");
		goto out;
	}
	if (pty && !json_is_null(pty)) {
		start_pty(r, out, t, config, pty);
		goto out;
	}
	if (!(command = command_of(config, why, sizeof(why))) || !(env = env_of(t->id, config, why, sizeof(why)))) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		goto out;
	}
	if (!slot_take(t->account, out))
		goto out;
	taken = true;
	if (json_is_true(json_object_get(msg, "stdin")))
		flags |= SAAS_EXEC_STDIN_OPEN;
	cwd = cwd_of(config);
	o.cwd = cwd;
	o.env = (const char *const *)env;
	/* The call's deadline is the command's (envd kills it then); none is libsaas's longest. */
	o.timeout_s = timeout_ms ? (int64_t)((timeout_ms + 999) / 1000) : SAAS_EXEC_TIMEOUT_MAX;
	if (o.timeout_s > SAAS_EXEC_TIMEOUT_MAX)
		o.timeout_s = SAAS_EXEC_TIMEOUT_MAX;
	if ((rc = saas_exec(&x, t->client, t->id, command, &o, flags)) < 0) {
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: start"));
		goto out;
	}
	pid = pid_add(t->id, x->id, config, NULL);
	reply_stream(r, out, t->client, t->account, x->id, NULL, pid, &cur);
	t->client = NULL;
	taken = false;
out:
	if (taken)
		slot_release(t->account);
	saas_execution_free(x);
	env_free(env);
	free(command);
	free(cwd);
}

/* process.Process/Connect: follow a command from now on (an ended one: its end at once). */
static void rpc_connect(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	uint32_t pid = selector_pid(msg);
	char exe[SAAS_ID_MAX + 1];
	saas_execution *x = NULL;
	saas_exec_cursor cur = { 0, 0 };
	struct aas_e2b_pty *pty = NULL;
	int rc;

	if (!pid || !pid_find(t->id, pid, exe, NULL, &pty)) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found", pid);
		return;
	}
	if (pty) {
		/* A subscriber sees what comes after it subscribed; an ended terminal's end comes at once. */
		cur.stdout_offset = aas_e2b_pty_offset(pty);
		if (!slot_take(t->account, out)) {
			aas_e2b_pty_unref(pty);
			return;
		}
		reply_stream(r, out, t->client, t->account, "", pty, pid, &cur);
		t->client = NULL;
		return;
	}
	if ((rc = saas_execution_get(&x, t->client, exe)) < 0) {
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: connect"));
		return;
	}
	/* A subscriber sees what comes after it subscribed (envd's fan-out). */
	cur.stdout_offset = x->stdout_total;
	cur.stderr_offset = x->stderr_total;
	saas_execution_free(x);
	if (!slot_take(t->account, out))
		return;
	reply_stream(r, out, t->client, t->account, exe, NULL, pid, &cur);
	t->client = NULL;
}

/* process.Process/List: the sandbox's running commands. */
static void rpc_list(struct aas_reply *out, struct aas_e2b_target *t)
{
	saas_execution_list *l = NULL;
	json_t *procs = json_array();
	int rc;

	if ((rc = saas_execution_list_running(&l, t->client, t->id, 0)) < 0 || !procs) {
		json_decref(procs);
		aas_e2b_reply_unary_error(out, rc < 0 ? aas_connect_code_from_saas(rc) : AAS_CONNECT_RESOURCE_EXHAUSTED, "%s",
		                  rc < 0 ? aas_tenant_message(rc, "e2b: list") : "out of memory");
		return;
	}
	for (size_t i = 0; i < l->count; i++) {
		const saas_execution *x = l->items[i];
		json_t *config = NULL;
		uint32_t pid = pid_of(t->id, x->id, &config);
		/* Started through /v1: E2B's shape of it, and a pid from now on. */
		if (!config)
			config = json_pack("{s:s,s:[s,s,s],s:{}}", "cmd", "/bin/bash", "args", "-l", "-c",
			                   x->command ? x->command : "", "envs");
		if (!pid)
			pid = pid_add(t->id, x->id, config, NULL);
		json_array_append_new(procs, json_pack("{s:o,s:I}", "config", config ? config : json_object(), "pid",
		                                       (json_int_t)pid));
	}
	saas_execution_list_free(l);
	pid_ptys(t->id, procs);
	aas_e2b_reply_unary(out, json_pack("{s:o}", "processes", procs));
}

/*
 * The process a unary call's selector names: an execution (exe) or a
 * terminal (*pty, the caller's reference). false after a not_found reply.
 */
static bool selected(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg, char exe[SAAS_ID_MAX + 1],
                     struct aas_e2b_pty **pty)
{
	uint32_t pid = selector_pid(msg);

	if (!pid || !pid_find(t->id, pid, exe, NULL, pty)) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found", pid);
		return false;
	}
	return true;
}

/* An ended or unknown execution is E2B's "not found" (the SDK's kill() then says false). */
static void reply_exec_error(struct aas_reply *out, int rc, uint32_t pid, const char *where)
{
	if (rc == SAAS_ENOTFOUND || rc == SAAS_ESTATE)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found (it ended)", pid);
	else
		aas_e2b_reply_unary_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, where));
}

static void rpc_signal(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	json_t *sig = json_object_get(msg, "signal");
	const char *name = NULL;
	char exe[SAAS_ID_MAX + 1];
	struct aas_e2b_pty *pty = NULL;
	int rc;

	if (json_is_string(sig))
		name = strcmp(json_string_value(sig), "SIGNAL_SIGKILL") == 0   ? "KILL"
		       : strcmp(json_string_value(sig), "SIGNAL_SIGTERM") == 0 ? "TERM"
		                                                               : NULL;
	else if (json_is_integer(sig))
		name = json_integer_value(sig) == 9 ? "KILL" : json_integer_value(sig) == 15 ? "TERM" : NULL;
	if (!name) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		return;
	if (pty) {
		/* A terminal is hung up on, for either signal: its shell and what it started get SIGHUP. */
		if (aas_e2b_pty_kill(pty) < 0)
			reply_exec_error(out, SAAS_ESTATE, selector_pid(msg), "e2b: signal");
		else
			aas_e2b_reply_unary(out, NULL);
		aas_e2b_pty_unref(pty);
		return;
	}
	/* The whole group, as envd kills the process it started with what it started. */
	if ((rc = saas_execution_signal(t->client, exe, name, SAAS_SIGNAL_GROUP)) < 0) {
		reply_exec_error(out, rc, selector_pid(msg), "e2b: signal");
		return;
	}
	aas_e2b_reply_unary(out, NULL);
}

/* SendInput (stdin of a command, or keystrokes of a terminal) and CloseStdin (commands only, as envd's). */
static void rpc_input(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg, bool close)
{
	json_t *input = json_object_get(msg, "input"), *data = json_object_get(input, "stdin");
	json_t *keys = json_object_get(input, "pty");
	char exe[SAAS_ID_MAX + 1];
	struct aas_e2b_pty *pty = NULL;
	void *bytes = NULL;
	size_t len = 0;
	int rc;

	if (keys)
		data = keys;
	if (!close && (!json_is_string(data) ||
	               saas_base64_decode(&bytes, &len, json_string_value(data), json_string_length(data)) < 0)) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "input.stdin or input.pty must be base64 bytes");
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		goto out;
	if (pty && close) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "a PTY has no stdin to close: send Ctrl+D "
		                          "(0x04) instead");
	} else if (pty && !keys) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is a PTY: send input.pty, "
		                          "not input.stdin", selector_pid(msg));
	} else if (!pty && keys) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is not a PTY: send "
		                          "input.stdin, not input.pty", selector_pid(msg));
	} else if (pty) {
		if ((rc = aas_e2b_pty_input(pty, bytes, len)) == SAAS_ETIMEOUT)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_UNAVAILABLE, "the terminal's shell took no input for a while; "
			                          "part of it may have been taken");
		else if (rc < 0)
			reply_exec_error(out, rc, selector_pid(msg), "e2b: pty input");
		else
			aas_e2b_reply_unary(out, NULL);
	} else if ((rc = saas_execution_stdin(t->client, exe, bytes, len, close ? SAAS_STDIN_CLOSE : 0)) < 0) {
		reply_exec_error(out, rc, selector_pid(msg), "e2b: stdin");
	} else {
		aas_e2b_reply_unary(out, NULL);
	}
out:
	aas_e2b_pty_unref(pty);
	saas_free(bytes);
}

/* process.Process/Update: a terminal's new size (the shell gets SIGWINCH). */
static void rpc_update(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	json_t *pty_msg = json_object_get(msg, "pty");
	struct aas_e2b_pty *pty = NULL;
	char exe[SAAS_ID_MAX + 1], why[128];
	unsigned int cols, rows;
	int rc;

	if (!pty_msg || json_is_null(pty_msg)) {
		aas_e2b_reply_unary(out, NULL); /* nothing to change */
		return;
	}
	if (!pty_size(pty_msg, &cols, &rows, why, sizeof(why))) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		return;
	if (!pty)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is not a PTY: it has no "
		                          "size", selector_pid(msg));
	else if ((rc = aas_e2b_pty_resize(pty, cols, rows)) < 0)
		reply_exec_error(out, rc, selector_pid(msg), "e2b: pty resize");
	else
		aas_e2b_reply_unary(out, NULL);
	aas_e2b_pty_unref(pty);
}

void aas_e2b_process(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method,
                     json_t *msg)
{
	if (strcmp(method, "Start") == 0)
		rpc_start(r, out, t, msg);
	else if (strcmp(method, "Connect") == 0)
		rpc_connect(r, out, t, msg);
	else if (strcmp(method, "List") == 0)
		rpc_list(out, t);
	else if (strcmp(method, "SendSignal") == 0)
		rpc_signal(out, t, msg);
	else if (strcmp(method, "SendInput") == 0)
		rpc_input(out, t, msg, false);
	else if (strcmp(method, "CloseStdin") == 0)
		rpc_input(out, t, msg, true);
	else if (strcmp(method, "Update") == 0)
		rpc_update(out, t, msg);
	else if (t->streaming)
		aas_e2b_reply_stream_error(out, AAS_CONNECT_UNIMPLEMENTED, "process.Process/%s is not served by this "
		                           "server yet (docs/e2b.md)", method);
	else
		aas_e2b_reply_unary_error(out, AAS_CONNECT_UNIMPLEMENTED, "process.Process/%s is not served by this "
		                          "server yet (docs/e2b.md)", method);
}
