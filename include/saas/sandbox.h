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
 * fails goes straight from creating to destroyed. Values are append-only.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_SANDBOX_CREATING = 1,
	SAAS_SANDBOX_READY = 2,
	SAAS_SANDBOX_DESTROYED = 3
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
	SAAS_END_LOST = 5        /**< The VM was gone when the engine reconciled. */
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

/** Version of saas_create_options this header describes. */
#define SAAS_CREATE_OPTIONS_VERSION 1

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
} saas_create_options;

#define SAAS_CREATE_OPTIONS_INIT { SAAS_CREATE_OPTIONS_VERSION, NULL, NULL, 0, NULL }

/**
 * Create a sandbox: a fresh VM with its own kernel, never used by anyone before.
 * Returns once commands can run in it. Billing starts when it is ready.
 *
 * @param out     [out, optional] the sandbox; free with saas_sandbox_free().
 * @param client  the client.
 * @param options options, or NULL for the defaults.
 * @param flags   0.
 * @return SAAS_OK; SAAS_EINVAL (unknown size, image or network policy, timeout
 *         out of range, bad version or flag); SAAS_ECREDIT (the balance cannot pay
 *         for the minimum); SAAS_ELIMIT (too many sandboxes); SAAS_ENOTSUP (the
 *         driver cannot give the network policy asked for, e.g. "internet" where
 *         its host guard is not installed; nothing is billed, and no sandbox is
 *         listed: a request the driver refuses leaves no row); SAAS_EBACKEND (the
 *         VM did not come up; nothing is left behind and nothing is billed; the
 *         list shows it "failed"); SAAS_EBUSY (the server's state filesystem is
 *         under its free-space threshold: try again later); SAAS_ESTORE; SAAS_ENOMEM.
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

/** List filters for saas_sandbox_list_get(). */
#define SAAS_LIST_ACTIVE (1u << 0)     /**< Only sandboxes not destroyed. */
#define SAAS_LIST_DESTROYED (1u << 1)  /**< Only destroyed sandboxes. */

/**
 * The account's sandboxes, newest first.
 *
 * @param cursor a next_cursor from a previous page, or NULL for the first.
 * @param limit  page size, 1..1000; 0 means 100.
 * @param flags  SAAS_LIST_* (at most one).
 * @param out    [out] free with saas_sandbox_list_free().
 * @return SAAS_OK, SAAS_EINVAL (bad cursor, limit or flags), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sandbox_list_get(saas_sandbox_list **out, saas_client *client, const char *cursor, unsigned int limit, unsigned int flags);

/**
 * Push a sandbox's expiry out by `seconds` (from its current expiry). The new
 * lifetime, counted from now, may not pass the account's maximum timeout.
 *
 * @param out   [out, optional] the sandbox as extended; free with saas_sandbox_free().
 * @param flags 0.
 * @return SAAS_OK, SAAS_EINVAL (seconds <= 0, or past the maximum: as a create's
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
 * Name of a status ("creating", "ready", "destroyed"); "unknown" otherwise. Static.
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
