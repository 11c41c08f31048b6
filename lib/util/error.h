/*
 * Internal: setting the per-thread error detail.
 */
#ifndef SAAS_UTIL_ERROR_H
#define SAAS_UTIL_ERROR_H

#include "saas/errors.h"

#if defined(__GNUC__) || defined(__clang__)
#define SAAS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SAAS_PRINTF(a, b)
#endif

/* Clear the calling thread's error; every public entry point does this first. */
void saas__error_clear(void);

/*
 * Record an error for the calling thread and return `code`, so that failures
 * read `return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, 0, "...");`.
 */
int saas__error(int code, int klass, long backend_code, const char *fmt, ...) SAAS_PRINTF(4, 5);

/* The same with a PostgreSQL SQLSTATE attached. */
int saas__error_sqlstate(int code, const char *sqlstate, const char *fmt, ...) SAAS_PRINTF(3, 4);

/*
 * SAAS_ELIMIT naming the limit that was hit (as saas_limits spells it)
 * and how long a retry should wait (0: unknown); returns SAAS_ELIMIT.
 */
int saas__error_limit(const char *limit, int64_t retry_after_ms, const char *fmt, ...) SAAS_PRINTF(3, 4);

/* Attach a limit's name and retry time to the error just recorded (a remote server's 429). */
void saas__error_set_limit(const char *limit, int64_t retry_after_ms);

/* Shorthands for the commonest cases. */
#define saas__inval(...) saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, 0, __VA_ARGS__)
#define saas__oom() saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 12, "out of memory")

/* Keep an error already recorded but prefix its message with context. */
int saas__error_wrap(int code, const char *fmt, ...) SAAS_PRINTF(2, 3);

/*
 * An error kept across the calls that would overwrite this thread's (the
 * cleanups after a failure), or handed to another thread: copied, as the
 * thread's own lives in its thread-local storage.
 */
struct saas__kept_error {
	int code;
	int klass;
	long backend_code;
	char message[1024];
	char sqlstate[8];
	char limit[32];                  /* a limit's name, and when to try again */
	int64_t retry_after_ms;
};

/* Keep this thread's error as code's (its limit and sqlstate only when it is code's own). */
void saas__error_keep(struct saas__kept_error *k, int code);

/* The kept error, this thread's again; returns its code. */
int saas__error_raise(const struct saas__kept_error *k);

/* The last (most negative) status code: every code from SAAS_OK down to it has a name. */
int saas__error_code_last(void);

/*
 * What an HTTP status means when the error body names no code:
 * saas_error_http_status() read backwards, choosing one code where several
 * share a status; SAAS_ERROR for another 5xx, SAAS_EPROTOCOL otherwise.
 */
int saas__error_from_status(long status);

#endif
