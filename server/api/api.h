/*
 * The REST API v1 (api/): what the rest of the server may call of it. Its
 * routes are in routes.c's table; openapi.json documents them.
 *
 *   account.c      /v1/service, /v1/account, /v1/usage, /healthz, /openapi.json
 *   sandboxes.c    sandboxes: create, list, get, destroy, extend, fork, pause,
 *                  resume, network; ports
 *   exec.c         executions: run, follow, stdin, signals, cancel, list
 *   files.c        files in and out of a sandbox, streamed
 *   files_ops.c    directories, removal and renames in a sandbox
 *   pty.c          terminals over a WebSocket
 *   code.c         code contexts: runs (JSON or events) and contexts
 *   json_stream.c  JSON replies written as they are sent (internal.h)
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_API_H
#define AAS_API_H

#include "config.h"
#include "pipe.h"
#include "server.h"

/* ---- the service's card (account.c) ---- */

/*
 * Fetch the engine's service card (sizes, prices, limits, default image) once,
 * after the engine opens: it does not change while the engine runs. 0, or -1
 * after logging. aas_service_free() releases it at shutdown.
 */
int aas_service_set(const struct aas_config *cfg, unsigned int port, saas_engine *engine);
void aas_service_free(void);
/* The card aas_service_set fetched (the pages show it). */
const saas_engine_info *aas_service_info(void);

/*
 * Readiness (GET /readyz): from what one probe found (the store's status for a
 * list of the VM hosts and how long it took, the hosts when it answered), the
 * body and whether this server can serve. Ready when the store answered
 * within AAS_READY_STORE_MS and, with hosts registered, one is not lost and
 * was reached within three heartbeats (the local driver alone is open once the
 * engine is). Pure, for unit.ready. *body is the caller's.
 */
#define AAS_READY_STORE_MS 2000
#define AAS_READY_CACHE_MS 1000
bool aas_readiness(json_t **body, int store_rc, int64_t store_ms, const saas_host_list *hosts, int64_t now_ms,
                   unsigned int heartbeat_ms);

/* The embedded OpenAPI document (openapi_data.c, generated; the pages show it too). */
extern const char aas_openapi_json[];

/* ---- terminals (pty.c) ---- */

/* Take the bounds from cfg (borrowed until aas_stop), before the server serves. */
void aas_pty_init(const struct aas_config *cfg);
/* End every terminal (close 1001) as the server stops: they would hold the drain for an hour. */
void aas_pty_shutdown(void);
/*
 * The terminal of GET /v1/sandboxes/{id}/pty (r->route_id) for a caller
 * authenticated otherwise (the dashboard's session, r->account_id set):
 * the same checks, bounds and bridge, acting through `client`. `owned`
 * (NULL, or `client` itself) is freed with the terminal, or before this
 * returns when it is refused.
 */
void aas_pty_serve(struct aas_req *r, struct aas_reply *out, saas_client *client, saas_client *owned);

/* ---- the routes' handlers ---- */

void aas_h_healthz(struct aas_req *r, struct aas_reply *out);
void aas_h_readyz(struct aas_req *r, struct aas_reply *out);
void aas_h_openapi(struct aas_req *r, struct aas_reply *out);
void aas_h_service(struct aas_req *r, struct aas_reply *out);
void aas_h_account(struct aas_req *r, struct aas_reply *out);
void aas_h_usage(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_create(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_list(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_get(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_metrics(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_destroy(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_extend(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_fork(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_pause(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_resume(struct aas_req *r, struct aas_reply *out);
void aas_h_sandbox_network_set(struct aas_req *r, struct aas_reply *out);
void aas_h_exec(struct aas_req *r, struct aas_reply *out);
void aas_h_code_run(struct aas_req *r, struct aas_reply *out);
void aas_h_code_context_list(struct aas_req *r, struct aas_reply *out);
void aas_h_code_context_create(struct aas_req *r, struct aas_reply *out);
void aas_h_code_context_restart(struct aas_req *r, struct aas_reply *out);
void aas_h_code_context_delete(struct aas_req *r, struct aas_reply *out);
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
/* Directories, removal and renames (files_ops.c). */
void aas_h_file_mkdir(struct aas_req *r, struct aas_reply *out);
void aas_h_file_delete(struct aas_req *r, struct aas_reply *out);
void aas_h_file_move(struct aas_req *r, struct aas_reply *out);
int aas_file_put_start(struct aas_req *r, struct aas_reply *out);
int aas_file_put_data(struct aas_req *r, const char *data, size_t len);

void aas_h_pty(struct aas_req *r, struct aas_reply *out);

/* ---- files streamed for another room (files.c): the dashboard's download; its upload is pipe.h's ---- */

/*
 * Reply with the file at `path` of the sandbox r->route_id, streamed as
 * GET /v1/sandboxes/{id}/files sends it (200 application/octet-stream), or
 * with the error that came before its first byte. `hold` keeps `client`
 * open: release(hold) is called once the transfer ends, or before this
 * returns when it fails.
 */
void aas_file_send(struct aas_req *r, struct aas_reply *out, saas_client *client, const char *path, void *hold,
                   void (*release)(void *hold));

#endif
