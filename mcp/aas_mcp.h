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

/*
 * Bounds on what one message can make a transport read, do and send back.
 *
 * AAS_MCP_MESSAGE_MAX: the longest message (or batch) a transport reads, in
 * bytes: room for a write_file of a 16 MiB file as base64, as the REST API
 * allows. (aas-server reads at most 64 KiB from a request without a valid
 * API key: initialize, ping, tools/list and get_service_info fit many times.)
 * AAS_MCP_BATCH_MAX: the most messages in one JSON-RPC batch (batches exist
 * in protocol version 2025-03-26 only).
 * AAS_MCP_RESPONSE_MAX: the longest response to one message or batch, as sent
 * (compact, ASCII-only JSON): read_file's 16 MiB as base64, twice (text and
 * structuredContent), fits. A response that would be longer is replaced by a
 * -32603 error saying so; in a batch, so is each member that no longer fits,
 * and the members after it are not run.
 */
#define AAS_MCP_MESSAGE_MAX ((size_t)24 << 20)
#define AAS_MCP_BATCH_MAX 32
#define AAS_MCP_RESPONSE_MAX ((size_t)64 << 20)

/*
 * Bounds on the tree a JSON text may become, checked by aas_json_bounds()
 * before jansson builds it: every value costs jansson some 40 to 100 bytes,
 * so 24 MiB of "[1,1,1,...]" (12 million values) would cost over a gigabyte.
 *
 * AAS_JSON_VALUES_MAX: the most values in one text, containers, scalars and
 * strings alike, an object's keys counted too. The largest real requests are
 * a few hundred values (an env map of a few hundred entries; a 16 MiB stdin
 * or file is one string, one value), so this leaves a wide margin, and at
 * about 10 MB of tree it is a small fraction of what 24 MiB could cost.
 * AAS_JSON_DEPTH_MAX: the deepest nesting of arrays and objects (a request
 * needs 4 or 5 levels).
 */
#define AAS_JSON_VALUES_MAX ((size_t)100000)
#define AAS_JSON_DEPTH_MAX ((size_t)64)

/* JSON-RPC error codes. */
#define AAS_MCP_PARSE_ERROR (-32700)
#define AAS_MCP_INVALID_REQUEST (-32600)
#define AAS_MCP_METHOD_NOT_FOUND (-32601)
#define AAS_MCP_INVALID_PARAMS (-32602)
#define AAS_MCP_INTERNAL_ERROR (-32603)

/* Offer get_service_info (needs `engine`): the HTTP transport does. */
#define AAS_MCP_SERVICE_INFO (1u << 0)
/*
 * The caller is a tenant of a shared server: the detail of a server-side
 * failure (aas_error_is_internal()) goes to ctx->log, the result says only
 * its fixed text. The HTTP transport sets it; aas-mcp's user is its operator.
 */
#define AAS_MCP_TENANT (1u << 1)

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
	/* Where a person makes a key, for the same text: e.g. "the dashboard's API keys page, /dashboard/keys". */
	const char *key_source;
	/*
	 * When client_status is neither 0 nor SAAS_EAUTH: what is wrong and what
	 * to set, in a sentence the agent can act on (or NULL: the status's name).
	 */
	const char *client_problem;
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
	 * Does the protocol version negotiated on this connection or session have
	 * JSON-RPC batches (aas_mcp_version_batches())? False (the default, and
	 * before initialize): a batch is refused whole.
	 */
	bool batches;
	/* The longest response in bytes; 0: AAS_MCP_RESPONSE_MAX. */
	size_t response_max;
	/* With AAS_MCP_TENANT: where the detail a tenant is not shown goes (the operator's log); may be NULL. */
	void (*log)(const char *msg);
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
 * JSON-RPC error response to send (-32700); a message over AAS_JSON_VALUES_MAX
 * values or AAS_JSON_DEPTH_MAX levels is refused the same way, unparsed, with
 * -32600. Free *error with json_decref().
 */
json_t *aas_mcp_parse(const char *text, size_t len, json_t **error);

/*
 * Would jansson build a bounded tree from `text` (len bytes)? One pass over
 * the bytes, without allocating: counts the values (an object's keys too)
 * and the nesting depth outside strings, and stops at the first bound passed.
 * Returns true within values_max and depth_max; otherwise false, with why in
 * buf (a sentence naming the bound, for whoever sent the text). A text that
 * is not JSON is not refused here (jansson says what is wrong with it), but
 * it is counted the same way, so whatever jansson would build of it before
 * its first error is within the bounds too.
 */
bool aas_json_bounds(const char *text, size_t len, size_t values_max, size_t depth_max, char *buf, size_t size);

/*
 * A JSON number as an int64_t: an integer, or a real with an integral value
 * in int64_t's range (5.0, 1e3: what JavaScript clients send). Returns false
 * for anything else (a string, 1.5, 1e300), leaving *out alone.
 */
bool aas_json_int64(const json_t *v, int64_t *out);

/*
 * Why jansson refused a text, in plain words for whoever sent it: "\u0000" is
 * valid JSON that these APIs refuse, and jansson's own text for it names a
 * flag of its API. Returns buf.
 */
const char *aas_json_error_text(char *buf, size_t size, const json_error_t *err);

/*
 * Is the detail of a failure (status rc, error class klass) the operator's
 * only? A server-side failure's message may hold host paths or what libvirt,
 * libssh2 or the database said; a 4xx message is written for the caller, and
 * a failure inside the tenant's own guest (SAAS_EIO of class GUEST: its disk
 * is full) is the tenant's to see, and so is SAAS_EBUSY: the server's own
 * "full, try again later" (short of disk space, no preview slot), written
 * for the caller and naming no path. SAAS_EBUSY and SAAS_ENOTSUP of class
 * DRIVER are not: the VM driver's words name the host (its free memory, its
 * QEMU uid range). REST and MCP answer tenants by this rule.
 */
bool aas_error_is_internal(int rc, int klass);
/* What a tenant reads in place of an internal failure's detail (static text). */
const char *aas_error_tenant_text(int rc);

/*
 * Classify a parsed message. A batch is REQUEST if a member needs a response,
 * and INVALID if it holds an initialize (which must come alone; see
 * aas_mcp_batch_error()).
 */
enum aas_mcp_kind aas_mcp_kind(const json_t *msg);

/*
 * Handle a message (or a batch). Returns the response to send (a new
 * reference), or NULL when nothing is to be sent (notifications, responses).
 * A batch aas_mcp_batch_error() refuses is not run: its error is the response.
 */
json_t *aas_mcp_handle(const aas_mcp_ctx *ctx, const json_t *msg);

/*
 * Is `msg` a batch that may not be run under ctx? Then the -32600 error to
 * send instead of running any of it (a new reference; over HTTP, with 400):
 * an empty batch, one that holds an initialize, any batch when ctx->batches
 * is false, one of more than AAS_MCP_BATCH_MAX messages. NULL otherwise (and
 * for a message that is not a batch).
 */
json_t *aas_mcp_batch_error(const aas_mcp_ctx *ctx, const json_t *msg);

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

/* Does protocol version `version` have JSON-RPC batches? (2025-03-26 added them, 2025-06-18 removed them.) */
bool aas_mcp_version_batches(const char *version);

/* A JSON-RPC error response (new reference); id may be NULL (then null). */
json_t *aas_mcp_error(const json_t *id, int code, const char *message);

#endif
