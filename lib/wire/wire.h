/*
 * The JSON wire shapes of the REST API, in one place: the encoders aas-server,
 * the MCP tools and `aas --json` print, and the decoders the remote client
 * reads the server's answers with (docs/wire.md says why here).
 *
 * The shapes are the ones server/openapi.json documents: snake_case, times RFC
 * 3339 UTC with milliseconds or null, money as an exact decimal string and
 * integer micro-dollars ("cost_usd": "0.000125", "cost_usd_micro": 125),
 * never a binary float. tests/fixtures/wire/ pins each one.
 *
 * Over <saas.h> and jansson only: the library links it for the remote client
 * and the programs link it as a static library, so it may use nothing but the
 * public API. An encoder returns a new reference, or NULL when out of memory.
 * A decoder fills a struct that the matching saas_*_free() releases; it
 * returns SAAS_OK, SAAS_ENOMEM, or SAAS_EPROTOCOL with *bad set to the member
 * at fault (static text), and takes what it does not know as absent.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_WIRE_H
#define SAAS_WIRE_H

#include <stdbool.h>

#include <jansson.h>
#include <saas.h>

/* A time: its RFC 3339 text, or null for 0. */
json_t *saas__wire_time(int64_t ms);
/* Money: sets `base` (exact decimal text) and `base`_micro (integer) on obj. */
void saas__wire_money(json_t *obj, const char *base, int64_t micro);

json_t *saas__wire_sandbox(const saas_sandbox *sb);
/* "KEY=VALUE" strings as a JSON object of strings (NULL: out of memory). */
json_t *saas__wire_pairs(const char *const *list);
/* {"sandboxes": [...], "next_cursor": text or null} */
json_t *saas__wire_sandbox_list(const saas_sandbox_list *list);
json_t *saas__wire_execution(const saas_execution *x);
/* An execution without its output (lists, and the events of a stream). */
json_t *saas__wire_execution_brief(const saas_execution *x);
/* {"executions": [brief, ...]} */
json_t *saas__wire_execution_list(const saas_execution_list *list);
/* A chunk of output: {"stream", "offset", "data" (UTF-8) or "data_base64", "data_encoding"}. */
json_t *saas__wire_exec_chunk(int stream, uint64_t offset, const void *data, size_t len);
/* A size with its price, and its paused price at this per-GiB-hour price. */
json_t *saas__wire_size(const saas_size *s, int64_t paused_usd_micro_per_gib_hour);
json_t *saas__wire_limits(const saas_limits *l);
json_t *saas__wire_account(const saas_account_info *ai);
json_t *saas__wire_usage(const saas_usage *u);
json_t *saas__wire_file_list(const saas_file_list *list);
/* A sandbox's samples: {"metrics":[{"at","vcpus","cpu_used_pct",...}],"count"}. */
json_t *saas__wire_metric_list(const saas_metric_list *list);
/* An exposed port: {"sandbox_id", "port", "url"}. */
json_t *saas__wire_port(const char *sandbox_id, unsigned int port, const char *url);

/* A sandbox's network: {"mode", "allow", "deny", "denied": {"connections", "lookups"}}. */
json_t *saas__wire_network(const saas_network_info *ni);
/* A network to give: {"mode", "allow", "deny"} (what saas__wire_network_req_decode reads). */
json_t *saas__wire_network_spec(const saas_network_spec *spec);

/* A network as a request gives it, with room for its lists (which point into the request). */
typedef struct saas__wire_network_req {
	saas_network_spec spec;
	const char *allow[SAAS_NETWORK_RULES_MAX + 1];
	const char *deny[SAAS_NETWORK_RULES_MAX + 1];
} saas__wire_network_req;

/*
 * Read "isolated", "internet", or {"mode"?, "allow"?, "deny"?} (mode defaults
 * to "policy"; a "denied" member, as read back, is ignored). The shape and
 * the count are checked here; the rules themselves by saas_sandbox_create()
 * and saas_sandbox_network_set(). SAAS_OK, or SAAS_EINVAL with *bad a message
 * for the caller (static text). Valid while v lives.
 */
int saas__wire_network_req_decode(saas__wire_network_req *out, const json_t *v, const char **bad);

int saas__wire_sandbox_decode(saas_sandbox **out, const json_t *o, const char **bad);
int saas__wire_sandbox_list_decode(saas_sandbox_list **out, const json_t *o, const char **bad);
int saas__wire_execution_decode(saas_execution **out, const json_t *o, const char **bad);
/* *data is malloc()ed and NUL-terminated. */
int saas__wire_exec_chunk_decode(int *stream, uint64_t *offset, char **data, size_t *len, const json_t *o,
                                 const char **bad);
int saas__wire_account_decode(saas_account_info **out, const json_t *o, const char **bad);
int saas__wire_usage_decode(saas_usage **out, const json_t *o, const char **bad);
int saas__wire_file_list_decode(saas_file_list **out, const json_t *o, const char **bad);
int saas__wire_metric_list_decode(saas_metric_list **out, const json_t *o, const char **bad);
/* A new saas_limits from a "limits" object (members absent are 0), or NULL when out of memory. */
saas_limits *saas__wire_limits_decode(const json_t *o);

/*
 * Code contexts (code.c): a context, {"contexts":[...]}, a run's execution
 * (brief: without stdout, stderr, results and error: an event stream's
 * "end"), a result ({"is_main_result","truncated","formats":{MIME: text
 * or base64}}) and an error. Binary MIME types travel as base64.
 */
bool saas__wire_code_binary(const char *mime);
json_t *saas__wire_code_context(const saas_code_context *c);
json_t *saas__wire_code_context_list(const saas_code_context_list *l);
json_t *saas__wire_code_execution(const saas_code_execution *x, bool brief);
json_t *saas__wire_code_result(const saas_code_result *r);
json_t *saas__wire_code_error(const saas_code_error *e);
int saas__wire_code_context_decode(saas_code_context **out, const json_t *o, const char **bad);
int saas__wire_code_context_list_decode(saas_code_context_list **out, const json_t *o, const char **bad);
int saas__wire_code_execution_decode(saas_code_execution **out, const json_t *o, const char **bad);
/* The brief members into x (status, count, flags, duration). */
int saas__wire_code_brief_decode(saas_code_execution *x, const json_t *o, const char **bad);
/* A result; free it as saas_code_execution_free() frees its results (the caller keeps it in one). */
int saas__wire_code_result_decode(saas_code_result **out, const json_t *o, const char **bad);
int saas__wire_code_error_decode(saas_code_error **out, const json_t *o, const char **bad);

/*
 * The same shapes without their null members, for MCP's structuredContent:
 * an output schema with no nullable type is what the MCP Inspector's strict
 * mode and most clients' validators accept, and an absent member decodes as
 * null did. Works in place, recursively; returns v.
 */
json_t *saas__wire_drop_nulls(json_t *v);

#endif
