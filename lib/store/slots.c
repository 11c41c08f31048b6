/*
 * The store's logic, written once for every dialect (dialect.h): argument
 * checks, the statements, which of them share a transaction, and records
 * made from rows. A dialect only runs what this file asks.
 *
 * Statements are written once with $1, $2 ... parameters. Where SQLite and
 * PostgreSQL disagree, a statement carries PostgreSQL's own text beside it:
 * only its row locks. Ids sort bytewise in both: SQLite's BINARY is its
 * default, and PostgreSQL's schema declares every id and hash COLLATE "C".
 * Each statement has an id so a dialect may keep it prepared on each
 * connection.
 *
 * List callbacks run after the connection went back (the rows copied out
 * first), so that a callback may call the store again (the reaper closes
 * the sandboxes it lists) without waiting on itself.
 *
 * One file for every slot, over 2,000 lines on purpose: a slot, its
 * statements and the records they make read together, in the order of
 * saas/sys/store.h's areas (accounts, keys, sandboxes, executions, limits,
 * ports, people, leases, hosts, placement, MCP sessions, the schema). Split
 * it by those areas, behind one internal header, when it grows further.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saas/exec.h"
#include "saas/sandbox.h"

#include "store/dialect.h"
#include "util/error.h"
#include "util/util.h"

/* Each statement's id in a dialect's cache of prepared statements. */
enum {
	Q_NONE,
	Q_ACCOUNT_INSERT,
	Q_LEDGER_CREDIT,
	Q_ACCOUNT_GET,
	Q_ACCOUNT_LIST,
	Q_CREDIT_ADD,
	Q_KEY_INSERT,
	Q_KEY_FIND,
	Q_KEY_REVOKE,
	Q_KEY_EXISTS,
	Q_KEY_LIST,
	Q_KEY_TOUCH,
	Q_ACCOUNT_LOCK,
	Q_LIVE_COUNT,
	Q_SANDBOX_INSERT,
	Q_SANDBOX_GET,
	Q_SANDBOX_EXISTS,
	Q_SANDBOX_STATUS,
	Q_SANDBOX_SET_READY,
	Q_SANDBOX_SET_EXPIRY,
	Q_SANDBOX_SET_STATE,
	Q_SANDBOX_CLOSE,
	Q_SANDBOX_CHARGE,
	Q_SANDBOX_DELETE,
	Q_NETWORK_GET,
	Q_NETWORK_SET,
	Q_EGRESS_RECORD,
	Q_EGRESS_REBASE,
	Q_EXECUTION_INSERT,
	Q_EXECUTION_FINISH,
	Q_EXECUTION_GET,
	Q_EXECUTION_LIST,
	Q_EXECUTION_FAIL,
	Q_EXECUTION_PRUNE,
	Q_LIMITS_GET,
	Q_LIMITS_SET,
	Q_PORT_INSERT,
	Q_PORT_LIST,
	Q_PORT_FIND,
	Q_PORT_DELETE,
	Q_ACCOUNT_DISABLE,
	Q_SESSIONS_OF_ACCOUNT,
	Q_INVITE_TAKE,
	Q_USER_INSERT,
	Q_USER_FIND,
	Q_USER_LIST,
	Q_USER_UPDATE,
	Q_SESSIONS_OF_USER,
	Q_SESSION_INSERT,
	Q_SESSION_FIND,
	Q_SESSION_TOUCH,
	Q_SESSION_DELETE,
	Q_SESSION_PRUNE,
	Q_INVITE_INSERT,
	Q_LEASE_TAKE,
	Q_LEASE_RELEASE,
	Q_LEASE_GET,
	Q_HOST_INSERT,
	Q_HOST_GET,
	Q_HOST_LIST,
	Q_HOST_SET_STATE,
	Q_HOST_EXISTS,
	Q_HOST_SEEN,
	Q_HOST_LOCK,
	Q_HOST_BUSY,
	Q_HOST_DELETE,
	Q_PLACE_HOSTS,
	Q_PLACE_USED,
	Q_MCP_INSERT,
	Q_MCP_TRIM,
	Q_MCP_TOUCH,
	Q_MCP_DELETE,
	Q_MCP_PRUNE,
	Q_SCHEMA_READ,
	Q_SCHEMA_WRITE,
	Q_VALUE_INSERT,
	Q_VALUES_GET,
	Q_COUNT
};
_Static_assert(Q_COUNT <= SAAS__SQL_CACHE, "a dialect's statement cache holds every statement");
/* The SQL below spells these values out (and the schema's partial index status != 3). */
_Static_assert(SAAS_SANDBOX_CREATING == 1 && SAAS_SANDBOX_READY == 2 && SAAS_SANDBOX_DESTROYED == 3,
               "sandbox status values used in SQL");
_Static_assert(SAAS_EXEC_RUNNING == 1, "execution status value used in SQL");

/* ---- one store call: a connection from enter to leave ---- */

struct call {
	const struct saas__dialect *d;
	void *store;
	void *conn;
};

static int enter(void *ctx, struct call *c)
{
	const struct saas__db *db = ctx;

	c->d = db->dialect;
	c->store = ctx;
	c->conn = NULL;
	return c->d->enter(ctx, &c->conn);
}

static void leave(struct call *c)
{
	c->d->leave(c->store, c->conn);
}

static int run(struct call *c, const saas__sql *q, const saas__param *p, int n, int64_t *changed)
{
	return c->d->run(c->conn, q, p, n, NULL, NULL, changed);
}

static int begin(struct call *c)
{
	return c->d->begin(c->conn);
}

/* Commit, or (rc < 0) undo: the end of every transaction. */
static int finish(struct call *c, int rc)
{
	if (rc == SAAS_OK)
		rc = c->d->commit(c->conn);
	if (rc < 0)
		c->d->rollback(c->conn);
	return rc;
}

/* One statement as a whole store call; *changed (may be NULL) as the dialect's run. */
static int run1(void *ctx, const saas__sql *q, const saas__param *p, int n, int64_t *changed)
{
	struct call c;
	int rc;

	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	rc = run(&c, q, p, n, changed);
	leave(&c);
	return rc;
}

/* ---- rows into records ---- */

/* Copy a text column into a record field; writes are checked, so it fits unless someone else wrote it. */
static int get_text(const struct saas__dialect *d, const saas__row *row, int col, char *dst, size_t size)
{
	size_t n = 0;
	const char *t = d->col_text(row, col, &n);

	if (!t) {
		dst[0] = '\0';
		return SAAS_OK;
	}
	if (n >= size)
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
		                   "%s: stored column %d is %zu bytes, more than the %zu its record field holds", d->name,
		                   col, n, size - 1);
	memcpy(dst, t, n);
	dst[n] = '\0';
	return SAAS_OK;
}

typedef int (*convert_fn)(const struct saas__dialect *d, const saas__row *row, void *out);

/* Rows read into an array of records, so that callbacks run without the connection. */
struct fetch {
	const struct saas__dialect *d;
	convert_fn convert;
	size_t elem;
	char *data;
	size_t n, cap;
};

static int fetch_row(void *userdata, const saas__row *row)
{
	struct fetch *f = userdata;
	char *slot;

	if (saas__array_reserve(&f->data, &f->cap, f->n + 1, f->elem) < 0)
		return SAAS_ENOMEM;
	slot = f->data + f->n * f->elem;
	memset(slot, 0, f->elem);
	f->n++;
	return f->convert(f->d, row, slot);
}

/* Run a read statement on a connection already entered; the rows land in *f (free f->data). */
static int fetch_in(struct call *c, const saas__sql *q, const saas__param *p, int n, convert_fn convert,
                    size_t elem, struct fetch *f)
{
	*f = (struct fetch){ c->d, convert, elem, NULL, 0, 0 };
	return c->d->run(c->conn, q, p, n, fetch_row, f, NULL);
}

/* The same as a whole store call. */
static int fetch(void *ctx, const saas__sql *q, const saas__param *p, int n, convert_fn convert, size_t elem,
                 struct fetch *f)
{
	struct call c;
	int rc;

	*f = (struct fetch){ NULL, convert, elem, NULL, 0, 0 };
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	rc = fetch_in(&c, q, p, n, convert, elem, f);
	leave(&c);
	return rc;
}

/* One record: its first row into *out, or `missing` when there is none. */
static int fetch_one(void *ctx, const saas__sql *q, const saas__param *p, int n, convert_fn convert, size_t elem,
                     void *out, int *found)
{
	struct fetch f;
	int rc = fetch(ctx, q, p, n, convert, elem, &f);

	*found = rc == SAAS_OK && f.n > 0;
	if (*found)
		memcpy(out, f.data, elem);
	free(f.data);
	return rc;
}

/* Hand each record of a fetch to fn until it returns non-zero; frees the records. */
#define FOR_EACH(f, type, rc, fn, userdata)                                                                   \
	do {                                                                                                   \
		for (size_t i_ = 0; (rc) == SAAS_OK && i_ < (f).n; i_++)                                      \
			if ((fn)((userdata), (const type *)(void *)((f).data + i_ * (f).elem)) != 0)          \
				break;                                                                         \
		free((f).data);                                                                                \
	} while (0)

/* ---- accounts and credit ---- */

#define ACCOUNT_SELECT \
	"SELECT a.id, a.name, a.created_at," \
	" COALESCE((SELECT SUM(amount) FROM ledger WHERE account_id = a.id AND kind = 'credit'), 0)," \
	" COALESCE((SELECT SUM(amount) FROM ledger WHERE account_id = a.id AND kind = 'charge'), 0)," \
	" a.disabled_at FROM accounts a"

static const saas__sql q_account_get = {
	Q_ACCOUNT_GET, ACCOUNT_SELECT " WHERE a.id = $1", NULL, "reading an account", 1
};
static const saas__sql q_account_list = {
	Q_ACCOUNT_LIST, ACCOUNT_SELECT " ORDER BY a.created_at, a.id", NULL, "listing accounts", 1
};
static const saas__sql q_account_insert = {
	Q_ACCOUNT_INSERT, "INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)", NULL,
	"inserting an account", 0
};
static const saas__sql q_ledger_credit = {
	Q_LEDGER_CREDIT, "INSERT INTO ledger (account_id, kind, amount, note, at) VALUES ($1, 'credit', $2, $3, $4)",
	NULL, "adding credit", 0
};
/* Through the account's row: no row inserted means no such account, in the same statement. */
static const saas__sql q_credit_add = {
	Q_CREDIT_ADD,
	"INSERT INTO ledger (account_id, kind, amount, note, at) SELECT id, 'credit', $2, $3, $4 FROM accounts"
	" WHERE id = $1", NULL, "adding credit", 0
};

static int account_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_account *a = out;
	int rc;

	if ((rc = get_text(d, row, 0, a->id, sizeof(a->id))) < 0 ||
	    (rc = get_text(d, row, 1, a->name, sizeof(a->name))) < 0)
		return rc;
	a->created_at_ms = d->col_i64(row, 2);
	a->credit_usd_micro = d->col_i64(row, 3);
	a->charged_usd_micro = d->col_i64(row, 4);
	a->disabled_at_ms = d->col_i64(row, 5);
	return SAAS_OK;
}

/* The account's row and first credit, inside the caller's transaction. */
static int account_insert_in(struct call *c, const saas_store_account *account, int64_t credit)
{
	saas__param p[4] = { SAAS__TEXT(account->id), SAAS__TEXT(account->name), SAAS__I64(account->created_at_ms) };
	int rc;

	if ((rc = run(c, &q_account_insert, p, 3, NULL)) < 0) {
		if (rc == SAAS_EEXISTS)
			saas__error_wrap(rc, "account '%.64s' already exists", account->id);
		return rc;
	}
	if (credit <= 0)
		return SAAS_OK;
	p[1] = SAAS__I64(credit);
	p[2] = SAAS__TEXT("initial credit");
	p[3] = SAAS__I64(account->created_at_ms);
	return run(c, &q_ledger_credit, p, 4, NULL);
}

static int account_check(const saas_store_account *account, int64_t credit)
{
	int rc;

	if (!account)
		return saas__inval("account is NULL");
	if ((rc = saas__store_field(account->id, sizeof(account->id), "account id")) < 0 ||
	    (rc = saas__store_field(account->name, sizeof(account->name), "account name")) < 0)
		return rc;
	if (credit < 0)
		return saas__inval("initial credit is negative");
	return SAAS_OK;
}

int saas__st_account_insert(void *ctx, const saas_store_account *account, int64_t credit)
{
	struct call c;
	int rc;

	if ((rc = account_check(account, credit)) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, account_insert_in(&c, account, credit));
	leave(&c);
	return rc;
}

int saas__st_account_get(void *ctx, const char *id, saas_store_account *out)
{
	int rc, found;

	if (!id || !out)
		return saas__inval("account id or output is NULL");
	rc = fetch_one(ctx, &q_account_get, &SAAS__TEXT(id), 1, account_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("account", id);
	return rc;
}

int saas__st_account_list(void *ctx, saas_store_account_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!fn)
		return saas__inval("callback is NULL");
	rc = fetch(ctx, &q_account_list, NULL, 0, account_row, sizeof(saas_store_account), &f);
	FOR_EACH(f, saas_store_account, rc, fn, userdata);
	return rc;
}

int saas__st_credit_add(void *ctx, const char *account_id, int64_t amount, const char *note, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(account_id), SAAS__I64(amount), SAAS__TEXT(note), SAAS__I64(at_ms) };
	int64_t added = 0;
	int rc;

	if (!account_id)
		return saas__inval("account id is NULL");
	if (amount <= 0)
		return saas__inval("a credit must be positive");
	rc = run1(ctx, &q_credit_add, p, 4, &added);
	if (rc == SAAS_OK && added == 0)
		rc = saas__store_not_found("account", account_id);
	return rc;
}

/* ---- API keys ---- */

#define KEY_SELECT \
	"SELECT id, account_id, name, prefix, hash, created_at, revoked_at, last_used_at," \
	" (SELECT disabled_at FROM accounts WHERE accounts.id = api_keys.account_id) FROM api_keys"

static const saas__sql q_key_insert = {
	Q_KEY_INSERT,
	"INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, revoked_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7)", NULL, "inserting a key", 0
};
static const saas__sql q_key_find = { Q_KEY_FIND, KEY_SELECT " WHERE hash = $1", NULL, "finding a key", 1 };
/* The first revocation time stands: it is when the key stopped working. */
static const saas__sql q_key_revoke = {
	Q_KEY_REVOKE, "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at = 0", NULL, "revoking a key", 0
};
static const saas__sql q_key_exists = {
	Q_KEY_EXISTS, "SELECT id FROM api_keys WHERE id = $1", NULL, "revoking a key", 1
};
static const saas__sql q_key_list = {
	Q_KEY_LIST, KEY_SELECT " WHERE account_id = $1 ORDER BY created_at, id", NULL, "listing keys", 1
};
static const saas__sql q_key_touch = {
	Q_KEY_TOUCH, "UPDATE api_keys SET last_used_at = $2 WHERE hash = $1 AND last_used_at < $2", NULL,
	"recording a key's use", 0
};

static int key_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_key *k = out;
	int rc;

	if ((rc = get_text(d, row, 0, k->id, sizeof(k->id))) < 0 ||
	    (rc = get_text(d, row, 1, k->account_id, sizeof(k->account_id))) < 0 ||
	    (rc = get_text(d, row, 2, k->name, sizeof(k->name))) < 0 ||
	    (rc = get_text(d, row, 3, k->prefix, sizeof(k->prefix))) < 0 ||
	    (rc = get_text(d, row, 4, k->hash, sizeof(k->hash))) < 0)
		return rc;
	k->created_at_ms = d->col_i64(row, 5);
	k->revoked_at_ms = d->col_i64(row, 6);
	k->last_used_at_ms = d->col_i64(row, 7);
	k->account_disabled_at_ms = d->col_i64(row, 8);
	return SAAS_OK;
}

/* A single-row id, for "is it there?" */
static int id_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return get_text(d, row, 0, out, SAAS_ID_MAX + 1);
}

int saas__st_key_insert(void *ctx, const saas_store_key *key)
{
	int rc;

	if (!key)
		return saas__inval("key is NULL");
	if ((rc = saas__store_field(key->id, sizeof(key->id), "key id")) < 0 ||
	    (rc = saas__store_field(key->account_id, sizeof(key->account_id), "account id")) < 0 ||
	    (rc = saas__store_field(key->name, sizeof(key->name), "key name")) < 0 ||
	    (rc = saas__store_field(key->prefix, sizeof(key->prefix), "key prefix")) < 0 ||
	    (rc = saas__store_field(key->hash, sizeof(key->hash), "key hash")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(key->id), SAAS__TEXT(key->account_id), SAAS__TEXT(key->name), SAAS__TEXT(key->prefix),
		SAAS__TEXT(key->hash), SAAS__I64(key->created_at_ms), SAAS__I64(key->revoked_at_ms),
	};
	rc = run1(ctx, &q_key_insert, p, 7, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "key '%.64s' already exists", key->id);
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("account", key->account_id);
	return rc;
}

int saas__st_key_find(void *ctx, const char *hash, saas_store_key *out)
{
	int rc, found;

	if (!hash || !out)
		return saas__inval("key hash or output is NULL");
	rc = fetch_one(ctx, &q_key_find, &SAAS__TEXT(hash), 1, key_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no key with that hash");
	return rc;
}

int saas__st_key_revoke(void *ctx, const char *key_id, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(key_id), SAAS__I64(at_ms) };
	char id[SAAS_ID_MAX + 1];
	int64_t changed = 0;
	int rc, found = 0;

	if (!key_id)
		return saas__inval("key id is NULL");
	if (at_ms <= 0)
		return saas__inval("revocation time must be positive (0 means not revoked)");
	rc = run1(ctx, &q_key_revoke, p, 2, &changed);
	/* Nothing changed: revoked already (success), or no such key. */
	if (rc == SAAS_OK && changed == 0 &&
	    (rc = fetch_one(ctx, &q_key_exists, p, 1, id_row, sizeof(id), id, &found)) == SAAS_OK && !found)
		rc = saas__store_not_found("key", key_id);
	return rc;
}

int saas__st_key_list(void *ctx, const char *account_id, saas_store_key_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!account_id || !fn)
		return saas__inval("account id or callback is NULL");
	rc = fetch(ctx, &q_key_list, &SAAS__TEXT(account_id), 1, key_row, sizeof(saas_store_key), &f);
	FOR_EACH(f, saas_store_key, rc, fn, userdata);
	return rc;
}

int saas__st_key_touch(void *ctx, const char *hash, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(hash), SAAS__I64(at_ms) };
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "key hash")) < 0)
		return rc;
	rc = run1(ctx, &q_key_touch, p, 2, NULL);
	return rc;
}

/* ---- sandboxes ---- */

#define SANDBOX_SELECT \
	"SELECT id, account_id, status, end_reason, size, vcpus, memory_mb, disk_gb, image," \
	" usd_micro_per_hour, created_at, ready_at, expires_at, destroyed_at, cost, network_mode," \
	" paused_at, paused_ms, paused_usd_micro_per_hour, snapshot, parent_id," \
	" denied_connections, denied_lookups, denied_connections_base, denied_lookups_base, host_id," \
	" on_timeout, auto_resume, timeout_s FROM sandboxes"

/*
 * Inside a write transaction: the account exists. SQLite's BEGIN IMMEDIATE
 * holds the write lock already; PostgreSQL locks the account's row, so that
 * a second insert for the account waits here and then counts (READ
 * COMMITTED: in a new snapshot) the sandbox the first one added. NO KEY
 * UPDATE still lets ledger and key inserts that only reference it proceed.
 */
static const saas__sql q_account_lock = {
	Q_ACCOUNT_LOCK, "SELECT id FROM accounts WHERE id = $1",
	"SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE", "locking the account", 0
};
static const saas__sql q_live_count = {
	Q_LIVE_COUNT, "SELECT COUNT(*) FROM sandboxes WHERE account_id = $1 AND status != 3", NULL,
	"counting live sandboxes", 0
};
static const saas__sql q_sandbox_insert = {
	Q_SANDBOX_INSERT,
	"INSERT INTO sandboxes (id, account_id, status, end_reason, size, vcpus, memory_mb, disk_gb, image,"
	" usd_micro_per_hour, created_at, ready_at, expires_at, destroyed_at, cost, network_mode,"
	" paused_at, paused_ms, paused_usd_micro_per_hour, snapshot, parent_id, host_id, on_timeout, auto_resume,"
	" timeout_s)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,"
	" $17, $18, $19, $20, $21, $22, $23, $24, $25)", NULL, "inserting a sandbox", 0
};
static const saas__sql q_value_insert = {
	Q_VALUE_INSERT, "INSERT INTO sandbox_values (sandbox_id, kind, key, value) VALUES ($1, $2, $3, $4)", NULL,
	"inserting a sandbox's metadata or environment", 0
};
static const saas__sql q_values_get = {
	Q_VALUES_GET, "SELECT kind, key, value FROM sandbox_values WHERE sandbox_id = $1 ORDER BY kind, key", NULL,
	"reading a sandbox's metadata and environment", 1
};
static const saas__sql q_sandbox_get = { Q_SANDBOX_GET, SANDBOX_SELECT " WHERE id = $1", NULL, "reading a sandbox", 1 };
static const saas__sql q_sandbox_exists = {
	Q_SANDBOX_EXISTS, "SELECT id FROM sandboxes WHERE id = $1", NULL, "reading a sandbox", 1
};
static const saas__sql q_sandbox_status = {
	Q_SANDBOX_STATUS, "SELECT status FROM sandboxes WHERE id = $1", NULL, "reading a sandbox", 1
};
static const saas__sql q_sandbox_set_ready = {
	Q_SANDBOX_SET_READY, "UPDATE sandboxes SET status = 2, ready_at = $2, expires_at = $3 WHERE id = $1 AND status = 1",
	NULL, "marking a sandbox ready", 0
};
static const saas__sql q_sandbox_set_expiry = {
	Q_SANDBOX_SET_EXPIRY, "UPDATE sandboxes SET expires_at = $2 WHERE id = $1 AND status NOT IN (1, 3)", NULL,
	"setting a sandbox's expiry", 0
};
static const saas__sql q_sandbox_set_state = {
	Q_SANDBOX_SET_STATE,
	"UPDATE sandboxes SET status = $3, paused_at = $4, paused_ms = $5, snapshot = $6 WHERE id = $1 AND status = $2",
	NULL, "changing a sandbox's state", 0
};
/*
 * The status condition is what makes a second close (from any engine) a
 * no-op: PostgreSQL's second UPDATE waits on the first's row lock, then
 * re-checks the committed row. The expiry condition is what keeps a close
 * decided on an older read from ending a sandbox extended since.
 */
static const saas__sql q_sandbox_close = {
	Q_SANDBOX_CLOSE,
	"UPDATE sandboxes SET status = 3, end_reason = $2, destroyed_at = $3, cost = $4"
	" WHERE id = $1 AND status != 3 AND ($5 = 0 OR expires_at = $5)", NULL, "closing a sandbox", 0
};
static const saas__sql q_sandbox_charge = {
	Q_SANDBOX_CHARGE,
	"INSERT INTO ledger (account_id, kind, amount, sandbox_id, note, at)"
	" SELECT account_id, 'charge', $2, id, 'sandbox usage', $3 FROM sandboxes WHERE id = $1", NULL,
	"charging a sandbox", 0
};
static const saas__sql q_sandbox_delete = {
	Q_SANDBOX_DELETE, "DELETE FROM sandboxes WHERE id = $1 AND status = 1", NULL, "deleting a sandbox", 0
};
static const saas__sql q_network_get = {
	Q_NETWORK_GET, "SELECT network_allow, network_deny FROM sandboxes WHERE id = $1", NULL,
	"reading a sandbox's network", 1
};
static const saas__sql q_network_set = {
	Q_NETWORK_SET,
	"UPDATE sandboxes SET network_mode = $2, network_allow = $3, network_deny = $4 WHERE id = $1 AND status != 3",
	NULL, "setting a sandbox's network", 0
};
/* Never lowered, in the one statement: of two recorders racing, the higher stays. */
static const saas__sql q_egress_record = {
	Q_EGRESS_RECORD,
	"UPDATE sandboxes SET"
	" denied_connections = CASE WHEN denied_connections > $2 THEN denied_connections ELSE $2 END,"
	" denied_lookups = CASE WHEN denied_lookups > $3 THEN denied_lookups ELSE $3 END WHERE id = $1", NULL,
	"recording a sandbox's egress counts", 0
};
static const saas__sql q_egress_rebase = {
	Q_EGRESS_REBASE,
	"UPDATE sandboxes SET denied_connections_base = denied_connections, denied_lookups_base = denied_lookups"
	" WHERE id = $1", NULL, "rebasing a sandbox's egress counts", 0
};

static int sandbox_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_sandbox *b = out;
	int rc;

	if ((rc = get_text(d, row, 0, b->id, sizeof(b->id))) < 0 ||
	    (rc = get_text(d, row, 1, b->account_id, sizeof(b->account_id))) < 0 ||
	    (rc = get_text(d, row, 4, b->size, sizeof(b->size))) < 0 ||
	    (rc = get_text(d, row, 8, b->image, sizeof(b->image))) < 0 ||
	    (rc = get_text(d, row, 19, b->snapshot, sizeof(b->snapshot))) < 0 ||
	    (rc = get_text(d, row, 20, b->parent_id, sizeof(b->parent_id))) < 0 ||
	    (rc = get_text(d, row, 25, b->host_id, sizeof(b->host_id))) < 0)
		return rc;
	b->status = (int)d->col_i64(row, 2);
	b->end_reason = (int)d->col_i64(row, 3);
	/* NULL (not recorded) reads as 0. */
	b->vcpus = (unsigned int)d->col_i64(row, 5);
	b->memory_mb = (unsigned int)d->col_i64(row, 6);
	b->disk_gb = (unsigned int)d->col_i64(row, 7);
	b->usd_micro_per_hour = d->col_i64(row, 9);
	b->created_at_ms = d->col_i64(row, 10);
	b->ready_at_ms = d->col_i64(row, 11);
	b->expires_at_ms = d->col_i64(row, 12);
	b->destroyed_at_ms = d->col_i64(row, 13);
	b->cost_usd_micro = d->col_i64(row, 14);
	b->network_mode = d->col_null(row, 15) ? SAAS_STORE_NETWORK_UNKNOWN : (int)d->col_i64(row, 15);
	b->paused_at_ms = d->col_i64(row, 16);
	b->paused_ms = d->col_i64(row, 17);
	b->paused_usd_micro_per_hour = d->col_i64(row, 18);
	b->denied_connections = d->col_i64(row, 21);
	b->denied_lookups = d->col_i64(row, 22);
	b->denied_connections_base = d->col_i64(row, 23);
	b->denied_lookups_base = d->col_i64(row, 24);
	b->on_timeout = (int)d->col_i64(row, 26);
	b->auto_resume = (int)d->col_i64(row, 27);
	b->timeout_s = d->col_i64(row, 28);
	return SAAS_OK;
}

static int i64_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	*(int64_t *)out = d->col_i64(row, 0);
	return SAAS_OK;
}

/* The longest key of a value: an environment variable's name. */
#define VALUE_KEY_MAX (SAAS_ENV_NAME_MAX > SAAS_METADATA_KEY_MAX ? SAAS_ENV_NAME_MAX : SAAS_METADATA_KEY_MAX)

/*
 * "KEY=VALUE" strings a sandbox keeps: the core checked them (client.c), the
 * store checks what its columns and buffers depend on (count and sizes); a
 * duplicate key is the primary key's to refuse.
 */
static bool value_ok(const char *kv, size_t key_max, size_t value_max)
{
	const char *eq = strchr(kv, '=');

	return eq && eq != kv && (size_t)(eq - kv) <= key_max && strlen(eq + 1) <= value_max;
}

static int values_check(const char *const *list, size_t max, size_t key_max, size_t value_max, const char *what)
{
	for (size_t n = 0; list && list[n]; n++)
		if (n >= max || !value_ok(list[n], key_max, value_max))
			return saas__inval("sandbox %s entry %zu is not KEY=VALUE within the bounds (or there are over %zu)",
			                   what, n, max);
	return SAAS_OK;
}

/* Split "KEY=VALUE" (checked) into key (VALUE_KEY_MAX + 1 bytes); the value is returned. */
static const char *value_split(const char *kv, char key[VALUE_KEY_MAX + 1])
{
	const char *eq = strchr(kv, '=');
	size_t n = (size_t)(eq - kv);

	memcpy(key, kv, n);
	key[n] = '\0';
	return eq + 1;
}

static int sandbox_check(const saas_store_sandbox *b)
{
	int rc;

	if (!b)
		return saas__inval("sandbox is NULL");
	if ((rc = saas__store_field(b->id, sizeof(b->id), "sandbox id")) < 0 ||
	    (rc = saas__store_field(b->account_id, sizeof(b->account_id), "account id")) < 0 ||
	    (rc = saas__store_field(b->size, sizeof(b->size), "sandbox size")) < 0 ||
	    (rc = saas__store_field(b->image, sizeof(b->image), "sandbox image")) < 0 ||
	    (rc = saas__store_field(b->snapshot, sizeof(b->snapshot), "sandbox snapshot")) < 0 ||
	    (rc = saas__store_field(b->parent_id, sizeof(b->parent_id), "sandbox parent")) < 0 ||
	    (rc = saas__store_field(b->host_id, sizeof(b->host_id), "sandbox host")) < 0)
		return rc;
	if (b->vcpus > INT_MAX || b->memory_mb > INT_MAX || b->disk_gb > INT_MAX)
		return saas__inval("sandbox resources out of range");
	if (b->on_timeout < 0 || b->on_timeout > SAAS_ON_TIMEOUT_PAUSE || b->timeout_s < 0)
		return saas__inval("sandbox on_timeout or timeout out of range");
	if ((rc = values_check(b->metadata, SAAS_METADATA_MAX, SAAS_METADATA_KEY_MAX, SAAS_METADATA_VALUE_MAX,
	                       "metadata")) < 0 ||
	    (rc = values_check(b->envs, SAAS_ENVS_MAX, SAAS_ENV_NAME_MAX, SAAS_ENV_VALUE_MAX, "environment")) < 0)
		return rc;
	return SAAS_OK;
}

/*
 * Inside the caller's write transaction: the account exists and has fewer
 * than `max_live` sandboxes not destroyed. The lock held from the count to
 * the insert is what keeps two engines from both taking the last place.
 */
static int live_check(struct call *c, const char *account_id, unsigned int max_live)
{
	const saas__param p[] = { SAAS__TEXT(account_id) };
	struct fetch f;
	int64_t live;
	int rc;

	rc = fetch_in(c, &q_account_lock, p, 1, id_row, SAAS_ID_MAX + 1, &f);
	free(f.data);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("account", account_id);
	if (rc < 0)
		return rc;
	rc = fetch_in(c, &q_live_count, p, 1, i64_row, sizeof(int64_t), &f);
	live = rc == SAAS_OK && f.n ? *(int64_t *)(void *)f.data : 0;
	free(f.data);
	if (rc == SAAS_OK && live >= (int64_t)max_live)
		rc = saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, 0,
		                 "account '%s' already has %lld live sandboxes; the limit is %u", account_id,
		                 (long long)live, max_live);
	return rc;
}

/* Inside the caller's write transaction, after live_check. */
static int sandbox_write(struct call *c, const saas_store_sandbox *b)
{
	const saas__param p[] = {
		SAAS__TEXT(b->id), SAAS__TEXT(b->account_id), SAAS__I64(b->status), SAAS__I64(b->end_reason),
		SAAS__TEXT(b->size), SAAS__I64(b->vcpus), SAAS__I64(b->memory_mb), SAAS__I64(b->disk_gb),
		SAAS__TEXT(b->image), SAAS__I64(b->usd_micro_per_hour), SAAS__I64(b->created_at_ms),
		SAAS__I64(b->ready_at_ms), SAAS__I64(b->expires_at_ms), SAAS__I64(b->destroyed_at_ms),
		SAAS__I64(b->cost_usd_micro),
		b->network_mode == SAAS_STORE_NETWORK_UNKNOWN ? SAAS__NULL_I64 : SAAS__I64(b->network_mode),
		SAAS__I64(b->paused_at_ms), SAAS__I64(b->paused_ms), SAAS__I64(b->paused_usd_micro_per_hour),
		SAAS__TEXT(b->snapshot), SAAS__TEXT(b->parent_id), SAAS__TEXT(b->host_id),
		SAAS__I64(b->on_timeout), SAAS__I64(b->auto_resume ? 1 : 0), SAAS__I64(b->timeout_s),
	};
	const struct {
		int kind;
		const char *const *list;
	} values[] = { { SAAS_STORE_VALUE_METADATA, b->metadata }, { SAAS_STORE_VALUE_ENV, b->envs } };
	char key[VALUE_KEY_MAX + 1];
	int rc = run(c, &q_sandbox_insert, p, (int)SAAS_ARRAY_SIZE(p), NULL);

	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "sandbox '%.64s' already exists", b->id);
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("account", b->account_id);
	/* In the row's transaction: nobody sees the sandbox without its metadata. */
	for (size_t v = 0; v < SAAS_ARRAY_SIZE(values); v++) {
		for (const char *const *kv = values[v].list; rc == SAAS_OK && kv && *kv; kv++) {
			const char *value = value_split(*kv, key);
			const saas__param vp[] = { SAAS__TEXT(b->id), SAAS__I64(values[v].kind), SAAS__TEXT(key),
				                       SAAS__TEXT(value) };
			if ((rc = run(c, &q_value_insert, vp, 4, NULL)) == SAAS_EEXISTS)
				saas__error_wrap(rc, "sandbox '%.64s': the key '%s' is given twice", b->id, key);
		}
	}
	return rc;
}

int saas__st_sandbox_insert(void *ctx, const saas_store_sandbox *b, unsigned int max_live)
{
	struct call c;
	int rc;

	if ((rc = sandbox_check(b)) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK) {
		if ((rc = live_check(&c, b->account_id, max_live)) == SAAS_OK)
			rc = sandbox_write(&c, b);
		rc = finish(&c, rc);
	}
	leave(&c);
	return rc;
}

int saas__st_sandbox_get(void *ctx, const char *id, saas_store_sandbox *out)
{
	int rc, found;

	if (!id || !out)
		return saas__inval("sandbox id or output is NULL");
	rc = fetch_one(ctx, &q_sandbox_get, &SAAS__TEXT(id), 1, sandbox_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("sandbox", id);
	return rc;
}

/* Append " AND <fragment>" whose one parameter is the next: "$n" stands where `%d` is. */
static int add_cond(saas__buf *sql, saas__param *p, int *n, const char *fragment, saas__param value)
{
	p[(*n)++] = value;
	return saas__buf_printf(sql, fragment, *n);
}

int saas__st_sandbox_list(void *ctx, const saas_store_filter *filter, saas_store_sandbox_fn fn, void *userdata)
{
	static const saas_store_filter all = { 0 };
	saas__buf sql = SAAS__BUF_INIT;
	saas__param p[8 + 2 * SAAS_LIST_METADATA_MAX];
	char keys[SAAS_LIST_METADATA_MAX][VALUE_KEY_MAX + 1];
	saas__sql q = { 0, NULL, NULL, "listing sandboxes", 1 };
	struct fetch f = { 0 };
	size_t npairs = 0;
	int rc, n = 0;

	if (!fn)
		return saas__inval("callback is NULL");
	if (!filter)
		filter = &all;
	for (; filter->metadata && filter->metadata[npairs]; npairs++)
		if (npairs >= SAAS_LIST_METADATA_MAX ||
		    !value_ok(filter->metadata[npairs], SAAS_METADATA_KEY_MAX, SAAS_METADATA_VALUE_MAX))
			return saas__inval("the metadata filter must be at most %d KEY=VALUE pairs within the metadata bounds",
			                   SAAS_LIST_METADATA_MAX);

	/* The text holds only fixed fragments; every value is a parameter. */
	rc = saas__buf_puts(&sql, SANDBOX_SELECT " WHERE 1 = 1");
	if (rc == SAAS_OK && filter->account_id)
		rc = add_cond(&sql, p, &n, " AND account_id = $%d", SAAS__TEXT(filter->account_id));
	if (rc == SAAS_OK && filter->live)
		rc = saas__buf_puts(&sql, filter->live > 0 ? " AND status != 3" : " AND status = 3");
	/* Billing's view: it ran from ready_at until it was destroyed or expired, whichever came first. */
	if (rc == SAAS_OK && (filter->ran_from_ms || filter->ran_to_ms) &&
	    (rc = add_cond(&sql, p, &n, " AND ready_at > 0 AND ready_at < $%d", SAAS__I64(filter->ran_to_ms))) == SAAS_OK)
		rc = add_cond(&sql, p, &n,
		              " AND (status != 3 OR CASE WHEN destroyed_at < expires_at THEN destroyed_at"
		              " ELSE expires_at END > $%d)", SAAS__I64(filter->ran_from_ms));
	if (rc == SAAS_OK && filter->before_id) {
		p[n++] = SAAS__I64(filter->before_created_ms);
		p[n++] = SAAS__TEXT(filter->before_id);
		rc = saas__buf_printf(&sql, " AND (created_at < $%d OR (created_at = $%d AND id < $%d))", n - 1, n - 1, n);
	}
	if (rc == SAAS_OK && filter->host_id)
		rc = add_cond(&sql, p, &n, " AND host_id = $%d", SAAS__TEXT(filter->host_id));
	/* Every pair must match: one lookup of the index sandbox_values_match each. */
	for (size_t i = 0; rc == SAAS_OK && i < npairs; i++) {
		const char *value = value_split(filter->metadata[i], keys[i]);
		p[n++] = SAAS__TEXT(keys[i]);
		p[n++] = SAAS__TEXT(value);
		rc = saas__buf_printf(&sql,
		                      " AND EXISTS (SELECT 1 FROM sandbox_values v WHERE v.sandbox_id = sandboxes.id"
		                      " AND v.kind = %d AND v.key = $%d AND v.value = $%d)",
		                      SAAS_STORE_VALUE_METADATA, n - 1, n);
	}
	if (rc == SAAS_OK)
		rc = saas__buf_puts(&sql, " ORDER BY created_at DESC, id DESC");
	if (rc == SAAS_OK && filter->limit)
		rc = add_cond(&sql, p, &n, " LIMIT $%d", SAAS__I64(filter->limit));
	if (rc == SAAS_OK) {
		q.sql = sql.data;
		rc = fetch(ctx, &q, p, n, sandbox_row, sizeof(saas_store_sandbox), &f);
	}
	saas__buf_free(&sql);
	FOR_EACH(f, saas_store_sandbox, rc, fn, userdata);
	return rc;
}

/* After a change of one sandbox that matched no row: the wrong state, or no such sandbox? */
static int state_or_missing(void *ctx, const char *id, const char *state_msg)
{
	char found_id[SAAS_ID_MAX + 1];
	int rc, found;

	rc = fetch_one(ctx, &q_sandbox_exists, &SAAS__TEXT(id), 1, id_row, sizeof(found_id), found_id, &found);
	if (rc < 0)
		return rc;
	return found ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_STORE, 0, "sandbox '%.64s' %s", id, state_msg)
	             : saas__store_not_found("sandbox", id);
}

/*
 * Run a change of one sandbox whose WHERE clause includes the state it
 * requires (one statement: the check and the change cannot be split); if it
 * matched no row, tell "not found" from "wrong state".
 */
static int sandbox_change(void *ctx, const saas__sql *q, const saas__param *p, int n, const char *state_msg)
{
	int64_t changed = 0;
	int rc;

	if (!p[0].text)
		return saas__inval("sandbox id is NULL");
	rc = run1(ctx, q, p, n, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = state_or_missing(ctx, p[0].text, state_msg);
	return rc;
}

int saas__st_sandbox_set_ready(void *ctx, const char *id, int64_t ready_at_ms, int64_t expires_at_ms)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(ready_at_ms), SAAS__I64(expires_at_ms) };

	return sandbox_change(ctx, &q_sandbox_set_ready, p, 3, "is not being created");
}

int saas__st_sandbox_set_expiry(void *ctx, const char *id, int64_t expires_at_ms)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(expires_at_ms) };

	return sandbox_change(ctx, &q_sandbox_set_expiry, p, 2, "is being created or was destroyed");
}

int saas__st_sandbox_delete(void *ctx, const char *id)
{
	return sandbox_change(ctx, &q_sandbox_delete, &SAAS__TEXT(id), 1, "is not being created");
}

/* The states a pause, a resume or a fork moves a sandbox between (never creating or destroyed). */
static bool movable_state(int status)
{
	return status == SAAS_SANDBOX_READY || status == SAAS_SANDBOX_PAUSED || status == SAAS_SANDBOX_PAUSING ||
	       status == SAAS_SANDBOX_RESUMING;
}

int saas__st_sandbox_set_state(void *ctx, const char *id, int from, const saas_store_sandbox *to)
{
	char msg[64];
	int rc;

	if (!id || !to)
		return saas__inval("sandbox id or state is NULL");
	if (!movable_state(from) || !movable_state(to->status))
		return saas__inval("sandbox state %d -> %d is not a pause, resume or fork step", from, to->status);
	if ((rc = saas__store_field(to->snapshot, sizeof(to->snapshot), "sandbox snapshot")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(id), SAAS__I64(from), SAAS__I64(to->status), SAAS__I64(to->paused_at_ms),
		SAAS__I64(to->paused_ms), SAAS__TEXT(to->snapshot),
	};
	snprintf(msg, sizeof(msg), "is no longer %s", saas_sandbox_status_name(from));
	return sandbox_change(ctx, &q_sandbox_set_state, p, 6, msg);
}

int saas__st_sandbox_close(void *ctx, const char *id, int end_reason, int64_t destroyed_at_ms, int64_t cost,
                           int64_t if_expires_at_ms, int *closed)
{
	const saas__param p[] = {
		SAAS__TEXT(id), SAAS__I64(end_reason), SAAS__I64(destroyed_at_ms), SAAS__I64(cost),
		SAAS__I64(if_expires_at_ms > 0 ? if_expires_at_ms : 0),
	};
	const saas__param charge[] = { SAAS__TEXT(id), SAAS__I64(cost), SAAS__I64(destroyed_at_ms) };
	struct call c;
	int64_t changed = 0, status = 0;
	int rc, found;

	if (!id || !closed)
		return saas__inval("sandbox id or output is NULL");
	if (cost < 0)
		return saas__inval("cost is negative");
	*closed = 0;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	/* The close and its charge in one transaction: both or neither. */
	if ((rc = begin(&c)) == SAAS_OK) {
		if ((rc = run(&c, &q_sandbox_close, p, 5, &changed)) == SAAS_OK && changed > 0 && cost > 0)
			rc = run(&c, &q_sandbox_charge, charge, 3, NULL);
		/* Closed already (or not found): that transaction changed nothing. */
		if (rc == SAAS_OK && changed == 0)
			c.d->rollback(c.conn);
		else if ((rc = finish(&c, rc)) == SAAS_OK)
			*closed = 1;
	}
	leave(&c);
	if (rc < 0 || *closed)
		return rc;
	if ((rc = fetch_one(ctx, &q_sandbox_status, p, 1, i64_row, sizeof(status), &status, &found)) < 0)
		return rc;
	if (!found)
		return saas__store_not_found("sandbox", id);
	if (status != SAAS_SANDBOX_DESTROYED)
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_STORE, 0, "sandbox '%.64s' has a new expiry; not closed", id);
	return SAAS_OK;
}

/* A sandbox value as read: its kind and "KEY\0VALUE" in one allocation. */
struct value_rec {
	int kind;
	char *kv;
	size_t klen;
};

static int value_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct value_rec *v = out;
	size_t kn = 0, vn = 0;
	const char *k = d->col_text(row, 1, &kn), *val = d->col_text(row, 2, &vn);

	v->kind = (int)d->col_i64(row, 0);
	if (!(v->kv = malloc(kn + vn + 2)))
		return saas__oom();
	if (kn)
		memcpy(v->kv, k, kn);
	v->kv[kn] = '\0';
	if (vn)
		memcpy(v->kv + kn + 1, val, vn);
	v->kv[kn + 1 + vn] = '\0';
	v->klen = kn;
	return SAAS_OK;
}

int saas__st_sandbox_values(void *ctx, const char *id, saas_store_value_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "sandbox id")) < 0)
		return rc;
	if (!fn)
		return saas__inval("callback is NULL");
	rc = fetch(ctx, &q_values_get, &SAAS__TEXT(id), 1, value_row, sizeof(struct value_rec), &f);
	for (size_t i = 0; i < f.n; i++) {
		struct value_rec *v = (struct value_rec *)(void *)(f.data + i * f.elem);
		/* After a row that failed (out of memory), the rest are only freed. */
		if (rc == SAAS_OK && v->kv && fn(userdata, v->kind, v->kv, v->kv + v->klen + 1) != 0)
			rc = 1;
		free(v->kv);
	}
	free(f.data);
	return rc == 1 ? SAAS_OK : rc;
}

/* Two text columns, malloc()ed. */
struct texts {
	char *a, *b;
};

static int texts_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct texts *t = out;
	size_t n;
	const char *a = d->col_text(row, 0, &n), *b = d->col_text(row, 1, &n);

	if (!(t->a = saas__strdup(a ? a : "")) || !(t->b = saas__strdup(b ? b : "")))
		return saas__oom();
	return SAAS_OK;
}

int saas__st_sandbox_network_get(void *ctx, const char *id, char **allow, char **deny)
{
	struct fetch f;
	int rc;

	if (!id || !allow || !deny)
		return saas__inval("sandbox id or output is NULL");
	*allow = *deny = NULL;
	rc = fetch(ctx, &q_network_get, &SAAS__TEXT(id), 1, texts_row, sizeof(struct texts), &f);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("sandbox", id);
	for (size_t i = 0; i < f.n; i++) {
		struct texts *t = (struct texts *)(void *)(f.data + i * f.elem);

		if (rc == SAAS_OK && i == 0) {
			*allow = t->a;
			*deny = t->b;
		} else {
			free(t->a);
			free(t->b);
		}
	}
	free(f.data);
	return rc;
}

int saas__st_sandbox_network_set(void *ctx, const char *id, int mode, const char *allow, const char *deny)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(mode), SAAS__TEXT(allow), SAAS__TEXT(deny) };

	if (!id || !allow || !deny)
		return saas__inval("sandbox id or rules are NULL");
	return sandbox_change(ctx, &q_network_set, p, 4, "was destroyed");
}

/* A change that every row it matches counts as changed, even with the same values: 0 is no such sandbox. */
static int sandbox_update(void *ctx, const saas__sql *q, const saas__param *p, int n)
{
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_arg(p[0].text, SAAS_ID_MAX, "sandbox id")) < 0)
		return rc;
	rc = run1(ctx, q, p, n, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = saas__store_not_found("sandbox", p[0].text);
	return rc;
}

int saas__st_sandbox_egress_record(void *ctx, const char *id, int64_t connections, int64_t lookups)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(connections), SAAS__I64(lookups) };

	return sandbox_update(ctx, &q_egress_record, p, 3);
}

int saas__st_sandbox_egress_rebase(void *ctx, const char *id)
{
	return sandbox_update(ctx, &q_egress_rebase, &SAAS__TEXT(id), 1);
}

/* ---- executions ---- */

/* An execution is recorded when it starts; execution_finish records the rest. */
static const saas__sql q_execution_insert = {
	Q_EXECUTION_INSERT,
	"INSERT INTO executions (id, sandbox_id, account_id, status, exit_code, command, started_at)"
	" VALUES ($1, $2, $3, 1, -1, $4, $5)", NULL, "inserting an execution", 0
};
static const saas__sql q_execution_finish = {
	Q_EXECUTION_FINISH,
	"UPDATE executions SET status = $2, exit_code = $3, stdout = $4, stderr = $5, stdout_truncated = $6,"
	" stderr_truncated = $7, error = $8, finished_at = $9 WHERE id = $1", NULL, "finishing an execution", 0
};
static const saas__sql q_execution_get = {
	.id = Q_EXECUTION_GET,
	.sql = "SELECT id, sandbox_id, account_id, status, exit_code, command, stdout, stderr, stdout_truncated,"
	       " stderr_truncated, error, started_at, finished_at FROM executions WHERE id = $1",
	.what = "reading an execution",
	.read = 1,
	.binary = 1,
};
/* executions_sandbox_status (sandbox_id, status) narrows to the sandbox; its rows are few (pruned). */
static const saas__sql q_execution_list = {
	Q_EXECUTION_LIST,
	"SELECT id, sandbox_id, account_id, status, exit_code, command, NULL, NULL, stdout_truncated,"
	" stderr_truncated, error, started_at, finished_at FROM executions WHERE sandbox_id = $1"
	" AND ($3 IS NULL OR started_at < $2 OR (started_at = $2 AND id < $3))"
	" ORDER BY started_at DESC, id DESC LIMIT $4", NULL, "listing executions", 1
};
static const saas__sql q_execution_fail = {
	Q_EXECUTION_FAIL,
	"UPDATE executions SET status = $2, error = $3, finished_at = $4 WHERE sandbox_id = $1 AND status = 1", NULL,
	"failing running executions", 0
};
/* finished_at > 0: a running execution (0) is never old enough. */
static const saas__sql q_execution_prune = {
	Q_EXECUTION_PRUNE,
	"DELETE FROM executions WHERE id IN (SELECT id FROM executions"
	" WHERE finished_at > 0 AND finished_at < $1 AND status != 1 LIMIT $2)", NULL, "pruning executions", 0
};

static void execution_free(saas_store_execution *e)
{
	free(e->command);
	free(e->stdout_data);
	free(e->stderr_data);
	free(e->error);
	e->command = e->stdout_data = e->stderr_data = e->error = NULL;
}

/* A malloc()ed copy of a column with a NUL after it; SQL NULL stays NULL if `keep_null`, else "". */
static int get_dup(const struct saas__dialect *d, const saas__row *row, int col, int keep_null, char **out,
                   size_t *len)
{
	size_t n = 0;
	const char *t = d->col_text(row, col, &n);

	*out = NULL;
	if (len)
		*len = 0;
	if (!t && keep_null)
		return SAAS_OK;
	if (!(*out = malloc(n + 1)))
		return saas__oom();
	if (n)
		memcpy(*out, t, n);
	(*out)[n] = '\0';
	if (len)
		*len = n;
	return SAAS_OK;
}

/* The columns of q_execution_get; a list has NULL output columns, left NULL. */
static int execution_row(const struct saas__dialect *d, const saas__row *row, void *out, int output)
{
	saas_store_execution *e = out;
	int rc;

	if ((rc = get_text(d, row, 0, e->id, sizeof(e->id))) < 0 ||
	    (rc = get_text(d, row, 1, e->sandbox_id, sizeof(e->sandbox_id))) < 0 ||
	    (rc = get_text(d, row, 2, e->account_id, sizeof(e->account_id))) < 0 ||
	    (rc = get_dup(d, row, 5, 0, &e->command, NULL)) < 0 ||
	    (output && (rc = get_dup(d, row, 6, 0, &e->stdout_data, &e->stdout_len)) < 0) ||
	    (output && (rc = get_dup(d, row, 7, 0, &e->stderr_data, &e->stderr_len)) < 0) ||
	    (rc = get_dup(d, row, 10, 1, &e->error, NULL)) < 0) {
		execution_free(e);
		return rc;
	}
	e->status = (int)d->col_i64(row, 3);
	e->exit_code = (int)d->col_i64(row, 4);
	e->stdout_truncated = (int)d->col_i64(row, 8);
	e->stderr_truncated = (int)d->col_i64(row, 9);
	e->started_at_ms = d->col_i64(row, 11);
	e->finished_at_ms = d->col_i64(row, 12);
	return SAAS_OK;
}

static int execution_full_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return execution_row(d, row, out, 1);
}

static int execution_list_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return execution_row(d, row, out, 0);
}

/* Free the records of a fetch of executions. */
static void executions_free(struct fetch *f)
{
	for (size_t i = 0; i < f->n; i++)
		execution_free((saas_store_execution *)(void *)(f->data + i * f->elem));
	free(f->data);
	f->data = NULL;
	f->n = 0;
}

int saas__st_execution_insert(void *ctx, const saas_store_execution *e)
{
	int rc;

	if (!e || !e->command)
		return saas__inval("execution or its command is NULL");
	if ((rc = saas__store_field(e->id, sizeof(e->id), "execution id")) < 0 ||
	    (rc = saas__store_field(e->sandbox_id, sizeof(e->sandbox_id), "sandbox id")) < 0 ||
	    (rc = saas__store_field(e->account_id, sizeof(e->account_id), "account id")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(e->id), SAAS__TEXT(e->sandbox_id), SAAS__TEXT(e->account_id), SAAS__TEXT(e->command),
		SAAS__I64(e->started_at_ms),
	};
	rc = run1(ctx, &q_execution_insert, p, 5, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "execution '%.64s' already exists", e->id);
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("sandbox", e->sandbox_id);
	return rc;
}

/* Output is whatever the command wrote, NUL bytes included; an empty one is stored as NULL. */
static saas__param output_param(const char *data, size_t len)
{
	return (saas__param){ .type = SAAS__P_BLOB, .text = len ? data : NULL, .len = len };
}

int saas__st_execution_finish(void *ctx, const saas_store_execution *e)
{
	int64_t changed = 0;
	int rc;

	if (!e)
		return saas__inval("execution is NULL");
	if ((e->stdout_len && !e->stdout_data) || (e->stderr_len && !e->stderr_data))
		return saas__inval("execution output has a length but no data");
	if (e->stdout_len > INT_MAX || e->stderr_len > INT_MAX)
		return saas__inval("execution output is too long");
	if ((rc = saas__store_field(e->id, sizeof(e->id), "execution id")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(e->id), SAAS__I64(e->status), SAAS__I64(e->exit_code),
		output_param(e->stdout_data, e->stdout_len), output_param(e->stderr_data, e->stderr_len),
		SAAS__I64(e->stdout_truncated ? 1 : 0), SAAS__I64(e->stderr_truncated ? 1 : 0), SAAS__TEXT(e->error),
		SAAS__I64(e->finished_at_ms),
	};
	rc = run1(ctx, &q_execution_finish, p, 9, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = saas__store_not_found("execution", e->id);
	return rc;
}

int saas__st_execution_get(void *ctx, const char *id, saas_store_execution *out)
{
	struct fetch f;
	int rc;

	if (!id || !out)
		return saas__inval("execution id or output is NULL");
	rc = fetch(ctx, &q_execution_get, &SAAS__TEXT(id), 1, execution_full_row, sizeof(*out), &f);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("execution", id);
	if (rc == SAAS_OK) {
		/* The first row's memory becomes the caller's. */
		memcpy(out, f.data, sizeof(*out));
		memset(f.data, 0, sizeof(*out));
	}
	executions_free(&f);
	return rc;
}

int saas__st_execution_list(void *ctx, const char *sandbox_id, int64_t before_started_ms, const char *before_id,
                            unsigned int limit, saas_store_execution_fn fn, void *userdata)
{
	/* A NULL before_id is no cursor; no limit is the largest one, which both dialects take. */
	const saas__param p[] = {
		SAAS__TEXT(sandbox_id), SAAS__I64(before_started_ms), SAAS__TEXT(before_id),
		SAAS__I64(limit ? (int64_t)limit : INT64_MAX),
	};
	struct fetch f;
	int rc;

	if (!sandbox_id || !fn)
		return saas__inval("sandbox id or callback is NULL");
	rc = fetch(ctx, &q_execution_list, p, 4, execution_list_row, sizeof(saas_store_execution), &f);
	for (size_t i = 0; rc == SAAS_OK && i < f.n; i++)
		if (fn(userdata, (const saas_store_execution *)(void *)(f.data + i * f.elem)) != 0)
			break;
	executions_free(&f);
	return rc;
}

int saas__st_execution_fail_running(void *ctx, const char *sandbox_id, const char *error, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(sandbox_id), SAAS__I64(SAAS_EXEC_FAILED), SAAS__TEXT(error),
		                  SAAS__I64(at_ms) };
	int rc;

	if (!sandbox_id)
		return saas__inval("sandbox id is NULL");
	rc = run1(ctx, &q_execution_fail, p, 4, NULL);
	return rc;
}

int saas__st_execution_prune(void *ctx, int64_t finished_before_ms, unsigned int max, unsigned int *pruned)
{
	const saas__param p[] = { SAAS__I64(finished_before_ms), SAAS__I64(max) };
	int64_t changed = 0;
	int rc;

	if (!pruned)
		return saas__inval("pruned is NULL");
	*pruned = 0;
	rc = run1(ctx, &q_execution_prune, p, 2, &changed);
	if (rc == SAAS_OK)
		*pruned = (unsigned int)changed;
	return rc;
}

/* ---- account limits ---- */

/* Through accounts, so that "no such account" and "nothing set" differ. NULLs read as 0. */
static const saas__sql q_limits_get = {
	Q_LIMITS_GET,
	"SELECT l.max_sandboxes, l.max_executions, l.creates_per_minute, l.requests_per_second"
	" FROM accounts a LEFT JOIN account_limits l ON l.account_id = a.id WHERE a.id = $1", NULL,
	"reading account limits", 1
};
static const saas__sql q_limits_set = {
	Q_LIMITS_SET,
	"INSERT INTO account_limits (account_id, max_sandboxes, max_executions, creates_per_minute,"
	" requests_per_second, updated_at) VALUES ($1, $2, $3, $4, $5, $6)"
	" ON CONFLICT (account_id) DO UPDATE SET max_sandboxes = excluded.max_sandboxes,"
	" max_executions = excluded.max_executions, creates_per_minute = excluded.creates_per_minute,"
	" requests_per_second = excluded.requests_per_second, updated_at = excluded.updated_at", NULL,
	"setting account limits", 0
};

static int limits_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_limits *l = out;

	l->max_sandboxes = (unsigned int)d->col_i64(row, 0);
	l->max_executions = (unsigned int)d->col_i64(row, 1);
	l->creates_per_minute = (unsigned int)d->col_i64(row, 2);
	l->requests_per_second = (unsigned int)d->col_i64(row, 3);
	return SAAS_OK;
}

int saas__st_limits_get(void *ctx, const char *account_id, saas_store_limits *out)
{
	int rc, found;

	if (!account_id || !out)
		return saas__inval("account id or output is NULL");
	rc = fetch_one(ctx, &q_limits_get, &SAAS__TEXT(account_id), 1, limits_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("account", account_id);
	return rc;
}

int saas__st_limits_set(void *ctx, const char *account_id, const saas_store_limits *l, int64_t at_ms)
{
	int rc;

	if ((rc = saas__store_arg(account_id, SAAS_ID_MAX, "account id")) < 0)
		return rc;
	if (!l)
		return saas__inval("limits are NULL");
	const saas__param p[] = {
		SAAS__TEXT(account_id), SAAS__I64(l->max_sandboxes), SAAS__I64(l->max_executions),
		SAAS__I64(l->creates_per_minute), SAAS__I64(l->requests_per_second), SAAS__I64(at_ms),
	};
	rc = run1(ctx, &q_limits_set, p, 6, NULL);
	/* The only foreign key is the account. */
	if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("account", account_id);
	return rc;
}

/* ---- ports ---- */

#define PORT_SELECT "SELECT sandbox_id, port, name, created_at FROM ports"

/* Exposing a port twice is success; the first row is the one kept. A taken name is not. */
static const saas__sql q_port_insert = {
	Q_PORT_INSERT,
	"INSERT INTO ports (sandbox_id, port, name, created_at) VALUES ($1, $2, $3, $4)"
	" ON CONFLICT (sandbox_id, port) DO NOTHING", NULL, "exposing a port", 0
};
static const saas__sql q_port_list = {
	Q_PORT_LIST, PORT_SELECT " WHERE sandbox_id = $1 ORDER BY port", NULL, "listing ports", 1
};
static const saas__sql q_port_find = { Q_PORT_FIND, PORT_SELECT " WHERE name = $1", NULL, "finding a port", 1 };
static const saas__sql q_port_delete = {
	Q_PORT_DELETE, "DELETE FROM ports WHERE sandbox_id = $1 AND port = $2", NULL, "un-exposing a port", 0
};

static int port_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_port *p = out;
	int rc;

	if ((rc = get_text(d, row, 0, p->sandbox_id, sizeof(p->sandbox_id))) < 0 ||
	    (rc = get_text(d, row, 2, p->name, sizeof(p->name))) < 0)
		return rc;
	p->port = (unsigned int)d->col_i64(row, 1);
	p->created_at_ms = d->col_i64(row, 3);
	return SAAS_OK;
}

int saas__st_port_insert(void *ctx, const saas_store_port *port)
{
	int rc;

	if (!port)
		return saas__inval("port is NULL");
	if ((rc = saas__store_field(port->sandbox_id, sizeof(port->sandbox_id), "sandbox id")) < 0 ||
	    (rc = saas__store_field(port->name, sizeof(port->name), "port name")) < 0)
		return rc;
	if (port->port < 1 || port->port > 65535)
		return saas__inval("port %u is not in 1-65535", port->port);
	const saas__param p[] = {
		SAAS__TEXT(port->sandbox_id), SAAS__I64(port->port), SAAS__TEXT(port->name),
		SAAS__I64(port->created_at_ms),
	};
	rc = run1(ctx, &q_port_insert, p, 4, NULL);
	/* The name is a capability: never echo it. */
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "another exposed port has this name");
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("sandbox", port->sandbox_id);
	return rc;
}

int saas__st_port_list(void *ctx, const char *sandbox_id, saas_store_port_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!sandbox_id || !fn)
		return saas__inval("sandbox id or callback is NULL");
	rc = fetch(ctx, &q_port_list, &SAAS__TEXT(sandbox_id), 1, port_row, sizeof(saas_store_port), &f);
	FOR_EACH(f, saas_store_port, rc, fn, userdata);
	return rc;
}

int saas__st_port_find(void *ctx, const char *name, saas_store_port *out)
{
	int rc, found;

	if (!name || !out)
		return saas__inval("port name or output is NULL");
	rc = fetch_one(ctx, &q_port_find, &SAAS__TEXT(name), 1, port_row, sizeof(*out), out, &found);
	/* The name is a capability: never echo it. */
	if (rc == SAAS_OK && !found)
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no exposed port by that name");
	return rc;
}

int saas__st_port_delete(void *ctx, const char *sandbox_id, unsigned int port)
{
	const saas__param p[] = { SAAS__TEXT(sandbox_id), SAAS__I64(port) };
	int rc;

	if ((rc = saas__store_arg(sandbox_id, SAAS_ID_MAX, "sandbox id")) < 0)
		return rc;
	rc = run1(ctx, &q_port_delete, p, 2, NULL);
	return rc;
}

/* ---- people: disabled accounts, users, sessions, invites ---- */

/* A second disabling keeps the first time: it is when the account stopped. Every matched row counts. */
static const saas__sql q_account_disable = {
	Q_ACCOUNT_DISABLE,
	"UPDATE accounts SET disabled_at = CASE WHEN $2 = 0 OR disabled_at = 0 THEN $2 ELSE disabled_at END"
	" WHERE id = $1", NULL, "disabling an account", 0
};
static const saas__sql q_sessions_of_account = {
	Q_SESSIONS_OF_ACCOUNT, "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE account_id = $1)",
	NULL, "ending sessions", 0
};
static const saas__sql q_invite_take = {
	Q_INVITE_TAKE, "UPDATE invites SET used_at = $2, used_by = $3 WHERE hash = $1 AND used_at = 0", NULL,
	"taking an invite", 0
};
static const saas__sql q_user_insert = {
	Q_USER_INSERT,
	"INSERT INTO users (id, account_id, email, password_hash, is_operator, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
	NULL, "inserting a user", 0
};
#define USER_COLUMNS "u.id, u.account_id, u.email, u.password_hash, u.is_operator, u.created_at, a.disabled_at"
#define USER_SELECT "SELECT " USER_COLUMNS " FROM users u JOIN accounts a ON a.id = u.account_id"
static const saas__sql q_user_find = { Q_USER_FIND, USER_SELECT " WHERE u.email = $1", NULL, "finding a user", 1 };
static const saas__sql q_user_list = {
	Q_USER_LIST, USER_SELECT " ORDER BY u.created_at, u.id", NULL, "listing users", 1
};
/* NULL keeps a field; every matched row counts, so none changed is no such user. */
static const saas__sql q_user_update = {
	Q_USER_UPDATE,
	"UPDATE users SET password_hash = COALESCE($2, password_hash), is_operator = COALESCE($3, is_operator)"
	" WHERE id = $1", NULL, "changing a user", 0
};
static const saas__sql q_sessions_of_user = {
	Q_SESSIONS_OF_USER, "DELETE FROM sessions WHERE user_id = $1", NULL, "ending sessions", 0
};
static const saas__sql q_session_insert = {
	Q_SESSION_INSERT, "INSERT INTO sessions (hash, user_id, created_at, last_seen_at) VALUES ($1, $2, $3, $4)", NULL,
	"inserting a session", 0
};
static const saas__sql q_session_find = {
	Q_SESSION_FIND,
	"SELECT x.hash, x.created_at, x.last_seen_at, " USER_COLUMNS " FROM sessions x"
	" JOIN users u ON u.id = x.user_id JOIN accounts a ON a.id = u.account_id WHERE x.hash = $1", NULL,
	"finding a session", 1
};
static const saas__sql q_session_touch = {
	Q_SESSION_TOUCH, "UPDATE sessions SET last_seen_at = $2 WHERE hash = $1 AND last_seen_at < $2", NULL,
	"touching a session", 0
};
static const saas__sql q_session_delete = {
	Q_SESSION_DELETE, "DELETE FROM sessions WHERE hash = $1", NULL, "ending a session", 0
};
static const saas__sql q_session_prune = {
	Q_SESSION_PRUNE, "DELETE FROM sessions WHERE created_at < $1 OR last_seen_at < $2", NULL, "pruning sessions", 0
};
static const saas__sql q_invite_insert = {
	Q_INVITE_INSERT, "INSERT INTO invites (hash, created_at) VALUES ($1, $2)", NULL, "inserting an invite", 0
};


int saas__st_account_disable(void *ctx, const char *account_id, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(account_id), SAAS__I64(at_ms) };
	struct call c;
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_arg(account_id, SAAS_ID_MAX, "account id")) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	/* Disabling ends its users' sessions in the same transaction. */
	if ((rc = begin(&c)) == SAAS_OK) {
		if ((rc = run(&c, &q_account_disable, p, 2, &changed)) == SAAS_OK && changed == 0)
			rc = saas__store_not_found("account", account_id);
		if (rc == SAAS_OK && at_ms)
			rc = run(&c, &q_sessions_of_account, p, 1, NULL);
		rc = finish(&c, rc);
	}
	leave(&c);
	return rc;
}

static int user_check(const saas_store_user *u)
{
	int rc;

	if (!u)
		return saas__inval("user is NULL");
	if ((rc = saas__store_field(u->id, sizeof(u->id), "user id")) < 0 ||
	    (rc = saas__store_field(u->account_id, sizeof(u->account_id), "account id")) < 0 ||
	    (rc = saas__store_field(u->email, sizeof(u->email), "e-mail")) < 0 ||
	    (rc = saas__store_field(u->password_hash, sizeof(u->password_hash), "password hash")) < 0)
		return rc;
	return SAAS_OK;
}

/* The invite, the account and the user, inside the caller's transaction. */
static int user_insert_in(struct call *c, const saas_store_user *user, const saas_store_account *account,
                          int64_t credit, const char *invite_hash)
{
	const saas__param invite[] = { SAAS__TEXT(invite_hash), SAAS__I64(user->created_at_ms), SAAS__TEXT(user->id) };
	const saas__param p[] = {
		SAAS__TEXT(user->id), SAAS__TEXT(user->account_id), SAAS__TEXT(user->email),
		SAAS__TEXT(user->password_hash), SAAS__I64(user->is_operator ? 1 : 0), SAAS__I64(user->created_at_ms),
	};
	int64_t taken = 0;
	int rc;

	if (invite_hash) {
		if ((rc = run(c, &q_invite_take, invite, 3, &taken)) < 0)
			return rc;
		if (taken == 0)
			return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no unused invite with that code");
	}
	if (account && (rc = account_insert_in(c, account, credit)) < 0)
		return rc;
	rc = run(c, &q_user_insert, p, 6, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "that user already exists");
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("account", user->account_id);
	return rc;
}

int saas__st_user_insert(void *ctx, const saas_store_user *user, const saas_store_account *account, int64_t credit,
                         const char *invite_hash)
{
	struct call c;
	int rc;

	if ((rc = user_check(user)) < 0 || (account && (rc = account_check(account, credit)) < 0))
		return rc;
	if (invite_hash && (rc = saas__store_arg(invite_hash, SAAS_STORE_HASH_HEX, "invite hash")) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, user_insert_in(&c, user, account, credit, invite_hash));
	leave(&c);
	return rc;
}

/* A user from USER_COLUMNS, starting at column `c`. */
static int user_cols(const struct saas__dialect *d, const saas__row *row, int c, saas_store_user *u)
{
	int rc;

	if ((rc = get_text(d, row, c, u->id, sizeof(u->id))) < 0 ||
	    (rc = get_text(d, row, c + 1, u->account_id, sizeof(u->account_id))) < 0 ||
	    (rc = get_text(d, row, c + 2, u->email, sizeof(u->email))) < 0 ||
	    (rc = get_text(d, row, c + 3, u->password_hash, sizeof(u->password_hash))) < 0)
		return rc;
	u->is_operator = d->col_i64(row, c + 4) != 0;
	u->created_at_ms = d->col_i64(row, c + 5);
	u->disabled_at_ms = d->col_i64(row, c + 6);
	return SAAS_OK;
}

static int user_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return user_cols(d, row, 0, out);
}

static int session_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_session *x = out;
	int rc;

	if ((rc = get_text(d, row, 0, x->hash, sizeof(x->hash))) < 0)
		return rc;
	x->created_at_ms = d->col_i64(row, 1);
	x->last_seen_at_ms = d->col_i64(row, 2);
	return user_cols(d, row, 3, &x->user);
}

int saas__st_user_find(void *ctx, const char *email, saas_store_user *out)
{
	int rc, found;

	if (!email || !out)
		return saas__inval("e-mail or output is NULL");
	rc = fetch_one(ctx, &q_user_find, &SAAS__TEXT(email), 1, user_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("user", email);
	return rc;
}

int saas__st_user_list(void *ctx, saas_store_user_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!fn)
		return saas__inval("callback is NULL");
	rc = fetch(ctx, &q_user_list, NULL, 0, user_row, sizeof(saas_store_user), &f);
	FOR_EACH(f, saas_store_user, rc, fn, userdata);
	return rc;
}

int saas__st_user_update(void *ctx, const char *user_id, const char *password_hash, int is_operator)
{
	const saas__param p[] = {
		SAAS__TEXT(user_id), SAAS__TEXT(password_hash),
		is_operator < 0 ? SAAS__NULL_I64 : SAAS__I64(is_operator ? 1 : 0),
	};
	struct call c;
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_arg(user_id, SAAS_ID_MAX, "user id")) < 0 ||
	    (password_hash && (rc = saas__store_arg(password_hash, SAAS_STORE_PASSWORD_HASH_MAX, "password hash")) < 0))
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK) {
		if ((rc = run(&c, &q_user_update, p, 3, &changed)) == SAAS_OK && changed == 0)
			rc = saas__store_not_found("user", user_id);
		/* Whoever knew the old password is logged out with it. */
		if (rc == SAAS_OK && password_hash)
			rc = run(&c, &q_sessions_of_user, p, 1, NULL);
		rc = finish(&c, rc);
	}
	leave(&c);
	return rc;
}

int saas__st_session_insert(void *ctx, const saas_store_session *session)
{
	int rc;

	if (!session)
		return saas__inval("session is NULL");
	if ((rc = saas__store_field(session->hash, sizeof(session->hash), "session hash")) < 0 ||
	    (rc = saas__store_field(session->user.id, sizeof(session->user.id), "user id")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(session->hash), SAAS__TEXT(session->user.id), SAAS__I64(session->created_at_ms),
		SAAS__I64(session->last_seen_at_ms),
	};
	rc = run1(ctx, &q_session_insert, p, 4, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "that session already exists");
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("user", session->user.id);
	return rc;
}

int saas__st_session_find(void *ctx, const char *hash, saas_store_session *out)
{
	int rc, found;

	if (!hash || !out)
		return saas__inval("session hash or output is NULL");
	rc = fetch_one(ctx, &q_session_find, &SAAS__TEXT(hash), 1, session_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no session with that hash");
	return rc;
}

int saas__st_session_touch(void *ctx, const char *hash, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(hash), SAAS__I64(at_ms) };
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "session hash")) < 0)
		return rc;
	return run1(ctx, &q_session_touch, p, 2, NULL);
}

int saas__st_session_delete(void *ctx, const char *hash)
{
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "session hash")) < 0)
		return rc;
	return run1(ctx, &q_session_delete, &SAAS__TEXT(hash), 1, NULL);
}

int saas__st_session_prune(void *ctx, int64_t created_before_ms, int64_t seen_before_ms)
{
	const saas__param p[] = { SAAS__I64(created_before_ms), SAAS__I64(seen_before_ms) };

	return run1(ctx, &q_session_prune, p, 2, NULL);
}

int saas__st_invite_insert(void *ctx, const char *hash, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(hash), SAAS__I64(at_ms) };
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "invite hash")) < 0)
		return rc;
	rc = run1(ctx, &q_invite_insert, p, 2, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "that invite already exists");
	return rc;
}

/* ---- leases ---- */

/*
 * One statement: a free or run-out lease is taken, the holder's own is
 * renewed, and another holder's that runs on is left alone (no row
 * changed). No read-then-write window for a second engine to slip into:
 * two engines racing for one lease are serialised on its row (or its key).
 */
static const saas__sql q_lease_take = {
	Q_LEASE_TAKE,
	"INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $4)"
	" ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at"
	" WHERE leases.holder = excluded.holder OR leases.expires_at <= $3", NULL, "taking a lease", 0
};
static const saas__sql q_lease_release = {
	Q_LEASE_RELEASE, "DELETE FROM leases WHERE name = $1 AND holder = $2", NULL, "releasing a lease", 0
};
static const saas__sql q_lease_get = {
	Q_LEASE_GET, "SELECT holder, expires_at FROM leases WHERE name = $1", NULL, "reading a lease", 1
};

struct lease {
	char holder[SAAS_STORE_HOLDER_MAX + 1];
	int64_t expires_at_ms;
};

static int lease_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct lease *l = out;

	l->expires_at_ms = d->col_i64(row, 1);
	return get_text(d, row, 0, l->holder, sizeof(l->holder));
}

int saas__st_lease_take(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms, int *held)
{
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0 || (rc = saas__store_lease_time_check(now_ms, ttl_ms)) < 0)
		return rc;
	if (!held)
		return saas__inval("output is NULL");
	*held = 0;
	const saas__param p[] = { SAAS__TEXT(name), SAAS__TEXT(holder), SAAS__I64(now_ms), SAAS__I64(now_ms + ttl_ms) };
	rc = run1(ctx, &q_lease_take, p, 4, &changed);
	*held = rc == SAAS_OK && changed > 0;
	return rc;
}

int saas__st_lease_release(void *ctx, const char *name, const char *holder)
{
	const saas__param p[] = { SAAS__TEXT(name), SAAS__TEXT(holder) };
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0)
		return rc;
	return run1(ctx, &q_lease_release, p, 2, NULL);
}

int saas__st_lease_get(void *ctx, const char *name, char *holder, int64_t *expires_at_ms)
{
	struct lease l;
	int rc, found;

	if ((rc = saas__store_arg(name, SAAS_STORE_LEASE_NAME_MAX, "lease name")) < 0)
		return rc;
	if (!holder || !expires_at_ms)
		return saas__inval("output is NULL");
	if ((rc = fetch_one(ctx, &q_lease_get, &SAAS__TEXT(name), 1, lease_row, sizeof(l), &l, &found)) < 0)
		return rc;
	if (!found)
		return saas__store_not_found("lease", name);
	memcpy(holder, l.holder, sizeof(l.holder));
	*expires_at_ms = l.expires_at_ms;
	return SAAS_OK;
}

/* ---- VM hosts ---- */

#define HOST_SELECT \
	"SELECT id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb," \
	" created_at, last_seen_at, state_at FROM hosts"

static const saas__sql q_host_insert = {
	Q_HOST_INSERT,
	"INSERT INTO hosts (id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb,"
	" created_at, last_seen_at, state_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", NULL,
	"inserting a host", 0
};
/* An id wins over a name, so a name that looks like another host's id cannot shadow it. */
static const saas__sql q_host_get = {
	Q_HOST_GET, HOST_SELECT " WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1", NULL, "reading a host", 1
};
static const saas__sql q_host_list = {
	Q_HOST_LIST, HOST_SELECT " ORDER BY created_at, id", NULL, "listing hosts", 1
};
static const saas__sql q_host_set_state = {
	Q_HOST_SET_STATE, "UPDATE hosts SET state = $3, state_at = $4 WHERE id = $1 AND ($2 < 0 OR state = $2)", NULL,
	"changing a host's state", 0
};
static const saas__sql q_host_exists = { Q_HOST_EXISTS, "SELECT id FROM hosts WHERE id = $1", NULL, "reading a host", 1 };
/* last_seen_at only ever moves forward; every matched row counts, so none is no such host. */
static const saas__sql q_host_seen = {
	Q_HOST_SEEN,
	"UPDATE hosts SET cpus = $3, memory_mb = $4,"
	" last_seen_at = CASE WHEN last_seen_at > $2 THEN last_seen_at ELSE $2 END WHERE id = $1", NULL,
	"recording a host's heartbeat", 0
};
/*
 * Inside a write transaction. Every placement onto the host holds this row
 * lock until it commits (PostgreSQL; SQLite's write lock covers all), so
 * once we have it the count below sees each sandbox placed there, and none
 * can be placed before the delete commits.
 */
static const saas__sql q_host_lock = {
	Q_HOST_LOCK, "SELECT id FROM hosts WHERE id = $1", "SELECT id FROM hosts WHERE id = $1 FOR UPDATE",
	"locking a host", 0
};
static const saas__sql q_host_busy = {
	Q_HOST_BUSY, "SELECT id FROM sandboxes WHERE host_id = $1 AND status != 3 LIMIT 1", NULL,
	"counting a host's sandboxes", 0
};
static const saas__sql q_host_delete = { Q_HOST_DELETE, "DELETE FROM hosts WHERE id = $1", NULL, "deleting a host", 0 };

static int host_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	saas_store_host *h = out;
	int rc;

	if ((rc = get_text(d, row, 0, h->id, sizeof(h->id))) < 0 || (rc = get_text(d, row, 1, h->name, sizeof(h->name))) < 0 ||
	    (rc = get_text(d, row, 2, h->uri, sizeof(h->uri))) < 0 ||
	    (rc = get_text(d, row, 3, h->address, sizeof(h->address))) < 0)
		return rc;
	h->state = (int)d->col_i64(row, 4);
	h->cpu_overcommit_milli = (unsigned int)d->col_i64(row, 5);
	h->mem_overcommit_milli = (unsigned int)d->col_i64(row, 6);
	h->cpus = (unsigned int)d->col_i64(row, 7);
	h->memory_mb = (uint64_t)d->col_i64(row, 8);
	h->created_at_ms = d->col_i64(row, 9);
	h->last_seen_ms = d->col_i64(row, 10);
	h->state_at_ms = d->col_i64(row, 11);
	return SAAS_OK;
}

int saas__st_host_insert(void *ctx, const saas_store_host *h)
{
	int rc;

	if ((rc = saas__store_host_check(h)) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(h->id), SAAS__TEXT(h->name), SAAS__TEXT(h->uri), SAAS__TEXT(h->address), SAAS__I64(h->state),
		SAAS__I64(h->cpu_overcommit_milli), SAAS__I64(h->mem_overcommit_milli), SAAS__I64(h->cpus),
		SAAS__I64(h->memory_mb), SAAS__I64(h->created_at_ms), SAAS__I64(h->last_seen_ms), SAAS__I64(h->state_at_ms),
	};
	rc = run1(ctx, &q_host_insert, p, 12, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "host '%.64s' already exists", h->name);
	return rc;
}

int saas__st_host_get(void *ctx, const char *id_or_name, saas_store_host *out)
{
	int rc, found;

	if ((rc = saas__store_arg(id_or_name, SAAS__HOST_KEY_MAX, "host id or name")) < 0)
		return rc;
	if (!out)
		return saas__inval("output is NULL");
	rc = fetch_one(ctx, &q_host_get, &SAAS__TEXT(id_or_name), 1, host_row, sizeof(*out), out, &found);
	if (rc == SAAS_OK && !found)
		rc = saas__store_not_found("host", id_or_name);
	return rc;
}

int saas__st_host_list(void *ctx, saas_store_host_fn fn, void *userdata)
{
	struct fetch f;
	int rc;

	if (!fn)
		return saas__inval("callback is NULL");
	rc = fetch(ctx, &q_host_list, NULL, 0, host_row, sizeof(saas_store_host), &f);
	FOR_EACH(f, saas_store_host, rc, fn, userdata);
	return rc;
}

int saas__st_host_set_state(void *ctx, const char *id, int from, int to, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(from), SAAS__I64(to), SAAS__I64(at_ms) };
	char found_id[SAAS_ID_MAX + 1];
	int64_t changed = 0;
	int rc, found;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if ((from != -1 && !saas__store_host_state_valid(from)) || !saas__store_host_state_valid(to))
		return saas__inval("host state %d -> %d is not between active, draining and lost", from, to);
	rc = run1(ctx, &q_host_set_state, p, 4, &changed);
	if (rc < 0 || changed > 0)
		return rc;
	if ((rc = fetch_one(ctx, &q_host_exists, p, 1, id_row, sizeof(found_id), found_id, &found)) < 0)
		return rc;
	return found ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_STORE, 0, "host '%.64s' is no longer in state %d", id, from)
	             : saas__store_not_found("host", id);
}

int saas__st_host_seen(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb)
{
	const saas__param p[] = { SAAS__TEXT(id), SAAS__I64(at_ms), SAAS__I64(cpus), SAAS__I64(memory_mb) };
	int64_t changed = 0;
	int rc;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if (memory_mb > SAAS__HOST_MEMORY_MB_MAX)
		return saas__inval("host memory %llu MiB is out of range", (unsigned long long)memory_mb);
	rc = run1(ctx, &q_host_seen, p, 4, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = saas__store_not_found("host", id);
	return rc;
}

static int host_delete_in(struct call *c, const char *id)
{
	const saas__param p[] = { SAAS__TEXT(id) };
	struct fetch f;
	int rc;

	rc = fetch_in(c, &q_host_lock, p, 1, id_row, SAAS_ID_MAX + 1, &f);
	free(f.data);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("host", id);
	if (rc < 0)
		return rc;
	rc = fetch_in(c, &q_host_busy, p, 1, id_row, SAAS_ID_MAX + 1, &f);
	free(f.data);
	if (rc == SAAS_OK && f.n > 0)
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                 "host '%.64s' still has sandboxes that are not destroyed; drain it first", id);
	if (rc < 0)
		return rc;
	return run(c, &q_host_delete, p, 1, NULL);
}

int saas__st_host_delete(void *ctx, const char *id)
{
	struct call c;
	int rc;

	if ((rc = saas__store_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, host_delete_in(&c, id));
	leave(&c);
	return rc;
}

/* ---- placement ---- */

/*
 * The candidate hosts, locked (PostgreSQL: FOR UPDATE, in id order, so
 * that placements locking overlapping sets cannot deadlock; SQLite: its
 * write lock, taken at BEGIN, covers them all), with their whole
 * capacities: used + need <= floor(capacity x milli / 1000) is exact.
 */
#define PLACE_HOSTS \
	"SELECT id, CAST(cpus AS BIGINT) * cpu_overcommit_milli / 1000, memory_mb * mem_overcommit_milli / 1000" \
	" FROM hosts WHERE state = 0 AND last_seen_at >= $1 AND ($2 = '' OR id = $2) ORDER BY id"
static const saas__sql q_place_hosts = {
	Q_PLACE_HOSTS, PLACE_HOSTS, PLACE_HOSTS " FOR UPDATE", "locking the hosts", 0
};
/*
 * Counted only after the locks, in a new statement (PostgreSQL, READ
 * COMMITTED: a new snapshot), which sees every sandbox a placement that
 * held a lock before us committed. One statement would count in the
 * snapshot it started with, before its locks were granted.
 */
static const saas__sql q_place_used = {
	Q_PLACE_USED,
	"SELECT host_id, COALESCE(SUM(vcpus), 0), COALESCE(SUM(memory_mb), 0) FROM sandboxes"
	" WHERE status != 3 AND host_id != '' GROUP BY host_id", NULL, "counting what the hosts hold", 0
};

/* A host's id and three numbers: its capacities, or what it holds. */
struct host_use {
	char id[SAAS_ID_MAX + 1];
	int64_t cpus, memory_mb;
};

static int host_use_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	struct host_use *u = out;

	u->cpus = d->col_i64(row, 1);
	u->memory_mb = d->col_i64(row, 2);
	return get_text(d, row, 0, u->id, sizeof(u->id));
}

/*
 * Inside the caller's transaction: the host with the most memory left that
 * has room for `b`, or "" if none. What the caller says runs there without
 * a row (p->extra) counts as used. Of equals, the first in id order wins.
 */
static int place_pick(struct call *c, const saas_store_sandbox *b, const saas_store_placement *p,
                      char host_id[SAAS_ID_MAX + 1])
{
	const saas__param hp[] = { SAAS__I64(p->seen_after_ms), SAAS__TEXT(p->host_id ? p->host_id : "") };
	struct fetch hosts = { 0 }, used = { 0 };
	int64_t best_left = -1;
	int rc;

	host_id[0] = '\0';
	if ((rc = fetch_in(c, &q_place_hosts, hp, 2, host_use_row, sizeof(struct host_use), &hosts)) < 0 ||
	    hosts.n == 0 ||
	    (rc = fetch_in(c, &q_place_used, NULL, 0, host_use_row, sizeof(struct host_use), &used)) < 0)
		goto out;
	for (size_t i = 0; i < hosts.n; i++) {
		const struct host_use *h = (const struct host_use *)(void *)(hosts.data + i * hosts.elem);
		int64_t cpu_used = 0, mem_used = 0;

		for (size_t j = 0; j < used.n; j++) {
			const struct host_use *u = (const struct host_use *)(void *)(used.data + j * used.elem);

			if (strcmp(u->id, h->id) == 0) {
				cpu_used += u->cpus;
				mem_used += u->memory_mb;
			}
		}
		for (size_t k = 0; p->extra && k < p->nextra; k++)
			if (p->extra[k].host_id && strcmp(p->extra[k].host_id, h->id) == 0) {
				cpu_used += p->extra[k].vcpus;
				mem_used += (int64_t)p->extra[k].memory_mb;
			}
		if (cpu_used + (int64_t)b->vcpus > h->cpus || mem_used + (int64_t)b->memory_mb > h->memory_mb)
			continue;
		if (h->memory_mb - mem_used > best_left) {
			best_left = h->memory_mb - mem_used;
			memcpy(host_id, h->id, sizeof(h->id));
		}
	}
out:
	free(hosts.data);
	free(used.data);
	return rc;
}

/*
 * Why this cannot overcommit: the account's lock (live_check), then every
 * candidate host's (place_pick), are held from the count to the commit. A
 * placement racing for the same host waits for ours to commit, then counts
 * what we inserted. Always account first, then hosts in id order: one order
 * for everyone, no deadlock.
 */
static int place_in(struct call *c, saas_store_sandbox *b, const saas_store_placement *p)
{
	int rc;

	if ((rc = live_check(c, b->account_id, p->max_live)) < 0 || (rc = place_pick(c, b, p, b->host_id)) < 0)
		return rc;
	if (!b->host_id[0])
		return p->host_id && *p->host_id
		               ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                             "host '%.64s' is not active, not seen lately or has no room for %u vCPUs and "
		                             "%u MiB", p->host_id, b->vcpus, b->memory_mb)
		               : saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                             "no active host seen lately has room for %u vCPUs and %u MiB; "
		                             "add or undrain a host", b->vcpus, b->memory_mb);
	return sandbox_write(c, b);
}

int saas__st_sandbox_place(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p)
{
	saas_store_sandbox b;
	struct call c;
	int rc;

	if ((rc = sandbox_check(sandbox)) < 0)
		return rc;
	if (!p)
		return saas__inval("placement is NULL");
	if (p->host_id && (rc = saas__store_arg(p->host_id, SAAS_ID_MAX, "placement host id")) < 0)
		return rc;
	b = *sandbox;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, place_in(&c, &b, p));
	leave(&c);
	if (rc == SAAS_OK)
		memcpy(sandbox->host_id, b.host_id, sizeof(b.host_id));
	return rc;
}

/* ---- MCP sessions ---- */

static const saas__sql q_mcp_insert = {
	Q_MCP_INSERT, "INSERT INTO mcp_sessions (hash, version, created_at, last_used_at) VALUES ($1, $2, $3, $3)", NULL,
	"inserting an MCP session", 0
};
/*
 * The others past the newest max - 1, so that the new one is the max-th
 * whatever the clocks of other engines wrote (ties: the hash decides). The
 * largest LIMIT is none, in both dialects.
 */
static const saas__sql q_mcp_trim = {
	Q_MCP_TRIM,
	"DELETE FROM mcp_sessions WHERE hash IN (SELECT hash FROM mcp_sessions WHERE hash <> $1"
	" ORDER BY last_used_at DESC, hash DESC LIMIT $3 OFFSET $2)", NULL,
	"ending the least recently used MCP sessions", 0
};
/* One statement, so that what is read is the row the use was recorded on. */
static const saas__sql q_mcp_touch = {
	Q_MCP_TOUCH,
	"UPDATE mcp_sessions SET last_used_at = CASE WHEN last_used_at > $2 THEN last_used_at ELSE $2 END"
	" WHERE hash = $1 AND last_used_at >= $3 RETURNING version", NULL, "using an MCP session", 0
};
static const saas__sql q_mcp_delete = {
	Q_MCP_DELETE, "DELETE FROM mcp_sessions WHERE hash = $1", NULL, "ending an MCP session", 0
};
static const saas__sql q_mcp_prune = {
	Q_MCP_PRUNE, "DELETE FROM mcp_sessions WHERE last_used_at < $1", NULL, "pruning MCP sessions", 0
};

static int mcp_insert_in(struct call *c, const char *hash, const char *version, int64_t at_ms, unsigned int max)
{
	const saas__param p[] = { SAAS__TEXT(hash), SAAS__TEXT(version), SAAS__I64(at_ms) };
	const saas__param trim[] = { SAAS__TEXT(hash), SAAS__I64(max ? (int64_t)max - 1 : 0), SAAS__I64(INT64_MAX) };
	int rc = run(c, &q_mcp_insert, p, 3, NULL);

	if (rc == SAAS_EEXISTS)
		return saas__error_wrap(rc, "that MCP session already exists");
	if (rc < 0 || !max)
		return rc;
	return run(c, &q_mcp_trim, trim, 3, NULL);
}

int saas__st_mcp_session_insert(void *ctx, const char *hash, const char *version, int64_t at_ms, unsigned int max)
{
	struct call c;
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0 ||
	    (rc = saas__store_arg(version, SAAS_STORE_MCP_VERSION_MAX, "MCP protocol version")) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, mcp_insert_in(&c, hash, version, at_ms, max));
	leave(&c);
	return rc;
}

static int version_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return get_text(d, row, 0, out, SAAS_STORE_MCP_VERSION_MAX + 1);
}

int saas__st_mcp_session_touch(void *ctx, const char *hash, int64_t at_ms, int64_t used_after_ms, char *version)
{
	const saas__param p[] = { SAAS__TEXT(hash), SAAS__I64(at_ms), SAAS__I64(used_after_ms) };
	char got[SAAS_STORE_MCP_VERSION_MAX + 1];
	int rc, found;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0)
		return rc;
	if (!version)
		return saas__inval("output is NULL");
	if ((rc = fetch_one(ctx, &q_mcp_touch, p, 3, version_row, sizeof(got), got, &found)) < 0)
		return rc;
	if (!found)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0,
		                   "no MCP session with this id, or it was idle too long");
	memcpy(version, got, sizeof(got));
	return SAAS_OK;
}

int saas__st_mcp_session_delete(void *ctx, const char *hash)
{
	int rc;

	if ((rc = saas__store_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0)
		return rc;
	return run1(ctx, &q_mcp_delete, &SAAS__TEXT(hash), 1, NULL);
}

int saas__st_mcp_session_prune(void *ctx, int64_t used_before_ms)
{
	return run1(ctx, &q_mcp_prune, &SAAS__I64(used_before_ms), 1, NULL);
}

/* ---- the schema ---- */

static const saas__sql q_schema_read = {
	Q_SCHEMA_READ, "SELECT value FROM meta WHERE key = 'schema_version'", NULL, "reading the schema version", 1
};
static const saas__sql q_schema_write = {
	Q_SCHEMA_WRITE,
	"INSERT INTO meta (key, value) VALUES ('schema_version', $1)"
	" ON CONFLICT (key) DO UPDATE SET value = excluded.value", NULL, "recording the schema version", 0
};

static int version_text_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return get_text(d, row, 0, out, 16);
}

/* The schema version recorded in meta; 0 when none is (a new database). */
static int schema_read(struct call *c, int *version)
{
	struct fetch f;
	char *end;
	long v;
	int rc;

	*version = 0;
	if ((rc = fetch_in(c, &q_schema_read, NULL, 0, version_text_row, 16, &f)) == SAAS_OK && f.n > 0) {
		errno = 0;
		v = strtol(f.data, &end, 10);
		if (errno || *end || end == f.data || v < 0 || v > 1000000)
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
			                 "%s: meta.schema_version is '%.32s', not a version number", c->d->name, f.data);
		else
			*version = (int)v;
	}
	free(f.data);
	return rc;
}

int saas__st_schema_version(void *ctx, int *version)
{
	struct call c;
	int rc;

	if (!version)
		return saas__inval("version is NULL");
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	rc = schema_read(&c, version);
	leave(&c);
	return rc;
}

/* One step (or none, at the current version), inside the caller's transaction. */
static int migrate_step(struct call *c, const char *where, int *version)
{
	char text[16], what[64];
	int rc;

	if ((rc = c->d->script(c->conn, c->d->migrate_prologue, "preparing to migrate the schema")) < 0 ||
	    (rc = schema_read(c, version)) < 0)
		return rc;
	if (*version > SAAS_STORE_SCHEMA)
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
		                   "%s has schema version %d, newer than the %d this libsaas knows; use a newer libsaas",
		                   where, *version, SAAS_STORE_SCHEMA);
	if (*version == SAAS_STORE_SCHEMA)
		return SAAS_OK;
	snprintf(what, sizeof(what), "migrating the schema to version %d", *version + 1);
	snprintf(text, sizeof(text), "%d", *version + 1);
	if ((rc = c->d->script(c->conn, c->d->steps[*version], what)) < 0)
		return rc;
	return run(c, &q_schema_write, &SAAS__TEXT(text), 1, NULL);
}

int saas__store_migrate(void *ctx, const char *where)
{
	char msg[512];
	struct call c;
	int rc, version;

	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	/* One step per transaction, so a second engine that finds it migrating waits and then sees it done. */
	do {
		version = -1;
		if ((rc = begin(&c)) < 0)
			break;
		if ((rc = finish(&c, migrate_step(&c, where, &version))) == SAAS_OK && version < SAAS_STORE_SCHEMA) {
			snprintf(msg, sizeof(msg), "%s: schema migrated from version %d to %d", where, version, version + 1);
			c.d->log(c.conn, SAAS_LOG_INFO, msg);
		}
	} while (rc == SAAS_OK && version < SAAS_STORE_SCHEMA);
	leave(&c);
	return rc;
}
