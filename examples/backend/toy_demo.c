/*
 * toy_demo: an engine on the toy driver (toy_driver.c), through the public
 * API, the way a program would use a driver of its own. It makes an account
 * and a key, creates a sandbox on the toy driver, runs commands in it, shows
 * the driver's own error messages and the engine's answer for a slot the
 * driver leaves NULL, and destroys the sandbox.
 *
 * Build (against an installed libsaas):
 *   cc toy_demo.c toy_driver.c $(pkg-config --cflags --libs libsaas) -pthread -o toy_demo
 * Run: ./toy_demo STATE_DIR    (a new directory; the engine keeps its store there)
 */
#include <saas.h>
#include <stdio.h>
#include <string.h>

#include "toy_driver.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "toy_demo: %s: %s (%s)\n", what, saas_strerror(rc), saas_error_last()->message);
	return 1;
}

int main(int argc, char **argv)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_engine *engine = NULL;
	saas_account *acc = NULL;
	saas_client *client = NULL;
	saas_sandbox *sb = NULL, *other = NULL, *gone = NULL;
	saas_execution *hello = NULL, *ls = NULL;
	char *key = NULL;
	int rc, status = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: %s STATE_DIR\n", argv[0]);
		return 2;
	}
	o.state_dir = argv[1];
	o.driver = &toy_driver;
	if ((rc = saas_engine_open(&engine, &o)) < 0)
		return fail("opening the engine", rc);
	if ((rc = saas_account_create(&acc, engine, "toy", SAAS_CREDIT_DEFAULT, 0)) < 0 ||
	    (rc = saas_key_create(&key, NULL, engine, acc->id, "toy", 0)) < 0 ||
	    (rc = saas_client_open_local(&client, engine, key, 0)) < 0) {
		fail("making an account", rc);
		goto out;
	}

	if ((rc = saas_sandbox_create(&sb, client, NULL, 0)) < 0) {
		fail("creating a sandbox", rc);
		goto out;
	}
	printf("sandbox %s is %s\n", sb->id, saas_sandbox_status_name(sb->status));

	/* What the driver writes and the exit code it gives are what the caller reads. */
	if ((rc = saas_exec(&hello, client, sb->id, "echo hello from the toy driver", NULL, 0)) < 0 ||
	    (rc = saas_exec(&ls, client, sb->id, "ls", NULL, 0)) < 0) {
		fail("running a command", rc);
		goto out;
	}
	printf("echo: exit %d, stdout: %s", hello->exit_code, hello->stdout_data);
	printf("ls: exit %d, stderr: %s", ls->exit_code, ls->stderr_data);

	/* The driver leaves the file slots NULL: the engine answers SAAS_ENOTSUP. */
	rc = saas_file_write(client, sb->id, "note.txt", "hi", 2, NULL);
	printf("file write: %s\n", saas_strerror(rc));
	if (rc != SAAS_ENOTSUP)
		goto out;

	/* The driver's own error message reaches the caller (saas_sys_error_set). */
	co.image = "missing";
	rc = saas_sandbox_create(&other, client, &co, 0);
	printf("image \"missing\": %s: %s\n", saas_strerror(rc), saas_error_last()->message);
	if (rc >= 0)
		goto out;

	if ((rc = saas_sandbox_destroy(&gone, client, sb->id, 0)) < 0) {
		fail("destroying the sandbox", rc);
		goto out;
	}
	printf("sandbox %s is %s\n", gone->id, saas_sandbox_status_name(gone->status));
	status = 0;
out:
	saas_sandbox_free(gone);
	saas_sandbox_free(other);
	saas_execution_free(ls);
	saas_execution_free(hello);
	saas_sandbox_free(sb);
	saas_client_free(client);
	saas_free(key);
	saas_account_free(acc);
	saas_engine_free(engine);
	return status;
}
