/*
 * The MCP tools: one table entry each (name, description, input and output
 * schema, annotations) and a function over the public libsaas API.
 *
 * Mistakes an agent can fix (an unknown or destroyed sandbox, a bad path, no
 * credit, a command that timed out, no key) come back as a tool result with
 * isError set and text that says what to do next, never as a protocol error:
 * the model reads results, not JSON-RPC errors.
 *
 * One file of ~1,450 lines on purpose: every tool is a short function over the
 * public API, and they share the argument checks and the result and error
 * shapes kept static here, so that what an agent reads is said one way. When
 * new tools make it longer, the tools move out by area and the shared
 * helpers into a header of their own.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_internal.h"
#include "wire.h"

/* read_file returns at most this much unless asked for more (a whole file is context an agent pays for). */
#define READ_DEFAULT ((int64_t)1 << 20)
#define READ_MAX ((int64_t)16 << 20)

struct call {
	const aas_mcp_ctx *ctx;
	const json_t *args;
	const char *tool;
	const json_t *id;        /* the request's, for ctx->cancelled */
	const json_t *progress;  /* params._meta.progressToken, or NULL */
	json_int_t progress_n;   /* the last progress sent */
	char err[1024];
};

/* ---- small helpers ---- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- results ---- */

static json_t *text_item(const char *text)
{
	return json_pack("{s:s,s:s}", "type", "text", "text", text);
}

/* Success: structuredContent and the same JSON as text. Steals `data`. */
static json_t *ok(json_t *data)
{
	char *text = json_dumps(data, JSON_COMPACT);
	json_t *res;

	if (!text) {
		json_decref(data);
		return NULL;
	}
	res = json_pack("{s:[o],s:o,s:b}", "content", text_item(text), "structuredContent", data, "isError", 0);
	free(text);
	return res;
}

static json_t *fail(const char *text)
{
	return json_pack("{s:[o],s:b}", "content", text_item(text), "isError", 1);
}

static json_t *failf(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *failf(struct call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return fail(c->err);
}

/* The detail of the failure rc of the last libsaas call on this thread, or its fixed text. */
static void saas_detail(char *buf, size_t size, int rc)
{
	const saas_error *e = saas_error_last();

	snprintf(buf, size, "%s", e->code == rc && e->message[0] ? e->message : saas_strerror(rc));
}

/*
 * What an agent can do about a failure, one row per code of SAAS_STATUS_LIST
 * (saas/errors.h), indexed by -code. Each row names its code, so a code
 * appended to the list without a row fails the build when it is the last
 * (the size check) and the error table test (unit.errors) wherever it is.
 */
static const char service_failed[] =
	"The service failed. Retry; if it keeps failing, destroy the sandbox and create a new one.";

static const struct {
	int code;
	const char *hint;
} mcp_codes[] = {
	[-SAAS_OK] = { SAAS_OK, service_failed },
	[-SAAS_ERROR] = { SAAS_ERROR, service_failed },
	[-SAAS_EINVAL] = { SAAS_EINVAL, "Fix the arguments and call again." },
	[-SAAS_ENOMEM] = { SAAS_ENOMEM, service_failed },
	[-SAAS_ENOTFOUND] = { SAAS_ENOTFOUND,
	                      "Check the sandbox_id (list_sandboxes shows this account's sandboxes) and the path "
	                      "(list_files shows what exists; relative paths are under /workspace)." },
	[-SAAS_EEXISTS] = { SAAS_EEXISTS, service_failed },
	[-SAAS_EAUTH] = { SAAS_EAUTH, "Send a valid API key." },
	[-SAAS_ECREDIT] = { SAAS_ECREDIT,
	                    "The account's credit cannot pay for this. Destroy sandboxes you no longer need "
	                    "(list_sandboxes, destroy_sandbox), choose a smaller size, or ask the operator for credit; "
	                    "get_usage shows the balance." },
	[-SAAS_ELIMIT] = { SAAS_ELIMIT,
	                   "An account limit would be passed (max_sandboxes: sandboxes at once). Destroy sandboxes you "
	                   "no longer need (list_sandboxes shows them); get_usage shows the limits." },
	[-SAAS_ESTATE] = { SAAS_ESTATE,
	                   "The sandbox cannot be used now: it was destroyed (by destroy_sandbox, by expiring, or for "
	                   "lack of credit), is still starting, or is paused (resume_sandbox brings it back). "
	                   "get_sandbox shows its status; create_sandbox makes a new one." },
	[-SAAS_ETIMEOUT] = { SAAS_ETIMEOUT, "It did not finish in time. Retry, or give a longer timeout." },
	[-SAAS_EBACKEND] = { SAAS_EBACKEND, service_failed },
	[-SAAS_ESTORE] = { SAAS_ESTORE, service_failed },
	[-SAAS_EIO] = { SAAS_EIO,
	                "The guest failed the operation (e.g. its disk is full). Check with run_command (df -h), free "
	                "space or retry." },
	[-SAAS_ENOTSUP] = { SAAS_ENOTSUP, "This service does not support that; try without the option." },
	[-SAAS_ETOOBIG] = { SAAS_ETOOBIG,
	                    "It is too large for one call. Split it, or work on it inside the sandbox with run_command "
	                    "(head, tail, split, gzip)." },
	[-SAAS_EISDIR] = { SAAS_EISDIR, "The path is a directory; list_files shows what is inside it." },
	[-SAAS_ENETWORK] = { SAAS_ENETWORK, service_failed },
	[-SAAS_EPROTOCOL] = { SAAS_EPROTOCOL, service_failed },
	[-SAAS_EBUSY] = { SAAS_EBUSY, service_failed },
	[-SAAS_EPERM] = { SAAS_EPERM,
	                  "Permission denied: code runs as an unprivileged user without sudo. Write under /workspace, "
	                  "the home directory or /tmp, and read files that user may read." },
};

_Static_assert(sizeof(mcp_codes) / sizeof(mcp_codes[0]) == SAAS_STATUS_COUNT, "a status code without its MCP hint");

bool aas_mcp_status_known(int rc)
{
	return rc <= 0 && rc > -SAAS_STATUS_COUNT && mcp_codes[-rc].code == rc;
}

const char *aas_mcp_error_hint(int rc)
{
	/* A code newer than this program reads as SAAS_ERROR. */
	return aas_mcp_status_known(rc) ? mcp_codes[-rc].hint : service_failed;
}

/* What to do about a limit saas_error.limit names. */
static const char *limit_hint(const char *limit)
{
	if (!strcmp(limit, "max_executions"))
		return "Too many commands are running in this account at once (max_executions). Wait for one to "
		       "finish (get_execution shows a background one) and call again.";
	if (!strcmp(limit, "creates_per_minute"))
		return "This account created sandboxes too quickly (creates_per_minute). Wait a little, or reuse a "
		       "sandbox you have (list_sandboxes).";
	if (!strcmp(limit, "requests_per_second") || !strcmp(limit, "requests_per_address"))
		return "Too many requests too quickly. Wait a second and call again.";
	return aas_mcp_error_hint(SAAS_ELIMIT);
}

/* The failure of a libsaas call, with what the agent can do about it; `msg` is its detail. */
static json_t *fail_saas_msg(struct call *c, int rc, const char *msg)
{
	const saas_error *e = saas_error_last();

	if (rc == SAAS_EAUTH)
		return failf(c, "%s: the API key is unknown or revoked. Send a valid key with %s.", c->tool,
		             c->ctx->key_hint ? c->ctx->key_hint : "the request");
	/* A create's detail was taken on its own thread: this one's class is not its. */
	if ((c->ctx->flags & AAS_MCP_TENANT) &&
	    aas_error_is_internal(rc, e->code == rc ? e->klass : SAAS_ERRCLASS_NONE)) {
		if (c->ctx->log) {
			char line[700];
			snprintf(line, sizeof(line), "MCP %s answered %s for: %s", c->tool, saas_error_name(rc), msg);
			c->ctx->log(line);
		}
		msg = aas_error_tenant_text(rc);
	}
	/* A limit that names itself: which one, when to retry, and what to do meanwhile. */
	if (rc == SAAS_ELIMIT && e->code == rc && e->limit[0])
		return failf(c, "%s failed: %s (%s, limit %s; retry after %lld s). %s", c->tool, msg,
		             saas_error_name(rc), e->limit, (long long)((e->retry_after_ms + 999) / 1000),
		             limit_hint(e->limit));
	return failf(c, "%s failed: %s (%s). %s", c->tool, msg, saas_error_name(rc), aas_mcp_error_hint(rc));
}

/* The same, right after the failing call on this thread. */
static json_t *fail_saas(struct call *c, int rc)
{
	char msg[512];

	saas_detail(msg, sizeof(msg), rc);
	return fail_saas_msg(c, rc, msg);
}

/* ---- progress and cancellation ---- */

static bool cancelled(struct call *c)
{
	return c->ctx->cancelled && c->id && c->ctx->cancelled(c->ctx->userdata, c->id);
}

/* Send notifications/progress with the next progress value, if the caller asked for progress. */
static void progress(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct call *c, const char *fmt, ...)
{
	char text[200];
	va_list ap;
	json_t *n;

	if (!c->progress || !c->ctx->notify || cancelled(c))
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	n = json_pack("{s:s,s:s,s:{s:O,s:I,s:s}}", "jsonrpc", "2.0", "method", "notifications/progress", "params",
	              "progressToken", (json_t *)c->progress, "progress", ++c->progress_n, "message", text);
	if (n)
		c->ctx->notify(c->ctx->userdata, n);
}

/* ---- arguments ---- */

static bool bad_arg(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad_arg(struct call *c, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(c->err, sizeof(c->err), "Invalid arguments to %s: ", c->tool);

	va_start(ap, fmt);
	vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

static bool arg_str(struct call *c, const char *name, bool required, const char **out)
{
	const json_t *v = json_object_get(c->args, name);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return bad_arg(c, "\"%s\" is required.", name);
		return true;
	}
	if (!json_is_string(v))
		return bad_arg(c, "\"%s\" must be a string.", name);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad_arg(c, "\"%s\" may not contain NUL characters.", name);
	*out = json_string_value(v);
	return true;
}

static bool arg_int(struct call *c, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const json_t *v = json_object_get(c->args, name);
	int64_t x;

	if (!v || json_is_null(v))
		return true;
	if (json_is_integer(v))
		x = json_integer_value(v);
	else if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v) &&
	         json_real_value(v) > -9e18 && json_real_value(v) < 9e18)
		x = (int64_t)json_real_value(v);
	else
		return bad_arg(c, "\"%s\" must be an integer.", name);
	if (x < min || x > max)
		return bad_arg(c, "\"%s\" must be between %lld and %lld.", name, (long long)min, (long long)max);
	*out = x;
	return true;
}

/*
 * An object of strings (create_sandbox's metadata and envs) as "KEY=VALUE"
 * strings in *list (NULL when absent; free with pairs_free), as the REST
 * create takes it: the count bounded by `max` before anything is copied, each
 * key without '=' and each value without NUL here; the library checks the
 * rest (lengths, names) and says what is wrong.
 */
static bool arg_pairs(struct call *c, const char *name, size_t max, char ***list)
{
	const json_t *v = json_object_get(c->args, name);
	json_t *val;
	const char *key;
	size_t n = 0;

	*list = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v) || json_object_size(v) > max)
		return bad_arg(c, "\"%s\" must be an object of at most %zu KEY: \"value\" strings.", name, max);
	if (!(*list = calloc(json_object_size(v) + 1, sizeof(**list))))
		return bad_arg(c, "out of memory");
	json_object_foreach((json_t *)v, key, val) {
		if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val) || strchr(key, '='))
			return bad_arg(c, "\"%s\": each value must be a string without NUL, each key without '=' (\"%.64s\" "
			               "is not).", name, key);
		if (asprintf(&(*list)[n], "%s=%s", key, json_string_value(val)) < 0) {
			(*list)[n] = NULL;
			return bad_arg(c, "out of memory");
		}
		n++;
	}
	return true;
}

static void pairs_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

static json_t *arg_fail(struct call *c)
{
	return fail(c->err);
}

/* ---- shapes: lib/wire's, without their nulls (wire.h) ---- */

/* The REST sandbox, and what an agent would otherwise work out from two times: the seconds it has left. */
static json_t *sandbox_json(const saas_sandbox *sb)
{
	json_t *o = saas__wire_sandbox(sb);
	int64_t left = sb->status == SAAS_SANDBOX_DESTROYED ? 0 : (sb->expires_at_ms - now_ms()) / 1000;

	if (o)
		json_object_set_new(o, "expires_in_seconds", json_integer(left > 0 ? left : 0));
	return saas__wire_drop_nulls(o);
}

/* read_file's content: text when it is valid UTF-8, else base64; `enc_key` says which. */
static void set_bytes(json_t *o, const char *key, const char *enc_key, const void *data, size_t len)
{
	json_t *s = json_stringn(data ? data : "", data ? len : 0);

	if (s) {
		json_object_set_new(o, key, s);
		json_object_set_new(o, enc_key, json_string("utf-8"));
		return;
	}
	char *b = saas_base64_encode(data, len);
	json_object_set_new(o, key, json_string(b ? b : ""));
	json_object_set_new(o, enc_key, json_string("base64"));
	saas_free(b);
}

/* ---- the tools ---- */

/*
 * saas_sandbox_create() on a thread of its own, so that the caller's thread can
 * send a heartbeat while it runs: the call itself says nothing until it returns.
 */
struct create_job {
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* on CLOCK_MONOTONIC */
	bool done;
	saas_client *client;
	const saas_create_options *options;
	saas_sandbox *sb;
	int rc;
	char msg[512];           /* the error detail, taken on the worker's thread (it is per thread) */
};

static void *create_main(void *arg)
{
	struct create_job *j = arg;
	saas_sandbox *sb = NULL;
	int rc = saas_sandbox_create(&sb, j->client, j->options, 0);

	pthread_mutex_lock(&j->mu);
	j->sb = sb;
	j->rc = rc;
	if (rc < 0)
		saas_detail(j->msg, sizeof(j->msg), rc);
	j->done = true;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Create with a progress notification every interval until it returns; 0 or the create's saas_status. */
static int create_reporting(struct call *c, const saas_create_options *o, saas_sandbox **sb, char *msg, size_t size)
{
	int64_t interval = c->ctx->progress_interval_ms ? c->ctx->progress_interval_ms : 1000, start = mono_ms(), next;
	struct create_job j;
	pthread_condattr_t ca;
	pthread_t thread;
	int rc;

	memset(&j, 0, sizeof(j));
	j.client = c->ctx->client;
	j.options = o;
	pthread_mutex_init(&j.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&thread, NULL, create_main, &j) != 0) {
		/* No thread to spare: create here, without the heartbeat. */
		create_main(&j);
	} else {
		pthread_mutex_lock(&j.mu);
		for (next = start + interval; !j.done;) {
			struct timespec ts = { (time_t)(next / 1000), (long)(next % 1000) * 1000000 };
			pthread_cond_timedwait(&j.cv, &j.mu, &ts);
			if (j.done || mono_ms() < next)
				continue;
			next += interval;
			pthread_mutex_unlock(&j.mu);
			progress(c, "booting the VM (%lld s)", (long long)((mono_ms() - start + 500) / 1000));
			pthread_mutex_lock(&j.mu);
		}
		pthread_mutex_unlock(&j.mu);
		pthread_join(thread, NULL);
	}
	pthread_cond_destroy(&j.cv);
	pthread_mutex_destroy(&j.mu);
	*sb = j.sb;
	rc = j.rc;
	snprintf(msg, size, "%s", j.msg);
	return rc;
}

/*
 * The network arguments: "network" (a mode's name) and the "allow" and
 * "deny" lists as separate fields rather than one field of two types, which
 * some clients' schema handling does not take. Read through lib/wire's one
 * decoder of a network, as {mode, allow, deny}. *given is false when none is
 * there (the default); false after bad_arg().
 */
static bool arg_network(struct call *c, saas__wire_network_req *req, bool *given)
{
	static const char *const keys[] = { "network", "allow", "deny" };
	const char *bad = NULL;
	json_t *v = json_object();
	bool ok = true;

	*given = false;
	for (size_t i = 0; v && i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *m = json_object_get(c->args, keys[i]);

		if (m && !json_is_null(m)) {
			json_object_set(v, i == 0 ? "mode" : keys[i], m);
			*given = true;
		}
	}
	if (!v)
		return bad_arg(c, "out of memory");
	if (*given && saas__wire_network_req_decode(req, v, &bad) < 0)
		ok = bad_arg(c, "%s.", bad);
	json_decref(v);
	return ok;
}

static json_t *t_create(struct call *c)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas__wire_network_req net;
	saas_sandbox *sb = NULL;
	json_t *res = NULL;
	char **metadata = NULL, **envs = NULL;
	int64_t timeout = 0;
	char msg[512] = "";
	bool net_given;
	int rc;

	if (!arg_str(c, "size", false, &o.size) || !arg_str(c, "image", false, &o.image) ||
	    !arg_network(c, &net, &net_given) || !arg_int(c, "timeout_seconds", 1, 86400 * 365, &timeout) ||
	    !arg_pairs(c, "metadata", SAAS_METADATA_MAX, &metadata) || !arg_pairs(c, "envs", SAAS_ENVS_MAX, &envs)) {
		res = arg_fail(c);
		goto out;
	}
	o.timeout_s = timeout;
	o.metadata = (const char *const *)metadata;
	o.envs = (const char *const *)envs;
	if (net_given)
		o.network_spec = &net.spec;
	if (cancelled(c)) { /* before anything was made: nothing to undo */
		res = failf(c, "create_sandbox was cancelled before it started; nothing was created.");
		goto out;
	}
	if (c->progress && c->ctx->notify) {
		progress(c, "creating sandbox");
		rc = create_reporting(c, &o, &sb, msg, sizeof(msg));
	} else if ((rc = saas_sandbox_create(&sb, c->ctx->client, &o, 0)) < 0) {
		saas_detail(msg, sizeof(msg), rc);
	}
	if (rc < 0) {
		res = fail_saas_msg(c, rc, msg);
		goto out;
	}
	/*
	 * Cancelled while it was being made: the public API cannot stop a create
	 * halfway, so the sandbox is destroyed as soon as it exists, before it runs
	 * (and bills) for nobody. The response is withheld (protocol.c).
	 */
	if (cancelled(c)) {
		rc = saas_sandbox_destroy(NULL, c->ctx->client, sb->id, 0);
		res = rc < 0 ? fail_saas(c, rc)
		             : failf(c, "create_sandbox was cancelled; sandbox %s was destroyed.", sb->id);
		goto out;
	}
	progress(c, "ready");
	res = ok(sandbox_json(sb));
out:
	saas_sandbox_free(sb);
	pairs_free(metadata);
	pairs_free(envs);
	return res;
}

/*
 * run_command's output as progress, while it runs: one notification per
 * chunk, its text the message (base64 when not UTF-8, said in _meta). At most
 * the output the result keeps (max_output) per stream goes out this way, so
 * a transport that buffers notifications holds no more than the result will.
 */
struct run_progress {
	struct call *c;
	size_t sent[2];
	bool said_cut;
};

static int run_chunk(void *userdata, int stream, uint64_t offset, const void *data, size_t len)
{
	struct run_progress *p = userdata;
	struct call *c = p->c;
	int s = stream == SAAS_EXEC_STDERR;
	json_t *chunk, *n;

	if (cancelled(c))
		return 1; /* notifications/cancelled: the command dies with all it started */
	if (p->sent[s] >= SAAS_EXEC_OUTPUT_DEFAULT) {
		if (!p->said_cut) {
			p->said_cut = true;
			progress(c, "(more output: the result holds what was kept)");
		}
		return 0;
	}
	if (len > SAAS_EXEC_OUTPUT_DEFAULT - p->sent[s])
		len = SAAS_EXEC_OUTPUT_DEFAULT - p->sent[s];
	p->sent[s] += len;
	if (!(chunk = saas__wire_exec_chunk(stream, offset, data, len)))
		return 0;
	n = json_pack("{s:s,s:s,s:{s:O,s:I,s:O,s:{s:O,s:O,s:O}}}", "jsonrpc", "2.0", "method", "notifications/progress",
	              "params", "progressToken", (json_t *)c->progress, "progress", ++c->progress_n, "message",
	              json_object_get(chunk, json_is_string(json_object_get(chunk, "data")) ? "data" : "data_base64"),
	              "_meta", "stream", json_object_get(chunk, "stream"), "offset", json_object_get(chunk, "offset"),
	              "encoding", json_object_get(chunk, "data_encoding"));
	json_decref(chunk);
	if (n)
		c->ctx->notify(c->ctx->userdata, n);
	return 0;
}

static json_t *t_run(struct call *c)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	const char *id, *cmd, *in = NULL;
	const json_t *env = json_object_get(c->args, "env");
	const char **envv = NULL;
	saas_execution *x = NULL;
	json_t *res = NULL, *data;
	int64_t timeout = 0;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_str(c, "command", true, &cmd) ||
	    !arg_str(c, "cwd", false, &o.cwd) || !arg_str(c, "stdin", false, &in) ||
	    !arg_int(c, "timeout_seconds", 1, SAAS_EXEC_TIMEOUT_MAX, &timeout))
		return arg_fail(c);
	if (env && !json_is_null(env)) {
		const char *k;
		json_t *v;
		size_t n = 0;
		if (!json_is_object(env) || !(envv = calloc(json_object_size(env) + 1, sizeof(*envv))))
			return bad_arg(c, "\"env\" must be an object of NAME: \"value\" strings."), arg_fail(c);
		json_object_foreach((json_t *)env, k, v) {
			char *kv;
			if (!*k || strchr(k, '=')) {
				bad_arg(c, "\"env\" names may not be empty or contain '='.");
				res = arg_fail(c);
				goto out;
			}
			/* A NUL would cut the value short without a word. */
			if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
			    asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
				bad_arg(c, "\"env\" values must be strings without NUL (\"%s\" is not).", k);
				res = arg_fail(c);
				goto out;
			}
			envv[n++] = kv;
		}
		o.env = envv;
	}
	o.timeout_s = timeout;
	if (in) {
		o.stdin_data = in;
		o.stdin_len = strlen(in);
	}
	if (c->progress && c->ctx->notify) {
		struct run_progress p = { c, { 0, 0 }, false };
		saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
		cb.output = run_chunk;
		cb.userdata = &p;
		rc = saas_exec_stream(&x, c->ctx->client, id, cmd, &o, &cb, 0);
	} else {
		rc = saas_exec(&x, c->ctx->client, id, cmd, &o, 0);
	}
	if (rc < 0) {
		res = fail_saas(c, rc);
		goto out;
	}
	data = saas__wire_drop_nulls(saas__wire_execution(x));
	if (x->status == SAAS_EXEC_TIMEDOUT || x->status == SAAS_EXEC_FAILED) {
		char *text = json_dumps(data, JSON_COMPACT);
		if (x->status == SAAS_EXEC_TIMEDOUT)
			res = failf(c, "The command timed out after %lld s and was killed, with everything it started. run_command waits for the command to "
			         "finish: start servers and other long-running processes in the background with `&` "
			         "(e.g. `cmd >/tmp/out.log 2>&1 &`), or pass a larger timeout_seconds (at most %d). "
			         "What it printed: %s",
			      (long long)(timeout ? timeout : SAAS_EXEC_TIMEOUT_DEFAULT), SAAS_EXEC_TIMEOUT_MAX,
			      text ? text : "");
		else
			res = failf(c, "The command could not run: %s. get_sandbox shows whether the sandbox is still ready; "
			         "create_sandbox makes a new one.", x->error && *x->error ? x->error : "unknown error");
		free(text);
		json_decref(data);
		goto out;
	}
	res = ok(data);
out:
	for (size_t i = 0; envv && envv[i]; i++)
		free((char *)envv[i]);
	free(envv);
	saas_execution_free(x);
	return res;
}

static json_t *t_write(struct call *c)
{
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	const char *id, *path, *content, *enc, *mode;
	const json_t *cv = json_object_get(c->args, "content");
	unsigned char *bytes = NULL;
	size_t len;
	json_t *res;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_str(c, "path", true, &path) ||
	    !arg_str(c, "encoding", false, &enc) || !arg_str(c, "mode", false, &mode))
		return arg_fail(c);
	if (!json_is_string(cv))
		return bad_arg(c, "\"content\" is required and must be a string (use encoding \"base64\" for binary)."),
		       arg_fail(c);
	content = json_string_value(cv);
	len = json_string_length(cv);
	if (mode) {
		/* The schema's ^[0-7]{1,4}$: strtoul() alone would take " 755", "+755" and "-0". */
		size_t n = strlen(mode);
		if (n < 1 || n > 4 || strspn(mode, "01234567") != n)
			return bad_arg(c, "\"mode\" must be octal permission bits such as \"0644\" or \"755\"."), arg_fail(c);
		o.mode = (unsigned int)strtoul(mode, NULL, 8);
	}
	if (enc && strcmp(enc, "base64") == 0) {
		if (saas_base64_decode((void **)&bytes, &len, content, len) < 0)
			return bad_arg(c, "\"content\" is not valid base64."), arg_fail(c);
		rc = saas_file_write(c->ctx->client, id, path, bytes, len, &o);
	} else if (!enc || strcmp(enc, "utf-8") == 0 || strcmp(enc, "utf8") == 0) {
		rc = saas_file_write(c->ctx->client, id, path, content, len, &o);
	} else {
		return bad_arg(c, "\"encoding\" must be \"utf-8\" or \"base64\"."), arg_fail(c);
	}
	if (rc < 0)
		res = fail_saas(c, rc);
	else
		res = ok(json_pack("{s:s,s:s,s:I}", "sandbox_id", id, "path", path, "bytes", (json_int_t)len));
	saas_free(bytes);
	return res;
}

static json_t *t_read(struct call *c)
{
	const char *id, *path;
	int64_t max = READ_DEFAULT;
	void *data = NULL;
	size_t len = 0;
	json_t *o;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_str(c, "path", true, &path) ||
	    !arg_int(c, "max_bytes", 1, READ_MAX, &max))
		return arg_fail(c);
	if ((rc = saas_file_read(&data, &len, c->ctx->client, id, path, max)) < 0) {
		if (rc == SAAS_ETOOBIG)
			return failf(c, "read_file: %s is larger than max_bytes (%lld). Pass a larger max_bytes (at most "
			                "%lld), or read part of it with run_command (head -c, tail, split).",
			             path, (long long)max, (long long)READ_MAX);
		return fail_saas(c, rc);
	}
	o = json_pack("{s:s,s:s,s:I}", "sandbox_id", id, "path", path, "bytes", (json_int_t)len);
	set_bytes(o, "content", "encoding", data, len);
	saas_free(data);
	return ok(o);
}

static json_t *t_list_files(struct call *c)
{
	const char *id, *path;
	int64_t depth = 0, max = 0;
	saas_file_list *l = NULL;
	json_t *data, *res;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_str(c, "path", false, &path) ||
	    !arg_int(c, "max_depth", 1, SAAS_LIST_DEPTH_MAX, &depth) ||
	    !arg_int(c, "max_entries", 1, SAAS_LIST_ENTRIES_MAX, &max))
		return arg_fail(c);
	if ((rc = saas_file_list_get(&l, c->ctx->client, id, path, (unsigned)depth, (unsigned)max, 0)) < 0)
		return fail_saas(c, rc);
	if ((data = saas__wire_file_list(l)))
		json_object_set_new(data, "sandbox_id", json_string(id));
	res = ok(saas__wire_drop_nulls(data));
	saas_file_list_free(l);
	return res;
}

static json_t *t_expose(struct call *c)
{
	const char *id;
	int64_t port = 0;
	char *url = NULL;
	json_t *res;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_int(c, "port", 1, 65535, &port))
		return arg_fail(c);
	if (!port)
		return bad_arg(c, "\"port\" is required."), arg_fail(c);
	if ((rc = saas_port_expose(&url, c->ctx->client, id, (unsigned)port, 0)) < 0)
		return fail_saas(c, rc);
	res = ok(saas__wire_port(id, (unsigned int)port, url));
	saas_free(url);
	return res;
}

static json_t *t_unexpose(struct call *c)
{
	const char *id;
	int64_t port = 0;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_int(c, "port", 1, 65535, &port))
		return arg_fail(c);
	if (!port)
		return bad_arg(c, "\"port\" is required."), arg_fail(c);
	if ((rc = saas_port_unexpose(c->ctx->client, id, (unsigned)port)) < 0)
		return fail_saas(c, rc);
	if (c->ctx->ended)
		c->ctx->ended(id, (unsigned)port);
	return ok(json_pack("{s:s,s:I,s:b}", "sandbox_id", id, "port", (json_int_t)port, "exposed", 0));
}

static json_t *sandbox_result(struct call *c, int rc, saas_sandbox *sb)
{
	json_t *res = rc < 0 ? fail_saas(c, rc) : ok(sandbox_json(sb));
	saas_sandbox_free(sb);
	return res;
}

/*
 * A running sandbox's use now, as the host sees it (docs/sandboxes.md,
 * "Metrics"): the newest sample of the last minute, in the REST API's
 * shape, as o's "usage". Nothing when there is none to give (the driver
 * cannot sample, the sandbox stopped meanwhile): get_sandbox answers anyway.
 */
static void add_usage(struct call *c, const char *id, json_t *o)
{
	saas_metric_list *l = NULL;
	struct timespec now;
	json_t *all, *last;

	clock_gettime(CLOCK_REALTIME, &now);
	if (saas_sandbox_metrics_get(&l, c->ctx->client, id, (int64_t)now.tv_sec * 1000 - 60000, 0, 0) == SAAS_OK &&
	    l->count > 0 && (all = saas__wire_metric_list(l))) {
		json_t *items = json_object_get(all, "metrics");
		if ((last = json_array_get(items, json_array_size(items) - 1)))
			json_object_set(o, "usage", last);
		json_decref(all);
	}
	saas_metric_list_free(l);
}

static json_t *t_get(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;
	json_t *o;

	if (!arg_str(c, "sandbox_id", true, &id))
		return arg_fail(c);
	int rc = saas_sandbox_get(&sb, c->ctx->client, id);
	if (rc < 0 || sb->status != SAAS_SANDBOX_READY)
		return sandbox_result(c, rc, sb);
	if ((o = sandbox_json(sb)))
		add_usage(c, sb->id, o);
	saas_sandbox_free(sb);
	return ok(o);
}

static json_t *t_extend(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;
	int64_t secs = 0;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_int(c, "seconds", 1, 86400 * 365, &secs))
		return arg_fail(c);
	if (!secs)
		return bad_arg(c, "\"seconds\" is required."), arg_fail(c);
	int rc = saas_sandbox_extend(&sb, c->ctx->client, id, secs, 0);
	return sandbox_result(c, rc, sb);
}

static json_t *t_network(struct call *c)
{
	saas__wire_network_req net;
	saas_sandbox *sb = NULL;
	const char *id;
	bool given;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_network(c, &net, &given))
		return arg_fail(c);
	if (!given)
		return bad_arg(c, "give \"network\", or \"allow\" (and \"deny\") rules for a policy."), arg_fail(c);
	int rc = saas_sandbox_network_set(&sb, c->ctx->client, id, &net.spec, 0);
	return sandbox_result(c, rc, sb);
}

static json_t *t_fork(struct call *c)
{
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	saas_sandbox_list *kids = NULL;
	json_t *items, *res;
	const char *id;
	int64_t count = 0, timeout = 0;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_int(c, "count", 1, SAAS_FORK_MAX, &count) ||
	    !arg_int(c, "timeout_seconds", 1, 86400 * 365, &timeout))
		return arg_fail(c);
	o.timeout_s = timeout;
	if ((rc = saas_sandbox_fork(&kids, c->ctx->client, id, count ? (unsigned int)count : 1, &o, 0)) < 0)
		return fail_saas(c, rc);
	items = json_array();
	for (size_t i = 0; items && i < kids->count; i++)
		json_array_append_new(items, sandbox_json(kids->items[i]));
	saas_sandbox_list_free(kids);
	res = items ? ok(json_pack("{s:o}", "sandboxes", items)) : NULL;
	return res;
}

static json_t *t_pause(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!arg_str(c, "sandbox_id", true, &id))
		return arg_fail(c);
	int rc = saas_sandbox_pause(&sb, c->ctx->client, id, 0);
	return sandbox_result(c, rc, sb);
}

static json_t *t_resume(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!arg_str(c, "sandbox_id", true, &id))
		return arg_fail(c);
	int rc = saas_sandbox_resume(&sb, c->ctx->client, id, 0);
	return sandbox_result(c, rc, sb);
}

static json_t *t_destroy(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!arg_str(c, "sandbox_id", true, &id))
		return arg_fail(c);
	int rc = saas_sandbox_destroy(&sb, c->ctx->client, id, 0);
	if (rc == SAAS_OK && c->ctx->ended)
		c->ctx->ended(id, 0);
	return sandbox_result(c, rc, sb);
}

static json_t *t_list(struct call *c)
{
	const char *status, *cursor;
	int64_t limit = 0;
	unsigned int flags = 0;
	saas_sandbox_list *l = NULL;
	json_t *items, *res;
	int rc;

	if (!arg_str(c, "status", false, &status) || !arg_str(c, "cursor", false, &cursor) ||
	    !arg_int(c, "limit", 1, 1000, &limit))
		return arg_fail(c);
	if (status && strcmp(status, "active") == 0)
		flags = SAAS_LIST_ACTIVE;
	else if (status && strcmp(status, "destroyed") == 0)
		flags = SAAS_LIST_DESTROYED;
	else if (status && strcmp(status, "all") != 0)
		return bad_arg(c, "\"status\" must be \"all\", \"active\" or \"destroyed\"."), arg_fail(c);
	if ((rc = saas_sandbox_list_get(&l, c->ctx->client, cursor && *cursor ? cursor : NULL, (unsigned)limit,
	                                flags)) < 0)
		return fail_saas(c, rc);
	items = json_array();
	for (size_t i = 0; i < l->count; i++)
		json_array_append_new(items, sandbox_json(l->items[i]));
	/* The REST list, its sandboxes with their seconds left; no next_cursor at the end. */
	res = json_object();
	json_object_set_new(res, "sandboxes", items);
	if (l->next_cursor)
		json_object_set_new(res, "next_cursor", json_string(l->next_cursor));
	res = ok(res);
	saas_sandbox_list_free(l);
	return res;
}

static json_t *t_usage(struct call *c)
{
	saas_account_info *ai = NULL;
	saas_usage *u = NULL;
	const char *from_s, *to_s;
	int64_t days = 0, from = 0, to = 0;
	json_t *o, *usage;
	int rc;

	if (!arg_int(c, "days", 1, 366, &days) || !arg_str(c, "from", false, &from_s) || !arg_str(c, "to", false, &to_s))
		return arg_fail(c);
	if (from_s && saas_time_parse(&from, from_s, 0) < 0)
		return bad_arg(c, "\"from\" must be an RFC 3339 time (2025-06-01T00:00:00Z), a date (2025-06-01) or unix seconds."),
		       arg_fail(c);
	if (to_s && saas_time_parse(&to, to_s, SAAS_TIME_DAY_END) < 0)
		return bad_arg(c, "\"to\" must be an RFC 3339 time (2025-06-30T23:59:59Z), a date (2025-06-30, "
		                  "which includes that day) or unix seconds."), arg_fail(c);
	if (from_s && days)
		return bad_arg(c, "give \"days\" or \"from\", not both (\"days\" counts back from \"to\", or from now)."),
		       arg_fail(c);
	if (from_s && from <= 0)
		return bad_arg(c, "\"from\" must be after 1970-01-01."), arg_fail(c);
	if (to_s && to <= 0)
		return bad_arg(c, "\"to\" must be after 1970-01-01."), arg_fail(c);
	if (!to)
		to = now_ms();
	if (!from)
		from = to - (days ? days : 30) * 86400000;
	if (from >= to)
		return bad_arg(c, "the period is empty: \"from\" must be before \"to\"."), arg_fail(c);
	if (from <= 0)
		from = 1; /* 0 would ask the library for its default period */
	if ((rc = saas_account_info_get(&ai, c->ctx->client)) < 0)
		return fail_saas(c, rc);
	if ((rc = saas_usage_get(&u, c->ctx->client, from, to, 0)) < 0) {
		saas_account_info_free(ai);
		return fail_saas(c, rc);
	}
	o = json_pack("{s:s,s:i}", "account_id", ai->id, "active_sandboxes", (json_int_t)ai->active_sandboxes);
	saas__wire_money(o, "balance_usd", ai->balance_usd_micro);
	saas__wire_money(o, "credit_usd", ai->credit_usd_micro);
	saas__wire_money(o, "spent_usd", ai->spent_usd_micro);
	json_object_set_new(o, "limits", saas__wire_limits(ai->limits));
	usage = saas__wire_drop_nulls(saas__wire_usage(u));
	json_object_set_new(o, "usage", usage);
	saas_account_info_free(ai);
	saas_usage_free(u);
	return ok(o);
}

static json_t *t_service(struct call *c)
{
	saas_engine_info *info = NULL;
	json_t *o, *sizes;
	int rc;

	if (!c->ctx->engine)
		return failf(c, "get_service_info is not available on this connection.");
	if ((rc = saas_engine_info_get(&info, c->ctx->engine)) < 0)
		return fail_saas(c, rc);
	sizes = json_array();
	for (size_t i = 0; i < info->nsizes; i++)
		json_array_append_new(sizes, saas__wire_size(info->sizes[i], info->paused_usd_micro_per_gib_hour));
	o = json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:o,s:s,s:s}", "name", "libsaas", "version", saas_version(),
	              "description",
	              "Disposable Linux sandboxes for agents: each sandbox is a dedicated virtual machine with its "
	              "own kernel, billed by the second while it runs.",
	              "sizes", sizes, "default_size", info->default_size, "default_image", info->default_image ? info->default_image : "",
	              "limits", saas__wire_limits(info->limits), "authentication",
	              "Send your API key on each request: \"Authorization: Bearer aas_sk_...\" or \"x-api-key: "
	              "aas_sk_...\". Never in the URL.",
	              "notes",
	              "Code runs as an unprivileged user without sudo: use `pip install --user "
	              "--break-system-packages` or `npm install`. Start servers with `&`: they keep running after the "
	              "call returns, and what they print after it is dropped (redirect it to a file to keep it). "
	              "A command's timeout kills everything it started. Sandboxes are destroyed "
	              "when they expire; destroy_sandbox returns the unused minutes. "
	              "The `default` image is Debian 13 with Python 3.13 (requests, numpy, pandas, pip, venv), "
	              "Node.js 22 with npm (`npm install -g` installs into ~/.local), git, curl, wget, jq, unzip, "
	              "gnupg and build-essential.");
	saas__wire_money(o, "new_account_credit_usd", info->new_account_credit_usd_micro);
	saas_engine_info_free(info);
	return ok(o);
}

/* ---- run_code ---- */

/* Formats shown to the agent as MCP image content, so that the client displays them. */
static bool image_mime(const char *mime)
{
	return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0;
}

/*
 * A run's result: structuredContent holds the execution with each result's
 * text formats, and names its binary ones ("binary"), whose bytes travel
 * once, as image content items (png, jpeg) after the JSON text.
 */
static json_t *code_result(saas_code_execution *x)
{
	json_t *data = saas__wire_code_execution(x, false), *content = json_array(), *results;
	char *text;
	size_t i;
	json_t *r;

	if (!data || !content)
		goto oom;
	results = json_object_get(data, "results");
	json_array_foreach(results, i, r) {
		json_t *formats = json_object_get(r, "formats"), *binary = json_array();
		const saas_code_result *res = x->results[i];
		if (!binary || json_object_set_new(r, "binary", binary) < 0)
			goto oom;
		for (size_t k = 0; k < res->count; k++) {
			const char *mime = res->formats[k]->mime;
			if (!saas__wire_code_binary(mime))
				continue;
			json_array_append_new(binary, json_string(mime));
			json_object_del(formats, mime);
			if (image_mime(mime)) {
				char *b64 = saas_base64_encode(res->formats[k]->data, res->formats[k]->len);
				json_t *item = b64 ? json_pack("{s:s,s:s,s:s}", "type", "image", "data", b64, "mimeType", mime) : NULL;
				saas_free(b64);
				if (!item || json_array_append_new(content, item) < 0)
					goto oom;
			}
		}
	}
	data = saas__wire_drop_nulls(data);
	if (!(text = json_dumps(data, JSON_COMPACT)) || json_array_insert_new(content, 0, text_item(text)) < 0) {
		free(text);
		goto oom;
	}
	free(text);
	return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", data, "isError", 0);
oom:
	json_decref(data);
	json_decref(content);
	return NULL;
}

static json_t *t_code(struct call *c)
{
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	const char *id, *code;
	const json_t *env = json_object_get(c->args, "env");
	char **envv = NULL;
	saas_code_execution *x = NULL;
	json_t *res = NULL;
	int64_t timeout = 0;
	int rc;

	if (!arg_str(c, "sandbox_id", true, &id) || !arg_str(c, "code", true, &code) ||
	    !arg_str(c, "language", false, &o.language) ||
	    !arg_int(c, "timeout_seconds", 1, SAAS_CODE_TIMEOUT_MAX_MS / 1000, &timeout))
		return arg_fail(c);
	if (env && !json_is_null(env)) {
		const char *k;
		json_t *v;
		size_t n = 0;
		if (!json_is_object(env) || json_object_size(env) > 256 ||
		    !(envv = calloc(json_object_size(env) + 1, sizeof(*envv))))
			return bad_arg(c, "\"env\" must be an object of at most 256 NAME: \"value\" strings."), arg_fail(c);
		json_object_foreach((json_t *)env, k, v) {
			if (!*k || strchr(k, '=') || !json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v) ||
			    asprintf(&envv[n], "%s=%s", k, json_string_value(v)) < 0) {
				envv[n] = NULL;
				bad_arg(c, "\"env\" maps names (not empty, no '=') to strings without NUL.");
				res = arg_fail(c);
				goto out;
			}
			n++;
		}
		o.env = (const char *const *)envv;
	}
	o.timeout_ms = timeout * 1000;
	if ((rc = saas_code_run(&x, c->ctx->client, id, code, &o, 0)) < 0) {
		res = fail_saas(c, rc);
		goto out;
	}
	if (x->status == SAAS_CODE_TIMEDOUT) {
		res = failf(c, "The code ran past %lld s and was interrupted; its context and variables stay. Pass a larger "
		            "timeout_seconds (at most %d), or run long jobs in the background with run_command. What it "
		            "printed: %.2000s",
		            (long long)(timeout ? timeout : SAAS_CODE_TIMEOUT_DEFAULT_MS / 1000), SAAS_CODE_TIMEOUT_MAX_MS / 1000,
		            x->stdout_data);
		goto out;
	}
	res = code_result(x);
out:
	for (size_t i = 0; envv && envv[i]; i++)
		free(envv[i]);
	free(envv);
	saas_code_execution_free(x);
	return res;
}

/* ---- the table ---- */

/* A tool; its input and output schemas are mcp/schemas/NAME.json. */
struct tool {
	const char *name, *title, *description;
	bool read_only, destructive, idempotent, open_world;
	bool needs_client;
	unsigned int flag; /* offered only with this ctx flag */
	json_t *(*fn)(struct call *c);
};

/* Named fields, so that two hints cannot trade places unseen; a hint not named is false. */
static const struct tool tools[] = {
	{ .name = "create_sandbox",
	  .title = "Create a sandbox",
	  .description =
	  "Create a fresh Linux sandbox: a dedicated virtual machine with its own kernel, never used by anyone "
	  "before. Returns its id once commands can run in it (usually seconds); pass that sandbox_id to the other "
	  "tools. Billing is by the second while it runs. It is destroyed automatically when timeout_seconds run "
	  "out (extend_sandbox pushes that out); call destroy_sandbox when done to stop paying for the rest. Code "
	  "runs as an unprivileged user with no sudo: apt-get does not work; install with `pip install --user "
	  "--break-system-packages <pkg>` or `npm install <pkg>`. Network: `network` \"internet\" or \"isolated\", "
	  "or `allow`/`deny` lists of domain names (\"*.example.com\" for the names below it), addresses and "
	  "CIDRs for only what the job needs (set_network_policy changes it later). `envs`: variables every "
	  "command starts with; `metadata`: labels list_sandboxes shows.",
	  .open_world = true, .needs_client = true, .fn = t_create },
	{ .name = "run_command",
	  .title = "Run a shell command",
	  .description =
	  "Run a shell command (/bin/sh -c) in a sandbox as an unprivileged user, in /workspace unless cwd says "
	  "otherwise, and wait for it to finish. Returns stdout, stderr and exit_code; a non-zero exit_code is a "
	  "normal result, read stderr. There is no sudo: use `pip install --user --break-system-packages <pkg>` or "
	  "`npm install <pkg>`, not apt-get. The call holds until the command exits: start servers in the "
	  "background with `&` (e.g. `python3 -m http.server 8000 &`; they keep running after the call, and "
	  "what they print after it is dropped: add `>/tmp/http.log 2>&1` to keep it), or the call waits until "
	  "timeout_seconds and the command is killed with everything it started. Output that is not valid UTF-8 comes back base64 "
	  "(stdout_encoding/stderr_encoding say which). With a progressToken (_meta), the output also comes as "
	  "notifications/progress while the command runs.",
	  .destructive = true, .open_world = true, .needs_client = true, .fn = t_run },
	{ .name = "run_code",
	  .title = "Run code, keeping state",
	  .description =
	  "Run Python (default), JavaScript or bash in a sandbox's long-lived interpreter: variables and imports "
	  "stay for the next run_code. Returns stdout, stderr, the error if the code raised (name, value, "
	  "traceback) and results: the last expression's value and each display, in every format (text, HTML, "
	  "JSON); charts (matplotlib) come back as images. Each language has its own interpreter.",
	  .destructive = true, .open_world = true, .needs_client = true, .fn = t_code },
	{ .name = "write_file",
	  .title = "Write a file",
	  .description =
	  "Write a file in a sandbox, creating missing parent directories; an existing file is replaced. The content "
	  "travels as data, not through a shell, so quotes and newlines survive. For binary data pass it base64 "
	  "with encoding \"base64\". Relative paths are under /workspace; the sandbox user can write under "
	  "/workspace, its home and /tmp.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = t_write },
	{ .name = "read_file",
	  .title = "Read a file",
	  .description =
	  "Read a file from a sandbox: how you get at what your code produced. Returns the content as text when it "
	  "is valid UTF-8 (encoding \"utf-8\"), otherwise base64 (encoding \"base64\"). Files over max_bytes "
	  "(default 1 MiB) are refused; read parts of big files with run_command (head, tail).",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = t_read },
	{ .name = "list_files",
	  .title = "List files",
	  .description =
	  "List a directory tree in a sandbox (default /workspace, 3 levels deep), depth first, so you can find what "
	  "a run produced. Each entry has its absolute path, type, size, octal mode and modification time.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = t_list_files },
	{ .name = "expose_port",
	  .title = "Expose a port",
	  .description =
	  "Give a TCP port of a sandbox a public preview URL, to share a web server or API running in it. Nothing "
	  "needs to listen yet; start the server in the background with run_command (`... &`) and bind it to "
	  "0.0.0.0 or 127.0.0.1. Exposing a port again returns the same URL. Anyone with the URL reaches the port "
	  "while the sandbox lives, and that port only: each exposure has its own unguessable URL. unexpose_port "
	  "takes it back.",
	  .idempotent = true, .open_world = true, .needs_client = true, .fn = t_expose },
	{ .name = "unexpose_port",
	  .title = "Stop exposing a port",
	  .description =
	  "Take a port's preview URL back: it stops working at once, open connections (WebSockets) included. "
	  "Exposing the port again gives a new URL, so one shared before stays dead. A port that is not exposed "
	  "is fine.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = t_unexpose },
	{ .name = "get_sandbox",
	  .title = "Get a sandbox",
	  .description =
	  "A sandbox's status (creating, ready, paused, destroyed and why), size, exposed ports, expiry and cost so "
	  "far; while it runs, its CPU, memory and disk use as the host sees it (usage).",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = t_get },
	{ .name = "list_sandboxes",
	  .title = "List sandboxes",
	  .description =
	  "Every sandbox on the account, newest first, with status, expiry and cost: useful for finding strays to "
	  "destroy. Pass next_cursor back as cursor for the next page.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = t_list },
	{ .name = "extend_sandbox",
	  .title = "Extend a sandbox",
	  .description =
	  "Push a sandbox's expiry out by `seconds` from its current expiry, when a job outgrows its timeout. The "
	  "new lifetime may not pass the account's maximum (get_service_info shows it).",
	  .needs_client = true, .fn = t_extend },
	{ .name = "set_network_policy",
	  .title = "Change a sandbox's network access",
	  .description =
	  "Replace what a running sandbox may reach on the network: \"isolated\" (nothing), \"internet\", or "
	  "a policy: only the names and addresses in `allow` (\"pypi.org\", \"*.pythonhosted.org\" for every "
	  "name below it, \"203.0.113.0/24\", \"*\" for everything) less those in `deny`. The new policy replaces "
	  "the old one whole and applies to new connections at once. Names not allowed do not even resolve. The "
	  "host's own services and private networks are never reachable. The result shows the policy in force and "
	  "how many connections and lookups were refused.",
	  .idempotent = true, .open_world = true, .needs_client = true, .fn = t_network },
	{ .name = "destroy_sandbox",
	  .title = "Destroy a sandbox",
	  .description =
	  "Destroy a sandbox: its VM, files and running processes are gone and billing stops; the result shows the "
	  "final cost. A sandbox is destroyed anyway when it expires, but destroying it when done returns the "
	  "minutes you were not going to use. Destroying a destroyed sandbox changes nothing.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = t_destroy },
	{ .name = "fork_sandbox",
	  .title = "Fork a sandbox",
	  .description =
	  "Make `count` (1 to 10, default 1) new sandboxes from a running one, each with its memory, running "
	  "processes and files as they are now: explore several alternatives from one prepared state. Each child is "
	  "a machine of its own (its own id, hostname and random seed), of the parent's size and image, with its "
	  "own expiry (timeout_seconds, default the account's) and billed on its own like a new sandbox. The parent "
	  "pauses only while its state is taken, then runs on. All or nothing: if one child cannot be made, none is.",
	  .open_world = true, .needs_client = true, .fn = t_fork },
	{ .name = "pause_sandbox",
	  .title = "Pause a sandbox",
	  .description =
	  "Pause a running sandbox: its memory, processes and files are saved and its VM stops. It then costs only "
	  "its paused price (get_service_info shows each size's), not its running price. Commands running in it "
	  "end (their results say so); exposed ports keep their URLs and work again after resume_sandbox. Its "
	  "expiry keeps running while it is paused (extend_sandbox works): a paused sandbox that expires is "
	  "destroyed.",
	  .needs_client = true, .fn = t_pause },
	{ .name = "resume_sandbox",
	  .title = "Resume a sandbox",
	  .description =
	  "Resume a paused sandbox on a new VM, with its processes, files and exposed ports as they were when it "
	  "was paused. Running billing starts again.",
	  .needs_client = true, .fn = t_resume },
	{ .name = "get_usage",
	  .title = "Get balance and usage",
	  .description =
	  "The account's remaining credit, limits, and what each sandbox cost over a period: the last 30 days "
	  "unless `from`/`to` (RFC 3339 times, YYYY-MM-DD dates or unix seconds, UTC; a date `to` includes that day) or `days` "
	  "say otherwise. `days` counts back from `to` (or now) and cannot be combined with `from`.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = t_usage },
	{ .name = "get_service_info",
	  .title = "Service information",
	  .description =
	  "What this service offers, without an API key: sizes and their prices, limits, the default image, the "
	  "credit new accounts get, and how to authenticate.",
	  .read_only = true, .idempotent = true, .flag = AAS_MCP_SERVICE_INFO, .fn = t_service },
};

size_t aas_mcp_ntools(void)
{
	return sizeof(tools) / sizeof(tools[0]);
}

bool aas_mcp_tool_offered(const aas_mcp_ctx *ctx, size_t i)
{
	return i < aas_mcp_ntools() && (!tools[i].flag || (ctx->flags & tools[i].flag));
}

static const char *schema_text(const char *name)
{
	for (const struct aas_mcp_schema_file *f = aas_mcp_schema_files; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f->text;
	return NULL;
}

/* Shapes name shapes (a sandbox holds times) but never this many deep: more is a loop. */
#define SHAPE_DEPTH_MAX 8

/*
 * v with every {"$ref": "shapes.json#/NAME"} replaced by a copy of that shape,
 * so that clients get whole schemas; a new reference, or NULL for an unknown
 * shape (a typo in schemas/: the tests list every tool) or no memory.
 */
static json_t *inline_shapes(json_t *v, const json_t *shapes, int depth)
{
	static const char prefix[] = "shapes.json#/";
	const char *ref = json_string_value(json_object_get(v, "$ref")), *key;
	json_t *m, *r;
	size_t i;

	if (depth > SHAPE_DEPTH_MAX)
		return NULL;
	if (ref) {
		json_t *shape = strncmp(ref, prefix, sizeof(prefix) - 1) == 0
		                    ? json_object_get(shapes, ref + sizeof(prefix) - 1) : NULL;
		json_t *copy = shape ? json_deep_copy(shape) : NULL;
		r = copy ? inline_shapes(copy, shapes, depth + 1) : NULL;
		json_decref(copy);
		return r;
	}
	if (json_is_object(v)) {
		json_object_foreach(v, key, m) {
			if (!(r = inline_shapes(m, shapes, depth)) || json_object_set_new(v, key, r) < 0)
				return NULL;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m) {
			if (!(r = inline_shapes(m, shapes, depth)) || json_array_set_new(v, i, r) < 0)
				return NULL;
		}
	}
	return json_incref(v);
}

json_t *aas_mcp_tool_json(const aas_mcp_ctx *ctx, size_t i)
{
	const struct tool *t = &tools[i];
	const char *text = aas_mcp_tool_offered(ctx, i) ? schema_text(t->name) : NULL;
	const char *shapes_text = schema_text("shapes");
	json_t *shapes = NULL, *file = NULL, *in = NULL, *out = NULL, *res = NULL;

	if (!text || !shapes_text)
		return NULL;
	shapes = json_loads(shapes_text, 0, NULL);
	file = json_loads(text, 0, NULL);
	if (!shapes || !file)
		goto out;
	in = inline_shapes(json_object_get(file, "input"), shapes, 0);
	out = inline_shapes(json_object_get(file, "output"), shapes, 0);
	if (!json_is_object(in) || !json_is_object(out))
		goto out;
	res = json_pack("{s:s,s:s,s:s,s:O,s:O,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name, "title", t->title,
	                "description", t->description, "inputSchema", in, "outputSchema", out, "annotations",
	                "title", t->title, "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
	                "idempotentHint", t->idempotent, "openWorldHint", t->open_world);
out:
	json_decref(in);
	json_decref(out);
	json_decref(file);
	json_decref(shapes);
	return res;
}

bool aas_mcp_tool_reports_progress(const char *name)
{
	return name && (strcmp(name, "create_sandbox") == 0 || strcmp(name, "run_command") == 0);
}

json_t *aas_mcp_tool_call(const aas_mcp_ctx *ctx, const char *name, const json_t *args, const json_t *id,
                          const json_t *progress_token)
{
	struct call c;
	json_t *none = NULL, *res;

	for (size_t i = 0; i < aas_mcp_ntools(); i++) {
		const struct tool *t = &tools[i];
		if (strcmp(t->name, name) != 0 || !aas_mcp_tool_offered(ctx, i))
			continue;
		memset(&c, 0, sizeof(c));
		c.ctx = ctx;
		c.tool = t->name;
		c.id = id;
		c.progress = progress_token;
		if (!args)
			args = none = json_object();
		c.args = args;
		if (t->needs_client && !ctx->client) {
			if (ctx->client_status == SAAS_EAUTH)
				res = failf(&c, "%s needs a valid API key, and the key sent is unknown or revoked. Send a valid "
				                "key with %s; make one on %s.", t->name,
				            ctx->key_hint ? ctx->key_hint : "the request",
				            ctx->key_source ? ctx->key_source : "the service's dashboard (/dashboard/keys)");
			else if (ctx->client_status < 0 && ctx->client_problem)
				res = failf(&c, "%s cannot run: %s", t->name, ctx->client_problem);
			else if (ctx->client_status < 0)
				res = failf(&c, "%s could not check the API key: %s. Retry shortly.", t->name,
				            saas_strerror(ctx->client_status));
			else if (ctx->flags & AAS_MCP_SERVICE_INFO)
				res = failf(&c, "%s needs an API key, and none was sent. Configure your MCP client to send "
				                "%s with every request; initialize, tools/list and get_service_info work "
				                "without one.", t->name, ctx->key_hint ? ctx->key_hint : "a key");
			else
				res = failf(&c, "%s needs an API key, and none was set. Set one in %s; initialize and "
				                "tools/list work without one.", t->name, ctx->key_hint ? ctx->key_hint : "a key");
		} else {
			res = t->fn(&c);
		}
		json_decref(none);
		return res;
	}
	memset(&c, 0, sizeof(c));
	return failf(&c, "Unknown tool \"%.100s\". Call tools/list to see the tools this server offers.", name);
}
