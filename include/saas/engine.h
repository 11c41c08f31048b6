/*
 * libsaas: the local engine and its administrative calls.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_ENGINE_H
#define SAAS_ENGINE_H

#include "common.h"
#include "billing.h"
/* The admin calls on accounts and keys have their own header; they still come with this one. */
#include "accounts.h"

SAAS_BEGIN_DECLS

struct saas_driver;
struct saas_store;

/**
 * Log levels passed to a saas_log_fn.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_LOG_ERROR = 0,
	SAAS_LOG_WARN = 1,
	SAAS_LOG_INFO = 2,
	SAAS_LOG_DEBUG = 3
} saas_log_level;

/**
 * Where the engine's log lines go. The library never prints on its own.
 * Called from any engine thread; must be thread-safe. `msg` has no trailing newline
 * and is valid only during the call.
 *
 * Since: 0.1.0
 */
typedef void (*saas_log_fn)(void *userdata, int level, const char *msg);

/**
 * A clock: milliseconds since the Unix epoch. Tests pass one they can move;
 * NULL means the real clock. Called from any engine thread.
 *
 * Since: 0.1.0
 */
typedef int64_t (*saas_clock_fn)(void *userdata);

/**
 * Start no background thread: neither the reaper nor the warm pools' refill.
 * The caller drives saas_engine_sweep() itself (tests do), and each sweep then
 * also makes at most one pooled VM.
 */
#define SAAS_ENGINE_NO_REAPER (1u << 0)
/**
 * Open only the store: accounts, credit and keys can be administered beside a
 * running server, but no VM can be created or destroyed and nothing is reconciled.
 */
#define SAAS_ENGINE_STORE_ONLY (1u << 1)

/**
 * Version of saas_engine_options this header describes. Version 2 appended
 * `pool`, version 3 the tenant limits (`max_executions` to
 * `execution_retention_s`) and `min_free_mb`, version 4 `store`,
 * `store_userdata` and `default_size`, version 5 `disk_budget_gb`, version 6
 * `lease_ttl_ms`, `host_heartbeat_ms`, `host_grace_ms` and
 * `paused_usd_micro_per_gib_hour`, version 7 `mcp_sessions_max`, version 8
 * `max_transfers`, version 9 `metrics_interval_ms`, `metrics_window_s` and
 * `metrics_samples_max`; callers built against an older version
 * are still accepted (their struct is read only as far as their version
 * reached, and what it lacks takes the defaults).
 */
#define SAAS_ENGINE_OPTIONS_VERSION 9

/**
 * Default of saas_engine_options.paused_usd_micro_per_gib_hour: $0.0001 per
 * GiB-hour of a size's memory and disk, about $0.07 a GiB-month, near what
 * block storage costs ("small", 4 GiB + 40 GiB, pays $0.0044 an hour paused).
 */
#define SAAS_ENGINE_PAUSED_PRICE_DEFAULT 100
/** saas_engine_options.paused_usd_micro_per_gib_hour for paused sandboxes that cost nothing. */
#define SAAS_ENGINE_PAUSED_PRICE_FREE (-1)
/** The highest saas_engine_options.paused_usd_micro_per_gib_hour: $1000 per GiB-hour. */
#define SAAS_ENGINE_PAUSED_PRICE_MAX SAAS_USD(1000)

/** Default of saas_engine_options.max_executions. */
#define SAAS_MAX_EXECUTIONS_DEFAULT 8
/**
 * Default of saas_engine_options.max_transfers: file reads and writes under
 * way at once per account. Each holds a thread of the caller's (a server's
 * request) for as long as the guest and the client take.
 */
#define SAAS_MAX_TRANSFERS_DEFAULT 4
/** Default of saas_engine_options.creates_per_minute. */
#define SAAS_CREATES_PER_MINUTE_DEFAULT 20
/** Default of saas_engine_options.requests_per_second. */
#define SAAS_REQUESTS_PER_SECOND_DEFAULT 100
/** Default of saas_engine_options.execution_retention_s: 24 hours. */
#define SAAS_EXECUTION_RETENTION_DEFAULT 86400
/** The most any per-account count or rate limit may be set to. */
#define SAAS_LIMIT_MAX 100000

/** Default of saas_engine_options.min_free_mb: 1 GiB. */
#define SAAS_ENGINE_MIN_FREE_MB 1024
/** The largest saas_engine_options.min_free_mb: 16 TiB. */
#define SAAS_ENGINE_MIN_FREE_MB_MAX (16u << 20)
/**
 * Default of saas_engine_options.disk_budget_gb: this percentage of the size
 * of the filesystem holding the VMs' disks (an overcommit: thin disks seldom
 * fill, and `min_free_mb` stops creates before the filesystem does).
 */
#define SAAS_ENGINE_DISK_BUDGET_PCT 400
/** The largest saas_engine_options.disk_budget_gb: 1 PiB. */
#define SAAS_ENGINE_DISK_BUDGET_GB_MAX (1u << 20)

/**
 * How long saas_engine_free() waits for a pooled VM being made (ms). Past it,
 * the free returns; the refill thread destroys that VM when its create
 * returns, and if the process exits first, the next start's reconcile does
 * (the VM has no row).
 */
#define SAAS_ENGINE_STOP_WAIT_MS 10000

/** Default of saas_engine_options.lease_ttl_ms: 15 s (renewed every 5 s). */
#define SAAS_ENGINE_LEASE_TTL_MS 15000
/** The shortest and longest saas_engine_options.lease_ttl_ms. */
#define SAAS_ENGINE_LEASE_TTL_MS_MIN 300
#define SAAS_ENGINE_LEASE_TTL_MS_MAX 600000

/** Default of saas_engine_options.host_heartbeat_ms: 5 s. */
#define SAAS_ENGINE_HOST_HEARTBEAT_MS 5000
/** Default of saas_engine_options.host_grace_ms: 60 s. */
#define SAAS_ENGINE_HOST_GRACE_MS 60000

/**
 * Default of saas_engine_options.mcp_sessions_max: MCP sessions kept in the
 * store, every engine's together. An initialize needs no key, so this is what
 * bounds what anonymous clients can make the store hold.
 */
#define SAAS_ENGINE_MCP_SESSIONS_DEFAULT 4096
/** The largest saas_engine_options.mcp_sessions_max. */
#define SAAS_ENGINE_MCP_SESSIONS_MAX 1000000

/** The most VMs one warm pool may hold (the N of "SIZE=N"). */
#define SAAS_ENGINE_POOL_MAX 64

/**
 * Options for saas_engine_open(). Initialise with SAAS_ENGINE_OPTIONS_INIT.
 *
 * Since: 0.1.0
 */
typedef struct saas_engine_options {
	unsigned int version;           /**< SAAS_ENGINE_OPTIONS_VERSION. */
	/** State directory; created 0700 if missing. NULL: $XDG_STATE_HOME/aas, ~/.local/state/aas, or /var/lib/aas as root. */
	const char *state_dir;
	/** Store URL: "sqlite:PATH", a plain PATH, or "postgresql://...". NULL: sqlite file aas.db in the state directory. */
	const char *store_url;
	/** VM driver. NULL: the built-in libvirt driver when compiled in. */
	const struct saas_driver *driver;
	/** Driver configuration string (for libvirt: a connection URI). NULL: the driver's default. */
	const char *driver_config;
	/** Image used when create names none. NULL: "default". */
	const char *default_image;
	/**
	 * Preview URL template for exposed ports; it must contain "{name}", replaced
	 * by the exposure's unguessable name (a DNS label), and may contain "{port}"
	 * and "{id}" (the sandbox's), which are replaced too. NULL:
	 * "http://{name}.localhost:8080/".
	 */
	const char *preview_url;
	/*
	 * Every account's limits (the tenant limits below are the rest of them);
	 * zero takes the default. Fields of their own rather than a struct: a
	 * struct here could never grow, while options grow at their end. The
	 * layout is version 1's.
	 */
	unsigned int max_sandboxes;     /**< Sandboxes not yet destroyed, per account. 0: 10. */
	int64_t default_timeout_s;      /**< Lifetime when create names none. 0: 900 (15 min). */
	int64_t max_timeout_s;          /**< Longest lifetime from now, at create or extend. 0: 86400. */
	int64_t min_balance_s;          /**< Create needs credit for this many seconds of the size. 0: 60. */
	/**
	 * Size classes and prices: `nsizes` pointers, so that saas_size can grow.
	 * NULL takes the built-in table (small, medium, large). Copied at open.
	 */
	const saas_size *const *sizes;
	size_t nsizes;                  /**< Entries in `sizes`. */
	int64_t new_account_credit;     /**< Micro-dollars for new accounts when create passes SAAS_CREDIT_DEFAULT. 0: $5. */
	unsigned int reaper_interval_ms;/**< How often the reaper sweeps. 0: 1000. */
	saas_clock_fn clock;            /**< NULL: the real clock. */
	void *clock_userdata;
	saas_log_fn log;                /**< NULL: no logging. */
	void *log_userdata;
	int log_level;                  /**< Highest saas_log_level passed to `log`. */
	unsigned int flags;             /**< SAAS_ENGINE_* bits. */
	/**
	 * Warm pools (since version 2): "SIZE=N[,SIZE=N...]" keeps N VMs of that size
	 * ready to be claimed by creates that ask for that size and image and no
	 * particular network; "SIZE:IMAGE=N" names the image (default: default_image).
	 * N is 0 to SAAS_ENGINE_POOL_MAX; spaces around entries are ignored. A background
	 * thread makes the VMs through the driver's vm_create, one at a time. A pooled
	 * VM belongs to no account and is billed to nobody until a create claims it;
	 * billing starts at the claim, and it is destroyed with its sandbox, never
	 * returned. NULL or "": no pools. Copied at open; ignored by store-only engines
	 * (but still checked).
	 */
	const char *pool;
	/*
	 * Tenant limits (since version 3). Each is every account's default; an
	 * operator may set another value for one account (saas_account_limits_set()).
	 * Zero takes the default; counts and rates are at most SAAS_LIMIT_MAX.
	 */
	/** Executions running at once per account, background ones included. 0: SAAS_MAX_EXECUTIONS_DEFAULT. */
	unsigned int max_executions;
	/** Sandbox creates per account per rolling minute. 0: SAAS_CREATES_PER_MINUTE_DEFAULT. */
	unsigned int creates_per_minute;
	/**
	 * API requests per second per key. The engine only reports it (in the
	 * account's limits); aas-server enforces it. 0: SAAS_REQUESTS_PER_SECOND_DEFAULT.
	 */
	unsigned int requests_per_second;
	/**
	 * Seconds a finished execution and its output are kept; the reaper deletes
	 * older ones, after which they are not found. 0: SAAS_EXECUTION_RETENTION_DEFAULT
	 * (24 hours); at most ten years.
	 */
	int64_t execution_retention_s;
	/**
	 * Free space (MiB) the state directory's filesystem keeps (since version 3),
	 * and for the libvirt driver the one holding the VMs' overlays: below it,
	 * creates are refused with SAAS_EBUSY, so that the disk keeps room to
	 * record the ends of the sandboxes running. 0: SAAS_ENGINE_MIN_FREE_MB.
	 * At most SAAS_ENGINE_MIN_FREE_MB_MAX (16 TiB).
	 */
	unsigned int min_free_mb;
	/**
	 * A store of your own (since version 4): its table (saas/sys/store.h, of
	 * version SAAS_STORE_VERSION, every slot set), used instead of one chosen
	 * by `store_url`, which must then be NULL. NULL: the store `store_url` names.
	 * It must outlive the engine.
	 */
	const struct saas_store *store;
	/** Handed to the store's open() as saas_store_env.userdata (since version 4). */
	void *store_userdata;
	/**
	 * The size a create that names none gets (since version 4); it must be one
	 * of `sizes`. NULL: the first of `sizes` ("small" in the built-in table).
	 * Copied at open.
	 */
	const char *default_size;
	/**
	 * Disk (GiB) the sandboxes may hold at once (since version 5): the disks
	 * of their sizes, summed over every live sandbox, plus every warm pool at
	 * its full count. A VM's disk is thin and grows as its guest writes, up to
	 * its size's disk (the libvirt driver bounds it there): the budget is what
	 * the host must have room for when every guest fills its disk. A create
	 * that would pass it is refused with SAAS_EBUSY, as one under `min_free_mb`
	 * is. 0: SAAS_ENGINE_DISK_BUDGET_PCT percent of the size of the filesystem
	 * holding the VMs' disks for the libvirt driver (STATE/libvirt/vms), no
	 * budget for drivers whose disks the engine cannot see (set one to have
	 * it). For no overcommit, set at most that filesystem's size less
	 * `min_free_mb`. At most SAAS_ENGINE_DISK_BUDGET_GB_MAX.
	 */
	unsigned int disk_budget_gb;
	/**
	 * How long the leases this engine holds in the store last unrenewed, in
	 * ms (since version 6); it renews them every third of it. Many engines
	 * on one database (docs/operations.md) find a dead one's work through
	 * them: its creates cut short are undone, its pooled VMs destroyed, its
	 * running executions marked failed, and its reaper passes taken over,
	 * within about this long after it died. Their clocks must agree to well
	 * within it. 0: SAAS_ENGINE_LEASE_TTL_MS. SAAS_ENGINE_LEASE_TTL_MS_MIN to
	 * SAAS_ENGINE_LEASE_TTL_MS_MAX.
	 */
	unsigned int lease_ttl_ms;
	/**
	 * How often (ms) the engine asks every VM host (saas/hosts.h) what it has,
	 * which also tells that it is alive (since version 6). 0:
	 * SAAS_ENGINE_HOST_HEARTBEAT_MS. Placement takes only hosts some engine
	 * reached within three of these. 100 to 600000.
	 */
	unsigned int host_heartbeat_ms;
	/**
	 * How long (ms) a VM host may go unreached by every engine before it is
	 * marked lost and its sandboxes are closed, billed up to the moment it was
	 * last reached (since version 6). 0: SAAS_ENGINE_HOST_GRACE_MS. At least
	 * twice host_heartbeat_ms; at most one day.
	 */
	unsigned int host_grace_ms;
	/**
	 * What a paused sandbox costs (since version 6), in micro-dollars per GiB-hour
	 * of its size's memory and disk. Each sandbox keeps the price it was made
	 * with (a fork's children and a pool's claimed VMs: the price when they
	 * became sandboxes). 0: SAAS_ENGINE_PAUSED_PRICE_DEFAULT;
	 * SAAS_ENGINE_PAUSED_PRICE_FREE: nothing. At most SAAS_ENGINE_PAUSED_PRICE_MAX.
	 */
	int64_t paused_usd_micro_per_gib_hour;
	/**
	 * The most MCP sessions the store keeps (since version 7; every engine on
	 * one store shares them). A new session past it ends the least recently
	 * used one, whose client gets "no such session" on its next request and
	 * initializes again, as the MCP transport prescribes. 0:
	 * SAAS_ENGINE_MCP_SESSIONS_DEFAULT. At most SAAS_ENGINE_MCP_SESSIONS_MAX.
	 */
	unsigned int mcp_sessions_max;
	/**
	 * File transfers (saas_file_read*, saas_file_write*) under way at once
	 * per account, whatever carries them (since version 8); one past it is
	 * refused with SAAS_ELIMIT (limit "max_transfers", REST 429). Every
	 * account's, not set per account. 0: SAAS_MAX_TRANSFERS_DEFAULT; at most
	 * SAAS_LIMIT_MAX.
	 */
	unsigned int max_transfers;
	/**
	 * How often (ms) the engine samples each running sandbox's CPU, memory
	 * and disk through its driver (since version 9; saas/metrics.h). 0:
	 * SAAS_METRICS_INTERVAL_MS_DEFAULT. 100 to 3600000.
	 */
	unsigned int metrics_interval_ms;
	/**
	 * Seconds of samples kept per running sandbox (since version 9). 0:
	 * SAAS_METRICS_WINDOW_S_DEFAULT. At most 86400, and at most 100000
	 * intervals.
	 */
	unsigned int metrics_window_s;
	/**
	 * Samples kept in memory, every sandbox's together (since version 9): the
	 * bound on what sampling holds however many sandboxes run. 0:
	 * SAAS_METRICS_SAMPLES_DEFAULT. At most 16777216.
	 */
	unsigned int metrics_samples_max;
} saas_engine_options;

#define SAAS_ENGINE_OPTIONS_INIT { SAAS_ENGINE_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL, 0, 0, 0, NULL, NULL, NULL, NULL, SAAS_LOG_INFO, 0, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * Open an engine on a state directory.
 *
 * Opens (and migrates) the store, opens the driver, reconciles what the driver
 * runs against what the store says (VMs nobody owns are destroyed; sandboxes
 * whose VM is gone are closed and billed up to the last moment known), then
 * starts the reaper and, if `pool` asks for any, the warm pools' refill.
 *
 * @param out     [out] the engine; free with saas_engine_free().
 * @param options options, or NULL for all defaults.
 * @return SAAS_OK, SAAS_EINVAL (bad option, unknown version or flag, a bad pool spec:
 *         the message names the bad entry; both `store_url` and `store`, or a store
 *         or driver table of another version or with a required slot missing;
 *         `min_free_mb` or `disk_budget_gb` over its maximum),
 *         SAAS_ESTORE, SAAS_EBACKEND, SAAS_EBUSY (state directory held by another engine),
 *         SAAS_EIO, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_open(saas_engine **out, const saas_engine_options *options) SAAS_WARN_UNUSED;

/**
 * Begin stopping: the work the engine does on its own behalf is abandoned
 * now and its VMs destroyed (a template being built), so that a process
 * that then waits for requests in flight, or gives up on them and exits,
 * leaves none of it running. Calls in flight and later calls go on as
 * before; saas_engine_free() still releases the engine, and begins the
 * same way when this was not called. Calling it again changes nothing.
 *
 * @param engine the engine; NULL is ignored.
 * @param flags  0.
 * @return SAAS_OK, SAAS_EINVAL (an unknown flag).
 *
 * Thread safety: any thread, while the engine is not being freed.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_engine_stop(saas_engine *engine, unsigned int flags);

/**
 * Stop the reaper and the pools' refill and release the engine. Sandboxes keep
 * running and keep their expiry; the next engine opened on the same state
 * reconciles them. Pooled VMs nobody claimed are destroyed. A pooled VM being
 * made is waited for at most SAAS_ENGINE_STOP_WAIT_MS; past that the free
 * returns and the refill thread, when the driver's create returns, destroys
 * that VM and finishes the release (until then the state directory stays
 * locked, and the log and clock callbacks may still be called). Clients opened
 * on this engine must be freed first. NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_engine_free(saas_engine *engine);

/**
 * Run one reaper sweep now: destroy every sandbox whose lifetime has ended or
 * whose account has no credit left, and bill it. On an engine opened with
 * SAAS_ENGINE_NO_REAPER it also makes one pooled VM if a pool is short (a
 * failure there is logged and retried later, not returned).
 *
 * @param destroyed [out, optional] how many sandboxes were destroyed.
 * @param engine    the engine.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_EBACKEND.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_sweep(unsigned int *destroyed, saas_engine *engine);

/**
 * What an engine offers, for anyone to see (a service card). Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_engine_info {
	size_t nsizes;
	saas_size **sizes;                /**< Every size class with its price. */
	char *default_image;
	char *preview_url;                /**< The preview URL template ("{name}"; maybe "{port}", "{id}"). */
	int64_t new_account_credit_usd_micro;
	char *driver;                     /**< The VM driver's name, or "" for a store-only engine. */
	char *default_size;               /**< The size a create that names none gets. */
	saas_limits *limits;              /**< The limits every account has unless set for it. */
	/** Since 0.2.0: a paused sandbox's price per GiB-hour of its size (saas_size_paused_usd_micro_per_hour()). */
	int64_t paused_usd_micro_per_gib_hour;
} saas_engine_info;

/**
 * The engine's sizes, prices, limits and defaults. Needs no account.
 *
 * @param out [out] free with saas_engine_info_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_info_get(saas_engine_info **out, saas_engine *engine);

/**
 * Free engine info; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_engine_info_free(saas_engine_info *info);

/**
 * One warm pool, as saas_engine_stats reports it. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_engine_pool {
	char *size;                     /**< The size class. */
	char *image;                    /**< The image its VMs run. */
	unsigned int target;            /**< How many VMs it holds when full. */
	unsigned int ready;             /**< VMs ready to be claimed now. */
	unsigned int creating;          /**< 1 while the refill is making one for this pool, else 0. */
	uint64_t claims;                /**< Creates served from it since the engine opened. */
	uint64_t failures;              /**< Refill creates that failed since the engine opened. */
} saas_engine_pool;

/**
 * The state of a template (a VM booted once and saved, which sandboxes are
 * cloned from). Values are append-only.
 *
 * Since: 0.2.0
 */
typedef enum {
	SAAS_TEMPLATE_BUILDING = 1,     /**< Being built; sandboxes of its shape boot cold meanwhile. */
	SAAS_TEMPLATE_READY = 2,        /**< Sandboxes of its shape are cloned from it. */
	SAAS_TEMPLATE_FAILED = 3        /**< Its build failed; tried again later, sandboxes boot cold. */
} saas_template_state;

/**
 * "building", "ready", "failed"; "unknown" otherwise. Static text.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(const char *) saas_template_state_name(int state);

/**
 * One template of the driver, as saas_engine_stats reports it. Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_engine_template {
	char *image;                    /**< The image it boots. */
	char *size;                     /**< The size class of its shape, or "" when no size has it. */
	unsigned int vcpus;
	unsigned int memory_mb;
	unsigned int disk_gb;
	int state;                      /**< saas_template_state */
	int64_t state_bytes;            /**< What its saved memory and device state take on storage; 0 unless ready. */
} saas_engine_template;

/**
 * Sandboxes across every account, by state, at one moment. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_engine_stats {
	unsigned int creating;
	unsigned int ready;
	unsigned int accounts_with_sandboxes;  /**< Accounts with at least one live sandbox. */
	/* Warm pools: pooled VMs are not sandboxes and are counted only here. */
	unsigned int pool_ready;        /**< Pooled VMs ready to be claimed, every pool together. */
	unsigned int pool_target;       /**< What every pool together holds when full. */
	uint64_t pool_claims;           /**< Creates served from a pool since the engine opened. */
	size_t npools;                  /**< Entries in `pools`; 0 when none is configured. */
	saas_engine_pool **pools;       /**< Each pool, in the order the spec named them. */
	/* Since 0.2.0: the driver's templates (none from a driver that makes none, or a store-only engine). */
	size_t ntemplates;              /**< Entries in `templates`. */
	saas_engine_template **templates; /**< By image, then shape. */
} saas_engine_stats;

/**
 * Count live sandboxes by state, across every account, the warm pools and the
 * driver's templates (for metrics and the operator's view of the host).
 *
 * @param out [out] free with saas_engine_stats_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_stats_get(saas_engine_stats **out, saas_engine *engine);

/**
 * Free engine stats; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_engine_stats_free(saas_engine_stats *stats);

/**
 * Open a TCP connection to an exposed port of any account's sandbox: what a
 * preview URL's proxy does once saas_engine_preview_find() has turned the URL's
 * name into a sandbox and port. It needs no key: the caller holds the engine,
 * and must not let anyone name a sandbox id and port directly (ids are not
 * secrets; names are). Unexposed ports and sandboxes that are not ready are not found.
 *
 * @param fd   [out] a connected stream socket the caller reads, writes and close()s.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND (no such sandbox, not ready, or the port is not
 *         exposed); SAAS_EBACKEND (nothing listens there); SAAS_ENOTSUP (store-only engine).
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_port_connect(int *fd, saas_engine *engine, const char *sandbox_id, unsigned int port);

/**
 * Find an exposure by its name: what a preview URL's proxy does with the host
 * label it was asked for. The name is the capability; no key is needed. An
 * exposure of a sandbox that is not ready (or has expired) is not found.
 *
 * @param sandbox_id [out] the sandbox it belongs to.
 * @param port       [out] the port it exposes; open it with saas_engine_port_connect().
 * @param name       a name from a preview URL (see SAAS_PREVIEW_NAME_LEN).
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND (no such exposure, or its sandbox is not ready);
 *         SAAS_ESTORE. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_engine_preview_find(char sandbox_id[SAAS_ID_MAX + 1], unsigned int *port, saas_engine *engine,
                                          const char *name);

/**
 * The account a sandbox belongs to, by the sandbox's id alone: one store
 * lookup, for a front end that holds the engine and must find whose a
 * sandbox is before it has that account's client (the E2B gateway checks a
 * signed file URL that names a sandbox against its owner's token). It needs
 * no key, and says nothing else of the sandbox: open the owner's client
 * (saas_client_open_account()) to read it. Ids are not secrets, owners are
 * the tenancy's: never answer a request with what this returns.
 *
 * @param account_id [out] the owner's id; "" on error.
 * @param engine     the engine.
 * @param sandbox_id the sandbox.
 * @param flags      0.
 * @return SAAS_OK (destroyed sandboxes too: their record keeps the owner);
 *         SAAS_EINVAL (a NULL argument, an id that is missing, too long or not
 *         printable, an unknown flag); SAAS_ENOTFOUND (no such sandbox);
 *         SAAS_ESTORE. Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_engine_sandbox_owner(char account_id[SAAS_ID_MAX + 1], saas_engine *engine,
                                           const char *sandbox_id, unsigned int flags);

SAAS_END_DECLS

#endif
