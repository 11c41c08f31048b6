/*
 * aas-server's floor: what every room of the server stands on. The front end
 * (http.c, conn.c) takes a request, finds its route and calls its room's
 * handler with a struct aas_req; the handler answers through a struct
 * aas_reply. The rooms are folders, each with one header saying what the
 * others may call of it:
 *
 *   api/      the REST API v1 (api.h)
 *   web/      the service's pages, accounts for people, the dashboard (web.h)
 *   preview/  the preview proxy (preview.h)
 *   mcp/      MCP over Streamable HTTP (mcp_http.h)
 *   admin/    the admin commands (admin.h)
 *   e2b/      the E2B-compatible face, /e2b and /e2b-sandbox (e2b.h)
 *
 * This header holds only what the rooms share: requests and replies, the
 * logging, the clients per key, the sockets a handler takes over and the
 * counters. The options are config.h's; what only the front end uses is
 * front.h's; the program's entry points are app.h's.
 *
 * One thread per connection (libmicrohttpd's MHD_USE_THREAD_PER_CONNECTION):
 * a create that takes seconds or an exec that takes minutes blocks only its
 * own connection. Every handler is synchronous on that thread. Threads with a
 * small stack (--connection-stack-kb) and a deadline for a request's headers
 * keep idle clients cheap; conn.c says why this is not an event loop.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_SERVER_H
#define AAS_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>
#include <saas.h>
#include "wire.h"

/* ---- logging (log.c) ---- */

void aas_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void aas_log_set_level(int level);
/*
 * What a tenant may read of this thread's last error (rc): its message, or,
 * for a failure whose detail is the operator's (aas_error_is_internal: the
 * host's facts, paths, what libvirt said), a fixed text, the detail logged
 * with `where`. Borrowed until the thread's next libsaas call.
 */
const char *aas_tenant_message(int rc, const char *where);
void aas_engine_log(void *ud, int level, const char *msg);
int64_t aas_now_ms(void);

/* ---- money (money.c); the JSON shapes are lib/wire's (wire.h) ---- */

/* The largest dollar amount aas_parse_usd takes: a billion dollars. */
#define AAS_USD_MAX 1000000000LL
/* Parse a decimal dollar amount ("12.5", at most AAS_USD_MAX) into micro-dollars exactly; 0 or -1. */
int aas_parse_usd(int64_t *micro, const char *s);

/* ---- requests and replies (http.c) ---- */

#define AAS_JSON_BODY_MAX ((size_t)24 << 20) /* 16 MiB of stdin as base64, and room */
/* The largest body of a request without a valid key on an AAS_R_KEY route (what MCP discovery needs, many times). */
#define AAS_ANON_BODY_MAX ((size_t)64 << 10)

/*
 * Where the E2B-compatible face (server/e2b, docs/e2b.md) is served:
 * E2B_API_URL=http://HOST:PORT/e2b, E2B_SANDBOX_URL=http://HOST:PORT/e2b-sandbox.
 * The floor's, because the dashboard tells users them too.
 */
#define AAS_E2B_API_PREFIX "/e2b"
#define AAS_E2B_SANDBOX_PREFIX "/e2b-sandbox"

struct aas_req;

/* What a handler returns: a ready response and its status. */
struct aas_reply {
	unsigned int status;
	struct MHD_Response *response;
};

typedef void (*aas_handler)(struct aas_req *r, struct aas_reply *out);

/* Route flags. */
#define AAS_R_AUTH (1u << 0)     /* needs an API key */
#define AAS_R_JSON (1u << 1)     /* takes a JSON body */
#define AAS_R_STREAM (1u << 2)   /* takes a raw body, streamed to the handler's sink */
/*
 * Takes a key but needs none (MCP): a key sent is looked up before the body
 * is read (r->client, r->key_status), and without a valid one the body is at
 * most AAS_ANON_BODY_MAX bytes.
 */
#define AAS_R_KEY (1u << 3)
/* An HTML page or a static file, not part of the REST API: not in openapi.json (`aas-server routes` omits it). */
#define AAS_R_PAGE (1u << 4)
/* Takes an HTML form's body (application/x-www-form-urlencoded), at most AAS_FORM_BODY_MAX. */
#define AAS_R_FORM (1u << 5)
/*
 * Rates its own requests in stream_start (the E2B data plane: no API key,
 * but a sandbox's token, so the account's rate rather than the address's).
 */
#define AAS_R_RATED (1u << 6)

struct aas_route {
	const char *method;
	const char *pattern;     /* "/v1/sandboxes/{id}/exec" */
	unsigned int flags;
	aas_handler handler;
	/* For AAS_R_STREAM: called at the first call to start the sink; returns a reply on refusal. */
	int (*stream_start)(struct aas_req *r, struct aas_reply *out);
	/* For AAS_R_STREAM: called with each piece of the body; nonzero stops. */
	int (*stream_data)(struct aas_req *r, const char *data, size_t len);
};

struct aas_req {
	struct MHD_Connection *conn;
	const char *method;
	const char *path;
	char *raw_uri;                  /* as the client sent it, with query */
	const struct aas_route *route;
	char route_id[SAAS_ID_MAX + 1]; /* {id} of the path, if any */
	saas_client *client;
	struct aas_cached_client *auth;
	int key_status;                 /* AAS_R_KEY: 0 (no key, or a valid one), or why the key sent is not usable */
	char account_id[SAAS_ID_MAX + 1];
	int64_t start_us;
	bool started;
	bool done;                      /* a reply was queued */
	bool too_big;
	/* JSON body */
	char *body;
	size_t body_len, body_cap;
	size_t body_max;                /* the largest this request may send */
	/* streaming handlers keep their state here */
	void *stream;
	void (*stream_free)(void *stream);
	/* the preview proxy keeps its state here */
	void *proxy;
	unsigned int status;            /* for the log and metrics */
	const char *route_label;        /* for metrics: the pattern, "preview", "unknown" */
};

/* Replies. */
enum MHD_Result aas_queue(struct aas_req *r, struct aas_reply *rep);
void aas_reply_json(struct aas_reply *out, unsigned int status, json_t *body); /* steals body */
/* The headers every reply carries. */
void aas_reply_common_headers(struct MHD_Response *resp);
void aas_reply_error(struct aas_reply *out, unsigned int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * 429 for a limit: Retry-After (whole seconds, at least 1) and a JSON error
 * body whose "limit" names it and "retry_after" repeats the seconds.
 */
void aas_reply_limit(struct aas_reply *out, const char *limit, int64_t retry_after_ms, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * From a saas_status and the thread's saas_error_last() (SAAS_ELIMIT:
 * aas_reply_limit; SAAS_EBUSY with a retry_after_ms: its Retry-After).
 */
void aas_reply_saas(struct aas_reply *out, int rc);
/* The same from a status, its error class and message taken earlier (on another thread). */
void aas_reply_failure(struct aas_reply *out, int rc, int klass, const char *msg);
unsigned int aas_status_for(int rc);
/*
 * How long the calling thread's last libsaas failure rc (saas_error_last())
 * asks its caller to wait before a retry, in ms, as every face's Retry-After
 * says it: a limit that names itself (at least 1), or no room now (busy,
 * when it said a time); 0 for any other failure.
 */
int64_t aas_retry_after_ms(int rc);

/*
 * Has the client closed its connection (or its sending half, or reset it)?
 * For a handler that made something only its answer would tell of: a create
 * whose client left is destroyed rather than left running for nobody.
 */
bool aas_client_gone(struct aas_req *r);
/*
 * The request's socket, dup()ed (the caller closes it; -1 when there is
 * none), for a worker thread to ask aas_fd_gone() while the connection's
 * own thread waits in its answer's reader: a copy, so no fd that
 * libmicrohttpd closed and the system gave again is ever asked.
 */
int aas_client_fd(struct aas_req *r);
/* aas_client_gone() on such a copy (false for -1). */
bool aas_fd_gone(int fd);

/* The API key of the request (Authorization: Bearer, or x-api-key), or NULL. Never log it. */
const char *aas_request_key(struct aas_req *r);

/* Parse the JSON body as an object (empty body: {}); false after replying 400. */
bool aas_body_object(struct aas_req *r, struct aas_reply *out, json_t **obj);
/* Typed field getters: false after replying 400 naming the field. Missing: *present=false. */
bool aas_field_string(json_t *obj, const char *name, const char **val, struct aas_reply *out);
bool aas_field_int(json_t *obj, const char *name, int64_t *val, bool *present, struct aas_reply *out);
bool aas_field_bool(json_t *obj, const char *name, bool *val, struct aas_reply *out);
/*
 * A query parameter, or NULL when absent ("" when named without a value).
 * False after replying 400 when it is given twice or holds a NUL (%00).
 */
bool aas_query(struct aas_req *r, const char *name, const char **val, struct aas_reply *out);
/*
 * "KEY=VALUE" pairs joined by '&', each key and value %-escaped (a filter's
 * form in a query parameter, decoded once already by the HTTP layer, as
 * GET /v1/sandboxes?metadata=... takes it: docs/rest.md). At most `max`
 * pairs and AAS_PAIRS_BYTES_MAX bytes. 0 with *out a NULL-terminated list of
 * "KEY=VALUE" (free with aas_pairs_free), or -1 with why filled. Pure.
 */
#define AAS_PAIRS_BYTES_MAX 8192
int aas_pairs_parse(const char *param, size_t max, char ***out, char *why, size_t whysize);
void aas_pairs_free(char **list);
/* A boolean query parameter: true/false or 1/0, else 400; absent leaves *val. */
bool aas_query_bool(struct aas_req *r, const char *name, bool *val, struct aas_reply *out);
/* A decimal integer from min to max (digits only), else 400; absent leaves *val. */
bool aas_query_uint(struct aas_req *r, const char *name, unsigned int min, unsigned int max, unsigned int *val,
                    struct aas_reply *out);

/*
 * For a handler that takes the connection over (a WebSocket): does the
 * request ask for an upgrade ("Connection: Upgrade" and an Upgrade)?
 */
bool aas_wants_upgrade(struct aas_req *r);
/*
 * The one reader of Host names (hostile input): is host (a port after ':'
 * ignored, as is one after domain's) a single label under domain, compared
 * without case? Then that label, lowercased, goes into label when it fits
 * (size with its NUL), else label is "": the host is still one under the
 * domain, for the caller to refuse. false for a host that is not, or is over
 * 255 bytes. The preview proxy and the E2B face's sandbox hosts both ask it.
 */
bool aas_host_label(char *label, size_t size, const char *host, const char *domain);

/* ---- sockets taken over (conn.c) ---- */

/* Send all of data on a socket (no SIGPIPE); 0, or -1 once the peer is gone or a send timed out. */
int aas_send_all(int fd, const void *data, size_t len);
/* Sends on fd that block longer than ms fail: a peer that stops reading cannot hold a thread. */
void aas_send_timeout(int fd, unsigned int ms);
/*
 * The part of a client's address one client is assumed to hold, as 16 bytes
 * (an IPv4 address, IPv4-mapped ones included, or an IPv6 address's /64; all
 * zeros for none): what the per-address connection cap and request rates
 * count by. `text`, if not NULL, gets the whole address printed.
 */
void aas_address_key(const struct sockaddr *sa, unsigned char key[16], char *text, size_t textsize);

/* ---- client addresses behind trusted proxies (forwarded.c; docs/operations.md) ---- */

/*
 * The address a request's limits and log count: the peer's, or, when the peer
 * is one of --trusted-proxies, the first untrusted address from the right of
 * the header they write (--forwarded-header), within forwarded.h's bounds; a
 * missing or malformed header gives the peer (logged at debug level). *out is
 * AF_INET, AF_INET6 or (no address: a UNIX socket) AF_UNSPEC.
 */
void aas_client_address(struct MHD_Connection *conn, struct sockaddr_storage *out);
/* The connection's peer, libmicrohttpd's (valid while it is open), or NULL. */
const struct sockaddr *aas_peer_address(struct MHD_Connection *conn);
/* Is this address one of --trusted-proxies? */
bool aas_proxy_trusted(const struct sockaddr *sa);
/* "X-Forwarded-For" or "Forwarded": the header the trusted proxies write. */
const char *aas_forwarded_header_name(void);
/* The last `max` lines of header `name` in the order received (pointers valid for the request); their count. */
size_t aas_forwarded_lines(struct MHD_Connection *conn, const char *name, const char **v, size_t max);

/* ---- clients per key (auth.c) ---- */

struct aas_cached_client;

/*
 * A client for the key, opened or cached. On success *client is usable until
 * aas_auth_release(*handle). Returns SAAS_OK or a saas_status (EAUTH ...).
 */
int aas_auth_get(struct aas_cached_client **handle, saas_client **client, const char *api_key);
void aas_auth_release(struct aas_cached_client *handle);
void aas_auth_ref(struct aas_cached_client *handle);
/*
 * Stop trusting this server's cached checks of the account's key whose
 * saas_key.prefix is key_prefix (NULL: all of the account's keys), at once:
 * for a key revoked, or an account disabled, through this process. Their
 * next request checks the store again. Other processes on the same store keep
 * theirs until their --key-cache-ttl runs out.
 */
void aas_auth_forget(const char *account_id, const char *key_prefix);
/*
 * The request rate (requests_per_second) of client's account, for requests
 * that act for an account without a key (the E2B data plane's sandbox
 * tokens): read from the store once per --key-cache-ttl, as a key's rate is
 * (a key's client holds its own), and read again after aas_auth_forget() of
 * the account. 0 (no limit) when it cannot be read, as before it was cached.
 */
unsigned int aas_auth_account_rate(saas_client *client);

/* ---- rates of the rooms' own (ratelimit.c) ---- */

/* A bucket holds this many seconds of its rate: the burst a client may send at once. */
#define AAS_RATE_BURST 2

/*
 * Take one request from the bucket `name` (len bytes) at `rate` per second:
 * 0 if there was one, else how many ms until there is. rate 0: no limit.
 */
int64_t aas_ratelimit_take(const char *name, size_t len, unsigned int rate, int64_t now_ms);
/*
 * Admit a request under the rates: a valid key's requests_per_second, else
 * the client address's `address_rate` (no key, a bad key). false after
 * replying 429 with Retry-After. Looks the key up (cached), but leaves
 * authenticating to the route. The front end calls it for every route but
 * an AAS_R_RATED one, whose room calls it (or takes a bucket of its own).
 */
bool aas_ratelimit_request(struct aas_req *r, struct aas_reply *out, unsigned int address_rate);

/*
 * A bucket holding `per_hour` requests (a burst of all of them) and
 * refilling that many an hour: 0 if it had one, else how many ms until it
 * does. Its own names: the rates of a name must not change between calls.
 */
int64_t aas_ratelimit_take_hourly(const char *name, size_t len, unsigned int per_hour, int64_t now_ms);

/* ---- counters (metrics.c) ---- */

/* A create answered rc (counted by result) after `seconds`. */
void aas_metrics_create(int rc, double seconds);
void aas_metrics_destroy(void);

#endif
