/*
 * What the libFuzzer harnesses share: a tenant on an engine with the fake
 * driver, and aas-server started in-process on a loopback port.
 *
 * The engine and the server live for a fuzzer's whole run (starting them per
 * input would be all the run did); each input gets its own connection, so
 * inputs share state only through the store, as a real server's clients do.
 * Per-input work is bounded: the fake guest's commands are capped (no
 * "block", no large "spew"), and a connection is read for at most
 * FUZZ_READ_TIMEOUT_MS after the request was sent.
 */
#ifndef SAAS_FUZZ_H
#define SAAS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include <saas.h>
#include <saas/sys/driver.h>

/* How long an exchange waits for the server's next bytes before it gives up on the connection. */
#define FUZZ_READ_TIMEOUT_MS 2000
/* Most output a fuzzed command may ask of the fake guest ("spew N"). */
#define FUZZ_SPEW_MAX 65536

/* An account with a key and one running sandbox (port 8000 exposed), on a fuzzer's engine. */
struct fuzz_tenant {
	char *key;
	saas_client *client;
	char sandbox_id[SAAS_ID_MAX + 1];
	char mcp_session[128];  /* an initialized MCP session on the server (fuzz_server_start), or "" */
	char preview_name[SAAS_PREVIEW_NAME_LEN + 1]; /* port 8000's preview host label */
	/* fuzz_server_start: an operator user of the account (FUZZ_EMAIL, FUZZ_PASSWORD), logged in. */
	char *session;                   /* its session token */
	char csrf[65];                   /* that session's CSRF token */
};

/* The tenant's user on the server (fuzz_server_start). */
#define FUZZ_EMAIL "fuzz@example.org"
#define FUZZ_PASSWORD "fuzz-password"

/* The fake driver with bounded commands; port_connect, when not NULL, replaces the fake guest's ports. */
const saas_driver *fuzz_driver(int (*port_connect)(void *ctx, const char *name, unsigned int port, int *fd));

/* A temporary directory removed at exit. Aborts on failure, as every fuzz_* setup does. */
const char *fuzz_tmpdir(void);

/* Make a tenant on engine (aborts on failure); freed at exit. */
void fuzz_tenant_make(struct fuzz_tenant *t, saas_engine *engine);

/* An engine on the driver with the tenant made; both freed at exit. */
saas_engine *fuzz_engine_open(const saas_driver *driver, struct fuzz_tenant *tenant);

/* aas-server on 127.0.0.1 and a free port, with the driver, the tenant made; stopped at exit. */
void fuzz_server_start(const saas_driver *driver, struct fuzz_tenant *tenant);

/*
 * Send `len` bytes to the server as one connection's whole input (then shut
 * the sending side), and read its answer until it closes or stays silent
 * FUZZ_READ_TIMEOUT_MS. Returns the bytes read (at most cap; more is drained).
 * With FUZZ_SHOW set in the environment, the answer is printed to stderr.
 */
size_t fuzz_server_exchange(const void *data, size_t len, char *answer, size_t cap);

/*
 * data with "@KEY@" replaced by the tenant's API key, "@SB@" by its
 * sandbox's id, "@SID@" by its MCP session, "@SESSION@" by its user's
 * session token and "@CSRF@" by that session's CSRF token, so that seeds
 * (and what the fuzzer makes of them) reach authenticated routes, a real
 * sandbox, MCP past initialize and the dashboard's pages and forms.
 * malloc()ed, NUL-terminated; *len in/out.
 */
char *fuzz_substitute(const uint8_t *data, size_t *len, const struct fuzz_tenant *t);

#endif
