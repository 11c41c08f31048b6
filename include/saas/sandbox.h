/*
 * libsaas: sandbox lifecycle.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_SANDBOX_H
#define SAAS_SANDBOX_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * A sandbox's place in its life: creating -> ready -> destroyed. A create that
 * fails goes straight from creating to destroyed. A ready sandbox may be
 * paused (ready -> pausing -> paused) and resumed (paused -> resuming ->
 * ready); a fork shows its parent pausing while its snapshot is taken. Any
 * state may end in destroyed. Values are append-only (docs/sandboxes.md,
 * "Pause and resume").
 *
 * Since: 0.1.0 (PAUSED, PAUSING, RESUMING since 0.2.0)
 */
typedef enum {
	SAAS_SANDBOX_CREATING = 1,
	SAAS_SANDBOX_READY = 2,
	SAAS_SANDBOX_DESTROYED = 3,
	SAAS_SANDBOX_PAUSED = 4,        /**< Saved to storage, no VM; billed the size's paused price. */
	SAAS_SANDBOX_PAUSING = 5,       /**< Its state is being saved (a pause, or a fork's snapshot). */
	SAAS_SANDBOX_RESUMING = 6       /**< A new VM is being made from its saved state. */
} saas_sandbox_status;

/**
 * Why a sandbox was destroyed. Values are append-only.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_END_NONE = 0,       /**< Not destroyed. */
	SAAS_END_USER = 1,       /**< Destroy was called. */
	SAAS_END_EXPIRED = 2,    /**< Its lifetime ran out. */
	SAAS_END_CREDIT = 3,     /**< The account ran out of credit. */
	SAAS_END_FAILED = 4,     /**< Create failed, or the VM died. */
	SAAS_END_LOST = 5,       /**< The VM was gone when the engine reconciled. */
	SAAS_END_DISABLED = 6    /**< An operator disabled its account (saas_account_disable()). Since: 0.2.0 */
} saas_end_reason;

/**
 * An exposed port. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_port_info {
	unsigned int port;
	char *url;               /**< The preview URL. */
} saas_port_info;

/**
 * How a sandbox may reach out (docs/sandboxes.md, "Network policy"). Values
 * are append-only.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_NETWORK_ISOLATED = 0, /**< No connection out, no name resolved. */
	SAAS_NETWORK_INTERNET = 1, /**< The internet; the host's own services and private ranges never. */
	SAAS_NETWORK_POLICY = 2    /**< Only what `allow` names, less what `deny` names; never more than INTERNET. */
} saas_network_mode;

/**
 * Most rules in one list (allow or deny) of a network policy, counted as
 * given (duplicates too). More is SAAS_EINVAL.
 *
 * Since: 0.1.0
 */
#define SAAS_NETWORK_RULES_MAX 64

/** Version of saas_network_spec this header describes. */
#define SAAS_NETWORK_SPEC_VERSION 1

/**
 * An egress policy to give a sandbox (saas_create_options.network_spec,
 * saas_sandbox_network_set()). Initialise with SAAS_NETWORK_SPEC_INIT.
 *
 * A rule is one of:
 * - a domain name, "example.com": that name only (letters, digits and '-'
 *   in labels of at most 63, at most 253 characters; case and a trailing dot
 *   are dropped; an internationalised name is given as punycode, "xn--...");
 * - a wildcard, "*.example.com": every name below it, not the name itself;
 *   '*' only as the whole leftmost label;
 * - an address or a CIDR, "203.0.113.7", "203.0.113.0/24", "2001:db8::/32":
 *   host bits past the prefix are an error, not masked away;
 * - "*": every destination INTERNET allows.
 *
 * A destination in both lists is denied. Rules are normalised (lowercase,
 * canonical addresses, a bare address as /32 or /128, duplicates dropped);
 * the sandbox reports them so. Each list holds at most SAAS_NETWORK_RULES_MAX.
 * A bad rule is SAAS_EINVAL whose message quotes it, names its list and says why.
 *
 * Since: 0.1.0
 */
typedef struct saas_network_spec {
	unsigned int version;          /**< SAAS_NETWORK_SPEC_VERSION */
	int mode;                      /**< saas_network_mode; SAAS_NETWORK_POLICY in SAAS_NETWORK_SPEC_INIT. */
	const char *const *allow;      /**< NULL-terminated rules, or NULL (none). POLICY only. */
	const char *const *deny;       /**< NULL-terminated rules, or NULL (none). POLICY only. */
} saas_network_spec;

#define SAAS_NETWORK_SPEC_INIT { SAAS_NETWORK_SPEC_VERSION, SAAS_NETWORK_POLICY, NULL, NULL }

/**
 * A sandbox's egress as it stands. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_network_info {
	int mode;                      /**< saas_network_mode */
	char **allow;                  /**< NULL-terminated normalised rules; never NULL (empty unless POLICY). */
	char **deny;                   /**< NULL-terminated normalised rules; never NULL (empty unless POLICY). */
	int64_t denied_connections;    /**< Connections refused by policy over the sandbox's life (kept once destroyed). */
	int64_t denied_lookups;        /**< Name lookups refused (and never sent upstream) over the sandbox's life. */
} saas_network_info;

/**
 * A sandbox as the service sees it. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_sandbox {
	char *id;                       /**< "sbx-...": lowercase letters, digits and '-'. */
	int status;                     /**< saas_sandbox_status */
	int end_reason;                 /**< saas_end_reason */
	char *size;
	unsigned int vcpus;
	unsigned int memory_mb;
	unsigned int disk_gb;
	char *image;
	int64_t created_at_ms;
	int64_t ready_at_ms;            /**< 0 until ready. */
	int64_t expires_at_ms;
	int64_t destroyed_at_ms;        /**< 0 until destroyed. */
	int64_t cost_usd_micro;         /**< Charged (destroyed) or accrued so far (ready). */
	size_t nports;
	saas_port_info **ports;
	/** Its egress and what was refused; NULL only from a server too old to say. Since 0.1.0. */
	saas_network_info *network;
	/** The sandbox it was forked from, or NULL. Since 0.2.0. */
	char *parent_id;
	/** When its current pause began; 0 unless paused (or resuming). Since 0.2.0. */
	int64_t paused_at_ms;
	/** Whole seconds it has spent paused so far (billed at the paused price). Since 0.2.0. */
	int64_t paused_seconds;
	/**
	 * Its metadata as given at create (saas_create_options.metadata):
	 * NULL-terminated "KEY=VALUE" strings, sorted by key; empty, never NULL,
	 * unless from a server too old to say. Since 0.2.0.
	 */
	char **metadata;
	/** Its default environment (saas_create_options.envs), "NAME=VALUE" sorted by name; as metadata. Since 0.2.0. */
	char **envs;
	/** saas_on_timeout: what its timeout does. Since 0.2.0. */
	int on_timeout;
	/** Non-zero: a paused sandbox is resumed by a client's first use (a front end's choice). Since 0.2.0. */
	int auto_resume;
} saas_sandbox;

/**
 * A list of sandboxes; library-allocated.
 *
 * Since: 0.1.0
 */
typedef struct saas_sandbox_list {
	size_t count;
	saas_sandbox **items;
	char *next_cursor;              /**< Pass to the next list call for more; NULL at the end. */
} saas_sandbox_list;

/**
 * What a sandbox's timeout does. Values are append-only.
 *
 * Since: 0.2.0
 */
typedef enum {
	SAAS_ON_TIMEOUT_DESTROY = 0,  /**< It ends (SAAS_END_EXPIRED): the default. */
	SAAS_ON_TIMEOUT_PAUSE = 1     /**< It is paused; see saas_create_options.on_timeout. */
} saas_on_timeout;

/**
 * Bounds on a sandbox's metadata (saas_create_options.metadata): at most
 * this many pairs, a key of 1 to SAAS_METADATA_KEY_MAX bytes (no '=', no
 * control character), a value of at most SAAS_METADATA_VALUE_MAX bytes (no
 * NUL). Each key once. More is SAAS_EINVAL naming the bound.
 *
 * Since: 0.2.0
 */
#define SAAS_METADATA_MAX 64
#define SAAS_METADATA_KEY_MAX 128
#define SAAS_METADATA_VALUE_MAX 1024

/**
 * Bounds on a sandbox's default environment (saas_create_options.envs): at
 * most this many variables, a name of 1 to SAAS_ENV_NAME_MAX bytes (no '=',
 * no control character), a value of at most SAAS_ENV_VALUE_MAX bytes. Each
 * name once.
 *
 * Since: 0.2.0
 */
#define SAAS_ENVS_MAX 128
#define SAAS_ENV_NAME_MAX 256
#define SAAS_ENV_VALUE_MAX 8192

/** Version of saas_create_options this header describes. */
#define SAAS_CREATE_OPTIONS_VERSION 3

/**
 * Options for saas_sandbox_create(). Initialise with SAAS_CREATE_OPTIONS_INIT.
 *
 * Since: 0.1.0
 */
typedef struct saas_create_options {
	unsigned int version;      /**< SAAS_CREATE_OPTIONS_VERSION */
	const char *size;          /**< Size class name; NULL: the engine's default size ("small" unless configured). */
	const char *image;         /**< Image name; NULL: the engine's default. */
	int64_t timeout_s;         /**< Lifetime in seconds; 0: the account default. At most the maximum. */
	/**
	 * Network policy: "isolated" (the guest can open no connection at all),
	 * "internet" (outbound connections to the internet; the host's own
	 * services and private networks stay unreachable), or NULL: the engine's
	 * default (the driver's; the libvirt driver gives internet where its guard
	 * is installed and the host has a default route, else isolated). Copied
	 * during the call. See docs/sandboxes.md, "Network policy".
	 */
	const char *network;
	/**
	 * Since version 2: an egress policy (saas_network_spec), or NULL. Set this
	 * or `network`, not both. Copied during the call.
	 */
	const saas_network_spec *network_spec;
	/**
	 * Since version 3: the sandbox's metadata, NULL-terminated "KEY=VALUE"
	 * strings (split at the first '='), or NULL. Kept with the sandbox, shown
	 * by get and list, matched by saas_sandbox_list_query(), copied to a
	 * fork's children; never seen by the guest. Bounds: SAAS_METADATA_*.
	 */
	const char *const *metadata;
	/**
	 * Since version 3: the sandbox's default environment, NULL-terminated
	 * "NAME=VALUE" strings, or NULL. Every execution (and, since 0.2.0,
	 * terminal) in it starts with these, less the names its own
	 * saas_exec_options.env (saas_pty_options.env) sets, which win. Copied to
	 * a fork's children. Bounds: SAAS_ENV*_MAX.
	 */
	const char *const *envs;
	/**
	 * Since version 3: saas_on_timeout. SAAS_ON_TIMEOUT_PAUSE: at its
	 * timeout the sandbox is paused instead of destroyed (the driver must
	 * snapshot: SAAS_ENOTSUP otherwise). Once paused (so, or by a call) it
	 * keeps for the account's max_timeout_s (24 h by default) and then ends
	 * expired; a resume gives it its lifetime (timeout_s) again from then.
	 * A timeout that falls while it cannot be paused (still being made, being
	 * forked) waits for the next sweep; one whose pause fails ends it.
	 */
	int on_timeout;
	/**
	 * Since version 3: non-zero: front ends that serve a sandbox's traffic
	 * (the E2B gateway) resume it when it is paused and a client uses it.
	 * Needs on_timeout SAAS_ON_TIMEOUT_PAUSE. The engine only keeps the flag.
	 */
	int auto_resume;
} saas_create_options;

#define SAAS_CREATE_OPTIONS_INIT { SAAS_CREATE_OPTIONS_VERSION, NULL, NULL, 0, NULL, NULL, NULL, NULL, 0, 0 }

/**
 * Create a sandbox: a fresh VM with its own kernel, never used by anyone before.
 * Returns once commands can run in it. Billing starts when it is ready.
 *
 * @param out     [out, optional] the sandbox; free with saas_sandbox_free().
 * @param client  the client.
 * @param options options, or NULL for the defaults.
 * @param flags   0.
 * @return SAAS_OK; SAAS_EINVAL (unknown size, image or network policy, a bad
 *         network rule (the message names it and says why), timeout
 *         out of range, bad version or flag); SAAS_ECREDIT (the balance cannot pay
 *         for the minimum); SAAS_ELIMIT (too many sandboxes); SAAS_ENOTSUP (the
 *         driver cannot give the network policy asked for, e.g. "internet" where
 *         its host guard is not installed; nothing is billed, and no sandbox is
 *         listed: a request the driver refuses leaves no row); SAAS_EBACKEND (the
 *         VM did not come up; nothing is left behind and nothing is billed; the
 *         list shows it "failed"); SAAS_EBUSY (the server's state filesystem is
 *         under its free-space threshold, or the host has not the memory for
 *         it now: try again later; no row is left); SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_create(saas_sandbox **out, saas_client *client, const saas_create_options *options, unsigned int flags);

/**
 * Look a sandbox up.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (unknown, or another account's), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_get(saas_sandbox **out, saas_client *client, const char *sandbox_id);

/**
 * saas_sandbox_get_ext() flag: the egress counters
 * (saas_network_info.denied_connections, .denied_lookups) as the engine last
 * recorded them, not read from the sandbox's VM now. Reading them live asks
 * the VM's host (the libvirt driver runs nft: tens to hundreds of ms under
 * load); a caller that needs a sandbox's status, owner, size or settings on
 * every request (a gateway's check) asks for the recorded ones. They are
 * never above the live ones and catch up at the next live read (a
 * saas_sandbox_get(), a listing, a destroy, an engine stop). Everything else
 * in the answer is the same as saas_sandbox_get()'s.
 */
#define SAAS_GET_RECORDED (1u << 0)

/**
 * Look a sandbox up, as saas_sandbox_get() does, with flags.
 *
 * @param out        [out] the sandbox; free with saas_sandbox_free(). NULL on error.
 * @param client     the client.
 * @param sandbox_id the sandbox.
 * @param flags      0 (then the same as saas_sandbox_get()) or SAAS_GET_RECORDED.
 * @return SAAS_OK, SAAS_EINVAL (a missing or malformed id, an unknown flag),
 *         SAAS_ENOTFOUND (unknown, or another account's), SAAS_ESTORE, SAAS_ENOMEM;
 *         through a remote client also SAAS_ENETWORK and SAAS_EPROTOCOL, as
 *         every remote call. A remote client asks its server for the recorded
 *         counters (`?counters=recorded`); a server older than 0.2.0 answers
 *         with live ones, which is allowed (the flag only permits).
 *
 * Thread safety: as every client call (the client may be shared).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_get_ext(saas_sandbox **out, saas_client *client, const char *sandbox_id,
                                      unsigned int flags);

/** List filters for saas_sandbox_list_get(). */
#define SAAS_LIST_ACTIVE (1u << 0)     /**< Only sandboxes not destroyed. */
#define SAAS_LIST_DESTROYED (1u << 1)  /**< Only destroyed sandboxes. */
/**
 * Not a filter: each listed sandbox's egress counters as the engine last
 * recorded them, as SAAS_GET_RECORDED gives for one (no call to the VMs'
 * host per sandbox listed). For a caller that lists for ids, status or
 * metadata, often (a gateway's listing, a scan). A remote client asks its
 * server with `counters=recorded`; a server older than 0.2.0 answers with
 * live counters, which is allowed (the flag only permits). Since 0.2.0.
 */
#define SAAS_LIST_RECORDED (1u << 2)

/**
 * The account's sandboxes, newest first.
 *
 * @param cursor a next_cursor from a previous page, or NULL for the first.
 * @param limit  page size, 1..1000; 0 means 100.
 * @param flags  at most one of SAAS_LIST_ACTIVE and SAAS_LIST_DESTROYED, and
 *               SAAS_LIST_RECORDED (since 0.2.0).
 * @param out    [out] free with saas_sandbox_list_free().
 * @return SAAS_OK, SAAS_EINVAL (bad cursor, limit or flags), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_list_get(saas_sandbox_list **out, saas_client *client, const char *cursor, unsigned int limit, unsigned int flags);

/** Most metadata pairs one list may filter on. */
#define SAAS_LIST_METADATA_MAX 32

/** Version of saas_list_options this header describes. */
#define SAAS_LIST_OPTIONS_VERSION 1

/**
 * Options for saas_sandbox_list_query(). Initialise with SAAS_LIST_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_list_options {
	unsigned int version;      /**< SAAS_LIST_OPTIONS_VERSION */
	const char *cursor;        /**< A next_cursor from a previous page, or NULL for the first. */
	unsigned int limit;        /**< Page size, 1..1000; 0 means 100. */
	/**
	 * Only sandboxes whose metadata holds every one of these NULL-terminated
	 * "KEY=VALUE" pairs (exactly; at most SAAS_LIST_METADATA_MAX), or NULL.
	 * The store filters, so pages and cursors count only what matches.
	 */
	const char *const *metadata;
} saas_list_options;

#define SAAS_LIST_OPTIONS_INIT { SAAS_LIST_OPTIONS_VERSION, NULL, 0, NULL }

/**
 * The account's sandboxes, newest first, filtered: saas_sandbox_list_get()
 * with room to grow.
 *
 * @param options options, or NULL (the first page of 100, unfiltered).
 * @param flags   at most one of SAAS_LIST_ACTIVE and SAAS_LIST_DESTROYED, and
 *                SAAS_LIST_RECORDED.
 * @param out     [out] free with saas_sandbox_list_free().
 * @return SAAS_OK, SAAS_EINVAL (bad cursor, limit, flags, version, or a
 *         metadata pair that is not KEY=VALUE within SAAS_METADATA_*),
 *         SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_list_query(saas_sandbox_list **out, saas_client *client, const saas_list_options *options,
                                         unsigned int flags);

/**
 * saas_sandbox_extend() flag: set the expiry to `seconds` from now, sooner or
 * later than it was (0: now; the reaper then ends it, or pauses it if it
 * pauses on timeout). Since 0.2.0.
 */
#define SAAS_EXTEND_FROM_NOW (1u << 0)

/**
 * Push a sandbox's expiry out by `seconds` (from its current expiry). The new
 * lifetime, counted from now, may not pass the account's maximum timeout.
 * With SAAS_EXTEND_FROM_NOW, set it to `seconds` from now instead, which may
 * shorten it.
 *
 * @param out   [out, optional] the sandbox as extended; free with saas_sandbox_free().
 * @param flags 0 or SAAS_EXTEND_FROM_NOW.
 * A paused sandbox may be extended too (its expiry runs while it is paused).
 *
 * @return SAAS_OK, SAAS_EINVAL (seconds <= 0 (< 0 with SAAS_EXTEND_FROM_NOW), or past the maximum: as a create's
 *         timeout, no retry can succeed; an unknown flag), SAAS_ENOTFOUND, SAAS_ESTATE
 *         (destroyed or still creating), SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_extend(saas_sandbox **out, saas_client *client, const char *sandbox_id, int64_t seconds,
                                     unsigned int flags);

/**
 * Destroy a sandbox: its VM, disk and sessions go, billing stops. Destroying a
 * destroyed sandbox succeeds and changes nothing. The VM goes even when the
 * store cannot record the end right now: the call then succeeds, the sandbox
 * reads as destroyed, and the end is recorded (billed to this moment) when
 * the store can.
 *
 * @param out   [out, optional] the sandbox as destroyed, with its final cost.
 * @param flags 0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_EBACKEND.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_destroy(saas_sandbox **out, saas_client *client, const char *sandbox_id,
                                      unsigned int flags);

/**
 * Replace a running sandbox's egress policy. New connections and name lookups
 * follow it at once; connections already open may live on. The policy is
 * stored with the sandbox and applied again after an engine restart.
 *
 * @param out   [out, optional] the sandbox with its new policy; free with saas_sandbox_free().
 * @param spec  the policy (any mode: ISOLATED, INTERNET or POLICY with its rules).
 * @param flags 0.
 * @return SAAS_OK, SAAS_EINVAL (a bad rule: the message names it and says why;
 *         rules outside POLICY; too many rules; bad version or flag),
 *         SAAS_ENOTFOUND, SAAS_ESTATE (destroyed or still creating),
 *         SAAS_ENOTSUP (the driver cannot change or enforce this policy; the
 *         sandbox keeps the one it had), SAAS_EBACKEND, SAAS_ESTORE, SAAS_ENOMEM,
 *         SAAS_EBUSY (a VM host's guest whose egress another server of the
 *         cluster serves: the policy is stored, and that server, asked to apply
 *         it, did not confirm it within two thirds of the lease ttl; it applies
 *         it when it can). Through a server that does not serve the guest's
 *         egress the call returns once the server that does has applied it.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_network_set(saas_sandbox **out, saas_client *client, const char *sandbox_id,
                                          const saas_network_spec *spec, unsigned int flags);

/** Most children one saas_sandbox_fork() call makes. */
#define SAAS_FORK_MAX 10

/** Version of saas_fork_options this header describes. */
#define SAAS_FORK_OPTIONS_VERSION 1

/**
 * Options for saas_sandbox_fork(). Initialise with SAAS_FORK_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_fork_options {
	unsigned int version;      /**< SAAS_FORK_OPTIONS_VERSION */
	/** Each child's lifetime in seconds, from when it is ready; 0: the account default. At most the maximum. */
	int64_t timeout_s;
	/**
	 * The children's egress policy, or NULL: the parent's (mode and rules).
	 * Copied during the call.
	 */
	const saas_network_spec *network_spec;
} saas_fork_options;

#define SAAS_FORK_OPTIONS_INIT { SAAS_FORK_OPTIONS_VERSION, 0, NULL }

/**
 * Fork a ready sandbox: `count` new sandboxes, each with the parent's memory,
 * processes and disk as they were at one moment, each a machine of its own
 * (its own id, hostname, kernel RNG seed and expiry), of the parent's size and
 * image, owned and billed by the same account from when it is ready. The
 * parent pauses only while its state is taken (it shows "pausing"), then runs
 * on; executions running in it go on. The children are made side by side, a
 * few at once. The snapshot is deleted once the children are made. All or
 * nothing: if one child cannot be made, those made are destroyed unbilled and
 * the call fails.
 *
 * Each child counts as a create: against max_sandboxes, creates_per_minute,
 * and the balance, which must pay each child's minimum (min_balance_s of the
 * size), all of them together.
 *
 * @param out     [out, optional] the children; free with saas_sandbox_list_free().
 * @param count   1 to SAAS_FORK_MAX.
 * @param options options, or NULL for the defaults.
 * @param flags   0.
 * @return SAAS_OK; SAAS_EINVAL (count, timeout, network, version or flag);
 *         SAAS_ENOTFOUND; SAAS_ESTATE (not ready: creating, paused, pausing,
 *         resuming, expired or destroyed); SAAS_ECREDIT; SAAS_ELIMIT;
 *         SAAS_ENOTSUP (the driver cannot snapshot); SAAS_EBACKEND; SAAS_EBUSY;
 *         SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_fork(saas_sandbox_list **out, saas_client *client, const char *sandbox_id,
                                   unsigned int count, const saas_fork_options *options, unsigned int flags);

/**
 * Pause a ready sandbox: its memory, processes and disk are saved to storage
 * and its VM goes. Compute billing stops; the size's paused price
 * (saas_size_paused_usd_micro_per_hour()) runs until it is resumed or ends.
 * Executions running in it end, recorded as failed ("the sandbox was
 * paused"); exposed ports stay recorded and serve again after resume. Its
 * expiry keeps running: a paused sandbox that expires, or whose account runs
 * out of credit, is destroyed with its saved state. Extend works while paused.
 *
 * @param out   [out, optional] the sandbox as paused.
 * @param flags 0.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND; SAAS_ESTATE (not ready);
 *         SAAS_ENOTSUP (the driver cannot snapshot); SAAS_EBACKEND (it could
 *         not be saved: it runs on as before); SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_pause(saas_sandbox **out, saas_client *client, const char *sandbox_id, unsigned int flags);

/**
 * Resume a paused sandbox on a new VM, with its processes, files and exposed
 * ports as they were. Compute billing starts again when it is ready.
 *
 * @param out   [out, optional] the sandbox as resumed.
 * @param flags 0.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND; SAAS_ESTATE (not paused, or
 *         expired); SAAS_ECREDIT (the balance cannot pay for the size's
 *         minimum); SAAS_ENOTSUP; SAAS_EBACKEND (it stays paused); SAAS_EBUSY
 *         (the host has not the memory for it now: it stays paused, try
 *         again later); SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_resume(saas_sandbox **out, saas_client *client, const char *sandbox_id, unsigned int flags);

/**
 * Name of a network mode ("isolated", "internet", "policy"); "unknown" otherwise. Static.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_network_mode_name(int mode);

/**
 * Name of a status ("creating", "ready", "destroyed", "paused", "pausing",
 * "resuming"); "unknown" otherwise. Static.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_sandbox_status_name(int status);

/**
 * Name of an end reason ("", "destroyed", "expired", "credit", "failed", "lost"). Static.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_end_reason_name(int reason);

/**
 * Free a sandbox; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_sandbox_free(saas_sandbox *sandbox);

/**
 * Free a sandbox list and its sandboxes; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_sandbox_list_free(saas_sandbox_list *list);

SAAS_END_DECLS

#endif
