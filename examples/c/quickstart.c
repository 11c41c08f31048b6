/*
 * quickstart: the life of one sandbox, through the public API only.
 *
 * Talks to an aas-server: AAS_BASE_URL (default http://127.0.0.1:8080) and
 * AAS_API_KEY, as the CLI and the MCP server do. Creates a sandbox, runs a
 * command, writes a file and reads it back, exposes a port, and destroys it.
 *
 * Build: cc quickstart.c $(pkg-config --cflags --libs libsaas)
 */
#include <saas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int rc)
{
	fprintf(stderr, "quickstart: %s: %s (%s)\n", what, saas_strerror(rc), saas_error_last()->message);
	return 1;
}

int main(void)
{
	const char *url = getenv("AAS_BASE_URL"), *key = getenv("AAS_API_KEY");
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	saas_execution *x = NULL;
	void *back = NULL;
	size_t len = 0;
	char *preview = NULL, cost[32];
	static const char greeting[] = "hello from the host\n";
	int rc, status = 1;

	if (!key) {
		fprintf(stderr, "quickstart: set AAS_API_KEY (and AAS_BASE_URL if the server is not local)\n");
		return 2;
	}
	if ((rc = saas_client_open_remote(&client, url ? url : "http://127.0.0.1:8080", key, NULL, 0)) < 0)
		return fail("connecting", rc);

	co.size = "small";
	co.timeout_s = 300;
	if ((rc = saas_sandbox_create(&sb, client, &co, 0)) < 0) {
		fail("creating a sandbox", rc);
		goto out;
	}
	printf("sandbox %s is %s (%u vCPU, %u MiB)\n", sb->id, saas_sandbox_status_name(sb->status), sb->vcpus,
	       sb->memory_mb);

	if ((rc = saas_exec(&x, client, sb->id, "echo \"I am $(id -un)\"; pwd", NULL, 0)) < 0) {
		fail("running a command", rc);
		goto out;
	}
	printf("exit %d, stdout: %s", x->exit_code, x->stdout_data);

	if ((rc = saas_file_write(client, sb->id, "greeting.txt", greeting, strlen(greeting), NULL)) < 0 ||
	    (rc = saas_file_read(&back, &len, client, sb->id, "/workspace/greeting.txt", 0)) < 0) {
		fail("moving a file", rc);
		goto out;
	}
	printf("read back %zu bytes: %s", len, (const char *)back);

	if ((rc = saas_port_expose(&preview, client, sb->id, 8000, 0)) < 0) {
		fail("exposing a port", rc);
		goto out;
	}
	printf("port 8000 would be served at %s\n", preview);
	status = len == strlen(greeting) && memcmp(back, greeting, len) == 0 ? 0 : 1;
out:
	if (sb) {
		saas_sandbox *gone = NULL;
		if ((rc = saas_sandbox_destroy(&gone, client, sb->id, 0)) == SAAS_OK)
			printf("destroyed; it cost %s USD\n", saas_usd_format(cost, sizeof(cost), gone->cost_usd_micro));
		else
			status = fail("destroying", rc);
		saas_sandbox_free(gone);
	}
	saas_free(preview);
	saas_free(back);
	saas_execution_free(x);
	saas_sandbox_free(sb);
	saas_client_free(client);
	return status;
}
