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
	{ "GET", "/healthz", 0, aas_h_healthz, NULL, NULL },
	{ "GET", "/metrics", 0, aas_h_metrics, NULL, NULL },
	{ "GET", "/openapi.json", 0, aas_h_openapi, NULL, NULL },
	{ "GET", "/v1/service", 0, aas_h_service, NULL, NULL },
	{ "GET", "/v1/account", AAS_R_AUTH, aas_h_account, NULL, NULL },
	{ "GET", "/v1/usage", AAS_R_AUTH, aas_h_usage, NULL, NULL },
	{ "POST", "/v1/sandboxes", AAS_R_AUTH | AAS_R_JSON, aas_h_sandbox_create, NULL, NULL },
	{ "GET", "/v1/sandboxes", AAS_R_AUTH, aas_h_sandbox_list, NULL, NULL },
	{ "GET", "/v1/sandboxes/{id}", AAS_R_AUTH, aas_h_sandbox_get, NULL, NULL },
	{ "DELETE", "/v1/sandboxes/{id}", AAS_R_AUTH, aas_h_sandbox_destroy, NULL, NULL },
	{ "POST", "/v1/sandboxes/{id}/exec", AAS_R_AUTH | AAS_R_JSON, aas_h_exec, NULL, NULL },
	{ "POST", "/v1/sandboxes/{id}/extend", AAS_R_AUTH | AAS_R_JSON, aas_h_sandbox_extend, NULL, NULL },
	{ "PUT", "/v1/sandboxes/{id}/network", AAS_R_AUTH | AAS_R_JSON, aas_h_sandbox_network_set, NULL, NULL },
	/* Fork, pause and resume. */
	{ "POST", "/v1/sandboxes/{id}/fork", AAS_R_AUTH | AAS_R_JSON, aas_h_sandbox_fork, NULL, NULL },
	{ "POST", "/v1/sandboxes/{id}/pause", AAS_R_AUTH, aas_h_sandbox_pause, NULL, NULL },
	{ "POST", "/v1/sandboxes/{id}/resume", AAS_R_AUTH, aas_h_sandbox_resume, NULL, NULL },
	{ "PUT", "/v1/sandboxes/{id}/files", AAS_R_AUTH | AAS_R_STREAM, aas_h_file_put, aas_file_put_start,
	  aas_file_put_data },
	{ "GET", "/v1/sandboxes/{id}/files", AAS_R_AUTH, aas_h_file_get, NULL, NULL },
	{ "POST", "/v1/sandboxes/{id}/ports", AAS_R_AUTH | AAS_R_JSON, aas_h_port_expose, NULL, NULL },
	{ "GET", "/v1/sandboxes/{id}/ports", AAS_R_AUTH, aas_h_port_list, NULL, NULL },
	{ "DELETE", "/v1/sandboxes/{id}/ports/{port}", AAS_R_AUTH, aas_h_port_unexpose, NULL, NULL },
	{ "GET", "/v1/sandboxes/{id}/pty", AAS_R_AUTH, aas_h_pty, NULL, NULL },
	{ "GET", "/v1/executions/{id}", AAS_R_AUTH, aas_h_execution_get, NULL, NULL },
	/* Executions as they run: follow, stdin, signals, cancel, the running list. */
	{ "GET", "/v1/executions/{id}/events", AAS_R_AUTH, aas_h_execution_events, NULL, NULL },
	{ "POST", "/v1/executions/{id}/stdin", AAS_R_AUTH | AAS_R_JSON, aas_h_execution_stdin, NULL, NULL },
	{ "POST", "/v1/executions/{id}/signal", AAS_R_AUTH | AAS_R_JSON, aas_h_execution_signal, NULL, NULL },
	{ "POST", "/v1/executions/{id}/cancel", AAS_R_AUTH, aas_h_execution_cancel, NULL, NULL },
	{ "GET", "/v1/sandboxes/{id}/executions", AAS_R_AUTH, aas_h_execution_list, NULL, NULL },
	/* MCP authenticates per tool (keyless discovery), so not AAS_R_AUTH. */
	{ "POST", "/v1/mcp", AAS_R_JSON | AAS_R_KEY, aas_h_mcp_post, NULL, NULL },
	{ "DELETE", "/v1/mcp", 0, aas_h_mcp_delete, NULL, NULL },
	/* The service's pages (web/pages.c): HTML for people, not the API. /docs/api and /docs/limits before /docs/{page}. */
	{ "GET", "/", AAS_R_PAGE, aas_h_page_home, NULL, NULL },
	{ "GET", "/docs", AAS_R_PAGE, aas_h_page_docs, NULL, NULL },
	{ "GET", "/docs/api", AAS_R_PAGE, aas_h_page_api, NULL, NULL },
	{ "GET", "/docs/limits", AAS_R_PAGE, aas_h_page_limits, NULL, NULL },
	{ "GET", "/docs/{page}", AAS_R_PAGE, aas_h_page_doc, NULL, NULL },
	{ "GET", "/security", AAS_R_PAGE, aas_h_page_security, NULL, NULL },
	{ "GET", "/static/{file}", AAS_R_PAGE, aas_h_static, NULL, NULL },
	{ "GET", "/static/viewer/{file}", AAS_R_PAGE, aas_h_static_viewer, NULL, NULL },
	/* Accounts for people and the dashboard: a session cookie, never an API key (web/people.c). */
	{ "GET", "/signup", AAS_R_PAGE, aas_h_signup_page, NULL, NULL },
	{ "POST", "/signup", AAS_R_PAGE | AAS_R_FORM, aas_h_signup, NULL, NULL },
	{ "GET", "/login", AAS_R_PAGE, aas_h_login_page, NULL, NULL },
	{ "POST", "/login", AAS_R_PAGE | AAS_R_FORM, aas_h_login, NULL, NULL },
	{ "POST", "/logout", AAS_R_PAGE | AAS_R_FORM, aas_h_logout, NULL, NULL },
	{ "GET", "/dashboard", AAS_R_PAGE, aas_h_dashboard, NULL, NULL },
	{ "GET", "/dashboard/sandboxes/{id}", AAS_R_PAGE, aas_h_dash_sandbox, NULL, NULL },
	{ "POST", "/dashboard/sandboxes/{id}/destroy", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_sandbox_destroy, NULL, NULL },
	{ "POST", "/dashboard/sandboxes/{id}/extend", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_sandbox_extend, NULL, NULL },
	{ "GET", "/dashboard/keys", AAS_R_PAGE, aas_h_dash_keys, NULL, NULL },
	{ "POST", "/dashboard/keys", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_key_create, NULL, NULL },
	{ "POST", "/dashboard/keys/{id}/revoke", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_key_revoke, NULL, NULL },
	{ "GET", "/dashboard/usage", AAS_R_PAGE, aas_h_dash_usage, NULL, NULL },
	{ "GET", "/dashboard/operator", AAS_R_PAGE, aas_h_dash_operator, NULL, NULL },
	{ "POST", "/dashboard/operator/accounts/{id}/credit", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_op_credit, NULL, NULL },
	{ "POST", "/dashboard/operator/accounts/{id}/disable", AAS_R_PAGE | AAS_R_FORM, aas_h_dash_op_disable, NULL, NULL },
};

const size_t aas_nroutes = sizeof(aas_routes) / sizeof(aas_routes[0]);
