/*
 * The backend contract (saas/sys/): the error call a backend reports through,
 * and an engine opened on a store table the caller supplies rather than a URL
 * (here the SQLite store's table behind a thin wrapper that counts its calls
 * and finds its file through the userdata), with the options that must be
 * refused: a URL and a table at once, a table of another version or with a
 * slot missing. The VM driver is the fake one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake/fake_driver.h"
#include "saas.h"
#include "saas/sys/error.h"
#include "saas/sys/store.h"
#include "store/store.h"
#include "testutil.h"

/* ---- saas_sys_error_set ---- */

static void test_error_set(void **state)
{
	const saas_error *err;

	(void)state;
	assert_int_equal(saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 7, "VM %s: %d", "x", 3), SAAS_EBACKEND);
	err = saas_error_last();
	assert_int_equal(err->code, SAAS_EBACKEND);
	assert_int_equal(err->klass, SAAS_ERRCLASS_DRIVER);
	assert_int_equal(err->backend_code, 7);
	assert_string_equal(err->message, "VM x: 3");
	assert_string_equal(err->sqlstate, "");
	assert_string_equal(err->limit, "");

	/* No message: the code's own text. */
	assert_int_equal(saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 0, NULL), SAAS_ENOTFOUND);
	assert_string_equal(saas_error_last()->message, saas_strerror(SAAS_ENOTFOUND));

	/* A backend's slip never reads as success, nor as a code nobody can name. */
	assert_int_equal(saas_sys_error_set(SAAS_OK, SAAS_ERRCLASS_DRIVER, 0, "oops"), SAAS_ERROR);
	assert_int_equal(saas_error_last()->code, SAAS_ERROR);
	assert_int_equal(saas_sys_error_set(5, SAAS_ERRCLASS_DRIVER, 0, "oops"), SAAS_ERROR);
	assert_int_equal(saas_sys_error_set(-9999, SAAS_ERRCLASS_DRIVER, 0, "oops"), SAAS_ERROR);
	assert_int_equal(saas_sys_error_set(SAAS_EIO, 999, 0, "oops"), SAAS_EIO);
	assert_int_equal(saas_error_last()->klass, SAAS_ERRCLASS_NONE);

	/* A message is cut, never overrun. */
	{
		char long_text[3000];

		memset(long_text, 'a', sizeof(long_text) - 1);
		long_text[sizeof(long_text) - 1] = '\0';
		saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_OS, 5, "%s", long_text);
		assert_true(strlen(saas_error_last()->message) < 1024);
		assert_int_equal(saas_error_last()->message[0], 'a');
	}
}

/* ---- a store given as a table ---- */

/* What the test store finds through saas_store_env.userdata. */
struct test_store {
	const saas_store *sqlite;      /* the table it forwards to */
	char *url;                     /* its file, outside the state directory */
	int refuse_open;               /* open fails, as a backend reports it */
	unsigned int opens, account_inserts, sandbox_inserts, closes;
};

/* The one store the wrapper slots reach (cmocka runs the tests one at a time). */
static struct test_store *current;

static int ts_open(void **ctx, const saas_store_env *env)
{
	struct test_store *ts = env->userdata;
	saas_store_env inner = *env;

	if (env->url)
		return saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_STORE, 0, "test store: a table store has no URL");
	if (!ts)
		return saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_STORE, 0, "test store: no userdata");
	if (ts->refuse_open)
		return saas_sys_error_set(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 42, "test store: the disk is gone");
	ts->opens++;
	current = ts;
	inner.url = ts->url;
	inner.userdata = NULL;
	return ts->sqlite->open(ctx, &inner);
}

static void ts_close(void *ctx)
{
	current->closes++;
	current->sqlite->close(ctx);
}

static int ts_account_insert(void *ctx, const saas_store_account *account, int64_t credit)
{
	current->account_inserts++;
	return current->sqlite->account_insert(ctx, account, credit);
}

static int ts_sandbox_insert(void *ctx, const saas_store_sandbox *sandbox, unsigned int max_live)
{
	current->sandbox_inserts++;
	return current->sqlite->sandbox_insert(ctx, sandbox, max_live);
}

struct fixture {
	char *dir;
	struct test_store ts;
	saas_store table;
	saas_engine_options o;
	saas_engine *engine;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	saas_engine_options init = SAAS_ENGINE_OPTIONS_INIT;

	if (!f || !(f->dir = saas_test_tmpdir()))
		return -1;
	if (saas__store_for_url(&f->ts.sqlite, "sqlite:x") != SAAS_OK ||
	    asprintf(&f->ts.url, "sqlite:%s/elsewhere.db", f->dir) < 0)
		return -1;
	f->table = *f->ts.sqlite;
	f->table.name = "test";
	f->table.open = ts_open;
	f->table.close = ts_close;
	f->table.account_insert = ts_account_insert;
	f->table.sandbox_insert = ts_sandbox_insert;
	saas_fake_reset();
	f->o = init;
	f->o.state_dir = f->dir;
	f->o.driver = &saas_fake_driver;
	f->o.flags = SAAS_ENGINE_NO_REAPER;
	f->o.min_free_mb = 1;
	f->o.store = &f->table;
	f->o.store_userdata = &f->ts;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	saas_engine_free(f->engine);
	current = NULL;
	free(f->ts.url);
	saas_test_rmdir(f->dir);
	free(f);
	saas_fake_reset();
	return 0;
}

static int exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* Everything a tenant does goes through the caller's table, and the built-in store is never opened. */
static void test_table_store(void **state)
{
	struct fixture *f = *state;
	saas_account *acc = NULL;
	saas_client *client = NULL;
	saas_sandbox *sb = NULL, *gone = NULL;
	saas_execution *x = NULL;
	char *key = NULL;

	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_OK);
	assert_int_equal(f->ts.opens, 1);
	assert_int_equal(saas_account_create(&acc, f->engine, "table", SAAS_CREDIT_DEFAULT, 0), SAAS_OK);
	assert_int_equal(f->ts.account_inserts, 1);
	assert_int_equal(saas_key_create(&key, NULL, f->engine, acc->id, NULL, 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&client, f->engine, key, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_create(&sb, client, NULL, 0), SAAS_OK);
	assert_int_equal(f->ts.sandbox_inserts, 1);
	assert_int_equal(saas_exec(&x, client, sb->id, "echo through the table", NULL, 0), SAAS_OK);
	assert_int_equal(x->exit_code, 0);
	assert_string_equal(x->stdout_data, "through the table\n");
	assert_int_equal(saas_sandbox_destroy(&gone, client, sb->id, 0), SAAS_OK);
	assert_int_equal(gone->status, SAAS_SANDBOX_DESTROYED);

	saas_execution_free(x);
	saas_sandbox_free(gone);
	saas_sandbox_free(sb);
	saas_client_free(client);
	saas_free(key);
	saas_account_free(acc);
	saas_engine_free(f->engine);
	f->engine = NULL;
	assert_int_equal(f->ts.closes, 1);
	assert_true(exists(f->dir, "elsewhere.db"));
	assert_false(exists(f->dir, "aas.db"));

	/* The rows are the table's: a second engine on it finds the account. */
	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_OK);
	assert_int_equal(f->ts.opens, 2);
	{
		saas_account_list *all = NULL;

		assert_int_equal(saas_account_list_get(&all, f->engine), SAAS_OK);
		assert_int_equal(all->count, 1);
		assert_string_equal(all->items[0]->name, "table");
		saas_account_list_free(all);
	}
}

/* A store-only engine (an admin beside a server) takes a table too. */
static void test_table_store_only(void **state)
{
	struct fixture *f = *state;
	saas_account *acc = NULL;

	f->o.flags = SAAS_ENGINE_STORE_ONLY;
	f->o.driver = NULL;
	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_OK);
	assert_int_equal(saas_account_create(&acc, f->engine, "admin", 0, 0), SAAS_OK);
	assert_int_equal(f->ts.account_inserts, 1);
	saas_account_free(acc);
}

/* The store's own reason reaches the caller of saas_engine_open. */
static void test_table_open_fails(void **state)
{
	struct fixture *f = *state;

	f->ts.refuse_open = 1;
	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_ESTORE);
	assert_null(f->engine);
	assert_non_null(strstr(saas_error_last()->message, "test store: the disk is gone"));
	assert_int_equal(saas_error_last()->klass, SAAS_ERRCLASS_STORE);
	assert_int_equal(saas_error_last()->backend_code, 42);
}

static void assert_refused(struct fixture *f, const char *says)
{
	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_EINVAL);
	assert_null(f->engine);
	if (!strstr(saas_error_last()->message, says))
		fail_msg("message \"%s\" does not say \"%s\"", saas_error_last()->message, says);
	/* Refused before anything was opened. */
	assert_int_equal(f->ts.opens, 0);
	assert_false(exists(f->dir, "aas.db"));
}

static void test_table_refused(void **state)
{
	struct fixture *f = *state;
	char want[128];

	f->o.store_url = f->ts.url;
	assert_refused(f, "not both");
	f->o.store_url = NULL;

	f->table.version = SAAS_STORE_VERSION - 1;
	snprintf(want, sizeof(want), "version %u; this libsaas takes version %u", SAAS_STORE_VERSION - 1,
	         SAAS_STORE_VERSION);
	assert_refused(f, want);
	f->table.version = SAAS_STORE_VERSION + 1;
	snprintf(want, sizeof(want), "version %u;", SAAS_STORE_VERSION + 1);
	assert_refused(f, want);
	f->table.version = SAAS_STORE_VERSION;

	f->table.name = "";
	assert_refused(f, "no name");
	f->table.name = "test";

	/* The first slot, one in the middle and the last. */
	f->table.open = NULL;
	assert_refused(f, "has no open slot");
	f->table.open = ts_open;
	f->table.sandbox_close = NULL;
	assert_refused(f, "\"test\" has no sandbox_close slot");
	f->table.sandbox_close = f->ts.sqlite->sandbox_close;
	f->table.port_delete = NULL;
	assert_refused(f, "has no port_delete slot");
	f->table.port_delete = f->ts.sqlite->port_delete;

	assert_int_equal(saas_engine_open(&f->engine, &f->o), SAAS_OK);
}

/*
 * A caller built against version 3 of the options has no store fields: its
 * struct ends before them (on the heap, so a sanitizer sees any read past
 * it), and it gets the built-in store its URL names.
 */
static void test_options_v3(void **state)
{
	struct fixture *f = *state;
	size_t v3 = offsetof(saas_engine_options, store);
	unsigned int three = 3;
	char *old = malloc(v3);
	saas_account *acc = NULL;

	assert_non_null(old);
	memcpy(old, &f->o, v3);
	memcpy(old, &three, sizeof(three));
	assert_int_equal(saas_engine_open(&f->engine, (const saas_engine_options *)(void *)old), SAAS_OK);
	free(old);
	assert_int_equal(saas_account_create(&acc, f->engine, "v3", 0, 0), SAAS_OK);
	assert_int_equal(f->ts.account_inserts, 0);
	assert_true(exists(f->dir, "aas.db"));
	saas_account_free(acc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_set),
		cmocka_unit_test_setup_teardown(test_table_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_store_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_open_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_options_v3, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
