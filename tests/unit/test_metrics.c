/*
 * A sandbox's metrics in the core (lib/core/metrics.c), over the fake
 * driver's samples (one CPU-second per command run, a quarter of the memory
 * and a MiB per command, the files written as disk) and a clock that moves
 * only when a test moves it. The tests call the sampling pass themselves,
 * as the engine's thread would every interval.
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

#define MIB (1LL << 20)
#define GIB (1LL << 30)

static int setup(void **state)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, SAAS_TEST_FAKE_CLOCK | SAAS_TEST_BOB);

	saas_test_fixture_open(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

static char *create(saas_client *c)
{
	saas_sandbox *sb = NULL;
	char *id;

	if (saas_sandbox_create(&sb, c, NULL, 0) != SAAS_OK)
		fail_msg("create: %s", saas_error_last()->message);
	id = strdup(sb->id);
	saas_sandbox_free(sb);
	assert_non_null(id);
	return id;
}

static void run(saas_client *c, const char *id, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		saas_execution *x = NULL;
		assert_int_equal(saas_exec(&x, c, id, "echo hi", NULL, 0), SAAS_OK);
		saas_execution_free(x);
	}
}

static saas_metric_list *metrics(saas_client *c, const char *id, int64_t start, int64_t end)
{
	saas_metric_list *l = NULL;

	if (saas_sandbox_metrics_get(&l, c, id, start, end, 0) != SAAS_OK)
		fail_msg("metrics: %s", saas_error_last()->message);
	return l;
}

/* Samples over time: CPU as a share of the interval, memory and disk as the driver said, oldest first. */
static void test_samples(void **state)
{
	struct saas_test_fixture *f = *state;
	char *id = create(f->a);
	saas_metric_list *l;
	int64_t t1, t2;

	saas_test_advance(1000);
	t1 = saas_test_now();
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	/* Two commands (two CPU-seconds) over 4 s of 2 vCPUs: a quarter of what it has. */
	run(f->a, id, 2);
	assert_int_equal(saas_file_write(f->a, id, "data.bin", "0123456789", 10, NULL), SAAS_OK);
	saas_test_advance(4000);
	t2 = saas_test_now();
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);

	l = metrics(f->a, id, 0, 0);
	assert_int_equal(l->count, 2);
	assert_true(l->items[0]->at_ms == t1 && l->items[1]->at_ms == t2);
	assert_int_equal(l->items[0]->vcpus, 2);
	/* The first has no sample before it: nothing ran since ready. */
	assert_true(l->items[0]->cpu_used_pct == 0.0);
	assert_true(l->items[1]->cpu_used_pct == 25.0);
	assert_int_equal(l->items[1]->memory_total, 4 * GIB);
	assert_int_equal(l->items[1]->memory_used, GIB + 2 * MIB);
	assert_int_equal(l->items[1]->disk_total, 40 * GIB);
	assert_int_equal(l->items[1]->disk_used, 10);
	saas_metric_list_free(l);

	/* A window holds what was taken in it, both ends included. */
	l = metrics(f->a, id, t2, t2);
	assert_int_equal(l->count, 1);
	assert_true(l->items[0]->at_ms == t2);
	saas_metric_list_free(l);
	l = metrics(f->a, id, 0, t1);
	assert_int_equal(l->count, 1);
	assert_true(l->items[0]->at_ms == t1);
	saas_metric_list_free(l);
	/* A window that ends over an interval ago with nothing in it is empty: no sample is made up for it. */
	l = metrics(f->a, id, 1, t1 - 10000);
	assert_int_equal(l->count, 0);
	saas_metric_list_free(l);
	free(id);
}

/* With no history yet, a request takes a sample then: CPU the average since ready. */
static void test_on_demand(void **state)
{
	struct saas_test_fixture *f = *state;
	char *id = create(f->a);
	saas_metric_list *l;
	size_t histories, slots;

	run(f->a, id, 4); /* 4 CPU-seconds */
	saas_test_advance(10000);
	l = metrics(f->a, id, 0, 0);
	assert_int_equal(l->count, 1);
	assert_true(l->items[0]->at_ms == saas_test_now());
	/* 4 s of 2 vCPUs over 10 s: 20 %. */
	assert_true(l->items[0]->cpu_used_pct == 20.0);
	saas_metric_list_free(l);
	/* It is kept, and the next pass's CPU counts from it. */
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 1);
	run(f->a, id, 1);
	saas_test_advance(5000);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	l = metrics(f->a, id, 0, 0);
	assert_int_equal(l->count, 2);
	assert_true(l->items[1]->cpu_used_pct == 10.0);
	saas_metric_list_free(l);
	free(id);
}

/* A history goes when its sandbox is no longer ready; a destroyed sandbox has no samples. */
static void test_freed(void **state)
{
	struct saas_test_fixture *f = *state;
	char *a = create(f->a), *b = create(f->a);
	saas_metric_list *l;
	size_t histories, slots;

	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 2);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, a, 0), SAAS_OK);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 1);
	l = metrics(f->a, a, 0, 0);
	assert_int_equal(l->count, 0);
	saas_metric_list_free(l);
	/* Paused: no VM, no numbers, no history. */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, b, 0), SAAS_OK);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 0);
	assert_int_equal(slots, 0);
	l = metrics(f->a, b, 0, 0);
	assert_int_equal(l->count, 0);
	saas_metric_list_free(l);
	free(a);
	free(b);
}

/* The bounds: a window's worth per sandbox, and metrics_samples_max in total. */
static void test_bounds(void **state)
{
	struct saas_test_fixture *f = *state;
	char *a, *b;
	saas_metric_list *l;
	size_t histories, slots;

	saas_test_fixture_close(f);
	f->opts.metrics_interval_ms = 1000;
	f->opts.metrics_window_s = 20;  /* 20 per sandbox */
	f->opts.metrics_samples_max = 30;
	saas_test_fixture_open(f);
	a = create(f->a);
	b = create(f->a);
	for (int i = 0; i < 100; i++) {
		saas_test_advance(1000);
		assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	}
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 2);
	assert_true(slots <= 30);
	l = metrics(f->a, a, 0, 0);
	assert_true(l->count >= 1 && l->count <= 20);
	/* The newest are the ones kept. */
	assert_true(l->items[l->count - 1]->at_ms == saas_test_now());
	saas_metric_list_free(l);
	l = metrics(f->a, b, 0, 0);
	assert_true(l->count >= 1 && l->count <= 20);
	assert_true(l->items[l->count - 1]->at_ms == saas_test_now());
	saas_metric_list_free(l);
	free(a);
	free(b);
}

static void test_refusals(void **state)
{
	struct saas_test_fixture *f = *state;
	char *id = create(f->a);
	saas_metric_list *l = NULL;
	saas_engine *e = NULL;
	saas_engine_options o = f->opts;

	/* Another account's sandbox does not exist for bob. */
	assert_int_equal(saas_sandbox_metrics_get(&l, f->b, id, 0, 0, 0), SAAS_ENOTFOUND);
	assert_null(l);
	assert_int_equal(saas_sandbox_metrics_get(&l, f->a, "sbx-nothere", 0, 0, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_sandbox_metrics_get(&l, f->a, id, -1, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_metrics_get(&l, f->a, id, 10, 5, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_metrics_get(&l, f->a, id, 0, 0, 1), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_metrics_get(NULL, f->a, id, 0, 0, 0), SAAS_EINVAL);
	/* Options out of range are refused at open, naming the field. */
	o.metrics_interval_ms = 50;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "metrics_interval_ms"));
	o.metrics_interval_ms = 100;
	o.metrics_window_s = 86400;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "metrics_window_s"));
	assert_null(e);
	free(id);
}

/*
 * On a store other engines share, an engine samples the sandboxes whose VM
 * it started and those it was asked about, not every one: after a restart
 * (its histories gone) nothing is sampled until a request, which gets one
 * sample then, and the passes keep it from then on.
 */
static void test_shared_store(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_metric_list *l;
	size_t histories, slots;
	char *id;

	saas_test_fixture_close(f);
	saas_test_shared_store(&f->opts);
	saas_test_fixture_open(f);
	id = create(f->a);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 1); /* its VM was started here */
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	saas__metrics_held(f->engine, &histories, &slots);
	assert_int_equal(histories, 0);
	saas_test_advance(1000);
	l = metrics(f->a, id, 0, 0);
	assert_int_equal(l->count, 1);
	saas_metric_list_free(l);
	saas_test_advance(1000);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	l = metrics(f->a, id, 0, 0);
	assert_int_equal(l->count, 2);
	saas_metric_list_free(l);
	free(id);
}

/* A driver without vm_sample: ENOTSUP, saying so. */
static void test_no_driver_slot(void **state)
{
	struct saas_test_fixture *f = *state;
	static saas_driver old;
	saas_metric_list *l = NULL;
	char *id;

	saas_test_fixture_close(f);
	old = saas_fake_driver;
	old.version = 9;
	old.vm_sample = NULL;
	f->opts.driver = &old;
	saas_test_fixture_open(f);
	id = create(f->a);
	assert_int_equal(saas__metrics_pass(f->engine), SAAS_OK);
	assert_int_equal(saas_sandbox_metrics_get(&l, f->a, id, 0, 0, 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "cannot sample"));
	assert_null(l);
	free(id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_samples, setup, teardown),
		cmocka_unit_test_setup_teardown(test_on_demand, setup, teardown),
		cmocka_unit_test_setup_teardown(test_freed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_driver_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_store, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
