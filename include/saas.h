/*
 * libsaas: sandboxes as a service, as a library.
 *
 * This umbrella header is the whole stable public API. Frontends include it and
 * nothing else.
 *
 * Threads: a saas_engine and a saas_client may be shared by any number of
 * threads; they lock internally. Every object the library returns (sandboxes,
 * executions, lists) belongs to the caller and is not shared by the library;
 * freeing it while another thread reads it is the caller's race. Error detail
 * (saas_error_last) is per thread.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_H
#define SAAS_H

#include "saas/version.h"
#include "saas/common.h"
#include "saas/errors.h"
#include "saas/billing.h"
#include "saas/engine.h"
#include "saas/accounts.h"
#include "saas/client.h"
#include "saas/sandbox.h"
#include "saas/exec.h"
#include "saas/files.h"
#include "saas/ports.h"
#include "saas/pty.h"
#include "saas/users.h"
#include "saas/mcp_session.h"
#include "saas/hosts.h"
#include "saas/metrics.h"
#include "saas/code.h"

#endif
