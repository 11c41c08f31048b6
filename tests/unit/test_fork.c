/*
 * Fork, pause and resume in the core, over the fake driver's snapshots
 * (tests/fake/fake_driver.c) and a clock that moves only when a test moves
 * it: states, billing to the micro-dollar, expiry and credit while paused,
 * limits, errors, reconcile. The same suite runs on SQLite and PostgreSQL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"

static int setup(void **state)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, SAAS_TEST_FAKE_CLOCK);

	f->opts.max_sandboxes = 5;
	saas_test_fixture_open(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

/* Close the engine and open a new one on the same state (as after a crash: VMs and snapshots stay). */
static void reopen(struct saas_test_fixture *f)
{
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
}

static saas_sandbox *create(saas_client *c, int64_t timeout_s)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.timeout_s = timeout_s;
	if (saas_sandbox_create(&sb, c, &o, 0) != SAAS_OK)
		fail_msg("create: %s", saas_error_last()->message);
	return sb;
}

static saas_sandbox *get(saas_client *c, const char *id)
{
	saas_sandbox *sb = NULL;

	assert_int_equal(saas_sandbox_get(&sb, c, id), SAAS_OK);
	return sb;
}

static int status_of(saas_client *c, const char *id)
{
	saas_sandbox *sb = get(c, id);
	int st = sb->status;

	saas_sandbox_free(sb);
	return st;
}

static void write_file(saas_client *c, const char *id, const char *path, const char *text)
{
	assert_int_equal(saas_file_write(c, id, path, text, strlen(text), NULL), SAAS_OK);
}

static void expect_file(saas_client *c, const char *id, const char *path, const char *text)
{
	void *data = NULL;
	size_t len = 0;

	if (saas_file_read(&data, &len, c, id, path, 1 << 20) != SAAS_OK)
		fail_msg("read %s in %s: %s", path, id, saas_error_last()->message);
	assert_int_equal(len, strlen(text));
	assert_memory_equal(data, text, len);
	saas_free(data);
}

/* small: $0.09 an hour compute; paused 100 micro-USD per GiB-hour x 44 GiB = 4400 an hour. */
#define SMALL_RATE 90000
#define SMALL_PAUSED_RATE 4400

static void test_paused_price(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_account_info *ai;
	saas_engine_info *ei;

	assert_int_equal(saas_account_info_get(&ai, f->a), SAAS_OK);
	assert_int_equal(ai->paused_usd_micro_per_gib_hour, 100);
	assert_string_equal(ai->sizes[0]->name, "small");
	assert_int_equal(saas_size_paused_usd_micro_per_hour(ai->sizes[0], ai->paused_usd_micro_per_gib_hour),
	                 SMALL_PAUSED_RATE);
	saas_account_info_free(ai);
	assert_int_equal(saas_engine_info_get(&ei, f->engine), SAAS_OK);
	assert_int_equal(ei->paused_usd_micro_per_gib_hour, 100);
	saas_engine_info_free(ei);
	assert_int_equal(saas_size_paused_usd_micro_per_hour(NULL, 100), 0);
}

/* Pause each of ids[0..n), let half an hour pass, destroy them: what each cost. */
static void paused_half_hour(saas_client *c, const char *const *ids, size_t n, int64_t *cost)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(saas_sandbox_pause(NULL, c, ids[i], 0), SAAS_OK);
	saas_test_advance(1800 * 1000);
	for (size_t i = 0; i < n; i++) {
		saas_sandbox *d = NULL;
		assert_int_equal(saas_sandbox_destroy(&d, c, ids[i], 0), SAAS_OK);
		assert_int_equal(d->paused_seconds, 1800);
		cost[i] = d->cost_usd_micro;
		saas_sandbox_free(d);
	}
}

/*
 * The paused price is the engine's option: out-of-bounds values are refused,
 * both info calls show it, and each sandbox keeps the price it was made with
 * (a fork's child: the price when it was made, not its parent's).
 */
static void test_paused_price_option(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options bad = f->opts;
	saas_engine *e = NULL;
	saas_account_info *ai;
	saas_engine_info *ei;
	saas_sandbox *before = create(f->a, 7200), *after, *free_one;
	saas_sandbox_list *kids = NULL;
	char kid[SAAS_ID_MAX + 1];
	const char *ids[3];
	int64_t cost[3];
	saas_fork_options fo = SAAS_FORK_OPTIONS_INIT;

	bad.paused_usd_micro_per_gib_hour = SAAS_ENGINE_PAUSED_PRICE_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &bad), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "paused_usd_micro_per_gib_hour 1000000001 is not a price: 1 to "
	                                                "1000000000 micro-dollars, 0 for the default or -1 for free");
	bad.paused_usd_micro_per_gib_hour = -2;
	assert_int_equal(saas_engine_open(&e, &bad), SAAS_EINVAL);
	assert_null(e);
	/* A caller of version 5 has no such field: whatever lies past its struct is not read, the default holds. */
	saas_test_fixture_close(f);
	bad.version = 5;
	bad.paused_usd_micro_per_gib_hour = SAAS_ENGINE_PAUSED_PRICE_MAX + 1;
	assert_int_equal(saas_engine_open(&f->engine, &bad), SAAS_OK);
	assert_int_equal(saas_engine_info_get(&ei, f->engine), SAAS_OK);
	assert_int_equal(ei->paused_usd_micro_per_gib_hour, SAAS_ENGINE_PAUSED_PRICE_DEFAULT);
	saas_engine_info_free(ei);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);

	/* $0.00025 per GiB-hour: small's 44 GiB pay 250 * 45056 / 1024 = 11000 micro-dollars an hour. */
	f->opts.paused_usd_micro_per_gib_hour = 250;
	reopen(f);
	assert_int_equal(saas_account_info_get(&ai, f->a), SAAS_OK);
	assert_int_equal(ai->paused_usd_micro_per_gib_hour, 250);
	assert_int_equal(saas_size_paused_usd_micro_per_hour(ai->sizes[0], ai->paused_usd_micro_per_gib_hour), 11000);
	saas_account_info_free(ai);
	assert_int_equal(saas_engine_info_get(&ei, f->engine), SAAS_OK);
	assert_int_equal(ei->paused_usd_micro_per_gib_hour, 250);
	saas_engine_info_free(ei);
	after = create(f->a, 7200);
	fo.timeout_s = 7200;
	assert_int_equal(saas_sandbox_fork(&kids, f->a, before->id, 1, &fo, 0), SAAS_OK);
	snprintf(kid, sizeof(kid), "%s", kids->items[0]->id);
	saas_sandbox_list_free(kids);
	/* Half an hour paused each, not a second running: 4400 / 2, 11000 / 2. */
	ids[0] = before->id;
	ids[1] = after->id;
	ids[2] = kid;
	paused_half_hour(f->a, ids, 3, cost);
	assert_int_equal(cost[0], SMALL_PAUSED_RATE / 2);
	assert_int_equal(cost[1], 5500);
	assert_int_equal(cost[2], 5500);

	f->opts.paused_usd_micro_per_gib_hour = SAAS_ENGINE_PAUSED_PRICE_FREE;
	reopen(f);
	assert_int_equal(saas_engine_info_get(&ei, f->engine), SAAS_OK);
	assert_int_equal(ei->paused_usd_micro_per_gib_hour, 0);
	saas_engine_info_free(ei);
	free_one = create(f->a, 7200);
	ids[0] = free_one->id;
	paused_half_hour(f->a, ids, 1, cost);
	assert_int_equal(cost[0], 0);
	saas_sandbox_free(before);
	saas_sandbox_free(after);
	saas_sandbox_free(free_one);
}

static void test_pause_resume(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600), *p = NULL, *r = NULL;
	saas_execution *x = NULL;
	char *url = NULL;

	write_file(f->a, sb->id, "/workspace/keep.txt", "still here");
	assert_int_equal(saas_port_expose(&url, f->a, sb->id, 8080, 0), SAAS_OK);
	saas_test_advance(10 * 1000);
	assert_int_equal(saas_sandbox_pause(&p, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(p->status, SAAS_SANDBOX_PAUSED);
	assert_int_equal(p->paused_at_ms, saas_test_now());
	assert_int_equal(p->nports, 1); /* ports stay recorded */
	assert_false(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_fake_snapshot_count(), 1);

	/* A paused sandbox runs nothing, and says why. */
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo hi", NULL, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "paused"));
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_ESTATE);
	/* Extend works while paused: the clock runs. */
	assert_int_equal(saas_sandbox_extend(NULL, f->a, sb->id, 60, 0), SAAS_OK);

	saas_test_advance(20 * 1000);
	assert_int_equal(saas_sandbox_resume(&r, f->a, sb->id, 0), SAAS_OK);
	assert_string_equal(saas_sandbox_status_name(r->status), "ready");
	assert_int_equal(r->paused_at_ms, 0);
	assert_int_equal(r->paused_seconds, 20);
	assert_int_equal(r->nports, 1);
	assert_true(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_fake_snapshot_count(), 0); /* deleted once resumed */
	expect_file(f->a, sb->id, "/workspace/keep.txt", "still here");
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "not paused"));
	saas_free(url);
	saas_sandbox_free(sb);
	saas_sandbox_free(p);
	saas_sandbox_free(r);
}

/* An execution running when the sandbox is paused ends failed, and says why. */
static void test_pause_ends_executions(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600);
	saas_store_execution rec;
	saas_execution *x = NULL;

	memset(&rec, 0, sizeof(rec));
	saas__strlcpy(rec.id, "exe-running", sizeof(rec.id));
	saas__strlcpy(rec.sandbox_id, sb->id, sizeof(rec.sandbox_id));
	saas__strlcpy(rec.account_id, f->account_a, sizeof(rec.account_id));
	rec.status = SAAS_EXEC_RUNNING;
	rec.command = (char *)"sleep 100";
	rec.started_at_ms = saas_test_now();
	assert_int_equal(f->engine->store->execution_insert(f->engine->store_ctx, &rec), SAAS_OK);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(saas_execution_get(&x, f->a, "exe-running"), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_FAILED);
	assert_string_equal(x->error, "the sandbox was paused");
	saas_execution_free(x);
	saas_sandbox_free(sb);
}

static void test_pause_billing(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 7200), *d = NULL;

	saas_test_advance(100 * 1000 + 999);                 /* 100.999 s running */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_test_advance(1800 * 1000 + 500);                /* 1800.5 s paused */
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_test_advance(50 * 1000);                        /* 50 s running */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_test_advance(900 * 1000);                       /* 900 s paused, then destroyed */
	assert_int_equal(saas_sandbox_destroy(&d, f->a, sb->id, 0), SAAS_OK);
	/*
	 * Run: 100.999 + 50 = 150.999 s -> 150 whole seconds; paused: 2700.5 s ->
	 * 2700 whole seconds. Each rounded down once: 90000*150/3600 = 3750 and
	 * 4400*2700/3600 = 3300.
	 */
	assert_int_equal(d->cost_usd_micro, 3750 + 3300);
	assert_int_equal(d->paused_seconds, 2700);
	assert_int_equal(saas_fake_snapshot_count(), 0); /* destroy deletes the saved state */
	saas_sandbox_free(sb);
	saas_sandbox_free(d);
}

static void test_pause_expiry(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 120), *d = NULL;
	unsigned int destroyed = 0;

	saas_test_advance(60 * 1000);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_test_advance(61 * 1000);                        /* past its expiry: the clock ran while paused */
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "expired"));
	assert_int_equal(saas_engine_sweep(&destroyed, f->engine), SAAS_OK);
	assert_int_equal(destroyed, 1);
	d = get(f->a, sb->id);
	assert_int_equal(d->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(d->end_reason, SAAS_END_EXPIRED);
	/* Billed to its expiry: 60 s running, 60 s paused. */
	assert_int_equal(d->cost_usd_micro, 90000 * 60 / 3600 + SMALL_PAUSED_RATE * 60 / 3600);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	saas_sandbox_free(sb);
	saas_sandbox_free(d);
}

static void test_paused_out_of_credit(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	unsigned int destroyed = 0;
	char *key;
	char acct[SAAS_ID_MAX + 1];
	saas_client *poor;
	saas_sandbox *d;

	/* Enough for one minute running (1500) and then 1000 more: 818 s paused at 4400 an hour. */
	key = saas_test_account_key(f->engine, "poor", 2500, acct, sizeof(acct));
	assert_non_null(key);
	assert_int_equal(saas_client_open_local(&poor, f->engine, key, 0), SAAS_OK);
	sb = create(poor, 86400);
	saas_test_advance(60 * 1000);
	assert_int_equal(saas_sandbox_pause(NULL, poor, sb->id, 0), SAAS_OK);
	/* The balance (1000) cannot pay for a minute running: resume is refused, it stays paused. */
	assert_int_equal(saas_sandbox_resume(NULL, poor, sb->id, 0), SAAS_ECREDIT);
	assert_int_equal(status_of(poor, sb->id), SAAS_SANDBOX_PAUSED);
	saas_test_advance(3600 * 1000);
	assert_int_equal(saas_engine_sweep(&destroyed, f->engine), SAAS_OK);
	assert_int_equal(destroyed, 1);
	d = get(poor, sb->id);
	assert_int_equal(d->end_reason, SAAS_END_CREDIT);
	/* Stopped at the first moment what it cost reached the credit (a step of a second may pass it by 1). */
	if (d->cost_usd_micro < 2500 || d->cost_usd_micro > 2502)
		fail_msg("cost %lld", (long long)d->cost_usd_micro);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	saas_sandbox_free(d);
	saas_sandbox_free(sb);
	saas_client_free(poor);
	saas_free(key);
}

static void test_pause_failures(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600);
	saas_execution *x = NULL;

	saas_fake_fail_snapshots(1);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "runs on"));
	assert_int_equal(status_of(f->a, sb->id), SAAS_SANDBOX_READY);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo ok", NULL, 0), SAAS_OK);
	saas_execution_free(x);

	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_fake_fail_restores(1);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "stays paused"));
	assert_int_equal(status_of(f->a, sb->id), SAAS_SANDBOX_PAUSED);
	assert_int_equal(saas_fake_snapshot_count(), 1);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_OK);

	/* No room on the host (the driver's memory refusal): busy, and when to try again, as a create's. */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_fake_busy_restores(1);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_EBUSY);
	assert_non_null(strstr(saas_error_last()->message, "stays paused"));
	assert_int_equal(saas_error_last()->retry_after_ms, 10000);
	assert_int_equal(status_of(f->a, sb->id), SAAS_SANDBOX_PAUSED);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_OK);
	/* Another failure says no such thing. */
	saas_fake_fail_snapshots(1);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_EBACKEND);
	assert_int_equal(saas_error_last()->retry_after_ms, 0);

	/* Bad arguments. */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, "sbx-nope", 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 1), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_pause(NULL, NULL, sb->id, 0), SAAS_EINVAL);
	saas_sandbox_free(sb);
}

static void test_fork(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600), *parent;
	saas_sandbox_list *kids = NULL;
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;

	write_file(f->a, sb->id, "/workspace/state.txt", "prepared");
	saas_test_advance(5000);
	o.timeout_s = 600;
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 3, &o, 0), SAAS_OK);
	assert_int_equal(kids->count, 3);
	for (size_t i = 0; i < kids->count; i++) {
		saas_sandbox *k = kids->items[i];
		assert_int_equal(k->status, SAAS_SANDBOX_READY);
		assert_string_not_equal(k->id, sb->id);
		assert_string_equal(k->parent_id, sb->id);
		assert_string_equal(k->size, sb->size);
		assert_string_equal(k->image, sb->image);
		assert_int_equal(k->expires_at_ms, saas_test_now() + 600 * 1000);
		expect_file(f->a, k->id, "/workspace/state.txt", "prepared");
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(k->id, kids->items[j]->id);
	}
	/* Each a machine of its own: a write in one is not in the others, nor in the parent. */
	write_file(f->a, kids->items[0]->id, "/workspace/state.txt", "changed");
	expect_file(f->a, kids->items[1]->id, "/workspace/state.txt", "prepared");
	expect_file(f->a, sb->id, "/workspace/state.txt", "prepared");
	/* The parent ran on; the snapshot is gone. */
	parent = get(f->a, sb->id);
	assert_int_equal(parent->status, SAAS_SANDBOX_READY);
	assert_null(parent->parent_id);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	assert_int_equal(saas_fake_snapshot_calls(), 1);
	assert_int_equal(saas_fake_restore_calls(), 3);

	/* Children bill separately, from when they were ready. */
	saas_test_advance(300 * 1000);
	{
		saas_sandbox *k0 = get(f->a, kids->items[0]->id), *p2 = get(f->a, sb->id);
		assert_int_equal(k0->cost_usd_micro, SMALL_RATE * 300 / 3600);
		assert_int_equal(p2->cost_usd_micro, SMALL_RATE * 305 / 3600);
		saas_sandbox_free(k0);
		saas_sandbox_free(p2);
	}
	saas_sandbox_list_free(kids);
	saas_sandbox_free(parent);
	saas_sandbox_free(sb);
}

static void test_fork_limits(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600), *p = NULL;
	saas_sandbox_list *kids = NULL;
	saas_fork_options bad = SAAS_FORK_OPTIONS_INIT;

	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 0, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, SAAS_FORK_MAX + 1, NULL, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "1 to 10"));
	bad.version = 99;
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 1, &bad, 0), SAAS_EINVAL);
	bad.version = SAAS_FORK_OPTIONS_VERSION;
	bad.timeout_s = 10 * 86400;
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 1, &bad, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, "sbx-nope", 1, NULL, 0), SAAS_ENOTFOUND);
	/* max_sandboxes is 5: the parent and 4 more, not 5 more. */
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 5, NULL, 0), SAAS_ELIMIT);
	assert_non_null(strstr(saas_error_last()->message, "max_sandboxes"));
	assert_int_equal(saas_fake_snapshot_calls(), 0);
	assert_null(kids);

	/* A paused sandbox cannot be forked: 409 over REST. */
	assert_int_equal(saas_sandbox_pause(&p, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "paused"));
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_OK);

	/* A restore that fails: all or nothing, the children made go unbilled, the snapshot too. */
	saas_fake_fail_restores(0);
	{
		unsigned int before = saas_fake_vm_count();
		saas_sandbox_list *all = NULL;

		saas_fake_fail_snapshots(0);
		/* The second restore fails. */
		assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_OK);
		saas_sandbox_list_free(kids);
		kids = NULL;
		before = saas_fake_vm_count();
		saas_fake_fail_restores(1);
		assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 2, NULL, 0), SAAS_EBACKEND);
		assert_null(kids);
		assert_int_equal(saas_fake_vm_count(), before);
		assert_int_equal(saas_fake_snapshot_count(), 0);
		assert_int_equal(saas_sandbox_list_get(&all, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
		assert_int_equal(all->count, 2); /* the parent and the first fork's child */
		saas_sandbox_list_free(all);
		all = NULL;

		/* No room on the host for a child (the driver's memory refusal): busy, and when to try again. */
		saas_fake_busy_restores(1);
		assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 2, NULL, 0), SAAS_EBUSY);
		assert_non_null(strstr(saas_error_last()->message, "could not be made"));
		assert_int_equal(saas_error_last()->retry_after_ms, 10000);
		assert_null(kids);
		assert_int_equal(saas_fake_vm_count(), before);
		assert_int_equal(saas_fake_snapshot_count(), 0);
		assert_int_equal(saas_sandbox_list_get(&all, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
		assert_int_equal(all->count, 2);
		saas_sandbox_list_free(all);
	}
	saas_sandbox_free(p);
	saas_sandbox_free(sb);
}

/* ---- a fork's children made side by side (SAAS_FORK_AT_ONCE) ---- */

/* Reopen with room for a fork of SAAS_FORK_MAX beside its parent. */
static void reopen_roomy(struct saas_test_fixture *f)
{
	saas_test_fixture_close(f);
	f->opts.max_sandboxes = SAAS_FORK_MAX + 2;
	saas_test_fixture_open(f);
}

/*
 * After a fork that failed: no VM but the parent's, no snapshot, no child
 * live, and every child begun (each restore called) recorded as failed and
 * billed nothing, though the clock ran on. Returns how many were recorded.
 */
static size_t expect_fork_undone(struct saas_test_fixture *f, const char *parent, unsigned int vms_before)
{
	saas_sandbox_list *all = NULL;
	size_t children = 0;

	assert_int_equal(saas_fake_vm_count(), vms_before);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	assert_int_equal(saas_sandbox_list_get(&all, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
	assert_int_equal(all->count, 1);
	assert_string_equal(all->items[0]->id, parent);
	saas_sandbox_list_free(all);
	saas_test_advance(60 * 1000);
	all = NULL;
	assert_int_equal(saas_sandbox_list_get(&all, f->a, NULL, 100, SAAS_LIST_DESTROYED), SAAS_OK);
	for (size_t i = 0; i < all->count; i++) {
		saas_sandbox *k = all->items[i];
		if (!k->parent_id || strcmp(k->parent_id, parent) != 0)
			continue;
		children++;
		assert_int_equal(k->end_reason, SAAS_END_FAILED);
		assert_int_equal(k->cost_usd_micro, 0);
	}
	saas_sandbox_list_free(all);
	assert_int_equal(children, saas_fake_restore_calls());
	assert_int_equal(status_of(f->a, parent), SAAS_SANDBOX_READY);
	return children;
}

static void test_fork_side_by_side(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600);
	saas_sandbox_list *kids = NULL;

	write_file(f->a, sb->id, "/workspace/state.txt", "prepared");
	/* Each restore waits until all three are under way: made one after another, they never would be. */
	saas_fake_restore_gate(3, 60 * 1000);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 3, NULL, 0), SAAS_OK);
	assert_int_equal(saas_fake_restores_peak(), 3);
	assert_int_equal(kids->count, 3);
	for (size_t i = 0; i < kids->count; i++) {
		assert_int_equal(kids->items[i]->status, SAAS_SANDBOX_READY);
		assert_int_equal(status_of(f->a, kids->items[i]->id), SAAS_SANDBOX_READY);
		assert_true(saas_fake_vm_exists(kids->items[i]->id));
		expect_file(f->a, kids->items[i]->id, "/workspace/state.txt", "prepared");
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(kids->items[i]->id, kids->items[j]->id);
	}
	assert_int_equal(saas_fake_restore_calls(), 3);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	/* Each billed from its own ready, as a create is. */
	saas_test_advance(60 * 1000);
	for (size_t i = 0; i < kids->count; i++) {
		saas_sandbox *k = get(f->a, kids->items[i]->id);
		assert_int_equal(k->cost_usd_micro, SMALL_RATE * 60 / 3600);
		saas_sandbox_free(k);
	}
	saas_sandbox_list_free(kids);
	saas_sandbox_free(sb);
}

/*
 * A driver that can (snapshot_expect) gets the children begun before the
 * snapshot is taken: each restore waits in the driver for it (here until
 * both wait: a fork that began them after would never get there), and they
 * are made from it. When the snapshot then fails, the children waiting for
 * it fail with it: the fork says why the snapshot failed, and leaves nothing.
 */
static void test_fork_children_begun_early(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600);
	saas_sandbox_list *kids = NULL;
	unsigned int before = saas_fake_vm_count();

	write_file(f->a, sb->id, "/workspace/state.txt", "prepared");
	saas_fake_snapshot_hold(2, 60 * 1000);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 2, NULL, 0), SAAS_OK);
	assert_int_equal(saas_fake_restores_waited(), 2);
	assert_int_equal(kids->count, 2);
	for (size_t i = 0; i < kids->count; i++) {
		assert_int_equal(status_of(f->a, kids->items[i]->id), SAAS_SANDBOX_READY);
		expect_file(f->a, kids->items[i]->id, "/workspace/state.txt", "prepared");
	}
	assert_int_equal(saas_fake_snapshot_count(), 0);
	for (size_t i = 0; i < kids->count; i++) {
		saas_sandbox *gone = NULL;
		assert_int_equal(saas_sandbox_destroy(&gone, f->a, kids->items[i]->id, 0), SAAS_OK);
		saas_sandbox_free(gone);
	}
	saas_sandbox_list_free(kids);
	kids = NULL;

	saas_fake_fail_snapshots(1);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 2, NULL, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "fails as the test asked"));
	assert_null(kids);
	assert_int_equal(saas_fake_restores_waited(), 4);
	assert_int_equal(saas_fake_vm_count(), before);
	assert_int_equal(saas_fake_snapshot_count(), 0);
	assert_int_equal(saas_sandbox_list_get(&kids, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
	assert_int_equal(kids->count, 1);
	assert_string_equal(kids->items[0]->id, sb->id);
	assert_int_equal(kids->items[0]->status, SAAS_SANDBOX_READY);
	saas_sandbox_list_free(kids);
	saas_sandbox_free(sb);
}

static void test_fork_at_once_cap(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	saas_sandbox_list *kids = NULL;

	reopen_roomy(f);
	sb = create(f->a, 3600);
	/*
	 * Each restore waits for one more than the cap to be under way, or a
	 * while: within the cap, no turn ever gets there, and each waits its
	 * while out; past it, the gate would see more.
	 */
	saas_fake_restore_gate(SAAS_FORK_AT_ONCE + 1, 1500);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, SAAS_FORK_MAX, NULL, 0), SAAS_OK);
	assert_int_equal(saas_fake_restores_peak(), SAAS_FORK_AT_ONCE);
	assert_int_equal(kids->count, SAAS_FORK_MAX);
	assert_int_equal(saas_fake_restore_calls(), SAAS_FORK_MAX);
	for (size_t i = 0; i < kids->count; i++)
		assert_int_equal(status_of(f->a, kids->items[i]->id), SAAS_SANDBOX_READY);
	assert_int_equal(saas_fake_vm_count(), SAAS_FORK_MAX + 1);
	saas_sandbox_list_free(kids);
	saas_sandbox_free(sb);
}

static void test_fork_fails_half_way(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, 3600);
	saas_sandbox_list *kids = NULL;
	unsigned int before = saas_fake_vm_count();

	/* Four children under way together (the parent and four fill max_sandboxes); the third restore fails. */
	saas_fake_restore_gate(4, 60 * 1000);
	saas_fake_fail_restore_nth(3);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 4, NULL, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "fails as the test asked"));
	assert_null(kids);
	assert_int_equal(saas_fake_restores_peak(), 4);
	/* All four were begun: three made and undone, one failed. */
	assert_int_equal(expect_fork_undone(f, sb->id, before), 4);
	/* The account's room is back: a fork of four again is made whole. */
	saas_fake_restore_gate(0, 0);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, 4, NULL, 0), SAAS_OK);
	assert_int_equal(kids->count, 4);
	saas_sandbox_list_free(kids);
	saas_sandbox_free(sb);
}

static void test_fork_fails_second_turn(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	saas_sandbox_list *kids = NULL;
	unsigned int before;
	int64_t balance;

	reopen_roomy(f);
	sb = create(f->a, 3600);
	before = saas_fake_vm_count();
	balance = saas_test_balance(f->a);
	/* The first restore of the second turn fails: the first turn's children are made by then, and undone. */
	saas_fake_fail_restore_nth(SAAS_FORK_AT_ONCE + 1);
	assert_int_equal(saas_sandbox_fork(&kids, f->a, sb->id, SAAS_FORK_MAX, NULL, 0), SAAS_EBACKEND);
	assert_null(kids);
	assert_true(expect_fork_undone(f, sb->id, before) > SAAS_FORK_AT_ONCE);
	/* Only the parent was billed meanwhile: its minute. */
	assert_int_equal(balance - saas_test_balance(f->a), SMALL_RATE * 60 / 3600);
	saas_sandbox_free(sb);
}

/* ---- what a timeout does (saas_create_options.on_timeout) ---- */

static saas_sandbox *create_pausing(saas_client *c, int64_t timeout_s, const char *const *metadata,
                                    const char *const *envs)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.timeout_s = timeout_s;
	o.on_timeout = SAAS_ON_TIMEOUT_PAUSE;
	o.auto_resume = 1;
	o.metadata = metadata;
	o.envs = envs;
	if (saas_sandbox_create(&sb, c, &o, 0) != SAAS_OK)
		fail_msg("create: %s", saas_error_last()->message);
	return sb;
}

static void test_pause_on_timeout(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const meta[] = { "k=v", NULL };
	saas_sandbox *sb = create_pausing(f->a, 60, meta, NULL), *got, *plain = create(f->a, 60);
	unsigned int n = 99;
	int64_t now;

	assert_int_equal(sb->on_timeout, SAAS_ON_TIMEOUT_PAUSE);
	assert_int_equal(sb->auto_resume, 1);
	write_file(f->a, sb->id, "kept.txt", "kept");
	saas_test_advance(60 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	/* One ended (the plain one); the other paused, not destroyed, its VM gone and its state saved. */
	assert_int_equal(n, 1);
	assert_int_equal(status_of(f->a, plain->id), SAAS_SANDBOX_DESTROYED);
	got = get(f->a, sb->id);
	assert_int_equal(got->status, SAAS_SANDBOX_PAUSED);
	assert_false(saas_fake_vm_exists(sb->id));
	now = saas_test_clock(NULL);
	/* Kept paused for the longest lifetime (86400 s by default), from when it paused. */
	assert_int_equal(got->expires_at_ms, now + 86400 * 1000);
	assert_string_equal(got->metadata[0], "k=v");
	saas_sandbox_free(got);
	/* A resume gives it its own lifetime again, from then; its files came back. */
	saas_test_advance(3600 * 1000);
	assert_int_equal(saas_sandbox_resume(&got, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(got->expires_at_ms, saas_test_clock(NULL) + 60 * 1000);
	saas_sandbox_free(got);
	expect_file(f->a, sb->id, "kept.txt", "kept");
	/* Extended or shortened, it still pauses at the end. */
	assert_int_equal(saas_sandbox_extend(NULL, f->a, sb->id, 10, SAAS_EXTEND_FROM_NOW), SAAS_OK);
	saas_test_advance(10 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 0);
	assert_int_equal(status_of(f->a, sb->id), SAAS_SANDBOX_PAUSED);
	/* Paused past its bound, it ends as an expired one does. */
	saas_test_advance(86400 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	got = get(f->a, sb->id);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	saas_sandbox_free(got);
	saas_sandbox_free(plain);
	saas_sandbox_free(sb);
}

static void test_pause_on_timeout_fails(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create_pausing(f->a, 60, NULL, NULL), *got;
	unsigned int n = 0;

	/* A pause that cannot be made ends it: its time is up either way. */
	saas_fake_fail_snapshots(1);
	saas_test_advance(60 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	got = get(f->a, sb->id);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

static void test_fork_copies_values(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const meta[] = { "role=parent", "team=blue", NULL };
	static const char *const envs[] = { "GREETING=hi", NULL };
	saas_sandbox *parent = create_pausing(f->a, 600, meta, envs);
	saas_sandbox_list *kids = NULL;
	saas_execution *x = NULL;

	assert_int_equal(saas_sandbox_fork(&kids, f->a, parent->id, 2, NULL, 0), SAAS_OK);
	for (size_t i = 0; i < kids->count; i++) {
		saas_sandbox *kid = get(f->a, kids->items[i]->id);
		assert_string_equal(kid->metadata[0], "role=parent");
		assert_string_equal(kid->metadata[1], "team=blue");
		assert_null(kid->metadata[2]);
		assert_string_equal(kid->envs[0], "GREETING=hi");
		assert_int_equal(kid->on_timeout, SAAS_ON_TIMEOUT_PAUSE);
		assert_int_equal(kid->auto_resume, 1);
		assert_int_equal(saas_exec(&x, f->a, kid->id, "env", NULL, 0), SAAS_OK);
		assert_non_null(strstr(x->stdout_data, "GREETING=hi\n"));
		saas_execution_free(x);
		saas_sandbox_free(kid);
	}
	saas_sandbox_list_free(kids);
	saas_sandbox_free(parent);
}

static void test_fork_credit(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;
	saas_sandbox_list *kids = NULL;
	saas_client *poor;
	char acct[SAAS_ID_MAX + 1];
	/* One minute of small is 1500: the parent's create needs 1500, two children 3000, one 1500. */
	char *key = saas_test_account_key(f->engine, "poor", 2000, acct, sizeof(acct));

	assert_int_equal(saas_client_open_local(&poor, f->engine, key, 0), SAAS_OK);
	sb = create(poor, 3600);
	assert_int_equal(saas_sandbox_fork(&kids, poor, sb->id, 2, NULL, 0), SAAS_ECREDIT);
	assert_int_equal(saas_sandbox_fork(&kids, poor, sb->id, 1, NULL, 0), SAAS_OK);
	saas_sandbox_list_free(kids);
	saas_sandbox_free(sb);
	saas_client_free(poor);
	saas_free(key);
}

static void test_not_supported(void **state)
{
	static saas_driver v3;       /* the fake driver as a version 3 table (no snapshots); the engine outlives the test */
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb;

	/* A version 3 table: the snapshot slots do not exist and are never read. */
	saas_test_fixture_close(f);
	memcpy(&v3, &saas_fake_driver, offsetof(saas_driver, vm_snapshot));
	v3.version = 3;
	f->opts.driver = &v3;
	saas_test_fixture_open(f);
	sb = create(f->a, 600);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "cannot save"));
	assert_int_equal(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_ENOTSUP);
	assert_int_equal(saas_sandbox_fork(NULL, f->a, sb->id, 1, NULL, 0), SAAS_ENOTSUP);
	/* Nor the file slots of version 11, which an older table lacks too. */
	assert_int_equal(saas_file_mkdir(NULL, f->a, sb->id, "d", 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "driver 'fake' cannot make directories"));
	assert_int_equal(saas_file_remove(f->a, sb->id, "d", 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "cannot remove files"));
	assert_int_equal(saas_file_rename(f->a, sb->id, "d", "e", 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "cannot rename files"));
	assert_int_equal(status_of(f->a, sb->id), SAAS_SANDBOX_READY);
	saas_sandbox_free(sb);
}

static void test_reconcile(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *a = create(f->a, 3600), *b = create(f->a, 3600), *d;
	char snap_b[SAAS_STORE_SNAPSHOT_MAX + 1];
	saas_store_sandbox row;

	assert_int_equal(saas_sandbox_pause(NULL, f->a, a->id, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, b->id, 0), SAAS_OK);
	assert_int_equal(f->engine->store->sandbox_get(f->engine->store_ctx, b->id, &row), SAAS_OK);
	saas__strlcpy(snap_b, row.snapshot, sizeof(snap_b));
	/* What a crash may leave: a fork's snapshot nobody owns; a paused sandbox's state lost. */
	saas_fake_snapshot_add("snap-orphan");
	saas_fake_snapshot_lose(snap_b);
	saas_test_advance(30 * 1000);
	reopen(f);
	assert_false(saas_fake_snapshot_exists("snap-orphan"));
	assert_int_equal(status_of(f->a, a->id), SAAS_SANDBOX_PAUSED);
	d = get(f->a, b->id);
	assert_int_equal(d->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(d->end_reason, SAAS_END_LOST);
	saas_sandbox_free(d);
	/* The one kept still resumes. */
	assert_int_equal(saas_sandbox_resume(NULL, f->a, a->id, 0), SAAS_OK);
	saas_sandbox_free(a);
	saas_sandbox_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_paused_price, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_price_option, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_ends_executions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_billing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_out_of_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_supported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_on_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pause_on_timeout_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_copies_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_side_by_side, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_children_begun_early, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_at_once_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_fails_half_way, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_fails_second_turn, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
