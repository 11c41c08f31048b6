/*
 * libsaas: common definitions shared by every public header.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_COMMON_H
#define SAAS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define SAAS_BEGIN_DECLS extern "C" {
#define SAAS_END_DECLS }
#else
#define SAAS_BEGIN_DECLS
#define SAAS_END_DECLS
#endif

/*
 * SAAS_EXTERN marks a function exported from the shared library. The library is
 * built with -fvisibility=hidden, so nothing else leaves it.
 */
#if defined(SAAS_STATIC)
#define SAAS_EXTERN(type) extern type
#elif defined(__GNUC__) || defined(__clang__)
#define SAAS_EXTERN(type) extern __attribute__((visibility("default"))) type
#else
#define SAAS_EXTERN(type) extern type
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SAAS_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define SAAS_WARN_UNUSED
#endif

SAAS_BEGIN_DECLS

/**
 * Money is always an integer count of micro-dollars (1 USD = 1 000 000).
 * Floating point never touches a balance.
 */
#define SAAS_USD(dollars) ((int64_t)(dollars) * 1000000)

/** A sandbox, execution, account or key id is at most this long (without NUL). */
#define SAAS_ID_MAX 63

/**
 * An engine: the local sandbox service (VM driver, store, reaper). Shared across threads.
 *
 * Since: 0.1.0
 */
typedef struct saas_engine saas_engine;

/**
 * A client: one account's view of an engine (local) or of a server (remote). Shared across threads.
 *
 * Since: 0.1.0
 */
typedef struct saas_client saas_client;

/**
 * Version of libsaas this program runs against, as "MAJOR.MINOR.PATCH".
 *
 * @return a static string; never NULL. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(const char *) saas_version(void);

/**
 * Free a string the library allocated (an API key, a URL). NULL is ignored.
 *
 * @param str string returned by a libsaas call documented as "free with saas_free".
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_free(void *str);

/**
 * Base64 (RFC 4648, standard alphabet, padded): how the REST API, MCP and the
 * CLI carry bytes inside JSON. Offered so that frontends and bindings share
 * one codec.
 *
 * @param data bytes (may be NULL when len is 0).
 * @return a NUL-terminated string to free with saas_free(), or NULL when out of memory.
 * Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(char *) saas_base64_encode(const void *data, size_t len);

/**
 * Decode base64 (RFC 4648). Lenient where it costs nothing: whitespace is
 * skipped, the URL-safe alphabet ("-_") is accepted and the padding may be
 * left out; '=' may only end the text.
 *
 * @param out      [out] the bytes, NUL-terminated for convenience; free with saas_free().
 * @param out_len  [out] how many bytes.
 * @param text     the base64 text.
 * @param text_len its length in bytes.
 * @return SAAS_OK, SAAS_EINVAL (not base64: a bad character or length), SAAS_ENOMEM. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_base64_decode(void **out, size_t *out_len, const char *text, size_t text_len);

/** Flags of saas_time_parse(). */
#define SAAS_TIME_DAY_END 1u /**< A bare date means the end of that day (the start of the next): the end of a range. */

/**
 * Read a point in time the way the REST API, MCP and the CLI take one:
 * - RFC 3339: "2025-06-01T12:00:00Z", "2025-06-01T14:00:00.250+02:00"; leniently
 *   also with 't' or ' ' for 'T', without the seconds, and without an offset
 *   (then UTC);
 * - a bare date, "2025-06-01": the start of that day in UTC, or with
 *   SAAS_TIME_DAY_END its end, so that a range of dates includes its last day;
 * - unix seconds, "1748779200".
 *
 * @param ms    [out] milliseconds since the epoch (UTC); untouched on failure.
 * @param text  the text, whole (nothing may follow the time).
 * @param flags 0 or SAAS_TIME_DAY_END.
 * @return SAAS_OK, or SAAS_EINVAL with saas_error_last() saying which forms are accepted. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_time_parse(int64_t *ms, const char *text, unsigned int flags);

/**
 * Write a point in time as RFC 3339 UTC with milliseconds,
 * "2025-06-01T12:00:00.000Z": how the REST API and MCP give times.
 *
 * @param buf     where to write; 32 bytes always suffice.
 * @param bufsize its size.
 * @param ms      milliseconds since the epoch (may be negative: before 1970).
 * @return buf; empty when ms is beyond year 9999. Thread-safe.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(char *) saas_time_format(char *buf, size_t bufsize, int64_t ms);

SAAS_END_DECLS

#endif
