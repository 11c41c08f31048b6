/*
 * The store's sandboxes: their rows, metadata and environment, network
 * rules, egress counts; and the ports they expose (slots.h says how the
 * store's rooms share the work).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/slots.h"

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

int saas__slot_sandbox_check(const saas_store_sandbox *b)
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
int saas__slot_live_check(struct call *c, const char *account_id, unsigned int max_live)
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
int saas__slot_sandbox_write(struct call *c, const saas_store_sandbox *b)
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

	if ((rc = saas__slot_sandbox_check(b)) < 0)
		return rc;
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	if ((rc = begin(&c)) == SAAS_OK) {
		if ((rc = saas__slot_live_check(&c, b->account_id, max_live)) == SAAS_OK)
			rc = saas__slot_sandbox_write(&c, b);
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
