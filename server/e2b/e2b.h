/*
 * The E2B-compatible face of aas-server (docs/e2b.md): E2B's REST API under
 * /e2b and its in-sandbox daemon's protocol under /e2b-sandbox, each call
 * made a call of libsaas's public API on the server's one engine. This
 * header is the room's door (tests/meta/check_server_rooms.py): what the
 * floor calls of it, and nothing else. The rest is internal.h's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_H
#define AAS_E2B_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>
#include <saas.h>

struct aas_config;
struct aas_req;
struct aas_reply;
struct aas_route;

/* Its prefixes, AAS_E2B_API_PREFIX and AAS_E2B_SANDBOX_PREFIX, are the floor's (server.h): the dashboard shows them. */

/* ---- the server's hooks (gateway.c) ---- */

/* Take the engine and the options (templates, the token secret); 0, or -1 after logging. */
int aas_e2b_init(saas_engine *engine, const struct aas_config *cfg);
void aas_e2b_shutdown(void);
/*
 * The route that serves a path under one of the prefixes, /files (a signed
 * URL), or with --e2b-domain any path of the hosts 49983-ID.DOMAIN and
 * api.DOMAIN (every method: the face routes within); NULL for a request
 * that is not the face's. host is the request's Host header (or NULL).
 */
const struct aas_route *aas_e2b_route(const char *path, const char *host);
/*
 * With --e2b-domain: does Host name a sandbox's port other than envd's
 * (PORT-ID.DOMAIN)? Then the floor hands every call of the access handler
 * to aas_e2b_port_handle, which checks the sandbox's traffic token and
 * proxies as a preview does (aas_preview_handle) from then on.
 */
bool aas_e2b_port_host(const char *host);
enum MHD_Result aas_e2b_port_handle(struct aas_req *r, const char *upload, size_t *upload_size);

/*
 * `aas-server e2b-key`: read a key (aas_sk_...) on stdin, never on the
 * command line (every local user can read that in /proc), and print its
 * e2b_ spelling. 0, or 2 after a one-line error.
 */
int aas_e2b_key_main(int argc, char **argv);

#endif
