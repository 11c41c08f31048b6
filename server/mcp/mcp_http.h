/*
 * MCP over Streamable HTTP at /v1/mcp (mcp/): what the rest of the server may
 * call of it. The transport only: the protocol and the tools are the MCP
 * library's (aas_mcp), shared with the stdio server.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_MCP_HTTP_H
#define AAS_MCP_HTTP_H

#include "config.h"
#include "server.h"

/* The engine get_service_info reads, and the bound port (the loopback Origins allowed). */
void aas_mcp_http_init(saas_engine *engine, const struct aas_config *cfg, unsigned int port);
void aas_mcp_http_free(void);

void aas_h_mcp_post(struct aas_req *r, struct aas_reply *out);
void aas_h_mcp_delete(struct aas_req *r, struct aas_reply *out);

#endif
