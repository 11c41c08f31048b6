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

SAAS_END_DECLS

#endif
