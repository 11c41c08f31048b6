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
 * This file is the SQLite dialect (store/dialect.h): opening the file,
 * transactions, running one statement (each of the shared slots' kept prepared
 * on the connection), and the schema's steps. What every slot does is the
 * shared rooms' (store/slots.h), shared with PostgreSQL; the schema is documented in lib/store/schema.md.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

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
	/* The shared slots' statements, prepared once on this connection (by saas__sql.id). */
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
static const char *const steps[] = {
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
	 * 3 -> 4: each sandbox's egress: the mode it was made with or
	 * last set to, and a policy's rules. Rows from before read as unknown (NULL).
	 */
	"ALTER TABLE sandboxes ADD COLUMN network_mode INT;"
	"ALTER TABLE sandboxes ADD COLUMN network_allow TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN network_deny TEXT NOT NULL DEFAULT '';",
	/*
	 * 4 -> 5: accounts for people: users who log in to the pages,
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
	 * 5 -> 6: pause and fork: when the current pause began, the
	 * time spent in pauses that ended, the paused price the sandbox was made
	 * with, the snapshot holding its state, and the sandbox it was forked from.
	 */
	"ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_ms BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_usd_micro_per_hour BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';",
	/*
	 * 6 -> 7: each sandbox's egress refusals, kept past a restart
	 * of the engine (whose driver counts from zero again) and past its end.
	 */
	"ALTER TABLE sandboxes ADD COLUMN denied_connections BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_lookups BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_connections_base BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN denied_lookups_base BIGINT NOT NULL DEFAULT 0;",
	/*
	 * 7 -> 8: many engines on one database, many VM hosts: the
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
	/*
	 * 8 -> 9: what an E2B create gives that the engine keeps (issue #32):
	 * each sandbox's metadata and default environment, one row a pair (kind
	 * 1 metadata, 2 environment), gone with a sandbox deleted while being
	 * made; what its timeout does and the lifetime it asked. The index
	 * serves a list filtered by metadata; only metadata's, whose bounded
	 * values fit a B-tree entry (an environment value may not).
	 */
	"ALTER TABLE sandboxes ADD COLUMN on_timeout INT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN auto_resume INT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN timeout_s BIGINT NOT NULL DEFAULT 0;"
	"CREATE TABLE sandbox_values ("
	"  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  kind INT NOT NULL,"
	"  key TEXT NOT NULL,"
	"  value TEXT NOT NULL,"
	"  PRIMARY KEY (sandbox_id, kind, key)"
	");"
	"CREATE INDEX sandbox_values_match ON sandbox_values (key, value) WHERE kind = 1;",
};

_Static_assert(SAAS_ARRAY_SIZE(steps) == SAAS_STORE_SCHEMA,
               "one migration step per schema version");

/* ---- errors and small helpers ---- */

static int db_error(struct sq *s, int rc, const char *what)
{
	return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, rc, "sqlite: %s: %s", what,
	                   sqlite3_errmsg(s->db));
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

static int tx_begin(void *conn)
{
	struct sq *s = conn;

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
static void tx_rollback(void *conn)
{
	struct sq *s = conn;

	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

static int tx_commit(void *conn)
{
	struct sq *s = conn;
	int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		rc = db_error(s, rc, "commit");
		tx_rollback(s);
		return rc;
	}
	return SAAS_OK;
}

/* A growable array of records, so that callbacks run without the lock. */
struct rows {
	char *data;
	size_t n, cap, elem;
};

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

/* The shared slots write $1, $2 ...: SQLite's ?1, ?2 ... (outside quoted literals). */
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
		/* A duplicate is the caller's, and so is a parent that does not exist; the slot names them. */
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

static int sq_script(void *conn, const char *sql, const char *what)
{
	struct sq *s = conn;
	int src = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

	return src == SQLITE_OK ? SAAS_OK : db_error(s, src, what);
}

static void sq_log(void *conn, int level, const char *msg)
{
	struct sq *s = conn;

	s->log(s->log_userdata, level, msg);
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
	.enter = sq_enter,
	.leave = sq_leave,
	.begin = tx_begin,
	.commit = tx_commit,
	.rollback = tx_rollback,
	.run = sq_run,
	.col_i64 = sq_col_i64,
	.script = sq_script,
	.log = sq_log,
	.steps = steps,
	.migrate_prologue = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
	.col_null = sq_col_null,
	.col_text = sq_col_text,
};

/* ---- open, migrate, close ---- */

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
	char where[256];
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
	snprintf(where, sizeof(where), "sqlite: %s", path);
	if ((rc = saas__store_migrate(s, where)) < 0)
		goto out;
	*ctx = s;
	s = NULL;
out:
	sq_close(s);
	return rc;
}


const saas_store saas__store_sqlite = {
	.version = SAAS_STORE_VERSION,
	.name = "sqlite",
	.open = sq_open,
	.close = sq_close,
	SAAS__STORE_SHARED_SLOTS,
};
