/*
 * Between the MCP tools' files: what a tool is called with (struct call),
 * the argument checks and the result and error shapes every tool shares
 * (tools_common.c), so that what an agent reads is said one way, and the
 * tools themselves, one function each, by area: sandboxes (tools_sandbox.c),
 * commands, files and ports (tools_exec.c), code (tools_code.c). The table
 * that names them, with their descriptions and schemas, is tools.c.
 *
 * Mistakes an agent can fix (an unknown or destroyed sandbox, a bad path, no
 * credit, a command that timed out, no key) come back as a tool result with
 * isError set and text that says what to do next, never as a protocol error:
 * the model reads results, not JSON-RPC errors.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_MCP_TOOLS_H
#define AAS_MCP_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp_internal.h"
#include "wire.h"

struct call {
	const aas_mcp_ctx *ctx;
	const json_t *args;
	const char *tool;
	const json_t *id;        /* the request's, for ctx->cancelled */
	const json_t *progress;  /* params._meta.progressToken, or NULL */
	json_int_t progress_n;   /* the last progress sent */
	char err[1024];
};

/* ---- tools_common.c ---- */

/* Wall-clock milliseconds. */
int64_t aas_mcp_now_ms(void);
/* A text content item. */
json_t *aas_mcp_text_item(const char *text);
/* Success: structuredContent and the same JSON as text. Steals `data`. */
json_t *aas_mcp_ok(json_t *data);
/* A failure the agent can fix: isError and the text. */
json_t *aas_mcp_failf(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A libsaas call's failure as its thread's saas_error_last() told it (the
 * error state is per thread): taken there, answered on another.
 */
struct aas_mcp_failure {
	int rc;
	int klass;                  /* as saas_error.klass; SAAS_ERRCLASS_NONE when the detail was not rc's */
	char msg[512];              /* the detail, or rc's fixed text */
	char limit[64];             /* SAAS_ELIMIT: the limit's name, or "" */
	int64_t retry_after_ms;     /* SAAS_ELIMIT, SAAS_EBUSY: when a retry can succeed; 0: unknown */
};
/* The failure rc of the last libsaas call on this thread into f. */
void aas_mcp_failure_take(struct aas_mcp_failure *f, int rc);
/*
 * A libsaas failure, and what to do about it: a limit's name, and when to
 * call again for a limit or a busy refusal that says (" busy: try again in
 * N s", as the REST API's Retry-After).
 */
json_t *aas_mcp_fail_taken(struct call *c, const struct aas_mcp_failure *f);
/* The same, for the failure rc of this thread's last libsaas call. */
json_t *aas_mcp_fail_saas(struct call *c, int rc);
/* Has the client cancelled this call? */
bool aas_mcp_cancelled(struct call *c);
/* A progress notification, when the call asked for them. */
void aas_mcp_progress(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Argument checks: false after saying what is wrong in c->err (aas_mcp_arg_fail answers it). */
bool aas_mcp_bad_arg(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool aas_mcp_arg_str(struct call *c, const char *name, bool required, const char **out);
bool aas_mcp_arg_int(struct call *c, const char *name, int64_t min, int64_t max, int64_t *out);
bool aas_mcp_arg_pairs(struct call *c, const char *name, size_t max, char ***list);
void aas_mcp_pairs_free(char **list);
json_t *aas_mcp_arg_fail(struct call *c);
/* The REST sandbox, with the seconds it has left. */
json_t *aas_mcp_sandbox_json(const saas_sandbox *sb);
/* Bytes as text when valid UTF-8, else base64; enc_key says which. */
void aas_mcp_set_bytes(json_t *o, const char *key, const char *enc_key, const void *data, size_t len);

/* ---- the tools (the table in tools.c names each) ---- */

/* tools_sandbox.c */
json_t *aas_mcp_tool_create(struct call *c);
json_t *aas_mcp_tool_get(struct call *c);
json_t *aas_mcp_tool_extend(struct call *c);
json_t *aas_mcp_tool_network(struct call *c);
json_t *aas_mcp_tool_fork(struct call *c);
json_t *aas_mcp_tool_pause(struct call *c);
json_t *aas_mcp_tool_resume(struct call *c);
json_t *aas_mcp_tool_destroy(struct call *c);
json_t *aas_mcp_tool_list(struct call *c);
json_t *aas_mcp_tool_usage(struct call *c);
json_t *aas_mcp_tool_service(struct call *c);
/* tools_exec.c */
json_t *aas_mcp_tool_run(struct call *c);
json_t *aas_mcp_tool_write(struct call *c);
json_t *aas_mcp_tool_read(struct call *c);
json_t *aas_mcp_tool_list_files(struct call *c);
json_t *aas_mcp_tool_expose(struct call *c);
json_t *aas_mcp_tool_unexpose(struct call *c);
/* tools_code.c */
json_t *aas_mcp_tool_code(struct call *c);

#endif
