/*
 * The store's accounts, their credit, API keys and limits (slots.h says
 * how the store's rooms share the work).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "store/slots.h"

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
int saas__slot_account_insert_in(struct call *c, const saas_store_account *account, int64_t credit)
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

int saas__slot_account_check(const saas_store_account *account, int64_t credit)
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

	if ((rc = saas__slot_account_check(account, credit)) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK)
		rc = finish(&c, saas__slot_account_insert_in(&c, account, credit));
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
