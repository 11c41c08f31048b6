/*
 * Internal: what the store's rooms share. The store's logic is written once
 * for every dialect (dialect.h): argument checks, the statements, which of
 * them share a transaction, and records made from rows. A dialect only runs
 * what the rooms ask. The rooms follow saas/sys/store.h's areas:
 *
 *   accounts.c    accounts and credit, API keys, account limits
 *   users.c       disabled accounts, users, sessions, invites, MCP sessions
 *   sandboxes.c   sandboxes, their metadata and environment, network, egress; ports
 *   executions.c  executions
 *   hosts.c       leases, VM hosts, placement
 *   schema.c      the schema's version and its migrations
 *   list.c        listings into arrays, for the core (over any store's table)
 *
 * Statements are written once with $1, $2 ... parameters. Where SQLite and
 * PostgreSQL disagree, a statement carries PostgreSQL's own text beside it:
 * only its row locks. Ids sort bytewise in both: SQLite's BINARY is its
 * default, and PostgreSQL's schema declares every id and hash COLLATE "C".
 * Each statement has an id (below, one list for every room) so a dialect may
 * keep it prepared on each connection.
 *
 * List callbacks run after the connection went back (the rows copied out
 * first), so that a callback may call the store again (the reaper closes
 * the sandboxes it lists) without waiting on itself.
 *
 * The helpers of one store call are small and on every slot's path: they
 * are static inline here, so each room reads as if they were its own.
 */
#ifndef SAAS_STORE_SLOTS_H
#define SAAS_STORE_SLOTS_H

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
	Q_LEASE_PURGE,
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
/* The rooms' SQL spells these values out (and the schema's partial index status != 3). */
_Static_assert(SAAS_SANDBOX_CREATING == 1 && SAAS_SANDBOX_READY == 2 && SAAS_SANDBOX_DESTROYED == 3,
               "sandbox status values used in SQL");
_Static_assert(SAAS_EXEC_RUNNING == 1, "execution status value used in SQL");

/* ---- one store call: a connection from enter to leave ---- */

struct call {
	const struct saas__dialect *d;
	void *store;
	void *conn;
};

static inline int enter(void *ctx, struct call *c)
{
	const struct saas__db *db = ctx;

	c->d = db->dialect;
	c->store = ctx;
	c->conn = NULL;
	return c->d->enter(ctx, &c->conn);
}

static inline void leave(struct call *c)
{
	c->d->leave(c->store, c->conn);
}

static inline int run(struct call *c, const saas__sql *q, const saas__param *p, int n, int64_t *changed)
{
	return c->d->run(c->conn, q, p, n, NULL, NULL, changed);
}

static inline int begin(struct call *c)
{
	return c->d->begin(c->conn);
}

/* Commit, or (rc < 0) undo: the end of every transaction. */
static inline int finish(struct call *c, int rc)
{
	if (rc == SAAS_OK)
		rc = c->d->commit(c->conn);
	if (rc < 0)
		c->d->rollback(c->conn);
	return rc;
}

/* One statement as a whole store call; *changed (may be NULL) as the dialect's run. */
static inline int run1(void *ctx, const saas__sql *q, const saas__param *p, int n, int64_t *changed)
{
	struct call c;
	int rc;

	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	rc = run(&c, q, p, n, changed);
	leave(&c);
	return rc;
}

/* A bounded prune: q deletes at most $2 rows older than $1; *pruned, how many went. */
static inline int prune1(void *ctx, const saas__sql *q, int64_t before_ms, unsigned int max, unsigned int *pruned)
{
	const saas__param p[] = { SAAS__I64(before_ms), SAAS__I64(max) };
	int64_t changed = 0;
	int rc;

	if (!pruned)
		return saas__inval("pruned is NULL");
	*pruned = 0;
	rc = run1(ctx, q, p, 2, &changed);
	if (rc == SAAS_OK)
		*pruned = (unsigned int)changed;
	return rc;
}

/* ---- rows into records ---- */

/* Copy a text column into a record field; writes are checked, so it fits unless someone else wrote it. */
static inline int get_text(const struct saas__dialect *d, const saas__row *row, int col, char *dst, size_t size)
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

static inline int fetch_row(void *userdata, const saas__row *row)
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
static inline int fetch_in(struct call *c, const saas__sql *q, const saas__param *p, int n, convert_fn convert,
                    size_t elem, struct fetch *f)
{
	*f = (struct fetch){ c->d, convert, elem, NULL, 0, 0 };
	return c->d->run(c->conn, q, p, n, fetch_row, f, NULL);
}

/* The same as a whole store call. */
static inline int fetch(void *ctx, const saas__sql *q, const saas__param *p, int n, convert_fn convert, size_t elem,
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
static inline int fetch_one(void *ctx, const saas__sql *q, const saas__param *p, int n, convert_fn convert, size_t elem,
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

/* A single-row id, for "is it there?" */
static inline int id_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return get_text(d, row, 0, out, SAAS_ID_MAX + 1);
}

/* A single 64-bit integer column. */
static inline int i64_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	*(int64_t *)out = d->col_i64(row, 0);
	return SAAS_OK;
}

/* ---- what one room lends another ---- */

/* accounts.c, for users.c: a new account's checks, and its row and first credit inside a transaction. */
int saas__slot_account_check(const saas_store_account *account, int64_t credit);
int saas__slot_account_insert_in(struct call *c, const saas_store_account *account, int64_t credit);

/* sandboxes.c, for hosts.c's placement: a new sandbox's checks, the account's live count, the row. */
int saas__slot_sandbox_check(const saas_store_sandbox *b);
int saas__slot_live_check(struct call *c, const char *account_id, unsigned int max_live);
int saas__slot_sandbox_write(struct call *c, const saas_store_sandbox *b);

#endif
