/*
 * aas-mcp: MCP over stdio, the transport only. The protocol and the tools are
 * mcp/ (aas_mcp), shared with aas-server's Streamable HTTP endpoint.
 *
 * One JSON-RPC message (or, in 2025-03-26, a batch) per line on stdin, one
 * response per line on stdout, flushed after each; logs go to stderr only.
 * A line is at most AAS_MCP_MESSAGE_MAX bytes (a longer one is skipped and
 * answered with an error), and batches are bounded as over HTTP (aas_mcp.h). Nothing but send_line()
 * writes to stdout, one whole line at a time under a lock: the real stdout is
 * kept on a private stream and fd 1 is pointed at stderr, so a stray printf
 * anywhere cannot corrupt the framing.
 *
 * The main thread reads stdin all the time. A message that calls a tool runs
 * on a thread of its own (at most CALLS_MAX at once; the reader waits for a
 * free one), so that a notifications/cancelled for it can be read while it
 * runs, and a long create_sandbox holds nothing else up; its progress
 * notifications and then its response are written from that thread. Anything
 * else (initialize, ping, tools/list, notifications) is answered at once, in
 * order. At EOF the calls still running finish and are answered, then aas-mcp
 * exits 0; but once nobody reads stdout (the client is gone), they count as
 * cancelled, so a create_sandbox then destroys what it made. If aas-mcp itself
 * is killed, its connection to aas-server closes, and the server destroys a
 * sandbox it was making for it (server/api/sandboxes.c).
 *
 * The account's client is the remote one: saas_client_open_remote(AAS_BASE_URL,
 * AAS_API_KEY), opened at the first tools/call, so initialize and tools/list
 * work with no key or no server. Until it opens, tool calls answer an isError
 * result that says how to set AAS_API_KEY; an open that failed for want of a
 * network is tried again on the next call.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aas_mcp.h"

#define DEFAULT_BASE_URL "http://127.0.0.1:8080"
#define CALLS_MAX 16

static const char key_hint[] =
	"the AAS_API_KEY environment variable of aas-mcp (\"env\": {\"AAS_API_KEY\": \"aas_sk_...\"} in this "
	"server's entry of the MCP client's configuration; restart the server after changing it)";

static const char usage[] =
	"usage: aas-mcp [--help | --version]\n"
	"\n"
	"The libsaas MCP server over stdio: newline-delimited JSON-RPC on stdin and\n"
	"stdout, logs on stderr. Start it from an MCP client (Claude Desktop, Claude\n"
	"Code, ...) rather than by hand.\n"
	"\n"
	"Environment:\n"
	"  AAS_API_KEY   required for tool calls: an \"aas_sk_...\" key\n"
	"  AAS_BASE_URL  the server's origin, without /v1 (default " DEFAULT_BASE_URL ")\n"
	"\n"
	"  --help        print this help\n"
	"  --version     print the version\n";

struct state {
	const char *base_url;
	const char *api_key;     /* NULL when unset or empty */
	saas_client *client;     /* set on the main thread only, before the calls that use it start */
	int client_status;       /* 0 or the saas_status of the last open */
	char problem[1024];      /* what the last failed open means for the user, and what to set */
	char key_source[600];    /* where a key is made: the dashboard of AAS_BASE_URL */
};

/* stdout: one writer at a time. */
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static bool out_broken;      /* a write failed: the client is gone */

/* A tool call running on its own thread. */
struct call {
	bool used, done;
	pthread_t thread;
	json_t *msg;
	aas_mcp_ctx ctx;         /* userdata: this call */
};

/* A request id of a running call, and whether the client cancelled it. */
struct inflight {
	json_t *id;
	struct call *call;
	bool cancelled;
	struct inflight *next;
};

static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_cv = PTHREAD_COND_INITIALIZER; /* a call finished */
static struct call calls[CALLS_MAX];
static struct inflight *inflight;

/* Does the message (or a member of the batch) call a tool? */
static bool calls_tool(const json_t *msg)
{
	const json_t *m;
	size_t i;

	if (!json_is_array(msg)) {
		const char *method = json_string_value(json_object_get(msg, "method"));
		return method && strcmp(method, "tools/call") == 0;
	}
	json_array_foreach(msg, i, m)
		if (calls_tool(m))
			return true;
	return false;
}

/* Open the client if a tool is about to need it; failures stay in client_status. */
static void ensure_client(struct state *st)
{
	const saas_error *e;
	const char *why;
	int rc;

	if (st->client || !st->api_key || st->client_status == SAAS_EAUTH || st->client_status == SAAS_EINVAL)
		return;
	rc = saas_client_open_remote(&st->client, st->base_url, st->api_key, NULL, 0);
	if (rc == SAAS_OK) {
		st->client_status = 0;
		fprintf(stderr, "aas-mcp: connected to %s as account %s\n", st->base_url,
		        saas_client_account_id(st->client));
		return;
	}
	st->client = NULL;
	st->client_status = rc;
	e = saas_error_last();
	why = e->code == rc && e->message[0] ? e->message : saas_strerror(rc);
	fprintf(stderr, "aas-mcp: cannot open a client for %s: %s\n", st->base_url, why);
	/* Tool results say what is wrong and what to set: an agent that is told to retry retries forever. */
	if (rc == SAAS_EINVAL)
		snprintf(st->problem, sizeof(st->problem),
		         "AAS_BASE_URL is \"%.200s\", which aas-mcp cannot use: %s. Set AAS_BASE_URL to the libsaas "
		         "server's origin only, such as " DEFAULT_BASE_URL " (without /v1), in this server's \"env\" in the "
		         "MCP client's configuration, and restart it; retrying does not help.",
		         st->base_url, why);
	else if (rc == SAAS_ENETWORK)
		snprintf(st->problem, sizeof(st->problem),
		         "aas-mcp cannot reach the libsaas server at %.200s (%s). Check that the server runs and that "
		         "AAS_BASE_URL is its origin; the next tool call tries again.",
		         st->base_url, why);
	else
		snprintf(st->problem, sizeof(st->problem),
		         "aas-mcp could not check the API key with the libsaas server at %.200s: %s. The next tool call "
		         "tries again.",
		         st->base_url, why);
}

/* Write one message as one line and flush; takes msg. false when stdout is gone. */
static bool send_line(json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	bool ok;

	json_decref(msg);
	if (!text) {
		fprintf(stderr, "aas-mcp: out of memory\n");
		return true;
	}
	pthread_mutex_lock(&out_mu);
	ok = !out_broken && fputs(text, out) >= 0 && fputc('\n', out) != EOF && fflush(out) == 0;
	if (!ok && !out_broken) {
		fprintf(stderr, "aas-mcp: cannot write to stdout: %s\n", strerror(errno));
		out_broken = true;
	}
	pthread_mutex_unlock(&out_mu);
	free(text);
	return ok;
}

static void notify(void *userdata, json_t *msg)
{
	(void)userdata;
	send_line(msg);
}

/*
 * Is nobody left to read stdout (its pipe or socket closed at the client's
 * end, or a write failed)? The client died or went away without waiting.
 */
static bool client_gone(void)
{
	struct pollfd p = { .fd = fileno(out), .events = POLLOUT };
	bool broken;

	pthread_mutex_lock(&out_mu);
	broken = out_broken;
	pthread_mutex_unlock(&out_mu);
	return broken || (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)));
}

/*
 * Cancelled by a notifications/cancelled, or by the client's going away: an
 * answer nobody can read is a request nobody wants, and a create_sandbox it
 * made is destroyed instead of running until it expires (tools_sandbox.c).
 */
static bool cancelled(void *userdata, const json_t *id)
{
	bool yes = false;

	if (client_gone())
		return true;
	pthread_mutex_lock(&calls_mu);
	for (struct inflight *f = inflight; f; f = f->next)
		if (f->call == userdata && f->cancelled && json_equal(f->id, (json_t *)id))
			yes = true;
	pthread_mutex_unlock(&calls_mu);
	return yes;
}

/* Flag the requests a notifications/cancelled (or the batch's) names; unknown or finished ids are ignored. */
static void note_cancels(const json_t *msg)
{
	const json_t *m, *id;
	size_t i;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			note_cancels(m);
		return;
	}
	if (!(id = aas_mcp_cancelled_request(msg)))
		return;
	pthread_mutex_lock(&calls_mu);
	for (struct inflight *f = inflight; f; f = f->next)
		if (json_equal(f->id, (json_t *)id))
			f->cancelled = true;
	pthread_mutex_unlock(&calls_mu);
}

/* Record the ids of the requests in msg as running in `call`. Under calls_mu. */
static void track_locked(struct call *call, json_t *msg)
{
	json_t *m, *id;
	size_t i;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			track_locked(call, m);
		return;
	}
	if (!json_object_get(msg, "method") || !(id = json_object_get(msg, "id")))
		return;
	struct inflight *f = calloc(1, sizeof(*f));
	if (!f)
		return; /* it just cannot be cancelled */
	f->id = json_incref(id);
	f->call = call;
	f->next = inflight;
	inflight = f;
}

static void untrack_locked(struct call *call)
{
	for (struct inflight **pf = &inflight; *pf;) {
		struct inflight *f = *pf;
		if (f->call == call) {
			*pf = f->next;
			json_decref(f->id);
			free(f);
		} else {
			pf = &f->next;
		}
	}
}

static void *call_main(void *arg)
{
	struct call *call = arg;
	json_t *resp = aas_mcp_handle(&call->ctx, call->msg);

	if (resp)
		send_line(resp);
	pthread_mutex_lock(&calls_mu);
	untrack_locked(call);
	json_decref(call->msg);
	call->msg = NULL;
	call->done = true;
	pthread_cond_broadcast(&calls_cv);
	pthread_mutex_unlock(&calls_mu);
	return NULL;
}

/* Join the calls that finished; with `all`, wait for every call. */
static void reap(bool all)
{
	pthread_mutex_lock(&calls_mu);
	for (;;) {
		bool running = false;
		for (size_t i = 0; i < CALLS_MAX; i++) {
			if (calls[i].used && calls[i].done) {
				pthread_join(calls[i].thread, NULL);
				memset(&calls[i], 0, sizeof(calls[i]));
			}
			running |= calls[i].used;
		}
		if (!all || !running)
			break;
		pthread_cond_wait(&calls_cv, &calls_mu);
	}
	pthread_mutex_unlock(&calls_mu);
}

/* Run a tool-calling message on a thread of its own, once one of the CALLS_MAX is free; takes msg. */
static void start_call(const aas_mcp_ctx *ctx, json_t *msg)
{
	struct call *call = NULL;
	json_t *resp;

	pthread_mutex_lock(&calls_mu);
	for (;;) {
		for (size_t i = 0; i < CALLS_MAX && !call; i++) {
			if (calls[i].used && calls[i].done) {
				pthread_join(calls[i].thread, NULL);
				memset(&calls[i], 0, sizeof(calls[i]));
			}
			if (!calls[i].used)
				call = &calls[i];
		}
		if (call)
			break;
		pthread_cond_wait(&calls_cv, &calls_mu);
	}
	call->used = true;
	call->msg = msg;
	call->ctx = *ctx;
	call->ctx.userdata = call;
	track_locked(call, msg);
	if (pthread_create(&call->thread, NULL, call_main, call) == 0) {
		pthread_mutex_unlock(&calls_mu);
		return;
	}
	/* No thread to spare: answer it here, in order. */
	untrack_locked(call);
	memset(call, 0, sizeof(*call));
	pthread_mutex_unlock(&calls_mu);
	if ((resp = aas_mcp_handle(ctx, msg)))
		send_line(resp);
	json_decref(msg);
}

/* What read_line() gives instead of a length. */
enum { LINE_EOF = -1, LINE_TOO_LONG = -2, LINE_NOMEM = -3 };

/*
 * Read one line of stdin into *buf, without its newline and NUL-terminated,
 * growing *buf up to AAS_MCP_MESSAGE_MAX bytes. A longer line is read to its
 * end and dropped, so a client cannot make aas-mcp hold more. Returns the
 * line's length (the last line may lack its newline), or a LINE_* value.
 */
static ssize_t read_line(char **buf, size_t *cap)
{
	ssize_t rc = 0;
	size_t len = 0;
	int c;

	flockfile(stdin); /* only this thread reads stdin: take the lock once, not per byte */
	while ((c = getc_unlocked(stdin)) != EOF && c != '\n') {
		if (rc < 0)
			continue; /* skipping the rest of a line refused */
		if (len == AAS_MCP_MESSAGE_MAX) {
			rc = LINE_TOO_LONG;
			continue;
		}
		if (len + 1 >= *cap) {
			size_t want = *cap ? *cap * 2 : 4096;
			char *p;
			if (want > AAS_MCP_MESSAGE_MAX + 1)
				want = AAS_MCP_MESSAGE_MAX + 1;
			if (!(p = realloc(*buf, want))) {
				rc = LINE_NOMEM;
				continue;
			}
			*buf = p;
			*cap = want;
		}
		(*buf)[len++] = (char)c;
	}
	funlockfile(stdin);
	if (rc < 0)
		return rc;
	if (c == EOF && len == 0)
		return LINE_EOF;
	(*buf)[len] = '\0';
	return (ssize_t)len;
}

static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

int main(int argc, char **argv)
{
	struct state st = { 0 };
	aas_mcp_ctx ctx = { .key_hint = key_hint, .notify = notify, .cancelled = cancelled };
	char *line = NULL;
	size_t cap = 0, origin_len;
	ssize_t n;
	int fd, rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("aas-mcp %s\n", saas_version());
			return 0;
		}
		fprintf(stderr, "aas-mcp: unknown argument \"%s\"\n%s", argv[i], usage);
		return 2;
	}

	/* Keep the real stdout for messages only; anything else printing to fd 1 lands on stderr. */
	signal(SIGPIPE, SIG_IGN);
	if ((fd = dup(STDOUT_FILENO)) < 0 || !(out = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		fprintf(stderr, "aas-mcp: cannot set up stdout: %s\n", strerror(errno));
		return 1;
	}

	st.base_url = getenv("AAS_BASE_URL");
	if (!st.base_url || !*st.base_url)
		st.base_url = DEFAULT_BASE_URL;
	st.api_key = getenv("AAS_API_KEY");
	if (st.api_key && !*st.api_key)
		st.api_key = NULL;
	origin_len = strlen(st.base_url);
	origin_len -= origin_len > 0 && st.base_url[origin_len - 1] == '/';
	snprintf(st.key_source, sizeof(st.key_source), "the dashboard's API keys page, %.*s/dashboard/keys",
	         (int)(origin_len < 500 ? origin_len : 500), st.base_url);
	ctx.key_source = st.key_source;
	if (!st.api_key)
		fprintf(stderr, "aas-mcp: AAS_API_KEY is not set; tool calls will say how to set it\n");

	while ((n = read_line(&line, &cap)) != LINE_EOF) {
		json_t *msg, *resp = NULL;
		char text[160];

		if (n == LINE_NOMEM) {
			send_line(aas_mcp_error(NULL, AAS_MCP_INTERNAL_ERROR, "out of memory: the line was skipped"));
			continue;
		}
		if (n == LINE_TOO_LONG) {
			snprintf(text, sizeof(text), "Invalid Request: a message is at most %zu bytes; this line was longer "
			         "and was skipped", AAS_MCP_MESSAGE_MAX);
			send_line(aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST, text));
			continue;
		}
		if (blank(line, (size_t)n))
			continue;
		if (!(msg = aas_mcp_parse(line, (size_t)n, &resp))) {
			if (resp)
				send_line(resp);
			continue;
		}
		/* A batch the negotiated version does not have, or too long a one: refused whole, unread. */
		if ((resp = aas_mcp_batch_error(&ctx, msg))) {
			send_line(resp);
			json_decref(msg);
			continue;
		}
		note_cancels(msg);
		if (calls_tool(msg)) {
			ensure_client(&st);
			ctx.client = st.client;
			ctx.client_status = st.client_status;
			ctx.client_problem = st.client_status ? st.problem : NULL;
			start_call(&ctx, msg);
		} else {
			resp = aas_mcp_handle(&ctx, msg);
			/* Batches are allowed from an initialize that settled on a version that has them. */
			if (aas_mcp_kind(msg) == AAS_MCP_INITIALIZE)
				ctx.batches = aas_mcp_version_batches(
					json_string_value(json_object_get(json_object_get(resp, "result"), "protocolVersion")));
			if (resp)
				send_line(resp);
			json_decref(msg);
		}
		reap(false);
		pthread_mutex_lock(&out_mu);
		rc = out_broken;
		pthread_mutex_unlock(&out_mu);
		if (rc)
			break;
	}
	/* EOF (or stdout gone): let the calls still running finish, and answer if anyone still reads. */
	reap(true);
	free(line);
	saas_client_free(st.client);
	fclose(out);
	return rc;
}
