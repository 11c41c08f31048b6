/*
 * The preview proxy (preview/): what the rest of the server may call of it.
 * http://<name>.<preview-domain>/... reaches the port an exposure names
 * (proxy.c says how); the front end hands it every request whose Host is a
 * preview, and the API and the dashboard close its tunnels when an exposure
 * or a sandbox ends.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_PREVIEW_H
#define AAS_PREVIEW_H

#include "config.h"
#include "server.h"

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
/* Called for every call of the access handler on a preview request. */
enum MHD_Result aas_preview_handle(struct aas_req *r, const char *name, const char *upload, size_t *upload_size);
void aas_preview_free(struct aas_req *r);
/*
 * Close the tunnels (requests in flight, WebSockets) to a sandbox's port, or
 * to every port of it when port is 0: its exposure or the sandbox just ended.
 */
void aas_preview_revoke(const char *sandbox_id, unsigned int port);

#endif
