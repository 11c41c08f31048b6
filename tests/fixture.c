#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake/fake_driver.h"
#include "fixture.h"
#include "store/store.h"
#include "testutil.h"

static int64_t fake_now;

int64_t saas_test_clock(void *ud)
{
	(void)ud;
	return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

int64_t saas_test_now(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

void saas_test_advance(int64_t ms)
{
	__atomic_add_fetch(&fake_now, ms, __ATOMIC_SEQ_CST);
}

void saas_test_clock_set(int64_t ms)
{
	__atomic_store_n(&fake_now, ms, __ATOMIC_SEQ_CST);
}

struct saas_test_fixture *saas_test_fixture_new(const saas_driver *driver, unsigned int flags)
{
	struct saas_test_fixture *f = calloc(1, sizeof(*f));
	saas_engine_options defaults = SAAS_ENGINE_OPTIONS_INIT;

	assert_non_null(f);
	saas_fake_reset();
	f->flags = flags;
	f->opts = defaults;
	assert_int_equal(saas_test_engine_options(&f->opts, driver, &f->dir, &f->url), 0);
	if (!(flags & SAAS_TEST_REAPER))
		f->opts.flags = SAAS_ENGINE_NO_REAPER;
	if (flags & SAAS_TEST_FAKE_CLOCK) {
		saas_test_clock_set(SAAS_TEST_T0_MS);
		f->opts.clock = saas_test_clock;
	}
	f->credit_a = f->credit_b = SAAS_CREDIT_DEFAULT;
	return f;
}

void saas_test_fixture_open_engine(struct saas_test_fixture *f)
{
	if (saas_engine_open(&f->engine, &f->opts) != SAAS_OK)
		fail_msg("engine open: %s", saas_error_last()->message);
}

void saas_test_fixture_open(struct saas_test_fixture *f)
{
	saas_test_fixture_open_engine(f);
	if (!f->key_a) {
		f->key_a = saas_test_account_key(f->engine, "alice", f->credit_a, f->account_a, sizeof(f->account_a));
		assert_non_null(f->key_a);
	}
	if ((f->flags & SAAS_TEST_BOB) && !f->key_b) {
		f->key_b = saas_test_account_key(f->engine, "bob", f->credit_b, f->account_b, sizeof(f->account_b));
		assert_non_null(f->key_b);
	}
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	if (f->key_b)
		assert_int_equal(saas_client_open_local(&f->b, f->engine, f->key_b, 0), SAAS_OK);
}

void saas_test_fixture_close(struct saas_test_fixture *f)
{
	saas_client_free(f->a);
	saas_client_free(f->b);
	f->a = f->b = NULL;
	saas_engine_free(f->engine);
	f->engine = NULL;
}

void saas_test_fixture_free(struct saas_test_fixture *f)
{
	if (!f)
		return;
	saas_test_fixture_close(f);
	saas_free(f->key_a);
	saas_free(f->key_b);
	free(f->url);
	saas_test_rmdir(f->dir);
	free(f);
	saas_test_shared_store_free();
	saas_fake_reset();
}

int64_t saas_test_balance(saas_client *c)
{
	saas_account_info *info;
	int64_t b;

	assert_int_equal(saas_account_info_get(&info, c), SAAS_OK);
	b = info->balance_usd_micro;
	saas_account_info_free(info);
	return b;
}

/* The SQLite file the shared store opens, whatever URL the engine passes it. */
static char *shared_url;
static saas_store shared_sqlite;

static int shared_open(void **ctx, const saas_store_env *env)
{
	const saas_store *sqlite = NULL;
	saas_store_env inner = *env;

	if (saas__store_for_url(&sqlite, "sqlite:x") != SAAS_OK)
		return SAAS_EINVAL;
	inner.url = shared_url;
	return sqlite->open(ctx, &inner);
}

void saas_test_shared_store(saas_engine_options *o)
{
	const saas_store *sqlite = NULL;

	if (saas_test_store_is_postgres())
		return;
	assert_int_equal(saas__store_for_url(&sqlite, "sqlite:x"), SAAS_OK);
	shared_sqlite = *sqlite;
	shared_sqlite.name = "shared-sqlite";
	shared_sqlite.open = shared_open;
	free(shared_url);
	assert_non_null(shared_url = strdup(o->store_url));
	o->store_url = NULL;
	o->store = &shared_sqlite;
}

void saas_test_shared_store_free(void)
{
	free(shared_url);
	shared_url = NULL;
}
