/*
 * Fork, pause and resume: a sandbox's state saved into a driver snapshot
 * (driver table version 4) and made into VMs again.
 *
 *   pause:  ready -> pausing -> paused      the VM goes; its state lives in the snapshot
 *   resume: paused -> resuming -> ready     a new VM of the same name from the snapshot
 *   fork:   ready -> pausing -> ready       the parent runs on; N children from a
 *                                           one-off snapshot, deleted once they are made
 *                                           (side by side: fork_children)
 *
 * Each step is a conditional store transition (sandbox_set_state), so two
 * calls racing on one sandbox, or a destroy or the reaper racing with either,
 * find out from the store and back out: whoever loses cleans up the VM or the
 * snapshot it made. The snapshot's name is written to the row before the
 * driver is asked to make it, so after a crash reconcile knows every snapshot
 * a row may own and deletes the others (saas__snapshots_reconcile).
 *
 * Billing: a row's paused_at_ms is set while it is paused (and resuming);
 * billing.c bills that time at the row's paused price instead of its compute
 * price. The expiry runs through a pause.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

bool saas__can_snapshot(const saas_engine *e)
{
	const saas_driver *d = e->driver;

	/* A table older than version 4 ends before the snapshot slots: never read them. */
	return d && d->version >= 4 && d->vm_snapshot && d->vm_restore && d->snapshot_delete && d->snapshot_list;
}

static int need_snapshots(saas_engine *e)
{
	int rc;

	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	if (!saas__can_snapshot(e))
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
		                   "the %s driver cannot save a sandbox's state: fork, pause and resume are not "
		                   "available on this server", e->driver->name);
	return SAAS_OK;
}

void saas__snapshot_drop(saas_engine *e, const char *host_id, const char *snap)
{
	void *ctx;

	if (!snap[0] || !saas__can_snapshot(e))
		return;
	if (saas__vm_driver(e, host_id, &ctx) < 0 || e->driver->snapshot_delete(ctx, snap) < 0)
		saas__log(e, SAAS_LOG_WARN, "deleting snapshot %s failed (%s); the next start deletes it", snap,
		          saas_error_last()->message);
}

/* This thread's error, kept across the cleanup calls that would overwrite it (a driver's with no class is the driver's). */
static void keep_error(struct saas__kept_error *k, int code)
{
	saas__error_keep(k, code);
	if (!k->klass)
		k->klass = SAAS_ERRCLASS_DRIVER;
}

/*
 * A driver's failure as the caller sees it: a VM or snapshot the driver
 * cannot find is the backend's fault too; a host with no room now (EBUSY:
 * its memory) is said as such, a 503 to try again.
 */
static int driver_failed(const struct saas__kept_error *k, const char *what)
{
	int code = k->code == SAAS_ENOTSUP || k->code == SAAS_ENOMEM || k->code == SAAS_EBUSY ? k->code : SAAS_EBACKEND;

	return saas__error(code, k->klass, k->backend_code, "%s: %s", what, k->message);
}

/*
 * A restore's failure (a resume, a fork's child): a host with no room for
 * the VM (the driver's memory refusal) says when to try again, as a
 * create's refusal does (REST's Retry-After).
 */
static int restore_failed(const struct saas__kept_error *k, const char *what)
{
	int rc = driver_failed(k, what);

	if (rc == SAAS_EBUSY)
		saas__error_set_limit(NULL, SAAS__ROOM_RETRY_MS);
	return rc;
}

/* Move *row from `from` to `to` with these pause fields; *row follows on success. */
static int set_state(saas_engine *e, saas_store_sandbox *row, int from, int to, int64_t paused_at_ms,
                     int64_t paused_ms, const char *snap)
{
	saas_store_sandbox next = *row;
	int rc;

	next.status = to;
	next.paused_at_ms = paused_at_ms;
	next.paused_ms = paused_ms;
	saas__strlcpy(next.snapshot, snap, sizeof(next.snapshot));
	if ((rc = e->store->sandbox_set_state(e->store_ctx, row->id, from, &next)) == SAAS_OK)
		*row = next;
	return rc;
}

/* The store's ESTATE in words for the caller: someone else moved the sandbox first. */
static int moved_meanwhile(int rc, const char *id, const char *doing)
{
	if (rc != SAAS_ESTATE && rc != SAAS_ENOTFOUND)
		return rc;
	return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
	                   "sandbox '%s' was destroyed, or changed by another call, while it was being %s", id, doing);
}

/* A new snapshot name: [a-z0-9-], well inside the driver's 63. */
static int snapshot_name(char out[SAAS_STORE_SNAPSHOT_MAX + 1])
{
	return saas__id_new(out, "snap-", 20);
}

/* The balance pays for `count` sandboxes' minimum at `rate`, or SAAS_ECREDIT saying so. */
static int credit_for(saas_engine *e, const char *account_id, int64_t rate, unsigned int count, const char *what,
                      unsigned int *live)
{
	int64_t balance, spent, credit, need;
	char have[32], want[32];
	int rc;

	if ((rc = saas__account_live_balance(e, account_id, saas__engine_now(e), &balance, &spent, &credit, live)) < 0)
		return rc;
	need = saas_cost(rate, e->limits.min_balance_s) * count;
	if (balance > 0 && balance >= need)
		return SAAS_OK;
	return saas__error(SAAS_ECREDIT, SAAS_ERRCLASS_BILLING, 0,
	                   "balance %s USD cannot pay for %lld s of %s (%s USD); add credit",
	                   saas_usd_format(have, sizeof(have), balance), (long long)e->limits.min_balance_s, what,
	                   saas_usd_format(want, sizeof(want), need));
}

/* A row's stored policy as the driver takes it; *vmnet NULL for the driver's default. Free with rules_free. */
struct row_policy {
	saas_vm_network net;
	char **allow, **deny;
};

static int row_policy_get(saas_engine *e, const saas_store_sandbox *row, struct row_policy *p,
                          const saas_vm_network **vmnet)
{
	int rc;

	memset(p, 0, sizeof(*p));
	*vmnet = NULL;
	/* Made before the store kept a mode: the driver's default, as it was made with. */
	if (row->network_mode == SAAS_STORE_NETWORK_UNKNOWN)
		return SAAS_OK;
	if ((rc = saas__sandbox_rules_get(e, row, &p->allow, &p->deny)) < 0)
		return rc;
	p->net.mode = row->network_mode;
	p->net.allow = (const char *const *)p->allow;
	p->net.deny = (const char *const *)p->deny;
	p->net.account = row->account_id;
	*vmnet = &p->net;
	return SAAS_OK;
}

static void row_policy_free(struct row_policy *p)
{
	saas__rules_free(p->allow);
	saas__rules_free(p->deny);
}

static void spec_of(saas_vm_spec *spec, const saas_store_sandbox *row, const saas_vm_network *net)
{
	spec->name = row->id;
	spec->image = row->image;
	spec->vcpus = row->vcpus;
	spec->memory_mb = row->memory_mb;
	spec->disk_gb = row->disk_gb;
	spec->network = net;
}

/* ---- pause ---- */

int saas__local_sandbox_pause(saas_client *c, const char *id, saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	int rc;

	if ((rc = need_snapshots(e)) < 0)
		return rc;
	if ((rc = saas__sandbox_ready(c, id, &row)) < 0)
		return rc;
	return saas__sandbox_pause_row(e, &row, out);
}

/*
 * How long a sandbox that pauses on timeout keeps once paused: the account's
 * longest lifetime, so that it still ends some day, and no later than any
 * sandbox of the account could have been made to.
 */
static int paused_keep_s(saas_engine *e, const char *account_id, int64_t *keep_s)
{
	saas_limits lim;
	int rc;

	if ((rc = saas__account_limits(e, account_id, &lim)) < 0)
		return rc;
	*keep_s = lim.max_timeout_s > 0 ? lim.max_timeout_s : e->limits.max_timeout_s;
	return SAAS_OK;
}

int saas__sandbox_pause_row(saas_engine *e, saas_store_sandbox *rowp, saas_sandbox **out)
{
	saas_store_sandbox row = *rowp;
	const char *id = rowp->id;
	struct saas__kept_error k;
	char snap[SAAS_STORE_SNAPSHOT_MAX + 1];
	int64_t bytes = 0, started, now, keep_s = 0;
	void *ctx;
	int rc;

	if ((rc = need_snapshots(e)) < 0 || (rc = saas__vm_driver(e, row.host_id, &ctx)) < 0)
		return rc;
	if (row.on_timeout == SAAS_ON_TIMEOUT_PAUSE && (rc = paused_keep_s(e, row.account_id, &keep_s)) < 0)
		return rc;
	if ((rc = snapshot_name(snap)) < 0)
		return rc;
	started = saas__engine_now(e);
	/* The name goes to the row before the snapshot exists: after a crash, reconcile finds it either way. */
	if ((rc = set_state(e, &row, SAAS_SANDBOX_READY, SAAS_SANDBOX_PAUSING, 0, row.paused_ms, snap)) < 0)
		return moved_meanwhile(rc, id, "paused");
	if ((rc = e->driver->vm_snapshot(ctx, row.id, snap, 0, &bytes)) < 0) {
		keep_error(&k, rc);
		/* The driver's contract: the VM runs on as before and no snapshot is left. */
		if (set_state(e, &row, SAAS_SANDBOX_PAUSING, SAAS_SANDBOX_READY, 0, row.paused_ms, "") < 0)
			saas__log(e, SAAS_LOG_WARN, "sandbox %s: cannot mark it ready again after a failed pause (%s)", id,
			          saas_error_last()->message);
		return driver_failed(&k, "the sandbox could not be paused; it runs on");
	}
	now = saas__engine_now(e);
	if ((rc = set_state(e, &row, SAAS_SANDBOX_PAUSING, SAAS_SANDBOX_PAUSED, now, row.paused_ms, snap)) < 0) {
		/* Ended meanwhile (destroyed, expired): its saved state goes with it. A store outage: reconcile decides. */
		if (rc == SAAS_ESTATE || rc == SAAS_ENOTFOUND)
			saas__snapshot_drop(e, row.host_id, snap);
		return moved_meanwhile(rc, id, "paused");
	}
	/*
	 * The executions' channels ended with the VM. Their processes are saved
	 * with the rest and run on after a resume, but nobody reads their output.
	 */
	e->store->execution_fail_running(e->store_ctx, row.id, "the sandbox was paused", now);
	/*
	 * One that pauses on timeout keeps paused for keep_s from now (its
	 * timeout passed, or is near): never shortened, so a paused sandbox the
	 * caller extended further keeps that. A failure leaves the old expiry,
	 * which the sweep then honours; said, not fatal: it is paused.
	 */
	if (keep_s > 0 && row.expires_at_ms < now + keep_s * 1000) {
		if (e->store->sandbox_set_expiry(e->store_ctx, row.id, now + keep_s * 1000) == SAAS_OK)
			row.expires_at_ms = now + keep_s * 1000;
		else
			saas__log(e, SAAS_LOG_WARN, "sandbox %s: paused, but its paused lifetime could not be recorded (%s)",
			          row.id, saas_error_last()->message);
	}
	saas__egress_let_go(e, row.id);
	saas__log(e, SAAS_LOG_INFO, "sandbox %s paused in %lld ms (%lld bytes saved as %s)", row.id,
	          (long long)(now - started), (long long)bytes, snap);
	*rowp = row;
	return out ? saas__sandbox_public(e, &row, out) : SAAS_OK;
}

/* ---- resume ---- */

static int not_paused(const saas_store_sandbox *row)
{
	switch (row->status) {
	case SAAS_SANDBOX_READY:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' is not paused: it runs", row->id);
	case SAAS_SANDBOX_CREATING:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' is still being created", row->id);
	case SAAS_SANDBOX_PAUSING:
	case SAAS_SANDBOX_RESUMING:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' is %s; try again in a moment", row->id,
		                   saas_sandbox_status_name(row->status));
	}
	return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed (%s)", row->id,
	                   saas_end_reason_name(row->end_reason));
}

int saas__local_sandbox_resume(saas_client *c, const char *id, saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	saas_vm_spec spec;
	const saas_vm_network *vmnet;
	struct row_policy pol;
	struct saas__kept_error k;
	char snap[SAAS_STORE_SNAPSHOT_MAX + 1];
	unsigned int live;
	int64_t started, now;
	void *ctx;
	int rc;

	if ((rc = need_snapshots(e)) < 0)
		return rc;
	if ((rc = saas__sandbox_get_owned(c, id, &row)) < 0)
		return rc;
	if (row.status != SAAS_SANDBOX_PAUSED)
		return not_paused(&row);
	/* On the host that holds its snapshot, where its place was kept while it was paused. */
	if ((rc = saas__vm_driver(e, row.host_id, &ctx)) < 0)
		return rc;
	started = saas__engine_now(e);
	if (row.expires_at_ms <= started)
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                   "sandbox '%s' expired while it was paused; create a new one", id);
	/* Compute billing starts again: the balance must pay for its minimum, as for a create. */
	if ((rc = credit_for(e, c->account_id, row.usd_micro_per_hour, 1, "this sandbox running", &live)) < 0)
		return rc;
	saas__strlcpy(snap, row.snapshot, sizeof(snap));
	if ((rc = set_state(e, &row, SAAS_SANDBOX_PAUSED, SAAS_SANDBOX_RESUMING, row.paused_at_ms, row.paused_ms,
	                    snap)) < 0)
		return moved_meanwhile(rc, id, "resumed");
	if ((rc = row_policy_get(e, &row, &pol, &vmnet)) == SAAS_OK) {
		spec_of(&spec, &row, vmnet);
		rc = e->driver->vm_restore(ctx, &spec, snap);
	}
	row_policy_free(&pol);
	if (rc < 0) {
		keep_error(&k, rc);
		if (set_state(e, &row, SAAS_SANDBOX_RESUMING, SAAS_SANDBOX_PAUSED, row.paused_at_ms, row.paused_ms,
		              snap) < 0)
			saas__log(e, SAAS_LOG_WARN, "sandbox %s: cannot mark it paused again after a failed resume (%s)", id,
			          saas_error_last()->message);
		return restore_failed(&k, "the sandbox could not be resumed; it stays paused");
	}
	now = saas__engine_now(e);
	/* The pause ends now: its time joins the total billed at the paused price. */
	if ((rc = set_state(e, &row, SAAS_SANDBOX_RESUMING, SAAS_SANDBOX_READY, 0,
	                    row.paused_ms + (now > row.paused_at_ms ? now - row.paused_at_ms : 0), "")) < 0) {
		keep_error(&k, rc);
		/* Nothing pays for the new VM: it goes. The row keeps the snapshot if it still stands. */
		e->driver->vm_destroy(ctx, row.id);
		if (rc != SAAS_ESTATE && rc != SAAS_ENOTFOUND &&
		    set_state(e, &row, SAAS_SANDBOX_RESUMING, SAAS_SANDBOX_PAUSED, row.paused_at_ms, row.paused_ms, snap) < 0)
			saas__log(e, SAAS_LOG_WARN, "sandbox %s: left resuming; the next start decides", id);
		return rc == SAAS_ESTATE || rc == SAAS_ENOTFOUND ? moved_meanwhile(rc, id, "resumed")
		                                                 : saas__error_raise(&k);
	}
	saas__snapshot_drop(e, row.host_id, snap);
	/*
	 * One that pauses on timeout gets its lifetime again from now: it was
	 * kept paused past it (saas__sandbox_pause_row), and would otherwise
	 * run until the paused bound. Others keep the expiry they ran toward.
	 */
	if (row.on_timeout == SAAS_ON_TIMEOUT_PAUSE) {
		int64_t lifetime = row.timeout_s > 0 ? row.timeout_s : e->limits.default_timeout_s;
		if (e->store->sandbox_set_expiry(e->store_ctx, row.id, now + lifetime * 1000) == SAAS_OK)
			row.expires_at_ms = now + lifetime * 1000;
		else
			saas__log(e, SAAS_LOG_WARN, "sandbox %s: resumed, but its new lifetime could not be recorded (%s)",
			          row.id, saas_error_last()->message);
	}
	saas__egress_hold(e, &row);
	saas__log(e, SAAS_LOG_INFO, "sandbox %s resumed in %lld ms", row.id, (long long)(now - started));
	saas__metrics_track(e, row.id);
	return out ? saas__sandbox_public_new(e, &row, out) : SAAS_OK;
}

/* ---- fork ---- */

struct fork_run;
static void *fork_children_main(void *arg);

/*
 * Snapshot a running parent, keeping it running: ready -> pausing -> ready.
 * With run, and a driver that can (version 16, snapshot_expect), the
 * children are begun in *thread (*early true) before the snapshot is taken:
 * their VMs start while the parent's state is saved, each waiting in the
 * driver for what it needs of it; the caller joins the thread. Otherwise
 * the caller makes them once this returned.
 */
static int fork_snapshot(saas_engine *e, saas_store_sandbox *parent, char snap[SAAS_STORE_SNAPSHOT_MAX + 1],
                         struct fork_run *run, pthread_t *thread, bool *early)
{
	struct saas__kept_error k;
	void *ctx;
	int rc;

	*early = false;
	if ((rc = snapshot_name(snap)) < 0 || (rc = saas__vm_driver(e, parent->host_id, &ctx)) < 0)
		return rc;
	if ((rc = set_state(e, parent, SAAS_SANDBOX_READY, SAAS_SANDBOX_PAUSING, 0, parent->paused_ms, snap)) < 0)
		return moved_meanwhile(rc, parent->id, "forked");
	if (run && e->driver->version >= 16 && e->driver->snapshot_expect &&
	    e->driver->snapshot_expect(ctx, snap, 1) == SAAS_OK) {
		if (!(*early = pthread_create(thread, NULL, fork_children_main, run) == 0))
			e->driver->snapshot_expect(ctx, snap, 0);
	}
	saas__error_clear(); /* a driver that cannot has said so: the children come after */
	rc = e->driver->vm_snapshot(ctx, parent->id, snap, 1, NULL);
	if (rc < 0)
		keep_error(&k, rc);
	/* The restores still waiting go on: to the snapshot, or to its absence. */
	if (*early)
		e->driver->snapshot_expect(ctx, snap, 0);
	/* The parent runs on either way; if it ended meanwhile, the snapshot is of no use to anyone. */
	if (set_state(e, parent, SAAS_SANDBOX_PAUSING, SAAS_SANDBOX_READY, 0, parent->paused_ms, "") < 0) {
		if (rc == SAAS_OK)
			saas__snapshot_drop(e, parent->host_id, snap);
		return moved_meanwhile(SAAS_ESTATE, parent->id, "forked");
	}
	return rc < 0 ? driver_failed(&k, "the sandbox's state could not be saved for the fork") : SAAS_OK;
}

static int fork_child_made(saas_client *c, const saas_store_sandbox *parent, const saas_size *size, const char *snap,
                           int64_t timeout, unsigned int max_live, const struct saas__network *net,
                           const saas_vm_network *vmnet, const char *id, saas_store_sandbox *row);

/*
 * One fork's children, made side by side (fork_children): what every child
 * is made of, read-only while workers run, and what they share under mu.
 */
struct fork_run {
	saas_client *c;
	const saas_store_sandbox *parent;
	const saas_size *size;
	const char *snap;
	int64_t timeout;
	unsigned int max_live, count;
	const struct saas__network *net;
	const saas_vm_network *vmnet;
	saas_store_sandbox *rows;        /* rows[i]: child i, READY once made */
	pthread_mutex_t mu;
	unsigned int next;               /* under mu: the next child to make */
	bool made[SAAS_FORK_MAX];        /* under mu: child i is made, and is undone if the fork fails */
	int rc;                          /* under mu: the first failure; no child is begun after it */
	struct saas__kept_error k;       /* under mu: its error, as its thread had it */
};

/* Make one child from the snapshot: a create whose VM is a restore, its lease held as a create's (sandbox.c). */
static int fork_child(struct fork_run *r, saas_store_sandbox *row)
{
	char id[SAAS_ID_MAX + 1];
	int rc;

	if ((rc = saas__id_new(id, "sbx-", 20)) < 0)
		return rc;
	if ((rc = saas__claim_kind(r->c->engine, "create", id)) <= 0)
		return rc < 0 ? rc : saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_ARGS, 0, "sandbox id %s is taken", id);
	rc = fork_child_made(r->c, r->parent, r->size, r->snap, r->timeout, r->max_live, r->net, r->vmnet, id, row);
	saas__claim_drop_kind(r->c->engine, "create", id);
	return rc;
}

/* A worker: the next child not yet begun, until none is left or one failed. */
static void *fork_worker(void *arg)
{
	struct fork_run *r = arg;

	for (;;) {
		unsigned int i;
		int rc;

		pthread_mutex_lock(&r->mu);
		if (r->rc < 0 || r->next >= r->count) {
			pthread_mutex_unlock(&r->mu);
			break;
		}
		i = r->next++;
		pthread_mutex_unlock(&r->mu);
		rc = fork_child(r, &r->rows[i]);
		pthread_mutex_lock(&r->mu);
		if (rc == SAAS_OK)
			r->made[i] = true;
		else if (r->rc == SAAS_OK) {
			r->rc = rc;
			keep_error(&r->k, rc);
		}
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

/*
 * Make the fork's children, up to SAAS_FORK_AT_ONCE at once: each is a
 * create of its own (its row placed and counted against max_live by the
 * store, its VM admitted by the driver's memory check), as concurrent creates
 * are. This thread is one of the workers; a thread that cannot be started
 * leaves its children to the others. On failure, the first error stands, no
 * child is begun after it, and those made are left in r->made for the caller
 * to undo once all workers are done.
 */
static int fork_children(struct fork_run *r)
{
	pthread_t threads[SAAS_FORK_AT_ONCE];
	unsigned int want = r->count < SAAS_FORK_AT_ONCE ? r->count : SAAS_FORK_AT_ONCE, started = 0;

	while (started + 1 < want && pthread_create(&threads[started], NULL, fork_worker, r) == 0)
		started++;
	fork_worker(r);
	for (unsigned int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	if (r->rc < 0)
		return saas__error_raise(&r->k);
	saas__error_clear();
	return SAAS_OK;
}

static void *fork_children_main(void *arg)
{
	struct fork_run *r = arg;

	/* Its error is kept in r (r->rc, r->k) for the caller. */
	if (fork_children(r) < 0)
		saas__error_clear();
	return NULL;
}

static int fork_child_made(saas_client *c, const saas_store_sandbox *parent, const saas_size *size, const char *snap,
                           int64_t timeout, unsigned int max_live, const struct saas__network *net,
                           const saas_vm_network *vmnet, const char *id, saas_store_sandbox *row)
{
	saas_engine *e = c->engine;
	saas_vm_spec spec;
	struct saas__kept_error k;
	int64_t now = saas__engine_now(e);
	void *ctx;
	int rc;

	if ((rc = saas__vm_driver(e, parent->host_id, &ctx)) < 0)
		return rc;
	saas__row_init(row, id, c->account_id, size, parent->image, SAAS_SANDBOX_CREATING, now,
	               vmnet ? vmnet->mode : parent->network_mode, e->paused_price);
	saas__strlcpy(row->parent_id, parent->id, sizeof(row->parent_id));
	/* What the parent was made with goes with its state: metadata, environment, what its timeout does. */
	row->metadata = parent->metadata;
	row->envs = parent->envs;
	row->on_timeout = parent->on_timeout;
	row->auto_resume = parent->auto_resume;
	row->timeout_s = timeout;
	/* As a create's: a restore stuck for good (its engine died) is still swept. */
	row->expires_at_ms = now + (timeout + SAAS_CREATE_GRACE_S) * 1000;
	/* On the parent's host, which holds the snapshot: if it has no room, there is none. */
	if ((rc = saas__sandbox_insert_placed(e, row, max_live, parent->host_id)) < 0)
		return rc;
	if (net && net->mode == SAAS_NETWORK_POLICY && (rc = saas__store_rules(e, row, net)) < 0)
		return rc;
	spec_of(&spec, row, vmnet);
	if ((rc = e->driver->vm_restore(ctx, &spec, snap)) < 0) {
		keep_error(&k, rc);
		e->driver->vm_destroy(ctx, row->id);
		saas__sandbox_close(e, row, SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		row->status = SAAS_SANDBOX_DESTROYED;
		return restore_failed(&k, "a fork's child could not be made");
	}
	now = saas__engine_now(e);
	row->ready_at_ms = now;
	row->expires_at_ms = now + timeout * 1000;
	if ((rc = e->store->sandbox_set_ready(e->store_ctx, row->id, row->ready_at_ms, row->expires_at_ms)) < 0) {
		keep_error(&k, rc);
		e->driver->vm_destroy(ctx, row->id);
		if (rc != SAAS_ESTATE)
			saas__sandbox_close(e, row, SAAS_END_FAILED, now, 0, 0);
		row->status = SAAS_SANDBOX_DESTROYED;
		return rc == SAAS_ESTATE ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                                       "a fork's child was destroyed while it was being made")
		                         : saas__error_raise(&k);
	}
	row->status = SAAS_SANDBOX_READY;
	saas__egress_hold(e, row);
	return SAAS_OK;
}

int saas__local_sandbox_fork(saas_client *c, const char *id, unsigned int count, int64_t timeout_s,
                             const struct saas__network *net, saas_sandbox_list **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox parent, rows[SAAS_FORK_MAX];
	const saas_size *size;
	const saas_vm_network *vmnet = NULL;
	saas_vm_network given;
	struct row_policy pol;
	saas_limits lim;
	saas_sandbox_list *list = NULL;
	char snap[SAAS_STORE_SNAPSHOT_MAX + 1] = "", **metadata = NULL, **envs = NULL;
	struct fork_run run;
	struct saas__network copied;
	saas_store_sandbox parent_of;    /* the children's copy: the parent's row changes state meanwhile */
	pthread_t early_thread;
	bool early = false;
	unsigned int made = 0, live;
	int64_t timeout = timeout_s ? timeout_s : e->limits.default_timeout_s, started;
	int rc;

	memset(&pol, 0, sizeof(pol));
	memset(&run, 0, sizeof(run));
	memset(&copied, 0, sizeof(copied));
	if ((rc = need_snapshots(e)) < 0)
		return rc;
	if ((rc = saas__sandbox_ready(c, id, &parent)) < 0)
		return rc;
	if (timeout > e->limits.max_timeout_s)
		return saas__inval("timeout %lld s is over the maximum of %lld s", (long long)timeout,
		                   (long long)e->limits.max_timeout_s);
	/* Children are new sandboxes of the parent's size at today's price; a size no longer offered cannot be had. */
	if (!(size = saas__engine_size(e, parent.size)))
		return saas__inval("sandbox '%s' is of size '%s', which this server no longer offers", id, parent.size);
	if ((rc = credit_for(e, c->account_id, size->usd_micro_per_hour, count, "the fork's children", &live)) < 0)
		return rc;
	if ((rc = saas__account_limits(e, c->account_id, &lim)) < 0)
		return rc;
	/* The store enforces it child by child; said at once here, nothing is snapshotted for nothing. */
	if (live + count > lim.max_sandboxes)
		return saas__error_limit("max_sandboxes", 0,
		                         "this account has %u sandboxes; %u more would pass its limit of %u "
		                         "(max_sandboxes); destroy some first", live, count, lim.max_sandboxes);
	if ((rc = saas__engine_room(e, size->disk_gb * count)) < 0)
		return rc;
	for (unsigned int i = 0; i < count; i++)
		if ((rc = saas__create_token_take(e, c->account_id, lim.creates_per_minute)) < 0)
			return rc;
	if (net) {
		given.mode = net->mode;
		given.allow = (const char *const *)net->allow;
		given.deny = (const char *const *)net->deny;
		given.account = parent.account_id;
		vmnet = &given;
	} else if ((rc = row_policy_get(e, &parent, &pol, &vmnet)) < 0) {
		return rc;
	}

	/* The children's rows borrow them from the parent's record (saas_store_sandbox.metadata). */
	if ((rc = saas__sandbox_values(e, parent.id, &metadata, &envs)) < 0)
		goto out;
	parent.metadata = (const char *const *)metadata;
	parent.envs = (const char *const *)envs;

	/* The parent's policy copied to each child: as a create's, stored with its row. */
	run.net = net;
	if (!net && vmnet && vmnet->mode == SAAS_NETWORK_POLICY) {
		copied.mode = vmnet->mode;
		copied.allow = pol.allow;
		copied.deny = pol.deny;
		run.net = &copied;
	}
	parent_of = parent;
	run.c = c;
	run.parent = &parent_of;
	run.size = size;
	run.snap = snap;
	run.timeout = timeout;
	run.max_live = lim.max_sandboxes;
	run.count = count;
	run.vmnet = vmnet;
	run.rows = rows;
	pthread_mutex_init(&run.mu, NULL);

	started = saas__engine_now(e);
	rc = fork_snapshot(e, &parent, snap, &run, &early_thread, &early);
	if (early)
		pthread_join(early_thread, NULL);
	if (rc < 0)
		snap[0] = '\0'; /* dropped by fork_snapshot, or never taken; a child begun meanwhile failed with it */
	else
		rc = early ? (run.rc < 0 ? saas__error_raise(&run.k) : SAAS_OK) : fork_children(&run);
	pthread_mutex_destroy(&run.mu);
	for (unsigned int i = 0; i < count; i++)
		made += run.made[i];
	if (rc < 0)
		goto out;
	for (unsigned int i = 0; i < count; i++)
		saas__metrics_track(e, rows[i].id);
	if (!(list = calloc(1, sizeof(*list))) || !(list->items = calloc(count, sizeof(*list->items)))) {
		rc = saas__oom();
		goto out;
	}
	for (unsigned int i = 0; out && i < count; i++) {
		if ((rc = saas__sandbox_public_new(e, &rows[i], &list->items[i])) < 0)
			goto out;
		list->count = i + 1;
	}
	saas__log(e, SAAS_LOG_INFO, "sandbox %s forked into %u in %lld ms", id, count,
	          (long long)(saas__engine_now(e) - started));
	rc = SAAS_OK;
out:
	if (rc < 0) {
		struct saas__kept_error k;

		keep_error(&k, rc);
		/* All or nothing: the children made go, unbilled (each one that failed undid itself). */
		for (unsigned int i = 0; made && i < count; i++)
			if (run.made[i])
				saas__sandbox_end(e, &rows[i], SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		saas_sandbox_list_free(list);
		list = NULL;
		rc = saas__error_raise(&k);
	}
	saas__snapshot_drop(e, parent.host_id, snap);
	row_policy_free(&pol);
	saas__rules_free(metadata);
	saas__rules_free(envs);
	if (out)
		*out = list;
	else
		saas_sandbox_list_free(list);
	return rc;
}

/* ---- reconcile ---- */

struct snap_names {
	char (*names)[SAAS_STORE_SNAPSHOT_MAX + 1];
	size_t count, cap;
	int rc;
};

static int collect_snap(void *ud, const char *name)
{
	struct snap_names *s = ud;

	if ((s->rc = SAAS__ARRAY_RESERVE(s->names, s->cap, s->count + 1)) < 0)
		return 1;
	saas__strlcpy(s->names[s->count++], name, sizeof(s->names[0]));
	return 0;
}

static bool held(const struct snap_names *s, const char *name)
{
	for (size_t i = 0; name[0] && i < s->count; i++)
		if (strcmp(s->names[i], name) == 0)
			return true;
	return false;
}

/* A paused row whose state is gone: closed as lost, billed to the last moment known. */
static void lost(saas_engine *e, saas_store_sandbox *sb, int64_t last_known)
{
	int64_t until = last_known > sb->ready_at_ms ? last_known : sb->ready_at_ms;

	saas__log(e, SAAS_LOG_WARN, "sandbox %s: its saved state %s is gone; closing it", sb->id, sb->snapshot);
	sb->snapshot[0] = '\0';
	saas__sandbox_end(e, sb, SAAS_END_LOST, until, until, 0);
	sb->status = SAAS_SANDBOX_DESTROYED;
}

void saas__snapshots_reconcile(saas_engine *e, saas_store_sandbox *rows, size_t n, int64_t last_known)
{
	struct snap_names have = { NULL, 0, 0, SAAS_OK };
	int rc;

	if (!saas__can_snapshot(e))
		return;
	if ((rc = e->driver->snapshot_list(e->driver_ctx, collect_snap, &have)) < 0 || have.rc < 0) {
		saas__log(e, SAAS_LOG_ERROR, "reconcile: cannot list snapshots (%s); paused sandboxes are left as they are",
		          saas_error_last()->message);
		free(have.names);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		saas_store_sandbox *sb = &rows[i];
		int state = SAAS_VM_ABSENT;

		if (sb->status != SAAS_SANDBOX_PAUSED && sb->status != SAAS_SANDBOX_PAUSING &&
		    sb->status != SAAS_SANDBOX_RESUMING)
			continue;
		/* The snapshots listed are the engine's own driver's; a VM host's are its own. */
		if (sb->host_id[0])
			continue;
		if (saas__closes_pending(e, sb->id))
			continue;
		if (e->driver->vm_state(e->driver_ctx, sb->id, &state) < 0)
			state = SAAS_VM_ABSENT;
		if (sb->status == SAAS_SANDBOX_PAUSING && state == SAAS_VM_RUNNING) {
			/* A pause or a fork's snapshot that never finished: the VM runs on, ready. */
			if (set_state(e, sb, SAAS_SANDBOX_PAUSING, SAAS_SANDBOX_READY, 0, sb->paused_ms, "") == SAAS_OK)
				saas__log(e, SAAS_LOG_INFO, "sandbox %s: a pause or fork was cut short; it runs on", sb->id);
			continue;
		}
		if (sb->status == SAAS_SANDBOX_RESUMING && state != SAAS_VM_ABSENT) {
			/* A resume that never finished: its VM goes, the snapshot is the sandbox. */
			e->driver->vm_destroy(e->driver_ctx, sb->id);
			state = SAAS_VM_ABSENT;
		}
		if (!held(&have, sb->snapshot)) {
			lost(e, sb, last_known);
			continue;
		}
		if (sb->status != SAAS_SANDBOX_PAUSED) {
			/* Saved, and the VM gone: paused, billed as such from the last moment it was known to run. */
			int64_t at = sb->paused_at_ms ? sb->paused_at_ms : last_known;
			if (set_state(e, sb, sb->status, SAAS_SANDBOX_PAUSED, at, sb->paused_ms, sb->snapshot) == SAAS_OK)
				saas__log(e, SAAS_LOG_INFO, "sandbox %s: paused (an interrupted pause or resume)", sb->id);
		}
	}
	/* Snapshots no live row owns: a fork cut short, a pause whose sandbox ended. */
	for (size_t j = 0; j < have.count; j++) {
		bool owned = false;

		for (size_t i = 0; i < n && !owned; i++)
			owned = rows[i].status != SAAS_SANDBOX_DESTROYED && strcmp(rows[i].snapshot, have.names[j]) == 0;
		if (!owned) {
			saas__log(e, SAAS_LOG_WARN, "snapshot %s belongs to no sandbox; deleting it", have.names[j]);
			saas__snapshot_drop(e, "", have.names[j]);
		}
	}
	free(have.names);
}
