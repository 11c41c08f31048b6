/*
 * Sandbox metrics in E2B's shapes, from saas_sandbox_metrics_get (where the
 * numbers come from and how long they are kept: docs/sandboxes.md,
 * "Metrics"):
 *  - GET /sandboxes/{id}/metrics?start=&end= (getMetrics; unix seconds):
 *    SandboxMetric[], oldest first;
 *  - GET /sandboxes/metrics?sandbox_ids=a,b: the newest sample of each of
 *    the caller's running sandboxes named ({"sandboxes":{id: SandboxMetric}});
 *  - envd's GET /metrics (data plane, the sandbox's token): its newest
 *    sample in envd's snake_case Metrics shape.
 * libsaas reads no page cache (it reads nothing from the guest): memCache
 * is 0.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b/internal.h"

/* The most ids one /sandboxes/metrics names: a bound on one request's work. */
#define IDS_MAX 100

static json_t *iso_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[80];

	if (ms <= 0 || !gmtime_r(&t, &tm))
		return json_null();
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

/* SandboxMetric: every key the Python SDK's model requires. */
static json_t *metric_json(const saas_metric *m)
{
	return json_pack("{s:o,s:I,s:i,s:f,s:I,s:I,s:i,s:I,s:I}", "timestamp", iso_time(m->at_ms), "timestampUnix",
	                 (json_int_t)(m->at_ms / 1000), "cpuCount", (int)m->vcpus, "cpuUsedPct", m->cpu_used_pct,
	                 "memUsed", (json_int_t)m->memory_used, "memTotal", (json_int_t)m->memory_total, "memCache", 0,
	                 "diskUsed", (json_int_t)m->disk_used, "diskTotal", (json_int_t)m->disk_total);
}

bool aas_e2b_seconds_parse(const char *s, int64_t *out)
{
	int64_t v = 0;
	size_t n;

	for (n = 0; s[n]; n++) {
		/* Twelve digits reach the year 33658: past it is no time a sandbox ran. */
		if (s[n] < '0' || s[n] > '9' || n >= AAS_E2B_SECONDS_DIGITS)
			return false;
		v = v * 10 + (s[n] - '0');
	}
	if (n == 0)
		return false;
	*out = v;
	return true;
}

size_t aas_e2b_list_next(const char **p)
{
	size_t len = strcspn(*p, ",");

	*p += len + ((*p)[len] == ',');
	return len;
}

/* Unix seconds, digits only (as the SDK sends them); absent or empty leaves *ms. False after a 400. */
static bool seconds_param(struct aas_req *r, struct aas_reply *out, const char *name, int64_t *ms, bool end)
{
	const char *v;
	int64_t s = 0;

	if (!aas_query(r, name, &v, out))
		return false;
	if (!v || !*v)
		return true;
	if (!aas_e2b_seconds_parse(v, &s)) {
		aas_e2b_error(out, 400, "%s must be a time in unix seconds", name);
		return false;
	}
	/* The SDK rounds to whole seconds: an end includes its whole second. */
	*ms = s * 1000 + (end ? 999 : 0);
	return true;
}

/* The caller's sandbox's samples; false after a reply (404 in E2B's shape for one not there). */
static bool samples(struct aas_reply *out, saas_client *client, const char *e2b_id, int64_t start_ms, int64_t end_ms,
                    saas_metric_list **l)
{
	char id[SAAS_ID_MAX + 1];
	saas_sandbox *sb = NULL;
	int rc;

	*l = NULL;
	if (!aas_e2b_id_to_saas(id, e2b_id) ||
	    (rc = saas_sandbox_get_ext(&sb, client, id, SAAS_GET_RECORDED)) == SAAS_ENOTFOUND ||
	    (rc == SAAS_OK && sb->status == SAAS_SANDBOX_DESTROYED)) {
		saas_sandbox_free(sb);
		aas_e2b_error(out, 404, "sandbox \"%s\" not found", e2b_id);
		return false;
	}
	saas_sandbox_free(sb);
	if (rc == SAAS_OK)
		rc = saas_sandbox_metrics_get(l, client, id, start_ms, end_ms, 0);
	if (rc < 0) {
		aas_e2b_error_saas(out, rc, "e2b: sandbox metrics");
		return false;
	}
	return true;
}

void aas_e2b_h_metrics(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	int64_t start_ms = 0, end_ms = 0;
	saas_metric_list *l = NULL;
	json_t *a;

	if (!seconds_param(r, out, "start", &start_ms, false) || !seconds_param(r, out, "end", &end_ms, true))
		return;
	if (end_ms && start_ms > end_ms) {
		aas_e2b_error(out, 400, "start is after end");
		return;
	}
	if (!samples(out, r->client, e2b_id, start_ms, end_ms, &l))
		return;
	if ((a = json_array()))
		for (size_t i = 0; i < l->count; i++)
			json_array_append_new(a, metric_json(l->items[i]));
	saas_metric_list_free(l);
	if (!a)
		aas_e2b_error(out, 500, "out of memory");
	else
		aas_e2b_json(out, 200, a);
}

void aas_e2b_h_metrics_many(struct aas_req *r, struct aas_reply *out)
{
	const char *ids;
	char e2b_id[SAAS_ID_MAX + 1];
	json_t *map = json_object();
	size_t n = 0;

	if (!map) {
		aas_e2b_error(out, 500, "out of memory");
		return;
	}
	if (!aas_query(r, "sandbox_ids", &ids, out))
		goto fail;
	if (!ids || !*ids) {
		aas_e2b_error(out, 400, "sandbox_ids is required: the sandboxes' ids, comma-separated");
		goto fail;
	}
	for (const char *p = ids; *p;) {
		const char *at = p;
		size_t len = aas_e2b_list_next(&p);
		saas_metric_list *l = NULL;
		struct aas_reply ignored = { 0, NULL };

		if (++n > IDS_MAX) {
			aas_e2b_error(out, 400, "sandbox_ids names more than %d sandboxes", IDS_MAX);
			goto fail;
		}
		if (len == 0 || len >= sizeof(e2b_id)) {
			aas_e2b_error(out, 400, "sandbox_ids holds an empty or overlong id");
			goto fail;
		}
		memcpy(e2b_id, at, len);
		e2b_id[len] = '\0';
		/* One not there, not the caller's or not running is left out, as E2B does. */
		if (!samples(&ignored, r->client, e2b_id, 0, 0, &l)) {
			if (ignored.response)
				MHD_destroy_response(ignored.response);
			continue;
		}
		if (l->count)
			json_object_set_new(map, e2b_id, metric_json(l->items[l->count - 1]));
		saas_metric_list_free(l);
	}
	aas_e2b_json(out, 200, json_pack("{s:o}", "sandboxes", map));
	return;
fail:
	json_decref(map);
}

void aas_e2b_envd_metrics(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	saas_metric_list *l = NULL;
	const saas_metric *m;
	int rc;

	if (strcmp(r->method, "GET") != 0) {
		aas_e2b_error(out, 405, "%s is not allowed on /metrics", r->method);
		return;
	}
	if ((rc = saas_sandbox_metrics_get(&l, t->client, t->id, 0, 0, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: sandbox metrics");
		return;
	}
	if (l->count == 0) {
		saas_metric_list_free(l);
		aas_e2b_error(out, 502, "the sandbox is not running");
		return;
	}
	m = l->items[l->count - 1];
	aas_e2b_json(out, 200, json_pack("{s:I,s:i,s:f,s:I,s:I,s:I,s:I,s:i,s:I,s:I}", "ts", (json_int_t)(m->at_ms / 1000),
	                                 "cpu_count", (int)m->vcpus, "cpu_used_pct", m->cpu_used_pct, "mem_total",
	                                 (json_int_t)m->memory_total, "mem_used", (json_int_t)m->memory_used,
	                                 "mem_total_mib", (json_int_t)(m->memory_total >> 20), "mem_used_mib",
	                                 (json_int_t)(m->memory_used >> 20), "mem_cache", 0, "disk_used",
	                                 (json_int_t)m->disk_used, "disk_total", (json_int_t)m->disk_total));
	saas_metric_list_free(l);
}
