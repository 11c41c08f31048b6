/*
 * Shared helpers for the unit tests.
 */
#ifndef SAAS_TESTUTIL_H
#define SAAS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

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

/* Implemented in testutil_pg.c: a new empty database on the test server. */
char *saas_test_pg_fresh_url(const char *pgdir);

#endif
