/*
 * A sandbox's CPU, memory and disk over time (saas/metrics.h).
 *
 * Where the numbers come from: the driver's vm_sample, which reports what
 * the host sees of a VM (for libvirt: the domain's CPU time and vCPUs, its
 * QEMU's resident memory, its overlay's allocation). Nothing is read from
 * the guest: what a guest says of itself (/proc/meminfo, statfs of /) needs
 * a command run in the tenant's VM every few seconds, which the tenant would
 * see, pay for and could answer with anything, and works only where a
 * command can run. The host's view costs a libvirt call and no tenant can
 * move it.
 *
 * Over time: a thread samples every running sandbox this engine keeps a
 * history for each metrics_interval_ms into a ring of at most
 * metrics_window_s worth; the rings together hold at most
 * metrics_samples_max samples (a ring grows only while the total allows,
 * then its oldest make way). A history goes when its sandbox is no longer
 * ready (paused, destroyed). On a store nobody shares (SQLite) the engine
 * keeps a history for every ready sandbox. On a shared one each server
 * keeps histories for the sandboxes whose VM it started (create, fork,
 * resume) and those it was asked about: a request to another server first
 * gets one sample taken then, and more from then on (docs/sandboxes.md,
 * "Metrics").
 *
 * CPU: the driver gives CPU time used since the VM started; a percentage
 * needs two samples, so a sample's is over the interval since the one
 * before, and the first's (or one taken on demand) the average since the
 * sandbox became ready: an estimate.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

/* A ring starts this small and doubles: most sandboxes live minutes, not the window. */
#define RING_MIN 8

struct metric_row {
	int64_t at_ms;
	uint32_t vcpus;
	float cpu_pct;
	int64_t mem_used, mem_total, disk_used, disk_total;
};

struct history {
	char id[SAAS_ID_MAX + 1];
	struct metric_row *ring;
	size_t cap, count, head;       /* head: the oldest */
	uint64_t last_cpu_ns;          /* the driver's CPU time at the last sample */
	int64_t last_ms;
	bool have_last;
	bool ready;                    /* seen ready at the last pass */
};

struct saas__metrics {
	pthread_mutex_t mu;            /* the table; never held across a driver or store call */
	pthread_cond_t cond;
	struct history **items;
	size_t count, cap;
	size_t samples;                /* slots of every ring together: at most samples_max */
	unsigned int interval_ms;
	size_t ring_max;               /* metrics_window_s worth of intervals */
	int64_t window_ms;
	size_t samples_max;
	pthread_t thread;
	bool running, stopping;
};

int saas__metrics_setup(saas_engine *e, const saas_engine_options *o)
{
	struct saas__metrics *m;
	unsigned int interval = o->metrics_interval_ms ? o->metrics_interval_ms : SAAS_METRICS_INTERVAL_MS_DEFAULT;
	unsigned int window = o->metrics_window_s ? o->metrics_window_s : SAAS_METRICS_WINDOW_S_DEFAULT;
	unsigned int max = o->metrics_samples_max ? o->metrics_samples_max : SAAS_METRICS_SAMPLES_DEFAULT;

	if (interval < 100 || interval > 3600000)
		return saas__inval("metrics_interval_ms %u is out of range (100 to 3600000)", interval);
	if (window > 86400)
		return saas__inval("metrics_window_s %u is over a day", window);
	if ((uint64_t)window * 1000 / interval > 100000)
		return saas__inval("metrics_window_s %u holds more than 100000 intervals of %u ms", window, interval);
	if (max > 16777216)
		return saas__inval("metrics_samples_max %u is over 16777216", max);
	if (!(m = calloc(1, sizeof(*m))))
		return saas__oom();
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cond, NULL);
	m->interval_ms = interval;
	m->window_ms = (int64_t)window * 1000;
	m->ring_max = (size_t)((uint64_t)window * 1000 / interval);
	if (m->ring_max < 1)
		m->ring_max = 1;
	m->samples_max = max;
	e->metrics = m;
	return SAAS_OK;
}

static void history_free(struct history *h)
{
	if (h) {
		free(h->ring);
		free(h);
	}
}

void saas__metrics_free(saas_engine *e)
{
	struct saas__metrics *m = e->metrics;

	if (!m)
		return;
	for (size_t i = 0; i < m->count; i++)
		history_free(m->items[i]);
	free(m->items);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->mu);
	free(m);
	e->metrics = NULL;
}

static bool can_sample(const saas_engine *e)
{
	return e->driver && e->driver->version >= 10 && e->driver->vm_sample;
}

/* Under m->mu. */
static struct history *find(struct saas__metrics *m, const char *id)
{
	for (size_t i = 0; i < m->count; i++)
		if (strcmp(m->items[i]->id, id) == 0)
			return m->items[i];
	return NULL;
}

/* Under m->mu: the history of id, made if new; NULL when out of memory. */
static struct history *find_or_add(struct saas__metrics *m, const char *id)
{
	struct history *h = find(m, id);

	if (h)
		return h;
	if (m->count == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct history **items = realloc(m->items, cap * sizeof(*items));
		if (!items)
			return NULL;
		m->items = items;
		m->cap = cap;
	}
	if (!(h = calloc(1, sizeof(*h))))
		return NULL;
	snprintf(h->id, sizeof(h->id), "%s", id);
	h->ready = true;
	m->items[m->count++] = h;
	return h;
}

/* Under m->mu: drop entry i, giving its slots back to the total. */
static void drop_at(struct saas__metrics *m, size_t i)
{
	m->samples -= m->items[i]->cap;
	history_free(m->items[i]);
	m->items[i] = m->items[--m->count];
}

/*
 * Under m->mu: room for one more sample in h. The ring doubles while the
 * total allows; at its bound (or the total's) the oldest makes way. false:
 * no slot at all (the total is spent and h has none).
 */
static bool ring_room(struct saas__metrics *m, struct history *h)
{
	if (h->count == h->cap && h->cap < m->ring_max) {
		size_t cap = h->cap ? h->cap * 2 : RING_MIN;
		struct metric_row *ring;

		if (cap > m->ring_max)
			cap = m->ring_max;
		if (m->samples - h->cap + cap > m->samples_max)
			cap = h->cap + (m->samples_max > m->samples ? m->samples_max - m->samples : 0);
		if (cap > h->cap && (ring = malloc(cap * sizeof(*ring)))) {
			/* Unrolled oldest first, so that head is 0 again. */
			for (size_t i = 0; i < h->count; i++)
				ring[i] = h->ring[(h->head + i) % h->cap];
			free(h->ring);
			h->ring = ring;
			h->head = 0;
			m->samples += cap - h->cap;
			h->cap = cap;
		}
	}
	if (h->cap == 0)
		return false;
	if (h->count == h->cap) {
		h->head = (h->head + 1) % h->cap;
		h->count--;
	}
	return true;
}

/* The percentage of all vcpus that cpu_ns over ms is, bounded to 0..100 (the emulator's threads count too). */
static float cpu_pct(uint64_t cpu_ns, int64_t ms, unsigned int vcpus)
{
	double pct;

	if (ms <= 0 || vcpus == 0)
		return 0;
	pct = (double)cpu_ns / ((double)ms * 1e6 * vcpus) * 100.0;
	return pct > 100 ? 100 : pct < 0 ? 0 : (float)pct;
}

/*
 * A driver's sample taken at now as a row: CPU over the time since the last
 * one (last_ms, last_cpu_ns; last_ms 0: since ready_at_ms). A driver is
 * trusted, but the numbers still go to clients as signed: no wrap, no used
 * over total.
 */
static void to_row(struct metric_row *r, const saas_driver_sample *s, int64_t now, int64_t last_ms,
                   uint64_t last_cpu_ns, int64_t ready_at_ms)
{
	memset(r, 0, sizeof(*r));
	r->at_ms = now;
	r->vcpus = s->vcpus;
	if (last_ms && now > last_ms && s->cpu_time_ns >= last_cpu_ns)
		r->cpu_pct = cpu_pct(s->cpu_time_ns - last_cpu_ns, now - last_ms, s->vcpus);
	else
		r->cpu_pct = cpu_pct(s->cpu_time_ns, now - ready_at_ms, s->vcpus);
	r->mem_total = s->memory_total > INT64_MAX ? INT64_MAX : (int64_t)s->memory_total;
	r->mem_used = s->memory_used > (uint64_t)r->mem_total ? r->mem_total : (int64_t)s->memory_used;
	r->disk_total = s->disk_total > INT64_MAX ? INT64_MAX : (int64_t)s->disk_total;
	r->disk_used = s->disk_used > (uint64_t)r->disk_total ? r->disk_total : (int64_t)s->disk_used;
}

/* Under m->mu: a driver sample taken at now into h (ready_at_ms: for the first one's CPU). */
static void record(struct saas__metrics *m, struct history *h, const saas_driver_sample *s, int64_t now,
                   int64_t ready_at_ms, struct metric_row *out)
{
	struct metric_row r;

	to_row(&r, s, now, h->have_last ? h->last_ms : 0, h->last_cpu_ns, ready_at_ms);
	h->last_cpu_ns = s->cpu_time_ns;
	h->last_ms = now;
	h->have_last = true;
	if (ring_room(m, h)) {
		h->ring[(h->head + h->count) % h->cap] = r;
		h->count++;
	}
	if (out)
		*out = r;
}

/* One driver sample of row's VM, outside every lock. */
static int sample_vm(saas_engine *e, const saas_store_sandbox *row, saas_driver_sample *s)
{
	void *ctx;
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = saas__vm_driver(e, row->host_id, &ctx)) < 0)
		return rc;
	return e->driver->vm_sample(ctx, row->id, s);
}

void saas__metrics_track(saas_engine *e, const char *id)
{
	struct saas__metrics *m = e->metrics;
	struct history *h;

	if (!m || !can_sample(e))
		return;
	pthread_mutex_lock(&m->mu);
	/* Its VM just started (a resume's is a new one): its CPU time counts from zero again. */
	if ((h = find_or_add(m, id)))
		h->have_last = false;
	/* Out of memory: it is sampled when asked about instead. */
	pthread_mutex_unlock(&m->mu);
}

void saas__metrics_held(saas_engine *e, size_t *histories, size_t *slots)
{
	struct saas__metrics *m = e->metrics;

	*histories = *slots = 0;
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	*histories = m->count;
	*slots = m->samples;
	pthread_mutex_unlock(&m->mu);
}

int saas__metrics_pass(saas_engine *e)
{
	struct saas__metrics *m = e->metrics;
	struct saas__rows r;
	saas_store_filter f;
	unsigned int sampled = 0;
	int rc;

	if (!m || !can_sample(e))
		return SAAS_OK;
	memset(&f, 0, sizeof(f));
	f.live = 1;
	/* Histories are kept: a store that cannot answer now ends no sandbox. */
	if ((rc = saas__store_sandboxes(e->store, e->store_ctx, &f, &r.items, &r.count)) < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->count; i++)
		m->items[i]->ready = false;
	for (size_t i = 0; i < r.count; i++) {
		struct history *h;
		if (r.items[i].status != SAAS_SANDBOX_READY)
			continue;
		if ((h = find(m, r.items[i].id)))
			h->ready = true;
		else if (!e->claims.shared && (h = find_or_add(m, r.items[i].id)))
			h->ready = true;
	}
	/* Paused, destroyed or gone: its history goes with its VM. */
	for (size_t i = m->count; i-- > 0;)
		if (!m->items[i]->ready)
			drop_at(m, i);
	pthread_mutex_unlock(&m->mu);

	for (size_t i = 0; i < r.count && !__atomic_load_n(&e->abandon, __ATOMIC_ACQUIRE); i++) {
		const saas_store_sandbox *row = &r.items[i];
		saas_driver_sample s;
		struct history *h;
		bool ours;

		if (row->status != SAAS_SANDBOX_READY)
			continue;
		pthread_mutex_lock(&m->mu);
		ours = find(m, row->id) != NULL;
		pthread_mutex_unlock(&m->mu);
		if (!ours)
			continue;
		if (sample_vm(e, row, &s) < 0) {
			/* A VM host that does not answer, or a VM ending now: the next pass tries again. */
			saas__log(e, SAAS_LOG_DEBUG, "metrics of %s: %s", row->id, saas_error_last()->message);
			continue;
		}
		pthread_mutex_lock(&m->mu);
		if ((h = find(m, row->id)))
			record(m, h, &s, saas__engine_now(e), row->ready_at_ms, NULL);
		pthread_mutex_unlock(&m->mu);
		sampled++;
	}
	free(r.items);
	saas__error_clear();
	saas__log(e, SAAS_LOG_DEBUG, "metrics: %u sandboxes sampled", sampled);
	return SAAS_OK;
}

static void *sampler(void *arg)
{
	saas_engine *e = arg;
	struct saas__metrics *m = e->metrics;

	pthread_mutex_lock(&m->mu);
	while (!m->stopping) {
		struct timespec until;

		pthread_mutex_unlock(&m->mu);
		saas__metrics_pass(e);
		pthread_mutex_lock(&m->mu);
		/* The interval is real time whatever clock the engine's timestamps use. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += m->interval_ms / 1000;
		until.tv_nsec += (long)(m->interval_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!m->stopping && pthread_cond_timedwait(&m->cond, &m->mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

int saas__metrics_start(saas_engine *e)
{
	struct saas__metrics *m = e->metrics;
	int err;

	if (!m || !can_sample(e))
		return SAAS_OK;
	if ((err = pthread_create(&m->thread, NULL, sampler, e)) != 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "cannot start the metrics thread: %s", strerror(err));
	m->running = true;
	return SAAS_OK;
}

void saas__metrics_stop(saas_engine *e)
{
	struct saas__metrics *m = e->metrics;

	if (!m || !m->running)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->mu);
	pthread_join(m->thread, NULL);
	m->running = false;
}

static int list_add(saas_metric_list *l, const struct metric_row *r)
{
	saas_metric *x = calloc(1, sizeof(*x));

	if (!x)
		return saas__oom();
	x->at_ms = r->at_ms;
	x->vcpus = r->vcpus;
	/* Two decimals: what a float holds honestly, and what a reader wants. */
	x->cpu_used_pct = (double)(int64_t)((double)r->cpu_pct * 100.0 + 0.5) / 100.0; /* 0..100: no libm */
	x->memory_used = r->mem_used;
	x->memory_total = r->mem_total;
	x->disk_used = r->disk_used;
	x->disk_total = r->disk_total;
	l->items[l->count++] = x;
	return SAAS_OK;
}

/* Under m->mu: h's samples in [start_ms, end_ms] into l, the newest SAAS_METRICS_LIST_MAX of them. */
static int window_copy(const struct history *h, int64_t start_ms, int64_t end_ms, saas_metric_list *l)
{
	size_t n = 0, skip;
	int rc = SAAS_OK;

	for (size_t i = 0; i < h->count; i++) {
		const struct metric_row *r = &h->ring[(h->head + i) % h->cap];
		n += r->at_ms >= start_ms && r->at_ms <= end_ms;
	}
	if (n == 0)
		return SAAS_OK;
	skip = n > SAAS_METRICS_LIST_MAX ? n - SAAS_METRICS_LIST_MAX : 0;
	if (!(l->items = calloc(n - skip, sizeof(*l->items))))
		return saas__oom();
	for (size_t i = 0; i < h->count && rc == SAAS_OK; i++) {
		const struct metric_row *r = &h->ring[(h->head + i) % h->cap];
		if (r->at_ms < start_ms || r->at_ms > end_ms)
			continue;
		if (skip) {
			skip--;
			continue;
		}
		rc = list_add(l, r);
	}
	return rc;
}

int saas__local_sandbox_metrics(saas_client *c, const char *id, int64_t start_ms, int64_t end_ms,
                                saas_metric_list **out)
{
	saas_engine *e = c->engine;
	struct saas__metrics *m = e->metrics;
	saas_store_sandbox row;
	saas_metric_list *l = NULL;
	struct history *h;
	struct metric_row taken;
	saas_driver_sample s;
	int64_t now = saas__engine_now(e);
	int rc;

	if ((rc = saas__engine_need_driver(e)) < 0 || (rc = saas__sandbox_get_owned(c, id, &row)) < 0)
		return rc;
	if (!can_sample(e) || !m)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
		                   "driver '%s' cannot sample its VMs' CPU, memory and disk", e->driver->name);
	if (!(l = calloc(1, sizeof(*l))))
		return saas__oom();
	/* Only a running VM has numbers; a sandbox that is not running has no samples. */
	if (row.status != SAAS_SANDBOX_READY)
		goto out;
	if (end_ms == 0)
		end_ms = now;
	pthread_mutex_lock(&m->mu);
	if ((h = find(m, id)))
		rc = window_copy(h, start_ms, end_ms, l);
	pthread_mutex_unlock(&m->mu);
	/*
	 * Nothing kept in a window that reaches into the last interval (a client
	 * that counts in seconds ends its "now" up to a second early): one sample
	 * now, and this server keeps them from then on.
	 */
	if (rc < 0 || l->count > 0 || end_ms < now - (int64_t)m->interval_ms || start_ms > now)
		goto out;
	if ((rc = sample_vm(e, &row, &s)) < 0)
		goto out;
	pthread_mutex_lock(&m->mu);
	if ((h = find_or_add(m, id)))
		record(m, h, &s, now, row.ready_at_ms, &taken);
	else
		to_row(&taken, &s, now, 0, 0, row.ready_at_ms); /* no room to keep it: still the answer */
	pthread_mutex_unlock(&m->mu);
	if (!(l->items = calloc(1, sizeof(*l->items))))
		rc = saas__oom();
	else
		rc = list_add(l, &taken);
out:
	if (rc < 0) {
		saas_metric_list_free(l);
		return rc;
	}
	*out = l;
	return SAAS_OK;
}
