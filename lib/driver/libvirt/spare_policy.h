/*
 * Internal: how many spares to keep (spare_policy.c), a pure function of the
 * creates lately asked for, the bounds and the memory they may hold, so that
 * it is tested on its own (tests/unit/test_spares.c) with no clock and no VM.
 */
#ifndef SAAS_DRIVER_LIBVIRT_SPARE_POLICY_H
#define SAAS_DRIVER_LIBVIRT_SPARE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The window in which creates count (older ones are forgotten), the span
 * within which creates count as one burst, and the most create times
 * remembered (a burst larger than this is seen as this large).
 */
#define SPARE_WINDOW_MS (10 * 60 * 1000)
#define SPARE_BURST_MS 2000
#define SPARE_RATE_MS 60000 /* the creates of the last minute give the rate */
#define SPARE_ASKS_MAX 64  /* at least SPARES_MAX: a burst is counted up to this */

/* What bounds the spares; every field a count or MiB, none read from the host here. */
struct saas__lv_spare_bounds {
	unsigned int floor;     /* kept however quiet it is (spares=auto: 1; spares=N: N) */
	unsigned int quiet_floor; /* kept from a quiet spell on (spares=auto: spare_idle_count; spares=N: 0) */
	int64_t quiet_ms;       /* a quiet spell: this long since the last create (spare_idle; 0: never) */
	bool quiet_seen;        /* one was seen before (the caller keeps it): quiet_floor holds from then on */
	int64_t quiet_from;     /* with no create yet, the spell counts from this time (an open that remembered */
	                        /* templates asked for before it: spare_asked.c); 0: from the first create */
	unsigned int ceiling;   /* never more (spares=auto: SPARES_AUTO_MAX; spares=N: N) */
	uint64_t budget_mib;    /* spare_memory_mb: what all spares together may hold */
	uint64_t spare_mib;     /* what one spare is reckoned to hold */
	uint64_t room_mib;      /* the host's memory available over what it keeps (UINT64_MAX: not known) */
	unsigned int make_ms;   /* how long one spare takes to make, lately */
	unsigned int hold_ms;   /* the pause after a lone create before its replacement is made */
};

/* What the spare threads do next. */
struct saas__lv_spare_plan {
	unsigned int target;    /* spares to have, ready, being made or taken and not yet made */
	unsigned int burst;     /* the largest burst in the window (for the log) */
	unsigned int rate_need; /* spares that creates at the recent rate use up while one is made */
	bool now;               /* creates come faster than a spare is made after the hold: no hold */
	bool quiet;             /* a quiet spell was seen (now or before): quiet_floor holds */
	unsigned int floor;     /* the floor in force: the bounds' floor, or the quiet floor when larger and quiet */
};

/*
 * The plan for creates asked at asks[0..n) (ms, oldest first, any clock),
 * seen at now on the same clock: target = the largest of the floor (the
 * quiet floor once a quiet spell was seen: quiet_ms since the last create,
 * or with none since quiet_from, now or before), the largest burst in the
 * window and the rate's need, then
 * no more than the ceiling, the budget's and the host's room's count of
 * spares.
 */
void saas__lv_spare_plan(struct saas__lv_spare_plan *out, const struct saas__lv_spare_bounds *b, const int64_t *asks,
                         size_t n, int64_t now);

/*
 * May a spare thread begin a spare now (the plan wanting one)? creating
 * creates are under way (clones made whole, spares being taken, fork
 * children), makers the spare threads, hold_until_ms the end of the hold
 * after the last create (on now's clock). Without plan->now, only once no
 * create is under way and the hold is over. With it (creates come faster
 * than spares are made), at once, unless the creates under way are as many
 * as the makers or more: a burst's own clones then have every core, and a
 * spare begun beside them comes too late for them and slows each.
 */
bool saas__lv_spare_may_begin(const struct saas__lv_spare_plan *plan, unsigned int creating, unsigned int makers,
                              int64_t now, int64_t hold_until_ms);

/* How many spares are made at once: one per core, at least 1, at most SPARE_MAKERS_MAX. */
#define SPARE_MAKERS_MAX 4
unsigned int saas__lv_spare_makers(long cores);

/*
 * spare_memory_mb=auto: an eighth of the host's memory, within [256 MiB,
 * 4 GiB]: on 24 GiB, 24 warmed spares (SPARE_COST_MIB + SPARE_WARM_MIB
 * each), a burst of 20 and room for a stream's.
 */
uint64_t saas__lv_spare_budget_auto(uint64_t total_mib);
#endif
