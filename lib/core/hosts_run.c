/*
 * VM hosts at work: the engine's table of hosts and the driver opened on each,
 * placement of a new sandbox, and the heartbeats that find a host lost and
 * take it back (the registry, and why it is shaped so: hosts.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

struct saas__vmhost {
	char id[SAAS_ID_MAX + 1];
	char name[SAAS_STORE_HOST_NAME_MAX + 1];
	void *ctx;                 /* the driver opened on it, once `opened` */
	bool opened;
	bool down;                 /* its last heartbeat failed: logged once per outage */
	int64_t open_failed_ms;    /* engine clock of the last failed open: not tried again for a heartbeat */
	unsigned int foreign;      /* VMs there at the last heartbeat that are neither sandboxes nor our pool's */
	uint64_t spare_mb;         /* what VMs started ahead there held at the last heartbeat (every engine's) */
};

/* What a driver without host_info is taken to have: room for anything (driver.h says the core assumes so). */
#define UNKNOWN_CPUS 65536u
#define UNKNOWN_MEMORY_MB ((uint64_t)1 << 32)

/* Placement takes hosts that some engine reached within this many heartbeats. */
#define FRESH_BEATS 3
/* ---- the engine's table of hosts and their driver contexts ---- */

static struct saas__vmhost *find_locked(struct saas__hosts *h, const char *id)
{
	for (size_t i = 0; i < h->count; i++)
		if (strcmp(h->items[i]->id, id) == 0)
			return h->items[i];
	return NULL;
}

static struct saas__vmhost *add_locked(struct saas__hosts *h, const char *id, const char *name)
{
	struct saas__vmhost *vh = find_locked(h, id);

	if (vh)
		return vh;
	if (SAAS__ARRAY_RESERVE(h->items, h->cap, h->count + 1) < 0 || !(vh = calloc(1, sizeof(*vh))))
		return NULL;
	saas__strlcpy(vh->id, id, sizeof(vh->id));
	saas__strlcpy(vh->name, name, sizeof(vh->name));
	h->items[h->count++] = vh;
	return vh;
}

struct host_rows {
	saas_store_host *items;
	size_t count;
};

/* Read the registry and note what this engine needs of it: whether any host is registered. */
static int hosts_refresh(saas_engine *e, struct host_rows *r)
{
	int rc;

	if ((rc = saas__store_hosts(e->store, e->store_ctx, &r->items, &r->count)) < 0)
		return rc;
	pthread_mutex_lock(&e->hosts.mu);
	e->hosts.any = r->count > 0;
	pthread_mutex_unlock(&e->hosts.mu);
	return SAAS_OK;
}

bool saas__hosts_any(saas_engine *e)
{
	bool any;

	pthread_mutex_lock(&e->hosts.mu);
	any = e->hosts.any;
	pthread_mutex_unlock(&e->hosts.mu);
	return any;
}

static int unreachable(const char *name, const char *why)
{
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM host %s is unreachable: %s; try again later", name,
	                   why);
}

/* Open the driver on a host: its own state directory, the engine's configuration and the host's uri and address. */
static int driver_open(saas_engine *e, const saas_store_host *row, void **ctx)
{
	const char *base = e->driver_config ? e->driver_config : "";
	saas_driver_env env;
	char *dir = NULL, *config = NULL;
	int rc;

	if (asprintf(&dir, "%s/hosts/%s", e->state_dir, row->id) < 0) {
		dir = NULL;
		rc = saas__oom();
		goto out;
	}
	if (asprintf(&config, "%s%suri=%s listen=%s", base, *base ? " " : "", row->uri, row->address) < 0) {
		config = NULL;
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__mkdir_p(dir, 0700)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, -rc, "cannot create %s: %s", dir, strerror(-rc));
		goto out;
	}
	saas__driver_env(e, &env, dir, config);
	rc = e->driver->open(ctx, &env);
out:
	free(dir);
	free(config);
	return rc;
}

/* The context of a registered host, opened now if it was not (at most once a heartbeat while that fails). */
static int host_ctx(saas_engine *e, const char *id, void **ctx)
{
	struct saas__hosts *h = &e->hosts;
	struct saas__vmhost *vh;
	saas_store_host row;
	char name[SAAS_STORE_HOST_NAME_MAX + 1];
	int64_t now = saas__engine_now(e);
	void *opened = NULL;
	int rc;

	pthread_mutex_lock(&h->mu);
	if ((vh = find_locked(h, id)) && vh->opened) {
		*ctx = vh->ctx;
		pthread_mutex_unlock(&h->mu);
		return SAAS_OK;
	}
	pthread_mutex_unlock(&h->mu);
	/* Opening reaches the host and may take seconds: one at a time, never under the table's lock. */
	pthread_mutex_lock(&h->open_mu);
	pthread_mutex_lock(&h->mu);
	vh = find_locked(h, id);
	if (vh && vh->opened) {
		*ctx = vh->ctx;
		rc = SAAS_OK;
	} else if (vh && vh->open_failed_ms && now - vh->open_failed_ms < (int64_t)h->heartbeat_ms) {
		saas__strlcpy(name, vh->name, sizeof(name));
		rc = 1;
	} else {
		rc = 2;
	}
	pthread_mutex_unlock(&h->mu);
	if (rc == 1) {
		rc = unreachable(name, "it could not be reached a moment ago");
		goto out;
	}
	if (rc == SAAS_OK)
		goto out;
	if ((rc = e->store->host_get(e->store_ctx, id, &row)) < 0) {
		if (rc == SAAS_ENOTFOUND)
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM host %s is not registered (any more)", id);
		goto out;
	}
	rc = driver_open(e, &row, &opened);
	if (rc < 0) {
		char why[600];
		snprintf(why, sizeof(why), "%s", saas_error_last()->message);
		rc = unreachable(row.name, why);
	}
	pthread_mutex_lock(&h->mu);
	if (!(vh = add_locked(h, row.id, row.name))) {
		pthread_mutex_unlock(&h->mu);
		if (rc == SAAS_OK)
			e->driver->close(opened);
		rc = saas__oom();
		goto out;
	}
	if (rc == SAAS_OK) {
		vh->ctx = *ctx = opened;
		vh->opened = true;
		vh->open_failed_ms = 0;
	} else {
		vh->open_failed_ms = now ? now : 1;
	}
	pthread_mutex_unlock(&h->mu);
	if (rc == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "VM host %s (%s) opened: %s", row.name, row.id, row.uri);
out:
	pthread_mutex_unlock(&h->open_mu);
	return rc;
}

bool saas__vm_driver_opened(saas_engine *e, const char *host_id, void **ctx)
{
	struct saas__vmhost *vh;
	bool open = false;

	*ctx = NULL;
	if (!e->driver)
		return false;
	if (!host_id || !*host_id) {
		*ctx = e->driver_ctx;
		return true;
	}
	pthread_mutex_lock(&e->hosts.mu);
	if ((vh = find_locked(&e->hosts, host_id)) && vh->opened) {
		*ctx = vh->ctx;
		open = true;
	}
	pthread_mutex_unlock(&e->hosts.mu);
	return open;
}

int saas__vm_driver(saas_engine *e, const char *host_id, void **ctx)
{
	int rc;

	*ctx = NULL;
	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	if (!host_id || !*host_id) {
		*ctx = e->driver_ctx;
		return SAAS_OK;
	}
	return host_ctx(e, host_id, ctx);
}

/* ---- placement ---- */

/*
 * Other engines' pooled VMs have no row and are not in this engine's pools:
 * the store cannot count them. The heartbeat estimates how many run on each
 * host (what the driver counts there, less the sandboxes with a VM and this
 * engine's pooled VMs) and placement counts each as the largest size this
 * engine pools (the default size when it has none): every server of a
 * deployment normally runs one pool spec. An estimate, a heartbeat old.
 */
static const saas_size *foreign_size(saas_engine *e)
{
	const saas_size *big = saas__pool_largest(e);

	return big ? big : e->default_size;
}

static int count_with_vm(void *ud, const saas_store_sandbox *sb)
{
	/* A paused one's VM is a snapshot on disk; the others may have one running. */
	if (sb->status != SAAS_SANDBOX_PAUSED && sb->status != SAAS_SANDBOX_DESTROYED)
		(*(unsigned int *)ud)++;
	return 0;
}

static void foreign_update(saas_engine *e, const saas_store_host *row, const saas_driver_host *info)
{
	struct saas__pool_use u;
	struct saas__vmhost *vh;
	saas_store_filter f;
	unsigned int rows = 0, own = 0;

	memset(&f, 0, sizeof(f));
	f.live = 1;
	f.host_id = row->id;
	if (e->store->sandbox_list(e->store_ctx, &f, count_with_vm, &rows) < 0 || saas__pool_use(e, NULL, &u) < 0) {
		saas__error_clear();
		return;
	}
	for (size_t i = 0; i < u.count; i++)
		own += strcmp(u.ids[i], row->id) == 0;
	saas__pool_use_free(&u);
	pthread_mutex_lock(&e->hosts.mu);
	if ((vh = find_locked(&e->hosts, row->id))) {
		vh->foreign = info->vms > rows + own ? info->vms - rows - own : 0;
		vh->spare_mb = info->spare_mb;
	}
	pthread_mutex_unlock(&e->hosts.mu);
}

/*
 * This engine's pooled VMs (but `except`), the estimate of other engines' on
 * each host, and what the VMs started ahead there hold (every engine's, as the
 * last heartbeat found them: a few hundred MiB each, never a size's whole
 * memory until a create takes one, which then counts as its sandbox): what
 * placement adds.
 */
static int room_use(saas_engine *e, const char *except, struct saas__pool_use *u)
{
	const saas_size *z = foreign_size(e);
	size_t extra = 0;
	int rc;

	if ((rc = saas__pool_use(e, except, u)) < 0)
		return rc;
	pthread_mutex_lock(&e->hosts.mu);
	for (size_t i = 0; i < e->hosts.count; i++)
		extra += (z && e->hosts.items[i]->foreign > 0) + (e->hosts.items[i]->spare_mb > 0);
	if (extra) {
		saas_store_host_use *items = realloc(u->items, (u->count + extra) * sizeof(*items));
		char (*ids)[SAAS_ID_MAX + 1] = items ? realloc(u->ids, (u->count + extra) * sizeof(*ids)) : NULL;
		if (items)
			u->items = items;
		if (ids)
			u->ids = ids;
		if (!items || !ids) {
			pthread_mutex_unlock(&e->hosts.mu);
			saas__pool_use_free(u);
			return saas__oom();
		}
		for (size_t i = 0; i < e->hosts.count; i++) {
			const struct saas__vmhost *vh = e->hosts.items[i];
			if (z && vh->foreign) {
				saas__strlcpy(u->ids[u->count], vh->id, sizeof(u->ids[0]));
				u->items[u->count].vcpus = vh->foreign * z->vcpus;
				u->items[u->count].memory_mb = (uint64_t)vh->foreign * z->memory_mb;
				u->count++;
			}
			if (vh->spare_mb) {
				/* No vCPU: a spare is paused until taken. */
				saas__strlcpy(u->ids[u->count], vh->id, sizeof(u->ids[0]));
				u->items[u->count].vcpus = 0;
				u->items[u->count].memory_mb = vh->spare_mb;
				u->count++;
			}
		}
	}
	pthread_mutex_unlock(&e->hosts.mu);
	/* The ids may have moved: point at them again. */
	for (size_t i = 0; i < u->count; i++)
		u->items[i].host_id = u->ids[i];
	return SAAS_OK;
}

/* What runs on each host: its sandboxes not destroyed, and the pooled VMs (ours, and the estimate of others'). */
struct pick {
	struct host_rows *hosts;
	uint64_t *vcpus, *memory_mb;   /* used on hosts->items[i] */
};

static int pick_add(void *ud, const saas_store_sandbox *sb)
{
	struct pick *k = ud;

	for (size_t i = 0; i < k->hosts->count; i++)
		if (strcmp(k->hosts->items[i].id, sb->host_id) == 0) {
			k->vcpus[i] += sb->vcpus;
			k->memory_mb[i] += sb->memory_mb;
			break;
		}
	return 0;
}

int saas__host_pick(saas_engine *e, unsigned int vcpus, unsigned int memory_mb, char host_id[SAAS_ID_MAX + 1])
{
	struct host_rows r;
	struct pick k = { &r, NULL, NULL };
	struct saas__pool_use u = { NULL, NULL, 0 };
	saas_store_filter f;
	int64_t seen_after = saas__engine_now(e) - (int64_t)FRESH_BEATS * e->hosts.heartbeat_ms, best_left = -1;
	int rc;

	host_id[0] = '\0';
	if ((rc = hosts_refresh(e, &r)) < 0)
		return rc;
	if (!r.count)
		goto out;
	if (!(k.vcpus = calloc(r.count, sizeof(*k.vcpus))) || !(k.memory_mb = calloc(r.count, sizeof(*k.memory_mb)))) {
		rc = saas__oom();
		goto out;
	}
	memset(&f, 0, sizeof(f));
	f.live = 1;
	if ((rc = e->store->sandbox_list(e->store_ctx, &f, pick_add, &k)) < 0 || (rc = room_use(e, NULL, &u)) < 0)
		goto out;
	/* Pooled VMs there take room as sandboxes do. */
	for (size_t j = 0; j < u.count; j++)
		for (size_t i = 0; i < r.count; i++)
			if (strcmp(r.items[i].id, u.ids[j]) == 0) {
				k.vcpus[i] += u.items[j].vcpus;
				k.memory_mb[i] += u.items[j].memory_mb;
				break;
			}
	for (size_t i = 0; i < r.count; i++) {
		const saas_store_host *h = &r.items[i];
		int64_t cpu_cap = (int64_t)h->cpus * h->cpu_overcommit_milli;
		int64_t mem_cap = (int64_t)h->memory_mb * h->mem_overcommit_milli;
		int64_t mem_used = (int64_t)k.memory_mb[i];

		if (h->state != SAAS_STORE_HOST_ACTIVE || h->last_seen_ms < seen_after)
			continue;
		/* In thousandths, as sandbox_place compares: no rounding of the capacity lets one too many in. */
		if ((int64_t)(k.vcpus[i] + vcpus) * 1000 > cpu_cap || (mem_used + memory_mb) * 1000 > mem_cap)
			continue;
		if (mem_cap - mem_used * 1000 > best_left) {
			best_left = mem_cap - mem_used * 1000;
			saas__strlcpy(host_id, h->id, SAAS_ID_MAX + 1);
		}
	}
out:
	saas__pool_use_free(&u);
	free(k.vcpus);
	free(k.memory_mb);
	free(r.items);
	return rc < 0 ? rc : host_id[0] != '\0';
}

int saas__sandbox_insert_placed(saas_engine *e, saas_store_sandbox *row, unsigned int max_live, const char *on_host)
{
	saas_store_placement p;
	struct saas__pool_use u;
	int rc;

	/* A single machine, or a fork of a sandbox on the engine's own driver: where it always went. */
	if ((on_host && !*on_host) || (!on_host && !saas__hosts_any(e))) {
		row->host_id[0] = '\0';
		return saas__live_limit(e->store->sandbox_insert(e->store_ctx, row, max_live), max_live);
	}
	/*
	 * Pooled VMs take room on their hosts as sandboxes do; the store counts
	 * this engine's (and the estimate of others') in the same transaction. A
	 * claimed one is this row: counted once, as a sandbox.
	 */
	if ((rc = room_use(e, row->id, &u)) < 0)
		return rc;
	memset(&p, 0, sizeof(p));
	p.seen_after_ms = saas__engine_now(e) - (int64_t)FRESH_BEATS * e->hosts.heartbeat_ms;
	p.max_live = max_live;
	p.host_id = on_host;
	p.extra = u.items;
	p.nextra = u.count;
	rc = e->store->sandbox_place(e->store_ctx, row, &p);
	saas__pool_use_free(&u);
	if (rc == SAAS_EBUSY && !on_host) {
		/* The last host was removed since the heartbeat: a single machine again, at once. */
		struct host_rows r;
		if (hosts_refresh(e, &r) == SAAS_OK && r.count == 0) {
			free(r.items);
			row->host_id[0] = '\0';
			return saas__live_limit(e->store->sandbox_insert(e->store_ctx, row, max_live), max_live);
		}
		free(r.items);
	}
	/*
	 * The engine's own words, written for the tenant (a size, never a host's
	 * facts): of no class, as the driver's "busy" (which names the host's
	 * memory or uids) is kept from tenants.
	 */
	if (rc == SAAS_EBUSY) {
		saas__error(SAAS_EBUSY, SAAS_ERRCLASS_NONE, 0,
		            on_host ? "the VM host of this sandbox's snapshot has no room for a %s sandbox "
		                      "(%u vCPUs, %u MiB) now; try again later"
		                    : "no VM host has room for a %s sandbox (%u vCPUs, %u MiB) now; try again later",
		            row->size, row->vcpus, row->memory_mb);
		saas__error_set_limit(NULL, SAAS__ROOM_RETRY_MS);
		return SAAS_EBUSY;
	}
	if (rc < 0)
		return saas__live_limit(rc, max_live);
	/* A store that cannot keep to one host would put the VM where its snapshot is not: undo, and say busy. */
	if (on_host && strcmp(row->host_id, on_host) != 0) {
		saas__sandbox_close(e, row, SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_NONE, 0,
		                   "the store placed a %s sandbox off the VM host of its snapshot; try again later",
		                   row->size);
	}
	return SAAS_OK;
}

/* ---- heartbeats and lost hosts ---- */

/* Reach a host and ask what it has; an outage is logged when it starts and when it ends. */
static int host_reach(saas_engine *e, const saas_store_host *row, void **ctx, saas_driver_host *info)
{
	struct saas__vmhost *vh;
	bool was_down = false;
	int rc;

	memset(info, 0, sizeof(*info));
	rc = host_ctx(e, row->id, ctx);
	if (rc == SAAS_OK) {
		if (e->driver->version >= 6 && e->driver->host_info) {
			if ((rc = e->driver->host_info(*ctx, info)) < 0) {
				char why[600]; /* the message lives in this thread's error slot, which unreachable() writes */
				snprintf(why, sizeof(why), "%s", saas_error_last()->message);
				rc = unreachable(row->name, why);
			}
		} else {
			info->cpus = UNKNOWN_CPUS;
			info->memory_mb = UNKNOWN_MEMORY_MB;
		}
	}
	pthread_mutex_lock(&e->hosts.mu);
	if ((vh = find_locked(&e->hosts, row->id))) {
		was_down = vh->down;
		vh->down = rc < 0;
	}
	pthread_mutex_unlock(&e->hosts.mu);
	if (rc < 0 && !was_down)
		saas__log(e, SAAS_LOG_WARN, "%s", saas_error_last()->message);
	else if (rc == SAAS_OK && was_down)
		saas__log(e, SAAS_LOG_INFO, "VM host %s (%s) answers again", row->name, row->id);
	return rc;
}

static bool lease_take(saas_engine *e, const char *name, int64_t now)
{
	int held = 0;

	if (e->store->lease_take(e->store_ctx, name, saas__engine_holder(e), now, e->hosts.grace_ms, &held) < 0) {
		saas__log(e, SAAS_LOG_WARN, "cannot take lease %s: %s", name, saas_error_last()->message);
		return false;
	}
	return held != 0;
}

/*
 * Close the sandboxes of a lost host, billed up to the moment it was last
 * seen (never beyond: nothing is known of them after it). How many are left
 * open, or an error.
 */
static int lost_close(saas_engine *e, const saas_store_host *row)
{
	struct saas__rows r;
	saas_store_filter f;
	unsigned int left = 0;
	int rc;

	memset(&f, 0, sizeof(f));
	f.live = 1;
	f.host_id = row->id;
	rc = saas__store_sandboxes(e->store, e->store_ctx, &f, &r.items, &r.count);
	for (size_t i = 0; rc == SAAS_OK && i < r.count; i++) {
		const saas_store_sandbox *sb = &r.items[i];
		int64_t at = row->last_seen_ms > sb->created_at_ms ? row->last_seen_ms : sb->created_at_ms;

		saas__log(e, SAAS_LOG_WARN, "sandbox %s was on lost VM host %s; closing it", sb->id, row->name);
		if (saas__sandbox_close(e, sb, SAAS_END_LOST, at, row->last_seen_ms, 0) < 0) {
			saas__log(e, SAAS_LOG_ERROR, "closing sandbox %s failed: %s", sb->id, saas_error_last()->message);
			left++;
		}
	}
	free(r.items);
	return rc < 0 ? rc : (int)left;
}

/* A lost host answers again: what runs on it belongs to nobody now; then it takes sandboxes again. */
static void host_back(saas_engine *e, const saas_store_host *row, void *ctx, const saas_driver_host *info, int64_t now)
{
	unsigned int destroyed = 0;
	int rc;

	/* Every VM there: no live row can be on a lost host (placement skips it), and each is checked again. */
	if ((rc = saas__orphans_destroy(e, ctx, NULL, 0, &destroyed)) < 0) {
		saas__log(e, SAAS_LOG_WARN, "VM host %s answers, but its VMs cannot be listed (%s); it stays lost",
		          row->name, saas_error_last()->message);
		return;
	}
	if (e->store->host_seen(e->store_ctx, row->id, now, info->cpus, info->memory_mb) < 0 ||
	    e->store->host_set_state(e->store_ctx, row->id, SAAS_STORE_HOST_LOST, SAAS_STORE_HOST_ACTIVE, now) < 0) {
		saas__log(e, SAAS_LOG_WARN, "VM host %s answers again but cannot be made active: %s", row->name,
		          saas_error_last()->message);
		return;
	}
	saas__log(e, SAAS_LOG_WARN, "lost VM host %s (%s) answers again: %u VMs nobody owned destroyed; active again",
	          row->name, row->id, destroyed);
}

/* How long since anyone reached the host (since it was registered, if never). */
static int64_t unseen_ms(const saas_store_host *row, int64_t now)
{
	return now - (row->last_seen_ms > row->created_at_ms ? row->last_seen_ms : row->created_at_ms);
}

static void host_beat(saas_engine *e, saas_store_host *row)
{
	saas_driver_host info;
	char lease[SAAS_STORE_LEASE_NAME_MAX + 1];
	void *ctx = NULL;
	bool up = host_reach(e, row, &ctx, &info) == SAAS_OK;
	/*
	 * Seen when it answered, not when it was asked: a host busy starting VMs
	 * may take seconds to list them (libvirt holds each domain while it
	 * starts), and an answer that came back stale already kept a live host
	 * out of placement (503 "no VM host has room", found by bench/hosts-bench).
	 */
	int64_t now = saas__engine_now(e);
	int left;

	if (row->state != SAAS_STORE_HOST_LOST) {
		if (up) {
			if (e->store->host_seen(e->store_ctx, row->id, now, info.cpus, info.memory_mb) < 0)
				saas__log(e, SAAS_LOG_WARN, "cannot record VM host %s as seen: %s", row->name,
				          saas_error_last()->message);
			foreign_update(e, row, &info);
			return;
		}
		if (unseen_ms(row, now) <= (int64_t)e->hosts.grace_ms)
			return;
	}
	/* Lost, or about to be: one engine at a time decides and cleans up. */
	snprintf(lease, sizeof(lease), "host:%s", row->id);
	if (!lease_take(e, lease, now))
		return;
	if (row->state != SAAS_STORE_HOST_LOST) {
		/* Under the lease, as the store has it now: another engine may have reached it since the list. */
		if (e->store->host_get(e->store_ctx, row->id, row) < 0 || row->state == SAAS_STORE_HOST_LOST ||
		    unseen_ms(row, now) <= (int64_t)e->hosts.grace_ms)
			goto out;
		if (e->store->host_set_state(e->store_ctx, row->id, row->state, SAAS_STORE_HOST_LOST, now) < 0)
			goto out;
		row->state = SAAS_STORE_HOST_LOST;
		saas__log(e, SAAS_LOG_WARN, "VM host %s (%s) is lost: no engine reached it for %lld s; closing its sandboxes",
		          row->name, row->id, (long long)(unseen_ms(row, now) / 1000));
	}
	/* Only once none is left open may it be seen again: its last_seen_ms is what they are billed to. */
	left = lost_close(e, row);
	if (left == 0 && up)
		host_back(e, row, ctx, &info, now);
out:
	e->store->lease_release(e->store_ctx, lease, saas__engine_holder(e));
}

/*
 * One host's beat, in a thread of its own. Reaching a host that stopped
 * answering takes seconds (libvirt's keepalive, then REMOTE_CONNECT_TIMEOUT_MS
 * for each new connection); one after another, a dead host held up the beats
 * of the live ones past FRESH_BEATS, and placement refused them (503 "no VM
 * host has room") for as long as it stayed dead.
 */
struct saas__beat {
	struct saas__beat *next;
	saas_engine *e;
	saas_store_host row;
	/* While the beat that started it waits: its count of beats not ended, and where the row goes back. */
	unsigned int *left;
	saas_store_host *out;
};

static void *beat_main(void *arg)
{
	struct saas__beat *b = arg, **p;
	struct saas__hosts *h = &b->e->hosts;

	host_beat(b->e, &b->row);
	saas__error_clear();
	pthread_mutex_lock(&h->mu);
	for (p = &h->beats; *p != b; p = &(*p)->next)
		;
	*p = b->next;
	if (b->left) {
		(*b->left)--;
		*b->out = b->row;
	}
	pthread_cond_broadcast(&h->beat_cond);
	pthread_mutex_unlock(&h->mu);
	free(b);
	return NULL;
}

static bool beating_locked(const struct saas__hosts *h, const char *id)
{
	for (const struct saas__beat *b = h->beats; b; b = b->next)
		if (strcmp(b->row.id, id) == 0)
			return true;
	return false;
}

/* Waits until no beat is in flight: none outlives the engine. */
static void beats_wait_all(struct saas__hosts *h)
{
	pthread_mutex_lock(&h->mu);
	while (h->beats)
		pthread_cond_wait(&h->beat_cond, &h->mu);
	pthread_mutex_unlock(&h->mu);
}

void saas__hosts_beat(saas_engine *e)
{
	struct saas__hosts *h = &e->hosts;
	struct host_rows r;
	struct timespec ts;
	unsigned int left = 0;

	if (!e->driver)
		return;
	if (hosts_refresh(e, &r) < 0) {
		saas__log(e, SAAS_LOG_WARN, "cannot read the VM hosts: %s", saas_error_last()->message);
		saas__error_clear();
		return;
	}
	for (size_t i = 0; i < r.count; i++) {
		struct saas__beat *b;
		pthread_t t;

		pthread_mutex_lock(&h->mu);
		/* Its last beat has not ended (the host is slow to answer, or dead): that one goes on. */
		if (beating_locked(h, r.items[i].id) || !(b = calloc(1, sizeof(*b)))) {
			pthread_mutex_unlock(&h->mu);
			continue;
		}
		b->e = e;
		b->row = r.items[i];
		b->left = &left;
		b->out = &r.items[i];
		b->next = h->beats;
		h->beats = b;
		left++;
		pthread_mutex_unlock(&h->mu);
		if (pthread_create(&t, NULL, beat_main, b) == 0) {
			pthread_detach(t);
			continue;
		}
		/* No thread to spare: this one beats here. */
		beat_main(b);
	}
	/*
	 * Waits half a heartbeat at most for the beats it started, so that a sweep
	 * that beats sees their results; the beats of a host that does not answer
	 * go on alone, and its next beats are skipped until they end.
	 */
	saas__deadline(&ts, CLOCK_REALTIME, h->heartbeat_ms / 2);
	pthread_mutex_lock(&h->mu);
	while (left && pthread_cond_timedwait(&h->beat_cond, &h->mu, &ts) != ETIMEDOUT)
		;
	for (struct saas__beat *b = h->beats; b; b = b->next)
		if (b->left == &left)
			b->left = NULL;
	pthread_mutex_unlock(&h->mu);
	/* As the hosts are now (a lost one marked so above): the pools let go of what they may not hand out. */
	saas__pool_hosts_check(e, r.items, r.count);
	saas__error_clear();
	free(r.items);
}

/* ---- the engine's side ---- */

int saas__hosts_open(saas_engine *e, const saas_engine_options *o)
{
	struct host_rows r;
	int rc;

	e->hosts.heartbeat_ms = o->host_heartbeat_ms ? o->host_heartbeat_ms : SAAS_ENGINE_HOST_HEARTBEAT_MS;
	e->hosts.grace_ms = o->host_grace_ms ? o->host_grace_ms : SAAS_ENGINE_HOST_GRACE_MS;
	if (e->hosts.grace_ms < 2 * e->hosts.heartbeat_ms)
		return saas__inval("host_grace_ms (%u) must be at least twice host_heartbeat_ms (%u)", e->hosts.grace_ms,
		                   e->hosts.heartbeat_ms);
	if (e->flags & SAAS_ENGINE_STORE_ONLY)
		return SAAS_OK;
	/* Placement must know at once whether hosts are registered; their contexts open on first use. */
	if ((rc = hosts_refresh(e, &r)) < 0)
		return saas__error_wrap(rc, "reading the VM hosts");
	free(r.items);
	return SAAS_OK;
}

static void *hosts_main(void *arg)
{
	saas_engine *e = arg;
	struct timespec ts;

	pthread_mutex_lock(&e->mu);
	while (!e->stopping) {
		pthread_mutex_unlock(&e->mu);
		saas__error_clear();
		saas__hosts_beat(e);
		pthread_mutex_lock(&e->mu);
		/* The engine's condition is also signalled for other reasons: sleep the whole heartbeat. */
		saas__deadline(&ts, CLOCK_REALTIME, e->hosts.heartbeat_ms);
		while (!e->stopping && pthread_cond_timedwait(&e->cond, &e->mu, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int saas__hosts_start(saas_engine *e)
{
	int rc = pthread_create(&e->hosts.thread, NULL, hosts_main, e);

	if (rc != 0)
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the VM hosts' heartbeat thread");
	e->hosts.running = true;
	return SAAS_OK;
}

void saas__hosts_stop(saas_engine *e)
{
	if (e->hosts.running) {
		pthread_mutex_lock(&e->mu);
		e->stopping = true;
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->hosts.thread, NULL);
		e->hosts.running = false;
	}
	/* The beats of a host that was slow to answer (or of a sweep, without the thread) end first. */
	beats_wait_all(&e->hosts);
}

void saas__hosts_free(saas_engine *e)
{
	struct saas__hosts *h = &e->hosts;

	for (size_t i = 0; i < h->count; i++) {
		if (h->items[i]->opened && e->driver && e->driver->close)
			e->driver->close(h->items[i]->ctx);
		free(h->items[i]);
	}
	free(h->items);
	h->items = NULL;
	h->count = h->cap = 0;
}
