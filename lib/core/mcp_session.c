/*
 * MCP sessions in the store: a session initialized through one server is
 * used through any other on the same store. The store keeps the SHA-256 of
 * each id, never the id: a copy of the database does not open sessions.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

_Static_assert(SAAS_MCP_VERSION_MAX == SAAS_STORE_MCP_VERSION_MAX, "a version the API takes fits the store");

/* A well-formed id: SAAS_MCP_SESSION_ID_LEN lowercase hex digits (anything else is no session). */
static bool session_id(const char *id)
{
	if (!id || strlen(id) != SAAS_MCP_SESSION_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

SAAS_EXTERN(int) saas_mcp_session_create(char **id_out, saas_engine *e, const char *version, unsigned int flags)
{
	unsigned char rnd[SAAS_MCP_SESSION_ID_LEN / 2];
	char id[SAAS_MCP_SESSION_ID_LEN + 1], hash[65];
	int rc;

	saas__error_clear();
	if (!id_out)
		return saas__inval("id_out is NULL");
	*id_out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!saas__valid_text(version, SAAS_MCP_VERSION_MAX))
		return saas__inval("version must be 1 to %d printable bytes", SAAS_MCP_VERSION_MAX);
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(rnd); i++) {
		static const char hex[] = "0123456789abcdef";
		id[2 * i] = hex[rnd[i] >> 4];
		id[2 * i + 1] = hex[rnd[i] & 15];
	}
	id[SAAS_MCP_SESSION_ID_LEN] = '\0';
	saas__sha256_hex(hash, id, SAAS_MCP_SESSION_ID_LEN);
	if ((rc = e->store->mcp_session_insert(e->store_ctx, hash, version, saas__engine_now(e), e->mcp_sessions_max)) < 0)
		return rc;
	if (!(*id_out = saas__strdup(id)))
		return SAAS_ENOMEM;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_mcp_session_use(char **version_out, saas_engine *e, const char *id, int64_t idle_ms)
{
	char hash[65], version[SAAS_STORE_MCP_VERSION_MAX + 1] = "";
	int64_t now;
	int rc;

	saas__error_clear();
	if (!version_out)
		return saas__inval("version_out is NULL");
	*version_out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (idle_ms <= 0)
		return saas__inval("idle_ms must be positive");
	if (!session_id(id))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no such MCP session");
	saas__sha256_hex(hash, id, strlen(id));
	now = saas__engine_now(e);
	rc = e->store->mcp_session_touch(e->store_ctx, hash, now, now - idle_ms, version);
	if (rc == SAAS_ENOTFOUND)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0,
		                   "no such MCP session (it ended, expired, or never began)");
	if (rc < 0)
		return rc;
	if (!(*version_out = saas__strdup(version)))
		return SAAS_ENOMEM;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_mcp_session_end(saas_engine *e, const char *id)
{
	char hash[65];

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (!session_id(id))
		return SAAS_OK;
	saas__sha256_hex(hash, id, strlen(id));
	return e->store->mcp_session_delete(e->store_ctx, hash);
}

SAAS_EXTERN(int) saas_mcp_session_prune(saas_engine *e, int64_t idle_ms)
{
	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (idle_ms <= 0)
		return saas__inval("idle_ms must be positive");
	return e->store->mcp_session_prune(e->store_ctx, saas__engine_now(e) - idle_ms);
}
