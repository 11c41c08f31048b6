/*
 * aas_mcp: the Model Context Protocol, once, for every transport.
 *
 * JSON-RPC 2.0 in, JSON-RPC 2.0 out, over libsaas's public API and jansson.
 * A transport (aas-server's POST /v1/mcp, the stdio aas-mcp) reads a
 * message, hands it here with the client of that request, and writes back
 * what comes out. Sessions, headers and framing are the transport's business.
 *
 * Thread-safe: nothing here keeps state between calls. A transport may handle
 * several messages at once on several threads (each with its own ctx).
 *
 * Progress and cancellation need the transport's help, through ctx: `notify`
 * sends a notification while a request is being handled (create_sandbox sends
 * notifications/progress when the request carries params._meta.progressToken),
 * and `cancelled` says whether the client has cancelled a request
 * (notifications/cancelled names it; the transport keeps the flags, see
 * aas_mcp_cancelled_request()). A cancelled request gets no response, and a
 * sandbox its create_sandbox made is destroyed once the create returns.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_MCP_H
#define AAS_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <saas.h>

/* Protocol versions spoken, newest first. */
#define AAS_MCP_VERSION_LATEST "2025-11-25"

/* JSON-RPC error codes. */
#define AAS_MCP_PARSE_ERROR (-32700)
#define AAS_MCP_INVALID_REQUEST (-32600)
#define AAS_MCP_METHOD_NOT_FOUND (-32601)
#define AAS_MCP_INVALID_PARAMS (-32602)
#define AAS_MCP_INTERNAL_ERROR (-32603)

/* Offer get_service_info (needs `engine`): the HTTP transport does. */
#define AAS_MCP_SERVICE_INFO (1u << 0)

/* What one message is handled with. */
typedef struct {
	/*
	 * The account's client for this message, or NULL when no usable key came
	 * with it: tools that need one then answer an isError result that says how
	 * to send a key (never a protocol error: a 401 would push clients into OAuth).
	 */
	saas_client *client;
	/* Why client is NULL: 0 (no key sent), SAAS_EAUTH (unknown or revoked key), or another saas_status. */
	int client_status;
	saas_engine *engine;        /* for get_service_info; may be NULL without AAS_MCP_SERVICE_INFO */
	unsigned int flags;         /* AAS_MCP_* */
	/* How this transport takes a key, for the guidance text: e.g. "an \"Authorization: Bearer aas_sk_...\" header". */
	const char *key_hint;
	/* Page size of tools/list; 0: every tool in one page. */
	unsigned int page_size;
	/*
	 * Send `msg`, a notification, to the client now; takes the reference. Called
	 * on the thread of aas_mcp_handle(), before it returns, any number of times.
	 * NULL: this transport cannot send them, and no progress is reported.
	 */
	void (*notify)(void *userdata, json_t *msg);
	/*
	 * Has the client cancelled the request with this id? Called on the thread
	 * of aas_mcp_handle(). NULL: requests are never cancelled.
	 */
	bool (*cancelled)(void *userdata, const json_t *id);
	void *userdata;             /* for notify and cancelled */
	/* Time between create_sandbox's progress notifications in ms; 0: 1000. */
	unsigned int progress_interval_ms;
	/*
	 * A tool un-exposed a sandbox's port (port > 0) or destroyed the sandbox
	 * (port 0): the transport closes what it holds open to it (the server's
	 * preview tunnels). NULL: nothing to close.
	 */
	void (*ended)(const char *sandbox_id, unsigned int port);
} aas_mcp_ctx;

/* What kind of message a parsed JSON value is. */
enum aas_mcp_kind {
	AAS_MCP_INVALID = 0,        /* not a JSON-RPC 2.0 message */
	AAS_MCP_REQUEST = 1,        /* has an id: needs a response */
	AAS_MCP_NOTIFICATION = 2,   /* no id: nothing comes back */
	AAS_MCP_RESPONSE = 3,       /* a response from the client: nothing comes back */
	AAS_MCP_INITIALIZE = 4      /* an initialize request */
};

/*
 * Parse a message. On a syntax error returns NULL and sets *error to the
 * JSON-RPC error response to send (-32700); free it with json_decref().
 */
json_t *aas_mcp_parse(const char *text, size_t len, json_t **error);

/* Classify a parsed message (a batch: INITIALIZE if it holds one, else REQUEST if any needs a response). */
enum aas_mcp_kind aas_mcp_kind(const json_t *msg);

/*
 * Handle a message (or a batch). Returns the response to send (a new
 * reference), or NULL when nothing is to be sent (notifications, responses).
 */
json_t *aas_mcp_handle(const aas_mcp_ctx *ctx, const json_t *msg);

/*
 * Will handling `msg` (or a member of the batch) send notifications through
 * ctx->notify? True for a tools/call of a tool that reports progress
 * (create_sandbox) with params._meta.progressToken. Streamable HTTP answers
 * such a request with an event stream, others with plain JSON.
 */
bool aas_mcp_reports_progress(const json_t *msg);

/*
 * The request id a notifications/cancelled message names (borrowed from msg),
 * or NULL when `msg` is not one (batches: ask for each member). The transport
 * flags that request, if it is still in flight, for ctx->cancelled; an unknown
 * or finished id is ignored, as the specification asks.
 */
const json_t *aas_mcp_cancelled_request(const json_t *msg);

/* Is `version` a protocol version this library speaks? */
bool aas_mcp_version_supported(const char *version);

/* A JSON-RPC error response (new reference); id may be NULL (then null). */
json_t *aas_mcp_error(const json_t *id, int code, const char *message);

#endif
