/*
 * Internal: the engine (the local provider). What every provider shares, the
 * client and its operations table, is in client/provider.h.
 */
#ifndef SAAS_CORE_H
#define SAAS_CORE_H

/* lib/remote and lib/client are built with SAAS_OUTSIDE_ENGINE (lib/CMakeLists.txt) so that this holds. */
#ifdef SAAS_OUTSIDE_ENGINE
#error "lib/remote and lib/client include client/provider.h, never the engine's core/core.h"
#endif

#include <pthread.h>
#include <stdbool.h>

#include "client/provider.h"
#include "saas.h"
#include "saas/sys/driver.h"
#include "saas/sys/store.h"
#include "store/list.h"
#include "util/error.h"
#include "util/util.h"

/* How long a create may take before its sandbox counts as expired on top of its lifetime. */
#define SAAS_CREATE_GRACE_S 900

/*
 * Most children of one fork made at once (snapshot.c): each is a VM started
 * from the snapshot, whose domain start and restore are mostly CPU on the
 * host, so more at once than this only share the same cores; the rest wait
 * for a turn. A fork of SAAS_FORK_MAX is two turns.
 */
#define SAAS_FORK_AT_ONCE 5

/*
 * How old a snapshot on a VM host must be before the sweep deletes it when
 * no live sandbox names it. A fork's snapshot is named by no row while its
 * children are made from it (the parent is ready again by then), by any
 * server of the cluster: at most SAAS_FORK_MAX children in turns of
 * SAAS_FORK_AT_ONCE, each a create that counts as failed past
 * SAAS_CREATE_GRACE_S, so two turns of that, doubled for the hosts' and the
 * servers' clocks, which must agree within minutes (NTP). A pause's and a
 * resume's snapshot is named by its row from before it is taken until after
 * it is no longer read.
 */
#define SAAS_HOST_SNAPSHOT_GRACE_MS (4 * SAAS_CREATE_GRACE_S * 1000LL)
/*
 * A create, resume or fork refused for want of room (a host's memory, no VM host with room):
 * when to try again, as saas_error.retry_after_ms and REST's Retry-After.
 * About two hosts' heartbeats (5 s each by default), by which room freed by
 * a sandbox that ended is seen by every server.
 */
#define SAAS__ROOM_RETRY_MS 10000
/*
 * A lease run out this long ago is purged by the sweep (reaper.c's
 * prune_leases, docs/operations.md): nobody holds it, and a taker would
 * find it free all the same; the hour keeps engines' clocks a little apart
 * (and a stalled engine waking up) from mattering. Never a pending
 * "netset:" request, whose row is the request until it is answered.
 */
#define SAAS__LEASE_PURGE_AFTER_MS (3600 * 1000LL)

/*
 * A sandbox whose VM is gone but whose close the store could not record yet
 * (closes.c): recorded by a later sweep, or by the next start's reconcile.
 */
struct saas__pending_close {
	char id[SAAS_ID_MAX + 1];
	int reason;
	int64_t destroyed_at_ms;
	int64_t bill_until_ms;
};

struct saas__closes {
	pthread_mutex_t mu;
	struct saas__pending_close *items;
	size_t count, cap;
	int fd;                        /* STATE/closes.pending, allocated ahead; -1 if it could not be */
};

/* Leases this engine holds in the store (claims.c). */
struct saas__claims {
	char holder[SAAS_STORE_HOLDER_MAX + 1];  /* made at open: "srv-" and 16 random characters */
	char prev[SAAS_STORE_HOLDER_MAX + 1];    /* the state directory's previous holder (dead: we hold its lock) */
	int64_t ttl_ms;
	bool shared;                   /* the store may have other engines (not SQLite): executions hold leases */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t thread;
	bool running, stopping;
	char (*names)[SAAS_STORE_LEASE_NAME_MAX + 1]; /* renewed with the server's lease, under mu */
	size_t count, cap;
};

/*
 * The VM hosts this engine reaches (hosts.c): one driver context each,
 * opened on first use and closed only when the engine is freed, so that a
 * context handed out by saas__vm_driver stays valid however the set changes.
 */
struct saas__vmhost;

struct saas__beat;

struct saas__hosts {
	pthread_mutex_t mu;            /* the table; never held across a driver or store call */
	pthread_mutex_t open_mu;       /* one driver open at a time */
	struct saas__vmhost **items;
	size_t count, cap;
	bool any;                      /* hosts are registered (at the last refresh): new sandboxes go to them */
	unsigned int heartbeat_ms;
	unsigned int grace_ms;
	pthread_t thread;
	bool running;
	/*
	 * The beats in flight, each in a thread of its own (hosts.c): a host that
	 * does not answer holds up no other host's beat. Under mu; beat_cond
	 * says one ended.
	 */
	struct saas__beat *beats;
	pthread_cond_t beat_cond;
};

struct saas_engine {
	char *state_dir;
	char *default_image;
	char *preview_url;
	saas_limits limits;            /* every account's, unless an operator set its own (limits.c) */
	saas_size *sizes;
	size_t nsizes;
	const saas_size *default_size; /* one of `sizes`: what a create that names none gets */
	int64_t new_account_credit;
	unsigned int flags;

	const saas_store *store;
	void *store_ctx;
	const saas_driver *driver;     /* NULL when opened store-only */
	void *driver_ctx;              /* the engine's own machine: sandboxes whose host_id is "" */
	char *driver_config;           /* as given; each VM host's context gets it with its uri and address */
	struct saas__hosts hosts;

	saas_clock_fn clock;
	void *clock_userdata;
	saas_log_fn log;
	void *log_userdata;
	int log_level;

	int lock_fd;                   /* flock on STATE/engine.lock; -1 store-only */
	uint64_t min_free_bytes;       /* creates are refused with less free on the state filesystem */
	unsigned int disk_budget_gb;   /* 0: a share of the overlays' filesystem (SAAS_ENGINE_DISK_BUDGET_PCT) */
	int64_t paused_price;          /* micro-dollars per GiB-hour of a paused sandbox's size (0: free) */
	unsigned int mcp_sessions_max; /* MCP sessions the store keeps; past it the least recently used ends */
	unsigned int max_transfers;    /* file transfers under way at once per account */
	uint64_t pool_disk_gb;         /* the warm pools' disk at full count, held against the budget */
	unsigned int stop_wait_ms;     /* how long saas_engine_free waits for a pool create in flight */

	struct saas__closes closes;
	struct saas__claims claims;

	/* The reaper. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t reaper;
	bool reaper_running;
	bool stopping;
	unsigned int reaper_interval_ms;
	unsigned int sweeps;
	bool reaping;                  /* this engine held the reaper's lease at its last sweep */
	int64_t reaper_lease_at_ms;    /* when it last took it */

	/* Warm pools (pool.c); NULL when none is configured. */
	struct saas__pools *pools;

	pthread_mutex_t tenants_mu;
	struct saas__tenant *tenants;  /* per-account counters, under tenants_mu */

	/* Serialises network changes, so that the driver and the store end up with the same last one. */
	pthread_mutex_t network_mu;

	/* Executions running now (exec_live.c), newest first, under live_mu. */
	pthread_mutex_t live_mu;
	struct saas__live *lives;

	/* Background executions still running; engine_free waits for them. */
	unsigned int background;
	int cancel;                    /* set atomically when the engine shuts down */
	int abandon;                   /* atomic: saas_engine_stop or free began; the drivers' saas_driver_env.stopping */

	/* Samples of the running sandboxes (metrics.c). */
	struct saas__metrics *metrics;
};

extern const struct saas__client_ops saas__local_ops;

/* engine.c */
int64_t saas__engine_now(saas_engine *e);
void saas__log(saas_engine *e, int level, const char *fmt, ...) SAAS_PRINTF(3, 4);
const saas_size *saas__engine_size(saas_engine *e, const char *name);
int saas__engine_need_driver(saas_engine *e);
/*
 * Room for a new VM of need_gb of disk: is the state filesystem (and the
 * driver's overlay directory) above the free-space threshold, and do the
 * live sandboxes and the pools leave need_gb of the disk budget? SAAS_EBUSY
 * saying which is short.
 */
int saas__engine_room(saas_engine *e, unsigned int need_gb);
/* The end of saas_engine_free: driver, store, lock, memory. Also run by an abandoned pool refill. */
void saas__engine_release(saas_engine *e);
/* The public form of the engine's sizes: `n` pointers to deep copies. */
int saas__sizes_public(saas_size ***out, size_t *nout, const saas_size *sizes, size_t n);


/* billing.c */
int64_t saas__billing_end(const saas_store_sandbox *sb, int64_t now_ms);
/* Whole seconds billed (compute) up to the billing end. */
int64_t saas__billed_seconds(const saas_store_sandbox *sb, int64_t now_ms);
/* Whole seconds run and paused from ready up to t (t at most the billing end). */
void saas__billed_split(const saas_store_sandbox *sb, int64_t t, int64_t *run_s, int64_t *paused_s);
/* What sb has cost up to t (at most its billing end): compute and paused, each rounded down once. */
int64_t saas__cost_at(const saas_store_sandbox *sb, int64_t t);
int64_t saas__accrued(const saas_store_sandbox *sb, int64_t now_ms);
int saas__account_live_balance(saas_engine *e, const char *account_id, int64_t now_ms, int64_t *balance,
                               int64_t *spent, int64_t *credit, unsigned int *live);
/*
 * Given a balance and an account's live sandboxes, the first second at which
 * what they accrued reaches the balance, or -1 if it has not by now_ms.
 */
int64_t saas__exhausted_at(int64_t balance, const saas_store_sandbox *live, size_t n, int64_t now_ms);

int saas__local_account(saas_client *c, saas_account_info **out);
int saas__local_usage(saas_client *c, int64_t from_ms, int64_t to_ms, saas_usage **out);

/* sandbox.c */
int saas__sandbox_get_owned(saas_client *c, const char *id, saas_store_sandbox *out);
/* What closing sb billed up to bill_until_ms costs (never past its expiry). */
int64_t saas__close_cost(const saas_store_sandbox *sb, int64_t bill_until_ms);
/*
 * Close sb's row. if_expires_at_ms > 0: only if its expiry is still that
 * (SAAS_ESTATE otherwise: it was extended or made ready since it was read).
 */
int saas__sandbox_close(saas_engine *e, const saas_store_sandbox *sb, int reason, int64_t destroyed_at_ms,
                        int64_t bill_until_ms, int64_t if_expires_at_ms);
int saas__sandbox_public(saas_engine *e, const saas_store_sandbox *sb, saas_sandbox **out);
/*
 * The same with the row's egress counts, not read from the driver, which for
 * the libvirt driver runs nft (tens to hundreds of ms under load): for a
 * sandbox whose VM has just started (a create, a claim, a fork's child, a
 * resume), where the count is the row's anyway, and for a get that asks for
 * the recorded counts (SAAS_GET_RECORDED).
 */
int saas__sandbox_public_new(saas_engine *e, const saas_store_sandbox *sb, saas_sandbox **out);
int saas__sandbox_ready(saas_client *c, const char *id, saas_store_sandbox *out);
/*
 * A new row for an account's sandbox of this size and image, paused at
 * paused_price per GiB-hour (the engine's now: the row keeps it); the
 * caller sets times and status.
 */
void saas__row_init(saas_store_sandbox *row, const char *id, const char *account_id, const saas_size *size,
                    const char *image, int status, int64_t created_at_ms, int network_mode, int64_t paused_price);
/* The store refuses the account's last place with a bare SAAS_ELIMIT; name the limit for the caller. */
int saas__live_limit(int rc, unsigned int max);
/* Store a new sandbox's rules; if that fails, its row goes (no VM was made yet). */
int saas__store_rules(saas_engine *e, const saas_store_sandbox *row, const struct saas__network *net);

/* snapshot.c: snapshots (driver version 4): pause, resume, fork */
int saas__local_sandbox_fork(saas_client *c, const char *id, unsigned int count, int64_t timeout_s,
                             const struct saas__network *net, saas_sandbox_list **out);
int saas__local_sandbox_pause(saas_client *c, const char *id, saas_sandbox **out);
int saas__local_sandbox_resume(saas_client *c, const char *id, saas_sandbox **out);
/* A list cursor "<time_ms>.<id>" (sandbox.c): SAAS_EINVAL if it is not one. */
int saas__list_cursor_parse(const char *cursor, int64_t *at_ms, char *id, size_t idsize);
int saas__local_execution_list(saas_client *c, const char *sandbox_id, const char *cursor, unsigned int limit,
                               saas_execution_list **out);
/* Is the driver able to snapshot (version 4, every snapshot slot)? */
bool saas__can_snapshot(const saas_engine *e);
/* Delete a snapshot, logging a failure (reconcile deletes it later). */
void saas__snapshot_drop(saas_engine *e, const char *host_id, const char *snap);
/* reconcile: paused, pausing and resuming rows against the driver's snapshots; unowned snapshots go. */
void saas__snapshots_reconcile(saas_engine *e, saas_store_sandbox *rows, size_t n, int64_t last_known);

/* The local provider's operations (client.c holds the table). */
int saas__local_sandbox_create(saas_client *c, const saas_create_options *o, const struct saas__network *net,
                               saas_sandbox **out);
int saas__local_sandbox_get(saas_client *c, const char *id, unsigned int flags, saas_sandbox **out);
int saas__local_sandbox_list(saas_client *c, const char *cursor, unsigned int limit, const char *const *metadata,
                             unsigned int flags, saas_sandbox_list **out);
/*
 * A page of the sandboxes f selects (its limit and cursor set here), newest
 * first, as saas_sandbox_list_get gives them (flags: its SAAS_LIST_*).
 */
int saas__sandbox_page(saas_engine *e, saas_store_filter *f, const char *cursor, unsigned int limit,
                       unsigned int flags, saas_sandbox_list **out);
/*
 * Append the templates of the driver opened as ctx to *items (*n of them),
 * by shape (engine.c says what a driver that cannot list them gives);
 * free them with saas__templates_free.
 */
int saas__templates_read(saas_engine *e, void *ctx, saas_engine_template ***items, size_t *n);
void saas__templates_free(saas_engine_template **items, size_t n);
int saas__local_sandbox_extend(saas_client *c, const char *id, int64_t seconds, unsigned int flags,
                               saas_sandbox **out);
/*
 * Pause a ready sandbox read as `row` (tenancy checked by the caller, or the
 * reaper's): *row follows. One that pauses on timeout then keeps for its
 * account's max_timeout_s from now.
 */
int saas__sandbox_pause_row(saas_engine *e, saas_store_sandbox *row, saas_sandbox **out);
/* A sandbox's metadata and default environment, "KEY=VALUE" sorted, each list empty rather than NULL. */
int saas__sandbox_values(saas_engine *e, const char *id, char ***metadata, char ***envs);
/*
 * The environment of a command or terminal in sandbox id: the sandbox's own
 * less the names `own` sets, then `own` (exec.c). *out borrows from *defaults
 * and own; free *out with free() and *defaults with saas__rules_free().
 */
int saas__env_merge(saas_engine *e, const char *id, const char *const *own, char ***defaults, const char ***out);
int saas__local_sandbox_destroy(saas_client *c, const char *id, saas_sandbox **out);
int saas__local_sandbox_network_set(saas_client *c, const char *id, const struct saas__network *net,
                                    saas_sandbox **out);
/* A row's egress as a sandbox reports it (rules from the store, counters from the driver when live, else the row's). */
int saas__sandbox_network_public(saas_engine *e, const saas_store_sandbox *row, bool live, saas_network_info **out);
/* A row's policy as lists: its rules for POLICY (from the store), none (NULL) otherwise. */
int saas__sandbox_rules_get(saas_engine *e, const saas_store_sandbox *row, char ***allow, char ***deny);
/* The mode a VM made without a network gets from the driver. */
int saas__network_default(saas_engine *e);
/*
 * After the driver opened: carry the VM's egress counts over (the driver
 * counts from zero), give it its stored policy again, or end it (reconcile).
 */
void saas__network_reapply(saas_engine *e, saas_store_sandbox *sb);
/*
 * A VM host's guest on a store engines share: its egress is this engine's
 * to serve once the driver holds its channel, and lease "egress:<id>" says
 * so (whatever its mode: its network changes here). saas__egress_let_go:
 * the VM is gone (ended, paused). saas__egress_adopt (the reaper's engine):
 * the ready ones with egress (internet or a policy) whose lease ran out,
 * their server gone, served by this engine from now.
 * saas__egress_requests (every engine's sweep): the changes other servers
 * stored for the guests this engine serves, applied (sandbox_network.c).
 */
void saas__egress_hold(saas_engine *e, const saas_store_sandbox *sb);
void saas__egress_requests(saas_engine *e);
void saas__egress_let_go(saas_engine *e, const char *id);
/*
 * Sandbox id has ended: its request to the server serving its egress
 * ("netset:<id>", another server's change waiting), if one is left, goes.
 */
void saas__netset_forget(saas_engine *e, const char *id);
void saas__egress_adopt(saas_engine *e, const saas_store_sandbox *live, size_t n);
/* Record a sandbox's egress counts as the driver has them now (before its VM goes). */
void saas__network_counts_save(saas_engine *e, const saas_store_sandbox *row);
/* The same for every live sandbox (before the driver closes). */
void saas__network_counts_save_all(saas_engine *e);

/* exec.c */
int saas__local_exec(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                     unsigned int flags, saas_execution **out);
int saas__local_execution_get(saas_client *c, const char *id, saas_execution **out);

/* files.c */
/*
 * A guest path made absolute (files.c): a relative one is under the
 * workspace, for files, commands' and terminals' directories alike; NULL or
 * "" is the workspace. Malloc'd; NULL when out of memory (error set).
 */
char *saas__workspace_path(const char *path);
int saas__local_file_write(saas_client *c, const char *id, const char *path, saas_read_fn reader, void *ud,
                           int64_t size, unsigned int mode);
int saas__local_file_read(saas_client *c, const char *id, const char *path, int64_t max, saas_write_fn writer,
                          void *ud, int64_t *size);
int saas__local_file_list(saas_client *c, const char *id, const char *path, unsigned int depth,
                          unsigned int max_entries, saas_file_list **out);
int saas__local_file_mkdir(saas_client *c, const char *id, const char *path, int *created);
int saas__local_file_remove(saas_client *c, const char *id, const char *path);
int saas__local_file_rename(saas_client *c, const char *id, const char *from, const char *to, unsigned int flags);

/* ports.c */
int saas__local_port_expose(saas_client *c, const char *id, unsigned int port, char **url);
int saas__local_port_connect(saas_client *c, const char *id, unsigned int port, int *fd);
int saas__local_port_unexpose(saas_client *c, const char *id, unsigned int port);
/* The preview URL of an exposure (sandbox.c): the engine's template filled in. NULL when out of memory. */
char *saas__preview_url(saas_engine *e, const saas_store_port *exposure);

/* code.c: code contexts, through the tunnel to the guest's code server */
int saas__local_code_context_create(saas_client *c, const char *id, const saas_code_context_options *o,
                                    saas_code_context **out);
int saas__local_code_context_list(saas_client *c, const char *id, saas_code_context_list **out);
int saas__local_code_context_restart(saas_client *c, const char *id, const char *context_id);
int saas__local_code_context_delete(saas_client *c, const char *id, const char *context_id);
int saas__local_code_run(saas_client *c, const char *id, const char *code, const saas_code_run_options *o,
                         saas_code_execution **out);

/* local.c: the local provider's terminal */
int saas__local_pty_open(saas_client *c, const char *id, const struct saas__pty_req *req, saas_pty **out);

/* reaper.c */
int saas__reconcile(saas_engine *e);
int saas__reaper_start(saas_engine *e);
void saas__reaper_stop(saas_engine *e);
int saas__sweep(saas_engine *e, unsigned int *destroyed);

int saas__orphan_sweep(saas_engine *e);

/* pool.c: warm pools */
/* Check a pool spec against the engine's sizes and default image; keep it unless store-only. */
int saas__pool_setup(saas_engine *e, const char *spec);
/* Start the refill thread (when there are pools). */
int saas__pool_start(saas_engine *e);
/* Destroy the VMs nobody claimed and free the pools (after saas__pool_stop). */
void saas__pool_free(saas_engine *e);
/*
 * Stop the refill thread, waiting at most e->stop_wait_ms for the create it
 * may be making. true: it is still making one, and now owns the rest of the
 * teardown (it destroys that VM, then calls saas__engine_release).
 */
bool saas__pool_stop(saas_engine *e);
/* Engines whose teardown an abandoned refill thread still owns (tests wait for 0). */
extern unsigned int saas__engines_draining;
/* Make one pooled VM if a pool is short and no failure asks to wait: 1 made, 0 nothing to do, or an error. */
int saas__pool_refill(saas_engine *e);
/* Is this VM pooled, or being made for a pool, right now? */
bool saas__pool_owns(saas_engine *e, const char *name);
/*
 * Take a ready VM of (size, image) for a create: 1 and its name, or 0 if the
 * pool has none. The VM stays protected from the orphan sweep until released.
 */
int saas__pool_claim(saas_engine *e, const char *size, const char *image, char name[SAAS_ID_MAX + 1]);
enum {
	SAAS_POOL_CLAIMED,             /* its row is in the store: it is a sandbox now */
	SAAS_POOL_RETURN,              /* the create was refused before handing it out: ready again */
	SAAS_POOL_DROP                 /* it was dead or could not be handed out; the caller destroyed it */
};
void saas__pool_release(saas_engine *e, const char *name, int outcome);
/* Fill the pool fields of stats. */
int saas__pool_stats(saas_engine *e, saas_engine_stats *stats);
/* Is VM name outdated (made from an image build the driver no longer has as current)? False when it cannot tell. */
bool saas__vm_outdated(saas_engine *e, const char *name);
/*
 * Destroy the ready pooled VMs that are outdated (the refill then makes them
 * again from the image's current build); how many went. The refill thread
 * calls it every POOL_CHECK_MS.
 */
unsigned int saas__pool_drop_outdated(saas_engine *e);

/* limits.c */
/* The account's effective limits: the engine's defaults and what an operator set for it. */
int saas__account_limits(saas_engine *e, const char *account_id, saas_limits *out);
/* Count one more running execution, or SAAS_ELIMIT ("max_executions") at `max`. */
int saas__exec_slot_take(saas_engine *e, const char *account_id, unsigned int max);
void saas__exec_slot_release(saas_engine *e, const char *account_id);
unsigned int saas__exec_running(saas_engine *e, const char *account_id);
/* Count one more file transfer under way, or SAAS_ELIMIT ("max_transfers") at e->max_transfers. */
int saas__transfer_slot_take(saas_engine *e, const char *account_id);
void saas__transfer_slot_release(saas_engine *e, const char *account_id);
/* Take one create from the account's bucket, or SAAS_ELIMIT ("creates_per_minute") with the wait. */
int saas__create_token_take(saas_engine *e, const char *account_id, unsigned int per_minute);
void saas__tenants_free(saas_engine *e);

/* closes.c: ending a sandbox whatever the store says */
/* End only if the row's expiry is still sb->expires_at_ms (the reaper's re-check). */
#define SAAS__END_IF_EXPIRY 1u
/*
 * Close sb's row (billed to bill_until_ms) and destroy its VM. When the store
 * cannot record the close, the VM is destroyed all the same and the close is
 * kept for a later sweep: SAAS_OK. SAAS_ESTATE (VM left alone) when
 * SAAS__END_IF_EXPIRY finds a new expiry.
 */
int saas__sandbox_end(saas_engine *e, const saas_store_sandbox *sb, int reason, int64_t destroyed_at_ms,
                      int64_t bill_until_ms, unsigned int flags);
int saas__closes_open(saas_engine *e);
/*
 * End every live sandbox of an account now (reason SAAS_END_DISABLED, billed
 * to now), as the engine that runs them; *ended: how many. The first failure
 * is returned after trying them all: the sweeps end what is left.
 */
int saas__account_sandboxes_end(saas_engine *e, const char *account_id, unsigned int *ended);
void saas__closes_free(saas_engine *e);
/* Try again to record every pending close; returns how many are still pending. */
size_t saas__closes_retry(saas_engine *e);
bool saas__closes_pending(saas_engine *e, const char *id);
/* Show a live row whose close is pending as it will be recorded; true if it was. */
bool saas__closes_view(saas_engine *e, saas_store_sandbox *row);

/* exec_live.c: an execution while it runs (all under the engine's live_mu) */
struct saas__live_stream {
	saas__buf kept;                /* the first max_output bytes: what the record keeps */
	int truncated;
	char *ring;                    /* the last SAAS_EXEC_FOLLOW_WINDOW bytes past `kept`, for followers */
	uint64_t ring_from;            /* the first offset the ring ever held */
	uint64_t total;                /* bytes written to the stream so far */
};

struct saas__live {
	struct saas__live *next;
	saas_engine *engine;
	unsigned int refs;             /* the job's, and each follower's or caller's */
	char id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	char sandbox_id[SAAS_ID_MAX + 1];
	int64_t started_at_ms;
	size_t max;                    /* max_output */
	struct saas__live_stream s[2]; /* stdout, stderr */
	pthread_cond_t cond;           /* output came, or the end */
	bool stdin_open;               /* writes are taken */
	bool in_eof;                   /* the writer closed stdin */
	saas__buf in;                  /* stdin written and not yet taken: bytes from in_off */
	size_t in_off;
	struct {
		int num;
		bool group;
	} sig[8];                      /* signals to send, oldest first */
	size_t nsig;
	bool cancel;                   /* the caller cancelled: kill all it started */
	bool running;                  /* the guest runs it (the driver's started, or handed to an older driver) */
	bool done;
	int status, exit_code;
};

/* Register a running execution (one reference, the job's). */
int saas__live_new(saas_engine *e, const saas_store_execution *rec, size_t max_output, bool stdin_open,
                   struct saas__live **out);
void saas__live_unref(saas_engine *e, struct saas__live *l);
/* Keep a chunk of output and wake the followers. */
void saas__live_output(saas_engine *e, struct saas__live *l, int stream, const void *data, size_t len);
/* The record is written: followers read the rest and the end. */
void saas__live_end(saas_engine *e, struct saas__live *l, const saas_store_execution *rec);
/* saas_driver_exec.started: the guest runs it; followers waiting for that wake (userdata: the live). */
void saas__live_started(void *userdata);
void saas__live_cancel(saas_engine *e, struct saas__live *l);
bool saas__live_cancelled(saas_engine *e, struct saas__live *l);
/* The driver's input and control callbacks (saas_driver_exec), userdata a saas__live. */
long saas__live_input(void *userdata, void *buf, size_t cap);
int saas__live_control(void *userdata, int *group);
/* Does this engine run execution `id` now? */
bool saas__live_here(saas_engine *e, const char *id);
/* A running execution of the client's as it stands: 0 and *out, 1 if none runs, or an error. */
int saas__live_get(saas_client *c, const char *id, saas_execution **out);
int saas__local_execution_stdin(saas_client *c, const char *id, const void *data, size_t len, unsigned int flags);
int saas__local_execution_signal(saas_client *c, const char *id, int signum, unsigned int flags);
int saas__local_execution_cancel(saas_client *c, const char *id);
int saas__local_execution_list_running(saas_client *c, const char *sandbox_id, saas_execution_list **out);
int saas__local_execution_follow(saas_client *c, const char *id, saas_exec_cursor *cur,
                                 const saas_exec_callbacks *cb, unsigned int wait_ms, unsigned int flags,
                                 saas_execution **out);
int saas__local_exec_stream(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                            const saas_exec_callbacks *cb, unsigned int flags, saas_execution **out);

/* claims.c: leases, so that many engines on one store do once-only work once */
/*
 * This engine's holder id, made at open (logged), for leases other modules
 * take: "server:<holder>" is held while the engine runs. Borrowed until the
 * engine is freed.
 */
const char *saas__engine_holder(saas_engine *e);
/* Make the holder id, take the server's lease, forget the state directory's previous holder's. */
int saas__claims_open(saas_engine *e, int64_t ttl_ms);
/* The thread that renews the server's lease and the claims every ttl/3 (engines with background threads). */
int saas__claims_start(saas_engine *e);
/* Renew now (the sweep does it when the engine has no background threads). */
void saas__claims_renew(saas_engine *e);
/* Stop the thread, release every lease held (a clean close); then saas__claims_free. */
void saas__claims_close(saas_engine *e);
void saas__claims_free(saas_engine *e);
/* "KIND:ID" into out; SAAS_EINVAL when too long. */
int saas__claim_name(char out[SAAS_STORE_LEASE_NAME_MAX + 1], const char *kind, const char *id);
/*
 * Take lease `name` for one ttl, and keep renewing it until saas__claim_drop:
 * 1 taken (nobody held it, or its holder's time ran out: what it guarded is
 * ours now), 0 another live holder has it, or an error.
 */
int saas__claim(saas_engine *e, const char *name);
int saas__claim_kind(saas_engine *e, const char *kind, const char *id);
/* Take lease `name` for one ttl, not renewed (the reaper's and reconcile's: their pass renews it). */
int saas__claim_once(saas_engine *e, const char *name);
/* Is `name` one this engine holds and renews (a create or pooled VM of its own)? */
bool saas__claim_mine(saas_engine *e, const char *name);
/* Stop renewing `name` and release it. */
void saas__claim_drop(saas_engine *e, const char *name);
void saas__claim_drop_kind(saas_engine *e, const char *kind, const char *id);
/* saas_driver_env.lease for the drivers this engine opens (userdata: the engine). */
int saas__driver_lease(void *userdata, const char *name, int64_t ttl_ms, int take);
/* What this engine hands a driver it opens: its log, clock, leases and stop flag, with `state_dir` and `config`. */
void saas__driver_env(saas_engine *e, saas_driver_env *env, const char *state_dir, const char *config);
/* Does the engine with this holder id still hold its server lease? (true when the store cannot say) */
bool saas__claims_alive(saas_engine *e, const char *holder);

/* hosts.c: VM hosts (saas/hosts.h) */
/* Read the options and load the registered hosts; nothing is opened yet. */
int saas__hosts_open(saas_engine *e, const saas_engine_options *o);
/* Start the heartbeat thread (full engines with a reaper). */
int saas__hosts_start(saas_engine *e);
void saas__hosts_stop(saas_engine *e);
/* Close every host's driver context and free the table (before the engine's own driver closes). */
void saas__hosts_free(saas_engine *e);
/*
 * The driver context that runs the VMs of host_id ("" or NULL: the engine's
 * own), opened on first use. SAAS_EBACKEND naming the host when it is not
 * registered or cannot be reached. The context stays valid until the engine
 * is freed.
 */
int saas__vm_driver(saas_engine *e, const char *host_id, void **ctx);
/* Are VM hosts registered (new sandboxes are placed on them, not on the engine's own driver)? */
bool saas__hosts_any(saas_engine *e);
/*
 * Insert a new sandbox's row where its VM will run: on the engine's own
 * driver when no host is registered, else on the host with the most memory
 * left (on_host: only that one; "" the engine's own). Sets row->host_id.
 * SAAS_EBUSY when no host has room, SAAS_ELIMIT past max_live (named).
 */
int saas__sandbox_insert_placed(saas_engine *e, saas_store_sandbox *row, unsigned int max_live, const char *on_host);
/*
 * One heartbeat pass: refresh the host set from the store, ask each host what
 * it has (host_seen), mark the ones nobody reached within the grace lost and
 * close their sandboxes, and take back the lost ones that answer again. The
 * heartbeat thread runs it; without one, every sweep does.
 */
void saas__hosts_beat(saas_engine *e);

/* Sandbox rows of a store list, read with saas__store_sandboxes (the caller frees items). */
struct saas__rows {
	saas_store_sandbox *items;
	size_t count;
};
/* reaper.c: destroy the VMs a driver context runs that no row of `live` owns; how many went in *destroyed. */
int saas__orphans_destroy(saas_engine *e, void *ctx, const saas_store_sandbox *live, size_t n, unsigned int *destroyed);

/* metrics.c: samples of running sandboxes over time */
/* Check the options' metrics fields and make the (empty) table. */
int saas__metrics_setup(saas_engine *e, const saas_engine_options *o);
/* The sampling thread (not with SAAS_ENGINE_NO_REAPER, nor for a driver without vm_sample). */
int saas__metrics_start(saas_engine *e);
void saas__metrics_stop(saas_engine *e);
void saas__metrics_free(saas_engine *e);
/* One pass: every sandbox kept sampled once, the histories of those no longer ready dropped. */
int saas__metrics_pass(saas_engine *e);
/* Keep a history for sandbox id from now on (its VM was started by this engine). */
void saas__metrics_track(saas_engine *e, const char *id);
/* How many histories the engine keeps, and the slots of their rings together (tests check the bounds). */
void saas__metrics_held(saas_engine *e, size_t *histories, size_t *slots);
int saas__local_sandbox_metrics(saas_client *c, const char *id, int64_t start_ms, int64_t end_ms,
                                saas_metric_list **out);

/* free.c */
void saas__store_execution_clear(saas_store_execution *x);

/* Warm pools on VM hosts (pool.c, hosts.c) */
/* Like saas__pool_claim; host: the VM host it runs on ("" the engine's own driver). */
int saas__pool_claim_on(saas_engine *e, const char *size, const char *image, char name[SAAS_ID_MAX + 1],
                        char host[SAAS_ID_MAX + 1]);
/* Like saas__vm_outdated, asking the driver context the VM runs in. */
bool saas__vm_outdated_on(saas_engine *e, void *ctx, const char *name);
/* This engine's pooled VMs on VM hosts, one entry each, as placement counts them (saas_store_placement.extra). */
struct saas__pool_use {
	saas_store_host_use *items;
	char (*ids)[SAAS_ID_MAX + 1];  /* items[i].host_id points here */
	size_t count;
};
/* Fill u (every pooled VM on a VM host, and the one being made there, but `except`); free it with saas__pool_use_free. */
int saas__pool_use(saas_engine *e, const char *except, struct saas__pool_use *u);
void saas__pool_use_free(struct saas__pool_use *u);
/*
 * The heartbeat's host list (n rows, as the store has them): destroy the
 * pooled VMs on hosts that drain or were removed, and the engine's own ones
 * when hosts exist; forget those on lost hosts (their return destroys them).
 */
void saas__pool_hosts_check(saas_engine *e, const saas_store_host *hosts, size_t n);
/*
 * The VM host a new pooled VM of this shape goes on: active, seen lately,
 * with room for it beside its sandboxes and this engine's pooled VMs there,
 * the one with the most memory left. 1 and its id, 0 when none has room, or
 * an error. A read, not a reservation: only sandbox_place is atomic.
 */
int saas__host_pick(saas_engine *e, unsigned int vcpus, unsigned int memory_mb, char host_id[SAAS_ID_MAX + 1]);
/* The largest size (by memory) this engine keeps pooled VMs of; NULL if none. */
const saas_size *saas__pool_largest(saas_engine *e);
/* The driver context of host_id ("": the engine's own) if it is open already: true and *ctx; never opens one. */
bool saas__vm_driver_opened(saas_engine *e, const char *host_id, void **ctx);

#endif
