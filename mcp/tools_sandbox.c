/*
 * The MCP tools of sandboxes: create_sandbox (with its progress, on a thread
 * of its own), get, extend, set_network_policy, fork, pause, resume,
 * destroy, list, get_usage and get_service_info (tools.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools.h"

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
	struct aas_mcp_failure failure; /* taken on the worker's thread (the error state is per thread) */
};

static void *create_main(void *arg)
{
	struct create_job *j = arg;
	saas_sandbox *sb = NULL;
	int rc = saas_sandbox_create(&sb, j->client, j->options, 0);

	pthread_mutex_lock(&j->mu);
	j->sb = sb;
	if (rc < 0)
		aas_mcp_failure_take(&j->failure, rc);
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

/* Create with a progress notification every interval until it returns; 0, or its failure into *f. */
static int create_reporting(struct call *c, const saas_create_options *o, saas_sandbox **sb, struct aas_mcp_failure *f)
{
	int64_t interval = c->ctx->progress_interval_ms ? c->ctx->progress_interval_ms : 1000, start = mono_ms(), next;
	struct create_job j;
	pthread_condattr_t ca;
	pthread_t thread;

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
			aas_mcp_progress(c, "booting the VM (%lld s)", (long long)((mono_ms() - start + 500) / 1000));
			pthread_mutex_lock(&j.mu);
		}
		pthread_mutex_unlock(&j.mu);
		pthread_join(thread, NULL);
	}
	pthread_cond_destroy(&j.cv);
	pthread_mutex_destroy(&j.mu);
	*sb = j.sb;
	*f = j.failure;
	return f->rc;
}

/*
 * The network arguments: "network" (a mode's name) and the "allow" and
 * "deny" lists as separate fields rather than one field of two types, which
 * some clients' schema handling does not take. Read through lib/wire's one
 * decoder of a network, as {mode, allow, deny}. *given is false when none is
 * there (the default); false after aas_mcp_bad_arg().
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
		return aas_mcp_bad_arg(c, "out of memory");
	if (*given && saas__wire_network_req_decode(req, v, &bad) < 0)
		ok = aas_mcp_bad_arg(c, "%s.", bad);
	json_decref(v);
	return ok;
}

json_t *aas_mcp_tool_create(struct call *c)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas__wire_network_req net;
	saas_sandbox *sb = NULL;
	json_t *res = NULL;
	char **metadata = NULL, **envs = NULL;
	int64_t timeout = 0;
	struct aas_mcp_failure failure;
	bool net_given;
	int rc;

	if (!aas_mcp_arg_str(c, "size", false, &o.size) || !aas_mcp_arg_str(c, "image", false, &o.image) ||
	    !arg_network(c, &net, &net_given) || !aas_mcp_arg_int(c, "timeout_seconds", 1, 86400 * 365, &timeout) ||
	    !aas_mcp_arg_pairs(c, "metadata", SAAS_METADATA_MAX, &metadata) ||
	    !aas_mcp_arg_pairs(c, "envs", SAAS_ENVS_MAX, &envs)) {
		res = aas_mcp_arg_fail(c);
		goto out;
	}
	o.timeout_s = timeout;
	o.metadata = (const char *const *)metadata;
	o.envs = (const char *const *)envs;
	if (net_given)
		o.network_spec = &net.spec;
	if (aas_mcp_cancelled(c)) { /* before anything was made: nothing to undo */
		res = aas_mcp_failf(c, "create_sandbox was cancelled before it started; nothing was created.");
		goto out;
	}
	if (c->progress && c->ctx->notify) {
		aas_mcp_progress(c, "creating sandbox");
		rc = create_reporting(c, &o, &sb, &failure);
	} else if ((rc = saas_sandbox_create(&sb, c->ctx->client, &o, 0)) < 0) {
		aas_mcp_failure_take(&failure, rc);
	}
	if (rc < 0) {
		res = aas_mcp_fail_taken(c, &failure);
		goto out;
	}
	/*
	 * Cancelled while it was being made: the public API cannot stop a create
	 * halfway, so the sandbox is destroyed as soon as it exists, before it runs
	 * (and bills) for nobody. The response is withheld (protocol.c).
	 */
	if (aas_mcp_cancelled(c)) {
		rc = saas_sandbox_destroy(NULL, c->ctx->client, sb->id, 0);
		res = rc < 0 ? aas_mcp_fail_saas(c, rc)
		             : aas_mcp_failf(c, "create_sandbox was cancelled; sandbox %s was destroyed.", sb->id);
		goto out;
	}
	aas_mcp_progress(c, "ready");
	res = aas_mcp_ok(aas_mcp_sandbox_json(sb));
out:
	saas_sandbox_free(sb);
	aas_mcp_pairs_free(metadata);
	aas_mcp_pairs_free(envs);
	return res;
}

static json_t *sandbox_result(struct call *c, int rc, saas_sandbox *sb)
{
	json_t *res = rc < 0 ? aas_mcp_fail_saas(c, rc) : aas_mcp_ok(aas_mcp_sandbox_json(sb));
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

json_t *aas_mcp_tool_get(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;
	json_t *o;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id))
		return aas_mcp_arg_fail(c);
	int rc = saas_sandbox_get(&sb, c->ctx->client, id);
	if (rc < 0 || sb->status != SAAS_SANDBOX_READY)
		return sandbox_result(c, rc, sb);
	if ((o = aas_mcp_sandbox_json(sb)))
		add_usage(c, sb->id, o);
	saas_sandbox_free(sb);
	return aas_mcp_ok(o);
}

json_t *aas_mcp_tool_extend(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;
	int64_t secs = 0;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_int(c, "seconds", 1, 86400 * 365, &secs))
		return aas_mcp_arg_fail(c);
	if (!secs)
		return aas_mcp_bad_arg(c, "\"seconds\" is required."), aas_mcp_arg_fail(c);
	int rc = saas_sandbox_extend(&sb, c->ctx->client, id, secs, 0);
	return sandbox_result(c, rc, sb);
}

json_t *aas_mcp_tool_network(struct call *c)
{
	saas__wire_network_req net;
	saas_sandbox *sb = NULL;
	const char *id;
	bool given;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !arg_network(c, &net, &given))
		return aas_mcp_arg_fail(c);
	if (!given)
		return aas_mcp_bad_arg(c, "give \"network\", or \"allow\" (and \"deny\") rules for a policy."), aas_mcp_arg_fail(c);
	int rc = saas_sandbox_network_set(&sb, c->ctx->client, id, &net.spec, 0);
	return sandbox_result(c, rc, sb);
}

json_t *aas_mcp_tool_fork(struct call *c)
{
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	saas_sandbox_list *kids = NULL;
	json_t *items, *res;
	const char *id;
	int64_t count = 0, timeout = 0;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_int(c, "count", 1, SAAS_FORK_MAX, &count) ||
	    !aas_mcp_arg_int(c, "timeout_seconds", 1, 86400 * 365, &timeout))
		return aas_mcp_arg_fail(c);
	o.timeout_s = timeout;
	if ((rc = saas_sandbox_fork(&kids, c->ctx->client, id, count ? (unsigned int)count : 1, &o, 0)) < 0)
		return aas_mcp_fail_saas(c, rc);
	items = json_array();
	for (size_t i = 0; items && i < kids->count; i++)
		json_array_append_new(items, aas_mcp_sandbox_json(kids->items[i]));
	saas_sandbox_list_free(kids);
	res = items ? aas_mcp_ok(json_pack("{s:o}", "sandboxes", items)) : NULL;
	return res;
}

json_t *aas_mcp_tool_pause(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id))
		return aas_mcp_arg_fail(c);
	int rc = saas_sandbox_pause(&sb, c->ctx->client, id, 0);
	return sandbox_result(c, rc, sb);
}

json_t *aas_mcp_tool_resume(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id))
		return aas_mcp_arg_fail(c);
	int rc = saas_sandbox_resume(&sb, c->ctx->client, id, 0);
	return sandbox_result(c, rc, sb);
}

json_t *aas_mcp_tool_destroy(struct call *c)
{
	saas_sandbox *sb = NULL;
	const char *id;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id))
		return aas_mcp_arg_fail(c);
	int rc = saas_sandbox_destroy(&sb, c->ctx->client, id, 0);
	if (rc == SAAS_OK && c->ctx->ended)
		c->ctx->ended(id, 0);
	return sandbox_result(c, rc, sb);
}

json_t *aas_mcp_tool_list(struct call *c)
{
	const char *status, *cursor;
	int64_t limit = 0;
	unsigned int flags = 0;
	saas_sandbox_list *l = NULL;
	json_t *items, *res;
	int rc;

	if (!aas_mcp_arg_str(c, "status", false, &status) || !aas_mcp_arg_str(c, "cursor", false, &cursor) ||
	    !aas_mcp_arg_int(c, "limit", 1, 1000, &limit))
		return aas_mcp_arg_fail(c);
	if (status && strcmp(status, "active") == 0)
		flags = SAAS_LIST_ACTIVE;
	else if (status && strcmp(status, "destroyed") == 0)
		flags = SAAS_LIST_DESTROYED;
	else if (status && strcmp(status, "all") != 0)
		return aas_mcp_bad_arg(c, "\"status\" must be \"all\", \"active\" or \"destroyed\"."), aas_mcp_arg_fail(c);
	if ((rc = saas_sandbox_list_get(&l, c->ctx->client, cursor && *cursor ? cursor : NULL, (unsigned)limit,
	                                flags)) < 0)
		return aas_mcp_fail_saas(c, rc);
	items = json_array();
	for (size_t i = 0; i < l->count; i++)
		json_array_append_new(items, aas_mcp_sandbox_json(l->items[i]));
	/* The REST list, its sandboxes with their seconds left; no next_cursor at the end. */
	res = json_object();
	json_object_set_new(res, "sandboxes", items);
	if (l->next_cursor)
		json_object_set_new(res, "next_cursor", json_string(l->next_cursor));
	res = aas_mcp_ok(res);
	saas_sandbox_list_free(l);
	return res;
}

json_t *aas_mcp_tool_usage(struct call *c)
{
	saas_account_info *ai = NULL;
	saas_usage *u = NULL;
	const char *from_s, *to_s;
	int64_t days = 0, from = 0, to = 0;
	json_t *o, *usage;
	int rc;

	if (!aas_mcp_arg_int(c, "days", 1, 366, &days) || !aas_mcp_arg_str(c, "from", false, &from_s) ||
	    !aas_mcp_arg_str(c, "to", false, &to_s))
		return aas_mcp_arg_fail(c);
	if (from_s && saas_time_parse(&from, from_s, 0) < 0)
		return aas_mcp_bad_arg(c, "\"from\" must be an RFC 3339 time (2025-06-01T00:00:00Z), a date (2025-06-01) "
		                          "or unix seconds."),
		       aas_mcp_arg_fail(c);
	if (to_s && saas_time_parse(&to, to_s, SAAS_TIME_DAY_END) < 0)
		return aas_mcp_bad_arg(c, "\"to\" must be an RFC 3339 time (2025-06-30T23:59:59Z), a date (2025-06-30, "
		                          "which includes that day) or unix seconds."),
		       aas_mcp_arg_fail(c);
	if (from_s && days)
		return aas_mcp_bad_arg(c, "give \"days\" or \"from\", not both (\"days\" counts back from \"to\", or from now)."),
		       aas_mcp_arg_fail(c);
	if (from_s && from <= 0)
		return aas_mcp_bad_arg(c, "\"from\" must be after 1970-01-01."), aas_mcp_arg_fail(c);
	if (to_s && to <= 0)
		return aas_mcp_bad_arg(c, "\"to\" must be after 1970-01-01."), aas_mcp_arg_fail(c);
	if (!to)
		to = aas_mcp_now_ms();
	if (!from)
		from = to - (days ? days : 30) * 86400000;
	if (from >= to)
		return aas_mcp_bad_arg(c, "the period is empty: \"from\" must be before \"to\"."), aas_mcp_arg_fail(c);
	if (from <= 0)
		from = 1; /* 0 would ask the library for its default period */
	if ((rc = saas_account_info_get(&ai, c->ctx->client)) < 0)
		return aas_mcp_fail_saas(c, rc);
	if ((rc = saas_usage_get(&u, c->ctx->client, from, to, 0)) < 0) {
		saas_account_info_free(ai);
		return aas_mcp_fail_saas(c, rc);
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
	return aas_mcp_ok(o);
}

json_t *aas_mcp_tool_service(struct call *c)
{
	saas_engine_info *info = NULL;
	json_t *o, *sizes;
	int rc;

	if (!c->ctx->engine)
		return aas_mcp_failf(c, "get_service_info is not available on this connection.");
	if ((rc = saas_engine_info_get(&info, c->ctx->engine)) < 0)
		return aas_mcp_fail_saas(c, rc);
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
	return aas_mcp_ok(o);
}
