/*
 * Billing arithmetic down to the micro-dollar.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"

static void test_cost(void **state)
{
	(void)state;
	/* The seeds' prices: small $0.09/h, medium $0.28/h, large $0.55/h. */
	assert_int_equal(saas_cost(90000, 3600), 90000);
	assert_int_equal(saas_cost(90000, 1), 25);
	assert_int_equal(saas_cost(90000, 60), 1500);
	assert_int_equal(saas_cost(280000, 1), 77);     /* 77.78 rounded down */
	assert_int_equal(saas_cost(280000, 9), 700);    /* 700.0 exactly */
	assert_int_equal(saas_cost(280000, 100), 7777); /* once per sandbox, not 77 * 100 */
	assert_int_equal(saas_cost(550000, 1), 152);    /* 152.78 */
	assert_int_equal(saas_cost(550000, 3600), 550000);
	assert_int_equal(saas_cost(550000, 86400), 13200000);
	assert_int_equal(saas_cost(90000, 0), 0);
	assert_int_equal(saas_cost(90000, -5), 0);
	assert_int_equal(saas_cost(-1, 100), 0);
	assert_int_equal(saas_cost(0, 100), 0);
	/* Never rounds up: no second is billed that was not run. */
	for (int64_t s = 1; s < 5000; s++) {
		int64_t c = saas_cost(280000, s);
		assert_true(c * 3600 <= 280000 * s);
		assert_true((c + 1) * 3600 > 280000 * s);
	}
	/* Absurd inputs do not overflow. */
	assert_int_equal(saas_cost(SAAS_USD(1000000), INT64_MAX / 2), INT64_MAX);
	assert_int_equal(saas_cost(3600, INT64_MAX / 2), INT64_MAX / 2);
}

static void test_usd_format(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(saas_usd_format(buf, sizeof(buf), 5000000), "5.000000");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), 0), "0.000000");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), 25), "0.000025");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), -25), "-0.000025");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), 1234567890), "1234.567890");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), INT64_MIN), "-9223372036854.775808");
	assert_string_equal(saas_usd_format(buf, sizeof(buf), INT64_MAX), "9223372036854.775807");
}

static saas_store_sandbox sandbox(int status, int64_t rate, int64_t ready, int64_t expires, int64_t destroyed)
{
	saas_store_sandbox sb;

	memset(&sb, 0, sizeof(sb));
	sb.status = status;
	sb.usd_micro_per_hour = rate;
	sb.ready_at_ms = ready;
	sb.expires_at_ms = expires;
	sb.destroyed_at_ms = destroyed;
	return sb;
}

static void test_billing_window(void **state)
{
	saas_store_sandbox live = sandbox(SAAS_SANDBOX_READY, 90000, 1000, 61000, 0);
	saas_store_sandbox gone = sandbox(SAAS_SANDBOX_DESTROYED, 90000, 1000, 61000, 31500);
	saas_store_sandbox late = sandbox(SAAS_SANDBOX_DESTROYED, 90000, 1000, 61000, 99000);
	saas_store_sandbox never = sandbox(SAAS_SANDBOX_DESTROYED, 90000, 0, 61000, 5000);

	(void)state;
	assert_int_equal(saas__billed_seconds(&live, 11999), 10);
	assert_int_equal(saas__accrued(&live, 11999), 250);
	/* Billing stops at expiry, whenever the reaper comes. */
	assert_int_equal(saas__billed_seconds(&live, 500000), 60);
	assert_int_equal(saas__billed_seconds(&gone, 500000), 30);
	assert_int_equal(saas__billed_seconds(&late, 500000), 60);
	/* Never ready, never billed. */
	assert_int_equal(saas__billed_seconds(&never, 500000), 0);
	assert_int_equal(saas__billing_end(&gone, 0), 31500);
	assert_int_equal(saas__billing_end(&late, 0), 61000);
}

static void test_exhaustion(void **state)
{
	saas_store_sandbox two[2] = {
		sandbox(SAAS_SANDBOX_READY, 90000, 1000, 10000000, 0),
		sandbox(SAAS_SANDBOX_READY, 90000, 21000, 10000000, 0),
	};

	(void)state;
	/* 1000 micro-dollars at 25/s: 40 s. */
	assert_int_equal(saas__exhausted_at(1000, two, 1, 100000), 41000);
	assert_int_equal(saas__exhausted_at(1000, two, 1, 40999), -1);
	/* Alone for 20 s (500), then both at 50/s: 500 more in 10 s -> 30 s. */
	assert_int_equal(saas__exhausted_at(1000, two, 2, 100000), 31000);
	/* Already nothing left: stop at the first start. */
	assert_int_equal(saas__exhausted_at(0, two, 2, 100000), 1000);
	assert_int_equal(saas__exhausted_at(-50, two, 2, 100000), 1000);
	assert_int_equal(saas__exhausted_at(1000, two, 0, 100000), -1);
	/* Past expiry nothing more accrues. */
	two[0].expires_at_ms = 11000;
	assert_int_equal(saas__exhausted_at(1000, two, 1, 100000), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cost),
		cmocka_unit_test(test_usd_format),
		cmocka_unit_test(test_billing_window),
		cmocka_unit_test(test_exhaustion),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
