/*
 * libsaas: clients, one account's view of a sandbox service.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_CLIENT_H
#define SAAS_CLIENT_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * Open a client on a local engine, bound to the account that owns `api_key`.
 *
 * Every sandbox operation goes through a client; the engine enforces tenancy,
 * so another account's sandboxes and executions are simply not found.
 *
 * @param out     [out] the client; free with saas_client_free() before the engine.
 * @param engine  an open engine (not one opened SAAS_ENGINE_STORE_ONLY for sandbox calls).
 * @param api_key an "aas_sk_..." key.
 * @param flags   0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EAUTH (unknown or revoked key), SAAS_ESTORE, SAAS_ENOMEM.
 * Thread-safe; the client may be shared across threads.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_client_open_local(saas_client **out, saas_engine *engine, const char *api_key, unsigned int flags) SAAS_WARN_UNUSED;

/** Version of saas_remote_options this header describes. */
#define SAAS_REMOTE_OPTIONS_VERSION 1

/**
 * Options for saas_client_open_remote(). Initialise with SAAS_REMOTE_OPTIONS_INIT
 * and change only what you need; a zero keeps the default.
 *
 * Since: 0.1.0
 */
typedef struct saas_remote_options {
	unsigned int version;            /**< SAAS_REMOTE_OPTIONS_VERSION */
	unsigned int connect_timeout_ms; /**< Time to connect (TCP and TLS); 0: 10 000. */
	/**
	 * Total time of one request; 0: 300 000 (five minutes). An exec may take
	 * longer: it waits up to its own timeout plus a minute. A file transfer is
	 * not bounded in total, but fails once no byte moved for this long.
	 */
	unsigned int timeout_ms;
	/** Verify the server's TLS certificate and host name (https). Non-zero by default; 0 turns checks off. */
	int verify_tls;
	/** A PEM file of CA certificates to trust instead of the system's, or NULL. Copied during the call. */
	const char *ca_file;
	/**
	 * How many times an idempotent request (GET, DELETE, PUT of a file) is sent
	 * again after a network failure or a 503, waiting 100 ms, 200 ms, 400 ms ...
	 * in between; at most 10. A 503 with a Retry-After is not sent again: it
	 * fails SAAS_EBUSY with saas_error_last()->retry_after_ms, for the caller
	 * to wait. A file transfer is retried only if no byte of it had moved yet.
	 * Non-idempotent requests (create, exec, extend) are never repeated.
	 */
	unsigned int retries;
	/** The User-Agent header; NULL: "libsaas/VERSION". Copied during the call. */
	const char *user_agent;
} saas_remote_options;

#define SAAS_REMOTE_OPTIONS_INIT { SAAS_REMOTE_OPTIONS_VERSION, 10000, 300000, 1, NULL, 2, NULL }

/**
 * Open a client on a remote aas-server, over its REST API (HTTP or HTTPS),
 * bound to the account that owns `api_key`.
 *
 * The remote client answers the same calls as a local one, with the same
 * results and status codes; only saas_port_connect() is not supported
 * (SAAS_ENOTSUP): reach a remote sandbox's ports through their preview URLs.
 * A failure the server reports keeps its code (its body's error code, e.g.
 * "not_found" gives SAAS_ENOTFOUND) and its message, with error class
 * SAAS_ERRCLASS_HTTP and the HTTP status as backend_code. See docs/api.md,
 * "Remote clients".
 *
 * The key is checked once here (GET /v1/account), so a wrong key fails at
 * open, as it does locally.
 *
 * @param out      [out] the client; free with saas_client_free().
 * @param base_url the server's origin only, "http://host:port" or "https://host";
 *                 the client adds "/v1" itself (a path such as "/v1" is refused).
 * @param api_key  an "aas_sk_..." key.
 * @param options  options, or NULL for the defaults.
 * @param flags    0.
 * @return SAAS_OK; SAAS_EINVAL (bad URL, options version or flag); SAAS_EAUTH
 *         (missing, unknown or revoked key); SAAS_ENETWORK (the server could not
 *         be reached; the message is curl's); SAAS_EPROTOCOL (the answer was not
 *         the API's); SAAS_ENOTSUP (libsaas was built without SAAS_WITH_REMOTE);
 *         SAAS_ENOMEM.
 * Thread-safe; the client may be shared across threads (it keeps a small,
 * locked pool of connections, reused across calls).
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_client_open_remote(saas_client **out, const char *base_url, const char *api_key,
                                         const saas_remote_options *options, unsigned int flags) SAAS_WARN_UNUSED;

/**
 * The id of the account the client is bound to.
 *
 * @return a string owned by the client, valid until saas_client_free(); NULL if client is NULL.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_client_account_id(const saas_client *client);

/**
 * Release a client; sandboxes are not touched. NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_client_free(saas_client *client);

SAAS_END_DECLS

#endif
