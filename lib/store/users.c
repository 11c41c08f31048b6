/*
 * The people of a store: disabled accounts, users, their sessions and
 * invites, and MCP sessions (slots.h says how the store's rooms share the
 * work).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <string.h>

#include "store/slots.h"

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
	if (account && (rc = saas__slot_account_insert_in(c, account, credit)) < 0)
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

	if ((rc = user_check(user)) < 0 || (account && (rc = saas__slot_account_check(account, credit)) < 0))
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
