/*
 * /v1/account, /v1/usage, /v1/service, /healthz, /readyz, /openapi.json.
 *
 * /v1/service reports what the engine says (saas_engine_info_get(), no
 * account needed), fetched once at start: it does not change while the
 * engine runs.
 *
 * /healthz says the process answers; /readyz whether it can serve, for a load
 * balancer that polls each server every second or so: the store answers (the
 * list of VM hosts, one small query, is the probe) and, with hosts, one of them
 * is reached. One probe runs at a time and its answer is kept for
 * AAS_READY_CACHE_MS, so polls from many balancers cost one query a second; a
 * poll that finds a probe running past AAS_READY_STORE_MS answers 503 without
 * waiting for it. Its body names what is not ready and nothing else: no
 * error text (a store's may name its host), no accounts.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"

static char base_url[256];
static saas_engine_info *info;
static saas_engine *ready_engine;
static unsigned int ready_heartbeat_ms = SAAS_ENGINE_HOST_HEARTBEAT_MS;

int aas_service_set(const struct aas_config *cfg, unsigned int port, saas_engine *engine)
{
	const char *h = cfg->listen_host;
	bool v6 = strchr(h, ':') != NULL;
	int rc;

	if (strcmp(h, "0.0.0.0") == 0)
		h = "127.0.0.1";
	else if (strcmp(h, "::") == 0)
		h = "::1";
	snprintf(base_url, sizeof(base_url), "http://%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "", port);
	saas_engine_info_free(info);
	info = NULL;
	ready_engine = engine;
	if (cfg->host_heartbeat_s)
		ready_heartbeat_ms = cfg->host_heartbeat_s * 1000;
	if ((rc = saas_engine_info_get(&info, engine)) < 0) {
		aas_log(SAAS_LOG_ERROR, "cannot read the engine's sizes and limits: %s (%s)", saas_error_last()->message,
		        saas_strerror(rc));
		return -1;
	}
	return 0;
}

void aas_service_free(void)
{
	saas_engine_info_free(info);
	info = NULL;
}

const saas_engine_info *aas_service_info(void)
{
	return info;
}

void aas_h_healthz(struct aas_req *r, struct aas_reply *out)
{
	(void)r;
	aas_reply_json(out, 200, json_pack("{s:s,s:s}", "status", "ok", "version", saas_version()));
}

bool aas_readiness(json_t **body, int store_rc, int64_t store_ms, const saas_host_list *hosts, int64_t now_ms,
                   unsigned int heartbeat_ms)
{
	const char *store = "ok", *vm = "local";
	bool ready;

	if (store_rc < 0) {
		store = "failed";
		vm = "unknown"; /* the hosts' state is in the store */
	} else if (store_ms > AAS_READY_STORE_MS) {
		store = "slow";
	}
	if (store_rc >= 0 && hosts && hosts->count) {
		vm = "unreachable";
		for (size_t i = 0; i < hosts->count; i++) {
			const saas_host *h = hosts->items[i];
			/* As /metrics's aas_host_up: not lost, and some server reached it within three heartbeats. */
			if (h->state != SAAS_HOST_LOST && h->last_seen_ms && now_ms - h->last_seen_ms < 3 * (int64_t)heartbeat_ms)
				vm = "ok";
		}
	}
	ready = strcmp(store, "ok") == 0 && (strcmp(vm, "ok") == 0 || strcmp(vm, "local") == 0);
	*body = json_pack("{s:s,s:s,s:{s:s,s:s}}", "status", ready ? "ready" : "not_ready", "version", saas_version(),
	                  "checks", "store", store, "vm_hosts", vm);
	return ready;
}

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void aas_h_readyz(struct aas_req *r, struct aas_reply *out)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static json_t *cached;
	static bool cached_ready;
	static unsigned int probes; /* under way; more than one only before the first answer */
	static int64_t cached_at, probe_started;
	saas_host_list *hosts = NULL;
	json_t *body = NULL;
	int64_t now = clock_ms(CLOCK_MONOTONIC), took;
	bool ready;
	int rc;

	(void)r;
	pthread_mutex_lock(&mu);
	if (probes && now - probe_started > AAS_READY_STORE_MS && !(cached && now - cached_at < AAS_READY_CACHE_MS)) {
		/* The probe under way is late: that is the answer, without waiting on the store too. */
		pthread_mutex_unlock(&mu);
		aas_reply_json(out, 503, json_pack("{s:s,s:s,s:{s:s,s:s}}", "status", "not_ready", "version",
		                                   saas_version(), "checks", "store", "slow", "vm_hosts", "unknown"));
		return;
	}
	if (cached && (now - cached_at < AAS_READY_CACHE_MS || probes)) {
		/* Fresh, or a probe is under way and not yet late: the last answer. A copy: a reply's body is its own. */
		body = json_deep_copy(cached);
		ready = cached_ready;
		pthread_mutex_unlock(&mu);
		if (body)
			aas_reply_json(out, ready ? 200 : 503, body);
		else
			aas_reply_error(out, 503, "not_ready", "out of memory");
		return;
	}
	if (probes++ == 0)
		probe_started = now;
	pthread_mutex_unlock(&mu);

	rc = saas_host_list_get(&hosts, ready_engine);
	took = clock_ms(CLOCK_MONOTONIC) - now;
	if (rc < 0)
		aas_log(SAAS_LOG_WARN, "readiness: the store did not answer: %s (%s)", saas_error_last()->message,
		        saas_strerror(rc));
	ready = aas_readiness(&body, rc, took, hosts, clock_ms(CLOCK_REALTIME), ready_heartbeat_ms);
	saas_host_list_free(hosts);

	pthread_mutex_lock(&mu);
	probes--;
	if (body) {
		json_decref(cached);
		cached = json_deep_copy(body);
		cached_ready = ready;
		cached_at = clock_ms(CLOCK_MONOTONIC);
	}
	pthread_mutex_unlock(&mu);
	if (body)
		aas_reply_json(out, ready ? 200 : 503, body);
	else
		aas_reply_error(out, 503, "not_ready", "out of memory");
}

void aas_h_openapi(struct aas_req *r, struct aas_reply *out)
{
	(void)r;
	out->status = 200;
	out->response = MHD_create_response_from_buffer(strlen(aas_openapi_json), (void *)aas_openapi_json,
	                                                MHD_RESPMEM_PERSISTENT);
	if (out->response)
		MHD_add_response_header(out->response, "Content-Type", "application/json");
}

void aas_h_service(struct aas_req *r, struct aas_reply *out)
{
	json_t *o = json_object(), *sizes = json_array();
	char link[320];

	(void)r;
	json_object_set_new(o, "name", json_string("aas-server"));
	json_object_set_new(o, "description",
	                    json_string("Sandboxes as a service: each sandbox is a dedicated virtual machine."));
	json_object_set_new(o, "version", json_string(saas_version()));
	json_object_set_new(o, "api_version", json_string("v1"));
	for (size_t i = 0; i < info->nsizes; i++)
		json_array_append_new(sizes, saas__wire_size(info->sizes[i], info->paused_usd_micro_per_gib_hour));
	json_object_set_new(o, "sizes", sizes);
	saas__wire_money(o, "paused_usd_per_gib_hour", info->paused_usd_micro_per_gib_hour);
	json_object_set_new(o, "default_size", json_string(info->default_size));
	json_object_set_new(o, "default_image", json_string(info->default_image));
	json_object_set_new(o, "limits", saas__wire_limits(info->limits));
	json_object_set_new(o, "authentication",
	                    json_string("Authorization: Bearer aas_sk_... (or x-api-key: aas_sk_...)"));
	json_t *links = json_object();
	snprintf(link, sizeof(link), "%s/openapi.json", base_url);
	json_object_set_new(links, "openapi", json_string(link));
	snprintf(link, sizeof(link), "%s/v1", base_url);
	json_object_set_new(links, "api", json_string(link));
	snprintf(link, sizeof(link), "%s/healthz", base_url);
	json_object_set_new(links, "health", json_string(link));
	snprintf(link, sizeof(link), "%s/metrics", base_url);
	json_object_set_new(links, "metrics", json_string(link));
	json_object_set_new(o, "links", links);
	aas_reply_json(out, 200, o);
}

void aas_h_account(struct aas_req *r, struct aas_reply *out)
{
	saas_account_info *ai = NULL;
	int rc = saas_account_info_get(&ai, r->client);

	if (rc < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_account(ai));
	saas_account_info_free(ai);
}

void aas_h_usage(struct aas_req *r, struct aas_reply *out)
{
	const char *from, *to;
	int64_t from_ms = 0, to_ms = 0;
	saas_usage *u = NULL;
	int rc;

	if (!aas_query(r, "from", &from, out) || !aas_query(r, "to", &to, out))
		return;
	/* A bare date as `to` includes that day, as in MCP's get_usage and the CLI. */
	if (from && *from && saas_time_parse(&from_ms, from, 0) < 0) {
		aas_reply_error(out, 400, "invalid_argument",
		                "from must be an RFC 3339 time (2025-06-01T00:00:00Z), a date (2025-06-01) or unix seconds");
		return;
	}
	if (to && *to && saas_time_parse(&to_ms, to, SAAS_TIME_DAY_END) < 0) {
		aas_reply_error(out, 400, "invalid_argument",
		                "to must be an RFC 3339 time (2025-06-01T00:00:00Z), a date (2025-06-01) or unix seconds");
		return;
	}
	if (from_ms < 0 || to_ms < 0) {
		aas_reply_error(out, 400, "invalid_argument", "from and to may not be before 1970");
		return;
	}
	if ((rc = saas_usage_get(&u, r->client, from_ms, to_ms, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_usage(u));
	saas_usage_free(u);
}
