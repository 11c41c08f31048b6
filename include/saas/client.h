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
 */
SAAS_EXTERN(int) saas_client_open_local(saas_client **out, saas_engine *engine, const char *api_key, unsigned int flags) SAAS_WARN_UNUSED;

/**
 * The id of the account the client is bound to.
 *
 * @return a string owned by the client, valid until saas_client_free(); NULL if client is NULL.
 */
SAAS_EXTERN(const char *) saas_client_account_id(const saas_client *client);

/** Release a client; sandboxes are not touched. NULL is ignored. */
SAAS_EXTERN(void) saas_client_free(saas_client *client);

SAAS_END_DECLS

#endif
