/*
 * How many clones' QEMUs the libvirt driver keeps started ahead
 * (lib/driver/libvirt/spare_policy.c): a pure function of the creates lately
 * asked for, the bounds and the memory budget. The times here are data fed
 * to it, on a made-up clock; nothing is timed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "driver/libvirt/spare_policy.h"

/* spares=auto's bounds on a 24 GiB host (a 1536 MiB budget), plenty of room, a spare made in 1.5 s. */
static struct saas__lv_spare_bounds auto_bounds(void)
{
	struct saas__lv_spare_bounds b = {
		.floor = 1,
		.ceiling = 32,
		.budget_mib = 1536,
		.spare_mib = 64,
		.room_mib = UINT64_MAX,
		.make_ms = 1500,
		.hold_ms = 2000,
	};
	return b;
}

static struct saas__lv_spare_plan plan_of(const struct saas__lv_spare_bounds *b, const int64_t *asks, size_t n,
                                          int64_t now)
{
	struct saas__lv_spare_plan p;

	saas__lv_spare_plan(&p, b, asks, n, now);
	return p;
}

/* With b's quiet spell of 120 s and floor of 16: not quite the spell after from (the floor), then the spell (16). */
static void spell_from(const struct saas__lv_spare_bounds *b, const int64_t *asks, size_t n, int64_t from)
{
	struct saas__lv_spare_plan p = plan_of(b, asks, n, from + 119999);

	assert_false(p.quiet);
	assert_int_equal(p.target, b->floor);
	p = plan_of(b, asks, n, from + 120000);
	assert_true(p.quiet);
	assert_int_equal(p.floor, 16);
	assert_int_equal(p.target, 16);
}

/*
 * A quiet spell (spare_idle: no create for quiet_ms) raises the floor to the
 * quiet floor, and the caller's quiet_seen keeps it there once seen: a burst
 * after a pause finds the spares made during it, and the creates that take
 * them do not lower the floor (no spare made and destroyed in turn). Nobody
 * asked yet: no spell (no template to make spares of), unless the open
 * remembered templates asked for before it: then from the open. Off: the
 * floor.
 */
static void test_quiet_spell(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[3] = { 1000, 1100, 1200 };
	struct saas__lv_spare_plan p;

	(void)state;
	b.quiet_floor = 16;
	b.quiet_ms = 120000;
	p = plan_of(&b, NULL, 0, 1000000);
	assert_false(p.quiet);
	assert_int_equal(p.target, 1);
	/* A lone create, then not quite the spell: the floor; the spell: 16. */
	spell_from(&b, asks, 1, 1000);
	/* Seen once, kept: the creates of the next burst do not bring it down. */
	b.quiet_seen = true;
	p = plan_of(&b, asks, 3, 1300);
	assert_true(p.quiet);
	assert_int_equal(p.target, 16);
	/* A larger burst still wants its own count; the budget still bounds both. */
	{
		int64_t burst[20];
		for (size_t i = 0; i < 20; i++)
			burst[i] = 5000 + (int64_t)i;
		p = plan_of(&b, burst, 20, 6000);
		assert_int_equal(p.target, 20);
		b.budget_mib = 10 * 64;
		p = plan_of(&b, burst, 20, 6000);
		assert_int_equal(p.target, 10);
		p = plan_of(&b, asks, 3, 1300);
		assert_int_equal(p.target, 10);
	}
	/*
	 * No create yet, but an open that remembered templates asked for before
	 * it (quiet_from): the spell counts from the open; a create after it
	 * counts from the create, and is a lone one (no burst with the open).
	 */
	b = auto_bounds();
	b.quiet_floor = 16;
	b.quiet_ms = 120000;
	b.quiet_from = 50000;
	spell_from(&b, NULL, 0, 50000);
	{
		int64_t after[1] = { 51000 };
		p = plan_of(&b, after, 1, 51000);
		assert_int_equal(p.burst, 0);
		assert_int_equal(p.rate_need, 0);
		spell_from(&b, after, 1, 51000);
	}
	/* spare_idle=off (quiet_ms 0), or spares=N (quiet floor 0): never. */
	b = auto_bounds();
	b.quiet_floor = 16;
	p = plan_of(&b, asks, 1, 1000 + 10 * SPARE_WINDOW_MS);
	assert_false(p.quiet);
	assert_int_equal(p.target, 1);
	b.quiet_ms = 120000;
	b.quiet_floor = 0;
	b.floor = b.ceiling = 3;
	p = plan_of(&b, asks, 1, 1000 + 10 * SPARE_WINDOW_MS);
	assert_int_equal(p.target, 3);
}

/* Nobody asked yet, or long ago: the floor, made after the hold. */
static void test_quiet(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t old[3] = { 0, 100, 200 };
	struct saas__lv_spare_plan p = plan_of(&b, NULL, 0, 1000000);

	(void)state;
	assert_int_equal(p.target, 1);
	assert_int_equal(p.burst, 0);
	assert_int_equal(p.rate_need, 0);
	assert_false(p.now);
	/* Three creates at once, but past the window: forgotten. */
	p = plan_of(&b, old, 3, 200 + SPARE_WINDOW_MS + 1);
	assert_int_equal(p.target, 1);
	assert_int_equal(p.burst, 0);
	/* spares=0: none, whatever was asked. */
	b.floor = b.ceiling = 0;
	p = plan_of(&b, old, 3, 300);
	assert_int_equal(p.target, 0);
}

/* One create alone, or two far apart: no burst, no hurry; the hold stands. */
static void test_lone_creates(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[2] = { 10000, 50000 };
	struct saas__lv_spare_plan p = plan_of(&b, asks, 1, 10001);

	(void)state;
	assert_int_equal(p.target, 1);
	assert_false(p.now);
	p = plan_of(&b, asks, 2, 50001);
	assert_int_equal(p.target, 1);
	assert_int_equal(p.burst, 0);
	assert_int_equal(p.rate_need, 1);
	assert_false(p.now);
}

/*
 * Creates back to back, each as soon as the last ran: more come before one
 * spare is made after the hold, so spares are made at once, as many as a
 * make's time uses up at the mean gap.
 */
static void test_stream(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[20];
	struct saas__lv_spare_plan p;

	(void)state;
	for (int i = 0; i < 20; i++)
		asks[i] = 100000 + i * 600;
	p = plan_of(&b, asks, 20, asks[19] + 1);
	assert_true(p.now);
	assert_int_equal(p.rate_need, 3); /* 20 asks in 11.4 s: 2.6 per 1.5 s, rounded up */
	assert_int_equal(p.burst, 4);     /* four asks within 2 s of the first */
	assert_int_equal(p.target, 4);
	/* A slower make wants more of them. */
	b.make_ms = 6000;
	p = plan_of(&b, asks, 20, asks[19] + 1);
	assert_int_equal(p.rate_need, 11); /* 20 asks in 11.4 s: 10.5 per 6 s */
	assert_int_equal(p.target, 11);
	/* Creates 3.6 s apart: the hold and a make fit between them; no hurry, one is enough. */
	b.make_ms = 1500;
	for (int i = 0; i < 20; i++)
		asks[i] = 100000 + i * 3600;
	p = plan_of(&b, asks, 20, asks[19] + 1);
	assert_false(p.now);
	assert_int_equal(p.burst, 0);
	assert_int_equal(p.rate_need, 1);
	assert_int_equal(p.target, 1);
	/* Only the last minute gives the rate: an old stream does not make a new lone create hurry. */
	asks[19] = asks[18] + 5 * 60000;
	p = plan_of(&b, asks, 20, asks[19] + 1);
	assert_false(p.now);
	assert_int_equal(p.rate_need, 0);
}

/* A burst of 20: as many kept for the window, then forgotten. */
static void test_burst(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[21];
	struct saas__lv_spare_plan p;

	(void)state;
	for (int i = 0; i < 20; i++)
		asks[i] = 500000 + i * 10; /* 20 within 200 ms */
	p = plan_of(&b, asks, 20, 500300);
	assert_int_equal(p.burst, 20);
	assert_int_equal(p.rate_need, 20); /* a burst is no faster a stream than its own count */
	assert_int_equal(p.target, 20);
	/* Nine minutes later, quiet since: still kept for the next burst. */
	p = plan_of(&b, asks, 20, 500000 + 9 * 60000);
	assert_int_equal(p.target, 20);
	assert_false(p.now);
	/* A lone create in between counts as one more ask, not as a burst. */
	asks[20] = 500000 + 5 * 60000;
	p = plan_of(&b, asks, 21, asks[20] + 1);
	assert_int_equal(p.burst, 20);
	assert_int_equal(p.target, 20);
	/* The window passed: back to the floor. */
	p = plan_of(&b, asks, 20, asks[19] + SPARE_WINDOW_MS + 1);
	assert_int_equal(p.target, 1);
	/* The largest burst in the window wins over a smaller, later one. */
	for (int i = 10; i < 20; i++)
		asks[i] = 600000 + i;
	p = plan_of(&b, asks, 20, 600100);
	assert_int_equal(p.burst, 10);
	assert_int_equal(p.target, 10);
}

/*
 * Never over the ceiling, the budget's count or the host's room, whatever the
 * demand; the floor gives way to them too.
 */
static void test_bounds(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[64];
	struct saas__lv_spare_plan p;

	(void)state;
	for (int i = 0; i < 64; i++)
		asks[i] = 1000 + i; /* a burst of 64 */
	p = plan_of(&b, asks, 64, 2000);
	assert_int_equal(p.burst, 64);
	assert_int_equal(p.target, 24); /* 1536 MiB / 64 MiB */
	b.budget_mib = UINT64_MAX;
	p = plan_of(&b, asks, 64, 2000);
	assert_int_equal(p.target, 32); /* the ceiling */
	b.room_mib = 640;
	p = plan_of(&b, asks, 64, 2000);
	assert_int_equal(p.target, 10); /* the host's room */
	b.room_mib = 63;
	p = plan_of(&b, asks, 64, 2000);
	assert_int_equal(p.target, 0); /* not even the floor */
	/* spares=N: N, however many are asked for, and however few. */
	b = auto_bounds();
	b.floor = b.ceiling = 4;
	p = plan_of(&b, asks, 64, 2000);
	assert_int_equal(p.target, 4);
	p = plan_of(&b, NULL, 0, 2000);
	assert_int_equal(p.target, 4);
	/* A budget under one spare: none. */
	b.budget_mib = 10;
	p = plan_of(&b, NULL, 0, 2000);
	assert_int_equal(p.target, 0);
	/* A spare reckoned at 0 MiB does not divide by zero: the budget counts in MiB. */
	b.spare_mib = 0;
	p = plan_of(&b, NULL, 0, 2000);
	assert_int_equal(p.target, 4);
}

/* Asks all at the same instant, or a clock that gives the same ms twice: no division by zero, a burst. */
static void test_same_instant(void **state)
{
	struct saas__lv_spare_bounds b = auto_bounds();
	int64_t asks[5] = { 7, 7, 7, 7, 7 };
	struct saas__lv_spare_plan p = plan_of(&b, asks, 5, 7);

	(void)state;
	assert_int_equal(p.burst, 5);
	assert_true(p.now);
	assert_int_equal(p.rate_need, 5); /* no more than came: the time counted is at least a make's */
	assert_int_equal(p.target, 5);
	/* A make measured at 0 ms, at that same instant: no division by zero either. */
	b.make_ms = 0;
	p = plan_of(&b, asks, 5, 7);
	assert_int_equal(p.rate_need, 0);
	assert_int_equal(p.target, 5);
}

/* When a spare thread begins a spare the plan wants: after the hold, or at once in a stream, never into a burst's clones. */
static void test_may_begin(void **state)
{
	struct saas__lv_spare_plan calm = { .target = 1 }, stream = { .target = 4, .now = true };

	(void)state;
	/* A lone create: its replacement waits for the create's end and the hold after it. */
	assert_false(saas__lv_spare_may_begin(&calm, 1, 2, 5000, 0));
	assert_false(saas__lv_spare_may_begin(&calm, 0, 2, 5000, 5001));
	assert_true(saas__lv_spare_may_begin(&calm, 0, 2, 5001, 5001));
	/* Creates faster than the makes: no hold, and one create under way does not stop it. */
	assert_true(saas__lv_spare_may_begin(&stream, 0, 2, 5000, 7000));
	assert_true(saas__lv_spare_may_begin(&stream, 1, 2, 5000, 7000));
	/* A burst's clones on every core (2 makers: 2 cores): none begins until they are fewer. */
	assert_false(saas__lv_spare_may_begin(&stream, 2, 2, 5000, 0));
	assert_false(saas__lv_spare_may_begin(&stream, 17, 2, 5000, 0));
	assert_true(saas__lv_spare_may_begin(&stream, 3, 4, 5000, 0));
	assert_false(saas__lv_spare_may_begin(&stream, 4, 4, 5000, 0));
}

static void test_makers_and_budget(void **state)
{
	(void)state;
	assert_int_equal(saas__lv_spare_makers(-1), 1); /* sysconf failed */
	assert_int_equal(saas__lv_spare_makers(0), 1);
	assert_int_equal(saas__lv_spare_makers(2), 2);
	assert_int_equal(saas__lv_spare_makers(64), SPARE_MAKERS_MAX);
	assert_int_equal(saas__lv_spare_budget_auto(0), 256); /* the host's size unknown */
	assert_int_equal(saas__lv_spare_budget_auto(2048), 256);
	assert_int_equal(saas__lv_spare_budget_auto(4096), 512);
	assert_int_equal(saas__lv_spare_budget_auto(24 * 1024), 3072);
	assert_int_equal(saas__lv_spare_budget_auto(1024 * 1024), 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_quiet_spell),
		cmocka_unit_test(test_lone_creates),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_burst),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_same_instant),
		cmocka_unit_test(test_may_begin),
		cmocka_unit_test(test_makers_and_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
