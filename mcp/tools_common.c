/*
 * What every MCP tool shares (tools.h): its results and errors, the hint an
 * agent reads for each libsaas status, progress and cancellation, the
 * argument checks, and the shapes of lib/wire without their nulls.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools.h"

/* ---- small helpers ---- */

int64_t aas_mcp_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- results ---- */

json_t *aas_mcp_text_item(const char *text)
{
	return json_pack("{s:s,s:s}", "type", "text", "text", text);
}

/* Success: structuredContent and the same JSON as text. Steals `data`. */
json_t *aas_mcp_ok(json_t *data)
{
	char *text = json_dumps(data, JSON_COMPACT);
	json_t *res;

	if (!text) {
		json_decref(data);
		return NULL;
	}
	res = json_pack("{s:[o],s:o,s:b}", "content", aas_mcp_text_item(text), "structuredContent", data, "isError", 0);
	free(text);
	return res;
}

static json_t *fail(const char *text)
{
	return json_pack("{s:[o],s:b}", "content", aas_mcp_text_item(text), "isError", 1);
}

json_t *aas_mcp_failf(struct call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return fail(c->err);
}

void aas_mcp_failure_take(struct aas_mcp_failure *f, int rc)
{
	const saas_error *e = saas_error_last();
	bool ours = e->code == rc;

	memset(f, 0, sizeof(*f));
	f->rc = rc;
	f->klass = ours ? e->klass : SAAS_ERRCLASS_NONE;
	snprintf(f->msg, sizeof(f->msg), "%s", ours && e->message[0] ? e->message : saas_strerror(rc));
	if (ours) {
		snprintf(f->limit, sizeof(f->limit), "%s", e->limit);
		f->retry_after_ms = e->retry_after_ms > 0 ? e->retry_after_ms : 0;
	}
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
	[-SAAS_EBUSY] = { SAAS_EBUSY,
	                  "The service has no room for it right now, and nothing was changed (a paused sandbox stays "
	                  "paused). Wait, then make the same call again." },
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

json_t *aas_mcp_fail_taken(struct call *c, const struct aas_mcp_failure *f)
{
	/* Whole seconds, rounded up, as the REST API's Retry-After. */
	long long secs = (f->retry_after_ms + 999) / 1000;
	const char *msg = f->msg;
	int rc = f->rc;

	if (rc == SAAS_EAUTH)
		return aas_mcp_failf(c, "%s: the API key is unknown or revoked. Send a valid key with %s.", c->tool,
		                     c->ctx->key_hint ? c->ctx->key_hint : "the request");
	if ((c->ctx->flags & AAS_MCP_TENANT) && aas_error_is_internal(rc, f->klass)) {
		if (c->ctx->log) {
			char line[700];
			snprintf(line, sizeof(line), "MCP %s answered %s for: %s", c->tool, saas_error_name(rc), msg);
			c->ctx->log(line);
		}
		msg = aas_error_tenant_text(rc);
	}
	/* A limit that names itself: which one, when to retry, and what to do meanwhile. */
	if (rc == SAAS_ELIMIT && f->limit[0])
		return aas_mcp_failf(c, "%s failed: %s (%s, limit %s; retry after %lld s). %s", c->tool, msg,
		                     saas_error_name(rc), f->limit, secs, limit_hint(f->limit));
	/* No room now (a create, fork or resume; a network change not confirmed yet): when to call again. */
	if (rc == SAAS_EBUSY && secs > 0)
		return aas_mcp_failf(c, "%s failed: %s (%s: try again in %lld s). %s", c->tool, msg, saas_error_name(rc),
		                     secs, aas_mcp_error_hint(rc));
	return aas_mcp_failf(c, "%s failed: %s (%s). %s", c->tool, msg, saas_error_name(rc), aas_mcp_error_hint(rc));
}

json_t *aas_mcp_fail_saas(struct call *c, int rc)
{
	struct aas_mcp_failure f;

	aas_mcp_failure_take(&f, rc);
	return aas_mcp_fail_taken(c, &f);
}

/* ---- progress and cancellation ---- */

bool aas_mcp_cancelled(struct call *c)
{
	return c->ctx->cancelled && c->id && c->ctx->cancelled(c->ctx->userdata, c->id);
}

/* Send notifications/progress with the next progress value, if the caller asked for progress. */
void aas_mcp_progress(struct call *c, const char *fmt, ...)
{
	char text[200];
	va_list ap;
	json_t *n;

	if (!c->progress || !c->ctx->notify || aas_mcp_cancelled(c))
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

bool aas_mcp_bad_arg(struct call *c, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(c->err, sizeof(c->err), "Invalid arguments to %s: ", c->tool);

	va_start(ap, fmt);
	vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

bool aas_mcp_arg_str(struct call *c, const char *name, bool required, const char **out)
{
	const json_t *v = json_object_get(c->args, name);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return aas_mcp_bad_arg(c, "\"%s\" is required.", name);
		return true;
	}
	if (!json_is_string(v))
		return aas_mcp_bad_arg(c, "\"%s\" must be a string.", name);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return aas_mcp_bad_arg(c, "\"%s\" may not contain NUL characters.", name);
	*out = json_string_value(v);
	return true;
}

bool aas_mcp_arg_int(struct call *c, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const json_t *v = json_object_get(c->args, name);
	int64_t x;

	if (!v || json_is_null(v))
		return true;
	if (!aas_json_int64(v, &x))
		return aas_mcp_bad_arg(c, "\"%s\" must be an integer.", name);
	if (x < min || x > max)
		return aas_mcp_bad_arg(c, "\"%s\" must be between %lld and %lld.", name, (long long)min, (long long)max);
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
bool aas_mcp_arg_pairs(struct call *c, const char *name, size_t max, char ***list)
{
	const json_t *v = json_object_get(c->args, name);
	json_t *val;
	const char *key;
	size_t n = 0;

	*list = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v) || json_object_size(v) > max)
		return aas_mcp_bad_arg(c, "\"%s\" must be an object of at most %zu KEY: \"value\" strings.", name, max);
	if (!(*list = calloc(json_object_size(v) + 1, sizeof(**list))))
		return aas_mcp_bad_arg(c, "out of memory");
	json_object_foreach((json_t *)v, key, val) {
		if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val) || strchr(key, '='))
			return aas_mcp_bad_arg(c, "\"%s\": each value must be a string without NUL, each key without '=' (\"%.64s\" "
			                       "is not).", name, key);
		if (asprintf(&(*list)[n], "%s=%s", key, json_string_value(val)) < 0) {
			(*list)[n] = NULL;
			return aas_mcp_bad_arg(c, "out of memory");
		}
		n++;
	}
	return true;
}

void aas_mcp_pairs_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

json_t *aas_mcp_arg_fail(struct call *c)
{
	return fail(c->err);
}

/* ---- shapes: lib/wire's, without their nulls (wire.h) ---- */

/* The REST sandbox, and what an agent would otherwise work out from two times: the seconds it has left. */
json_t *aas_mcp_sandbox_json(const saas_sandbox *sb)
{
	json_t *o = saas__wire_sandbox(sb);
	int64_t left = sb->status == SAAS_SANDBOX_DESTROYED ? 0 : (sb->expires_at_ms - aas_mcp_now_ms()) / 1000;

	if (o)
		json_object_set_new(o, "expires_in_seconds", json_integer(left > 0 ? left : 0));
	return saas__wire_drop_nulls(o);
}

/* read_file's content: text when it is valid UTF-8, else base64; `enc_key` says which. */
void aas_mcp_set_bytes(json_t *o, const char *key, const char *enc_key, const void *data, size_t len)
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
