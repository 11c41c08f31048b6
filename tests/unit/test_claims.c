/*
 * Two engines on one shared store (claims.c): holder ids and server leases,
 * a dead engine's creates undone by the other, its pooled VMs destroyed, its
 * running executions marked failed, the reaper's pass taken over and each
 * sandbox charged once, leases released at a clean close, MCP sessions used
 * across engines. A dead engine is one whose leases ran out: it stops
 * renewing them (no sweeps, no thread) while the shared fake clock moves.
 * Both engines share the fake driver's VMs, as engines share VM hosts.
 *
 * The store is SQLite under another name (so that the engines treat it as
 * shared), or PostgreSQL with SAAS_TEST_STORE=postgres.
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
#include "store/store.h"
#include "fixture.h"
#include "testutil.h"

#define TTL_MS 1000

struct fixture {
	char *dir_a, *dir_b, *url;
	saas_engine_options opts;
	saas_engine *a, *b;            /* b is the survivor; a dies (stops renewing) in most tests */
	char *key;
	char account[SAAS_ID_MAX + 1];
	saas_client *ca, *cb;
};

static saas_engine *open_on(struct fixture *f, const char *dir, const char *pool)
{
	saas_engine_options o = f->opts;
	saas_engine *e = NULL;

	o.state_dir = dir;
	o.pool = pool;
	if (saas_engine_open(&e, &o) != SAAS_OK)
		fail_msg("engine open: %s", saas_error_last()->message);
	return e;
}

static int setup_pool(void **state, const char *pool_a)
{
	struct fixture *f = calloc(1, sizeof(*f));
	saas_engine_options defaults = SAAS_ENGINE_OPTIONS_INIT;

	assert_non_null(f);
	saas_fake_reset();
	saas_test_clock_set(SAAS_TEST_T0_MS);
	f->opts = defaults;
	assert_int_equal(saas_test_engine_options(&f->opts, &saas_fake_driver, &f->dir_a, &f->url), 0);
	assert_non_null(f->dir_b = saas_test_tmpdir());
	saas_test_shared_store(&f->opts);
	f->opts.clock = saas_test_clock;
	f->opts.flags = SAAS_ENGINE_NO_REAPER;
	f->opts.lease_ttl_ms = TTL_MS;
	f->opts.min_free_mb = 1;
	f->a = open_on(f, f->dir_a, pool_a);
	f->b = open_on(f, f->dir_b, NULL);
	f->key = saas_test_account_key(f->a, "alice", SAAS_CREDIT_DEFAULT, f->account, sizeof(f->account));
	assert_non_null(f->key);
	assert_int_equal(saas_client_open_local(&f->ca, f->a, f->key, 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&f->cb, f->b, f->key, 0), SAAS_OK);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_pool(state, NULL);
}

static int setup_pooled(void **state)
{
	return setup_pool(state, "small=1");
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	saas_client_free(f->ca);
	saas_client_free(f->cb);
	saas_engine_free(f->a);
	saas_engine_free(f->b);
	saas_free(f->key);
	free(f->url);
	saas_test_rmdir(f->dir_b);
	saas_test_rmdir(f->dir_a);
	free(f);
	saas_test_shared_store_free();
	saas_fake_reset();
	return 0;
}

static int lease_of(saas_engine *e, const char *name, char holder[SAAS_STORE_HOLDER_MAX + 1])
{
	int64_t until;

	return e->store->lease_get(e->store_ctx, name, holder, &until);
}

static int64_t charged(struct fixture *f)
{
	saas_store_account acc;

	assert_int_equal(f->b->store->account_get(f->b->store_ctx, f->account, &acc), SAAS_OK);
	return acc.charged_usd_micro;
}

/* Each engine has its own holder and holds its server lease; a clean close gives it up. */
static void test_holders(void **state)
{
	struct fixture *f = *state;
	char name[SAAS_STORE_LEASE_NAME_MAX + 1], holder[SAAS_STORE_HOLDER_MAX + 1];

	assert_true(f->a->claims.shared);
	assert_string_not_equal(saas__engine_holder(f->a), saas__engine_holder(f->b));
	assert_int_equal(strncmp(saas__engine_holder(f->a), "srv-", 4), 0);
	snprintf(name, sizeof(name), "server:%s", saas__engine_holder(f->a));
	assert_int_equal(lease_of(f->b, name, holder), SAAS_OK);
	assert_string_equal(holder, saas__engine_holder(f->a));
	saas_client_free(f->ca);
	f->ca = NULL;
	saas_engine_free(f->a);
	f->a = NULL;
	assert_int_equal(lease_of(f->b, name, holder), SAAS_ENOTFOUND);
}

/* What the create hook does while engine a's create is under way (its VM made, its row creating). */
struct mid_create {
	struct fixture *f;
	int64_t advance_ms;
	char id[SAAS_ID_MAX + 1];
	int status_after;              /* the row's status after b's sweep */
	int vm_after;                  /* does the VM exist after b's sweep? */
};

static void during_create(void *ud, const saas_vm_spec *spec)
{
	struct mid_create *m = ud;
	saas_store_sandbox row;

	saas_fake_on_create(NULL, NULL);
	snprintf(m->id, sizeof(m->id), "%s", spec->name);
	saas_test_advance(m->advance_ms);
	assert_int_equal(saas_engine_sweep(NULL, m->f->b), SAAS_OK);
	assert_int_equal(m->f->b->store->sandbox_get(m->f->b->store_ctx, spec->name, &row), SAAS_OK);
	m->status_after = row.status;
	m->vm_after = saas_fake_vm_exists(spec->name);
}

static saas_sandbox *create(saas_client *c, int *rc)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.size = "small";
	o.timeout_s = 600;
	*rc = saas_sandbox_create(&sb, c, &o, 0);
	return sb;
}

/* A create whose engine stopped renewing its leases is undone by the other: no VM, nothing charged. */
static void test_dead_create_undone(void **state)
{
	struct fixture *f = *state;
	struct mid_create m = { f, TTL_MS + 1, "", 0, 0 };
	saas_store_sandbox row;
	saas_sandbox *sb;
	int rc;

	saas_fake_on_create(during_create, &m);
	sb = create(f->ca, &rc);
	assert_int_equal(m.status_after, SAAS_SANDBOX_DESTROYED);
	assert_false(m.vm_after);
	/* The creating engine finds its row closed, and unmakes what it made. */
	assert_int_equal(rc, SAAS_ESTATE);
	assert_null(sb);
	assert_false(saas_fake_vm_exists(m.id));
	assert_int_equal(f->b->store->sandbox_get(f->b->store_ctx, m.id, &row), SAAS_OK);
	assert_int_equal(row.end_reason, SAAS_END_FAILED);
	assert_int_equal(row.cost_usd_micro, 0);
	assert_int_equal(charged(f), 0);
}

/* A create whose engine lives is left alone, however many sweeps the other makes. */
static void test_live_create_kept(void **state)
{
	struct fixture *f = *state;
	struct mid_create m = { f, TTL_MS / 2, "", 0, 0 };
	saas_sandbox *sb;
	int rc;

	saas_fake_on_create(during_create, &m);
	sb = create(f->ca, &rc);
	assert_int_equal(rc, SAAS_OK);
	assert_int_equal(m.status_after, SAAS_SANDBOX_CREATING);
	assert_true(m.vm_after);
	assert_non_null(sb);
	assert_int_equal(sb->status, SAAS_SANDBOX_READY);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(sb);
}

/* A live engine's pooled VMs stay; a dead one's go with the other's next orphan sweep. */
static void test_dead_pool_destroyed(void **state)
{
	struct fixture *f = *state;
	char pooled[SAAS_ID_MAX + 1] = "";
	unsigned int vms;

	/* a fills its pool (and takes the reaper's lease), b sees another engine sweeping. */
	assert_int_equal(saas_engine_sweep(NULL, f->a), SAAS_OK);
	assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	vms = saas_fake_vm_count();
	assert_int_equal(vms, 1);
	assert_int_equal(saas__pool_claim(f->a, "small", "default", pooled), 1);
	saas__pool_release(f->a, pooled, SAAS_POOL_RETURN);
	assert_int_equal(saas__orphan_sweep(f->b), SAAS_OK);
	assert_true(saas_fake_vm_exists(pooled));
	/* a dies: its leases run out; b takes the reaper over and looks for orphans at once. */
	saas_test_advance(TTL_MS + 1);
	assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	assert_false(saas_fake_vm_exists(pooled));
}

/* The reaper's pass is one engine's at a time; when its engine dies the other takes it over, charging nothing twice. */
static void test_reaper_taken_over(void **state)
{
	struct fixture *f = *state;
	saas_sandbox *sb[3];
	saas_store_sandbox row;
	char holder[SAAS_STORE_HOLDER_MAX + 1];
	unsigned int ended = 0;
	int64_t sum = 0;

	for (int i = 0; i < 3; i++) {
		saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
		o.size = "small";
		o.timeout_s = 60;
		sb[i] = NULL;
		assert_int_equal(saas_sandbox_create(&sb[i], f->cb, &o, 0), SAAS_OK);
	}
	saas_test_advance(61 * 1000);
	/* a sweeps first and ends them; b, sweeping at the same moment, finds the pass a's. */
	assert_int_equal(saas_engine_sweep(&ended, f->a), SAAS_OK);
	assert_int_equal(ended, 3);
	assert_int_equal(lease_of(f->b, "reaper", holder), SAAS_OK);
	assert_string_equal(holder, saas__engine_holder(f->a));
	assert_int_equal(saas_engine_sweep(&ended, f->b), SAAS_OK);
	assert_int_equal(ended, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(f->b->store->sandbox_get(f->b->store_ctx, sb[i]->id, &row), SAAS_OK);
		assert_int_equal(row.status, SAAS_SANDBOX_DESTROYED);
		assert_int_equal(row.end_reason, SAAS_END_EXPIRED);
		assert_int_equal(row.cost_usd_micro, saas_cost(row.usd_micro_per_hour, 60));
		sum += row.cost_usd_micro;
		saas_sandbox_free(sb[i]);
	}
	assert_int_equal(charged(f), sum);
	/* a dies: b takes the reaper's lease over, and nothing is charged again. */
	saas_test_advance(TTL_MS + 1);
	assert_int_equal(saas_engine_sweep(&ended, f->b), SAAS_OK);
	assert_int_equal(ended, 0);
	assert_int_equal(lease_of(f->b, "reaper", holder), SAAS_OK);
	assert_string_equal(holder, saas__engine_holder(f->b));
	assert_int_equal(charged(f), sum);
}

/* An execution whose engine died is marked failed by the other; a live one's is left running. */
static void test_dead_execution_failed(void **state)
{
	struct fixture *f = *state;
	saas_execution *x = NULL;
	saas_sandbox *sb;
	char id[SAAS_ID_MAX + 1];
	int rc;

	sb = create(f->cb, &rc);
	assert_int_equal(rc, SAAS_OK);
	assert_int_equal(saas_exec(&x, f->ca, sb->id, "wait", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	snprintf(id, sizeof(id), "%s", x->id);
	saas_execution_free(x);
	/* b reads it, but its live parts are a's: b says so. */
	assert_int_equal(saas_execution_get(&x, f->cb, id), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	saas_execution_free(x);
	assert_int_equal(saas_execution_signal(f->cb, id, "TERM", 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "runs on another server"));
	assert_int_equal(saas_execution_cancel(f->cb, id, 0), SAAS_ESTATE);
	/* a lives (it sweeps, which renews): b's checks leave it running. */
	assert_int_equal(saas_engine_sweep(NULL, f->a), SAAS_OK);
	for (int i = 0; i < 12; i++) {
		saas_test_advance(TTL_MS / 4);
		assert_int_equal(saas_engine_sweep(NULL, f->a), SAAS_OK);
		assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	}
	assert_int_equal(saas_execution_get(&x, f->cb, id), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	saas_execution_free(x);
	/* a dies: within the ttl and ten sweeps, b marks it failed. */
	saas_test_advance(TTL_MS + 1);
	for (int i = 0; i < 11; i++)
		assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	{
		saas_store_execution rec;
		memset(&rec, 0, sizeof(rec));
		assert_int_equal(f->b->store->execution_get(f->b->store_ctx, id, &rec), SAAS_OK);
		assert_int_equal(rec.status, SAAS_EXEC_FAILED);
		assert_non_null(strstr(rec.error, "server that ran it stopped"));
		saas__store_execution_clear(&rec);
	}
	/* Let a's job end with its engine (it is cancelled at free). */
	saas_sandbox_free(sb);
}

/* A lease taken by a holder that is gone ("srv-gone"), now, for one ttl: it runs out and nobody renews it. */
static void lease_left(struct fixture *f, const char *name)
{
	int held = 0;

	assert_int_equal(f->b->store->lease_take(f->b->store_ctx, name, "srv-gone", saas_test_clock(NULL), TTL_MS, &held),
	                 SAAS_OK);
	assert_int_equal(held, 1);
}

/*
 * The sweep purges what nobody can hold: a dead engine's leases once run
 * out SAAS__LEASE_PURGE_AFTER_MS ago, and at once the request ("netset:") of
 * a sandbox that ended; never the pending request of a live sandbox, however
 * long it ran out, nor a lease that ran out lately, nor a live engine's.
 */
static void test_dead_leases_purged(void **state)
{
	struct fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *live = NULL, *ended = NULL;
	char holder[SAAS_STORE_HOLDER_MAX + 1], a_server[SAAS_STORE_LEASE_NAME_MAX + 1],
		b_server[SAAS_STORE_LEASE_NAME_MAX + 1], ask_live[SAAS_STORE_LEASE_NAME_MAX + 1],
		ask_ended[SAAS_STORE_LEASE_NAME_MAX + 1];

	o.size = "small";
	o.timeout_s = 3 * 3600;
	assert_int_equal(saas_sandbox_create(&live, f->cb, &o, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_create(&ended, f->cb, &o, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_destroy(NULL, f->cb, ended->id, 0), SAAS_OK);
	assert_int_equal(saas__claim_name(a_server, "server", saas__engine_holder(f->a)), SAAS_OK);
	assert_int_equal(saas__claim_name(b_server, "server", saas__engine_holder(f->b)), SAAS_OK);
	assert_int_equal(saas__claim_name(ask_live, "netset", live->id), SAAS_OK);
	assert_int_equal(saas__claim_name(ask_ended, "netset", ended->id), SAAS_OK);
	/* Requests of a server that died while asking; the ended sandbox's came after its end looked for one. */
	lease_left(f, ask_live);
	lease_left(f, ask_ended);
	lease_left(f, "exec:exe-early");
	assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	assert_int_equal(lease_of(f->b, ask_ended, holder), SAAS_ENOTFOUND);
	assert_int_equal(lease_of(f->b, ask_live, holder), SAAS_OK);
	assert_int_equal(lease_of(f->b, "exec:exe-early", holder), SAAS_OK);
	assert_int_equal(lease_of(f->b, a_server, holder), SAAS_OK);

	/* a is dead (it renews nothing). Forty minutes on, another lease is left; forty more, the sweep. */
	saas_test_advance(40 * 60 * 1000);
	lease_left(f, "exec:exe-late");
	saas_test_advance(40 * 60 * 1000);
	assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	assert_int_equal(lease_of(f->b, a_server, holder), SAAS_ENOTFOUND);
	assert_int_equal(lease_of(f->b, "exec:exe-early", holder), SAAS_ENOTFOUND);
	assert_int_equal(lease_of(f->b, "exec:exe-late", holder), SAAS_OK);   /* run out 40 minutes ago */
	assert_int_equal(lease_of(f->b, ask_live, holder), SAAS_OK);          /* a request until it is answered */
	assert_string_equal(holder, "srv-gone");
	assert_int_equal(lease_of(f->b, b_server, holder), SAAS_OK);          /* b lives */
	assert_int_equal(lease_of(f->b, "reaper", holder), SAAS_OK);

	/* The live sandbox ends: its request goes at the next sweep (its end found none of its own server's). */
	assert_int_equal(saas_sandbox_destroy(NULL, f->cb, live->id, 0), SAAS_OK);
	lease_left(f, ask_live);
	assert_int_equal(saas_engine_sweep(NULL, f->b), SAAS_OK);
	assert_int_equal(lease_of(f->b, ask_live, holder), SAAS_ENOTFOUND);
	saas_sandbox_free(live);
	saas_sandbox_free(ended);
}

/* An MCP session made through one engine is used and ended through the other; only its hash is stored. */
static void test_mcp_sessions(void **state)
{
	struct fixture *f = *state;
	char *id = NULL, *version = NULL, hash[65], v[SAAS_STORE_MCP_VERSION_MAX + 1];

	assert_int_equal(saas_mcp_session_create(&id, f->a, "2025-06-18", 0), SAAS_OK);
	assert_int_equal(strlen(id), SAAS_MCP_SESSION_ID_LEN);
	assert_int_equal(saas_mcp_session_use(&version, f->b, id, 60000), SAAS_OK);
	assert_string_equal(version, "2025-06-18");
	saas_free(version);
	/* The store knows it by its SHA-256 only. */
	saas__sha256_hex(hash, id, strlen(id));
	assert_int_equal(f->b->store->mcp_session_touch(f->b->store_ctx, hash, saas_test_now(), 0, v), SAAS_OK);
	assert_int_equal(f->b->store->mcp_session_touch(f->b->store_ctx, id, saas_test_now(), 0, v), SAAS_ENOTFOUND);
	/* Idle past the bound: gone; pruned by either engine. */
	saas_test_advance(60001);
	assert_int_equal(saas_mcp_session_use(&version, f->a, id, 60000), SAAS_ENOTFOUND);
	assert_int_equal(saas_mcp_session_prune(f->b, 60000), SAAS_OK);
	saas_free(id);
	/* Ended through the other engine. */
	assert_int_equal(saas_mcp_session_create(&id, f->a, "2025-03-26", 0), SAAS_OK);
	assert_int_equal(saas_mcp_session_end(f->b, id), SAAS_OK);
	assert_int_equal(saas_mcp_session_use(&version, f->a, id, 60000), SAAS_ENOTFOUND);
	/* Bad input. */
	assert_int_equal(saas_mcp_session_use(&version, f->a, "not-a-session", 60000), SAAS_ENOTFOUND);
	assert_int_equal(saas_mcp_session_use(&version, f->a, id, 0), SAAS_EINVAL);
	assert_int_equal(saas_mcp_session_create(&version, f->a, "", 0), SAAS_EINVAL);
	assert_int_equal(saas_mcp_session_create(&version, f->a, "2025-06-18", 1), SAAS_EINVAL);
	assert_int_equal(saas_mcp_session_create(&version, f->a, "0123456789abcdef", 0), SAAS_EINVAL);
	saas_free(id);
}

/* A driver's lease (saas_driver_env.lease): one engine at a time holds it, until it lets go or stops renewing. */
static void test_driver_lease(void **state)
{
	struct fixture *f = *state;
	char long_name[SAAS_STORE_LEASE_NAME_MAX + 2];

	assert_int_equal(saas__driver_lease(f->a, "template:h:k", 1000, 1), 1);
	assert_int_equal(saas__driver_lease(f->a, "template:h:k", 1000, 1), 1); /* renewed */
	assert_int_equal(saas__driver_lease(f->b, "template:h:k", 1000, 1), 0);
	/* Let go: the other takes it at once. */
	assert_int_equal(saas__driver_lease(f->a, "template:h:k", 0, 0), 0);
	assert_int_equal(saas__driver_lease(f->b, "template:h:k", 1000, 1), 1);
	assert_int_equal(saas__driver_lease(f->a, "template:h:k", 1000, 1), 0);
	/* Not renewed past its ttl: the other takes it over. */
	saas_test_advance(1001);
	assert_int_equal(saas__driver_lease(f->a, "template:h:k", 1000, 1), 1);
	assert_int_equal(saas__driver_lease(f->b, "template:h:k", 1000, 1), 0);
	/* Another name is another lease. */
	assert_int_equal(saas__driver_lease(f->b, "template:h:other", 1000, 1), 1);
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_true(saas__driver_lease(f->a, long_name, 1000, 1) < 0);
	assert_true(saas__driver_lease(f->a, NULL, 1000, 1) < 0);
}

/* The sessions kept are every engine's together: past mcp_sessions_max the least recently used end. */
static void test_mcp_session_cap(void **state)
{
	struct fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *c = NULL;
	char *dir = saas_test_tmpdir(), *ids[4] = { NULL }, *version = NULL;

	assert_non_null(dir);
	o.state_dir = dir;
	o.mcp_sessions_max = 2;
	assert_int_equal(saas_engine_open(&c, &o), SAAS_OK);
	/* Made through the default engines (4096 kept), then one more through c (2 kept). */
	assert_int_equal(saas_mcp_session_create(&ids[0], f->a, "2025-06-18", 0), SAAS_OK);
	saas_test_advance(1);
	assert_int_equal(saas_mcp_session_create(&ids[1], f->b, "2025-06-18", 0), SAAS_OK);
	saas_test_advance(1);
	assert_int_equal(saas_mcp_session_use(&version, f->a, ids[0], 60000), SAAS_OK);
	saas_free(version);
	saas_test_advance(1);
	assert_int_equal(saas_mcp_session_create(&ids[2], c, "2025-03-26", 0), SAAS_OK);
	/* ids[1] was the least recently used: ended; ids[0] (used since) and the new one stay. */
	assert_int_equal(saas_mcp_session_use(&version, f->b, ids[1], 60000), SAAS_ENOTFOUND);
	assert_int_equal(saas_mcp_session_use(&version, f->b, ids[0], 60000), SAAS_OK);
	saas_free(version);
	assert_int_equal(saas_mcp_session_use(&version, f->a, ids[2], 60000), SAAS_OK);
	assert_string_equal(version, "2025-03-26");
	saas_free(version);
	saas_engine_free(c);
	/* The bound itself is checked at open. */
	o.mcp_sessions_max = SAAS_ENGINE_MCP_SESSIONS_MAX + 1;
	c = NULL;
	assert_int_equal(saas_engine_open(&c, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "mcp_sessions_max"));
	assert_null(c);
	for (size_t i = 0; i < 4; i++)
		saas_free(ids[i]);
	saas_test_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_holders, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mcp_session_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_create_undone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_create_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_pool_destroyed, setup_pooled, teardown),
		cmocka_unit_test_setup_teardown(test_reaper_taken_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_execution_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mcp_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_leases_purged, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
