/*
 * Money. Integer micro-dollars throughout; a sandbox's cost is its rate times
 * the whole seconds it ran, divided by 3600 and rounded down once, plus, if
 * it was ever paused, its paused rate times the whole seconds it spent
 * paused, rounded down once too: never rounded up, never per tick.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

SAAS_EXTERN(int64_t) saas_cost(int64_t usd_micro_per_hour, int64_t seconds)
{
	if (seconds <= 0 || usd_micro_per_hour <= 0)
		return 0;
	/* Engine-accepted prices and lifetimes never come near overflow; the public
	 * function is exact for any input all the same, saturating at INT64_MAX. */
	if (seconds > INT64_MAX / usd_micro_per_hour) {
		__extension__ __int128 wide = (__int128)usd_micro_per_hour * seconds / 3600;
		return wide > INT64_MAX ? INT64_MAX : (int64_t)wide;
	}
	return usd_micro_per_hour * seconds / 3600;
}

SAAS_EXTERN(char *) saas_usd_format(char *buf, size_t bufsize, int64_t usd_micro)
{
	uint64_t mag;

	if (!buf || bufsize == 0)
		return buf;
	/* Negate in unsigned arithmetic so INT64_MIN formats too. */
	mag = usd_micro < 0 ? (uint64_t)0 - (uint64_t)usd_micro : (uint64_t)usd_micro;
	snprintf(buf, bufsize, "%s%llu.%06llu", usd_micro < 0 ? "-" : "", (unsigned long long)(mag / 1000000),
	         (unsigned long long)(mag % 1000000));
	return buf;
}

/* When billing stops (or stands now): destroyed or now, but never past expiry. */
int64_t saas__billing_end(const saas_store_sandbox *sb, int64_t now_ms)
{
	int64_t end = sb->status == SAAS_SANDBOX_DESTROYED ? sb->destroyed_at_ms : now_ms;

	return end < sb->expires_at_ms ? end : sb->expires_at_ms;
}

SAAS_EXTERN(int64_t) saas_size_paused_usd_micro_per_hour(const saas_size *size, int64_t usd_micro_per_gib_hour)
{
	int64_t mib;

	if (!size || usd_micro_per_gib_hour <= 0)
		return 0;
	mib = (int64_t)size->memory_mb + (int64_t)size->disk_gb * 1024;
	/* Sizes are bounded by the engine (at most ~1e7 MiB); a price past this would be absurd: saturate. */
	if (mib > 0 && usd_micro_per_gib_hour > INT64_MAX / mib)
		return INT64_MAX;
	return usd_micro_per_gib_hour * mib / 1024;
}

void saas__billed_split(const saas_store_sandbox *sb, int64_t t, int64_t *run_s, int64_t *paused_s)
{
	int64_t life, paused;

	*run_s = *paused_s = 0;
	if (sb->ready_at_ms <= 0 || t <= sb->ready_at_ms)
		return;
	life = t - sb->ready_at_ms;
	/* Pauses that ended, and the one under way up to t. */
	paused = sb->paused_ms;
	if (sb->paused_at_ms > 0 && t > sb->paused_at_ms)
		paused += t - sb->paused_at_ms;
	if (paused > life)
		paused = life;
	*paused_s = paused / 1000;
	*run_s = (life - paused) / 1000;
}

int64_t saas__cost_at(const saas_store_sandbox *sb, int64_t t)
{
	int64_t run_s, paused_s;

	saas__billed_split(sb, t, &run_s, &paused_s);
	return saas_cost(sb->usd_micro_per_hour, run_s) + saas_cost(sb->paused_usd_micro_per_hour, paused_s);
}

int64_t saas__billed_seconds(const saas_store_sandbox *sb, int64_t now_ms)
{
	int64_t run_s, paused_s;

	saas__billed_split(sb, saas__billing_end(sb, now_ms), &run_s, &paused_s);
	return run_s;
}

int64_t saas__accrued(const saas_store_sandbox *sb, int64_t now_ms)
{
	if (sb->status == SAAS_SANDBOX_DESTROYED)
		return sb->cost_usd_micro;
	return saas__cost_at(sb, saas__billing_end(sb, now_ms));
}

struct sum_live {
	saas_engine *e;
	int64_t now;
	int64_t accrued;
	unsigned int live;
};

static int add_live(void *ud, const saas_store_sandbox *sb)
{
	struct sum_live *s = ud;
	saas_store_sandbox shown = *sb;

	/* Ended, but not recorded yet: it costs what its close will charge, and is not live. */
	if (saas__closes_view(s->e, &shown)) {
		s->accrued += shown.cost_usd_micro;
		return 0;
	}
	s->accrued += saas__accrued(sb, s->now);
	s->live++;
	return 0;
}

int saas__account_live_balance(saas_engine *e, const char *account_id, int64_t now_ms, int64_t *balance,
                               int64_t *spent, int64_t *credit, unsigned int *live)
{
	saas_store_account acc;
	saas_store_filter f;
	struct sum_live s = { e, now_ms, 0, 0 };
	int rc;

	if ((rc = e->store->account_get(e->store_ctx, account_id, &acc)) < 0)
		return rc;
	memset(&f, 0, sizeof(f));
	f.account_id = account_id;
	f.live = 1;
	if ((rc = e->store->sandbox_list(e->store_ctx, &f, add_live, &s)) < 0)
		return rc;
	*credit = acc.credit_usd_micro;
	*spent = acc.charged_usd_micro + s.accrued;
	*balance = *credit - *spent;
	*live = s.live;
	return SAAS_OK;
}

static int64_t accrued_at(const saas_store_sandbox *live, size_t n, int64_t t_ms)
{
	int64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += saas__accrued(&live[i], t_ms);
	return sum;
}

int64_t saas__exhausted_at(int64_t balance, const saas_store_sandbox *live, size_t n, int64_t now_ms)
{
	int64_t lo = INT64_MAX, hi = now_ms;

	if (accrued_at(live, n, now_ms) < balance || n == 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (live[i].ready_at_ms > 0 && live[i].ready_at_ms < lo)
			lo = live[i].ready_at_ms;
	if (lo == INT64_MAX || lo > hi)
		return now_ms;
	if (balance <= 0)
		return lo;
	/* What has accrued only grows with time: find the first millisecond it reaches the balance. */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (accrued_at(live, n, mid) >= balance)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int saas__local_account(saas_client *c, saas_account_info **out)
{
	saas_engine *e = c->engine;
	saas_store_account acc;
	saas_account_info *info;
	int64_t balance, spent, credit;
	unsigned int live;
	int rc;

	if ((rc = e->store->account_get(e->store_ctx, c->account_id, &acc)) < 0)
		return rc == SAAS_ENOTFOUND ? saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "account no longer exists")
		                            : rc;
	rc = saas__account_live_balance(e, c->account_id, saas__engine_now(e), &balance, &spent, &credit, &live);
	if (rc < 0)
		return rc;
	if (!(info = calloc(1, sizeof(*info))))
		return saas__oom();
	info->credit_usd_micro = credit;
	info->spent_usd_micro = spent;
	info->balance_usd_micro = balance;
	info->active_sandboxes = live;
	info->running_executions = saas__exec_running(e, c->account_id);
	if (!(info->limits = calloc(1, sizeof(*info->limits))))
		goto oom;
	if ((rc = saas__account_limits(e, c->account_id, info->limits)) < 0) {
		saas_account_info_free(info);
		return rc;
	}
	info->paused_usd_micro_per_gib_hour = e->paused_price;
	if (!(info->id = saas__strdup(acc.id)) || !(info->name = saas__strdup(acc.name)) ||
	    saas__sizes_public(&info->sizes, &info->nsizes, e->sizes, e->nsizes) < 0)
		goto oom;
	*out = info;
	return SAAS_OK;
oom:
	saas_account_info_free(info);
	return saas__oom();
}

struct usage_acc {
	saas_usage *u;
	size_t cap;
	int64_t now;
	int rc;
};

/*
 * Whole seconds run and cost of a sandbox up to t: the two functions of time
 * that usage differences, so consecutive periods add up to exactly the charge.
 * Both only grow with t. The store keeps a sandbox's paused total, not each
 * pause's times, so a period is given the pauses that ended as if they came
 * first: the totals are exact, a past period's split of them is not.
 */
static int64_t seconds_until(const saas_store_sandbox *sb, int64_t t)
{
	int64_t run_s, paused_s;

	saas__billed_split(sb, t, &run_s, &paused_s);
	return run_s;
}

static int add_usage(void *ud, const saas_store_sandbox *sb)
{
	struct usage_acc *a = ud;
	saas_usage_line *line;
	int64_t start, end, s0, s1;

	start = sb->ready_at_ms > a->u->from_ms ? sb->ready_at_ms : a->u->from_ms;
	end = saas__billing_end(sb, a->now);
	if (end > a->u->to_ms)
		end = a->u->to_ms;
	if (end <= start)
		return 0;
	if ((a->rc = SAAS__ARRAY_RESERVE(a->u->lines, a->cap, a->u->count + 1)) < 0)
		return 1;
	s0 = seconds_until(sb, start);
	s1 = seconds_until(sb, end);
	if (!(line = calloc(1, sizeof(*line)))) {
		a->rc = saas__oom();
		return 1;
	}
	a->u->lines[a->u->count++] = line;
	if (!(line->sandbox_id = saas__strdup(sb->id)) || !(line->size = saas__strdup(sb->size))) {
		a->rc = SAAS_ENOMEM;
		return 1;
	}
	line->seconds = s1 - s0;
	line->cost_usd_micro = saas__cost_at(sb, end) - saas__cost_at(sb, start);
	line->running = sb->status != SAAS_SANDBOX_DESTROYED;
	a->u->total_seconds += line->seconds;
	a->u->total_usd_micro += line->cost_usd_micro;
	return 0;
}

int saas__local_usage(saas_client *c, int64_t from_ms, int64_t to_ms, saas_usage **out)
{
	saas_engine *e = c->engine;
	struct usage_acc a = { NULL, 0, saas__engine_now(e), SAAS_OK };
	saas_store_filter f;
	int rc;

	if (!(a.u = calloc(1, sizeof(*a.u))))
		return saas__oom();
	a.u->to_ms = to_ms ? to_ms : a.now;
	a.u->from_ms = from_ms ? from_ms : a.u->to_ms - 30LL * 86400 * 1000;
	if (a.u->from_ms >= a.u->to_ms) {
		saas_usage_free(a.u);
		return saas__inval("usage period is empty: 'from' must be before 'to'");
	}
	memset(&f, 0, sizeof(f));
	f.account_id = c->account_id;
	f.ran_from_ms = a.u->from_ms;
	f.ran_to_ms = a.u->to_ms;
	rc = e->store->sandbox_list(e->store_ctx, &f, add_usage, &a);
	if (rc == SAAS_OK)
		rc = a.rc;
	if (rc < 0) {
		saas_usage_free(a.u);
		return rc;
	}
	*out = a.u;
	return SAAS_OK;
}

