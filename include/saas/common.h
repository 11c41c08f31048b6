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

/** An engine: the local sandbox service (VM driver, store, reaper). Shared across threads. */
typedef struct saas_engine saas_engine;

/** A client: one account's view of an engine (local) or of a server (remote). Shared across threads. */
typedef struct saas_client saas_client;

/**
 * Version of libsaas this program runs against, as "MAJOR.MINOR.PATCH".
 *
 * @return a static string; never NULL. Thread-safe.
 */
SAAS_EXTERN(const char *) saas_version(void);

/**
 * Free a string the library allocated (an API key, a URL). NULL is ignored.
 *
 * @param str string returned by a libsaas call documented as "free with saas_free".
 */
SAAS_EXTERN(void) saas_free(void *str);

SAAS_END_DECLS

#endif
