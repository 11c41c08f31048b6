/*
 * libsaas: running commands in a sandbox.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_EXEC_H
#define SAAS_EXEC_H

#include "common.h"

SAAS_BEGIN_DECLS

/** Default and largest capture of each of stdout and stderr, in bytes. */
#define SAAS_EXEC_OUTPUT_DEFAULT (1u << 20)
#define SAAS_EXEC_OUTPUT_MAX (16u << 20)
/** Largest stdin accepted, in bytes. */
#define SAAS_EXEC_STDIN_MAX (16u << 20)
/** Longest command line, in bytes. */
#define SAAS_EXEC_COMMAND_MAX (128u << 10)
/** Default and largest per-command timeout, in seconds. */
#define SAAS_EXEC_TIMEOUT_DEFAULT 300
#define SAAS_EXEC_TIMEOUT_MAX 3600

/**
 * Where an execution is. Values are append-only.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_EXEC_RUNNING = 1,   /**< Started (background) and not finished. */
	SAAS_EXEC_EXITED = 2,    /**< Finished; exit_code is the command's. */
	SAAS_EXEC_TIMEDOUT = 3,  /**< Killed at its timeout; exit_code is -1. */
	SAAS_EXEC_FAILED = 4     /**< Could not run or lost (sandbox destroyed, guest gone); see `error`. */
} saas_exec_status;

/** Version of saas_exec_options this header describes. */
#define SAAS_EXEC_OPTIONS_VERSION 1

/**
 * Options for saas_exec(). Initialise with SAAS_EXEC_OPTIONS_INIT.
 *
 * Since: 0.1.0
 */
typedef struct saas_exec_options {
	unsigned int version;        /**< SAAS_EXEC_OPTIONS_VERSION */
	const char *cwd;             /**< Working directory; NULL: /workspace. */
	const char *const *env;      /**< NULL-terminated "NAME=VALUE" strings added to the environment, or NULL. */
	const void *stdin_data;      /**< Bytes fed to the command's stdin, or NULL for none. */
	size_t stdin_len;
	int64_t timeout_s;           /**< 0: SAAS_EXEC_TIMEOUT_DEFAULT. At most SAAS_EXEC_TIMEOUT_MAX. */
	size_t max_output;           /**< Per stream; 0: SAAS_EXEC_OUTPUT_DEFAULT. At most SAAS_EXEC_OUTPUT_MAX. */
} saas_exec_options;

#define SAAS_EXEC_OPTIONS_INIT { SAAS_EXEC_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, 0 }

/**
 * An execution: one command and what came of it. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_execution {
	char *id;                          /**< "exe-..." */
	char *sandbox_id;
	int status;                        /**< saas_exec_status */
	int exit_code;                     /**< The command's exit status; 128+N if killed by signal N; -1 if none. */
	char *stdout_data;                 /**< Captured bytes, NUL-terminated for convenience; may hold NULs. */
	size_t stdout_len;
	char *stderr_data;
	size_t stderr_len;
	int stdout_truncated;              /**< Non-zero if stdout passed max_output and was cut. */
	int stderr_truncated;
	int64_t started_at_ms;
	int64_t finished_at_ms;            /**< 0 while running. */
	int64_t duration_ms;
	char *error;                       /**< Why it failed (status FAILED), else "". */
} saas_execution;

/** Return at once with a running execution; poll it with saas_execution_get(). */
#define SAAS_EXEC_BACKGROUND (1u << 0)

/**
 * Run a shell command (`/bin/sh -c`) in a sandbox as its unprivileged user.
 *
 * Without SAAS_EXEC_BACKGROUND, waits for it to finish or time out. A command
 * that outlives its timeout is killed and the result says SAAS_EXEC_TIMEDOUT
 * (the call itself succeeds). Output past max_output is cut and flagged. The
 * execution is recorded and can be read again with saas_execution_get().
 *
 * @param out        [out] free with saas_execution_free().
 * @param command    1 to SAAS_EXEC_COMMAND_MAX bytes, no NUL.
 * @param options    options or NULL.
 * @param flags      SAAS_EXEC_BACKGROUND or 0.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ETOOBIG (stdin); SAAS_ENOTFOUND; SAAS_ESTATE
 *         (not ready); SAAS_EBACKEND (the guest could not be reached); SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_exec(saas_execution **out, saas_client *client, const char *sandbox_id,
                           const char *command, const saas_exec_options *options, unsigned int flags);

/**
 * Read an execution back, running or finished.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (unknown, or another account's), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_execution_get(saas_execution **out, saas_client *client, const char *execution_id);

/**
 * Name of an execution status: "running", "exited", "timeout", "failed"; "unknown" otherwise. Static.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_exec_status_name(int status);

/**
 * Free an execution; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_execution_free(saas_execution *execution);

SAAS_END_DECLS

#endif
