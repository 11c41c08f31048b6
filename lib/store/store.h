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

/* For SQLite URLs: the file path inside ("sqlite:PATH" -> "PATH", "PATH" -> "PATH"). */
const char *saas__sqlite_path(const char *url);

#endif
