/*
 * The store's leases, VM hosts and the placement of sandboxes on them
 * (slots.h says how the store's rooms share the work).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "store/slots.h"

/* ---- leases ---- */

/*
 * One statement: a free or run-out lease is taken, the holder's own is
 * renewed, and another holder's that runs on is left alone (no row
 * changed). No read-then-write window for a second engine to slip into:
 * two engines racing for one lease are serialised on its row (or its key).
 */
static const saas__sql q_lease_take = {
	Q_LEASE_TAKE,
	"INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $4)"
	" ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at"
	" WHERE leases.holder = excluded.holder OR leases.expires_at <= $3", NULL, "taking a lease", 0
};
static const saas__sql q_lease_release = {
	Q_LEASE_RELEASE, "DELETE FROM leases WHERE name = $1 AND holder = $2", NULL, "releasing a lease", 0
};
static const saas__sql q_lease_get = {
	Q_LEASE_GET, "SELECT holder, expires_at FROM leases WHERE name = $1", NULL, "reading a lease", 1
};

/*
 * The dead ones (saas_store.lease_purge): "netset:" is 7 bytes, its sandbox
 * id from the 8th on; a destroyed sandbox's status is 3 (slots.h).
 */
static const saas__sql q_lease_purge = {
	Q_LEASE_PURGE,
	"DELETE FROM leases WHERE name IN (SELECT name FROM leases WHERE"
	" (substr(name, 1, 7) <> 'netset:' AND expires_at < $1) OR"
	" (substr(name, 1, 7) = 'netset:' AND NOT EXISTS (SELECT 1 FROM sandboxes"
	" WHERE sandboxes.id = substr(leases.name, 8) AND sandboxes.status <> 3)) LIMIT $2)",
	NULL, "purging leases", 0
};

struct lease {
	char holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t expires_at_ms;
};

static int lease_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct lease *l = out;

	l->expires_at_ms = d->col_i64(row, 1);
	return get_text(d, row, 0, l->holder, sizeof(l->holder));
}

int saas__st_lease_take(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms, int *held)
{
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0 || (rc = saas__store_lease_time_check(now_ms, ttl_ms)) < 0)
		return rc;
	if (!held)
		return saas__inval("output is NULL");
	*held = 0;
	const saas__param p[] = { SAAS__TEXT(name), SAAS__TEXT(holder), SAAS__I64(now_ms), SAAS__I64(now_ms + ttl_ms) };
	rc = run1(ctx, &q_lease_take, p, 4, &changed);
	*held = rc == SAAS_OK && changed > 0;
	return rc;
}

int saas__st_lease_release(void *ctx, const char *name, const char *holder)
{
	const saas__param p[] = { SAAS__TEXT(name), SAAS__TEXT(holder) };
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0)
		return rc;
	return run1(ctx, &q_lease_release, p, 2, NULL);
}

int saas__st_lease_get(void *ctx, const char *name, char *holder, int64_t *expires_at_ms)
{
	struct lease l;
	int rc, found;

	if ((rc = saas__store_arg(name, SAAS_STORE_LEASE_NAME_MAX, "lease name")) < 0)
		return rc;
	if (!holder || !expires_at_ms)
		return saas__inval("output is NULL");
	if ((rc = fetch_one(ctx, &q_lease_get, &SAAS__TEXT(name), 1, lease_row, sizeof(l), &l, &found)) < 0)
		return rc;
	if (!found)
		return saas__store_not_found("lease", name);
	memcpy(holder, l.holder, sizeof(l.holder));
	*expires_at_ms = l.expires_at_ms;
	return SAAS_OK;
}

int saas__st_lease_purge(void *ctx, int64_t expired_before_ms, unsigned int max, unsigned int *purged)
{
	return prune1(ctx, &q_lease_purge, expired_before_ms, max, purged);
}

/* ---- VM hosts ---- */

#define HOST_SELECT \
	"SELECT id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb," \
	" created_at, last_seen_at, state_at FROM hosts"

static const saas__sql q_host_insert = {
	Q_HOST_INSERT,
	"INSERT INTO hosts (id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb,"
	" created_at, last_seen_at, state_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", NULL,
	"inserting a host", 0
};
/* An id wins over a name, so a name that looks like another host's id cannot shadow it. */
static const saas__sql q_host_get = {
	Q_HOST_GET, HOST_SELECT " WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1", NULL, "reading a host", 1
};
static const saas__sql q_host_list = {
	Q_HOST_LIST, HOST_SELECT " ORDER BY created_at, id", NULL, "listing hosts", 1
};
static const saas__sql q_host_set_state = {
	Q_HOST_SET_STATE, "UPDATE hosts SET state = $3, state_at = $4 WHERE id = $1 AND ($2 < 0 OR state = $2)", NULL,
	"changing a host's state", 0
};
static const saas__sql q_host_exists = { Q_HOST_EXISTS, "SELECT id FROM hosts WHERE id = $1", NULL, "reading a host", 1 };
/* last_seen_at only ever moves forward; every matched row counts, so none is no such host. */
static const saas__sql q_host_seen = {
	Q_HOST_SEEN,
	"UPDATE hosts SET cpus = $3, memory_mb = $4,"
	" last_seen_at = CASE WHEN last_seen_at > $2 THEN last_seen_at ELSE $2 END WHERE id = $1", NULL,
	"recording a host's heartbeat", 0
};
/*
 * Inside a write transaction. Every placement onto the host holds this row
 * lock until it commits (PostgreSQL; SQLite's write lock covers all), so
 * once we have it the count below sees each sandbox placed there, and none
 * can be placed before the delete commits.
 */
static const saas__sql q_host_lock = {
	Q_HOST_LOCK, "SELECT id FROM hosts WHERE id = $1", "SELECT id FROM hosts WHERE id = $1 FOR UPDATE",
	"locking a host", 0
};
static const saas__sql q_host_busy = {
	Q_HOST_BUSY, "SELECT id FROM sandboxes WHERE host_id = $1 AND status != 3 LIMIT 1", NULL,
	"counting a host's sandboxes", 0
};
static const saas__sql q_host_delete = { Q_HOST_DELETE, "DELETE FROM hosts WHERE id = $1", NULL, "deleting a host", 0 };

static int host_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_host *h = out;
	int rc;

	if ((rc = get_text(d, row, 0, h->id, sizeof(h->id))) < 0 || (rc = get_text(d, row, 1, h->name, sizeof(h->name))) < 0 ||
	    (rc = get_text(d, row, 2, h->uri, sizeof(h->uri))) < 0 ||
	    (rc = get_text(d, row, 3, h->address, sizeof(h->address))) < 0)
		return rc;
	h->state = (int)d->col_i64(row, 4);
	h->cpu_overcommit_milli = (unsigned int)d->col_i64(row, 5);
	h->mem_overcommit_milli = (unsigned int)d->col_i64(row, 6);
	h->cpus = (unsigned int)d->col_i64(row, 7);
	h->memory_mb = (uint64_t)d->col_i64(row, 8);
	h->created_at_ms = d->col_i64(row, 9);
	h->last_seen_ms = d->col_i64(row, 10);
	h->state_at_ms = d->col_i64(row, 11);
	return SAAS_OK;
}

int saas__st_host_insert(void *ctx, const saas_store_host *h)
{
	int rc;

	if ((rc = saas__store_host_check(h)) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(h->id), SAAS__TEXT(h->name), SAAS__TEXT(h->uri), SAAS__TEXT(h->address), SAAS__I64(h->state),
		SAAS__I64(h->cpu_overcommit_milli), SAAS__I64(h->mem_overcommit_milli), SAAS__I64(h->cpus),
		SAAS__I64(h->memory_mb), SAAS__I64(h->created_at_ms), SAAS__I64(h->last_seen_ms), SAAS__I64(h->state_at_ms),
	};
	rc = run1(ctx, &q_host_insert, p, 12, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "host '%.64s' already exists", h->name);
	return rc;
}

int saas__st_host_get(void *ctx, const char *id_or_name, saas_store_host *out)
{
	int rc, found;

	if ((rc = saas__store_arg(id_or_name, SAAS__HOST_KEY_MAX, "host id or name")) < 0)
		return rc;
	if (!out)
		return saas__inval("output is NULL");
	rc = fetch_one(ctx, &q_host_get, &SAAS__TEXT(id_or_name), 1, host_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("host", id_or_name);
	return rc;
}

int saas__st_host_list(void *ctx, saas_store_host_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!fn)
		return saas__inval("callback is NULL");
	rc = fetch(ctx, &q_host_list, NULL, 0, host_row, sizeof(saas_store_host), &f);
	FOR_EACH(f, saas_store_host, rc, fn, userdata);
	return rc;
}

int saas__st_host_set_state(void *ctx, const char *id, int from, int to, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(from), SAAS__I64(to), SAAS__I64(at_ms) };
	char found_id[SAAS_ID_MAX + 1];
	int64_t changed = 0;
	int rc, found;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if ((from != -1 && !saas__store_host_state_valid(from)) || !saas__store_host_state_valid(to))
		return saas__inval("host state %d -> %d is not between active, draining and lost", from, to);
	rc = run1(ctx, &q_host_set_state, p, 4, &changed);
	if (rc < 0 || changed > 0)
		return rc;
	if ((rc = fetch_one(ctx, &q_host_exists, p, 1, id_row, sizeof(found_id), found_id, &found)) < 0)
		return rc;
	return found ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_STORE, 0, "host '%.64s' is no longer in state %d", id, from)
	             : saas__store_not_found("host", id);
}

int saas__st_host_seen(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(at_ms), SAAS__I64(cpus), SAAS__I64(memory_mb) };
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if (memory_mb > SAAS__HOST_MEMORY_MB_MAX)
		return saas__inval("host memory %llu MiB is out of range", (unsigned long long)memory_mb);
	rc = run1(ctx, &q_host_seen, p, 4, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = saas__store_not_found("host", id);
	return rc;
}

static int host_delete_in(struct call *c, const char *id)
{
	const saas__param p[] = { SAAS__TEXT(id) };
	struct fetch f;
	int rc;

	rc = fetch_in(c, &q_host_lock, p, 1, id_row, SAAS_ID_MAX + 1, &f);
	free(f.data);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("host", id);
	if (rc < 0)
		return rc;
	rc = fetch_in(c, &q_host_busy, p, 1, id_row, SAAS_ID_MAX + 1, &f);
	free(f.data);
	if (rc == SAAS_OK && f.n > 0)
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                 "host '%.64s' still has sandboxes that are not destroyed; drain it first", id);
	if (rc < 0)
		return rc;
	return run(c, &q_host_delete, p, 1, NULL);
}

int saas__st_host_delete(void *ctx, const char *id)
{
	struct call c;
	int rc;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, host_delete_in(&c, id));
	leave(&c);
	return rc;
}

/* ---- placement ---- */

/*
 * The candidate hosts, locked (PostgreSQL: FOR UPDATE, in id order, so
 * that placements locking overlapping sets cannot deadlock; SQLite: its
 * write lock, taken at BEGIN, covers them all), with their whole
 * capacities: used + need <= floor(capacity x milli / 1000) is exact.
 */
#define PLACE_HOSTS \
	"SELECT id, CAST(cpus AS BIGINT) * cpu_overcommit_milli / 1000, memory_mb * mem_overcommit_milli / 1000" \
	" FROM hosts WHERE state = 0 AND last_seen_at >= $1 AND ($2 = '' OR id = $2) ORDER BY id"
static const saas__sql q_place_hosts = {
	Q_PLACE_HOSTS, PLACE_HOSTS, PLACE_HOSTS " FOR UPDATE", "locking the hosts", 0
};
/*
 * Counted only after the locks, in a new statement (PostgreSQL, READ
 * COMMITTED: a new snapshot), which sees every sandbox a placement that
 * held a lock before us committed. One statement would count in the
 * snapshot it started with, before its locks were granted.
 */
static const saas__sql q_place_used = {
	Q_PLACE_USED,
	"SELECT host_id, COALESCE(SUM(vcpus), 0), COALESCE(SUM(memory_mb), 0) FROM sandboxes"
	" WHERE status != 3 AND host_id != '' GROUP BY host_id", NULL, "counting what the hosts hold", 0
};

/* A host's id and three numbers: its capacities, or what it holds. */
struct host_use {
	char id[SAAS_ID_MAX + 1];
	int64_t cpus, memory_mb;
};

static int host_use_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct host_use *u = out;

	u->cpus = d->col_i64(row, 1);
	u->memory_mb = d->col_i64(row, 2);
	return get_text(d, row, 0, u->id, sizeof(u->id));
}

/*
 * Inside the caller's transaction: the host with the most memory left that
 * has room for `b`, or "" if none. What the caller says runs there without
 * a row (p->extra) counts as used. Of equals, the first in id order wins.
 */
static int place_pick(struct call *c, const saas_store_sandbox *b, const saas_store_placement *p,
                      char host_id[SAAS_ID_MAX + 1])
{
	const saas__param hp[] = { SAAS__I64(p->seen_after_ms), SAAS__TEXT(p->host_id ? p->host_id : "") };
	struct fetch hosts = { 0 }, used = { 0 };
	int64_t best_left = -1;
	int rc;

	host_id[0] = '\0';
	if ((rc = fetch_in(c, &q_place_hosts, hp, 2, host_use_row, sizeof(struct host_use), &hosts)) < 0 ||
	    hosts.n == 0 ||
	    (rc = fetch_in(c, &q_place_used, NULL, 0, host_use_row, sizeof(struct host_use), &used)) < 0)
		goto out;
	for (size_t i = 0; i < hosts.n; i++) {
		const struct host_use *h = (const struct host_use *)(void *)(hosts.data + i * hosts.elem);
		int64_t cpu_used = 0, mem_used = 0;

		for (size_t j = 0; j < used.n; j++) {
			const struct host_use *u = (const struct host_use *)(void *)(used.data + j * used.elem);

			if (strcmp(u->id, h->id) == 0) {
				cpu_used += u->cpus;
				mem_used += u->memory_mb;
			}
		}
		for (size_t k = 0; p->extra && k < p->nextra; k++)
			if (p->extra[k].host_id && strcmp(p->extra[k].host_id, h->id) == 0) {
				cpu_used += p->extra[k].vcpus;
				mem_used += (int64_t)p->extra[k].memory_mb;
			}
		if (cpu_used + (int64_t)b->vcpus > h->cpus || mem_used + (int64_t)b->memory_mb > h->memory_mb)
			continue;
		if (h->memory_mb - mem_used > best_left) {
			best_left = h->memory_mb - mem_used;
			memcpy(host_id, h->id, sizeof(h->id));
		}
	}
out:
	free(hosts.data);
	free(used.data);
	return rc;
}

/*
 * Why this cannot overcommit: the account's lock (live_check), then every
 * candidate host's (place_pick), are held from the count to the commit. A
 * placement racing for the same host waits for ours to commit, then counts
 * what we inserted. Always account first, then hosts in id order: one order
 * for everyone, no deadlock.
 */
static int place_in(struct call *c, saas_store_sandbox *b, const saas_store_placement *p)
{
	int rc;

	if ((rc = saas__slot_live_check(c, b->account_id, p->max_live)) < 0 ||
	    (rc = place_pick(c, b, p, b->host_id)) < 0)
		return rc;
	if (!b->host_id[0])
		return p->host_id && *p->host_id
		               ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                             "host '%.64s' is not active, not seen lately or has no room for %u vCPUs and "
		                             "%u MiB", p->host_id, b->vcpus, b->memory_mb)
		               : saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                             "no active host seen lately has room for %u vCPUs and %u MiB; "
		                             "add or undrain a host", b->vcpus, b->memory_mb);
	return saas__slot_sandbox_write(c, b);
}

int saas__st_sandbox_place(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p)
{
	saas_store_sandbox b;
	struct call c;
	int rc;

	if ((rc = saas__slot_sandbox_check(sandbox)) < 0)
		return rc;
	if (!p)
		return saas__inval("placement is NULL");
	if (p->host_id && (rc = saas__store_arg(p->host_id, SAAS_ID_MAX, "placement host id")) < 0)
		return rc;
	b = *sandbox;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, place_in(&c, &b, p));
	leave(&c);
	if (rc == SAAS_OK)
		memcpy(sandbox->host_id, b.host_id, sizeof(b.host_id));
	return rc;
}
