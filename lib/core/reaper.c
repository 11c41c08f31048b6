/*
 * The reaper and reconcile. Lifetimes live in the store, not in timers, so a
 * sandbox expires on time even if every engine was down when it should have:
 * the next sweep bills it up to its expiry and destroys it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

/* Look for VMs that no live sandbox owns once every this many sweeps. */
#define ORPHAN_SWEEP_EVERY 60

static int live_rows(saas_engine *e, struct saas__rows *r)
{
	saas_store_filter f;

	memset(&f, 0, sizeof(f));
	f.live = 1;
	return saas__store_sandboxes(e->store, e->store_ctx, &f, &r->items, &r->count);
}

static char *heartbeat_path(saas_engine *e)
{
	char *p;

	if (asprintf(&p, "%s/heartbeat", e->state_dir) < 0)
		return NULL;
	return p;
}

/*
 * The heartbeat file's content is the engine clock at the last sweep: after a
 * crash it is the last moment the engine knew its VMs were running. One
 * fixed-width record, overwritten in place: a write within the first sector
 * is whole or absent, and needs no new block, so it goes on on a full disk.
 */
static void heartbeat_write(saas_engine *e, int64_t now)
{
	char *path = heartbeat_path(e), buf[32];
	int fd, n;

	if (!path)
		return;
	n = snprintf(buf, sizeof(buf), "%020lld\n", (long long)now);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (pwrite(fd, buf, (size_t)n, 0) != n)
			saas__log(e, SAAS_LOG_WARN, "cannot write %s: %s", path, strerror(errno));
		close(fd);
	}
	free(path);
}

static int64_t heartbeat_read(saas_engine *e)
{
	char *path = heartbeat_path(e), buf[32] = "";
	FILE *f = path ? fopen(path, "re") : NULL;
	int64_t v = 0;

	if (f) {
		if (fgets(buf, sizeof(buf), f))
			v = strtoll(buf, NULL, 10);
		fclose(f);
	}
	free(path);
	return v;
}

/* How long a VM whose sandbox was just closed is left to the destroy that closed it. */
#define ORPHAN_GRACE_MS 30000

struct name_set {
	const saas_store_sandbox *live;
	size_t n;
	saas_engine *e;
	void *ctx;                     /* the driver context listed: the engine's own or a VM host's */
	unsigned int destroyed;
};

static int destroy_if_orphan(void *ud, const char *name)
{
	struct name_set *s = ud;
	saas_store_sandbox row;
	char lease[SAAS_STORE_LEASE_NAME_MAX + 1];
	int rc;

	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->live[i].id, name) == 0)
			return 0;
	/* Pooled VMs, and the one being made for a pool, have no row until claimed. */
	if (saas__pool_owns(s->e, name))
		return 0;
	/*
	 * The live rows were read before the VMs were listed, so a create or a pool
	 * claim may have inserted its row since. Ask the store again, after the pool:
	 * a claim inserts the row before it leaves the pool, so a VM claimed in
	 * between is seen in one or the other. When the store cannot say, keep the
	 * VM; a later sweep decides.
	 */
	rc = s->e->store->sandbox_get(s->e->store_ctx, name, &row);
	if ((rc == SAAS_OK && row.status != SAAS_SANDBOX_DESTROYED) || (rc < 0 && rc != SAAS_ENOTFOUND))
		return 0;
	/*
	 * Closed a moment ago: the destroy that closed it (row first, so billing
	 * stops at once) is most likely still taking the VM down. Leave it to that
	 * destroy; if it failed, a sweep after the grace period finishes the job.
	 */
	if (rc == SAAS_OK && saas__engine_now(s->e) - row.destroyed_at_ms < ORPHAN_GRACE_MS)
		return 0;
	/*
	 * Another engine's pooled VM (or one it is making for a pool) has no row
	 * either, but its lease: taking it means that engine is gone, and so the
	 * VM is nobody's. The lease stays ours while it goes, so no other sweep
	 * destroys it at the same time.
	 */
	if (saas__claim_name(lease, "pool", name) < 0 || saas__claim_once(s->e, lease) != 1)
		return 0; /* (a store of its own: always taken, as only this engine's pool could own it) */
	saas__log(s->e, SAAS_LOG_WARN, "VM %s belongs to no live sandbox; destroying it", name);
	if (s->e->driver->vm_destroy(s->ctx, name) == SAAS_OK)
		s->destroyed++;
	saas__claim_drop(s->e, lease);
	return 0;
}

int saas__orphans_destroy(saas_engine *e, void *ctx, const saas_store_sandbox *live, size_t n, unsigned int *destroyed)
{
	struct name_set s = { live, n, e, ctx, 0 };
	int rc = e->driver->vm_list(ctx, destroy_if_orphan, &s);

	if (destroyed)
		*destroyed = s.destroyed;
	return rc;
}

struct host_snaps {
	struct host_snap {
		char name[SAAS_STORE_SNAPSHOT_MAX + 1];
		int64_t written_ms;
	} *items;
	size_t count, cap;
	const struct saas__rows *live;
	int64_t now;
	int rc;
};

static int host_snap_seen(void *ud, const saas_driver_snapshot *snap)
{
	struct host_snaps *s = ud;

	for (size_t i = 0; i < s->live->count; i++)
		if (strcmp(s->live->items[i].snapshot, snap->name) == 0)
			return 0; /* a paused sandbox's, or a pause or resume under way */
	/* Young, or of an age nobody can tell: perhaps a fork's that some server is making children of. */
	if (snap->written_ms <= 0 || s->now - snap->written_ms < SAAS_HOST_SNAPSHOT_GRACE_MS ||
	    strlen(snap->name) > SAAS_STORE_SNAPSHOT_MAX)
		return 0;
	if ((s->rc = SAAS__ARRAY_RESERVE(s->items, s->cap, s->count + 1)) < 0)
		return 1;
	saas__strlcpy(s->items[s->count].name, snap->name, sizeof(s->items[0].name));
	s->items[s->count++].written_ms = snap->written_ms;
	return 0;
}

/*
 * Delete the snapshots on VM host `host` (its name, for the log) that no live sandbox names and
 * that were last written more than SAAS_HOST_SNAPSHOT_GRACE_MS ago: a delete
 * whose server stopped before the host answered it, a fork or a pause cut
 * short. The driver reports only this cluster's (its owner's).
 */
static int host_snapshots_sweep(saas_engine *e, void *ctx, const char *host, const struct saas__rows *live)
{
	struct host_snaps s = { NULL, 0, 0, live, saas__engine_now(e), SAAS_OK };
	int rc;

	if (!saas__can_snapshot(e) || e->driver->version < 13 || !e->driver->snapshot_scan)
		return SAAS_OK;
	if ((rc = e->driver->snapshot_scan(ctx, host_snap_seen, &s)) < 0 || (rc = s.rc) < 0) {
		free(s.items);
		if (rc != SAAS_ENOTSUP)
			return rc;
		saas__error_clear();
		return SAAS_OK;
	}
	for (size_t i = 0; i < s.count; i++) {
		saas__log(e, SAAS_LOG_WARN, "snapshot %s on VM host %s belongs to no sandbox (last written %lld s ago); "
		          "deleting it", s.items[i].name, host, (long long)((s.now - s.items[i].written_ms) / 1000));
		if (e->driver->snapshot_delete(ctx, s.items[i].name) < 0) {
			saas__log(e, SAAS_LOG_WARN, "deleting snapshot %s on VM host %s failed (%s); the next sweep tries again",
			          s.items[i].name, host, saas_error_last()->message);
			saas__error_clear();
		}
	}
	free(s.items);
	return SAAS_OK;
}

/*
 * Destroy what the engine's own driver runs that no live sandbox owns, then
 * what each VM host runs, and delete the snapshots there that no live
 * sandbox names. A host out of reach is skipped (logged): the lost host's
 * return sweeps it, and so does the next pass.
 */
static int sweep_orphans(saas_engine *e, const struct saas__rows *live)
{
	saas_store_host *hosts = NULL;
	size_t n = 0;
	int rc = saas__orphans_destroy(e, e->driver_ctx, live->items, live->count, NULL);

	if (rc < 0 || !saas__hosts_any(e))
		return rc;
	if (saas__store_hosts(e->store, e->store_ctx, &hosts, &n) < 0) {
		saas__log(e, SAAS_LOG_WARN, "orphan sweep: cannot list the VM hosts: %s", saas_error_last()->message);
		saas__error_clear();
	}
	for (size_t i = 0; i < n; i++) {
		void *ctx;

		if (hosts[i].state == SAAS_STORE_HOST_LOST)
			continue; /* its VMs go when it answers again (hosts.c) */
		if (saas__vm_driver(e, hosts[i].id, &ctx) < 0 ||
		    saas__orphans_destroy(e, ctx, live->items, live->count, NULL) < 0)
			saas__log(e, SAAS_LOG_WARN, "orphan sweep of VM host %s: %s", hosts[i].id,
			          saas_error_last()->message);
		else if (host_snapshots_sweep(e, ctx, hosts[i].name, live) < 0)
			saas__log(e, SAAS_LOG_WARN, "snapshot sweep of VM host %s: %s; the next sweep tries again",
			          hosts[i].name, saas_error_last()->message);
		saas__error_clear();
	}
	free(hosts);
	return SAAS_OK;
}

/*
 * A create (or a fork's child) whose engine is gone: its lease "create:<id>"
 * ran out, or the state directory's last engine held it. Taking the lease
 * makes the undo this engine's alone; the close is conditional on the
 * creating row's expiry, so a create that finished meanwhile (ready, with a
 * new expiry) is left alone. Nothing is billed: it never became ready. 1
 * undone, 0 its engine lives (this one included), or an error.
 */
static int create_undo(saas_engine *e, saas_store_sandbox *sb, int64_t now)
{
	char lease[SAAS_STORE_LEASE_NAME_MAX + 1];
	int rc;

	if ((rc = saas__claim_name(lease, "create", sb->id)) < 0 || saas__claim_mine(e, lease))
		return rc;
	if ((rc = saas__claim_once(e, lease)) <= 0)
		return rc;
	saas__log(e, SAAS_LOG_WARN, "sandbox %s: the server that was creating it is gone; undoing the create", sb->id);
	rc = saas__sandbox_end(e, sb, SAAS_END_FAILED, now, 0, SAAS__END_IF_EXPIRY);
	saas__claim_drop(e, lease);
	if (rc == SAAS_ESTATE)
		return 0;
	if (rc < 0)
		return rc;
	sb->status = SAAS_SANDBOX_DESTROYED;
	return 1;
}

/* How many of a sandbox's newest executions are looked at for ones left running. */
#define EXEC_CHECK_MAX 100
/* Look for executions a dead server left running once every this many sweeps. */
#define EXEC_CHECK_EVERY 10

/*
 * Executions whose server is gone (their lease "exec:<id>" ran out) are
 * marked failed: the command's output streamed to that server only, and
 * nobody can follow, signal or cancel it any more. Only on a shared store:
 * with one engine, reconcile at its next start does it, as it always did.
 */
static void executions_orphaned(saas_engine *e, const struct saas__rows *live, int64_t now)
{
	for (size_t i = 0; e->claims.shared && i < live->count; i++) {
		saas_store_execution *listed = NULL;
		size_t n = 0;

		if (live->items[i].status == SAAS_SANDBOX_DESTROYED)
			continue;
		if (saas__store_executions(e->store, e->store_ctx, live->items[i].id, 0, NULL, EXEC_CHECK_MAX, &listed,
		                           &n) < 0) {
			saas__log(e, SAAS_LOG_WARN, "listing the executions of %s failed: %s", live->items[i].id,
			          saas_error_last()->message);
			continue;
		}
		for (size_t k = 0; k < n; k++) {
			const char *id = listed[k].id;
			char lease[SAAS_STORE_LEASE_NAME_MAX + 1];
			saas_store_execution x;

			if (listed[k].status != SAAS_EXEC_RUNNING || saas__live_here(e, id) ||
			    saas__claim_name(lease, "exec", id) < 0 || saas__claim_once(e, lease) != 1)
				continue;
			memset(&x, 0, sizeof(x));
			if (e->store->execution_get(e->store_ctx, id, &x) == SAAS_OK && x.status == SAAS_EXEC_RUNNING) {
				char *kept = x.error;
				saas__log(e, SAAS_LOG_WARN, "execution %s: the server that ran it is gone; marking it failed",
				          x.id);
				x.status = SAAS_EXEC_FAILED;
				x.exit_code = -1;
				x.error = (char *)"the server that ran it stopped while it ran";
				x.finished_at_ms = now;
				e->store->execution_finish(e->store_ctx, &x);
				x.error = kept;
			}
			saas__store_execution_clear(&x);
			saas__claim_drop(e, lease);
		}
		saas__store_executions_free(listed, n);
	}
}

int saas__reconcile(saas_engine *e)
{
	struct saas__rows live;
	int64_t now = saas__engine_now(e), last_known = heartbeat_read(e);
	int rc;

	/* Ends a previous engine could not record (closes.c read them at open), at the moments they happened. */
	saas__closes_retry(e);
	/*
	 * One engine at a time: two starting together would otherwise both judge
	 * the same rows. The one that waits loses nothing: its reaper finishes
	 * whatever a dead engine left, once that engine's leases run out.
	 */
	if ((rc = saas__claim_once(e, "reconcile")) < 0)
		saas__log(e, SAAS_LOG_WARN, "reconcile: the store cannot record its lease (%s); reconciling anyway",
		          saas_error_last()->message);
	else if (rc == 0) {
		saas__log(e, SAAS_LOG_INFO, "another server is reconciling the store; this one's reaper sweeps after it");
		heartbeat_write(e, now);
		return SAAS_OK;
	}
	if ((rc = live_rows(e, &live)) < 0) {
		saas__claim_drop(e, "reconcile");
		return saas__error_wrap(rc, "reconcile");
	}
	if (last_known <= 0 || last_known > now)
		last_known = now;
	/* Paused ones (and pauses, resumes, forks cut short) against the driver's snapshots first. */
	saas__snapshots_reconcile(e, live.items, live.count, last_known);
	for (size_t i = 0; i < live.count; i++) {
		saas_store_sandbox *sb = &live.items[i];
		int state = SAAS_VM_ABSENT;

		/* Ended already, the store still refusing to record it: the sweeps keep trying. */
		if (saas__closes_pending(e, sb->id)) {
			sb->status = SAAS_SANDBOX_DESTROYED;
			continue;
		}
		/* Executions that were running belonged to the engine that died (on a shared store: below). */
		if (!e->claims.shared)
			e->store->execution_fail_running(e->store_ctx, sb->id, "the engine restarted while it ran", now);
		if (sb->status == SAAS_SANDBOX_CREATING) {
			/* A create that never finished, its engine gone: nothing was billed, nothing may remain. */
			create_undo(e, sb, now);
			continue;
		}
		/* Saved to a snapshot, with no VM: settled above. */
		if (sb->status == SAAS_SANDBOX_DESTROYED || sb->status == SAAS_SANDBOX_PAUSED)
			continue;
		/* The driver cannot snapshot, so nothing could have paused it: a row another engine left so. */
		if (sb->status == SAAS_SANDBOX_PAUSING || sb->status == SAAS_SANDBOX_RESUMING)
			continue;
		{
			void *ctx;
			/* A VM host out of reach: its heartbeats decide (lost, or back); nothing is known here. */
			if (saas__vm_driver(e, sb->host_id, &ctx) < 0) {
				saas__log(e, SAAS_LOG_WARN, "reconcile: sandbox %s: %s", sb->id, saas_error_last()->message);
				saas__error_clear();
				continue;
			}
			if (e->driver->vm_state(ctx, sb->id, &state) < 0)
				state = SAAS_VM_ABSENT;
		}
		if (state != SAAS_VM_RUNNING) {
			/* The VM died while no engine watched: bill to the last moment we knew it ran. */
			int64_t until = last_known > sb->ready_at_ms ? last_known : sb->ready_at_ms;
			saas__log(e, SAAS_LOG_WARN, "sandbox %s has no running VM; closing it", sb->id);
			saas__sandbox_end(e, sb, SAAS_END_LOST, until, until, 0);
			sb->status = SAAS_SANDBOX_DESTROYED;
			continue;
		}
		/* The driver keeps no policy across restarts: give it again, or end the VM. */
		saas__network_reapply(e, sb);
	}
	executions_orphaned(e, &live, now);
	/* Only the still-live rows protect their VMs. */
	{
		struct saas__rows keep = live;
		size_t k = 0;
		/* Creating rows still here are another live engine's creates: their VMs are being made. */
		for (size_t i = 0; i < live.count; i++)
			if (live.items[i].status != SAAS_SANDBOX_DESTROYED)
				keep.items[k++] = live.items[i];
		keep.count = k;
		rc = sweep_orphans(e, &keep);
	}
	free(live.items);
	heartbeat_write(e, now);
	saas__claim_drop(e, "reconcile");
	/* The orphans were just looked for: a first sweep that takes the reaper's lease need not again. */
	e->reaping = true;
	return rc < 0 ? saas__error_wrap(rc, "reconcile: listing VMs") : SAAS_OK;
}

/*
 * End a sandbox the sweep read as over. The close re-checks, in the store,
 * that its expiry is still the one read: an extend that landed since keeps it
 * (and its VM) alive, and the next sweep looks again.
 */
static int sweep_end(saas_engine *e, saas_store_sandbox *sb, int reason, int64_t now, int64_t bill_until)
{
	int rc = saas__sandbox_end(e, sb, reason, bill_until < now ? bill_until : now, bill_until,
	                           SAAS__END_IF_EXPIRY);

	if (rc == SAAS_ESTATE) {
		saas__log(e, SAAS_LOG_INFO, "sandbox %s was extended meanwhile; it runs on", sb->id);
		return rc;
	}
	if (rc < 0) {
		saas__log(e, SAAS_LOG_ERROR, "ending sandbox %s failed: %s", sb->id, saas_error_last()->message);
		return rc;
	}
	sb->status = SAAS_SANDBOX_DESTROYED;
	return SAAS_OK;
}

/*
 * Pause, rather than end, a ready sandbox whose timeout came and that asked
 * for it (saas_create_options.on_timeout). Read again first: an extend or a
 * pause that landed since wins. A driver that cannot save it (no snapshots,
 * a failed save) ends it as any other expired one: its time is up either way.
 * 1 when it was so ended.
 */
static int sweep_pause(saas_engine *e, saas_store_sandbox *sb, int64_t now)
{
	saas_store_sandbox row;
	int rc;

	if ((rc = e->store->sandbox_get(e->store_ctx, sb->id, &row)) < 0)
		return rc;
	if (row.status != SAAS_SANDBOX_READY || row.expires_at_ms > now) {
		*sb = row;
		return SAAS_OK;
	}
	if ((rc = saas__sandbox_pause_row(e, &row, NULL)) == SAAS_OK) {
		saas__log(e, SAAS_LOG_INFO, "sandbox %s paused at its timeout (it asked to be)", row.id);
		*sb = row;
		return SAAS_OK;
	}
	if (rc == SAAS_ESTATE || rc == SAAS_ENOTFOUND)
		return rc; /* moved by someone else meanwhile: the next sweep looks again */
	saas__log(e, SAAS_LOG_WARN, "sandbox %s could not be paused at its timeout (%s); ending it", row.id,
	          saas_error_last()->message);
	return sweep_end(e, sb, SAAS_END_EXPIRED, now, sb->expires_at_ms) == SAAS_OK ? 1 : SAAS_OK;
}

static int by_account(const void *a, const void *b)
{
	return strcmp(((const saas_store_sandbox *)a)->account_id, ((const saas_store_sandbox *)b)->account_id);
}

/*
 * Accounts whose credit is gone: every ready (or paused) sandbox of theirs
 * stops at the moment the balance reached zero, even if that moment passed
 * while no engine ran. Accounts an operator disabled: every ready sandbox of
 * theirs stops, billed to the moment of the disable (an engine that did not
 * do it then, as the store-only admin commands' cannot, or a create that
 * slipped past it). `ready` holds no creating sandboxes; it is reordered by
 * account.
 */
static int sweep_credit(saas_engine *e, saas_store_sandbox *ready, size_t n, int64_t now, unsigned int *destroyed)
{
	qsort(ready, n, sizeof(*ready), by_account);
	for (size_t i = 0, j; i < n; i = j) {
		saas_store_account acc;
		int64_t at;
		int rc;

		for (j = i + 1; j < n && strcmp(ready[j].account_id, ready[i].account_id) == 0; j++)
			;
		if ((rc = e->store->account_get(e->store_ctx, ready[i].account_id, &acc)) < 0)
			return rc;
		if (acc.disabled_at_ms) {
			for (size_t k = i; k < j; k++) {
				saas__log(e, SAAS_LOG_WARN, "account %s is disabled; destroying %s", acc.id, ready[k].id);
				if (sweep_end(e, &ready[k], SAAS_END_DISABLED, now, acc.disabled_at_ms) == SAAS_OK)
					(*destroyed)++;
			}
			continue;
		}
		at = saas__exhausted_at(acc.credit_usd_micro - acc.charged_usd_micro, &ready[i], j - i, now);
		if (at < 0)
			continue;
		for (size_t k = i; k < j; k++) {
			saas__log(e, SAAS_LOG_WARN, "account %s is out of credit; destroying %s", acc.id, ready[k].id);
			if (sweep_end(e, &ready[k], SAAS_END_CREDIT, now, at) == SAAS_OK)
				(*destroyed)++;
		}
	}
	return SAAS_OK;
}

int saas__account_sandboxes_end(saas_engine *e, const char *account_id, unsigned int *ended)
{
	saas_store_filter f;
	struct saas__rows r;
	int64_t now = saas__engine_now(e);
	int rc, failed = SAAS_OK;

	*ended = 0;
	memset(&f, 0, sizeof(f));
	f.account_id = account_id;
	f.live = 1;
	rc = saas__store_sandboxes(e->store, e->store_ctx, &f, &r.items, &r.count);
	for (size_t i = 0; rc == SAAS_OK && i < r.count; i++) {
		saas_store_sandbox *sb = &r.items[i];
		int one;

		if (saas__closes_pending(e, sb->id))
			continue;
		/* A creating one: its row is closed, and its create call finds that and unmakes the VM (as at expiry). */
		one = sb->status == SAAS_SANDBOX_CREATING ? saas__sandbox_close(e, sb, SAAS_END_DISABLED, now, now, 0)
		                                           : saas__sandbox_end(e, sb, SAAS_END_DISABLED, now, now, 0);
		if (one == SAAS_OK)
			(*ended)++;
		else if (failed == SAAS_OK)
			failed = one;
	}
	free(r.items);
	return rc < 0 ? rc : failed;
}

/*
 * Executions that finished more than the retention ago go, output and all.
 * A bounded batch per sweep keeps each store transaction short; a backlog is
 * worked off over the following sweeps. A failure is logged, never fatal:
 * expiring sandboxes matters more than pruning.
 */
#define PRUNE_BATCH 500

static void prune_executions(saas_engine *e, int64_t now)
{
	unsigned int pruned = 0;

	if (e->store->execution_prune(e->store_ctx, now - e->limits.execution_retention_s * 1000, PRUNE_BATCH, &pruned) < 0)
		saas__log(e, SAAS_LOG_WARN, "pruning old executions failed: %s", saas_error_last()->message);
	else if (pruned)
		saas__log(e, SAAS_LOG_DEBUG, "pruned %u executions finished over %lld s ago", pruned,
		          (long long)e->limits.execution_retention_s);
}

/*
 * Leases nobody can hold any more go (saas_store.lease_purge): those run out
 * over SAAS__LEASE_PURGE_AFTER_MS ago (a dead engine's "server:", the
 * "create:", "exec:" or "egress:" of work long taken over or ended, a
 * driver's), which a taker would find free all the same; and the requests
 * "netset:<id>" of sandboxes that ended, which nobody is left to answer. A
 * request of a live sandbox stays, run out or not: it is one until answered
 * (sandbox_network.c). The grace keeps clocks a little apart from mattering.
 * A bounded batch per sweep, as for executions; a failure is logged.
 */
static void prune_leases(saas_engine *e, int64_t now)
{
	unsigned int purged = 0;

	if (e->store->lease_purge(e->store_ctx, now - SAAS__LEASE_PURGE_AFTER_MS, PRUNE_BATCH, &purged) < 0)
		saas__log(e, SAAS_LOG_WARN, "purging dead leases failed: %s", saas_error_last()->message);
	else if (purged)
		saas__log(e, SAAS_LOG_DEBUG, "purged %u dead leases", purged);
}

/*
 * The reaper's lease: one engine of those sharing a store sweeps at a time.
 * Taken at each sweep (which renews it), and again during a long pass, so a
 * pass stops where it is once another engine took over. 1 held, 0 not, or an
 * error. *fresh: this engine just took it over (or took it first).
 */
static int reaper_lease(saas_engine *e, bool *fresh)
{
	int rc = saas__claim_once(e, "reaper");

	if (fresh)
		*fresh = rc == 1 && !e->reaping;
	if (rc >= 0)
		e->reaping = rc == 1;
	if (rc >= 0)
		e->reaper_lease_at_ms = saas__engine_now(e);
	return rc;
}

/*
 * Renew the reaper's lease when a third of its ttl has passed; false once
 * another engine holds it (a store that cannot say lets the pass go on).
 */
static bool reaper_lease_keep(saas_engine *e)
{
	if (saas__engine_now(e) - e->reaper_lease_at_ms < e->claims.ttl_ms / 3)
		return true;
	return reaper_lease(e, NULL) != 0;
}

int saas__sweep(saas_engine *e, unsigned int *destroyed)
{
	struct saas__rows live;
	int64_t now = saas__engine_now(e);
	unsigned int count = 0;
	bool fresh = false;
	int rc;

	/* Ends this engine could not record before (kept in its memory and state directory): their VMs are gone already. */
	saas__closes_retry(e);
	/* Without a heartbeat thread, the sweep is the VM hosts' heartbeat too. */
	if (!e->hosts.running)
		saas__hosts_beat(e);
	/* Without background threads the sweep renews this engine's leases too. */
	if (e->flags & SAAS_ENGINE_NO_REAPER)
		saas__claims_renew(e);
	/* Every engine, reaper or not: the network changes other servers stored for the guests it serves. */
	saas__egress_requests(e);
	/*
	 * The lease spares the engines duplicate work; it is not what makes the
	 * work safe. Every close the sweep makes is conditional in the store and
	 * every destroy idempotent, so a store that cannot record the lease (down,
	 * or full) gets a sweep all the same: its expired VMs must still go.
	 */
	if ((rc = reaper_lease(e, &fresh)) < 0)
		saas__log(e, SAAS_LOG_WARN, "reaper: the store cannot record the reaper's lease (%s); sweeping anyway",
		          saas_error_last()->message);
	else if (rc == 0) {
		/* Another engine sweeps the store; this one keeps its own heartbeat and pools. */
		heartbeat_write(e, now);
		if (e->flags & SAAS_ENGINE_NO_REAPER)
			saas__pool_refill(e);
		if (destroyed)
			*destroyed = 0;
		return SAAS_OK;
	}
	if ((rc = live_rows(e, &live)) < 0)
		return rc;
	/*
	 * Credit first: a sandbox whose account ran dry before it expired is billed
	 * to the moment the credit ended, not to its expiry. Ready ones go first in
	 * the array, creating ones after (sweep_credit reorders only the ready part).
	 */
	{
		saas_store_sandbox *sorted = calloc(live.count ? live.count : 1, sizeof(*sorted));
		size_t k = 0, nready;
		if (!sorted) {
			rc = saas__oom();
			goto out;
		}
		/* Those whose end waits to be recorded are over: nothing more to decide about them. */
		/* Paused ones too: they cost their paused price, and end with the credit as running ones do. */
		for (size_t i = 0; i < live.count; i++)
			if (live.items[i].status != SAAS_SANDBOX_CREATING && !saas__closes_pending(e, live.items[i].id))
				sorted[k++] = live.items[i];
		nready = k;
		for (size_t i = 0; i < live.count; i++)
			if (live.items[i].status == SAAS_SANDBOX_CREATING && !saas__closes_pending(e, live.items[i].id))
				sorted[k++] = live.items[i];
		free(live.items);
		live.items = sorted;
		live.count = k;
		/* A failure here must not spare the expired ones below. */
		if (sweep_credit(e, live.items, nready, now, &count) < 0)
			saas__log(e, SAAS_LOG_ERROR, "reaper: checking credit failed: %s", saas_error_last()->message);
	}
	/* One sandbox the store fails on must not spare the others: each is ended on its own. */
	for (size_t i = 0; i < live.count; i++) {
		saas_store_sandbox *sb = &live.items[i];
		if (!reaper_lease_keep(e)) {
			saas__log(e, SAAS_LOG_WARN, "reaper: another server took the sweep over; stopping this pass");
			break;
		}
		/*
		 * On a shared store, a create whose server is gone: undone now, not at
		 * its expiry. (With a store of its own, only this engine creates, and
		 * its reconcile undid what the last one left.)
		 */
		if (sb->status == SAAS_SANDBOX_CREATING && e->claims.shared && create_undo(e, sb, now) == 1) {
			count++;
			continue;
		}
		if (sb->status == SAAS_SANDBOX_DESTROYED || sb->expires_at_ms > now)
			continue;
		if (sb->on_timeout == SAAS_ON_TIMEOUT_PAUSE && sb->status != SAAS_SANDBOX_CREATING &&
		    sb->status != SAAS_SANDBOX_PAUSED) {
			/* Pausing or resuming (a fork's snapshot, a call's pause): its timeout waits for the next sweep. */
			if (sb->status == SAAS_SANDBOX_READY && sweep_pause(e, sb, now) == 1)
				count++;
			continue;
		}
		if (sb->status == SAAS_SANDBOX_CREATING) {
			/* Still being made by a create call: it will find the row closed and clean up. */
			if (saas__sandbox_close(e, sb, SAAS_END_EXPIRED, now, now, sb->expires_at_ms) == SAAS_OK) {
				sb->status = SAAS_SANDBOX_DESTROYED;
				count++;
			}
		} else if (sweep_end(e, sb, SAAS_END_EXPIRED, now, sb->expires_at_ms) == SAAS_OK) {
			count++;
		}
	}
	if (++e->sweeps % EXEC_CHECK_EVERY == 0 || fresh) {
		executions_orphaned(e, &live, now);
		saas__egress_adopt(e, live.items, live.count);
	}
	/* A reaper that just took over looks for what the last one's engine may have left at once. */
	if (e->sweeps % ORPHAN_SWEEP_EVERY == 0 || fresh) {
		size_t k = 0;
		for (size_t i = 0; i < live.count; i++)
			if (live.items[i].status != SAAS_SANDBOX_DESTROYED)
				live.items[k++] = live.items[i];
		live.count = k;
		/* Creating sandboxes are live rows too, so their half-made VMs are safe here. */
		if ((rc = sweep_orphans(e, &live)) < 0)
			goto out;
	}
	heartbeat_write(e, now);
	prune_executions(e, now);
	prune_leases(e, now);
	/* Without background threads the sweep is the pools' refill too (a failure is logged and backs off). */
	if (e->flags & SAAS_ENGINE_NO_REAPER)
		saas__pool_refill(e);
	rc = SAAS_OK;
out:
	free(live.items);
	if (destroyed)
		*destroyed = count;
	return rc;
}

/* Destroy what the driver runs that no live sandbox owns, now. */
int saas__orphan_sweep(saas_engine *e)
{
	struct saas__rows live;
	size_t k = 0;
	int rc;

	if ((rc = live_rows(e, &live)) < 0)
		return rc;
	for (size_t i = 0; i < live.count; i++)
		if (live.items[i].status != SAAS_SANDBOX_DESTROYED)
			live.items[k++] = live.items[i];
	live.count = k;
	rc = sweep_orphans(e, &live);
	free(live.items);
	return rc;
}

static void *reaper_main(void *arg)
{
	saas_engine *e = arg;
	struct timespec ts;

	pthread_mutex_lock(&e->mu);
	while (!e->stopping) {
		saas__deadline(&ts, CLOCK_REALTIME, e->reaper_interval_ms);
		pthread_cond_timedwait(&e->cond, &e->mu, &ts);
		if (e->stopping)
			break;
		pthread_mutex_unlock(&e->mu);
		saas__error_clear();
		if (saas__sweep(e, NULL) < 0)
			saas__log(e, SAAS_LOG_ERROR, "reaper sweep failed: %s", saas_error_last()->message);
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int saas__reaper_start(saas_engine *e)
{
	int rc = pthread_create(&e->reaper, NULL, reaper_main, e);

	if (rc != 0)
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the reaper thread");
	e->reaper_running = true;
	return SAAS_OK;
}

void saas__reaper_stop(saas_engine *e)
{
	if (!e->reaper_running)
		return;
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->reaper, NULL);
	e->reaper_running = false;
}
