/*
 * What only the front end shares (http.c, conn.c, auth.c, ratelimit.c,
 * metrics.c, routes.c, app.c): no room includes this header.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_FRONT_H
#define AAS_FRONT_H

#include "config.h"
#include "server.h"

/* ---- the HTTP front end (http.c) ---- */

/* Bind and listen (port 0 picks one); the socket, or -1 after logging. */
int aas_http_bind(const struct aas_config *cfg, unsigned int *bound_port);
int aas_http_start(const struct aas_config *cfg, int listen_fd);
void aas_http_quiesce(void);
/* Requests in flight now. */
unsigned int aas_http_inflight(void);
void aas_http_stop(void);

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
/* For MHD_OPTION_ACCEPT_POLICY: refuses an address that holds per_ip_connections already. */
enum MHD_Result aas_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* For MHD_OPTION_NOTIFY_CONNECTION: tracks each connection from accept to close. */
void aas_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
/* Every call of the access handler: `first` with the headers, then each piece of body, then the end. */
void aas_conn_progress(struct MHD_Connection *c, bool first, size_t upload_size);
/* A request ended (completed: normally, so the connection may be kept alive for another). */
void aas_conn_request_done(struct MHD_Connection *c, bool completed);
/* Seconds a response's Keep-Alive header says an idle kept-alive connection is kept (conn.c says why half). */
unsigned int aas_conn_keep_alive_s(void);
/* Take a preview slot for this connection's request; false when all preview_connections are taken. */
bool aas_conn_preview_enter(struct MHD_Connection *c);
/* The trusted proxies of cfg (forwarded.c), for aas_client_address(); 0, or -1 after logging. */
int aas_forwarded_init(const struct aas_config *cfg);

/* ---- clients per key (auth.c) ---- */

void aas_auth_init(saas_engine *engine, unsigned int ttl_s);
void aas_auth_shutdown(void);
/* The key's request rate (its account's requests_per_second) and fingerprint, for the rate limiter. */
unsigned int aas_auth_rate(const struct aas_cached_client *handle);
const char *aas_auth_hash(const struct aas_cached_client *handle);
/* Is this key known good right now (cached, not expired)? No store lookup. */
bool aas_auth_known(const char *api_key);
/* Store lookups made, and unknown keys answered from the negative cache, since start (for /metrics). */
void aas_auth_counts(uint64_t *lookups, uint64_t *negative_hits);

/* ---- request rates (ratelimit.c) ---- */

/* The per-second buckets and a request's admission are server.h's: a room that rates its own (e2b/) takes them. */
/* How many ms until the bucket `name` holds a request (0: now). Takes nothing; one never seen is full. */
int64_t aas_ratelimit_peek(const char *name, size_t len, unsigned int rate, int64_t now_ms);
/*
 * Admit a preview request under its client address's `rate`, a bucket of its
 * own: a page in a preview loads many assets at once, which the API's
 * address rate would refuse. false after replying 429 with Retry-After.
 */
bool aas_ratelimit_preview(struct aas_req *r, struct aas_reply *out, unsigned int rate);

/* ---- metrics (metrics.c) ---- */

/* The engine whose live sandboxes /metrics counts at each scrape. */
void aas_metrics_init(saas_engine *engine);
/* The engine's VM host heartbeat (ms): a host counts as up when reached within three of them. */
void aas_metrics_host_heartbeat(unsigned int ms);
void aas_metrics_request(const char *route, const char *method, unsigned int status, double seconds);
/* GET /metrics: the counters and the engine's gauges in Prometheus's text format. */
void aas_h_metrics(struct aas_req *r, struct aas_reply *out);

/* ---- the routes (routes.c) ---- */

/* The route table, for the router and for `aas-server routes`. */
extern const struct aas_route aas_routes[];
extern const size_t aas_nroutes;

#endif
