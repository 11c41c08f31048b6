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
	const char *cwd;             /**< Working directory (relative: under /workspace, since 0.2.0); NULL: /workspace. */
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
	/* Since 0.2.0. */
	uint64_t stdout_total;             /**< Bytes the command wrote to stdout so far, kept or not. */
	uint64_t stderr_total;
	int stdin_open;                    /**< Non-zero while saas_execution_stdin() is taken. */
	/** The command line as given; NULL where it is not known (a running one, an older server). */
	char *command;
	/**
	 * While it runs: non-zero once the guest runs the command (its driver
	 * says when), 0 while it is still being handed over. Once it ended:
	 * non-zero if it exited or timed out. Since 0.2.0.
	 */
	int started;
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
 * Keep the command's stdin open after stdin_data, for saas_execution_stdin()
 * until it is closed (otherwise stdin ends after stdin_data).
 *
 * Since: 0.2.0
 */
#define SAAS_EXEC_STDIN_OPEN (1u << 1)

/** Largest stdin of a running execution written but not yet taken by the command, in bytes. */
#define SAAS_EXEC_STDIN_PENDING_MAX (1u << 20)
/**
 * Output a follower can still catch up on past the kept max_output of each
 * stream: the last this many bytes. A follower further behind is told how
 * much it lost (saas_exec_callbacks.lost).
 */
#define SAAS_EXEC_FOLLOW_WINDOW (1u << 20)
/** Longest wait of one saas_execution_follow() with SAAS_FOLLOW_WAIT, in milliseconds. */
#define SAAS_EXEC_FOLLOW_WAIT_MAX 60000

/**
 * Where a reader is in an execution's output: the bytes of each stream it has
 * seen. Zero it to start from the beginning.
 *
 * Since: 0.2.0
 */
typedef struct saas_exec_cursor {
	uint64_t stdout_offset;
	uint64_t stderr_offset;
} saas_exec_cursor;

/** Version of saas_exec_callbacks this header describes. */
#define SAAS_EXEC_CALLBACKS_VERSION 1

/**
 * What a streaming exec or a follower is told as the command runs. Every
 * member but version may be NULL. The callbacks run on the calling thread,
 * one at a time; the pointers they get are borrowed for the call.
 *
 * Since: 0.2.0
 */
typedef struct saas_exec_callbacks {
	unsigned int version;  /**< SAAS_EXEC_CALLBACKS_VERSION */
	/** The execution is recorded under this id and runs. Return non-zero to cancel. */
	int (*started)(void *userdata, const char *execution_id);
	/**
	 * Output as it arrives: `stream` is SAAS_EXEC_STDOUT or SAAS_EXEC_STDERR,
	 * `offset` where the chunk starts in that stream. Return non-zero to cancel.
	 */
	int (*output)(void *userdata, int stream, uint64_t offset, const void *data, size_t len);
	/** A follower fell behind: `len` bytes of `stream` from `offset` are gone. */
	void (*lost)(void *userdata, int stream, uint64_t offset, uint64_t len);
	/** The execution ended; it is the same one the call then returns. */
	void (*exit)(void *userdata, const struct saas_execution *execution);
	void *userdata;
} saas_exec_callbacks;

#define SAAS_EXEC_CALLBACKS_INIT { SAAS_EXEC_CALLBACKS_VERSION, NULL, NULL, NULL, NULL, NULL }

/** The streams of saas_exec_callbacks.output. */
#define SAAS_EXEC_STDOUT 1
#define SAAS_EXEC_STDERR 2

/**
 * Run a command as saas_exec() does (without SAAS_EXEC_BACKGROUND), telling
 * `callbacks` of its output as it comes. Every byte is delivered, in order
 * per stream, including what is past max_output (which the record keeps no
 * more of than saas_exec() would).
 *
 * Cancelling (a callback returned non-zero) kills the command and every
 * process it started; the execution is then recorded as failed, "cancelled".
 *
 * @param out        [out] the finished execution; free with saas_execution_free().
 * @param callbacks  [in] may be NULL (then this is saas_exec()).
 * @param flags      0 or SAAS_EXEC_STDIN_OPEN.
 * @return as saas_exec().
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_exec_stream(saas_execution **out, saas_client *client, const char *sandbox_id,
                                  const char *command, const saas_exec_options *options,
                                  const saas_exec_callbacks *callbacks, unsigned int flags);

/** saas_execution_follow(): wait for new output (and for the end) rather than return at once. */
#define SAAS_FOLLOW_WAIT (1u << 0)
/**
 * saas_execution_follow() with SAAS_FOLLOW_WAIT: return as well once the
 * guest runs the command (saas_execution.started), which comes before its
 * output: for a caller that tells of the start (the E2B face's start event)
 * when the command runs, not when it was handed over. A client that cannot
 * tell (a remote one) returns what there is at once, the execution counted
 * as started. Since 0.2.0.
 */
#define SAAS_FOLLOW_STARTED (1u << 1)

/**
 * Read an execution's output from a cursor: what is there now, or (with
 * SAAS_FOLLOW_WAIT) until the execution ends, or for at most `wait_ms`.
 * Reconnecting is following again from the cursor reached.
 *
 * Output past what the record keeps (max_output) can be followed only while
 * it is among the last SAAS_EXEC_FOLLOW_WINDOW bytes; older bytes are
 * reported through `lost`. A callback returning non-zero stops the call
 * (SAAS_OK), not the command.
 *
 * @param out        [out] the execution as it stands when the call returns (running or ended), or NULL.
 * @param cursor     [in,out] where to start; updated to where the call stopped.
 * @param wait_ms    with SAAS_FOLLOW_WAIT: at most this long (at most SAAS_EXEC_FOLLOW_WAIT_MAX); 0: the most.
 * @param flags      0, SAAS_FOLLOW_WAIT, or SAAS_FOLLOW_WAIT | SAAS_FOLLOW_STARTED.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_follow(saas_execution **out, saas_client *client, const char *execution_id,
                                       saas_exec_cursor *cursor, const saas_exec_callbacks *callbacks,
                                       unsigned int wait_ms, unsigned int flags);

/** saas_execution_stdin(): end the command's input after `data`. */
#define SAAS_STDIN_CLOSE (1u << 0)

/**
 * Write to the stdin of a running execution started with SAAS_EXEC_STDIN_OPEN,
 * and (SAAS_STDIN_CLOSE) end it.
 *
 * @param data, len  bytes to send; len may be 0 (to close only).
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND; SAAS_ESTATE (ended, or its
 *         stdin is not open); SAAS_EBUSY (SAAS_EXEC_STDIN_PENDING_MAX bytes
 *         are waiting for the command to read them: try again).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_stdin(saas_client *client, const char *execution_id, const void *data,
                                      size_t len, unsigned int flags);

/** saas_execution_signal(): to the command's whole process group, not its shell alone. */
#define SAAS_SIGNAL_GROUP (1u << 0)

/**
 * Send a signal to a running execution: its shell, or (SAAS_SIGNAL_GROUP) its
 * process group, which holds every process it started that did not leave it.
 *
 * @param signal  "TERM", "KILL", "INT" or "HUP" ("SIG" prefix allowed).
 * @return SAAS_OK; SAAS_EINVAL (another signal); SAAS_ENOTFOUND; SAAS_ESTATE (ended).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_signal(saas_client *client, const char *execution_id, const char *signal,
                                       unsigned int flags);

/**
 * Stop a running execution and every process it started (its background
 * processes too), as a timeout does. It is recorded as failed, "cancelled".
 *
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND; SAAS_ESTATE (ended).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_cancel(saas_client *client, const char *execution_id, unsigned int flags);

/**
 * Executions of a sandbox. Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_execution_list {
	size_t count;
	saas_execution **items;      /**< Without their output (lengths 0). */
	char *next_cursor;           /**< saas_execution_list_get(): pass it back for the next page; NULL at the end. */
} saas_execution_list;

/**
 * The running executions of a sandbox, oldest first.
 *
 * @param out     [out] free with saas_execution_list_free().
 * @param flags   0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_list_running(saas_execution_list **out, saas_client *client,
                                             const char *sandbox_id, unsigned int flags);

/** saas_execution_list_get(): the page size when limit is 0. */
#define SAAS_EXECUTION_LIST_DEFAULT 50
/** saas_execution_list_get(): the largest page. */
#define SAAS_EXECUTION_LIST_MAX 500

/**
 * A sandbox's executions, running and ended, newest first (by start, then
 * id): its history. Ended ones stay until the engine prunes them.
 *
 * @param out         [out] free with saas_execution_list_free(); its items lack their output
 *                    (read one with saas_execution_get()); next_cursor is NULL on the last page.
 * @param sandbox_id  a sandbox of the client's account, live or destroyed.
 * @param cursor      NULL for the newest, or a previous page's next_cursor (at most 128 bytes).
 * @param limit       at most this many (at most SAAS_EXECUTION_LIST_MAX); 0: SAAS_EXECUTION_LIST_DEFAULT.
 * @param flags       0.
 * @return SAAS_OK; SAAS_EINVAL (a bad cursor, a limit over the maximum, an unknown flag);
 *         SAAS_ENOTFOUND (unknown, or another account's sandbox); SAAS_ESTORE; SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_execution_list_get(saas_execution_list **out, saas_client *client, const char *sandbox_id,
                                         const char *cursor, unsigned int limit, unsigned int flags);

/**
 * Free a list; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_execution_list_free(saas_execution_list *list);

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
