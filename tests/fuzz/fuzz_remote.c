/*
 * The remote client (lib/remote) against a server that says anything: the
 * input is the server's answers, one per request, each its whole bytes on
 * the wire (status line, headers, body; chunked or not), separated by a line
 * "--@@--". A fixed script of public calls (saas_client_open_remote, account,
 * usage, create, get, lists and the next page by their cursor, exec, its
 * event stream, follows, stdin, signal, cancel, files read and written,
 * ports, metrics, code contexts and runs plain and streamed, fork, pause,
 * resume, network, destroy, the terminal's handshake) runs against a
 * responder on 127.0.0.1, and each request it gets takes the next answer.
 *
 * Why a real socket and not the parsers called directly: what a server sends
 * reaches the client through libcurl (status line, headers, chunking,
 * Content-Length, a connection cut short), then the client's callbacks
 * (Retry-After, the body caps, the streaming writers), then its JSON readers;
 * calling the readers alone would miss how those meet. On loopback, with one
 * connection per request closed after the answer, an input of 30 calls costs
 * a few milliseconds, which libFuzzer can afford. Once the answers run out
 * the script stops.
 *
 * In an answer, "@ACCEPT@" becomes the Sec-WebSocket-Accept of the request's
 * key, so that the terminal's handshake can succeed and its frames be read.
 *
 * Oracles, besides the sanitizers: every failure is a known saas_status with
 * saas_error_last() saying it with a message; no call returns more than
 * SAAS_OK; what a call returns on SAAS_OK is whole (ids, NUL-terminated
 * output of the length said, lists as long as their count).
 *
 * FUZZ_SHOW=1 prints each call's verdict. Recording seeds: FUZZ_REMOTE_RECORD=FILE runs the script once against
 * aas-server in-process on the fake driver (fuzz.h), the responder passing
 * each request on and keeping the answer, and writes the answers as an
 * input to FILE (tests/fuzz/corpus/remote/server-*).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer_server.h"
#include "fuzz.h"
#include "util/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEP "\n--@@--\n"
#define ANSWERS_MAX 64

static void die(const char *what)
{
	fprintf(stderr, "fuzz_remote: %s: %s\n", what, strerror(errno));
	abort();
}

/* ---- the server's answers ---- */

static bool show; /* FUZZ_SHOW=1: each request and call's verdict on stderr */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	unsigned int busy;           /* answers being sent */
	uint8_t *input;              /* the input's copy the answers point into */
	unsigned short port;
	const uint8_t *answer[ANSWERS_MAX];
	size_t answer_len[ANSWERS_MAX];
	size_t count, next;
	/* Recording: requests go on to the server, answers are kept here. */
	bool record;
	saas__buf kept;
} rs = { .mu = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

/* Recording: the request to the real server (one connection, closed after it), its answer kept and passed back. */
static void pass_on(int fd, const char *req, size_t len)
{
	static char answer[4u << 20];
	size_t got = fuzz_server_exchange(req, len, answer, sizeof(answer));
	char *acc = memmem(answer, got, "Sec-WebSocket-Accept: ", 22);

	answer_send(fd, answer, got);
	if (acc && (size_t)(acc + 22 + 28 - answer) <= got)
		memcpy(acc + 22, "@ACCEPT@", 8), memmove(acc + 30, acc + 50, got - (size_t)(acc + 50 - answer)), got -= 20;
	if (rs.kept.len)
		saas__buf_put(&rs.kept, SEP, strlen(SEP));
	saas__buf_put(&rs.kept, answer, got);
}

/* Each request: the input's next answer (none once they ran out: the connection just ends). */
static void respond(void *ud, int fd, const char *req, size_t len)
{
	const uint8_t *a = NULL;
	size_t alen = 0;

	(void)ud;
	if (rs.record) {
		pass_on(fd, req, len);
		return;
	}
	pthread_mutex_lock(&rs.mu);
	if (rs.next < rs.count) {
		a = rs.answer[rs.next];
		alen = rs.answer_len[rs.next];
		rs.busy++;
	}
	rs.next++;
	pthread_mutex_unlock(&rs.mu);
	if (show)
		fprintf(stderr, "fuzz_remote: %.*s -> answer %zu (%zu bytes)\n", (int)strcspn(req, "\r\n"), req,
		        rs.next - 1, alen);
	if (!a)
		return;
	answer_send_ws(fd, req, a, alen);
	pthread_mutex_lock(&rs.mu);
	if (!--rs.busy)
		pthread_cond_broadcast(&rs.idle);
	pthread_mutex_unlock(&rs.mu);
}

/* ---- oracles ---- */

/* Whether the script goes on: an answer is left for the next call. */
static bool more(void)
{
	bool m;

	pthread_mutex_lock(&rs.mu);
	m = rs.record || rs.next < rs.count;
	pthread_mutex_unlock(&rs.mu);
	return m;
}

static void fail(const char *call, int rc, const char *why)
{
	const saas_error *e = saas_error_last();
	fprintf(stderr, "fuzz_remote: %s returned %d (%s): %s; last error %d \"%s\"\n", call, rc, saas_error_name(rc),
	        why, e ? e->code : 0, e && e->message ? e->message : "(none)");
	abort();
}

/* A call's verdict: SAAS_OK, or a known status said with a message. Returns rc == SAAS_OK. */
static bool verdict(const char *call, int rc)
{
	const saas_error *e;

	if (show)
		fprintf(stderr, "fuzz_remote: %s: %s%s%s\n", call, saas_error_name(rc), rc ? ": " : "",
		        rc ? saas_error_last()->message : "");
	if (rc > 0)
		fail(call, rc, "above SAAS_OK");
	if (rc == SAAS_OK)
		return true;
	if (strcmp(saas_error_name(rc), "unknown") == 0)
		fail(call, rc, "not a saas_status");
	e = saas_error_last();
	if (!e || e->code != rc || !e->message || !*e->message)
		fail(call, rc, "saas_error_last() does not say it");
	if (e->retry_after_ms < 0 || e->retry_after_ms > 86400000LL)
		fail(call, rc, "retry_after_ms out of its range");
	return false;
}

static void need(const char *call, bool ok, const char *what)
{
	if (!ok)
		fail(call, SAAS_OK, what);
}

/* Touch every byte, so that the sanitizers see a short buffer. */
static volatile unsigned char sink;
static void touch(const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		sink ^= c[i];
}

static void str_ok(const char *call, const char *s, bool may_be_null)
{
	need(call, s || may_be_null, "a NULL string");
	if (s)
		touch(s, strlen(s) + 1);
}

static void sandbox_ok(const char *call, const saas_sandbox *sb)
{
	need(call, sb && sb->id && *sb->id && strlen(sb->id) <= SAAS_ID_MAX, "a sandbox without its id");
	str_ok(call, sb->size, false);
	str_ok(call, sb->image, false);
	str_ok(call, sb->parent_id, true);
	need(call, !sb->nports || sb->ports, "ports counted but absent");
	for (size_t i = 0; i < sb->nports; i++)
		need(call, sb->ports[i] != NULL, "a NULL port"), str_ok(call, sb->ports[i]->url, false);
	for (char **m = sb->metadata; m && *m; m++)
		str_ok(call, *m, false);
	for (char **m = sb->envs; m && *m; m++)
		str_ok(call, *m, false);
	if (sb->network) {
		need(call, sb->network->allow && sb->network->deny, "a network without its lists");
		for (char **r = sb->network->allow; *r; r++)
			str_ok(call, *r, false);
		for (char **r = sb->network->deny; *r; r++)
			str_ok(call, *r, false);
	}
}

static void execution_ok(const char *call, const saas_execution *x)
{
	need(call, x && x->id && *x->id && x->sandbox_id, "an execution without its ids");
	need(call, x->stdout_data && x->stderr_data, "an execution without its output");
	touch(x->stdout_data, x->stdout_len);
	touch(x->stderr_data, x->stderr_len);
	need(call, x->stdout_data[x->stdout_len] == '\0' && x->stderr_data[x->stderr_len] == '\0',
	     "output not NUL-terminated at its length");
	need(call, x->status >= SAAS_EXEC_RUNNING && x->status <= SAAS_EXEC_FAILED, "an unknown execution status");
	str_ok(call, x->error, false);
	str_ok(call, x->command, true);
}

static void code_execution_ok(const char *call, const saas_code_execution *x)
{
	need(call, x && x->stdout_data && x->stderr_data, "a run without its output");
	touch(x->stdout_data, x->stdout_len);
	touch(x->stderr_data, x->stderr_len);
	need(call, x->stdout_data[x->stdout_len] == '\0' && x->stderr_data[x->stderr_len] == '\0',
	     "output not NUL-terminated at its length");
	need(call, !x->result_count || x->results, "results counted but absent");
	for (size_t i = 0; i < x->result_count; i++) {
		need(call, x->results[i] != NULL, "a NULL result");
		need(call, !x->results[i]->count || x->results[i]->formats, "formats counted but absent");
		for (size_t f = 0; f < x->results[i]->count; f++) {
			need(call, x->results[i]->formats[f] != NULL, "a NULL format");
			str_ok(call, x->results[i]->formats[f]->mime, false);
			touch(x->results[i]->formats[f]->data, x->results[i]->formats[f]->len);
		}
	}
	if (x->error) {
		str_ok(call, x->error->name, false);
		str_ok(call, x->error->value, false);
		str_ok(call, x->error->traceback, false);
	}
}

/* ---- the script ---- */

struct tally {
	uint64_t bytes;
	unsigned int calls;
	bool started;
};

static int on_started(void *ud, const char *id)
{
	struct tally *t = ud;
	need("exec_stream started", id && *id && strlen(id) <= SAAS_ID_MAX, "a bad execution id");
	t->started = true;
	t->calls++;
	return 0;
}

static int on_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct tally *t = ud;
	(void)offset;
	need("exec output", stream == SAAS_EXEC_STDOUT || stream == SAAS_EXEC_STDERR, "an unknown stream");
	touch(data, len);
	t->bytes += len;
	t->calls++;
	return 0;
}

static void on_lost(void *ud, int stream, uint64_t offset, uint64_t len)
{
	struct tally *t = ud;
	(void)offset, (void)len;
	need("exec lost", stream == SAAS_EXEC_STDOUT || stream == SAAS_EXEC_STDERR, "an unknown stream");
	t->calls++;
}

static void on_exit_cb(void *ud, const saas_execution *x)
{
	struct tally *t = ud;
	execution_ok("exec exit", x);
	t->calls++;
}

static int on_event(void *ud, const saas_code_event *ev)
{
	struct tally *t = ud;
	if (ev->text)
		touch(ev->text, ev->len);
	t->calls++;
	return 0;
}

static int write_sink(void *ud, const void *data, size_t len)
{
	struct tally *t = ud;
	touch(data, len);
	t->bytes += len;
	return 0;
}

static long read_src(void *ud, void *buf, size_t size)
{
	size_t *left = ud, n = size < *left ? size : *left;
	memset(buf, 'x', n);
	*left -= n;
	return (long)n;
}

static struct fuzz_tenant tenant;
static saas_client *shared;
static char key[256] = "saas_fuzz_remote_key";
static char base[64];

static saas_client *open_client(void)
{
	saas_remote_options o = SAAS_REMOTE_OPTIONS_INIT;
	saas_client *c = NULL;

	o.retries = 0;
	o.timeout_ms = 10000;
	o.connect_timeout_ms = 5000;
	o.verify_tls = 0;
	verdict("saas_client_open_remote", saas_client_open_remote(&c, base, key, &o, 0));
	return c;
}

#define CALL(name, expr) (more() && verdict(name, (expr)))

/* The account, usage and the sandbox calls but the last ones. */
static void script_sandboxes(saas_client *c, const char *sb)
{
	const char *const meta[] = { "team=fuzz", NULL };
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_account_info *ai = NULL;
	saas_usage *us = NULL;
	saas_sandbox *s = NULL;
	saas_sandbox_list *sl = NULL;
	char *next = NULL;

	co.metadata = meta;
	if (CALL("saas_account_info_get", saas_account_info_get(&ai, c)))
		need("saas_account_info_get", ai && ai->id && *ai->id, "an account without its id");
	saas_account_info_free(ai);
	if (CALL("saas_usage_get", saas_usage_get(&us, c, 1700000000000LL, 1700086400000LL, 0)))
		need("saas_usage_get", us != NULL, "no usage");
	saas_usage_free(us);
	if (CALL("saas_sandbox_create", saas_sandbox_create(&s, c, &co, 0)))
		sandbox_ok("saas_sandbox_create", s);
	saas_sandbox_free(s), s = NULL;
	if (CALL("saas_sandbox_get", saas_sandbox_get(&s, c, sb)))
		sandbox_ok("saas_sandbox_get", s);
	saas_sandbox_free(s), s = NULL;
	/* A list, then its next page by the cursor it gave. */
	if (CALL("saas_sandbox_list_get", saas_sandbox_list_get(&sl, c, NULL, 2, 0))) {
		need("saas_sandbox_list_get", sl && (!sl->count || sl->items), "a list without its items");
		for (size_t i = 0; i < sl->count; i++)
			sandbox_ok("saas_sandbox_list_get", sl->items[i]);
		if (sl->next_cursor && *sl->next_cursor && !(next = strdup(sl->next_cursor)))
			abort();
	}
	saas_sandbox_list_free(sl), sl = NULL;
	if (next && CALL("saas_sandbox_list_get (cursor)", saas_sandbox_list_get(&sl, c, next, 2, 0)))
		for (size_t i = 0; i < sl->count; i++)
			sandbox_ok("saas_sandbox_list_get (cursor)", sl->items[i]);
	saas_sandbox_list_free(sl);
	free(next);
	if (CALL("saas_sandbox_extend", saas_sandbox_extend(&s, c, sb, 60, 0)))
		sandbox_ok("saas_sandbox_extend", s);
	saas_sandbox_free(s);
}

/* A list of executions: each whole. */
static void executions_ok(const char *call, const saas_execution_list *xl)
{
	need(call, xl && (!xl->count || xl->items), "a list without its items");
	for (size_t i = 0; i < xl->count; i++)
		execution_ok(call, xl->items[i]);
}

/* Commands: run, read back, listed, streamed, followed, fed, signalled, cancelled. */
static void script_exec(saas_client *c, const char *sb, struct tally *t)
{
	char exe[SAAS_ID_MAX + 1] = "exe-fuzz0000000000000000", *next = NULL;
	saas_exec_options eo = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_callbacks cb = { .version = SAAS_EXEC_CALLBACKS_VERSION, .started = on_started, .output = on_output,
		                   .lost = on_lost, .exit = on_exit_cb, .userdata = t };
	saas_exec_cursor cur = { 0, 0 };
	saas_execution *x = NULL;
	saas_execution_list *xl = NULL;

	eo.timeout_s = 30;
	if (CALL("saas_exec", saas_exec(&x, c, sb, "echo hello; echo oops >&2", &eo, 0))) {
		execution_ok("saas_exec", x);
		snprintf(exe, sizeof(exe), "%s", x->id);
	}
	saas_execution_free(x), x = NULL;
	if (CALL("saas_execution_get", saas_execution_get(&x, c, exe)))
		execution_ok("saas_execution_get", x);
	saas_execution_free(x), x = NULL;
	if (CALL("saas_execution_list_get", saas_execution_list_get(&xl, c, sb, NULL, 2, 0))) {
		executions_ok("saas_execution_list_get", xl);
		if (xl->next_cursor && *xl->next_cursor && !(next = strdup(xl->next_cursor)))
			abort();
	}
	saas_execution_list_free(xl), xl = NULL;
	if (next && CALL("saas_execution_list_get (cursor)", saas_execution_list_get(&xl, c, sb, next, 2, 0)))
		executions_ok("saas_execution_list_get (cursor)", xl);
	saas_execution_list_free(xl), xl = NULL;
	free(next);
	if (CALL("saas_execution_list_running", saas_execution_list_running(&xl, c, sb, 0)))
		executions_ok("saas_execution_list_running", xl);
	saas_execution_list_free(xl);
	if (CALL("saas_exec_stream", saas_exec_stream(&x, c, sb, "echo one; echo two >&2", &eo, &cb, 0)))
		execution_ok("saas_exec_stream", x);
	saas_execution_free(x), x = NULL;
	if (CALL("saas_execution_follow", saas_execution_follow(&x, c, exe, &cur, &cb, 0, 0)))
		execution_ok("saas_execution_follow", x);
	saas_execution_free(x), x = NULL;
	if (CALL("saas_execution_follow (wait)", saas_execution_follow(&x, c, exe, &cur, &cb, 2000, SAAS_FOLLOW_WAIT)) &&
	    x)
		execution_ok("saas_execution_follow (wait)", x);
	saas_execution_free(x);
	CALL("saas_execution_stdin", saas_execution_stdin(c, exe, "in\n", 3, SAAS_STDIN_CLOSE));
	CALL("saas_execution_signal", saas_execution_signal(c, exe, "TERM", 0));
	CALL("saas_execution_cancel", saas_execution_cancel(c, exe, 0));
}

/* Files both ways, ports, metrics. */
static void script_files(saas_client *c, const char *sb, struct tally *t)
{
	saas_file_list *fl = NULL;
	saas_metric_list *ml = NULL;
	char *url = NULL;
	void *data = NULL;
	size_t len = 0, left = 100;
	int64_t size = 0;
	int created = 0;

	if (CALL("saas_file_write", saas_file_write(c, sb, "note.txt", "hello\n", 6, NULL)) &&
	    CALL("saas_file_read", saas_file_read(&data, &len, c, sb, "note.txt", 4096))) {
		need("saas_file_read", data && len <= 4096, "more than asked for");
		touch(data, len);
	}
	saas_free(data);
	if (CALL("saas_file_read_stream", saas_file_read_stream(&size, c, sb, "note.txt", write_sink, t)))
		need("saas_file_read_stream", size >= 0, "a negative size");
	CALL("saas_file_write_stream", saas_file_write_stream(c, sb, "big.bin", read_src, &left, 100, NULL));
	if (CALL("saas_file_list_get", saas_file_list_get(&fl, c, sb, "/workspace", 2, 100, 0)))
		need("saas_file_list_get", fl && (!fl->count || fl->entries), "a list without its entries");
	saas_file_list_free(fl);
	CALL("saas_file_mkdir", saas_file_mkdir(&created, c, sb, "dir", 0));
	CALL("saas_file_rename", saas_file_rename(c, sb, "note.txt", "dir/note.txt", 0));
	CALL("saas_file_remove", saas_file_remove(c, sb, "dir", 0));
	if (CALL("saas_port_expose", saas_port_expose(&url, c, sb, 8000, 0)))
		str_ok("saas_port_expose", url, false);
	saas_free(url);
	CALL("saas_port_unexpose", saas_port_unexpose(c, sb, 8000));
	if (CALL("saas_sandbox_metrics_get", saas_sandbox_metrics_get(&ml, c, sb, 0, 0, 0)))
		need("saas_sandbox_metrics_get", ml && (!ml->count || ml->items), "metrics without their points");
	saas_metric_list_free(ml);
}

/* Code contexts and runs, plain and streamed; the terminal's handshake. */
static void script_code(saas_client *c, const char *sb, struct tally *t)
{
	saas_code_run_options ro = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_context_options cco = SAAS_CODE_CONTEXT_OPTIONS_INIT;
	saas_pty_options po = SAAS_PTY_OPTIONS_INIT;
	char ctx[SAAS_CODE_CONTEXT_ID_MAX + 1] = "ctx-fuzz";
	saas_code_context *cc = NULL;
	saas_code_context_list *ccl = NULL;
	saas_code_execution *cx = NULL;
	saas_pty *pty = NULL;

	cco.language = "python";
	if (CALL("saas_code_context_create", saas_code_context_create(&cc, c, sb, &cco, 0))) {
		need("saas_code_context_create", cc && cc->id && *cc->id, "a context without its id");
		snprintf(ctx, sizeof(ctx), "%s", cc->id);
	}
	saas_code_context_free(cc);
	if (CALL("saas_code_context_list_get", saas_code_context_list_get(&ccl, c, sb, 0)))
		need("saas_code_context_list_get", ccl && (!ccl->count || ccl->items), "a list without its items");
	saas_code_context_list_free(ccl);
	CALL("saas_code_context_restart", saas_code_context_restart(c, sb, ctx, 0));
	if (CALL("saas_code_run", saas_code_run(&cx, c, sb, "print(1)", &ro, 0)))
		code_execution_ok("saas_code_run", cx);
	saas_code_execution_free(cx), cx = NULL;
	ro.on_event = on_event;
	ro.userdata = t;
	ro.max_output = 4096;
	ro.max_result = 4096;
	if (CALL("saas_code_run (events)", saas_code_run(&cx, c, sb, "print(2)", &ro, 0)))
		code_execution_ok("saas_code_run (events)", cx);
	saas_code_execution_free(cx);
	CALL("saas_code_context_delete", saas_code_context_delete(c, sb, ctx, 0));
	if (CALL("saas_pty_open", saas_pty_open(&pty, c, sb, &po, 0))) {
		char buf[256];
		size_t got = 0;
		int status = 0;
		(void)saas_pty_read(pty, buf, sizeof(buf), &got, 50);
		touch(buf, got);
		saas_pty_close(pty, &status);
	}
}

/* The sandbox's last calls: fork, pause, resume, destroy. */
static void script_end(saas_client *c, const char *sb)
{
	saas_sandbox_list *sl = NULL;
	saas_sandbox *s = NULL;

	if (CALL("saas_sandbox_fork", saas_sandbox_fork(&sl, c, sb, 2, NULL, 0)))
		for (size_t i = 0; i < sl->count; i++)
			sandbox_ok("saas_sandbox_fork", sl->items[i]);
	saas_sandbox_list_free(sl);
	if (CALL("saas_sandbox_pause", saas_sandbox_pause(&s, c, sb, 0)))
		sandbox_ok("saas_sandbox_pause", s);
	saas_sandbox_free(s), s = NULL;
	if (CALL("saas_sandbox_resume", saas_sandbox_resume(&s, c, sb, 0)))
		sandbox_ok("saas_sandbox_resume", s);
	saas_sandbox_free(s), s = NULL;
	if (CALL("saas_sandbox_destroy", saas_sandbox_destroy(&s, c, sb, 0)))
		sandbox_ok("saas_sandbox_destroy", s);
	saas_sandbox_free(s);
}

static void script(saas_client *c, const char *sb)
{
	struct tally t = { 0 };

	script_sandboxes(c, sb);
	script_exec(c, sb, &t);
	script_files(c, sb, &t);
	script_code(c, sb, &t);
	script_end(c, sb);
}

/* Record: the script once against the real server, its answers as an input in FILE. */
static void record(const char *file)
{
	FILE *f;
	saas_client *c;

	fuzz_server_start(fuzz_driver(NULL), &tenant);
	snprintf(key, sizeof(key), "%s", tenant.key);
	rs.record = true;
	if (!(c = open_client()))
		die("open a client on the server");
	script(c, tenant.sandbox_id);
	saas_client_free(c);
	if (!(f = fopen(file, "wb")) || fwrite(rs.kept.data, 1, rs.kept.len, f) != rs.kept.len || fclose(f) != 0)
		die(file);
	fprintf(stderr, "fuzz_remote: %zu bytes of answers in %s\n", rs.kept.len, file);
	exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char account[] =
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 33\r\n\r\n"
		"{\"id\":\"acc-fuzz\",\"name\":\"fuzz\"}\r\n";
	const char *rec = getenv("FUZZ_REMOTE_RECORD");

	show = getenv("FUZZ_SHOW") && strcmp(getenv("FUZZ_SHOW"), "1") == 0;
	(void)argc;
	(void)argv;
	rs.port = answer_server_start(respond, NULL);
	snprintf(base, sizeof(base), "http://127.0.0.1:%u", rs.port);
	if (rec && *rec)
		record(rec);
	/* The client the script falls back on when the input's own open fails. */
	rs.answer[0] = (const uint8_t *)account;
	rs.answer_len[0] = strlen(account);
	rs.count = 1;
	if (!(shared = open_client())) {
		fprintf(stderr, "fuzz_remote: cannot open the shared client: %s\n", saas_error_last()->message);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p, *end;
	saas_client *own;

	pthread_mutex_lock(&rs.mu);
	free(rs.input);
	if (!(rs.input = malloc(size ? size : 1)))
		abort();
	memcpy(rs.input, data, size);
	p = rs.input, end = rs.input + size;
	rs.count = rs.next = 0;
	while (p <= end && rs.count < ANSWERS_MAX) {
		const uint8_t *sep = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
		const uint8_t *stop = sep ? sep : end;
		rs.answer[rs.count] = p;
		rs.answer_len[rs.count++] = (size_t)(stop - p);
		if (!sep)
			break;
		p = sep + strlen(SEP);
	}
	pthread_mutex_unlock(&rs.mu);
	/* The first answer is the open's (GET /v1/account); a client that failed to open goes on as the shared one. */
	own = open_client();
	script(own ? own : shared, "sbx-fuzz0000000000000000");
	saas_client_free(own);
	/* An answer the client stopped reading may still be going out: done before the next input. */
	pthread_mutex_lock(&rs.mu);
	rs.count = 0;
	while (rs.busy)
		pthread_cond_wait(&rs.idle, &rs.mu);
	pthread_mutex_unlock(&rs.mu);
	return 0;
}
