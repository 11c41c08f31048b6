/*
 * The client contract: one suite of client-level tests, written once against
 * a saas_client, run against both providers. They must pass identically.
 *
 *   SAAS_TEST_PROVIDER=local   an engine with the fake driver, in process
 *   SAAS_TEST_PROVIDER=remote  aas-server-fake (path in $SAAS_TEST_SERVER) on a
 *                              free loopback port, reached with
 *                              saas_client_open_remote(); killed at the end
 *
 * Where they differ, one of them has a bug.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"
#include "util/util.h"

/* ---- the providers ---- */

static struct {
	int remote;
	char *dir;              /* the suite's temp directory */
	const char *server_bin;
	pid_t server;           /* the aas-server-fake we started, or 0 */
	char base[64];          /* its origin */
	char state[512];
	unsigned int accounts;
} P;

static void stop_server(void)
{
	if (P.server > 0) {
		kill(P.server, SIGTERM);
		waitpid(P.server, NULL, 0);
		P.server = 0;
	}
}

static int start_server(void)
{
	char portfile[600], log[600], buf[32] = "";
	int fd;

	snprintf(portfile, sizeof(portfile), "%s/port", P.dir);
	snprintf(log, sizeof(log), "%s/server.log", P.dir);
	snprintf(P.state, sizeof(P.state), "%s/state", P.dir);
	P.server = fork();
	if (P.server < 0)
		return -1;
	if (P.server == 0) {
		/* If the test process dies, so does its server. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		/* Only stdio: nothing the test (or ctest) holds open outlives it in the server (tests/fds.sh). */
		close_range(3, ~0U, 0);
		execl(P.server_bin, P.server_bin, "--listen", "127.0.0.1:0", "--port-file", portfile, "--state-dir",
		      P.state, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(portfile, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[n] = '\0';
			if (n && buf[n - 1] == '\n') {
				buf[n - 1] = '\0';
			}
			if (atoi(buf) > 0) {
				snprintf(P.base, sizeof(P.base), "http://127.0.0.1:%d", atoi(buf));
				return 0;
			}
		}
		if (waitpid(P.server, NULL, WNOHANG) == P.server) {
			P.server = 0;
			fprintf(stderr, "aas-server-fake exited early; see %s\n", log);
			return -1;
		}
		usleep(50000);
	}
	stop_server();
	return -1;
}

/* `aas-server-fake account create`: a new account, its key printed alone. */
static char *admin_account(const char *name, const char *credit)
{
	char key[256];
	size_t n = 0;
	int pfd[2], status;
	ssize_t got;
	pid_t pid;

	if (pipe(pfd) < 0)
		return NULL;
	if ((pid = fork()) == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(pfd[1], 1);
		if (null >= 0)
			dup2(null, 2);
		close(pfd[0]);
		close_range(3, ~0U, 0);
		if (credit)
			execl(P.server_bin, P.server_bin, "account", "create", "--name", name, "--credit", credit,
			      "--state-dir", P.state, (char *)NULL);
		else
			execl(P.server_bin, P.server_bin, "account", "create", "--name", name, "--state-dir", P.state,
			      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(key) - 1 && (got = read(pfd[0], key + n, sizeof(key) - 1 - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		n += (size_t)got;
	}
	close(pfd[0]);
	key[n] = '\0';
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return NULL;
	key[strcspn(key, "\n")] = '\0';
	return strdup(key);
}

static int group_setup(void **state)
{
	const char *p = getenv("SAAS_TEST_PROVIDER");

	(void)state;
	P.remote = p && strcmp(p, "remote") == 0;
	if (p && !P.remote && strcmp(p, "local") != 0) {
		fprintf(stderr, "SAAS_TEST_PROVIDER must be local or remote\n");
		return -1;
	}
	if (!(P.dir = saas_test_tmpdir()))
		return -1;
	if (!P.remote)
		return 0;
	if (!(P.server_bin = getenv("SAAS_TEST_SERVER"))) {
		fprintf(stderr, "SAAS_TEST_SERVER must name the aas-server-fake binary\n");
		return -1;
	}
	return start_server();
}

static int group_teardown(void **state)
{
	(void)state;
	stop_server();
	if (P.dir && !getenv("SAAS_TEST_KEEP"))
		saas_test_rmdir(P.dir);
	P.dir = NULL;
	return 0;
}

/* A new account with `credit` micro-dollars; its key (malloc()ed). */
static char *new_account(struct saas_test_fixture *f, const char *name, int64_t credit)
{
	char buf[40], nm[64];

	snprintf(nm, sizeof(nm), "%s-%u", name, ++P.accounts);
	if (P.remote)
		return admin_account(nm, credit == SAAS_CREDIT_DEFAULT ? NULL : saas_usd_format(buf, sizeof(buf), credit));
	return saas_test_account_key(f->engine, nm, credit, NULL, 0);
}

static int open_client(saas_client **c, struct saas_test_fixture *f, const char *key)
{
	if (P.remote)
		return saas_client_open_remote(c, P.base, key, NULL, 0);
	return saas_client_open_local(c, f->engine, key, 0);
}

/* Local: the engine over the fake driver, its reaper running. Remote: only the two tenants' keys and clients. */
static int setup(void **state)
{
	struct saas_test_fixture *f;

	if (P.remote) {
		if (!(f = calloc(1, sizeof(*f))))
			return -1;
	} else {
		f = saas_test_fixture_new(&saas_fake_driver, SAAS_TEST_REAPER);
		saas_test_fixture_open_engine(f);
	}
	f->key_a = new_account(f, "alice", SAAS_CREDIT_DEFAULT);
	f->key_b = new_account(f, "bob", SAAS_CREDIT_DEFAULT);
	if (!f->key_a || !f->key_b || open_client(&f->a, f, f->key_a) != SAAS_OK ||
	    open_client(&f->b, f, f->key_b) != SAAS_OK) {
		fprintf(stderr, "setup: %s\n", saas_error_last()->message);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

/* ---- helpers ---- */

#define EXPECT(call, code)                                                                              \
	do {                                                                                                \
		int rc_ = (call);                                                                               \
		if (rc_ != (code))                                                                              \
			fail_msg("%s: got %s (%s), want %s", #call, saas_error_name(rc_), saas_error_last()->message, \
			         saas_error_name(code));                                                            \
	} while (0)

static saas_sandbox *create(saas_client *c, const char *size, int64_t timeout_s)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.size = size;
	o.timeout_s = timeout_s;
	EXPECT(saas_sandbox_create(&sb, c, &o, 0), SAAS_OK);
	return sb;
}

static saas_execution *run(saas_client *c, const char *id, const char *cmd, const saas_exec_options *o)
{
	saas_execution *x = NULL;

	EXPECT(saas_exec(&x, c, id, cmd, o, 0), SAAS_OK);
	return x;
}

/* ---- the tests ---- */

static void test_open(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_client *c = (saas_client *)1;

	EXPECT(open_client(&c, f, "aas_sk_nope"), SAAS_EAUTH);
	assert_null(c);
	EXPECT(open_client(&c, f, ""), SAAS_EAUTH);
	EXPECT(open_client(&c, f, NULL), SAAS_EAUTH);
	assert_non_null(saas_client_account_id(f->a));
	assert_true(strncmp(saas_client_account_id(f->a), "acc", 3) == 0);
	assert_string_not_equal(saas_client_account_id(f->a), saas_client_account_id(f->b));
}

/* What only a remote client has: its URL and options. */
static void test_open_remote(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_remote_options o = SAAS_REMOTE_OPTIONS_INIT;
	saas_client *c = (saas_client *)1;
	char url[128];

	if (!P.remote)
		skip();
	snprintf(url, sizeof(url), "%s/v1", P.base);
	EXPECT(saas_client_open_remote(&c, url, f->key_a, NULL, 0), SAAS_EINVAL);
	assert_null(c);
	assert_non_null(strstr(saas_error_last()->message, "origin"));
	EXPECT(saas_client_open_remote(&c, "ftp://127.0.0.1", f->key_a, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_client_open_remote(&c, "http://", f->key_a, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_client_open_remote(&c, NULL, f->key_a, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_client_open_remote(&c, P.base, f->key_a, NULL, 1), SAAS_EINVAL);
	o.version = 0;
	EXPECT(saas_client_open_remote(&c, P.base, f->key_a, &o, 0), SAAS_EINVAL);
	o.version = SAAS_REMOTE_OPTIONS_VERSION + 1;
	EXPECT(saas_client_open_remote(&c, P.base, f->key_a, &o, 0), SAAS_EINVAL);
	o = (saas_remote_options)SAAS_REMOTE_OPTIONS_INIT;
	/* A wrong key says who refused it. */
	EXPECT(saas_client_open_remote(&c, P.base, "aas_sk_nope", &o, 0), SAAS_EAUTH);
	assert_int_equal(saas_error_last()->klass, SAAS_ERRCLASS_HTTP);
	assert_int_equal(saas_error_last()->backend_code, 401);
	/* A trailing slash is still the origin. */
	snprintf(url, sizeof(url), "%s/", P.base);
	o.user_agent = "contract-test/1";
	EXPECT(saas_client_open_remote(&c, url, f->key_a, &o, 0), SAAS_OK);
	assert_string_equal(saas_client_account_id(c), saas_client_account_id(f->a));
	saas_client_free(c);
	/* Nobody listens on port 1: a network failure, with curl's words. */
	o.retries = 0;
	o.connect_timeout_ms = 2000;
	EXPECT(saas_client_open_remote(&c, "http://127.0.0.1:1", f->key_a, &o, 0), SAAS_ENETWORK);
	assert_null(c);
	/* Server errors keep the server's message, class and status. */
	saas_sandbox *sb = (saas_sandbox *)1;
	EXPECT(saas_sandbox_get(&sb, f->a, "sbx-nosuch"), SAAS_ENOTFOUND);
	assert_int_equal(saas_error_last()->klass, SAAS_ERRCLASS_HTTP);
	assert_int_equal(saas_error_last()->backend_code, 404);
	assert_non_null(strstr(saas_error_last()->message, "sbx-nosuch"));
}

static void test_create_defaults(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = NULL, *got = NULL;
	int64_t before = saas__now_ms();

	EXPECT(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	assert_true(strncmp(sb->id, "sbx-", 4) == 0);
	assert_int_equal(sb->status, SAAS_SANDBOX_READY);
	assert_int_equal(sb->end_reason, SAAS_END_NONE);
	assert_string_equal(sb->size, "small");
	assert_int_equal(sb->vcpus, 2);
	assert_int_equal(sb->memory_mb, 4096);
	assert_int_equal(sb->disk_gb, 40);
	assert_non_null(sb->image);
	assert_true(sb->created_at_ms >= before - 1000 && sb->created_at_ms <= saas__now_ms() + 1000);
	assert_true(sb->ready_at_ms >= sb->created_at_ms);
	assert_true(sb->expires_at_ms - sb->ready_at_ms >= 899000 && sb->expires_at_ms - sb->created_at_ms <= 905000);
	assert_int_equal(sb->destroyed_at_ms, 0);
	assert_int_equal(sb->cost_usd_micro, 0);
	assert_int_equal(sb->nports, 0);

	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_string_equal(got->id, sb->id);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	assert_int_equal(got->created_at_ms, sb->created_at_ms);
	assert_int_equal(got->expires_at_ms, sb->expires_at_ms);
	assert_string_equal(got->image, sb->image);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);

	sb = create(f->a, "medium", 600);
	assert_string_equal(sb->size, "medium");
	assert_int_equal(sb->vcpus, 4);
	assert_int_equal(sb->expires_at_ms - sb->created_at_ms >= 599000, 1);
	saas_sandbox_free(sb);
	/* out is optional */
	EXPECT(saas_sandbox_create(NULL, f->a, NULL, 0), SAAS_OK);
}

static void test_create_bad_input(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = (saas_sandbox *)1;

	o.size = "huge";
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_null(sb);
	assert_non_null(strstr(saas_error_last()->message, "huge"));
	o.size = NULL;
	o.image = "Bad/Name";
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.image = NULL;
	o.network = "everywhere";
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.network = NULL;
	o.timeout_s = -1;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.timeout_s = 86400 + 1;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	o.timeout_s = 0;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 1), SAAS_EINVAL);
	o.version = 99;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_create(&sb, NULL, NULL, 0), SAAS_EINVAL);
}

static void test_limits_and_credit(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_client *poor = NULL;
	char *key;

	for (int i = 0; i < 10; i++)
		EXPECT(saas_sandbox_create(NULL, f->a, NULL, 0), SAAS_OK);
	EXPECT(saas_sandbox_create(NULL, f->a, NULL, 0), SAAS_ELIMIT);
	/* Another account is not counted against it. */
	EXPECT(saas_sandbox_create(NULL, f->b, NULL, 0), SAAS_OK);

	/* A micro-dollar cannot pay for a minute. */
	key = new_account(f, "poor", 1);
	assert_non_null(key);
	EXPECT(open_client(&poor, f, key), SAAS_OK);
	o.size = "large";
	EXPECT(saas_sandbox_create(NULL, poor, &o, 0), SAAS_ECREDIT);
	saas_client_free(poor);
	saas_free(key);
}

static void test_tenancy(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *got = (saas_sandbox *)1;
	saas_execution *x = NULL;
	saas_file_list *fl = NULL;
	void *data = NULL;
	size_t len;
	char *url = NULL;

	EXPECT(saas_sandbox_get(&got, f->b, sb->id), SAAS_ENOTFOUND);
	assert_null(got);
	EXPECT(saas_exec(&x, f->b, sb->id, "echo hi", NULL, 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_extend(NULL, f->b, sb->id, 60, 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_write(f->b, sb->id, "x", "x", 1, NULL), SAAS_ENOTFOUND);
	EXPECT(saas_file_read(&data, &len, f->b, sb->id, "x", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_list_get(&fl, f->b, sb->id, NULL, 0, 0, 0), SAAS_ENOTFOUND);
	EXPECT(saas_port_expose(&url, f->b, sb->id, 8000, 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_destroy(NULL, f->b, sb->id, 0), SAAS_ENOTFOUND);
	/* An execution is its account's too. */
	x = run(f->a, sb->id, "echo mine", NULL);
	saas_execution *other = (saas_execution *)1;
	EXPECT(saas_execution_get(&other, f->b, x->id), SAAS_ENOTFOUND);
	assert_null(other);
	saas_execution_free(x);
	/* Still there for its owner. */
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	saas_sandbox_free(got);
	EXPECT(saas_sandbox_get(&got, f->a, "sbx-nosuchsandbox0000"), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_get(&got, f->a, "sbx no/such?thing"), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_get(&got, f->a, ""), SAAS_EINVAL);
	EXPECT(saas_sandbox_get(&got, f->a, NULL), SAAS_EINVAL);
	EXPECT(saas_execution_get(&other, f->a, "exe-nosuch"), SAAS_ENOTFOUND);
	saas_sandbox_free(sb);
}

/* saas_sandbox_get_ext(): with SAAS_GET_RECORDED the same sandbox as saas_sandbox_get() gives, tenancy and all. */
static void test_get_recorded(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const metadata[] = { "team=blue", NULL }, *const envs[] = { "GREETING=hi", NULL };
	const char *const allow[] = { "example.com", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *live = NULL, *rec = (saas_sandbox *)1;

	spec.allow = allow;
	o.network_spec = &spec;
	o.metadata = metadata;
	o.envs = envs;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	EXPECT(saas_sandbox_get(&live, f->a, sb->id), SAAS_OK);
	EXPECT(saas_sandbox_get_ext(&rec, f->a, sb->id, SAAS_GET_RECORDED), SAAS_OK);
	assert_string_equal(rec->id, live->id);
	assert_int_equal(rec->status, SAAS_SANDBOX_READY);
	assert_string_equal(rec->size, live->size);
	assert_int_equal(rec->vcpus, live->vcpus);
	assert_string_equal(rec->image, live->image);
	assert_int_equal(rec->created_at_ms, live->created_at_ms);
	assert_int_equal(rec->expires_at_ms, live->expires_at_ms);
	assert_int_equal(rec->auto_resume, live->auto_resume);
	assert_string_equal(rec->metadata[0], "team=blue");
	assert_string_equal(rec->envs[0], "GREETING=hi");
	assert_non_null(rec->network);
	assert_int_equal(rec->network->mode, SAAS_NETWORK_POLICY);
	assert_string_equal(rec->network->allow[0], "example.com");
	/* Recorded counts are never above the live ones (nothing was refused here: both 0). */
	assert_true(rec->network->denied_connections <= live->network->denied_connections);
	assert_true(rec->network->denied_lookups <= live->network->denied_lookups);
	saas_sandbox_free(rec);
	saas_sandbox_free(live);
	live = NULL;
	/* Flags 0: saas_sandbox_get() itself. */
	EXPECT(saas_sandbox_get_ext(&live, f->a, sb->id, 0), SAAS_OK);
	assert_string_equal(live->id, sb->id);
	saas_sandbox_free(live);

	/* Another account's is not there; bad ids and flags are refused before any call, out cleared. */
	rec = (saas_sandbox *)1;
	EXPECT(saas_sandbox_get_ext(&rec, f->b, sb->id, SAAS_GET_RECORDED), SAAS_ENOTFOUND);
	assert_null(rec);
	EXPECT(saas_sandbox_get_ext(&rec, f->a, "sbx-nosuchsandbox0000", SAAS_GET_RECORDED), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_get_ext(&rec, f->a, "", SAAS_GET_RECORDED), SAAS_EINVAL);
	EXPECT(saas_sandbox_get_ext(&rec, f->a, NULL, SAAS_GET_RECORDED), SAAS_EINVAL);
	rec = (saas_sandbox *)1;
	EXPECT(saas_sandbox_get_ext(&rec, f->a, sb->id, 1u << 7), SAAS_EINVAL);
	assert_null(rec);
	assert_non_null(strstr(saas_error_last()->message, "unknown flags"));
	EXPECT(saas_sandbox_get_ext(NULL, f->a, sb->id, SAAS_GET_RECORDED), SAAS_EINVAL);
	EXPECT(saas_sandbox_get_ext(&rec, NULL, sb->id, SAAS_GET_RECORDED), SAAS_EINVAL);

	/* A destroyed one reads as destroyed, with its record's counts. */
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_sandbox_get_ext(&rec, f->a, sb->id, SAAS_GET_RECORDED), SAAS_OK);
	assert_int_equal(rec->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(rec->network->mode, SAAS_NETWORK_POLICY);
	saas_sandbox_free(rec);
	saas_sandbox_free(sb);
}

static void test_list(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *s[3];
	saas_sandbox_list *l = NULL, *l2 = NULL;

	for (int i = 0; i < 3; i++) {
		s[i] = create(f->a, NULL, 0);
		usleep(5000); /* newest first means a later creation time */
	}
	EXPECT(saas_sandbox_destroy(NULL, f->a, s[1]->id, 0), SAAS_OK);

	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 0, 0), SAAS_OK);
	assert_int_equal(l->count, 3);
	assert_null(l->next_cursor);
	/* newest first */
	assert_string_equal(l->items[0]->id, s[2]->id);
	assert_string_equal(l->items[2]->id, s[0]->id);
	saas_sandbox_list_free(l);

	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 2, 0), SAAS_OK);
	assert_int_equal(l->count, 2);
	assert_non_null(l->next_cursor);
	EXPECT(saas_sandbox_list_get(&l2, f->a, l->next_cursor, 2, 0), SAAS_OK);
	assert_int_equal(l2->count, 1);
	assert_null(l2->next_cursor);
	assert_string_equal(l2->items[0]->id, s[0]->id);
	saas_sandbox_list_free(l);
	saas_sandbox_list_free(l2);

	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
	assert_int_equal(l->count, 2);
	saas_sandbox_list_free(l);
	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_DESTROYED), SAAS_OK);
	assert_int_equal(l->count, 1);
	assert_string_equal(l->items[0]->id, s[1]->id);
	assert_int_equal(l->items[0]->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(l->items[0]->end_reason, SAAS_END_USER);
	saas_sandbox_list_free(l);
	/* The other account sees none of them. */
	EXPECT(saas_sandbox_list_get(&l, f->b, NULL, 0, 0), SAAS_OK);
	assert_int_equal(l->count, 0);
	assert_null(l->next_cursor);
	saas_sandbox_list_free(l);

	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_ACTIVE | SAAS_LIST_DESTROYED), SAAS_EINVAL);
	assert_null(l);
	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 1001, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_list_get(&l, f->a, NULL, 0, 1u << 7), SAAS_EINVAL);
	EXPECT(saas_sandbox_list_get(&l, f->a, "", 0, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_list_get(&l, f->a, "garbage!", 0, 0), SAAS_EINVAL);
	for (int i = 0; i < 3; i++)
		saas_sandbox_free(s[i]);
}

/* SAAS_LIST_RECORDED: the same listing (filters, pages, tenancy) with the counters as last recorded. */
static void test_list_recorded(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const metadata[] = { "team=blue", NULL };
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	saas_sandbox_list *live = NULL, *rec = NULL, *l2 = NULL;
	saas_sandbox *s[3];

	o.metadata = metadata;
	for (int i = 0; i < 3; i++) {
		s[i] = NULL;
		EXPECT(saas_sandbox_create(&s[i], f->a, i == 1 ? &o : NULL, 0), SAAS_OK);
		usleep(5000); /* newest first means a later creation time */
	}
	EXPECT(saas_sandbox_destroy(NULL, f->a, s[0]->id, 0), SAAS_OK);

	EXPECT(saas_sandbox_list_get(&live, f->a, NULL, 0, 0), SAAS_OK);
	EXPECT(saas_sandbox_list_get(&rec, f->a, NULL, 0, SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(rec->count, 3);
	assert_int_equal(rec->count, live->count);
	assert_null(rec->next_cursor);
	for (size_t i = 0; i < rec->count; i++) {
		assert_string_equal(rec->items[i]->id, live->items[i]->id);
		assert_int_equal(rec->items[i]->status, live->items[i]->status);
		assert_int_equal(rec->items[i]->expires_at_ms, live->items[i]->expires_at_ms);
		assert_non_null(rec->items[i]->network);
		assert_int_equal(rec->items[i]->network->mode, live->items[i]->network->mode);
		/* Recorded counts are never above the live ones. */
		assert_true(rec->items[i]->network->denied_connections <= live->items[i]->network->denied_connections);
		assert_true(rec->items[i]->network->denied_lookups <= live->items[i]->network->denied_lookups);
	}
	assert_string_equal(rec->items[1]->metadata[0], "team=blue");
	saas_sandbox_list_free(live);
	saas_sandbox_list_free(rec);

	/* With either filter, in pages, and through saas_sandbox_list_query()'s metadata. */
	EXPECT(saas_sandbox_list_get(&rec, f->a, NULL, 1, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(rec->count, 1);
	assert_string_equal(rec->items[0]->id, s[2]->id);
	assert_non_null(rec->next_cursor);
	EXPECT(saas_sandbox_list_get(&l2, f->a, rec->next_cursor, 1, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(l2->count, 1);
	assert_string_equal(l2->items[0]->id, s[1]->id);
	saas_sandbox_list_free(rec);
	saas_sandbox_list_free(l2);
	EXPECT(saas_sandbox_list_get(&rec, f->a, NULL, 0, SAAS_LIST_DESTROYED | SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(rec->count, 1);
	assert_string_equal(rec->items[0]->id, s[0]->id);
	assert_int_equal(rec->items[0]->status, SAAS_SANDBOX_DESTROYED);
	saas_sandbox_list_free(rec);
	lo.metadata = metadata;
	EXPECT(saas_sandbox_list_query(&rec, f->a, &lo, SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(rec->count, 1);
	assert_string_equal(rec->items[0]->id, s[1]->id);
	saas_sandbox_list_free(rec);

	/* The other account sees none of them; the filters still exclude each other; unknown bits are refused. */
	EXPECT(saas_sandbox_list_get(&rec, f->b, NULL, 0, SAAS_LIST_RECORDED), SAAS_OK);
	assert_int_equal(rec->count, 0);
	saas_sandbox_list_free(rec);
	rec = (saas_sandbox_list *)1;
	EXPECT(saas_sandbox_list_get(&rec, f->a, NULL, 0, SAAS_LIST_ACTIVE | SAAS_LIST_DESTROYED | SAAS_LIST_RECORDED),
	       SAAS_EINVAL);
	assert_null(rec);
	EXPECT(saas_sandbox_list_get(&rec, f->a, NULL, 0, SAAS_LIST_RECORDED | (1u << 7)), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "unknown flags"));
	for (int i = 0; i < 3; i++)
		saas_sandbox_free(s[i]);
}

/* A sandbox's history: every execution, running or ended, newest first, a page at a time. */
static void test_execution_history(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *x[3] = { NULL, NULL, NULL };
	saas_execution_list *l = NULL, *page = NULL;
	char *cursor = NULL;
	size_t seen = 0;

	x[0] = run(f->a, sb->id, "echo one", NULL);
	usleep(5000); /* newest first means a later start */
	x[1] = run(f->a, sb->id, "exit 3", NULL);
	usleep(5000);
	EXPECT(saas_exec(&x[2], f->a, sb->id, "wait", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);

	EXPECT(saas_execution_list_get(&l, f->a, sb->id, NULL, 0, 0), SAAS_OK);
	assert_int_equal(l->count, 3);
	assert_null(l->next_cursor);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(l->items[i]->id, x[2 - i]->id);
	assert_int_equal(l->items[0]->status, SAAS_EXEC_RUNNING);
	assert_string_equal(l->items[0]->command, "wait");
	assert_int_equal(l->items[1]->status, SAAS_EXEC_EXITED);
	assert_int_equal(l->items[1]->exit_code, 3);
	assert_string_equal(l->items[1]->command, "exit 3");
	assert_string_equal(l->items[2]->command, "echo one");
	assert_true(l->items[2]->finished_at_ms >= l->items[2]->started_at_ms);
	/* Without output: read one by its id for that. */
	assert_int_equal(l->items[2]->stdout_len, 0);
	saas_execution_list_free(l);
	l = NULL;

	/* One at a time from each page's cursor: the same three, in order, then the end. */
	do {
		EXPECT(saas_execution_list_get(&page, f->a, sb->id, cursor, 1, 0), SAAS_OK);
		free(cursor);
		cursor = page->next_cursor ? strdup(page->next_cursor) : NULL;
		assert_true(page->count <= 1);
		if (page->count) {
			assert_true(seen < 3);
			assert_string_equal(page->items[0]->id, x[2 - seen]->id);
			seen++;
		}
		saas_execution_list_free(page);
		page = NULL;
	} while (cursor);
	assert_int_equal(seen, 3);

	/* Another account's sandbox is not found; bad input is refused before any work. */
	l = (saas_execution_list *)1;
	EXPECT(saas_execution_list_get(&l, f->b, sb->id, NULL, 0, 0), SAAS_ENOTFOUND);
	assert_null(l);
	EXPECT(saas_execution_list_get(&l, f->a, "sbx-nosuch", NULL, 0, 0), SAAS_ENOTFOUND);
	EXPECT(saas_execution_list_get(&l, f->a, sb->id, NULL, SAAS_EXECUTION_LIST_MAX + 1, 0), SAAS_EINVAL);
	EXPECT(saas_execution_list_get(&l, f->a, sb->id, NULL, 0, 1u << 3), SAAS_EINVAL);
	EXPECT(saas_execution_list_get(&l, f->a, sb->id, "", 0, 0), SAAS_EINVAL);
	EXPECT(saas_execution_list_get(&l, f->a, sb->id, "garbage!", 0, 0), SAAS_EINVAL);
	EXPECT(saas_execution_list_get(NULL, f->a, sb->id, NULL, 0, 0), SAAS_EINVAL);
	assert_null(l);

	/* A destroyed sandbox keeps its history; what ran failed with it. */
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_execution_list_get(&l, f->a, sb->id, NULL, 0, 0), SAAS_OK);
	assert_int_equal(l->count, 3);
	assert_string_equal(l->items[0]->id, x[2]->id);
	assert_int_equal(l->items[0]->status, SAAS_EXEC_FAILED);
	saas_execution_list_free(l);
	for (int i = 0; i < 3; i++)
		saas_execution_free(x[i]);
	saas_sandbox_free(sb);
}

static void test_exec(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	static const char *const env[] = { "GREETING=hi there", "EMPTY=", NULL };
	static const unsigned char bin[] = { 0xff, 0x00, 'a', 0x00, 0xfe, '\n' };
	saas_execution *x, *again = NULL;

	x = run(f->a, sb->id, "echo hello", NULL);
	assert_true(strncmp(x->id, "exe-", 4) == 0);
	assert_string_equal(x->sandbox_id, sb->id);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 0);
	assert_int_equal(x->stdout_len, 6);
	assert_memory_equal(x->stdout_data, "hello\n", 7); /* NUL-terminated */
	assert_int_equal(x->stderr_len, 0);
	assert_string_equal(x->stderr_data, "");
	assert_false(x->stdout_truncated);
	assert_string_equal(x->error, "");
	assert_true(x->started_at_ms > 0 && x->finished_at_ms >= x->started_at_ms);
	assert_int_equal(x->duration_ms, x->finished_at_ms - x->started_at_ms);

	EXPECT(saas_execution_get(&again, f->a, x->id), SAAS_OK);
	assert_string_equal(again->id, x->id);
	assert_int_equal(again->status, SAAS_EXEC_EXITED);
	assert_int_equal(again->stdout_len, 6);
	assert_memory_equal(again->stdout_data, "hello\n", 6);
	assert_int_equal(again->started_at_ms, x->started_at_ms);
	assert_int_equal(again->finished_at_ms, x->finished_at_ms);
	saas_execution_free(again);
	saas_execution_free(x);

	x = run(f->a, sb->id, "exit 3", NULL);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 3);
	saas_execution_free(x);

	x = run(f->a, sb->id, "no-such-command", NULL);
	assert_int_equal(x->exit_code, 127);
	assert_non_null(strstr(x->stderr_data, "not found"));
	saas_execution_free(x);

	o.timeout_s = 1;
	x = run(f->a, sb->id, "sleep 100", &o);
	assert_int_equal(x->status, SAAS_EXEC_TIMEDOUT);
	assert_int_equal(x->exit_code, -1);
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.max_output = 1000;
	x = run(f->a, sb->id, "spew 2000", &o);
	assert_int_equal(x->stdout_len, 1000);
	assert_int_equal(x->stderr_len, 1000);
	assert_true(x->stdout_truncated);
	assert_true(x->stderr_truncated);
	assert_int_equal(x->stdout_data[0], 'x');
	assert_int_equal(x->stderr_data[999], 'y');
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.env = env;
	x = run(f->a, sb->id, "env", &o);
	assert_string_equal(x->stdout_data, "GREETING=hi there\nEMPTY=\n");
	saas_execution_free(x);

	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	x = run(f->a, sb->id, "pwd", &o);
	assert_string_equal(x->stdout_data, "/workspace\n");
	saas_execution_free(x);
	o.cwd = "/tmp";
	x = run(f->a, sb->id, "pwd", &o);
	assert_string_equal(x->stdout_data, "/tmp\n");
	saas_execution_free(x);
	/* A relative directory is under /workspace, as a terminal's and a file's path are (not under the home). */
	o.cwd = "src/app dir";
	x = run(f->a, sb->id, "pwd", &o);
	assert_string_equal(x->stdout_data, "/workspace/src/app dir\n");
	saas_execution_free(x);
	o.cwd = NULL;

	/* stdin and stdout are bytes: NULs and invalid UTF-8 go through. */
	o = (saas_exec_options)SAAS_EXEC_OPTIONS_INIT;
	o.stdin_data = bin;
	o.stdin_len = sizeof(bin);
	x = run(f->a, sb->id, "cat", &o);
	assert_int_equal(x->stdout_len, sizeof(bin));
	assert_memory_equal(x->stdout_data, bin, sizeof(bin));
	assert_int_equal(x->stdout_data[sizeof(bin)], '\0');
	saas_execution_free(x);
	/* valid UTF-8 with a NUL */
	o.stdin_data = "a\0b\xc3\xa9";
	o.stdin_len = 5;
	x = run(f->a, sb->id, "cat", &o);
	assert_int_equal(x->stdout_len, 5);
	assert_memory_equal(x->stdout_data, "a\0b\xc3\xa9", 5);
	saas_execution_free(x);
	saas_sandbox_free(sb);
}

static void test_exec_bad_input(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	static const char *const bad_env[] = { "1BAD=x", NULL };
	static const char *const no_eq[] = { "NOEQUALS", NULL };
	saas_execution *x = (saas_execution *)1;

	EXPECT(saas_exec(&x, f->a, sb->id, "", NULL, 0), SAAS_EINVAL);
	assert_null(x);
	EXPECT(saas_exec(&x, f->a, sb->id, NULL, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_exec(&x, f->a, sb->id, "echo \xff", NULL, 0), SAAS_EINVAL);
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", NULL, 1u << 9), SAAS_EINVAL);
	EXPECT(saas_exec(NULL, f->a, sb->id, "echo", NULL, 0), SAAS_EINVAL);
	o.timeout_s = SAAS_EXEC_TIMEOUT_MAX + 1;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.timeout_s = 0;
	o.max_output = SAAS_EXEC_OUTPUT_MAX + 1;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.max_output = 0;
	o.env = bad_env;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.env = no_eq;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.env = NULL;
	o.stdin_data = "x";
	o.stdin_len = SAAS_EXEC_STDIN_MAX + 1;
	EXPECT(saas_exec(&x, f->a, sb->id, "cat", &o, 0), SAAS_ETOOBIG);
	o.stdin_data = NULL;
	o.stdin_len = 1;
	EXPECT(saas_exec(&x, f->a, sb->id, "cat", &o, 0), SAAS_EINVAL);
	o.stdin_len = 0;
	o.cwd = "bad\npath";
	EXPECT(saas_exec(&x, f->a, sb->id, "pwd", &o, 0), SAAS_EINVAL);
	o.cwd = NULL;
	o.version = 0;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.version = SAAS_EXEC_OPTIONS_VERSION + 1;
	EXPECT(saas_exec(&x, f->a, sb->id, "echo", &o, 0), SAAS_EINVAL);
	o.version = SAAS_EXEC_OPTIONS_VERSION;
	EXPECT(saas_exec(&x, f->a, "sbx-nosuch", "echo hi", NULL, 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_exec(&x, f->a, sb->id, "echo hi", NULL, 0), SAAS_ESTATE);
	EXPECT(saas_execution_get(&x, f->a, ""), SAAS_EINVAL);
	saas_sandbox_free(sb);
}

static void test_background(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *x = NULL, *y = NULL;

	EXPECT(saas_exec(&x, f->a, sb->id, "echo bg", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	assert_true(strncmp(x->id, "exe-", 4) == 0);
	assert_true(x->status == SAAS_EXEC_RUNNING || x->status == SAAS_EXEC_EXITED);
	for (int i = 0; i < 200; i++) {
		saas_execution_free(y);
		y = NULL;
		EXPECT(saas_execution_get(&y, f->a, x->id), SAAS_OK);
		if (y->status != SAAS_EXEC_RUNNING)
			break;
		usleep(10000);
	}
	assert_int_equal(y->status, SAAS_EXEC_EXITED);
	assert_int_equal(y->exit_code, 0);
	assert_string_equal(y->stdout_data, "bg\n");
	assert_true(y->finished_at_ms >= y->started_at_ms);
	saas_execution_free(y);
	saas_execution_free(x);
	saas_sandbox_free(sb);
}

/* ---- executions as they run: streaming, following, stdin, signals, the running list ---- */

struct seen {
	char id[64];
	saas__buf out, err;       /* what the output callback was given, in order */
	uint64_t next[2];         /* the offset the next chunk of each stream must start at */
	int exits, exit_status, exit_code;
	const char *stop_after;   /* stop (return 1) once stdout holds this */
	bool started_cancels;
};

static int seen_started(void *ud, const char *id)
{
	struct seen *s = ud;

	snprintf(s->id, sizeof(s->id), "%s", id);
	return s->started_cancels;
}

static int seen_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct seen *s = ud;

	assert_true(stream == SAAS_EXEC_STDOUT || stream == SAAS_EXEC_STDERR);
	/* In order, nothing twice, nothing skipped. */
	assert_int_equal(offset, s->next[stream - 1]);
	s->next[stream - 1] += len;
	saas__buf_put(stream == SAAS_EXEC_STDOUT ? &s->out : &s->err, data, len);
	return s->stop_after && s->out.data && strstr(s->out.data, s->stop_after) != NULL;
}

static void seen_exit(void *ud, const saas_execution *x)
{
	struct seen *s = ud;

	s->exits++;
	s->exit_status = x->status;
	s->exit_code = x->exit_code;
}

static saas_exec_callbacks seen_callbacks(struct seen *s)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;

	cb.started = seen_started;
	cb.output = seen_output;
	cb.exit = seen_exit;
	cb.userdata = s;
	return cb;
}

static void seen_clear(struct seen *s)
{
	saas__buf_free(&s->out);
	saas__buf_free(&s->err);
	memset(s, 0, sizeof(*s));
}

static void test_exec_stream(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	struct seen s;
	saas_exec_callbacks cb;
	saas_execution *x = NULL;

	memset(&s, 0, sizeof(s));
	cb = seen_callbacks(&s);
	EXPECT(saas_exec_stream(&x, f->a, sb->id, "lines 3", NULL, &cb, 0), SAAS_OK);
	assert_string_equal(s.out.data, "line 1\nline 2\nline 3\n");
	assert_string_equal(s.err.data, "done\n");
	assert_string_equal(s.id, x->id);
	assert_int_equal(s.exits, 1);
	assert_int_equal(s.exit_status, SAAS_EXEC_EXITED);
	/* The result is the whole of it, as saas_exec's. */
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_string_equal(x->stdout_data, "line 1\nline 2\nline 3\n");
	saas_execution_free(x);
	seen_clear(&s);

	/* Cancelled from the output callback: killed, recorded as failed. */
	cb = seen_callbacks(&s);
	s.stop_after = "x";
	o.stdin_data = "x";
	o.stdin_len = 1;
	EXPECT(saas_exec_stream(&x, f->a, sb->id, "cat", &o, &cb, SAAS_EXEC_STDIN_OPEN), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_FAILED);
	assert_non_null(strstr(x->error, "cancel"));
	assert_string_equal(x->stdout_data, "x");
	saas_execution_free(x);
	seen_clear(&s);

	/*
	 * Cancelled from `started`: locally before it runs; over REST the server
	 * tells of the start once it has started, so a quick command may be done.
	 */
	cb = seen_callbacks(&s);
	s.started_cancels = true;
	EXPECT(saas_exec_stream(&x, f->a, sb->id, P.remote ? "wait" : "echo never", NULL, &cb, 0), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_FAILED);
	assert_int_equal(x->stdout_len, 0);
	saas_execution_free(x);
	seen_clear(&s);

	/* No callbacks: saas_exec. Bad flags and versions are refused. */
	EXPECT(saas_exec_stream(&x, f->a, sb->id, "echo plain", NULL, NULL, 0), SAAS_OK);
	assert_string_equal(x->stdout_data, "plain\n");
	saas_execution_free(x);
	x = NULL;
	EXPECT(saas_exec_stream(&x, f->a, sb->id, "echo", NULL, NULL, SAAS_EXEC_BACKGROUND), SAAS_EINVAL);
	cb = seen_callbacks(&s);
	cb.version = SAAS_EXEC_CALLBACKS_VERSION + 1;
	EXPECT(saas_exec_stream(&x, f->a, sb->id, "echo", NULL, &cb, 0), SAAS_EINVAL);
	assert_null(x);
	saas_sandbox_free(sb);
}

/* The running executions of a sandbox, as ids joined by spaces. */
static void running_ids(saas_client *c, const char *sandbox_id, char *out, size_t cap)
{
	saas_execution_list *l = NULL;

	EXPECT(saas_execution_list_running(&l, c, sandbox_id, 0), SAAS_OK);
	out[0] = '\0';
	for (size_t i = 0; i < l->count; i++) {
		assert_int_equal(l->items[i]->status, SAAS_EXEC_RUNNING);
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", l->items[i]->id);
	}
	saas_execution_list_free(l);
}

static void test_exec_live(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *cat = NULL, *w = NULL, *x = NULL, *plain = NULL;
	saas_exec_cursor cur = { 0, 0 };
	saas_exec_callbacks cb;
	struct seen s;
	char ids[256], both[256];

	/* A cat that reads what it is sent while it runs. */
	EXPECT(saas_exec(&cat, f->a, sb->id, "cat", NULL, SAAS_EXEC_BACKGROUND | SAAS_EXEC_STDIN_OPEN), SAAS_OK);
	EXPECT(saas_exec(&w, f->a, sb->id, "wait", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	running_ids(f->a, sb->id, ids, sizeof(ids));
	snprintf(both, sizeof(both), "%s %s", cat->id, w->id);
	assert_string_equal(ids, both);

	EXPECT(saas_execution_stdin(f->a, cat->id, "hello\n", 6, 0), SAAS_OK);
	memset(&s, 0, sizeof(s));
	cb = seen_callbacks(&s);
	s.stop_after = "hello\n";
	EXPECT(saas_execution_follow(NULL, f->a, cat->id, &cur, &cb, 0, SAAS_FOLLOW_WAIT), SAAS_OK);
	assert_string_equal(s.out.data, "hello\n");
	assert_int_equal(cur.stdout_offset, 6);
	assert_int_equal(s.exits, 0);
	/* Its output so far, while it runs. */
	EXPECT(saas_execution_get(&x, f->a, cat->id), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	assert_string_equal(x->stdout_data, "hello\n");
	assert_true(x->stdin_open);
	saas_execution_free(x);
	x = NULL;

	/* The rest and the end, from where the reader was: nothing twice. */
	EXPECT(saas_execution_stdin(f->a, cat->id, "bye\n", 4, SAAS_STDIN_CLOSE), SAAS_OK);
	seen_clear(&s);
	cb = seen_callbacks(&s);
	s.next[0] = 6;
	EXPECT(saas_execution_follow(&x, f->a, cat->id, &cur, &cb, 0, SAAS_FOLLOW_WAIT), SAAS_OK);
	assert_string_equal(s.out.data, "bye\n");
	assert_int_equal(s.exits, 1);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 0);
	assert_string_equal(x->stdout_data, "hello\nbye\n");
	saas_execution_free(x);
	x = NULL;
	/* A reconnect from the start of an ended execution gets it all again. */
	seen_clear(&s);
	cb = seen_callbacks(&s);
	cur.stdout_offset = cur.stderr_offset = 0;
	EXPECT(saas_execution_follow(NULL, f->a, cat->id, &cur, &cb, 0, 0), SAAS_OK);
	assert_string_equal(s.out.data, "hello\nbye\n");
	assert_int_equal(s.exits, 1);
	seen_clear(&s);
	EXPECT(saas_execution_stdin(f->a, cat->id, "late", 4, 0), SAAS_ESTATE);

	/* Signals: a bad name is refused; TERM to the group ends it as a shell reports it. */
	EXPECT(saas_execution_signal(f->a, w->id, "STOP", SAAS_SIGNAL_GROUP), SAAS_EINVAL);
	EXPECT(saas_execution_signal(f->a, w->id, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_execution_stdin(f->a, w->id, "x", 1, 0), SAAS_ESTATE); /* its stdin was never open */
	/* Another account sees none of it. */
	EXPECT(saas_execution_signal(f->b, w->id, "TERM", SAAS_SIGNAL_GROUP), SAAS_ENOTFOUND);
	EXPECT(saas_execution_stdin(f->b, w->id, "x", 1, 0), SAAS_ENOTFOUND);
	saas_execution_list *l = (saas_execution_list *)1;
	EXPECT(saas_execution_list_running(&l, f->b, sb->id, 0), SAAS_ENOTFOUND);
	assert_null(l);
	EXPECT(saas_execution_signal(f->a, w->id, "SIGTERM", SAAS_SIGNAL_GROUP), SAAS_OK);
	cur.stdout_offset = cur.stderr_offset = 0;
	EXPECT(saas_execution_follow(&x, f->a, w->id, &cur, NULL, 0, SAAS_FOLLOW_WAIT), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 128 + 15);
	saas_execution_free(x);
	x = NULL;
	EXPECT(saas_execution_signal(f->a, w->id, "KILL", 0), SAAS_ESTATE);
	running_ids(f->a, sb->id, ids, sizeof(ids));
	assert_string_equal(ids, "");

	/* Without SAAS_FOLLOW_WAIT a follow returns at once with what there is. */
	EXPECT(saas_exec(&plain, f->a, sb->id, "wait", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	cur.stdout_offset = cur.stderr_offset = 0;
	EXPECT(saas_execution_follow(&x, f->a, plain->id, &cur, NULL, 0, 0), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	saas_execution_free(x);
	x = NULL;
	EXPECT(saas_execution_signal(f->a, plain->id, "KILL", SAAS_SIGNAL_GROUP), SAAS_OK);
	EXPECT(saas_execution_follow(&x, f->a, plain->id, &cur, NULL, 0, SAAS_FOLLOW_WAIT), SAAS_OK);
	assert_int_equal(x->exit_code, 128 + 9);
	saas_execution_free(x);
	x = NULL;

	/* Bad arguments. */
	EXPECT(saas_execution_follow(NULL, f->a, cat->id, NULL, NULL, 0, 0), SAAS_EINVAL);
	EXPECT(saas_execution_follow(NULL, f->a, cat->id, &cur, NULL, SAAS_EXEC_FOLLOW_WAIT_MAX + 1, SAAS_FOLLOW_WAIT),
	       SAAS_EINVAL);
	EXPECT(saas_execution_follow(NULL, f->a, "exe-nosuch", &cur, NULL, 0, 0), SAAS_ENOTFOUND);
	EXPECT(saas_execution_stdin(f->a, "exe-nosuch", "x", 1, 0), SAAS_ENOTFOUND);
	EXPECT(saas_execution_stdin(f->a, cat->id, NULL, 1, 0), SAAS_EINVAL);
	EXPECT(saas_execution_stdin(f->a, cat->id, "x", SAAS_EXEC_STDIN_PENDING_MAX + 1, 0), SAAS_ETOOBIG);
	EXPECT(saas_execution_signal(f->a, "exe-nosuch", "TERM", 0), SAAS_ENOTFOUND);
	EXPECT(saas_execution_list_running(&l, f->a, "sbx-nosuch", 0), SAAS_ENOTFOUND);
	saas_execution_free(plain);
	saas_execution_free(w);
	saas_execution_free(cat);
	saas_sandbox_free(sb);
}

/*
 * SAAS_FOLLOW_STARTED: a follow that returns once the guest runs the command
 * (the fake's `startafter PATH` runs once PATH exists). A local client waits
 * for it; a remote one cannot tell and answers at once, counted started.
 */
static void test_follow_started(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *held = NULL, *x = NULL;
	saas_exec_cursor cur = { 0, 0 };
	char dir[] = "/tmp/aas-started-XXXXXX", gate[64];
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(gate, sizeof(gate), "%s/go", dir);
	{
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "startafter %s", gate);
		EXPECT(saas_exec(&held, f->a, sb->id, cmd, NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	}
	EXPECT(saas_execution_follow(&x, f->a, held->id, &cur, NULL, 200, SAAS_FOLLOW_WAIT | SAAS_FOLLOW_STARTED),
	       SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_RUNNING);
	/* Locally the gate is shut, whatever the time: the guest has not run it. */
	assert_int_equal(x->started, P.remote ? 1 : 0);
	saas_execution_free(x);
	x = NULL;
	assert_true((fd = open(gate, O_CREAT | O_WRONLY, 0600)) >= 0);
	close(fd);
	/* Now it starts, and a follow for that returns (without a bound, a test that hangs says the wake is lost). */
	EXPECT(saas_execution_follow(&x, f->a, held->id, &cur, NULL, 0, SAAS_FOLLOW_WAIT | SAAS_FOLLOW_STARTED),
	       SAAS_OK);
	assert_true(x->started);
	saas_execution_free(x);
	x = NULL;
	EXPECT(saas_execution_follow(&x, f->a, held->id, &cur, NULL, 0, SAAS_FOLLOW_WAIT), SAAS_OK);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 0);
	assert_true(x->started);
	saas_execution_free(x);
	x = NULL;
	/* Output is a start too, for a driver that does not say it: every other fake command starts at once. */
	EXPECT(saas_exec(&x, f->a, sb->id, "echo hi", NULL, 0), SAAS_OK);
	assert_true(x->started);
	saas_execution_free(x);
	x = NULL;
	/* A way to wait only. */
	EXPECT(saas_execution_follow(NULL, f->a, held->id, &cur, NULL, 0, SAAS_FOLLOW_STARTED), SAAS_EINVAL);
	EXPECT(saas_execution_follow(NULL, f->a, held->id, &cur, NULL, 0, 1u << 2), SAAS_EINVAL);
	unlink(gate);
	rmdir(dir);
	saas_execution_free(held);
	saas_sandbox_free(sb);
}

struct chunks {
	const unsigned char *data;
	size_t len, off, chunk;
	int fail_at;   /* fail when off reaches this (or -1) */
};

static long read_chunks(void *ud, void *buf, size_t size)
{
	struct chunks *c = ud;
	size_t n = c->len - c->off;

	if (c->fail_at >= 0 && c->off >= (size_t)c->fail_at)
		return -1;
	if (n > size)
		n = size;
	if (n > c->chunk)
		n = c->chunk;
	memcpy(buf, c->data + c->off, n);
	c->off += n;
	return (long)n;
}

struct sink {
	unsigned char *data;
	size_t len;
	int calls, stop;
};

static int write_sink(void *ud, const void *data, size_t size)
{
	struct sink *s = ud;
	unsigned char *p;

	s->calls++;
	if (s->stop)
		return 1;
	if (!(p = realloc(s->data, s->len + size + 1)))
		return 1;
	s->data = p;
	memcpy(s->data + s->len, data, size);
	s->len += size;
	return 0;
}

/*
 * The guest's unprivileged user and its kernel's limits: permission denied is
 * SAAS_EPERM (not an I/O failure), and a name or path the guest would refuse
 * is SAAS_EINVAL before the guest is asked.
 */
static void check_guest_paths(struct saas_test_fixture *f, const char *id)
{
	char name[SAAS_NAME_MAX + 2], path[SAAS_PATH_MAX + 1];
	saas_file_list *fl = NULL;
	void *data = NULL;
	size_t len, n;

	EXPECT(saas_file_write(f->a, id, "/etc/x", "x", 1, NULL), SAAS_EPERM);
	assert_non_null(strstr(saas_error_last()->message, "permission denied"));
	EXPECT(saas_file_read(&data, &len, f->a, id, "/etc/shadow", 0), SAAS_EPERM);
	assert_null(data);

	memset(name, 'n', sizeof(name));
	name[SAAS_NAME_MAX] = '\0';
	EXPECT(saas_file_write(f->a, id, name, "x", 1, NULL), SAAS_OK);
	name[SAAS_NAME_MAX] = 'n';
	name[SAAS_NAME_MAX + 1] = '\0';
	EXPECT(saas_file_write(f->a, id, name, "x", 1, NULL), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "at most 255"));
	EXPECT(saas_file_read(&data, &len, f->a, id, name, 0), SAAS_EINVAL);
	EXPECT(saas_file_list_get(&fl, f->a, id, name, 0, 0, 0), SAAS_EINVAL);
	assert_null(fl);
	snprintf(path, sizeof(path), "/tmp/%s/x", name);
	EXPECT(saas_file_write(f->a, id, path, "x", 1, NULL), SAAS_EINVAL);

	/* A path of SAAS_PATH_MAX - 1 bytes once absolute is the longest the guest takes. */
	for (n = 0; n < SAAS_PATH_MAX - 1; n++)
		path[n] = n % 200 == 0 ? '/' : 'p';
	path[n] = '\0';
	EXPECT(saas_file_write(f->a, id, path, "x", 1, NULL), SAAS_EPERM); /* / is root's */
	memcpy(path, "/tmp/", 5);
	EXPECT(saas_file_write(f->a, id, path, "x", 1, NULL), SAAS_OK);
	path[n] = 'p';
	path[n + 1] = '\0';
	EXPECT(saas_file_write(f->a, id, path, "x", 1, NULL), SAAS_EINVAL);
	/* Relative: under /workspace/, 11 bytes more. */
	path[SAAS_PATH_MAX - (sizeof("/workspace/") - 1)] = '\0'; /* path + 1: 4084 bytes, 4095 under /workspace/ */
	EXPECT(saas_file_write(f->a, id, path + 1, "x", 1, NULL), SAAS_OK);
	n = strlen(path);
	path[n] = 'p';
	path[n + 1] = '\0';
	EXPECT(saas_file_write(f->a, id, path + 1, "x", 1, NULL), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "too long"));
}

static void test_files(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_file_write_options wo = SAAS_FILE_WRITE_OPTIONS_INIT;
	size_t n = 300000, len;
	unsigned char *blob = malloc(n);
	struct chunks rc = { 0 };
	struct sink sk = { 0 };
	saas_file_list *fl = NULL;
	int64_t size = -2;
	void *data = NULL;

	assert_non_null(blob);
	for (size_t i = 0; i < n; i++)
		blob[i] = (unsigned char)(i % 7 == 0 ? 0 : i * 31);

	/* Whole, then read back. */
	EXPECT(saas_file_write(f->a, sb->id, "data/blob.bin", blob, n, NULL), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "/workspace/data/blob.bin", 0), SAAS_OK);
	assert_int_equal(len, n);
	assert_memory_equal(data, blob, n);
	assert_int_equal(((char *)data)[n], '\0');
	saas_free(data);

	/* Streamed in small chunks, size unknown; read streamed. */
	rc = (struct chunks){ blob, n, 0, 4093, -1 };
	EXPECT(saas_file_write_stream(f->a, sb->id, "s.bin", read_chunks, &rc, -1, NULL), SAAS_OK);
	EXPECT(saas_file_read_stream(&size, f->a, sb->id, "s.bin", write_sink, &sk), SAAS_OK);
	assert_int_equal(size, (int64_t)n);
	assert_int_equal(sk.len, n);
	assert_memory_equal(sk.data, blob, n);
	free(sk.data);
	sk = (struct sink){ 0 };

	/* Known size, and a mode. */
	rc = (struct chunks){ blob, 10, 0, 3, -1 };
	wo.mode = 0755;
	EXPECT(saas_file_write_stream(f->a, sb->id, "bin/run", read_chunks, &rc, 10, &wo), SAAS_OK);
	/* An empty file. */
	EXPECT(saas_file_write(f->a, sb->id, "empty", NULL, 0, NULL), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "empty", 0), SAAS_OK);
	assert_int_equal(len, 0);
	saas_free(data);
	size = -2;
	EXPECT(saas_file_read_stream(&size, f->a, sb->id, "empty", write_sink, &sk), SAAS_OK);
	assert_int_equal(size, 0);
	assert_int_equal(sk.len, 0);

	/* Listing. */
	EXPECT(saas_file_list_get(&fl, f->a, sb->id, NULL, 0, 0, 0), SAAS_OK);
	assert_string_equal(fl->root, "/workspace");
	assert_int_equal(fl->count, 4);
	assert_false(fl->truncated);
	assert_string_equal(fl->entries[0]->path, "/workspace/bin/run");
	assert_int_equal(fl->entries[0]->type, SAAS_FILE_REGULAR);
	assert_int_equal(fl->entries[0]->size, 10);
	assert_int_equal(fl->entries[0]->mode, 0755);
	assert_string_equal(fl->entries[1]->path, "/workspace/data/blob.bin");
	assert_int_equal(fl->entries[1]->size, (int64_t)n);
	assert_int_equal(fl->entries[1]->mode, 0644);
	saas_file_list_free(fl);
	EXPECT(saas_file_list_get(&fl, f->a, sb->id, "/workspace", 1, 2, 0), SAAS_OK);
	assert_int_equal(fl->count, 2);
	assert_true(fl->truncated);
	saas_file_list_free(fl);

	/* Errors. */
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "missing.txt", 0), SAAS_ENOTFOUND);
	assert_null(data);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "data/blob.bin", 1000), SAAS_ETOOBIG);
	sk.stop = 1;
	EXPECT(saas_file_read_stream(NULL, f->a, sb->id, "s.bin", write_sink, &sk), SAAS_EIO);
	rc = (struct chunks){ blob, n, 0, 1000, 5000 };
	EXPECT(saas_file_write_stream(f->a, sb->id, "broken", read_chunks, &rc, -1, NULL), SAAS_EIO);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "broken", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_write(f->a, sb->id, "", "x", 1, NULL), SAAS_EINVAL);
	EXPECT(saas_file_write(f->a, sb->id, "a\tb", "x", 1, NULL), SAAS_EINVAL);
	EXPECT(saas_file_write(f->a, sb->id, "x", NULL, 1, NULL), SAAS_EINVAL);
	wo.mode = 010000;
	EXPECT(saas_file_write(f->a, sb->id, "x", "x", 1, &wo), SAAS_EINVAL);
	EXPECT(saas_file_write_stream(f->a, sb->id, "x", read_chunks, &rc, SAAS_FILE_MAX + 1, NULL), SAAS_ETOOBIG);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "x", -1), SAAS_EINVAL);
	EXPECT(saas_file_list_get(&fl, f->a, sb->id, NULL, SAAS_LIST_DEPTH_MAX + 1, 0, 0), SAAS_EINVAL);
	EXPECT(saas_file_read(&data, &len, f->a, "sbx-nosuch", "x", 0), SAAS_ENOTFOUND);
	check_guest_paths(f, sb->id);
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_file_write(f->a, sb->id, "x", "x", 1, NULL), SAAS_ESTATE);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "s.bin", 0), SAAS_ESTATE);
	EXPECT(saas_file_list_get(&fl, f->a, sb->id, NULL, 0, 0, 0), SAAS_ESTATE);
	free(sk.data);
	free(blob);
	saas_sandbox_free(sb);
}

/* Is path an entry of a listing of /workspace, of that type? */
static bool listed(struct saas_test_fixture *f, const char *id, const char *path, int type)
{
	saas_file_list *fl = NULL;
	bool found = false;

	EXPECT(saas_file_list_get(&fl, f->a, id, NULL, SAAS_LIST_DEPTH_MAX, 0, 0), SAAS_OK);
	for (size_t i = 0; i < fl->count; i++)
		found = found || (!strcmp(fl->entries[i]->path, path) && fl->entries[i]->type == type);
	saas_file_list_free(fl);
	return found;
}

/* Directories, removal and renames: the same answers locally and over REST. */
static void test_file_ops(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	void *data = NULL;
	size_t len;
	int created = -1;

	/* mkdir: made with its parents, then already there; a file in the way. */
	EXPECT(saas_file_mkdir(&created, f->a, sb->id, "d1/d2/d3", 0), SAAS_OK);
	assert_int_equal(created, 1);
	assert_true(listed(f, sb->id, "/workspace/d1/d2/d3", SAAS_FILE_DIRECTORY));
	assert_true(listed(f, sb->id, "/workspace/d1", SAAS_FILE_DIRECTORY));
	EXPECT(saas_file_mkdir(&created, f->a, sb->id, "/workspace/d1/d2/d3/", 0), SAAS_OK);
	assert_int_equal(created, 0);
	EXPECT(saas_file_mkdir(NULL, f->a, sb->id, "d1", 0), SAAS_OK);
	EXPECT(saas_file_write(f->a, sb->id, "d1/f.txt", "abc", 3, NULL), SAAS_OK);
	EXPECT(saas_file_mkdir(&created, f->a, sb->id, "d1/f.txt", 0), SAAS_EEXISTS);
	assert_int_equal(created, 0);
	EXPECT(saas_file_mkdir(&created, f->a, sb->id, "d1/f.txt/sub", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_mkdir(&created, f->a, sb->id, "/etc/nope", 0), SAAS_EPERM);

	/* rename: a file, refused over another unless replacing; a directory with what is in it. */
	EXPECT(saas_file_write(f->a, sb->id, "other.txt", "zz", 2, NULL), SAAS_OK);
	EXPECT(saas_file_rename(f->a, sb->id, "d1/f.txt", "other.txt", 0), SAAS_EEXISTS);
	EXPECT(saas_file_rename(f->a, sb->id, "d1/f.txt", "new/place/g.txt", 0), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "new/place/g.txt", 0), SAAS_OK);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "abc", 3);
	saas_free(data);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "d1/f.txt", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_rename(f->a, sb->id, "new/place/g.txt", "other.txt", SAAS_FILE_RENAME_REPLACE), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "/workspace/other.txt", 0), SAAS_OK);
	assert_memory_equal(data, "abc", 3);
	saas_free(data);
	EXPECT(saas_file_rename(f->a, sb->id, "other.txt", "d1", SAAS_FILE_RENAME_REPLACE), SAAS_EEXISTS);
	EXPECT(saas_file_write(f->a, sb->id, "d1/d2/deep.txt", "deep", 4, NULL), SAAS_OK);
	EXPECT(saas_file_rename(f->a, sb->id, "d1", "moved", 0), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "moved/d2/deep.txt", 0), SAAS_OK);
	saas_free(data);
	assert_true(listed(f, sb->id, "/workspace/moved/d2/d3", SAAS_FILE_DIRECTORY));
	EXPECT(saas_file_rename(f->a, sb->id, "missing", "x", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_rename(f->a, sb->id, "moved", "moved/d2/inside", 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "into itself"));
	EXPECT(saas_file_rename(f->a, sb->id, "moved", "//workspace//moved/x", 0), SAAS_EINVAL);
	EXPECT(saas_file_rename(f->a, sb->id, "moved", "moved2", 4), SAAS_EINVAL);
	EXPECT(saas_file_rename(f->a, sb->id, "/", "x", 0), SAAS_EINVAL);
	EXPECT(saas_file_rename(f->a, sb->id, "other.txt", "/etc/passwd2", 0), SAAS_EPERM);

	/* remove: a file, a tree; missing is not found; / is refused before the guest is asked. */
	EXPECT(saas_file_remove(f->a, sb->id, "other.txt", 0), SAAS_OK);
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "other.txt", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_remove(f->a, sb->id, "moved", 0), SAAS_OK);
	assert_false(listed(f, sb->id, "/workspace/moved/d2/d3", SAAS_FILE_DIRECTORY));
	EXPECT(saas_file_read(&data, &len, f->a, sb->id, "moved/d2/deep.txt", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_remove(f->a, sb->id, "moved", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_remove(f->a, sb->id, "/", 0), SAAS_EINVAL);
	EXPECT(saas_file_remove(f->a, sb->id, "///", 0), SAAS_EINVAL);
	EXPECT(saas_file_remove(f->a, sb->id, "", 0), SAAS_EINVAL);
	EXPECT(saas_file_remove(f->a, sb->id, "x", 1), SAAS_EINVAL);
	EXPECT(saas_file_mkdir(NULL, f->a, sb->id, "x", 1), SAAS_EINVAL);
	EXPECT(saas_file_mkdir(NULL, NULL, sb->id, "x", 0), SAAS_EINVAL);
	EXPECT(saas_file_mkdir(NULL, f->a, sb->id, "a\nb", 0), SAAS_EINVAL);
	EXPECT(saas_file_remove(f->a, "sbx-nosuch", "x", 0), SAAS_ENOTFOUND);

	/* Tenancy: another account's sandbox is not found. */
	EXPECT(saas_file_mkdir(NULL, f->b, sb->id, "x", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_remove(f->b, sb->id, "x", 0), SAAS_ENOTFOUND);
	EXPECT(saas_file_rename(f->b, sb->id, "x", "y", 0), SAAS_ENOTFOUND);

	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_file_mkdir(NULL, f->a, sb->id, "x", 0), SAAS_ESTATE);
	EXPECT(saas_file_remove(f->a, sb->id, "x", 0), SAAS_ESTATE);
	EXPECT(saas_file_rename(f->a, sb->id, "x", "y", 0), SAAS_ESTATE);
	saas_sandbox_free(sb);
}

/* The host label of a preview URL: SAAS_PREVIEW_NAME_LEN characters of lowercase base32. */
static void assert_preview_url(const char *url, const char *sandbox_id)
{
	const char *label = strstr(url, "://");

	assert_non_null(label);
	label += 3;
	assert_int_equal(strspn(label, "abcdefghijklmnopqrstuvwxyz234567"), SAAS_PREVIEW_NAME_LEN);
	assert_int_equal(label[SAAS_PREVIEW_NAME_LEN], '.');
	assert_null(strstr(url, sandbox_id)); /* the guessable {port}-{id} is gone */
}

static void test_ports(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *got = NULL;
	char *url = NULL, *again = NULL, *other = NULL;
	int fd = 0;

	EXPECT(saas_port_expose(&url, f->a, sb->id, 8000, 0), SAAS_OK);
	assert_preview_url(url, sb->id);
	EXPECT(saas_port_expose(&again, f->a, sb->id, 8000, 0), SAAS_OK);
	assert_string_equal(url, again);
	saas_free(again);
	again = NULL;
	EXPECT(saas_port_expose(&other, f->a, sb->id, 8002, 0), SAAS_OK);
	assert_preview_url(other, sb->id);
	assert_string_not_equal(url, other); /* each exposure its own name */
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->nports, 2);
	assert_int_equal(got->ports[0]->port, 8000);
	assert_string_equal(got->ports[0]->url, url);
	saas_sandbox_free(got);
	EXPECT(saas_port_expose(&again, f->a, sb->id, 22, 0), SAAS_EINVAL);
	assert_null(again);
	EXPECT(saas_port_expose(&again, f->a, sb->id, 0, 0), SAAS_EINVAL);
	EXPECT(saas_port_expose(&again, f->a, sb->id, 65536, 0), SAAS_EINVAL);
	EXPECT(saas_port_expose(NULL, f->a, sb->id, 80, 0), SAAS_EINVAL);
	/* The one documented difference: a remote client reaches ports through the preview URL. */
	if (P.remote) {
		EXPECT(saas_port_connect(&fd, f->a, sb->id, 8000), SAAS_ENOTSUP);
		assert_int_equal(fd, -1);
		assert_non_null(strstr(saas_error_last()->message, "preview URL"));
	} else {
		EXPECT(saas_port_connect(&fd, f->a, sb->id, 8000), SAAS_OK);
		close(fd);
	}

	/* Un-expose: gone from the sandbox, again is success, another account's is not found. */
	EXPECT(saas_port_unexpose(f->b, sb->id, 8000), SAAS_ENOTFOUND);
	EXPECT(saas_port_unexpose(f->a, sb->id, 8000), SAAS_OK);
	EXPECT(saas_port_unexpose(f->a, sb->id, 8000), SAAS_OK);
	EXPECT(saas_port_unexpose(f->a, sb->id, 0), SAAS_EINVAL);
	EXPECT(saas_port_unexpose(f->a, sb->id, 65536), SAAS_EINVAL);
	EXPECT(saas_port_unexpose(f->a, "sbx-doesnotexist", 8000), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->nports, 1);
	assert_int_equal(got->ports[0]->port, 8002);
	saas_sandbox_free(got);
	if (!P.remote)
		EXPECT(saas_port_connect(&fd, f->a, sb->id, 8000), SAAS_ENOTFOUND);
	/* Exposed again: a new name, so the URL shared before stays dead. */
	EXPECT(saas_port_expose(&again, f->a, sb->id, 8000, 0), SAAS_OK);
	assert_preview_url(again, sb->id);
	assert_string_not_equal(url, again);
	saas_free(again);
	again = NULL;

	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_port_expose(&again, f->a, sb->id, 8001, 0), SAAS_ESTATE);
	EXPECT(saas_port_unexpose(f->a, sb->id, 8000), SAAS_OK);
	saas_free(url);
	saas_free(other);
	saas_free(again);
	saas_sandbox_free(sb);
}

static void test_extend(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 600), *ext = NULL;

	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, 300, 0), SAAS_OK);
	assert_int_equal(ext->expires_at_ms, sb->expires_at_ms + 300000);
	saas_sandbox_free(ext);
	EXPECT(saas_sandbox_extend(NULL, f->a, sb->id, 60, 0), SAAS_OK);
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, 0, 0), SAAS_EINVAL);
	assert_null(ext);
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, -5, 0), SAAS_EINVAL);
	/* Past the maximum lifetime no retry can succeed: a bad argument, as a create's timeout is. */
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, 86400, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, 10LL * 86400, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, INT64_MAX, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_extend(&ext, f->a, "sbx-nosuch", 60, 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_sandbox_extend(&ext, f->a, sb->id, 60, 0), SAAS_ESTATE);
	saas_sandbox_free(sb);
}

/* Metadata, default environment, what a timeout does, the list's filter: the same locally and over REST. */
static void test_metadata_envs(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const meta1[] = { "a b=c&d=e", "team=blue", NULL };
	static const char *const meta2[] = { "team=blue", "pct=100%", NULL };
	static const char *const envs[] = { "GREETING=hi there", NULL };
	static const char *const f_both[] = { "team=blue", NULL };
	static const char *const f_one[] = { "a b=c&d=e", NULL };
	static const char *const f_pct[] = { "pct=100%", "team=blue", NULL };
	static const char *const dup[] = { "k=1", "k=2", NULL };
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	saas_sandbox *s1 = NULL, *s2 = NULL, *got = NULL;
	saas_sandbox_list *l = NULL;
	saas_execution *x = NULL;

	o.metadata = meta1;
	o.envs = envs;
	o.on_timeout = SAAS_ON_TIMEOUT_PAUSE;
	o.auto_resume = 1;
	EXPECT(saas_sandbox_create(&s1, f->a, &o, 0), SAAS_OK);
	usleep(5000);
	o = (saas_create_options)SAAS_CREATE_OPTIONS_INIT;
	o.metadata = meta2;
	EXPECT(saas_sandbox_create(&s2, f->a, &o, 0), SAAS_OK);
	assert_string_equal(s1->metadata[0], "a b=c&d=e");
	assert_string_equal(s1->metadata[1], "team=blue");
	assert_null(s1->metadata[2]);
	assert_string_equal(s1->envs[0], "GREETING=hi there");
	assert_int_equal(s1->on_timeout, SAAS_ON_TIMEOUT_PAUSE);
	assert_int_equal(s1->auto_resume, 1);
	assert_int_equal(s2->on_timeout, SAAS_ON_TIMEOUT_DESTROY);
	assert_null(s2->envs[0]);
	EXPECT(saas_sandbox_get(&got, f->a, s2->id), SAAS_OK);
	assert_string_equal(got->metadata[0], "pct=100%");
	saas_sandbox_free(got);

	lo.metadata = f_both;
	EXPECT(saas_sandbox_list_query(&l, f->a, &lo, SAAS_LIST_ACTIVE), SAAS_OK);
	assert_int_equal(l->count, 2);
	assert_string_equal(l->items[0]->id, s2->id);
	saas_sandbox_list_free(l);
	lo.metadata = f_one;
	EXPECT(saas_sandbox_list_query(&l, f->a, &lo, 0), SAAS_OK);
	assert_int_equal(l->count, 1);
	assert_string_equal(l->items[0]->id, s1->id);
	saas_sandbox_list_free(l);
	lo.metadata = f_pct;
	lo.limit = 1;
	EXPECT(saas_sandbox_list_query(&l, f->a, &lo, 0), SAAS_OK);
	assert_int_equal(l->count, 1);
	assert_string_equal(l->items[0]->id, s2->id);
	assert_null(l->next_cursor);
	saas_sandbox_list_free(l);

	EXPECT(saas_exec(&x, f->a, s1->id, "env", NULL, 0), SAAS_OK);
	assert_non_null(strstr(x->stdout_data, "GREETING=hi there\n"));
	saas_execution_free(x);
	EXPECT(saas_sandbox_extend(&got, f->a, s1->id, 30, SAAS_EXTEND_FROM_NOW), SAAS_OK);
	assert_true(got->expires_at_ms < s1->expires_at_ms);
	saas_sandbox_free(got);

	o = (saas_create_options)SAAS_CREATE_OPTIONS_INIT;
	o.metadata = dup;
	EXPECT(saas_sandbox_create(&got, f->a, &o, 0), SAAS_EINVAL);
	assert_null(got);
	saas_sandbox_free(s1);
	saas_sandbox_free(s2);
}

/* Type `line` into a terminal and read until the fake shell's answer: the text after the line's echo, up to "\r\n". */
static const char *pty_ask(saas_pty *t, const char *line)
{
	static char buf[4096];
	char chunk[512], echo[256], *at, *end;
	size_t n = 0, got;

	snprintf(echo, sizeof(echo), "%s\r", line);
	buf[0] = '\0';
	EXPECT(saas_pty_write(t, echo, strlen(echo)), SAAS_OK);
	while (!(at = strstr(buf, echo)) || !strstr(at + strlen(echo), "\r\n")) {
		EXPECT(saas_pty_read(t, chunk, sizeof(chunk), &got, 10000), SAAS_OK);
		assert_true(got > 0);
		assert_true(got < sizeof(buf) - 1 - n);
		memcpy(buf + n, chunk, got);
		n += got;
		buf[n] = '\0';
	}
	at += strlen(echo);
	if (*at == '\n') /* the shell echoes a CR as CR LF, as a tty does */
		at++;
	end = strstr(at, "\r\n");
	*end = '\0';
	return at;
}

/*
 * A terminal's directory and variables (saas_pty_options version 2): the
 * sandbox's own environment as a command gets it, its own variables winning;
 * a relative directory under the workspace; exec's bounds; and a version 1
 * struct, which ends before them, still taken. The fake shell answers "pwd"
 * and "echo $NAME".
 */
static void test_pty_cwd_env(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const defaults[] = { "FROM_SANDBOX=sb", "BOTH=sandbox", NULL };
	static const char *const own[] = { "BOTH=terminal", "MINE=a b&c=d%", NULL };
	static const char *const bad_name[] = { "1X=y", NULL };
	static const char *const no_eq[] = { "NOEQ", NULL };
	struct {
		unsigned int version;
		const char *term;
		unsigned int cols, rows;
	} v1 = { 1, "vt100", 0, 0 };
	static const char greet_v1[] = "fake-shell vt100 80x24 tty\r\n";
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	saas_pty *t = NULL;
	char greet[sizeof(greet_v1) - 1], ctl[] = "/tmp/a\001b";
	const char *many[258];
	int status = 0;

	co.envs = defaults;
	EXPECT(saas_sandbox_create(&sb, f->a, &co, 0), SAAS_OK);
	o.cwd = "/tmp/work dir";
	o.env = own;
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_OK);
	assert_string_equal(pty_ask(t, "pwd"), "/tmp/work dir");
	assert_string_equal(pty_ask(t, "echo $BOTH"), "terminal");
	assert_string_equal(pty_ask(t, "echo $MINE"), "a b&c=d%");
	assert_string_equal(pty_ask(t, "echo $FROM_SANDBOX"), "sb");
	EXPECT(saas_pty_write(t, "exit 4\r", 7), SAAS_OK);
	{
		char b[512];
		size_t got = 1;
		while (got)
			EXPECT(saas_pty_read(t, b, sizeof(b), &got, 10000), SAAS_OK);
	}
	saas_pty_close(t, &status);
	assert_int_equal(status, 4);

	/* Relative: under the workspace. No variables of its own: the sandbox's still. */
	o = (saas_pty_options)SAAS_PTY_OPTIONS_INIT;
	o.cwd = "proj";
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_OK);
	assert_string_equal(pty_ask(t, "pwd"), "/workspace/proj");
	assert_string_equal(pty_ask(t, "echo $BOTH"), "sandbox");
	saas_pty_close(t, NULL);

	/* A version 1 caller: its TERM, no directory asked (the home). */
	EXPECT(saas_pty_open(&t, f->a, sb->id, (const saas_pty_options *)&v1, 0), SAAS_OK);
	{
		size_t n = 0, got;
		while (n < sizeof(greet)) {
			EXPECT(saas_pty_read(t, greet + n, sizeof(greet) - n, &got, 10000), SAAS_OK);
			assert_true(got > 0);
			n += got;
		}
		assert_memory_equal(greet, greet_v1, sizeof(greet));
	}
	assert_string_equal(pty_ask(t, "pwd"), "/workspace");
	saas_pty_close(t, NULL);

	/* exec's bounds, each with its message. */
	t = (saas_pty *)1;
	o = (saas_pty_options)SAAS_PTY_OPTIONS_INIT;
	o.env = bad_name;
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_EINVAL);
	assert_null(t);
	assert_non_null(strstr(saas_error_last()->message, "not a valid shell name"));
	o.env = no_eq;
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "NAME=VALUE"));
	for (size_t i = 0; i < 257; i++)
		many[i] = "A=b";
	many[257] = NULL;
	o.env = many;
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "256"));
	o.env = NULL;
	o.cwd = "";
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_EINVAL);
	o.cwd = ctl;
	EXPECT(saas_pty_open(&t, f->a, sb->id, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "control character"));
	saas_sandbox_destroy(NULL, f->a, sb->id, 0);
	saas_sandbox_free(sb);
}

/* Fork, pause, resume: the same answers locally and over REST. A driver without snapshots: ENOTSUP alike. */
static void test_fork_pause_resume(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 600), *p = NULL, *r = NULL, *got = NULL;
	saas_sandbox_list *kids = NULL;
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	int rc;

	/* What every provider refuses before asking anyone. */
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 0, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, SAAS_FORK_MAX + 1, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 1), SAAS_EINVAL);
	EXPECT(saas_sandbox_pause(&p, f->a, NULL, 0), SAAS_EINVAL);
	EXPECT(saas_sandbox_resume(&r, f->a, sb->id, 2), SAAS_EINVAL);
	EXPECT(saas_sandbox_pause(&p, f->a, "sbx-nosuch", 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_pause(&p, f->b, sb->id, 0), SAAS_ENOTFOUND);
	if ((rc = saas_sandbox_pause(&p, f->a, sb->id, 0)) == SAAS_ENOTSUP) {
		print_message("skipped: this driver cannot snapshot (%s)\n", saas_error_last()->message);
		EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_ENOTSUP);
		saas_sandbox_free(sb);
		return;
	}
	EXPECT(rc, SAAS_OK);
	assert_int_equal(p->status, SAAS_SANDBOX_PAUSED);
	assert_true(p->paused_at_ms > 0);
	EXPECT(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_ESTATE);
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_ESTATE);
	assert_null(kids);
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_PAUSED);
	EXPECT(saas_sandbox_resume(&r, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(r->status, SAAS_SANDBOX_READY);
	assert_int_equal(r->paused_at_ms, 0);
	EXPECT(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_ESTATE);

	o.timeout_s = 300;
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 2, &o, 0), SAAS_OK);
	assert_int_equal(kids->count, 2);
	for (size_t i = 0; i < kids->count; i++) {
		assert_int_equal(kids->items[i]->status, SAAS_SANDBOX_READY);
		assert_string_equal(kids->items[i]->parent_id, sb->id);
		assert_string_equal(kids->items[i]->size, sb->size);
		assert_true(kids->items[i]->expires_at_ms - kids->items[i]->ready_at_ms == 300000);
		EXPECT(saas_sandbox_destroy(NULL, f->a, kids->items[i]->id, 0), SAAS_OK);
	}
	assert_string_not_equal(kids->items[0]->id, kids->items[1]->id);
	EXPECT(saas_sandbox_fork(NULL, f->a, sb->id, 1, NULL, 0), SAAS_OK);
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_sandbox_resume(NULL, f->a, sb->id, 0), SAAS_ESTATE);
	saas_sandbox_list_free(kids);
	saas_sandbox_free(got);
	saas_sandbox_free(p);
	saas_sandbox_free(r);
	saas_sandbox_free(sb);
}

static void test_destroy_idempotent(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0), *d1 = NULL, *d2 = NULL, *got = NULL;

	EXPECT(saas_sandbox_destroy(&d1, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(d1->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(d1->end_reason, SAAS_END_USER);
	assert_true(d1->destroyed_at_ms >= sb->ready_at_ms);
	assert_true(d1->cost_usd_micro >= 0);
	EXPECT(saas_sandbox_destroy(&d2, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(d2->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(d2->destroyed_at_ms, d1->destroyed_at_ms);
	assert_int_equal(d2->cost_usd_micro, d1->cost_usd_micro);
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_USER);
	saas_sandbox_free(got);
	EXPECT(saas_sandbox_destroy(NULL, f->a, "sbx-nosuch", 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_destroy(NULL, f->a, "", 0), SAAS_EINVAL);
	saas_sandbox_free(d1);
	saas_sandbox_free(d2);
	saas_sandbox_free(sb);
}

static void test_account(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_account_info *ai = NULL;
	static const struct { const char *name; unsigned int vcpus, mem, disk; int64_t price; } sizes[] = {
		{ "small", 2, 4096, 40, 90000 },
		{ "medium", 4, 8192, 80, 280000 },
		{ "large", 8, 16384, 160, 550000 },
	};

	EXPECT(saas_account_info_get(&ai, f->a), SAAS_OK);
	assert_string_equal(ai->id, saas_client_account_id(f->a));
	assert_non_null(strstr(ai->name, "alice"));
	assert_int_equal(ai->credit_usd_micro, SAAS_USD(5));
	assert_int_equal(ai->spent_usd_micro, 0);
	assert_int_equal(ai->balance_usd_micro, SAAS_USD(5));
	assert_int_equal(ai->active_sandboxes, 0);
	assert_int_equal(ai->limits->max_sandboxes, 10);
	assert_int_equal(ai->limits->default_timeout_s, 900);
	assert_int_equal(ai->limits->max_timeout_s, 86400);
	assert_int_equal(ai->limits->min_balance_s, 60);
	assert_int_equal(ai->nsizes, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(ai->sizes[i]->name, sizes[i].name);
		assert_int_equal(ai->sizes[i]->vcpus, sizes[i].vcpus);
		assert_int_equal(ai->sizes[i]->memory_mb, sizes[i].mem);
		assert_int_equal(ai->sizes[i]->disk_gb, sizes[i].disk);
		assert_int_equal(ai->sizes[i]->usd_micro_per_hour, sizes[i].price);
	}
	saas_account_info_free(ai);

	saas_sandbox *sb = create(f->a, NULL, 0);
	EXPECT(saas_account_info_get(&ai, f->a), SAAS_OK);
	assert_int_equal(ai->active_sandboxes, 1);
	assert_int_equal(ai->balance_usd_micro, ai->credit_usd_micro - ai->spent_usd_micro);
	saas_account_info_free(ai);
	EXPECT(saas_account_info_get(&ai, f->b), SAAS_OK);
	assert_int_equal(ai->active_sandboxes, 0);
	saas_account_info_free(ai);
	EXPECT(saas_account_info_get(NULL, f->a), SAAS_EINVAL);
	EXPECT(saas_account_info_get(&ai, NULL), SAAS_EINVAL);
	saas_sandbox_free(sb);
}

static void test_usage(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, "medium", 0);
	saas_usage *u = NULL;
	int64_t t0 = saas__now_ms();

	usleep(20000); /* a sandbox that ran for no time at all is in no period */
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_usage_get(&u, f->a, 0, 0, 0), SAAS_OK);
	assert_int_equal(u->count, 1);
	assert_string_equal(u->lines[0]->sandbox_id, sb->id);
	assert_string_equal(u->lines[0]->size, "medium");
	assert_false(u->lines[0]->running);
	assert_int_equal(u->total_usd_micro, u->lines[0]->cost_usd_micro);
	assert_int_equal(u->total_seconds, u->lines[0]->seconds);
	assert_true(u->to_ms >= t0 - 1000 && u->to_ms <= saas__now_ms() + 1000);
	assert_int_equal(u->to_ms - u->from_ms, 30LL * 86400 * 1000);
	saas_usage_free(u);

	/* An explicit period, to the millisecond. */
	EXPECT(saas_usage_get(&u, f->a, 1700000000123LL, 1700000100456LL, 0), SAAS_OK);
	assert_int_equal(u->from_ms, 1700000000123LL);
	assert_int_equal(u->to_ms, 1700000100456LL);
	assert_int_equal(u->count, 0);
	assert_int_equal(u->total_usd_micro, 0);
	saas_usage_free(u);

	EXPECT(saas_usage_get(&u, f->b, 0, 0, 0), SAAS_OK);
	assert_int_equal(u->count, 0);
	saas_usage_free(u);
	EXPECT(saas_usage_get(&u, f->a, 2000, 1000, 0), SAAS_EINVAL);
	assert_null(u);
	EXPECT(saas_usage_get(&u, f->a, -1, 0, 0), SAAS_EINVAL);
	EXPECT(saas_usage_get(&u, f->a, 0, 0, 1), SAAS_EINVAL);
	saas_sandbox_free(sb);
}

/*
 * A resume and a fork's child refused for room (the driver's memory refusal):
 * busy, and when to try again, on both providers (REST's Retry-After, which
 * the remote client reads back into retry_after_ms).
 */
static void test_busy_retry_after(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 600), *r = NULL;
	saas_sandbox_list *kids = NULL;
	saas_execution *x = run(f->a, sb->id, "busy-restores 2", NULL);

	saas_execution_free(x);
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 10000);
	assert_string_equal(saas_error_last()->limit, "");
	assert_null(kids);
	EXPECT(saas_sandbox_pause(NULL, f->a, sb->id, 0), SAAS_OK);
	EXPECT(saas_sandbox_resume(&r, f->a, sb->id, 0), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 10000);
	assert_null(r);
	/* Anything else says no retry time. */
	EXPECT(saas_sandbox_fork(&kids, f->a, sb->id, 1, NULL, 0), SAAS_ESTATE);
	assert_int_equal(saas_error_last()->retry_after_ms, 0);
	EXPECT(saas_sandbox_resume(&r, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(r->status, SAAS_SANDBOX_READY);
	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_sandbox_free(r);
	saas_sandbox_free(sb);
}

/* Tenant limits: shown alike, and a refusal names its limit and a retry time on both providers. */
static void test_limits_contract(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = create(f->a, NULL, 0);
	saas_execution *x[SAAS_MAX_EXECUTIONS_DEFAULT + 1] = { NULL };
	saas_account_info *info = NULL;
	int tries = 0;

	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->limits->max_executions, SAAS_MAX_EXECUTIONS_DEFAULT);
	assert_int_equal(info->limits->creates_per_minute, SAAS_CREATES_PER_MINUTE_DEFAULT);
	assert_int_equal(info->limits->requests_per_second, SAAS_REQUESTS_PER_SECOND_DEFAULT);
	assert_int_equal(info->limits->execution_retention_s, SAAS_EXECUTION_RETENTION_DEFAULT);
	assert_int_equal(info->running_executions, 0);
	saas_account_info_free(info);
	for (int i = 0; i < SAAS_MAX_EXECUTIONS_DEFAULT; i++)
		assert_int_equal(saas_exec(&x[i], f->a, sb->id, "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	assert_int_equal(saas_exec(&x[SAAS_MAX_EXECUTIONS_DEFAULT], f->a, sb->id, "echo one more", NULL, 0),
	                 SAAS_ELIMIT);
	assert_string_equal(saas_error_last()->limit, "max_executions");
	assert_true(saas_error_last()->retry_after_ms >= 1000);
	assert_non_null(strstr(saas_error_last()->message, "max_executions"));
	assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
	assert_int_equal(info->running_executions, SAAS_MAX_EXECUTIONS_DEFAULT);
	saas_account_info_free(info);
	/* Destroying the sandbox ends them and gives the places back. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	for (;;) {
		assert_int_equal(saas_account_info_get(&info, f->a), SAAS_OK);
		unsigned int running = info->running_executions;
		saas_account_info_free(info);
		if (!running)
			break;
		assert_true(++tries < 2500);
		usleep(2000);
	}
	for (int i = 0; i <= SAAS_MAX_EXECUTIONS_DEFAULT; i++)
		saas_execution_free(x[i]);
	saas_sandbox_free(sb);
}

/* Egress policies: the same rules refused with the same words, the same policy read back, locally and over REST. */
static void test_network_policy(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "API.Example.com.", "203.0.113.7", "api.example.com", NULL };
	const char *const deny[] = { "*.Ads.example.com", NULL };
	const char *const bad[] = { "example.com", "10.1.2.3/8", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *got = NULL;

	spec.allow = allow;
	spec.deny = deny;
	o.network_spec = &spec;
	EXPECT(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	assert_non_null(sb->network);
	assert_int_equal(sb->network->mode, SAAS_NETWORK_POLICY);
	assert_string_equal(sb->network->allow[0], "api.example.com");
	assert_string_equal(sb->network->allow[1], "203.0.113.7/32");
	assert_null(sb->network->allow[2]);
	assert_string_equal(sb->network->deny[0], "*.ads.example.com");
	assert_int_equal(sb->network->denied_connections, 0);

	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_POLICY);
	assert_string_equal(got->network->allow[1], "203.0.113.7/32");
	saas_sandbox_free(got);

	/* Another account sees no such sandbox, and changes nothing. */
	spec.mode = SAAS_NETWORK_INTERNET;
	spec.allow = spec.deny = NULL;
	EXPECT(saas_sandbox_network_set(&got, f->b, sb->id, &spec, 0), SAAS_ENOTFOUND);
	EXPECT(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_INTERNET);
	assert_null(got->network->allow[0]);
	assert_null(got->network->deny[0]);
	saas_sandbox_free(got);
	got = NULL;

	/* Bad rules: the same code and the same words either way. */
	spec.mode = SAAS_NETWORK_POLICY;
	spec.allow = bad;
	EXPECT(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "\"10.1.2.3/8\" in allow: the address has bits set past the /8"));
	assert_null(got);
	o.network_spec = &spec;
	EXPECT(saas_sandbox_create(&got, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "\"10.1.2.3/8\" in allow"));
	spec.allow = NULL;
	spec.mode = SAAS_NETWORK_ISOLATED;
	spec.deny = deny;
	EXPECT(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "isolated takes no allow or deny rules"));

	EXPECT(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	spec.deny = NULL;
	EXPECT(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_ESTATE);
	EXPECT(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	/* The record keeps the last policy it had. */
	assert_int_equal(got->network->mode, SAAS_NETWORK_INTERNET);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_remote, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_retry_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_contract, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_network_policy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_and_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tenancy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_recorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_recorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_execution_history, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_background, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follow_started, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extend, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metadata_envs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pty_cwd_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_pause_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_idempotent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_account, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage, setup, teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
