/*
 * /v1/sandboxes, extend, network, fork, pause, resume, ports (exec and executions: exec.c).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "preview/preview.h"

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reply_sandbox(struct aas_reply *out, unsigned int status, const saas_sandbox *sb)
{
	aas_reply_json(out, status, saas__wire_sandbox(sb));
}

/*
 * A "network" as a request gives it (lib/wire reads the shape; the library
 * then checks each rule). false after replying 400.
 */
static bool network_field(const json_t *v, saas__wire_network_req *req, struct aas_reply *out)
{
	const char *bad = NULL;

	if (saas__wire_network_req_decode(req, v, &bad) == SAAS_OK)
		return true;
	aas_reply_error(out, 400, "invalid_argument", "%s", bad);
	return false;
}

/*
 * An object of strings ("metadata", "envs") as "KEY=VALUE" strings, or NULL
 * when absent; the library checks keys, values and bounds. false after a 400.
 * The count is bounded here, before anything is copied, by `max`.
 */
static bool pairs_field(json_t *body, const char *name, size_t max, char ***list, struct aas_reply *out)
{
	json_t *v = json_object_get(body, name), *val;
	const char *key;
	size_t n = 0;

	*list = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v) || json_object_size(v) > max) {
		aas_reply_error(out, 400, "invalid_argument", "field \"%s\" must be an object of at most %zu strings", name,
		                max);
		return false;
	}
	if (!(*list = calloc(json_object_size(v) + 1, sizeof(**list)))) {
		aas_reply_saas(out, SAAS_ENOMEM);
		return false;
	}
	json_object_foreach(v, key, val) {
		if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val) || strchr(key, '=')) {
			aas_reply_error(out, 400, "invalid_argument",
			                "field \"%s\": each value must be a string without NUL, each key without '='", name);
			return false;
		}
		if (asprintf(&(*list)[n], "%s=%s", key, json_string_value(val)) < 0) {
			(*list)[n] = NULL;
			aas_reply_saas(out, SAAS_ENOMEM);
			return false;
		}
		n++;
	}
	return true;
}

void aas_h_sandbox_create(struct aas_req *r, struct aas_reply *out)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas__wire_network_req *net = NULL;
	saas_sandbox *sb = NULL;
	json_t *body = NULL, *network;
	char **metadata = NULL, **envs = NULL;
	const char *on_timeout = NULL;
	bool present, auto_resume = false;
	double t0;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_string(body, "size", &o.size, out) ||
	    !aas_field_string(body, "image", &o.image, out) ||
	    !aas_field_int(body, "timeout", &o.timeout_s, &present, out) ||
	    !pairs_field(body, "metadata", SAAS_METADATA_MAX, &metadata, out) ||
	    !pairs_field(body, "envs", SAAS_ENVS_MAX, &envs, out) ||
	    !aas_field_string(body, "on_timeout", &on_timeout, out) ||
	    !aas_field_bool(body, "auto_resume", &auto_resume, out))
		goto out;
	o.metadata = (const char *const *)metadata;
	o.envs = (const char *const *)envs;
	o.auto_resume = auto_resume;
	if (on_timeout && strcmp(on_timeout, "pause") == 0) {
		o.on_timeout = SAAS_ON_TIMEOUT_PAUSE;
	} else if (on_timeout && strcmp(on_timeout, "destroy") != 0) {
		aas_reply_error(out, 400, "invalid_argument", "field \"on_timeout\" must be \"destroy\" or \"pause\"");
		goto out;
	}
	/* "isolated", "internet", or a policy {"allow": [...], "deny": [...]}; null is the default. */
	if ((network = json_object_get(body, "network")) && !json_is_null(network)) {
		if (!(net = malloc(sizeof(*net)))) {
			aas_reply_saas(out, SAAS_ENOMEM);
			goto out;
		}
		if (!network_field(network, net, out))
			goto out;
		o.network_spec = &net->spec;
	}
	if (present && o.timeout_s <= 0) {
		aas_reply_error(out, 400, "invalid_argument", "field \"timeout\" must be a positive number of seconds");
		goto out;
	}
	t0 = mono_s();
	rc = saas_sandbox_create(&sb, r->client, &o, 0);
	aas_metrics_create(rc, mono_s() - t0);
	if (rc < 0) {
		aas_reply_saas(out, rc);
		goto out;
	}
	/*
	 * The client left while the VM was made (a killed aas-mcp or CLI, a
	 * client's timeout): nobody learns the id, and the sandbox would run and
	 * bill until it expires. Destroy it now; the answer goes nowhere.
	 */
	if (aas_client_gone(r)) {
		if ((rc = saas_sandbox_destroy(NULL, r->client, sb->id, 0)) < 0)
			aas_log(SAAS_LOG_WARN, "sandbox %s: the client left before it was ready; cannot destroy it (%s), it "
			        "runs until it expires", sb->id, saas_error_last()->message);
		else
			aas_log(SAAS_LOG_INFO, "sandbox %s: the client left before it was ready; destroyed", sb->id);
		aas_reply_error(out, 499, "client_closed", "the client closed the connection; the sandbox was destroyed");
		goto out;
	}
	reply_sandbox(out, 201, sb);
out:
	saas_sandbox_free(sb);
	free(net);
	aas_pairs_free(metadata);
	aas_pairs_free(envs);
	json_decref(body);
}

/*
 * PUT, not PATCH: the body is the whole policy, replacing the one before
 * (nothing is merged), and sending it twice leaves the same policy.
 */
void aas_h_sandbox_network_set(struct aas_req *r, struct aas_reply *out)
{
	saas__wire_network_req *net = NULL;
	saas_sandbox *sb = NULL;
	json_t *body = NULL;
	int rc;

	if (!aas_body_object(r, out, &body))
		goto out;
	if (!(net = malloc(sizeof(*net)))) {
		aas_reply_saas(out, SAAS_ENOMEM);
		goto out;
	}
	if (!network_field(body, net, out))
		goto out;
	if ((rc = saas_sandbox_network_set(&sb, r->client, r->route_id, &net->spec, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_sandbox(out, 200, sb);
out:
	saas_sandbox_free(sb);
	free(net);
	json_decref(body);
}

/*
 * counters=recorded: the egress counts as last recorded, without asking the
 * VMs' host (SAAS_GET_RECORDED for one, SAAS_LIST_RECORDED for a list).
 * *recorded is set; false after a reply (a bad value is a 400).
 */
static bool counters_query(struct aas_req *r, struct aas_reply *out, bool *recorded)
{
	const char *counters;

	*recorded = false;
	if (!aas_query(r, "counters", &counters, out))
		return false;
	if (counters && strcmp(counters, "recorded") == 0) {
		*recorded = true;
	} else if (counters && strcmp(counters, "live") != 0) {
		aas_reply_error(out, 400, "invalid_argument", "counters must be live (the default) or recorded");
		return false;
	}
	return true;
}

void aas_h_sandbox_list(struct aas_req *r, struct aas_reply *out)
{
	const char *status, *cursor, *metadata;
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	saas_sandbox_list *list = NULL;
	unsigned int flags = 0, limit = 0;
	char **pairs = NULL, why[128];
	bool recorded;
	json_t *o;
	int rc;

	if (!aas_query(r, "status", &status, out) || !aas_query(r, "cursor", &cursor, out) ||
	    !aas_query_uint(r, "limit", 1, 1000, &limit, out) || !aas_query(r, "metadata", &metadata, out) ||
	    !counters_query(r, out, &recorded))
		return;
	if (metadata && *metadata && aas_pairs_parse(metadata, SAAS_LIST_METADATA_MAX, &pairs, why, sizeof(why)) < 0) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"metadata\" %s", why);
		return;
	}
	if (status && strcmp(status, "active") == 0) {
		flags = SAAS_LIST_ACTIVE;
	} else if (status && strcmp(status, "destroyed") == 0) {
		flags = SAAS_LIST_DESTROYED;
	} else if (status && strcmp(status, "ready") != 0 && strcmp(status, "all") != 0 && *status) {
		aas_reply_error(out, 400, "invalid_argument",
		                "status must be one of active, ready, destroyed, all");
		aas_pairs_free(pairs);
		return;
	} else if (status && strcmp(status, "ready") == 0) {
		flags = SAAS_LIST_ACTIVE;
	}
	if (cursor && !*cursor)
		cursor = NULL;
	lo.cursor = cursor;
	lo.limit = limit;
	lo.metadata = (const char *const *)pairs;
	rc = saas_sandbox_list_query(&list, r->client, &lo, flags | (recorded ? SAAS_LIST_RECORDED : 0));
	aas_pairs_free(pairs);
	if (rc < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	/* ready: the active ones that are ready (not creating); the rest leave the list. */
	if (status && strcmp(status, "ready") == 0) {
		size_t n = 0;
		for (size_t i = 0; i < list->count; i++) {
			if (list->items[i]->status == SAAS_SANDBOX_READY)
				list->items[n++] = list->items[i];
			else
				saas_sandbox_free(list->items[i]);
		}
		list->count = n;
	}
	o = saas__wire_sandbox_list(list);
	saas_sandbox_list_free(list);
	aas_reply_json(out, 200, o);
}

void aas_h_sandbox_get(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	bool recorded;
	int rc;

	if (!counters_query(r, out, &recorded))
		return;
	if ((rc = saas_sandbox_get_ext(&sb, r->client, r->route_id, recorded ? SAAS_GET_RECORDED : 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_sandbox(out, 200, sb);
	saas_sandbox_free(sb);
}

/* start and end as usage's from and to: RFC 3339, a date or unix seconds; a bare date as end includes that day. */
void aas_h_sandbox_metrics(struct aas_req *r, struct aas_reply *out)
{
	const char *start, *end;
	int64_t start_ms = 0, end_ms = 0;
	saas_metric_list *l = NULL;
	int rc;

	if (!aas_query(r, "start", &start, out) || !aas_query(r, "end", &end, out))
		return;
	if ((start && *start && saas_time_parse(&start_ms, start, 0) < 0) ||
	    (end && *end && saas_time_parse(&end_ms, end, SAAS_TIME_DAY_END) < 0)) {
		aas_reply_error(out, 400, "invalid_argument", "start and end must be RFC 3339 times "
		                "(2025-06-01T00:00:00Z), dates (2025-06-01) or unix seconds");
		return;
	}
	if ((rc = saas_sandbox_metrics_get(&l, r->client, r->route_id, start_ms, end_ms, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_metric_list(l));
	saas_metric_list_free(l);
}

void aas_h_sandbox_destroy(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	int rc = saas_sandbox_destroy(&sb, r->client, r->route_id, 0);

	if (rc < 0) {
		aas_reply_saas(out, rc);
	} else {
		aas_preview_revoke(r->route_id, 0);
		aas_metrics_destroy();
		aas_reply_json(out, 200, saas__wire_sandbox(sb));
	}
	saas_sandbox_free(sb);
}

void aas_h_sandbox_extend(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	json_t *body = NULL;
	int64_t seconds = 0, timeout = 0;
	bool present, from_now;
	int rc;

	/* "seconds": pushed out by that much; "timeout": set to that long from now, sooner or later. */
	if (!aas_body_object(r, out, &body) || !aas_field_int(body, "seconds", &seconds, &present, out) ||
	    !aas_field_int(body, "timeout", &timeout, &from_now, out))
		goto out;
	if (present == from_now) {
		aas_reply_error(out, 400, "invalid_argument", "give field \"seconds\" (to extend) or \"timeout\" (from now), "
		                "one of them");
		goto out;
	}
	if ((rc = saas_sandbox_extend(&sb, r->client, r->route_id, from_now ? timeout : seconds,
	                              from_now ? SAAS_EXTEND_FROM_NOW : 0)) < 0)
		aas_reply_saas(out, rc);
	else
		reply_sandbox(out, 200, sb);
out:
	saas_sandbox_free(sb);
	json_decref(body);
}

/*
 * POST /v1/sandboxes/{id}/fork {"count": N, "timeout": S, "network": ...}:
 * N (1 to SAAS_FORK_MAX, default 1) children, all or none, as a list.
 */
void aas_h_sandbox_fork(struct aas_req *r, struct aas_reply *out)
{
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	saas__wire_network_req *net = NULL;
	saas_sandbox_list *kids = NULL;
	json_t *body = NULL, *network;
	int64_t count = 1;
	bool present, timeout_present;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_int(body, "count", &count, &present, out) ||
	    !aas_field_int(body, "timeout", &o.timeout_s, &timeout_present, out))
		goto out;
	if (present && (count < 1 || count > SAAS_FORK_MAX)) {
		aas_reply_error(out, 400, "invalid_argument", "field \"count\" must be from 1 to %d", SAAS_FORK_MAX);
		goto out;
	}
	if (timeout_present && o.timeout_s <= 0) {
		aas_reply_error(out, 400, "invalid_argument", "field \"timeout\" must be a positive number of seconds");
		goto out;
	}
	/* The children's egress; absent or null: the parent's. */
	if ((network = json_object_get(body, "network")) && !json_is_null(network)) {
		if (!(net = malloc(sizeof(*net)))) {
			aas_reply_saas(out, SAAS_ENOMEM);
			goto out;
		}
		if (!network_field(network, net, out))
			goto out;
		o.network_spec = &net->spec;
	}
	if ((rc = saas_sandbox_fork(&kids, r->client, r->route_id, (unsigned int)count, &o, 0)) < 0) {
		aas_reply_saas(out, rc);
		goto out;
	}
	/* As after a create (aas_h_sandbox_create): nobody learns the ids, so nothing may run on. */
	if (aas_client_gone(r)) {
		for (size_t i = 0; i < kids->count; i++)
			if (saas_sandbox_destroy(NULL, r->client, kids->items[i]->id, 0) < 0)
				aas_log(SAAS_LOG_WARN, "sandbox %s: the client left before the fork ended; cannot destroy it "
				        "(%s), it runs until it expires", kids->items[i]->id, saas_error_last()->message);
		aas_reply_error(out, 499, "client_closed", "the client closed the connection; the children were destroyed");
		goto out;
	}
	aas_reply_json(out, 201, saas__wire_sandbox_list(kids));
out:
	saas_sandbox_list_free(kids);
	free(net);
	json_decref(body);
}

/* POST /v1/sandboxes/{id}/pause and /resume: no body (an empty JSON object is fine too). */
void aas_h_sandbox_pause(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	int rc = saas_sandbox_pause(&sb, r->client, r->route_id, 0);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		reply_sandbox(out, 200, sb);
	saas_sandbox_free(sb);
}

void aas_h_sandbox_resume(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	int rc = saas_sandbox_resume(&sb, r->client, r->route_id, 0);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		reply_sandbox(out, 200, sb);
	saas_sandbox_free(sb);
}

void aas_h_port_expose(struct aas_req *r, struct aas_reply *out)
{
	json_t *body = NULL;
	int64_t port = 0;
	bool present;
	char *url = NULL;
	int rc;

	if (!aas_body_object(r, out, &body) || !aas_field_int(body, "port", &port, &present, out))
		goto out;
	if (!present || port < 1 || port > 65535) {
		aas_reply_error(out, 400, "invalid_argument", "field \"port\" must be a port number from 1 to 65535");
		goto out;
	}
	if ((rc = saas_port_expose(&url, r->client, r->route_id, (unsigned int)port, 0)) < 0) {
		aas_reply_saas(out, rc);
		goto out;
	}
	aas_reply_json(out, 200, saas__wire_port(r->route_id, (unsigned int)port, url));
out:
	saas_free(url);
	json_decref(body);
}

/* The sandbox's exposed ports, as its own object lists them (one encoder for both). */
void aas_h_port_list(struct aas_req *r, struct aas_reply *out)
{
	saas_sandbox *sb = NULL;
	json_t *o = NULL;
	int rc = saas_sandbox_get(&sb, r->client, r->route_id);

	if (rc < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	if ((o = saas__wire_sandbox(sb)))
		aas_reply_json(out, 200, json_pack("{s:s,s:O}", "sandbox_id", sb->id, "ports", json_object_get(o, "ports")));
	else
		aas_reply_saas(out, SAAS_ENOMEM);
	json_decref(o);
	saas_sandbox_free(sb);
}

void aas_h_port_unexpose(struct aas_req *r, struct aas_reply *out)
{
	const char *seg = strrchr(r->path, '/') + 1; /* the route matched ".../ports/{port}" */
	char *end;
	unsigned long port;
	int rc;

	errno = 0;
	port = strtoul(seg, &end, 10);
	if (!isdigit((unsigned char)*seg) || *end || errno || port < 1 || port > 65535) {
		aas_reply_error(out, 400, "invalid_argument", "the port in the path must be a number from 1 to 65535");
		return;
	}
	if ((rc = saas_port_unexpose(r->client, r->route_id, (unsigned int)port)) < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	/* Its URL already opens nothing new; now close what it holds open. */
	aas_preview_revoke(r->route_id, (unsigned int)port);
	aas_reply_json(out, 200, json_pack("{s:s,s:I,s:b}", "sandbox_id", r->route_id, "port", (json_int_t)port,
	                                   "exposed", 0));
}
