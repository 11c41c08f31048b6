/*
 * A sandbox's egress as the engine keeps it: the mode and rules in the store
 * (the truth across restarts), the same handed to the driver (which keeps
 * nothing across restarts), and the driver's counters of what it refused,
 * recorded in the store so that they outlive a restart and the VM.
 *
 * The rule throughout: a VM never has more egress than its stored policy.
 * A change reaches the driver before the store, and is taken back if the
 * store refuses it; a VM whose policy cannot be given again after a restart
 * is ended rather than left open.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

_Static_assert((int)SAAS_NETWORK_ISOLATED == (int)SAAS_NET_ISOLATED && (int)SAAS_NETWORK_INTERNET == (int)SAAS_NET_INTERNET &&
                       (int)SAAS_NETWORK_POLICY == (int)SAAS_NET_POLICY,
               "the public and the driver's network modes are the same values");

int saas__network_default(saas_engine *e)
{
	int mode;

	if (!e->driver || !e->driver->network_default)
		return SAAS_NETWORK_ISOLATED;
	mode = e->driver->network_default(e->driver_ctx);
	/* A driver's default is never a policy: it has no rules to give one. */
	return mode == SAAS_NETWORK_INTERNET ? SAAS_NETWORK_INTERNET : SAAS_NETWORK_ISOLATED;
}

int saas__sandbox_rules_get(saas_engine *e, const saas_store_sandbox *row, char ***allow, char ***deny)
{
	char *a = NULL, *d = NULL;
	int rc;

	*allow = *deny = NULL;
	if (row->network_mode != SAAS_NETWORK_POLICY)
		return SAAS_OK;
	if ((rc = e->store->sandbox_network_get(e->store_ctx, row->id, &a, &d)) < 0)
		return rc;
	if ((rc = saas__network_split(a, allow)) < 0 || (rc = saas__network_split(d, deny)) < 0) {
		saas__rules_free(*allow);
		*allow = NULL;
	}
	free(a);
	free(d);
	return rc;
}

/*
 * A sandbox's egress counts. The driver counts from the moment it opened (it
 * keeps nothing across restarts); the store keeps the totals recorded so far
 * and, as the base, the part of them counted before the driver last opened.
 * So the total now is the base plus what the driver says, and a total above
 * the recorded one is recorded: a restart or a destroy then loses nothing
 * counted up to the last reading. Without a driver reading (not running, no
 * such slot, the driver failing) the recorded counts are the answer.
 */
static void counts_get(saas_engine *e, const saas_store_sandbox *row, int64_t *connections, int64_t *lookups)
{
	saas_vm_network_stats st;
	int64_t c, l;
	void *ctx;

	*connections = row->denied_connections;
	*lookups = row->denied_lookups;
	if (row->status != SAAS_SANDBOX_READY || !e->driver || !e->driver->vm_network_stats)
		return;
	memset(&st, 0, sizeof(st));
	if (saas__vm_driver(e, row->host_id, &ctx) < 0) {
		saas__error_clear(); /* a host out of reach: the recorded counts are the answer */
		return;
	}
	if (e->driver->vm_network_stats(ctx, row->id, &st) != SAAS_OK)
		return;
	c = row->denied_connections_base + st.denied_connections;
	l = row->denied_lookups_base + st.denied_lookups;
	if (c <= *connections && l <= *lookups)
		return;
	*connections = c > *connections ? c : *connections;
	*lookups = l > *lookups ? l : *lookups;
	/* A reading not recorded is only a reading: the next one tries again. */
	if (e->store->sandbox_egress_record(e->store_ctx, row->id, *connections, *lookups) < 0)
		saas__log(e, SAAS_LOG_WARN, "sandbox %s: recording its egress counts failed: %s", row->id,
		          saas_error_last()->message);
}

void saas__network_counts_save(saas_engine *e, const saas_store_sandbox *row)
{
	int64_t c, l;

	counts_get(e, row, &c, &l);
}

static int save_one(void *userdata, const saas_store_sandbox *row)
{
	saas__network_counts_save(userdata, row);
	return 0;
}

void saas__network_counts_save_all(saas_engine *e)
{
	saas_store_filter f;

	if (!e->store || !e->driver || !e->driver->vm_network_stats)
		return;
	memset(&f, 0, sizeof(f));
	f.live = 1;
	/* The driver knows only this engine's VMs: another engine's read as nothing new, and stay as recorded. */
	if (e->store->sandbox_list(e->store_ctx, &f, save_one, e) < 0)
		saas__log(e, SAAS_LOG_WARN, "recording the sandboxes' egress counts failed: %s", saas_error_last()->message);
}

int saas__sandbox_network_public(saas_engine *e, const saas_store_sandbox *row, bool live, saas_network_info **out)
{
	int mode = row->network_mode == SAAS_STORE_NETWORK_UNKNOWN ? saas__network_default(e) : row->network_mode;
	char **allow = NULL, **deny = NULL;
	int rc;

	if ((rc = saas__sandbox_rules_get(e, row, &allow, &deny)) < 0)
		return rc;
	rc = saas__network_info_new(out, mode, allow, deny);
	saas__rules_free(allow);
	saas__rules_free(deny);
	if (rc < 0)
		return rc;
	if (live) {
		counts_get(e, row, &(*out)->denied_connections, &(*out)->denied_lookups);
	} else {
		(*out)->denied_connections = row->denied_connections;
		(*out)->denied_lookups = row->denied_lookups;
	}
	return SAAS_OK;
}

/* Hand a policy to the driver of the sandbox's host. */
static int driver_set(saas_engine *e, const saas_store_sandbox *row, int mode, char *const *allow, char *const *deny)
{
	saas_vm_network vm = { mode, (const char *const *)allow, (const char *const *)deny, row->account_id };
	void *ctx;
	int rc;

	if (!e->driver->vm_network_set)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
		                   "the %s driver cannot change a running sandbox's network", e->driver->name);
	if ((rc = saas__vm_driver(e, row->host_id, &ctx)) < 0)
		return rc;
	return e->driver->vm_network_set(ctx, row->id, &vm);
}

/* Hand the driver the policy the store holds for the sandbox (its mode and rules). */
static int driver_set_stored(saas_engine *e, const saas_store_sandbox *sb)
{
	char **allow = NULL, **deny = NULL;
	int rc;

	if ((rc = saas__sandbox_rules_get(e, sb, &allow, &deny)) == SAAS_OK)
		rc = driver_set(e, sb, sb->network_mode, allow, deny);
	saas__rules_free(allow);
	saas__rules_free(deny);
	return rc;
}

/* ---- a change asked of a server that does not serve the guest's egress --------------------------- */

/*
 * A VM host's guest has its policy where its egress channel is: in the one
 * server that holds it (see egress_held below). Another server asked to
 * change it cannot, so it asks that one through the store: it stores the
 * new policy, then takes lease "netset:<id>", which is the request, and
 * waits for it to go. The server holding lease "egress:<id>" looks for a
 * request at each of its sweeps (saas__egress_requests), gives its driver
 * the store's policy, and releases the request: the asker's answer. Many
 * askers take turns on the lease; each one's store write comes before its
 * request, so the holder always applies the last policy written, and no
 * asker is answered before the policy it wrote, or a later one, is in place.
 * Not applied in time (the holder stalled or died, its host not answering):
 * SAAS_EBUSY saying so; the request stays, and the stored policy is applied
 * by the holder when it can, or by the server that takes the egress over
 * (saas__egress_adopt, then its own sweep's look at the request).
 */
#define NETSET_POLL_MS 100

static int64_t netset_wait_ms(const saas_engine *e)
{
	/* Within the request's ttl, so that the request is still this asker's when it is answered. */
	return e->claims.ttl_ms * 2 / 3;
}

/* SAAS_OK while sandbox id has not ended; SAAS_ESTATE once it has, or an error. */
static int asked_of_ended(saas_engine *e, const char *id)
{
	saas_store_sandbox row;
	int rc = e->store->sandbox_get(e->store_ctx, id, &row);

	if (rc == SAAS_OK && row.status != SAAS_SANDBOX_DESTROYED)
		return SAAS_OK;
	if (rc < 0 && rc != SAAS_ENOTFOUND)
		return rc;
	return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed", id);
}

/* Called with e->network_mu held, which it lets go (the wait must not keep this engine's own changes waiting). */
static int network_ask(saas_engine *e, const saas_store_sandbox *row, const struct saas__network *net,
                       const char *allow, const char *deny)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1], holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t until, waited = 0, wait_ms = netset_wait_ms(e);
	bool asked = false;
	int rc, held;

	rc = saas__claim_name(name, "netset", row->id);
	if (rc == SAAS_OK && (rc = e->store->sandbox_network_set(e->store_ctx, row->id, net->mode, allow, deny)) < 0 &&
	    rc == SAAS_ESTATE)
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed", row->id);
	pthread_mutex_unlock(&e->network_mu);
	if (rc < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "sandbox %s network set to %s (%zu allow, %zu deny rules) in the store; asking "
	          "the server that serves its egress to apply it", row->id, saas_network_mode_name(net->mode),
	          net->nallow, net->ndeny);
	for (;;) {
		if (!asked) {
			/* Another asker's request first: this one's is taken once that one is answered. */
			held = 0;
			if ((rc = e->store->lease_take(e->store_ctx, name, e->claims.holder, saas__engine_now(e),
			                               e->claims.ttl_ms, &held)) < 0)
				return rc;
			asked = held;
			/*
			 * Ended meanwhile (between its policy's write and this request):
			 * its end may have looked for a request before this one was
			 * made, so this asker takes its own back (saas__netset_forget).
			 */
			if (asked && asked_of_ended(e, row->id) == SAAS_ESTATE) {
				e->store->lease_release(e->store_ctx, name, e->claims.holder);
				return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed", row->id);
			}
			saas__error_clear(); /* the store not answering now: its next look asks again */
		} else if ((rc = e->store->lease_get(e->store_ctx, name, holder, &until)) == SAAS_ENOTFOUND ||
		           (rc == SAAS_OK && strcmp(holder, e->claims.holder) != 0)) {
			/*
			 * Released by the server serving its egress (and maybe taken by the
			 * next asker since), or by the sandbox's end (saas__netset_forget).
			 */
			if (asked_of_ended(e, row->id) == SAAS_ESTATE)
				return SAAS_ESTATE;
			saas__error_clear(); /* applied; a store not answering now is the next call's to meet */
			return SAAS_OK;
		} else if (rc < 0) {
			return rc;
		}
		if (waited >= wait_ms)
			break;
		saas__sleep_ms(NETSET_POLL_MS);
		waited += NETSET_POLL_MS;
	}
	/*
	 * The request stays (a run-out one is a request still): the holder
	 * answers it when it can. When to send it again (REST's Retry-After): once
	 * a whole ttl has passed since the request, by when a holder that is gone
	 * has lost its lease "egress:<id>", for the next server to take it over.
	 */
	saas__error(SAAS_EBUSY, SAAS_ERRCLASS_NONE, 0,
	            "sandbox '%s': its new network is stored, but the server that serves its egress (the one "
	            "that made or resumed it) did not confirm it within %lld s; that server applies it when it "
	            "can, or the server taking its egress over does; GET its network for the stored policy, "
	            "and send the change again to wait for it",
	            row->id, (long long)(wait_ms / 1000));
	saas__error_set_limit(NULL, e->claims.ttl_ms - wait_ms);
	return SAAS_EBUSY;
}

/* One sandbox's request answered: 1 applied (or nothing to apply), 0 not now, or an error. */
static int request_answer(saas_engine *e, const char *id)
{
	saas_store_sandbox row;
	int rc;

	pthread_mutex_lock(&e->network_mu);
	if ((rc = e->store->sandbox_get(e->store_ctx, id, &row)) == SAAS_ENOTFOUND) {
		rc = 1;
	} else if (rc == SAAS_OK && row.status == SAAS_SANDBOX_READY && row.network_mode != SAAS_STORE_NETWORK_UNKNOWN) {
		if ((rc = driver_set_stored(e, &row)) == SAAS_OK) {
			saas__log(e, SAAS_LOG_INFO, "sandbox %s network set to %s, as another server stored it", id,
			          saas_network_mode_name(row.network_mode));
			rc = 1;
		}
	} else if (rc == SAAS_OK) {
		/* Not running (paused, ending): the store's policy is what it is given when it runs again. */
		rc = 1;
	}
	pthread_mutex_unlock(&e->network_mu);
	return rc;
}

void saas__egress_requests(saas_engine *e)
{
	struct saas__claims *cl = &e->claims;
	char (*ids)[SAAS_ID_MAX + 1] = NULL;
	size_t n = 0, cap = 0;

	if (!cl->shared || !e->driver)
		return;
	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->count; i++)
		if (strncmp(cl->names[i], "egress:", 7) == 0 && SAAS__ARRAY_RESERVE(ids, cap, n + 1) == SAAS_OK)
			saas__strlcpy(ids[n++], cl->names[i] + 7, sizeof(ids[0]));
	pthread_mutex_unlock(&cl->mu);
	for (size_t i = 0; i < n; i++) {
		char name[SAAS_STORE_LEASE_NAME_MAX + 1], holder[SAAS_STORE_HOLDER_MAX + 1];
		int64_t until;
		int rc;

		if (saas__claim_name(name, "netset", ids[i]) < 0 ||
		    e->store->lease_get(e->store_ctx, name, holder, &until) != SAAS_OK) {
			saas__error_clear();
			continue;
		}
		if ((rc = request_answer(e, ids[i])) == 1) {
			e->store->lease_release(e->store_ctx, name, holder);
			continue;
		}
		/* Left for the next sweep; its asker is told so when it stops waiting. */
		saas__log(e, SAAS_LOG_WARN, "sandbox %s: the network change another server stored is not applied yet: %s",
		          ids[i], saas_error_last()->message);
		saas__error_clear();
	}
	free(ids);
}

int saas__local_sandbox_network_set(saas_client *c, const char *id, const struct saas__network *net,
                                    saas_sandbox **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox row;
	char *allow = NULL, *deny = NULL, **old_allow = NULL, **old_deny = NULL;
	int rc, old_mode;
	bool locked = false;

	if (!(allow = saas__network_join(net->allow)) || !(deny = saas__network_join(net->deny))) {
		rc = saas__oom();
		goto out;
	}
	pthread_mutex_lock(&e->network_mu);
	locked = true;
	/* Read under the lock: the policy to go back to is the last one set, not one a racing change replaces. */
	if ((rc = saas__sandbox_ready(c, id, &row)) < 0 || (rc = saas__sandbox_rules_get(e, &row, &old_allow, &old_deny)) < 0)
		goto out;
	old_mode = row.network_mode == SAAS_STORE_NETWORK_UNKNOWN ? saas__network_default(e) : row.network_mode;

	if ((rc = driver_set(e, &row, net->mode, net->allow, net->deny)) == SAAS_EBUSY && e->claims.shared &&
	    row.host_id[0]) {
		/* Another server serves its egress: the change is stored here and applied there (see below). */
		saas__error_clear();
		locked = false;
		rc = network_ask(e, &row, net, allow, deny);
		if (rc == SAAS_OK) {
			row.network_mode = net->mode;
			rc = out ? saas__sandbox_public(e, &row, out) : SAAS_OK;
		}
		goto out;
	}
	if (rc < 0) {
		saas_error saved = *saas_error_last();
		/* What the driver cannot give is said as such; a refusal of the rules is the caller's to fix. */
		int code = rc == SAAS_ENOTSUP || rc == SAAS_EINVAL ? rc : SAAS_EBACKEND;
		char msg[1024];

		/* saved.message is this thread's error buffer, which the call below writes into. */
		snprintf(msg, sizeof(msg), "%s", saved.message);
		rc = saas__error(code, saved.klass ? saved.klass : SAAS_ERRCLASS_DRIVER, saved.backend_code,
		                 "sandbox '%s' keeps its network: %s", id, msg);
		goto out;
	}
	if ((rc = e->store->sandbox_network_set(e->store_ctx, id, net->mode, allow, deny)) < 0) {
		saas_error saved = *saas_error_last();
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", saved.message); /* the calls below overwrite this thread's error */
		if (driver_set(e, &row, old_mode, old_allow, old_deny) < 0) {
			/* The VM has a policy no store records; it may not run on with it. */
			saas__log(e, SAAS_LOG_ERROR, "sandbox %s: its network change could not be stored nor undone (%s); "
			          "destroying it", id, saas_error_last()->message);
			int64_t now = saas__engine_now(e);
			saas__sandbox_end(e, &row, SAAS_END_FAILED, now, now, 0);
		}
		rc = rc == SAAS_ESTATE ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "sandbox '%s' was destroyed", id)
		                       : saas__error(rc, saved.klass, saved.backend_code, "%s", msg);
		goto out;
	}
	row.network_mode = net->mode;
	saas__egress_hold(e, &row);
	saas__log(e, SAAS_LOG_INFO, "sandbox %s network set to %s (%zu allow, %zu deny rules)", id,
	          saas_network_mode_name(net->mode), net->nallow, net->ndeny);
	pthread_mutex_unlock(&e->network_mu);
	locked = false;
	rc = out ? saas__sandbox_public(e, &row, out) : SAAS_OK;
out:
	if (locked)
		pthread_mutex_unlock(&e->network_mu);
	saas__rules_free(old_allow);
	saas__rules_free(old_deny);
	free(allow);
	free(deny);
	return rc;
}

/* ---- who serves a VM host's guest's egress ---------------------------------------------------- */

/*
 * On a VM host a guest's connections leave through the one server that holds
 * its egress channel (the libvirt driver's egress_host.c): the server that
 * made it, or gave it its network last. When that server dies, its
 * connection to the host goes, the channel is free, and nobody serves the
 * guest until some server opens it again. So the server serving it holds
 * lease "egress:<id>", renewed with its own; once it runs out, the reaper's
 * engine takes the lease and the channel over, with the policy in the store.
 * Isolated guests need no server (nothing leaves), so none is taken over;
 * but the server holding an isolated guest's channel holds its lease all the
 * same, as it is the one that can change its network (the others ask it:
 * saas__egress_requests). A store of one engine has nobody to take over from
 * nor to ask: no lease.
 */
static bool egress_held(const saas_engine *e, const saas_store_sandbox *sb)
{
	return e->claims.shared && sb->host_id[0];
}

static bool egress_shared(const saas_engine *e, const saas_store_sandbox *sb, int mode)
{
	return egress_held(e, sb) && (mode == SAAS_NETWORK_INTERNET || mode == SAAS_NETWORK_POLICY);
}

void saas__egress_hold(saas_engine *e, const saas_store_sandbox *sb)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1];

	if (!e->claims.shared || saas__claim_name(name, "egress", sb->id) < 0)
		return;
	if (!egress_held(e, sb)) {
		saas__egress_let_go(e, sb->id);
		return;
	}
	/* Not taken (the store failing): another engine may take the VM's egress over after a ttl, and be refused. */
	if (!saas__claim_mine(e, name) && saas__claim(e, name) < 0)
		saas__log(e, SAAS_LOG_WARN, "sandbox %s: lease %s not taken: %s", sb->id, name, saas_error_last()->message);
}

void saas__egress_let_go(saas_engine *e, const char *id)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1];

	if (e->claims.shared && saas__claim_name(name, "egress", id) == SAAS_OK && saas__claim_mine(e, name))
		saas__claim_drop(e, name);
}

void saas__netset_forget(saas_engine *e, const char *id)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1], holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t until;

	/*
	 * Whoever asked (this server or another, alive or not): an ended
	 * sandbox's request has nothing left to apply, and nobody would answer
	 * it, since its egress is nobody's now. Not done (the store failing):
	 * the row stays, read by nobody (ids are never used again).
	 */
	if (!e->claims.shared || saas__claim_name(name, "netset", id) < 0 ||
	    e->store->lease_get(e->store_ctx, name, holder, &until) != SAAS_OK ||
	    e->store->lease_release(e->store_ctx, name, holder) < 0)
		saas__error_clear();
}

void saas__egress_adopt(saas_engine *e, const saas_store_sandbox *live, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const saas_store_sandbox *sb = &live[i];
		char name[SAAS_STORE_LEASE_NAME_MAX + 1];
		int rc;

		if (sb->status != SAAS_SANDBOX_READY || !egress_shared(e, sb, sb->network_mode) ||
		    saas__claim_name(name, "egress", sb->id) < 0 || saas__claim_mine(e, name) ||
		    saas__claim_once(e, name) != 1)
			continue;
		/* Its lease is this engine's now: its last server is gone, and with it that server's channel. */
		if ((rc = driver_set_stored(e, sb)) == SAAS_OK && saas__claim(e, name) == 1) {
			saas__log(e, SAAS_LOG_INFO, "sandbox %s: its egress (%s) is served by this server now: the server "
			          "that served it is gone", sb->id, saas_network_mode_name(sb->network_mode));
			continue;
		}
		/*
		 * Refused (SAAS_EBUSY: a server that holds no lease for it holds its
		 * channel, such as one of an older version), or the host not
		 * answering: let go, and asked again at the next look.
		 */
		saas__log(e, rc == SAAS_EBUSY ? SAAS_LOG_DEBUG : SAAS_LOG_WARN, "sandbox %s: its egress not taken over: %s",
		          sb->id, rc < 0 ? saas_error_last()->message : "its lease was lost");
		saas__error_clear();
		saas__claim_drop(e, name);
	}
}

void saas__network_reapply(saas_engine *e, saas_store_sandbox *sb)
{
	int64_t now;
	int rc;

	/*
	 * This driver counts the VM's refusals from zero: what was recorded before
	 * is the base its counts add to. Not done (the store failing), the totals
	 * read short until a restart does it; the record itself never goes down.
	 */
	if (e->store->sandbox_egress_rebase(e->store_ctx, sb->id) == SAAS_OK) {
		sb->denied_connections_base = sb->denied_connections;
		sb->denied_lookups_base = sb->denied_lookups;
	} else {
		saas__log(e, SAAS_LOG_WARN, "sandbox %s: its egress counts could not be carried over the restart: %s",
		          sb->id, saas_error_last()->message);
	}
	/*
	 * Made before the store kept a mode: the driver's default, baked into the
	 * VM when it was made, and never changed since (nothing could change it).
	 */
	if (sb->network_mode == SAAS_STORE_NETWORK_UNKNOWN)
		return;
	if ((rc = driver_set_stored(e, sb)) == SAAS_OK) {
		saas__egress_hold(e, sb);
		return;
	}
	/*
	 * Another server of the cluster serves the VM's egress (a VM host's
	 * guest, whose egress channel that server holds): with the policy it was
	 * given, which is the store's, since a change through any other server
	 * is refused.
	 */
	if (rc == SAAS_EBUSY) {
		saas__log(e, SAAS_LOG_DEBUG, "sandbox %s: its network is another server's to enforce: %s", sb->id,
		          saas_error_last()->message);
		saas__error_clear();
		return;
	}
	/*
	 * A driver that cannot set isolated or internet at runtime never changed a
	 * VM to it either: the VM still has the mode it was made with, which is
	 * this one. Failing to give internet back only ever gives less.
	 */
	if ((sb->network_mode == SAAS_NETWORK_ISOLATED && rc == SAAS_ENOTSUP) ||
	    sb->network_mode == SAAS_NETWORK_INTERNET) {
		saas__log(e, rc == SAAS_ENOTSUP ? SAAS_LOG_DEBUG : SAAS_LOG_WARN, "sandbox %s: network %s not set again: %s",
		          sb->id, saas_network_mode_name(sb->network_mode), saas_error_last()->message);
		return;
	}
	saas__log(e, SAAS_LOG_ERROR, "sandbox %s: its network %s cannot be enforced after the restart (%s); "
	          "destroying it as lost", sb->id, saas_network_mode_name(sb->network_mode),
	          saas_error_last()->message);
	now = saas__engine_now(e);
	saas__sandbox_end(e, sb, SAAS_END_LOST, now, now, 0);
	sb->status = SAAS_SANDBOX_DESTROYED;
}
