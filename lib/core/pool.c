/*
 * Warm pools: VMs made ahead, per (size, image), so that a create is served
 * by claiming one instead of waiting for the driver to make it.
 *
 * A pooled VM is made through the driver's ordinary vm_create under a fresh
 * sandbox id and has no store row: it belongs to no account, is billed to
 * nobody and appears in no list. A create claims it by inserting the row that
 * takes its name, so the VM's name (and hostname) is the sandbox id; billing
 * starts then. From there on it is a sandbox like any other and is destroyed
 * with it, never returned. VMs nobody claimed are destroyed when the engine
 * is freed, and after a crash reconcile finds them without a row and destroys
 * them too: either way none was ever handed out.
 *
 * A pooled VM made from an image build that is no longer current (the image
 * was rebuilt since, as the driver tells) is never handed out: a claim
 * destroys it instead, and the refill thread looks for such VMs every
 * POOL_CHECK_MS, so that a rebuild replaces the pools without waiting for a
 * claim.
 *
 * With VM hosts registered, the pools are on them: each pooled VM is placed
 * on an active host with room (saas__host_pick: the same rule as a
 * sandbox's placement, counting this engine's pooled VMs there), made
 * through that host's driver context, and remembered with its host; a claim
 * inserts its row on that host (saas__sandbox_insert_placed, which refuses a
 * host that is no longer active). The heartbeat hands the pools the host
 * list (saas__pool_hosts_check): pooled VMs on a host that drains or was
 * removed are destroyed, those on a lost host forgotten (its return destroys
 * every VM no row owns), and the engine's own ones go once hosts exist, as
 * new sandboxes no longer run on the engine's own driver.
 *
 * The refill is bounded: one create in flight at a time, engine-wide, so a
 * burst of claims is replaced as fast as the driver makes one VM after
 * another and never by a stampede of boots; a failing driver is retried after
 * a delay that doubles from 1 s up to a minute. It makes nothing while the
 * state filesystem is short of space or the disk budget is spent (saas__engine_room).
 *
 * Stopping waits for the create in flight for a bounded time only (a cold
 * boot can outlast a service manager's stop timeout). Past it, the thread is
 * left to finish: when the driver returns it destroys what it made and
 * releases the engine itself; if the process ends first, the VM has no row
 * and the next start's reconcile destroys it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "util/util.h"

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000
#define SPEC_MAX 4096
#define ENTRIES_MAX 64
#define POOL_CHECK_MS 10000
/*
 * After a claim, the refill waits this long before it makes the replacement,
 * so that the claimer's first commands run while the host's CPUs are
 * otherwise idle: on 2 cores under TCG a VM being made beside them took
 * their time from ~20 ms to 50-70 ms (bench/RESULTS.md).
 */
#define POOL_CLAIM_HOLD_MS 2000
/* A pooled VM's first command (pool_warm): `true`, on a guest that has just answered. */
#define POOL_WARM_TIMEOUT_MS 60000

enum { SLOT_READY, SLOT_CLAIMING };

struct slot {
	char name[SAAS_ID_MAX + 1];
	int state;
	char host[SAAS_ID_MAX + 1];    /* the VM host it runs on; "" the engine's own driver */
};

struct pool {
	char size[32];
	char image[SAAS_STORE_IMAGE_MAX + 1];
	unsigned int target;
	struct slot *slots;            /* oldest first; never more than target */
	unsigned int nslots;
	bool creating;
	uint64_t claims, failures;
};

struct saas__pools {
	pthread_mutex_t mu;
	pthread_cond_t cond;           /* wakes the refill thread: a slot freed, or stop */
	struct pool *items;
	size_t n;
	char creating[SAAS_ID_MAX + 1];/* the VM being made now, "" if none */
	char creating_host[SAAS_ID_MAX + 1]; /* where it is being made, once chosen */
	const struct pool *creating_pool;    /* and of which size */
	unsigned int backoff_ms;
	int64_t retry_at_ms;           /* engine clock: after a failure, no create before this */
	pthread_t thread;
	bool running, stopping;
	bool exited;                   /* the refill thread has left its loop and touches nothing more */
	bool abandoned;                /* engine_free stopped waiting: the thread finishes the release */
};

unsigned int saas__engines_draining;

static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

static int unknown_size(saas_engine *e, const char *name)
{
	saas__buf names = SAAS__BUF_INIT;
	int rc;

	for (size_t i = 0; i < e->nsizes; i++)
		saas__buf_printf(&names, "%s%s", i ? ", " : "", e->sizes[i].name);
	rc = saas__inval("pool: unknown size '%s' (sizes: %s)", name, names.data ? names.data : "");
	saas__buf_free(&names);
	return rc;
}

/* One "SIZE[:IMAGE]=N" entry, trimmed and non-empty; modified in place. */
static int parse_entry(saas_engine *e, struct saas__pools *p, char *entry)
{
	char *eq = strchr(entry, '='), *colon, *name, *image, *count, *end;
	struct pool *pl;
	unsigned long n;

	if (!eq)
		return saas__inval("pool: '%s' has no '=N'", entry);
	*eq = '\0';
	name = trim(entry);
	count = trim(eq + 1);
	image = e->default_image;
	if ((colon = strchr(name, ':'))) {
		*colon = '\0';
		image = trim(colon + 1);
		name = trim(name);
		if (!saas__valid_image(image))
			return saas__inval("pool: '%s:%s': image names are 1 to 63 characters of a-z, 0-9, '-', '_' and '.'",
			                   name, image);
	}
	if (!saas__engine_size(e, name))
		return unknown_size(e, name);
	errno = 0;
	n = strtoul(count, &end, 10);
	if (!*count || *end || count[0] < '0' || count[0] > '9' || errno)
		return saas__inval("pool: '%s=%s': '%s' is not a number", name, count, count);
	if (n > SAAS_ENGINE_POOL_MAX)
		return saas__inval("pool: '%s=%s': at most %d VMs per pool", name, count, SAAS_ENGINE_POOL_MAX);
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->items[i].size, name) == 0 && strcmp(p->items[i].image, image) == 0)
			return saas__inval("pool: size '%s' with image '%s' is named twice", name, image);
	if (p->n == ENTRIES_MAX)
		return saas__inval("pool: more than %d entries", ENTRIES_MAX);
	pl = &p->items[p->n];
	memset(pl, 0, sizeof(*pl));
	saas__strlcpy(pl->size, name, sizeof(pl->size));
	saas__strlcpy(pl->image, image, sizeof(pl->image));
	pl->target = (unsigned int)n;
	if (n && !(pl->slots = calloc(n, sizeof(*pl->slots))))
		return saas__oom();
	p->n++;
	return SAAS_OK;
}

static void pools_free(struct saas__pools *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->items[i].slots);
	free(p->items);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

static struct saas__pools *pools_new(void)
{
	struct saas__pools *p = calloc(1, sizeof(*p));

	if (!p || !(p->items = calloc(ENTRIES_MAX, sizeof(*p->items)))) {
		free(p);
		saas__oom();
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	/* The refill waits out its backoff on the monotonic clock: a clock step must not stall it. */
	saas__cond_init_monotonic(&p->cond);
	return p;
}

int saas__pool_setup(saas_engine *e, const char *spec)
{
	struct saas__pools *p;
	char *copy, *entry, *next;
	int rc = SAAS_OK;

	if (!spec)
		return SAAS_OK;
	if (strlen(spec) > SPEC_MAX)
		return saas__inval("pool: the spec is longer than %d bytes", SPEC_MAX);
	if (!(copy = saas__strdup(spec)))
		return SAAS_ENOMEM;
	if (!*trim(copy)) {
		free(copy);
		return SAAS_OK;
	}
	if (!(p = pools_new())) {
		free(copy);
		return SAAS_ENOMEM;
	}
	/* By hand rather than strtok: an empty entry ("small=1,,x") is a mistake to report, not skip. */
	for (entry = copy; entry && rc == SAAS_OK; entry = next) {
		if ((next = strchr(entry, ',')))
			*next++ = '\0';
		entry = trim(entry);
		if (!*entry)
			rc = saas__inval("pool: empty entry in '%s'", spec);
		else
			rc = parse_entry(e, p, entry);
	}
	free(copy);
	/* A store-only engine makes no VM: the spec is checked, so a typo shows, and dropped. */
	if (rc < 0 || (e->flags & SAAS_ENGINE_STORE_ONLY)) {
		pools_free(p);
		return rc;
	}
	/* The pools hold their full count against the disk budget: a refill never has to ask. */
	for (size_t i = 0; i < p->n; i++)
		e->pool_disk_gb += (uint64_t)p->items[i].target * saas__engine_size(e, p->items[i].size)->disk_gb;
	e->pools = p;
	return SAAS_OK;
}

static bool short_locked(const struct saas__pools *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->items[i].nslots < p->items[i].target)
			return true;
	return false;
}

/* The refill's create ends (made or not): the name is no longer being made. Under p->mu. */
static void creating_clear_locked(struct saas__pools *p, struct pool *pl)
{
	p->creating[0] = '\0';
	p->creating_host[0] = '\0';
	p->creating_pool = NULL;
	pl->creating = false;
	pthread_cond_broadcast(&p->cond);
}

/*
 * A pooled VM runs its first commands, as the sandbox's user, before it is
 * offered: the first command of whoever claims it then costs what any later
 * one does (the transport's first channel, the guest's helper and shell and,
 * under TCG, QEMU's translation of their code are warm), and a VM that
 * cannot run a command is never handed out. Two, each leaving nothing in the
 * guest: `true`, which a guest's helper may run with no shell at all
 * (lib/transport/exec_plain.c: the helper asked once whether it can), and
 * `: warm`, which always goes through the shell.
 */
static int pool_warm(saas_engine *e, void *ctx, const char *name)
{
	static const char *const commands[] = { "true", ": warm" };
	saas_driver_exec req;
	int exit_code = -1, rc;

	if (!e->driver->exec)
		return SAAS_OK;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(commands); i++) {
		memset(&req, 0, sizeof(req));
		req.command = commands[i];
		req.cwd = SAAS_WORKSPACE;
		req.timeout_ms = POOL_WARM_TIMEOUT_MS;
		req.output = saas__output_discard;
		req.cancel = &e->cancel;
		if ((rc = e->driver->exec(ctx, name, &req, &exit_code)) < 0)
			return saas__error_wrap(rc, "its first commands");
		if (exit_code != 0)
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "its first commands: `%s` exited %d",
			                   commands[i], exit_code);
	}
	return SAAS_OK;
}

int saas__pool_refill(saas_engine *e)
{
	struct saas__pools *p = e->pools;
	struct pool *pl = NULL;
	const saas_size *size;
	saas_vm_spec spec;
	char name[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1] = "", msg[512] = "";
	int64_t started, now;
	unsigned int have, backoff = 0;
	void *ctx = NULL;
	int rc;

	if (!p || !e->driver)
		return 0;
	pthread_mutex_lock(&p->mu);
	now = saas__engine_now(e);
	if (p->stopping || p->creating[0] || now < p->retry_at_ms) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	/* The emptiest pool first, so that after a start every pool soon has one. */
	for (size_t i = 0; i < p->n; i++)
		if (p->items[i].nslots < p->items[i].target && (!pl || p->items[i].nslots < pl->nslots))
			pl = &p->items[i];
	if (!pl) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	/* A pooled VM's overlay takes room a running sandbox's end may need: back off as on a failure. */
	if (saas__engine_room(e, 0) < 0) {
		p->backoff_ms = BACKOFF_MAX_MS;
		p->retry_at_ms = now + p->backoff_ms;
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	if ((rc = saas__id_new(name, "sbx-", 20)) < 0) {
		pthread_mutex_unlock(&p->mu);
		return rc;
	}
	/* Named before it exists, so the orphan sweep leaves it alone while it is made. */
	saas__strlcpy(p->creating, name, sizeof(p->creating));
	p->creating_pool = pl;
	pl->creating = true;
	pthread_mutex_unlock(&p->mu);
	size = saas__engine_size(e, pl->size);

	/*
	 * With VM hosts, on one with room. None has: not a failure of the
	 * driver's; look again a heartbeat later, when sandboxes may have ended.
	 */
	if (saas__hosts_any(e)) {
		if ((rc = saas__host_pick(e, size->vcpus, size->memory_mb, host)) <= 0) {
			if (rc < 0)
				snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
			pthread_mutex_lock(&p->mu);
			creating_clear_locked(p, pl);
			p->retry_at_ms = saas__engine_now(e) + e->hosts.heartbeat_ms;
			pthread_mutex_unlock(&p->mu);
			if (rc < 0)
				saas__log(e, SAAS_LOG_WARN, "pool %s (image %s): choosing a VM host failed (%s)", pl->size,
				          pl->image, msg);
			else
				saas__log(e, SAAS_LOG_DEBUG, "pool %s (image %s): no VM host has room for a pooled VM now",
				          pl->size, pl->image);
			return rc;
		}
		pthread_mutex_lock(&p->mu);
		saas__strlcpy(p->creating_host, host, sizeof(p->creating_host));
		pthread_mutex_unlock(&p->mu);
	}
	/*
	 * Other engines on the store see the VM but no row: its lease, renewed
	 * while it is pooled, tells them it is this engine's (reaper.c).
	 */
	if ((rc = saas__claim_kind(e, "pool", name)) <= 0) {
		pthread_mutex_lock(&p->mu);
		creating_clear_locked(p, pl);
		pthread_mutex_unlock(&p->mu);
		return rc < 0 ? rc : 0;
	}

	spec.name = name;
	spec.image = pl->image;
	spec.vcpus = size->vcpus;
	spec.memory_mb = size->memory_mb;
	spec.disk_gb = size->disk_gb;
	spec.network = NULL; /* the default policy: only creates that ask for none are served from a pool */
	started = saas__engine_now(e);
	if ((rc = saas__vm_driver(e, host, &ctx)) < 0) {
		snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
	} else if ((rc = e->driver->vm_create(ctx, &spec)) < 0 || (rc = pool_warm(e, ctx, name)) < 0) {
		snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
		/* The driver promises to leave nothing; make sure while the name is still protected. */
		e->driver->vm_destroy(ctx, name);
	}

	pthread_mutex_lock(&p->mu);
	now = saas__engine_now(e);
	creating_clear_locked(p, pl);
	if (rc == SAAS_OK) {
		struct slot *sl = &pl->slots[pl->nslots++];
		saas__strlcpy(sl->name, name, sizeof(sl->name));
		saas__strlcpy(sl->host, host, sizeof(sl->host));
		sl->state = SLOT_READY;
		p->backoff_ms = 0;
		p->retry_at_ms = 0;
	} else {
		pl->failures++;
		p->backoff_ms = !p->backoff_ms ? BACKOFF_FIRST_MS
		                : p->backoff_ms >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : p->backoff_ms * 2;
		p->retry_at_ms = now + p->backoff_ms;
		backoff = p->backoff_ms;
	}
	have = pl->nslots;
	pthread_mutex_unlock(&p->mu);

	if (rc < 0) {
		saas__claim_drop_kind(e, "pool", name);
		saas__log(e, SAAS_LOG_WARN, "pool %s (image %s): making a VM%s%s failed (%s); next try in %u s", pl->size,
		          pl->image, host[0] ? " on VM host " : "", host, msg, backoff / 1000);
		return rc;
	}
	saas__log(e, SAAS_LOG_INFO, "pool %s (image %s): VM %s ready%s%s in %lld ms (%u of %u)", pl->size, pl->image,
	          name, host[0] ? " on VM host " : "", host, (long long)(now - started), have, pl->target);
	return 1;
}

static void *refill_main(void *arg)
{
	saas_engine *e = arg;
	struct saas__pools *p = e->pools;
	struct timespec ts;
	bool abandoned;

	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		int64_t wait_ms = -1;
		if (short_locked(p)) {
			wait_ms = p->retry_at_ms - saas__engine_now(e);
			if (wait_ms <= 0) {
				pthread_mutex_unlock(&p->mu);
				saas__error_clear();
				saas__pool_refill(e); /* logs its own failure and sets the backoff */
				pthread_mutex_lock(&p->mu);
				continue;
			}
			if (wait_ms > BACKOFF_MAX_MS)
				wait_ms = BACKOFF_MAX_MS;
		}
		if (wait_ms < 0 || wait_ms > POOL_CHECK_MS)
			wait_ms = POOL_CHECK_MS;
		saas__deadline(&ts, CLOCK_MONOTONIC, wait_ms);
		if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) == ETIMEDOUT && !p->stopping) {
			pthread_mutex_unlock(&p->mu);
			saas__pool_drop_outdated(e);
			pthread_mutex_lock(&p->mu);
		}
	}
	abandoned = p->abandoned;
	p->exited = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (abandoned) {
		/* Nobody waits for this thread: what it made is destroyed with the rest. */
		saas__engine_release(e);
		__atomic_sub_fetch(&saas__engines_draining, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

int saas__pool_start(saas_engine *e)
{
	struct saas__pools *p = e->pools;
	int rc;

	if (!p || p->running)
		return SAAS_OK;
	if ((rc = pthread_create(&p->thread, NULL, refill_main, e)) != 0)
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the pool refill thread");
	p->running = true;
	return SAAS_OK;
}

/*
 * No client is left to claim: what is still pooled was never handed out.
 * Each is taken out under the lock and destroyed outside it, as an abandoned
 * refill thread may still add the one it was making.
 */
static void destroy_unclaimed(saas_engine *e, struct saas__pools *p)
{
	for (size_t i = 0; e->driver && i < p->n; i++) {
		struct pool *pl = &p->items[i];
		char name[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1];
		void *ctx;

		for (;;) {
			pthread_mutex_lock(&p->mu);
			if (pl->nslots == 0) {
				pthread_mutex_unlock(&p->mu);
				break;
			}
			pl->nslots--;
			saas__strlcpy(name, pl->slots[pl->nslots].name, sizeof(name));
			saas__strlcpy(host, pl->slots[pl->nslots].host, sizeof(host));
			pthread_mutex_unlock(&p->mu);
			saas__log(e, SAAS_LOG_INFO, "pool %s (image %s): destroying unclaimed VM %s%s%s", pl->size, pl->image,
			          name, host[0] ? " on VM host " : "", host);
			/* Its host's context was opened to make it, and stays open until the engine is released. */
			if (!saas__vm_driver_opened(e, host, &ctx))
				saas__log(e, SAAS_LOG_ERROR, "VM %s: its VM host %s is not open; a sweep of the host destroys it",
				          name, host);
			else if (e->driver->vm_destroy(ctx, name) < 0)
				saas__log(e, SAAS_LOG_ERROR, "destroying VM %s failed (%s); the next start destroys it",
				          name, saas_error_last()->message);
			if (e->store)
				saas__claim_drop_kind(e, "pool", name);
		}
	}
}

bool saas__pool_stop(saas_engine *e)
{
	struct saas__pools *p = e->pools;
	struct timespec deadline;
	bool abandoned = false;

	if (!p || !p->running)
		return false;
	saas__deadline(&deadline, CLOCK_MONOTONIC, e->stop_wait_ms);
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	/* The driver cannot be interrupted mid-create: wait for it, but only so long. */
	while (!p->exited)
		if (pthread_cond_timedwait(&p->cond, &p->mu, &deadline) == ETIMEDOUT && !p->exited) {
			p->abandoned = abandoned = true;
			__atomic_add_fetch(&saas__engines_draining, 1, __ATOMIC_SEQ_CST);
			break;
		}
	pthread_mutex_unlock(&p->mu);
	if (abandoned) {
		pthread_detach(p->thread);
		/* The ready ones need not wait for the thread. */
		destroy_unclaimed(e, p);
	} else {
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	return abandoned;
}

void saas__pool_free(saas_engine *e)
{
	struct saas__pools *p = e->pools;

	if (!p)
		return;
	destroy_unclaimed(e, p);
	pools_free(p);
	e->pools = NULL;
}

bool saas__pool_owns(saas_engine *e, const char *name)
{
	struct saas__pools *p = e->pools;
	bool found = false;

	if (!p)
		return false;
	pthread_mutex_lock(&p->mu);
	found = strcmp(p->creating, name) == 0;
	for (size_t i = 0; i < p->n && !found; i++)
		for (unsigned int j = 0; j < p->items[i].nslots && !found; j++)
			found = strcmp(p->items[i].slots[j].name, name) == 0;
	pthread_mutex_unlock(&p->mu);
	return found;
}

bool saas__vm_outdated_on(saas_engine *e, void *ctx, const char *name)
{
	int outdated = 0;

	/* A table older than version 4 is a smaller struct: the slot is not there to read. */
	if (e->driver->version < 4 || !e->driver->vm_outdated || e->driver->vm_outdated(ctx, name, &outdated) < 0)
		return false;
	return outdated != 0;
}

bool saas__vm_outdated(saas_engine *e, const char *name)
{
	return saas__vm_outdated_on(e, e->driver_ctx, name);
}

/* The first ready slot not yet in seen (n names), marked claiming so that no create takes it meanwhile. */
static bool take_unseen_locked(struct saas__pools *p, char (*seen)[SAAS_ID_MAX + 1], size_t n,
                               char name[SAAS_ID_MAX + 1], char host[SAAS_ID_MAX + 1])
{
	for (size_t i = 0; i < p->n; i++)
		for (unsigned int j = 0; j < p->items[i].nslots; j++) {
			struct slot *s = &p->items[i].slots[j];
			bool known = false;
			for (size_t k = 0; k < n && !known; k++)
				known = strcmp(seen[k], s->name) == 0;
			if (s->state == SLOT_READY && !known) {
				s->state = SLOT_CLAIMING;
				saas__strlcpy(name, s->name, SAAS_ID_MAX + 1);
				saas__strlcpy(host, s->host, SAAS_ID_MAX + 1);
				return true;
			}
		}
	return false;
}

unsigned int saas__pool_drop_outdated(saas_engine *e)
{
	struct saas__pools *p = e->pools;
	char (*seen)[SAAS_ID_MAX + 1] = NULL;
	size_t n = 0, cap = 0;
	unsigned int dropped = 0;

	if (!p || !e->driver || e->driver->version < 4 || !e->driver->vm_outdated)
		return 0;
	for (size_t i = 0; i < p->n; i++)
		cap += p->items[i].target;
	if (!cap || !(seen = calloc(cap, sizeof(*seen))))
		return 0;
	for (;;) {
		char name[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1];
		void *ctx;
		bool got;
		pthread_mutex_lock(&p->mu);
		got = n < cap && !p->stopping && take_unseen_locked(p, seen, n, name, host);
		pthread_mutex_unlock(&p->mu);
		if (!got)
			break;
		saas__strlcpy(seen[n++], name, sizeof(seen[0]));
		if (!saas__vm_driver_opened(e, host, &ctx) || !saas__vm_outdated_on(e, ctx, name)) {
			saas__pool_release(e, name, SAAS_POOL_RETURN);
			continue;
		}
		saas__log(e, SAAS_LOG_INFO, "pooled VM %s was made from an image build that is no longer current; "
		          "destroying it", name);
		e->driver->vm_destroy(ctx, name);
		saas__pool_release(e, name, SAAS_POOL_DROP);
		dropped++;
	}
	free(seen);
	return dropped;
}

int saas__pool_claim(saas_engine *e, const char *size, const char *image, char name[SAAS_ID_MAX + 1])
{
	char host[SAAS_ID_MAX + 1];

	return saas__pool_claim_on(e, size, image, name, host);
}

int saas__pool_claim_on(saas_engine *e, const char *size, const char *image, char name[SAAS_ID_MAX + 1],
                        char host[SAAS_ID_MAX + 1])
{
	struct saas__pools *p = e->pools;
	int got = 0;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n && !got; i++) {
		struct pool *pl = &p->items[i];
		if (strcmp(pl->size, size) != 0 || strcmp(pl->image, image) != 0)
			continue;
		/* The oldest first: they are all alike, and it keeps the order simple to reason about. */
		for (unsigned int j = 0; j < pl->nslots && !got; j++)
			if (pl->slots[j].state == SLOT_READY) {
				pl->slots[j].state = SLOT_CLAIMING;
				saas__strlcpy(name, pl->slots[j].name, SAAS_ID_MAX + 1);
				saas__strlcpy(host, pl->slots[j].host, SAAS_ID_MAX + 1);
				got = 1;
			}
	}
	pthread_mutex_unlock(&p->mu);
	return got;
}

void saas__pool_release(saas_engine *e, const char *name, int outcome)
{
	struct saas__pools *p = e->pools;

	if (!p)
		return;
	/* Claimed, its row protects it now; dropped, it is gone: either way no lease needs to. */
	if (outcome != SAAS_POOL_RETURN)
		saas__claim_drop_kind(e, "pool", name);
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n; i++) {
		struct pool *pl = &p->items[i];
		for (unsigned int j = 0; j < pl->nslots; j++) {
			if (strcmp(pl->slots[j].name, name) != 0)
				continue;
			if (outcome == SAAS_POOL_RETURN) {
				pl->slots[j].state = SLOT_READY;
			} else {
				if (outcome == SAAS_POOL_CLAIMED) {
					int64_t hold = saas__engine_now(e) + POOL_CLAIM_HOLD_MS;
					pl->claims++;
					if (p->retry_at_ms < hold)
						p->retry_at_ms = hold;
				}
				memmove(&pl->slots[j], &pl->slots[j + 1], (pl->nslots - j - 1) * sizeof(pl->slots[0]));
				pl->nslots--;
				pthread_cond_broadcast(&p->cond);
			}
			goto out;
		}
	}
out:
	pthread_mutex_unlock(&p->mu);
}

int saas__pool_stats(saas_engine *e, saas_engine_stats *st)
{
	struct saas__pools *p = e->pools;
	int rc = SAAS_OK;

	if (!p)
		return SAAS_OK;
	pthread_mutex_lock(&p->mu);
	if (!(st->pools = calloc(p->n ? p->n : 1, sizeof(*st->pools)))) {
		rc = saas__oom();
		goto out;
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct pool *pl = &p->items[i];
		saas_engine_pool *sp = calloc(1, sizeof(*sp));
		if (!sp || !(sp->size = saas__strdup(pl->size)) || !(sp->image = saas__strdup(pl->image))) {
			if (sp)
				free(sp->size);
			free(sp);
			rc = saas__oom();
			goto out;
		}
		sp->target = pl->target;
		for (unsigned int j = 0; j < pl->nslots; j++)
			sp->ready += pl->slots[j].state == SLOT_READY;
		sp->creating = pl->creating;
		sp->claims = pl->claims;
		sp->failures = pl->failures;
		st->pools[st->npools++] = sp;
		st->pool_ready += sp->ready;
		st->pool_target += sp->target;
		st->pool_claims += sp->claims;
	}
out:
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void saas__pool_use_free(struct saas__pool_use *u)
{
	free(u->items);
	free(u->ids);
	memset(u, 0, sizeof(*u));
}

static void use_add(struct saas__pool_use *u, const char *host, const saas_size *size)
{
	saas__strlcpy(u->ids[u->count], host, sizeof(u->ids[0]));
	u->items[u->count].vcpus = size->vcpus;
	u->items[u->count].memory_mb = size->memory_mb;
	u->count++;
}

int saas__pool_use(saas_engine *e, const char *except, struct saas__pool_use *u)
{
	struct saas__pools *p = e->pools;
	size_t cap = 1;
	int rc = SAAS_OK;

	memset(u, 0, sizeof(*u));
	if (!p)
		return SAAS_OK;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n; i++)
		cap += p->items[i].nslots;
	if (!(u->items = calloc(cap, sizeof(*u->items))) || !(u->ids = calloc(cap, sizeof(*u->ids)))) {
		rc = saas__oom();
		goto out;
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct pool *pl = &p->items[i];
		const saas_size *size = saas__engine_size(e, pl->size);
		for (unsigned int j = 0; size && j < pl->nslots; j++)
			if (pl->slots[j].host[0] && (!except || strcmp(pl->slots[j].name, except) != 0))
				use_add(u, pl->slots[j].host, size);
	}
	/* The one being made takes its room from the moment its host was chosen. */
	if (p->creating_host[0] && p->creating_pool && saas__engine_size(e, p->creating_pool->size))
		use_add(u, p->creating_host, saas__engine_size(e, p->creating_pool->size));
	/* The store reads host ids by pointer: set once the array is final. */
	for (size_t i = 0; i < u->count; i++)
		u->items[i].host_id = u->ids[i];
out:
	pthread_mutex_unlock(&p->mu);
	if (rc < 0)
		saas__pool_use_free(u);
	return rc;
}

enum { KEEP, DESTROY, FORGET };

/* What becomes of a pooled VM on `host` ("" the engine's own), given the registry's n hosts. */
static int host_verdict(const char *host, const saas_store_host *hosts, size_t n, const char **why)
{
	if (!host[0]) {
		*why = "VM hosts are registered, and new sandboxes run on them";
		return n ? DESTROY : KEEP;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(hosts[i].id, host) != 0)
			continue;
		switch (hosts[i].state) {
		case SAAS_STORE_HOST_DRAINING:
			*why = "its VM host is draining";
			return DESTROY;
		case SAAS_STORE_HOST_LOST:
			*why = "its VM host is lost (its return destroys it)";
			return FORGET;
		default:
			return KEEP;
		}
	}
	*why = "its VM host was removed";
	return DESTROY;
}

void saas__pool_hosts_check(saas_engine *e, const saas_store_host *hosts, size_t n)
{
	struct saas__pools *p = e->pools;

	if (!p || !e->driver)
		return;
	for (;;) {
		char name[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1];
		const char *why = "";
		int verdict = KEEP;
		void *ctx;

		/* One at a time, taken as a claim would (so no create gets it), the driver called unlocked. */
		pthread_mutex_lock(&p->mu);
		for (size_t i = 0; i < p->n && verdict == KEEP; i++)
			for (unsigned int j = 0; j < p->items[i].nslots && verdict == KEEP; j++) {
				struct slot *sl = &p->items[i].slots[j];
				if (sl->state != SLOT_READY || (verdict = host_verdict(sl->host, hosts, n, &why)) == KEEP)
					continue;
				sl->state = SLOT_CLAIMING;
				saas__strlcpy(name, sl->name, sizeof(name));
				saas__strlcpy(host, sl->host, sizeof(host));
			}
		pthread_mutex_unlock(&p->mu);
		if (verdict == KEEP)
			break;
		if (verdict == DESTROY) {
			saas__log(e, SAAS_LOG_INFO, "pooled VM %s: %s; destroying it", name, why);
			if (saas__vm_driver_opened(e, host, &ctx) && e->driver->vm_destroy(ctx, name) < 0)
				saas__log(e, SAAS_LOG_WARN, "destroying pooled VM %s failed (%s)",
				          name, saas_error_last()->message);
		} else {
			saas__log(e, SAAS_LOG_WARN, "pooled VM %s: %s; forgetting it", name, why);
		}
		saas__pool_release(e, name, SAAS_POOL_DROP);
	}
}

const saas_size *saas__pool_largest(saas_engine *e)
{
	const struct saas__pools *p = e->pools;
	const saas_size *big = NULL;

	/* The sizes are fixed once the engine is open: no lock needed to read them. */
	for (size_t i = 0; p && i < p->n; i++) {
		const saas_size *z = saas__engine_size(e, p->items[i].size);
		if (z && p->items[i].target && (!big || z->memory_mb > big->memory_mb))
			big = z;
	}
	return big;
}
