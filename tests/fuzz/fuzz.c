/*
 * What the libFuzzer harnesses share (fuzz.h). Setup failures abort: a
 * fuzzer that cannot start must not report a clean run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fake/fake_driver.h"
#include "fuzz.h"
#include "app.h"
#include "server.h"
#include "web/internal.h"
#include "testutil.h"

static char *tmpdir;
static saas_driver driver;
static struct fuzz_tenant *tenant;
static saas_engine *server_engine;
static struct aas_config server_cfg;
static unsigned int server_port;

static void die(const char *what)
{
	const saas_error *e = saas_error_last();

	fprintf(stderr, "fuzz setup: %s: %s\n", what, e && e->message ? e->message : "failed");
	abort();
}

/* The fake guest's commands, minus those whose cost the input would choose. */
static int bounded_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	const char *cmd = req->command;

	if (strcmp(cmd, "block") == 0 || (strncmp(cmd, "spew ", 5) == 0 && atoll(cmd + 5) > FUZZ_SPEW_MAX)) {
		*exit_code = 127;
		return SAAS_OK;
	}
	return saas_fake_driver.exec(ctx, name, req, exit_code);
}

const saas_driver *fuzz_driver(int (*port_connect)(void *ctx, const char *name, unsigned int port, int *fd))
{
	driver = saas_fake_driver;
	driver.exec = bounded_exec;
	if (port_connect)
		driver.port_connect = port_connect;
	return &driver;
}

/* The tenant's client before the engine it was opened on, the directory last. */
static void cleanup(void)
{
	if (tenant) {
		saas_client_free(tenant->client);
		saas_free(tenant->key);
		saas_free(tenant->session);
		tenant = NULL;
	}
	if (server_port) {
		aas_stop(server_engine);
		aas_config_free(&server_cfg);
		server_port = 0;
	} else {
		saas_engine_free(server_engine);
	}
	server_engine = NULL;
	if (tmpdir) {
		saas_test_rmdir(tmpdir);
		tmpdir = NULL;
	}
}

const char *fuzz_tmpdir(void)
{
	if (!tmpdir) {
		if (!(tmpdir = saas_test_tmpdir()))
			die("a temporary directory");
		atexit(cleanup);
	}
	return tmpdir;
}

void fuzz_tenant_make(struct fuzz_tenant *t, saas_engine *engine)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_account *acc = NULL;
	saas_sandbox *sb = NULL;
	char *url = NULL;

	memset(t, 0, sizeof(*t));
	if (saas_account_create(&acc, engine, "fuzz", SAAS_CREDIT_DEFAULT, 0) < 0)
		die("account");
	if (saas_key_create(&t->key, NULL, engine, acc->id, "fuzz", 0) < 0)
		die("key");
	saas_account_free(acc);
	if (saas_client_open_local(&t->client, engine, t->key, 0) < 0)
		die("client");
	if (saas_sandbox_create(&sb, t->client, &o, 0) < 0)
		die("sandbox");
	snprintf(t->sandbox_id, sizeof(t->sandbox_id), "%s", sb->id);
	saas_sandbox_free(sb);
	if (saas_port_expose(&url, t->client, t->sandbox_id, 8000, 0) < 0)
		die("port");
	/* The URL's host label is the exposure's name: "http://NAME.localhost:PORT/". */
	{
		const char *h = strstr(url, "://");
		size_t n = h ? strcspn(h + 3, ".") : 0;
		if (n != SAAS_PREVIEW_NAME_LEN)
			die("preview URL");
		memcpy(t->preview_name, h + 3, n);
		t->preview_name[n] = '\0';
	}
	saas_free(url);
	tenant = t;
}

saas_engine *fuzz_engine_open(const saas_driver *drv, struct fuzz_tenant *t)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	char url[4096];

	snprintf(url, sizeof(url), "sqlite:%s/fuzz.db", fuzz_tmpdir());
	o.state_dir = fuzz_tmpdir();
	o.store_url = url;
	o.driver = drv;
	if (saas_engine_open(&server_engine, &o) < 0)
		die("engine");
	fuzz_tenant_make(t, server_engine);
	return server_engine;
}

/* Initialize an MCP session, for inputs that go past it. */
static void mcp_session(struct fuzz_tenant *t)
{
	static const char body[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
	                           "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	                           "\"clientInfo\":{\"name\":\"fuzz\",\"version\":\"1\"}}}";
	char req[1024], answer[8192], *h;
	size_t got;
	int n;

	n = snprintf(req, sizeof(req),
	             "POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
	             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", sizeof(body) - 1, body);
	got = fuzz_server_exchange(req, (size_t)n, answer, sizeof(answer) - 1);
	answer[got] = '\0';
	if (!(h = strcasestr(answer, "\r\nMcp-Session-Id: ")))
		die("an MCP session");
	h += strlen("\r\nMcp-Session-Id: ");
	h[strcspn(h, "\r\n")] = '\0';
	snprintf(t->mcp_session, sizeof(t->mcp_session), "%s", h);
}

/* An operator user of the tenant's account, logged in, for the dashboard's pages. */
static void user_session(struct fuzz_tenant *t)
{
	char hash[SAAS_PASSWORD_HASH_MAX + 1];

	if (aas_password_hash(hash, FUZZ_PASSWORD) < 0)
		die("a password hash");
	if (saas_user_create(NULL, server_engine, FUZZ_EMAIL, hash, saas_client_account_id(t->client), 0, NULL,
	                     SAAS_USER_OPERATOR) < 0)
		die("a user");
	if (saas_session_create(&t->session, server_engine, FUZZ_EMAIL, 0) < 0)
		die("a session");
	aas_session_csrf(t->csrf, t->session);
}

void fuzz_server_start(const saas_driver *drv, struct fuzz_tenant *t)
{
	char state[4096];
	char *argv[] = { "aas-server-fuzz", "--listen", "127.0.0.1:0", "--state-dir", state, "--log-level", "error",
		             "--preview-domain", "localhost", NULL };

	snprintf(state, sizeof(state), "%s/server", fuzz_tmpdir());
	/* A peer that hangs up must not end the run, as it does not end aas-server. */
	signal(SIGPIPE, SIG_IGN);
	if (aas_config_parse(&server_cfg, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) != 0)
		die("server configuration");
	aas_log_set_level(server_cfg.log_level);
	if (aas_start(&server_cfg, drv, &server_engine, &server_port) < 0)
		die("server start");
	fuzz_tenant_make(t, server_engine);
	mcp_session(t);
	user_session(t);
}

size_t fuzz_server_exchange(const void *data, size_t len, char *answer, size_t cap)
{
	struct sockaddr_in sa;
	struct timeval tv = { FUZZ_READ_TIMEOUT_MS / 1000, (FUZZ_READ_TIMEOUT_MS % 1000) * 1000 };
	const char *p = data;
	char sink[4096];
	size_t got = 0;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)server_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/*
	 * A connect can fail for a moment when the machine is busy (the suite runs
	 * fuzzers beside other tests): try again for a while before calling it a
	 * failure of the setup, and say why when it is one.
	 */
	for (int tries = 0;; tries++) {
		if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if (tries == 100) {
			fprintf(stderr, "fuzz setup: connecting to the server: %s\n", strerror(errno));
			abort();
		}
		if (fd >= 0)
			close(fd);
		usleep(20 * 1000);
	}
	/* The server may answer and hang up before it read everything: stop sending then. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		p += n;
		len -= (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int k = poll(&pfd, 1, FUZZ_READ_TIMEOUT_MS);
		ssize_t n;

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		if (got < cap)
			n = recv(fd, answer + got, cap - got, 0);
		else
			n = recv(fd, sink, sizeof(sink), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (got < cap)
			got += (size_t)n;
	}
	close(fd);
	if (getenv("FUZZ_SHOW"))
		fprintf(stderr, "---- the server answered %zu bytes:\n%.*s\n----\n", got, (int)got, answer);
	return got;
}

char *fuzz_substitute(const uint8_t *data, size_t *len, const struct fuzz_tenant *t)
{
	static const char *const names[] = { "@KEY@", "@SB@", "@SID@", "@SESSION@", "@CSRF@" };
	const char *values[] = { t->key, t->sandbox_id, t->mcp_session, t->session ? t->session : "", t->csrf };
	size_t n = *len, cap = n + 1, used = 0;
	char *out;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cap += n / strlen(names[i]) * strlen(values[i]);
	if (!(out = malloc(cap)))
		die("memory");
	for (size_t i = 0; i < n;) {
		size_t k;
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (n - i >= strlen(names[k]) && memcmp(data + i, names[k], strlen(names[k])) == 0)
				break;
		if (k < sizeof(names) / sizeof(names[0])) {
			memcpy(out + used, values[k], strlen(values[k]));
			used += strlen(values[k]);
			i += strlen(names[k]);
		} else {
			out[used++] = (char)data[i++];
		}
	}
	out[used] = '\0';
	*len = used;
	return out;
}
