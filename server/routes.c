/*
 * The route table: the one list of what the server answers. The OpenAPI
 * document is checked against it (`aas-server routes` prints it).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "front.h"
#include "api/api.h"
#include "mcp/mcp_http.h"
#include "web/web.h"

const struct aas_route aas_routes[] = {
	{ .method = "GET", .pattern = "/healthz", .handler = aas_h_healthz },
	{ .method = "GET", .pattern = "/readyz", .handler = aas_h_readyz },
	{ .method = "GET", .pattern = "/metrics", .handler = aas_h_metrics },
	{ .method = "GET", .pattern = "/openapi.json", .handler = aas_h_openapi },
	{ .method = "GET", .pattern = "/v1/service", .handler = aas_h_service },
	{ .method = "GET", .pattern = "/v1/account", .flags = AAS_R_AUTH, .handler = aas_h_account },
	{ .method = "GET", .pattern = "/v1/usage", .flags = AAS_R_AUTH, .handler = aas_h_usage },
	{ .method = "POST", .pattern = "/v1/sandboxes", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_sandbox_create },
	{ .method = "GET", .pattern = "/v1/sandboxes", .flags = AAS_R_AUTH, .handler = aas_h_sandbox_list },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}", .flags = AAS_R_AUTH, .handler = aas_h_sandbox_get },
	{ .method = "DELETE", .pattern = "/v1/sandboxes/{id}", .flags = AAS_R_AUTH, .handler = aas_h_sandbox_destroy },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/exec", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_exec },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/extend", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_sandbox_extend },
	{ .method = "PUT", .pattern = "/v1/sandboxes/{id}/network", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_sandbox_network_set },
	/* Fork, pause and resume. */
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/fork", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_sandbox_fork },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/pause", .flags = AAS_R_AUTH,
	  .handler = aas_h_sandbox_pause },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/resume", .flags = AAS_R_AUTH,
	  .handler = aas_h_sandbox_resume },
	{ .method = "PUT", .pattern = "/v1/sandboxes/{id}/files", .flags = AAS_R_AUTH | AAS_R_STREAM,
	  .handler = aas_h_file_put, .stream_start = aas_file_put_start, .stream_data = aas_file_put_data },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}/files", .flags = AAS_R_AUTH, .handler = aas_h_file_get },
	{ .method = "DELETE", .pattern = "/v1/sandboxes/{id}/files", .flags = AAS_R_AUTH,
	  .handler = aas_h_file_delete },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/files/mkdir", .flags = AAS_R_AUTH,
	  .handler = aas_h_file_mkdir },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/files/move", .flags = AAS_R_AUTH,
	  .handler = aas_h_file_move },
	{ .method = "POST", .pattern = "/v1/sandboxes/{id}/ports", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_port_expose },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}/ports", .flags = AAS_R_AUTH, .handler = aas_h_port_list },
	{ .method = "DELETE", .pattern = "/v1/sandboxes/{id}/ports/{port}", .flags = AAS_R_AUTH,
	  .handler = aas_h_port_unexpose },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}/pty", .flags = AAS_R_AUTH, .handler = aas_h_pty },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}/metrics", .flags = AAS_R_AUTH,
	  .handler = aas_h_sandbox_metrics },
	{ .method = "GET", .pattern = "/v1/executions/{id}", .flags = AAS_R_AUTH, .handler = aas_h_execution_get },
	/* Executions as they run: follow, stdin, signals, cancel, the running list. */
	{ .method = "GET", .pattern = "/v1/executions/{id}/events", .flags = AAS_R_AUTH,
	  .handler = aas_h_execution_events },
	{ .method = "POST", .pattern = "/v1/executions/{id}/stdin", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_execution_stdin },
	{ .method = "POST", .pattern = "/v1/executions/{id}/signal", .flags = AAS_R_AUTH | AAS_R_JSON,
	  .handler = aas_h_execution_signal },
	{ .method = "POST", .pattern = "/v1/executions/{id}/cancel", .flags = AAS_R_AUTH,
	  .handler = aas_h_execution_cancel },
	{ .method = "GET", .pattern = "/v1/sandboxes/{id}/executions", .flags = AAS_R_AUTH,
	  .handler = aas_h_execution_list },
	/* MCP authenticates per tool (keyless discovery), so not AAS_R_AUTH. */
	{ .method = "POST", .pattern = "/v1/mcp", .flags = AAS_R_JSON | AAS_R_KEY, .handler = aas_h_mcp_post },
	{ .method = "DELETE", .pattern = "/v1/mcp", .handler = aas_h_mcp_delete },
	/*
	 * The service's pages (web/pages.c): HTML for people, not the API. /docs/api and
	 * /docs/limits before /docs/{page}.
	 */
	{ .method = "GET", .pattern = "/", .flags = AAS_R_PAGE, .handler = aas_h_page_home },
	{ .method = "GET", .pattern = "/docs", .flags = AAS_R_PAGE, .handler = aas_h_page_docs },
	{ .method = "GET", .pattern = "/docs/api", .flags = AAS_R_PAGE, .handler = aas_h_page_api },
	{ .method = "GET", .pattern = "/docs/limits", .flags = AAS_R_PAGE, .handler = aas_h_page_limits },
	{ .method = "GET", .pattern = "/docs/{page}", .flags = AAS_R_PAGE, .handler = aas_h_page_doc },
	{ .method = "GET", .pattern = "/security", .flags = AAS_R_PAGE, .handler = aas_h_page_security },
	{ .method = "GET", .pattern = "/static/{file}", .flags = AAS_R_PAGE, .handler = aas_h_static },
	{ .method = "GET", .pattern = "/static/viewer/{file}", .flags = AAS_R_PAGE, .handler = aas_h_static_viewer },
	/* The MCP server for stdio clients, as an npm package: `npx -y https://HOST/mcp.tgz` (web/mcp_package.c). */
	{ .method = "GET", .pattern = "/mcp.tgz", .flags = AAS_R_PAGE, .handler = aas_h_mcp_package },
	/* Accounts for people and the dashboard: a session cookie, never an API key (web/people.c). */
	{ .method = "GET", .pattern = "/signup", .flags = AAS_R_PAGE, .handler = aas_h_signup_page },
	{ .method = "POST", .pattern = "/signup", .flags = AAS_R_PAGE | AAS_R_FORM, .handler = aas_h_signup },
	{ .method = "GET", .pattern = "/login", .flags = AAS_R_PAGE, .handler = aas_h_login_page },
	{ .method = "POST", .pattern = "/login", .flags = AAS_R_PAGE | AAS_R_FORM, .handler = aas_h_login },
	{ .method = "POST", .pattern = "/logout", .flags = AAS_R_PAGE | AAS_R_FORM, .handler = aas_h_logout },
	{ .method = "GET", .pattern = "/dashboard", .flags = AAS_R_PAGE, .handler = aas_h_dashboard },
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}", .flags = AAS_R_PAGE, .handler = aas_h_dash_sandbox },
	{ .method = "POST", .pattern = "/dashboard/sandboxes/{id}/destroy", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_sandbox_destroy },
	{ .method = "POST", .pattern = "/dashboard/sandboxes/{id}/extend", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_sandbox_extend },
	{ .method = "GET", .pattern = "/dashboard/keys", .flags = AAS_R_PAGE, .handler = aas_h_dash_keys },
	{ .method = "POST", .pattern = "/dashboard/keys", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_key_create },
	{ .method = "POST", .pattern = "/dashboard/keys/{id}/revoke", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_key_revoke },
	{ .method = "GET", .pattern = "/dashboard/usage", .flags = AAS_R_PAGE, .handler = aas_h_dash_usage },
	{ .method = "GET", .pattern = "/dashboard/operator", .flags = AAS_R_PAGE, .handler = aas_h_dash_operator },
	{ .method = "POST", .pattern = "/dashboard/operator/accounts/{id}/credit", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_op_credit },
	{ .method = "POST", .pattern = "/dashboard/operator/accounts/{id}/disable", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_op_disable },
	/* A sandbox's page: its use redrawn, its terminal, its files (web/dashboard_sandbox.c, dashboard_files.c). */
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}/use", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_sandbox_use },
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}/pty", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_sandbox_pty },
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}/executions/{eid}", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_execution },
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}/files/download", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_file_download },
	{ .method = "POST", .pattern = "/dashboard/sandboxes/{id}/files/mkdir", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_file_mkdir },
	{ .method = "POST", .pattern = "/dashboard/sandboxes/{id}/files/delete", .flags = AAS_R_PAGE | AAS_R_FORM,
	  .handler = aas_h_dash_file_delete },
	{ .method = "POST", .pattern = "/dashboard/sandboxes/{id}/files/upload", .flags = AAS_R_PAGE | AAS_R_STREAM,
	  .handler = aas_h_dash_file_upload, .stream_start = aas_dash_upload_start,
	  .stream_data = aas_dash_upload_data },
	/* What Destroy and Revoke ask first, without JavaScript: a page whose form posts to the same path. */
	{ .method = "GET", .pattern = "/dashboard/sandboxes/{id}/destroy", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_sandbox_destroy_page },
	{ .method = "GET", .pattern = "/dashboard/keys/{id}/revoke", .flags = AAS_R_PAGE,
	  .handler = aas_h_dash_key_revoke_page },
};

const size_t aas_nroutes = sizeof(aas_routes) / sizeof(aas_routes[0]);
