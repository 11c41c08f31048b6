/*
 * Shared helpers for the unit tests.
 */
#ifndef SAAS_TESTUTIL_H
#define SAAS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "saas.h"
#include "saas/sys/driver.h"

/* A fresh temporary directory (mkdtemp under $TMPDIR); removed by saas_test_rmdir. */
char *saas_test_tmpdir(void);
/* Remove a directory tree. */
void saas_test_rmdir(char *dir);

/*
 * A URL for an empty store of the kind the environment asks for:
 * SAAS_TEST_STORE=sqlite (default): a new SQLite file under `dir`;
 * SAAS_TEST_STORE=postgres: a new, empty database on the test server whose
 * directory is $SAAS_TEST_PGDIR (see tests/pg-server). Returns a malloc()ed
 * string, or NULL with a message on stderr.
 */
char *saas_test_store_url(const char *dir);

/* Is the PostgreSQL store being tested? */
int saas_test_store_is_postgres(void);

/*
 * The unit tests' usual engine: `o` (already SAAS_ENGINE_OPTIONS_INIT) gets a
 * fresh state directory, an empty store of the kind the environment asks for
 * and `driver`. *dir and *url are the caller's (saas_test_rmdir, free).
 * Returns 0, or -1 with a message on stderr.
 */
int saas_test_engine_options(saas_engine_options *o, const saas_driver *driver, char **dir, char **url);

/*
 * A new account called `name` with `credit` (micro-dollars or
 * SAAS_CREDIT_DEFAULT) and one API key: the key (free with saas_free), its
 * account's id copied to `id` when not NULL; NULL on failure, with
 * saas_error_last() set.
 */
char *saas_test_account_key(saas_engine *engine, const char *name, int64_t credit, char *id, size_t idsize);

/*
 * The whole of the file at path, NUL-terminated (free()), its length in *len
 * when len is not NULL; NULL when it cannot be read whole.
 */
char *saas_test_slurp(const char *path, size_t *len);

/*
 * A hang made a report: if this process still runs `seconds` from now, every
 * thread's stack is printed to stderr (by gdb, when it is installed) and the
 * process aborts. Give it less than ctest's TIMEOUT for the test, which kills
 * without a word. SAAS_TEST_WATCHDOG (seconds, 0 = off) overrides `seconds`.
 */
void saas_test_watchdog(unsigned int seconds);

/* Implemented in testutil_pg.c: a new empty database on the test server. */
char *saas_test_pg_fresh_url(const char *pgdir);

#endif
