/*
 * libsaas: the state store table, for backend authors.
 *
 * A store keeps accounts, API keys, sandboxes, executions, exposed ports and
 * an append-only ledger. The core decides; the store persists, and makes the
 * few steps that two engines could race on atomic (see each slot). Records
 * use fixed-size fields so that no memory crosses the table except execution
 * output, which the store allocates with malloc() and the core frees with free().
 *
 * Stable within a minor release only.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_SYS_STORE_H
#define SAAS_SYS_STORE_H

#include "../common.h"
#include "../engine.h"
#include "error.h"

SAAS_BEGIN_DECLS

/**
 * Version of struct saas_store this header describes. Version 2: sandbox_close
 * takes the expiry it was decided on; port_insert and port_list carry the
 * exposure's name; sandbox_delete, execution_prune, limits_get, limits_set,
 * port_find and port_delete are new. Version 3: a sandbox has a network_mode;
 * sandbox_network_get and sandbox_network_set are new. Version 4: people's
 * accounts (users, sessions, invites), an account may be disabled and a key
 * records when it was last used: account_disable, key_touch, user_* ,
 * session_* and invite_insert are new, saas_store_account has disabled_at_ms.
 * Version 5: pause and fork: saas_store_sandbox has paused_at_ms, paused_ms,
 * paused_usd_micro_per_hour, snapshot and parent_id; sandbox_set_state is new,
 * and sandbox_set_expiry takes any live sandbox but a creating one. A sandbox
 * keeps its egress counters (saas_store_sandbox's denied_*);
 * sandbox_egress_record and sandbox_egress_rebase are new; execution_list
 * is new. Version 6: many engines on one database, many VM hosts: a sandbox
 * has a host_id and the filter may name one; leases (lease_take,
 * lease_release, lease_get), VM hosts (host_*, sandbox_place) and MCP
 * sessions (mcp_session_*) are new. Version 7: a sandbox keeps its metadata
 * and default environment (saas_store_sandbox's metadata and envs, written
 * by sandbox_insert and sandbox_place; sandbox_values reads them), what its
 * timeout does (on_timeout, auto_resume) and the lifetime it asked
 * (timeout_s); the filter may name metadata. Version 8: lease_purge.
 */
#define SAAS_STORE_VERSION 8

/** Current schema version; stores migrate older schemas up to it on open. */
#define SAAS_STORE_SCHEMA 9

/** What a sandbox value is (sandbox_values, version 7). */
enum {
	SAAS_STORE_VALUE_METADATA = 1, /**< A metadata pair (saas_create_options.metadata). */
	SAAS_STORE_VALUE_ENV = 2       /**< A default environment variable (saas_create_options.envs). */
};

/** Longest snapshot name a driver is given (saas/sys/driver.h, vm_snapshot). */
#define SAAS_STORE_SNAPSHOT_MAX 63

#define SAAS_STORE_NAME_MAX 255
#define SAAS_STORE_IMAGE_MAX 63
#define SAAS_STORE_HASH_HEX 64
/** Longest name of an exposed port: one DNS label. */
#define SAAS_STORE_PORT_NAME_MAX 63
/** network_mode of a sandbox made before the store kept it (schema 3 and older). */
#define SAAS_STORE_NETWORK_UNKNOWN (-1)
/** Longest e-mail address of a user (RFC 5321's path limit). */
#define SAAS_STORE_EMAIL_MAX 254
/** Longest password hash a store keeps (an Argon2id string is about 100 bytes). */
#define SAAS_STORE_PASSWORD_HASH_MAX 255
/** Longest lease name and holder (version 6). */
#define SAAS_STORE_LEASE_NAME_MAX 127
#define SAAS_STORE_HOLDER_MAX 63
/** Longest VM host name (one DNS label), libvirt URI and address (version 6). */
#define SAAS_STORE_HOST_NAME_MAX 63
#define SAAS_STORE_URI_MAX 1023
#define SAAS_STORE_ADDRESS_MAX 63
/** Longest MCP protocol version string a session records (version 6). */
#define SAAS_STORE_MCP_VERSION_MAX 15

/** What the engine hands a store when opening it. Valid until close. */
typedef struct {
	/**
	 * "sqlite:PATH", a plain path, or "postgresql://..."; NULL for a store the
	 * caller gave as a table (saas_engine_options.store), which finds what it
	 * needs in `userdata`.
	 */
	const char *url;
	const char *state_dir;
	saas_log_fn log;           /**< Never NULL. */
	void *log_userdata;
	void *userdata;            /**< saas_engine_options.store_userdata; NULL for the built-in stores. */
} saas_store_env;

typedef struct {
	char id[SAAS_ID_MAX + 1];
	char name[SAAS_STORE_NAME_MAX + 1];
	int64_t created_at_ms;
	int64_t credit_usd_micro;      /**< Sum of the ledger's credit entries (filled by get/list). */
	int64_t charged_usd_micro;     /**< Sum of the ledger's charges, positive (filled by get/list). */
	int64_t disabled_at_ms;        /**< 0 unless an operator disabled it (version 4; ignored by account_insert). */
} saas_store_account;

typedef struct {
	char id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	char name[SAAS_STORE_NAME_MAX + 1];
	char prefix[16];
	char hash[SAAS_STORE_HASH_HEX + 1]; /**< SHA-256 of the key, lowercase hex. */
	int64_t created_at_ms;
	int64_t revoked_at_ms;
	int64_t last_used_at_ms;       /**< Version 4: set by key_touch; 0: never used (ignored by key_insert). */
	int64_t account_disabled_at_ms; /**< Version 4: its account's disabled_at (filled by find/list). */
} saas_store_key;

/** A person who logs in to the pages (version 4), bound to one account. */
typedef struct {
	char id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	char email[SAAS_STORE_EMAIL_MAX + 1];        /**< Lowercased by the core; unique. */
	char password_hash[SAAS_STORE_PASSWORD_HASH_MAX + 1]; /**< Opaque to the store (the frontend's hash). */
	int is_operator;
	int64_t created_at_ms;
	int64_t disabled_at_ms;        /**< Its account's (filled by find/list; ignored by insert). */
} saas_store_user;

/** A log-in session (version 4): only the token's SHA-256 is kept, as for keys. */
typedef struct {
	char hash[SAAS_STORE_HASH_HEX + 1];
	int64_t created_at_ms;
	int64_t last_seen_at_ms;
	saas_store_user user;          /**< Filled by session_find; only user.id is read by session_insert. */
} saas_store_session;

typedef struct {
	char id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	int status;                    /**< saas_sandbox_status */
	int end_reason;                /**< saas_end_reason */
	char size[32];
	unsigned int vcpus;
	unsigned int memory_mb;
	unsigned int disk_gb;
	char image[SAAS_STORE_IMAGE_MAX + 1];
	int64_t usd_micro_per_hour;    /**< The price when it was created; kept for its whole life. */
	int64_t created_at_ms;
	int64_t ready_at_ms;
	int64_t expires_at_ms;
	int64_t destroyed_at_ms;
	int64_t cost_usd_micro;        /**< Set when closed. */
	/**
	 * saas_vm_network_mode (saas/sys/driver.h) as the VM was made or last set,
	 * or SAAS_STORE_NETWORK_UNKNOWN. A POLICY's rules: sandbox_network_get.
	 */
	int network_mode;
	/* Version 5: pause and fork. */
	int64_t paused_at_ms;          /**< When the current pause began; 0 unless paused or resuming. */
	int64_t paused_ms;             /**< Time spent in pauses that ended (resumed), in ms. */
	int64_t paused_usd_micro_per_hour; /**< The paused price when it was created; kept for its whole life. */
	char snapshot[SAAS_STORE_SNAPSHOT_MAX + 1]; /**< Its saved state while pausing, paused or resuming; "" otherwise. */
	char parent_id[SAAS_ID_MAX + 1];            /**< The sandbox it was forked from; "" if none. */
	/*
	 * Version 5: its egress refusals as last recorded (sandbox_egress_record),
	 * totals over its whole life; and the part of them counted before its
	 * driver last opened (sandbox_egress_rebase), which the driver's own
	 * counters, restarted from zero, no longer include. Ignored by sandbox_insert.
	 */
	int64_t denied_connections;
	int64_t denied_lookups;
	int64_t denied_connections_base;
	int64_t denied_lookups_base;
	/*
	 * Version 6: the VM host it runs on (saas_store_host.id); "" for the
	 * engine's own driver (a single machine). Written by sandbox_insert and
	 * sandbox_place, never changed after.
	 */
	char host_id[SAAS_ID_MAX + 1];
	/* Version 7. */
	int on_timeout;                /**< saas_on_timeout. */
	int auto_resume;               /**< Non-zero: front ends resume it on use (kept, not acted on, by the engine). */
	int64_t timeout_s;             /**< The lifetime it asked (seconds), given again by a resume after a pause on timeout. */
	/**
	 * Version 7: its metadata and default environment, NULL-terminated
	 * "KEY=VALUE" strings (checked by the core: keys unique), or NULL.
	 * Borrowed: read by sandbox_insert and sandbox_place, which write them in
	 * the row's own transaction; never filled by get or list (sandbox_values).
	 */
	const char *const *metadata;
	const char *const *envs;
} saas_store_sandbox;

/** Which sandboxes a list returns; every field is a further condition. */
typedef struct {
	const char *account_id;        /**< NULL: every account. */
	int live;                      /**< 1: only not destroyed; -1: only destroyed; 0: both. */
	int64_t ran_from_ms;           /**< With ran_to_ms: only those that ran (ready, and not ended) during [from, to). */
	int64_t ran_to_ms;
	int64_t before_created_ms;     /**< Cursor: only those created before this ... */
	const char *before_id;         /**< ... or at the same time with a smaller id. NULL: no cursor. */
	unsigned int limit;            /**< 0: no limit. */
	const char *host_id;           /**< Version 6: only those on this host ("" the engine's own); NULL: any. */
	/** Version 7: only those whose metadata holds every one of these NULL-terminated "KEY=VALUE"; NULL: any. */
	const char *const *metadata;
} saas_store_filter;

typedef struct {
	char id[SAAS_ID_MAX + 1];
	char sandbox_id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	int status;                    /**< saas_exec_status */
	int exit_code;
	char *stdout_data;             /**< malloc()ed by the store on get; may be NULL when empty. */
	size_t stdout_len;
	char *stderr_data;
	size_t stderr_len;
	int stdout_truncated;
	int stderr_truncated;
	char *command;                 /**< malloc()ed by the store on get. */
	char *error;                   /**< malloc()ed by the store on get; may be NULL. */
	int64_t started_at_ms;
	int64_t finished_at_ms;
} saas_store_execution;

/** An account's own limits (table account_limits); 0 in a field: the engine's default. */
typedef struct {
	unsigned int max_sandboxes;
	unsigned int max_executions;
	unsigned int creates_per_minute;
	unsigned int requests_per_second;
} saas_store_limits;

/** An exposed port. */
typedef struct {
	char sandbox_id[SAAS_ID_MAX + 1];
	unsigned int port;
	char name[SAAS_STORE_PORT_NAME_MAX + 1]; /**< Its preview host label: unique, chosen at random by the core. */
	int64_t created_at_ms;
} saas_store_port;

/** The states of a VM host (version 6). */
enum {
	SAAS_STORE_HOST_ACTIVE = 0,    /**< Takes new sandboxes. */
	SAAS_STORE_HOST_DRAINING = 1,  /**< Takes none; its sandboxes live out their time. */
	SAAS_STORE_HOST_LOST = 2       /**< Stopped answering past the grace period; its sandboxes were closed. */
};

/**
 * A VM host (version 6): a machine running libvirtd that every engine on the
 * database reaches by `uri`, its guests' SSH forwards listening on `address`.
 */
typedef struct {
	char id[SAAS_ID_MAX + 1];
	char name[SAAS_STORE_HOST_NAME_MAX + 1];   /**< Unique; chosen by the operator. */
	char uri[SAAS_STORE_URI_MAX + 1];          /**< libvirt URI (qemu+ssh://, qemu+tls://, ...). */
	char address[SAAS_STORE_ADDRESS_MAX + 1];  /**< IP literal the engines reach its guests' forwards on. */
	int state;                                 /**< SAAS_STORE_HOST_* */
	unsigned int cpu_overcommit_milli;         /**< vCPUs placed per host CPU, in thousandths (1000: none). */
	unsigned int mem_overcommit_milli;         /**< Guest MiB placed per host MiB, in thousandths. */
	unsigned int cpus;                         /**< As the host last reported (host_seen); 0: never seen. */
	uint64_t memory_mb;
	int64_t created_at_ms;
	int64_t last_seen_ms;                      /**< The last time any engine reached it; 0: never. */
	int64_t state_at_ms;                       /**< When it entered its state (drained, lost). */
} saas_store_host;

/**
 * What runs on a host without a sandbox row (version 6): the caller's warm
 * pool VMs there, which take its vCPUs and memory as much as a sandbox does.
 */
typedef struct {
	const char *host_id;
	unsigned int vcpus;
	uint64_t memory_mb;
} saas_store_host_use;

/** How sandbox_place picks a host (version 6). */
typedef struct {
	int64_t seen_after_ms;         /**< Only hosts whose last_seen_ms is at or after this. */
	unsigned int max_live;         /**< As for sandbox_insert: the account's limit on live sandboxes. */
	const char *host_id;           /**< NULL or "": any host with room; else only this host (still ACTIVE, seen, with room). */
	/**
	 * nextra entries (NULL/0: none), counted as used on their hosts with the
	 * sandboxes not destroyed there, in the same transaction. Several may name
	 * one host; hosts not placed on are ignored.
	 */
	const saas_store_host_use *extra;
	size_t nextra;
} saas_store_placement;

typedef int (*saas_store_host_fn)(void *userdata, const saas_store_host *host);
typedef int (*saas_store_account_fn)(void *userdata, const saas_store_account *account);
typedef int (*saas_store_key_fn)(void *userdata, const saas_store_key *key);
typedef int (*saas_store_sandbox_fn)(void *userdata, const saas_store_sandbox *sandbox);
/** One of a sandbox's values (version 7): kind SAAS_STORE_VALUE_*, its key and value. */
typedef int (*saas_store_value_fn)(void *userdata, int kind, const char *key, const char *value);
typedef int (*saas_store_port_fn)(void *userdata, const saas_store_port *port);
typedef int (*saas_store_user_fn)(void *userdata, const saas_store_user *user);
typedef int (*saas_store_execution_fn)(void *userdata, const saas_store_execution *execution);

/**
 * A store. Every slot returns SAAS_OK or a negative SAAS_E* code, says why it
 * failed through saas_sys_error_set() (saas/sys/error.h), and may be called
 * from any thread, several at once. A callback returning non-zero stops the
 * iteration (the call still succeeds). Every slot is required: the engine
 * refuses a table with one missing (docs/backends.md).
 */
typedef struct saas_store {
	unsigned int version;          /**< SAAS_STORE_VERSION */
	const char *name;              /**< "sqlite", "postgresql" ... */

	/** Open (creating and migrating the schema to SAAS_STORE_SCHEMA). */
	int (*open)(void **ctx, const saas_store_env *env);
	void (*close)(void *ctx);
	/** The schema version found (after migration). */
	int (*schema_version)(void *ctx, int *version);

	/** Insert an account and, atomically with it, a ledger credit of `credit` (if > 0). SAAS_EEXISTS on a duplicate id. */
	int (*account_insert)(void *ctx, const saas_store_account *account, int64_t credit);
	int (*account_get)(void *ctx, const char *id, saas_store_account *out);
	int (*account_list)(void *ctx, saas_store_account_fn fn, void *userdata);

	/** Append a credit (amount > 0) to an account's ledger. SAAS_ENOTFOUND if no such account. */
	int (*credit_add)(void *ctx, const char *account_id, int64_t amount, const char *note, int64_t at_ms);

	/** SAAS_EEXISTS on a duplicate id or hash. */
	int (*key_insert)(void *ctx, const saas_store_key *key);
	/** Find a key by hash, revoked or not. SAAS_ENOTFOUND if none. */
	int (*key_find)(void *ctx, const char *hash, saas_store_key *out);
	/** Mark revoked at `at_ms` unless already revoked. SAAS_ENOTFOUND if no such key. */
	int (*key_revoke)(void *ctx, const char *key_id, int64_t at_ms);
	int (*key_list)(void *ctx, const char *account_id, saas_store_key_fn fn, void *userdata);

	/**
	 * Insert a sandbox, atomically refusing with SAAS_ELIMIT when its account
	 * already has `max_live` or more sandboxes not destroyed (two engines on one
	 * database must not both get the last place).
	 */
	int (*sandbox_insert)(void *ctx, const saas_store_sandbox *sandbox, unsigned int max_live);
	int (*sandbox_get)(void *ctx, const char *id, saas_store_sandbox *out);
	/** Newest first (created_at descending, then id descending). */
	int (*sandbox_list)(void *ctx, const saas_store_filter *filter, saas_store_sandbox_fn fn, void *userdata);
	/** creating -> ready, setting ready_at and expires_at. SAAS_ESTATE if it is not creating. */
	int (*sandbox_set_ready)(void *ctx, const char *id, int64_t ready_at_ms, int64_t expires_at_ms);
	/**
	 * Set expires_at of a sandbox that is neither creating nor destroyed
	 * (version 5; ready only before). SAAS_ESTATE otherwise.
	 */
	int (*sandbox_set_expiry)(void *ctx, const char *id, int64_t expires_at_ms);
	/**
	 * Close a sandbox: status destroyed, end reason, destroyed_at, cost, and a
	 * ledger charge of `cost` (if > 0), all in one transaction and only if it was
	 * not already destroyed. *closed is 1 if this call closed it, 0 if it was
	 * closed already (then nothing changes: no second charge, ever).
	 *
	 * `if_expires_at_ms` > 0 makes the close conditional, in the same statement:
	 * only if the row's expires_at still equals it (the expiry the caller read
	 * and computed the cost from). A sandbox extended, or made ready, since is
	 * left alone and the call returns SAAS_ESTATE. 0: no condition.
	 */
	int (*sandbox_close)(void *ctx, const char *id, int end_reason, int64_t destroyed_at_ms,
	                     int64_t cost, int64_t if_expires_at_ms, int *closed);
	/**
	 * Delete a sandbox that is still being created, with nothing recorded
	 * against it: the row of a create the driver refused. SAAS_ESTATE if it is
	 * no longer creating (the reaper closed it, say), SAAS_ENOTFOUND if none.
	 */
	int (*sandbox_delete)(void *ctx, const char *id);

	int (*execution_insert)(void *ctx, const saas_store_execution *execution);
	/** Record how a running execution ended (status, exit code, output, error, finished_at). */
	int (*execution_finish)(void *ctx, const saas_store_execution *execution);
	/** Fills *out; the caller frees its malloc()ed fields. */
	int (*execution_get)(void *ctx, const char *id, saas_store_execution *out);
	/** Mark every execution still running in this sandbox failed with `error`. */
	int (*execution_fail_running)(void *ctx, const char *sandbox_id, const char *error, int64_t at_ms);

	/**
	 * Record an exposed port under its name. Exposing an exposed port is
	 * success and keeps the first row, name and time (read it back with
	 * port_list). SAAS_EEXISTS if another port has this name.
	 */
	int (*port_insert)(void *ctx, const saas_store_port *port);
	/** A sandbox's exposed ports, ascending. */
	int (*port_list)(void *ctx, const char *sandbox_id, saas_store_port_fn fn, void *userdata);

	/**
	 * Delete up to `max` executions (and their output) that finished before
	 * `finished_before_ms`; running ones are never deleted. *pruned: how many went.
	 */
	int (*execution_prune)(void *ctx, int64_t finished_before_ms, unsigned int max, unsigned int *pruned);
	/** An account's own limits; all zero when none were set. SAAS_ENOTFOUND if no such account. */
	int (*limits_get)(void *ctx, const char *account_id, saas_store_limits *out);
	/** Replace an account's own limits. SAAS_ENOTFOUND if no such account. */
	int (*limits_set)(void *ctx, const char *account_id, const saas_store_limits *limits, int64_t at_ms);

	/** The exposed port with this name, whatever its sandbox's state. SAAS_ENOTFOUND if none. */
	int (*port_find)(void *ctx, const char *name, saas_store_port *out);
	/** Forget an exposed port; one that is not exposed is success. */
	int (*port_delete)(void *ctx, const char *sandbox_id, unsigned int port);

	/* Version 3. */

	/**
	 * A sandbox's egress rules: each list its rules (normalised by the core,
	 * never containing white space) joined by '\n', "" when empty; both
	 * malloc()ed by the store, freed by the core with free(). SAAS_ENOTFOUND if
	 * no such sandbox.
	 */
	int (*sandbox_network_get)(void *ctx, const char *id, char **allow, char **deny);
	/**
	 * Replace a sandbox's network_mode and rules (as sandbox_network_get gives
	 * them), in one statement and only while it is not destroyed: SAAS_ESTATE
	 * if it is, SAAS_ENOTFOUND if none.
	 */
	int (*sandbox_network_set)(void *ctx, const char *id, int mode, const char *allow, const char *deny);

	/* Version 4. */

	/**
	 * Disable an account at `at_ms` (0: enable it again). Disabling also ends
	 * every session of its users, in the same transaction. SAAS_ENOTFOUND if
	 * no such account.
	 */
	int (*account_disable)(void *ctx, const char *account_id, int64_t at_ms);
	/** Record that a key was used at `at_ms` (only ever moves forward). A key not found is success. */
	int (*key_touch)(void *ctx, const char *hash, int64_t at_ms);
	/**
	 * Insert a user, atomically with its new account (and that account's first
	 * credit, if > 0) when `account` is not NULL, and taking the invite whose
	 * hash is `invite_hash` when that is not NULL. All or nothing:
	 * SAAS_EEXISTS when the e-mail is taken, SAAS_ENOTFOUND when the invite is
	 * unknown or used, or (account NULL) when user->account_id does not exist.
	 */
	int (*user_insert)(void *ctx, const saas_store_user *user, const saas_store_account *account, int64_t credit,
	                   const char *invite_hash);
	/** The user with this e-mail (as lowercased by the core). SAAS_ENOTFOUND if none. */
	int (*user_find)(void *ctx, const char *email, saas_store_user *out);
	/** Every user, oldest first. */
	int (*user_list)(void *ctx, saas_store_user_fn fn, void *userdata);
	/**
	 * Change a user: a new password hash (NULL: keep it), which also ends every
	 * session of the user in the same transaction; is_operator 0 or 1 (-1:
	 * keep it). SAAS_ENOTFOUND if no such user.
	 */
	int (*user_update)(void *ctx, const char *user_id, const char *password_hash, int is_operator);
	/** Insert a session (hash, created_at_ms, last_seen_at_ms, user.id). SAAS_ENOTFOUND if no such user. */
	int (*session_insert)(void *ctx, const saas_store_session *session);
	/** The session with this token hash, with its user. SAAS_ENOTFOUND if none. */
	int (*session_find)(void *ctx, const char *hash, saas_store_session *out);
	/** Set a session's last_seen_at (only ever forward). A session not found is success. */
	int (*session_touch)(void *ctx, const char *hash, int64_t at_ms);
	/** End a session; one not found is success. */
	int (*session_delete)(void *ctx, const char *hash);
	/** Delete sessions created before `created_before_ms` or last seen before `seen_before_ms`. */
	int (*session_prune)(void *ctx, int64_t created_before_ms, int64_t seen_before_ms);
	/** Record an invite code by its hash, usable once. SAAS_EEXISTS on a duplicate. */
	int (*invite_insert)(void *ctx, const char *hash, int64_t at_ms);

	/* Version 5. */

	/**
	 * Move a sandbox from status `from` to to->status, setting paused_at_ms,
	 * paused_ms and snapshot from `to` (nothing else), in one statement and only
	 * if its status is still `from`: SAAS_ESTATE if not, SAAS_ENOTFOUND if none.
	 * `from` and to->status are ready, paused, pausing or resuming.
	 */
	int (*sandbox_set_state)(void *ctx, const char *id, int from, const saas_store_sandbox *to);
	/**
	 * Raise a sandbox's recorded egress counts (denied_connections,
	 * denied_lookups) to these totals, whatever its state. A count is never
	 * lowered, in the same statement: of two recorders racing, the higher
	 * stays. SAAS_ENOTFOUND if no such sandbox.
	 */
	int (*sandbox_egress_record)(void *ctx, const char *id, int64_t denied_connections, int64_t denied_lookups);
	/**
	 * The driver that counts a sandbox's refusals was opened anew and counts
	 * from zero: make its recorded counts the base (denied_*_base = denied_*),
	 * in one statement. SAAS_ENOTFOUND if no such sandbox.
	 */
	int (*sandbox_egress_rebase)(void *ctx, const char *id);
	/**
	 * A sandbox's executions, newest first (started_at, then id, descending),
	 * without their output (stdout_data, stderr_data NULL, lengths 0). Only
	 * those before the cursor (started before `before_started_ms`, or then
	 * with an id below `before_id`) when before_id is not NULL; at most
	 * `limit` (0: all). A record and its command and error are the store's,
	 * valid during fn only; fn returning non-zero stops the list. An unknown
	 * sandbox has none.
	 */
	int (*execution_list)(void *ctx, const char *sandbox_id, int64_t before_started_ms, const char *before_id,
	                      unsigned int limit, saas_store_execution_fn fn, void *userdata);

	/* Version 6: many engines on one database, many VM hosts. */

	/**
	 * Take lease `name` for `holder` until now_ms + ttl_ms, in one statement:
	 * if nobody holds it, its holder's time ran out (expires_at <= now_ms), or
	 * `holder` holds it already (then it is renewed). *held: 1 if `holder`
	 * holds it now, 0 if another holder's lease runs on (success either way).
	 * The clock is the caller's: every engine on one database needs clocks
	 * within a small part of the ttl of each other (docs/operations.md).
	 */
	int (*lease_take)(void *ctx, const char *name, const char *holder, int64_t now_ms, int64_t ttl_ms,
	                  int *held);
	/** Give up lease `name` if `holder` holds it; otherwise (or none) success and nothing changes. */
	int (*lease_release)(void *ctx, const char *name, const char *holder);
	/**
	 * Who holds lease `name` and until when (expired or not). `holder` has
	 * room for SAAS_STORE_HOLDER_MAX + 1 bytes. SAAS_ENOTFOUND if none.
	 */
	int (*lease_get)(void *ctx, const char *name, char *holder, int64_t *expires_at_ms);

	/** Insert a host (state, cpus, memory_mb, last_seen_ms as given). SAAS_EEXISTS on a duplicate id or name. */
	int (*host_insert)(void *ctx, const saas_store_host *host);
	/** The host with this id or, failing that, this name. SAAS_ENOTFOUND if none. */
	int (*host_get)(void *ctx, const char *id_or_name, saas_store_host *out);
	/** Every host, oldest first. */
	int (*host_list)(void *ctx, saas_store_host_fn fn, void *userdata);
	/**
	 * Move a host from state `from` (-1: any) to `to`, setting state_at_ms,
	 * in one statement and only if its state is still `from`: SAAS_ESTATE if
	 * not, SAAS_ENOTFOUND if none.
	 */
	int (*host_set_state)(void *ctx, const char *id, int from, int to, int64_t at_ms);
	/**
	 * An engine reached the host at `at_ms` and it reported cpus and
	 * memory_mb: record them; last_seen_ms only ever moves forward. Its state
	 * is not changed. SAAS_ENOTFOUND if none.
	 */
	int (*host_seen)(void *ctx, const char *id, int64_t at_ms, unsigned int cpus, uint64_t memory_mb);
	/** Forget a host. SAAS_EBUSY while a sandbox not destroyed is on it; SAAS_ENOTFOUND if none. */
	int (*host_delete)(void *ctx, const char *id);
	/**
	 * Insert a sandbox (as sandbox_insert, refusing past p->max_live) on the
	 * host with the most memory left that has room for it, and set
	 * sandbox->host_id to that host's id, all in one transaction that no
	 * other placement on the same hosts can interleave with (PostgreSQL: the
	 * host rows locked FOR UPDATE). A host has room when it is ACTIVE, was
	 * seen at or after p->seen_after_ms, and the vCPUs and memory of its
	 * sandboxes not destroyed, plus p->extra's for it, plus this one's fit in cpus x
	 * cpu_overcommit_milli / 1000 and memory_mb x mem_overcommit_milli / 1000.
	 * SAAS_EBUSY when no host has room, SAAS_ELIMIT past max_live.
	 */
	int (*sandbox_place)(void *ctx, saas_store_sandbox *sandbox, const saas_store_placement *p);

	/**
	 * Record an MCP session by the SHA-256 of its id (hex), with its
	 * protocol version, at `at_ms`. SAAS_EEXISTS on a duplicate. With `max`
	 * (not 0), the same statement or transaction then deletes the least
	 * recently used sessions past the newest `max` (the new one among them),
	 * so that no more than `max` are kept, save for inserts that run at the
	 * same moment on other connections (each keeps the cap it saw).
	 */
	int (*mcp_session_insert)(void *ctx, const char *hash, const char *version, int64_t at_ms, unsigned int max);
	/**
	 * Use a session: if it exists and was last used at or after
	 * `used_after_ms`, set its last use to at_ms and copy its version into
	 * `version` (room for SAAS_STORE_MCP_VERSION_MAX + 1). SAAS_ENOTFOUND if
	 * none or idle since before used_after_ms.
	 */
	int (*mcp_session_touch)(void *ctx, const char *hash, int64_t at_ms, int64_t used_after_ms, char *version);
	/** End a session; one not found is success. */
	int (*mcp_session_delete)(void *ctx, const char *hash);
	/** Delete sessions last used before `used_before_ms`. */
	int (*mcp_session_prune)(void *ctx, int64_t used_before_ms);

	/* ---- version 7 ---- */
	/**
	 * A sandbox's values (metadata and default environment), by kind then
	 * key, ascending (bytewise). None is success: fn is not called.
	 */
	int (*sandbox_values)(void *ctx, const char *id, saas_store_value_fn fn, void *userdata);

	/* ---- version 8 ---- */
	/**
	 * Delete at most `max` leases that nobody can hold any more: one that ran
	 * out before `expired_before_ms`, but not a "netset:<sandbox id>" one,
	 * which is another engine's request until it is answered, run out or not;
	 * and a "netset:<sandbox id>" one whose sandbox is destroyed or has no
	 * row, which nobody is left to answer. *purged: how many went.
	 */
	int (*lease_purge)(void *ctx, int64_t expired_before_ms, unsigned int max, unsigned int *purged);
} saas_store;

SAAS_END_DECLS

#endif
