/*
 * The sandbox lifecycle: creating -> ready -> destroyed, with tenancy and
 * billing. Every transition is a store operation that either happens whole or
 * not at all, so a crash at any point leaves something reconcile can finish.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int saas__sandbox_get_owned(saas_client *c, const char *id, saas_store_sandbox *out)
{
	saas_engine *e = c->engine;
	int rc = e->store->sandbox_get(e->store_ctx, id, out);

	/* Another account's sandbox does not exist, as far as this client can tell. */
	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && strcmp(out->account_id, c->account_id) != 0))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no sandbox '%s'", id);
	if (rc == SAAS_OK)
		saas__closes_view(e, out);
	return rc;
}

/* A sandbox commands can run in right now. */
int saas__sandbox_ready(saas_client *c, const char *id, saas_store_sandbox *out)
{
	int rc;

	if ((rc = saas__engine_need_driver(c->engine)) < 0)
		return rc;
	if ((rc = saas__sandbox_get_owned(c, id, out)) < 0)
		return rc;
	switch (out->status) {
	case SAAS_SANDBOX_READY:
		if (out->expires_at_ms <= saas__engine_now(c->engine))
			return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
			                   "sandbox '%s' has expired; create a new one", id);
		return SAAS_OK;
	case SAAS_SANDBOX_CREATING:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' is still being created", id);
	case SAAS_SANDBOX_PAUSED:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' is paused; resume it first", id);
	case SAAS_SANDBOX_PAUSING:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                   "sandbox '%s' is being paused or forked; try again in a moment", id);
	case SAAS_SANDBOX_RESUMING:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                   "sandbox '%s' is being resumed; try again in a moment", id);
	default:
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed (%s)", id,
		                   saas_end_reason_name(out->end_reason));
	}
}

char *saas__preview_url(saas_engine *e, const saas_store_port *exposure)
{
	static const struct {
		const char *key;
		size_t len;
	} keys[] = { { "{name}", 6 }, { "{port}", 6 }, { "{id}", 4 } };
	saas__buf b = SAAS__BUF_INIT;
	const char *p = e->preview_url;
	char portstr[16];
	const char *values[3];

	snprintf(portstr, sizeof(portstr), "%u", exposure->port);
	values[0] = exposure->name;
	values[1] = portstr;
	values[2] = exposure->sandbox_id;
	while (*p) {
		size_t i;

		for (i = 0; i < SAAS_ARRAY_SIZE(keys) && strncmp(p, keys[i].key, keys[i].len) != 0; i++)
			;
		if (i < SAAS_ARRAY_SIZE(keys)) {
			if (saas__buf_puts(&b, values[i]) < 0)
				goto oom;
			p += keys[i].len;
		} else {
			if (saas__buf_put(&b, p, 1) < 0)
				goto oom;
			p++;
		}
	}
	return saas__buf_detach(&b, NULL);
oom:
	saas__buf_free(&b);
	return NULL;
}

/* A sandbox's exposed ports into sb->ports, each with its preview URL. */
static int sandbox_ports(saas_engine *e, saas_sandbox *sb)
{
	saas_store_port *rows = NULL;
	size_t n = 0;
	int rc;

	if ((rc = saas__store_ports(e->store, e->store_ctx, sb->id, &rows, &n)) < 0)
		return rc;
	if (n && !(sb->ports = calloc(n, sizeof(*sb->ports)))) {
		rc = saas__oom();
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		saas_port_info *pi = calloc(1, sizeof(*pi));

		if (!pi) {
			rc = saas__oom();
			goto out;
		}
		/* In the list first, so that saas_sandbox_free() frees it whatever follows. */
		sb->ports[sb->nports++] = pi;
		pi->port = rows[i].port;
		if (!(pi->url = saas__preview_url(e, &rows[i]))) {
			rc = saas__oom();
			goto out;
		}
	}
out:
	free(rows);
	return rc;
}

/* A sandbox's values into its two lists, each NULL-terminated "KEY=VALUE" (the store gives them sorted). */
struct collect_values {
	char **list[2];
	size_t n[2], cap[2];
	int rc;
};

static int collect_value(void *ud, int kind, const char *key, const char *value)
{
	struct collect_values *cv = ud;
	int i = kind == SAAS_STORE_VALUE_ENV ? 1 : 0;

	/* A kind this engine does not know (a newer one wrote it): not shown. */
	if (kind != SAAS_STORE_VALUE_METADATA && kind != SAAS_STORE_VALUE_ENV)
		return 0;
	if ((cv->rc = SAAS__ARRAY_RESERVE(cv->list[i], cv->cap[i], cv->n[i] + 2)) < 0)
		return 1;
	if (asprintf(&cv->list[i][cv->n[i]], "%s=%s", key, value) < 0) {
		cv->list[i][cv->n[i]] = NULL;
		cv->rc = saas__oom();
		return 1;
	}
	cv->list[i][++cv->n[i]] = NULL;
	return 0;
}

int saas__sandbox_values(saas_engine *e, const char *id, char ***metadata, char ***envs)
{
	struct collect_values cv;
	int rc;

	memset(&cv, 0, sizeof(cv));
	*metadata = *envs = NULL;
	rc = e->store->sandbox_values(e->store_ctx, id, collect_value, &cv);
	if (rc == SAAS_OK)
		rc = cv.rc;
	/* Empty lists, never NULL, so a caller tells "none" from a server too old to say. */
	for (int i = 0; rc == SAAS_OK && i < 2; i++)
		if (!cv.list[i] && !(cv.list[i] = calloc(1, sizeof(char *))))
			rc = saas__oom();
	if (rc < 0) {
		saas__rules_free(cv.list[0]);
		saas__rules_free(cv.list[1]);
		return rc;
	}
	*metadata = cv.list[0];
	*envs = cv.list[1];
	return SAAS_OK;
}

static int sandbox_public(saas_engine *e, const saas_store_sandbox *row, bool live, saas_sandbox **out)
{
	saas_sandbox *sb;
	int rc;

	if (!(sb = calloc(1, sizeof(*sb))))
		return saas__oom();
	sb->status = row->status;
	sb->end_reason = row->end_reason;
	sb->vcpus = row->vcpus;
	sb->memory_mb = row->memory_mb;
	sb->disk_gb = row->disk_gb;
	sb->created_at_ms = row->created_at_ms;
	sb->ready_at_ms = row->ready_at_ms;
	sb->expires_at_ms = row->expires_at_ms;
	sb->destroyed_at_ms = row->destroyed_at_ms;
	sb->cost_usd_micro = saas__accrued(row, saas__engine_now(e));
	sb->paused_at_ms = row->status == SAAS_SANDBOX_DESTROYED ? 0 : row->paused_at_ms;
	sb->on_timeout = row->on_timeout;
	sb->auto_resume = row->auto_resume;
	{
		int64_t run_s;
		saas__billed_split(row, saas__billing_end(row, saas__engine_now(e)), &run_s, &sb->paused_seconds);
	}
	if (!(sb->id = saas__strdup(row->id)) || !(sb->size = saas__strdup(row->size)) ||
	    !(sb->image = saas__strdup(row->image)) ||
	    (row->parent_id[0] && !(sb->parent_id = saas__strdup(row->parent_id)))) {
		saas_sandbox_free(sb);
		return SAAS_ENOMEM;
	}
	if ((rc = saas__sandbox_network_public(e, row, live, &sb->network)) < 0 ||
	    (rc = saas__sandbox_values(e, row->id, &sb->metadata, &sb->envs)) < 0) {
		saas_sandbox_free(sb);
		return rc;
	}
	/* A destroyed sandbox exposes nothing any more. */
	if (row->status != SAAS_SANDBOX_DESTROYED && (rc = sandbox_ports(e, sb)) < 0) {
		saas_sandbox_free(sb);
		return rc;
	}
	*out = sb;
	return SAAS_OK;
}

int saas__sandbox_public(saas_engine *e, const saas_store_sandbox *row, saas_sandbox **out)
{
	return sandbox_public(e, row, true, out);
}

int saas__sandbox_public_new(saas_engine *e, const saas_store_sandbox *row, saas_sandbox **out)
{
	return sandbox_public(e, row, false, out);
}

int64_t saas__close_cost(const saas_store_sandbox *sb, int64_t bill_until_ms)
{
	saas_store_sandbox billed = *sb;

	billed.status = SAAS_SANDBOX_DESTROYED;
	billed.destroyed_at_ms = bill_until_ms;
	return saas__cost_at(sb, saas__billing_end(&billed, bill_until_ms));
}

/*
 * Close a sandbox's row: destroyed, billed up to bill_until_ms (never past its
 * expiry), executions still running marked failed. The store makes this
 * idempotent, so two sweeps or a sweep and a user racing bill it once.
 */
int saas__sandbox_close(saas_engine *e, const saas_store_sandbox *sb, int reason, int64_t destroyed_at_ms,
                        int64_t bill_until_ms, int64_t if_expires_at_ms)
{
	int64_t cost = saas__close_cost(sb, bill_until_ms);
	int closed = 0, rc;

	rc = e->store->sandbox_close(e->store_ctx, sb->id, reason, destroyed_at_ms, cost, if_expires_at_ms, &closed);
	if (rc < 0)
		return rc;
	saas__egress_let_go(e, sb->id);
	if (closed) {
		saas__netset_forget(e, sb->id);
		char usd[32];
		saas__log(e, SAAS_LOG_INFO, "sandbox %s destroyed (%s), charged %s USD", sb->id,
		          saas_end_reason_name(reason), saas_usd_format(usd, sizeof(usd), cost));
		e->store->execution_fail_running(e->store_ctx, sb->id, "the sandbox was destroyed", destroyed_at_ms);
	}
	return SAAS_OK;
}

void saas__row_init(saas_store_sandbox *row, const char *id, const char *account_id, const saas_size *size,
                     const char *image, int status, int64_t created_at_ms, int network_mode, int64_t paused_price)
{
	memset(row, 0, sizeof(*row));
	saas__strlcpy(row->id, id, sizeof(row->id));
	saas__strlcpy(row->account_id, account_id, sizeof(row->account_id));
	row->status = status;
	saas__strlcpy(row->size, size->name, sizeof(row->size));
	row->vcpus = size->vcpus;
	row->memory_mb = size->memory_mb;
	row->disk_gb = size->disk_gb;
	saas__strlcpy(row->image, image, sizeof(row->image));
	row->usd_micro_per_hour = size->usd_micro_per_hour;
	row->paused_usd_micro_per_hour = saas_size_paused_usd_micro_per_hour(size, paused_price);
	row->created_at_ms = created_at_ms;
	row->network_mode = network_mode;
}

/* What a create asked that the row keeps as given: its metadata, environment and timeout (checked by client.c). */
static void row_asked(saas_store_sandbox *row, const saas_create_options *o, int64_t timeout)
{
	row->metadata = o->metadata;
	row->envs = o->envs;
	row->on_timeout = o->on_timeout;
	row->auto_resume = o->auto_resume != 0;
	row->timeout_s = timeout;
}

/*
 * Serve a create from the warm pool of (size, image). The pooled VM was made
 * under a sandbox id and never handed to anyone; the row inserted here takes
 * its name, so it is billed from this moment. Returns SAAS_OK, an error, or 1
 * when the pool has no live VM (make one the ordinary way).
 */
int saas__live_limit(int rc, unsigned int max)
{
	if (rc != SAAS_ELIMIT)
		return rc;
	return saas__error_limit("max_sandboxes", 0,
	                         "this account already has %u sandboxes, its limit (max_sandboxes); "
	                         "destroy one first", max);
}

static int create_from_pool(saas_client *c, const saas_create_options *o, const saas_size *size, const char *image,
                            int64_t timeout, int64_t started, unsigned int max_live, saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	char name[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1];
	int64_t now;
	int rc, state;
	void *ctx;

	while (saas__pool_claim_on(e, size->name, image, name, host)) {
		/* Made on the engine's own driver before hosts were registered: new sandboxes run on hosts now. */
		if (!host[0] && saas__hosts_any(e)) {
			saas__log(e, SAAS_LOG_INFO, "pooled VM %s is on this server, and VM hosts are registered; destroying it",
			          name);
			e->driver->vm_destroy(e->driver_ctx, name);
			saas__pool_release(e, name, SAAS_POOL_DROP);
			continue;
		}
		/* Its host out of reach: not handed out; the heartbeats decide what becomes of the host. */
		if (saas__vm_driver(e, host, &ctx) < 0) {
			saas__log(e, SAAS_LOG_WARN, "pooled VM %s: %s; not using it", name, saas_error_last()->message);
			saas__pool_release(e, name, SAAS_POOL_RETURN);
			saas__error_clear();
			return 1;
		}
		state = SAAS_VM_ABSENT;
		if (e->driver->vm_state(ctx, name, &state) < 0 || state != SAAS_VM_RUNNING) {
			saas__log(e, SAAS_LOG_WARN, "pooled VM %s is not running; destroying it", name);
			e->driver->vm_destroy(ctx, name);
			saas__pool_release(e, name, SAAS_POOL_DROP);
			continue;
		}
		/* Its image was rebuilt since it was made: the create gets the new build, never the old. */
		if (saas__vm_outdated_on(e, ctx, name)) {
			saas__log(e, SAAS_LOG_INFO, "pooled VM %s was made from an image build that is no longer current; "
			          "destroying it", name);
			e->driver->vm_destroy(ctx, name);
			saas__pool_release(e, name, SAAS_POOL_DROP);
			continue;
		}
		now = saas__engine_now(e);
		/* Pooled VMs were made without a network: the driver's default. */
		saas__row_init(&row, name, c->account_id, size, image, SAAS_SANDBOX_READY, started, saas__network_default(e),
		               e->paused_price);
		row_asked(&row, o, timeout);
		row.ready_at_ms = now;
		row.expires_at_ms = now + timeout * 1000;
		/*
		 * Ready at insert: the VM already runs, and the store still counts the
		 * account's limit atomically. On its VM host, which must still be
		 * active and seen: a draining or lost host's pooled VM is never handed out.
		 */
		if ((rc = saas__sandbox_insert_placed(e, &row, max_live, host)) < 0) {
			if (rc == SAAS_ELIMIT || rc == SAAS_ENOTFOUND) {
				/* Refused before anyone had it: it goes back, still never handed out. */
				saas__pool_release(e, name, SAAS_POOL_RETURN);
				return rc;
			}
			if (rc == SAAS_EBUSY) {
				/* Its host takes no new sandbox (draining, not seen lately, or full): it goes. */
				saas__log(e, SAAS_LOG_INFO, "pooled VM %s cannot be handed out (%s); destroying it", name,
				          saas_error_last()->message);
				e->driver->vm_destroy(ctx, name);
				saas__pool_release(e, name, SAAS_POOL_DROP);
				saas__error_clear();
				continue;
			}
			/* The store failed and might have kept the row: close it unbilled and let the VM go. */
			saas_error saved = *saas_error_last();
			char msg[1024];
			/* The message lives in this thread's error slot, which the calls below overwrite. */
			snprintf(msg, sizeof(msg), "%s", saved.message);
			saas__sandbox_close(e, &row, SAAS_END_FAILED, now, 0, 0);
			e->driver->vm_destroy(ctx, name);
			saas__pool_release(e, name, SAAS_POOL_DROP);
			return saas__error(rc, saved.klass, saved.backend_code, "%s", msg);
		}
		saas__pool_release(e, name, SAAS_POOL_CLAIMED);
		saas__egress_hold(e, &row);
		saas__log(e, SAAS_LOG_INFO, "sandbox %s claimed from the pool (%s, image %s) for %s%s%s", row.id, row.size,
		          row.image, row.account_id, row.host_id[0] ? " on VM host " : "", row.host_id);
		saas__log(e, SAAS_LOG_INFO, "sandbox %s ready in %lld ms (from the pool)", row.id,
		          (long long)(saas__engine_now(e) - started));
		saas__metrics_track(e, row.id);
		return out ? saas__sandbox_public_new(e, &row, out) : SAAS_OK;
	}
	return 1;
}

/*
 * A VM the driver started ahead for a create of this size and image
 * (driver.h, vm_take): its name, written to id, becomes the sandbox's, and
 * vm_create then makes it sooner. With VM hosts, one on the host placement
 * would choose now (its id in host; "" for the engine's own driver), and the
 * create is placed there. A driver that fails to say is a create made the
 * ordinary way.
 */
static bool take_started(saas_engine *e, const saas_size *size, const char *image, char id[SAAS_ID_MAX + 1],
                         char host[SAAS_ID_MAX + 1])
{
	saas_vm_spec spec = { NULL, image, size->vcpus, size->memory_mb, size->disk_gb, NULL };
	void *ctx = e->driver_ctx;
	int rc;

	host[0] = '\0';
	if (e->driver->version < 8 || !e->driver->vm_take)
		return false;
	if (saas__hosts_any(e) &&
	    (saas__host_pick(e, size->vcpus, size->memory_mb, host) != 1 || saas__vm_driver(e, host, &ctx) < 0)) {
		saas__error_clear(); /* no host has room, or it cannot be reached: placement says so, as for any create */
		host[0] = '\0';
		return false;
	}
	if ((rc = e->driver->vm_take(ctx, &spec, id, SAAS_ID_MAX + 1)) < 0) {
		saas__log(e, SAAS_LOG_WARN, "taking a VM started ahead: %s", saas_error_last()->message);
		saas__error_clear();
		return false;
	}
	if (rc == 1 && !saas__id_valid(id, "sbx-", 20)) {
		/* Not a name a sandbox may have: the VM is let go, and the create made the ordinary way. */
		saas__log(e, SAAS_LOG_WARN, "driver '%s' started a VM ahead under a name no sandbox may have; destroying it",
		          e->driver->name);
		e->driver->vm_destroy(ctx, id);
		saas__error_clear();
		return false;
	}
	return rc == 1;
}

int saas__store_rules(saas_engine *e, const saas_store_sandbox *row, const struct saas__network *net)
{
	char *allow = saas__network_join(net->allow), *deny = saas__network_join(net->deny);
	int rc;

	rc = allow && deny ? e->store->sandbox_network_set(e->store_ctx, row->id, net->mode, allow, deny) : saas__oom();
	free(allow);
	free(deny);
	if (rc < 0) {
		saas_error saved = *saas_error_last();
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", saved.message); /* the calls below overwrite this thread's error */
		if (e->store->sandbox_delete(e->store_ctx, row->id) < 0)
			saas__sandbox_close(e, row, SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		return saas__error(rc, saved.klass, saved.backend_code, "%s", msg);
	}
	return SAAS_OK;
}

static int create_vm(saas_client *c, const saas_store_sandbox *init, const struct saas__network *net, int64_t timeout,
                     unsigned int max_live, const char *on_host, saas_sandbox **out);

int saas__local_sandbox_create(saas_client *c, const saas_create_options *o, const struct saas__network *net,
                               saas_sandbox **out)
{
	saas_engine *e = c->engine;
	const saas_size *size;
	saas_store_sandbox row;
	saas_limits lim;
	int64_t timeout, balance, spent, credit, need, now;
	unsigned int live;
	int rc;

	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	if (!(size = o->size ? saas__engine_size(e, o->size) : e->default_size)) {
		saas__buf names = SAAS__BUF_INIT;
		for (size_t i = 0; i < e->nsizes; i++)
			saas__buf_printf(&names, "%s%s", i ? ", " : "", e->sizes[i].name);
		rc = saas__inval("unknown size '%s' (sizes: %s)", o->size, names.data ? names.data : "");
		saas__buf_free(&names);
		return rc;
	}
	timeout = o->timeout_s ? o->timeout_s : e->limits.default_timeout_s;
	if (timeout > e->limits.max_timeout_s)
		return saas__inval("timeout %lld s is over the maximum of %lld s", (long long)timeout,
		                   (long long)e->limits.max_timeout_s);

	now = saas__engine_now(e);
	if ((rc = saas__account_live_balance(e, c->account_id, now, &balance, &spent, &credit, &live)) < 0)
		return rc;
	need = saas_cost(size->usd_micro_per_hour, e->limits.min_balance_s);
	if (balance <= 0 || balance < need) {
		char have[32], want[32];
		return saas__error(SAAS_ECREDIT, SAAS_ERRCLASS_BILLING, 0,
		                   "balance %s USD cannot pay for %lld s of a %s sandbox (%s USD); add credit",
		                   saas_usd_format(have, sizeof(have), balance), (long long)e->limits.min_balance_s,
		                   size->name, saas_usd_format(want, sizeof(want), need));
	}

	/*
	 * A full disk would leave no room to record the sandbox's end, nor for its
	 * overlay to grow; nor may the sandboxes' disks, filled, outgrow the budget.
	 */
	if ((rc = saas__engine_room(e, size->disk_gb)) < 0)
		return rc;

	/*
	 * Every create that got this far counts against the rate, made or not: a
	 * refused one still costs the store and, from here on, maybe a VM boot.
	 */
	if ((rc = saas__account_limits(e, c->account_id, &lim)) < 0 ||
	    (rc = saas__create_token_take(e, c->account_id, lim.creates_per_minute)) < 0)
		return rc;

	/*
	 * Pooled VMs have the default network policy; a create that names one is
	 * made for it. With VM hosts registered, the pools are on them (pool.c).
	 */
	if (!net && (rc = create_from_pool(c, o, size, o->image ? o->image : e->default_image, timeout, now,
	                                   lim.max_sandboxes, out)) <= 0)
		return rc;

	for (int attempt = 0;; attempt++) {
		char id[SAAS_ID_MAX + 1], host[SAAS_ID_MAX + 1] = "";
		bool taken = !net && !attempt && take_started(e, size, o->image ? o->image : e->default_image, id, host);
		if (!taken && (rc = saas__id_new(id, "sbx-", 20)) < 0)
			return rc;
		saas__row_init(&row, id, c->account_id, size, o->image ? o->image : e->default_image, SAAS_SANDBOX_CREATING,
		         now, net ? net->mode : saas__network_default(e), e->paused_price);
		row_asked(&row, o, timeout);
		/*
		 * The create's lease, taken before its row exists and held until the
		 * row is ready or gone: while this engine lives, no other undoes the
		 * create; if it dies, the first to take the lease after it ran out does.
		 */
		if ((rc = saas__claim_kind(e, "create", row.id)) <= 0) {
			rc = rc < 0 ? rc : saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_ARGS, 0, "sandbox id %s is taken", row.id);
		} else {
			rc = create_vm(c, &row, net, timeout, lim.max_sandboxes, taken && host[0] ? host : NULL, out);
			saas__claim_drop_kind(e, "create", row.id);
		}
		/* A VM started ahead that the create did not make (refused before its turn) goes. */
		if (rc < 0 && taken) {
			saas_error saved = *saas_error_last();
			char msg[1024];
			void *ctx;
			snprintf(msg, sizeof(msg), "%s", saved.message); /* the calls below overwrite this thread's error */
			if (saas__vm_driver(e, host, &ctx) == SAAS_OK)
				e->driver->vm_destroy(ctx, id);
			saas__error(rc, saved.klass, saved.backend_code, "%s", msg);
		}
		/*
		 * Its host filled up since it was chosen (placement held to it
		 * refused with no row made): the create is placed as any other.
		 */
		if (rc == SAAS_EBUSY && taken && host[0] && !attempt)
			continue;
		return rc;
	}
}

/* The ordinary create, row.id's lease held: its row, then its VM. */
static int create_vm(saas_client *c, const saas_store_sandbox *init, const struct saas__network *net, int64_t timeout,
                     unsigned int max_live, const char *on_host, saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row = *init;
	saas_vm_spec spec;
	saas_vm_network vmnet;
	int64_t now = row.created_at_ms;
	void *ctx;
	int rc;

	/*
	 * The lifetime counts from ready. Until then the row expires a boot's
	 * allowance past its lifetime, so that a create stuck for good (its engine
	 * died) is still swept, while a slow boot is not cut short.
	 */
	row.expires_at_ms = now + (timeout + SAAS_CREATE_GRACE_S) * 1000;
	if ((rc = saas__sandbox_insert_placed(e, &row, max_live, on_host)) < 0)
		return rc;
	/* A host placed on a moment ago that cannot be reached now: the row goes, nothing was made. */
	if ((rc = saas__vm_driver(e, row.host_id, &ctx)) < 0) {
		saas__sandbox_close(e, &row, SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		return rc;
	}
	/* A policy's rules are stored before its VM exists: a restart then finds them (or ends the VM). */
	if (net && net->mode == SAAS_NETWORK_POLICY && (rc = saas__store_rules(e, &row, net)) < 0)
		return rc;

	spec.name = row.id;
	spec.image = row.image;
	spec.vcpus = row.vcpus;
	spec.memory_mb = row.memory_mb;
	spec.disk_gb = row.disk_gb;
	/* Validated and normalised by saas_sandbox_create (client/network.c). */
	spec.network = NULL;
	if (net) {
		vmnet.mode = net->mode;
		vmnet.allow = (const char *const *)net->allow;
		vmnet.deny = (const char *const *)net->deny;
		vmnet.account = row.account_id;
		spec.network = &vmnet;
	}
	saas__log(e, SAAS_LOG_INFO, "sandbox %s creating (%s, image %s, network %s) for %s%s%s", row.id, row.size,
	          row.image, net ? saas_network_mode_name(net->mode) : "default", row.account_id,
	          row.host_id[0] ? " on VM host " : "", row.host_id);
	if ((rc = e->driver->vm_create(ctx, &spec)) < 0) {
		saas_error saved = *saas_error_last();
		char msg[1024];
		/*
		 * ENOTSUP: the driver cannot give what was asked (a network policy);
		 * EBUSY: the host has no room for it now (its memory); say so as such.
		 */
		int code = rc == SAAS_EINVAL || rc == SAAS_ENOTFOUND ? SAAS_EINVAL
		           : rc == SAAS_ENOTSUP                      ? SAAS_ENOTSUP
		           : rc == SAAS_EBUSY                        ? SAAS_EBUSY
		                                                     : SAAS_EBACKEND;
		snprintf(msg, sizeof(msg), "%s", saved.message);
		e->driver->vm_destroy(ctx, row.id);
		/*
		 * A request the driver refuses (an image it lacks, a network it cannot
		 * guard, no room on the host) never made a sandbox: its row goes, and the account's list and
		 * count show nothing. A create that failed keeps its failed row. If the
		 * row cannot go, it is closed failed, unbilled, as a failure's is.
		 */
		if (code == SAAS_EBACKEND || !e->store->sandbox_delete ||
		    e->store->sandbox_delete(e->store_ctx, row.id) < 0)
			saas__sandbox_close(e, &row, SAAS_END_FAILED, saas__engine_now(e), 0, 0);
		saas__error(code, saved.klass ? saved.klass : SAAS_ERRCLASS_DRIVER, saved.backend_code,
		            "sandbox could not be created: %s", msg);
		/* No room now is no room for a while: when to try again (a REST answer's Retry-After). */
		if (code == SAAS_EBUSY)
			saas__error_set_limit(NULL, SAAS__ROOM_RETRY_MS);
		return code;
	}
	now = saas__engine_now(e);
	row.ready_at_ms = now;
	row.expires_at_ms = now + timeout * 1000;
	if ((rc = e->store->sandbox_set_ready(e->store_ctx, row.id, row.ready_at_ms, row.expires_at_ms)) < 0) {
		/* Destroyed while it was being made (or the store failed): nothing may run on. */
		saas_error saved = *saas_error_last();
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", saved.message); /* the calls below overwrite this thread's error */
		e->driver->vm_destroy(ctx, row.id);
		if (rc != SAAS_ESTATE)
			saas__sandbox_close(e, &row, SAAS_END_FAILED, now, 0, 0);
		return saas__error(rc, saved.klass, saved.backend_code, "%s",
		                   rc == SAAS_ESTATE ? "the sandbox was destroyed while it was being created" : msg);
	}
	row.status = SAAS_SANDBOX_READY;
	saas__egress_hold(e, &row);
	saas__log(e, SAAS_LOG_INFO, "sandbox %s ready in %lld ms", row.id, (long long)(now - row.created_at_ms));
	saas__metrics_track(e, row.id);
	return out ? saas__sandbox_public_new(e, &row, out) : SAAS_OK;
}

int saas__local_sandbox_get(saas_client *c, const char *id, unsigned int flags, saas_sandbox **out)
{
	saas_store_sandbox row;
	int rc;

	if ((rc = saas__sandbox_get_owned(c, id, &row)) < 0)
		return rc;
	/* Recorded counters: the row's, so no driver call; the store read above is the whole cost. */
	return flags & SAAS_GET_RECORDED ? saas__sandbox_public_new(c->engine, &row, out)
	                                 : saas__sandbox_public(c->engine, &row, out);
}

SAAS_EXTERN(int) saas_engine_sandbox_owner(char account_id[SAAS_ID_MAX + 1], saas_engine *e, const char *sandbox_id,
                                           unsigned int flags)
{
	saas_store_sandbox row;
	int rc;

	saas__error_clear();
	if (!account_id)
		return saas__inval("account_id is NULL");
	account_id[0] = '\0';
	if (!e)
		return saas__inval("engine is NULL");
	if (!saas__valid_text(sandbox_id, SAAS_ID_MAX))
		return saas__inval("sandbox id is missing, too long or not printable");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	rc = e->store->sandbox_get(e->store_ctx, sandbox_id, &row);
	if (rc == SAAS_ENOTFOUND)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no sandbox '%s'", sandbox_id);
	if (rc < 0)
		return rc;
	saas__strlcpy(account_id, row.account_id, SAAS_ID_MAX + 1);
	return SAAS_OK;
}

/* Digits of a cursor's time: 18 cannot overflow an int64_t (a time in ms has 13). */
#define CURSOR_DIGITS_MAX 18

/*
 * Cursors are "<time_ms>.<id>" of the last item of the previous page (a
 * sandbox's created_at, an execution's started_at), as written: digits only.
 */
int saas__list_cursor_parse(const char *cursor, int64_t *created, char *id, size_t idsize)
{
	size_t n = strspn(cursor, "0123456789");
	int64_t v = 0;

	if (n == 0 || n > CURSOR_DIGITS_MAX || cursor[n] != '.' || !saas__valid_text(cursor + n + 1, SAAS_ID_MAX))
		return saas__inval("invalid list cursor");
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (cursor[i] - '0');
	*created = v;
	saas__strlcpy(id, cursor + n + 1, idsize);
	return SAAS_OK;
}

int saas__local_sandbox_list(saas_client *c, const char *cursor, unsigned int limit, const char *const *metadata,
                             unsigned int flags, saas_sandbox_list **out)
{
	saas_store_filter f;

	memset(&f, 0, sizeof(f));
	f.account_id = c->account_id;
	f.live = (flags & SAAS_LIST_ACTIVE) ? 1 : (flags & SAAS_LIST_DESTROYED) ? -1 : 0;
	f.metadata = metadata;
	return saas__sandbox_page(c->engine, &f, cursor, limit, flags, out);
}

int saas__sandbox_page(saas_engine *e, saas_store_filter *f, const char *cursor, unsigned int limit,
                       unsigned int flags, saas_sandbox_list **out)
{
	saas_sandbox_list *list = NULL;
	saas_store_sandbox *rows = NULL;
	char cursor_id[SAAS_ID_MAX + 1];
	size_t n = 0;
	int rc;

	f->limit = limit + 1; /* one more tells whether another page exists */
	if (cursor) {
		if ((rc = saas__list_cursor_parse(cursor, &f->before_created_ms, cursor_id, sizeof(cursor_id))) < 0)
			return rc;
		f->before_id = cursor_id;
	}
	if ((rc = saas__store_sandboxes(e->store, e->store_ctx, f, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		/* Ended, but the store could not record it yet: shown as it will be. */
		if (saas__closes_view(e, &rows[i]) && (flags & SAAS_LIST_ACTIVE))
			continue;
		/* Recorded counters: the rows', so listing asks the driver nothing (SAAS_LIST_RECORDED). */
		rc = flags & SAAS_LIST_RECORDED ? saas__sandbox_public_new(e, &rows[i], &list->items[list->count])
		                                : saas__sandbox_public(e, &rows[i], &list->items[list->count]);
		if (rc < 0)
			goto out;
		list->count++;
	}
	if (list->count > limit) {
		const saas_sandbox *last = list->items[limit - 1];

		saas_sandbox_free(list->items[limit]);
		list->count = limit;
		if (asprintf(&list->next_cursor, "%lld.%s", (long long)last->created_at_ms, last->id) < 0) {
			list->next_cursor = NULL;
			rc = saas__oom();
			goto out;
		}
	}
	*out = list;
	list = NULL;
out:
	saas_sandbox_list_free(list);
	free(rows);
	return rc;
}

int saas__local_sandbox_extend(saas_client *c, const char *id, int64_t seconds, unsigned int flags,
                               saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	int64_t now, expires;
	int rc;

	/* A paused sandbox's expiry runs on: it may be extended as a ready one may. */
	if ((rc = saas__sandbox_ready(c, id, &row)) < 0 &&
	    !(rc == SAAS_ESTATE && (row.status == SAAS_SANDBOX_PAUSED || row.status == SAAS_SANDBOX_PAUSING ||
	                            row.status == SAAS_SANDBOX_RESUMING) &&
	      row.expires_at_ms > saas__engine_now(e)))
		return rc;
	saas__error_clear();
	now = saas__engine_now(e);
	/* An argument no retry can make right (as a create's timeout over the maximum): EINVAL, not ELIMIT. */
	expires = seconds > e->limits.max_timeout_s ? INT64_MAX
	          : (flags & SAAS_EXTEND_FROM_NOW) ? now + seconds * 1000
	                                           : row.expires_at_ms + seconds * 1000;
	if (expires - now > e->limits.max_timeout_s * 1000)
		return saas__inval("cannot %s %lld s: a sandbox may live at most %lld s from now",
		                   (flags & SAAS_EXTEND_FROM_NOW) ? "set a timeout of" : "extend by", (long long)seconds,
		                   (long long)e->limits.max_timeout_s);
	if ((rc = e->store->sandbox_set_expiry(e->store_ctx, id, expires)) < 0)
		return rc == SAAS_ESTATE ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                                       "sandbox '%s' was destroyed", id) : rc;
	row.expires_at_ms = expires;
	saas__log(e, SAAS_LOG_INFO, "sandbox %s %s %lld s", id,
	          (flags & SAAS_EXTEND_FROM_NOW) ? "set to expire in" : "extended by", (long long)seconds);
	return out ? saas__sandbox_public(e, &row, out) : SAAS_OK;
}

int saas__local_sandbox_destroy(saas_client *c, const char *id, saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	int64_t now;
	int rc;

	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	if ((rc = saas__sandbox_get_owned(c, id, &row)) < 0)
		return rc;
	if (row.status != SAAS_SANDBOX_DESTROYED) {
		now = saas__engine_now(e);
		/*
		 * Billing stops at this moment, however long the VM takes to go; the VM
		 * goes even if the store cannot record that now (then a later sweep does).
		 */
		if ((rc = saas__sandbox_end(e, &row, SAAS_END_USER, now, now, 0)) < 0)
			return rc;
		if ((rc = saas__sandbox_get_owned(c, id, &row)) < 0)
			return rc;
	}
	return out ? saas__sandbox_public(e, &row, out) : SAAS_OK;
}
