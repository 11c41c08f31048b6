/*
 * The SQLite store.
 *
 * One connection per store handle, used under a mutex: SQLite serialises a
 * connection anyway, and a transaction spans several calls that must not
 * interleave with another thread's. Other processes (an admin CLI beside a
 * server) may hold their own connection to the same file, so every write
 * transaction starts with BEGIN IMMEDIATE: it takes the write lock up front,
 * waiting in the busy handler, instead of failing with SQLITE_BUSY halfway
 * through when a read lock cannot be upgraded. Reads are single statements in
 * autocommit mode; in WAL mode each sees one consistent snapshot.
 *
 * List callbacks run after the lock is released, on rows copied out first, so
 * that a callback may call the store again (the reaper closes the sandboxes it
 * lists) without deadlocking.
 *
 * The schema is documented in lib/store/schema.md and shared with PostgreSQL.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "saas/exec.h"
#include "saas/sandbox.h"
#include "store/dialect.h"
#include "store/store.h"
#include "util/error.h"
#include "util/util.h"

/* How long one attempt waits for another connection's lock. */
#define BUSY_TIMEOUT_MS 5000
/*
 * How many times a write transaction is attempted when the lock stays taken
 * for a whole BUSY_TIMEOUT_MS: a long checkpoint or a slow admin command can
 * hold it that long without anything being wrong.
 */
#define BUSY_ATTEMPTS 3

struct sq {
	const struct saas__dialect *dialect; /* first: the shared slots find it there */
	sqlite3 *db;
	/* Statements of slots.c, prepared once on this connection (by saas__sql.id). */
	sqlite3_stmt *cache[SAAS__SQL_CACHE];
	pthread_mutex_t lock;
	saas_log_fn log;
	void *log_userdata;
};

/*
 * Schema migrations: step i takes the schema from version i to i + 1, each in
 * its own transaction together with the new schema_version. Append only; a
 * released step is never edited.
 */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE accounts ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL"
	");"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"
	"  account_id TEXT NOT NULL REFERENCES accounts(id),"
	"  name TEXT NOT NULL,"
	"  prefix TEXT NOT NULL,"
	"  hash TEXT NOT NULL UNIQUE,"
	"  created_at BIGINT NOT NULL,"
	"  revoked_at BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX api_keys_account ON api_keys(account_id, created_at, id);"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY,"
	"  account_id TEXT NOT NULL REFERENCES accounts(id),"
	"  status INT NOT NULL,"
	"  end_reason INT NOT NULL DEFAULT 0,"
	"  size TEXT NOT NULL,"
	"  vcpus INT,"
	"  memory_mb INT,"
	"  disk_gb INT,"
	"  image TEXT NOT NULL,"
	"  usd_micro_per_hour BIGINT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  ready_at BIGINT NOT NULL DEFAULT 0,"
	"  expires_at BIGINT NOT NULL,"
	"  destroyed_at BIGINT NOT NULL DEFAULT 0,"
	"  cost BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX sandboxes_account_created ON sandboxes(account_id, created_at DESC, id DESC);"
	"CREATE INDEX sandboxes_status_expires ON sandboxes(status, expires_at);"
	"CREATE TABLE executions ("
	"  id TEXT PRIMARY KEY,"
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	"  account_id TEXT NOT NULL,"
	"  status INT NOT NULL,"
	"  exit_code INT NOT NULL DEFAULT -1,"
	"  command TEXT NOT NULL,"
	"  stdout BLOB,"
	"  stderr BLOB,"
	"  stdout_truncated INT NOT NULL DEFAULT 0,"
	"  stderr_truncated INT NOT NULL DEFAULT 0,"
	"  error TEXT,"
	"  started_at BIGINT NOT NULL,"
	"  finished_at BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE INDEX executions_sandbox_status ON executions(sandbox_id, status);"
	"CREATE TABLE ports ("
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	"  port INT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  PRIMARY KEY (sandbox_id, port)"
	");"
	"CREATE TABLE ledger ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  account_id TEXT NOT NULL REFERENCES accounts(id),"
	"  kind TEXT NOT NULL CHECK (kind IN ('credit', 'charge')),"
	"  amount BIGINT NOT NULL CHECK (amount > 0),"
	"  sandbox_id TEXT,"
	"  note TEXT,"
	"  at BIGINT NOT NULL"
	");"
	/* The database itself guarantees that no sandbox is ever charged twice. */
	"CREATE UNIQUE INDEX ledger_one_charge ON ledger(sandbox_id) WHERE kind = 'charge';"
	"CREATE INDEX ledger_account ON ledger(account_id, kind);"
	/* Money history is append-only; refuse edits from any client, not just ours. */
	"CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger"
	"  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;"
	"CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger"
	"  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;",
	/* 1 -> 2: per-account limits set by an operator; finding executions past their retention */
	"CREATE TABLE account_limits ("
	"  account_id TEXT PRIMARY KEY REFERENCES accounts(id),"
	"  max_sandboxes INT NOT NULL DEFAULT 0,"
	"  max_executions INT NOT NULL DEFAULT 0,"
	"  creates_per_minute INT NOT NULL DEFAULT 0,"
	"  requests_per_second INT NOT NULL DEFAULT 0,"
	"  updated_at BIGINT NOT NULL"
	");"
	"CREATE INDEX executions_finished ON executions(finished_at);",
	/*
	 * 2 -> 3: each exposure has its own unguessable name, the host label of its
	 * preview URL. Exposures made before had guessable URLs ({port}-{id}) that
	 * must stop working; they are dropped rather than given names nobody was shown.
	 */
	"DROP TABLE ports;"
	"CREATE TABLE ports ("
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	"  port INT NOT NULL,"
	"  name TEXT NOT NULL UNIQUE,"
	"  created_at BIGINT NOT NULL,"
	"  PRIMARY KEY (sandbox_id, port)"
	");",
	/*
	 * 3 -> 4: each sandbox's egress (issue #12): the mode it was made with or
	 * last set to, and a policy's rules. Rows from before read as unknown (NULL).
	 */
	"ALTER TABLE sandboxes ADD COLUMN network_mode INT;"
	"ALTER TABLE sandboxes ADD COLUMN network_allow TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN network_deny TEXT NOT NULL DEFAULT '';",
	/*
	 * 4 -> 5: accounts for people (issue #14): users who log in to the pages,
	 * their sessions (hashed, as keys are), invite codes (hashed); an account
	 * an operator disabled; when each key was last used.
	 */
	"ALTER TABLE accounts ADD COLUMN disabled_at BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;"
	"CREATE TABLE users ("
	"  id TEXT PRIMARY KEY,"
	"  account_id TEXT NOT NULL REFERENCES accounts(id),"
	"  email TEXT NOT NULL UNIQUE,"
	"  password_hash TEXT NOT NULL,"
	"  is_operator INT NOT NULL DEFAULT 0,"
	"  created_at BIGINT NOT NULL"
	");"
	"CREATE INDEX users_account ON users(account_id);"
	"CREATE TABLE sessions ("
	"  hash TEXT PRIMARY KEY,"
	"  user_id TEXT NOT NULL REFERENCES users(id),"
	"  created_at BIGINT NOT NULL,"
	"  last_seen_at BIGINT NOT NULL"
	");"
	"CREATE INDEX sessions_user ON sessions(user_id);"
	"CREATE TABLE invites ("
	"  hash TEXT PRIMARY KEY,"
	"  created_at BIGINT NOT NULL,"
	"  used_at BIGINT NOT NULL DEFAULT 0,"
	"  used_by TEXT"
	");",
	/*
	 * 5 -> 6: pause and fork (issue #15): when the current pause began, the
	 * time spent in pauses that ended, the paused price the sandbox was made
	 * with, the snapshot holding its state, and the sandbox it was forked from.
	 */
	"ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_ms BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_usd_micro_per_hour BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';",
	/*
	 * 6 -> 7: each sandbox's egress refusals (issue #12), kept past a restart
	 * of the engine (whose driver counts from zero again) and past its end.
	 */
	"ALTER TABLE sandboxes ADD COLUMN denied_connections BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_lookups BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_connections_base BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_lookups_base BIGINT NOT NULL DEFAULT 0;",
	/*
	 * 7 -> 8: many engines on one database, many VM hosts (issue #16): the
	 * host each sandbox runs on ('' the engine's own), leases that make
	 * once-only work claimable by one engine, the VM hosts, and MCP sessions
	 * that any engine may serve. The partial index is what placement counts.
	 */
	"ALTER TABLE sandboxes ADD COLUMN host_id TEXT NOT NULL DEFAULT '';"
	"CREATE INDEX sandboxes_host_live ON sandboxes(host_id) WHERE status != 3;"
	"CREATE TABLE leases ("
	"  name TEXT PRIMARY KEY,"
	"  holder TEXT NOT NULL,"
	"  expires_at BIGINT NOT NULL"
	");"
	"CREATE TABLE hosts ("
	"  id TEXT PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  uri TEXT NOT NULL,"
	"  address TEXT NOT NULL,"
	"  state INT NOT NULL DEFAULT 0,"
	"  cpu_overcommit_milli INT NOT NULL,"
	"  mem_overcommit_milli INT NOT NULL,"
	"  cpus INT NOT NULL DEFAULT 0,"
	"  memory_mb BIGINT NOT NULL DEFAULT 0,"
	"  created_at BIGINT NOT NULL,"
	"  last_seen_at BIGINT NOT NULL DEFAULT 0,"
	"  state_at BIGINT NOT NULL DEFAULT 0"
	");"
	"CREATE TABLE mcp_sessions ("
	"  hash TEXT PRIMARY KEY,"
	"  version TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  last_used_at BIGINT NOT NULL"
	");"
	"CREATE INDEX mcp_sessions_used ON mcp_sessions(last_used_at);",
};

_Static_assert(SAAS_ARRAY_SIZE(migrations) == SAAS_STORE_SCHEMA,
               "one migration step per schema version");

/* ---- errors and small helpers ---- */

static int db_error(struct sq *s, int rc, const char *what)
{
	return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, rc, "sqlite: %s: %s", what,
	                   sqlite3_errmsg(s->db));
}

static int not_found(const char *what, const char *id)
{
	return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no %s '%.64s'", what, id);
}

static void say(struct sq *s, int level, const char *fmt, ...) SAAS_PRINTF(3, 4);
static void say(struct sq *s, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->log(s->log_userdata, level, msg);
}

/* A fixed-size field of a record must be NUL-terminated inside its array. */
static int check_field(const char *field, size_t size, const char *what)
{
	if (strnlen(field, size) >= size)
		return saas__inval("%s is too long (at most %zu bytes)", what, size - 1);
	return SAAS_OK;
}

/* A string argument that the store keeps; it must fit the record it comes back in. */
static int check_arg(const char *arg, size_t max, const char *what)
{
	if (!arg)
		return saas__inval("%s is NULL", what);
	if (strlen(arg) > max)
		return saas__inval("%s is too long (at most %zu bytes)", what, max);
	return SAAS_OK;
}

static int prep(struct sq *s, sqlite3_stmt **st, const char *sql)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);

	if (rc != SQLITE_OK) {
		*st = NULL;
		return db_error(s, rc, "prepare");
	}
	return SAAS_OK;
}

/* Binding with SQLITE_STATIC only fails on a programming error, but say so if it does. */
static int bind_check(struct sq *s, int brc)
{
	return brc == SQLITE_OK ? SAAS_OK : db_error(s, brc, "bind");
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
	return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* Copy a text column into a record field; writes are checked, so it fits unless someone else wrote it. */
static int col_text(sqlite3_stmt *st, int i, char *dst, size_t size)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	size_t n = (size_t)sqlite3_column_bytes(st, i);

	if (!t) {
		if (sqlite3_column_type(st, i) != SQLITE_NULL)
			return saas__oom();
		dst[0] = '\0';
		return SAAS_OK;
	}
	if (n >= size)
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
		                   "stored %s is %zu bytes, more than the %zu it may have",
		                   sqlite3_column_name(st, i), n, size - 1);
	memcpy(dst, t, n + 1);
	return SAAS_OK;
}

static int tx_begin(struct sq *s)
{
	for (int attempt = 1;; attempt++) {
		int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

		if (rc == SQLITE_OK)
			return SAAS_OK;
		if ((rc & 0xff) != SQLITE_BUSY || attempt >= BUSY_ATTEMPTS)
			return db_error(s, rc, "begin");
		say(s, SAAS_LOG_WARN, "sqlite: database locked for %d ms; waiting again (%d/%d)",
		      BUSY_TIMEOUT_MS, attempt, BUSY_ATTEMPTS);
	}
}

/* Undo an open transaction, if any; the thread's error detail is left as it is. */
static void tx_rollback(struct sq *s)
{
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

static int tx_commit(struct sq *s)
{
	int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		rc = db_error(s, rc, "commit");
		tx_rollback(s);
		return rc;
	}
	return SAAS_OK;
}

/* Does the row `sql` selects (one ?1 parameter) exist? */
static int exists(struct sq *s, const char *sql, const char *id, int *found)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = prep(s, &st, sql)) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, id))) < 0)
		goto out;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		*found = 1;
	else if (src == SQLITE_DONE)
		*found = 0;
	else
		rc = db_error(s, src, "select");
out:
	sqlite3_finalize(st);
	return rc;
}

/* Map a failed write: duplicate -> EEXISTS, missing parent -> ENOTFOUND, else ESTORE. */
static int write_error(struct sq *s, int src, const char *what, const char *id, const char *parent_what,
                       const char *parent_id)
{
	if (src == SQLITE_CONSTRAINT_PRIMARYKEY || src == SQLITE_CONSTRAINT_UNIQUE)
		return saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_STORE, src, "%s '%.64s' already exists (%s)",
		                   what, id, sqlite3_errmsg(s->db));
	if (src == SQLITE_CONSTRAINT_FOREIGNKEY && parent_what)
		return not_found(parent_what, parent_id);
	return db_error(s, src, what);
}

/* A growable array of records, so that callbacks run without the lock. */
struct rows {
	char *data;
	size_t n, cap, elem;
};

static void *rows_add(struct rows *r)
{
	if (saas__array_reserve(&r->data, &r->cap, r->n + 1, r->elem) < 0)
		return NULL;
	memset(r->data + r->n * r->elem, 0, r->elem);
	return r->data + r->n++ * r->elem;
}

/* ---- the dialect (dialect.h) ---- */

static int sq_enter(void *store, void **conn)
{
	struct sq *s = store;

	pthread_mutex_lock(&s->lock);
	*conn = s;
	return SAAS_OK;
}

static void sq_leave(void *store, void *conn)
{
	struct sq *s = store;

	(void)conn;
	pthread_mutex_unlock(&s->lock);
}

static int sq_begin(void *conn)
{
	return tx_begin(conn);
}

static int sq_commit(void *conn)
{
	return tx_commit(conn);
}

static void sq_rollback(void *conn)
{
	tx_rollback(conn);
}

/* slots.c writes $1, $2 ...: SQLite's ?1, ?2 ... (outside quoted literals). */
static int sq_prepare(struct sq *s, const saas__sql *q, sqlite3_stmt **st)
{
	size_t n = strlen(q->sql);
	char quote = 0, *text;
	int rc = SAAS_OK, src;

	if (q->id && (*st = s->cache[q->id]))
		return SAAS_OK;
	if (!(text = malloc(n + 1)))
		return saas__oom();
	for (size_t i = 0; i <= n; i++) {
		char c = q->sql[i];

		if (quote && c == quote)
			quote = 0;
		else if (!quote && (c == '\'' || c == '"'))
			quote = c;
		else if (!quote && c == '$' && q->sql[i + 1] >= '0' && q->sql[i + 1] <= '9')
			c = '?';
		text[i] = c;
	}
	src = sqlite3_prepare_v3(s->db, text, -1, q->id ? SQLITE_PREPARE_PERSISTENT : 0, st, NULL);
	if (src != SQLITE_OK) {
		*st = NULL;
		rc = db_error(s, src, "prepare");
	} else if (q->id) {
		s->cache[q->id] = *st;
	}
	free(text);
	return rc;
}

static int sq_run(void *conn, const saas__sql *q, const saas__param *p, int n, saas__row_fn fn, void *userdata,
                  int64_t *changed)
{
	struct sq *s = conn;
	sqlite3_stmt *st = NULL;
	int rc, src, brc = SQLITE_OK;

	if ((rc = sq_prepare(s, q, &st)) < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		if (p[i].type == SAAS__P_I64)
			brc |= sqlite3_bind_int64(st, i + 1, p[i].i64);
		else if (p[i].type == SAAS__P_NULL_I64)
			brc |= sqlite3_bind_null(st, i + 1);
		else if (p[i].type == SAAS__P_BLOB && p[i].text)
			brc |= sqlite3_bind_blob64(st, i + 1, p[i].text, p[i].len, SQLITE_STATIC);
		else
			brc |= bind_text(st, i + 1, p[i].text);
	}
	if ((rc = bind_check(s, brc)) < 0)
		goto out;
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		if (fn && (rc = fn(userdata, (const saas__row *)st)) != 0)
			goto out;
	if (src != SQLITE_DONE) {
		/* A duplicate is the caller's, and so is a parent that does not exist; slots.c names them. */
		if (src == SQLITE_CONSTRAINT_PRIMARYKEY || src == SQLITE_CONSTRAINT_UNIQUE ||
		    src == SQLITE_CONSTRAINT_FOREIGNKEY)
			rc = saas__error(src == SQLITE_CONSTRAINT_FOREIGNKEY ? SAAS_ENOTFOUND : SAAS_EEXISTS,
			                 SAAS_ERRCLASS_STORE, src, "sqlite: %s: %s", q->what, sqlite3_errmsg(s->db));
		else
			rc = db_error(s, src, q->what);
		goto out;
	}
	if (changed)
		*changed = sqlite3_changes64(s->db);
out:
	/* A cached statement stays prepared, reset, its parameters unbound (they may point into freed memory). */
	if (q->id) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	} else {
		sqlite3_finalize(st);
	}
	return rc;
}

static int64_t sq_col_i64(const saas__row *row, int col)
{
	return sqlite3_column_int64((sqlite3_stmt *)(void *)row, col);
}

static int sq_col_null(const saas__row *row, int col)
{
	return sqlite3_column_type((sqlite3_stmt *)(void *)row, col) == SQLITE_NULL;
}

static const char *sq_col_text(const saas__row *row, int col, size_t *len)
{
	sqlite3_stmt *st = (sqlite3_stmt *)(void *)row;
	const char *t = (const char *)sqlite3_column_text(st, col);

	*len = t ? (size_t)sqlite3_column_bytes(st, col) : 0;
	return t;
}

static const struct saas__dialect sq_dialect = {
	.name = "sqlite",
	.collate = "",
	.enter = sq_enter,
	.leave = sq_leave,
	.begin = sq_begin,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.run = sq_run,
	.col_i64 = sq_col_i64,
	.col_null = sq_col_null,
	.col_text = sq_col_text,
};

/* ---- open, migrate, close ---- */

static int schema_read(struct sq *s, int *version)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	*version = 0;
	if ((rc = prep(s, &st, "SELECT value FROM meta WHERE key = 'schema_version'")) < 0)
		goto out;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);
		char *end;
		long n;

		errno = 0;
		n = v ? strtol(v, &end, 10) : -1;
		if (!v || errno || *end || end == v || n < 0 || n > 1000000) {
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
			                 "sqlite: meta.schema_version is '%.32s', not a version number",
			                 v ? v : "NULL");
			goto out;
		}
		*version = (int)n;
	} else if (src != SQLITE_DONE) {
		rc = db_error(s, src, "reading the schema version");
	}
out:
	sqlite3_finalize(st);
	return rc;
}

static int migrate(struct sq *s, const char *path)
{
	for (;;) {
		sqlite3_stmt *st = NULL;
		char text[16];
		int version = -1, rc, src;

		if ((rc = tx_begin(s)) < 0)
			return rc;
		/* Inside the transaction, so that two processes opening a new file do not both migrate it. */
		if ((src = sqlite3_exec(s->db, "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
		                        NULL, NULL, NULL)) != SQLITE_OK) {
			rc = db_error(s, src, "creating the meta table");
			goto out;
		}
		if ((rc = schema_read(s, &version)) < 0)
			goto out;
		if (version > SAAS_STORE_SCHEMA) {
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
			                 "sqlite: %s has schema version %d, newer than the %d this libsaas knows; "
			                 "use a newer libsaas", path, version, SAAS_STORE_SCHEMA);
			goto out;
		}
		if (version == SAAS_STORE_SCHEMA) {
			rc = tx_commit(s);
			goto out;
		}
		if ((src = sqlite3_exec(s->db, migrations[version], NULL, NULL, NULL)) != SQLITE_OK) {
			rc = db_error(s, src, "migrating the schema");
			goto out;
		}
		snprintf(text, sizeof(text), "%d", version + 1);
		if ((rc = prep(s, &st, "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)")) < 0)
			goto out;
		if ((rc = bind_check(s, sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC))) < 0)
			goto out;
		if ((src = sqlite3_step(st)) != SQLITE_DONE) {
			rc = db_error(s, src, "recording the schema version");
			goto out;
		}
		if ((rc = tx_commit(s)) < 0)
			goto out;
		say(s, SAAS_LOG_INFO, "sqlite: %s: schema migrated from version %d to %d", path, version,
		      version + 1);
out:
		sqlite3_finalize(st);
		if (rc < 0) {
			tx_rollback(s);
			return rc;
		}
		if (version == SAAS_STORE_SCHEMA)
			return SAAS_OK;
	}
}

/* Run a statement that needs no parameters, such as a PRAGMA; `want` is the first column expected, or NULL. */
static int pragma(struct sq *s, const char *sql, const char *want)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = prep(s, &st, sql)) < 0)
		goto out;
	src = sqlite3_step(st);
	if (src != SQLITE_ROW && src != SQLITE_DONE) {
		rc = db_error(s, src, sql);
		goto out;
	}
	if (want) {
		const char *got = src == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;

		if (!got || strcmp(got, want) != 0)
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0, "sqlite: %s gave '%s', not '%s'", sql,
			                 got ? got : "nothing", want);
	}
out:
	sqlite3_finalize(st);
	return rc;
}

static void sq_close(void *ctx)
{
	struct sq *s = ctx;

	if (!s)
		return;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(s->cache); i++)
		sqlite3_finalize(s->cache[i]);
	if (s->db) {
		/* Cheap, and keeps the query planner's statistics useful for the next process. */
		sqlite3_exec(s->db, "PRAGMA optimize", NULL, NULL, NULL);
		sqlite3_close_v2(s->db);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int sq_open(void **ctx, const saas_store_env *env)
{
	const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
	struct sq *s = NULL;
	const char *path;
	int rc, src, fd;

	*ctx = NULL;
	if (!env || !env->url || !env->log)
		return saas__inval("store environment incomplete");
	path = saas__sqlite_path(env->url);
	if (!*path)
		return saas__inval("empty SQLite path");
	if (!(s = calloc(1, sizeof(*s))))
		return saas__oom();
	s->dialect = &sq_dialect;
	s->log = env->log;
	s->log_userdata = env->log_userdata;
	if ((rc = pthread_mutex_init(&s->lock, NULL)) != 0) {
		free(s);
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_OS, rc, "pthread_mutex_init: %s", strerror(rc));
	}

	/*
	 * Create the file ourselves so that it is private from the first byte:
	 * it holds key hashes and money. SQLite takes the -wal and -shm files'
	 * mode from it.
	 */
	if (strcmp(path, ":memory:") != 0) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_OS, errno, "sqlite: cannot open %s: %s", path,
			                 strerror(errno));
			goto out;
		}
		close(fd);
	}

	if ((src = sqlite3_open_v2(path, &s->db, flags, NULL)) != SQLITE_OK) {
		if (!s->db) {
			rc = saas__oom();
			goto out;
		}
		rc = db_error(s, src, "open");
		goto out;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	if ((rc = pragma(s, "PRAGMA foreign_keys = ON", NULL)) < 0 ||
	    (rc = pragma(s, "PRAGMA foreign_keys", "1")) < 0)
		goto out;
	if (strcmp(path, ":memory:") != 0) {
		/* WAL lets readers go on while one connection writes, which the server and the admin CLI need. */
		for (int attempt = 1;; attempt++) {
			rc = pragma(s, "PRAGMA journal_mode = WAL", "wal");
			if (rc == SAAS_OK || attempt >= BUSY_ATTEMPTS ||
			    (saas_error_last()->backend_code & 0xff) != SQLITE_BUSY)
				break;
		}
		if (rc < 0)
			goto out;
	}
	/* In WAL mode NORMAL loses at most the last transactions on power loss, never consistency. */
	if ((rc = pragma(s, "PRAGMA synchronous = NORMAL", NULL)) < 0)
		goto out;
	if ((rc = migrate(s, path)) < 0)
		goto out;
	*ctx = s;
	s = NULL;
out:
	sq_close(s);
	return rc;
}

static int sq_schema_version(void *ctx, int *version)
{
	struct sq *s = ctx;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = schema_read(s, version);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- accounts and credit ---- */

/* ---- API keys ---- */

/* ---- sandboxes ---- */

static int sandbox_check(const saas_store_sandbox *b)
{
	int rc;

	if (!b)
		return saas__inval("sandbox is NULL");
	if ((rc = check_field(b->id, sizeof(b->id), "sandbox id")) < 0 ||
	    (rc = check_field(b->account_id, sizeof(b->account_id), "account id")) < 0 ||
	    (rc = check_field(b->size, sizeof(b->size), "sandbox size")) < 0 ||
	    (rc = check_field(b->image, sizeof(b->image), "sandbox image")) < 0 ||
	    (rc = check_field(b->snapshot, sizeof(b->snapshot), "sandbox snapshot")) < 0 ||
	    (rc = check_field(b->parent_id, sizeof(b->parent_id), "sandbox parent")) < 0 ||
	    (rc = check_field(b->host_id, sizeof(b->host_id), "sandbox host")) < 0)
		return rc;
	return SAAS_OK;
}

/*
 * Inside the caller's write transaction: the account exists and has fewer
 * than `max_live` sandboxes not destroyed. The write lock held from the count
 * to the insert is what keeps two engines from both taking the last place.
 */
static int live_check(struct sq *s, const char *account_id, unsigned int max_live)
{
	sqlite3_stmt *st = NULL;
	int rc, src, found = 0;
	int64_t live;

	if ((rc = exists(s, "SELECT 1 FROM accounts WHERE id = ?1", account_id, &found)) < 0)
		goto out;
	if (!found) {
		rc = not_found("account", account_id);
		goto out;
	}
	if ((rc = prep(s, &st, "SELECT COUNT(*) FROM sandboxes WHERE account_id = ?1 AND status != 3")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, account_id))) < 0)
		goto out;
	if ((src = sqlite3_step(st)) != SQLITE_ROW) {
		rc = db_error(s, src, "counting live sandboxes");
		goto out;
	}
	live = sqlite3_column_int64(st, 0);
	if (live >= (int64_t)max_live)
		rc = saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, 0,
		                 "account '%s' already has %lld live sandboxes; the limit is %u", account_id,
		                 (long long)live, max_live);
out:
	sqlite3_finalize(st);
	return rc;
}

/* Inside the caller's write transaction, after live_check. */
static int sandbox_write(struct sq *s, const saas_store_sandbox *b)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = prep(s, &st, "INSERT INTO sandboxes (id, account_id, status, end_reason, size, vcpus, memory_mb,"
	                       " disk_gb, image, usd_micro_per_hour, created_at, ready_at, expires_at,"
	                       " destroyed_at, cost, network_mode, paused_at, paused_ms, paused_usd_micro_per_hour,"
	                       " snapshot, parent_id, host_id)"
	                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
	                       " ?17, ?18, ?19, ?20, ?21, ?22)")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, b->id) | bind_text(st, 2, b->account_id) |
	                            sqlite3_bind_int(st, 3, b->status) | sqlite3_bind_int(st, 4, b->end_reason) |
	                            bind_text(st, 5, b->size) | sqlite3_bind_int64(st, 6, b->vcpus) |
	                            sqlite3_bind_int64(st, 7, b->memory_mb) | sqlite3_bind_int64(st, 8, b->disk_gb) |
	                            bind_text(st, 9, b->image) | sqlite3_bind_int64(st, 10, b->usd_micro_per_hour) |
	                            sqlite3_bind_int64(st, 11, b->created_at_ms) |
	                            sqlite3_bind_int64(st, 12, b->ready_at_ms) |
	                            sqlite3_bind_int64(st, 13, b->expires_at_ms) |
	                            sqlite3_bind_int64(st, 14, b->destroyed_at_ms) |
	                            sqlite3_bind_int64(st, 15, b->cost_usd_micro) |
	                            (b->network_mode == SAAS_STORE_NETWORK_UNKNOWN
	                                     ? sqlite3_bind_null(st, 16)
	                                     : sqlite3_bind_int(st, 16, b->network_mode)) |
	                            sqlite3_bind_int64(st, 17, b->paused_at_ms) |
	                            sqlite3_bind_int64(st, 18, b->paused_ms) |
	                            sqlite3_bind_int64(st, 19, b->paused_usd_micro_per_hour) |
	                            bind_text(st, 20, b->snapshot) | bind_text(st, 21, b->parent_id) |
	                            bind_text(st, 22, b->host_id))) < 0)
		goto out;
	if ((src = sqlite3_step(st)) != SQLITE_DONE)
		rc = write_error(s, src, "sandbox", b->id, "account", b->account_id);
out:
	sqlite3_finalize(st);
	return rc;
}

/* ---- executions ---- */

/* ---- account limits ---- */

/* ---- ports ---- */

/* ---- network ---- */

/* ---- people: disabled accounts, key use, users, sessions, invites ---- */

/* Run a prepared statement that returns no row. */
static int step_done(struct sq *s, sqlite3_stmt *st, const char *what)
{
	int src = sqlite3_step(st);

	return src == SQLITE_DONE ? SAAS_OK : db_error(s, src, what);
}

/* Run `sql` with one text parameter ?1 and, if `n` is 2, one integer ?2; nothing returned. */
static int exec_text_int(struct sq *s, const char *sql, const char *text, int n, int64_t v, const char *what)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = prep(s, &st, sql)) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, text) | (n == 2 ? sqlite3_bind_int64(st, 2, v) : SQLITE_OK))) < 0)
		goto out;
	rc = step_done(s, st, what);
out:
	sqlite3_finalize(st);
	return rc;
}

#define USER_SELECT \
	"SELECT u.id, u.account_id, u.email, u.password_hash, u.is_operator, u.created_at, a.disabled_at" \
	" FROM users u JOIN accounts a ON a.id = u.account_id"

/* ---- version 6: leases, VM hosts, placement, MCP sessions ---- */

static int sq_lease_take(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms, int *held)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0 || (rc = saas__store_lease_time_check(now_ms, ttl_ms)) < 0)
		return rc;
	if (!held)
		return saas__inval("output is NULL");
	*held = 0;
	pthread_mutex_lock(&s->lock);
	/*
	 * One statement: a free or run-out lease is taken, the holder's own is
	 * renewed, and another holder's that runs on is left alone (no row
	 * changed). No read-then-write window for a second engine to slip into.
	 */
	if ((rc = prep(s, &st, "INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3 + ?4)"
	                       " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
	                       " expires_at = excluded.expires_at"
	                       " WHERE leases.holder = excluded.holder OR leases.expires_at <= ?3")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, name) | bind_text(st, 2, holder) | sqlite3_bind_int64(st, 3, now_ms) |
	                            sqlite3_bind_int64(st, 4, ttl_ms))) < 0)
		goto out;
	if ((rc = step_done(s, st, "taking a lease")) < 0)
		goto out;
	*held = sqlite3_changes(s->db) > 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_lease_release(void *ctx, const char *name, const char *holder)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "DELETE FROM leases WHERE name = ?1 AND holder = ?2")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, name) | bind_text(st, 2, holder))) < 0)
		goto out;
	rc = step_done(s, st, "releasing a lease");
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_lease_get(void *ctx, const char *name, char *holder, int64_t *expires_at_ms)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = check_arg(name, SAAS_STORE_LEASE_NAME_MAX, "lease name")) < 0)
		return rc;
	if (!holder || !expires_at_ms)
		return saas__inval("output is NULL");
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "SELECT holder, expires_at FROM leases WHERE name = ?1")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, name))) < 0)
		goto out;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		if ((rc = col_text(st, 0, holder, SAAS_STORE_HOLDER_MAX + 1)) == SAAS_OK)
			*expires_at_ms = sqlite3_column_int64(st, 1);
	} else if (src == SQLITE_DONE) {
		rc = not_found("lease", name);
	} else {
		rc = db_error(s, src, "reading a lease");
	}
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_host_insert(void *ctx, const saas_store_host *h)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = saas__store_host_check(h)) < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "INSERT INTO hosts (id, name, uri, address, state, cpu_overcommit_milli,"
	                       " mem_overcommit_milli, cpus, memory_mb, created_at, last_seen_at, state_at)"
	                       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, h->id) | bind_text(st, 2, h->name) | bind_text(st, 3, h->uri) |
	                            bind_text(st, 4, h->address) | sqlite3_bind_int(st, 5, h->state) |
	                            sqlite3_bind_int64(st, 6, h->cpu_overcommit_milli) |
	                            sqlite3_bind_int64(st, 7, h->mem_overcommit_milli) |
	                            sqlite3_bind_int64(st, 8, h->cpus) | sqlite3_bind_int64(st, 9, (int64_t)h->memory_mb) |
	                            sqlite3_bind_int64(st, 10, h->created_at_ms) |
	                            sqlite3_bind_int64(st, 11, h->last_seen_ms) |
	                            sqlite3_bind_int64(st, 12, h->state_at_ms))) < 0)
		goto out;
	if ((src = sqlite3_step(st)) != SQLITE_DONE)
		rc = write_error(s, src, "host", h->name, NULL, NULL);
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

#define HOST_SELECT \
	"SELECT id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb," \
	" created_at, last_seen_at, state_at FROM hosts"

static int host_row(sqlite3_stmt *st, saas_store_host *h)
{
	int rc;

	memset(h, 0, sizeof(*h));
	if ((rc = col_text(st, 0, h->id, sizeof(h->id))) < 0 || (rc = col_text(st, 1, h->name, sizeof(h->name))) < 0 ||
	    (rc = col_text(st, 2, h->uri, sizeof(h->uri))) < 0 ||
	    (rc = col_text(st, 3, h->address, sizeof(h->address))) < 0)
		return rc;
	h->state = sqlite3_column_int(st, 4);
	h->cpu_overcommit_milli = (unsigned int)sqlite3_column_int64(st, 5);
	h->mem_overcommit_milli = (unsigned int)sqlite3_column_int64(st, 6);
	h->cpus = (unsigned int)sqlite3_column_int64(st, 7);
	h->memory_mb = (uint64_t)sqlite3_column_int64(st, 8);
	h->created_at_ms = sqlite3_column_int64(st, 9);
	h->last_seen_ms = sqlite3_column_int64(st, 10);
	h->state_at_ms = sqlite3_column_int64(st, 11);
	return SAAS_OK;
}

static int sq_host_get(void *ctx, const char *id_or_name, saas_store_host *out)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = check_arg(id_or_name, SAAS__HOST_KEY_MAX, "host id or name")) < 0)
		return rc;
	if (!out)
		return saas__inval("output is NULL");
	pthread_mutex_lock(&s->lock);
	/* An id wins over a name, so a name that looks like another host's id cannot shadow it. */
	if ((rc = prep(s, &st, HOST_SELECT " WHERE id = ?1 OR name = ?1 ORDER BY id = ?1 DESC LIMIT 1")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, id_or_name))) < 0)
		goto out;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		rc = host_row(st, out);
	else if (src == SQLITE_DONE)
		rc = not_found("host", id_or_name);
	else
		rc = db_error(s, src, "reading a host");
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_host_list(void *ctx, saas_store_host_fn fn, void *userdata)
{
	struct sq *s = ctx;
	struct rows rows = { NULL, 0, 0, sizeof(saas_store_host) };
	sqlite3_stmt *st = NULL;
	int rc, src;

	if (!fn)
		return saas__inval("callback is NULL");
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, HOST_SELECT " ORDER BY created_at, id")) < 0)
		goto out;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		saas_store_host *h = rows_add(&rows);

		if (!h) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if ((rc = host_row(st, h)) < 0)
			goto out;
	}
	if (src != SQLITE_DONE)
		rc = db_error(s, src, "listing hosts");
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; rc == SAAS_OK && i < rows.n; i++)
		if (fn(userdata, (saas_store_host *)(rows.data + i * rows.elem)) != 0)
			break;
	free(rows.data);
	return rc;
}

static int sq_host_set_state(void *ctx, const char *id, int from, int to, int64_t at_ms)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, found = 0;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if ((from != -1 && !saas__store_host_state_valid(from)) || !saas__store_host_state_valid(to))
		return saas__inval("host state %d -> %d is not between active, draining and lost", from, to);
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "UPDATE hosts SET state = ?3, state_at = ?4 WHERE id = ?1 AND (?2 < 0 OR state = ?2)")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, id) | sqlite3_bind_int(st, 2, from) | sqlite3_bind_int(st, 3, to) |
	                            sqlite3_bind_int64(st, 4, at_ms))) < 0)
		goto out;
	if ((rc = step_done(s, st, "changing a host's state")) < 0)
		goto out;
	if (sqlite3_changes(s->db) == 0) {
		if ((rc = exists(s, "SELECT 1 FROM hosts WHERE id = ?1", id, &found)) < 0)
			goto out;
		rc = found ? saas__error(SAAS_ESTATE, SAAS_ERRCLASS_STORE, 0, "host '%.64s' is no longer in state %d", id,
		                         from)
		           : not_found("host", id);
	}
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_host_seen(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	if (memory_mb > SAAS__HOST_MEMORY_MB_MAX)
		return saas__inval("host memory %llu MiB is out of range", (unsigned long long)memory_mb);
	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "UPDATE hosts SET cpus = ?3, memory_mb = ?4, last_seen_at = MAX(last_seen_at, ?2)"
	                       " WHERE id = ?1")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, id) | sqlite3_bind_int64(st, 2, at_ms) |
	                            sqlite3_bind_int64(st, 3, cpus) | sqlite3_bind_int64(st, 4, (int64_t)memory_mb))) < 0)
		goto out;
	if ((rc = step_done(s, st, "recording a host's heartbeat")) < 0)
		goto out;
	if (sqlite3_changes(s->db) == 0)
		rc = not_found("host", id);
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_host_delete(void *ctx, const char *id)
{
	struct sq *s = ctx;
	int rc, found = 0, busy = 0;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")) < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	/* The write lock keeps a placement from landing between the check and the delete. */
	if ((rc = tx_begin(s)) < 0)
		goto out;
	if ((rc = exists(s, "SELECT 1 FROM hosts WHERE id = ?1", id, &found)) < 0)
		goto out;
	if (!found) {
		rc = not_found("host", id);
		goto out;
	}
	if ((rc = exists(s, "SELECT 1 FROM sandboxes WHERE host_id = ?1 AND status != 3", id, &busy)) < 0)
		goto out;
	if (busy) {
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                 "host '%.64s' still has sandboxes that are not destroyed; drain it first", id);
		goto out;
	}
	if ((rc = exec_text_int(s, "DELETE FROM hosts WHERE id = ?1", id, 1, 0, "deleting a host")) < 0)
		goto out;
	rc = tx_commit(s);
out:
	if (rc < 0)
		tx_rollback(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/*
 * The host with the most memory left that has room for `b`, or "" if none.
 * Room compares in thousandths, (used + need) x 1000 <= capacity x milli, so
 * no rounding of the overcommitted capacity lets a sandbox too many in. What
 * the caller says runs there without a row (p->extra) counts as used, so the
 * choice is made here, in id order: of equals, the smallest id wins.
 */
static int place_pick(struct sq *s, const saas_store_sandbox *b, const saas_store_placement *p,
                      char host_id[SAAS_ID_MAX + 1])
{
	sqlite3_stmt *st = NULL;
	int64_t best_left = -1;
	int rc = SAAS_OK, src;

	host_id[0] = '\0';
	if ((rc = prep(s, &st, "SELECT h.id, h.cpus * h.cpu_overcommit_milli, h.memory_mb * h.mem_overcommit_milli,"
	                       " COALESCE(SUM(b.vcpus), 0), COALESCE(SUM(b.memory_mb), 0) FROM hosts h"
	                       " LEFT JOIN sandboxes b ON b.host_id = h.id AND b.status != 3"
	                       " WHERE h.state = 0 AND h.last_seen_at >= ?1 AND (?2 = '' OR h.id = ?2)"
	                       " GROUP BY h.id ORDER BY h.id")) < 0)
		goto out;
	if ((rc = bind_check(s, sqlite3_bind_int64(st, 1, p->seen_after_ms) |
	                            bind_text(st, 2, p->host_id ? p->host_id : ""))) < 0)
		goto out;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		char id[SAAS_ID_MAX + 1];
		int64_t cpu_cap = sqlite3_column_int64(st, 1), mem_cap = sqlite3_column_int64(st, 2);
		int64_t cpu_used = sqlite3_column_int64(st, 3), mem_used = sqlite3_column_int64(st, 4);

		if ((rc = col_text(st, 0, id, sizeof(id))) < 0)
			goto out;
		for (size_t k = 0; p->extra && k < p->nextra; k++)
			if (p->extra[k].host_id && strcmp(p->extra[k].host_id, id) == 0) {
				cpu_used += p->extra[k].vcpus;
				mem_used += (int64_t)p->extra[k].memory_mb;
			}
		if ((cpu_used + (int64_t)b->vcpus) * 1000 > cpu_cap || (mem_used + (int64_t)b->memory_mb) * 1000 > mem_cap)
			continue;
		if (mem_cap - mem_used * 1000 > best_left) {
			best_left = mem_cap - mem_used * 1000;
			saas__strlcpy(host_id, id, SAAS_ID_MAX + 1);
		}
	}
	if (src != SQLITE_DONE)
		rc = db_error(s, src, "choosing a host");
out:
	sqlite3_finalize(st);
	return rc;
}

static int sq_sandbox_place(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p)
{
	struct sq *s = ctx;
	saas_store_sandbox b;
	int rc;

	if ((rc = sandbox_check(sandbox)) < 0)
		return rc;
	if (!p)
		return saas__inval("placement is NULL");
	if (p->host_id && (rc = check_arg(p->host_id, SAAS_ID_MAX, "placement host id")) < 0)
		return rc;
	b = *sandbox;
	pthread_mutex_lock(&s->lock);
	/*
	 * BEGIN IMMEDIATE takes the database's one write lock before the count:
	 * no other placement or insert, from this process or another, can add a
	 * sandbox between reading what a host holds and inserting onto it, so
	 * two placements cannot both take a host's last room.
	 */
	if ((rc = tx_begin(s)) < 0)
		goto out;
	if ((rc = live_check(s, b.account_id, p->max_live)) < 0)
		goto out;
	if ((rc = place_pick(s, &b, p, b.host_id)) < 0)
		goto out;
	if (!b.host_id[0]) {
		rc = p->host_id && *p->host_id
		             ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                           "host '%.64s' is not active, not seen lately or has no room for %u vCPUs and "
		                           "%u MiB", p->host_id, b.vcpus, b.memory_mb)
		             : saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                           "no active host seen lately has room for %u vCPUs and %u MiB; "
		                           "add or undrain a host", b.vcpus, b.memory_mb);
		goto out;
	}
	if ((rc = sandbox_write(s, &b)) < 0 || (rc = tx_commit(s)) < 0)
		goto out;
	memcpy(sandbox->host_id, b.host_id, sizeof(b.host_id));
out:
	if (rc < 0)
		tx_rollback(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_mcp_session_insert(void *ctx, const char *hash, const char *version, int64_t at_ms, unsigned int max)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0 ||
	    (rc = check_arg(version, SAAS_STORE_MCP_VERSION_MAX, "MCP protocol version")) < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	if ((rc = tx_begin(s)) < 0)
		goto out;
	if ((rc = prep(s, &st, "INSERT INTO mcp_sessions (hash, version, created_at, last_used_at)"
	                       " VALUES (?1, ?2, ?3, ?3)")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, hash) | bind_text(st, 2, version) | sqlite3_bind_int64(st, 3, at_ms))) < 0)
		goto out;
	if ((src = sqlite3_step(st)) != SQLITE_DONE) {
		rc = write_error(s, src, "MCP session", "(hash)", NULL, NULL);
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;
	/*
	 * The others past the newest max - 1, so that the new one is the max-th
	 * whatever the clocks of other engines wrote (ties: the hash decides).
	 */
	if (max) {
		if ((rc = prep(s, &st, "DELETE FROM mcp_sessions WHERE hash IN (SELECT hash FROM mcp_sessions WHERE hash <> ?2"
		                       " ORDER BY last_used_at DESC, hash DESC LIMIT -1 OFFSET ?1)")) < 0 ||
		    (rc = bind_check(s, sqlite3_bind_int64(st, 1, (int64_t)max - 1) | bind_text(st, 2, hash))) < 0)
			goto out;
		if ((src = sqlite3_step(st)) != SQLITE_DONE) {
			rc = db_error(s, src, "ending the least recently used MCP sessions");
			goto out;
		}
	}
	rc = tx_commit(s);
out:
	sqlite3_finalize(st);
	if (rc < 0)
		tx_rollback(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_mcp_session_touch(void *ctx, const char *hash, int64_t at_ms, int64_t used_after_ms, char *version)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc, src;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0)
		return rc;
	if (!version)
		return saas__inval("output is NULL");
	pthread_mutex_lock(&s->lock);
	/* One transaction, so that what is read is the row the use was recorded on. */
	if ((rc = tx_begin(s)) < 0)
		goto out;
	if ((rc = prep(s, &st, "UPDATE mcp_sessions SET last_used_at = MAX(last_used_at, ?2)"
	                       " WHERE hash = ?1 AND last_used_at >= ?3")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, hash) | sqlite3_bind_int64(st, 2, at_ms) |
	                            sqlite3_bind_int64(st, 3, used_after_ms))) < 0)
		goto out;
	if ((rc = step_done(s, st, "using an MCP session")) < 0)
		goto out;
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_changes(s->db) == 0) {
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no MCP session with this id, or it was idle too long");
		goto out;
	}
	if ((rc = prep(s, &st, "SELECT version FROM mcp_sessions WHERE hash = ?1")) < 0)
		goto out;
	if ((rc = bind_check(s, bind_text(st, 1, hash))) < 0)
		goto out;
	if ((src = sqlite3_step(st)) != SQLITE_ROW) {
		rc = db_error(s, src, "reading an MCP session");
		goto out;
	}
	if ((rc = col_text(st, 0, version, SAAS_STORE_MCP_VERSION_MAX + 1)) < 0)
		goto out;
	sqlite3_finalize(st);
	st = NULL;
	rc = tx_commit(s);
out:
	sqlite3_finalize(st);
	if (rc < 0)
		tx_rollback(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_mcp_session_delete(void *ctx, const char *hash)
{
	struct sq *s = ctx;
	int rc;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	rc = exec_text_int(s, "DELETE FROM mcp_sessions WHERE hash = ?1", hash, 1, 0, "ending an MCP session");
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sq_mcp_session_prune(void *ctx, int64_t used_before_ms)
{
	struct sq *s = ctx;
	sqlite3_stmt *st = NULL;
	int rc;

	pthread_mutex_lock(&s->lock);
	if ((rc = prep(s, &st, "DELETE FROM mcp_sessions WHERE last_used_at < ?1")) < 0)
		goto out;
	if ((rc = bind_check(s, sqlite3_bind_int64(st, 1, used_before_ms))) < 0)
		goto out;
	rc = step_done(s, st, "pruning MCP sessions");
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

const saas_store saas__store_sqlite = {
	.version = SAAS_STORE_VERSION,
	.name = "sqlite",
	.open = sq_open,
	.close = sq_close,
	.schema_version = sq_schema_version,
	.account_insert = saas__st_account_insert,
	.account_get = saas__st_account_get,
	.account_list = saas__st_account_list,
	.credit_add = saas__st_credit_add,
	.key_insert = saas__st_key_insert,
	.key_find = saas__st_key_find,
	.key_revoke = saas__st_key_revoke,
	.key_list = saas__st_key_list,
	.sandbox_insert = saas__st_sandbox_insert,
	.sandbox_get = saas__st_sandbox_get,
	.sandbox_list = saas__st_sandbox_list,
	.sandbox_set_ready = saas__st_sandbox_set_ready,
	.sandbox_set_expiry = saas__st_sandbox_set_expiry,
	.sandbox_set_state = saas__st_sandbox_set_state,
	.sandbox_close = saas__st_sandbox_close,
	.sandbox_delete = saas__st_sandbox_delete,
	.execution_insert = saas__st_execution_insert,
	.execution_finish = saas__st_execution_finish,
	.execution_get = saas__st_execution_get,
	.execution_fail_running = saas__st_execution_fail_running,
	.port_insert = saas__st_port_insert,
	.port_list = saas__st_port_list,
	.execution_prune = saas__st_execution_prune,
	.limits_get = saas__st_limits_get,
	.limits_set = saas__st_limits_set,
	.port_find = saas__st_port_find,
	.port_delete = saas__st_port_delete,
	.sandbox_network_get = saas__st_sandbox_network_get,
	.sandbox_network_set = saas__st_sandbox_network_set,
	.account_disable = saas__st_account_disable,
	.key_touch = saas__st_key_touch,
	.user_insert = saas__st_user_insert,
	.user_find = saas__st_user_find,
	.user_list = saas__st_user_list,
	.user_update = saas__st_user_update,
	.session_insert = saas__st_session_insert,
	.session_find = saas__st_session_find,
	.session_touch = saas__st_session_touch,
	.session_delete = saas__st_session_delete,
	.session_prune = saas__st_session_prune,
	.invite_insert = saas__st_invite_insert,
	.sandbox_egress_record = saas__st_sandbox_egress_record,
	.sandbox_egress_rebase = saas__st_sandbox_egress_rebase,
	.execution_list = saas__st_execution_list,
	.lease_take = sq_lease_take,
	.lease_release = sq_lease_release,
	.lease_get = sq_lease_get,
	.host_insert = sq_host_insert,
	.host_get = sq_host_get,
	.host_list = sq_host_list,
	.host_set_state = sq_host_set_state,
	.host_seen = sq_host_seen,
	.host_delete = sq_host_delete,
	.sandbox_place = sq_sandbox_place,
	.mcp_session_insert = sq_mcp_session_insert,
	.mcp_session_touch = sq_mcp_session_touch,
	.mcp_session_delete = sq_mcp_session_delete,
	.mcp_session_prune = sq_mcp_session_prune,
};
