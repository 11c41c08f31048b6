/*
 * Between the protocol (protocol.c) and the tools (tools.c, the table; tools.h).
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_MCP_INTERNAL_H
#define AAS_MCP_INTERNAL_H

#include "aas_mcp.h"

/* Tools in the table, offered or not. */
size_t aas_mcp_ntools(void);
/* Is tool i offered under ctx's flags? */
bool aas_mcp_tool_offered(const aas_mcp_ctx *ctx, size_t i);
/* The tools/list entry of tool i, or NULL when it is not offered. */
json_t *aas_mcp_tool_json(const aas_mcp_ctx *ctx, size_t i);
/*
 * A CallToolResult (new reference); NULL only when out of memory. `id` is the
 * request's (for ctx->cancelled); `progress_token` its params._meta.progressToken,
 * or NULL.
 */
json_t *aas_mcp_tool_call(const aas_mcp_ctx *ctx, const char *name, const json_t *args, const json_t *id,
                          const json_t *progress_token);
/* Does this tool report progress when asked? */
bool aas_mcp_tool_reports_progress(const char *name);
/*
 * The tools' JSON Schemas, compiled in from mcp/schemas/ (embed_schemas.cmake):
 * NAME.json holds {"input": .., "output": ..} for tool NAME; shapes.json the
 * shapes they share, which a {"$ref": "shapes.json#/SHAPE"} names. Ends with
 * a NULL name.
 */
struct aas_mcp_schema_file {
	const char *name;
	const char *text;
};
extern const struct aas_mcp_schema_file aas_mcp_schema_files[];

/* What an agent can do about a failure with this saas_status (text for a tool result); never NULL. */
const char *aas_mcp_error_hint(int rc);
/* Whether the hint table has rc's own row (the error table test checks every code). */
bool aas_mcp_status_known(int rc);

#endif
