/*
 * Prometheus text exposition: requests by route, method and status; request
 * latency per route; sandbox creates and their durations; destroys; and, read
 * from the engine at each scrape, live sandboxes by state across all accounts
 * and the warm pools; served at GET /metrics (aas_h_metrics).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "front.h"

static const double lat_bounds[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
#define NLAT (sizeof(lat_bounds) / sizeof(lat_bounds[0]))
static const double create_bounds[] = { 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300 };
#define NCREATE (sizeof(create_bounds) / sizeof(create_bounds[0]))

struct counter {
	const char *route; /* static strings: route patterns and labels */
	char method[12];
	unsigned int status;
	uint64_t count;
};

struct histo {
	const char *route;
	uint64_t buckets[NLAT];
	uint64_t count;
	double sum;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static saas_engine *engine;
static unsigned int host_heartbeat_ms = SAAS_ENGINE_HOST_HEARTBEAT_MS;
static struct counter *counters;
static size_t ncounters, capcounters;
static struct histo *histos;
static size_t nhistos, caphistos;
/*
 * Creates by result. A client's own mistake (a bad argument, no credit, a
 * limit) and a server too full to take one (busy) are refusals an operator
 * reads differently from a create that failed: alerts watch "error" alone.
 */
enum create_result { CREATE_OK, CREATE_INVALID, CREATE_CREDIT, CREATE_LIMIT, CREATE_BUSY, CREATE_ERROR, NRESULTS };
static const char *const create_result_names[NRESULTS] = { "ok", "invalid", "credit", "limit", "busy", "error" };
static uint64_t creates[NRESULTS], destroys;
static uint64_t create_buckets[NCREATE];
static double create_sum;

/*
 * Room for one more element in a table that doubles: false, and the table
 * untouched, when memory is short. The program-side twin of the library's
 * SAAS__ARRAY_RESERVE, which the server cannot include; the byte buffers of
 * the server keep their own growth, each beside the bound that caps it.
 */
static bool reserve_one(void *itemsp, size_t *cap, size_t n, size_t size, size_t first)
{
	void **items = itemsp;
	size_t want;
	void *p;

	if (n < *cap)
		return true;
	want = *cap ? *cap * 2 : first;
	if (!(p = realloc(*items, want * size)))
		return false;
	*items = p;
	*cap = want;
	return true;
}

static struct histo *histo_locked(const char *route)
{
	for (size_t i = 0; i < nhistos; i++)
		if (histos[i].route == route)
			return &histos[i];
	if (!reserve_one(&histos, &caphistos, nhistos, sizeof(*histos), 32))
		return NULL;
	memset(&histos[nhistos], 0, sizeof(histos[nhistos]));
	histos[nhistos].route = route;
	return &histos[nhistos++];
}

void aas_metrics_host_heartbeat(unsigned int ms)
{
	pthread_mutex_lock(&mu);
	host_heartbeat_ms = ms;
	pthread_mutex_unlock(&mu);
}

void aas_metrics_init(saas_engine *e)
{
	engine = e;
}

void aas_metrics_request(const char *route, const char *method, unsigned int status, double seconds)
{
	struct counter *c = NULL;
	struct histo *h;

	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < ncounters && !c; i++)
		if (counters[i].route == route && counters[i].status == status && strcmp(counters[i].method, method) == 0)
			c = &counters[i];
	if (!c && ncounters < 10000 && reserve_one(&counters, &capcounters, ncounters, sizeof(*counters), 64)) {
		c = &counters[ncounters++];
		c->route = route;
		/* Unknown methods are folded so a client cannot grow the table. */
		const char *known[] = { "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH" };
		const char *m = "OTHER";
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (strcmp(method, known[i]) == 0)
				m = known[i];
		snprintf(c->method, sizeof(c->method), "%s", m);
		c->status = status;
		c->count = 0;
	}
	if (c)
		c->count++;
	if ((h = histo_locked(route))) {
		for (size_t i = 0; i < NLAT; i++)
			if (seconds <= lat_bounds[i])
				h->buckets[i]++;
		h->count++;
		h->sum += seconds;
	}
	pthread_mutex_unlock(&mu);
}

static enum create_result create_result(int rc)
{
	switch (rc) {
	case SAAS_OK: return CREATE_OK;
	case SAAS_EINVAL:
	case SAAS_ENOTSUP:
	case SAAS_ETOOBIG: return CREATE_INVALID;
	case SAAS_ECREDIT: return CREATE_CREDIT;
	case SAAS_ELIMIT: return CREATE_LIMIT;
	case SAAS_EBUSY: return CREATE_BUSY;
	default: return CREATE_ERROR;
	}
}

void aas_metrics_create(int rc, double seconds)
{
	enum create_result r = create_result(rc);

	pthread_mutex_lock(&mu);
	creates[r]++;
	if (r == CREATE_OK) {
		for (size_t i = 0; i < NCREATE; i++)
			if (seconds <= create_bounds[i])
				create_buckets[i]++;
		create_sum += seconds;
	}
	pthread_mutex_unlock(&mu);
}

void aas_metrics_destroy(void)
{
	pthread_mutex_lock(&mu);
	destroys++;
	pthread_mutex_unlock(&mu);
}

struct out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap * 2 + (size_t)(n > 0 ? n : 0);
		char *p = realloc(o->buf, cap);
		if (!p) {
			o->oom = true;
			return;
		}
		o->buf = p;
		o->cap = cap;
	}
}

/* A label value, escaped as the text format wants (size names are any printable text). */
static const char *label(char *buf, size_t size, const char *v)
{
	size_t n = 0;

	for (; *v && n + 2 < size; v++) {
		if (*v == '"' || *v == '\\')
			buf[n++] = '\\';
		buf[n++] = *v;
	}
	buf[n] = '\0';
	return buf;
}

/* One series per pool; pooled VMs are not sandboxes, so they are counted here only. */
/* Templates by state, and the storage their saved state takes (none from a driver that makes none). */
static void put_templates(struct out *o, const saas_engine_stats *st)
{
	unsigned int n[SAAS_TEMPLATE_FAILED + 1] = { 0 };
	int64_t bytes = 0;

	for (size_t i = 0; i < st->ntemplates; i++) {
		n[st->templates[i]->state]++;
		bytes += st->templates[i]->state_bytes;
	}
	put(o, "# HELP aas_templates The driver's templates (the VMs sandboxes are cloned from) by state.\n"
	       "# TYPE aas_templates gauge\naas_templates{state=\"building\"} %u\naas_templates{state=\"ready\"} %u\n"
	       "aas_templates{state=\"failed\"} %u\n"
	       "# HELP aas_template_state_bytes Storage the ready templates' saved state takes.\n"
	       "# TYPE aas_template_state_bytes gauge\naas_template_state_bytes %lld\n",
	    n[SAAS_TEMPLATE_BUILDING], n[SAAS_TEMPLATE_READY], n[SAAS_TEMPLATE_FAILED], (long long)bytes);
}

static void put_pools(struct out *o, const saas_engine_stats *st)
{
	static const struct {
		const char *name, *type, *help;
	} series[] = {
		{ "aas_pool_ready", "gauge", "Pooled VMs ready to be claimed, by size and image." },
		{ "aas_pool_target", "gauge", "Pooled VMs each pool holds when full." },
		{ "aas_pool_creating", "gauge", "1 while the refill is making a VM for the pool." },
		{ "aas_pool_claims_total", "counter", "Creates served from the pool since the engine opened." },
		{ "aas_pool_create_failures_total", "counter", "Pool refill creates that failed since the engine opened." },
	};
	char size[128], image[128];

	if (st->npools == 0)
		return;
	for (size_t k = 0; k < sizeof(series) / sizeof(series[0]); k++) {
		put(o, "# HELP %s %s\n# TYPE %s %s\n", series[k].name, series[k].help, series[k].name, series[k].type);
		for (size_t i = 0; i < st->npools; i++) {
			const saas_engine_pool *p = st->pools[i];
			unsigned long long v = k == 0 ? p->ready : k == 1 ? p->target : k == 2 ? p->creating
			                     : k == 3 ? p->claims : p->failures;
			put(o, "%s{size=\"%s\",image=\"%s\"} %llu\n", series[k].name, label(size, sizeof(size), p->size),
			    label(image, sizeof(image), p->image), v);
		}
	}
}

/*
 * What this server keeps on each VM host beside the sandboxes: its pooled
 * VMs, and the templates its driver there reports, by state (every state
 * written, 0 included, so an alert on "failed" sees a series), with the
 * storage the ready ones take. Another server's pooled VMs are in its own
 * scrape.
 */
static void put_host_kept(struct out *o, const saas_host_list *l)
{
	static const char *const states[] = { "building", "ready", "failed" };
	char name[128];

	put(o, "# HELP aas_host_pool_vms This server's pooled VMs on the VM host, ready or being made.\n"
	       "# TYPE aas_host_pool_vms gauge\n");
	for (size_t i = 0; i < l->count; i++)
		put(o, "aas_host_pool_vms{host=\"%s\"} %u\n", label(name, sizeof(name), l->items[i]->name),
		    l->items[i]->pool_vms);
	put(o, "# HELP aas_host_templates Templates on the VM host by state, as this server's driver there reports them.\n"
	       "# TYPE aas_host_templates gauge\n");
	for (size_t i = 0; i < l->count; i++) {
		const saas_host *h = l->items[i];
		unsigned int n[SAAS_TEMPLATE_FAILED + 1] = { 0 };

		for (size_t t = 0; t < h->ntemplates; t++)
			n[h->templates[t]->state]++;
		for (int st = SAAS_TEMPLATE_BUILDING; st <= SAAS_TEMPLATE_FAILED; st++)
			put(o, "aas_host_templates{host=\"%s\",state=\"%s\"} %u\n", label(name, sizeof(name), h->name),
			    states[st - SAAS_TEMPLATE_BUILDING], n[st]);
	}
	put(o, "# HELP aas_host_template_state_bytes Storage the VM host's ready templates' saved state takes.\n"
	       "# TYPE aas_host_template_state_bytes gauge\n");
	for (size_t i = 0; i < l->count; i++) {
		const saas_host *h = l->items[i];
		long long bytes = 0;

		for (size_t t = 0; t < h->ntemplates; t++)
			bytes += h->templates[t]->state_bytes;
		put(o, "aas_host_template_state_bytes{host=\"%s\"} %lld\n", label(name, sizeof(name), h->name), bytes);
	}
}

/* One series per VM host (none on a single machine): what operators watch to add or drain one. */
static void put_hosts(struct out *o)
{
	static const struct {
		const char *name, *help;
	} series[] = {
		{ "aas_host_up", "1 if some server reached the VM host within the last three heartbeats and it is not lost." },
		{ "aas_host_state", "The VM host's state: 0 active, 1 draining, 2 lost." },
		{ "aas_host_vcpus_capacity", "vCPUs placement fills the VM host up to (its CPUs times the overcommit)." },
		{ "aas_host_vcpus_used", "vCPUs of the sandboxes on the VM host." },
		{ "aas_host_memory_mb_capacity", "Memory (MiB) placement fills the VM host up to." },
		{ "aas_host_memory_mb_used", "Memory (MiB) of the sandboxes on the VM host." },
		{ "aas_host_sandboxes", "Sandboxes not destroyed on the VM host (paused ones keep their place)." },
		{ "aas_host_last_seen_seconds", "When a server last reached the VM host (Unix time; 0: never)." },
	};
	saas_host_list *l = NULL;
	int64_t now = (int64_t)time(NULL) * 1000, fresh;
	char name[128];
	int rc;

	pthread_mutex_lock(&mu);
	fresh = 3 * (int64_t)host_heartbeat_ms;
	pthread_mutex_unlock(&mu);
	if ((rc = saas_host_list_get(&l, engine)) < 0) {
		aas_log(SAAS_LOG_WARN, "metrics: cannot list the VM hosts: %s (%s)", saas_error_last()->message,
		        saas_strerror(rc));
		return;
	}
	for (size_t k = 0; l->count && k < sizeof(series) / sizeof(series[0]); k++) {
		put(o, "# HELP %s %s\n# TYPE %s gauge\n", series[k].name, series[k].help, series[k].name);
		for (size_t i = 0; i < l->count; i++) {
			const saas_host *h = l->items[i];
			bool up = h->state != SAAS_HOST_LOST && h->last_seen_ms && now - h->last_seen_ms < fresh;
			unsigned long long v = k == 0   ? up
			                       : k == 1 ? (unsigned long long)h->state
			                       : k == 2 ? h->vcpus_capacity
			                       : k == 3 ? h->vcpus_used
			                       : k == 4 ? h->memory_mb_capacity
			                       : k == 5 ? h->memory_mb_used
			                       : k == 6 ? h->sandboxes
			                                : (unsigned long long)(h->last_seen_ms / 1000);
			put(o, "%s{host=\"%s\"} %llu\n", series[k].name, label(name, sizeof(name), h->name), v);
		}
	}
	if (l->count)
		put_host_kept(o, l);
	saas_host_list_free(l);
}

static char *metrics_render(size_t *len)
{
	struct out o = { malloc(8192), 0, 8192, false };

	if (!o.buf)
		return NULL;
	pthread_mutex_lock(&mu);
	put(&o, "# HELP aas_http_requests_total HTTP requests answered, by route, method and status.\n"
	        "# TYPE aas_http_requests_total counter\n");
	for (size_t i = 0; i < ncounters; i++)
		put(&o, "aas_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n", counters[i].route,
		    counters[i].method, counters[i].status, (unsigned long long)counters[i].count);
	put(&o, "# HELP aas_http_request_duration_seconds Time to answer a request, by route.\n"
	        "# TYPE aas_http_request_duration_seconds histogram\n");
	for (size_t i = 0; i < nhistos; i++) {
		for (size_t b = 0; b < NLAT; b++)
			put(&o, "aas_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", histos[i].route,
			    lat_bounds[b], (unsigned long long)histos[i].buckets[b]);
		put(&o, "aas_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", histos[i].route,
		    (unsigned long long)histos[i].count);
		put(&o, "aas_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n", histos[i].route, histos[i].sum);
		put(&o, "aas_http_request_duration_seconds_count{route=\"%s\"} %llu\n", histos[i].route,
		    (unsigned long long)histos[i].count);
	}
	put(&o, "# HELP aas_sandbox_creates_total Sandbox creates through this server, by result.\n"
	        "# TYPE aas_sandbox_creates_total counter\n");
	for (size_t i = 0; i < NRESULTS; i++)
		put(&o, "aas_sandbox_creates_total{result=\"%s\"} %llu\n", create_result_names[i],
		    (unsigned long long)creates[i]);
	put(&o, "# HELP aas_sandbox_create_duration_seconds Time from create request to a ready sandbox.\n"
	        "# TYPE aas_sandbox_create_duration_seconds histogram\n");
	for (size_t b = 0; b < NCREATE; b++)
		put(&o, "aas_sandbox_create_duration_seconds_bucket{le=\"%g\"} %llu\n", create_bounds[b],
		    (unsigned long long)create_buckets[b]);
	put(&o, "aas_sandbox_create_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	        "aas_sandbox_create_duration_seconds_sum %.6f\naas_sandbox_create_duration_seconds_count %llu\n",
	    (unsigned long long)creates[CREATE_OK], create_sum, (unsigned long long)creates[CREATE_OK]);
	put(&o, "# HELP aas_sandbox_destroys_total Sandboxes destroyed by DELETE through this server.\n"
	        "# TYPE aas_sandbox_destroys_total counter\naas_sandbox_destroys_total %llu\n",
	    (unsigned long long)destroys);
	pthread_mutex_unlock(&mu);
	{
		uint64_t lookups, negative;

		aas_auth_counts(&lookups, &negative);
		put(&o, "# HELP aas_auth_key_lookups_total API keys looked up in the store (not cached either way).\n"
		        "# TYPE aas_auth_key_lookups_total counter\naas_auth_key_lookups_total %llu\n"
		        "# HELP aas_auth_negative_hits_total Unknown keys refused from the negative cache, without a lookup.\n"
		        "# TYPE aas_auth_negative_hits_total counter\naas_auth_negative_hits_total %llu\n",
		    (unsigned long long)lookups, (unsigned long long)negative);
	}
	put(&o, "# HELP aas_http_requests_in_flight Requests being answered now.\n"
	        "# TYPE aas_http_requests_in_flight gauge\naas_http_requests_in_flight %u\n", aas_http_inflight());
	saas_engine_stats *st = NULL;
	int rc = saas_engine_stats_get(&st, engine);
	if (rc == SAAS_OK) {
		put(&o, "# HELP aas_sandboxes Live sandboxes by state, across all accounts.\n"
		        "# TYPE aas_sandboxes gauge\naas_sandboxes{state=\"creating\"} %u\naas_sandboxes{state=\"ready\"} %u\n"
		        "# HELP aas_accounts_with_sandboxes Accounts with at least one live sandbox.\n"
		        "# TYPE aas_accounts_with_sandboxes gauge\naas_accounts_with_sandboxes %u\n",
		    st->creating, st->ready, st->accounts_with_sandboxes);
		put_pools(&o, st);
		put_templates(&o, st);
		put_hosts(&o);
	} else {
		/* Leave the gauges out rather than report a zero that is not true. */
		aas_log(SAAS_LOG_WARN, "metrics: cannot count sandboxes: %s (%s)", saas_error_last()->message,
		        saas_strerror(rc));
	}
	saas_engine_stats_free(st);
	if (o.oom) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}

void aas_h_metrics(struct aas_req *r, struct aas_reply *out)
{
	size_t len;
	char *text = metrics_render(&len);

	(void)r;
	if (!text) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	out->status = 200;
	out->response = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (out->response)
		MHD_add_response_header(out->response, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
}
