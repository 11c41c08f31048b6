/*
 * libsaas: code contexts: long-lived interpreters in a sandbox (Python,
 * JavaScript, bash) whose runs stream their output and end with rich
 * results, each in every format it has (docs/code.md).
 *
 * A sandbox's code server listens on SAAS_CODE_PORT of the guest's loopback,
 * as the sandbox user, and speaks E2B's code-interpreter wire; the engine
 * reaches it through the sandbox's control channel (no port is exposed) and
 * reads what it says as hostile: every line, result and run is bounded here.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_CODE_H
#define SAAS_CODE_H

#include "common.h"

SAAS_BEGIN_DECLS

/** The guest port the code server listens on (loopback only). */
#define SAAS_CODE_PORT 49999
/** Longest code of one run, in bytes. */
#define SAAS_CODE_SOURCE_MAX (1u << 20)
/** Default and largest time a run may take, in milliseconds. */
#define SAAS_CODE_TIMEOUT_DEFAULT_MS 60000
#define SAAS_CODE_TIMEOUT_MAX_MS 3600000
/** Default and largest of each of stdout and stderr a run keeps (and tells of), in bytes. */
#define SAAS_CODE_OUTPUT_DEFAULT (1u << 20)
#define SAAS_CODE_OUTPUT_MAX (16u << 20)
/** Default and largest size of one result, all its formats together (decoded), in bytes. */
#define SAAS_CODE_RESULT_DEFAULT (4u << 20)
#define SAAS_CODE_RESULT_MAX (16u << 20)
/** Most results one run keeps, and most bytes of results together. */
#define SAAS_CODE_RESULTS_MAX 256
#define SAAS_CODE_RESULTS_BYTES_MAX (64u << 20)
/**
 * Longest name of a run's error kept, in bytes (its value and traceback are
 * bounded by max_output each).
 */
#define SAAS_CODE_ERROR_NAME_MAX 1024
/** Most contexts a sandbox may hold (the default one of each language not counted). */
#define SAAS_CODE_CONTEXTS_MAX 32
/** Longest context id, language name and working directory. */
#define SAAS_CODE_CONTEXT_ID_MAX 128

/**
 * A code context: one interpreter, its variables and its working directory.
 * Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_context {
	char *id;        /**< The code server's id of it. */
	char *language;  /**< "python", "javascript" or "bash". */
	char *cwd;       /**< Its working directory. */
} saas_code_context;

/**
 * Contexts of a sandbox. Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_context_list {
	size_t count;
	saas_code_context **items;
} saas_code_context_list;

/** Version of saas_code_context_options this header describes. */
#define SAAS_CODE_CONTEXT_OPTIONS_VERSION 1

/**
 * Options for saas_code_context_create(). Initialise with SAAS_CODE_CONTEXT_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_context_options {
	unsigned int version;       /**< SAAS_CODE_CONTEXT_OPTIONS_VERSION */
	const char *language;       /**< "python" (NULL: the default), "javascript" ("js"), "bash". */
	const char *cwd;            /**< Working directory (absolute, or under /workspace); NULL: /workspace. */
	const char *const *env;     /**< NULL-terminated "NAME=VALUE" strings for the interpreter, or NULL. */
} saas_code_context_options;

#define SAAS_CODE_CONTEXT_OPTIONS_INIT { SAAS_CODE_CONTEXT_OPTIONS_VERSION, NULL, NULL, NULL }

/**
 * Start a new code context in a sandbox.
 *
 * @param out      [out] free with saas_code_context_free().
 * @param options  options or NULL.
 * @param flags    0.
 * @return SAAS_OK; SAAS_EINVAL (a language that is not one of the three, a bad cwd or env);
 *         SAAS_ENOTFOUND (sandbox); SAAS_ESTATE (not ready); SAAS_ELIMIT (SAAS_CODE_CONTEXTS_MAX,
 *         or the code server's own bound: limit "code_contexts"); SAAS_EBUSY (the code server is
 *         starting, or has too many connections); SAAS_EIO (its interpreter cannot start, or it
 *         failed: its words); SAAS_ETOOBIG (over its request bound); SAAS_EBACKEND (no code
 *         server in the guest, or it hung up); SAAS_EPROTOCOL (it answered something else than
 *         its wire); SAAS_ETIMEOUT (no answer in 60 s); SAAS_ENOTSUP (a driver without tunnels);
 *         SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_code_context_create(saas_code_context **out, saas_client *client, const char *sandbox_id,
                                          const saas_code_context_options *options, unsigned int flags);

/**
 * The contexts of a sandbox (the code server's default ones are not listed).
 *
 * @param out   [out] free with saas_code_context_list_free().
 * @param flags 0.
 * @return as saas_code_context_create(), without SAAS_ELIMIT.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_code_context_list_get(saas_code_context_list **out, saas_client *client,
                                            const char *sandbox_id, unsigned int flags);

/**
 * Restart a context's interpreter: its variables are gone, its id, language
 * and working directory stay. A context whose interpreter died is restarted so.
 *
 * @param context_id  1 to SAAS_CODE_CONTEXT_ID_MAX of [A-Za-z0-9._-].
 * @param flags       0.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND (sandbox or context); SAAS_ESTATE; SAAS_EIO (its
 *         new interpreter cannot start); SAAS_EBUSY; SAAS_EBACKEND; SAAS_EPROTOCOL.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_code_context_restart(saas_client *client, const char *sandbox_id, const char *context_id,
                                           unsigned int flags);

/**
 * Delete a context and stop its interpreter.
 *
 * @return as saas_code_context_restart().
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_code_context_delete(saas_client *client, const char *sandbox_id, const char *context_id,
                                          unsigned int flags);

/**
 * Free a context; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_code_context_free(saas_code_context *context);

/**
 * Free a list of contexts and its contexts; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_code_context_list_free(saas_code_context_list *list);

/**
 * One format of a result: its MIME type and its bytes. Binary formats
 * (image/png, image/jpeg, application/pdf) are the decoded bytes, not base64;
 * text formats are UTF-8; application/json and E2B's own e2b/data and
 * e2b/chart are JSON text. `data` is NUL-terminated for convenience (the NUL
 * is not counted in `len`).
 *
 * Since: 0.2.0
 */
typedef struct saas_code_format {
	char *mime;
	unsigned char *data;
	size_t len;
} saas_code_format;

/**
 * A result: the value of the run's last expression (is_main) or a display
 * call's, in every format it came in, in the order the guest sent them.
 * Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_result {
	int is_main;                 /**< Non-zero for the last expression's value. */
	size_t count;
	saas_code_format **formats;
	int truncated;               /**< Non-zero if formats were dropped for max_result. */
} saas_code_result;

/**
 * A run's error: what the code raised, or what became of its interpreter
 * (name "KernelDied", "ExecutionAborted", ...). Library-allocated; fields
 * may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_error {
	char *name;                  /**< At most SAAS_CODE_ERROR_NAME_MAX bytes. */
	char *value;                 /**< At most max_output bytes: its start. */
	/** Lines joined, as the interpreter printed them (may hold ANSI colours); at most max_output
	 *  bytes: past it, its first and last lines around a "[... cut ...]" line. */
	char *traceback;
	/** Non-zero if the name, value or traceback was cut: by the code server's bounds or by these. */
	int truncated;
} saas_code_error;

/**
 * How a run ended. Values are append-only.
 *
 * Since: 0.2.0
 */
typedef enum {
	SAAS_CODE_DONE = 1,       /**< The code ran to its end (raised or not: see `error`). */
	SAAS_CODE_TIMEDOUT = 2,   /**< It was interrupted at its timeout; the context lives on. */
	SAAS_CODE_CANCELLED = 3   /**< The event callback asked to stop; it was interrupted; the context lives on. */
} saas_code_status;

/**
 * A run of code and what came of it. Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_execution {
	int status;                   /**< saas_code_status */
	int64_t execution_count;      /**< The interpreter's count for this run; -1 when it gave none. */
	char *stdout_data;            /**< What the run printed (UTF-8), NUL-terminated; cut at max_output. */
	size_t stdout_len;
	char *stderr_data;
	size_t stderr_len;
	int stdout_truncated;         /**< Non-zero if stdout passed max_output and was cut. */
	int stderr_truncated;
	size_t result_count;
	saas_code_result **results;
	/** Non-zero if results were dropped: past SAAS_CODE_RESULTS_MAX or _BYTES_MAX, or one too large to read. */
	int results_truncated;
	saas_code_error *error;       /**< NULL when the run raised nothing. */
	int64_t duration_ms;
} saas_code_execution;

/**
 * What an event callback is told, as a run goes. Borrowed for the call.
 * Fields may be appended.
 *
 * Since: 0.2.0
 */
typedef enum {
	SAAS_CODE_EVENT_STDOUT = 1,   /**< text, len: printed to stdout */
	SAAS_CODE_EVENT_STDERR = 2,   /**< text, len */
	SAAS_CODE_EVENT_RESULT = 3,   /**< result */
	SAAS_CODE_EVENT_ERROR = 4,    /**< error */
	SAAS_CODE_EVENT_COUNT = 5,    /**< execution_count: the interpreter took the code */
	/**
	 * Nothing was told for SAAS_CODE_TICK_MS (a silent run, or output past
	 * max_output): no field is set. A caller checks its own deadline or its
	 * client here and returns non-zero to cancel, so that a silent run is
	 * not held until it ends. A remote client is told one for each of the
	 * server's keepalives (every 15 s of silence). Since: 0.2.0
	 */
	SAAS_CODE_EVENT_TICK = 6
} saas_code_event_type;

/** A run silent this long (in milliseconds) is told SAAS_CODE_EVENT_TICK, and again each time as long. */
#define SAAS_CODE_TICK_MS 1000

/**
 * One event of a run (saas_code_event_fn). Library-made, borrowed for the call; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_event {
	int type;                           /**< saas_code_event_type */
	const char *text;                   /**< STDOUT, STDERR: UTF-8, NUL-terminated */
	size_t len;
	const saas_code_result *result;     /**< RESULT */
	const saas_code_error *error;       /**< ERROR */
	int64_t execution_count;            /**< COUNT */
} saas_code_event;

/**
 * Told of each event as it arrives, on the calling thread, one at a time.
 * Output past max_output and results past the bounds are not told either;
 * SAAS_CODE_EVENT_TICK is told instead while nothing else is (callbacks
 * ignore the types they do not know: more may be appended).
 * Return non-zero to cancel the run (the interpreter is interrupted; the
 * context lives on).
 */
typedef int (*saas_code_event_fn)(void *userdata, const saas_code_event *event);

/** Version of saas_code_run_options this header describes. */
#define SAAS_CODE_RUN_OPTIONS_VERSION 1

/**
 * Options for saas_code_run(). Initialise with SAAS_CODE_RUN_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_code_run_options {
	unsigned int version;       /**< SAAS_CODE_RUN_OPTIONS_VERSION */
	/** The language's default context ("python", "javascript", "bash"); NULL with no context_id: Python's. */
	const char *language;
	const char *context_id;     /**< A context of saas_code_context_create(); not with `language`. */
	const char *const *env;     /**< NULL-terminated "NAME=VALUE" strings for this run only, or NULL. */
	int64_t timeout_ms;         /**< 0: SAAS_CODE_TIMEOUT_DEFAULT_MS; at most SAAS_CODE_TIMEOUT_MAX_MS. */
	size_t max_output;          /**< Per stream; 0: SAAS_CODE_OUTPUT_DEFAULT; at most SAAS_CODE_OUTPUT_MAX. */
	size_t max_result;          /**< Per result; 0: SAAS_CODE_RESULT_DEFAULT; at most SAAS_CODE_RESULT_MAX. */
	saas_code_event_fn on_event;  /**< Or NULL. */
	void *userdata;
} saas_code_run_options;

#define SAAS_CODE_RUN_OPTIONS_INIT { SAAS_CODE_RUN_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, 0, NULL, NULL }

/**
 * Run code in a context of a sandbox and wait for it to end, telling
 * on_event of its output, results and error as they come.
 *
 * A run that outlives its timeout, or that the callback cancels, is
 * interrupted in the guest (its context and variables stay) and the call
 * succeeds with status SAAS_CODE_TIMEDOUT or SAAS_CODE_CANCELLED and what
 * came until then. An error the code raised is the execution's `error`, not
 * the call's.
 *
 * @param out      [out] free with saas_code_execution_free().
 * @param code     1 to SAAS_CODE_SOURCE_MAX bytes of UTF-8.
 * @param options  options or NULL.
 * @param flags    0.
 * @return SAAS_OK; SAAS_EINVAL (both language and context_id, a bad option); SAAS_ENOTFOUND
 *         (sandbox, or context); SAAS_ESTATE (not ready); SAAS_EBUSY, SAAS_EIO, SAAS_ETOOBIG (the
 *         code server's refusals, as for saas_code_context_create()); SAAS_EBACKEND (no code
 *         server, or it hung up before the end); SAAS_EPROTOCOL (it answered something else than
 *         its wire: a line not JSON, a known event without its fields); SAAS_ENOTSUP; SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_code_run(saas_code_execution **out, saas_client *client, const char *sandbox_id,
                               const char *code, const saas_code_run_options *options, unsigned int flags);

/**
 * Name of a run's status: "done", "timeout", "cancelled"; "unknown" otherwise. Static.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(const char *) saas_code_status_name(int status);

/**
 * Free an execution; NULL is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_code_execution_free(saas_code_execution *execution);

SAAS_END_DECLS

#endif
