/*
 * Request rates: one token bucket per API key and one per client address.
 *
 * A bucket holds up to AAS_RATE_BURST seconds' worth of requests and refills
 * at its rate, so a client may burst briefly and then keeps to the rate. The
 * buckets live in one fixed-size table: memory does not grow with the number
 * of keys or addresses a flood brings. A name hashes to a slot and probes the
 * next few; a bucket that has refilled completely holds nothing worth keeping
 * and is the first to be reused, then the least recently used one. Evicting a
 * bucket that was not full only forgives its client a burst, and only when the
 * table is under a flood of names wider than it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "front.h"
#include "web/web.h"

#define SLOTS 16384          /* buckets held at once: 16384 x 32 bytes */
#define PROBES 8             /* slots a name may occupy, from its hash on */
/*
 * Tokens are counted in 1/3600000ths of a request, so that a rate per second
 * (3600 a millisecond each) and a rate per hour (1 a millisecond each) both
 * refill by whole units.
 */
#define MILLI 3600000

struct bucket {
	uint64_t name;       /* hash of the name; 0: empty */
	int64_t milli;       /* tokens left, in units of 1/MILLI */
	int64_t at_ms;       /* when milli was last brought up to date */
	int64_t add;         /* units added per millisecond: the rate it was last taken at */
	int64_t cap;         /* units it holds when full */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct bucket table[SLOTS];

/* FNV-1a, 64 bits; never 0, which marks an empty slot. */
static uint64_t hash_name(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* The units a bucket holds at `now` (a clock that went back refills nothing). */
static int64_t level(const struct bucket *b, int64_t now)
{
	int64_t dt = now > b->at_ms ? now - b->at_ms : 0;

	/* Compared before multiplying: a bucket idle for a long time would overflow. */
	if (dt >= (b->cap - b->milli) / b->add + 1)
		return b->cap;
	return b->milli + dt * b->add;
}

static void refill(struct bucket *b, int64_t now)
{
	b->milli = level(b, now);
	if (now > b->at_ms)
		b->at_ms = now;
}

/* Would the bucket be full by now? Then it holds nothing worth keeping. */
static bool full_by(const struct bucket *b, int64_t now)
{
	return level(b, now) >= b->cap;
}

/* The name's bucket, or a slot taken over for it (then milli is -1). */
static struct bucket *slot_for(uint64_t name, int64_t now)
{
	struct bucket *victim = NULL;
	size_t start = (size_t)(name % SLOTS);
	int best = -1;

	for (size_t i = 0; i < PROBES; i++) {
		struct bucket *b = &table[(start + i) % SLOTS];
		/* An empty slot first, then a bucket that refilled, then the least recently used. */
		int score = b->name == 0 ? 2 : full_by(b, now) ? 1 : 0;

		if (b->name == name)
			return b;
		if (score > best || (score == 0 && best == 0 && b->at_ms < victim->at_ms)) {
			victim = b;
			best = score;
		}
	}
	victim->name = name;
	victim->milli = -1;
	victim->at_ms = now;
	return victim;
}

/* Take one request from a bucket refilling `add` units a millisecond up to `cap`. */
static int64_t take(const char *name, size_t len, int64_t add, int64_t cap, int64_t now_ms)
{
	struct bucket *b;
	int64_t wait_ms = 0;

	pthread_mutex_lock(&mu);
	b = slot_for(hash_name(name, len), now_ms);
	if (b->milli < 0) {
		/* New: it starts full. */
		b->add = add;
		b->cap = cap;
		b->milli = cap;
	} else {
		refill(b, now_ms);
		if (b->add != add || b->cap != cap) {
			/* The limit changed (an operator set it): keep the tokens, within the new capacity. */
			b->add = add;
			b->cap = cap;
			if (b->milli > cap)
				b->milli = cap;
		}
	}
	if (b->milli >= MILLI)
		b->milli -= MILLI;
	else
		wait_ms = (MILLI - b->milli + add - 1) / add; /* rounded up: a whole request is there then */
	pthread_mutex_unlock(&mu);
	return wait_ms;
}

int64_t aas_ratelimit_take(const char *name, size_t len, unsigned int rate, int64_t now_ms)
{
	if (rate == 0)
		return 0;
	/* rate a second is rate * MILLI / 1000 units a millisecond */
	return take(name, len, (int64_t)rate * (MILLI / 1000), (int64_t)rate * AAS_RATE_BURST * MILLI, now_ms);
}

int64_t aas_ratelimit_take_hourly(const char *name, size_t len, unsigned int per_hour, int64_t now_ms)
{
	if (per_hour == 0)
		return 0;
	return take(name, len, (int64_t)per_hour * (MILLI / 3600000), (int64_t)per_hour * MILLI, now_ms);
}

int64_t aas_ratelimit_peek(const char *name, size_t len, unsigned int rate, int64_t now_ms)
{
	uint64_t h = hash_name(name, len);
	size_t start = (size_t)(h % SLOTS);
	int64_t wait_ms = 0;

	if (rate == 0)
		return 0;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < PROBES; i++) {
		struct bucket *b = &table[(start + i) % SLOTS];
		if (b->name == h) {
			refill(b, now_ms);
			if (b->milli < MILLI)
				wait_ms = (MILLI - b->milli + b->add - 1) / b->add;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return wait_ms;
}

/*
 * The bucket of a client address: "a" and the hex of the part of it one client
 * holds (aas_address_key(): an IPv4 address, an IPv6 address's /64), the same
 * grouping as the per-address connection cap. The address is the client's
 * behind a trusted proxy (aas_client_address()). Returns the name's length.
 */
static size_t address_name(struct MHD_Connection *conn, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	unsigned char key[16];
	size_t n = 0;

	/* No address (a UNIX socket) is all zeros: one shared bucket. */
	aas_client_address(conn, &ss);
	aas_address_key((const struct sockaddr *)&ss, key, NULL, 0);
	n += (size_t)snprintf(buf, size, "a");
	for (size_t i = 0; i < sizeof(key) && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%02x", key[i]);
	return n < size ? n : size - 1;
}

bool aas_ratelimit_preview(struct aas_req *r, struct aas_reply *out, unsigned int rate)
{
	char name[64];
	size_t len;
	int64_t wait;

	/* "p" + the address's name: a bucket apart from the same address's API requests. */
	name[0] = 'p';
	len = 1 + address_name(r->conn, name + 1, sizeof(name) - 1);
	if ((wait = aas_ratelimit_take(name, len, rate, aas_now_ms())) <= 0)
		return true;
	aas_reply_limit(out, "preview_requests_per_address", wait,
	                "this address may make %u preview requests a second (preview_requests_per_address); slow down",
	                rate);
	return false;
}

/*
 * Names of the kinds of buckets cannot meet: an address's starts "a", a
 * preview visitor's "pa", a key's is 64 hex digits.
 */
bool aas_ratelimit_request(struct aas_req *r, struct aas_reply *out, unsigned int address_rate)
{
	const char *key = aas_request_key(r);
	struct aas_cached_client *h = NULL;
	saas_client *c = NULL;
	char addr[64];
	size_t alen = address_name(r->conn, addr, sizeof(addr));
	int64_t now = aas_now_ms(), wait;

	if (key) {
		/*
		 * A key not known good, from an address that spent its budget on
		 * failures, is refused before anyone looks it up: that is what keeps a
		 * flood of made-up keys away from the store.
		 */
		if (!aas_auth_known(key) && (wait = aas_ratelimit_peek(addr, alen, address_rate, now)) > 0)
			goto address_limited;
		if (aas_auth_get(&h, &c, key) == SAAS_OK) {
			unsigned int rate = aas_auth_rate(h);

			wait = aas_ratelimit_take(aas_auth_hash(h), 64, rate, now);
			aas_auth_release(h);
			if (wait > 0) {
				aas_reply_limit(out, "requests_per_second", wait,
				                "this API key may make %u requests a second (requests_per_second); "
				                "slow down",
				                rate);
				return false;
			}
			return true;
		}
		/* A bad key (or a store that failed to say) is the address's to pay for. */
	}
	if ((wait = aas_ratelimit_take(addr, alen, address_rate, now)) > 0)
		goto address_limited;
	return true;
address_limited:
	/* A person's browser on a page gets a page, saying when (the same seconds in Retry-After). */
	if (r->route && (r->route->flags & AAS_R_PAGE))
		aas_reply_page_retry(r, out, 429, "Too many requests", "Too many requests from this address.", wait);
	else
		aas_reply_limit(out, "requests_per_address", wait,
		                "this address may make %u requests a second without a valid API key "
		                "(requests_per_address); slow down",
		                address_rate);
	return false;
}
