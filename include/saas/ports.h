/*
 * libsaas: exposing ports of a sandbox.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_PORTS_H
#define SAAS_PORTS_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * Length of an exposure's name: lowercase base32 (a-z, 2-7), 130 random bits.
 * The name is the host label of its preview URL and the only thing that opens
 * it, so a URL shared for one port opens no other.
 */
#define SAAS_PREVIEW_NAME_LEN 26

/**
 * Expose a TCP port of a sandbox on its preview URL. Each exposure gets its
 * own unguessable name (SAAS_PREVIEW_NAME_LEN characters), which the URL
 * carries. Exposing an exposed port returns the same URL; exposing it again
 * after saas_port_unexpose() gives a new name. Nothing needs to listen yet.
 *
 * @param url  [out] the preview URL; free with saas_free().
 * @param port  1..65535, not 22.
 * @param flags 0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTATE (not ready), SAAS_ESTORE, SAAS_EIO (no
 *         randomness), SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_port_expose(char **url, saas_client *client, const char *sandbox_id, unsigned int port,
                                  unsigned int flags);

/**
 * Stop exposing a port: its preview URL stops working at once, and the
 * server's proxy closes the connections it holds open to it (WebSockets
 * included). Un-exposing a port that is not exposed, or a port of a destroyed
 * sandbox, succeeds and changes nothing.
 *
 * @param port 1..65535.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (no such sandbox), SAAS_ESTORE.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_port_unexpose(saas_client *client, const char *sandbox_id, unsigned int port);

/**
 * Open a TCP connection to a port inside a sandbox, through its control
 * channel: what a preview URL's proxy does for each request. The port must
 * have been exposed first.
 *
 * @param fd   [out] a connected stream socket; the caller reads, writes and close()s it.
 * @param port an exposed port.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND (sandbox, or the port is not exposed);
 *         SAAS_ESTATE (not ready); SAAS_EBACKEND (nothing listens there, or the guest is unreachable);
 *         SAAS_ENOTSUP (the client or driver cannot tunnel).
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_port_connect(int *fd, saas_client *client, const char *sandbox_id, unsigned int port);

SAAS_END_DECLS

#endif
