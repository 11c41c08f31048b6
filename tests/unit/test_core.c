/*
 * The engine core against the fake driver and a real store (SQLite, or
 * PostgreSQL with SAAS_TEST_STORE=postgres): lifecycle, tenancy, limits,
 * billing to the micro-dollar, the reaper on a fake clock, reconcile, and bad
 * input to every call.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"

static int setup_with(void **state, unsigned int max_sandboxes, int64_t credit_b)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, SAAS_TEST_FAKE_CLOCK | SAAS_TEST_BOB);

	f->opts.max_sandboxes = max_sandboxes;
	f->credit_b = credit_b;
	saas_test_fixture_open(f);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, 0, SAAS_CREDIT_DEFAULT);
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

static saas_sandbox *create(saas_client *c, const char *size, int64_t timeout_s)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	int rc;

	o.size = size;
	o.timeout_s = timeout_s;
	rc = saas_sandbox_create(&sb, c, &o, 0);
	if (rc != SAAS_OK)
		fail_msg("create: %s (%s)", saas_strerror(rc), saas_error_last()->message);
	return sb;
}

static void test_engine_bad_options(void **state)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_size x = { "x", 1, 1, 1, 1 };
	const saas_size *sizes[2] = { &x, &x };
	saas_engine *e = (saas_engine *)1;
	char *dir = saas_test_tmpdir();

	(void)state;
	o.state_dir = dir;
	o.driver = &saas_fake_driver;
	assert_int_equal(saas_engine_open(NULL, &o), SAAS_EINVAL);
	o.version = 99;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_null(e);
	assert_non_null(strstr(saas_error_last()->message, "version"));
	o.version = SAAS_ENGINE_OPTIONS_VERSION;
	o.flags = 1u << 20;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.flags = 0;
	o.sizes = sizes;
	o.nsizes = 2;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "twice"));
	o.sizes = NULL;
	o.nsizes = 0;
	o.preview_url = "http://nothing-to-route/";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	/* The guessable {port}-{id} alone opens nothing any more: a template needs the exposure's name. */
	o.preview_url = "http://{port}-{id}.localhost:8080/";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "{name}"));
	o.preview_url = NULL;
	o.new_account_credit = -1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.new_account_credit = 0;
	o.min_free_mb = SAAS_ENGINE_MIN_FREE_MB_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "min_free_mb"));
	o.min_free_mb = 0;
	o.max_timeout_s = 10;
	o.default_timeout_s = 20;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.max_timeout_s = 0;
	o.default_timeout_s = 0;
	/* Tenant limits: counts and rates up to SAAS_LIMIT_MAX, a retention of 0 to ten years. */
	o.max_executions = SAAS_LIMIT_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "max_executions"));
	o.max_executions = 0;
	o.max_transfers = SAAS_LIMIT_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "max_transfers"));
	o.max_transfers = 0;
	o.creates_per_minute = SAAS_LIMIT_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.creates_per_minute = 0;
	o.requests_per_second = SAAS_LIMIT_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.requests_per_second = 0;
	o.execution_retention_s = -1;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "execution_retention_s"));
	o.execution_retention_s = 0;
	o.store_url = "mysql://nope";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.store_url = NULL;
	o.state_dir = "";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	saas_test_rmdir(dir);
}

static void test_state_dir_is_exclusive(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine *second = NULL, *admin = NULL;
	saas_engine_options o = f->opts;
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_client *c;
	saas_account_list *list;

	assert_int_equal(saas_engine_open(&second, &o), SAAS_EBUSY);
	assert_null(second);
	/* A store-only engine (the admin commands) opens beside a running one. */
	o.flags = SAAS_ENGINE_STORE_ONLY;
	o.driver = NULL;
	assert_int_equal(saas_engine_open(&admin, &o), SAAS_OK);
	assert_int_equal(saas_account_list_get(&list, admin), SAAS_OK);
	assert_int_equal(list->count, 2);
	assert_true(strcmp(list->items[0]->name, "alice") == 0 || strcmp(list->items[1]->name, "alice") == 0);
	saas_account_list_free(list);
	assert_int_equal(saas_client_open_local(&c, admin, f->key_a, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_create(NULL, c, &co, 0), SAAS_ENOTSUP);
	saas_client_free(c);
	saas_engine_free(admin);
}

static void test_accounts(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_account *acc = NULL;
	char longname[300];

	assert_int_equal(saas_account_get(&acc, f->engine, f->account_a), SAAS_OK);
	assert_string_equal(acc->name, "alice");
	assert_int_equal(acc->credit_usd_micro, 5000000);
	assert_int_equal(acc->balance_usd_micro, 5000000);
	assert_int_equal(acc->spent_usd_micro, 0);
	saas_account_free(acc);

	assert_int_equal(saas_account_add_credit(f->engine, f->account_a, 2500000, "top-up", 0), SAAS_OK);
	assert_int_equal(saas_account_get(&acc, f->engine, f->account_a), SAAS_OK);
	assert_int_equal(acc->balance_usd_micro, 7500000);
	saas_account_free(acc);

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(saas_account_create(&acc, f->engine, NULL, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, f->engine, "", 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, f->engine, longname, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, f->engine, "tab\there", 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, f->engine, "x", -5, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, f->engine, "x", 0, 1), SAAS_EINVAL);
	assert_int_equal(saas_account_create(&acc, NULL, "x", 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_get(&acc, f->engine, "acc-nope"), SAAS_ENOTFOUND);
	assert_int_equal(saas_account_get(&acc, f->engine, ""), SAAS_EINVAL);
	assert_int_equal(saas_account_add_credit(f->engine, f->account_a, 0, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_add_credit(f->engine, f->account_a, -1, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_account_add_credit(f->engine, "acc-nope", 1, NULL, 0), SAAS_ENOTFOUND);
	/* A failure leaves a message; the next success clears it. */
	assert_int_not_equal(saas_error_last()->message[0], '\0');
	assert_int_equal(saas_error_last()->code, SAAS_ENOTFOUND);
	assert_int_equal(saas_account_get(&acc, f->engine, f->account_b), SAAS_OK);
	assert_int_equal(saas_error_last()->code, SAAS_OK);
	assert_string_equal(saas_error_last()->message, "");
	saas_account_free(acc);
}

/* People: users, sessions on the engine's clock, invites, disabled accounts, and no token passing for another. */
static void test_people(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_user *u = NULL, *got = NULL;
	saas_user_list *l = NULL;
	saas_account *acc = NULL;
	saas_client *c = NULL;
	char *token = NULL, *token2 = NULL, *code = NULL;

	assert_int_equal(saas_user_create(&u, f->engine, "Ann@Example.ORG", "$argon2id$h1", NULL, SAAS_CREDIT_DEFAULT,
	                                  NULL, 0), SAAS_OK);
	assert_string_equal(u->email, "ann@example.org");
	assert_int_equal(u->is_operator, 0);
	assert_int_equal(saas_account_get(&acc, f->engine, u->account_id), SAAS_OK);
	assert_int_equal(acc->balance_usd_micro, SAAS_USD(5));
	saas_account_free(acc);
	assert_int_equal(saas_user_create(NULL, f->engine, "ANN@example.org", "$argon2id$h2", NULL, 0, NULL, 0),
	                 SAAS_EEXISTS);
	assert_int_equal(saas_user_create(NULL, f->engine, "no-at-sign", "$h", NULL, 0, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_user_create(NULL, f->engine, "a b@c.d", "$h", NULL, 0, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_user_create(NULL, f->engine, "x@y.z", "has space", NULL, 0, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_user_create(NULL, f->engine, "x@y.z", "$h", NULL, 0, NULL, 2), SAAS_EINVAL);
	/* Bound to an existing account, as an operator. */
	assert_int_equal(saas_user_create(&got, f->engine, "op@example.org", "$argon2id$h3", f->account_a, 0, NULL,
	                                  SAAS_USER_OPERATOR), SAAS_OK);
	assert_string_equal(got->account_id, f->account_a);
	assert_int_equal(got->is_operator, 1);
	saas_user_free(got);
	got = NULL;

	/* Invites: once each; an unknown one makes nothing. */
	assert_int_equal(saas_invite_create(&code, f->engine, 0), SAAS_OK);
	assert_memory_equal(code, "aas_inv_", 8);
	assert_int_equal(saas_user_create(NULL, f->engine, "inv@example.org", "$h", NULL, 0, "aas_inv_nope", 0),
	                 SAAS_ENOTFOUND);
	assert_int_equal(saas_user_create(NULL, f->engine, "inv@example.org", "$h", NULL, 0, code, 0), SAAS_OK);
	assert_int_equal(saas_user_create(NULL, f->engine, "inv2@example.org", "$h", NULL, 0, code, 0), SAAS_ENOTFOUND);
	saas_free(code);
	assert_int_equal(saas_user_list_get(&l, f->engine), SAAS_OK);
	assert_int_equal(l->count, 3);
	saas_user_list_free(l);

	/* Sessions: idle and absolute bounds on the engine's clock. */
	assert_int_equal(saas_session_create(&token, f->engine, "ann@example.org", 0), SAAS_OK);
	assert_memory_equal(token, "aas_ss_", 7);
	assert_int_equal(saas_session_get(&got, f->engine, token, 60000, 3600000), SAAS_OK);
	assert_string_equal(got->email, "ann@example.org");
	saas_user_free(got);
	got = NULL;
	saas_test_advance(50000);
	assert_int_equal(saas_session_get(&got, f->engine, token, 60000, 3600000), SAAS_OK);
	saas_user_free(got);
	got = NULL;
	saas_test_advance(50000); /* used 50 s ago: not idle, though 100 s since log-in */
	assert_int_equal(saas_session_get(&got, f->engine, token, 60000, 3600000), SAAS_OK);
	saas_user_free(got);
	got = NULL;
	saas_test_advance(61000);
	assert_int_equal(saas_session_get(&got, f->engine, token, 60000, 3600000), SAAS_EAUTH);
	assert_null(got);
	/* ... and it was deleted: no looser bound brings it back. */
	assert_int_equal(saas_session_get(&got, f->engine, token, 0, 0), SAAS_EAUTH);
	saas_free(token);
	assert_int_equal(saas_session_create(&token, f->engine, "ann@example.org", 0), SAAS_OK);
	saas_test_advance(3600001);
	assert_int_equal(saas_session_get(&got, f->engine, token, 0, 3600000), SAAS_EAUTH);
	saas_free(token);

	/* A session is no key, and a key no session. */
	assert_int_equal(saas_session_create(&token, f->engine, "ann@example.org", 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&c, f->engine, token, 0), SAAS_EAUTH);
	assert_int_equal(saas_session_get(&got, f->engine, f->key_a, 0, 0), SAAS_EAUTH);

	/* A new password ends the sessions; logging out ends one. */
	assert_int_equal(saas_user_password_set(f->engine, "ann@example.org", "$argon2id$new"), SAAS_OK);
	assert_int_equal(saas_session_get(&got, f->engine, token, 0, 0), SAAS_EAUTH);
	saas_free(token);
	assert_int_equal(saas_session_create(&token, f->engine, "ann@example.org", 0), SAAS_OK);
	assert_int_equal(saas_session_end(f->engine, token), SAAS_OK);
	assert_int_equal(saas_session_get(&got, f->engine, token, 0, 0), SAAS_EAUTH);
	saas_free(token);

	/* Disabling an account: its keys, its sessions, new sessions and account clients are refused. */
	assert_int_equal(saas_session_create(&token, f->engine, "op@example.org", 0), SAAS_OK);
	assert_int_equal(saas_client_open_account(&c, f->engine, f->account_a, 0), SAAS_OK);
	saas_client_free(c);
	c = NULL;
	assert_int_equal(saas_account_disable(f->engine, f->account_a, 1), SAAS_OK);
	assert_int_equal(saas_client_open_local(&c, f->engine, f->key_a, 0), SAAS_EAUTH);
	assert_int_equal(saas_client_open_account(&c, f->engine, f->account_a, 0), SAAS_EAUTH);
	assert_int_equal(saas_session_get(&got, f->engine, token, 0, 0), SAAS_EAUTH);
	assert_int_equal(saas_session_create(&token2, f->engine, "op@example.org", 0), SAAS_EAUTH);
	assert_int_equal(saas_account_disable(f->engine, f->account_a, 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&c, f->engine, f->key_a, 0), SAAS_OK);
	saas_client_free(c);
	saas_free(token);
	assert_int_equal(saas_account_disable(f->engine, "acc-none", 1), SAAS_ENOTFOUND);
	assert_int_equal(saas_session_prune(f->engine, 1000, 1000), SAAS_OK);
	saas_user_free(u);
}

/*
 * Disabling an account is an operator's answer to abuse: its sandboxes stop
 * at once, billed to that moment, whoever's engine disables it. Another
 * account's sandboxes run on.
 */
static void test_disable_ends_sandboxes(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *admin = NULL;
	saas_sandbox *a1 = create(f->a, NULL, 600), *a2 = create(f->a, NULL, 600), *b1 = create(f->b, NULL, 600);
	saas_sandbox *got = NULL;
	int64_t at;
	unsigned int n = 0;

	saas_test_advance(60000);
	at = saas_test_now();
	assert_int_equal(saas_account_disable(f->engine, f->account_a, 1), SAAS_OK);
	for (int i = 0; i < 2; i++) {
		const char *id = i ? a2->id : a1->id;
		assert_int_equal(saas_sandbox_get(&got, f->a, id), SAAS_OK);
		assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
		assert_int_equal(got->end_reason, SAAS_END_DISABLED);
		assert_string_equal(saas_end_reason_name(got->end_reason), "disabled");
		assert_true(got->destroyed_at_ms == at);
		assert_true(got->cost_usd_micro > 0);
		assert_false(saas_fake_vm_exists(id));
		saas_sandbox_free(got);
	}
	assert_int_equal(saas_sandbox_get(&got, f->b, b1->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	assert_true(saas_fake_vm_exists(b1->id));
	saas_sandbox_free(got);
	/* Enabling gives nothing back. */
	assert_int_equal(saas_account_disable(f->engine, f->account_a, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_get(&got, f->a, a1->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	saas_sandbox_free(got);
	saas_sandbox_free(a1);
	saas_sandbox_free(a2);

	/*
	 * The admin commands' store-only engine runs no VM: the engine that runs
	 * them ends them at its next sweep, billed to the disable, not to the sweep.
	 */
	a1 = create(f->a, NULL, 600);
	o.flags = SAAS_ENGINE_STORE_ONLY;
	o.driver = NULL;
	assert_int_equal(saas_engine_open(&admin, &o), SAAS_OK);
	saas_test_advance(60000);
	at = saas_test_now();
	assert_int_equal(saas_account_disable(admin, f->account_a, 1), SAAS_OK);
	assert_true(saas_fake_vm_exists(a1->id));
	saas_test_advance(120000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	assert_int_equal(saas_sandbox_get(&got, f->a, a1->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_DISABLED);
	assert_true(got->destroyed_at_ms == at);
	assert_false(saas_fake_vm_exists(a1->id));
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_get(&got, f->b, b1->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	saas_sandbox_free(got);
	saas_engine_free(admin);
	saas_sandbox_free(a1);
	saas_sandbox_free(b1);
}

/* A sandbox's owner by its id alone (what a front end holding the engine asks before it has a client). */
static void test_sandbox_owner(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *a1 = create(f->a, NULL, 600), *b1 = create(f->b, NULL, 600);
	char owner[SAAS_ID_MAX + 1];

	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, a1->id, 0), SAAS_OK);
	assert_string_equal(owner, f->account_a);
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, b1->id, 0), SAAS_OK);
	assert_string_equal(owner, f->account_b);
	/* A destroyed sandbox's record keeps its owner. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, a1->id, 0), SAAS_OK);
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, a1->id, 0), SAAS_OK);
	assert_string_equal(owner, f->account_a);
	/* None, and bad arguments: the owner is cleared every time. */
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, "sbx-nosuchsandbox0000", 0), SAAS_ENOTFOUND);
	assert_string_equal(owner, "");
	assert_non_null(strstr(saas_error_last()->message, "sbx-nosuchsandbox0000"));
	strcpy(owner, "x");
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, b1->id, 1), SAAS_EINVAL);
	assert_string_equal(owner, "");
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, "", 0), SAAS_EINVAL);
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_engine_sandbox_owner(owner, f->engine, "sbx-\x01", 0), SAAS_EINVAL);
	assert_int_equal(saas_engine_sandbox_owner(owner, NULL, b1->id, 0), SAAS_EINVAL);
	assert_int_equal(saas_engine_sandbox_owner(NULL, f->engine, b1->id, 0), SAAS_EINVAL);
	saas_sandbox_free(a1);
	saas_sandbox_free(b1);
}

static void test_keys(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_key_list *keys;
	saas_key *info;
	saas_client *c = NULL;
	char *key, *key2;

	assert_int_equal(strlen(f->key_a), 7 + 43);
	assert_memory_equal(f->key_a, "aas_sk_", 7);
	assert_string_not_equal(f->key_a, f->key_b);
	assert_string_equal(saas_client_account_id(f->a), f->account_a);

	saas_test_advance(1); /* keys list oldest first */
	assert_int_equal(saas_key_create(&key, &info, f->engine, f->account_a, "second", 0), SAAS_OK);
	assert_memory_equal(info->prefix, key, strlen(info->prefix));
	assert_int_equal(strlen(info->prefix), 11);
	assert_int_equal(saas_client_open_local(&c, f->engine, key, 0), SAAS_OK);
	saas_client_free(c);
	assert_int_equal(saas_key_revoke(f->engine, info->id), SAAS_OK);
	assert_int_equal(saas_key_revoke(f->engine, info->id), SAAS_OK);
	assert_int_equal(saas_client_open_local(&c, f->engine, key, 0), SAAS_EAUTH);
	assert_non_null(strstr(saas_error_last()->message, "revoked"));
	assert_null(c);
	assert_int_equal(saas_key_list_get(&keys, f->engine, f->account_a), SAAS_OK);
	assert_int_equal(keys->count, 2);
	assert_int_equal(keys->items[0]->revoked_at_ms, 0);
	assert_int_not_equal(keys->items[1]->revoked_at_ms, 0);
	/* The store holds no plaintext: nothing listed reveals more than the prefix. */
	assert_null(strstr(keys->items[1]->name, key + 11));
	saas_key_list_free(keys);
	saas_key_free(info);

	/* A key differing in one character is not the key. */
	key2 = strdup(f->key_a);
	key2[20] = key2[20] == 'A' ? 'B' : 'A';
	assert_int_equal(saas_client_open_local(&c, f->engine, key2, 0), SAAS_EAUTH);
	assert_int_equal(saas_client_open_local(&c, f->engine, "", 0), SAAS_EAUTH);
	assert_int_equal(saas_client_open_local(&c, f->engine, NULL, 0), SAAS_EAUTH);
	assert_int_equal(saas_client_open_local(&c, f->engine, f->key_a, 4), SAAS_EINVAL);
	free(key2);
	/* On failure the out parameter is set to NULL. */
	assert_int_equal(saas_key_create(&key2, NULL, f->engine, "acc-nope", NULL, 0), SAAS_ENOTFOUND);
	assert_null(key2);
	assert_int_equal(saas_key_revoke(f->engine, "key-nope"), SAAS_ENOTFOUND);
	assert_int_equal(saas_key_list_get(&keys, f->engine, "acc-nope"), SAAS_ENOTFOUND);
	saas_free(key);
}

static void test_create_defaults(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);

	assert_memory_equal(sb->id, "sbx-", 4);
	assert_int_equal(strlen(sb->id), 24);
	assert_int_equal(sb->status, SAAS_SANDBOX_READY);
	assert_string_equal(sb->size, "small");
	assert_int_equal(sb->vcpus, 2);
	assert_int_equal(sb->memory_mb, 4096);
	assert_int_equal(sb->disk_gb, 40);
	assert_string_equal(sb->image, "default");
	assert_int_equal(sb->expires_at_ms - sb->ready_at_ms, 900 * 1000);
	assert_int_equal(sb->cost_usd_micro, 0);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(sb);

	sb = create(f->a, "large", 120);
	assert_int_equal(sb->vcpus, 8);
	assert_int_equal(sb->memory_mb, 16384);
	assert_int_equal(sb->disk_gb, 160);
	assert_int_equal(sb->expires_at_ms - sb->ready_at_ms, 120 * 1000);
	saas_sandbox_free(sb);
}

static void test_create_bad_input(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.size = "huge";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "small, medium, large"));
	o.size = "";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.size = NULL;
	o.timeout_s = -1;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.timeout_s = 86401;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "maximum"));
	o.timeout_s = 0;
	o.image = "../etc";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.image = "UPPER";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.image = NULL;
	o.network = "open";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "network"));
	o.network = "";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.network = "Internet";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.network = NULL;
	o.version = 0;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.version = SAAS_CREATE_OPTIONS_VERSION + 1;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "create options version"));
	o.version = SAAS_CREATE_OPTIONS_VERSION;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 8), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_create(&sb, NULL, &o, 0), SAAS_EINVAL);
	assert_null(sb);
	/* Nothing was made by any of that. */
	assert_int_equal(saas_fake_create_calls(), 0);
	assert_int_equal(saas_fake_vm_count(), 0);
}

/* The network policies the API knows reach the driver (the fake gives any). */
static void test_create_network(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *policies[] = { "isolated", "internet", NULL };

	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
		saas_sandbox *sb = NULL;
		o.network = policies[i];
		assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
		assert_int_equal(sb->status, SAAS_SANDBOX_READY);
		assert_true(saas_fake_vm_exists(sb->id));
		saas_sandbox_free(sb);
	}
	assert_int_equal(saas_fake_create_calls(), 3);
}

static void test_create_failure_leaves_nothing(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox_list *list;
	saas_sandbox *sb = NULL;

	saas_fake_fail_creates(1);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "could not be created"));
	assert_null(sb);
	assert_int_equal(saas_fake_vm_count(), 0);
	assert_int_equal(saas_sandbox_list_get(&list, f->a, NULL, 0, 0), SAAS_OK);
	assert_int_equal(list->count, 1);
	assert_int_equal(list->items[0]->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(list->items[0]->end_reason, SAAS_END_FAILED);
	assert_int_equal(list->items[0]->cost_usd_micro, 0);
	saas_sandbox_list_free(list);
	assert_int_equal(saas_test_balance(f->a), 5000000);
}

/*
 * A VM the driver started ahead (vm_take) becomes the next create's of the
 * default network: the sandbox gets its name. A create with a network of its
 * own never takes it; one refused before its VM is made lets it go (its VM
 * destroyed); a name no sandbox may have is let go and the create made the
 * ordinary way.
 */
static void test_create_started_ahead(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *isolated = NULL;

	saas_fake_ahead("sbx-aheadaheadaheadahead");
	o.network = "isolated";
	assert_int_equal(saas_sandbox_create(&isolated, f->a, &o, 0), SAAS_OK);
	assert_string_not_equal(isolated->id, "sbx-aheadaheadaheadahead");
	assert_int_equal(saas_fake_ahead_state(), 1);
	sb = create(f->a, NULL, 0);
	assert_string_equal(sb->id, "sbx-aheadaheadaheadahead");
	assert_int_equal(sb->status, SAAS_SANDBOX_READY);
	assert_int_equal(saas_fake_ahead_state(), 0);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(sb);
	/* The next create has none to take. */
	sb = create(f->a, NULL, 0);
	assert_string_not_equal(sb->id, "sbx-aheadaheadaheadahead");
	saas_sandbox_free(sb);
	/* A driver's name that no sandbox may have: let go, and the create is made anyway. */
	saas_fake_ahead("sbx-NOT-an-id");
	sb = create(f->a, NULL, 0);
	assert_string_not_equal(sb->id, "sbx-NOT-an-id");
	assert_int_equal(saas_fake_ahead_state(), 0);
	saas_sandbox_free(sb);
	saas_sandbox_free(isolated);
}

/* Taken by a create the account's limit refuses: the VM started ahead is destroyed, not left running. */
static void test_started_ahead_refused(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1 = create(f->a, NULL, 0), *s2 = create(f->a, NULL, 0), *s3 = NULL;
	saas_sandbox_list *list = NULL;

	saas_fake_ahead("sbx-aheadaheadaheadahead");
	assert_int_equal(saas_sandbox_create(&s3, f->a, NULL, 0), SAAS_ELIMIT);
	assert_null(s3);
	assert_int_equal(saas_fake_ahead_state(), 0);
	assert_false(saas_fake_vm_exists("sbx-aheadaheadaheadahead"));
	assert_int_equal(saas_sandbox_list_get(&list, f->a, NULL, 0, 0), SAAS_OK);
	assert_int_equal(list->count, 2);
	saas_sandbox_list_free(list);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

static void test_tenancy(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *other = NULL;
	saas_execution *x = NULL, *y = NULL;
	saas_sandbox_list *list;
	saas_file_list *files = NULL;
	void *data = NULL;
	size_t len;
	char *url = NULL;

	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo mine", NULL, 0), SAAS_OK);
	/* To another account it does not exist: NOT FOUND, never FORBIDDEN. */
	assert_int_equal(saas_sandbox_get(&other, f->b, sb->id), SAAS_ENOTFOUND);
	assert_int_equal(saas_exec(&y, f->b, sb->id, "echo theirs", NULL, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_sandbox_extend(&other, f->b, sb->id, 60, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_write(f->b, sb->id, "x", "1", 1, NULL), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_read(&data, &len, f->b, sb->id, "x", 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_list_get(&files, f->b, sb->id, NULL, 0, 0, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_port_expose(&url, f->b, sb->id, 8000, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_execution_get(&y, f->b, x->id), SAAS_ENOTFOUND);
	assert_int_equal(saas_sandbox_destroy(&other, f->b, sb->id, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_sandbox_list_get(&list, f->b, NULL, 0, 0), SAAS_OK);
	assert_int_equal(list->count, 0);
	saas_sandbox_list_free(list);
	/* And it is still there for its owner, untouched. */
	assert_int_equal(saas_sandbox_get(&other, f->a, sb->id), SAAS_OK);
	assert_int_equal(other->status, SAAS_SANDBOX_READY);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(other);
	saas_execution_free(x);
	saas_sandbox_free(sb);
}

static void test_limits(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1 = create(f->a, NULL, 0), *s2 = create(f->a, NULL, 0), *s3 = NULL;

	assert_int_equal(saas_sandbox_create(&s3, f->a, NULL, 0), SAAS_ELIMIT);
	assert_null(s3);
	/* The limit is per account. */
	s3 = create(f->b, NULL, 0);
	saas_sandbox_free(s3);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, s1->id, 0), SAAS_OK);
	s3 = create(f->a, NULL, 0);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
	saas_sandbox_free(s3);
}

static int setup_limit2(void **state)
{
	return setup_with(state, 2, SAAS_CREDIT_DEFAULT);
}

static void test_no_credit(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	/* bob has exactly one minute of small (60 * 25 = 1500 micro-dollars). */
	o.size = "medium";
	assert_int_equal(saas_sandbox_create(&sb, f->b, &o, 0), SAAS_ECREDIT);
	assert_non_null(strstr(saas_error_last()->message, "add credit"));
	assert_int_equal(saas_fake_create_calls(), 0);
	sb = create(f->b, "small", 0);
	assert_non_null(sb);
	saas_sandbox_free(sb);
}

static int setup_poor(void **state)
{
	return setup_with(state, 0, 1500);
}

static void test_billing_exact(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 7200), *done = NULL;
	saas_sandbox *md;
	saas_account *acc;

	saas_test_advance(3600 * 1000);
	assert_int_equal(saas_sandbox_get(&done, f->a, sb->id), SAAS_OK);
	assert_int_equal(done->cost_usd_micro, 90000); /* an hour of small accrued */
	saas_sandbox_free(done);
	assert_int_equal(saas_test_balance(f->a), 5000000 - 90000);
	saas_test_advance(999); /* part of a second is not billed */
	assert_int_equal(saas_sandbox_destroy(&done, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(done->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(done->end_reason, SAAS_END_USER);
	assert_int_equal(done->cost_usd_micro, 90000);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(done);
	/* Destroy is idempotent and never charges twice. */
	saas_test_advance(5000);
	assert_int_equal(saas_sandbox_destroy(&done, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(done->cost_usd_micro, 90000);
	saas_sandbox_free(done);
	assert_int_equal(saas_test_balance(f->a), 5000000 - 90000);

	/* medium: 280000/h; 1 s = 77.7 -> 77, 100 s = 7777.7 -> 7777, rounded once, not per second. */
	md = create(f->a, "medium", 0);
	saas_test_advance(100 * 1000);
	assert_int_equal(saas_sandbox_destroy(&done, f->a, md->id, 0), SAAS_OK);
	assert_int_equal(done->cost_usd_micro, 7777);
	saas_sandbox_free(done);
	saas_sandbox_free(md);
	md = create(f->a, "medium", 0);
	saas_test_advance(1000);
	assert_int_equal(saas_sandbox_destroy(&done, f->a, md->id, 0), SAAS_OK);
	assert_int_equal(done->cost_usd_micro, 77);
	saas_sandbox_free(done);
	saas_sandbox_free(md);
	assert_int_equal(saas_account_get(&acc, f->engine, f->account_a), SAAS_OK);
	assert_int_equal(acc->spent_usd_micro, 90000 + 7777 + 77);
	assert_int_equal(acc->balance_usd_micro, 5000000 - 90000 - 7777 - 77);
	saas_account_free(acc);
	saas_sandbox_free(sb);
}

/* ---- metadata and default environment (saas_create_options version 3) ---- */

static int create_with(saas_client *c, const char *const *metadata, const char *const *envs, saas_sandbox **out)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;

	o.metadata = metadata;
	o.envs = envs;
	return saas_sandbox_create(out, c, &o, 0);
}

static void list_ids(saas_client *c, const char *const *metadata, const char *cursor, unsigned int limit, char *ids,
                     size_t size, char **next)
{
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	saas_sandbox_list *l = NULL;

	lo.metadata = metadata;
	lo.cursor = cursor;
	lo.limit = limit;
	if (saas_sandbox_list_query(&l, c, &lo, SAAS_LIST_ACTIVE) != SAAS_OK)
		fail_msg("list: %s", saas_error_last()->message);
	ids[0] = '\0';
	for (size_t i = 0; i < l->count; i++)
		snprintf(ids + strlen(ids), size - strlen(ids), "%s%s", i ? "," : "", l->items[i]->id);
	if (next)
		*next = l->next_cursor ? strdup(l->next_cursor) : NULL;
	saas_sandbox_list_free(l);
}

static void test_metadata_and_envs(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const meta1[] = { "team=blue", "eq=a=b", NULL };
	static const char *const meta2[] = { "team=blue", "stage=prod", NULL };
	static const char *const envs[] = { "GREETING=hi there", "KEEP=k", NULL };
	static const char *const own[] = { "KEEP=mine", NULL };
	static const char *const f_blue[] = { "team=blue", NULL };
	static const char *const f_prod[] = { "stage=prod", "team=blue", NULL };
	static const char *const f_eq[] = { "eq=a=b", NULL };
	static const char *const f_env[] = { "KEEP=k", NULL };
	saas_sandbox *a = NULL, *b = NULL, *plain = NULL, *got = NULL;
	saas_exec_options xo = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	char ids[512], want[512], *next = NULL;

	assert_int_equal(create_with(f->a, meta1, envs, &a), SAAS_OK);
	saas_test_advance(1);
	assert_int_equal(create_with(f->a, meta2, NULL, &b), SAAS_OK);
	saas_test_advance(1);
	assert_int_equal(create_with(f->a, NULL, NULL, &plain), SAAS_OK);
	/* Shown sorted by key; empty lists, not NULL, where none was given. */
	assert_string_equal(a->metadata[0], "eq=a=b");
	assert_string_equal(a->metadata[1], "team=blue");
	assert_null(a->metadata[2]);
	assert_string_equal(a->envs[0], "GREETING=hi there");
	assert_string_equal(a->envs[1], "KEEP=k");
	assert_non_null(plain->metadata);
	assert_null(plain->metadata[0]);
	assert_null(plain->envs[0]);
	assert_int_equal(plain->on_timeout, SAAS_ON_TIMEOUT_DESTROY);
	assert_int_equal(saas_sandbox_get(&got, f->a, a->id), SAAS_OK);
	assert_string_equal(got->metadata[1], "team=blue");
	saas_sandbox_free(got);

	/* Every pair must match; the environment is never matched; another account sees nothing. */
	list_ids(f->a, f_blue, NULL, 0, ids, sizeof(ids), NULL);
	snprintf(want, sizeof(want), "%s,%s", b->id, a->id);
	assert_string_equal(ids, want);
	list_ids(f->a, f_prod, NULL, 0, ids, sizeof(ids), NULL);
	assert_string_equal(ids, b->id);
	list_ids(f->a, f_eq, NULL, 0, ids, sizeof(ids), NULL);
	assert_string_equal(ids, a->id);
	list_ids(f->a, f_env, NULL, 0, ids, sizeof(ids), NULL);
	assert_string_equal(ids, "");
	list_ids(f->b, f_blue, NULL, 0, ids, sizeof(ids), NULL);
	assert_string_equal(ids, "");
	/* Pages count only what matches: one each, and the last has no cursor. */
	list_ids(f->a, f_blue, NULL, 1, ids, sizeof(ids), &next);
	assert_string_equal(ids, b->id);
	assert_non_null(next);
	list_ids(f->a, f_blue, next, 1, ids, sizeof(ids), NULL);
	assert_string_equal(ids, a->id);
	free(next);

	/* Every exec starts with the sandbox's environment; its own names win. */
	assert_int_equal(saas_exec(&x, f->a, a->id, "env", NULL, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "GREETING=hi there\nKEEP=k\n");
	saas_execution_free(x);
	xo.env = own;
	assert_int_equal(saas_exec(&x, f->a, a->id, "env", &xo, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "GREETING=hi there\nKEEP=mine\n");
	saas_execution_free(x);
	assert_int_equal(saas_exec(&x, f->a, plain->id, "env", NULL, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "");
	saas_execution_free(x);
	saas_sandbox_free(a);
	saas_sandbox_free(b);
	saas_sandbox_free(plain);
}

static void refused(saas_client *c, const saas_create_options *o, const char *says)
{
	saas_sandbox *sb = NULL;

	assert_int_equal(saas_sandbox_create(&sb, c, o, 0), SAAS_EINVAL);
	if (!strstr(saas_error_last()->message, says))
		fail_msg("\"%s\" does not say \"%s\"", saas_error_last()->message, says);
	assert_null(sb);
}

static void test_metadata_refused(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const noeq[] = { "novalue", NULL }, *const nokey[] = { "=v", NULL };
	static const char *const dup[] = { "k=1", "k=2", NULL }, *const ctl[] = { "k\tx=1", NULL };
	static const char *const notshell[] = { "1A=1", NULL }, *const dash[] = { "A-B=1", NULL };
	static const char *const badutf8[] = { "k=\xff", NULL };
	char key[SAAS_METADATA_KEY_MAX + 8], value[SAAS_METADATA_VALUE_MAX + 8];
	const char *longkey[] = { key, NULL }, *longvalue[] = { value, NULL };
	const char *many[SAAS_METADATA_MAX + 2];
	char names[SAAS_METADATA_MAX + 1][16];
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	saas_sandbox_list *l = NULL;
	saas_sandbox *sb = NULL;

	o.metadata = noeq;
	refused(f->a, &o, "not KEY=VALUE");
	o.metadata = nokey;
	refused(f->a, &o, "not KEY=VALUE");
	o.metadata = dup;
	refused(f->a, &o, "given twice");
	o.metadata = ctl;
	refused(f->a, &o, "control character");
	o.metadata = badutf8;
	refused(f->a, &o, "UTF-8");
	memset(key, 'k', SAAS_METADATA_KEY_MAX + 1);
	strcpy(key + SAAS_METADATA_KEY_MAX + 1, "=v");
	o.metadata = longkey;
	refused(f->a, &o, "over 128 bytes");
	snprintf(value, sizeof(value), "k=");
	memset(value + 2, 'v', SAAS_METADATA_VALUE_MAX + 1);
	value[SAAS_METADATA_VALUE_MAX + 3] = '\0';
	o.metadata = longvalue;
	refused(f->a, &o, "over 1024 bytes");
	for (int i = 0; i <= SAAS_METADATA_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "k%d=v", i);
		many[i] = names[i];
	}
	many[SAAS_METADATA_MAX + 1] = NULL;
	o.metadata = many;
	refused(f->a, &o, "at most 64");
	/* At the bound, it is taken. */
	many[SAAS_METADATA_MAX] = NULL;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	saas_sandbox_free(sb);
	sb = NULL;
	o.metadata = NULL;
	o.envs = notshell;
	refused(f->a, &o, "shell name");
	o.envs = dash;
	refused(f->a, &o, "shell name");
	o.envs = NULL;
	o.on_timeout = 7;
	refused(f->a, &o, "on_timeout");
	o.on_timeout = SAAS_ON_TIMEOUT_DESTROY;
	o.auto_resume = 1;
	refused(f->a, &o, "auto_resume needs on_timeout pause");
	assert_int_equal(saas_fake_create_calls(), 1);

	/* An older caller's options (version 2) know nothing past network_spec: what follows is not read. */
	o = (saas_create_options)SAAS_CREATE_OPTIONS_INIT;
	o.version = 2;
	o.metadata = noeq;
	o.on_timeout = 7;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	assert_null(sb->metadata[0]);
	assert_int_equal(sb->on_timeout, SAAS_ON_TIMEOUT_DESTROY);
	saas_sandbox_free(sb);

	/* A list's filter: pairs of the same shape, at most SAAS_LIST_METADATA_MAX. */
	lo.metadata = noeq;
	assert_int_equal(saas_sandbox_list_query(&l, f->a, &lo, 0), SAAS_EINVAL);
	lo.metadata = many;
	assert_int_equal(saas_sandbox_list_query(&l, f->a, &lo, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "at most 32"));
	lo.version = 9;
	lo.metadata = NULL;
	assert_int_equal(saas_sandbox_list_query(&l, f->a, &lo, 0), SAAS_EINVAL);
	assert_null(l);
	/* Extend from now: never negative; a flag it does not know is refused. */
	assert_int_equal(saas_sandbox_extend(NULL, f->a, "sbx-x", -1, SAAS_EXTEND_FROM_NOW), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(NULL, f->a, "sbx-x", 1, 1u << 5), SAAS_EINVAL);
}

static void test_extend_from_now(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 600), *got = NULL;
	int64_t now = saas_test_clock(NULL);

	/* Shorter than it was: allowed from now, never by an extend. */
	assert_int_equal(saas_sandbox_extend(&got, f->a, sb->id, 30, SAAS_EXTEND_FROM_NOW), SAAS_OK);
	assert_int_equal(got->expires_at_ms, now + 30 * 1000);
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_extend(&got, f->a, sb->id, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(&got, f->a, sb->id, 86401, SAAS_EXTEND_FROM_NOW), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(&got, f->a, sb->id, 0, SAAS_EXTEND_FROM_NOW), SAAS_OK);
	assert_int_equal(got->expires_at_ms, now);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

static void test_reaper_expiry(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 60), *got = NULL;
	saas_execution *x = NULL;
	unsigned int n = 99;

	saas_test_advance(59 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 0);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_test_advance(1000);
	/* At its expiry it can no longer be used, even before the reaper comes. */
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo late", NULL, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "expired"));
	saas_test_advance(30 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	assert_false(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	/* Billed to its expiry (60 s), not to when the reaper came (90 s). */
	assert_int_equal(got->cost_usd_micro, 60 * 25);
	saas_sandbox_free(got);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 0);
	saas_sandbox_free(sb);
}

static void test_expiry_while_engine_down(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 60), *got = NULL;
	unsigned int n = 0;

	saas_test_fixture_close(f);
	/* The VM outlives the engine, as a real one does; an hour passes. */
	assert_true(saas_fake_vm_exists(sb->id));
	saas_test_advance(3600 * 1000);
	saas_test_fixture_open(f);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	assert_int_equal(got->cost_usd_micro, 60 * 25);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

static void test_credit_runs_out(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1, *s2, *got = NULL;
	saas_account *acc;
	unsigned int n = 0;

	/* bob: 1500 micro-dollars. Two small sandboxes burn 50/s: gone after 30 s. */
	assert_int_equal(saas_account_add_credit(f->engine, f->account_b, 1500, NULL, 0), SAAS_OK);
	s1 = create(f->b, NULL, 0);
	s2 = create(f->b, NULL, 0);
	saas_test_advance(10 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 0);
	saas_test_advance(1000 * 1000); /* long past it: as if the engine had not looked in a while */
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 2);
	assert_int_equal(saas_sandbox_get(&got, f->b, s1->id), SAAS_OK);
	assert_int_equal(got->end_reason, SAAS_END_CREDIT);
	assert_int_equal(got->cost_usd_micro, 60 * 25);
	saas_sandbox_free(got);
	assert_false(saas_fake_vm_exists(s1->id));
	assert_false(saas_fake_vm_exists(s2->id));
	assert_int_equal(saas_account_get(&acc, f->engine, f->account_b), SAAS_OK);
	/* Stopped when the balance reached zero, not a thousand seconds later. */
	assert_int_equal(acc->balance_usd_micro, 0);
	saas_account_free(acc);
	/* And no new sandbox without credit. */
	assert_int_equal(saas_sandbox_create(&got, f->b, NULL, 0), SAAS_ECREDIT);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

static void test_reconcile(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *alive = create(f->a, NULL, 0), *dead = create(f->a, NULL, 0), *got = NULL;
	saas_store_sandbox stuck;

	/* A sandbox caught mid-create by a crash. */
	memset(&stuck, 0, sizeof(stuck));
	strcpy(stuck.id, "sbx-stuckstuckstuckstuc");
	strcpy(stuck.account_id, f->account_a);
	stuck.status = SAAS_SANDBOX_CREATING;
	strcpy(stuck.size, "small");
	stuck.vcpus = 2;
	stuck.memory_mb = 4096;
	stuck.disk_gb = 40;
	strcpy(stuck.image, "default");
	stuck.usd_micro_per_hour = 90000;
	stuck.created_at_ms = saas_test_now();
	stuck.expires_at_ms = saas_test_now() + 900000;
	assert_int_equal(f->engine->store->sandbox_insert(f->engine->store_ctx, &stuck, 100), SAAS_OK);
	saas_fake_vm_add(stuck.id);

	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK); /* heartbeat at t0 */
	saas_test_fixture_close(f);
	saas_fake_vm_stop(dead->id);
	saas_fake_vm_add("sbx-orphanorphanorphanor");
	saas_test_advance(600 * 1000);
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);

	assert_false(saas_fake_vm_exists("sbx-orphanorphanorphanor"));
	assert_false(saas_fake_vm_exists(stuck.id));
	assert_false(saas_fake_vm_exists(dead->id));
	assert_true(saas_fake_vm_exists(alive->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, dead->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_LOST);
	assert_int_equal(got->cost_usd_micro, 0); /* last known alive at its first heartbeat */
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_get(&got, f->a, stuck.id), SAAS_OK);
	assert_int_equal(got->end_reason, SAAS_END_FAILED);
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_get(&got, f->a, alive->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	assert_int_equal(got->cost_usd_micro, 600 * 25);
	saas_sandbox_free(got);
	saas_sandbox_free(alive);
	saas_sandbox_free(dead);
}

static void test_exec(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	const char *env[] = { "GREETING=hi", "_X1=2", NULL };
	saas_execution *x = NULL, *y = NULL;

	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo hello", NULL, 0), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 0);
	assert_int_equal(x->stdout_len, 6);
	assert_string_equal(x->stdout_data, "hello\n");
	assert_int_equal(x->stderr_len, 0);
	assert_memory_equal(x->id, "exe-", 4);
	/* Recorded: the same execution reads back. */
	assert_int_equal(saas_execution_get(&y, f->a, x->id), SAAS_OK);
	assert_string_equal(y->stdout_data, "hello\n");
	assert_int_equal(y->status, SAAS_EXEC_EXITED);
	assert_string_equal(y->sandbox_id, sb->id);
	saas_execution_free(y);
	saas_execution_free(x);

	assert_int_equal(saas_exec(&x, f->a, sb->id, "exit 7", NULL, 0), SAAS_OK);
	assert_int_equal(x->exit_code, 7);
	saas_execution_free(x);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "frobnicate", NULL, 0), SAAS_OK);
	assert_int_equal(x->exit_code, 127);
	assert_non_null(strstr(x->stderr_data, "not found"));
	saas_execution_free(x);

	assert_int_equal(saas_exec(&x, f->a, sb->id, "pwd", NULL, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "/workspace\n");
	saas_execution_free(x);
	o.cwd = "/tmp";
	o.env = env;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "pwd", &o, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "/tmp\n");
	saas_execution_free(x);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "env", &o, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "GREETING=hi\n_X1=2\n");
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.stdin_data = "a\0b";
	o.stdin_len = 3;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "cat", &o, 0), SAAS_OK);
	assert_int_equal(x->stdout_len, 3);
	assert_memory_equal(x->stdout_data, "a\0b", 3);
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.timeout_s = 1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "sleep 5", &o, 0), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_TIMEDOUT);
	assert_int_equal(x->exit_code, -1);
	assert_non_null(strstr(x->error, "timeout"));
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.max_output = 1000;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "spew 100000", &o, 0), SAAS_OK);
	assert_int_equal(x->stdout_len, 1000);
	assert_int_equal(x->stderr_len, 1000);
	assert_true(x->stdout_truncated);
	assert_true(x->stderr_truncated);
	assert_int_equal(x->stdout_data[999], 'x');
	saas_execution_free(x);
	/* The default cap is 1 MiB. */
	assert_int_equal(saas_exec(&x, f->a, sb->id, "spew 2000000", NULL, 0), SAAS_OK);
	assert_int_equal(x->stdout_len, SAAS_EXEC_OUTPUT_DEFAULT);
	assert_true(x->stdout_truncated);
	saas_execution_free(x);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "spew 100", NULL, 0), SAAS_OK);
	assert_false(x->stdout_truncated);
	saas_execution_free(x);
	saas_sandbox_free(sb);
}

static void test_exec_bad_input(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	const char *bad_env1[] = { "1X=2", NULL }, *bad_env2[] = { "NOEQUALS", NULL }, *bad_env3[] = { "=v", NULL };
	saas_execution *x = NULL;
	char *huge = malloc(SAAS_EXEC_COMMAND_MAX + 2);

	memset(huge, 'e', SAAS_EXEC_COMMAND_MAX + 1);
	huge[SAAS_EXEC_COMMAND_MAX + 1] = '\0';
	assert_int_equal(saas_exec(NULL, f->a, sb->id, "echo", NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, sb->id, NULL, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "", NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, sb->id, huge, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo \xff", NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, NULL, "echo", NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, "", "echo", NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_exec(&x, f->a, "sbx-nope", "echo", NULL, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo", NULL, 1u << 9), SAAS_EINVAL);
	o.env = bad_env1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "env", &o, 0), SAAS_EINVAL);
	o.env = bad_env2;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "env", &o, 0), SAAS_EINVAL);
	o.env = bad_env3;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "env", &o, 0), SAAS_EINVAL);
	o.env = NULL;
	o.timeout_s = -1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.timeout_s = SAAS_EXEC_TIMEOUT_MAX + 1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.timeout_s = 0;
	o.max_output = SAAS_EXEC_OUTPUT_MAX + 1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.max_output = 0;
	o.stdin_len = 10;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "cat", &o, 0), SAAS_EINVAL);
	o.stdin_data = huge;
	o.stdin_len = SAAS_EXEC_STDIN_MAX + 1;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "cat", &o, 0), SAAS_ETOOBIG);
	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.cwd = "/bad\npath";
	assert_int_equal(saas_exec(&x, f->a, sb->id, "pwd", &o, 0), SAAS_EINVAL);
	o.cwd = NULL;
	o.version = 3;
	assert_int_equal(saas_exec(&x, f->a, sb->id, "pwd", &o, 0), SAAS_EINVAL);
	assert_null(x);
	assert_int_equal(saas_execution_get(&x, f->a, "exe-nope"), SAAS_ENOTFOUND);
	assert_int_equal(saas_execution_get(&x, f->a, ""), SAAS_EINVAL);
	/* On a destroyed sandbox: the wrong state, said plainly. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo", NULL, 0), SAAS_ESTATE);
	assert_non_null(strstr(saas_error_last()->message, "destroyed"));
	free(huge);
	saas_sandbox_free(sb);
}

static void test_exec_background(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *x = NULL, *y = NULL;
	int tries = 0;

	assert_int_equal(saas_exec(&x, f->a, sb->id, "echo bg", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	do {
		saas_execution_free(y);
		assert_int_equal(saas_execution_get(&y, f->a, x->id), SAAS_OK);
		if (y->status == SAAS_EXEC_RUNNING)
			usleep(2000);
	} while (y->status == SAAS_EXEC_RUNNING && ++tries < 5000);
	assert_int_equal(y->status, SAAS_EXEC_EXITED);
	assert_string_equal(y->stdout_data, "bg\n");
	saas_execution_free(x);
	saas_execution_free(y);
	y = NULL;

	/* A background command that never ends: destroying its sandbox ends it, recorded as failed. */
	assert_int_equal(saas_exec(&x, f->a, sb->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	tries = 0;
	do {
		saas_execution_free(y);
		assert_int_equal(saas_execution_get(&y, f->a, x->id), SAAS_OK);
		if (y->status == SAAS_EXEC_RUNNING)
			usleep(2000);
	} while (y->status == SAAS_EXEC_RUNNING && ++tries < 5000);
	assert_int_equal(y->status, SAAS_EXEC_FAILED);
	saas_execution_free(x);
	saas_execution_free(y);

	/* One still running when the engine closes is stopped, and the close does not hang. */
	saas_sandbox_free(sb);
	sb = create(f->a, NULL, 0);
	assert_int_equal(saas_exec(&x, f->a, sb->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	saas_test_fixture_close(f);
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	assert_int_equal(saas_execution_get(&y, f->a, x->id), SAAS_OK);
	assert_int_equal(y->status, SAAS_EXEC_FAILED);
	saas_execution_free(x);
	saas_execution_free(y);
	saas_sandbox_free(sb);
}

static void test_files(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_file_write_options wo = SAAS_FILE_WRITE_OPTIONS_INIT;
	unsigned char bin[4096];
	saas_file_list *list = NULL;
	void *data = NULL;
	size_t len = 0;
	char longpath[SAAS_PATH_MAX + 2];

	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(i * 7);
	assert_int_equal(saas_file_write(f->a, sb->id, "out/bin.dat", bin, sizeof(bin), NULL), SAAS_OK);
	assert_int_equal(saas_file_read(&data, &len, f->a, sb->id, "/workspace/out/bin.dat", 0), SAAS_OK);
	assert_int_equal(len, sizeof(bin));
	assert_memory_equal(data, bin, sizeof(bin));
	saas_free(data);
	assert_int_equal(saas_file_read(&data, &len, f->a, sb->id, "out/bin.dat", 100), SAAS_ETOOBIG);
	assert_null(data);
	assert_int_equal(saas_file_read(&data, &len, f->a, sb->id, "missing", 0), SAAS_ENOTFOUND);
	wo.mode = 0755;
	assert_int_equal(saas_file_write(f->a, sb->id, "/workspace/run.sh", "#!/bin/sh\n", 10, &wo), SAAS_OK);
	assert_int_equal(saas_file_write(f->a, sb->id, "empty", NULL, 0, NULL), SAAS_OK);
	assert_int_equal(saas_file_read(&data, &len, f->a, sb->id, "empty", 0), SAAS_OK);
	assert_int_equal(len, 0);
	saas_free(data);

	assert_int_equal(saas_file_list_get(&list, f->a, sb->id, NULL, 0, 0, 0), SAAS_OK);
	assert_string_equal(list->root, "/workspace");
	assert_int_equal(list->count, 3);
	assert_string_equal(list->entries[0]->path, "/workspace/empty");
	assert_string_equal(list->entries[1]->path, "/workspace/out/bin.dat");
	assert_int_equal(list->entries[1]->size, 4096);
	assert_int_equal(list->entries[2]->mode, 0755);
	assert_false(list->truncated);
	saas_file_list_free(list);
	assert_int_equal(saas_file_list_get(&list, f->a, sb->id, "/workspace", 1, 2, 0), SAAS_OK);
	assert_int_equal(list->count, 2);
	assert_true(list->truncated);
	saas_file_list_free(list);

	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	wo.mode = 010000;
	assert_int_equal(saas_file_write(f->a, sb->id, "x", "1", 1, &wo), SAAS_EINVAL);
	wo.mode = 0;
	wo.version = 0;
	assert_int_equal(saas_file_write(f->a, sb->id, "x", "1", 1, &wo), SAAS_EINVAL);
	wo.version = SAAS_FILE_WRITE_OPTIONS_VERSION + 1;
	assert_int_equal(saas_file_write(f->a, sb->id, "x", "1", 1, &wo), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "file write options version"));
	wo.version = SAAS_FILE_WRITE_OPTIONS_VERSION;
	assert_int_equal(saas_file_write(f->a, sb->id, "", "1", 1, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_write(f->a, sb->id, NULL, "1", 1, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_write(f->a, sb->id, longpath, "1", 1, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_write(f->a, sb->id, "a\nb", "1", 1, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_write(f->a, sb->id, "x", NULL, 5, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_read(&data, &len, f->a, sb->id, "x", -1), SAAS_EINVAL);
	assert_int_equal(saas_file_read(NULL, &len, f->a, sb->id, "x", 0), SAAS_EINVAL);
	assert_int_equal(saas_file_list_get(&list, f->a, sb->id, NULL, SAAS_LIST_DEPTH_MAX + 1, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_file_list_get(&list, f->a, sb->id, NULL, 0, SAAS_LIST_ENTRIES_MAX + 1, 0), SAAS_EINVAL);
	assert_int_equal(saas_file_write_stream(f->a, sb->id, "x", NULL, NULL, 1, NULL), SAAS_EINVAL);
	assert_int_equal(saas_file_write_stream(f->a, sb->id, "x", (saas_read_fn)1, NULL, SAAS_FILE_MAX + 1, NULL),
	                 SAAS_ETOOBIG);
	saas_sandbox_free(sb);
}

/* The host label of a preview URL "http://LABEL.localhost:8080/": copied into label. */
static void url_label(const char *url, char label[SAAS_PREVIEW_NAME_LEN + 1])
{
	const char *start = strstr(url, "://"), *end;

	assert_non_null(start);
	start += 3;
	assert_non_null(end = strchr(start, '.'));
	assert_string_equal(end, ".localhost:8080/");
	assert_int_equal(end - start, SAAS_PREVIEW_NAME_LEN);
	memcpy(label, start, SAAS_PREVIEW_NAME_LEN);
	label[SAAS_PREVIEW_NAME_LEN] = '\0';
	/* A DNS label: lowercase base32 only. */
	assert_int_equal(strspn(label, "abcdefghijklmnopqrstuvwxyz234567"), SAAS_PREVIEW_NAME_LEN);
}

static void test_ports(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *got = NULL;
	char *url = NULL, *again = NULL, *other = NULL;
	char label[SAAS_PREVIEW_NAME_LEN + 1], label80[SAAS_PREVIEW_NAME_LEN + 1], id[SAAS_ID_MAX + 1];
	unsigned int port = 0;
	char first;

	assert_int_equal(saas_port_expose(&url, f->a, sb->id, 3000, 0), SAAS_OK);
	url_label(url, label);
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 3000, 0), SAAS_OK);
	assert_string_equal(again, url);
	saas_free(again);
	assert_int_equal(saas_port_expose(&other, f->a, sb->id, 80, 0), SAAS_OK);
	url_label(other, label80);
	/* Each exposure has its own name: one port's URL says nothing about another's. */
	assert_string_not_equal(label, label80);
	assert_null(strstr(url, sb->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->nports, 2);
	assert_int_equal(got->ports[0]->port, 80);
	assert_string_equal(got->ports[0]->url, other);
	assert_int_equal(got->ports[1]->port, 3000);
	assert_string_equal(got->ports[1]->url, url);
	saas_sandbox_free(got);
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 65536, 0), SAAS_EINVAL);
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 22, 0), SAAS_EINVAL);
	assert_int_equal(saas_port_expose(NULL, f->a, sb->id, 80, 0), SAAS_EINVAL);

	/* The name leads to its own sandbox and port, and only to those. */
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label), SAAS_OK);
	assert_string_equal(id, sb->id);
	assert_int_equal(port, 3000);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label80), SAAS_OK);
	assert_int_equal(port, 80);
	first = label[0];
	label[0] = first == 'a' ? 'b' : 'a';
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label), SAAS_ENOTFOUND);
	assert_int_equal(port, 0);
	assert_null(strstr(saas_error_last()->message, label)); /* never echoed */
	label[0] = first;
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, "3000"), SAAS_ENOTFOUND);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, ""), SAAS_ENOTFOUND);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, NULL), SAAS_ENOTFOUND);
	assert_int_equal(saas_engine_preview_find(NULL, &port, f->engine, label), SAAS_EINVAL);

	/* Un-exposing: the name stops working at once; again is success; the other port stays. */
	assert_int_equal(saas_port_unexpose(f->b, sb->id, 3000), SAAS_ENOTFOUND); /* not b's */
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label), SAAS_OK);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 3000), SAAS_OK);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label), SAAS_ENOTFOUND);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 3000), SAAS_OK);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 4444), SAAS_OK);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 0), SAAS_EINVAL);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 65536), SAAS_EINVAL);
	assert_int_equal(saas_port_unexpose(f->a, "sbx-nope", 80), SAAS_ENOTFOUND);
	assert_int_equal(saas_port_unexpose(NULL, sb->id, 80), SAAS_EINVAL);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label80), SAAS_OK);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->nports, 1);
	assert_int_equal(got->ports[0]->port, 80);
	saas_sandbox_free(got);
	/* Exposed again, it gets a new name; the old one stays dead. */
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 3000, 0), SAAS_OK);
	assert_string_not_equal(again, url);
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label), SAAS_ENOTFOUND);
	saas_free(again);
	{
		int fd = -1;
		char buf[128] = "";
		ssize_t n;
		/* Only exposed ports tunnel; the other account's client finds nothing. */
		assert_int_equal(saas_port_connect(&fd, f->a, sb->id, 4000), SAAS_ENOTFOUND);
		assert_int_equal(fd, -1);
		assert_int_equal(saas_port_connect(&fd, f->b, sb->id, 3000), SAAS_ENOTFOUND);
		assert_int_equal(saas_port_connect(&fd, f->a, sb->id, 0), SAAS_EINVAL);
		assert_int_equal(saas_port_connect(NULL, f->a, sb->id, 3000), SAAS_EINVAL);
		assert_int_equal(saas_port_connect(&fd, f->a, sb->id, 3000), SAAS_OK);
		n = read(fd, buf, sizeof(buf) - 1);
		assert_true(n > 0);
		assert_non_null(strstr(buf, "port 3000 of "));
		close(fd);
	}
	assert_int_equal(saas_sandbox_destroy(&got, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(got->nports, 0);
	saas_sandbox_free(got);
	/* A destroyed sandbox's names lead nowhere. */
	assert_int_equal(saas_engine_preview_find(id, &port, f->engine, label80), SAAS_ENOTFOUND);
	assert_int_equal(saas_port_expose(&again, f->a, sb->id, 80, 0), SAAS_ESTATE);
	assert_int_equal(saas_port_unexpose(f->a, sb->id, 80), SAAS_OK);
	saas_free(url);
	saas_free(other);
	saas_sandbox_free(sb);
}

/* The template: {name} required, {port} and {id} filled in too. */
static void test_preview_template(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = NULL;
	char *url = NULL, want[256];

	saas_test_fixture_close(f);
	f->opts.preview_url = "https://{name}.p.example/{port}/{id}";
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	sb = create(f->a, NULL, 0);
	assert_int_equal(saas_port_expose(&url, f->a, sb->id, 8000, 0), SAAS_OK);
	assert_int_equal(strncmp(url, "https://", 8), 0);
	assert_int_equal(strspn(url + 8, "abcdefghijklmnopqrstuvwxyz234567"), SAAS_PREVIEW_NAME_LEN);
	snprintf(want, sizeof(want), ".p.example/8000/%s", sb->id);
	assert_string_equal(url + 8 + SAAS_PREVIEW_NAME_LEN, want);
	saas_free(url);
	saas_sandbox_free(sb);
}

static void test_list_and_extend(void **state)
{
	struct saas_test_fixture *f = *state;
	char ids[5][SAAS_ID_MAX + 1];
	static const char *const bad_cursors[] = { "", "1", "1.", ".sbx-a", "x1.sbx-a", " 1.sbx-a", "\n1.sbx-a",
		                                   "+1.sbx-a", "-0.sbx-a", "1 .sbx-a", "1234567890123456789.sbx-a",
		                                   "99999999999999999999.sbx-a", "1.sbx\001" };
	saas_sandbox_list *page = NULL, *page2 = NULL;
	saas_sandbox *sb, *ext = NULL;

	for (int i = 0; i < 5; i++) {
		sb = create(f->a, NULL, 0);
		strcpy(ids[i], sb->id);
		saas_sandbox_free(sb);
		if (i != 2)
			saas_test_advance(1000); /* two share a creation time: the id breaks the tie */
	}
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 3, 0), SAAS_OK);
	assert_int_equal(page->count, 3);
	assert_string_equal(page->items[0]->id, ids[4]);
	assert_non_null(page->next_cursor);
	assert_int_equal(saas_sandbox_list_get(&page2, f->a, page->next_cursor, 3, 0), SAAS_OK);
	assert_int_equal(page2->count, 2);
	assert_null(page2->next_cursor);
	assert_string_equal(page2->items[1]->id, ids[0]);
	/* Every sandbox once, none twice, across the pages. */
	for (int i = 0; i < 5; i++) {
		int seen = 0;
		for (size_t j = 0; j < page->count; j++)
			seen += strcmp(page->items[j]->id, ids[i]) == 0;
		for (size_t j = 0; j < page2->count; j++)
			seen += strcmp(page2->items[j]->id, ids[i]) == 0;
		assert_int_equal(seen, 1);
	}
	saas_sandbox_list_free(page);
	saas_sandbox_list_free(page2);
	/* A cursor is digits, a dot and an id: nothing strtoll would also take (found by fuzz.cursor). */
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(bad_cursors); i++)
		if (saas_sandbox_list_get(&page, f->a, bad_cursors[i], 3, 0) != SAAS_EINVAL)
			fail_msg("cursor '%s' was taken", bad_cursors[i]);

	assert_int_equal(saas_sandbox_destroy(NULL, f->a, ids[1], 0), SAAS_OK);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
	assert_int_equal(page->count, 4);
	saas_sandbox_list_free(page);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 0, SAAS_LIST_DESTROYED), SAAS_OK);
	assert_int_equal(page->count, 1);
	assert_string_equal(page->items[0]->id, ids[1]);
	saas_sandbox_list_free(page);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 0, SAAS_LIST_ACTIVE | SAAS_LIST_DESTROYED),
	                 SAAS_EINVAL);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 1001, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, "garbage", 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_list_get(&page, f->a, NULL, 0, 64), SAAS_EINVAL);

	assert_int_equal(saas_sandbox_get(&sb, f->a, ids[0]), SAAS_OK);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, ids[0], 600, 0), SAAS_OK);
	assert_int_equal(ext->expires_at_ms, sb->expires_at_ms + 600000);
	saas_sandbox_free(ext);
	saas_sandbox_free(sb);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, ids[0], 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, ids[0], -5, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, ids[0], 86400, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, ids[1], 60, 0), SAAS_ESTATE);
	assert_int_equal(saas_sandbox_extend(&ext, f->a, "sbx-none", 60, 0), SAAS_ENOTFOUND);
	assert_null(ext);
}

static void test_usage(void **state)
{
	struct saas_test_fixture *f = *state;
	int64_t t0 = saas_test_now();
	saas_sandbox *s1 = create(f->a, "small", 0), *s2;
	saas_usage *u = NULL, *u1 = NULL, *u2 = NULL;

	saas_test_advance(100 * 1000);
	s2 = create(f->a, "medium", 0);
	saas_test_advance(200 * 1000);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, s1->id, 0), SAAS_OK);
	saas_test_advance(50 * 1000);
	/* s1 ran 300 s (7500), s2 has run 250 s so far (19444). */
	assert_int_equal(saas_usage_get(&u, f->a, t0 - 1000, 0, 0), SAAS_OK);
	assert_int_equal(u->count, 2);
	assert_string_equal(u->lines[0]->sandbox_id, s2->id);
	assert_int_equal(u->lines[0]->seconds, 250);
	assert_int_equal(u->lines[0]->cost_usd_micro, 19444);
	assert_true(u->lines[0]->running);
	assert_int_equal(u->lines[1]->seconds, 300);
	assert_int_equal(u->lines[1]->cost_usd_micro, 7500);
	assert_false(u->lines[1]->running);
	assert_int_equal(u->total_usd_micro, 7500 + 19444);
	assert_int_equal(u->total_seconds, 550);
	/* Split into two periods, the parts add up to the whole exactly. */
	assert_int_equal(saas_usage_get(&u1, f->a, t0 - 1000, t0 + 123456, 0), SAAS_OK);
	assert_int_equal(saas_usage_get(&u2, f->a, t0 + 123456, saas_test_now(), 0), SAAS_OK);
	assert_int_equal(u1->total_usd_micro + u2->total_usd_micro, u->total_usd_micro);
	assert_int_equal(u1->total_seconds + u2->total_seconds, u->total_seconds);
	saas_usage_free(u);
	saas_usage_free(u1);
	saas_usage_free(u2);
	/* The balance agrees with usage. */
	assert_int_equal(saas_test_balance(f->a), 5000000 - 7500 - 19444);
	assert_int_equal(saas_usage_get(&u, f->a, 10, 5, 0), SAAS_EINVAL);
	assert_int_equal(saas_usage_get(&u, f->a, -1, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_usage_get(&u, f->a, 0, 0, 1), SAAS_EINVAL);
	/* Other accounts see nothing of it. */
	assert_int_equal(saas_usage_get(&u, f->b, 0, 0, 0), SAAS_OK);
	assert_int_equal(u->count, 0);
	saas_usage_free(u);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

/*
 * The driver's templates in the engine's stats: each with its state, the
 * size class of its shape ("" for none) and its saved state's size (only
 * when ready), by image then shape; and none from a table older than
 * version 5, whose template_list slot is past its end.
 */
static void test_stats_templates(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_stats *st = NULL;
	saas_sandbox *sb;
	saas_driver old = saas_fake_driver;
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_engine *e2 = NULL;
	char *dir = NULL, *url = NULL;

	assert_int_equal(saas_engine_stats_get(&st, f->engine), SAAS_OK);
	assert_int_equal(st->ntemplates, 0);
	saas_engine_stats_free(st);
	saas_fake_template_set("zz", 4, 8192, 80, SAAS_TEMPLATE_BUILDING, 123);
	saas_fake_template_set("default", 3, 1000, 5, SAAS_TEMPLATE_FAILED, 0);
	sb = create(f->a, NULL, 0); /* "small" of the default image: its template, ready */
	assert_int_equal(saas_engine_stats_get(&st, f->engine), SAAS_OK);
	assert_int_equal(st->ntemplates, 3);
	assert_string_equal(st->templates[0]->image, "default");
	assert_string_equal(st->templates[0]->size, "small");
	assert_int_equal(st->templates[0]->state, SAAS_TEMPLATE_READY);
	assert_true(st->templates[0]->state_bytes == (int64_t)4096 << 20);
	assert_string_equal(st->templates[1]->image, "default");
	assert_string_equal(st->templates[1]->size, "");
	assert_int_equal(st->templates[1]->vcpus, 3);
	assert_string_equal(saas_template_state_name(st->templates[1]->state), "failed");
	assert_string_equal(st->templates[2]->image, "zz");
	assert_string_equal(st->templates[2]->size, "medium");
	assert_string_equal(saas_template_state_name(st->templates[2]->state), "building");
	assert_true(st->templates[2]->state_bytes == 0);
	assert_string_equal(saas_template_state_name(99), "unknown");
	saas_engine_stats_free(st);
	saas_sandbox_free(sb);

	/* A version 4 table ends before template_list: never read. */
	old.version = 4;
	assert_int_equal(saas_test_engine_options(&o, &old, &dir, &url), 0);
	o.flags = SAAS_ENGINE_NO_REAPER;
	assert_int_equal(saas_engine_open(&e2, &o), SAAS_OK);
	assert_int_equal(saas_engine_stats_get(&st, e2), SAAS_OK);
	assert_int_equal(st->ntemplates, 0);
	saas_engine_stats_free(st);
	saas_engine_free(e2);
	saas_test_rmdir(dir);
	free(url);
}

static void test_account_info(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_account_info *info = NULL;
	saas_sandbox *sb = create(f->a, NULL, 0);

	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_string_equal(info->id, f->account_a);
	assert_string_equal(info->name, "alice");
	assert_int_equal(info->balance_usd_micro, 5000000);
	assert_int_equal(info->active_sandboxes, 1);
	assert_int_equal(info->limits->max_sandboxes, 10);
	assert_int_equal(info->limits->default_timeout_s, 900);
	assert_int_equal(info->limits->max_timeout_s, 86400);
	assert_int_equal(info->nsizes, 3);
	assert_string_equal(info->sizes[0]->name, "small");
	assert_int_equal(info->sizes[0]->usd_micro_per_hour, 90000);
	assert_string_equal(info->sizes[1]->name, "medium");
	assert_int_equal(info->sizes[1]->usd_micro_per_hour, 280000);
	assert_int_equal(info->sizes[1]->vcpus, 4);
	assert_string_equal(info->sizes[2]->name, "large");
	assert_int_equal(info->sizes[2]->usd_micro_per_hour, 550000);
	assert_int_equal(info->sizes[2]->disk_gb, 160);
	saas_account_info_free(info);
	assert_int_equal(saas_account_info_get(NULL, f->a), SAAS_EINVAL);
	assert_int_equal(saas_account_info_get(&info, NULL), SAAS_EINVAL);
	saas_sandbox_free(sb);
}

static void test_engine_views(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_info *info = NULL;
	saas_engine_stats *stats = NULL;
	saas_sandbox *s1 = create(f->a, NULL, 0), *s2 = create(f->b, NULL, 0);
	char *url = NULL, buf[128] = "";
	int fd = -1;

	assert_int_equal(saas_engine_info_get(&info, f->engine), SAAS_OK);
	assert_int_equal(info->nsizes, 3);
	assert_string_equal(info->sizes[2]->name, "large");
	assert_int_equal(info->sizes[2]->usd_micro_per_hour, 550000);
	assert_int_equal(info->limits->max_timeout_s, 86400);
	assert_int_equal(info->new_account_credit_usd_micro, 5000000);
	assert_string_equal(info->default_image, "default");
	assert_string_equal(info->preview_url, "http://{name}.localhost:8080/");
	assert_string_equal(info->driver, "fake");
	saas_engine_info_free(info);
	assert_int_equal(saas_engine_info_get(NULL, f->engine), SAAS_EINVAL);

	assert_int_equal(saas_engine_stats_get(&stats, f->engine), SAAS_OK);
	assert_int_equal(stats->ready, 2);
	assert_int_equal(stats->creating, 0);
	assert_int_equal(stats->accounts_with_sandboxes, 2);
	saas_engine_stats_free(stats);

	/* A preview needs no key: the sandbox id and an exposed port are the capability. */
	assert_int_equal(saas_engine_port_connect(&fd, f->engine, s1->id, 3000), SAAS_ENOTFOUND);
	assert_int_equal(saas_port_expose(&url, f->a, s1->id, 3000, 0), SAAS_OK);
	saas_free(url);
	assert_int_equal(saas_engine_port_connect(&fd, f->engine, s1->id, 3000), SAAS_OK);
	assert_true(read(fd, buf, sizeof(buf) - 1) > 0);
	assert_non_null(strstr(buf, "port 3000 of "));
	close(fd);
	assert_int_equal(saas_engine_port_connect(&fd, f->engine, "sbx-nope", 3000), SAAS_ENOTFOUND);
	assert_int_equal(saas_engine_port_connect(&fd, f->engine, s1->id, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, s1->id, 0), SAAS_OK);
	assert_int_equal(saas_engine_port_connect(&fd, f->engine, s1->id, 3000), SAAS_ENOTFOUND);
	assert_int_equal(fd, -1);
	assert_int_equal(saas_engine_stats_get(&stats, f->engine), SAAS_OK);
	assert_int_equal(stats->ready, 1);
	saas_engine_stats_free(stats);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

struct race {
	saas_client *c;
	int ok, limited;
};

static void *race_main(void *arg)
{
	struct race *r = arg;

	for (int i = 0; i < 5; i++) {
		int rc = saas_sandbox_create(NULL, r->c, NULL, 0);
		if (rc == SAAS_OK)
			r->ok++;
		else if (rc == SAAS_ELIMIT)
			r->limited++;
	}
	return NULL;
}

static void test_concurrent_creates(void **state)
{
	struct saas_test_fixture *f = *state;
	struct race r[4];
	pthread_t t[4];
	int ok = 0, limited = 0;

	for (int i = 0; i < 4; i++) {
		r[i] = (struct race){ f->a, 0, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, race_main, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ok += r[i].ok;
		limited += r[i].limited;
	}
	assert_int_equal(ok, 10);
	assert_int_equal(limited, 10);
	assert_int_equal(saas_fake_vm_count(), 10);
}

/*
 * A VM that outlives its sandbox's row (its destroy failed, or is still
 * running) is left alone for a grace period, then swept.
 */
static void test_orphan_grace(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = NULL;

	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_fake_vm_add(sb->id); /* as if its destroy had failed */
	/* The orphan sweep runs every 60th sweep: 120 make sure it ran. */
	for (int i = 0; i < 120; i++)
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_true(saas_fake_vm_exists(sb->id));
	saas_test_advance(31 * 1000);
	for (int i = 0; i < 120; i++)
		assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(sb);
}

static void test_reaper_thread(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb, *got = NULL;
	int tries = 0;

	/* The real thread, on a short interval: it destroys without being asked. */
	saas_test_fixture_close(f);
	f->opts.flags = 0;
	f->opts.reaper_interval_ms = 10;
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	sb = create(f->a, NULL, 5);
	saas_test_advance(6000);
	/* The row closes first (billing stops), then the VM goes: wait for both. */
	do {
		saas_sandbox_free(got);
		assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
		if (got->status != SAAS_SANDBOX_DESTROYED || saas_fake_vm_exists(sb->id))
			usleep(5000);
	} while ((got->status != SAAS_SANDBOX_DESTROYED || saas_fake_vm_exists(sb->id)) && ++tries < 2000);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	assert_int_equal(got->cost_usd_micro, 5 * 25);
	assert_false(saas_fake_vm_exists(sb->id));
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

/* ---- tenant limits ---- */

/* Wait (on the real clock) until no execution of the account runs: background threads finish on their own time. */
static void wait_idle(saas_client *c)
{
	saas_account_info *info = NULL;
	int tries = 0;

	for (;;) {
		assert_int_equal(saas_account_info_get(&info, c), SAAS_OK);
		unsigned int running = info->running_executions;
		saas_account_info_free(info);
		if (running == 0)
			return;
		assert_true(++tries < 5000);
		usleep(2000);
	}
}

static int setup_tenant(void **state)
{
	int rc = setup_with(state, 10, SAAS_CREDIT_DEFAULT);
	struct saas_test_fixture *f = *state;

	/* Reopen with small tenant limits: two executions at once, three creates a minute, a minute's retention. */
	saas_test_fixture_close(f);
	f->opts.max_executions = 2;
	f->opts.max_transfers = 1;
	f->opts.creates_per_minute = 3;
	f->opts.execution_retention_s = 60;
	saas_test_fixture_open(f);
	return rc;
}

static void assert_limit(int rc, const char *limit)
{
	assert_int_equal(rc, SAAS_ELIMIT);
	assert_int_equal(saas_error_last()->code, SAAS_ELIMIT);
	assert_string_equal(saas_error_last()->limit, limit);
	assert_non_null(strstr(saas_error_last()->message, limit));
}

/* Executions running at once, background ones included, per account; an operator's override wins. */
static void test_max_executions(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sa = create(f->a, NULL, 0), *sb = create(f->b, NULL, 0);
	saas_limit_overrides own = SAAS_LIMIT_OVERRIDES_INIT;
	saas_execution *x1 = NULL, *x2 = NULL, *x3 = NULL;
	saas_account_info *info = NULL;

	assert_int_equal(saas_exec(&x1, f->a, sa->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	assert_int_equal(saas_exec(&x2, f->a, sa->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	/* At the bound: a third is refused, in the background or not, and nothing is recorded for it. */
	assert_limit(saas_exec(&x3, f->a, sa->id, "block", NULL, SAAS_EXEC_BACKGROUND), "max_executions");
	assert_true(saas_error_last()->retry_after_ms > 0);
	assert_null(x3);
	assert_limit(saas_exec(&x3, f->a, sa->id, "echo hi", NULL, 0), "max_executions");
	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->running_executions, 2);
	assert_int_equal(info->limits->max_executions, 2);
	saas_account_info_free(info);
	/* Another account has its own. */
	assert_int_equal(saas_exec(&x3, f->b, sb->id, "echo hi", NULL, 0), SAAS_OK);
	saas_execution_free(x3);
	x3 = NULL;

	/* An override lower than what runs refuses more, and stops nothing. */
	own.max_executions = 1;
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_OK);
	assert_limit(saas_exec(&x3, f->a, sa->id, "echo hi", NULL, 0), "max_executions");

	/* Ending them frees their places. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sa->id, 0), SAAS_OK);
	wait_idle(f->a);
	saas_sandbox_free(sa);
	sa = create(f->a, NULL, 0);
	assert_int_equal(saas_exec(&x3, f->a, sa->id, "echo again", NULL, 0), SAAS_OK);
	assert_int_equal(x3->status, SAAS_EXEC_EXITED);
	saas_execution_free(x3);
	x3 = NULL;
	/* A foreground one holds its place only while it runs: the next still fits under a limit of one. */
	assert_int_equal(saas_exec(&x3, f->a, sa->id, "echo and again", NULL, 0), SAAS_OK);

	saas_execution_free(x1);
	saas_execution_free(x2);
	saas_execution_free(x3);
	saas_sandbox_free(sa);
	saas_sandbox_free(sb);
}

/* A transfer held open by its source (a slow client, or a guest the transport waits on). */
struct held {
	saas_client *c;
	const char *id;
	int entered, release, rc;
};

static long held_reader(void *ud, void *buf, size_t cap)
{
	struct held *h = ud;

	(void)cap;
	if (__atomic_exchange_n(&h->entered, 1, __ATOMIC_SEQ_CST))
		return 0;
	while (!__atomic_load_n(&h->release, __ATOMIC_SEQ_CST))
		usleep(1000);
	memcpy(buf, "x", 1);
	return 1;
}

static void *held_main(void *arg)
{
	struct held *h = arg;

	h->rc = saas_file_write_stream(h->c, h->id, "held", held_reader, h, 1, NULL);
	return NULL;
}

/* File transfers under way at once, per account, whichever way they go. */
static void test_max_transfers(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sa = create(f->a, NULL, 0), *sb = create(f->b, NULL, 0);
	struct held h = { f->a, sa->id, 0, 0, -1 };
	void *data = NULL;
	size_t len = 0;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, held_main, &h), 0);
	while (!__atomic_load_n(&h.entered, __ATOMIC_SEQ_CST))
		usleep(1000);
	/* At the bound (one): a write and a read are refused, and told when to try again. */
	assert_limit(saas_file_write(f->a, sa->id, "x", "1", 1, NULL), "max_transfers");
	assert_true(saas_error_last()->retry_after_ms > 0);
	assert_limit(saas_file_read(&data, &len, f->a, sa->id, "held", 0), "max_transfers");
	assert_null(data);
	/* Another account has its own. */
	assert_int_equal(saas_file_write(f->b, sb->id, "x", "1", 1, NULL), SAAS_OK);
	__atomic_store_n(&h.release, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(h.rc, SAAS_OK);
	/* Its end gave the place back. */
	assert_int_equal(saas_file_read(&data, &len, f->a, sa->id, "held", 0), SAAS_OK);
	assert_int_equal(len, 1);
	saas_free(data);
	saas_sandbox_free(sa);
	saas_sandbox_free(sb);
}

/* Creates per rolling minute: a minute's worth at once, then one per 60/N seconds. */
static void test_creates_per_minute(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_limit_overrides own = SAAS_LIMIT_OVERRIDES_INIT;
	saas_sandbox *sb[4] = { NULL }, *x = NULL;

	for (int i = 0; i < 3; i++)
		sb[i] = create(f->a, NULL, 0);
	assert_limit(saas_sandbox_create(&x, f->a, NULL, 0), "creates_per_minute");
	assert_int_equal(saas_error_last()->retry_after_ms, 20000);
	assert_null(x);
	/* Nothing was made for the refused one. */
	assert_int_equal(saas_fake_create_calls(), 3);
	/* Per account. */
	x = create(f->b, NULL, 0);
	saas_sandbox_free(x);
	x = NULL;
	/* One create comes back 20 s later, not a millisecond before; polling does not lose time. */
	saas_test_advance(10000);
	assert_limit(saas_sandbox_create(&x, f->a, NULL, 0), "creates_per_minute");
	assert_int_equal(saas_error_last()->retry_after_ms, 10000);
	saas_test_advance(9999);
	assert_limit(saas_sandbox_create(&x, f->a, NULL, 0), "creates_per_minute");
	assert_int_equal(saas_error_last()->retry_after_ms, 1);
	saas_test_advance(1);
	sb[3] = create(f->a, NULL, 0);
	assert_limit(saas_sandbox_create(&x, f->a, NULL, 0), "creates_per_minute");

	/* An operator may allow more. */
	own.creates_per_minute = 60;
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_OK);
	saas_test_advance(1000);
	x = create(f->a, NULL, 0);
	saas_sandbox_free(x);
	for (int i = 0; i < 4; i++)
		saas_sandbox_free(sb[i]);
}

/* An account's own max_sandboxes replaces the engine's, and the refusal names it. */
static void test_max_sandboxes_override(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_limit_overrides own = SAAS_LIMIT_OVERRIDES_INIT, got = SAAS_LIMIT_OVERRIDES_INIT;
	saas_account_info *info = NULL;
	saas_sandbox *s1, *x = NULL;

	own.max_sandboxes = 1;
	own.requests_per_second = 7;
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_OK);
	assert_int_equal(saas_account_limits_get(&got, f->engine, f->account_a), SAAS_OK);
	assert_int_equal(got.max_sandboxes, 1);
	assert_int_equal(got.max_executions, 0);
	assert_int_equal(got.requests_per_second, 7);
	s1 = create(f->a, NULL, 0);
	assert_limit(saas_sandbox_create(&x, f->a, NULL, 0), "max_sandboxes");
	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->limits->max_sandboxes, 1);
	assert_int_equal(info->limits->requests_per_second, 7);
	assert_int_equal(info->limits->creates_per_minute, 3);
	assert_int_equal(info->limits->execution_retention_s, 60);
	saas_account_info_free(info);
	/* bob keeps the engine's. */
	assert_int_equal(saas_account_info_get(&info, f->b), SAAS_OK);
	assert_int_equal(info->limits->max_sandboxes, 10);
	assert_int_equal(info->limits->requests_per_second, SAAS_REQUESTS_PER_SECOND_DEFAULT);
	saas_account_info_free(info);

	/* Bad input. */
	own.max_sandboxes = SAAS_LIMIT_MAX + 1;
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_EINVAL);
	own.max_sandboxes = 0;
	own.version = 0;
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_EINVAL);
	own.version = SAAS_LIMIT_OVERRIDES_VERSION;
	assert_int_equal(saas_account_limits_set(f->engine, "acc-nobody", &own), SAAS_ENOTFOUND);
	assert_int_equal(saas_account_limits_get(&got, f->engine, "acc-nobody"), SAAS_ENOTFOUND);
	/* 0 puts the default back. */
	assert_int_equal(saas_account_limits_set(f->engine, f->account_a, &own), SAAS_OK);
	x = create(f->a, NULL, 0);
	saas_sandbox_free(x);
	saas_sandbox_free(s1);
}

/* Finished executions go with their output once the retention has passed; running ones stay. */
static void test_execution_retention(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, "small", 3600);
	saas_execution *done = NULL, *bg = NULL, *got = NULL;

	assert_int_equal(saas_exec(&done, f->a, sb->id, "echo kept a minute", NULL, 0), SAAS_OK);
	assert_int_equal(saas_exec(&bg, f->a, sb->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	saas_test_advance(60000);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	/* Exactly the retention: still there. */
	assert_int_equal(saas_execution_get(&got, f->a, done->id), SAAS_OK);
	assert_string_equal(got->stdout_data, "kept a minute\n");
	saas_execution_free(got);
	got = NULL;
	saas_test_advance(1);
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
	assert_int_equal(saas_execution_get(&got, f->a, done->id), SAAS_ENOTFOUND);
	assert_null(got);
	/* Running for longer than the retention: kept. */
	assert_int_equal(saas_execution_get(&got, f->a, bg->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_EXEC_RUNNING);
	saas_execution_free(got);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	wait_idle(f->a);
	saas_execution_free(done);
	saas_execution_free(bg);
	saas_sandbox_free(sb);
}

/* The calls that may grow take flags; a bit this library does not know is refused, and nothing happens. */
static void test_unknown_flags(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *got = NULL;
	saas_file_list *list = NULL;
	saas_account *acc = NULL;
	saas_key *info = NULL;
	char *url = NULL, *key = NULL;
	const unsigned int bad = 1u << 30;

	assert_int_equal(saas_sandbox_extend(&got, f->a, sb->id, 60, bad), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "flags"));
	assert_int_equal(saas_port_expose(&url, f->a, sb->id, 8000, bad), SAAS_EINVAL);
	assert_null(url);
	assert_int_equal(saas_file_list_get(&list, f->a, sb->id, NULL, 0, 0, bad), SAAS_EINVAL);
	assert_null(list);
	assert_int_equal(saas_key_create(&key, &info, f->engine, f->account_a, "k", bad), SAAS_EINVAL);
	assert_null(key);
	assert_int_equal(saas_account_add_credit(f->engine, f->account_a, SAAS_USD(1), NULL, bad), SAAS_EINVAL);
	assert_int_equal(saas_account_get(&acc, f->engine, f->account_a), SAAS_OK);
	assert_int_equal(acc->credit_usd_micro, SAAS_USD(5));
	saas_account_free(acc);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, bad), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_sandbox_free(sb);
}

/* Reopen the fixture's engine with other options; the clients are opened again on it. */
static int reopen(struct saas_test_fixture *f, const saas_engine_options *o)
{
	int rc;

	saas_test_fixture_close(f);
	if ((rc = saas_engine_open(&f->engine, o)) < 0)
		return rc;
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&f->b, f->engine, f->key_b, 0), SAAS_OK);
	return SAAS_OK;
}

/*
 * A size table without "small": a create that names no size gets the default
 * size, and the service card says which it is (the card once said "small",
 * which such an engine refused).
 */
static void test_default_size(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_size tiny = { "tiny", 1, 512, 5, 1000 }, huge = { "huge", 8, 16384, 100, 9000 };
	const saas_size *sizes[] = { &tiny, &huge };
	saas_engine_options o = f->opts;
	saas_engine_info *info = NULL;
	saas_sandbox *sb;

	/* The built-in table's default is still "small". */
	assert_int_equal(saas_engine_info_get(&info, f->engine), SAAS_OK);
	assert_string_equal(info->default_size, "small");
	saas_engine_info_free(info);

	o.sizes = sizes;
	o.nsizes = 2;
	o.default_size = "small";
	assert_int_equal(reopen(f, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "default_size 'small'"));
	o.default_size = "huge";
	assert_int_equal(reopen(f, &o), SAAS_OK);
	assert_int_equal(saas_engine_info_get(&info, f->engine), SAAS_OK);
	assert_string_equal(info->default_size, "huge");
	saas_engine_info_free(info);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	assert_string_equal(sb->size, "huge");
	assert_int_equal(sb->vcpus, 8);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_sandbox_free(sb);

	/* Unnamed, it is the table's first size. */
	o.default_size = NULL;
	assert_int_equal(reopen(f, &o), SAAS_OK);
	assert_int_equal(saas_engine_info_get(&info, f->engine), SAAS_OK);
	assert_string_equal(info->default_size, "tiny");
	saas_engine_info_free(info);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	assert_string_equal(sb->size, "tiny");
	saas_sandbox_free(sb);
}

/* A caller built against version 2 (before the tenant limits) opens with their defaults. */
static void test_options_v2(void **state)
{
	struct saas_test_fixture *f = *state;
	size_t v2 = offsetof(saas_engine_options, max_executions);
	unsigned char *old = malloc(v2); /* exactly a version-2 struct: ASan and valgrind see any read past it */
	unsigned int two = 2;
	saas_engine_info *info = NULL;
	saas_engine_options o = f->opts;

	assert_non_null(old);
	saas_test_fixture_close(f);
	memcpy(old, &o, v2);
	memcpy(old, &two, sizeof(two));
	assert_int_equal(saas_engine_open(&f->engine, (const saas_engine_options *)(void *)old), SAAS_OK);
	free(old);
	assert_int_equal(saas_engine_info_get(&info, f->engine), SAAS_OK);
	assert_int_equal(info->limits->max_executions, SAAS_MAX_EXECUTIONS_DEFAULT);
	assert_int_equal(info->limits->creates_per_minute, SAAS_CREATES_PER_MINUTE_DEFAULT);
	assert_int_equal(info->limits->requests_per_second, SAAS_REQUESTS_PER_SECOND_DEFAULT);
	assert_int_equal(info->limits->execution_retention_s, SAAS_EXECUTION_RETENTION_DEFAULT);
	saas_engine_info_free(info);
}

/*
 * A store around the engine's real one, for races and outages no real store
 * gives on demand: while `store_down` is set every sandbox write fails as a
 * full disk or a lost database makes it fail; `after_list` runs once after
 * the next listing of live sandboxes (the reaper's snapshot).
 */
static saas_store wrapped;
static const saas_store *real_store;
static int store_down;
static void (*after_list)(void);

static int refuse_write(void)
{
	return saas_sys_error_set(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 13, "test: the store cannot write");
}

static int w_insert(void *ctx, const saas_store_sandbox *sb, unsigned int max_live)
{
	return store_down ? refuse_write() : real_store->sandbox_insert(ctx, sb, max_live);
}

static int w_set_ready(void *ctx, const char *id, int64_t ready_at_ms, int64_t expires_at_ms)
{
	return store_down ? refuse_write() : real_store->sandbox_set_ready(ctx, id, ready_at_ms, expires_at_ms);
}

static int w_set_expiry(void *ctx, const char *id, int64_t expires_at_ms)
{
	return store_down ? refuse_write() : real_store->sandbox_set_expiry(ctx, id, expires_at_ms);
}

static int w_close(void *ctx, const char *id, int reason, int64_t at, int64_t cost, int64_t if_expires, int *closed)
{
	return store_down ? refuse_write() : real_store->sandbox_close(ctx, id, reason, at, cost, if_expires, closed);
}

static int w_fail_running(void *ctx, const char *id, const char *error, int64_t at_ms)
{
	return store_down ? refuse_write() : real_store->execution_fail_running(ctx, id, error, at_ms);
}

static int w_list(void *ctx, const saas_store_filter *filter, saas_store_sandbox_fn fn, void *ud)
{
	int rc = real_store->sandbox_list(ctx, filter, fn, ud);
	void (*hook)(void) = after_list;

	if (hook && filter && filter->live > 0 && !filter->account_id) {
		after_list = NULL;
		hook();
	}
	return rc;
}

static void wrap_store(struct saas_test_fixture *f)
{
	real_store = f->engine->store;
	wrapped = *real_store;
	wrapped.sandbox_insert = w_insert;
	wrapped.sandbox_set_ready = w_set_ready;
	wrapped.sandbox_set_expiry = w_set_expiry;
	wrapped.sandbox_close = w_close;
	wrapped.execution_fail_running = w_fail_running;
	wrapped.sandbox_list = w_list;
	f->engine->store = &wrapped;
	store_down = 0;
	after_list = NULL;
}

/* What the ledger has charged account a: closes recorded, not what live sandboxes accrue. */
static int64_t charged(struct saas_test_fixture *f)
{
	saas_store_account acc;

	assert_int_equal(f->engine->store->account_get(f->engine->store_ctx, f->account_a, &acc), SAAS_OK);
	return acc.charged_usd_micro;
}

static void get_row(struct saas_test_fixture *f, const char *id, saas_store_sandbox *row)
{
	assert_int_equal(f->engine->store->sandbox_get(f->engine->store_ctx, id, row), SAAS_OK);
}

/* The extend the user made lands after the reaper read the sandbox as expired. */
static struct saas_test_fixture *racing;
static char racing_id[SAAS_ID_MAX + 1];

static void extend_now(void)
{
	assert_int_equal(real_store->sandbox_set_expiry(racing->engine->store_ctx, racing_id, saas_test_now() + 600 * 1000),
	                 SAAS_OK);
}

static void test_extend_after_snapshot(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 60), *got = NULL;
	unsigned int n = 99;
	int64_t extended;

	wrap_store(f);
	racing = f;
	strcpy(racing_id, sb->id);
	saas_test_advance(61 * 1000);
	extended = saas_test_now() + 600 * 1000;
	after_list = extend_now;
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_null(after_list); /* the hook ran between the snapshot and the close */
	assert_int_equal(n, 0);
	assert_true(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	assert_int_equal(got->expires_at_ms, extended);
	saas_sandbox_free(got);
	/* Its new expiry ends it, billed to that expiry. */
	saas_test_advance(600 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	assert_false(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	assert_int_equal(got->cost_usd_micro, 661 * 25);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

/* A network the driver cannot give refuses the create and leaves nothing: no VM, no row, no count. */
static void test_create_refused_leaves_no_row(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox_list *list;
	saas_account_info *info;
	saas_sandbox *sb = NULL;

	saas_fake_refuse_internet(1);
	o.network = "internet";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "cannot be guarded"));
	assert_null(sb);
	assert_int_equal(saas_fake_vm_count(), 0);
	assert_int_equal(saas_sandbox_list_get(&list, f->a, NULL, 0, 0), SAAS_OK);
	assert_int_equal(list->count, 0);
	saas_sandbox_list_free(list);
	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->active_sandboxes, 0);
	assert_int_equal(info->spent_usd_micro, 0);
	saas_account_info_free(info);
	/* The same account's next create, with a network the host can give, is a sandbox like any. */
	o.network = "isolated";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	saas_sandbox_free(sb);
}

/*
 * A full disk. The state directory is a filesystem of its own, 8 MiB, made
 * for the test (root only) and unmounted whatever happens.
 */
#define SMALL_FS_OPTIONS "size=8m,mode=0700"
#define SMALL_FREE_MB 2

static char small_mnt[4096];
static int small_mounted;

static int teardown_small(void **state)
{
	struct saas_test_fixture *f = *state;

	saas_test_fixture_close(f);
	if (small_mounted && umount2(small_mnt, MNT_DETACH) < 0)
		print_error("umount %s: %s\n", small_mnt, strerror(errno));
	small_mounted = 0;
	return teardown(state);
}

static int64_t small_free(void)
{
	struct statvfs st;

	assert_int_equal(statvfs(small_mnt, &st), 0);
	return (int64_t)st.f_bavail * (int64_t)st.f_frsize;
}

/* Append `bytes` to the filler file; returns how many were written before the disk was full. */
static int64_t fill(int64_t bytes)
{
	static char block[4096];
	char path[4200];
	int64_t done = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/filler", small_mnt);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	while (bytes < 0 || done < bytes) {
		size_t n = bytes < 0 || bytes - done > (int64_t)sizeof(block) ? sizeof(block) : (size_t)(bytes - done);
		ssize_t w = write(fd, block, n);
		if (w <= 0)
			break;
		done += w;
	}
	close(fd);
	return done;
}

static void unfill(void)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/filler", small_mnt);
	assert_int_equal(unlink(path), 0);
}

/* The fixture's engine, accounts and keys again, on the small filesystem. */
static void open_on_small(struct saas_test_fixture *f)
{
	saas_account *acc;

	saas_test_fixture_close(f);
	saas_free(f->key_a);
	free(f->url);
	f->opts.state_dir = small_mnt;
	f->opts.min_free_mb = SMALL_FREE_MB;
	/* The SQLite file lives on the small filesystem too; PostgreSQL keeps its own disk. */
	f->url = saas_test_store_url(small_mnt);
	assert_non_null(f->url);
	f->opts.store_url = f->url;
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_account_create(&acc, f->engine, "alice", SAAS_CREDIT_DEFAULT, 0), SAAS_OK);
	strcpy(f->account_a, acc->id);
	saas_account_free(acc);
	assert_int_equal(saas_key_create(&f->key_a, NULL, f->engine, f->account_a, "a", 0), SAAS_OK);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
}

static void reopen_on_small(struct saas_test_fixture *f)
{
	saas_test_fixture_close(f);
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
}

static void test_full_disk(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1, *s2, *s3 = NULL, *got = NULL;
	saas_account_info *info;
	saas_engine_stats *stats;
	saas_store_sandbox row;
	unsigned int n = 0, calls;
	int64_t have;

	if (geteuid() != 0) {
		print_message("test_full_disk skipped: mounting a small filesystem needs root\n");
		skip();
	}
	snprintf(small_mnt, sizeof(small_mnt), "%s/small", f->dir);
	assert_int_equal(mkdir(small_mnt, 0700), 0);
	if (mount("tmpfs", small_mnt, "tmpfs", 0, SMALL_FS_OPTIONS) < 0) {
		print_message("test_full_disk skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
		skip();
	}
	small_mounted = 1;
	open_on_small(f);

	/* The threshold, at its bound: exactly SMALL_FREE_MB free is enough, a page less is not. */
	have = small_free();
	assert_true(have > (int64_t)SMALL_FREE_MB << 20);
	assert_int_equal(fill(have - ((int64_t)SMALL_FREE_MB << 20)), have - ((int64_t)SMALL_FREE_MB << 20));
	assert_int_equal(small_free(), (int64_t)SMALL_FREE_MB << 20);
	assert_int_equal(saas__engine_room(f->engine, 0), SAAS_OK);
	fill(4096);
	assert_int_equal(saas__engine_room(f->engine, 0), SAAS_EBUSY);
	unfill();

	s1 = create(f->a, NULL, 60);
	s2 = create(f->a, NULL, 600);
	assert_int_equal(saas_fake_vm_count(), 2);

	/*
	 * The tenant fills the disk. Whether a given SQLite write then fails
	 * depends on the room its WAL happens to have, and PostgreSQL is not on
	 * this disk at all: the store is made to fail its writes, as it would.
	 */
	wrap_store(f);
	fill(-1);
	store_down = 1;
	calls = saas_fake_create_calls();
	assert_int_equal(saas_sandbox_create(&s3, f->a, NULL, 0), SAAS_EBUSY);
	assert_non_null(strstr(saas_error_last()->message, "short of disk space"));
	assert_null(strstr(saas_error_last()->message, small_mnt)); /* no server path to the tenant */
	assert_int_equal(saas_fake_create_calls(), calls);

	/* Destroy: the VM goes at once, and its owner sees it ended, billed to this moment. */
	saas_test_advance(10 * 1000);
	assert_int_equal(saas_sandbox_destroy(&got, f->a, s2->id, 0), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->cost_usd_micro, 10 * 25);
	saas_sandbox_free(got);
	assert_false(saas_fake_vm_exists(s2->id));
	assert_int_equal(saas_fake_vm_count(), 1);
	get_row(f, s2->id, &row);
	assert_int_equal(row.status, SAAS_SANDBOX_READY); /* not recorded yet */
	/* ... but nowhere counted live: not in the account, not in the engine's figures. */
	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->active_sandboxes, 1);
	saas_account_info_free(info);
	assert_int_equal(saas_engine_stats_get(&stats, f->engine), SAAS_OK);
	assert_int_equal(stats->ready, 1);
	saas_engine_stats_free(stats);

	/* Space is back: the next sweep records it, once. */
	store_down = 0;
	unfill();
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	get_row(f, s2->id, &row);
	assert_int_equal(row.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(row.end_reason, SAAS_END_USER);
	assert_int_equal(row.cost_usd_micro, 10 * 25);
	assert_int_equal(charged(f), 10 * 25);

	/* Full again as s1 expires: the reaper destroys its VM all the same. */
	fill(-1);
	store_down = 1;
	saas_test_advance(100 * 1000);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(n, 1);
	assert_false(saas_fake_vm_exists(s1->id));
	assert_int_equal(saas_fake_vm_count(), 0);
	get_row(f, s1->id, &row);
	assert_int_equal(row.status, SAAS_SANDBOX_READY);

	/* The engine stops before the store recovers; the next start records the end, as it happened. */
	saas_test_fixture_close(f);
	store_down = 0;
	unfill();
	saas_test_advance(3600 * 1000);
	reopen_on_small(f);
	get_row(f, s1->id, &row);
	assert_int_equal(row.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(row.end_reason, SAAS_END_EXPIRED);
	assert_int_equal(row.cost_usd_micro, 60 * 25); /* to its expiry: not to the restart, and not lost */
	assert_int_equal(charged(f), 10 * 25 + 60 * 25);
	assert_int_equal(saas_test_balance(f->a), 5000000 - 10 * 25 - 60 * 25);
	assert_int_equal(saas_engine_sweep(&n, f->engine), SAAS_OK);
	assert_int_equal(charged(f), 10 * 25 + 60 * 25);
	/* And creates are served again. */
	s3 = create(f->a, NULL, 0);
	saas_sandbox_free(s3);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

/*
 * The disk budget: the sizes' disks of every live sandbox, creating ones
 * included, against disk_budget_gb. A create that would pass it is 503 busy
 * before any VM is made; the room comes back when a sandbox ends.
 */
static void test_disk_budget(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s1, *s2, *s3 = NULL, *got = NULL;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_engine_options bad = f->opts;
	saas_engine *e = NULL;
	unsigned int calls;

	bad.disk_budget_gb = SAAS_ENGINE_DISK_BUDGET_GB_MAX + 1;
	assert_int_equal(saas_engine_open(&e, &bad), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "disk_budget_gb 1048577 is over 1048576 (1 PiB)");

	/* small has 40 GiB of disk, medium 80: a budget of 120 holds small + medium, exactly. */
	saas_test_fixture_close(f);
	f->opts.disk_budget_gb = 120;
	saas_test_fixture_open_engine(f);
	assert_int_equal(saas_client_open_local(&f->a, f->engine, f->key_a, 0), SAAS_OK);
	s1 = create(f->a, "small", 0);
	s2 = create(f->a, "medium", 0);
	calls = saas_fake_create_calls();
	o.size = "small";
	assert_int_equal(saas_sandbox_create(&s3, f->a, &o, 0), SAAS_EBUSY);
	assert_string_equal(saas_error_last()->message,
	                    "the server's disk budget for sandboxes is spent (120 of 120 GiB held, this size needs 40 GiB); "
	                    "no new sandbox until some end; try again later or choose a smaller size");
	assert_null(s3);
	assert_int_equal(saas_fake_create_calls(), calls);

	/* One ends: its disk is free to take again. */
	assert_int_equal(saas_sandbox_destroy(&got, f->a, s1->id, 0), SAAS_OK);
	saas_sandbox_free(got);
	s3 = create(f->a, "small", 0);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
	saas_sandbox_free(s3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_bad_options),
		cmocka_unit_test_setup_teardown(test_state_dir_is_exclusive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_accounts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disable_ends_sandboxes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_templates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_people, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_network, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_failure_leaves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_started_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_started_ahead_refused, setup_limit2, teardown),
		cmocka_unit_test_setup_teardown(test_tenancy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup_limit2, teardown),
		cmocka_unit_test_setup_teardown(test_no_credit, setup_poor, teardown),
		cmocka_unit_test_setup_teardown(test_billing_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reaper_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry_while_engine_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_credit_runs_out, setup_poor, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_background, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preview_template, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_and_extend, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account_info, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_creates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_views, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reaper_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extend_after_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_refused_leaves_no_row, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown_small),
		cmocka_unit_test_setup_teardown(test_max_executions, setup_tenant, teardown),
		cmocka_unit_test_setup_teardown(test_max_transfers, setup_tenant, teardown),
		cmocka_unit_test_setup_teardown(test_creates_per_minute, setup_tenant, teardown),
		cmocka_unit_test_setup_teardown(test_max_sandboxes_override, setup_tenant, teardown),
		cmocka_unit_test_setup_teardown(test_execution_retention, setup_tenant, teardown),
		cmocka_unit_test_setup_teardown(test_options_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metadata_and_envs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metadata_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extend_from_now, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
