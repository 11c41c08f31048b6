/*
 * libsaas: setting error detail, for backend authors.
 *
 * A driver or store slot that fails returns a negative SAAS_E* code and, first,
 * says why through saas_sys_error_set(): the engine passes the code on, and
 * the caller of the public call reads the message with saas_error_last().
 * Modelled on libgit2's git_error_set() and libvirt's virReportError().
 *
 * Stable within a minor release only.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_SYS_ERROR_H
#define SAAS_SYS_ERROR_H

#include "../common.h"
#include "../errors.h"

SAAS_BEGIN_DECLS

#if defined(__GNUC__) || defined(__clang__)
#define SAAS_SYS_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SAAS_SYS_PRINTF(fmt, args)
#endif

/**
 * Record why a backend call failed, as the calling thread's error detail (the
 * one saas_error_last() returns), and return the code, so that a slot fails
 * in one line:
 *
 *     return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, err,
 *                               "cannot start VM %s: %s", name, strerror(err));
 *
 * Call it on the thread the engine called the slot on (the detail is per
 * thread), just before returning. The engine may prefix the message with
 * what it was doing ("cannot open the VM driver: ...").
 *
 * @param code         a negative saas_status (SAAS_EBACKEND, SAAS_ENOTFOUND ...).
 *                     Anything else (SAAS_OK, a positive or unknown value) is
 *                     recorded, and returned, as SAAS_ERROR: a failure never
 *                     reads as success.
 * @param klass        a saas_error_class: SAAS_ERRCLASS_DRIVER for a driver's own
 *                     failures, SAAS_ERRCLASS_GUEST for the guest's,
 *                     SAAS_ERRCLASS_STORE for a store's, SAAS_ERRCLASS_OS with
 *                     errno as backend_code. An unknown value is recorded as
 *                     SAAS_ERRCLASS_NONE.
 * @param backend_code the backend's own code for the failure (errno, a database
 *                     result, an HTTP status ...), or 0.
 * @param fmt          printf format of the message (NULL: the code's
 *                     saas_strerror() text). The message is cut at 1023 bytes.
 * @return the code recorded. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_sys_error_set(int code, int klass, long backend_code, const char *fmt, ...)
	SAAS_SYS_PRINTF(4, 5);

SAAS_END_DECLS

#endif
