/*
 * The PostgreSQL state store.
 *
 * Several servers may share one database, so every step that two engines
 * could race on is made atomic by PostgreSQL itself: a row lock on the
 * account serialises sandbox inserts (the live-sandbox limit), the UPDATE of
 * a sandbox's status serialises closes (one charge, ever), and a partial
 * unique index on the ledger backs that up. Migrations take an advisory lock
 * so that servers starting together migrate once.
 *
 * A pool of connections per store (aas_pool=N in the URL, default 4): a
 * store call takes one for itself from its first statement to its last, so
 * a transaction never spans two connections, and other threads' calls run
 * on the others at the same time. Every value travels as a query
 * parameter, never formatted into SQL; execution output travels as binary
 * bytea so NUL bytes survive.
 *
 * This file is the PostgreSQL dialect (store/dialect.h): the pool,
 * transactions, running one statement with declared parameter types, and the
 * schema's steps. What every slot does is the shared rooms' (store/slots.h),
 * shared with SQLite.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <endian.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "store/dialect.h"
#include "store/store.h"
#include "util/error.h"
#include "util/util.h"

/* The advisory lock key that serialises migrations: "saas" in ASCII. */
#define MIGRATE_LOCK_KEY "1935765875"

/* Longest store error message kept from the server. */
#define PG_MESSAGE_MAX 512

/*
 * The pool's size: `aas_pool=N` in the URL's query, which the store takes
 * out before libpq sees the URL (docs/operations.md).
 */
#define POOL_DEFAULT 4
#define POOL_MAX 64
#define POOL_OPTION "aas_pool="
/* How long a call waits for a free connection before it gives up. */
#define POOL_WAIT_MS 30000

struct pool;

/* One connection of the pool: a store call has it to itself from pg_enter() to pg_leave(). */
struct pg {
	PGconn *conn;              /* NULL until the pool first needs it */
	struct pool *pool;
	bool busy;
	saas_log_fn log;
	void *log_userdata;
};

struct pool {
	const struct saas__dialect *dialect; /* first: the shared slots find it there */
	pthread_mutex_t lock;      /* guards every conns[i].busy */
	pthread_cond_t freed;      /* a connection went back to the pool */
	char *conninfo;            /* the URL without the store's own options */
	unsigned int size;
	struct pg conns[];
};

/*
 * Schema steps: steps[n] takes a database from version n to n + 1. Columns
 * are the same as SQLite's (lib/store/schema.md). Ids are COLLATE "C" so that
 * they sort bytewise, as in SQLite, whatever the database's locale.
 */
static const char *const steps[] = {
	/* 0 -> 1 */
	"CREATE TABLE accounts ("
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  account_id TEXT COLLATE \"C\" NOT NULL REFERENCES accounts(id),"
	"  name TEXT NOT NULL,"
	"  prefix TEXT NOT NULL,"
	"  hash TEXT NOT NULL UNIQUE,"
	"  created_at BIGINT NOT NULL,"
	"  revoked_at BIGINT NOT NULL DEFAULT 0);"
	"CREATE INDEX api_keys_account ON api_keys (account_id, created_at, id);"
	"CREATE TABLE sandboxes ("
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  account_id TEXT COLLATE \"C\" NOT NULL REFERENCES accounts(id),"
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
	"  cost BIGINT NOT NULL DEFAULT 0);"
	"CREATE INDEX sandboxes_account_created ON sandboxes (account_id, created_at DESC, id DESC);"
	"CREATE INDEX sandboxes_status_expires ON sandboxes (status, expires_at);"
	"CREATE TABLE executions ("
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  sandbox_id TEXT COLLATE \"C\" NOT NULL REFERENCES sandboxes(id),"
	"  account_id TEXT COLLATE \"C\" NOT NULL,"
	"  status INT NOT NULL,"
	"  exit_code INT NOT NULL DEFAULT -1,"
	"  command TEXT NOT NULL,"
	"  stdout BYTEA,"
	"  stderr BYTEA,"
	"  stdout_truncated INT NOT NULL DEFAULT 0,"
	"  stderr_truncated INT NOT NULL DEFAULT 0,"
	"  error TEXT,"
	"  started_at BIGINT NOT NULL,"
	"  finished_at BIGINT NOT NULL DEFAULT 0);"
	"CREATE INDEX executions_sandbox_status ON executions (sandbox_id, status);"
	"CREATE TABLE ports ("
	"  sandbox_id TEXT COLLATE \"C\" NOT NULL REFERENCES sandboxes(id),"
	"  port INT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  PRIMARY KEY (sandbox_id, port));"
	"CREATE TABLE ledger ("
	"  id BIGSERIAL PRIMARY KEY,"
	"  account_id TEXT COLLATE \"C\" NOT NULL REFERENCES accounts(id),"
	"  kind TEXT NOT NULL CHECK (kind IN ('credit', 'charge')),"
	"  amount BIGINT NOT NULL CHECK (amount > 0),"
	"  sandbox_id TEXT COLLATE \"C\","
	"  note TEXT,"
	"  at BIGINT NOT NULL);"
	/* The database itself guarantees that no sandbox is ever charged twice. */
	"CREATE UNIQUE INDEX ledger_one_charge ON ledger (sandbox_id) WHERE kind = 'charge';"
	"CREATE INDEX ledger_account ON ledger (account_id, kind);"
	/* Money history is append-only; refuse edits from any client, not just ours. */
	"CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS"
	"  $$BEGIN RAISE EXCEPTION 'the ledger is append-only'; END$$;"
	"CREATE TRIGGER ledger_no_update BEFORE UPDATE OR DELETE ON ledger"
	"  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();"
	"CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger"
	"  FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();",
	/* 1 -> 2: per-account limits set by an operator; finding executions past their retention */
	"CREATE TABLE account_limits ("
	"  account_id TEXT COLLATE \"C\" PRIMARY KEY REFERENCES accounts(id),"
	"  max_sandboxes INT NOT NULL DEFAULT 0,"
	"  max_executions INT NOT NULL DEFAULT 0,"
	"  creates_per_minute INT NOT NULL DEFAULT 0,"
	"  requests_per_second INT NOT NULL DEFAULT 0,"
	"  updated_at BIGINT NOT NULL);"
	"CREATE INDEX executions_finished ON executions (finished_at);",
	/*
	 * 2 -> 3: each exposure has its own unguessable name, the host label of its
	 * preview URL. Exposures made before had guessable URLs ({port}-{id}) that
	 * must stop working; they are dropped rather than given names nobody was shown.
	 */
	"DROP TABLE ports;"
	"CREATE TABLE ports ("
	"  sandbox_id TEXT COLLATE \"C\" NOT NULL REFERENCES sandboxes(id),"
	"  port INT NOT NULL,"
	"  name TEXT COLLATE \"C\" NOT NULL UNIQUE,"
	"  created_at BIGINT NOT NULL,"
	"  PRIMARY KEY (sandbox_id, port));",
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
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  account_id TEXT COLLATE \"C\" NOT NULL REFERENCES accounts(id),"
	"  email TEXT COLLATE \"C\" NOT NULL UNIQUE,"
	"  password_hash TEXT NOT NULL,"
	"  is_operator INT NOT NULL DEFAULT 0,"
	"  created_at BIGINT NOT NULL);"
	"CREATE INDEX users_account ON users (account_id);"
	"CREATE TABLE sessions ("
	"  hash TEXT COLLATE \"C\" PRIMARY KEY,"
	"  user_id TEXT COLLATE \"C\" NOT NULL REFERENCES users(id),"
	"  created_at BIGINT NOT NULL,"
	"  last_seen_at BIGINT NOT NULL);"
	"CREATE INDEX sessions_user ON sessions (user_id);"
	"CREATE TABLE invites ("
	"  hash TEXT COLLATE \"C\" PRIMARY KEY,"
	"  created_at BIGINT NOT NULL,"
	"  used_at BIGINT NOT NULL DEFAULT 0,"
	"  used_by TEXT COLLATE \"C\");",
	/*
	 * 5 -> 6: pause and fork: when the current pause began, the
	 * time spent in pauses that ended, the paused price the sandbox was made
	 * with, the snapshot holding its state, and the sandbox it was forked from.
	 */
	"ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_ms BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_usd_micro_per_hour BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT COLLATE \"C\" NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN parent_id TEXT COLLATE \"C\" NOT NULL DEFAULT '';",
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
	"ALTER TABLE sandboxes ADD COLUMN host_id TEXT COLLATE \"C\" NOT NULL DEFAULT '';"
	"CREATE INDEX sandboxes_host_live ON sandboxes (host_id) WHERE status != 3;"
	"CREATE TABLE leases ("
	"  name TEXT COLLATE \"C\" PRIMARY KEY,"
	"  holder TEXT COLLATE \"C\" NOT NULL,"
	"  expires_at BIGINT NOT NULL);"
	"CREATE TABLE hosts ("
	"  id TEXT COLLATE \"C\" PRIMARY KEY,"
	"  name TEXT COLLATE \"C\" NOT NULL UNIQUE,"
	"  uri TEXT NOT NULL,"
	"  address TEXT NOT NULL,"
	"  state INT NOT NULL DEFAULT 0,"
	"  cpu_overcommit_milli INT NOT NULL,"
	"  mem_overcommit_milli INT NOT NULL,"
	"  cpus INT NOT NULL DEFAULT 0,"
	"  memory_mb BIGINT NOT NULL DEFAULT 0,"
	"  created_at BIGINT NOT NULL,"
	"  last_seen_at BIGINT NOT NULL DEFAULT 0,"
	"  state_at BIGINT NOT NULL DEFAULT 0);"
	"CREATE TABLE mcp_sessions ("
	"  hash TEXT COLLATE \"C\" PRIMARY KEY,"
	"  version TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  last_used_at BIGINT NOT NULL);"
	"CREATE INDEX mcp_sessions_used ON mcp_sessions (last_used_at);",
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
	"  sandbox_id TEXT COLLATE \"C\" NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	"  kind INT NOT NULL,"
	"  key TEXT COLLATE \"C\" NOT NULL,"
	"  value TEXT COLLATE \"C\" NOT NULL,"
	"  PRIMARY KEY (sandbox_id, kind, key)"
	");"
	"CREATE INDEX sandbox_values_match ON sandbox_values (key, value) WHERE kind = 1;",
};

_Static_assert(SAAS_ARRAY_SIZE(steps) == SAAS_STORE_SCHEMA, "one migration step per schema version");

/* ---- helpers ----------------------------------------------------------- */

static void pg_log(struct pg *pg, int level, const char *msg)
{
	if (pg->log)
		pg->log(pg->log_userdata, level, msg);
}

/* libpq prints notices on stderr by default; the library never prints. */
static void on_notice(void *arg, const char *message)
{
	struct pg *pg = arg;
	char buf[PG_MESSAGE_MAX];
	size_t n;

	snprintf(buf, sizeof(buf), "postgresql: %s", message);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	pg_log(pg, SAAS_LOG_DEBUG, buf);
}

/* libpq's multi-line message as one line, for saas_error_last(). */
static void one_line(char *out, size_t size, const char *msg)
{
	size_t i, n = 0;

	for (i = 0; msg[i] && n + 1 < size; i++) {
		char c = (msg[i] == '\n' || msg[i] == '\t') ? ' ' : msg[i];

		if (c == ' ' && (n == 0 || out[n - 1] == ' '))
			continue;
		out[n++] = c;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}

/* Replace every occurrence of s[0..n) in msg with "***". */
static void redact(char *msg, const char *s, size_t n)
{
	char *hit, *from = msg;

	while (n && (hit = memmem(from, strlen(from), s, n))) {
		memmove(hit + 3, hit + n, strlen(hit + n) + 1);
		memcpy(hit, "***", 3);
		from = hit + 3;
	}
}

/* The password, as written and %-decoded (as libpq may quote either), out of msg. */
static void redact_both(char *msg, const char *s, size_t n)
{
	char dec[512];
	size_t m = 0;

	if (n == 0 || n >= sizeof(dec))
		return;
	redact(msg, s, n);
	for (size_t i = 0; i < n; i++) {
		unsigned int v;

		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) && isxdigit((unsigned char)s[i + 2]) &&
		    sscanf(s + i + 1, "%2x", &v) == 1) {
			dec[m++] = (char)v;
			i += 2;
		} else {
			dec[m++] = s[i];
		}
	}
	redact(msg, dec, m);
}

/*
 * Blank out the URL's password (in its user info or a password= parameter)
 * wherever msg repeats it: libpq quotes pieces of a URL it cannot parse (a bad
 * %-escape, say), and the message goes to the log and to whoever opened the
 * engine.
 */
static void scrub_password(char *msg, const char *url)
{
	const char *a = strstr(url, "://"), *q = strchr(url, '?'), *at, *colon;
	size_t auth;

	if (!a)
		return;
	a += 3;
	/* libpq's user info ends at the first '@' before the host's end. */
	auth = strcspn(a, "/?");
	if ((at = memchr(a, '@', auth)) && (colon = memchr(a, ':', (size_t)(at - a))))
		redact_both(msg, colon + 1, (size_t)(at - colon - 1));
	for (const char *p = q ? q + 1 : NULL; p && *p; p += *p != '\0') {
		size_t n = strcspn(p, "&");

		if (n > 9 && strncmp(p, "password=", 9) == 0)
			redact_both(msg, p + 9, n - 9);
		p += n;
	}
}

/*
 * Record a failed statement. A unique violation is the caller's duplicate
 * and a foreign key violation names a parent that does not exist; anything
 * else is the store's failure.
 */
static int pg_fail(struct pg *pg, const PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char msg[PG_MESSAGE_MAX];
	int code = SAAS_ESTORE;

	one_line(msg, sizeof(msg), PQerrorMessage(pg->conn));
	if (state && strcmp(state, "23505") == 0)
		code = SAAS_EEXISTS;
	else if (state && strcmp(state, "23503") == 0)
		code = SAAS_ENOTFOUND;
	return saas__error_sqlstate(code, state, "%s: %s", what, msg);
}

/* Run one statement; on failure record it, clear the result and return the code. */
static int run_ex(struct pg *pg, PGresult **out, const char *what, const char *sql, int n, const Oid *types,
                  const char *const *values, const int *lengths, const int *formats, int binary_result,
                  int retry)
{
	PGresult *res;
	ExecStatusType st;
	int rc;

	res = PQexecParams(pg->conn, sql, n, types, values, lengths, formats, binary_result);
	st = PQresultStatus(res);
	/*
	 * pg_enter() catches a connection that died while idle; this catches one
	 * that dies under a statement. Statements that are safe to repeat (reads,
	 * BEGIN) get one more try on a new connection; a write is not repeated,
	 * since it may have committed before the connection died, but the next
	 * call starts on a new connection.
	 */
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && retry && PQstatus(pg->conn) == CONNECTION_BAD) {
		PQclear(res);
		pg_log(pg, SAAS_LOG_WARN, "postgresql: connection lost; reconnecting");
		PQreset(pg->conn);
		res = PQexecParams(pg->conn, sql, n, types, values, lengths, formats, binary_result);
		st = PQresultStatus(res);
	}
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		rc = pg_fail(pg, res, what);
		PQclear(res);
		if (out)
			*out = NULL;
		return rc;
	}
	if (out)
		*out = res;
	else
		PQclear(res);
	return SAAS_OK;
}

static int tx_begin(void *conn)
{
	struct pg *pg = conn;

	return run_ex(pg, NULL, "BEGIN", "BEGIN", 0, NULL, NULL, NULL, NULL, 0, 1);
}

static int tx_commit(void *conn)
{
	struct pg *pg = conn;

	return run_ex(pg, NULL, "COMMIT", "COMMIT", 0, NULL, NULL, NULL, NULL, 0, 0);
}

/* Abandon a transaction; the error already recorded is the one that matters. */
static void tx_rollback(void *conn)
{
	struct pg *pg = conn;

	PQclear(PQexec(pg->conn, "ROLLBACK"));
}

/*
 * A server that restarted, or ended our session, while we were idle has sent
 * its farewell and closed the socket. An idle connection has nothing else to
 * read, so reading whatever is there (without blocking) until the socket is
 * quiet notices the hangup now: this call, even a write, then runs on a new
 * connection instead of failing.
 */
static void notice_hangup(struct pg *pg)
{
	struct pollfd p;
	int i;

	p.fd = PQsocket(pg->conn);
	p.events = POLLIN;
	/* Bounded: a server that keeps sending notices is not worth spinning on. */
	for (i = 0; i < 4 && p.fd >= 0; i++) {
		p.revents = 0;
		if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			return;
		if (!PQconsumeInput(pg->conn))
			return; /* PQstatus() now says CONNECTION_BAD. */
	}
}

/* Open a pool connection. */
static int pg_connect(struct pg *pg)
{
	char msg[PG_MESSAGE_MAX];

	pg->conn = PQconnectdb(pg->pool->conninfo);
	if (!pg->conn)
		return saas__oom();
	if (PQstatus(pg->conn) != CONNECTION_OK) {
		/* The message names host and database, and never the password: libpq may quote the URL. */
		one_line(msg, sizeof(msg), PQerrorMessage(pg->conn));
		scrub_password(msg, pg->pool->conninfo);
		PQfinish(pg->conn);
		pg->conn = NULL;
		return saas__error_sqlstate(SAAS_ESTORE, NULL, "connecting to PostgreSQL: %s", msg);
	}
	PQsetNoticeProcessor(pg->conn, on_notice, pg);
	return SAAS_OK;
}

static void pg_leave(struct pg *pg)
{
	struct pool *pool = pg->pool;

	pthread_mutex_lock(&pool->lock);
	pg->busy = false;
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * Take a connection of the pool for one store call, waiting up to
 * POOL_WAIT_MS for one to be free. An open idle connection is preferred to
 * opening another, so a pool only grows as far as its callers' concurrency.
 * A connection found broken is re-opened once before giving up. Connecting
 * and resetting happen without the pool's lock, so a slow server does not
 * hold up callers that have a connection already.
 */
static int pg_enter(struct pool *pool, struct pg **out)
{
	struct timespec deadline;
	char msg[PG_MESSAGE_MAX];
	struct pg *pg = NULL;
	int rc = 0;

	*out = NULL;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += POOL_WAIT_MS / 1000;
	deadline.tv_nsec += (long)(POOL_WAIT_MS % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		for (unsigned int i = 0; i < pool->size; i++) {
			struct pg *c = &pool->conns[i];

			if (!c->busy && (!pg || (c->conn && !pg->conn)))
				pg = c;
		}
		/* After a timeout, one last look: a connection may have come back meanwhile. */
		if (pg || rc)
			break;
		rc = pthread_cond_timedwait(&pool->freed, &pool->lock, &deadline);
	}
	if (pg)
		pg->busy = true;
	pthread_mutex_unlock(&pool->lock);
	if (!pg)
		return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_STORE, 0,
		                   "all %u PostgreSQL connections of this store stayed busy for %d s; "
		                   "raise aas_pool in the store URL (docs/operations.md)",
		                   pool->size, POOL_WAIT_MS / 1000);

	if (!pg->conn) {
		if ((rc = pg_connect(pg)))
			goto fail;
	} else {
		if (PQstatus(pg->conn) == CONNECTION_OK)
			notice_hangup(pg);
		if (PQstatus(pg->conn) != CONNECTION_OK) {
			pg_log(pg, SAAS_LOG_WARN, "postgresql: connection broken; reconnecting");
			PQreset(pg->conn);
			if (PQstatus(pg->conn) != CONNECTION_OK) {
				one_line(msg, sizeof(msg), PQerrorMessage(pg->conn));
				scrub_password(msg, pg->pool->conninfo);
				rc = saas__error_sqlstate(SAAS_ESTORE, NULL, "reconnecting to PostgreSQL: %s", msg);
				goto fail;
			}
		}
	}
	/* Every path ends its transactions; this only guards against a bug. */
	if (PQtransactionStatus(pg->conn) != PQTRANS_IDLE)
		tx_rollback(pg);
	*out = pg;
	return SAAS_OK;
fail:
	/* Back to the pool as it is: the next caller tries to reconnect it. */
	pg_leave(pg);
	return rc;
}

static const char *i64(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}

/* Rows changed by an INSERT/UPDATE. */
static long changed(PGresult *res)
{
	return strtol(PQcmdTuples(res), NULL, 10);
}

static int64_t get_i64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* Binary-format result columns (execution_get asks for binary to get bytea raw). */
static int64_t bin_int(const PGresult *res, int row, int col)
{
	const char *p = PQgetvalue(res, row, col);
	uint32_t u32;
	uint64_t u64;

	if (PQgetisnull(res, row, col))
		return 0;
	switch (PQgetlength(res, row, col)) {
	case 4:
		memcpy(&u32, p, 4);
		return (int32_t)be32toh(u32);
	case 8:
		memcpy(&u64, p, 8);
		return (int64_t)be64toh(u64);
	}
	return 0;
}

/* ---- the dialect (dialect.h) ------------------------------------------ */

/* The most parameters one statement of the shared slots takes. */
#define PARAMS_MAX 32
/* Parameter types (pg_type.h): declared, so that one SQL text needs no casts. */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25

struct saas__row {
	const PGresult *res;
	int row;
	int binary;                /* a binary result: integers big-endian, bytes raw */
};

static int d_enter(void *store, void **conn)
{
	struct pg *pg = NULL;
	int rc = pg_enter(store, &pg);

	*conn = pg;
	return rc;
}

static void d_leave(void *store, void *conn)
{
	(void)store;
	pg_leave(conn);
}

static int d_run(void *conn, const saas__sql *q, const saas__param *p, int n, saas__row_fn fn, void *userdata,
                 int64_t *nchanged)
{
	struct pg *pg = conn;
	const char *values[PARAMS_MAX];
	char nums[PARAMS_MAX][24];
	int lengths[PARAMS_MAX], formats[PARAMS_MAX];
	Oid types[PARAMS_MAX];
	PGresult *res = NULL;
	int rc;

	if (n < 0 || n > PARAMS_MAX)
		return saas__inval("postgresql: %d parameters; a statement takes at most %d", n, PARAMS_MAX);
	for (int i = 0; i < n; i++) {
		lengths[i] = 0;
		formats[i] = 0;
		values[i] = p[i].text;
		if (p[i].type == SAAS__P_I64) {
			types[i] = OID_INT8;
			values[i] = i64(nums[i], p[i].i64);
		} else if (p[i].type == SAAS__P_NULL_I64) {
			types[i] = OID_INT8;
		} else if (p[i].type == SAAS__P_BLOB) {
			/* Binary, so NUL bytes survive. */
			if (p[i].len > INT_MAX)
				return saas__inval("postgresql: a value of %zu bytes is too long", p[i].len);
			types[i] = OID_BYTEA;
			lengths[i] = (int)p[i].len;
			formats[i] = 1;
		} else {
			types[i] = OID_TEXT;
		}
	}
	if ((rc = run_ex(pg, &res, q->what, q->pg ? q->pg : q->sql, n, types, values, lengths, formats, q->binary,
	                 q->read)))
		return rc;
	for (int r = 0; fn && r < PQntuples(res); r++) {
		struct saas__row row = { res, r, q->binary };

		if ((rc = fn(userdata, &row)) != 0)
			break;
	}
	if (nchanged)
		*nchanged = changed(res);
	PQclear(res);
	return rc;
}

static int64_t d_col_i64(const saas__row *row, int col)
{
	return row->binary ? bin_int(row->res, row->row, col) : get_i64(row->res, row->row, col);
}

/* A script of several statements: a migration step. */
static int d_script(void *conn, const char *sql, const char *what)
{
	struct pg *pg = conn;
	PGresult *res = PQexec(pg->conn, sql);
	int rc = SAAS_OK;

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pg_fail(pg, res, what);
	PQclear(res);
	return rc;
}

static void d_log(void *conn, int level, const char *msg)
{
	pg_log(conn, level, msg);
}

static int d_col_null(const saas__row *row, int col)
{
	return PQgetisnull(row->res, row->row, col);
}

static const char *d_col_text(const saas__row *row, int col, size_t *len)
{
	if (PQgetisnull(row->res, row->row, col)) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)PQgetlength(row->res, row->row, col);
	return PQgetvalue(row->res, row->row, col);
}

static const struct saas__dialect pg_dialect = {
	.name = "postgresql",
	.enter = d_enter,
	.leave = d_leave,
	.begin = tx_begin,
	.commit = tx_commit,
	.rollback = tx_rollback,
	.run = d_run,
	.col_i64 = d_col_i64,
	.script = d_script,
	.log = d_log,
	.steps = steps,
	/*
	 * The advisory lock serialises engines migrating at once. The meta table
	 * is only created when missing: CREATE ... IF NOT EXISTS would still need
	 * the CREATE privilege on a database already migrated.
	 */
	.migrate_prologue = "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ");"
	                    "DO $$BEGIN IF to_regclass('meta') IS NULL THEN"
	                    " CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); END IF; END$$",
	.col_null = d_col_null,
	.col_text = d_col_text,
};

/* ---- open, migrate, close ---------------------------------------------- */

static void pg_close(void *ctx)
{
	struct pool *pool = ctx;

	if (!pool)
		return;
	for (unsigned int i = 0; i < pool->size; i++)
		PQfinish(pool->conns[i].conn);
	pthread_cond_destroy(&pool->freed);
	pthread_mutex_destroy(&pool->lock);
	free(pool->conninfo);
	free(pool);
}

/*
 * Take the store's own options out of the URL's query, so that libpq (which
 * refuses parameters it does not know) gets the rest: *conninfo is the URL
 * without them, *size the pool's size. Only the URL form reaches this store
 * (saas__store_for_url picks it by the postgresql:// prefix), so there is no
 * keyword/value form to parse.
 */
static int pool_options(const char *url, char **conninfo, unsigned int *size)
{
	const char *q = strchr(url, '?'), *p, *end;
	saas__buf out = SAAS__BUF_INIT;
	bool seen = false;
	int rc;

	*conninfo = NULL;
	*size = POOL_DEFAULT;
	rc = saas__buf_put(&out, url, q ? (size_t)(q - url) : strlen(url));
	for (p = q ? q + 1 : NULL; !rc && p && *p; p = *end ? end + 1 : end) {
		size_t n;

		end = p + strcspn(p, "&");
		n = (size_t)(end - p);
		if (n >= sizeof(POOL_OPTION) - 1 && memcmp(p, POOL_OPTION, sizeof(POOL_OPTION) - 1) == 0) {
			const char *v = p + sizeof(POOL_OPTION) - 1;
			size_t len = (size_t)(end - v);
			unsigned long value = 0;

			/* At most two digits: the bound is checked on a number that cannot overflow. */
			if (seen || len < 1 || len > 2 || strspn(v, "0123456789") < len ||
			    (value = strtoul(v, NULL, 10)) < 1 || value > POOL_MAX) {
				rc = saas__inval("%s in the PostgreSQL URL is '%.*s'%s: give it once, a whole number "
				                 "from 1 to %d", POOL_OPTION, (int)(len < 16 ? len : 16), v,
				                 seen ? " again" : "", POOL_MAX);
				break;
			}
			*size = (unsigned int)value;
			seen = true;
			continue;
		}
		if (n > 0)
			rc = saas__buf_put(&out, out.len == (size_t)(q - url) ? "?" : "&", 1);
		if (!rc)
			rc = saas__buf_put(&out, p, n);
	}
	if (rc) {
		saas__buf_free(&out);
		return rc;
	}
	*conninfo = out.data;
	return SAAS_OK;
}

static int pg_open(void **ctx, const saas_store_env *env)
{
	struct pool *pool;
	unsigned int size;
	char *conninfo;
	int rc;

	*ctx = NULL;
	if (!env || !env->url || !*env->url)
		return saas__inval("empty PostgreSQL URL");
	if ((rc = pool_options(env->url, &conninfo, &size)))
		return rc;
	pool = calloc(1, sizeof(*pool) + size * sizeof(pool->conns[0]));
	if (!pool) {
		free(conninfo);
		return saas__oom();
	}
	pool->dialect = &pg_dialect;
	pool->conninfo = conninfo;
	pool->size = size;
	for (unsigned int i = 0; i < size; i++) {
		pool->conns[i].pool = pool;
		pool->conns[i].log = env->log;
		pool->conns[i].log_userdata = env->log_userdata;
	}
	rc = pthread_mutex_init(&pool->lock, NULL);
	if (rc) {
		free(conninfo);
		free(pool);
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_OS, rc, "pthread_mutex_init: %s", strerror(rc));
	}
	/* Waits are bounded on the monotonic clock, which no clock adjustment moves. */
	if ((rc = saas__cond_init_monotonic(&pool->freed)) != 0) {
		pthread_mutex_destroy(&pool->lock);
		free(conninfo);
		free(pool);
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_OS, rc, "pthread_cond_init: %s", strerror(rc));
	}
	/* The first connection is opened now, so that a wrong URL fails the open, and migrates. */
	rc = pg_connect(&pool->conns[0]);
	if (!rc)
		rc = saas__store_migrate(pool, "postgresql: the database");
	if (rc) {
		pg_close(pool);
		return rc;
	}
	*ctx = pool;
	return SAAS_OK;
}


const saas_store saas__store_postgres = {
	.version = SAAS_STORE_VERSION,
	.name = "postgresql",
	.open = pg_open,
	.close = pg_close,
	SAAS__STORE_SHARED_SLOTS,
};
