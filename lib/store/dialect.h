/*
 * Internal: the seam between the store's logic (written once: slots.h and its
 * rooms) and a database dialect (sqlite/, postgres/).
 *
 * A dialect opens and closes its database, lends out a connection for one
 * store call (enter/leave), runs transactions, and runs one statement with
 * typed parameters, handing each result row to a callback. It maps its
 * database's failures to library codes: a unique violation is SAAS_EEXISTS,
 * a foreign key violation SAAS_ENOTFOUND, anything else SAAS_ESTORE.
 * Everything else (checking arguments, the SQL, which statements run in one
 * transaction, turning rows into records, lists into arrays) is the rooms'.
 *
 * A dialect's store handle (the `ctx` of every slot) starts with a pointer to
 * its dialect, so the shared slots find it.
 */
#ifndef SAAS_STORE_DIALECT_H
#define SAAS_STORE_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * A statement's parameter: text (NULL text binds SQL NULL), a 64-bit
 * integer, an integer's NULL, or bytes.
 */
enum { SAAS__P_TEXT, SAAS__P_I64, SAAS__P_NULL_I64, SAAS__P_BLOB };

typedef struct {
	int type;
	const char *text;          /* SAAS__P_TEXT, SAAS__P_BLOB */
	size_t len;                /* SAAS__P_BLOB */
	int64_t i64;               /* SAAS__P_I64 */
} saas__param;

#define SAAS__TEXT(s) ((saas__param){ .type = SAAS__P_TEXT, .text = (s) })
#define SAAS__I64(v) ((saas__param){ .type = SAAS__P_I64, .i64 = (int64_t)(v) })
#define SAAS__NULL_I64 ((saas__param){ .type = SAAS__P_NULL_I64 })

/*
 * One statement. `sql` is written once for both dialects, with $1, $2 ...
 * for its parameters (the SQLite dialect reads them as ?1, ?2 ...); `pg`,
 * when not NULL, is PostgreSQL's own text where the two disagree. `id`
 * (1 .. SAAS__SQL_CACHE - 1) names it in a dialect's per-connection cache of
 * prepared statements; 0 for a statement built at run time. `read`: safe to
 * run again on a new connection if the old one broke under it.
 */
typedef struct {
	unsigned int id;
	const char *sql;
	const char *pg;
	const char *what;          /* for error messages: "reading an account" */
	int read;
	/* Its bytes columns come back raw (PostgreSQL: a binary result, not bytea's hex text). */
	int binary;
} saas__sql;

#define SAAS__SQL_CACHE 96

/* One result row, the dialect's own; read it with the dialect's col_* functions. */
typedef struct saas__row saas__row;
/* Called for each row; non-zero stops the statement with that code. */
typedef int (*saas__row_fn)(void *userdata, const saas__row *row);

struct saas__dialect {
	const char *name;
	/* Take a connection for one store call (waiting for it); give it back. */
	int (*enter)(void *store, void **conn);
	void (*leave)(void *store, void *conn);
	/* A write transaction: SQLite takes its write lock at BEGIN. */
	int (*begin)(void *conn);
	int (*commit)(void *conn);
	/* Undo an open transaction, if any; the error already recorded stays. */
	void (*rollback)(void *conn);
	/*
	 * Run one statement; fn (may be NULL) gets each row. *changed (may be
	 * NULL): rows the statement inserted, updated or deleted.
	 */
	int (*run)(void *conn, const saas__sql *sql, const saas__param *params, int n, saas__row_fn fn, void *userdata,
	           int64_t *changed);
	/* Run a script of several statements with no parameters (a migration step). */
	int (*script)(void *conn, const char *sql, const char *what);
	/* Log through the store's env->log. */
	void (*log)(void *conn, int level, const char *msg);
	/*
	 * The schema's steps: steps[n] takes a database from version n to n + 1.
	 * Written per dialect (types, collations, triggers differ); the columns
	 * are the same (lib/store/schema.md).
	 */
	const char *const *steps;
	/*
	 * Run first in each migration transaction: make sure the meta table
	 * exists, and (PostgreSQL) take the lock that makes engines starting
	 * together migrate once (SQLite's write lock, taken at BEGIN, does).
	 */
	const char *migrate_prologue;
	int64_t (*col_i64)(const saas__row *row, int col);
	int (*col_null)(const saas__row *row, int col);
	/* NULL for SQL NULL; *len its length in bytes (NUL-terminated too). */
	const char *(*col_text)(const saas__row *row, int col, size_t *len);
};

/* The start of every dialect's store handle. */
struct saas__db {
	const struct saas__dialect *dialect;
};

/* ---- checks every store makes (store.c) ---- */

/* A fixed-size field of a record must be NUL-terminated inside its array. */
int saas__store_field(const char *field, size_t size, const char *what);
/* A string argument that the store keeps: set, and it must fit the record it comes back in. */
int saas__store_arg(const char *arg, size_t max, const char *what);
/* "no account 'acc-1'". */
int saas__store_not_found(const char *what, const char *id);

/* ---- the shared slots (accounts.c, users.c, sandboxes.c, executions.c, hosts.c, schema.c) ---- */

/*
 * Migrate the schema up to SAAS_STORE_SCHEMA, one step per transaction; a
 * dialect's open calls it on its complete handle. `where` names the
 * database in the log ("sqlite: /path", "postgresql").
 */
int saas__store_migrate(void *ctx, const char *where);
int saas__st_schema_version(void *ctx, int *version);

int saas__st_account_insert(void *ctx, const saas_store_account *account, int64_t credit);
int saas__st_account_get(void *ctx, const char *id, saas_store_account *out);
int saas__st_account_list(void *ctx, saas_store_account_fn fn, void *userdata);
int saas__st_credit_add(void *ctx, const char *account_id, int64_t amount, const char *note, int64_t at_ms);
int saas__st_key_insert(void *ctx, const saas_store_key *key);
int saas__st_key_find(void *ctx, const char *hash, saas_store_key *out);
int saas__st_key_revoke(void *ctx, const char *key_id, int64_t at_ms);
int saas__st_key_list(void *ctx, const char *account_id, saas_store_key_fn fn, void *userdata);
int saas__st_key_touch(void *ctx, const char *hash, int64_t at_ms);
int saas__st_sandbox_insert(void *ctx, const saas_store_sandbox *sandbox, unsigned int max_live);
int saas__st_sandbox_get(void *ctx, const char *id, saas_store_sandbox *out);
int saas__st_sandbox_list(void *ctx, const saas_store_filter *filter, saas_store_sandbox_fn fn, void *userdata);
int saas__st_sandbox_set_ready(void *ctx, const char *id, int64_t ready_at_ms, int64_t expires_at_ms);
int saas__st_sandbox_set_expiry(void *ctx, const char *id, int64_t expires_at_ms);
int saas__st_sandbox_set_state(void *ctx, const char *id, int from, const saas_store_sandbox *to);
int saas__st_sandbox_close(void *ctx, const char *id, int end_reason, int64_t destroyed_at_ms, int64_t cost,
                           int64_t if_expires_at_ms, int *closed);
int saas__st_sandbox_delete(void *ctx, const char *id);
int saas__st_sandbox_network_get(void *ctx, const char *id, char **allow, char **deny);
int saas__st_sandbox_network_set(void *ctx, const char *id, int mode, const char *allow, const char *deny);
int saas__st_sandbox_egress_record(void *ctx, const char *id, int64_t connections, int64_t lookups);
int saas__st_sandbox_egress_rebase(void *ctx, const char *id);
int saas__st_execution_insert(void *ctx, const saas_store_execution *execution);
int saas__st_execution_finish(void *ctx, const saas_store_execution *execution);
int saas__st_execution_get(void *ctx, const char *id, saas_store_execution *out);
int saas__st_execution_fail_running(void *ctx, const char *sandbox_id, const char *error, int64_t at_ms);
int saas__st_execution_prune(void *ctx, int64_t finished_before_ms, unsigned int max, unsigned int *pruned);
int saas__st_execution_list(void *ctx, const char *sandbox_id, int64_t before_started_ms, const char *before_id,
                            unsigned int limit, saas_store_execution_fn fn, void *userdata);
int saas__st_limits_get(void *ctx, const char *account_id, saas_store_limits *out);
int saas__st_limits_set(void *ctx, const char *account_id, const saas_store_limits *limits, int64_t at_ms);
int saas__st_port_insert(void *ctx, const saas_store_port *port);
int saas__st_port_list(void *ctx, const char *sandbox_id, saas_store_port_fn fn, void *userdata);
int saas__st_port_find(void *ctx, const char *name, saas_store_port *out);
int saas__st_port_delete(void *ctx, const char *sandbox_id, unsigned int port);
int saas__st_account_disable(void *ctx, const char *account_id, int64_t at_ms);
int saas__st_user_insert(void *ctx, const saas_store_user *user, const saas_store_account *account, int64_t credit,
                         const char *invite_hash);
int saas__st_user_find(void *ctx, const char *email, saas_store_user *out);
int saas__st_user_list(void *ctx, saas_store_user_fn fn, void *userdata);
int saas__st_user_update(void *ctx, const char *user_id, const char *password_hash, int is_operator);
int saas__st_session_insert(void *ctx, const saas_store_session *session);
int saas__st_session_find(void *ctx, const char *hash, saas_store_session *out);
int saas__st_session_touch(void *ctx, const char *hash, int64_t at_ms);
int saas__st_session_delete(void *ctx, const char *hash);
int saas__st_session_prune(void *ctx, int64_t created_before_ms, int64_t seen_before_ms);
int saas__st_invite_insert(void *ctx, const char *hash, int64_t at_ms);
int saas__st_lease_take(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms, int *held);
int saas__st_lease_release(void *ctx, const char *name, const char *holder);
int saas__st_lease_get(void *ctx, const char *name, char *holder, int64_t *expires_at_ms);
int saas__st_lease_purge(void *ctx, int64_t expired_before_ms, unsigned int max, unsigned int *purged);
int saas__st_host_insert(void *ctx, const saas_store_host *host);
int saas__st_host_get(void *ctx, const char *id_or_name, saas_store_host *out);
int saas__st_host_list(void *ctx, saas_store_host_fn fn, void *userdata);
int saas__st_host_set_state(void *ctx, const char *id, int from, int to, int64_t at_ms);
int saas__st_host_seen(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb);
int saas__st_host_delete(void *ctx, const char *id);
int saas__st_sandbox_place(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p);
int saas__st_mcp_session_insert(void *ctx, const char *hash, const char *version, int64_t at_ms, unsigned int max);
int saas__st_mcp_session_touch(void *ctx, const char *hash, int64_t at_ms, int64_t used_after_ms, char *version);
int saas__st_mcp_session_delete(void *ctx, const char *hash);
int saas__st_mcp_session_prune(void *ctx, int64_t used_before_ms);
int saas__st_sandbox_values(void *ctx, const char *id, saas_store_value_fn fn, void *userdata);

/*
 * The slots every built-in store takes from the shared rooms, for a table's
 * initializer: everything but open and close.
 */
#define SAAS__STORE_SHARED_SLOTS \
	.schema_version = saas__st_schema_version, \
	.account_insert = saas__st_account_insert, \
	.account_get = saas__st_account_get, \
	.account_list = saas__st_account_list, \
	.credit_add = saas__st_credit_add, \
	.key_insert = saas__st_key_insert, \
	.key_find = saas__st_key_find, \
	.key_revoke = saas__st_key_revoke, \
	.key_list = saas__st_key_list, \
	.key_touch = saas__st_key_touch, \
	.sandbox_insert = saas__st_sandbox_insert, \
	.sandbox_get = saas__st_sandbox_get, \
	.sandbox_list = saas__st_sandbox_list, \
	.sandbox_set_ready = saas__st_sandbox_set_ready, \
	.sandbox_set_expiry = saas__st_sandbox_set_expiry, \
	.sandbox_set_state = saas__st_sandbox_set_state, \
	.sandbox_close = saas__st_sandbox_close, \
	.sandbox_delete = saas__st_sandbox_delete, \
	.sandbox_network_get = saas__st_sandbox_network_get, \
	.sandbox_network_set = saas__st_sandbox_network_set, \
	.sandbox_egress_record = saas__st_sandbox_egress_record, \
	.sandbox_egress_rebase = saas__st_sandbox_egress_rebase, \
	.execution_insert = saas__st_execution_insert, \
	.execution_finish = saas__st_execution_finish, \
	.execution_get = saas__st_execution_get, \
	.execution_fail_running = saas__st_execution_fail_running, \
	.execution_prune = saas__st_execution_prune, \
	.execution_list = saas__st_execution_list, \
	.limits_get = saas__st_limits_get, \
	.limits_set = saas__st_limits_set, \
	.port_insert = saas__st_port_insert, \
	.port_list = saas__st_port_list, \
	.port_find = saas__st_port_find, \
	.port_delete = saas__st_port_delete, \
	.account_disable = saas__st_account_disable, \
	.user_insert = saas__st_user_insert, \
	.user_find = saas__st_user_find, \
	.user_list = saas__st_user_list, \
	.user_update = saas__st_user_update, \
	.session_insert = saas__st_session_insert, \
	.session_find = saas__st_session_find, \
	.session_touch = saas__st_session_touch, \
	.session_delete = saas__st_session_delete, \
	.session_prune = saas__st_session_prune, \
	.invite_insert = saas__st_invite_insert, \
	.lease_take = saas__st_lease_take, \
	.lease_release = saas__st_lease_release, \
	.lease_get = saas__st_lease_get, \
	.host_insert = saas__st_host_insert, \
	.host_get = saas__st_host_get, \
	.host_list = saas__st_host_list, \
	.host_set_state = saas__st_host_set_state, \
	.host_seen = saas__st_host_seen, \
	.host_delete = saas__st_host_delete, \
	.sandbox_place = saas__st_sandbox_place, \
	.mcp_session_insert = saas__st_mcp_session_insert, \
	.mcp_session_touch = saas__st_mcp_session_touch, \
	.mcp_session_delete = saas__st_mcp_session_delete, \
	.mcp_session_prune = saas__st_mcp_session_prune, \
	.sandbox_values = saas__st_sandbox_values, \
	.lease_purge = saas__st_lease_purge

#endif
