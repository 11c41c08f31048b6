/*
 * The store contract: every store (SQLite, PostgreSQL) must pass this suite
 * unchanged. It calls the store table directly, against the store that
 * SAAS_TEST_STORE selects (see tests/testutil.h). Each test opens a fresh,
 * empty store and closes it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <sqlite3.h>
#ifdef SAAS_WITH_POSTGRES
#include <libpq-fe.h>
#endif

#include "saas/exec.h"
#include "saas/sandbox.h"
#include "store/list.h"
#include "store/store.h"
#include "testutil.h"
#include "util/error.h"

/* ---- fixture ---- */

struct fx {
	char *dir;
	char *url;
	const saas_store *st;
	void *ctx;
	saas_store_env env;
};

static void test_log(void *userdata, int level, const char *msg)
{
	(void)userdata;
	if (getenv("SAAS_TEST_VERBOSE"))
		fprintf(stderr, "[store log %d] %s\n", level, msg);
}

static int open_store(struct fx *f, void **ctx)
{
	int rc = f->st->open(ctx, &f->env);

	if (rc != SAAS_OK)
		print_error("open %s: %s: %s\n", f->url, saas_strerror(rc), saas_error_last()->message);
	return rc;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || !(f->dir = saas_test_tmpdir()) || !(f->url = saas_test_store_url(f->dir)))
		goto fail;
	if (saas__store_for_url(&f->st, f->url) != SAAS_OK) {
		print_error("no store for %s: %s\n", f->url, saas_error_last()->message);
		goto fail;
	}
	f->env.url = f->url;
	f->env.state_dir = f->dir;
	f->env.log = test_log;
	if (open_store(f, &f->ctx) != SAAS_OK)
		goto fail;
	*state = f;
	return 0;
fail:
	if (f) {
		free(f->url);
		saas_test_rmdir(f->dir);
		free(f);
	}
	return -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->ctx)
		f->st->close(f->ctx);
	free(f->url);
	saas_test_rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ---- */

static void add_account(struct fx *f, const char *id, int64_t created, int64_t credit)
{
	saas_store_account a;

	memset(&a, 0, sizeof(a));
	snprintf(a.id, sizeof(a.id), "%s", id);
	snprintf(a.name, sizeof(a.name), "name of %s", id);
	a.created_at_ms = created;
	assert_int_equal(f->st->account_insert(f->ctx, &a, credit), SAAS_OK);
}

static saas_store_sandbox sandbox_rec(const char *id, const char *account, int64_t created)
{
	saas_store_sandbox b;

	memset(&b, 0, sizeof(b));
	snprintf(b.id, sizeof(b.id), "%s", id);
	snprintf(b.account_id, sizeof(b.account_id), "%s", account);
	b.status = SAAS_SANDBOX_CREATING;
	snprintf(b.size, sizeof(b.size), "small");
	b.vcpus = 2;
	b.memory_mb = 2048;
	b.disk_gb = 10;
	snprintf(b.image, sizeof(b.image), "debian-12");
	b.usd_micro_per_hour = 50000;
	b.created_at_ms = created;
	b.expires_at_ms = created + 3600000;
	return b;
}

static int add_sandbox(struct fx *f, const char *id, const char *account, int64_t created, unsigned int max_live)
{
	saas_store_sandbox b = sandbox_rec(id, account, created);

	return f->st->sandbox_insert(f->ctx, &b, max_live);
}

static void close_sandbox(struct fx *f, const char *id, int64_t at, int64_t cost)
{
	int closed = -1;

	assert_int_equal(f->st->sandbox_close(f->ctx, id, SAAS_END_USER, at, cost, 0, &closed), SAAS_OK);
	assert_int_equal(closed, 1);
}

static int64_t charged(struct fx *f, const char *account)
{
	saas_store_account a;

	assert_int_equal(f->st->account_get(f->ctx, account, &a), SAAS_OK);
	return a.charged_usd_micro;
}

/* Error detail must come with every failure. */
static void assert_fails(int rc, int want)
{
	assert_int_equal(rc, want);
	assert_int_equal(saas_error_last()->code, want);
	assert_true(saas_error_last()->message[0] != '\0');
}

/* Collecting lists. */
#define MAXROWS 64

struct sandboxes {
	saas_store_sandbox row[MAXROWS];
	size_t n;
	size_t stop_after; /* 0: never */
};

static int collect_sandbox(void *userdata, const saas_store_sandbox *b)
{
	struct sandboxes *c = userdata;

	assert_true(c->n < MAXROWS);
	c->row[c->n++] = *b;
	return c->stop_after && c->n >= c->stop_after;
}

static size_t list_sandboxes(struct fx *f, const saas_store_filter *flt, struct sandboxes *c)
{
	memset(c, 0, sizeof(*c));
	assert_int_equal(f->st->sandbox_list(f->ctx, flt, collect_sandbox, c), SAAS_OK);
	return c->n;
}

/* Whether the sandbox ids listed equal `want` (a NULL-terminated list, in order). */
static void assert_ids(const struct sandboxes *c, const char *const *want)
{
	size_t n = 0;

	while (want[n])
		n++;
	for (size_t i = 0; i < c->n && i < n; i++)
		assert_string_equal(c->row[i].id, want[i]);
	assert_int_equal(c->n, n);
}

/* ---- store selection by URL ---- */

static void test_url_selection(void **state)
{
	const saas_store *st = NULL;
	int rc;

	(void)state;
	rc = saas__store_for_url(&st, "postgresql://x");
#ifdef SAAS_WITH_POSTGRES
	assert_int_equal(rc, SAAS_OK);
	assert_ptr_equal(st, &saas__store_postgres);
	st = NULL;
	assert_int_equal(saas__store_for_url(&st, "postgres://x"), SAAS_OK);
	assert_ptr_equal(st, &saas__store_postgres);
#else
	assert_fails(rc, SAAS_ENOTSUP);
#endif
	st = NULL;
	assert_int_equal(saas__store_for_url(&st, "sqlite:/p"), SAAS_OK);
	assert_ptr_equal(st, &saas__store_sqlite);
	st = NULL;
	assert_int_equal(saas__store_for_url(&st, "/p"), SAAS_OK);
	assert_ptr_equal(st, &saas__store_sqlite);
	assert_string_equal(saas__sqlite_path("sqlite:/p"), "/p");
	assert_string_equal(saas__sqlite_path("/p"), "/p");
	assert_fails(saas__store_for_url(&st, "mysql://x"), SAAS_EINVAL);
	assert_fails(saas__store_for_url(&st, ""), SAAS_EINVAL);
	assert_fails(saas__store_for_url(&st, NULL), SAAS_EINVAL);
	assert_fails(saas__store_for_url(&st, "sqlite:"), SAAS_EINVAL);
	assert_int_equal(saas__store_sqlite.version, SAAS_STORE_VERSION);
	assert_string_equal(saas__store_sqlite.name, "sqlite");
}

/* ---- schema ---- */

static void test_schema_version(void **state)
{
	struct fx *f = *state;
	int v = -1;

	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	assert_int_equal(f->st->version, SAAS_STORE_VERSION);
}

static void test_reopen_keeps_data(void **state)
{
	struct fx *f = *state;
	saas_store_account a;
	saas_store_sandbox b;
	int v = -1;

	add_account(f, "acc-keep", 1000, 5000000);
	assert_int_equal(add_sandbox(f, "sbx-keep", "acc-keep", 2000, 5), SAAS_OK);
	close_sandbox(f, "sbx-keep", 3000, 1234);
	f->st->close(f->ctx);
	f->ctx = NULL;

	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	assert_int_equal(f->st->account_get(f->ctx, "acc-keep", &a), SAAS_OK);
	assert_string_equal(a.name, "name of acc-keep");
	assert_int_equal(a.credit_usd_micro, 5000000);
	assert_int_equal(a.charged_usd_micro, 1234);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-keep", &b), SAAS_OK);
	assert_int_equal(b.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(b.cost_usd_micro, 1234);
}

static void test_sqlite_newer_schema_refused(void **state)
{
	struct fx *f = *state;
	sqlite3 *db = NULL;
	void *ctx = NULL;
	int v = -1;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: editing the schema version by hand is SQLite-specific\n");
		skip();
	}
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE meta SET value = '999' WHERE key = 'schema_version'", NULL, NULL,
	                              NULL), SQLITE_OK);
	assert_int_equal(sqlite3_changes(db), 1);
	sqlite3_close(db);

	assert_fails(f->st->open(&ctx, &f->env), SAAS_ESTORE);
	assert_null(ctx);
	assert_non_null(strstr(saas_error_last()->message, "999"));

	/* Nothing was changed by the refusal. */
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	{
		sqlite3_stmt *st = NULL;

		assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st,
		                                    NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		v = atoi((const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	assert_int_equal(v, 999);
}

/*
 * A database made by schema version 1 (the step-2 objects dropped and the
 * version put back) migrates on open, keeping its rows, and gains the
 * account_limits table (and step 3's ports, made anew).
 */
/* What steps 8 (hosts, leases, MCP sessions), 7 (egress counters), 6 (pause and fork) and 5 added, dropped by the tests that rewind a database. */
#define UNDO_SCHEMA_9 \
	"DROP TABLE sandbox_values; ALTER TABLE sandboxes DROP COLUMN on_timeout;" \
	"ALTER TABLE sandboxes DROP COLUMN auto_resume; ALTER TABLE sandboxes DROP COLUMN timeout_s;"
#define UNDO_SCHEMA_8 UNDO_SCHEMA_9 \
	"DROP INDEX sandboxes_host_live; ALTER TABLE sandboxes DROP COLUMN host_id;" \
	"DROP TABLE leases; DROP TABLE hosts; DROP TABLE mcp_sessions;"
#define UNDO_SCHEMA_7 UNDO_SCHEMA_8 \
	"ALTER TABLE sandboxes DROP COLUMN denied_connections; ALTER TABLE sandboxes DROP COLUMN denied_lookups;" \
	"ALTER TABLE sandboxes DROP COLUMN denied_connections_base;" \
	"ALTER TABLE sandboxes DROP COLUMN denied_lookups_base;"
#define UNDO_SCHEMA_6 UNDO_SCHEMA_7 \
	"ALTER TABLE sandboxes DROP COLUMN paused_at; ALTER TABLE sandboxes DROP COLUMN paused_ms;" \
	"ALTER TABLE sandboxes DROP COLUMN paused_usd_micro_per_hour; ALTER TABLE sandboxes DROP COLUMN snapshot;" \
	"ALTER TABLE sandboxes DROP COLUMN parent_id;"
#define UNDO_SCHEMA_5 UNDO_SCHEMA_6 \
	"DROP TABLE sessions; DROP TABLE invites; DROP TABLE users;" \
	"ALTER TABLE accounts DROP COLUMN disabled_at; ALTER TABLE api_keys DROP COLUMN last_used_at;"

static void test_sqlite_migrates_v1(void **state)
{
	struct fx *f = *state;
	saas_store_limits l = { 1, 2, 3, 4 }, got;
	sqlite3 *db = NULL;
	int v = -1;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-old", 1, 0);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
	                              UNDO_SCHEMA_5 "DROP TABLE account_limits; DROP INDEX executions_finished;"
	                              "ALTER TABLE sandboxes DROP COLUMN network_mode;"
	                              "ALTER TABLE sandboxes DROP COLUMN network_allow;"
	                              "ALTER TABLE sandboxes DROP COLUMN network_deny;"
	                              "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	assert_int_equal(f->st->limits_set(f->ctx, "acc-old", &l, 5), SAAS_OK);
	assert_int_equal(f->st->limits_get(f->ctx, "acc-old", &got), SAAS_OK);
	assert_memory_equal(&got, &l, sizeof(l));
}

static void test_sqlite_file_private(void **state)
{
	struct fx *f = *state;
	struct stat sb;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: the database file's mode is SQLite-specific\n");
		skip();
	}
	assert_int_equal(stat(saas__sqlite_path(f->url), &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
}

/* ---- accounts and credit ---- */

static void test_account_insert_get(void **state)
{
	struct fx *f = *state;
	saas_store_account a, got;

	memset(&a, 0, sizeof(a));
	strcpy(a.id, "acc-one");
	strcpy(a.name, "One");
	a.created_at_ms = 1700000000000;
	a.credit_usd_micro = 777;   /* ignored: only the ledger counts */
	a.charged_usd_micro = 888;
	assert_int_equal(f->st->account_insert(f->ctx, &a, 0), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-one", &got), SAAS_OK);
	assert_string_equal(got.id, "acc-one");
	assert_string_equal(got.name, "One");
	assert_int_equal(got.created_at_ms, 1700000000000);
	assert_int_equal(got.credit_usd_micro, 0);
	assert_int_equal(got.charged_usd_micro, 0);

	/* With an initial credit, written atomically with it. */
	strcpy(a.id, "acc-two");
	strcpy(a.name, "Two");
	assert_int_equal(f->st->account_insert(f->ctx, &a, SAAS_USD(10)), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-two", &got), SAAS_OK);
	assert_int_equal(got.credit_usd_micro, SAAS_USD(10));
	assert_int_equal(got.charged_usd_micro, 0);

	/* A duplicate id, and its credit is not added either. */
	assert_fails(f->st->account_insert(f->ctx, &a, SAAS_USD(5)), SAAS_EEXISTS);
	assert_int_equal(f->st->account_get(f->ctx, "acc-two", &got), SAAS_OK);
	assert_int_equal(got.credit_usd_micro, SAAS_USD(10));

	assert_fails(f->st->account_get(f->ctx, "acc-none", &got), SAAS_ENOTFOUND);
}

static void test_account_name_too_long(void **state)
{
	struct fx *f = *state;
	saas_store_account a, got;

	memset(&a, 'x', sizeof(a));
	strcpy(a.id, "acc-long");
	/* name has no NUL inside its array */
	a.created_at_ms = 1;
	assert_fails(f->st->account_insert(f->ctx, &a, 0), SAAS_EINVAL);
	assert_fails(f->st->account_get(f->ctx, "acc-long", &got), SAAS_ENOTFOUND);

	/* Exactly the maximum fits and reads back whole. */
	memset(a.name, 'n', SAAS_STORE_NAME_MAX);
	a.name[SAAS_STORE_NAME_MAX] = '\0';
	memset(a.id, 'i', SAAS_ID_MAX);
	a.id[SAAS_ID_MAX] = '\0';
	assert_int_equal(f->st->account_insert(f->ctx, &a, 0), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, a.id, &got), SAAS_OK);
	assert_string_equal(got.name, a.name);
	assert_string_equal(got.id, a.id);
}

static void test_credit_add(void **state)
{
	struct fx *f = *state;
	saas_store_account got;

	add_account(f, "acc-c", 1, SAAS_USD(1));
	assert_int_equal(f->st->credit_add(f->ctx, "acc-c", 250000, "top up", 10), SAAS_OK);
	assert_int_equal(f->st->credit_add(f->ctx, "acc-c", 1, NULL, 11), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-c", &got), SAAS_OK);
	assert_int_equal(got.credit_usd_micro, SAAS_USD(1) + 250000 + 1);

	assert_fails(f->st->credit_add(f->ctx, "acc-none", 5, "x", 12), SAAS_ENOTFOUND);
	assert_fails(f->st->credit_add(f->ctx, "acc-c", 0, "x", 12), SAAS_EINVAL);
	assert_fails(f->st->credit_add(f->ctx, "acc-c", -5, "x", 12), SAAS_EINVAL);
	assert_int_equal(f->st->account_get(f->ctx, "acc-c", &got), SAAS_OK);
	assert_int_equal(got.credit_usd_micro, SAAS_USD(1) + 250000 + 1);
}

struct accounts {
	saas_store_account row[MAXROWS];
	size_t n;
	size_t stop_after;
};

static int collect_account(void *userdata, const saas_store_account *a)
{
	struct accounts *c = userdata;

	assert_true(c->n < MAXROWS);
	c->row[c->n++] = *a;
	return c->stop_after && c->n >= c->stop_after;
}

static void test_account_list_sums_and_order(void **state)
{
	struct fx *f = *state;
	struct accounts c;

	/* Inserted out of order; ties on created_at go by id. */
	add_account(f, "acc-c", 300, 0);
	add_account(f, "acc-b", 100, SAAS_USD(2));
	add_account(f, "acc-a", 300, SAAS_USD(3));
	add_account(f, "acc-d", 50, 0);
	assert_int_equal(f->st->credit_add(f->ctx, "acc-a", 500, "more", 400), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-a1", "acc-a", 500, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-a2", "acc-a", 501, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-c1", "acc-c", 502, 10), SAAS_OK);
	close_sandbox(f, "sbx-a1", 600, 1000);
	close_sandbox(f, "sbx-a2", 601, 2500);
	close_sandbox(f, "sbx-c1", 602, 7);

	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->account_list(f->ctx, collect_account, &c), SAAS_OK);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.row[0].id, "acc-d");
	assert_string_equal(c.row[1].id, "acc-b");
	assert_string_equal(c.row[2].id, "acc-a");
	assert_string_equal(c.row[3].id, "acc-c");
	assert_int_equal(c.row[0].credit_usd_micro, 0);
	assert_int_equal(c.row[0].charged_usd_micro, 0);
	assert_int_equal(c.row[1].credit_usd_micro, SAAS_USD(2));
	assert_int_equal(c.row[1].charged_usd_micro, 0);
	assert_int_equal(c.row[2].credit_usd_micro, SAAS_USD(3) + 500);
	assert_int_equal(c.row[2].charged_usd_micro, 3500);
	assert_int_equal(c.row[3].credit_usd_micro, 0);
	assert_int_equal(c.row[3].charged_usd_micro, 7);
	assert_string_equal(c.row[2].name, "name of acc-a");
	assert_int_equal(c.row[2].created_at_ms, 300);

	/* account_get agrees with the list. */
	assert_int_equal(charged(f, "acc-a"), 3500);

	/* A callback returning non-zero stops the iteration; the call still succeeds. */
	memset(&c, 0, sizeof(c));
	c.stop_after = 2;
	assert_int_equal(f->st->account_list(f->ctx, collect_account, &c), SAAS_OK);
	assert_int_equal(c.n, 2);
}

/* ---- API keys ---- */

static saas_store_key key_rec(const char *id, const char *account, char hash_char, int64_t created)
{
	saas_store_key k;

	memset(&k, 0, sizeof(k));
	snprintf(k.id, sizeof(k.id), "%s", id);
	snprintf(k.account_id, sizeof(k.account_id), "%s", account);
	snprintf(k.name, sizeof(k.name), "key %s", id);
	snprintf(k.prefix, sizeof(k.prefix), "sk-%c%c%c%c", hash_char, hash_char, hash_char, hash_char);
	memset(k.hash, hash_char, SAAS_STORE_HASH_HEX);
	k.hash[SAAS_STORE_HASH_HEX] = '\0';
	k.created_at_ms = created;
	return k;
}

struct keys {
	saas_store_key row[MAXROWS];
	size_t n;
};

static int collect_key(void *userdata, const saas_store_key *k)
{
	struct keys *c = userdata;

	assert_true(c->n < MAXROWS);
	c->row[c->n++] = *k;
	return 0;
}

static void test_keys(void **state)
{
	struct fx *f = *state;
	saas_store_key k, got;
	struct keys c;

	add_account(f, "acc-k", 1, 0);
	add_account(f, "acc-other", 1, 0);
	k = key_rec("key-b", "acc-k", 'b', 200);
	assert_int_equal(f->st->key_insert(f->ctx, &k), SAAS_OK);
	k = key_rec("key-a", "acc-k", 'a', 200); /* same time: ordered by id */
	assert_int_equal(f->st->key_insert(f->ctx, &k), SAAS_OK);
	k = key_rec("key-c", "acc-k", 'c', 100);
	assert_int_equal(f->st->key_insert(f->ctx, &k), SAAS_OK);
	k = key_rec("key-o", "acc-other", 'd', 50);
	assert_int_equal(f->st->key_insert(f->ctx, &k), SAAS_OK);

	/* Duplicate id, duplicate hash, unknown account. */
	k = key_rec("key-a", "acc-k", 'e', 300);
	assert_fails(f->st->key_insert(f->ctx, &k), SAAS_EEXISTS);
	k = key_rec("key-new", "acc-k", 'a', 300);
	assert_fails(f->st->key_insert(f->ctx, &k), SAAS_EEXISTS);
	k = key_rec("key-x", "acc-none", 'f', 300);
	assert_fails(f->st->key_insert(f->ctx, &k), SAAS_ENOTFOUND);

	/* Find by hash. */
	k = key_rec("key-a", "acc-k", 'a', 200);
	assert_int_equal(f->st->key_find(f->ctx, k.hash, &got), SAAS_OK);
	assert_string_equal(got.id, "key-a");
	assert_string_equal(got.account_id, "acc-k");
	assert_string_equal(got.name, "key key-a");
	assert_string_equal(got.prefix, "sk-aaaa");
	assert_string_equal(got.hash, k.hash);
	assert_int_equal(got.created_at_ms, 200);
	assert_int_equal(got.revoked_at_ms, 0);
	k = key_rec("key-z", "acc-k", 'z', 0);
	assert_fails(f->st->key_find(f->ctx, k.hash, &got), SAAS_ENOTFOUND);

	/* Revoke twice: the first time is kept; find still returns it. */
	assert_int_equal(f->st->key_revoke(f->ctx, "key-a", 5000), SAAS_OK);
	assert_int_equal(f->st->key_revoke(f->ctx, "key-a", 9000), SAAS_OK);
	k = key_rec("key-a", "acc-k", 'a', 200);
	assert_int_equal(f->st->key_find(f->ctx, k.hash, &got), SAAS_OK);
	assert_int_equal(got.revoked_at_ms, 5000);
	assert_fails(f->st->key_revoke(f->ctx, "key-none", 5000), SAAS_ENOTFOUND);

	/* List: this account's only, oldest first, ties by id; revoked included. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->key_list(f->ctx, "acc-k", collect_key, &c), SAAS_OK);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.row[0].id, "key-c");
	assert_string_equal(c.row[1].id, "key-a");
	assert_string_equal(c.row[2].id, "key-b");
	assert_int_equal(c.row[1].revoked_at_ms, 5000);
	assert_int_equal(c.row[2].revoked_at_ms, 0);
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->key_list(f->ctx, "acc-none", collect_key, &c), SAAS_OK);
	assert_int_equal(c.n, 0);
}

/* ---- sandboxes ---- */

static void test_sandbox_roundtrip(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox b, got;

	add_account(f, "acc-s", 1, 0);
	b = sandbox_rec("sbx-round", "acc-s", 1700000000123);
	b.vcpus = 4;
	b.memory_mb = 8192;
	b.disk_gb = 40;
	strcpy(b.size, "large");
	memset(b.image, 'i', SAAS_STORE_IMAGE_MAX); /* the longest image name */
	b.image[SAAS_STORE_IMAGE_MAX] = '\0';
	b.usd_micro_per_hour = 123456;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-round", &got), SAAS_OK);
	assert_string_equal(got.id, "sbx-round");
	assert_string_equal(got.account_id, "acc-s");
	assert_int_equal(got.status, SAAS_SANDBOX_CREATING);
	assert_int_equal(got.end_reason, SAAS_END_NONE);
	assert_string_equal(got.size, "large");
	assert_int_equal(got.vcpus, 4);
	assert_int_equal(got.memory_mb, 8192);
	assert_int_equal(got.disk_gb, 40);
	assert_string_equal(got.image, b.image);
	assert_int_equal(got.usd_micro_per_hour, 123456);
	assert_int_equal(got.created_at_ms, 1700000000123);
	assert_int_equal(got.ready_at_ms, 0);
	assert_int_equal(got.expires_at_ms, 1700000000123 + 3600000);
	assert_int_equal(got.destroyed_at_ms, 0);
	assert_int_equal(got.cost_usd_micro, 0);

	assert_fails(f->st->sandbox_get(f->ctx, "sbx-none", &got), SAAS_ENOTFOUND);

	/* Strings that do not fit are refused, never cut. */
	b = sandbox_rec("sbx-long", "acc-s", 1);
	memset(b.image, 'i', sizeof(b.image));
	assert_fails(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_EINVAL);
	b = sandbox_rec("sbx-long", "acc-s", 1);
	memset(b.size, 's', sizeof(b.size));
	assert_fails(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_EINVAL);
	assert_fails(f->st->sandbox_get(f->ctx, "sbx-long", &got), SAAS_ENOTFOUND);
}

static void test_sandbox_insert_limit(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;

	add_account(f, "acc-l", 1, 0);
	add_account(f, "acc-m", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-1", "acc-l", 10, 3), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-2", "acc-l", 11, 3), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-3", "acc-l", 12, 3), SAAS_OK);
	assert_fails(add_sandbox(f, "sbx-4", "acc-l", 13, 3), SAAS_ELIMIT);
	assert_non_null(strstr(saas_error_last()->message, "3"));
	assert_fails(f->st->sandbox_get(f->ctx, "sbx-4", &got), SAAS_ENOTFOUND);

	/* Other accounts' sandboxes do not count. */
	assert_int_equal(add_sandbox(f, "sbx-m1", "acc-m", 14, 1), SAAS_OK);
	assert_fails(add_sandbox(f, "sbx-m2", "acc-m", 15, 1), SAAS_ELIMIT);

	/* A ready one counts; a destroyed one does not. */
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-1", 20, 1000), SAAS_OK);
	assert_fails(add_sandbox(f, "sbx-4", "acc-l", 21, 3), SAAS_ELIMIT);
	close_sandbox(f, "sbx-2", 22, 0);
	assert_int_equal(add_sandbox(f, "sbx-4", "acc-l", 23, 3), SAAS_OK);
	assert_fails(add_sandbox(f, "sbx-5", "acc-l", 24, 3), SAAS_ELIMIT);

	/* A limit of 0 admits none. */
	add_account(f, "acc-zero", 1, 0);
	assert_fails(add_sandbox(f, "sbx-z", "acc-zero", 1, 0), SAAS_ELIMIT);

	/* Duplicate id; unknown account. */
	assert_fails(add_sandbox(f, "sbx-4", "acc-l", 25, 100), SAAS_EEXISTS);
	assert_fails(add_sandbox(f, "sbx-9", "acc-none", 26, 100), SAAS_ENOTFOUND);
}

static void test_sandbox_list_order_and_live(void **state)
{
	struct fx *f = *state;
	saas_store_filter flt;
	struct sandboxes c;

	add_account(f, "acc-x", 1, 0);
	add_account(f, "acc-y", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-b", "acc-x", 100, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-a", "acc-x", 100, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-c", "acc-x", 300, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-d", "acc-y", 200, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-e", "acc-x", 50, 10), SAAS_OK);
	close_sandbox(f, "sbx-a", 400, 0);
	close_sandbox(f, "sbx-d", 400, 10);

	memset(&flt, 0, sizeof(flt));
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-c", "sbx-d", "sbx-b", "sbx-a", "sbx-e", NULL });
	list_sandboxes(f, NULL, &c); /* no filter at all: the same */
	assert_ids(&c, (const char *const[]){ "sbx-c", "sbx-d", "sbx-b", "sbx-a", "sbx-e", NULL });

	flt.account_id = "acc-x";
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-c", "sbx-b", "sbx-a", "sbx-e", NULL });
	assert_string_equal(c.row[0].account_id, "acc-x");
	assert_int_equal(c.row[0].vcpus, 2);

	flt.live = 1;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-c", "sbx-b", "sbx-e", NULL });
	flt.live = -1;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-a", NULL });
	assert_int_equal(c.row[0].status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(c.row[0].end_reason, SAAS_END_USER);
	assert_int_equal(c.row[0].destroyed_at_ms, 400);

	flt.account_id = NULL;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-d", "sbx-a", NULL });
	flt.account_id = "acc-none";
	flt.live = 0;
	list_sandboxes(f, &flt, &c);
	assert_int_equal(c.n, 0);

	/* Limit; and a callback returning non-zero stops early. */
	memset(&flt, 0, sizeof(flt));
	flt.limit = 2;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-c", "sbx-d", NULL });
	flt.limit = 0;
	memset(&c, 0, sizeof(c));
	c.stop_after = 3;
	assert_int_equal(f->st->sandbox_list(f->ctx, &flt, collect_sandbox, &c), SAAS_OK);
	assert_int_equal(c.n, 3);
}

/* A sandbox that was ready from `ready` and, if `destroyed`, closed then, with expiry `expires`. */
static void ran(struct fx *f, const char *id, int64_t ready, int64_t expires, int64_t destroyed)
{
	static int64_t created = 1;

	assert_int_equal(add_sandbox(f, id, "acc-r", created++, 100), SAAS_OK);
	if (ready)
		assert_int_equal(f->st->sandbox_set_ready(f->ctx, id, ready, expires), SAAS_OK);
	if (destroyed)
		close_sandbox(f, id, destroyed, 0);
}

static void test_sandbox_list_ran_during(void **state)
{
	struct fx *f = *state;
	saas_store_filter flt;
	struct sandboxes c;

	add_account(f, "acc-r", 1, 0);
	/* window [1000, 2000) */
	ran(f, "sbx-ended-at-from", 500, 5000, 1000);      /* out: ended exactly at from */
	ran(f, "sbx-ended-after-from", 500, 5000, 1001);   /* in */
	ran(f, "sbx-ready-at-to", 2000, 5000, 0);          /* out: became ready exactly at to */
	ran(f, "sbx-ready-before-to", 1999, 5000, 0);      /* in */
	ran(f, "sbx-expired-before", 500, 900, 3000);      /* out: billing ended at min(3000, 900) */
	ran(f, "sbx-expired-inside", 500, 1200, 1500);     /* in: billed until 1200 */
	ran(f, "sbx-expired-at-from", 500, 1000, 1800);    /* out: billed until exactly from */
	ran(f, "sbx-never-ready", 0, 0, 1500);             /* out: create failed */
	ran(f, "sbx-creating", 0, 0, 0);                   /* out: not ready yet */
	ran(f, "sbx-live-overdue", 100, 500, 0);           /* in: live, not reaped yet */
	ran(f, "sbx-whole", 100, 9000, 8000);              /* in: spans the window */
	ran(f, "sbx-after", 2500, 9000, 3000);             /* out: entirely after */

	memset(&flt, 0, sizeof(flt));
	flt.ran_from_ms = 1000;
	flt.ran_to_ms = 2000;
	list_sandboxes(f, &flt, &c);
	/* Newest first = reverse insertion order here (created 1, 2, ...). */
	assert_ids(&c, (const char *const[]){ "sbx-whole", "sbx-live-overdue", "sbx-expired-inside",
	                                      "sbx-ready-before-to", "sbx-ended-after-from", NULL });

	/* Combined with the live filter. */
	flt.live = -1;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-whole", "sbx-expired-inside", "sbx-ended-after-from", NULL });
	flt.live = 1;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, (const char *const[]){ "sbx-live-overdue", "sbx-ready-before-to", NULL });
}

static int cmp_newest_first(const void *a, const void *b)
{
	const saas_store_sandbox *x = a, *y = b;

	if (x->created_at_ms != y->created_at_ms)
		return x->created_at_ms > y->created_at_ms ? -1 : 1;
	return -strcmp(x->id, y->id);
}

static void test_sandbox_list_cursor(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox want[25];
	saas_store_filter flt;
	struct sandboxes c;
	char last_id[SAAS_ID_MAX + 1];
	size_t got = 0, pages = 0;

	add_account(f, "acc-p", 1, 0);
	add_account(f, "acc-q", 1, 0);
	for (int i = 0; i < 25; i++) {
		char id[32];

		/* Ids out of step with times; created_at has ties (groups of 4). */
		snprintf(id, sizeof(id), "sbx-%02d", (i * 7) % 25);
		want[i] = sandbox_rec(id, "acc-p", 1000 + i / 4);
		assert_int_equal(f->st->sandbox_insert(f->ctx, &want[i], 1000), SAAS_OK);
	}
	assert_int_equal(add_sandbox(f, "sbx-other", "acc-q", 1003, 10), SAAS_OK);
	qsort(want, 25, sizeof(want[0]), cmp_newest_first);

	memset(&flt, 0, sizeof(flt));
	flt.account_id = "acc-p";
	flt.limit = 10;
	for (;;) {
		size_t n = list_sandboxes(f, &flt, &c);

		if (n == 0)
			break;
		pages++;
		assert_true(n <= 10);
		for (size_t i = 0; i < n; i++, got++) {
			assert_true(got < 25);
			assert_string_equal(c.row[i].id, want[got].id);
			assert_int_equal(c.row[i].created_at_ms, want[got].created_at_ms);
		}
		strcpy(last_id, c.row[n - 1].id);
		flt.before_id = last_id;
		flt.before_created_ms = c.row[n - 1].created_at_ms;
	}
	assert_int_equal(got, 25);
	assert_int_equal(pages, 3);

	/* A cursor inside a tie: created at 1003 with a smaller id, or earlier. */
	memset(&flt, 0, sizeof(flt));
	flt.before_created_ms = 1003;
	flt.before_id = "sbx-10";
	list_sandboxes(f, &flt, &c);
	for (size_t i = 0; i < c.n; i++) {
		assert_true(c.row[i].created_at_ms < 1003 ||
		            (c.row[i].created_at_ms == 1003 && strcmp(c.row[i].id, "sbx-10") < 0));
	}
	{
		size_t expect = 0;

		for (int i = 0; i < 25; i++)
			if (want[i].created_at_ms < 1003 || (want[i].created_at_ms == 1003 && strcmp(want[i].id, "sbx-10") < 0))
				expect++;
		/* sbx-other (1003, "sbx-o..." > "sbx-10") is after the cursor, so not in. */
		assert_int_equal(c.n, expect);
	}
}

static void test_sandbox_set_ready(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;

	add_account(f, "acc-r", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-r", "acc-r", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-r", 20, 5000), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-r", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_READY);
	assert_int_equal(got.ready_at_ms, 20);
	assert_int_equal(got.expires_at_ms, 5000);

	/* Only from creating: not again, not after destroy. */
	assert_fails(f->st->sandbox_set_ready(f->ctx, "sbx-r", 30, 6000), SAAS_ESTATE);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-r", &got), SAAS_OK);
	assert_int_equal(got.ready_at_ms, 20);
	assert_int_equal(got.expires_at_ms, 5000);
	assert_int_equal(add_sandbox(f, "sbx-failed", "acc-r", 11, 5), SAAS_OK);
	close_sandbox(f, "sbx-failed", 12, 0);
	assert_fails(f->st->sandbox_set_ready(f->ctx, "sbx-failed", 30, 6000), SAAS_ESTATE);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-failed", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got.ready_at_ms, 0);

	assert_fails(f->st->sandbox_set_ready(f->ctx, "sbx-none", 30, 6000), SAAS_ENOTFOUND);
}

static void test_sandbox_set_expiry(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;

	add_account(f, "acc-e", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-e", "acc-e", 10, 5), SAAS_OK);
	assert_fails(f->st->sandbox_set_expiry(f->ctx, "sbx-e", 9999), SAAS_ESTATE); /* creating */
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-e", 20, 5000), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_expiry(f->ctx, "sbx-e", 7000), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_int_equal(got.expires_at_ms, 7000);
	assert_int_equal(f->st->sandbox_set_expiry(f->ctx, "sbx-e", 6000), SAAS_OK); /* shorter is fine too */
	close_sandbox(f, "sbx-e", 100, 0);
	assert_fails(f->st->sandbox_set_expiry(f->ctx, "sbx-e", 9000), SAAS_ESTATE); /* destroyed */
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_int_equal(got.expires_at_ms, 6000);
	assert_fails(f->st->sandbox_set_expiry(f->ctx, "sbx-none", 9000), SAAS_ENOTFOUND);
}

/* Pause, resume and fork steps: conditional on the state, carrying the pause fields and the snapshot. */
static void test_sandbox_set_state(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox b = sandbox_rec("sbx-p", "acc-p", 10), to, got;

	add_account(f, "acc-p", 1, 0);
	b.paused_usd_micro_per_hour = 4400;
	snprintf(b.parent_id, sizeof(b.parent_id), "sbx-parent");
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-p", &got), SAAS_OK);
	assert_string_equal(got.parent_id, "sbx-parent");
	assert_int_equal(got.paused_usd_micro_per_hour, 4400);
	assert_string_equal(got.snapshot, "");
	to = got;
	to.status = SAAS_SANDBOX_PAUSING;
	snprintf(to.snapshot, sizeof(to.snapshot), "snap-1");
	assert_fails(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_READY, &to), SAAS_ESTATE); /* creating */
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-p", 20, 5000), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_READY, &to), SAAS_OK);
	to.status = SAAS_SANDBOX_PAUSED;
	to.paused_at_ms = 100;
	to.paused_ms = 7;
	assert_fails(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_READY, &to), SAAS_ESTATE); /* pausing now */
	assert_int_equal(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_PAUSING, &to), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-p", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_PAUSED);
	assert_int_equal(got.paused_at_ms, 100);
	assert_int_equal(got.paused_ms, 7);
	assert_string_equal(got.snapshot, "snap-1");
	assert_int_equal(got.ready_at_ms, 20); /* nothing else changes */
	/* Extend works on a paused row; not on a creating or destroyed one. */
	assert_int_equal(f->st->sandbox_set_expiry(f->ctx, "sbx-p", 9000), SAAS_OK);
	/* Paused rows are live: they count against the limit and are listed as live. */
	assert_fails(add_sandbox(f, "sbx-q", "acc-p", 11, 1), SAAS_ELIMIT);
	/* Only the four movable states; a missing row is not found. */
	to.status = SAAS_SANDBOX_DESTROYED;
	assert_fails(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_PAUSED, &to), SAAS_EINVAL);
	to.status = SAAS_SANDBOX_READY;
	assert_fails(f->st->sandbox_set_state(f->ctx, "sbx-none", SAAS_SANDBOX_PAUSED, &to), SAAS_ENOTFOUND);
	close_sandbox(f, "sbx-p", 200, 0);
	assert_fails(f->st->sandbox_set_state(f->ctx, "sbx-p", SAAS_SANDBOX_PAUSED, &to), SAAS_ESTATE);
	assert_fails(f->st->sandbox_set_expiry(f->ctx, "sbx-p", 9500), SAAS_ESTATE);
}

static void test_sandbox_close_charges_once(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;
	int closed = -1;

	add_account(f, "acc-c", 1, SAAS_USD(10));
	assert_int_equal(add_sandbox(f, "sbx-c", "acc-c", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-c", 20, 5000), SAAS_OK);
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-c", SAAS_END_EXPIRED, 5000, 4321, 0, &closed), SAAS_OK);
	assert_int_equal(closed, 1);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-c", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got.end_reason, SAAS_END_EXPIRED);
	assert_int_equal(got.destroyed_at_ms, 5000);
	assert_int_equal(got.cost_usd_micro, 4321);
	assert_int_equal(charged(f, "acc-c"), 4321);

	/* Again: nothing changes, no second charge. */
	closed = -1;
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-c", SAAS_END_USER, 6000, 9999, 0, &closed), SAAS_OK);
	assert_int_equal(closed, 0);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-c", &got), SAAS_OK);
	assert_int_equal(got.end_reason, SAAS_END_EXPIRED);
	assert_int_equal(got.destroyed_at_ms, 5000);
	assert_int_equal(got.cost_usd_micro, 4321);
	assert_int_equal(charged(f, "acc-c"), 4321);

	/* The live count dropped: the account can create again at limit 1. */
	assert_int_equal(add_sandbox(f, "sbx-c2", "acc-c", 11, 1), SAAS_OK);

	closed = -1;
	assert_fails(f->st->sandbox_close(f->ctx, "sbx-none", SAAS_END_USER, 1, 1, 0, &closed), SAAS_ENOTFOUND);
	assert_int_not_equal(closed, 1);
	assert_int_equal(charged(f, "acc-c"), 4321);
}

static void test_sandbox_close_zero_cost(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;
	int closed = -1;

	add_account(f, "acc-z", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-z", "acc-z", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-z", SAAS_END_FAILED, 15, 0, 0, &closed), SAAS_OK);
	assert_int_equal(closed, 1);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-z", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got.end_reason, SAAS_END_FAILED);
	assert_int_equal(got.destroyed_at_ms, 15);
	assert_int_equal(got.cost_usd_micro, 0);
	assert_int_equal(charged(f, "acc-z"), 0);
	closed = -1;
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-z", SAAS_END_USER, 20, 50, 0, &closed), SAAS_OK);
	assert_int_equal(closed, 0);
	assert_int_equal(charged(f, "acc-z"), 0);
}

/* A close conditional on the expiry it was decided on: an extend in between wins. */
static void test_sandbox_close_if_expiry(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;
	int closed = -1;

	add_account(f, "acc-x", 1, SAAS_USD(10));
	assert_int_equal(add_sandbox(f, "sbx-x", "acc-x", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-x", 20, 5000), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_expiry(f->ctx, "sbx-x", 9000), SAAS_OK);
	assert_fails(f->st->sandbox_close(f->ctx, "sbx-x", SAAS_END_EXPIRED, 5000, 100, 5000, &closed), SAAS_ESTATE);
	assert_int_not_equal(closed, 1);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-x", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_READY);
	assert_int_equal(got.expires_at_ms, 9000);
	assert_int_equal(charged(f, "acc-x"), 0);
	/* At the expiry it now has, it closes, once. */
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-x", SAAS_END_EXPIRED, 9000, 200, 9000, &closed), SAAS_OK);
	assert_int_equal(closed, 1);
	assert_int_equal(charged(f, "acc-x"), 200);
	closed = -1;
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-x", SAAS_END_EXPIRED, 9000, 200, 9000, &closed), SAAS_OK);
	assert_int_equal(closed, 0);
	assert_int_equal(charged(f, "acc-x"), 200);
	assert_fails(f->st->sandbox_close(f->ctx, "sbx-none", SAAS_END_USER, 1, 1, 1, &closed), SAAS_ENOTFOUND);
}

/* Only a row still creating can be deleted: the one of a create the driver refused. */
static void test_sandbox_delete(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;

	add_account(f, "acc-d", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-d1", "acc-d", 10, 1), SAAS_OK);
	assert_int_equal(f->st->sandbox_delete(f->ctx, "sbx-d1"), SAAS_OK);
	assert_fails(f->st->sandbox_get(f->ctx, "sbx-d1", &got), SAAS_ENOTFOUND);
	/* It counted no more: the account's one place is free. */
	assert_int_equal(add_sandbox(f, "sbx-d2", "acc-d", 11, 1), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-d2", 20, 5000), SAAS_OK);
	assert_fails(f->st->sandbox_delete(f->ctx, "sbx-d2"), SAAS_ESTATE);
	close_sandbox(f, "sbx-d2", 30, 0);
	assert_fails(f->st->sandbox_delete(f->ctx, "sbx-d2"), SAAS_ESTATE);
	assert_fails(f->st->sandbox_delete(f->ctx, "sbx-none"), SAAS_ENOTFOUND);
}

/* ---- executions ---- */

static saas_store_execution exec_rec(const char *id, const char *sandbox, const char *account)
{
	saas_store_execution e;

	memset(&e, 0, sizeof(e));
	snprintf(e.id, sizeof(e.id), "%s", id);
	snprintf(e.sandbox_id, sizeof(e.sandbox_id), "%s", sandbox);
	snprintf(e.account_id, sizeof(e.account_id), "%s", account);
	e.status = SAAS_EXEC_RUNNING;
	e.exit_code = -1;
	e.command = (char *)"echo 'hi' && printf '\\0'";
	e.started_at_ms = 1000;
	return e;
}

static void exec_free(saas_store_execution *e)
{
	free(e->stdout_data);
	free(e->stderr_data);
	free(e->command);
	free(e->error);
}

static void test_execution_roundtrip(void **state)
{
	struct fx *f = *state;
	saas_store_execution e, got;
	const size_t big = 1024 * 1024;
	char *out = malloc(big);
	static const char err[] = { 'e', 'r', '\0', 'r', '\n', '\0' };

	assert_non_null(out);
	for (size_t i = 0; i < big; i++)
		out[i] = (char)(i * 7 % 256); /* many NUL bytes */
	add_account(f, "acc-x", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-x", "acc-x", 10, 5), SAAS_OK);

	e = exec_rec("exe-1", "sbx-x", "acc-x");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	assert_fails(f->st->execution_insert(f->ctx, &e), SAAS_EEXISTS);

	/* Running: no output yet. */
	assert_int_equal(f->st->execution_get(f->ctx, "exe-1", &got), SAAS_OK);
	assert_string_equal(got.id, "exe-1");
	assert_string_equal(got.sandbox_id, "sbx-x");
	assert_string_equal(got.account_id, "acc-x");
	assert_int_equal(got.status, SAAS_EXEC_RUNNING);
	assert_int_equal(got.exit_code, -1);
	assert_string_equal(got.command, e.command);
	assert_int_equal(got.stdout_len, 0);
	assert_int_equal(got.stderr_len, 0);
	assert_true(!got.stdout_data || got.stdout_data[0] == '\0');
	assert_true(!got.error || got.error[0] == '\0');
	assert_int_equal(got.started_at_ms, 1000);
	assert_int_equal(got.finished_at_ms, 0);
	exec_free(&got);

	e.status = SAAS_EXEC_EXITED;
	e.exit_code = 3;
	e.stdout_data = out;
	e.stdout_len = big;
	e.stderr_data = (char *)err;
	e.stderr_len = sizeof(err);
	e.stdout_truncated = 1;
	e.stderr_truncated = 0;
	e.error = (char *)"something \xc3\xa9 odd";
	e.finished_at_ms = 2500;
	assert_int_equal(f->st->execution_finish(f->ctx, &e), SAAS_OK);

	memset(&got, 0, sizeof(got));
	assert_int_equal(f->st->execution_get(f->ctx, "exe-1", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_EXEC_EXITED);
	assert_int_equal(got.exit_code, 3);
	assert_int_equal(got.stdout_len, big);
	assert_non_null(got.stdout_data);
	assert_memory_equal(got.stdout_data, out, big);
	assert_int_equal(got.stdout_data[big], '\0');
	assert_int_equal(got.stderr_len, sizeof(err));
	assert_memory_equal(got.stderr_data, err, sizeof(err));
	assert_int_equal(got.stderr_data[sizeof(err)], '\0');
	assert_int_equal(got.stdout_truncated, 1);
	assert_int_equal(got.stderr_truncated, 0);
	assert_string_equal(got.error, "something \xc3\xa9 odd");
	assert_string_equal(got.command, e.command);
	assert_int_equal(got.started_at_ms, 1000);
	assert_int_equal(got.finished_at_ms, 2500);
	exec_free(&got);

	/* Unknown ids; an execution in an unknown sandbox. */
	assert_fails(f->st->execution_get(f->ctx, "exe-none", &got), SAAS_ENOTFOUND);
	e = exec_rec("exe-none", "sbx-x", "acc-x");
	assert_fails(f->st->execution_finish(f->ctx, &e), SAAS_ENOTFOUND);
	e = exec_rec("exe-2", "sbx-none", "acc-x");
	assert_fails(f->st->execution_insert(f->ctx, &e), SAAS_ENOTFOUND);
	free(out);
}

static void test_execution_fail_running(void **state)
{
	struct fx *f = *state;
	saas_store_execution e, got;

	add_account(f, "acc-x", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-x", "acc-x", 10, 5), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-y", "acc-x", 11, 5), SAAS_OK);
	e = exec_rec("exe-run1", "sbx-x", "acc-x");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	e = exec_rec("exe-run2", "sbx-x", "acc-x");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	e = exec_rec("exe-done", "sbx-x", "acc-x");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	e.status = SAAS_EXEC_EXITED;
	e.exit_code = 0;
	e.finished_at_ms = 1500;
	assert_int_equal(f->st->execution_finish(f->ctx, &e), SAAS_OK);
	e = exec_rec("exe-other", "sbx-y", "acc-x");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);

	assert_int_equal(f->st->execution_fail_running(f->ctx, "sbx-x", "sandbox destroyed", 3000), SAAS_OK);

	for (int i = 0; i < 2; i++) {
		assert_int_equal(f->st->execution_get(f->ctx, i ? "exe-run2" : "exe-run1", &got), SAAS_OK);
		assert_int_equal(got.status, SAAS_EXEC_FAILED);
		assert_string_equal(got.error, "sandbox destroyed");
		assert_int_equal(got.finished_at_ms, 3000);
		exec_free(&got);
	}
	assert_int_equal(f->st->execution_get(f->ctx, "exe-done", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_EXEC_EXITED);
	assert_int_equal(got.exit_code, 0);
	assert_int_equal(got.finished_at_ms, 1500);
	assert_true(!got.error || got.error[0] == '\0');
	exec_free(&got);
	assert_int_equal(f->st->execution_get(f->ctx, "exe-other", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_EXEC_RUNNING);
	assert_int_equal(got.finished_at_ms, 0);
	exec_free(&got);

	/* Nothing left running: a second call changes nothing and succeeds. */
	assert_int_equal(f->st->execution_fail_running(f->ctx, "sbx-x", "again", 4000), SAAS_OK);
	assert_int_equal(f->st->execution_get(f->ctx, "exe-run1", &got), SAAS_OK);
	assert_string_equal(got.error, "sandbox destroyed");
	assert_int_equal(got.finished_at_ms, 3000);
	exec_free(&got);
}

/* Retention: only executions that finished before the cut go, oldest batches first, up to `max`. */
static void test_execution_prune(void **state)
{
	struct fx *f = *state;
	saas_store_execution e, got;
	unsigned int pruned = 99;
	static const struct {
		const char *id;
		int64_t finished;   /* 0: still running */
	} rows[] = { { "exe-old1", 1000 }, { "exe-old2", 1999 }, { "exe-edge", 2000 }, { "exe-new", 5000 },
		     { "exe-running", 0 } };

	add_account(f, "acc-p", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-p", "acc-p", 10, 5), SAAS_OK);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		e = exec_rec(rows[i].id, "sbx-p", "acc-p");
		e.started_at_ms = 500;
		assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
		if (!rows[i].finished)
			continue;
		e.status = SAAS_EXEC_EXITED;
		e.exit_code = 0;
		e.stdout_data = (char *)"out";
		e.stdout_len = 3;
		e.finished_at_ms = rows[i].finished;
		assert_int_equal(f->st->execution_finish(f->ctx, &e), SAAS_OK);
	}

	/* At most `max` at a time: one of the two old ones. */
	assert_int_equal(f->st->execution_prune(f->ctx, 2000, 1, &pruned), SAAS_OK);
	assert_int_equal(pruned, 1);
	assert_int_equal(f->st->execution_prune(f->ctx, 2000, 100, &pruned), SAAS_OK);
	assert_int_equal(pruned, 1);
	assert_int_equal(f->st->execution_prune(f->ctx, 2000, 100, &pruned), SAAS_OK);
	assert_int_equal(pruned, 0);
	assert_fails(f->st->execution_get(f->ctx, "exe-old1", &got), SAAS_ENOTFOUND);
	assert_fails(f->st->execution_get(f->ctx, "exe-old2", &got), SAAS_ENOTFOUND);
	/* Finished exactly at the cut: kept (strictly before goes). */
	assert_int_equal(f->st->execution_get(f->ctx, "exe-edge", &got), SAAS_OK);
	exec_free(&got);

	/* A running execution is never pruned, however old its start. */
	assert_int_equal(f->st->execution_prune(f->ctx, INT64_MAX, 100, &pruned), SAAS_OK);
	assert_int_equal(pruned, 2);
	assert_int_equal(f->st->execution_get(f->ctx, "exe-running", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_EXEC_RUNNING);
	exec_free(&got);
	assert_fails(f->st->execution_get(f->ctx, "exe-new", &got), SAAS_ENOTFOUND);
}

static void test_account_limits(void **state)
{
	struct fx *f = *state;
	saas_store_limits l = { 7, 7, 7, 7 }, got;

	add_account(f, "acc-l", 1, 0);
	/* Nothing set: all zero (the engine's defaults). */
	memset(&got, 0xff, sizeof(got));
	assert_int_equal(f->st->limits_get(f->ctx, "acc-l", &got), SAAS_OK);
	assert_int_equal(got.max_sandboxes, 0);
	assert_int_equal(got.max_executions, 0);
	assert_int_equal(got.creates_per_minute, 0);
	assert_int_equal(got.requests_per_second, 0);

	l = (saas_store_limits){ 3, 2, 5, SAAS_LIMIT_MAX };
	assert_int_equal(f->st->limits_set(f->ctx, "acc-l", &l, 100), SAAS_OK);
	assert_int_equal(f->st->limits_get(f->ctx, "acc-l", &got), SAAS_OK);
	assert_memory_equal(&got, &l, sizeof(l));
	/* Setting again replaces every field. */
	l = (saas_store_limits){ 0, 4, 0, 1 };
	assert_int_equal(f->st->limits_set(f->ctx, "acc-l", &l, 200), SAAS_OK);
	assert_int_equal(f->st->limits_get(f->ctx, "acc-l", &got), SAAS_OK);
	assert_memory_equal(&got, &l, sizeof(l));

	assert_fails(f->st->limits_get(f->ctx, "acc-none", &got), SAAS_ENOTFOUND);
	assert_fails(f->st->limits_set(f->ctx, "acc-none", &l, 300), SAAS_ENOTFOUND);
	assert_fails(f->st->limits_set(f->ctx, NULL, &l, 300), SAAS_EINVAL);
}

/* ---- ports ---- */

struct ports {
	saas_store_port row[MAXROWS];
	size_t n;
};

static int collect_port(void *userdata, const saas_store_port *p)
{
	struct ports *c = userdata;

	assert_true(c->n < MAXROWS);
	c->row[c->n++] = *p;
	return 0;
}

static int expose(struct fx *f, const char *sandbox_id, unsigned int port, const char *name, int64_t at)
{
	saas_store_port p;

	memset(&p, 0, sizeof(p));
	snprintf(p.sandbox_id, sizeof(p.sandbox_id), "%s", sandbox_id);
	p.port = port;
	snprintf(p.name, sizeof(p.name), "%s", name);
	p.created_at_ms = at;
	return f->st->port_insert(f->ctx, &p);
}

static void test_ports(void **state)
{
	struct fx *f = *state;
	char longest[SAAS_STORE_PORT_NAME_MAX + 1];
	saas_store_port got, p;
	struct ports c;

	add_account(f, "acc-p", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-p", "acc-p", 10, 5), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-q", "acc-p", 11, 5), SAAS_OK);
	assert_int_equal(expose(f, "sbx-p", 8080, "name-8080", 100), SAAS_OK);
	assert_int_equal(expose(f, "sbx-p", 22, "name-22", 200), SAAS_OK);
	assert_int_equal(expose(f, "sbx-p", 65535, "name-65535", 300), SAAS_OK);
	/* Again: success, and the first row (name and time) is kept. */
	assert_int_equal(expose(f, "sbx-p", 8080, "another", 400), SAAS_OK);
	assert_int_equal(expose(f, "sbx-q", 3000, "name-3000", 500), SAAS_OK);
	/* A name is one port's only. */
	assert_fails(expose(f, "sbx-q", 3001, "name-3000", 600), SAAS_EEXISTS);
	assert_fails(expose(f, "sbx-none", 3001, "name-none", 600), SAAS_ENOTFOUND);
	/* A name is at most one DNS label long: a record whose name fills its field is refused. */
	memset(&p, 0, sizeof(p));
	snprintf(p.sandbox_id, sizeof(p.sandbox_id), "sbx-q");
	p.port = 3002;
	memset(p.name, 'a', sizeof(p.name));
	assert_fails(f->st->port_insert(f->ctx, &p), SAAS_EINVAL);
	memset(longest, 'a', SAAS_STORE_PORT_NAME_MAX);
	longest[SAAS_STORE_PORT_NAME_MAX] = '\0';
	assert_int_equal(expose(f, "sbx-q", 3002, longest, 600), SAAS_OK);

	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->port_list(f->ctx, "sbx-p", collect_port, &c), SAAS_OK);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.row[0].port, 22);
	assert_int_equal(c.row[1].port, 8080);
	assert_int_equal(c.row[2].port, 65535);
	assert_int_equal(c.row[0].created_at_ms, 200);
	assert_int_equal(c.row[1].created_at_ms, 100);
	assert_string_equal(c.row[1].name, "name-8080");
	assert_string_equal(c.row[1].sandbox_id, "sbx-p");
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->port_list(f->ctx, "sbx-none", collect_port, &c), SAAS_OK);
	assert_int_equal(c.n, 0);

	/* Found by name, the longest too. */
	assert_int_equal(f->st->port_find(f->ctx, "name-3000", &got), SAAS_OK);
	assert_string_equal(got.sandbox_id, "sbx-q");
	assert_int_equal(got.port, 3000);
	assert_int_equal(got.created_at_ms, 500);
	assert_int_equal(f->st->port_find(f->ctx, longest, &got), SAAS_OK);
	assert_int_equal(got.port, 3002);
	assert_fails(f->st->port_find(f->ctx, "another", &got), SAAS_ENOTFOUND);
	assert_null(strstr(saas_error_last()->message, "another")); /* a name is never echoed */

	/* Un-exposing forgets the port and its name; again, or a port never exposed, is success. */
	assert_int_equal(f->st->port_delete(f->ctx, "sbx-p", 8080), SAAS_OK);
	assert_int_equal(f->st->port_delete(f->ctx, "sbx-p", 8080), SAAS_OK);
	assert_int_equal(f->st->port_delete(f->ctx, "sbx-p", 4444), SAAS_OK);
	assert_fails(f->st->port_find(f->ctx, "name-8080", &got), SAAS_ENOTFOUND);
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->port_list(f->ctx, "sbx-p", collect_port, &c), SAAS_OK);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.row[0].port, 22);
	assert_int_equal(c.row[1].port, 65535);
	/* The other sandbox's ports are untouched, and the port can be exposed again under a new name. */
	assert_int_equal(f->st->port_find(f->ctx, "name-3000", &got), SAAS_OK);
	assert_int_equal(expose(f, "sbx-p", 8080, "name-8080-again", 700), SAAS_OK);
	assert_int_equal(f->st->port_find(f->ctx, "name-8080-again", &got), SAAS_OK);
	assert_int_equal(got.port, 8080);
}

/* Version 1 kept ports without names: migrating drops them (their URLs were guessable) and adds names. */
/* A sandbox's egress: its mode in the row, a policy's rules beside it, kept only while it lives. */
static void test_sandbox_network(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox b = sandbox_rec("sbx-n", "acc-n", 10), got;
	char *allow = NULL, *deny = NULL;
	int closed = 0;

	add_account(f, "acc-n", 1, 0);
	b.network_mode = 2;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-n", &got), SAAS_OK);
	assert_int_equal(got.network_mode, 2);
	assert_int_equal(f->st->sandbox_network_get(f->ctx, "sbx-n", &allow, &deny), SAAS_OK);
	assert_string_equal(allow, "");
	assert_string_equal(deny, "");
	free(allow);
	free(deny);
	assert_int_equal(f->st->sandbox_network_set(f->ctx, "sbx-n", 2, "example.com\n10.0.0.0/8", "*.ads.example"),
	                 SAAS_OK);
	assert_int_equal(f->st->sandbox_network_get(f->ctx, "sbx-n", &allow, &deny), SAAS_OK);
	assert_string_equal(allow, "example.com\n10.0.0.0/8");
	assert_string_equal(deny, "*.ads.example");
	free(allow);
	free(deny);
	assert_int_equal(f->st->sandbox_network_set(f->ctx, "sbx-n", 1, "", ""), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-n", &got), SAAS_OK);
	assert_int_equal(got.network_mode, 1);
	/* A row of unknown mode (made before schema 4) reads back as unknown. */
	b = sandbox_rec("sbx-u", "acc-n", 11);
	b.network_mode = SAAS_STORE_NETWORK_UNKNOWN;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-u", &got), SAAS_OK);
	assert_int_equal(got.network_mode, SAAS_STORE_NETWORK_UNKNOWN);

	assert_fails(f->st->sandbox_network_set(f->ctx, "sbx-none", 0, "", ""), SAAS_ENOTFOUND);
	assert_fails(f->st->sandbox_network_get(f->ctx, "sbx-none", &allow, &deny), SAAS_ENOTFOUND);
	assert_int_equal(f->st->sandbox_close(f->ctx, "sbx-n", SAAS_END_USER, 20, 0, 0, &closed), SAAS_OK);
	assert_fails(f->st->sandbox_network_set(f->ctx, "sbx-n", 0, "", ""), SAAS_ESTATE);
}

/* Egress counts: raised, never lowered; rebased; kept past the sandbox's end. */
static void test_sandbox_egress(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;

	add_account(f, "acc-e", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-e", "acc-e", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_true(got.denied_connections == 0 && got.denied_lookups == 0);
	assert_true(got.denied_connections_base == 0 && got.denied_lookups_base == 0);
	assert_int_equal(f->st->sandbox_egress_record(f->ctx, "sbx-e", 7, 3), SAAS_OK);
	/* A racing recorder with older counts lowers nothing; each count goes its own way. */
	assert_int_equal(f->st->sandbox_egress_record(f->ctx, "sbx-e", 5, 4), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_int_equal(got.denied_connections, 7);
	assert_int_equal(got.denied_lookups, 4);
	assert_int_equal(got.denied_connections_base, 0);
	assert_int_equal(f->st->sandbox_egress_rebase(f->ctx, "sbx-e"), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_int_equal(got.denied_connections_base, 7);
	assert_int_equal(got.denied_lookups_base, 4);
	assert_int_equal(got.denied_connections, 7);
	/* A destroyed sandbox keeps its counts, and its last ones are still taken. */
	close_sandbox(f, "sbx-e", 20, 0);
	assert_int_equal(f->st->sandbox_egress_record(f->ctx, "sbx-e", 9, 4), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-e", &got), SAAS_OK);
	assert_int_equal(got.denied_connections, 9);
	assert_int_equal(got.status, SAAS_SANDBOX_DESTROYED);

	assert_fails(f->st->sandbox_egress_record(f->ctx, "sbx-none", 1, 1), SAAS_ENOTFOUND);
	assert_fails(f->st->sandbox_egress_rebase(f->ctx, "sbx-none"), SAAS_ENOTFOUND);
	assert_fails(f->st->sandbox_egress_record(f->ctx, NULL, 1, 1), SAAS_EINVAL);
}

/* Schema 5 -> 6: rows made before read as having refused nothing. */
static void test_sqlite_migrates_egress(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;
	sqlite3 *db = NULL;
	int v = -1;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-g", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-g", "acc-g", 10, 5), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_6 "UPDATE meta SET value = '5' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-g", &got), SAAS_OK);
	assert_int_equal(got.denied_connections, 0);
	assert_int_equal(f->st->sandbox_egress_record(f->ctx, "sbx-g", 2, 1), SAAS_OK);
}

/* Schema 3 -> 4: rows made before keep working, their network unknown. */
static void test_sqlite_migrates_network(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got;
	char *allow = NULL, *deny = NULL;
	sqlite3 *db = NULL;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-m", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-m", "acc-m", 10, 5), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_5 "ALTER TABLE sandboxes DROP COLUMN network_mode;"
	                                  "ALTER TABLE sandboxes DROP COLUMN network_allow;"
	                                  "ALTER TABLE sandboxes DROP COLUMN network_deny;"
	                                  "UPDATE meta SET value = '3' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-m", &got), SAAS_OK);
	assert_int_equal(got.network_mode, SAAS_STORE_NETWORK_UNKNOWN);
	assert_int_equal(f->st->sandbox_network_get(f->ctx, "sbx-m", &allow, &deny), SAAS_OK);
	assert_string_equal(allow, "");
	free(allow);
	free(deny);
}

static void test_sqlite_migrates_ports_to_names(void **state)
{
	struct fx *f = *state;
	sqlite3 *db = NULL;
	saas_store_port got;
	struct ports c;
	int v = -1;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-m", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-m", "acc-m", 10, 5), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	/* Back to version 1: its ports table, with an exposure in it, and no step-2 objects. */
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_5 "DROP TABLE account_limits; DROP INDEX executions_finished;"
	                                  "DROP TABLE ports;"
	                                  "CREATE TABLE ports (sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	                                  "  port INT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (sandbox_id, port));"
	                                  "INSERT INTO ports VALUES ('sbx-m', 8080, 100);"
	                                  "ALTER TABLE sandboxes DROP COLUMN network_mode;"
	                                  "ALTER TABLE sandboxes DROP COLUMN network_allow;"
	                                  "ALTER TABLE sandboxes DROP COLUMN network_deny;"
	                                  "UPDATE meta SET value = '1' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->port_list(f->ctx, "sbx-m", collect_port, &c), SAAS_OK);
	assert_int_equal(c.n, 0);
	assert_int_equal(expose(f, "sbx-m", 8080, "fresh-name", 200), SAAS_OK);
	assert_int_equal(f->st->port_find(f->ctx, "fresh-name", &got), SAAS_OK);
	assert_int_equal(got.port, 8080);
}

/* ---- callbacks may call the store (the reaper closes what it lists) ---- */

struct reenter {
	struct fx *f;
	int calls;
	int rc;
};

static int close_each(void *userdata, const saas_store_sandbox *b)
{
	struct reenter *r = userdata;
	saas_store_account a;
	int closed = 0;

	r->calls++;
	if (r->rc == SAAS_OK)
		r->rc = r->f->st->sandbox_close(r->f->ctx, b->id, SAAS_END_EXPIRED, 9000, 100, 0, &closed);
	if (r->rc == SAAS_OK)
		r->rc = r->f->st->account_get(r->f->ctx, b->account_id, &a);
	return 0;
}

/* ---- people: users, sessions, invites, disabled accounts, key use ---- */

static saas_store_user user_rec(const char *id, const char *account, const char *email, int64_t created)
{
	saas_store_user u;

	memset(&u, 0, sizeof(u));
	snprintf(u.id, sizeof(u.id), "%s", id);
	snprintf(u.account_id, sizeof(u.account_id), "%s", account);
	snprintf(u.email, sizeof(u.email), "%s", email);
	snprintf(u.password_hash, sizeof(u.password_hash), "$argon2id$v=19$m=65536,t=2,p=1$%s", id);
	u.created_at_ms = created;
	return u;
}

static void hash_of(char out[65], char c)
{
	memset(out, c, 64);
	out[64] = '\0';
}

struct users {
	saas_store_user row[MAXROWS];
	size_t n;
};

static int collect_user(void *userdata, const saas_store_user *u)
{
	struct users *c = userdata;

	assert_true(c->n < MAXROWS);
	c->row[c->n++] = *u;
	return 0;
}

static void test_users(void **state)
{
	struct fx *f = *state;
	saas_store_user u, got;
	saas_store_account acc, a2;
	struct users c;
	char inv[65], inv2[65];

	/* With a new account and its credit, all at once. */
	memset(&acc, 0, sizeof(acc));
	snprintf(acc.id, sizeof(acc.id), "acc-u");
	snprintf(acc.name, sizeof(acc.name), "a@example.org");
	acc.created_at_ms = 10;
	u = user_rec("usr-a", "acc-u", "a@example.org", 10);
	u.is_operator = 1;
	assert_int_equal(f->st->user_insert(f->ctx, &u, &acc, 5000000, NULL), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-u", &a2), SAAS_OK);
	assert_int_equal(a2.credit_usd_micro, 5000000);
	assert_int_equal(a2.disabled_at_ms, 0);
	assert_int_equal(f->st->user_find(f->ctx, "a@example.org", &got), SAAS_OK);
	assert_string_equal(got.id, "usr-a");
	assert_string_equal(got.account_id, "acc-u");
	assert_string_equal(got.password_hash, u.password_hash);
	assert_int_equal(got.is_operator, 1);
	assert_int_equal(got.created_at_ms, 10);
	assert_fails(f->st->user_find(f->ctx, "nobody@example.org", &got), SAAS_ENOTFOUND);

	/* A taken e-mail: nothing is made, the new account included. */
	snprintf(acc.id, sizeof(acc.id), "acc-dup");
	u = user_rec("usr-dup", "acc-dup", "a@example.org", 20);
	assert_fails(f->st->user_insert(f->ctx, &u, &acc, 1000, NULL), SAAS_EEXISTS);
	assert_fails(f->st->account_get(f->ctx, "acc-dup", &a2), SAAS_ENOTFOUND);
	/* Bound to an existing account, or to none that exists. */
	u = user_rec("usr-b", "acc-u", "b@example.org", 30);
	assert_int_equal(f->st->user_insert(f->ctx, &u, NULL, 0, NULL), SAAS_OK);
	u = user_rec("usr-c", "acc-none", "c@example.org", 40);
	assert_fails(f->st->user_insert(f->ctx, &u, NULL, 0, NULL), SAAS_ENOTFOUND);

	/* Invites: unknown refused (and nothing made), each used once. */
	hash_of(inv, 'a');
	hash_of(inv2, 'b');
	assert_int_equal(f->st->invite_insert(f->ctx, inv, 50), SAAS_OK);
	assert_fails(f->st->invite_insert(f->ctx, inv, 60), SAAS_EEXISTS);
	snprintf(acc.id, sizeof(acc.id), "acc-i");
	u = user_rec("usr-i", "acc-i", "i@example.org", 70);
	assert_fails(f->st->user_insert(f->ctx, &u, &acc, 0, inv2), SAAS_ENOTFOUND);
	assert_fails(f->st->account_get(f->ctx, "acc-i", &a2), SAAS_ENOTFOUND);
	assert_int_equal(f->st->user_insert(f->ctx, &u, &acc, 0, inv), SAAS_OK);
	snprintf(acc.id, sizeof(acc.id), "acc-j");
	u = user_rec("usr-j", "acc-j", "j@example.org", 80);
	assert_fails(f->st->user_insert(f->ctx, &u, &acc, 0, inv), SAAS_ENOTFOUND);

	/* List, oldest first. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->user_list(f->ctx, collect_user, &c), SAAS_OK);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.row[0].id, "usr-a");
	assert_string_equal(c.row[1].id, "usr-b");
	assert_string_equal(c.row[2].id, "usr-i");

	/* Update: operator only, then the password. */
	assert_int_equal(f->st->user_update(f->ctx, "usr-b", NULL, 1), SAAS_OK);
	assert_int_equal(f->st->user_find(f->ctx, "b@example.org", &got), SAAS_OK);
	assert_int_equal(got.is_operator, 1);
	assert_string_equal(got.password_hash, "$argon2id$v=19$m=65536,t=2,p=1$usr-b");
	assert_int_equal(f->st->user_update(f->ctx, "usr-b", "$argon2id$new", -1), SAAS_OK);
	assert_int_equal(f->st->user_find(f->ctx, "b@example.org", &got), SAAS_OK);
	assert_string_equal(got.password_hash, "$argon2id$new");
	assert_int_equal(got.is_operator, 1);
	assert_fails(f->st->user_update(f->ctx, "usr-none", NULL, 0), SAAS_ENOTFOUND);
}

static void add_session(struct fx *f, char c, const char *user, int64_t at)
{
	saas_store_session s;

	memset(&s, 0, sizeof(s));
	hash_of(s.hash, c);
	snprintf(s.user.id, sizeof(s.user.id), "%s", user);
	s.created_at_ms = s.last_seen_at_ms = at;
	assert_int_equal(f->st->session_insert(f->ctx, &s), SAAS_OK);
}

static void test_sessions(void **state)
{
	struct fx *f = *state;
	saas_store_session s, got;
	saas_store_user u;
	saas_store_account a;
	char h[65];

	add_account(f, "acc-s", 1, 0);
	add_account(f, "acc-t", 1, 0);
	u = user_rec("usr-s", "acc-s", "s@example.org", 1);
	assert_int_equal(f->st->user_insert(f->ctx, &u, NULL, 0, NULL), SAAS_OK);
	u = user_rec("usr-t", "acc-t", "t@example.org", 1);
	assert_int_equal(f->st->user_insert(f->ctx, &u, NULL, 0, NULL), SAAS_OK);

	add_session(f, '1', "usr-s", 100);
	add_session(f, '2', "usr-s", 200);
	add_session(f, '3', "usr-t", 300);
	memset(&s, 0, sizeof(s));
	hash_of(s.hash, '9');
	snprintf(s.user.id, sizeof(s.user.id), "usr-none");
	assert_fails(f->st->session_insert(f->ctx, &s), SAAS_ENOTFOUND);

	/* Found with its user; touched only forward. */
	hash_of(h, '1');
	assert_int_equal(f->st->session_find(f->ctx, h, &got), SAAS_OK);
	assert_string_equal(got.user.id, "usr-s");
	assert_string_equal(got.user.email, "s@example.org");
	assert_string_equal(got.user.account_id, "acc-s");
	assert_int_equal(got.created_at_ms, 100);
	assert_int_equal(got.last_seen_at_ms, 100);
	assert_int_equal(f->st->session_touch(f->ctx, h, 500), SAAS_OK);
	assert_int_equal(f->st->session_touch(f->ctx, h, 400), SAAS_OK);
	assert_int_equal(f->st->session_find(f->ctx, h, &got), SAAS_OK);
	assert_int_equal(got.last_seen_at_ms, 500);
	hash_of(h, '8');
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	assert_int_equal(f->st->session_touch(f->ctx, h, 500), SAAS_OK);
	assert_int_equal(f->st->session_delete(f->ctx, h), SAAS_OK);

	/* A new password ends the user's sessions, only theirs. */
	assert_int_equal(f->st->user_update(f->ctx, "usr-s", "$argon2id$other", -1), SAAS_OK);
	hash_of(h, '1');
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	hash_of(h, '2');
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	hash_of(h, '3');
	assert_int_equal(f->st->session_find(f->ctx, h, &got), SAAS_OK);

	/* Disabling an account ends its sessions; enabling keeps the users. */
	add_session(f, '4', "usr-s", 600);
	assert_int_equal(f->st->account_disable(f->ctx, "acc-t", 700), SAAS_OK);
	assert_int_equal(f->st->account_disable(f->ctx, "acc-t", 900), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-t", &a), SAAS_OK);
	assert_int_equal(a.disabled_at_ms, 700);
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	assert_int_equal(f->st->user_find(f->ctx, "t@example.org", &u), SAAS_OK);
	assert_int_equal(u.disabled_at_ms, 700);
	hash_of(h, '4');
	assert_int_equal(f->st->session_find(f->ctx, h, &got), SAAS_OK);
	assert_int_equal(f->st->account_disable(f->ctx, "acc-t", 0), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-t", &a), SAAS_OK);
	assert_int_equal(a.disabled_at_ms, 0);
	assert_fails(f->st->account_disable(f->ctx, "acc-none", 5), SAAS_ENOTFOUND);

	/* Prune by age and by idleness; delete one. */
	add_session(f, '5', "usr-t", 1000);
	add_session(f, '6', "usr-t", 2000);
	hash_of(h, '6');
	assert_int_equal(f->st->session_touch(f->ctx, h, 5000), SAAS_OK);
	assert_int_equal(f->st->session_prune(f->ctx, 1500, 1200), SAAS_OK);
	hash_of(h, '4');
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	hash_of(h, '5');
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
	hash_of(h, '6');
	assert_int_equal(f->st->session_find(f->ctx, h, &got), SAAS_OK);
	assert_int_equal(f->st->session_delete(f->ctx, h), SAAS_OK);
	assert_fails(f->st->session_find(f->ctx, h, &got), SAAS_ENOTFOUND);
}

static void test_key_use_and_disabled(void **state)
{
	struct fx *f = *state;
	saas_store_key k, got;
	struct keys c;

	add_account(f, "acc-l", 1, 0);
	k = key_rec("key-l", "acc-l", 'l', 100);
	assert_int_equal(f->st->key_insert(f->ctx, &k), SAAS_OK);
	assert_int_equal(f->st->key_find(f->ctx, k.hash, &got), SAAS_OK);
	assert_int_equal(got.last_used_at_ms, 0);
	assert_int_equal(got.account_disabled_at_ms, 0);
	assert_int_equal(f->st->key_touch(f->ctx, k.hash, 300), SAAS_OK);
	assert_int_equal(f->st->key_touch(f->ctx, k.hash, 200), SAAS_OK); /* only forward */
	assert_int_equal(f->st->account_disable(f->ctx, "acc-l", 400), SAAS_OK);
	assert_int_equal(f->st->key_find(f->ctx, k.hash, &got), SAAS_OK);
	assert_int_equal(got.last_used_at_ms, 300);
	assert_int_equal(got.account_disabled_at_ms, 400);
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->key_list(f->ctx, "acc-l", collect_key, &c), SAAS_OK);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.row[0].last_used_at_ms, 300);
	assert_int_equal(f->st->key_touch(f->ctx, "0000000000000000000000000000000000000000000000000000000000000000", 1),
	                 SAAS_OK);
}

/* A database of schema 5 gets the pause and fork columns, its sandboxes read as never paused. */
static void test_sqlite_migrates_pause(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox got, to;
	sqlite3 *db = NULL;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-m", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-m", "acc-m", 10, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-m", 20, 5000), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_6 "UPDATE meta SET value = '5' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-m", &got), SAAS_OK);
	assert_int_equal(got.status, SAAS_SANDBOX_READY);
	assert_int_equal(got.paused_at_ms, 0);
	assert_int_equal(got.paused_usd_micro_per_hour, 0);
	assert_string_equal(got.snapshot, "");
	assert_string_equal(got.parent_id, "");
	to = got;
	to.status = SAAS_SANDBOX_PAUSING;
	assert_int_equal(f->st->sandbox_set_state(f->ctx, "sbx-m", SAAS_SANDBOX_READY, &to), SAAS_OK);
}

/* A database of schema 4 gets the people's tables and columns, its rows kept. */
static void test_sqlite_migrates_people(void **state)
{
	struct fx *f = *state;
	saas_store_account a;
	saas_store_user u;
	sqlite3 *db = NULL;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-p", 1, 0);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_5 "UPDATE meta SET value = '4' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->account_get(f->ctx, "acc-p", &a), SAAS_OK);
	assert_int_equal(a.disabled_at_ms, 0);
	u = user_rec("usr-p", "acc-p", "p@example.org", 2);
	assert_int_equal(f->st->user_insert(f->ctx, &u, NULL, 0, NULL), SAAS_OK);
}

struct exec_seen {
	char ids[8][SAAS_ID_MAX + 1];
	int status[8];
	char command[8][64];
	char error[8][32];
	int stop_after; /* 0: never */
	int n;
};

static int see_execution(void *ud, const saas_store_execution *e)
{
	struct exec_seen *s = ud;

	assert_true(s->n < 8);
	snprintf(s->ids[s->n], sizeof(s->ids[s->n]), "%s", e->id);
	s->status[s->n] = e->status;
	snprintf(s->command[s->n], sizeof(s->command[s->n]), "%s", e->command ? e->command : "(null)");
	snprintf(s->error[s->n], sizeof(s->error[s->n]), "%s", e->error ? e->error : "");
	/* The list carries no output, whatever was kept. */
	assert_null(e->stdout_data);
	assert_int_equal(e->stdout_len, 0);
	s->n++;
	return s->stop_after && s->n >= s->stop_after;
}

/* A sandbox's history: newest first, ties by id, a page at a time from a cursor, no other sandbox's. */
static void test_execution_list(void **state)
{
	struct fx *f = *state;
	saas_store_execution e;
	struct exec_seen s;
	static const struct {
		const char *id, *sandbox;
		int64_t started;
		int status; /* running: left so */
	} rows[] = { { "exe-a", "sbx-h", 100, SAAS_EXEC_EXITED },   { "exe-b", "sbx-h", 200, SAAS_EXEC_FAILED },
		     { "exe-c", "sbx-h", 200, SAAS_EXEC_RUNNING },  { "exe-d", "sbx-h", 300, SAAS_EXEC_TIMEDOUT },
		     { "exe-o", "sbx-o", 400, SAAS_EXEC_EXITED } };

	add_account(f, "acc-h", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-h", "acc-h", 10, 5), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-o", "acc-h", 11, 5), SAAS_OK);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		e = exec_rec(rows[i].id, rows[i].sandbox, "acc-h");
		e.started_at_ms = rows[i].started;
		assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
		if (rows[i].status == SAAS_EXEC_RUNNING)
			continue;
		e.status = rows[i].status;
		e.exit_code = rows[i].status == SAAS_EXEC_EXITED ? 0 : -1;
		e.stdout_data = (char *)"out";
		e.stdout_len = 3;
		e.error = rows[i].status == SAAS_EXEC_FAILED ? (char *)"boom" : NULL;
		e.finished_at_ms = rows[i].started + 50;
		assert_int_equal(f->st->execution_finish(f->ctx, &e), SAAS_OK);
	}

	memset(&s, 0, sizeof(s));
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-h", 0, NULL, 0, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.ids[0], "exe-d");
	assert_string_equal(s.ids[1], "exe-c"); /* same start as exe-b: the greater id first */
	assert_string_equal(s.ids[2], "exe-b");
	assert_string_equal(s.ids[3], "exe-a");
	assert_int_equal(s.status[0], SAAS_EXEC_TIMEDOUT);
	assert_int_equal(s.status[1], SAAS_EXEC_RUNNING);
	assert_string_equal(s.error[2], "boom");
	assert_string_equal(s.command[3], "echo 'hi' && printf '\\0'");

	/* A page, then the next from its last item: nothing skipped, nothing twice. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-h", 0, NULL, 2, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.ids[1], "exe-c");
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-h", 200, "exe-c", 2, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.ids[0], "exe-b");
	assert_string_equal(s.ids[1], "exe-a");
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-h", 100, "exe-a", 2, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 0);

	/* The callback stops the list; a sandbox with none (or unknown) lists none. */
	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-h", 0, NULL, 0, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->st->execution_list(f->ctx, "sbx-nosuch", 0, NULL, 0, see_execution, &s), SAAS_OK);
	assert_int_equal(s.n, 0);
	assert_fails(f->st->execution_list(f->ctx, NULL, 0, NULL, 0, see_execution, &s), SAAS_EINVAL);
}

static void test_callback_may_call_store(void **state)
{
	struct fx *f = *state;
	struct reenter r = { f, 0, SAAS_OK };
	saas_store_filter flt;

	add_account(f, "acc-re", 1, 0);
	for (int i = 0; i < 5; i++) {
		char id[16];

		snprintf(id, sizeof(id), "sbx-re%d", i);
		assert_int_equal(add_sandbox(f, id, "acc-re", 10 + i, 10), SAAS_OK);
	}
	memset(&flt, 0, sizeof(flt));
	flt.live = 1;
	assert_int_equal(f->st->sandbox_list(f->ctx, &flt, close_each, &r), SAAS_OK);
	assert_int_equal(r.rc, SAAS_OK);
	assert_int_equal(r.calls, 5);
	assert_int_equal(charged(f, "acc-re"), 500);
}

/* ---- version 6: hosts of sandboxes, leases, VM hosts, placement, MCP sessions ---- */

/* A sandbox's host comes back from every read, and the fields around it are not shifted. */
static void test_sandbox_host_id(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox b, got;
	saas_store_filter flt;
	struct sandboxes c;

	add_account(f, "acc-h", 1, 0);
	b = sandbox_rec("sbx-on-h1", "acc-h", 10);
	strcpy(b.host_id, "host-1");
	strcpy(b.parent_id, "sbx-parent");
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-local", "acc-h", 20, 5), SAAS_OK);
	assert_int_equal(f->st->sandbox_egress_record(f->ctx, "sbx-on-h1", 7, 3), SAAS_OK);
	assert_int_equal(f->st->sandbox_egress_rebase(f->ctx, "sbx-on-h1"), SAAS_OK);

	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-on-h1", &got), SAAS_OK);
	assert_string_equal(got.host_id, "host-1");
	assert_string_equal(got.parent_id, "sbx-parent");
	assert_int_equal(got.denied_lookups, 3);
	assert_int_equal(got.denied_lookups_base, 3);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-local", &got), SAAS_OK);
	assert_string_equal(got.host_id, "");

	memset(&flt, 0, sizeof(flt));
	flt.host_id = "host-1";
	assert_int_equal(list_sandboxes(f, &flt, &c), 1);
	assert_string_equal(c.row[0].host_id, "host-1");
	assert_int_equal(c.row[0].denied_connections_base, 7);
	flt.host_id = "";
	assert_int_equal(list_sandboxes(f, &flt, &c), 1);
	assert_string_equal(c.row[0].id, "sbx-local");
	flt.host_id = NULL;
	assert_int_equal(list_sandboxes(f, &flt, &c), 2);
	flt.host_id = "host-none";
	assert_int_equal(list_sandboxes(f, &flt, &c), 0);

	b = sandbox_rec("sbx-long-host", "acc-h", 30);
	memset(b.host_id, 'h', sizeof(b.host_id));
	assert_fails(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_EINVAL);
}

static int lease_holder(struct fx *f, const char *name, char *holder, int64_t *until)
{
	return f->st->lease_get(f->ctx, name, holder, until);
}

static void test_leases(void **state)
{
	struct fx *f = *state;
	char holder[SAAS_STORE_HOLDER_MAX + 1], long_name[SAAS_STORE_LEASE_NAME_MAX + 2];
	int64_t until = 0;
	int held = -1;

	assert_fails(lease_holder(f, "reaper", holder, &until), SAAS_ENOTFOUND);
	/* A free lease goes to the first taker. */
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-a", 1000, 500, &held), SAAS_OK);
	assert_int_equal(held, 1);
	assert_int_equal(lease_holder(f, "reaper", holder, &until), SAAS_OK);
	assert_string_equal(holder, "srv-a");
	assert_int_equal(until, 1500);
	/* Refused to another holder while it runs, up to the last millisecond. */
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-b", 1200, 500, &held), SAAS_OK);
	assert_int_equal(held, 0);
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-b", 1499, 500, &held), SAAS_OK);
	assert_int_equal(held, 0);
	assert_int_equal(lease_holder(f, "reaper", holder, &until), SAAS_OK);
	assert_string_equal(holder, "srv-a");
	assert_int_equal(until, 1500);
	/* Its holder renews it. */
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-a", 1400, 500, &held), SAAS_OK);
	assert_int_equal(held, 1);
	assert_int_equal(lease_holder(f, "reaper", holder, &until), SAAS_OK);
	assert_int_equal(until, 1900);
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-b", 1600, 500, &held), SAAS_OK);
	assert_int_equal(held, 0);
	/* Run out: the other gets it, and the first is refused in turn. */
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-b", 1900, 500, &held), SAAS_OK);
	assert_int_equal(held, 1);
	assert_int_equal(lease_holder(f, "reaper", holder, &until), SAAS_OK);
	assert_string_equal(holder, "srv-b");
	assert_int_equal(until, 2400);
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-a", 2000, 500, &held), SAAS_OK);
	assert_int_equal(held, 0);
	/* Leases are independent of each other. */
	assert_int_equal(f->st->lease_take(f->ctx, "host:h1", "srv-a", 2000, 500, &held), SAAS_OK);
	assert_int_equal(held, 1);

	/* Only the holder releases; someone else's release changes nothing. */
	assert_int_equal(f->st->lease_release(f->ctx, "reaper", "srv-a"), SAAS_OK);
	assert_int_equal(lease_holder(f, "reaper", holder, &until), SAAS_OK);
	assert_string_equal(holder, "srv-b");
	assert_int_equal(f->st->lease_release(f->ctx, "reaper", "srv-b"), SAAS_OK);
	assert_fails(lease_holder(f, "reaper", holder, &until), SAAS_ENOTFOUND);
	assert_int_equal(f->st->lease_release(f->ctx, "reaper", "srv-b"), SAAS_OK);
	/* Released early: free for anyone at once. */
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv-a", 2001, 500, &held), SAAS_OK);
	assert_int_equal(held, 1);

	/* Bounds. */
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_fails(f->st->lease_take(f->ctx, long_name, "srv-a", 1, 1, &held), SAAS_EINVAL);
	long_name[sizeof(long_name) - 2] = '\0'; /* the longest name */
	assert_int_equal(f->st->lease_take(f->ctx, long_name, "srv-a", 1, 1, &held), SAAS_OK);
	assert_int_equal(held, 1);
	assert_fails(f->st->lease_take(f->ctx, "reaper", "", 1, 1, &held), SAAS_EINVAL);
	assert_fails(f->st->lease_take(f->ctx, "reaper", "srv-a", 1, 0, &held), SAAS_EINVAL);
	assert_fails(f->st->lease_take(f->ctx, "reaper", "srv-a", INT64_MAX, 1, &held), SAAS_EINVAL);
	assert_fails(f->st->lease_take(f->ctx, NULL, "srv-a", 1, 1, &held), SAAS_EINVAL);
}

/*
 * The dead leases go: run out before the time given, but never a "netset:"
 * request of a sandbox that lives (a request until answered, run out or
 * not); and a request of a sandbox destroyed, or of none, whatever its time.
 */
static void test_lease_purge(void **state)
{
	struct fx *f = *state;
	saas_store_sandbox paused;
	char holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t until;
	unsigned int purged = 99;
	int held = 0;
	static const char *const kept[] = { "server:srv-live", "exec:exe-recent", "netset:sbx-live", "netset:sbx-paused",
		                            "netset:sbx-creating", "netset:sbx-live-fresh", "netsetx:sbx-none-fresh" };
	static const char *const gone[] = { "server:srv-dead", "exec:exe-old", "egress:sbx-gone", "netsetx:sbx-none",
		                            "netset:sbx-ended", "netset:sbx-ended-fresh", "netset:sbx-none",
		                            "netset:", "netset:sbx-live-but-longer" };

	add_account(f, "acc-l", 1, SAAS_USD(10));
	assert_int_equal(add_sandbox(f, "sbx-live", "acc-l", 10, 10), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-live", 20, 999999), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-live-fresh", "acc-l", 10, 10), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-live-fresh", 20, 999999), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-creating", "acc-l", 10, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-paused", "acc-l", 10, 10), SAAS_OK);
	assert_int_equal(f->st->sandbox_set_ready(f->ctx, "sbx-paused", 20, 999999), SAAS_OK);
	memset(&paused, 0, sizeof(paused));
	paused.status = SAAS_SANDBOX_PAUSED;
	paused.paused_at_ms = 30;
	assert_int_equal(f->st->sandbox_set_state(f->ctx, "sbx-paused", SAAS_SANDBOX_READY, &paused), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-ended", "acc-l", 10, 10), SAAS_OK);
	close_sandbox(f, "sbx-ended", 40, 0);
	assert_int_equal(add_sandbox(f, "sbx-ended-fresh", "acc-l", 10, 10), SAAS_OK);
	close_sandbox(f, "sbx-ended-fresh", 40, 0);

	/* Run out long ago (until 1100), or lately (until 5000); the purge takes those before 2000. */
	for (size_t i = 0; i < (sizeof(kept) / sizeof(kept[0])); i++) {
		int64_t t = strstr(kept[i], "recent") || strstr(kept[i], "fresh") || strstr(kept[i], "srv-live") ? 4500 : 1000;
		assert_int_equal(f->st->lease_take(f->ctx, kept[i], "srv-x", t, 500, &held), SAAS_OK);
		assert_int_equal(held, 1);
	}
	for (size_t i = 0; i < (sizeof(gone) / sizeof(gone[0])); i++) {
		int64_t t = strstr(gone[i], "fresh") ? 4500 : 1000;
		assert_int_equal(f->st->lease_take(f->ctx, gone[i], "srv-x", t, 500, &held), SAAS_OK);
		assert_int_equal(held, 1);
	}
	assert_fails(f->st->lease_purge(f->ctx, 2000, 100, NULL), SAAS_EINVAL);
	/* A batch at a time: 2, then the rest. */
	assert_int_equal(f->st->lease_purge(f->ctx, 2000, 2, &purged), SAAS_OK);
	assert_int_equal(purged, 2);
	assert_int_equal(f->st->lease_purge(f->ctx, 2000, 100, &purged), SAAS_OK);
	assert_int_equal(purged, (sizeof(gone) / sizeof(gone[0])) - 2);
	for (size_t i = 0; i < (sizeof(gone) / sizeof(gone[0])); i++)
		if (lease_holder(f, gone[i], holder, &until) != SAAS_ENOTFOUND)
			fail_msg("lease %s was not purged", gone[i]);
	for (size_t i = 0; i < (sizeof(kept) / sizeof(kept[0])); i++)
		if (lease_holder(f, kept[i], holder, &until) != SAAS_OK)
			fail_msg("lease %s was purged: %s", kept[i], saas_error_last()->message);
	assert_int_equal(f->st->lease_purge(f->ctx, 2000, 100, &purged), SAAS_OK);
	assert_int_equal(purged, 0);
	/* The live sandbox's request goes with the sandbox. */
	close_sandbox(f, "sbx-live", 50, 0);
	assert_int_equal(f->st->lease_purge(f->ctx, 2000, 100, &purged), SAAS_OK);
	assert_int_equal(purged, 1);
	assert_fails(lease_holder(f, "netset:sbx-live", holder, &until), SAAS_ENOTFOUND);
}

static saas_store_host host_rec(const char *id, unsigned int cpus, uint64_t memory_mb, int64_t seen)
{
	saas_store_host h;

	memset(&h, 0, sizeof(h));
	snprintf(h.id, sizeof(h.id), "%s", id);
	snprintf(h.name, sizeof(h.name), "name-%s", id);
	snprintf(h.uri, sizeof(h.uri), "qemu+tls://%s.example/system", id);
	snprintf(h.address, sizeof(h.address), "192.0.2.1");
	h.state = SAAS_STORE_HOST_ACTIVE;
	h.cpu_overcommit_milli = 1000;
	h.mem_overcommit_milli = 1000;
	h.cpus = cpus;
	h.memory_mb = memory_mb;
	h.created_at_ms = 100;
	h.last_seen_ms = seen;
	return h;
}

static void add_host(struct fx *f, const char *id, unsigned int cpus, uint64_t memory_mb, int64_t seen)
{
	saas_store_host h = host_rec(id, cpus, memory_mb, seen);

	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
}

struct hosts {
	saas_store_host row[8];
	size_t n;
};

static int collect_host(void *userdata, const saas_store_host *h)
{
	struct hosts *c = userdata;

	assert_true(c->n < 8);
	c->row[c->n++] = *h;
	return 0;
}

static void test_hosts(void **state)
{
	struct fx *f = *state;
	saas_store_host h, got;
	struct hosts c;

	h = host_rec("h1", 16, 65536, 500);
	h.cpu_overcommit_milli = 4000;
	h.mem_overcommit_milli = 1500;
	memset(h.uri, 'u', SAAS_STORE_URI_MAX); /* the longest URI */
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	assert_int_equal(f->st->host_get(f->ctx, "h1", &got), SAAS_OK);
	assert_string_equal(got.id, "h1");
	assert_string_equal(got.name, "name-h1");
	assert_string_equal(got.uri, h.uri);
	assert_string_equal(got.address, "192.0.2.1");
	assert_int_equal(got.state, SAAS_STORE_HOST_ACTIVE);
	assert_int_equal(got.cpu_overcommit_milli, 4000);
	assert_int_equal(got.mem_overcommit_milli, 1500);
	assert_int_equal(got.cpus, 16);
	assert_int_equal(got.memory_mb, 65536);
	assert_int_equal(got.created_at_ms, 100);
	assert_int_equal(got.last_seen_ms, 500);
	assert_int_equal(got.state_at_ms, 0);
	/* By name too. */
	memset(&got, 0, sizeof(got));
	assert_int_equal(f->st->host_get(f->ctx, "name-h1", &got), SAAS_OK);
	assert_string_equal(got.id, "h1");
	assert_fails(f->st->host_get(f->ctx, "h9", &got), SAAS_ENOTFOUND);

	/* Duplicates of id or name. */
	h = host_rec("h1", 1, 1, 0);
	strcpy(h.name, "other");
	assert_fails(f->st->host_insert(f->ctx, &h), SAAS_EEXISTS);
	h = host_rec("h2", 1, 1, 0);
	strcpy(h.name, "name-h1");
	assert_fails(f->st->host_insert(f->ctx, &h), SAAS_EEXISTS);
	/* Bad records are refused. */
	h = host_rec("h2", 1, 1, 0);
	h.state = 7;
	assert_fails(f->st->host_insert(f->ctx, &h), SAAS_EINVAL);
	h = host_rec("h2", 1, 1, 0);
	h.mem_overcommit_milli = 0;
	assert_fails(f->st->host_insert(f->ctx, &h), SAAS_EINVAL);
	h = host_rec("h2", 1, 1, 0);
	memset(h.name, 'n', sizeof(h.name));
	assert_fails(f->st->host_insert(f->ctx, &h), SAAS_EINVAL);

	h = host_rec("h0", 2, 2048, 0);
	h.created_at_ms = 200;
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	memset(&c, 0, sizeof(c));
	assert_int_equal(f->st->host_list(f->ctx, collect_host, &c), SAAS_OK);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.row[0].id, "h1"); /* oldest first */
	assert_string_equal(c.row[1].id, "h0");
	assert_int_equal(c.row[1].memory_mb, 2048);

	/* State moves only from the state the caller saw. */
	assert_int_equal(f->st->host_set_state(f->ctx, "h1", SAAS_STORE_HOST_ACTIVE, SAAS_STORE_HOST_DRAINING, 600),
	                 SAAS_OK);
	assert_fails(f->st->host_set_state(f->ctx, "h1", SAAS_STORE_HOST_ACTIVE, SAAS_STORE_HOST_LOST, 700),
	             SAAS_ESTATE);
	assert_int_equal(f->st->host_get(f->ctx, "h1", &got), SAAS_OK);
	assert_int_equal(got.state, SAAS_STORE_HOST_DRAINING);
	assert_int_equal(got.state_at_ms, 600);
	assert_int_equal(f->st->host_set_state(f->ctx, "h1", -1, SAAS_STORE_HOST_ACTIVE, 800), SAAS_OK);
	assert_fails(f->st->host_set_state(f->ctx, "h9", -1, SAAS_STORE_HOST_ACTIVE, 800), SAAS_ENOTFOUND);
	assert_fails(f->st->host_set_state(f->ctx, "h1", -1, 3, 800), SAAS_EINVAL);

	/* Heartbeats: capacity as reported; last seen never goes back. */
	assert_int_equal(f->st->host_seen(f->ctx, "h1", 900, 32, 131072), SAAS_OK);
	assert_int_equal(f->st->host_seen(f->ctx, "h1", 850, 32, 131072), SAAS_OK);
	assert_int_equal(f->st->host_get(f->ctx, "h1", &got), SAAS_OK);
	assert_int_equal(got.last_seen_ms, 900);
	assert_int_equal(got.cpus, 32);
	assert_int_equal(got.memory_mb, 131072);
	assert_int_equal(got.state, SAAS_STORE_HOST_ACTIVE); /* unchanged by a heartbeat */
	assert_fails(f->st->host_seen(f->ctx, "h9", 900, 1, 1), SAAS_ENOTFOUND);

	/* A host with a sandbox not destroyed on it is not forgotten. */
	add_account(f, "acc-hd", 1, 0);
	{
		saas_store_sandbox b = sandbox_rec("sbx-hd", "acc-hd", 10);

		strcpy(b.host_id, "h1");
		assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	}
	assert_fails(f->st->host_delete(f->ctx, "h1"), SAAS_EBUSY);
	assert_int_equal(f->st->host_get(f->ctx, "h1", &got), SAAS_OK);
	close_sandbox(f, "sbx-hd", 20, 0);
	assert_int_equal(f->st->host_delete(f->ctx, "h1"), SAAS_OK);
	assert_fails(f->st->host_get(f->ctx, "h1", &got), SAAS_ENOTFOUND);
	assert_fails(f->st->host_delete(f->ctx, "h1"), SAAS_ENOTFOUND);
	/* Its name is free again. */
	add_host(f, "h3", 1, 1, 0);
	h = host_rec("h4", 1, 1, 0);
	strcpy(h.name, "name-h1");
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
}

static int place(struct fx *f, void *ctx, const char *id, const char *account, unsigned int vcpus,
                 unsigned int memory_mb, int64_t seen_after, unsigned int max_live, char *host_out)
{
	saas_store_sandbox b = sandbox_rec(id, account, 10);
	saas_store_placement p = { seen_after, max_live, NULL };
	int rc;

	b.vcpus = vcpus;
	b.memory_mb = memory_mb;
	rc = f->st->sandbox_place(ctx, &b, &p);
	if (host_out)
		strcpy(host_out, rc == SAAS_OK ? b.host_id : "");
	return rc;
}

static void test_sandbox_place(void **state)
{
	struct fx *f = *state;
	char host[SAAS_ID_MAX + 1];
	saas_store_sandbox got;
	saas_store_host h;

	add_account(f, "acc-p", 1, 0);
	/* No host at all. */
	assert_fails(place(f, f->ctx, "sbx-p0", "acc-p", 1, 512, 0, 10, host), SAAS_EBUSY);
	assert_fails(f->st->sandbox_get(f->ctx, "sbx-p0", &got), SAAS_ENOTFOUND);

	add_host(f, "big", 4, 8192, 1000);
	add_host(f, "small", 4, 4096, 1000);
	h = host_rec("drained", 64, 1 << 20, 1000);
	h.state = SAAS_STORE_HOST_DRAINING;
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	h = host_rec("lost", 64, 1 << 20, 1000);
	h.state = SAAS_STORE_HOST_LOST;
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	add_host(f, "unseen", 64, 1 << 20, 999);   /* seen before seen_after */
	add_host(f, "never", 0, 0, 0);

	/* The most memory left wins, and the row says so. */
	assert_int_equal(place(f, f->ctx, "sbx-p1", "acc-p", 1, 4096, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "big");
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-p1", &got), SAAS_OK);
	assert_string_equal(got.host_id, "big");
	assert_int_equal(got.memory_mb, 4096);
	/* Now both have 4096 left: a tie goes to the smaller id. */
	assert_int_equal(place(f, f->ctx, "sbx-p2", "acc-p", 1, 1024, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "big");
	assert_int_equal(place(f, f->ctx, "sbx-p3", "acc-p", 1, 2048, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "small");
	/* big: 3072 MiB and 2 vCPUs left; small: 2048 and 3. */
	assert_fails(place(f, f->ctx, "sbx-p4", "acc-p", 1, 4096, 1000, 10, host), SAAS_EBUSY);
	assert_fails(place(f, f->ctx, "sbx-p4", "acc-p", 4, 512, 1000, 10, host), SAAS_EBUSY);
	assert_int_equal(place(f, f->ctx, "sbx-p4", "acc-p", 3, 2048, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "small"); /* big has the memory but not the vCPUs */
	assert_int_equal(place(f, f->ctx, "sbx-p5", "acc-p", 2, 3072, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "big"); /* exactly full */
	assert_fails(place(f, f->ctx, "sbx-p6", "acc-p", 1, 1, 1000, 10, host), SAAS_EBUSY);
	/* The hosts that were skipped take them when they are the ones seen lately. */
	assert_int_equal(place(f, f->ctx, "sbx-p6", "acc-p", 1, 1, 999, 10, host), SAAS_OK);
	assert_string_equal(host, "unseen");

	/* A destroyed sandbox frees its room. */
	close_sandbox(f, "sbx-p5", 20, 0);
	assert_int_equal(place(f, f->ctx, "sbx-p7", "acc-p", 2, 3072, 1000, 10, host), SAAS_OK);
	assert_string_equal(host, "big");

	/* Overcommit: 2 CPUs x 1.5 take 3 vCPUs, not 4. */
	h = host_rec("over", 2, 1024, 2000);
	h.cpu_overcommit_milli = 1500;
	h.mem_overcommit_milli = 2000;
	assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	assert_int_equal(place(f, f->ctx, "sbx-o1", "acc-p", 2, 1024, 2000, 10, host), SAAS_OK);
	assert_string_equal(host, "over");
	assert_fails(place(f, f->ctx, "sbx-o2", "acc-p", 2, 1, 2000, 10, host), SAAS_EBUSY);
	assert_int_equal(place(f, f->ctx, "sbx-o2", "acc-p", 1, 1024, 2000, 10, host), SAAS_OK);
	assert_fails(place(f, f->ctx, "sbx-o3", "acc-p", 0, 1, 2000, 10, host), SAAS_EBUSY);

	/* On one given host only (a fork's child beside its parent's snapshot), or not at all. */
	{
		saas_store_placement on = { 1000, 100, "small" };
		saas_store_sandbox b = sandbox_rec("sbx-on", "acc-p", 10);

		b.vcpus = 1;
		b.memory_mb = 1;
		/* small is full: big has room but is not the one asked for. */
		assert_fails(f->st->sandbox_place(f->ctx, &b, &on), SAAS_EBUSY);
		on.host_id = "drained";
		assert_fails(f->st->sandbox_place(f->ctx, &b, &on), SAAS_EBUSY);
		on.host_id = "unseen";
		assert_fails(f->st->sandbox_place(f->ctx, &b, &on), SAAS_EBUSY);
		on.seen_after_ms = 999;
		assert_int_equal(f->st->sandbox_place(f->ctx, &b, &on), SAAS_OK);
		assert_string_equal(b.host_id, "unseen");
		/* "" is any host: the one with the most memory left among those seen since 999. */
		b = sandbox_rec("sbx-on2", "acc-p", 10);
		on.host_id = "";
		assert_int_equal(f->st->sandbox_place(f->ctx, &b, &on), SAAS_OK);
		assert_string_equal(b.host_id, "unseen");
		close_sandbox(f, "sbx-on", 30, 0);
		close_sandbox(f, "sbx-on2", 30, 0);
	}

	/* The account's limit counts every live sandbox, wherever it runs. */
	assert_fails(place(f, f->ctx, "sbx-l1", "acc-p", 1, 1, 0, 8, host), SAAS_ELIMIT);
	assert_fails(place(f, f->ctx, "sbx-l1", "acc-none", 1, 1, 0, 8, host), SAAS_ENOTFOUND);
	/* A duplicate id is refused and nothing is placed. */
	assert_fails(place(f, f->ctx, "sbx-p1", "acc-p", 1, 1, 0, 100, host), SAAS_EEXISTS);
	assert_fails(f->st->sandbox_place(f->ctx, NULL, &(saas_store_placement){ 0, 1, NULL }), SAAS_EINVAL);
}

static void test_mcp_sessions(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], version[SAAS_STORE_MCP_VERSION_MAX + 1];

	hash_of(a, 'a');
	hash_of(b, 'b');
	assert_int_equal(f->st->mcp_session_insert(f->ctx, a, "2025-06-18", 1000, 0), SAAS_OK);
	assert_fails(f->st->mcp_session_insert(f->ctx, a, "2025-06-18", 1000, 0), SAAS_EEXISTS);
	assert_int_equal(f->st->mcp_session_insert(f->ctx, b, "2025-03-26", 1000, 0), SAAS_OK);

	/* Used within its idle time: its version comes back and its clock restarts. */
	memset(version, 0, sizeof(version));
	assert_int_equal(f->st->mcp_session_touch(f->ctx, a, 1500, 1000, version), SAAS_OK);
	assert_string_equal(version, "2025-06-18");
	assert_int_equal(f->st->mcp_session_touch(f->ctx, a, 2000, 1500, version), SAAS_OK);
	/* An older use does not move it back. */
	assert_int_equal(f->st->mcp_session_touch(f->ctx, a, 1800, 1500, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, a, 2100, 2000, version), SAAS_OK);
	/* Idle since before the cut: gone, as if it never was. */
	assert_fails(f->st->mcp_session_touch(f->ctx, b, 2100, 1001, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, b, 2100, 1000, version), SAAS_OK);
	assert_string_equal(version, "2025-03-26");

	/* Pruning takes those idle before the cut and leaves the rest. */
	assert_int_equal(f->st->mcp_session_insert(f->ctx, "c", "2025-06-18", 100, 0), SAAS_OK);
	assert_int_equal(f->st->mcp_session_prune(f->ctx, 2100), SAAS_OK);
	assert_fails(f->st->mcp_session_touch(f->ctx, "c", 2200, 0, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, a, 2200, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, b, 2200, 0, version), SAAS_OK);

	assert_int_equal(f->st->mcp_session_delete(f->ctx, a), SAAS_OK);
	assert_fails(f->st->mcp_session_touch(f->ctx, a, 2300, 0, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_delete(f->ctx, a), SAAS_OK);

	/* Bounds: the version must fit the caller's buffer. */
	assert_fails(f->st->mcp_session_insert(f->ctx, "d", "0123456789abcdefX", 1, 0), SAAS_EINVAL);
	assert_fails(f->st->mcp_session_insert(f->ctx, NULL, "v", 1, 0), SAAS_EINVAL);
}

/* The cap: a new session past `max` ends the least recently used ones, never itself. */
static void test_mcp_sessions_cap(void **state)
{
	struct fx *f = *state;
	char h[5][65], version[SAAS_STORE_MCP_VERSION_MAX + 1];

	for (int i = 0; i < 5; i++)
		hash_of(h[i], (char)('a' + i));
	for (int i = 0; i < 3; i++)
		assert_int_equal(f->st->mcp_session_insert(f->ctx, h[i], "2025-06-18", 1000 + i, 3), SAAS_OK);
	/* The oldest is used again: now the second is the least recently used. */
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[0], 1010, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_insert(f->ctx, h[3], "2025-06-18", 1020, 3), SAAS_OK);
	assert_fails(f->st->mcp_session_touch(f->ctx, h[1], 1030, 0, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[0], 1030, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[2], 1031, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[3], 1032, 0, version), SAAS_OK);
	/* A new session whose clock is behind every other still stays: the others make room. */
	assert_int_equal(f->st->mcp_session_insert(f->ctx, h[4], "2025-03-26", 1, 3), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[4], 1040, 0, version), SAAS_OK);
	assert_string_equal(version, "2025-03-26");
	assert_fails(f->st->mcp_session_touch(f->ctx, h[0], 1041, 0, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[2], 1042, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[3], 1043, 0, version), SAAS_OK);
	/* A cap of one keeps only the new one; a refused duplicate ends nothing. */
	assert_fails(f->st->mcp_session_insert(f->ctx, h[2], "2025-06-18", 1050, 1), SAAS_EEXISTS);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[3], 1051, 0, version), SAAS_OK);
	assert_int_equal(f->st->mcp_session_delete(f->ctx, h[4]), SAAS_OK);
	assert_int_equal(f->st->mcp_session_insert(f->ctx, h[4], "2025-06-18", 1060, 1), SAAS_OK);
	assert_fails(f->st->mcp_session_touch(f->ctx, h[2], 1061, 0, version), SAAS_ENOTFOUND);
	assert_fails(f->st->mcp_session_touch(f->ctx, h[3], 1061, 0, version), SAAS_ENOTFOUND);
	assert_int_equal(f->st->mcp_session_touch(f->ctx, h[4], 1061, 0, version), SAAS_OK);
}

/* Schema 7 -> 8: rows made before run on the engine's own driver; the new tables work. */
static void test_sqlite_migrates_hosts(void **state)
{
	struct fx *f = *state;
	char host[SAAS_ID_MAX + 1];
	saas_store_sandbox got;
	sqlite3 *db = NULL;
	int v = -1, held = 0;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-v7", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-v7", "acc-v7", 10, 5), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_8 "UPDATE meta SET value = '7' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &v), SAAS_OK);
	assert_int_equal(v, SAAS_STORE_SCHEMA);
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-v7", &got), SAAS_OK);
	assert_string_equal(got.host_id, "");
	assert_int_equal(got.expires_at_ms, 10 + 3600000);
	assert_int_equal(f->st->lease_take(f->ctx, "reaper", "srv", 1, 1, &held), SAAS_OK);
	assert_int_equal(held, 1);
	add_host(f, "h-v8", 2, 2048, 5);
	assert_int_equal(place(f, f->ctx, "sbx-v8", "acc-v7", 1, 1024, 5, 5, host), SAAS_OK);
	assert_string_equal(host, "h-v8");
	assert_int_equal(f->st->mcp_session_insert(f->ctx, "m", "2025-06-18", 1, 0), SAAS_OK);
}

/* ---- sandbox values: metadata and default environment (version 7) ---- */

struct values_seen {
	char text[4096];
	int stop_after; /* 0: never */
	int n;
};

static int collect_values(void *ud, int kind, const char *key, const char *value)
{
	struct values_seen *v = ud;
	size_t len = strlen(v->text);

	snprintf(v->text + len, sizeof(v->text) - len, "%s%d:%s=%s", len ? "," : "", kind, key, value);
	return v->stop_after && ++v->n >= v->stop_after;
}

static const char *values_of(struct fx *f, const char *id, struct values_seen *v)
{
	memset(v, 0, sizeof(*v));
	assert_int_equal(f->st->sandbox_values(f->ctx, id, collect_values, v), SAAS_OK);
	return v->text;
}

/* ---- listings into arrays (store/list.h), over the table's callback slots ---- */

static void test_list_arrays(void **state)
{
	struct fx *f = *state;
	saas_store_account *accounts = NULL;
	saas_store_sandbox *sandboxes = NULL;
	saas_store_execution *execs = NULL, e;
	saas_store_key *keys = NULL;
	saas_store_filter flt;
	size_t n = 99;

	/* None: success, no array. */
	assert_int_equal(saas__store_accounts(f->st, f->ctx, &accounts, &n), SAAS_OK);
	assert_null(accounts);
	assert_int_equal(n, 0);

	add_account(f, "acc-b", 100, 0);
	add_account(f, "acc-a", 200, 0);
	assert_int_equal(add_sandbox(f, "sbx-1", "acc-a", 300, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-2", "acc-a", 301, 10), SAAS_OK);
	assert_int_equal(add_sandbox(f, "sbx-3", "acc-b", 302, 10), SAAS_OK);

	/* The rows, in the listing's order. */
	assert_int_equal(saas__store_accounts(f->st, f->ctx, &accounts, &n), SAAS_OK);
	assert_int_equal(n, 2);
	assert_string_equal(accounts[0].id, "acc-b");
	assert_string_equal(accounts[1].id, "acc-a");
	free(accounts);
	memset(&flt, 0, sizeof(flt));
	flt.account_id = "acc-a";
	assert_int_equal(saas__store_sandboxes(f->st, f->ctx, &flt, &sandboxes, &n), SAAS_OK);
	assert_int_equal(n, 2);
	assert_string_equal(sandboxes[0].id, "sbx-2");
	assert_string_equal(sandboxes[1].id, "sbx-1");
	free(sandboxes);

	/* An execution's strings outlive the store's callback: they are copies. */
	e = exec_rec("exe-1", "sbx-1", "acc-a");
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	e = exec_rec("exe-2", "sbx-1", "acc-a");
	e.started_at_ms = 2000;
	assert_int_equal(f->st->execution_insert(f->ctx, &e), SAAS_OK);
	assert_int_equal(saas__store_executions(f->st, f->ctx, "sbx-1", 0, NULL, 0, &execs, &n), SAAS_OK);
	assert_int_equal(n, 2);
	assert_string_equal(execs[0].id, "exe-2");
	assert_string_equal(execs[1].id, "exe-1");
	assert_string_equal(execs[1].command, "echo 'hi' && printf '\\0'");
	assert_null(execs[1].stdout_data);
	saas__store_executions_free(execs, n);
	saas__store_executions_free(NULL, 0);

	/* The store's error comes back, with no array. */
	n = 99;
	assert_fails(saas__store_keys(f->st, f->ctx, NULL, &keys, &n), SAAS_EINVAL);
	assert_null(keys);
	assert_int_equal(n, 0);
}

static void test_sandbox_values(void **state)
{
	struct fx *f = *state;
	static const char *const meta_a[] = { "team=blue", "stage=dev", "empty=", "eq=a=b", NULL };
	static const char *const envs_a[] = { "PATH_EXTRA=/opt/bin", "GREETING=hello world", NULL };
	static const char *const meta_b[] = { "team=blue", "stage=prod", NULL };
	static const char *const dup[] = { "k=1", "k=2", NULL };
	static const char *const bad[] = { "novalue", NULL };
	static const char *const f_blue[] = { "team=blue", NULL };
	static const char *const f_dev[] = { "team=blue", "stage=dev", NULL };
	static const char *const f_eq[] = { "eq=a=b", NULL };
	static const char *const f_none[] = { "team=red", NULL };
	static const char *const f_env[] = { "GREETING=hello world", NULL };
	static const char *const want_both[] = { "sbx-vb", "sbx-va", NULL };
	static const char *const want_a[] = { "sbx-va", NULL };
	static const char *const want_b[] = { "sbx-vb", NULL };
	static const char *const want_none[] = { NULL };
	saas_store_sandbox b, got;
	saas_store_filter flt;
	struct sandboxes c;
	struct values_seen v;

	add_account(f, "acc-v", 1, 0);
	b = sandbox_rec("sbx-va", "acc-v", 10);
	b.metadata = meta_a;
	b.envs = envs_a;
	b.on_timeout = SAAS_ON_TIMEOUT_PAUSE;
	b.auto_resume = 1;
	b.timeout_s = 42;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 10), SAAS_OK);
	/* Kept as given, sorted by kind then key; the value is what follows the first '='. */
	assert_string_equal(values_of(f, "sbx-va", &v),
	                    "1:empty=,1:eq=a=b,1:stage=dev,1:team=blue,2:GREETING=hello world,2:PATH_EXTRA=/opt/bin");
	/* A callback may stop the walk. */
	memset(&v, 0, sizeof(v));
	v.stop_after = 1;
	assert_int_equal(f->st->sandbox_values(f->ctx, "sbx-va", collect_values, &v), SAAS_OK);
	assert_string_equal(v.text, "1:empty=");
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-va", &got), SAAS_OK);
	assert_int_equal(got.on_timeout, SAAS_ON_TIMEOUT_PAUSE);
	assert_int_equal(got.auto_resume, 1);
	assert_int_equal(got.timeout_s, 42);
	assert_null(got.metadata);
	assert_null(got.envs);

	/* Placed (version 6's insert) keeps them the same way. */
	add_host(f, "h-vals", 4, 8192, 5);
	b = sandbox_rec("sbx-vb", "acc-v", 20);
	b.metadata = meta_b;
	{
		saas_store_placement p = { 5, 10, NULL };
		assert_int_equal(f->st->sandbox_place(f->ctx, &b, &p), SAAS_OK);
	}
	assert_string_equal(values_of(f, "sbx-vb", &v), "1:stage=prod,1:team=blue");
	/* None: no call. */
	assert_int_equal(add_sandbox(f, "sbx-vc", "acc-v", 30, 10), SAAS_OK);
	assert_string_equal(values_of(f, "sbx-vc", &v), "");
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-vc", &got), SAAS_OK);
	assert_int_equal(got.on_timeout, SAAS_ON_TIMEOUT_DESTROY);
	assert_int_equal(got.auto_resume, 0);

	/* The filter: every pair must match, exactly; the environment is never matched. */
	memset(&flt, 0, sizeof(flt));
	flt.account_id = "acc-v";
	flt.metadata = f_blue;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_both);
	flt.metadata = f_dev;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_a);
	flt.metadata = f_eq;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_a);
	flt.metadata = f_none;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_none);
	flt.metadata = f_env;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_none);
	/* With a cursor and a limit: the page counts only what matches. */
	flt.metadata = f_blue;
	flt.limit = 1;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_b);
	flt.before_created_ms = c.row[0].created_at_ms;
	flt.before_id = c.row[0].id;
	list_sandboxes(f, &flt, &c);
	assert_ids(&c, want_a);

	/* A key given twice, or no '=': refused, and no row is left. */
	b = sandbox_rec("sbx-vd", "acc-v", 40);
	b.metadata = dup;
	assert_fails(f->st->sandbox_insert(f->ctx, &b, 10), SAAS_EEXISTS);
	assert_fails(f->st->sandbox_get(f->ctx, "sbx-vd", &got), SAAS_ENOTFOUND);
	b.metadata = NULL;
	b.envs = bad;
	assert_fails(f->st->sandbox_insert(f->ctx, &b, 10), SAAS_EINVAL);
	flt.metadata = bad;
	assert_fails(f->st->sandbox_list(f->ctx, &flt, collect_sandbox, &c), SAAS_EINVAL);

	/* A sandbox deleted while being made takes its values with it. */
	b = sandbox_rec("sbx-ve", "acc-v", 50);
	b.metadata = meta_b;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 10), SAAS_OK);
	assert_int_equal(f->st->sandbox_delete(f->ctx, "sbx-ve"), SAAS_OK);
	assert_string_equal(values_of(f, "sbx-ve", &v), "");
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 10), SAAS_OK);
	assert_string_equal(values_of(f, "sbx-ve", &v), "1:stage=prod,1:team=blue");
}

static void test_sqlite_migrates_values(void **state)
{
	struct fx *f = *state;
	static const char *const meta[] = { "k=v", NULL };
	saas_store_sandbox got, b;
	struct values_seen v;
	sqlite3 *db = NULL;
	int ver = -1;

	if (f->st != &saas__store_sqlite) {
		print_message("skipped: rewinding the schema by hand is SQLite-specific\n");
		skip();
	}
	add_account(f, "acc-v8", 1, 0);
	assert_int_equal(add_sandbox(f, "sbx-v8", "acc-v8", 10, 5), SAAS_OK);
	f->st->close(f->ctx);
	f->ctx = NULL;
	assert_int_equal(sqlite3_open(saas__sqlite_path(f->url), &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, UNDO_SCHEMA_9 "UPDATE meta SET value = '8' WHERE key = 'schema_version';",
	                              NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f, &f->ctx), SAAS_OK);
	assert_int_equal(f->st->schema_version(f->ctx, &ver), SAAS_OK);
	assert_int_equal(ver, SAAS_STORE_SCHEMA);
	/* A row from before: no values, ends at its timeout, asked no lifetime the store knows. */
	assert_int_equal(f->st->sandbox_get(f->ctx, "sbx-v8", &got), SAAS_OK);
	assert_int_equal(got.on_timeout, SAAS_ON_TIMEOUT_DESTROY);
	assert_int_equal(got.timeout_s, 0);
	assert_string_equal(values_of(f, "sbx-v8", &v), "");
	b = sandbox_rec("sbx-v9", "acc-v8", 20);
	b.metadata = meta;
	assert_int_equal(f->st->sandbox_insert(f->ctx, &b, 5), SAAS_OK);
	assert_string_equal(values_of(f, "sbx-v9", &v), "1:k=v");
}

/* ---- concurrency ---- */

#define THREADS 4
#define PER_THREAD 10
#define ROUNDS 5

struct racer {
	struct fx *f;
	void *ctx;
	pthread_barrier_t *start;
	const char *account;
	int index;
	int ok, limit, other;
	int closed;
};

static void *insert_many(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	for (int i = 0; i < PER_THREAD; i++) {
		saas_store_sandbox b;
		char id[48];
		int rc;

		snprintf(id, sizeof(id), "sbx-%s-t%d-%d", r->account, r->index, i);
		b = sandbox_rec(id, r->account, 1000 + i);
		rc = r->f->st->sandbox_insert(r->ctx, &b, PER_THREAD);
		if (rc == SAAS_OK)
			r->ok++;
		else if (rc == SAAS_ELIMIT)
			r->limit++;
		else {
			fprintf(stderr, "racer %d: %s: %s\n", r->index, saas_strerror(rc), saas_error_last()->message);
			r->other++;
		}
	}
	return NULL;
}

static void *close_once(void *arg)
{
	struct racer *r = arg;
	int closed = 0;
	int rc;

	pthread_barrier_wait(r->start);
	rc = r->f->st->sandbox_close(r->ctx, r->account, SAAS_END_USER, 5000 + r->index, 1000, 0, &closed);
	if (rc == SAAS_OK)
		r->closed = closed;
	else {
		fprintf(stderr, "closer %d: %s: %s\n", r->index, saas_strerror(rc), saas_error_last()->message);
		r->other++;
	}
	return NULL;
}

/*
 * Threads released together against one account; with ctx2, every other
 * thread goes through the second handle. Several rounds, so that the race
 * really happens rather than by luck.
 */
static void race(struct fx *f, void *ctx2)
{
	struct racer r[2 * THREADS];
	pthread_t t[2 * THREADS];
	pthread_barrier_t start;
	struct sandboxes c;
	saas_store_filter flt;

	for (int round = 0; round < ROUNDS; round++) {
		char account[32], sandbox[32];
		int ok = 0, limit = 0, closed = 0;

		snprintf(account, sizeof(account), "acc-race%d", round);
		add_account(f, account, 1, 0);
		assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
		memset(r, 0, sizeof(r));
		for (int i = 0; i < THREADS; i++) {
			r[i] = (struct racer){ f, (i % 2 && ctx2) ? ctx2 : f->ctx, &start, account, i, 0, 0, 0, 0 };
			assert_int_equal(pthread_create(&t[i], NULL, insert_many, &r[i]), 0);
		}
		/* Join them all before any assertion can jump out of this function. */
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < THREADS; i++) {
			ok += r[i].ok;
			limit += r[i].limit;
			assert_int_equal(r[i].other, 0);
		}
		pthread_barrier_destroy(&start);
		assert_int_equal(ok, PER_THREAD);
		assert_int_equal(limit, THREADS * PER_THREAD - PER_THREAD);
		memset(&flt, 0, sizeof(flt));
		flt.account_id = account;
		assert_int_equal(list_sandboxes(f, &flt, &c), PER_THREAD);

		/* Many closers of one sandbox: exactly one closes it and it is charged once. */
		snprintf(account, sizeof(account), "acc-close%d", round);
		snprintf(sandbox, sizeof(sandbox), "sbx-shared%d", round);
		add_account(f, account, 1, 0);
		assert_int_equal(add_sandbox(f, sandbox, account, 1, 1), SAAS_OK);
		assert_int_equal(pthread_barrier_init(&start, NULL, 2 * THREADS), 0);
		memset(r, 0, sizeof(r));
		for (int i = 0; i < 2 * THREADS; i++) {
			r[i] = (struct racer){ f, (i % 2 && ctx2) ? ctx2 : f->ctx, &start, sandbox, i, 0, 0, 0, 0 };
			assert_int_equal(pthread_create(&t[i], NULL, close_once, &r[i]), 0);
		}
		for (int i = 0; i < 2 * THREADS; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 2 * THREADS; i++) {
			closed += r[i].closed;
			assert_int_equal(r[i].other, 0);
		}
		pthread_barrier_destroy(&start);
		assert_int_equal(closed, 1);
		assert_int_equal(charged(f, account), 1000);
	}
}

static void test_concurrent_shared_handle(void **state)
{
	race(*state, NULL);
}

static void test_concurrent_two_handles(void **state)
{
	struct fx *f = *state;
	void *ctx2 = NULL;

	/* A second open of the same URL: what a second process does. */
	assert_int_equal(open_store(f, &ctx2), SAAS_OK);
	race(f, ctx2);
	f->st->close(ctx2);
}

/*
 * Eight placers at once, each on its own store handle (its own connection:
 * what eight servers do) and for its own account, into hosts with room for
 * 24 sandboxes in all: 24 are placed, no host holds more than it has room
 * for, and the rest are told SAAS_EBUSY.
 */
#define PLACERS 8
#define PLACE_EACH 6

struct placer {
	struct fx *f;
	void *ctx;
	pthread_barrier_t *start;
	int index;
	int ok, busy, other;
};

static void *place_many(void *arg)
{
	struct placer *r = arg;

	pthread_barrier_wait(r->start);
	for (int i = 0; i < PLACE_EACH; i++) {
		char id[48], account[32];
		int rc;

		snprintf(id, sizeof(id), "sbx-place-t%d-%d", r->index, i);
		snprintf(account, sizeof(account), "acc-place%d", r->index);
		rc = place(r->f, r->ctx, id, account, 1, 1024, 0, 1000, NULL);
		if (rc == SAAS_OK)
			r->ok++;
		else if (rc == SAAS_EBUSY)
			r->busy++;
		else {
			fprintf(stderr, "placer %d: %s: %s\n", r->index, saas_strerror(rc), saas_error_last()->message);
			r->other++;
		}
	}
	return NULL;
}

/* Run the placers on ctx[i] each (several may share one handle) and check the outcome. */
static void place_race(struct fx *f, void *const ctx[PLACERS])
{
	struct placer r[PLACERS];
	pthread_t t[PLACERS];
	pthread_barrier_t start;
	struct sandboxes c;
	saas_store_filter flt;
	int ok = 0, busy = 0;
	const char *hosts[] = { "ph-a", "ph-b", "ph-c" };
	/* Room by memory for 10, by vCPUs (2 x 2.5) for 5, and by memory for 9. */
	const unsigned int cpus[] = { 64, 2, 64 }, cpu_milli[] = { 1000, 2500, 1000 };
	const uint64_t mem[] = { 10240, 65536, 9300 };
	const size_t want[] = { 10, 5, 9 };

	/* An account each, so that nothing but the hosts' locks stands between the placers. */
	for (int i = 0; i < PLACERS; i++) {
		char account[32];

		snprintf(account, sizeof(account), "acc-place%d", i);
		add_account(f, account, 1, 0);
	}
	for (int i = 0; i < 3; i++) {
		saas_store_host h = host_rec(hosts[i], cpus[i], mem[i], 1);

		h.cpu_overcommit_milli = cpu_milli[i];
		assert_int_equal(f->st->host_insert(f->ctx, &h), SAAS_OK);
	}
	assert_int_equal(pthread_barrier_init(&start, NULL, PLACERS), 0);
	for (int i = 0; i < PLACERS; i++) {
		r[i] = (struct placer){ f, ctx[i], &start, i, 0, 0, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, place_many, &r[i]), 0);
	}
	/* Join them all before any assertion can jump out of this function. */
	for (int i = 0; i < PLACERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < PLACERS; i++) {
		ok += r[i].ok;
		busy += r[i].busy;
		assert_int_equal(r[i].other, 0);
	}
	assert_int_equal(ok, 24);
	assert_int_equal(busy, PLACERS * PLACE_EACH - 24);
	memset(&flt, 0, sizeof(flt));
	flt.live = 1;
	for (int i = 0; i < 3; i++) {
		flt.host_id = hosts[i];
		assert_int_equal(list_sandboxes(f, &flt, &c), want[i]);
	}
}

static void test_place_concurrent(void **state)
{
	struct fx *f = *state;
	void *ctx[PLACERS] = { NULL };
	int opened = 0;

	for (int i = 0; i < PLACERS && open_store(f, &ctx[i]) == SAAS_OK; i++)
		opened++;
	if (opened == PLACERS)
		place_race(f, ctx);
	for (int i = 0; i < opened; i++)
		f->st->close(ctx[i]);
	assert_int_equal(opened, PLACERS);
}

/* The URL with `param` added to its query, first or last. */
static char *url_with(const char *url, const char *param, int first)
{
	const char *q = strchr(url, '?');
	char *out = NULL;
	int n;

	if (first && q)
		n = asprintf(&out, "%.*s?%s&%s", (int)(q - url), url, param, q + 1);
	else
		n = asprintf(&out, "%s%c%s", url, q ? '&' : '?', param);
	return n < 0 ? NULL : out;
}

/*
 * One handle shared by more threads than it has connections (PostgreSQL:
 * aas_pool=2): callers wait for a free connection, nobody fails, and each
 * transaction stays on its connection (no overcommit, no lost update).
 */
static void test_pool_many_threads(void **state)
{
	struct fx *f = *state;
	void *small = NULL, *ctx[PLACERS];
	saas_store_env env = f->env;
	char *url = NULL;

	if (f->st != &saas__store_sqlite) {
		assert_non_null(url = url_with(f->url, "aas_pool=2", 0));
		env.url = url;
		assert_int_equal(f->st->open(&small, &env), SAAS_OK);
	} else {
		small = f->ctx; /* one connection behind a mutex: the same test of waiting */
	}
	for (int i = 0; i < PLACERS; i++)
		ctx[i] = small;
	place_race(f, ctx);
	if (small != f->ctx)
		f->st->close(small);
	free(url);
}

/* aas_pool: bounded, given once, taken out of the URL wherever it stands in the query. */
static void test_pg_pool_option(void **state)
{
	struct fx *f = *state;
	const char *bad[] = { "aas_pool=0", "aas_pool=65", "aas_pool=", "aas_pool=x", "aas_pool=-1", "aas_pool=007",
		              "aas_pool=2&aas_pool=3" };
	saas_store_env env = f->env;
	void *ctx = NULL;
	char *url;
	int v = 0;

	if (f->st == &saas__store_sqlite) {
		print_message("skipped: the pool is PostgreSQL's\n");
		skip();
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_non_null(url = url_with(f->url, bad[i], 0));
		env.url = url;
		assert_fails(f->st->open(&ctx, &env), SAAS_EINVAL);
		assert_null(ctx);
		assert_non_null(strstr(saas_error_last()->message, "aas_pool"));
		free(url);
	}
	for (int first = 0; first < 2; first++) {
		assert_non_null(url = url_with(f->url, first ? "aas_pool=1" : "aas_pool=64", first));
		env.url = url;
		assert_int_equal(f->st->open(&ctx, &env), SAAS_OK);
		assert_int_equal(f->st->schema_version(ctx, &v), SAAS_OK);
		assert_int_equal(v, SAAS_STORE_SCHEMA);
		f->st->close(ctx);
		ctx = NULL;
		free(url);
	}
	/* What libpq does not know it still refuses: the store only takes its own out. */
	assert_non_null(url = url_with(f->url, "aas_pools=2", 0));
	env.url = url;
	assert_fails(f->st->open(&ctx, &env), SAAS_ESTORE);
	free(url);
}

/*
 * Every connection of the pool killed by the server while idle (a restart,
 * an administrator's pg_terminate_backend): the next calls reconnect and
 * succeed, from many threads at once.
 */
static void test_pg_reconnect(void **state)
{
	struct fx *f = *state;
	saas_store_account a;
	void *ctx[PLACERS];

	if (f->st == &saas__store_sqlite) {
		print_message("skipped: reconnecting is PostgreSQL's\n");
		skip();
	}
#ifdef SAAS_WITH_POSTGRES
	add_account(f, "acc-rc", 1, 0);
	{
		/* Use several connections of the pool first, so that there are several to kill. */
		struct sandboxes c;

		assert_int_equal(list_sandboxes(f, NULL, &c), 0);
	}
	PGconn *admin = PQconnectdb(f->url);
	PGresult *res;

	assert_int_equal(PQstatus(admin), CONNECTION_OK);
	res = PQexec(admin, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
	                    " WHERE datname = current_database() AND pid <> pg_backend_pid()");
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	assert_true(atoi(PQgetvalue(res, 0, 0)) >= 1);
	PQclear(res);
	PQfinish(admin);
	assert_int_equal(f->st->account_get(f->ctx, "acc-rc", &a), SAAS_OK);
	for (int i = 0; i < PLACERS; i++)
		ctx[i] = f->ctx;
	place_race(f, ctx);
#else
	(void)f;
	(void)a;
	(void)ctx;
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_selection),
		cmocka_unit_test_setup_teardown(test_schema_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_newer_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_file_private, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account_insert_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account_name_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_credit_add, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account_list_sums_and_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_insert_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_list_order_and_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_list_ran_during, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_list_cursor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_set_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_set_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_set_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_pause, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_close_charges_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_close_zero_cost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_close_if_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_execution_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_execution_fail_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_execution_prune, setup, teardown),
		cmocka_unit_test_setup_teardown(test_execution_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_v1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_ports_to_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_network, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_egress, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_egress, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_network, setup, teardown),
		cmocka_unit_test_setup_teardown(test_users, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_use_and_disabled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_people, setup, teardown),
		cmocka_unit_test_setup_teardown(test_callback_may_call_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_shared_handle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_two_handles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_host_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_purge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_place, setup, teardown),
		cmocka_unit_test_setup_teardown(test_place_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_many_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_pool_option, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mcp_sessions_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mcp_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migrates_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_arrays, setup, teardown),
	};

	return cmocka_run_group_tests_name(saas_test_store_is_postgres() ? "store (postgres)" : "store (sqlite)",
	                                   tests, NULL, NULL);
}
