/*
 * Internal: choosing a store by URL.
 */
#ifndef SAAS_STORE_STORE_H
#define SAAS_STORE_STORE_H

#include "saas/sys/store.h"

extern const saas_store saas__store_sqlite;
#ifdef SAAS_WITH_POSTGRES
extern const saas_store saas__store_postgres;
#endif

/*
 * The store for a URL: "postgresql://" or "postgres://" -> PostgreSQL;
 * "sqlite:PATH" or any other string (a path) -> SQLite. SAAS_ENOTSUP when the
 * URL names a store this build lacks.
 */
int saas__store_for_url(const saas_store **out, const char *url);

/*
 * Check a store table a caller gave (saas_engine_options.store): its version
 * is SAAS_STORE_VERSION and every slot is set, for the core calls them all
 * unguarded. SAAS_EINVAL naming what is wrong otherwise.
 */
int saas__store_check(const saas_store *store);

/*
 * Bounds both stores keep for version 6's records, so that placement's
 * arithmetic (memory_mb x mem_overcommit_milli, in BIGINT) stays far from
 * overflowing: 2^40 MiB is an exbibyte, and nobody overcommits a
 * thousandfold.
 */
#define SAAS__HOST_MEMORY_MB_MAX (UINT64_C(1) << 40)
#define SAAS__OVERCOMMIT_MILLI_MAX 1000000u
/* host_get takes an id or a name: the longer of the two. */
#define SAAS__HOST_KEY_MAX (SAAS_STORE_HOST_NAME_MAX > SAAS_ID_MAX ? SAAS_STORE_HOST_NAME_MAX : SAAS_ID_MAX)

/* A lease's name and holder: set, and no longer than the store keeps. SAAS_EINVAL otherwise. */
int saas__store_lease_check(const char *name, const char *holder);
/* A lease's end, now_ms + ttl_ms: a positive ttl, no overflow. SAAS_EINVAL otherwise. */
int saas__store_lease_time_check(int64_t now_ms, int64_t ttl_ms);
/* A host's state: active, draining or lost (SAAS_STORE_HOST_*). */
int saas__store_host_state_valid(int state);
/* A host record host_insert may keep. SAAS_EINVAL naming what is wrong otherwise. */
int saas__store_host_check(const saas_store_host *host);

/* For SQLite URLs: the file path inside ("sqlite:PATH" -> "PATH", "PATH" -> "PATH"). */
const char *saas__sqlite_path(const char *url);

#endif
