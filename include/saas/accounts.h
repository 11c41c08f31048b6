/*
 * libsaas: accounts, their own limits and their API keys: the engine's
 * administrative calls on them (a client sees its own account through
 * saas_account_info_get(), in billing.h). Included by engine.h.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_ACCOUNTS_H
#define SAAS_ACCOUNTS_H

#include "common.h"

SAAS_BEGIN_DECLS

/** Pass as `credit` to saas_account_create() for the engine's new-account credit ($5 unless configured). */
#define SAAS_CREDIT_DEFAULT INT64_MIN

/**
 * An account, as the engine's admin calls return it. Library-allocated: fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_account {
	char *id;                       /**< "acc-..." */
	char *name;                     /**< As given at creation. */
	int64_t created_at_ms;
	int64_t credit_usd_micro;       /**< Everything credited, ever. */
	int64_t spent_usd_micro;        /**< Charged for closed sandboxes plus accrued by running ones. */
	int64_t balance_usd_micro;      /**< credit - spent; may dip below zero by at most a sweep's worth. */
	int64_t disabled_at_ms;         /**< When an operator disabled it (saas_account_disable()); 0 while enabled. */
} saas_account;

/**
 * Create an account.
 *
 * @param out    [out, optional] the account; free with saas_account_free().
 * @param engine the engine.
 * @param name   a display name: 1 to 200 bytes of UTF-8, no control characters.
 * @param credit initial credit in micro-dollars (>= 0), or SAAS_CREDIT_DEFAULT.
 * @param flags  0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_create(saas_account **out, saas_engine *engine, const char *name, int64_t credit, unsigned int flags);

/**
 * Look an account up by id.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_get(saas_account **out, saas_engine *engine, const char *account_id);

/**
 * A list of accounts; library-allocated.
 *
 * Since: 0.1.0
 */
typedef struct saas_account_list {
	size_t count;
	saas_account **items;
} saas_account_list;

/**
 * Every account, oldest first.
 *
 * @param out [out] free with saas_account_list_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_list_get(saas_account_list **out, saas_engine *engine);

/**
 * Add credit to an account (an entry in its ledger).
 *
 * @param amount micro-dollars, > 0 and at most SAAS_USD(1000000).
 * @param note   optional free text kept in the ledger (at most 200 bytes), or NULL.
 * @param flags  0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_add_credit(saas_engine *engine, const char *account_id, int64_t amount, const char *note,
                                         unsigned int flags);

/**
 * Free an account; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_account_free(saas_account *account);

/** Version of saas_limit_overrides this header describes. */
#define SAAS_LIMIT_OVERRIDES_VERSION 1

/**
 * One account's own limits, set by an operator in place of the engine's
 * defaults. A zero field means "the engine's default" (so an override can be
 * taken back by setting it to 0). Initialise with SAAS_LIMIT_OVERRIDES_INIT.
 *
 * Since: 0.1.0
 */
typedef struct saas_limit_overrides {
	unsigned int version;             /**< SAAS_LIMIT_OVERRIDES_VERSION */
	unsigned int max_sandboxes;       /**< Sandboxes not yet destroyed; 0: the engine's. */
	unsigned int max_executions;      /**< Executions running at once; 0: the engine's. */
	unsigned int creates_per_minute;  /**< Creates per rolling minute; 0: the engine's. */
	unsigned int requests_per_second; /**< API requests per second per key; 0: the engine's. */
} saas_limit_overrides;

#define SAAS_LIMIT_OVERRIDES_INIT { SAAS_LIMIT_OVERRIDES_VERSION, 0, 0, 0, 0 }

/**
 * Set an account's own limits, replacing any set before. They apply to the
 * next create or exec; a running sandbox or execution is never stopped
 * because a limit went down. A server that caches keys (aas-server) applies a
 * new request rate when it next re-checks the key.
 *
 * @param engine     the engine (store-only engines may be used).
 * @param account_id the account.
 * @param limits     the overrides; every field 0 to SAAS_LIMIT_MAX.
 * @return SAAS_OK, SAAS_EINVAL (bad version or value), SAAS_ENOTFOUND (no such
 *         account), SAAS_ESTORE.
 * Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_limits_set(saas_engine *engine, const char *account_id,
                                         const saas_limit_overrides *limits);

/**
 * An account's own limits, as set by saas_account_limits_set(); all zero when
 * none were set. The account's effective limits are in saas_account_info_get().
 *
 * @param out        [in/out] its `version` says how much to fill (1 ..
 *                   SAAS_LIMIT_OVERRIDES_VERSION); initialise with SAAS_LIMIT_OVERRIDES_INIT.
 * @param engine     the engine (store-only engines may be used).
 * @param account_id the account.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (no such account), SAAS_ESTORE.
 * Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_limits_get(saas_limit_overrides *out, saas_engine *engine, const char *account_id);

/**
 * Free an account list and its accounts; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_account_list_free(saas_account_list *list);

/**
 * An API key's public record (never the key itself).
 *
 * Since: 0.1.0
 */
typedef struct saas_key {
	char *id;                          /**< "key-..." */
	char *account_id;
	char *name;                        /**< As given, or "". */
	char *prefix;                      /**< The first characters of the key, for recognising it: "aas_sk_ab12". */
	int64_t created_at_ms;
	int64_t revoked_at_ms;             /**< 0 while the key is valid. */
	int64_t last_used_at_ms;           /**< When a client last opened with it (to within a server's key cache time); 0: never. */
} saas_key;

/**
 * A list of keys; library-allocated.
 *
 * Since: 0.1.0
 */
typedef struct saas_key_list {
	size_t count;
	saas_key **items;
} saas_key_list;

/**
 * Issue an API key for an account. The plaintext key ("aas_sk_" and 43
 * characters) is returned exactly once; only its SHA-256 is stored.
 *
 * @param key_out [out] the plaintext key; free with saas_free().
 * @param info    [out, optional] its record; free with saas_key_free().
 * @param name    optional label (at most 200 bytes) or NULL.
 * @param flags   0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (no such account), SAAS_ESTORE, SAAS_EIO (no randomness).
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_key_create(char **key_out, saas_key **info, saas_engine *engine, const char *account_id,
                                 const char *name, unsigned int flags);

/**
 * Revoke a key by its id. Revoking a revoked key succeeds.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_key_revoke(saas_engine *engine, const char *key_id);

/**
 * An account's keys, oldest first, revoked ones included.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_key_list_get(saas_key_list **out, saas_engine *engine, const char *account_id);

/**
 * The fingerprint of an API key: its SHA-256 as 64 lowercase hex digits, the
 * form the store keeps. A server can key a cache by it without holding keys.
 *
 * @param out     [out] 65 bytes: 64 hex digits and a NUL.
 * @param api_key any string (NULL is taken as "").
 * Thread-safe; cannot fail.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_key_fingerprint(char out[65], const char *api_key);

/** Length of an API key: "aas_sk_" and 43 characters from [A-Za-z0-9]. */
#define SAAS_KEY_LEN 50
/** Length of a key's E2B spelling: "e2b_" and the 43 characters' bytes in lower-case hex. */
#define SAAS_KEY_E2B_LEN 90

/**
 * A key's E2B spelling, for clients of E2B's SDKs (aas-server's E2B-compatible
 * face, docs/e2b.md): "e2b_" and the hex of the 43 characters after
 * "aas_sk_". It is the same secret written differently, not a second key:
 * computed, never stored, revoked with the key.
 *
 * @param out [out] SAAS_KEY_E2B_LEN + 1 bytes; "" on failure.
 * @param key an API key ("aas_sk_" and 43 characters from [A-Za-z0-9]).
 * @return SAAS_OK, or SAAS_EINVAL when key is not in that shape.
 * Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_key_to_e2b(char out[SAAS_KEY_E2B_LEN + 1], const char *key);

/**
 * The API key an E2B spelling stands for: the inverse of saas_key_to_e2b().
 * Only the one spelling is accepted (lower-case hex of [A-Za-z0-9] bytes),
 * so a key has exactly two spellings.
 *
 * @param out     [out] SAAS_KEY_LEN + 1 bytes; "" on failure.
 * @param e2b_key "e2b_" and 86 lower-case hex digits.
 * @return SAAS_OK, or SAAS_EINVAL when e2b_key is not such a spelling.
 * Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_key_from_e2b(char out[SAAS_KEY_LEN + 1], const char *e2b_key);

/**
 * Free a key record; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_key_free(saas_key *key);

/**
 * Free a key list; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_key_list_free(saas_key_list *list);

SAAS_END_DECLS

#endif
