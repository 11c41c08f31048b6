/*
 * People who log in to a service's pages: users, their sessions, invites.
 *
 * Sessions and invites are random tokens of which only the SHA-256 is kept,
 * as for API keys (admin.c): a copy of the database logs nobody in. A
 * session's token has its own prefix, so that neither kind of token is
 * mistaken for the other in a log or a leak report, and the key lookup never
 * finds a session (their hashes live in different tables anyway).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define SESSION_PREFIX "aas_ss_"
#define SESSION_RANDOM_CHARS 43 /* as a key's: ~256 bits */
#define INVITE_PREFIX "aas_inv_"
#define INVITE_RANDOM_CHARS 24  /* ~143 bits: one use, never a login */
/* The longest token these calls take from a caller; anything longer is no token of ours. */
#define TOKEN_MAX 128
/* A session's last use is written at most this often (a quarter of a shorter idle bound): a page view should not always be a write. */
#define SESSION_TOUCH_MS 60000

/* "prefix" and n characters of [A-Za-z0-9], each from one random byte (rejection sampled). */
static int random_token(char *out, size_t size, const char *prefix, size_t n)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t p = strlen(prefix), filled = 0;
	unsigned char rnd[64];
	int rc;

	if (size < p + n + 1)
		return saas__inval("token buffer too small");
	memcpy(out, prefix, p);
	while (filled < n) {
		if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
			return rc;
		for (size_t i = 0; i < sizeof(rnd) && filled < n; i++)
			if (rnd[i] < 248) /* 248 = 4 * 62: keep the draw uniform */
				out[p + filled++] = alphabet[rnd[i] % 62];
	}
	out[p + filled] = '\0';
	memset(rnd, 0, sizeof(rnd));
	return SAAS_OK;
}

/*
 * An e-mail address as kept: lowercased, 3 to SAAS_EMAIL_MAX bytes, one '@'
 * with something on both sides, nothing that is space or control. Deliverability
 * is not ours to judge; the bound and the character set are.
 */
static int email_norm(char out[SAAS_EMAIL_MAX + 1], const char *email)
{
	const char *at;
	size_t n;

	if (!email || (n = strlen(email)) < 3 || n > SAAS_EMAIL_MAX)
		return saas__inval("an e-mail address is 3 to %d bytes", SAAS_EMAIL_MAX);
	at = strchr(email, '@');
	if (!at || at == email || !at[1] || strchr(at + 1, '@'))
		return saas__inval("an e-mail address has one '@' with text on both sides");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)email[i];

		if (c <= ' ' || c == 0x7f)
			return saas__inval("an e-mail address may not contain spaces or control characters");
		out[i] = (char)(c < 0x80 ? tolower(c) : c);
	}
	out[n] = '\0';
	return SAAS_OK;
}

static int hash_check(const char *hash)
{
	if (!hash || !*hash || strlen(hash) > SAAS_PASSWORD_HASH_MAX)
		return saas__inval("a password hash is 1 to %d bytes", SAAS_PASSWORD_HASH_MAX);
	for (const char *p = hash; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return saas__inval("a password hash is printable ASCII without spaces");
	return SAAS_OK;
}

static int user_public(const saas_store_user *row, saas_user **out)
{
	saas_user *u = calloc(1, sizeof(*u));

	if (!u)
		return saas__oom();
	u->is_operator = row->is_operator ? 1 : 0;
	u->created_at_ms = row->created_at_ms;
	u->disabled_at_ms = row->disabled_at_ms;
	if (!(u->id = saas__strdup(row->id)) || !(u->account_id = saas__strdup(row->account_id)) ||
	    !(u->email = saas__strdup(row->email)) || !(u->password_hash = saas__strdup(row->password_hash))) {
		saas_user_free(u);
		return SAAS_ENOMEM;
	}
	*out = u;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_user_create(saas_user **out, saas_engine *e, const char *email, const char *password_hash,
                                  const char *account_id, int64_t credit, const char *invite, unsigned int flags)
{
	saas_store_user user;
	saas_store_account account;
	char invite_hash[65];
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags & ~SAAS_USER_OPERATOR)
		return saas__inval("unknown flags 0x%x", flags);
	memset(&user, 0, sizeof(user));
	if ((rc = email_norm(user.email, email)) < 0 || (rc = hash_check(password_hash)) < 0)
		return rc;
	if (account_id && !saas__valid_text(account_id, SAAS_ID_MAX))
		return saas__inval("account id is empty, too long or not printable");
	if (invite && (!*invite || strlen(invite) > TOKEN_MAX))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_AUTH, 0, "no unused invite with that code");
	if (!account_id) {
		if (credit == SAAS_CREDIT_DEFAULT)
			credit = e->new_account_credit;
		if (credit < 0 || credit > SAAS_USD(1000000))
			return saas__inval("initial credit must be between 0 and 1000000 USD");
	}
	if ((rc = saas__id_new(user.id, "usr-", 20)) < 0)
		return rc;
	saas__strlcpy(user.password_hash, password_hash, sizeof(user.password_hash));
	user.is_operator = (flags & SAAS_USER_OPERATOR) != 0;
	user.created_at_ms = saas__engine_now(e);
	if (!account_id) {
		memset(&account, 0, sizeof(account));
		if ((rc = saas__id_new(account.id, "acc-", 20)) < 0)
			return rc;
		saas__strlcpy(account.name, user.email, sizeof(account.name));
		account.created_at_ms = user.created_at_ms;
		saas__strlcpy(user.account_id, account.id, sizeof(user.account_id));
	} else {
		saas__strlcpy(user.account_id, account_id, sizeof(user.account_id));
	}
	if (invite)
		saas_key_fingerprint(invite_hash, invite);
	rc = e->store->user_insert(e->store_ctx, &user, account_id ? NULL : &account, credit,
	                           invite ? invite_hash : NULL);
	if (rc == SAAS_EEXISTS)
		return saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_ARGS, 0, "a user with that e-mail exists already");
	if (rc < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "user %s created for account %s%s", user.id, user.account_id,
	          user.is_operator ? " (operator)" : "");
	if (!out)
		return SAAS_OK;
	return saas_user_get(out, e, user.email);
}

SAAS_EXTERN(int) saas_user_get(saas_user **out, saas_engine *e, const char *email)
{
	saas_store_user row;
	char norm[SAAS_EMAIL_MAX + 1];
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = email_norm(norm, email)) < 0)
		return rc;
	if ((rc = e->store->user_find(e->store_ctx, norm, &row)) < 0)
		return rc;
	return user_public(&row, out);
}

SAAS_EXTERN(int) saas_user_list_get(saas_user_list **out, saas_engine *e)
{
	saas_user_list *list = NULL;
	saas_store_user *rows = NULL;
	size_t n = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = saas__store_users(e->store, e->store_ctx, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (; list->count < n; list->count++)
		if ((rc = user_public(&rows[list->count], &list->items[list->count])) < 0)
			goto out;
	*out = list;
	list = NULL;
out:
	saas_user_list_free(list);
	free(rows);
	return rc;
}

/* Change the user with this e-mail: a new hash (NULL: keep), operator 0/1 (-1: keep). */
static int user_update(saas_engine *e, const char *email, const char *password_hash, int is_operator)
{
	saas_store_user row;
	char norm[SAAS_EMAIL_MAX + 1];
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = email_norm(norm, email)) < 0 || (password_hash && (rc = hash_check(password_hash)) < 0))
		return rc;
	if ((rc = e->store->user_find(e->store_ctx, norm, &row)) < 0)
		return rc;
	if ((rc = e->store->user_update(e->store_ctx, row.id, password_hash, is_operator)) < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "user %s: %s", row.id, password_hash ? "password replaced, sessions ended"
	                                                   : is_operator ? "made an operator" : "no longer an operator");
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_user_password_set(saas_engine *e, const char *email, const char *password_hash)
{
	if (!password_hash) {
		saas__error_clear();
		return saas__inval("password hash is NULL");
	}
	return user_update(e, email, password_hash, -1);
}

SAAS_EXTERN(int) saas_user_operator_set(saas_engine *e, const char *email, int is_operator)
{
	return user_update(e, email, NULL, is_operator ? 1 : 0);
}

SAAS_EXTERN(void) saas_user_free(saas_user *u)
{
	if (!u)
		return;
	free(u->id);
	free(u->account_id);
	free(u->email);
	if (u->password_hash) {
		memset(u->password_hash, 0, strlen(u->password_hash));
		free(u->password_hash);
	}
	free(u);
}

SAAS_EXTERN(void) saas_user_list_free(saas_user_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		saas_user_free(l->items[i]);
	free(l->items);
	free(l);
}

SAAS_EXTERN(int) saas_account_disable(saas_engine *e, const char *account_id, int disabled)
{
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (!saas__valid_text(account_id, SAAS_ID_MAX))
		return saas__inval("account id is empty, too long or not printable");
	if ((rc = e->store->account_disable(e->store_ctx, account_id, disabled ? saas__engine_now(e) : 0)) < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "account %s %s", account_id, disabled ? "disabled" : "enabled");
	/*
	 * Disabling is an operator's answer to abuse: what the account runs stops
	 * now, not at its expiry. A store-only engine (the admin commands) runs no
	 * VM: the engine that does ends them at its next sweep (reaper.c).
	 */
	if (disabled && e->driver) {
		unsigned int ended = 0;

		if (saas__account_sandboxes_end(e, account_id, &ended) < 0)
			saas__log(e, SAAS_LOG_WARN, "account %s: not every sandbox could be ended now (%s); the reaper "
			          "ends the rest", account_id, saas_error_last()->message);
		else if (ended)
			saas__log(e, SAAS_LOG_INFO, "account %s: %u sandboxes destroyed", account_id, ended);
		saas__error_clear();
	}
	return SAAS_OK;
}

/* Make a token, store its hash with `insert`, and hand the token out once. */
static int token_issue(char **out, const char *prefix, size_t n, int (*insert)(saas_engine *, const char *, void *),
                       saas_engine *e, void *arg)
{
	char token[TOKEN_MAX], hash[65];
	int rc;

	if ((rc = random_token(token, sizeof(token), prefix, n)) < 0)
		goto out;
	saas_key_fingerprint(hash, token);
	if ((rc = insert(e, hash, arg)) < 0)
		goto out;
	if (!(*out = saas__strdup(token)))
		rc = SAAS_ENOMEM;
out:
	memset(token, 0, sizeof(token));
	return rc;
}

static int invite_insert(saas_engine *e, const char *hash, void *arg)
{
	(void)arg;
	return e->store->invite_insert(e->store_ctx, hash, saas__engine_now(e));
}

SAAS_EXTERN(int) saas_invite_create(char **code_out, saas_engine *e, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!code_out)
		return saas__inval("code_out is NULL");
	*code_out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if ((rc = token_issue(code_out, INVITE_PREFIX, INVITE_RANDOM_CHARS, invite_insert, e, NULL)) == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "invite code made");
	return rc;
}

static int session_insert(saas_engine *e, const char *hash, void *arg)
{
	saas_store_session s;

	memset(&s, 0, sizeof(s));
	saas__strlcpy(s.hash, hash, sizeof(s.hash));
	saas__strlcpy(s.user.id, arg, sizeof(s.user.id));
	s.created_at_ms = s.last_seen_at_ms = saas__engine_now(e);
	return e->store->session_insert(e->store_ctx, &s);
}

SAAS_EXTERN(int) saas_session_create(char **token_out, saas_engine *e, const char *email, unsigned int flags)
{
	saas_store_user row;
	char norm[SAAS_EMAIL_MAX + 1];
	int rc;

	saas__error_clear();
	if (!token_out)
		return saas__inval("token_out is NULL");
	*token_out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if ((rc = email_norm(norm, email)) < 0)
		return rc;
	if ((rc = e->store->user_find(e->store_ctx, norm, &row)) < 0)
		return rc;
	if (row.disabled_at_ms)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "this user's account is disabled");
	return token_issue(token_out, SESSION_PREFIX, SESSION_RANDOM_CHARS, session_insert, e, row.id);
}

/* Only a token of the session kind is looked up: an API key, or anything else, is no session. */
static bool session_token(const char *token)
{
	return token && strncmp(token, SESSION_PREFIX, strlen(SESSION_PREFIX)) == 0 && strlen(token) <= TOKEN_MAX;
}

SAAS_EXTERN(int) saas_session_get(saas_user **out, saas_engine *e, const char *token, int64_t idle_ms,
                                  int64_t max_ms)
{
	saas_store_session s;
	char hash[65];
	int64_t now;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (idle_ms < 0 || max_ms < 0)
		return saas__inval("session bounds may not be negative");
	if (!session_token(token))
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "not a session");
	saas_key_fingerprint(hash, token);
	rc = e->store->session_find(e->store_ctx, hash, &s);
	if (rc == SAAS_ENOTFOUND)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "no such session (it ended, or never began)");
	if (rc < 0)
		return rc;
	now = saas__engine_now(e);
	if (s.user.disabled_at_ms || (idle_ms && now - s.last_seen_at_ms > idle_ms) ||
	    (max_ms && now - s.created_at_ms > max_ms)) {
		/* Gone either way; a failed delete is swept by saas_session_prune. */
		(void)e->store->session_delete(e->store_ctx, hash);
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "%s",
		                   s.user.disabled_at_ms ? "this user's account is disabled" : "the session expired");
	}
	/* Written at most once a minute, and often enough that a short idle bound still counts from the last use. */
	if (now - s.last_seen_at_ms >= (idle_ms && idle_ms / 4 < SESSION_TOUCH_MS ? idle_ms / 4 : SESSION_TOUCH_MS) &&
	    (rc = e->store->session_touch(e->store_ctx, hash, now)) < 0)
		return rc;
	return user_public(&s.user, out);
}

SAAS_EXTERN(int) saas_session_end(saas_engine *e, const char *token)
{
	char hash[65];

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (!session_token(token))
		return SAAS_OK;
	saas_key_fingerprint(hash, token);
	return e->store->session_delete(e->store_ctx, hash);
}

SAAS_EXTERN(int) saas_session_prune(saas_engine *e, int64_t idle_ms, int64_t max_ms)
{
	int64_t now;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (idle_ms < 0 || max_ms < 0)
		return saas__inval("session bounds may not be negative");
	now = saas__engine_now(e);
	return e->store->session_prune(e->store_ctx, max_ms ? now - max_ms : INT64_MIN,
	                               idle_ms ? now - idle_ms : INT64_MIN);
}
