/*
 * Confinement where it used to turn itself off: images QEMU's uids cannot
 * reach (vm.confine: the quick start's cache under a private home), and an
 * unprivileged engine on a system libvirtd (vm.system, run by
 * tests/integration/vm-system, which starts that daemon).
 *
 * The engine gets a copy of the tiny image in a 0700 directory of its own,
 * makes a sandbox (a cold boot, then a clone of its template when
 * SAAS_TEST_CLONE is set), and each sandbox's QEMU must run under a uid of
 * its own (not root, not the engine's), with no capabilities, no_new_privs
 * and QEMU's seccomp filter; an exec works; destroy leaves no QEMU.
 *
 * Under a system libvirtd (vm.system) the engine holds CAP_NET_ADMIN, as its
 * systemd unit gives it: its clone is made under a network policy, and the
 * host's nftables refuse what the policy does not allow, counted.
 *
 * Environment: SAAS_TEST_IMAGES (where the tiny image is), SAAS_TEST_STATE;
 * SAAS_TEST_URI (a system libvirtd's URI) for vm.system.
 */
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "vmtest.h"

static saas_engine *engine;
static saas_client *client;
static char *key;
static char images[4200];

static int setup(void **state)
{
	saas_engine_options o;
	const char *src, *dir, *uri = getenv("SAAS_TEST_URI");
	char config[9000], cmd[40000];

	(void)state;
	if (vmtest_env(&src, &dir) < 0)
		return -1;
	if (!uri && geteuid() != 0) {
		/* Per-VM uids under the embedded driver need root: docs/security.md. */
		printf("SKIP: the embedded driver confines QEMU only when the engine runs as root\n");
		exit(0);
	}
	/*
	 * The image, where no QEMU uid can go: a 0700 directory in the state
	 * directory (hard links of the built image where the filesystem allows).
	 */
	snprintf(images, sizeof(images), "%s/private/images", dir);
	snprintf(cmd, sizeof(cmd),
	         "rm -rf '%s/private' && mkdir -p '%s' && chmod 700 '%s/private' && "
	         "{ cp -rl '%s/tiny' '%s/' 2>/dev/null || cp -r '%s/tiny' '%s/'; }",
	         dir, images, dir, src, images, src, images);
	if (system(cmd) != 0)
		return -1;
	/*
	 * Under a system libvirtd, guests are isolated unless asked otherwise,
	 * and a policy's allowed lookups would go to a port nothing listens on:
	 * nothing of the test leaves the host.
	 */
	snprintf(config, sizeof(config), "%s%s images=%s boot_timeout=600 templates=%s%s", uri ? "uri=" : "",
	         uri ? uri : "", images, getenv("SAAS_TEST_CLONE") ? "on" : "off",
	         uri ? " network=isolated dns_upstream=127.0.0.1#9" : "");
	o = vmtest_engine_options(dir, config);
	o.default_image = "tiny";
	o.log_level = SAAS_LOG_DEBUG;
	check(saas_engine_open(&engine, &o), "engine");
	vmtest_tenant(engine, "confine", &key, &client);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	saas_client_free(client);
	saas_engine_free(engine);
	saas_free(key);
	return 0;
}

/* A sandbox's QEMU is confined, and the sandbox works. Returns its QEMU's uid. */
static unsigned int assert_confined(const saas_sandbox *sb)
{
	saas_exec_options eo = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	pid_t pid = qemu_pid(sb->id);
	struct passwd *pw;
	unsigned int uid;

	assert_true(pid > 0);
	uid = (unsigned int)proc_status(pid, "Uid:", 10);
	assert_int_not_equal(uid, 0);
	assert_int_not_equal(uid, geteuid());
	/* Nor the account libvirt runs unlabelled QEMUs as (a system libvirtd's default). */
	if ((pw = getpwnam("libvirt-qemu")))
		assert_int_not_equal(uid, pw->pw_uid);
	assert_int_not_equal(proc_status(pid, "Gid:", 10), 0);
	assert_int_equal(proc_status(pid, "CapEff:", 16), 0);
	assert_int_equal(proc_status(pid, "CapPrm:", 16), 0);
	assert_int_equal(proc_status(pid, "NoNewPrivs:", 10), 1);
	assert_int_equal(proc_status(pid, "Seccomp:", 10), 2);
	eo.timeout_s = 120;
	check(saas_exec(&x, client, sb->id, "echo alive; id -u", &eo, 0), "exec");
	assert_int_equal(x->exit_code, 0);
	assert_non_null(strstr(x->stdout_data, "alive"));
	saas_execution_free(x);
	return uid;
}

static void destroy_gone(saas_sandbox *sb)
{
	char id[128];

	snprintf(id, sizeof(id), "%s", sb->id);
	check(saas_sandbox_destroy(NULL, client, id, 0), "destroy");
	saas_sandbox_free(sb);
	for (int i = 0; i < 100 && qemu_pid(id); i++)
		usleep(100 * 1000);
	assert_int_equal(qemu_pid(id), 0);
}

/*
 * The images sit in a 0700 directory: the engine still confines QEMU, giving
 * it the image's files from a staging of its own in the state directory.
 */
static void test_private_images_confined(void **state)
{
	saas_sandbox *sb = NULL;
	char staged[4400];
	unsigned int uid;

	(void)state;
	assert_true(logged("QEMU uids per VM", NULL));
	/* Under a system libvirtd with CAP_NET_ADMIN: the guard and per-VM egress, as in the embedded mode. */
	if (getenv("SAAS_TEST_URI")) {
		assert_true(logged("network: guests are isolated by default (network=isolated)", NULL));
		assert_false(logged("internet is refused", NULL));
		assert_true(logged("egress: per-VM policies in table inet aas_egress_", NULL));
	}
	check(saas_sandbox_create(&sb, client, NULL, 0), "create");
	assert_true(logged("image tiny staged in ", images));
	/* The cold boot of a template's first create says why it is not a clone. */
	if (getenv("SAAS_TEST_CLONE"))
		assert_true(logged(" boots cold: its template is being built", NULL));
	uid = assert_confined(sb);
	/* The staging directory: QEMU's uid may pass, not list; the image's own directory it cannot reach. */
	snprintf(staged, sizeof(staged), "%s/libvirt/images", getenv("SAAS_TEST_STATE"));
	{
		struct stat st;
		assert_int_equal(stat(staged, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0711);
	}
	(void)uid;
	destroy_gone(sb);
}

/*
 * A policy sandbox's lookup of a name it does not allow and its connection
 * to the host's loopback (10.0.2.2 under slirp) are refused by the host and
 * counted: the egress table judges its QEMU's uid.
 */
static void assert_policy_enforced(const char *id)
{
	saas_exec_options eo = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	saas_sandbox *sb = NULL;

	eo.timeout_s = 120;
	check(saas_exec(&x, client, id,
	                "nslookup unlisted.test >/dev/null 2>&1 || echo refused; "
	                "if timeout 10 nc -w 5 10.0.2.2 22 </dev/null >/dev/null 2>&1; then echo reached; fi; echo checked",
	                &eo, 0),
	      "exec");
	assert_non_null(strstr(x->stdout_data, "refused"));
	assert_null(strstr(x->stdout_data, "reached"));
	assert_non_null(strstr(x->stdout_data, "checked"));
	saas_execution_free(x);
	check(saas_sandbox_get(&sb, client, id), "get");
	assert_non_null(sb->network);
	assert_int_equal(sb->network->mode, SAAS_NETWORK_POLICY);
	assert_true(sb->network->denied_lookups >= 1);
	assert_true(sb->network->denied_connections >= 1);
	saas_sandbox_free(sb);
}

/*
 * Clones of a template (SAAS_TEST_CLONE): each under its own uid, the
 * template's base shared. Under a system libvirtd one clone, made under a
 * policy: that clones are clones there, and confined, is what it adds to
 * vm.confine (every VM costs a minute or more under TCG).
 */
static void test_clones_confined(void **state)
{
	static const char *const allow[] = { "allowed.test", NULL };
	saas_network_spec policy = SAAS_NETWORK_SPEC_INIT;
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb[2] = { NULL, NULL };
	unsigned int uids[2];
	bool system = getenv("SAAS_TEST_URI") != NULL;
	int n = system ? 1 : 2;

	(void)state;
	policy.allow = allow;
	co.network_spec = &policy;
	if (!getenv("SAAS_TEST_CLONE"))
		skip();
	/* The first test's cold boot asked for the template. */
	assert_true(logged("building template ", NULL));
	for (int i = 0; i < 600 && !logged("template ", " ready in"); i++) {
		assert_false(logged("template ", " failed"));
		usleep(500 * 1000);
	}
	for (int i = 0; i < n; i++) {
		char line[256];
		check(saas_sandbox_create(&sb[i], client, system ? &co : NULL, 0), "create a clone");
		snprintf(line, sizeof(line), "VM %s up in", sb[i]->id);
		assert_true(logged(line, "(clone,"));
		uids[i] = assert_confined(sb[i]);
		if (system)
			assert_policy_enforced(sb[i]->id);
	}
	if (n == 2)
		assert_int_not_equal(uids[0], uids[1]);
	for (int i = 0; i < n; i++)
		destroy_gone(sb[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_images_confined),
		cmocka_unit_test(test_clones_confined),
	};

	/* SAAS_TEST_FILTER=test_clones_* runs a subset. */
	if (getenv("SAAS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SAAS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
