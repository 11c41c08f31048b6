/*
 * One client per distinct API key, cached by the key's SHA-256.
 *
 * saas_client_open_local() checks the key against the store (one indexed
 * lookup), so a cached client is trusted for `ttl` seconds only: the next
 * request after that re-opens it, which is how a revoked key stops working
 * within `ttl` seconds. Entries are reference counted; a replaced entry is
 * freed when its last request lets go of it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct aas_cached_client {
	char hash[65];
	saas_client *client;
	int64_t opened_ms;
	unsigned int refs;     /* the table's own reference counts one while listed */
	bool listed;
	struct aas_cached_client *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct aas_cached_client *clients;
static saas_engine *engine;
static int64_t ttl_ms;

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
	pthread_mutex_unlock(&mu);
}

int aas_auth_get(struct aas_cached_client **handle, saas_client **client, const char *api_key)
{
	struct aas_cached_client *c, *fresh = NULL;
	char hash[65];
	saas_client *sc = NULL;
	int rc;

	*handle = NULL;
	*client = NULL;
	saas_key_fingerprint(hash, api_key);
	pthread_mutex_lock(&mu);
	c = find_locked(hash);
	if (c && aas_now_ms() - c->opened_ms < ttl_ms) {
		c->refs++;
		pthread_mutex_unlock(&mu);
		*handle = c;
		*client = c->client;
		return SAAS_OK;
	}
	pthread_mutex_unlock(&mu);

	/* Open outside the lock: it is a store lookup. */
	rc = saas_client_open_local(&sc, engine, api_key, 0);
	pthread_mutex_lock(&mu);
	if ((c = find_locked(hash)) && (rc < 0 || c->opened_ms < aas_now_ms() - ttl_ms))
		unlist_locked(c);
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
	fresh->client = sc;
	fresh->opened_ms = aas_now_ms();
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
