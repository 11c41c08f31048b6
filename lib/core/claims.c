/*
 * Claims: what this engine holds in a database other engines may share.
 *
 * Every engine makes a holder id at open and keeps lease "server:<holder>"
 * while it runs; it is how the others know it lives. Work of its own that
 * nobody else may undo while it lives holds a lease of its own, renewed with
 * the server's: a create ("create:<sandbox id>"), a pooled VM ("pool:<vm
 * name>"), an execution ("exec:<execution id>", only on a shared store).
 * When an engine dies, its leases run out within one ttl, and the next engine
 * to take one of them owns that work: it undoes the create, destroys the
 * pooled VM, marks the execution failed, and lets the lease go. A lease taken
 * is exclusive, so an undo happens once; what it writes to the store is
 * conditional as well (a close closes a live row only), so even an engine
 * that stalled past its ttl and woke up cannot bill a sandbox twice.
 *
 * The state directory names its last holder (STATE/holder): an engine that
 * opens it holds its lock, so the previous engine of the directory is dead
 * for sure, and its leases are taken over at once rather than after a ttl.
 * That keeps the single machine's restart as it always was: reconcile undoes
 * the creates a crash cut short at the next start, not a ttl later.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define HOLDER_FILE "holder"

static int64_t claims_now(saas_engine *e)
{
	return saas__engine_now(e);
}

/* The holder this state directory had before, or "" (none, or not one this code wrote). */
static void holder_read(saas_engine *e, char out[SAAS_STORE_HOLDER_MAX + 1])
{
	char *path = NULL, buf[SAAS_STORE_HOLDER_MAX + 2] = "";
	FILE *f;

	out[0] = '\0';
	if (asprintf(&path, "%s/" HOLDER_FILE, e->state_dir) < 0)
		return;
	if ((f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = '\0';
			if (saas__valid_text(buf, SAAS_STORE_HOLDER_MAX))
				saas__strlcpy(out, buf, SAAS_STORE_HOLDER_MAX + 1);
		}
		fclose(f);
	}
	free(path);
}

static void holder_write(saas_engine *e)
{
	char *path = NULL;
	FILE *f;

	if (asprintf(&path, "%s/" HOLDER_FILE, e->state_dir) < 0)
		return;
	if (!(f = fopen(path, "we")) || fprintf(f, "%s\n", e->claims.holder) < 0 || fclose(f) != 0) {
		int err = errno;
		if (f)
			fclose(f);
		/* Without it the next start waits one ttl for this engine's leases: slower, not wrong. */
		saas__log(e, SAAS_LOG_WARN, "cannot write %s: %s", path, strerror(err));
	}
	free(path);
}

/*
 * Take (or renew) a lease for one ttl. takeover: first release it if the state
 * directory's previous holder has it, as that engine is dead for sure.
 */
static int lease_take(saas_engine *e, const char *name, bool takeover, int *held)
{
	struct saas__claims *cl = &e->claims;
	char holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t until;
	int rc;

	if (takeover && cl->prev[0] && e->store->lease_get(e->store_ctx, name, holder, &until) == SAAS_OK &&
	    strcmp(holder, cl->prev) == 0)
		e->store->lease_release(e->store_ctx, name, cl->prev);
	rc = e->store->lease_take(e->store_ctx, name, cl->holder, claims_now(e), cl->ttl_ms, held);
	if (rc < 0)
		return saas__error_wrap(rc, "taking lease %s", name);
	return SAAS_OK;
}

int saas__claim_name(char out[SAAS_STORE_LEASE_NAME_MAX + 1], const char *kind, const char *id)
{
	int n = snprintf(out, SAAS_STORE_LEASE_NAME_MAX + 1, "%s:%s", kind, id);

	if (n < 0 || n > SAAS_STORE_LEASE_NAME_MAX)
		return saas__inval("lease name %s:%s is too long", kind, id);
	return SAAS_OK;
}

int saas__claim_once(saas_engine *e, const char *name)
{
	int held = 0, rc;

	/* One engine owns a store nobody shares: what it claims is its own already. */
	if (!e->claims.shared)
		return 1;
	if ((rc = lease_take(e, name, true, &held)) < 0)
		return rc;
	return held;
}

int saas__claim(saas_engine *e, const char *name)
{
	struct saas__claims *cl = &e->claims;
	int held, rc;

	if ((held = saas__claim_once(e, name)) <= 0 || !cl->shared)
		return held;
	pthread_mutex_lock(&cl->mu);
	rc = SAAS__ARRAY_RESERVE(cl->names, cl->cap, cl->count + 1);
	if (rc == SAAS_OK)
		saas__strlcpy(cl->names[cl->count++], name, sizeof(cl->names[0]));
	pthread_mutex_unlock(&cl->mu);
	if (rc < 0) {
		e->store->lease_release(e->store_ctx, name, cl->holder);
		return rc;
	}
	return 1;
}

int saas__claim_kind(saas_engine *e, const char *kind, const char *id)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1];
	int rc;

	if ((rc = saas__claim_name(name, kind, id)) < 0)
		return rc;
	return saas__claim(e, name);
}

bool saas__claim_mine(saas_engine *e, const char *name)
{
	struct saas__claims *cl = &e->claims;
	bool found = false;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->count && !found; i++)
		found = strcmp(cl->names[i], name) == 0;
	pthread_mutex_unlock(&cl->mu);
	return found;
}

void saas__claim_drop(saas_engine *e, const char *name)
{
	struct saas__claims *cl = &e->claims;

	if (!cl->shared)
		return;
	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->count; i++)
		if (strcmp(cl->names[i], name) == 0) {
			memmove(&cl->names[i], &cl->names[i + 1], (cl->count - i - 1) * sizeof(cl->names[0]));
			cl->count--;
			break;
		}
	pthread_mutex_unlock(&cl->mu);
	/* A release that fails leaves the lease to run out: one ttl, then anyone may take it. */
	if (e->store && e->store->lease_release(e->store_ctx, name, cl->holder) < 0)
		saas__log(e, SAAS_LOG_DEBUG, "releasing lease %s failed: %s", name, saas_error_last()->message);
}

void saas__claim_drop_kind(saas_engine *e, const char *kind, const char *id)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1];

	if (saas__claim_name(name, kind, id) == SAAS_OK)
		saas__claim_drop(e, name);
}

/*
 * The drivers' leases (saas_driver_env.lease): work a driver does once across
 * the engines of one store, such as a template built once per VM host. Taken
 * and renewed by the driver itself, for the ttl it asks (not renewed here: a
 * driver that stops renewing gives the work up). The holder is this engine's,
 * so the state directory's next engine takes over a dead one's at once.
 */
int saas__driver_lease(void *userdata, const char *name, int64_t ttl_ms, int take)
{
	saas_engine *e = userdata;
	struct saas__claims *cl = &e->claims;
	int held = 0, rc;

	if (!name || strlen(name) > SAAS_STORE_LEASE_NAME_MAX)
		return saas__inval("driver lease name is missing or too long");
	if (!cl->shared)
		return take ? 1 : 0;
	if (!take) {
		if (e->store->lease_release(e->store_ctx, name, cl->holder) < 0)
			saas__log(e, SAAS_LOG_DEBUG, "releasing lease %s failed: %s", name, saas_error_last()->message);
		return 0;
	}
	if (cl->prev[0]) {
		char holder[SAAS_STORE_HOLDER_MAX + 1];
		int64_t until;
		if (e->store->lease_get(e->store_ctx, name, holder, &until) == SAAS_OK && strcmp(holder, cl->prev) == 0)
			e->store->lease_release(e->store_ctx, name, cl->prev);
	}
	rc = e->store->lease_take(e->store_ctx, name, cl->holder, claims_now(e), ttl_ms > 0 ? ttl_ms : cl->ttl_ms,
	                          &held);
	if (rc < 0)
		return saas__error_wrap(rc, "taking lease %s", name);
	return held ? 1 : 0;
}

/*
 * Renew the server's lease and every lease of this engine's. One that another
 * holder took meanwhile (this engine stalled past its ttl) is lost: the work
 * it guarded is someone else's to finish now, and what this engine still
 * writes for it is refused by the store's conditions.
 */
static void renew(saas_engine *e)
{
	struct saas__claims *cl = &e->claims;
	char server[SAAS_STORE_LEASE_NAME_MAX + 1];
	size_t i = 0;

	if (!cl->shared)
		return;
	if (saas__claim_name(server, "server", cl->holder) == SAAS_OK) {
		int held = 0;
		if (lease_take(e, server, false, &held) < 0)
			saas__log(e, SAAS_LOG_WARN, "renewing the server's lease failed: %s", saas_error_last()->message);
		else if (!held)
			saas__log(e, SAAS_LOG_ERROR, "lease %s is held by another holder", server);
	}
	for (;;) {
		char name[SAAS_STORE_LEASE_NAME_MAX + 1];
		int held = 0;

		pthread_mutex_lock(&cl->mu);
		if (i >= cl->count) {
			pthread_mutex_unlock(&cl->mu);
			break;
		}
		saas__strlcpy(name, cl->names[i], sizeof(name));
		pthread_mutex_unlock(&cl->mu);
		if (lease_take(e, name, false, &held) < 0) {
			/* The store is down: every engine's leases wait for it alike. */
			saas__log(e, SAAS_LOG_WARN, "renewing lease %s failed: %s", name, saas_error_last()->message);
			i++;
		} else if (!held) {
			saas__log(e, SAAS_LOG_ERROR, "lease %s was taken over by another server (this one stalled past "
			          "the %lld ms ttl); its work is that server's now", name, (long long)cl->ttl_ms);
			pthread_mutex_lock(&cl->mu);
			if (i < cl->count && strcmp(cl->names[i], name) == 0) {
				memmove(&cl->names[i], &cl->names[i + 1], (cl->count - i - 1) * sizeof(cl->names[0]));
				cl->count--;
			}
			pthread_mutex_unlock(&cl->mu);
		} else {
			i++;
		}
	}
	/* Executions running here: their leases say their runner lives. */
	{
		char (*ids)[SAAS_ID_MAX + 1] = NULL;
		size_t n = 0, cap = 0;

		pthread_mutex_lock(&e->live_mu);
		for (struct saas__live *l = e->lives; l; l = l->next)
			if (!l->done && SAAS__ARRAY_RESERVE(ids, cap, n + 1) == SAAS_OK)
				saas__strlcpy(ids[n++], l->id, sizeof(ids[0]));
		pthread_mutex_unlock(&e->live_mu);
		for (size_t k = 0; k < n; k++) {
			char name[SAAS_STORE_LEASE_NAME_MAX + 1];
			int held = 0;
			if (saas__claim_name(name, "exec", ids[k]) == SAAS_OK)
				lease_take(e, name, false, &held);
		}
		free(ids);
	}
}

static void *renew_main(void *arg)
{
	saas_engine *e = arg;
	struct saas__claims *cl = &e->claims;
	struct timespec ts;

	pthread_mutex_lock(&cl->mu);
	while (!cl->stopping) {
		saas__deadline(&ts, CLOCK_REALTIME, cl->ttl_ms / 3);
		pthread_cond_timedwait(&cl->cond, &cl->mu, &ts);
		if (cl->stopping)
			break;
		pthread_mutex_unlock(&cl->mu);
		saas__error_clear();
		renew(e);
		pthread_mutex_lock(&cl->mu);
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

int saas__claims_open(saas_engine *e, int64_t ttl_ms)
{
	struct saas__claims *cl = &e->claims;
	char server[SAAS_STORE_LEASE_NAME_MAX + 1];
	int held = 0, rc;

	cl->ttl_ms = ttl_ms;
	/*
	 * A SQLite store is one engine's (its file in the state directory, whose
	 * lock that engine holds): nothing needs claiming there, and the single
	 * machine runs exactly as it did before leases. Any other store may be
	 * shared by many engines.
	 */
	cl->shared = strcmp(e->store->name, "sqlite") != 0;
	if ((rc = saas__id_new(cl->holder, "srv-", 16)) < 0)
		return rc;
	holder_read(e, cl->prev);
	holder_write(e);
	if (!cl->shared) {
		saas__log(e, SAAS_LOG_INFO, "engine holder %s (a store of its own: no leases)", cl->holder);
		return SAAS_OK;
	}
	if ((rc = saas__claim_name(server, "server", cl->holder)) < 0)
		return rc;
	/* A store that cannot write now (a full disk) must not keep the engine from opening: renewals retry. */
	if (lease_take(e, server, false, &held) < 0)
		saas__log(e, SAAS_LOG_WARN, "cannot take lease %s: %s", server, saas_error_last()->message);
	if (cl->prev[0]) {
		char prev[SAAS_STORE_LEASE_NAME_MAX + 1];
		if (saas__claim_name(prev, "server", cl->prev) == SAAS_OK)
			e->store->lease_release(e->store_ctx, prev, cl->prev);
	}
	saas__log(e, SAAS_LOG_INFO, "engine holder %s (leases of %lld ms, renewed every %lld ms%s%s)", cl->holder,
	          (long long)ttl_ms, (long long)ttl_ms / 3, cl->prev[0] ? "; this state directory's last was " : "",
	          cl->prev);
	return SAAS_OK;
}

int saas__claims_start(saas_engine *e)
{
	struct saas__claims *cl = &e->claims;
	int rc;

	if (!cl->shared)
		return SAAS_OK;
	if ((rc = pthread_create(&cl->thread, NULL, renew_main, e)) != 0)
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the lease thread");
	cl->running = true;
	return SAAS_OK;
}

void saas__claims_renew(saas_engine *e)
{
	renew(e);
}

static void claims_stop(saas_engine *e)
{
	struct saas__claims *cl = &e->claims;

	if (!cl->running)
		return;
	pthread_mutex_lock(&cl->mu);
	cl->stopping = true;
	pthread_cond_broadcast(&cl->cond);
	pthread_mutex_unlock(&cl->mu);
	pthread_join(cl->thread, NULL);
	cl->running = false;
}

void saas__claims_close(saas_engine *e)
{
	struct saas__claims *cl = &e->claims;
	char name[SAAS_STORE_LEASE_NAME_MAX + 1];

	claims_stop(e);
	if (!e->store || !cl->holder[0] || !cl->shared)
		return;
	/* A clean close: nothing of this engine's needs another to wait a ttl. */
	while (cl->count > 0) {
		saas__strlcpy(name, cl->names[cl->count - 1], sizeof(name));
		saas__claim_drop(e, name);
	}
	e->store->lease_release(e->store_ctx, "reaper", cl->holder);
	e->store->lease_release(e->store_ctx, "reconcile", cl->holder);
	if (saas__claim_name(name, "server", cl->holder) == SAAS_OK)
		e->store->lease_release(e->store_ctx, name, cl->holder);
}

void saas__claims_free(saas_engine *e)
{
	free(e->claims.names);
	e->claims.names = NULL;
	e->claims.count = e->claims.cap = 0;
}

bool saas__claims_alive(saas_engine *e, const char *holder)
{
	char name[SAAS_STORE_LEASE_NAME_MAX + 1], who[SAAS_STORE_HOLDER_MAX + 1];
	int64_t until;

	if (strcmp(holder, e->claims.holder) == 0 || !e->claims.shared)
		return true;
	if (e->claims.prev[0] && strcmp(holder, e->claims.prev) == 0)
		return false;
	if (saas__claim_name(name, "server", holder) < 0)
		return false;
	/* A store that cannot say: alive, so that nothing of a live engine's is undone on a guess. */
	switch (e->store->lease_get(e->store_ctx, name, who, &until)) {
	case SAAS_OK: return until > claims_now(e);
	case SAAS_ENOTFOUND: return false;
	default: return true;
	}
}

const char *saas__engine_holder(saas_engine *e)
{
	return e ? e->claims.holder : "";
}
