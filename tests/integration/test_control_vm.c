/*
 * The control port on real VMs (issue #15 §2): clones of a template get their
 * fix-ups over the virtio-serial control port, with no SSH login as root, and
 * are still machines of their own (hostname, boot id, random bytes, clock);
 * the port's guest end is root's alone (the sandbox user can neither open it
 * nor find it writable); with control_port=off the same template's clones get
 * them over SSH, as clones of images without the port do.
 *
 * One cold boot (which builds the template), three clones. Prints create ->
 * first `true` for each way (ms, TCG on a shared host: not asserted).
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE (vmtest.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "vmtest.h"

static char state_dir[4096], images_dir[4096];
static saas_engine *engine;
static char *key;
static saas_client *client;
static saas_sandbox *first;

static void open_engine(const char *extra)
{
	static char config[8192];
	saas_engine_options o;

	snprintf(config, sizeof(config), "images=%s boot_timeout=600%s", images_dir, extra);
	o = vmtest_engine_options(state_dir, config);
	o.default_image = "tiny";
	check(saas_engine_open(&engine, &o), "engine open");
}

static int group_setup(void **state)
{
	const char *images, *dir;

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	snprintf(images_dir, sizeof(images_dir), "%s", images);
	open_engine("");
	vmtest_tenant(engine, "alice", &key, &client);
	/* A cold boot, which starts the template's build in the background. */
	check(saas_sandbox_create(&first, client, NULL, 0), "create the first sandbox");
	return 0;
}

static void destroy_all(void)
{
	saas_sandbox_list *list = NULL;

	if (client && saas_sandbox_list_get(&list, client, NULL, 1000, SAAS_LIST_ACTIVE) == SAAS_OK) {
		for (size_t j = 0; j < list->count; j++)
			saas_sandbox_destroy(NULL, client, list->items[j]->id, 0);
		saas_sandbox_list_free(list);
	}
}

static int group_teardown(void **state)
{
	(void)state;
	destroy_all();
	saas_sandbox_free(first);
	saas_client_free(client);
	saas_engine_free(engine);
	saas_free(key);
	vmtest_log_reset();
	return 0;
}

/* cmd's stdout (first line) and exit code. */
static char *run_in(const char *id, const char *cmd, int *code)
{
	saas_execution *x = NULL;
	char *out;

	check(saas_exec(&x, client, id, cmd, NULL, 0), cmd);
	*code = x->exit_code;
	out = strdup(x->stdout_data ? x->stdout_data : "");
	saas_execution_free(x);
	assert_non_null(out);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

static char *run_ok(const char *id, const char *cmd)
{
	int code = -1;
	char *out = run_in(id, cmd, &code);

	assert_int_equal(code, 0);
	return out;
}

static double ms_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* A clone, made and its first `true` run; the ms that took go to *ms. Asserts which way its fix-ups went. */
static saas_sandbox *clone_timed(const char *via, double *ms)
{
	saas_sandbox *sb = NULL;
	struct timespec t0, t1;
	char line[256], *out;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	check(saas_sandbox_create(&sb, client, NULL, 0), "create a clone");
	free(run_ok(sb->id, "true"));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*ms = ms_between(&t0, &t1);
	/*
	 * The clock first, as vm.sandboxes checks it: a guest starved of CPU
	 * (TCG on a loaded host) falls behind with every second it runs, and a
	 * template saved minutes ago would be minutes behind without the fix-ups.
	 */
	{
		char *date = run_ok(sb->id, "date +%s");
		long long guest = atoll(date), host = (long long)time(NULL);
		if (!(guest > host - 5 && guest <= host + 1))
			fail_msg("clone %s: guest clock %lld, host %lld", sb->id, guest, host);
		free(date);
	}
	snprintf(line, sizeof(line), "VM %s up in", sb->id);
	snprintf(line + strlen(line) + 1, sizeof(line) - strlen(line) - 1, "(clone, fix-ups over %s,", via);
	assert_true(logged(line, line + strlen(line) + 1));
	/* Its hostname is its id: the fix-ups ran, whichever way. */
	out = run_ok(sb->id, "hostname");
	assert_string_equal(out, sb->id);
	free(out);
	return sb;
}

static void wait_template(void)
{
	for (int i = 0; i < 1200 && !logged("template ", " ready in"); i++) {
		assert_false(logged("template ", " failed"));
		usleep(500 * 1000);
	}
	assert_true(logged("template ", " ready in"));
}

static void test_clones_over_the_port(void **state)
{
	static const char *const probes[3] = { "hostname", "cat /proc/sys/kernel/random/boot_id",
		                               "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'" };
	saas_sandbox *sb[2];
	char *out[2][3];
	double ms[2];
	(void)state;
	wait_template();
	for (int i = 0; i < 2; i++)
		sb[i] = clone_timed("the control port", &ms[i]);
	print_message("create -> first `true`, fix-ups over the control port: %.0f ms, %.0f ms\n", ms[0], ms[1]);
	assert_false(logged("fix-ups over SSH instead", NULL));
	/* Two machines: their own hostname, boot id and random bytes. */
	for (int i = 0; i < 2; i++)
		for (int p = 0; p < 3; p++)
			out[i][p] = run_ok(sb[i]->id, probes[p]);
	for (int p = 0; p < 3; p++) {
		assert_true(strlen(out[0][p]) > 8);
		assert_string_not_equal(out[0][p], out[1][p]);
	}
	for (int i = 0; i < 2; i++)
		for (int p = 0; p < 3; p++)
			free(out[i][p]);

	/*
	 * The port's guest end: a device node of root's alone (0600), which the
	 * sandbox user cannot open for reading nor for writing. The helper holds
	 * it open too (the kernel allows one opener), so even root could not.
	 */
	out[0][0] = run_ok(sb[0]->id, "for p in /sys/class/virtio-ports/*; do "
	                              "[ \"$(cat $p/name)\" = org.libsaas.control.0 ] && echo /dev/${p##*/}; done");
	assert_true(strncmp(out[0][0], "/dev/vport", 10) == 0);
	{
		char cmd[512], *said;
		snprintf(cmd, sizeof(cmd), "stat -c '%%A %%U %%G' %s", out[0][0]);
		said = run_ok(sb[0]->id, cmd);
		assert_string_equal(said, "crw------- root root");
		free(said);
		/* As the sandbox user: opened to read, to write, to both: each refused. */
		snprintf(cmd, sizeof(cmd),
		         "id -u; n=0; for m in '<' '>' '<>'; do eval \"(exec 3$m%s)\" 2>/dev/null || n=$((n+1)); done; echo $n",
		         out[0][0]);
		said = run_ok(sb[0]->id, cmd);
		assert_string_equal(said, "1000");
		free(said);
		snprintf(cmd, sizeof(cmd),
		         "n=0; for m in '<' '>' '<>'; do eval \"(exec 3$m%s)\" 2>/dev/null || n=$((n+1)); done; echo $n",
		         out[0][0]);
		said = run_ok(sb[0]->id, cmd);
		assert_string_equal(said, "3");
		free(said);
	}
	free(out[0][0]);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, client, sb[i]->id, 0), "destroy a clone");
		saas_sandbox_free(sb[i]);
	}
}

/* control_port=off: the same template (the port stays in the domain), the fix-ups over SSH as root. */
static void test_clones_over_ssh(void **state)
{
	saas_sandbox *sb;
	double ms;

	(void)state;
	destroy_all();
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	engine = NULL;
	open_engine(" control_port=off");
	check(saas_client_open_local(&client, engine, key, 0), "client");
	sb = clone_timed("SSH", &ms);
	print_message("create -> first `true`, fix-ups over SSH: %.0f ms\n", ms);
	check(saas_sandbox_destroy(NULL, client, sb->id, 0), "destroy a clone");
	saas_sandbox_free(sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clones_over_the_port),
		cmocka_unit_test(test_clones_over_ssh),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
