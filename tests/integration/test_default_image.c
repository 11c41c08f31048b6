/*
 * The `default` image, booted for real: what the product promises is there and
 * works as the unprivileged user. Slow (the image takes minutes to build the
 * first time), so it has a label of its own.
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "vmtest.h"

static saas_engine *engine;
static saas_client *client;
static saas_sandbox *sb;
static char *key;

static int setup(void **state)
{
	saas_engine_options o;
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	const char *images, *dir;
	char config[4200];

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(config, sizeof(config), "images=%s boot_timeout=600", images);
	o = vmtest_engine_options(dir, config);
	check(saas_engine_open(&engine, &o), "engine");
	vmtest_tenant(engine, "default-image", &key, &client);
	co.image = "default";
	check(saas_sandbox_create(&sb, client, &co, 0), "create from the default image");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (sb)
		saas_sandbox_destroy(NULL, client, sb->id, 0);
	saas_sandbox_free(sb);
	saas_client_free(client);
	saas_engine_free(engine);
	saas_free(key);
	return 0;
}

static void expect_in(const char *id, const char *cmd, const char *want_stdout)
{
	saas_execution *x = NULL;
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;

	o.timeout_s = 300;
	check(saas_exec(&x, client, id, cmd, &o, 0), cmd);
	if (x->exit_code != 0)
		fail_msg("'%s' exited %d: %s", cmd, x->exit_code, x->stderr_data);
	if (want_stdout && !strstr(x->stdout_data, want_stdout))
		fail_msg("'%s' printed '%s', wanted '%s'", cmd, x->stdout_data, want_stdout);
	saas_execution_free(x);
}

static void expect(const char *cmd, const char *want_stdout)
{
	expect_in(sb->id, cmd, want_stdout);
}

static void test_python_stack(void **state)
{
	(void)state;
	expect("python3 -c 'import numpy, pandas, requests; print(numpy.arange(4).sum(), len(pandas.DataFrame({\"a\": [1, 2]})))'",
	       "6 2");
}

static void test_node(void **state)
{
	(void)state;
	expect("node -e 'console.log(6 * 7)'", "42");
	expect("npm --version", ".");
}

static void test_tools(void **state)
{
	(void)state;
	expect("for t in git curl wget jq unzip gpg gcc make; do command -v $t >/dev/null || echo missing $t; done; echo ok",
	       "ok");
	expect("printf 'int main(void){return 0;}' > t.c && cc t.c -o t && ./t && echo built", "built");
}

static void test_user_installs(void **state)
{
	(void)state;
	/* Unprivileged, no sudo; user installs land in the home directory. */
	expect("id -u; ls -ld /workspace | cut -d' ' -f3", "1000\nsandbox");
	expect("sudo true 2>/dev/null || echo no-sudo", "no-sudo");
	expect("python3 -m pip --version && python3 -m site --user-site", ".local/lib/python3");
	expect("mkdir -p proj && cd proj && npm init -y >/dev/null && test -w . && echo npm-ok", "npm-ok");
}

/*
 * Clones of the default image (a disk image): the template's frozen disk is
 * each clone's base, so what one clone writes must never show in another,
 * and the installed stack must work in a restored guest.
 */
static void test_clones(void **state)
{
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *c[2] = { NULL, NULL };
	char line[256];
	bool ready = false;

	(void)state;
	co.image = "default";
	for (int i = 0; i < 1200 && !ready; i++) {
		ready = logged("^template ", " ready in ");
		assert_false(logged("^template ", " failed"));
		if (!ready)
			usleep(500 * 1000);
	}
	assert_true(ready);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_create(&c[i], client, &co, 0), "create a clone of the default image");
		snprintf(line, sizeof(line), "VM %s up in", c[i]->id);
		assert_true(logged(line, "(clone,"));
		expect_in(c[i]->id, "hostname", c[i]->id);
	}
	/* Written at the template's boot, before its snapshot: on the frozen disk every clone starts from. */
	expect_in(c[0]->id, "cat /etc/resolv.conf", "nameserver 10.0.2.3");
	expect_in(c[1]->id, "cat /etc/resolv.conf", "nameserver 10.0.2.3");
	expect_in(c[0]->id, "echo first > /workspace/mine && sync && cat /workspace/mine", "first");
	expect_in(c[1]->id, "test -e /workspace/mine && echo shared || echo own", "own");
	expect_in(c[1]->id, "echo second > /workspace/mine && cat /workspace/mine", "second");
	expect_in(c[0]->id, "cat /workspace/mine", "first");
	expect_in(c[1]->id, "python3 -c 'import numpy, pandas; print(\"stack-ok\")'", "stack-ok");
	expect_in(c[1]->id, "df -BG --output=size / | tail -1 | tr -d ' G'", NULL);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, client, c[i]->id, 0), "destroy a clone");
		saas_sandbox_free(c[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_python_stack),
		cmocka_unit_test(test_node),
		cmocka_unit_test(test_tools),
		cmocka_unit_test(test_user_installs),
		cmocka_unit_test(test_clones),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
