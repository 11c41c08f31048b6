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
 * List callbacks run after the connection went back to the pool, on a
 * result already read whole, so that a callback may call the store again
 * (the reaper closes the sandboxes it lists).
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

#include "saas/exec.h"
#include "saas/sandbox.h"
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
	 * 5 -> 6: pause and fork (issue #15): when the current pause began, the
	 * time spent in pauses that ended, the paused price the sandbox was made
	 * with, the snapshot holding its state, and the sandbox it was forked from.
	 */
	"ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_ms BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN paused_usd_micro_per_hour BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT COLLATE \"C\" NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN parent_id TEXT COLLATE \"C\" NOT NULL DEFAULT '';",
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
};

_Static_assert(SAAS_ARRAY_SIZE(steps) == SAAS_STORE_SCHEMA, "one migration step per schema version");
/* The SQL below spells these values out. */
_Static_assert(SAAS_SANDBOX_CREATING == 1 && SAAS_SANDBOX_READY == 2 && SAAS_SANDBOX_DESTROYED == 3,
               "sandbox status values used in SQL");
_Static_assert(SAAS_EXEC_RUNNING == 1, "execution status value used in SQL");

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

/* A write with text parameters. */
static int run(struct pg *pg, PGresult **out, const char *what, const char *sql, int n, const char *const *values)
{
	return run_ex(pg, out, what, sql, n, NULL, values, NULL, NULL, 0, 0);
}

/* A read with text parameters: repeated once on a new connection if the old one broke. */
static int run_read(struct pg *pg, PGresult **out, const char *what, const char *sql, int n,
                    const char *const *values)
{
	return run_ex(pg, out, what, sql, n, NULL, values, NULL, NULL, 0, 1);
}

static int tx_begin(struct pg *pg)
{
	return run_ex(pg, NULL, "BEGIN", "BEGIN", 0, NULL, NULL, NULL, NULL, 0, 1);
}

static int tx_commit(struct pg *pg)
{
	return run(pg, NULL, "COMMIT", "COMMIT", 0, NULL);
}

/* Abandon a transaction; the error already recorded is the one that matters. */
static void tx_rollback(struct pg *pg)
{
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

/* Copy a text column into a fixed-size record field. */
static int get_text(char *dst, size_t size, const PGresult *res, int row, int col)
{
	if (!saas__strlcpy(dst, PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col), size))
		return saas__error_sqlstate(SAAS_ESTORE, NULL, "column %s holds a value too long for its record field",
		                            PQfname(res, col));
	return SAAS_OK;
}

/* A string argument the store keeps: it must fit the record it comes back in. */
static int check_arg(const char *s, size_t max, const char *what)
{
	if (!s)
		return saas__inval("%s is NULL", what);
	if (strnlen(s, max + 1) > max)
		return saas__inval("%s is too long (at most %zu bytes)", what, max);
	return SAAS_OK;
}

/* A fixed-size field of a record must be NUL-terminated inside its array. */
static int check_field(const char *field, size_t size, const char *what)
{
	if (!memchr(field, '\0', size))
		return saas__inval("%s is too long (at most %zu bytes)", what, size - 1);
	return SAAS_OK;
}

static int not_found(const char *what, const char *id)
{
	return saas__error_sqlstate(SAAS_ENOTFOUND, NULL, "no %s '%.64s'", what, id);
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

/* The most parameters one statement of slots.c takes. */
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

static int d_begin(void *conn)
{
	return tx_begin(conn);
}

static int d_commit(void *conn)
{
	return tx_commit(conn);
}

static void d_rollback(void *conn)
{
	tx_rollback(conn);
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
	.collate = " COLLATE \"C\"",
	.enter = d_enter,
	.leave = d_leave,
	.begin = d_begin,
	.commit = d_commit,
	.rollback = d_rollback,
	.run = d_run,
	.col_i64 = d_col_i64,
	.col_null = d_col_null,
	.col_text = d_col_text,
};

/* ---- open, migrate, close ---------------------------------------------- */

static int read_version(struct pg *pg, int *version)
{
	PGresult *res = NULL;
	int rc;
	char *end;
	long v;

	*version = 0;
	rc = run_read(pg, &res, "reading the schema version",
	              "SELECT value FROM meta WHERE key = 'schema_version'", 0, NULL);
	if (rc || PQntuples(res) == 0)
		goto out;
	v = strtol(PQgetvalue(res, 0, 0), &end, 10);
	if (*end || v < 0 || v > INT_MAX) {
		rc = saas__error_sqlstate(SAAS_ESTORE, NULL, "meta.schema_version is not a version: '%.32s'",
		                          PQgetvalue(res, 0, 0));
		goto out;
	}
	*version = (int)v;
out:
	PQclear(res);
	return rc;
}

/*
 * One step per transaction, each under the advisory lock, so a server that
 * finds the schema being migrated waits and then sees it done.
 */
static int migrate(struct pg *pg)
{
	PGresult *res = NULL;
	char buf[24], msg[64];
	const char *v[1];
	int rc, version, in_tx = 0;

	for (;;) {
		rc = tx_begin(pg);
		if (rc)
			goto out;
		in_tx = 1;
		rc = run(pg, NULL, "taking the migration lock", "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", 0, NULL);
		if (rc)
			goto out;
		/* Only CREATE when missing: CREATE ... IF NOT EXISTS would still need the CREATE privilege. */
		rc = run(pg, &res, "looking for the meta table", "SELECT to_regclass('meta') IS NULL", 0, NULL);
		if (rc)
			goto out;
		if (strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
			rc = run(pg, NULL, "creating the meta table",
			         "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)", 0, NULL);
			if (rc)
				goto out;
		}
		PQclear(res);
		res = NULL;
		rc = read_version(pg, &version);
		if (rc)
			goto out;
		if (version > SAAS_STORE_SCHEMA) {
			rc = saas__error_sqlstate(SAAS_ESTORE, NULL,
			                          "the database has schema version %d, newer than the %d this libsaas knows; "
			                          "upgrade libsaas", version, SAAS_STORE_SCHEMA);
			goto out;
		}
		if (version == SAAS_STORE_SCHEMA)
			break;
		res = PQexec(pg->conn, steps[version]);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(msg, sizeof(msg), "migrating the schema to version %d", version + 1);
			rc = pg_fail(pg, res, msg);
			goto out;
		}
		PQclear(res);
		res = NULL;
		v[0] = i64(buf, version + 1);
		rc = run(pg, NULL, "recording the schema version",
		         "INSERT INTO meta (key, value) VALUES ('schema_version', $1) "
		         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", 1, v);
		if (rc)
			goto out;
		rc = tx_commit(pg);
		in_tx = 0;
		if (rc)
			goto out;
		snprintf(msg, sizeof(msg), "postgresql: migrated the schema to version %d", version + 1);
		pg_log(pg, SAAS_LOG_INFO, msg);
	}
	rc = tx_commit(pg);
	in_tx = 0;
out:
	PQclear(res);
	if (rc && in_tx)
		tx_rollback(pg);
	return rc;
}

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
		rc = migrate(&pool->conns[0]);
	if (rc) {
		pg_close(pool);
		return rc;
	}
	*ctx = pool;
	return SAAS_OK;
}

static int pg_schema_version(void *ctx, int *version)
{
	struct pool *pool = ctx;
	struct pg *pg;
	int rc;

	rc = pg_enter(pool, &pg);
	if (rc)
		return rc;
	rc = read_version(pg, version);
	pg_leave(pg);
	return rc;
}

/* ---- accounts and the ledger ------------------------------------------- */

/* ---- API keys ----------------------------------------------------------- */

/* ---- sandboxes ---------------------------------------------------------- */

/* The text parameters of a sandbox's INSERT, in SANDBOX_INSERT's order; `b` holds the numbers' text. */
#define SANDBOX_PARAMS 22
static int sandbox_params(const saas_store_sandbox *s, const char *v[SANDBOX_PARAMS], char b[15][24])
{
	int rc;

	if (!s)
		return saas__inval("sandbox is NULL");
	if ((rc = check_field(s->id, sizeof(s->id), "sandbox id")) ||
	    (rc = check_field(s->account_id, sizeof(s->account_id), "sandbox account id")) ||
	    (rc = check_field(s->size, sizeof(s->size), "sandbox size")) ||
	    (rc = check_field(s->image, sizeof(s->image), "sandbox image")) ||
	    (rc = check_field(s->snapshot, sizeof(s->snapshot), "sandbox snapshot")) ||
	    (rc = check_field(s->parent_id, sizeof(s->parent_id), "sandbox parent")) ||
	    (rc = check_field(s->host_id, sizeof(s->host_id), "sandbox host")))
		return rc;
	if (s->vcpus > INT_MAX || s->memory_mb > INT_MAX || s->disk_gb > INT_MAX)
		return saas__inval("sandbox resources out of range");
	v[0] = s->id;
	v[1] = s->account_id;
	v[2] = i64(b[0], s->status);
	v[3] = i64(b[1], s->end_reason);
	v[4] = s->size;
	v[5] = i64(b[2], s->vcpus);
	v[6] = i64(b[3], s->memory_mb);
	v[7] = i64(b[4], s->disk_gb);
	v[8] = s->image;
	v[9] = i64(b[5], s->usd_micro_per_hour);
	v[10] = i64(b[6], s->created_at_ms);
	v[11] = i64(b[7], s->ready_at_ms);
	v[12] = i64(b[8], s->expires_at_ms);
	v[13] = i64(b[9], s->destroyed_at_ms);
	v[14] = i64(b[10], s->cost_usd_micro);
	v[15] = s->network_mode == SAAS_STORE_NETWORK_UNKNOWN ? NULL : i64(b[11], s->network_mode);
	v[16] = i64(b[12], s->paused_at_ms);
	v[17] = i64(b[13], s->paused_ms);
	v[18] = i64(b[14], s->paused_usd_micro_per_hour);
	v[19] = s->snapshot;
	v[20] = s->parent_id;
	v[21] = s->host_id;
	return SAAS_OK;
}

#define SANDBOX_INSERT \
	"INSERT INTO sandboxes (id, account_id, status, end_reason, size, vcpus, memory_mb, disk_gb, image," \
	" usd_micro_per_hour, created_at, ready_at, expires_at, destroyed_at, cost, network_mode," \
	" paused_at, paused_ms, paused_usd_micro_per_hour, snapshot, parent_id, host_id)" \
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16," \
	" $17, $18, $19, $20, $21, $22)"

/*
 * Inside the caller's transaction: lock the account's row and check that it
 * has fewer than `max_live` sandboxes not destroyed.
 */
static int live_check(struct pg *pg, const char *account_id, unsigned int max_live)
{
	const char *v[] = { account_id };
	PGresult *res = NULL;
	long long live;
	int rc;

	/*
	 * The account's row lock makes count-then-insert atomic against other
	 * servers: a second insert for the account waits here, then counts
	 * (in a new snapshot, READ COMMITTED) the sandbox the first one added.
	 * NO KEY UPDATE, because it still lets ledger and key inserts that only
	 * reference the account proceed.
	 */
	rc = run(pg, &res, "locking the account", "SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE", 1, v);
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = not_found("account", account_id);
		goto out;
	}
	PQclear(res);
	res = NULL;
	rc = run(pg, &res, "counting live sandboxes",
	         "SELECT count(*) FROM sandboxes WHERE account_id = $1 AND status <> 3", 1, v);
	if (rc)
		goto out;
	live = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (live >= (long long)max_live)
		rc = saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, 0,
		                 "account %s already has %lld sandboxes (at most %u at once)", account_id, live, max_live);
out:
	PQclear(res);
	return rc;
}

/* ---- executions ---------------------------------------------------------- */


/* ---- account limits -------------------------------------------------------- */

/* ---- ports ----------------------------------------------------------------- */

/* ---- network ------------------------------------------------------------ */

/* ---- people: disabled accounts, key use, users, sessions, invites ----- */

/* One write of text parameters, on a connection of the pool. */
static int pg_write(struct pool *pool, const char *what, const char *sql, int n, const char *const *v)
{
	struct pg *pg;
	int rc = pg_enter(pool, &pg);

	if (rc)
		return rc;
	rc = run(pg, NULL, what, sql, n, v);
	pg_leave(pg);
	return rc;
}

/* ---- version 6: leases, VM hosts, placement, MCP sessions ---------------- */

static int pg_lease_take(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms, int *held)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	char b1[24], b2[24];
	const char *v[4];
	int rc;

	if ((rc = saas__store_lease_check(name, holder)) || (rc = saas__store_lease_time_check(now_ms, ttl_ms)))
		return rc;
	if (!held)
		return saas__inval("output is NULL");
	*held = 0;
	v[0] = name;
	v[1] = holder;
	v[2] = i64(b1, now_ms);
	v[3] = i64(b2, now_ms + ttl_ms);
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	/*
	 * One statement: a free or run-out lease is taken, the holder's own is
	 * renewed, and another holder's that runs on is left alone (no row
	 * returned). Two engines racing for one lease are serialised on its row
	 * (or on its key in the unique index) by PostgreSQL itself.
	 */
	rc = run(pg, &res, "taking a lease",
	         "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $4)"
	         " ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
	         " WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= $3::bigint RETURNING 1",
	         4, v);
	pg_leave(pg);
	if (!rc)
		*held = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

static int pg_lease_release(void *ctx, const char *name, const char *holder)
{
	const char *v[2] = { name, holder };
	int rc;

	if ((rc = saas__store_lease_check(name, holder)))
		return rc;
	return pg_write(ctx, "releasing a lease", "DELETE FROM leases WHERE name = $1 AND holder = $2", 2, v);
}

static int pg_lease_get(void *ctx, const char *name, char *holder, int64_t *expires_at_ms)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	const char *v[1] = { name };
	int rc;

	if ((rc = check_arg(name, SAAS_STORE_LEASE_NAME_MAX, "lease name")))
		return rc;
	if (!holder || !expires_at_ms)
		return saas__inval("output is NULL");
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	rc = run_read(pg, &res, "reading a lease", "SELECT holder, expires_at FROM leases WHERE name = $1", 1, v);
	pg_leave(pg);
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = not_found("lease", name);
		goto out;
	}
	if ((rc = get_text(holder, SAAS_STORE_HOLDER_MAX + 1, res, 0, 0)))
		goto out;
	*expires_at_ms = get_i64(res, 0, 1);
out:
	PQclear(res);
	return rc;
}

static int pg_host_insert(void *ctx, const saas_store_host *h)
{
	char b[8][24];
	const char *v[12];
	int rc;

	if ((rc = saas__store_host_check(h)))
		return rc;
	v[0] = h->id;
	v[1] = h->name;
	v[2] = h->uri;
	v[3] = h->address;
	v[4] = i64(b[0], h->state);
	v[5] = i64(b[1], h->cpu_overcommit_milli);
	v[6] = i64(b[2], h->mem_overcommit_milli);
	v[7] = i64(b[3], h->cpus);
	v[8] = i64(b[4], (int64_t)h->memory_mb);
	v[9] = i64(b[5], h->created_at_ms);
	v[10] = i64(b[6], h->last_seen_ms);
	v[11] = i64(b[7], h->state_at_ms);
	return pg_write(ctx, "inserting a host",
	                "INSERT INTO hosts (id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli,"
	                " cpus, memory_mb, created_at, last_seen_at, state_at)"
	                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)", 12, v);
}

#define HOST_SELECT \
	"SELECT id, name, uri, address, state, cpu_overcommit_milli, mem_overcommit_milli, cpus, memory_mb," \
	" created_at, last_seen_at, state_at FROM hosts"

static int host_row(saas_store_host *out, const PGresult *res, int row)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = get_text(out->id, sizeof(out->id), res, row, 0)) ||
	    (rc = get_text(out->name, sizeof(out->name), res, row, 1)) ||
	    (rc = get_text(out->uri, sizeof(out->uri), res, row, 2)) ||
	    (rc = get_text(out->address, sizeof(out->address), res, row, 3)))
		return rc;
	out->state = (int)get_i64(res, row, 4);
	out->cpu_overcommit_milli = (unsigned int)get_i64(res, row, 5);
	out->mem_overcommit_milli = (unsigned int)get_i64(res, row, 6);
	out->cpus = (unsigned int)get_i64(res, row, 7);
	out->memory_mb = (uint64_t)get_i64(res, row, 8);
	out->created_at_ms = get_i64(res, row, 9);
	out->last_seen_ms = get_i64(res, row, 10);
	out->state_at_ms = get_i64(res, row, 11);
	return SAAS_OK;
}

static int pg_host_get(void *ctx, const char *id_or_name, saas_store_host *out)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	const char *v[1] = { id_or_name };
	int rc;

	if ((rc = check_arg(id_or_name, SAAS__HOST_KEY_MAX, "host id or name")))
		return rc;
	if (!out)
		return saas__inval("output is NULL");
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	/* An id wins over a name, so a name that looks like another host's id cannot shadow it. */
	rc = run_read(pg, &res, "reading a host",
	              HOST_SELECT " WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1", 1, v);
	pg_leave(pg);
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = not_found("host", id_or_name);
		goto out;
	}
	rc = host_row(out, res, 0);
out:
	PQclear(res);
	return rc;
}

static int pg_host_list(void *ctx, saas_store_host_fn fn, void *userdata)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	saas_store_host host;
	int rc, i;

	if (!fn)
		return saas__inval("callback is NULL");
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	rc = run_read(pg, &res, "listing hosts", HOST_SELECT " ORDER BY created_at, id", 0, NULL);
	/* Callbacks run without a connection, so they may call the store again. */
	pg_leave(pg);
	for (i = 0; !rc && i < PQntuples(res); i++) {
		rc = host_row(&host, res, i);
		if (!rc && fn(userdata, &host))
			break;
	}
	PQclear(res);
	return rc;
}

static int pg_host_set_state(void *ctx, const char *id, int from, int to, int64_t at_ms)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	char b[3][24];
	const char *v[4];
	int rc;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")))
		return rc;
	if ((from != -1 && !saas__store_host_state_valid(from)) || !saas__store_host_state_valid(to))
		return saas__inval("host state %d -> %d is not between active, draining and lost", from, to);
	v[0] = id;
	v[1] = i64(b[0], from);
	v[2] = i64(b[1], to);
	v[3] = i64(b[2], at_ms);
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	rc = run(pg, &res, "changing a host's state",
	         "UPDATE hosts SET state = $3, state_at = $4 WHERE id = $1 AND ($2::int < 0 OR state = $2::int)", 4, v);
	if (!rc && changed(res) == 0) {
		PQclear(res);
		res = NULL;
		rc = run_read(pg, &res, "reading a host", "SELECT 1 FROM hosts WHERE id = $1", 1, v);
		if (!rc)
			rc = PQntuples(res) > 0 ? saas__error_sqlstate(SAAS_ESTATE, NULL,
			                                               "host '%.64s' is no longer in state %d", id, from)
			                        : not_found("host", id);
	}
	pg_leave(pg);
	PQclear(res);
	return rc;
}

static int pg_host_seen(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	char b[3][24];
	const char *v[4];
	int rc;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")))
		return rc;
	if (memory_mb > SAAS__HOST_MEMORY_MB_MAX)
		return saas__inval("host memory %llu MiB is out of range", (unsigned long long)memory_mb);
	v[0] = id;
	v[1] = i64(b[0], at_ms);
	v[2] = i64(b[1], cpus);
	v[3] = i64(b[2], (int64_t)memory_mb);
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	rc = run(pg, &res, "recording a host's heartbeat",
	         "UPDATE hosts SET cpus = $3, memory_mb = $4, last_seen_at = GREATEST(last_seen_at, $2::bigint)"
	         " WHERE id = $1", 4, v);
	pg_leave(pg);
	if (!rc && changed(res) == 0)
		rc = not_found("host", id);
	PQclear(res);
	return rc;
}

static int pg_host_delete(void *ctx, const char *id)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	const char *v[1] = { id };
	int rc, in_tx = 0;

	if ((rc = check_arg(id, SAAS_ID_MAX, "host id")))
		return rc;
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	if ((rc = tx_begin(pg)))
		goto out;
	in_tx = 1;
	/*
	 * Every placement onto the host holds this row lock until it commits, so
	 * once we have it the count below (a new snapshot) sees each sandbox
	 * placed there, and none can be placed before the delete commits.
	 */
	if ((rc = run(pg, &res, "locking a host", "SELECT 1 FROM hosts WHERE id = $1 FOR UPDATE", 1, v)))
		goto out;
	if (PQntuples(res) == 0) {
		rc = not_found("host", id);
		goto out;
	}
	PQclear(res);
	res = NULL;
	if ((rc = run(pg, &res, "counting a host's sandboxes",
	              "SELECT 1 FROM sandboxes WHERE host_id = $1 AND status <> 3 LIMIT 1", 1, v)))
		goto out;
	if (PQntuples(res) > 0) {
		rc = saas__error_sqlstate(SAAS_EBUSY, NULL,
		                          "host '%.64s' still has sandboxes that are not destroyed; drain it first", id);
		goto out;
	}
	if ((rc = run(pg, NULL, "deleting a host", "DELETE FROM hosts WHERE id = $1", 1, v)))
		goto out;
	rc = tx_commit(pg);
	in_tx = 0;
out:
	if (rc && in_tx)
		tx_rollback(pg);
	pg_leave(pg);
	PQclear(res);
	return rc;
}

/*
 * Inside the caller's transaction: lock every host that may take `s` and
 * pick the one with the most memory left that has room for it; *host_id is
 * "" if none has. Two statements on purpose: the row locks come first, and
 * only then is what the hosts hold counted, in a new snapshot (READ
 * COMMITTED), which sees every sandbox a placement that held a lock before
 * us committed. One statement would count in the snapshot it started with,
 * before its locks were granted, and could miss the last placement.
 */
static int place_pick(struct pg *pg, const saas_store_sandbox *s, const saas_store_placement *p,
                      char host_id[SAAS_ID_MAX + 1])
{
	PGresult *hosts = NULL, *used = NULL;
	char buf[24];
	const char *v[2] = { i64(buf, p->seen_after_ms), p->host_id ? p->host_id : "" };
	int64_t best_left = -1;
	int rc, i, j;

	host_id[0] = '\0';
	/* In id order, so that placements locking overlapping sets of hosts cannot deadlock. */
	rc = run(pg, &hosts, "locking the hosts",
	         "SELECT id, cpus::bigint * cpu_overcommit_milli / 1000, memory_mb * mem_overcommit_milli / 1000"
	         " FROM hosts WHERE state = 0 AND last_seen_at >= $1::bigint AND ($2 = '' OR id = $2)"
	         " ORDER BY id FOR UPDATE", 2, v);
	if (rc || PQntuples(hosts) == 0)
		goto out;
	rc = run(pg, &used, "counting what the hosts hold",
	         "SELECT host_id, COALESCE(SUM(vcpus), 0), COALESCE(SUM(memory_mb), 0) FROM sandboxes"
	         " WHERE status <> 3 AND host_id <> '' GROUP BY host_id", 0, NULL);
	if (rc)
		goto out;
	for (i = 0; i < PQntuples(hosts); i++) {
		/* Room is compared on whole capacities: used + need <= floor(capacity x milli / 1000) is exact. */
		int64_t cpu_cap = get_i64(hosts, i, 1), mem_cap = get_i64(hosts, i, 2);
		int64_t cpu_used = 0, mem_used = 0;

		for (j = 0; j < PQntuples(used); j++)
			if (strcmp(PQgetvalue(used, j, 0), PQgetvalue(hosts, i, 0)) == 0) {
				cpu_used = get_i64(used, j, 1);
				mem_used = get_i64(used, j, 2);
				break;
			}
		/* What runs there without a row (the caller's pooled VMs) takes room as well. */
		for (size_t k = 0; p->extra && k < p->nextra; k++)
			if (p->extra[k].host_id && strcmp(p->extra[k].host_id, PQgetvalue(hosts, i, 0)) == 0) {
				cpu_used += p->extra[k].vcpus;
				mem_used += (int64_t)p->extra[k].memory_mb;
			}
		if (cpu_used + (int64_t)s->vcpus > cpu_cap || mem_used + (int64_t)s->memory_mb > mem_cap)
			continue;
		/* Strictly more: of equals the first in id order wins, as in SQLite. */
		if (mem_cap - mem_used > best_left) {
			best_left = mem_cap - mem_used;
			if ((rc = get_text(host_id, SAAS_ID_MAX + 1, hosts, i, 0)))
				goto out;
		}
	}
out:
	PQclear(hosts);
	PQclear(used);
	return rc;
}

static int pg_sandbox_place(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p)
{
	struct pool *pool = ctx;
	struct pg *pg;
	saas_store_sandbox b;
	char nb[15][24];
	const char *v[SANDBOX_PARAMS];
	int rc, in_tx = 0;

	if (!p)
		return saas__inval("placement is NULL");
	if (p->host_id && (rc = check_arg(p->host_id, SAAS_ID_MAX, "placement host id")))
		return rc;
	if ((rc = sandbox_params(sandbox, v, nb)))
		return rc;
	b = *sandbox;
	v[21] = b.host_id;
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	if ((rc = tx_begin(pg)))
		goto out;
	in_tx = 1;
	/*
	 * Why this cannot overcommit: the account's row lock (live_check), then
	 * every candidate host's row lock (place_pick), are held from the count
	 * to the commit. A placement racing for the same host waits for ours to
	 * commit, then counts what we inserted; so no two placements both see
	 * room that only one of them fits in. Always account first, then hosts in
	 * id order: one order for everyone, no deadlock.
	 */
	if ((rc = live_check(pg, b.account_id, p->max_live)))
		goto out;
	if ((rc = place_pick(pg, &b, p, b.host_id)))
		goto out;
	if (!b.host_id[0]) {
		rc = p->host_id && *p->host_id
		             ? saas__error_sqlstate(SAAS_EBUSY, NULL,
		                                    "host '%.64s' is not active, not seen lately or has no room for "
		                                    "%u vCPUs and %u MiB", p->host_id, b.vcpus, b.memory_mb)
		             : saas__error_sqlstate(SAAS_EBUSY, NULL,
		                                    "no active host seen lately has room for %u vCPUs and %u MiB; "
		                                    "add or undrain a host", b.vcpus, b.memory_mb);
		goto out;
	}
	if ((rc = run(pg, NULL, "inserting a sandbox", SANDBOX_INSERT, SANDBOX_PARAMS, v)))
		goto out;
	rc = tx_commit(pg);
	in_tx = 0;
	if (!rc)
		memcpy(sandbox->host_id, b.host_id, sizeof(b.host_id));
out:
	if (rc && in_tx)
		tx_rollback(pg);
	pg_leave(pg);
	return rc;
}

static int pg_mcp_session_insert(void *ctx, const char *hash, const char *version, int64_t at_ms, unsigned int max)
{
	char at[24], keep[24];
	const char *v[4] = { hash, version, i64(at, at_ms), i64(keep, max ? (int64_t)max - 1 : 0) };
	int rc;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")) ||
	    (rc = check_arg(version, SAAS_STORE_MCP_VERSION_MAX, "MCP protocol version")))
		return rc;
	if (!max)
		return pg_write(ctx, "inserting an MCP session",
		                "INSERT INTO mcp_sessions (hash, version, created_at, last_used_at) VALUES ($1, $2, $3, $3)",
		                3, v);
	/*
	 * One statement, so one transaction: the DELETE keeps the newest max - 1
	 * others (whatever the clocks of other engines wrote) and the new session
	 * is the max-th. It never takes the new hash: a duplicate fails the whole
	 * statement and ends nothing.
	 */
	return pg_write(ctx, "inserting an MCP session",
	                "WITH made AS (INSERT INTO mcp_sessions (hash, version, created_at, last_used_at)"
	                " VALUES ($1, $2, $3, $3) RETURNING hash)"
	                " DELETE FROM mcp_sessions WHERE hash IN (SELECT hash FROM mcp_sessions WHERE hash <> $1"
	                " ORDER BY last_used_at DESC, hash DESC OFFSET $4::bigint)",
	                4, v);
}

static int pg_mcp_session_touch(void *ctx, const char *hash, int64_t at_ms, int64_t used_after_ms, char *version)
{
	struct pool *pool = ctx;
	struct pg *pg;
	PGresult *res = NULL;
	char b1[24], b2[24];
	const char *v[3] = { hash, i64(b1, at_ms), i64(b2, used_after_ms) };
	int rc;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")))
		return rc;
	if (!version)
		return saas__inval("output is NULL");
	if ((rc = pg_enter(pool, &pg)))
		return rc;
	rc = run(pg, &res, "using an MCP session",
	         "UPDATE mcp_sessions SET last_used_at = GREATEST(last_used_at, $2::bigint)"
	         " WHERE hash = $1 AND last_used_at >= $3::bigint RETURNING version", 3, v);
	pg_leave(pg);
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = saas__error_sqlstate(SAAS_ENOTFOUND, NULL, "no MCP session with this id, or it was idle too long");
		goto out;
	}
	rc = get_text(version, SAAS_STORE_MCP_VERSION_MAX + 1, res, 0, 0);
out:
	PQclear(res);
	return rc;
}

static int pg_mcp_session_delete(void *ctx, const char *hash)
{
	const char *v[1] = { hash };
	int rc;

	if ((rc = check_arg(hash, SAAS_STORE_HASH_HEX, "MCP session hash")))
		return rc;
	return pg_write(ctx, "ending an MCP session", "DELETE FROM mcp_sessions WHERE hash = $1", 1, v);
}

static int pg_mcp_session_prune(void *ctx, int64_t used_before_ms)
{
	char buf[24];
	const char *v[1] = { i64(buf, used_before_ms) };

	return pg_write(ctx, "pruning MCP sessions", "DELETE FROM mcp_sessions WHERE last_used_at < $1", 1, v);
}

const saas_store saas__store_postgres = {
	.version = SAAS_STORE_VERSION,
	.name = "postgresql",
	.open = pg_open,
	.close = pg_close,
	.schema_version = pg_schema_version,
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
	.lease_take = pg_lease_take,
	.lease_release = pg_lease_release,
	.lease_get = pg_lease_get,
	.host_insert = pg_host_insert,
	.host_get = pg_host_get,
	.host_list = pg_host_list,
	.host_set_state = pg_host_set_state,
	.host_seen = pg_host_seen,
	.host_delete = pg_host_delete,
	.sandbox_place = pg_sandbox_place,
	.mcp_session_insert = pg_mcp_session_insert,
	.mcp_session_touch = pg_mcp_session_touch,
	.mcp_session_delete = pg_mcp_session_delete,
	.mcp_session_prune = pg_mcp_session_prune,
};
