/*
 * libsaas: VM hosts, the machines running libvirtd that an engine places
 * sandboxes on when it outgrows one machine (docs/operations.md, "Many VM
 * hosts"). Administrative calls, like the account calls of engine.h: they
 * work on a store-only engine too, beside running servers, which see a change
 * within one heartbeat.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_HOSTS_H
#define SAAS_HOSTS_H

#include "common.h"
#include "engine.h"
#include "sandbox.h"

SAAS_BEGIN_DECLS

/**
 * The states of a VM host. Values are append-only.
 *
 * Since: 0.2.0
 */
typedef enum {
	SAAS_HOST_ACTIVE = 0,      /**< Takes new sandboxes. */
	SAAS_HOST_DRAINING = 1,    /**< Takes none; the sandboxes on it live out their time. */
	SAAS_HOST_LOST = 2         /**< Stopped answering past the grace period; its sandboxes were closed. */
} saas_host_state;

/**
 * "active", "draining", "lost"; "unknown" otherwise. Static text.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(const char *) saas_host_state_name(int state);

/** Default of saas_host_options.cpu_overcommit_milli: 4 vCPUs placed per host CPU (sandboxes mostly idle). */
#define SAAS_HOST_CPU_OVERCOMMIT_DEFAULT 4000
/** Default of saas_host_options.mem_overcommit_milli: none (a host out of memory kills guests). */
#define SAAS_HOST_MEM_OVERCOMMIT_DEFAULT 1000
/** The largest overcommit ratio either field may have: 64 (64000 thousandths). */
#define SAAS_HOST_OVERCOMMIT_MAX 64000

/**
 * Accept a `qemu+tcp://` URI in saas_host_add(). libvirt's TCP transport is
 * neither encrypted nor authenticated: anyone who reaches the port owns the
 * host. For tests on a private network only; use qemu+ssh or qemu+tls.
 */
#define SAAS_HOST_ALLOW_TCP (1u << 0)

/**
 * Accept a URI whose query turns off the check of the host's identity in
 * saas_host_add(): libvirt's `no_verify=1` (the TLS server's certificate is not
 * checked) or `known_hosts_verify=ignore` (any SSH host key is taken). Whoever
 * sits between the engine and the host can then pose as it. For tests on a
 * private network only.
 *
 * Since: 0.2.0
 */
#define SAAS_HOST_ALLOW_UNVERIFIED (1u << 1)

/** Version of saas_host_options this header describes. */
#define SAAS_HOST_OPTIONS_VERSION 1

/**
 * How a host is placed on. Initialise with SAAS_HOST_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_host_options {
	unsigned int version;                 /**< SAAS_HOST_OPTIONS_VERSION */
	/**
	 * vCPUs of sandboxes placed per host CPU, in thousandths (1000: one per
	 * CPU). 0: SAAS_HOST_CPU_OVERCOMMIT_DEFAULT. 100 to SAAS_HOST_OVERCOMMIT_MAX.
	 */
	unsigned int cpu_overcommit_milli;
	/**
	 * Sandbox memory placed per MiB of host memory, in thousandths. 0:
	 * SAAS_HOST_MEM_OVERCOMMIT_DEFAULT. 100 to SAAS_HOST_OVERCOMMIT_MAX.
	 */
	unsigned int mem_overcommit_milli;
} saas_host_options;

#define SAAS_HOST_OPTIONS_INIT { SAAS_HOST_OPTIONS_VERSION, 0, 0 }

/**
 * A VM host as the registry and the heartbeats see it. Library-allocated;
 * fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_host {
	char *id;                             /**< "host-..." */
	char *name;                           /**< One DNS label, unique. */
	char *uri;                            /**< The libvirt URI every engine reaches it by. */
	char *address;                        /**< The IP its guests' SSH forwards listen on. */
	int state;                            /**< saas_host_state */
	unsigned int cpu_overcommit_milli;
	unsigned int mem_overcommit_milli;
	unsigned int cpus;                    /**< As it last reported; 0: never reached. */
	uint64_t memory_mb;                   /**< As it last reported. */
	unsigned int vcpus_capacity;          /**< cpus x the CPU overcommit: what placement fills up to. */
	uint64_t memory_mb_capacity;          /**< memory_mb x the memory overcommit. */
	unsigned int sandboxes;               /**< Sandboxes not destroyed on it (paused ones keep their place). */
	unsigned int vcpus_used;              /**< Their vCPUs. */
	uint64_t memory_mb_used;              /**< Their memory. */
	int64_t created_at_ms;
	int64_t last_seen_ms;                 /**< The last time any engine reached it; 0: never. */
	int64_t state_at_ms;                  /**< When it entered its state. */
	/*
	 * Since 0.2.0, appended (issue #35): what this engine keeps on it beside
	 * the sandboxes. Other servers' pooled VMs are theirs to report.
	 */
	unsigned int pool_vms;                /**< This engine's pooled VMs on it, ready or being made. */
	size_t ntemplates;                    /**< Entries in `templates`. */
	/**
	 * Its templates, as this engine's driver there reports them (by image,
	 * then shape; engine.h's type): none from a host this engine has not
	 * reached yet, or from saas_host_list_get's callers that asked for none.
	 */
	saas_engine_template **templates;
} saas_host;

/**
 * A list of hosts; library-allocated.
 *
 * Since: 0.2.0
 */
typedef struct saas_host_list {
	size_t count;
	saas_host **items;
} saas_host_list;

/**
 * Register a VM host. It takes sandboxes once an engine has reached it
 * (within one heartbeat of every running engine).
 *
 * @param out     [out, optional] the host; free with saas_host_free().
 * @param engine  the engine (a store-only one will do).
 * @param name    one DNS label: 1 to 63 of [a-z0-9-], not starting or ending with '-'.
 * @param uri     a libvirt URI of scheme qemu+ssh, qemu+libssh, qemu+tls, or qemu+unix
 *                with socket=/PATH (a libvirtd on the engine's own machine: qemu:// and
 *                qemu+unix without the socket are refused, since a process holding the
 *                embedded driver cannot reach a daemon by them), or qemu+tcp with
 *                SAAS_HOST_ALLOW_TCP; at most 1023 bytes, no spaces, commas, quotes
 *                or backslashes (percent-encode them). A query that turns off the check of
 *                the host's identity (no_verify not 0, known_hosts_verify=ignore or auto)
 *                only with SAAS_HOST_ALLOW_UNVERIFIED.
 * @param address an IPv4 literal: where the engines reach the host's guests (an IPv6
 *                one is refused with a message saying so: the forwards are IPv4).
 * @param options overcommit ratios, or NULL for the defaults.
 * @param flags   0, or SAAS_HOST_ALLOW_TCP and/or SAAS_HOST_ALLOW_UNVERIFIED.
 * @return SAAS_OK, SAAS_EINVAL (the message names the bad input), SAAS_EEXISTS (the
 *         name is taken), SAAS_ESTORE, SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_add(saas_host **out, saas_engine *engine, const char *name, const char *uri,
                               const char *address, const saas_host_options *options, unsigned int flags);

/**
 * Drain a host: it takes no new sandboxes; those on it live out their time.
 * Draining a draining host succeeds.
 *
 * @param id_or_name the host's id or name.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTATE (the host is lost), SAAS_ESTORE.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_drain(saas_engine *engine, const char *id_or_name);

/**
 * Take a draining host back: it takes new sandboxes again. Activating an
 * active host succeeds.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTATE (the host is lost: it
 *         becomes active by itself when it answers again), SAAS_ESTORE.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_activate(saas_engine *engine, const char *id_or_name);

/**
 * Forget a host. Refused while a sandbox not destroyed is on it: drain it
 * and wait for them to end (or destroy them) first.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_EBUSY (sandboxes live on it: the
 *         message says how many), SAAS_ESTORE.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_remove(saas_engine *engine, const char *id_or_name);

/**
 * One host, with what runs on it.
 *
 * @param out [out] free with saas_host_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_get(saas_host **out, saas_engine *engine, const char *id_or_name);

/**
 * Every host, oldest first, with what runs on each. Empty on a single
 * machine (the engine's own driver runs every VM).
 *
 * @param out [out] free with saas_host_list_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_list_get(saas_host_list **out, saas_engine *engine);

/**
 * The sandboxes not destroyed on one host, every account's, newest first:
 * what an operator looks at before draining or removing it. Each is as
 * its row records it (egress counters included: the driver is asked
 * nothing, so a host that does not answer still lists).
 *
 * @param out    [out] free with saas_sandbox_list_free(); its next_cursor is
 *               set when more live there.
 * @param cursor a next_cursor from a previous page, or NULL for the first.
 * @param limit  page size, 1..1000; 0 means 100.
 * @param flags  0.
 * @return SAAS_OK, SAAS_EINVAL (bad cursor, limit or flags), SAAS_ENOTFOUND
 *         (no such host), SAAS_ESTORE, SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_host_sandbox_list_get(saas_sandbox_list **out, saas_engine *engine, const char *id_or_name,
                                            const char *cursor, unsigned int limit, unsigned int flags);

/**
 * Free a host; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_host_free(saas_host *host);

/**
 * Free a host list and its hosts; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_host_list_free(saas_host_list *list);

SAAS_END_DECLS

#endif
