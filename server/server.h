/*
 * aas-server: the REST API v1 over libsaas's public API.
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

/* ---- configuration (config.c) ---- */

struct aas_config {
	char *listen_host;         /* "127.0.0.1" */
	unsigned int listen_port;  /* 8080; 0 picks a free port (tests read it from the log) */
	char *state_dir;
	char *store_url;
	bool store_url_argv;       /* store_url came from --store: every local user can read it in /proc */
	char *image;
	char *libvirt_uri;
	char *driver_config;       /* --driver-config: more driver options, appended; NULL: none */
	char *image_dir;
	int templates;             /* clones of snapshot templates: -1 the driver's default (on), 0 off, 1 on */
	char *preview_domain;      /* "localhost" */
	char *preview_url;         /* engine template; NULL: derived from domain and port */
	int log_level;             /* SAAS_LOG_* */
	unsigned int key_ttl_s;    /* how long a cached client is trusted (revocation delay) */
	unsigned int grace_s;      /* how long shutdown waits for in-flight requests */
	unsigned int max_connections;
	unsigned int header_timeout_s;    /* a request's headers must arrive within this (conn.c) */
	unsigned int body_timeout_s;      /* and its body within this, plus 1 s per AAS_BODY_MIN_RATE bytes */
	unsigned int per_ip_connections;  /* connections one address (IPv6: one /64) may hold at once */
	unsigned int preview_connections; /* preview requests at once; the rest of max_connections is the API's */
	unsigned int connection_stack_kb; /* each connection thread's stack (conn.c) */
	char *port_file;           /* write the bound port here once listening (tests) */
	char *mcp_origins;         /* extra Origins allowed on /v1/mcp, comma-separated ("*": any); NULL: none */
	char *pool;                /* warm pools, "SIZE=N,..." (the engine checks it); NULL: none */
	char *e2b_templates;       /* the E2B face's templates, "NAME=SIZE[:IMAGE],..." (server/e2b); NULL: its default */
	char *e2b_secret_file;     /* the E2B face's token secret; NULL: random at each start */
	char *docs_viewer;         /* where /docs/api's viewer is installed; NULL: next to the executable (pages.c) */
	/* Tenant limits: every account's defaults (0: the library's); `aas-server limits` sets one account's. */
	unsigned int max_sandboxes;
	unsigned int max_executions;
	unsigned int max_transfers;
	unsigned int creates_per_minute;
	unsigned int requests_per_second;  /* per API key */
	unsigned int retention_s;          /* finished executions are kept this long */
	/* Requests per second per client address without a valid key (MCP discovery, previews, bad keys). */
	unsigned int address_rate;
	unsigned int preview_rate;     /* requests per second per client address to previews */
	unsigned int min_free_mb;  /* creates refused below this free on the state filesystem; 0: the engine's default */
	unsigned int disk_budget_gb; /* creates refused past this disk held by sandboxes; 0: the engine's default */
	unsigned int lease_ttl_s;  /* the engine's leases in the store; 0: the engine's default (15 s) */
	unsigned int host_heartbeat_s; /* how often the VM hosts are asked what they have; 0: the engine's default */
	unsigned int host_grace_s;     /* a VM host unreached this long is lost; 0: the engine's default */
	unsigned int mcp_sessions;     /* MCP sessions the store keeps; 0: the engine's default */
	/* Micro-dollars per GiB-hour a paused sandbox costs: 0 the engine's default, SAAS_ENGINE_PAUSED_PRICE_FREE free. */
	int64_t paused_price;
	/* The preview proxy's bounds on a guest's server, in seconds (AAS_PREVIEW_*_TIMEOUT_DEFAULT). */
	unsigned int preview_connect_timeout_s;    /* to open the tunnel */
	unsigned int preview_first_byte_timeout_s; /* from the request sent to the answer's whole head */
	unsigned int preview_idle_timeout_s;       /* no byte either way, in a body or a WebSocket */
	/* Accounts for people and their pages (people.c). */
	int signup;                      /* AAS_SIGNUP_*: who may make an account on /signup */
	int secure_cookies;              /* 1 behind TLS: Secure "__Host-" cookies, https Origins only */
	unsigned int session_idle_s;     /* a session not used this long ends */
	unsigned int session_max_s;      /* and every session ends this long after log-in */
	unsigned int login_attempts;     /* log-ins and sign-ups one account may try at once (refilled hourly) */
	unsigned int max_password_hashes; /* Argon2id hashes at once (64 MiB each); 0: the CPUs (people.c) */
	unsigned int signups_per_hour;   /* sign-ups taken from everyone together, per hour */
	int signup_credit;               /* AAS_SIGNUP_CREDIT_*: when an account made on /signup gets its credit */
	/* Terminals (routes_pty.c): AAS_PTY_*_DEFAULT. */
	unsigned int pty_per_sandbox;
	unsigned int pty_per_account;
	unsigned int pty_frame_max;      /* bytes */
	unsigned int pty_idle_timeout_s;
	unsigned int pty_write_timeout_s;
};

enum { AAS_SIGNUP_CLOSED, AAS_SIGNUP_INVITE, AAS_SIGNUP_OPEN };
#define AAS_SESSION_IDLE_DEFAULT 28800    /* 8 hours */
#define AAS_SESSION_MAX_DEFAULT 604800    /* 7 days */
#define AAS_LOGIN_ATTEMPTS_DEFAULT 10
/* Sign-ups every client together may make in an hour: the free credit they give away is bounded. */
#define AAS_SIGNUPS_PER_HOUR_DEFAULT 100
/* An account made on /signup gets the new-account credit at once, or (open sign-up) when approved. */
enum { AAS_SIGNUP_CREDIT_AUTO, AAS_SIGNUP_CREDIT_APPROVAL };

/*
 * The front end's defaults (conn.c has the reasoning): connections in all,
 * per address, and each one's thread stack. 8192 x 1 MiB bounds the stacks at
 * 8 GiB of address space, of which an idle connection touches a few pages;
 * 342 addresses are needed to fill it. 24 per address holds what one
 * account may legitimately keep open (16 streamed execs, a browser's 6) with
 * 2 to spare. 1 MiB holds jansson's deepest parse (2048 levels, about
 * 640 KiB) with room to spare: an escaped QEMU or a guest may send that, and
 * a stack overflow would end the whole server.
 */
#define AAS_MAX_CONNECTIONS_DEFAULT 8192
#define AAS_PER_IP_CONNECTIONS_DEFAULT 24
#define AAS_CONNECTION_STACK_KB_DEFAULT 1024
#define AAS_CONNECTION_STACK_KB_MIN 256
#define AAS_CONNECTION_STACK_KB_MAX 65536
#define AAS_HEADER_TIMEOUT_DEFAULT 10     /* seconds */
#define AAS_BODY_TIMEOUT_DEFAULT 60       /* seconds, plus 1 per AAS_BODY_MIN_RATE bytes */
/* Default of --address-requests-per-second. */
#define AAS_ADDRESS_RATE_DEFAULT 20
/* Default of --preview-requests-per-second. */
#define AAS_PREVIEW_RATE_DEFAULT 100

#define AAS_PREVIEW_CONNECT_TIMEOUT_DEFAULT 10
#define AAS_PREVIEW_FIRST_BYTE_TIMEOUT_DEFAULT 60
#define AAS_PREVIEW_IDLE_TIMEOUT_DEFAULT 300
#define AAS_PREVIEW_TIMEOUT_MAX 86400

/* Fill from the environment, then argv; 0, or -1 after printing a one-line error. */
int aas_config_parse(struct aas_config *cfg, int argc, char **argv);
void aas_config_free(struct aas_config *cfg);
/* "uri=... images=..." for the libvirt driver, or NULL; free(). */
char *aas_config_driver_string(const struct aas_config *cfg);
const char *aas_config_usage(void);
/*
 * Does a store URL carry a password (postgresql://user:PASSWORD@... or a
 * password= parameter)? On a command line, every local uid, the QEMUs'
 * included, can read it in /proc/PID/cmdline.
 */
bool aas_store_url_has_password(const char *url);
/* The warning said at start when it does (docs/operations.md: PGPASSFILE, PGPASSWORD, AAS_STORE_URL). */
#define AAS_STORE_PASSWORD_WARNING                                                                                 \
	"--store carries a password, which every local user (each VM's QEMU too) can read in /proc: give it in "   \
	"PGPASSFILE or PGPASSWORD instead, or the whole URL in AAS_STORE_URL (docs/operations.md)"

/* ---- logging (main.c) ---- */

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

/* ---- the program (app.c) ---- */

/* Everything main() does (in-process tests set their VM driver first: testing.h). */
int aas_main(int argc, char **argv);
int aas_admin_main(int argc, char **argv);
/*
 * What aas_main does before it waits for a signal, for in-process tests (the
 * fuzzers): bind, open the engine and serve in the background. cfg must
 * outlive the server. 0 with *engine and *port set, or -1 after logging; call
 * aas_stop() either way.
 */
int aas_start(const struct aas_config *cfg, saas_engine **engine, unsigned int *port);
/* Stop serving (requests in flight end) and free what aas_start made, the engine included. */
void aas_stop(saas_engine *engine);

/* ---- clients per key (auth.c) ---- */

struct aas_cached_client;

void aas_auth_init(saas_engine *engine, unsigned int ttl_s);
void aas_auth_shutdown(void);
/*
 * A client for the key, opened or cached. On success *client is usable until
 * aas_auth_release(*handle). Returns SAAS_OK or a saas_status (EAUTH ...).
 */
int aas_auth_get(struct aas_cached_client **handle, saas_client **client, const char *api_key);
void aas_auth_release(struct aas_cached_client *handle);
void aas_auth_ref(struct aas_cached_client *handle);
/* The key's request rate (its account's requests_per_second) and fingerprint, for the rate limiter. */
unsigned int aas_auth_rate(const struct aas_cached_client *handle);
const char *aas_auth_hash(const struct aas_cached_client *handle);
/* Is this key known good right now (cached, not expired)? No store lookup. */
bool aas_auth_known(const char *api_key);
/* Store lookups made, and unknown keys answered from the negative cache, since start (for /metrics). */
void aas_auth_counts(uint64_t *lookups, uint64_t *negative_hits);

/* ---- request rates (ratelimit.c) ---- */

/* A bucket holds this many seconds of its rate: the burst a client may send at once. */
#define AAS_RATE_BURST 2

/*
 * Take one request from the bucket `name` (len bytes) at `rate` per second:
 * 0 if there was one, else how many ms until there is. rate 0: no limit.
 */
int64_t aas_ratelimit_take(const char *name, size_t len, unsigned int rate, int64_t now_ms);
/*
 * The same for a slow rate: a bucket holding `per_hour` requests (a burst of
 * all of them) and refilling that many an hour. Its own names: the rates
 * of a name must not change between calls.
 */
int64_t aas_ratelimit_take_hourly(const char *name, size_t len, unsigned int per_hour, int64_t now_ms);
/* How many ms until the bucket `name` holds a request (0: now). Takes nothing; one never seen is full. */
int64_t aas_ratelimit_peek(const char *name, size_t len, unsigned int rate, int64_t now_ms);
struct aas_req;
struct aas_reply;
/*
 * Admit a request under the rates: a valid key's requests_per_second, else
 * the client address's `address_rate` (no key, a bad key). false after
 * replying 429 with Retry-After. Looks the key up (cached), but leaves
 * authenticating to the route.
 */
bool aas_ratelimit_request(struct aas_req *r, struct aas_reply *out, unsigned int address_rate);
/*
 * Admit a preview request under its client address's `rate`, a bucket of its
 * own: a page in a preview loads many assets at once, which the API's
 * address rate would refuse. false after replying 429 with Retry-After.
 */
bool aas_ratelimit_preview(struct aas_req *r, struct aas_reply *out, unsigned int rate);

/* ---- JSON: the shapes are lib/wire's (wire.h); the money parser is json.c's ---- */

/* The largest dollar amount aas_parse_usd takes: a billion dollars. */
#define AAS_USD_MAX 1000000000LL
/* Parse a decimal dollar amount ("12.5", at most AAS_USD_MAX) into micro-dollars exactly; 0 or -1. */
int aas_parse_usd(int64_t *micro, const char *s);

/* ---- HTTP (http.c) ---- */

#define AAS_JSON_BODY_MAX ((size_t)24 << 20) /* 16 MiB of stdin as base64, and room */
/* The largest body of a request without a valid key on an AAS_R_KEY route (what MCP discovery needs, many times). */
#define AAS_ANON_BODY_MAX ((size_t)64 << 10)

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

/* Bind and listen (port 0 picks one); the socket, or -1 after logging. */
int aas_http_bind(const struct aas_config *cfg, unsigned int *bound_port);
int aas_http_start(const struct aas_config *cfg, int listen_fd);
void aas_http_quiesce(void);
/* Requests in flight now. */
unsigned int aas_http_inflight(void);
void aas_http_stop(void);

/* Replies. */
enum MHD_Result aas_queue(struct aas_req *r, struct aas_reply *rep);
void aas_reply_json(struct aas_reply *out, unsigned int status, json_t *body); /* steals body */
/*
 * Like aas_reply_json for an object with long strings (an execution's output):
 * written as it is sent, never whole in memory (json_stream.c). Steals body.
 */
void aas_reply_json_stream(struct aas_reply *out, unsigned int status, json_t *body);
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
/* From a saas_status and the thread's saas_error_last() (SAAS_ELIMIT: aas_reply_limit). */
void aas_reply_saas(struct aas_reply *out, int rc);
/* The same from a status, its error class and message taken earlier (on another thread). */
void aas_reply_failure(struct aas_reply *out, int rc, int klass, const char *msg);
unsigned int aas_status_for(int rc);

/*
 * Has the client closed its connection (or its sending half, or reset it)?
 * For a handler that made something only its answer would tell of: a create
 * whose client left is destroyed rather than left running for nobody.
 */
bool aas_client_gone(struct aas_req *r);

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
/* A boolean query parameter: true/false or 1/0, else 400; absent leaves *val. */
bool aas_query_bool(struct aas_req *r, const char *name, bool *val, struct aas_reply *out);
/* A decimal integer from min to max (digits only), else 400; absent leaves *val. */
bool aas_query_uint(struct aas_req *r, const char *name, unsigned int min, unsigned int max, unsigned int *val,
                    struct aas_reply *out);

/* ---- route handlers ---- */

void aas_h_healthz(struct aas_req *r, struct aas_reply *out);
void aas_h_metrics(struct aas_req *r, struct aas_reply *out);
void aas_h_openapi(struct aas_req *r, struct aas_reply *out);
void aas_h_service(struct aas_req *r, struct aas_reply *out);
void aas_h_account(struct aas_req *r, struct aas_reply *out);
void aas_h_usage(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_create(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_list(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_get(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_destroy(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_extend(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_fork(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_pause(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_resume(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_network_set(struct aas_req *r, struct aas_reply *out);
void aas_h_exec(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_get(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_events(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_stdin(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_signal(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_cancel(struct aas_req *r, struct aas_reply *out);
void aas_h_execution_list(struct aas_req *r, struct aas_reply *out);
void aas_h_port_expose(struct aas_req *r, struct aas_reply *out);
void aas_h_port_list(struct aas_req *r, struct aas_reply *out);
void aas_h_port_unexpose(struct aas_req *r, struct aas_reply *out);
void aas_h_file_get(struct aas_req *r, struct aas_reply *out);
void aas_h_file_put(struct aas_req *r, struct aas_reply *out);
int aas_file_put_start(struct aas_req *r, struct aas_reply *out);
int aas_file_put_data(struct aas_req *r, const char *data, size_t len);

void aas_h_mcp_post(struct aas_req *r, struct aas_reply *out);
void aas_h_mcp_delete(struct aas_req *r, struct aas_reply *out);

/* The route table, for the router and for `aas-server routes`. */
extern const struct aas_route aas_routes[];
extern const size_t aas_nroutes;

/* The embedded OpenAPI document (openapi_data.c, generated). */
extern const char aas_openapi_json[];

/* ---- the service's pages (pages.c) ---- */

/* A file built into the binary (embed_files.cmake): its path in the source tree, its bytes (NUL-terminated). */
struct aas_embedded_file {
	const char *path;
	const char *text;
	size_t len;
};
/* README.md, the docs/ pages and bench/RESULTS.md, by their path in the repository (docs_data.c, generated). */
extern const struct aas_embedded_file aas_embedded_docs[];
extern const size_t aas_embedded_docs_count;
/* server/static/: the style sheet and the viewer's start, by file name (static_data.c, generated). */
extern const struct aas_embedded_file aas_embedded_static[];
extern const size_t aas_embedded_static_count;

/*
 * Render the docs' Markdown once and find the API viewer's directory. 0, or -1
 * after logging. aas_pages_free() at shutdown.
 */
int aas_pages_init(const struct aas_config *cfg);
void aas_pages_free(void);
void aas_h_page_home(struct aas_req *r, struct aas_reply *out);
void aas_h_page_docs(struct aas_req *r, struct aas_reply *out);
void aas_h_page_doc(struct aas_req *r, struct aas_reply *out);
void aas_h_page_api(struct aas_req *r, struct aas_reply *out);
void aas_h_page_limits(struct aas_req *r, struct aas_reply *out);
void aas_h_page_security(struct aas_req *r, struct aas_reply *out);
void aas_h_static(struct aas_req *r, struct aas_reply *out);
void aas_h_static_viewer(struct aas_req *r, struct aas_reply *out);

/* ---- service information (routes_account.c) ---- */

/*
 * Fetch the engine's service card (sizes, prices, limits, default image) once,
 * after the engine opens: it does not change while the engine runs. 0, or -1
 * after logging. aas_service_free() releases it at shutdown.
 */
int aas_service_set(const struct aas_config *cfg, unsigned int port, saas_engine *engine);
void aas_service_free(void);
/* The card aas_service_set fetched (the pages show it). */
const saas_engine_info *aas_service_info(void);

/* ---- MCP over Streamable HTTP (mcp_http.c) ---- */

/* The engine get_service_info reads, and the bound port (the loopback Origins allowed). */
void aas_mcp_http_init(saas_engine *engine, const struct aas_config *cfg, unsigned int port);
void aas_mcp_http_free(void);

/* ---- accounts for people and their pages (people.c, routes_people.c, routes_dashboard.c) ---- */

/* The largest form a page posts: an e-mail, a password, a name, a token. */
#define AAS_FORM_BODY_MAX ((size_t)16 << 10)
/* A password: at least this long, and at most the other (Argon2 takes any length; the bound is ours). */
#define AAS_PASSWORD_MIN 10
#define AAS_PASSWORD_MAX 1024

/* The engine and options the pages use; 0, or -1 after logging (libsodium would not start). */
int aas_people_init(saas_engine *engine, const struct aas_config *cfg);
/*
 * The bound on password hashes at once (--max-password-hashes): each takes
 * 64 MiB. Its default is the machine's CPUs (at most AAS_PASSWORD_HASHES_MAX).
 */
#define AAS_PASSWORD_HASHES_MAX 1024
unsigned int aas_password_hashes_default(void);
/* How long a log-in or sign-up waits for a hash's turn before 503 (as many may wait as may run). */
#define AAS_HASH_WAIT_MS 1000
/*
 * Take a turn to hash (within --max-password-hashes, waiting at most
 * AAS_HASH_WAIT_MS): true, then aas_hash_leave() after; false when the server
 * is busy (aas_reply_hash_busy() says so).
 */
bool aas_hash_enter(void);
void aas_hash_leave(void);
/* 503 with Retry-After: every password hash's turn is taken. */
void aas_reply_hash_busy(struct aas_req *r, struct aas_reply *out);
/* Argon2id (libsodium's crypto_pwhash_str, its interactive limits) into out; 0, or -1 (out of memory). */
int aas_password_hash(char out[SAAS_PASSWORD_HASH_MAX + 1], const char *password);
bool aas_password_verify(const char *hash, const char *password);

/* A parsed form: fields point into its own copy of the body. */
#define AAS_FORM_FIELDS_MAX 16
struct aas_form {
	char *buf;
	size_t len;                      /* of buf, whose fields are NUL-separated once parsed */
	size_t n;
	const char *name[AAS_FORM_FIELDS_MAX];
	const char *value[AAS_FORM_FIELDS_MAX];
};
/*
 * Parse an application/x-www-form-urlencoded body of len bytes into f:
 * SAAS_OK, SAAS_EINVAL (a NUL, a field given twice, more than
 * AAS_FORM_FIELDS_MAX, a bad %-escape or "%00") with *why the page's words for
 * it, or SAAS_ENOMEM. f is empty on failure; aas_form_free() it either way.
 */
int aas_form_decode(struct aas_form *f, const char *body, size_t len, const char **why);
/* Parse the request's form body; false after replying 400 (a field twice, too many, a NUL, bad %-escapes). */
bool aas_form_parse(struct aas_req *r, struct aas_reply *out, struct aas_form *f);
/* A field's value, or NULL when absent. */
const char *aas_form_get(const struct aas_form *f, const char *name);
void aas_form_free(struct aas_form *f);

/* Who is looking at a page: the session's user, its account's client and the session's CSRF token. */
struct aas_viewer {
	saas_user *user;
	saas_client *client;
	char csrf[65];
};
/*
 * The viewer of a page from its session cookie. false when there is none
 * (or it ended): then, if `required`, a 303 to /login has been replied.
 */
bool aas_viewer_get(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, bool required);
void aas_viewer_free(struct aas_viewer *v);
/* The page shell's description of the viewer (v may be NULL: nobody signed in). */
struct aas_page;
void aas_viewer_page(const struct aas_viewer *v, struct aas_page *page, const char *title, const char *nav);
/*
 * May this state-changing form post be acted on? Its Origin (or
 * Sec-Fetch-Site) must be this server's own, and its "csrf" field `token`.
 * false after replying 403.
 */
bool aas_form_allowed(struct aas_req *r, struct aas_reply *out, const struct aas_form *f, const char *token);
/* 303 See Other to `location` (a path of ours), the end of every form post that worked. */
void aas_reply_redirect(struct aas_reply *out, const char *location);
/* The session token the request's cookie holds, or NULL. */
const char *aas_session_token(struct aas_req *r);
/* The CSRF token of a session: a hash of its token, domain-separated from the hash the store keeps. */
void aas_session_csrf(char out[65], const char *token);
/* Set (token non-NULL, for max_age_s) or clear the session cookie on a reply. */
void aas_session_cookie(struct aas_reply *out, const char *token, unsigned int max_age_s);
/* The "before log-in" token of the sign-up and log-in forms (a cookie of its own): read, or make and set. */
bool aas_prelogin_token(struct aas_req *r, char out[65], bool make);
void aas_prelogin_cookie(struct aas_reply *out, const char *token);
/* Take one log-in attempt for this address and e-mail; false after a 429 page. */
bool aas_login_admit(struct aas_req *r, struct aas_reply *out, const char *email);
const struct aas_config *aas_people_config(void);
saas_engine *aas_people_engine(void);
/* An error page (or a form shown again) with the message in a role="alert" paragraph. */
void aas_reply_page_error(struct aas_req *r, struct aas_reply *out, unsigned int status, const char *title,
                          const char *message);

void aas_h_signup_page(struct aas_req *r, struct aas_reply *out);
void aas_h_signup(struct aas_req *r, struct aas_reply *out);
void aas_h_login_page(struct aas_req *r, struct aas_reply *out);
void aas_h_login(struct aas_req *r, struct aas_reply *out);
void aas_h_logout(struct aas_req *r, struct aas_reply *out);
void aas_h_dashboard(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_keys(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_key_create(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_key_revoke(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox_destroy(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox_extend(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_usage(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_operator(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_op_credit(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_op_disable(struct aas_req *r, struct aas_reply *out);

/* ---- connection policy (conn.c) ---- */

/*
 * Start and stop the watchdog that cuts connections past their header or body
 * deadline. Start also fits the front end to the process's limits (raising
 * RLIMIT_NOFILE's soft limit to its hard one when short) and sets *limit to
 * the connections to take at once: max_connections, or fewer when even the
 * hard limit on open files cannot hold them (logged).
 */
int aas_conn_start(const struct aas_config *cfg, unsigned int *limit);
void aas_conn_stop(void);
/*
 * The part of a client's address one client is assumed to hold, as 16 bytes
 * (an IPv4 address, IPv4-mapped ones included, or an IPv6 address's /64; all
 * zeros for none): what the per-address connection cap and request rates
 * count by. `text`, if not NULL, gets the whole address printed.
 */
void aas_address_key(const struct sockaddr *sa, unsigned char key[16], char *text, size_t textsize);
/* For MHD_OPTION_ACCEPT_POLICY: refuses an address that holds per_ip_connections already. */
enum MHD_Result aas_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* For MHD_OPTION_NOTIFY_CONNECTION: tracks each connection from accept to close. */
void aas_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
/* Every call of the access handler: `first` with the headers, then each piece of body, then the end. */
void aas_conn_progress(struct MHD_Connection *c, bool first, size_t upload_size);
/* A request ended (completed: normally, so the connection may be kept alive for another). */
void aas_conn_request_done(struct MHD_Connection *c, bool completed);
/* Take a preview slot for this connection's request; false when all preview_connections are taken. */
bool aas_conn_preview_enter(struct MHD_Connection *c);

/* ---- a guest's HTTP/1.x answer (preview_http.c): pure, in place ---- */

enum aas_http_body {
	AAS_HTTP_BODY_NONE,     /* 1xx, 204, 304 */
	AAS_HTTP_BODY_LENGTH,   /* Content-Length bytes */
	AAS_HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
	AAS_HTTP_BODY_CLOSE     /* until the server closes */
};

struct aas_http_field {
	char *name, *value;     /* into the parsed head; names as sent, values unfolded and trimmed */
};

struct aas_http_head {
	unsigned int status;
	enum aas_http_body body;
	int64_t length;         /* Content-Length, or -1 */
	size_t nfields;
	struct aas_http_field *fields; /* every field line but those that are none (no colon, no token) */
};

/*
 * Where the head in buf[0..len) ends (the length up to and with its empty
 * line), 0 while it has not ended. *from keeps the scan's place between calls
 * on a growing buffer; start it at 0.
 */
size_t aas_http_head_end(const char *buf, size_t len, size_t *from);
/*
 * Parse a whole head (aas_http_head_end's length of buf), in place. 0, or -1
 * with *why saying what made it unreadable (static text). Free with aas_http_head_free.
 */
int aas_http_head_parse(char *buf, size_t len, struct aas_http_head *h, const char **why);
void aas_http_head_free(struct aas_http_head *h);

/* A chunked body being decoded; start zeroed. */
struct aas_http_chunked {
	int state;
	unsigned int digits;
	size_t ext;
	bool cr, semi;
	uint64_t left;
};
/*
 * Decode the next len bytes in place: the payload's length at buf, or -1 for
 * bad framing (after the payload that came before it in the same bytes).
 */
ssize_t aas_http_chunked(struct aas_http_chunked *c, char *buf, size_t len);
/* Has the last chunk (and its trailer) gone by? What follows it is ignored. */
bool aas_http_chunked_done(const struct aas_http_chunked *c);

/* ---- preview proxy (preview.c) ---- */

/*
 * The engine previews connect through (saas_engine_preview_find: no key, the
 * exposure's name is the capability) and the proxy's timeouts; starts the
 * thread that closes tunnels whose exposure ended. 0, or -1 after logging.
 */
int aas_preview_init(saas_engine *engine, const struct aas_config *cfg);
/* Close every tunnel and stop that thread; before the engine is freed. */
void aas_preview_shutdown(void);
/*
 * Does Host name a preview, a single label under `domain`? Then the label,
 * lowercased, goes into name if it has the length of an exposure's name ("" if
 * not: such a host is a preview that does not exist, never the API).
 */
bool aas_preview_match(const char *host, const char *domain, char name[SAAS_PREVIEW_NAME_LEN + 1]);
/* May a guest's Set-Cookie header (its value) reach a browser that asked `host` (lowercase, no port)? */
bool aas_preview_cookie_ok(const char *set_cookie, const char *host);
/*
 * Is a cookie of a request's Cookie header (its "name=value", len bytes) one of
 * this server's own, "aas_*" or "__Host-aas_*" (--secure-cookies)? Those never
 * reach a guest.
 */
bool aas_preview_cookie_ours(const char *pair, size_t len);
/* Called for every call of the access handler on a preview request. */
enum MHD_Result aas_preview_handle(struct aas_req *r, const char *name, const char *upload, size_t *upload_size);
void aas_preview_free(struct aas_req *r);
/*
 * Close the tunnels (requests in flight, WebSockets) to a sandbox's port, or
 * to every port of it when port is 0: its exposure or the sandbox just ended.
 */
void aas_preview_revoke(const char *sandbox_id, unsigned int port);

/* Pieces of the proxy other upgrades use: does the request ask for one ("Connection: Upgrade" and an Upgrade)? */
bool aas_wants_upgrade(struct aas_req *r);
/* Send all of data on a socket (no SIGPIPE); 0, or -1 once the peer is gone or a send timed out. */
int aas_send_all(int fd, const void *data, size_t len);
/* Sends on fd that block longer than ms fail: a peer that stops reading cannot hold a thread. */
void aas_send_timeout(int fd, unsigned int ms);

/* ---- terminals (routes_pty.c) ---- */

/* The bounds' defaults (struct aas_config's pty_* and --pty-*; docs/operations.md). */
#define AAS_PTY_PER_SANDBOX_DEFAULT 4      /* terminals open at once per sandbox; more get 429 "pty_sessions" */
#define AAS_PTY_PER_ACCOUNT_DEFAULT 16     /* ... and per account */
#define AAS_PTY_FRAME_MAX_DEFAULT (64u << 10) /* the largest frame a client may send; larger closes with 1009 */
#define AAS_PTY_FRAME_MAX_MAX (16u << 20)
#define AAS_PTY_IDLE_TIMEOUT_DEFAULT 3600  /* seconds silent both ways before a close with 1001 */
#define AAS_PTY_WRITE_TIMEOUT_DEFAULT 30   /* seconds a shell may take no input before a close with 1008 */

/* Take the bounds from cfg (borrowed until aas_stop), before the server serves. */
void aas_pty_init(const struct aas_config *cfg);
void aas_h_pty(struct aas_req *r, struct aas_reply *out);
/* End every terminal (close 1001) as the server stops: they would hold the drain for an hour. */
void aas_pty_shutdown(void);

/* ---- metrics (metrics.c) ---- */

/* The engine whose live sandboxes /metrics counts at each scrape. */
void aas_metrics_init(saas_engine *engine);
/* The engine's VM host heartbeat (ms): a host counts as up when reached within three of them. */
void aas_metrics_host_heartbeat(unsigned int ms);
void aas_metrics_request(const char *route, const char *method, unsigned int status, double seconds);
/* A create through the REST API answered rc (counted by result) after `seconds`. */
void aas_metrics_create(int rc, double seconds);
void aas_metrics_destroy(void);
char *aas_metrics_render(size_t *len);

#endif
