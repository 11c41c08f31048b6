/*
 * How many clones' QEMUs to keep started ahead (spare.c), from the creates
 * lately asked for. Pure: the caller passes the times and the bounds, so the
 * rules are tested without a clock or a VM (tests/unit/test_spares.c).
 *
 * Two demands, the larger wins. A burst (creates asked within SPARE_BURST_MS
 * of the first of them) wants as many spares as it had creates, kept for
 * SPARE_WINDOW_MS: evaluations and rollouts come back with a burst of the
 * same size. A stream of creates wants as many as it uses up while one is
 * made (the last minute's creates per make_ms), and wants
 * them made at once when creates come faster than a spare is made after the
 * hold (the hold keeps the CPUs for a lone create's first commands, and is
 * worth nothing when the next create needs the spare sooner). Quiet, the
 * floor; once the creates have paused for a quiet spell (quiet_ms; before
 * any, from the open that remembered the templates creates asked for before
 * it: quiet_from), the quiet floor, from then on: a service that sat idle
 * meets its next burst, which nothing foretells, with spares made while it
 * was idle, and one that never paused (a short-lived engine, a busy one)
 * pays nothing for it. Never
 * more than the ceiling, the memory budget's count nor what the host's
 * available memory holds.
 */
#include "driver/libvirt/spare_policy.h"

static uint64_t div_or_max(uint64_t a, uint64_t b)
{
	return a == UINT64_MAX ? UINT64_MAX : a / (b ? b : 1);
}

void saas__lv_spare_plan(struct saas__lv_spare_plan *out, const struct saas__lv_spare_bounds *b, const int64_t *asks,
                         size_t n, int64_t now)
{
	size_t first = n, rate_first = n;
	uint64_t want, cap;
	int64_t last = n ? asks[n - 1] : b->quiet_from;

	out->target = out->burst = out->rate_need = out->floor = 0;
	out->now = false;
	/* Only the window's asks count (oldest first: the rest follow the first that does). */
	for (size_t i = 0; i < n; i++)
		if (now - asks[i] <= SPARE_WINDOW_MS) {
			first = i;
			break;
		}
	for (size_t i = first; i < n; i++) {
		unsigned int in = 0;
		for (size_t j = i; j < n && asks[j] - asks[i] < SPARE_BURST_MS; j++)
			in++;
		if (in > out->burst)
			out->burst = in;
		if (rate_first == n && now - asks[i] <= SPARE_RATE_MS)
			rate_first = i;
	}
	if (out->burst < 2)
		out->burst = 0; /* one create is no burst */
	if (n - rate_first >= 2) {
		/*
		 * The last minute's creates over the time since the first of them
		 * (to now: a stream that stopped slows down), and what that rate
		 * uses up in one make. The time is at least one make's, so that a
		 * burst, whose creates came at one instant, wants no more than it
		 * had: the burst's own count is the other demand.
		 */
		uint64_t k = n - rate_first, span = (uint64_t)(now - asks[rate_first]);
		if (span < b->make_ms)
			span = b->make_ms;
		if (!span)
			span = 1; /* a make of 0 ms and asks at this very instant */
		out->rate_need = (unsigned int)((k * b->make_ms + span - 1) / span);
		out->now = asks[n - 1] - asks[n - 2] < (int64_t)b->hold_ms + (int64_t)b->make_ms;
	}
	out->quiet = b->quiet_ms > 0 && (b->quiet_seen || (last && now - last >= b->quiet_ms));
	out->floor = out->quiet && b->quiet_floor > b->floor ? b->quiet_floor : b->floor;
	want = out->floor;
	if (out->burst > want)
		want = out->burst;
	if (out->rate_need > want)
		want = out->rate_need;
	cap = b->ceiling;
	if (div_or_max(b->budget_mib, b->spare_mib) < cap)
		cap = div_or_max(b->budget_mib, b->spare_mib);
	if (div_or_max(b->room_mib, b->spare_mib) < cap)
		cap = div_or_max(b->room_mib, b->spare_mib);
	out->target = (unsigned int)(want < cap ? want : cap);
}

bool saas__lv_spare_may_begin(const struct saas__lv_spare_plan *plan, unsigned int creating, unsigned int makers,
                              int64_t now, int64_t hold_until_ms)
{
	if (plan->now)
		return creating < makers;
	return creating == 0 && now >= hold_until_ms;
}

unsigned int saas__lv_spare_makers(long cores)
{
	if (cores < 1)
		return 1;
	return cores > SPARE_MAKERS_MAX ? SPARE_MAKERS_MAX : (unsigned int)cores;
}

uint64_t saas__lv_spare_budget_auto(uint64_t total_mib)
{
	uint64_t b = total_mib / 8;

	return b < 256 ? 256 : b > 4096 ? 4096 : b;
}
