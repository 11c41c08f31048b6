/*
 * libsaas: status codes and per-thread error detail.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_ERRORS_H
#define SAAS_ERRORS_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * Status codes. Every function that can fail returns an int: SAAS_OK (0) on
 * success, one of these negative values otherwise. Codes are append-only: a
 * value is never renumbered or reused.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_OK = 0,          /**< Success. */
	SAAS_ERROR = -1,      /**< Generic failure; see saas_error_last(). */
	SAAS_EINVAL = -2,     /**< An argument is invalid (NULL, empty, too long, out of range, unknown flag). */
	SAAS_ENOMEM = -3,     /**< Out of memory. */
	SAAS_ENOTFOUND = -4,  /**< No such object, or it belongs to another account. */
	SAAS_EEXISTS = -5,    /**< The object already exists. */
	SAAS_EAUTH = -6,      /**< The API key is missing, unknown or revoked. */
	SAAS_ECREDIT = -7,    /**< The account's balance cannot pay for this. */
	SAAS_ELIMIT = -8,     /**< An account limit would be exceeded (sandboxes or executions at once, a rate); saas_error.limit names it. */
	SAAS_ESTATE = -9,     /**< The object is in the wrong state for this call (e.g. destroyed). */
	SAAS_ETIMEOUT = -10,  /**< The operation did not finish in time. */
	SAAS_EBACKEND = -11,  /**< The VM driver or the guest failed. */
	SAAS_ESTORE = -12,    /**< The state store failed. */
	SAAS_EIO = -13,       /**< An I/O error, local or in the guest. */
	SAAS_ENOTSUP = -14,   /**< Not supported by this backend or build. */
	SAAS_ETOOBIG = -15,   /**< A payload is over its documented size limit. */
	SAAS_EISDIR = -16,    /**< A file operation named a directory. */
	SAAS_ENETWORK = -17,  /**< A network failure talking to a remote server. */
	SAAS_EPROTOCOL = -18, /**< A peer answered something that makes no sense. */
	SAAS_EBUSY = -19,     /**< A resource is held by someone else (e.g. a state directory). */
	SAAS_EPERM = -20      /**< Permission denied (in the guest: a path the sandbox user may not touch). */
} saas_status;

/**
 * The part of the system an error came from.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_ERRCLASS_NONE = 0,
	SAAS_ERRCLASS_ARGS,      /**< The caller's arguments. */
	SAAS_ERRCLASS_OS,        /**< The operating system; backend_code is errno. */
	SAAS_ERRCLASS_STORE,     /**< The store; backend_code is SQLite's result or 0. */
	SAAS_ERRCLASS_DRIVER,    /**< The VM driver; backend_code is the driver's code. */
	SAAS_ERRCLASS_GUEST,     /**< The guest transport (SSH, SFTP). */
	SAAS_ERRCLASS_HTTP,      /**< A remote server; backend_code is the HTTP status. */
	SAAS_ERRCLASS_BILLING,   /**< Credit and limits. */
	SAAS_ERRCLASS_AUTH       /**< Authentication. */
} saas_error_class;

/**
 * Detail about the last failure on the calling thread.
 *
 * Since: 0.1.0
 */
typedef struct saas_error {
	int code;              /**< The saas_status returned. */
	int klass;             /**< A saas_error_class. */
	long backend_code;     /**< errno, SQLite code, HTTP status ...; 0 when none. */
	const char *message;   /**< Human-readable; never NULL. */
	const char *sqlstate;  /**< PostgreSQL SQLSTATE when the store said one, else "". */
	/**
	 * For SAAS_ELIMIT: the name of the limit that was hit, as saas_limits
	 * and the REST API spell it ("max_sandboxes", "max_executions",
	 * "max_transfers", "creates_per_minute", "requests_per_second"); ""
	 * otherwise.
	 */
	const char *limit;
	/**
	 * For SAAS_ELIMIT, and SAAS_EBUSY when a create, a resume or a fork is
	 * refused for want of room (a host short of memory, no VM host with
	 * room) or a VM host's guest's network change was not confirmed in time:
	 * how long to wait before a retry can succeed, in milliseconds (the REST
	 * API's Retry-After, which a remote client reads); 0 when unknown.
	 */
	int64_t retry_after_ms;
} saas_error;

/**
 * Fixed text for a status code, e.g. "not found".
 *
 * @param code a saas_status value.
 * @return a static string; never NULL ("unknown error" for an unknown code). Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_strerror(int code);

/**
 * Short machine name for a status code, e.g. "not_found"; this is the "code" of
 * the REST API's error bodies.
 *
 * @param code a saas_status value.
 * @return a static string; never NULL. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_error_name(int code);

/**
 * The HTTP status the REST API answers with for a status code, e.g. 404 for
 * SAAS_ENOTFOUND (the table is in docs/rest.md).
 *
 * @param code a saas_status value.
 * @return 200 for SAAS_OK, a 4xx or 5xx status otherwise; 500 for SAAS_ERROR
 *         and for an unknown code. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_error_http_status(int code);

/**
 * The detail of the last failure on this thread.
 *
 * Every public entry point clears it first, so after a successful call its code
 * is SAAS_OK and its message "".
 *
 * @return a pointer to thread-local storage, valid until this thread's next
 *         libsaas call; never NULL.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const saas_error *) saas_error_last(void);

/**
 * Every status code once, from SAAS_OK to the newest:
 * X(code, name, text, http_status), where name is saas_error_name(), text
 * saas_strerror() and http_status saas_error_http_status() of the code.
 *
 * This is the one table of what a code means (libuv's UV_ERRNO_MAP is the
 * model). The library's three calls above are built from it, and a program
 * that keeps a column of its own per code (the aas CLI's exit codes and
 * hints, the MCP tools' hints) builds that column from it too, so a code
 * appended here is a row each of them must fill: docs/errors.md says how,
 * and a test checks every code in every column.
 *
 * A program compiled against an older list may meet a newer code at run
 * time: it treats a code it does not know as SAAS_ERROR.
 */
#define SAAS_STATUS_LIST(X) \
	X(SAAS_OK, "ok", "success", 200) \
	X(SAAS_ERROR, "error", "error", 500) \
	X(SAAS_EINVAL, "invalid_argument", "invalid argument", 400) \
	X(SAAS_ENOMEM, "out_of_memory", "out of memory", 500) \
	X(SAAS_ENOTFOUND, "not_found", "not found", 404) \
	X(SAAS_EEXISTS, "already_exists", "already exists", 409) \
	X(SAAS_EAUTH, "unauthorized", "authentication failed", 401) \
	X(SAAS_ECREDIT, "insufficient_credit", "insufficient credit", 402) \
	X(SAAS_ELIMIT, "limit_exceeded", "limit exceeded", 429) \
	X(SAAS_ESTATE, "conflict", "wrong state", 409) \
	X(SAAS_ETIMEOUT, "timeout", "timed out", 504) \
	X(SAAS_EBACKEND, "backend_error", "VM backend failure", 502) \
	X(SAAS_ESTORE, "store_error", "state store failure", 503) \
	X(SAAS_EIO, "io_error", "input/output error", 500) \
	X(SAAS_ENOTSUP, "not_supported", "not supported", 501) \
	X(SAAS_ETOOBIG, "too_large", "too large", 413) \
	X(SAAS_EISDIR, "is_a_directory", "is a directory", 409) \
	X(SAAS_ENETWORK, "network_error", "network failure", 502) \
	X(SAAS_EPROTOCOL, "protocol_error", "protocol error", 502) \
	X(SAAS_EBUSY, "busy", "resource busy", 503) \
	X(SAAS_EPERM, "permission_denied", "permission denied", 403)

/** The number of rows of SAAS_STATUS_LIST: codes run from 0 down to 1 - SAAS_STATUS_COUNT. */
#define SAAS_STATUS_COUNT_ROW_(code, name, text, http) +1
#define SAAS_STATUS_COUNT (0 SAAS_STATUS_LIST(SAAS_STATUS_COUNT_ROW_))

SAAS_END_DECLS

#endif
