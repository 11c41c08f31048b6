/*
 * One client per distinct API key, cached by the key's SHA-256.
 *
 * saas_client_open_local() checks the key against the store (one indexed
 * lookup), so a cached client is trusted for `ttl` seconds only: the next
 * request after that re-opens it, which is how a revoked key stops working
 * within `ttl` seconds. Entries are reference counted; a replaced entry is
 * freed when its last request lets go of it.
 *
 * A key revoked (or an account disabled) through this process is dropped at
 * once instead (aas_auth_forget): the store gives no key's fingerprint, so an
 * entry is matched by its client's account and the key's first characters,
 * the prefix the store shows (saas_key.prefix). A key being opened while one
 * is dropped is used for its request but not cached: it may be the one just
 * revoked, read from the store a moment before.
 *
 * Unknown keys are remembered too, for the same `ttl`, in a fixed table (the
 * negative cache): a client repeating a bad key costs a hash, not a store
 * lookup. Many different bad keys are bounded by the client address's request
 * rate instead (http.c), since every failed key takes from it. A key issued
 * just after it was tried works once its negative entry expires.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/e2b.h"
#include "front.h"

/* Unknown keys remembered at once; direct-mapped, so a new one may push out an old one. */
#define NEGATIVE_SLOTS 4096
/* The characters of a key an entry keeps: "aas_sk_" and 4, saas_key.prefix (public, shown on the dashboard). */
#define KEY_SHOWN 11

struct aas_cached_client {
	char hash[65];
	char shown[KEY_SHOWN + 1]; /* the key's first characters, to find it when it is revoked */
	saas_client *client;
	unsigned int rate;     /* the account's requests_per_second when opened */
	int64_t opened_ms;
	unsigned int refs;     /* the table's own reference counts one while listed */
	bool listed;
	struct aas_cached_client *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct aas_cached_client *clients;
static saas_engine *engine;
static int64_t ttl_ms;

static struct negative {
	char hash[65];
	int64_t until_ms;
} negative[NEGATIVE_SLOTS];
static uint64_t lookups, negative_hits;
static uint64_t forgets; /* aas_auth_forget calls: an open that saw one change caches nothing */

/*
 * Accounts' request rates for requests that act for an account without a
 * key (aas_auth_account_rate), kept `ttl` as a key's is; direct-mapped, so a
 * new account may push out an old one, which is then read again.
 */
#define RATE_SLOTS 1024
static struct account_rate {
	char account[SAAS_ID_MAX + 1];
	unsigned int rate;
	int64_t until_ms;
} rates[RATE_SLOTS];

/* Where a fingerprint lives in the negative cache: its first hex digits (lowercase) are already uniform. */
static struct negative *negative_slot(const char hash[65])
{
	unsigned int v = 0;

	for (int i = 0; i < 4; i++)
		v = v * 16 + (unsigned int)(hash[i] <= '9' ? hash[i] - '0' : hash[i] - 'a' + 10);
	return &negative[v % NEGATIVE_SLOTS];
}

static bool negative_find_locked(const char hash[65], int64_t now)
{
	struct negative *n = negative_slot(hash);

	return n->until_ms > now && memcmp(n->hash, hash, 64) == 0;
}

void aas_auth_init(saas_engine *e, unsigned int ttl_s)
{
	engine = e;
	ttl_ms = (int64_t)ttl_s * 1000;
}

static void unref_locked(struct aas_cached_client *c)
{
	if (--c->refs == 0) {
		saas_client_free(c->client);
		free(c);
	}
}

static void unlist_locked(struct aas_cached_client *c)
{
	for (struct aas_cached_client **p = &clients; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			c->listed = false;
			unref_locked(c);
			return;
		}
	}
}

static struct aas_cached_client *find_locked(const char hash[65])
{
	for (struct aas_cached_client *c = clients; c; c = c->next)
		if (memcmp(c->hash, hash, 64) == 0)
			return c;
	return NULL;
}

void aas_auth_shutdown(void)
{
	pthread_mutex_lock(&mu);
	while (clients)
		unlist_locked(clients);
	memset(negative, 0, sizeof(negative));
	memset(rates, 0, sizeof(rates));
	pthread_mutex_unlock(&mu);
}

/* The account's request rate, read once per open (the cache's ttl): one more store query. */
static int key_rate(saas_client *sc, unsigned int *rate)
{
	saas_account_info *ai = NULL;
	int rc;

	if ((rc = saas_account_info_get(&ai, sc)) < 0)
		return rc;
	*rate = ai->limits->requests_per_second;
	saas_account_info_free(ai);
	return SAAS_OK;
}

/* The key an E2B spelling ("e2b_...") stands for, into out: true if api_key is one. */
static bool e2b_spelled(const char *api_key, char out[SAAS_KEY_LEN + 1])
{
	if (!api_key || strncmp(api_key, "e2b_", 4) != 0)
		return false; /* the usual case, without setting the thread's error */
	return saas_key_from_e2b(out, api_key) == SAAS_OK;
}

int aas_auth_get(struct aas_cached_client **handle, saas_client **client, const char *api_key)
{
	struct aas_cached_client *c, *fresh = NULL;
	char hash[65];
	saas_client *sc = NULL;
	unsigned int rate = 0;
	int64_t now;
	char spelled[SAAS_KEY_LEN + 1];
	uint64_t forgets_before;
	int rc;

	*handle = NULL;
	*client = NULL;
	/* An E2B spelling of a key is the same key (docs/e2b.md): one cache entry, one revocation. */
	if (e2b_spelled(api_key, spelled))
		api_key = spelled;
	saas_key_fingerprint(hash, api_key);
	pthread_mutex_lock(&mu);
	now = aas_now_ms();
	c = find_locked(hash);
	if (c && now - c->opened_ms < ttl_ms) {
		c->refs++;
		pthread_mutex_unlock(&mu);
		*handle = c;
		*client = c->client;
		return SAAS_OK;
	}
	if (negative_find_locked(hash, now)) {
		negative_hits++;
		pthread_mutex_unlock(&mu);
		return SAAS_EAUTH;
	}
	lookups++;
	forgets_before = forgets;
	pthread_mutex_unlock(&mu);

	/* Open outside the lock: it is a store lookup. */
	rc = saas_client_open_local(&sc, engine, api_key, 0);
	if (rc == SAAS_OK && (rc = key_rate(sc, &rate)) < 0) {
		saas_client_free(sc);
		sc = NULL;
	}
	pthread_mutex_lock(&mu);
	if ((c = find_locked(hash)) && (rc < 0 || c->opened_ms < aas_now_ms() - ttl_ms))
		unlist_locked(c);
	if (rc == SAAS_EAUTH && ttl_ms > 0) {
		struct negative *n = negative_slot(hash);
		memcpy(n->hash, hash, 65);
		n->until_ms = aas_now_ms() + ttl_ms;
	}
	if (rc < 0)
		goto out;
	if ((c = find_locked(hash))) {
		/* Another request re-opened it meanwhile: use theirs. */
		saas_client_free(sc);
		c->refs++;
		fresh = c;
		goto out;
	}
	if (!(fresh = calloc(1, sizeof(*fresh)))) {
		saas_client_free(sc);
		rc = SAAS_ENOMEM;
		goto out;
	}
	memcpy(fresh->hash, hash, 65);
	memcpy(fresh->shown, api_key, strnlen(api_key, KEY_SHOWN)); /* calloc'd: NUL-terminated */
	fresh->client = sc;
	fresh->rate = rate;
	fresh->opened_ms = aas_now_ms();
	if (forgets != forgets_before) {
		fresh->refs = 1; /* this request's alone: freed when it lets go */
		goto out;
	}
	fresh->refs = 2;
	fresh->listed = true;
	fresh->next = clients;
	clients = fresh;
out:
	pthread_mutex_unlock(&mu);
	if (fresh) {
		*handle = fresh;
		*client = fresh->client;
	}
	return rc;
}

/* Where an account's rate lives: FNV-1a of its id. */
static struct account_rate *rate_slot(const char *account_id)
{
	uint32_t h = 2166136261u;

	for (const char *p = account_id; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return &rates[h % RATE_SLOTS];
}

unsigned int aas_auth_account_rate(saas_client *client)
{
	const char *account = saas_client_account_id(client);
	struct account_rate *slot;
	unsigned int rate = 0;
	uint64_t forgets_before;
	bool hit;

	if (!account || strlen(account) > SAAS_ID_MAX)
		return 0;
	slot = rate_slot(account);
	pthread_mutex_lock(&mu);
	if ((hit = slot->until_ms > aas_now_ms() && strcmp(slot->account, account) == 0))
		rate = slot->rate;
	forgets_before = forgets;
	pthread_mutex_unlock(&mu);
	if (hit || key_rate(client, &rate) < 0)
		return rate;
	pthread_mutex_lock(&mu);
	/* Read while the account was forgotten (disabled, a key revoked): used for this request, not kept. */
	if (forgets == forgets_before && ttl_ms > 0) {
		snprintf(slot->account, sizeof(slot->account), "%s", account);
		slot->rate = rate;
		slot->until_ms = aas_now_ms() + ttl_ms;
	}
	pthread_mutex_unlock(&mu);
	return rate;
}

void aas_auth_forget(const char *account_id, const char *key_prefix)
{
	struct account_rate *rate = rate_slot(account_id);

	pthread_mutex_lock(&mu);
	forgets++;
	/* Whatever changed about the account, its rate is read again. */
	if (strcmp(rate->account, account_id) == 0)
		rate->until_ms = 0;
	for (struct aas_cached_client **p = &clients; *p;) {
		struct aas_cached_client *c = *p;
		/* The shorter of the two decides: a prefix of another length drops more, never fewer. */
		size_t n = key_prefix ? strlen(key_prefix) : 0;

		if (n > strlen(c->shown))
			n = strlen(c->shown);
		if (strcmp(saas_client_account_id(c->client), account_id) == 0 &&
		    (!key_prefix || strncmp(c->shown, key_prefix, n) == 0)) {
			*p = c->next;
			c->listed = false;
			unref_locked(c);
		} else {
			p = &c->next;
		}
	}
	pthread_mutex_unlock(&mu);
}

void aas_auth_release(struct aas_cached_client *handle)
{
	if (!handle)
		return;
	pthread_mutex_lock(&mu);
	unref_locked(handle);
	pthread_mutex_unlock(&mu);
}

void aas_auth_ref(struct aas_cached_client *handle)
{
	if (!handle)
		return;
	pthread_mutex_lock(&mu);
	handle->refs++;
	pthread_mutex_unlock(&mu);
}

unsigned int aas_auth_rate(const struct aas_cached_client *handle)
{
	return handle ? handle->rate : 0;
}

const char *aas_auth_hash(const struct aas_cached_client *handle)
{
	return handle ? handle->hash : "";
}

bool aas_auth_known(const char *api_key)
{
	struct aas_cached_client *c;
	char hash[65];
	char spelled[SAAS_KEY_LEN + 1];
	bool known;

	/* An E2B spelling of a key is the same key (docs/e2b.md): one cache entry, one revocation. */
	if (e2b_spelled(api_key, spelled))
		api_key = spelled;
	saas_key_fingerprint(hash, api_key);
	pthread_mutex_lock(&mu);
	known = (c = find_locked(hash)) && aas_now_ms() - c->opened_ms < ttl_ms;
	pthread_mutex_unlock(&mu);
	return known;
}

void aas_auth_counts(uint64_t *lookups_out, uint64_t *negative_hits_out)
{
	pthread_mutex_lock(&mu);
	*lookups_out = lookups;
	*negative_hits_out = negative_hits;
	pthread_mutex_unlock(&mu);
}
