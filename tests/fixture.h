/*
 * The unit tests' engine fixture and fake clock, for tests that run the engine
 * over a driver table (the fake driver, or a test's own around it) and a real
 * store of the kind the environment asks for (see testutil.h).
 *
 * A setup makes the fixture with saas_test_fixture_new(), changes f->opts and
 * the credits as its tests need, and opens it with saas_test_fixture_open();
 * its teardown calls saas_test_fixture_free(). A test that restarts the engine
 * (as after a crash: VMs and rows stay) calls saas_test_fixture_close(),
 * changes what it restarts with, and saas_test_fixture_open() again.
 *
 * These use cmocka's assertions: a step that fails fails the running test.
 */
#ifndef SAAS_TEST_FIXTURE_H
#define SAAS_TEST_FIXTURE_H

#include <stdint.h>

#include "saas.h"
#include "saas/sys/driver.h"

/* ---- a clock that moves only when a test moves it ---- */

/* Where the fake clock starts: 2023-11-14 22:13:20 UTC, as every such test began. */
#define SAAS_TEST_T0_MS 1700000000000LL

/* The engine's clock (saas_engine_options.clock): the fake time, read atomically for the engine's threads. */
int64_t saas_test_clock(void *ud);
/* The fake time now, in ms since the epoch. */
int64_t saas_test_now(void);
/* Move the fake time on by ms. */
void saas_test_advance(int64_t ms);
/* Set the fake time (saas_test_fixture_new sets SAAS_TEST_T0_MS). */
void saas_test_clock_set(int64_t ms);

/* ---- the engine fixture ---- */

/* saas_test_fixture_new's flags. */
#define SAAS_TEST_FAKE_CLOCK (1u << 0) /* the engine's clock is saas_test_clock, from SAAS_TEST_T0_MS */
#define SAAS_TEST_BOB        (1u << 1) /* a second tenant, bob, beside alice */
#define SAAS_TEST_REAPER     (1u << 2) /* the engine's reaper thread runs (else tests sweep when they mean to) */

struct saas_test_fixture {
	char *dir;                     /* the engine's state directory */
	char *url;                     /* its store */
	saas_engine_options opts;      /* what saas_test_fixture_open opens the engine with */
	saas_engine *engine;
	/*
	 * The tenants: alice, and bob with SAAS_TEST_BOB. Each has an account
	 * made at the first open with the credit set here (SAAS_CREDIT_DEFAULT
	 * unless the setup changes it), one API key, and a client on the engine.
	 */
	int64_t credit_a, credit_b;
	char *key_a, *key_b;
	char account_a[SAAS_ID_MAX + 1], account_b[SAAS_ID_MAX + 1];
	saas_client *a, *b;
	unsigned int flags;
};

/*
 * A fixture not yet open: the fake driver reset, a fresh state directory and
 * store, `driver`, no reaper thread (unless SAAS_TEST_REAPER), and the fake
 * clock at SAAS_TEST_T0_MS with SAAS_TEST_FAKE_CLOCK. Never NULL.
 */
struct saas_test_fixture *saas_test_fixture_new(const saas_driver *driver, unsigned int flags);

/* Open the engine from f->opts; the test fails with the engine's message if it cannot. */
void saas_test_fixture_open_engine(struct saas_test_fixture *f);

/*
 * Open the engine, make the tenants' accounts and keys (at the first open
 * only), and open a client for each.
 */
void saas_test_fixture_open(struct saas_test_fixture *f);

/* Free the clients and the engine; the accounts, keys, store and state directory stay. */
void saas_test_fixture_close(struct saas_test_fixture *f);

/* Close, then free the keys, the store and the state directory; the fake driver is reset. NULL-safe. */
void saas_test_fixture_free(struct saas_test_fixture *f);

/* The balance of c's account, in micro-dollars. */
int64_t saas_test_balance(saas_client *c);

/*
 * Make engines opened with `o` take their store for one that other engines
 * share, as PostgreSQL is: with SQLite, the file of o's store URL is opened
 * through a copy of the SQLite table under another name (the engine treats a
 * store named "sqlite" as its own). saas_test_shared_store_free (which
 * saas_test_fixture_free calls) releases what this keeps.
 */
void saas_test_shared_store(saas_engine_options *o);
void saas_test_shared_store_free(void);

#endif
