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
 * Expose a TCP port of a sandbox on its preview URL. Exposing an exposed port
 * returns the same URL. Nothing needs to listen yet.
 *
 * @param url  [out] the preview URL; free with saas_free().
 * @param port 1..65535, not 22.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTATE (not ready), SAAS_ESTORE, SAAS_ENOMEM.
 */
SAAS_EXTERN(int) saas_port_expose(char **url, saas_client *client, const char *sandbox_id, unsigned int port);

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
 */
SAAS_EXTERN(int) saas_port_connect(int *fd, saas_client *client, const char *sandbox_id, unsigned int port);

SAAS_END_DECLS

#endif
