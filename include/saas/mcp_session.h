/*
 * libsaas: MCP sessions (Streamable HTTP's Mcp-Session-Id), kept in the store
 * so that every server on it knows them. Like the calls of users.h, these are
 * calls on the engine and may be used on a store-only engine. Thread-safe.
 * Included by users.h.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_MCP_SESSION_H
#define SAAS_MCP_SESSION_H

#include "common.h"

SAAS_BEGIN_DECLS

/** Longest MCP protocol version an MCP session records ("2025-06-18" is 10). */
#define SAAS_MCP_VERSION_MAX 15
/** Length of an MCP session id: hexadecimal digits. */
#define SAAS_MCP_SESSION_ID_LEN 32

/**
 * Start an MCP session (Streamable HTTP's Mcp-Session-Id) that every server
 * on the engine's store knows: an id of SAAS_MCP_SESSION_ID_LEN random hex
 * digits, returned once; only its SHA-256 is stored, with `version`, the
 * protocol version the client and server agreed on.
 *
 * @param id_out  [out] the session id; free with saas_free().
 * @param version the agreed protocol version (1 to SAAS_MCP_VERSION_MAX printable bytes).
 * @param flags   0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE, SAAS_EIO (no randomness), SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_mcp_session_create(char **id_out, saas_engine *engine, const char *version, unsigned int flags);

/**
 * Use an MCP session: if it exists and was used within the last `idle_ms`,
 * its last use becomes now and its protocol version is returned.
 *
 * @param version_out [out] its protocol version; free with saas_free().
 * @param id          as saas_mcp_session_create() gave it.
 * @param idle_ms     how long a session may go unused (> 0).
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (unknown, ended or idle too
 *         long: the client initializes again), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_mcp_session_use(char **version_out, saas_engine *engine, const char *id, int64_t idle_ms);

/**
 * End an MCP session. Ending an unknown one succeeds.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_mcp_session_end(saas_engine *engine, const char *id);

/**
 * Delete the MCP sessions unused for longer than `idle_ms` (> 0). Idempotent:
 * any number of servers on one store may prune at any time.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ESTORE.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_mcp_session_prune(saas_engine *engine, int64_t idle_ms);

SAAS_END_DECLS

#endif
