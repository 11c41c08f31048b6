/*
 * Warm pools against the fake driver and a real store (SQLite, or PostgreSQL
 * with SAAS_TEST_STORE=postgres): filling to target, claims, billing from the
 * claim, never reused, the network and limit checks, dead pooled VMs, the
 * orphan sweep, engine free, backoff on a fake clock, bad specs, version-1
 * options, and the real refill thread.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"

/* What the engine logged, and every VM the fake driver made (in order). */
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static char logbuf[65536];
static size_t loglen;

#define MAX_MADE 64
struct made {
	char name[SAAS_ID_MAX + 1];
	char image[64];
	unsigned int vcpus;
	int internet;
};
static struct made made[MAX_MADE];
static unsigned int nmade;

static void test_log(void *ud, int level, const char *msg)
{
	(void)ud;
	(void)level;
	pthread_mutex_lock(&rec_mu);
	loglen += (size_t)snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%s\n", msg);
	if (loglen >= sizeof(logbuf))
		loglen = 0; /* a test that logs this much checks nothing from the start */
	pthread_mutex_unlock(&rec_mu);
}

static int logged(const char *what)
{
	int found;

	pthread_mutex_lock(&rec_mu);
	found = strstr(logbuf, what) != NULL;
	pthread_mutex_unlock(&rec_mu);
	return found;
}

static void log_clear(void)
{
	pthread_mutex_lock(&rec_mu);
	loglen = 0;
	logbuf[0] = '\0';
	pthread_mutex_unlock(&rec_mu);
}

static void record_create(void *ud, const saas_vm_spec *spec)
{
	(void)ud;
	pthread_mutex_lock(&rec_mu);
	if (nmade < MAX_MADE) {
		snprintf(made[nmade].name, sizeof(made[nmade].name), "%s", spec->name);
		snprintf(made[nmade].image, sizeof(made[nmade].image), "%s", spec->image);
		made[nmade].vcpus = spec->vcpus;
		made[nmade].internet = spec->network ? spec->network->mode : -1;
		nmade++;
	}
	pthread_mutex_unlock(&rec_mu);
}

static int setup_with(void **state, const char *pool, unsigned int max_sandboxes, int64_t credit_b)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, SAAS_TEST_FAKE_CLOCK | SAAS_TEST_BOB);

	saas_fake_on_create(record_create, NULL);
	nmade = 0;
	log_clear();
	f->opts.log = test_log;
	f->opts.log_level = SAAS_LOG_DEBUG;
	f->opts.max_sandboxes = max_sandboxes;
	f->opts.pool = pool;
	f->credit_b = credit_b;
	saas_test_fixture_open(f);
	*state = f;
	return 0;
}

/* Two small ones of the default image and one medium of "tiny". */
static int setup(void **state)
{
	return setup_with(state, "small=2,medium:tiny=1", 0, SAAS_CREDIT_DEFAULT);
}

/* Alice may have one sandbox; bob has one minute of small (1500 micro-dollars). */
static int setup_tight(void **state)
{
	return setup_with(state, "small=1", 1, 1500);
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

static saas_engine_stats *stats(struct saas_test_fixture *f)
{
	saas_engine_stats *st = NULL;

	assert_int_equal(saas_engine_stats_get(&st, f->engine), SAAS_OK);
	return st;
}

/* Ready VMs in the pool of (size, image), as the stats report them. */
static unsigned int pool_ready(struct saas_test_fixture *f, const char *size, const char *image)
{
	saas_engine_stats *st = stats(f);
	unsigned int n = 0;

	for (size_t i = 0; i < st->npools; i++)
		if (strcmp(st->pools[i]->size, size) == 0 && strcmp(st->pools[i]->image, image) == 0)
			n = st->pools[i]->ready;
	saas_engine_stats_free(st);
	return n;
}

/*
 * Sweep until every pool is full; the sweeps it took. A sweep that made
 * nothing waited on the refill's hold after a claim (POOL_CLAIM_HOLD_MS):
 * the clock moves past it before the next.
 */
static unsigned int fill(struct saas_test_fixture *f)
{
	unsigned int sweeps = 0, calls = saas_fake_create_calls();

	for (;;) {
		saas_engine_stats *st = stats(f);
		int full = st->pool_ready == st->pool_target;
		saas_engine_stats_free(st);
		if (full)
			return sweeps;
		assert_true(++sweeps <= 64);
		if (sweeps > 1 && saas_fake_create_calls() == calls)
			saas_test_advance(2000);
		calls = saas_fake_create_calls();
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	}
}

static saas_sandbox *create_opts(saas_client *c, const char *size, const char *image, const char *network)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	int rc;

	o.size = size;
	o.image = image;
	o.network = network;
	rc = saas_sandbox_create(&sb, c, &o, 0);
	if (rc != SAAS_OK)
		fail_msg("create: %s (%s)", saas_strerror(rc), saas_error_last()->message);
	return sb;
}

static saas_sandbox *create(saas_client *c, const char *size)
{
	return create_opts(c, size, NULL, NULL);
}

static unsigned int list_count(saas_client *c)
{
	saas_sandbox_list *list;
	unsigned int n;

	assert_int_equal(saas_sandbox_list_get(&list, c, NULL, 0, 0), SAAS_OK);
	n = (unsigned int)list->count;
	saas_sandbox_list_free(list);
	return n;
}

static void test_pool_fills(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_stats *st = stats(f);

	/* Nothing is made at open with NO_REAPER: the sweeps make them, one each. */
	assert_int_equal(saas_fake_create_calls(), 0);
	assert_int_equal(st->npools, 2);
	assert_string_equal(st->pools[0]->size, "small");
	assert_string_equal(st->pools[0]->image, "default");
	assert_int_equal(st->pools[0]->target, 2);
	assert_string_equal(st->pools[1]->size, "medium");
	assert_string_equal(st->pools[1]->image, "tiny");
	assert_int_equal(st->pools[1]->target, 1);
	assert_int_equal(st->pool_target, 3);
	assert_int_equal(st->pool_ready, 0);
	saas_engine_stats_free(st);

	assert_int_equal(fill(f), 3);
	assert_int_equal(saas_fake_create_calls(), 3);
	assert_int_equal(saas_fake_vm_count(), 3);
	/* The emptiest pool first: each pool has one before any has two. */
	assert_int_equal(nmade, 3);
	assert_string_equal(made[0].image, "default");
	assert_string_equal(made[1].image, "tiny");
	assert_int_equal(made[1].vcpus, 4);
	assert_string_equal(made[2].image, "default");
	for (unsigned int i = 0; i < nmade; i++) {
		assert_memory_equal(made[i].name, "sbx-", 4);
		assert_int_equal(strlen(made[i].name), 24);
		assert_int_equal(made[i].internet, -1);
		assert_true(saas__pool_owns(f->engine, made[i].name));
		/* Each ran its first commands before it was offered (pool_warm: `true`, `: warm`), and only those. */
		assert_int_equal(saas_fake_vm_execs(made[i].name), 2);
	}
	assert_true(logged("pool small (image default): VM "));

	/* Full pools make nothing more. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 3);

	/* Pooled VMs are no account's: in no list, counted as no sandbox, billed to nobody. */
	saas_test_advance(3600 * 1000);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(list_count(f->a), 0);
	assert_int_equal(list_count(f->b), 0);
	assert_int_equal(saas_test_balance(f->a), 5000000);
	assert_int_equal(saas_test_balance(f->b), 5000000);
	st = stats(f);
	assert_int_equal(st->creating, 0);
	assert_int_equal(st->ready, 0);
	assert_int_equal(st->accounts_with_sandboxes, 0);
	assert_int_equal(st->pool_ready, 3);
	assert_int_equal(st->pool_claims, 0);
	saas_engine_stats_free(st);
}

static void test_pool_claim(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb, *got = NULL, *medium, *plain;
	saas_engine_stats *st;
	char first[SAAS_ID_MAX + 1], claimed[SAAS_ID_MAX + 1];

	fill(f);
	strcpy(first, made[0].name);
	/* An hour in the pool costs nobody anything ... */
	saas_test_advance(3600 * 1000);
	sb = create(f->a, "small");
	/* ... the create is served by the oldest pooled VM: its name is the sandbox id ... */
	assert_string_equal(sb->id, first);
	strcpy(claimed, sb->id);
	assert_int_equal(saas_fake_create_calls(), 3);
	assert_int_equal(sb->status, SAAS_SANDBOX_READY);
	assert_string_equal(sb->size, "small");
	assert_string_equal(sb->image, "default");
	assert_int_equal(sb->vcpus, 2);
	/* A pooled VM was made without a network: it reports the driver's default. */
	assert_int_equal(sb->network->mode, SAAS_NETWORK_ISOLATED);
	/* ... and billing starts at the claim. */
	assert_int_equal(sb->created_at_ms, saas_test_now());
	assert_int_equal(sb->ready_at_ms, saas_test_now());
	assert_int_equal(sb->expires_at_ms, saas_test_now() + 900 * 1000);
	assert_int_equal(sb->cost_usd_micro, 0);
	assert_int_equal(saas_test_balance(f->a), 5000000);
	assert_false(saas__pool_owns(f->engine, sb->id));
	assert_true(logged("(from the pool)"));
	assert_int_equal(pool_ready(f, "small", "default"), 1);
	st = stats(f);
	assert_int_equal(st->pool_claims, 1);
	assert_int_equal(st->pools[0]->claims, 1);
	assert_int_equal(st->ready, 1);
	saas_engine_stats_free(st);

	/* It is an ordinary sandbox now: its owner lists it and runs in it; nobody else sees it. */
	assert_int_equal(list_count(f->a), 1);
	assert_int_equal(list_count(f->b), 0);
	assert_int_equal(saas_sandbox_get(&got, f->b, sb->id), SAAS_ENOTFOUND);
	saas_test_advance(60 * 1000);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->cost_usd_micro, 60 * 25);
	saas_sandbox_free(got);
	assert_int_equal(saas_test_balance(f->a), 5000000 - 60 * 25);

	/* The pool refills with a new VM. */
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_int_equal(pool_ready(f, "small", "default"), 2);
	assert_string_not_equal(made[3].name, claimed);

	/* Destroyed, it is gone for good: its VM too, and it never comes back to the pool. */
	assert_int_equal(saas_sandbox_destroy(&got, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(got->cost_usd_micro, 60 * 25);
	saas_sandbox_free(got);
	assert_false(saas_fake_vm_exists(claimed));
	for (int i = 0; i < 5; i++)
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_false(saas__pool_owns(f->engine, claimed));
	assert_false(saas_fake_vm_exists(claimed));
	assert_int_equal(saas_fake_create_calls(), 4);
	for (unsigned int i = 1; i < nmade; i++)
		assert_string_not_equal(made[i].name, claimed);

	/* The pool is per (size, image): medium of tiny is pooled, medium of the default image is not. */
	medium = create_opts(f->a, "medium", "tiny", NULL);
	assert_string_equal(medium->id, made[1].name);
	assert_int_equal(saas_fake_create_calls(), 4);
	plain = create(f->a, "medium");
	assert_int_equal(saas_fake_create_calls(), 5);
	assert_false(saas__pool_owns(f->engine, plain->id));
	assert_string_equal(made[4].name, plain->id);
	assert_string_equal(made[4].image, "default");
	saas_sandbox_free(medium);
	saas_sandbox_free(plain);
	saas_sandbox_free(sb);
}

/* A create that names a network policy is made for it, never taken from the pool. */
static void test_pool_network_bypass(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *iso, *net;

	fill(f);
	iso = create_opts(f->a, "small", NULL, "isolated");
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_string_equal(made[3].name, iso->id);
	assert_int_equal(made[3].internet, 0);
	net = create_opts(f->a, "small", NULL, "internet");
	assert_int_equal(saas_fake_create_calls(), 5);
	assert_string_equal(made[4].name, net->id);
	assert_int_equal(made[4].internet, 1);
	/* A policy too: its VM is made with its rules. */
	{
		const char *const allow[] = { "example.com", NULL };
		saas_network_spec ns = SAAS_NETWORK_SPEC_INIT;
		saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
		saas_sandbox *pol = NULL;

		ns.allow = allow;
		o.network_spec = &ns;
		assert_int_equal(saas_sandbox_create(&pol, f->a, &o, 0), SAAS_OK);
		assert_int_equal(saas_fake_create_calls(), 6);
		assert_string_equal(made[5].name, pol->id);
		assert_int_equal(made[5].internet, SAAS_NET_POLICY);
		assert_int_equal(pol->network->mode, SAAS_NETWORK_POLICY);
		saas_sandbox_free(pol);
	}
	assert_int_equal(pool_ready(f, "small", "default"), 2);
	saas_sandbox_free(iso);
	saas_sandbox_free(net);
}

/* An empty pool, or a size without one, makes the sandbox the ordinary way. */
static void test_pool_empty_falls_back(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1, *s2, *s3, *large;

	fill(f);
	s1 = create(f->a, "small");
	s2 = create(f->a, "small");
	assert_int_equal(saas_fake_create_calls(), 3);
	s3 = create(f->a, "small");
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_string_equal(made[3].name, s3->id);
	large = create(f->a, "large");
	assert_int_equal(saas_fake_create_calls(), 5);
	assert_string_equal(made[4].name, large->id);
	assert_int_equal(list_count(f->a), 4);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
	saas_sandbox_free(s3);
	saas_sandbox_free(large);
}

/* A pooled VM that died is destroyed at claim, and the next one (or a fresh one) is used. */
static void test_pool_dead_vm(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb, *again;
	char dead[SAAS_ID_MAX + 1];

	fill(f);
	strcpy(dead, made[0].name);
	saas_fake_vm_stop(dead);
	sb = create(f->a, "small");
	assert_string_equal(sb->id, made[2].name);
	assert_false(saas_fake_vm_exists(dead));
	assert_false(saas__pool_owns(f->engine, dead));
	assert_true(logged("is not running; destroying it"));
	assert_int_equal(pool_ready(f, "small", "default"), 0);
	assert_int_equal(saas_fake_create_calls(), 3);

	/* Every pooled one dead: the create makes its own. */
	fill(f);
	assert_int_equal(saas_fake_create_calls(), 5);
	saas_fake_vm_stop(made[3].name);
	saas_fake_vm_stop(made[4].name);
	again = create(f->a, "small");
	assert_int_equal(saas_fake_create_calls(), 6);
	assert_string_equal(again->id, made[5].name);
	assert_false(saas_fake_vm_exists(made[3].name));
	assert_false(saas_fake_vm_exists(made[4].name));
	assert_int_equal(list_count(f->a), 2);
	saas_sandbox_free(sb);
	saas_sandbox_free(again);
}

/*
 * A pooled VM made from an image build that is no longer current is never
 * handed out: a claim destroys it and the create makes its own; the refill
 * thread's check destroys the rest, and the refill makes them again.
 */
static void test_pool_image_rebuilt(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;

	fill(f); /* small: made[0], made[2]; medium (tiny): made[1] */
	assert_int_equal(saas_fake_create_calls(), 3);
	saas_fake_image_rebuilt("default");
	sb = create(f->a, "small");
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_string_equal(sb->id, made[3].name);
	assert_false(saas_fake_vm_exists(made[0].name));
	assert_false(saas_fake_vm_exists(made[2].name));
	assert_true(logged("no longer current; destroying it"));
	assert_true(saas_fake_vm_exists(made[1].name)); /* another image's pool is untouched */
	assert_int_equal(saas__pool_drop_outdated(f->engine), 0);
	assert_int_equal(pool_ready(f, "medium", "tiny"), 1);

	/* Without a claim: the check finds it, and the pool is filled from the new build. */
	fill(f);
	saas_fake_image_rebuilt("tiny");
	assert_int_equal(saas__pool_drop_outdated(f->engine), 1);
	assert_false(saas_fake_vm_exists(made[1].name));
	assert_false(saas__pool_owns(f->engine, made[1].name));
	assert_int_equal(pool_ready(f, "medium", "tiny"), 0);
	assert_int_equal(pool_ready(f, "small", "default"), 2);
	fill(f);
	assert_int_equal(pool_ready(f, "medium", "tiny"), 1);
	saas_sandbox_free(sb);
}

/* Every check of an ordinary create holds for a pooled one; a refused create leaves the pool as it was. */
static void test_pool_checks_kept(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *first, *sb = NULL, *bobs;
	char pooled[SAAS_ID_MAX + 1];

	fill(f);
	first = create(f->a, "small");
	fill(f);
	strcpy(pooled, made[1].name);
	/* Alice is at her limit of one: refused, and the VM stays pooled, never handed out. */
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_ELIMIT);
	assert_null(sb);
	assert_true(saas__pool_owns(f->engine, pooled));
	assert_true(saas_fake_vm_exists(pooled));
	assert_int_equal(pool_ready(f, "small", "default"), 1);
	/* Bob cannot pay for a minute of medium (no pool for it anyway), nor a lifetime over the maximum. */
	o.size = "medium";
	assert_int_equal(saas_sandbox_create(&sb, f->b, &o, 0), SAAS_ECREDIT);
	o.size = "small";
	o.timeout_s = 86401;
	assert_int_equal(saas_sandbox_create(&sb, f->b, &o, 0), SAAS_EINVAL);
	o.timeout_s = 0;
	o.size = "huge";
	assert_int_equal(saas_sandbox_create(&sb, f->b, &o, 0), SAAS_EINVAL);
	assert_int_equal(pool_ready(f, "small", "default"), 1);
	assert_int_equal(saas_fake_create_calls(), 2);
	/* The VM alice could not take is bob's to claim, and bills from his claim. */
	bobs = create(f->b, "small");
	assert_string_equal(bobs->id, pooled);
	assert_int_equal(bobs->cost_usd_micro, 0);
	assert_int_equal(saas_test_balance(f->b), 1500);
	saas_sandbox_free(first);
	saas_sandbox_free(bobs);
}

static saas_engine *hook_engine;
static int hook_ok = -1;

/* While the refill's VM is being made, sweep for orphans and check it survived. */
static void sweep_during_create(void *ud, const saas_vm_spec *spec)
{
	(void)ud;
	record_create(NULL, spec);
	hook_ok = saas__orphan_sweep(hook_engine) == SAAS_OK && saas_fake_vm_exists(spec->name) &&
	          saas__pool_owns(hook_engine, spec->name);
}

static void test_pool_orphan_sweep(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	const char *stray = "sbx-strayxstrayxstrayxst";

	fill(f);
	sb = create(f->a, "small");
	saas_fake_vm_add(stray);
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	/* The stray goes; pooled VMs and the claimed sandbox stay. */
	assert_false(saas_fake_vm_exists(stray));
	assert_true(saas_fake_vm_exists(sb->id));
	for (unsigned int i = 0; i < nmade; i++)
		assert_true(saas_fake_vm_exists(made[i].name));
	/* And the VM the refill is making right now is left alone too (once the hold after the claim passed). */
	hook_engine = f->engine;
	hook_ok = -1;
	saas_fake_on_create(sweep_during_create, NULL);
	saas_test_advance(2000);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(hook_ok, 1);
	assert_int_equal(pool_ready(f, "small", "default"), 2);
	assert_int_equal(saas_fake_vm_count(), 4);
	saas_sandbox_free(sb);
}

/* Engine free destroys what nobody claimed; a claimed sandbox keeps running; reconcile clears leftovers. */
static void test_pool_engine_free(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	const char *leftover = "sbx-leftxleftxleftxleft1";

	fill(f);
	sb = create(f->a, "small");
	saas_test_fixture_close(f);
	assert_true(logged("destroying unclaimed VM"));
	assert_int_equal(saas_fake_vm_count(), 1);
	assert_true(saas_fake_vm_exists(sb->id));
	/* A crashed engine's pooled VM has no row: the next open destroys it, and the sandbox stays. */
	saas_fake_vm_add(leftover);
	saas_test_fixture_open(f);
	assert_false(saas_fake_vm_exists(leftover));
	assert_true(saas_fake_vm_exists(sb->id));
	assert_int_equal(pool_ready(f, "small", "default"), 0);
	saas_sandbox_free(sb);
}

/* Failures back off on the engine clock: 1 s, doubling, at most a minute; success resets it. */
static void test_pool_backoff(void **state)
{
	struct saas_test_fixture *f = *state;
	static const int waits[] = { 1, 2, 4, 8, 16, 32, 60, 60 };
	saas_engine_stats *st;
	char line[64];

	saas_fake_fail_creates(8);
	for (unsigned int i = 0; i < 8; i++) {
		log_clear();
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
		assert_int_equal(saas_fake_create_calls(), i + 1);
		snprintf(line, sizeof(line), "next try in %d s", waits[i]);
		assert_true(logged(line));
		/* Not a moment before the delay has passed. */
		saas_test_advance(waits[i] * 1000 - 1);
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
		assert_int_equal(saas_fake_create_calls(), i + 1);
		saas_test_advance(1);
	}
	assert_int_equal(saas_fake_vm_count(), 0);
	st = stats(f);
	assert_int_equal(st->pools[0]->failures + st->pools[1]->failures, 8);
	saas_engine_stats_free(st);
	/* The driver works again: the next sweeps fill the pools without waiting. */
	assert_int_equal(fill(f), 3);
	assert_int_equal(saas_fake_create_calls(), 11);
}

/*
 * After a claim the refill holds off for POOL_CLAIM_HOLD_MS (2 s): the
 * claimer's first commands get the host's CPUs to themselves. Then it makes
 * the replacement as before.
 */
static void test_pool_claim_hold(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;

	fill(f);
	assert_int_equal(saas_fake_create_calls(), 3);
	sb = create(f->a, "small");
	assert_int_equal(pool_ready(f, "small", "default"), 1);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 3);
	saas_test_advance(1999);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 3);
	saas_test_advance(1);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_int_equal(pool_ready(f, "small", "default"), 2);
	saas_sandbox_free(sb);
}

/*
 * A pooled VM that cannot run its first command is never offered: it is
 * destroyed, the failure is logged and backed off as a failed create's, and
 * the next try makes another.
 */
static void test_pool_warm_fails(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_stats *st;
	saas_sandbox *sb;

	saas_fake_fail_execs(1);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_fake_create_calls(), 1);
	assert_false(saas_fake_vm_exists(made[0].name));
	assert_false(saas__pool_owns(f->engine, made[0].name));
	assert_true(logged("its first commands: fake: an exec made to fail"));
	assert_true(logged("next try in 1 s"));
	st = stats(f);
	assert_int_equal(st->pool_ready, 0);
	assert_int_equal(st->pools[0]->failures, 1);
	saas_engine_stats_free(st);
	/* The backoff passes: the pools fill with VMs that each ran their two commands, and a claim gets one of them. */
	saas_test_advance(1000);
	assert_int_equal(fill(f), 3);
	assert_int_equal(saas_fake_create_calls(), 4);
	for (unsigned int i = 1; i < nmade; i++)
		assert_int_equal(saas_fake_vm_execs(made[i].name), 2);
	sb = create(f->a, "small");
	assert_string_not_equal(sb->id, made[0].name);
	assert_true(saas__pool_owns(f->engine, sb->id) == false);
	assert_int_equal(saas_fake_create_calls(), 4);
	saas_sandbox_free(sb);
}

static void expect_bad(struct saas_test_fixture *f, const char *spec, const char *msg)
{
	saas_engine_options o = f->opts;
	saas_engine *e = (saas_engine *)1;
	char *dir = saas_test_tmpdir();

	o.state_dir = dir;
	o.store_url = NULL;
	o.pool = spec;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_null(e);
	if (!strstr(saas_error_last()->message, msg))
		fail_msg("pool '%s': message '%s' lacks '%s'", spec, saas_error_last()->message, msg);
	/* Checked before anything is opened, with a message that names the bad entry. */
	o.flags = SAAS_ENGINE_STORE_ONLY;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	saas_test_rmdir(dir);
}

static void test_pool_bad_specs(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *e = NULL;
	saas_engine_stats *st;
	char *dir = saas_test_tmpdir(), big[5000];

	expect_bad(f, "huge=1", "unknown size 'huge' (sizes: small, medium, large)");
	expect_bad(f, "small=1,huge=2", "unknown size 'huge'");
	expect_bad(f, "small=x", "'x' is not a number");
	expect_bad(f, "small=-1", "'-1' is not a number");
	expect_bad(f, "small=1x", "'1x' is not a number");
	expect_bad(f, "small=", "'' is not a number");
	expect_bad(f, "small=65", "'small=65': at most 64 VMs per pool");
	expect_bad(f, "small=99999999999999999999999", "is not a number");
	expect_bad(f, "small=1,small=2", "size 'small' with image 'default' is named twice");
	expect_bad(f, "small=1,small:default=2", "named twice");
	expect_bad(f, "small", "'small' has no '=N'");
	expect_bad(f, "small=1,,medium=1", "empty entry");
	expect_bad(f, ",", "empty entry");
	expect_bad(f, "small:../etc=1", "'small:../etc': image names are");
	expect_bad(f, "small:=1", "image names are");
	expect_bad(f, ":tiny=1", "unknown size ''");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_bad(f, big, "longer than");
	assert_int_equal(saas_fake_create_calls(), 0);

	/* Spaces around entries are fine; zero is a pool of nothing; "" is no pool. */
	o.state_dir = dir;
	o.store_url = NULL;
	o.pool = " small = 1 , medium:tiny=0 ,large:default=64";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_OK);
	assert_int_equal(saas_engine_stats_get(&st, e), SAAS_OK);
	assert_int_equal(st->npools, 3);
	assert_int_equal(st->pools[0]->target, 1);
	assert_int_equal(st->pools[1]->target, 0);
	assert_int_equal(st->pools[2]->target, 64);
	assert_string_equal(st->pools[2]->image, "default");
	saas_engine_stats_free(st);
	saas_engine_free(e);
	o.pool = "  ";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_OK);
	assert_int_equal(saas_engine_stats_get(&st, e), SAAS_OK);
	assert_int_equal(st->npools, 0);
	assert_null(st->pools);
	saas_engine_stats_free(st);
	saas_engine_free(e);
	saas_test_rmdir(dir);
}

/* A caller built against version 1 has a struct that ends before `pool`: it opens, and nothing past it is read. */
static void test_pool_v1_options(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	size_t v1 = offsetof(saas_engine_options, pool);
	unsigned char *old = malloc(v1); /* exactly a version-1 struct: ASan and valgrind see any read past it */
	unsigned int one = 1;
	saas_engine *e = NULL;
	saas_engine_stats *st;
	char *dir = saas_test_tmpdir();

	assert_non_null(old);
	o.state_dir = dir;
	o.store_url = NULL;
	o.pool = "huge=1"; /* would be refused, were it read */
	memcpy(old, &o, v1);
	memcpy(old, &one, sizeof(one));
	assert_int_equal(saas_engine_open(&e, (const saas_engine_options *)(void *)old), SAAS_OK);
	assert_int_equal(saas_engine_stats_get(&st, e), SAAS_OK);
	assert_int_equal(st->npools, 0);
	saas_engine_stats_free(st);
	saas_engine_free(e);
	free(old);
	o.version = SAAS_ENGINE_OPTIONS_VERSION + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "version"));
	assert_int_equal(SAAS_ENGINE_OPTIONS_VERSION, 9);
	saas_test_rmdir(dir);
}

/* A store-only engine (admin tools) checks the spec but makes no VM. */
static void test_pool_store_only(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *admin = NULL;
	saas_engine_stats *st;

	o.flags = SAAS_ENGINE_STORE_ONLY;
	o.driver = NULL;
	o.pool = "small=4";
	assert_int_equal(saas_engine_open(&admin, &o), SAAS_OK);
	assert_int_equal(saas_engine_stats_get(&st, admin), SAAS_OK);
	assert_int_equal(st->npools, 0);
	saas_engine_stats_free(st);
	saas_engine_free(admin);
	assert_int_equal(saas_fake_create_calls(), 0);
}

/* Poll the stats (never a timing assertion: a generous deadline for a condition). */
static int wait_ready(struct saas_test_fixture *f, unsigned int want, uint64_t failures)
{
	for (int i = 0; i < 2000; i++) {
		saas_engine_stats *st = stats(f);
		int ok = st->pool_ready == want && st->pools[0]->failures == failures;
		saas_engine_stats_free(st);
		if (ok)
			return 1;
		usleep(5000);
	}
	return 0;
}

/* The real refill thread: fills, refills after a claim, backs off, and stops with the engine. */
static void test_pool_thread(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;

	saas_test_fixture_close(f);
	saas_fake_fail_creates(1);
	f->opts.flags = 0;
	f->opts.reaper_interval_ms = 10;
	f->opts.pool = "small=2";
	saas_test_fixture_open(f);
	/* The first create fails; the retry waits for the engine clock to pass the backoff. */
	assert_true(wait_ready(f, 0, 1));
	saas_test_advance(1000);
	assert_true(wait_ready(f, 2, 1));
	sb = create(f->a, "small");
	assert_true(saas_fake_vm_exists(sb->id));
	/* The refill holds off after a claim (POOL_CLAIM_HOLD_MS), then makes the replacement. */
	assert_true(wait_ready(f, 1, 1));
	assert_int_equal(saas_fake_create_calls(), 3);
	saas_test_advance(1999);
	usleep(100 * 1000);
	assert_int_equal(saas_fake_create_calls(), 3);
	saas_test_advance(1);
	assert_true(wait_ready(f, 2, 1));
	assert_int_equal(saas_fake_create_calls(), 4);
	assert_int_equal(saas_fake_vm_count(), 3);
	saas_test_fixture_close(f);
	assert_int_equal(saas_fake_vm_count(), 1);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(sb);
	f->opts.flags = SAAS_ENGINE_NO_REAPER;
	saas_test_fixture_open(f);
}

/* A pooled VM's create that takes as long as the test says: the driver returns when released. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int held, released, hold_timed_out;

static void hold_create(void *ud, const saas_vm_spec *spec)
{
	struct timespec deadline;

	record_create(ud, spec);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 30; /* a bound on a broken test, not a timing */
	pthread_mutex_lock(&hold_mu);
	held = 1;
	pthread_cond_broadcast(&hold_cond);
	while (!released && !hold_timed_out)
		if (pthread_cond_timedwait(&hold_cond, &hold_mu, &deadline) == ETIMEDOUT)
			hold_timed_out = 1;
	pthread_mutex_unlock(&hold_mu);
}

/*
 * Stopping does not wait on a pooled VM's create past its bound: the free
 * returns while the driver still makes it, and that VM is destroyed when the
 * create returns, by the thread that made it.
 */
static void test_pool_stop_bounded(void **state)
{
	struct saas_test_fixture *f = *state;
	int tries = 0;

	saas_test_fixture_close(f);
	held = released = hold_timed_out = 0;
	saas_fake_on_create(hold_create, NULL);
	f->opts.flags = 0;
	f->opts.reaper_interval_ms = 10;
	f->opts.pool = "small=1";
	saas_test_fixture_open_engine(f);
	pthread_mutex_lock(&hold_mu);
	while (!held)
		pthread_cond_wait(&hold_cond, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
	f->engine->stop_wait_ms = 50;
	saas_engine_free(f->engine);
	f->engine = NULL;
	pthread_mutex_lock(&hold_mu);
	assert_false(hold_timed_out);
	/* Freed while its create is still in the driver: that VM exists, and nobody waited for it. */
	assert_int_equal(saas_fake_vm_count(), 1);
	released = 1;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_mu);
	while (__atomic_load_n(&saas__engines_draining, __ATOMIC_SEQ_CST) != 0 && ++tries < 10000)
		usleep(1000);
	assert_int_equal(__atomic_load_n(&saas__engines_draining, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(saas_fake_vm_count(), 0);
	assert_true(logged("still being made"));
	saas_fake_on_create(record_create, NULL);
	f->opts.flags = SAAS_ENGINE_NO_REAPER;
	saas_test_fixture_open(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pool_fills, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_claim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_network_bypass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_empty_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_dead_vm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_image_rebuilt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_checks_kept, setup_tight, teardown),
		cmocka_unit_test_setup_teardown(test_pool_orphan_sweep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_engine_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_backoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_warm_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_claim_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_bad_specs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_v1_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_store_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_stop_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
