/*
 * libsaas: people who log in to a service's pages, their sessions and the
 * invite codes that let them sign up.
 *
 * A user is a person bound to one account: an e-mail address and a password
 * hash. libsaas keeps the hash as the frontend made it and never sees the
 * password (aas-server hashes with libsodium's Argon2id). A session is a
 * random token the frontend hands the person's browser; like an API key, only
 * its SHA-256 is stored. A session is not an API key: the calls that take a
 * key refuse a session token, and the other way round.
 *
 * These are admin calls on the engine, like saas_account_create(); every one
 * may be used on a store-only engine (SAAS_ENGINE_STORE_ONLY). Thread-safe.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_USERS_H
#define SAAS_USERS_H

#include "common.h"
#include "engine.h"
/* MCP sessions have their own header; they still come with this one. */
#include "mcp_session.h"

SAAS_BEGIN_DECLS

/** Longest e-mail address of a user, in bytes. */
#define SAAS_EMAIL_MAX 254
/** Longest password hash libsaas keeps, in bytes. */
#define SAAS_PASSWORD_HASH_MAX 255

/** saas_user_create() flag: the user may see the operator's pages. */
#define SAAS_USER_OPERATOR (1u << 0)

/**
 * A user. Library-allocated: fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_user {
	char *id;                /**< "usr-..." */
	char *account_id;        /**< The account the user acts for. */
	char *email;             /**< Lowercase. */
	char *password_hash;     /**< As given to saas_user_create() or saas_user_password_set(). */
	int is_operator;         /**< 1 for an operator (SAAS_USER_OPERATOR), else 0. */
	int64_t created_at_ms;
	int64_t disabled_at_ms;  /**< Its account's (saas_account_disable()); 0 while enabled. */
} saas_user;

/**
 * A list of users; library-allocated.
 *
 * Since: 0.1.0
 */
typedef struct saas_user_list {
	size_t count;
	saas_user **items;
} saas_user_list;

/**
 * Create a user, with a new account or bound to an existing one.
 *
 * @param out           [out, optional] the user; free with saas_user_free().
 * @param engine        the engine.
 * @param email         an address: 3 to SAAS_EMAIL_MAX bytes, one '@' with text
 *                      on both sides, no white space or control characters.
 *                      Kept lowercased; unique.
 * @param password_hash the frontend's hash of the password: 1 to
 *                      SAAS_PASSWORD_HASH_MAX printable bytes.
 * @param account_id    an existing account, or NULL for a new account named
 *                      after the e-mail with `credit`.
 * @param credit        the new account's credit in micro-dollars, or
 *                      SAAS_CREDIT_DEFAULT; ignored with an account_id.
 * @param invite        an invite code (saas_invite_create()) to use up, or NULL.
 * @param flags         0 or SAAS_USER_OPERATOR.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EEXISTS (the e-mail is taken),
 *         SAAS_ENOTFOUND (no such account, or the invite is unknown or used),
 *         SAAS_ESTORE, SAAS_ENOMEM. Nothing is made unless all of it is.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_user_create(saas_user **out, saas_engine *engine, const char *email, const char *password_hash,
                                  const char *account_id, int64_t credit, const char *invite, unsigned int flags);

/**
 * Look a user up by e-mail (any case).
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_user_get(saas_user **out, saas_engine *engine, const char *email);

/**
 * Every user, oldest first.
 *
 * @param out [out] free with saas_user_list_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_user_list_get(saas_user_list **out, saas_engine *engine);

/**
 * Replace a user's password hash; every session of the user ends with it.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_user_password_set(saas_engine *engine, const char *email, const char *password_hash);

/**
 * Make a user an operator (1) or not (0).
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_user_operator_set(saas_engine *engine, const char *email, int is_operator);

/**
 * Free a user; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_user_free(saas_user *user);

/**
 * Free a user list and its users; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_user_list_free(saas_user_list *list);

/**
 * Disable an account (disabled 1) or enable it again (0). A disabled
 * account's keys are refused (SAAS_EAUTH) by the next saas_client_open_local()
 * and its users' sessions end. Its live sandboxes are destroyed, billed to
 * that moment, with end reason SAAS_END_DISABLED: by this call on an engine
 * that runs VMs, else (a SAAS_ENGINE_STORE_ONLY engine) by the next sweep of
 * the engine that runs them, which also ends any sandbox of a disabled
 * account that a client opened before the disable still made. Enabling gives
 * nothing back: destroyed sandboxes stay destroyed.
 *
 * @return SAAS_OK once the account is disabled (a sandbox that cannot be
 *         ended now is left to the sweeps, and logged), SAAS_EINVAL,
 *         SAAS_ENOTFOUND, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_disable(saas_engine *engine, const char *account_id, int disabled);

/**
 * Make an invite code: "aas_inv_" and 24 characters, usable for one
 * saas_user_create(). Only its SHA-256 is stored; the code is returned once.
 *
 * @param code_out [out] the code; free with saas_free().
 * @param flags    0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_EIO (no randomness), SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_invite_create(char **code_out, saas_engine *engine, unsigned int flags);

/**
 * Start a session for a user: a token ("aas_ss_" and 43 characters) to hand
 * the person's browser, returned once; only its SHA-256 is stored.
 *
 * @param token_out [out] the token; free with saas_free().
 * @param email     the user, who must not be disabled.
 * @param flags     0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (no such user), SAAS_EAUTH
 *         (the user's account is disabled), SAAS_ESTORE, SAAS_EIO, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_session_create(char **token_out, saas_engine *engine, const char *email, unsigned int flags);

/**
 * The user of a live session. A session is over once `idle_ms` passed since
 * it was last used, or `max_ms` since it began (either 0: no such bound), or
 * its account was disabled; such a session is deleted and the call answers
 * SAAS_EAUTH. Using a session moves its last use forward (written at most
 * once a minute, or a quarter of idle_ms when that is shorter).
 *
 * @param out   [out] the user; free with saas_user_free().
 * @param token as saas_session_create() gave it.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EAUTH (unknown, ended or expired), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_session_get(saas_user **out, saas_engine *engine, const char *token, int64_t idle_ms,
                                  int64_t max_ms);

/**
 * End a session (log out). Ending an unknown session succeeds.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_session_end(saas_engine *engine, const char *token);

/**
 * Delete the sessions past either bound of saas_session_get(), all at once.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_session_prune(saas_engine *engine, int64_t idle_ms, int64_t max_ms);

/**
 * Open a client acting for an account, without an API key: for a frontend
 * that authenticated a person itself (saas_session_get()) and acts for that
 * person's account. Refuses a disabled account.
 *
 * @param out        [out] the client; free with saas_client_free() before the engine.
 * @param account_id the account.
 * @param flags      0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_EAUTH (disabled), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_client_open_account(saas_client **out, saas_engine *engine, const char *account_id,
                                          unsigned int flags) SAAS_WARN_UNUSED;

SAAS_END_DECLS

#endif
