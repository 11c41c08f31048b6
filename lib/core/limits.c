/*
 * Tenant limits: what one account may hold or do at once, and how fast.
 *
 * An account's limits are the engine's defaults overlaid with what an operator
 * set for it (the store's account_limits table, read at each create and exec:
 * one indexed lookup next to the VM work those calls do). The counters behind
 * the limits that are not rows in the store (executions running now, creates
 * in the last minute) live here, in memory, one entry per account that used
 * the engine; accounts are made by operators, so the table is as bounded as
 * they are. With several engines on one PostgreSQL database each engine counts
 * its own, so those two limits hold per engine.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Rates are kept in thousandths of a create, so a refill never rounds to nothing. */
#define MILLI 1000
#define MINUTE_MS 60000

/* A running execution is short-lived: a retry a second later may well find a free slot. */
#define EXEC_RETRY_MS 1000
/* So is a transfer, mostly: the same. */
#define TRANSFER_RETRY_MS 1000

struct saas__tenant {
	char account_id[SAAS_ID_MAX + 1];
	unsigned int running;            /* executions running now */
	unsigned int transfers;          /* file transfers under way now */
	int64_t create_milli;            /* creates left in the bucket, in thousandths */
	int64_t create_at_ms;            /* when create_milli was last brought up to date */
	bool create_started;             /* create_milli has been filled once */
	struct saas__tenant *next;
};

/* The account's entry, made on first use. Called with e->tenants_mu held. */
static struct saas__tenant *tenant_locked(saas_engine *e, const char *account_id)
{
	struct saas__tenant *t;

	for (t = e->tenants; t; t = t->next)
		if (strcmp(t->account_id, account_id) == 0)
			return t;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	saas__strlcpy(t->account_id, account_id, sizeof(t->account_id));
	t->next = e->tenants;
	e->tenants = t;
	return t;
}

void saas__tenants_free(saas_engine *e)
{
	struct saas__tenant *t, *next;

	for (t = e->tenants; t; t = next) {
		next = t->next;
		free(t);
	}
	e->tenants = NULL;
}

static unsigned int pick(unsigned int own, unsigned int dflt)
{
	return own ? own : dflt;
}

int saas__account_limits(saas_engine *e, const char *account_id, saas_limits *out)
{
	saas_store_limits own;
	int rc;

	memset(&own, 0, sizeof(own));
	if ((rc = e->store->limits_get(e->store_ctx, account_id, &own)) < 0 && rc != SAAS_ENOTFOUND)
		return rc;
	*out = e->limits;
	out->max_sandboxes = pick(own.max_sandboxes, e->limits.max_sandboxes);
	out->max_executions = pick(own.max_executions, e->limits.max_executions);
	out->creates_per_minute = pick(own.creates_per_minute, e->limits.creates_per_minute);
	out->requests_per_second = pick(own.requests_per_second, e->limits.requests_per_second);
	return SAAS_OK;
}

/* What an account holds at once, one counter of struct saas__tenant each, and what is said past its limit. */
struct slot_kind {
	size_t field;                    /* offsetof the counter */
	const char *limit, *what;        /* the limit's name; "N <what> in this account" */
	int64_t retry_ms;
};

static const struct slot_kind exec_slots = {
	.field = offsetof(struct saas__tenant, running),
	.limit = "max_executions",
	.what = "executions are already running",
	.retry_ms = EXEC_RETRY_MS,
};
static const struct slot_kind transfer_slots = {
	.field = offsetof(struct saas__tenant, transfers),
	.limit = "max_transfers",
	.what = "file transfers are already under way",
	.retry_ms = TRANSFER_RETRY_MS,
};

static unsigned int *slot_count(struct saas__tenant *t, const struct slot_kind *k)
{
	return (unsigned int *)((char *)t + k->field);
}

static int slot_take(saas_engine *e, const char *account_id, const struct slot_kind *k, unsigned int max)
{
	struct saas__tenant *t;
	int rc = SAAS_OK;

	pthread_mutex_lock(&e->tenants_mu);
	if (!(t = tenant_locked(e, account_id)))
		rc = saas__oom();
	else if (*slot_count(t, k) >= max)
		rc = saas__error_limit(k->limit, k->retry_ms, "%u %s in this account, its limit (%s); wait for one to finish",
		                       *slot_count(t, k), k->what, k->limit);
	else
		(*slot_count(t, k))++;
	pthread_mutex_unlock(&e->tenants_mu);
	return rc;
}

static void slot_release(saas_engine *e, const char *account_id, const struct slot_kind *k)
{
	struct saas__tenant *t;

	pthread_mutex_lock(&e->tenants_mu);
	for (t = e->tenants; t; t = t->next)
		if (strcmp(t->account_id, account_id) == 0 && *slot_count(t, k) > 0) {
			(*slot_count(t, k))--;
			break;
		}
	pthread_mutex_unlock(&e->tenants_mu);
}

int saas__exec_slot_take(saas_engine *e, const char *account_id, unsigned int max)
{
	return slot_take(e, account_id, &exec_slots, max);
}

void saas__exec_slot_release(saas_engine *e, const char *account_id)
{
	slot_release(e, account_id, &exec_slots);
}

/*
 * A file transfer holds its caller's thread for as long as the guest and the
 * client take (the transport bounds the guest's part, not the client's): an
 * account's at once are bounded, so that one tenant cannot hold a server's
 * threads, whichever transport carries them.
 */
int saas__transfer_slot_take(saas_engine *e, const char *account_id)
{
	return slot_take(e, account_id, &transfer_slots, e->max_transfers);
}

void saas__transfer_slot_release(saas_engine *e, const char *account_id)
{
	slot_release(e, account_id, &transfer_slots);
}

unsigned int saas__exec_running(saas_engine *e, const char *account_id)
{
	unsigned int n = 0;

	pthread_mutex_lock(&e->tenants_mu);
	for (struct saas__tenant *t = e->tenants; t; t = t->next)
		if (strcmp(t->account_id, account_id) == 0) {
			n = t->running;
			break;
		}
	pthread_mutex_unlock(&e->tenants_mu);
	return n;
}

/*
 * A token bucket: `per_minute` creates fit in it, and it refills at
 * per_minute a minute, so a burst of a whole minute's creates is allowed and
 * after that one every 60/per_minute seconds.
 */
int saas__create_token_take(saas_engine *e, const char *account_id, unsigned int per_minute)
{
	const int64_t cap = (int64_t)per_minute * MILLI;
	int64_t now = saas__engine_now(e), refill, wait_ms;
	struct saas__tenant *t;
	int rc = SAAS_OK;

	pthread_mutex_lock(&e->tenants_mu);
	if (!(t = tenant_locked(e, account_id))) {
		rc = saas__oom();
		goto out;
	}
	if (!t->create_started || now < t->create_at_ms) {
		/* First use, or a clock that went back: start full rather than lock the account out. */
		t->create_milli = cap;
		t->create_at_ms = now;
		t->create_started = true;
	} else {
		/* per_minute creates per 60 000 ms, in thousandths: per_minute / 60 per ms. */
		refill = (now - t->create_at_ms) * (int64_t)per_minute / 60;
		if (t->create_milli + refill >= cap) {
			t->create_milli = cap;
			t->create_at_ms = now;
		} else {
			/* Move the clock only by the time those thousandths took: polling must not lose the rest. */
			t->create_milli += refill;
			t->create_at_ms += refill * 60 / per_minute;
		}
	}
	if (t->create_milli < MILLI) {
		/*
		 * Rounded up, less the time since create_at_ms that has not yet made a
		 * whole thousandth: a retry after this long finds a whole create.
		 */
		wait_ms = ((MILLI - t->create_milli) * 60 + per_minute - 1) / per_minute - (now - t->create_at_ms);
		if (wait_ms < 1)
			wait_ms = 1;
		rc = saas__error_limit("creates_per_minute", wait_ms,
		                       "this account may create %u sandboxes a minute (creates_per_minute); "
		                       "retry in %lld ms",
		                       per_minute, (long long)wait_ms);
		goto out;
	}
	t->create_milli -= MILLI;
out:
	pthread_mutex_unlock(&e->tenants_mu);
	return rc;
}

static int check_overrides(const saas_limit_overrides *l)
{
	const struct {
		const char *name;
		unsigned int value;
	} f[] = {
		{ "max_sandboxes", l->max_sandboxes },
		{ "max_executions", l->max_executions },
		{ "creates_per_minute", l->creates_per_minute },
		{ "requests_per_second", l->requests_per_second },
	};

	for (size_t i = 0; i < SAAS_ARRAY_SIZE(f); i++)
		if (f[i].value > SAAS_LIMIT_MAX)
			return saas__inval("%s %u is over the maximum of %u", f[i].name, f[i].value, SAAS_LIMIT_MAX);
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_account_limits_set(saas_engine *e, const char *account_id, const saas_limit_overrides *l)
{
	saas_store_limits row;
	int rc;

	saas__error_clear();
	if (!e || !account_id || !l)
		return saas__inval("engine, account id or limits is NULL");
	if (l->version < 1 || l->version > SAAS_LIMIT_OVERRIDES_VERSION)
		return saas__inval("limit overrides version %u is not 1 to %u", l->version, SAAS_LIMIT_OVERRIDES_VERSION);
	if ((rc = check_overrides(l)) < 0)
		return rc;
	row.max_sandboxes = l->max_sandboxes;
	row.max_executions = l->max_executions;
	row.creates_per_minute = l->creates_per_minute;
	row.requests_per_second = l->requests_per_second;
	if ((rc = e->store->limits_set(e->store_ctx, account_id, &row, saas__engine_now(e))) < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO,
	          "limits of %s set: max_sandboxes %u, max_executions %u, creates_per_minute %u, "
	          "requests_per_second %u (0: the default)",
	          account_id, row.max_sandboxes, row.max_executions, row.creates_per_minute, row.requests_per_second);
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_account_limits_get(saas_limit_overrides *out, saas_engine *e, const char *account_id)
{
	saas_store_limits row;
	int rc;

	saas__error_clear();
	if (!out || !e || !account_id)
		return saas__inval("out, engine or account id is NULL");
	if (out->version < 1 || out->version > SAAS_LIMIT_OVERRIDES_VERSION)
		return saas__inval("limit overrides version %u is not 1 to %u", out->version,
		                   SAAS_LIMIT_OVERRIDES_VERSION);
	memset(&row, 0, sizeof(row));
	if ((rc = e->store->limits_get(e->store_ctx, account_id, &row)) < 0)
		return rc;
	out->max_sandboxes = row.max_sandboxes;
	out->max_executions = row.max_executions;
	out->creates_per_minute = row.creates_per_minute;
	out->requests_per_second = row.requests_per_second;
	return SAAS_OK;
}
