/*
 * The control port on real VMs: clones of a template get their
 * fix-ups over the virtio-serial control port, with no SSH login as root, and
 * are still machines of their own (hostname, boot id, random bytes, clock);
 * the port's guest end is root's alone (the sandbox user can neither open it
 * nor find it writable); with control_port=off the same template's clones get
 * them over SSH, as clones of images without the port do. Files go over the
 * port too (the bulk path, no SSH): the same checks hold over the port and,
 * with control_files=off, over SFTP (bytes, owner, modes, directories made,
 * every refusal's code), and the tenant killing all its processes in the
 * middle of an upload does not break it (the helper is root's).
 *
 * One cold boot (which builds the template), three clones. Prints create ->
 * first `true` for each way (ms, TCG on a shared host: not asserted).
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE (vmtest.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "saas.h"
#include "../gate.h"
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

static int group_teardown(void **state)
{
	(void)state;
	vmtest_destroy_all(client);
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
	return vmtest_exec_line(client, id, cmd, code);
}

static char *run_ok(const char *id, const char *cmd)
{
	return vmtest_exec_line(client, id, cmd, NULL);
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

/* Random bytes, and a file of them written as `path` with `mode` and read back equal. */
static void round_trip(const char *id, const char *path, size_t size, unsigned int mode)
{
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	unsigned char *data = malloc(size ? size : 1);
	void *back = NULL;
	size_t len = 1;

	assert_non_null(data);
	for (size_t i = 0; i < size; i++)
		data[i] = (unsigned char)rand();
	o.mode = mode;
	check(saas_file_write(client, id, path, data, size, &o), path);
	check(saas_file_read(&back, &len, client, id, path, 0), path);
	assert_int_equal(len, size);
	if (size)
		assert_memory_equal(back, data, size);
	saas_free(back);
	free(data);
}

/* A source that gives one chunk and then fails; a receiver that takes one chunk and then stops. */
static long failing_read(void *ud, void *buf, size_t size)
{
	int *calls = ud;

	if ((*calls)++)
		return -1;
	memset(buf, 'y', size < 5000 ? size : 5000);
	return size < 5000 ? (long)size : 5000;
}

static int stopping_write(void *ud, const void *data, size_t size)
{
	(void)data;
	(void)size;
	return ++*(int *)ud;
}

/*
 * What a file transfer means, whichever way it goes (the port, or SFTP with
 * control_files=off): binary-safe bytes across frame boundaries, the sandbox
 * user's files and directories with the modes asked for, a file replaced
 * whole, and each refusal with the code SFTP gives it.
 */
static void file_checks(const char *id)
{
	void *back = NULL;
	size_t len = 0;
	char *out;
	int code = -1;

	round_trip(id, "/workspace/ft/empty", 0, 0);
	round_trip(id, "/workspace/ft/one", 1, 0);
	/* A MiB and three bytes: more than one frame, and a short last one. */
	round_trip(id, "/workspace/ft/new/deeper/big.bin", (1u << 20) + 3, 0640);
	out = run_ok(id, "cd /workspace/ft && stat -c '%U:%G %a' empty new new/deeper new/deeper/big.bin | tr '\\n' ' '");
	assert_string_equal(out, "sandbox:sandbox 644 sandbox:sandbox 755 sandbox:sandbox 755 sandbox:sandbox 640 ");
	free(out);
	/* Replaced whole, through a symlink's name too (the link itself is replaced, as SFTP's rename does). */
	check(saas_file_write(client, id, "/workspace/ft/one", "second", 6, NULL), "overwrite");
	check(saas_file_read(&back, &len, client, id, "/workspace/ft/one", 0), "read the overwrite");
	assert_int_equal(len, 6);
	assert_memory_equal(back, "second", 6);
	saas_free(back);
	free(run_ok(id, "ln -sf /workspace/ft/one /workspace/ft/link"));
	check(saas_file_write(client, id, "/workspace/ft/link", "third", 5, NULL), "write over a symlink");
	out = run_ok(id, "cd /workspace/ft && cat one; echo; test -L link && echo link || cat link");
	assert_string_equal(out, "second");
	free(out);
	/* Nothing temporary is left beside the files. */
	out = run_ok(id, "ls -A /workspace/ft | grep -c aas-tmp || true");
	assert_string_equal(out, "0");
	free(out);

	/* Refusals: the codes SFTP gives. */
	assert_int_equal(saas_file_read(&back, &len, client, id, "/workspace/ft/nope", 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_read(&back, &len, client, id, "/workspace/ft", 0), SAAS_EISDIR);
	assert_int_equal(saas_file_write(client, id, "/workspace/ft/new", "x", 1, NULL), SAAS_EISDIR);
	assert_int_equal(saas_file_write(client, id, "/workspace/ft/one/under", "x", 1, NULL), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_write(client, id, "/etc/passwd", "x", 1, NULL), SAAS_EPERM);
	assert_int_equal(saas_file_write(client, id, "/sbin/aas-new/x", "x", 1, NULL), SAAS_EPERM);
	assert_int_equal(saas_file_read(&back, &len, client, id, "/workspace/ft/new/deeper/big.bin", 100), SAAS_ETOOBIG);
	/* The user's rights, not root's: a file only root may read is refused (the port's own device among them). */
	out = run_in(id, "touch /workspace/ft/secret && chmod 000 /workspace/ft/secret && echo made", &code);
	assert_string_equal(out, "made");
	free(out);
	assert_int_equal(saas_file_read(&back, &len, client, id, "/workspace/ft/secret", 0), SAAS_EPERM);
	out = run_ok(id, "for p in /sys/class/virtio-ports/*; do "
	                 "[ \"$(cat $p/name)\" = org.libsaas.control.0 ] && echo /dev/${p##*/}; done");
	assert_int_equal(saas_file_read(&back, &len, client, id, out, 0), SAAS_EPERM);
	free(out);
	/* A source that fails leaves no file; a receiver that stops gets no more; the next transfer is whole. */
	{
		int calls = 0;
		int64_t size = 0;
		assert_int_equal(saas_file_write_stream(client, id, "/workspace/ft/failed", failing_read, &calls, -1, NULL),
		                 SAAS_EIO);
		out = run_ok(id, "ls -A /workspace/ft | grep -c -e failed -e aas-tmp || true");
		assert_string_equal(out, "0");
		free(out);
		calls = 0;
		assert_int_equal(saas_file_read_stream(&size, client, id, "/workspace/ft/new/deeper/big.bin", stopping_write,
		                                       &calls),
		                 SAAS_EIO);
		assert_int_equal(calls, 1);
		assert_true(size == (1 << 20) + 3);
	}
	round_trip(id, "/workspace/ft/after", 4096, 0);
	free(run_ok(id, "rm -rf /workspace/ft"));
}

struct upload {
	struct saas_test_gate gate;
	const char *id;
	int rc;
	char message[512];
};

static void *upload_main(void *arg)
{
	struct upload *u = arg;

	u->rc = saas_file_write_stream(client, u->id, "/workspace/slow.bin", saas_test_gate_read, &u->gate, -1, NULL);
	snprintf(u->message, sizeof(u->message), "%s", saas_error_last()->message);
	return NULL;
}

/*
 * The tenant kills every process of its own (`kill -9 -1`) while an upload
 * waits for its slow client. The next command gets a fresh SSH session
 * either way. Over the port the helper doing the upload is root's, out of
 * the tenant's reach: the upload completes. Over SFTP it held the killed
 * session: it fails cleanly and leaves no file.
 */
static void kill_mid_upload(const char *id, bool port)
{
	struct upload u = { SAAS_TEST_GATE_INIT, id, -1, "" };
	saas_execution *x = NULL;
	pthread_t tid;
	int rc = SAAS_EBACKEND;
	char *out;

	assert_int_equal(pthread_create(&tid, NULL, upload_main, &u), 0);
	saas_test_gate_reached(&u.gate);
	if (saas_exec(&x, client, id, "kill -9 -1", NULL, 0) == SAAS_OK)
		saas_execution_free(x);
	x = NULL;
	for (int i = 0; i < 100 && (rc = saas_exec(&x, client, id, "echo fresh", NULL, 0)) != SAAS_OK; i++)
		usleep(100 * 1000);
	check(rc, "exec on a fresh session");
	saas_execution_free(x);
	saas_test_gate_open(&u.gate);
	assert_int_equal(pthread_join(tid, NULL), 0);
	if (port) {
		check(u.rc, "the upload the tenant's kill did not reach");
		out = run_ok(id, "stat -c '%U %s' /workspace/slow.bin");
		assert_string_equal(out, "sandbox 8192"); /* the gate's two chunks */
	} else {
		assert_int_equal(u.rc, SAAS_EBACKEND);
		assert_non_null(strstr(u.message, "connection"));
		out = run_ok(id, "test -e /workspace/slow.bin && echo there || echo absent");
		assert_string_equal(out, "absent");
	}
	free(out);
	free(run_ok(id, "rm -f /workspace/slow.bin"));
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
	char line_of_files[256];
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

	/* Files over the port: the checks, then an upload the tenant tries to kill. */
	file_checks(sb[0]->id);
	snprintf(line_of_files, sizeof(line_of_files), "VM %s: its files go over the control port", sb[0]->id);
	assert_true(logged(line_of_files, NULL));
	assert_false(logged("files go over SFTP", NULL));
	kill_mid_upload(sb[0]->id, true);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, client, sb[i]->id, 0), "destroy a clone");
		saas_sandbox_free(sb[i]);
	}
}

/* control_port=off: the same template (the port stays in the domain), the fix-ups over SSH as root; files over SFTP. */
static void test_clones_over_ssh(void **state)
{
	saas_sandbox *sb;
	double ms;

	(void)state;
	vmtest_destroy_all(client);
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	engine = NULL;
	open_engine(" control_port=off control_files=off");
	check(saas_client_open_local(&client, engine, key, 0), "client");
	sb = clone_timed("SSH", &ms);
	print_message("create -> first `true`, fix-ups over SSH: %.0f ms\n", ms);
	/* control_files=off: the same file checks hold over SFTP, and the port is not asked. */
	file_checks(sb->id);
	kill_mid_upload(sb->id, false);
	{
		char line[256];
		snprintf(line, sizeof(line), "VM %s: its files go over", sb->id);
		assert_false(logged(line, NULL));
	}
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
