/*
 * Egress by policy, on a real VM: the libvirt driver's table (its version 2
 * slots: vm_create with a policy, vm_network_set, vm_network_stats), driven
 * directly, so that what the host enforces is tested apart from the
 * surfaces that carry a policy to it.
 *
 * The world is a network namespace of the test's own, joined to the host by
 * a veth pair (198.51.100.1 on the host's side, a /32 route to each world
 * address; TEST-NET-2, routed by nothing else): in it a dnsmasq answers a
 * few names (the driver's dns_upstream) and logs every query it gets, and one TCP listener on every
 * address of the namespace counts who connects where. Nothing is sent to
 * any other address: the guest looks names up only under policies (whose
 * lookups go to that dnsmasq or nowhere), never under internet (whose
 * lookups would go to the host's resolvers).
 *
 * Root only (namespaces, nftables, per-VM uids); skipped otherwise.
 * Environment: SAAS_TEST_IMAGES (the built `tiny` image), SAAS_TEST_STATE.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas/sys/driver.h"
#include "util/util.h"
#include "vmtest.h"

extern const saas_driver saas__driver_libvirt;

#define VM "sbx-egress1"
#define NS_DNS VMTEST_NET_DNS
#define NS_WILD VMTEST_NET_WILD
#define NS_CIDR VMTEST_NET_CIDR
#define NS_OTHER VMTEST_NET_OTHER

static const saas_driver *drv = &saas__driver_libvirt;
static void *ctx;
static char state_dir[4096], skip_why[256];
static bool vm_made;

/* ---- the driver ------------------------------------------------------------------------------ */

static int64_t clock_fn(void *ud)
{
	struct timespec ts;

	(void)ud;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run cmd in the guest; its stdout (a static buffer). */
static char *run(const char *cmd)
{
	static char out[65536];
	int code = -1;

	check(vmtest_driver_exec(drv, ctx, VM, cmd, 120000, &code, out, sizeof(out)), cmd);
	return out;
}

/* The address the guest's lookup of name gave ("" when none). */
static char *lookup(const char *name)
{
	static char addr[64];
	char cmd[512], *out;

	snprintf(cmd, sizeof(cmd), "nslookup -type=a %s 2>/dev/null | awk '/^Address/ && $NF !~ /:/ {a=$NF} END {print a}'",
	         name);
	out = run(cmd);
	snprintf(addr, sizeof(addr), "%.*s", (int)strcspn(out, "\n"), out);
	return addr;
}

/*
 * Does the guest's TCP connection to addr reach the namespace's listener?
 * (By address: the guest's busybox resolves names in nslookup only.)
 */
static bool connects(const char *addr)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "if timeout 10 nc -w 5 %s %u </dev/null >/dev/null 2>&1; then echo reached; fi; "
	         "echo checked", addr, vmtest_world_port());
	return strstr(run(cmd), "reached") != NULL;
}

static int64_t denied(bool lookups)
{
	saas_vm_network_stats st;

	check(drv->vm_network_stats(ctx, VM, &st), "vm_network_stats");
	return lookups ? st.denied_lookups : st.denied_connections;
}

static void set(int mode, const char *const *allow, const char *const *deny)
{
	saas_vm_network net = { mode, allow, deny };

	check(drv->vm_network_set(ctx, VM, &net), "vm_network_set");
}

/* A listener on every host address (loopback included): the guest must reach none of them. */
static void check_host_unreachable(void)
{
	unsigned int port;
	int fd = vmtest_listen_everywhere(&port);
	char cmd[1024];

	/* The host's loopback (10.0.2.2, fec0::2), slirp's DNS alias, and the host's own address on the veth. */
	snprintf(cmd, sizeof(cmd),
	         "for a in 10.0.2.2 10.0.2.3 fec0::2 198.51.100.1; do "
	         "if timeout 3 nc -w 2 $a %u </dev/null >/dev/null 2>&1; then echo reached $a; fi; done; echo checked",
	         port);
	assert_null(strstr(run(cmd), "reached"));
	assert_int_equal(vmtest_accepted(fd), 0);
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	const char *images, *dir;
	static const char *const allow[] = { "allowed.test", "*.wild.test", NS_CIDR "/32", NULL };
	saas_vm_network policy = { SAAS_NET_POLICY, allow, NULL };
	saas_driver_env env;
	saas_vm_spec spec;
	static char config[8192], driver_name[] = "driver";
	int rc;

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	if (geteuid() != 0) {
		snprintf(skip_why, sizeof(skip_why), "not root: no namespaces, nftables or per-VM uids");
		return 0;
	}
	if (sh("command -v dnsmasq >/dev/null") != 0) {
		snprintf(skip_why, sizeof(skip_why), "no dnsmasq (Debian: dnsmasq-base)");
		return 0;
	}
	if (!getpwnam("aas-qemu")) {
		snprintf(skip_why, sizeof(skip_why), "no aas-qemu account: QEMU cannot run under uids of its own here");
		return 0;
	}
	vmtest_state_parent_traversable(state_dir);
	if (sh("mkdir -p '%s'", state_dir) != 0 || vmtest_world_up(state_dir) < 0) {
		vmtest_world_down();
		fprintf(stderr, "cannot make the test's network namespace\n");
		return -1;
	}
	/* A copy of the image where QEMU's uids can read it. */
	if (sh("mkdir -p '%s/images' && cp -r '%s/tiny' '%s/images/'", dir, images, dir) != 0)
		return -1;
	snprintf(config, sizeof(config), "images=%s/images templates=off boot_timeout=300 dns_upstream=" NS_DNS, dir);
	memset(&env, 0, sizeof(env));
	env.state_dir = state_dir;
	env.config = config;
	env.log = vmtest_log;
	env.log_userdata = driver_name;
	env.clock = clock_fn;
	if (drv->open(&ctx, &env) != SAAS_OK) {
		fprintf(stderr, "opening the libvirt driver: %s\n", saas_error_last()->message);
		ctx = NULL;
		return -1;
	}
	memset(&spec, 0, sizeof(spec));
	spec.name = VM;
	spec.image = "tiny";
	spec.vcpus = 1;
	spec.memory_mb = 512;
	spec.disk_gb = 1;
	spec.network = &policy;
	/* As root with the accounts in place, a refused policy is a failure, never a skip. */
	if ((rc = drv->vm_create(ctx, &spec)) != SAAS_OK) {
		fprintf(stderr, "creating the VM: %s\n", saas_error_last()->message);
		return -1;
	}
	vm_made = true;
	return 0;
}

static int group_teardown(void **state)
{
	char hash[65];

	(void)state;
	if (ctx) {
		if (vm_made)
			drv->vm_destroy(ctx, VM);
		drv->close(ctx);
		/* The table outlives an engine (its VMs do); this engine's VMs are gone. */
		saas__sha256_hex(hash, state_dir, strlen(state_dir));
		sh("nft delete table inet aas_egress_%.16s 2>/dev/null", hash);
	}
	vmtest_world_down();
	return 0;
}

static void need_vm(void)
{
	if (skip_why[0]) {
		fprintf(stderr, "  skipped: %s\n", skip_why);
		skip();
	}
	assert_true(vm_made);
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* Allowed names resolve and connect; a wildcard allows what is below it. */
static void test_allowed_names(void **state)
{
	(void)state;
	need_vm();
	assert_string_equal(lookup("allowed.test"), NS_DNS);
	assert_true(connects(NS_DNS));
	assert_true(vmtest_world_reached(NS_DNS) > 0);
	assert_string_equal(lookup("www.wild.test"), NS_WILD);
	assert_true(connects(NS_WILD));
	assert_true(vmtest_world_asked("allowed.test"));
	assert_true(vmtest_world_asked("www.wild.test"));
}

/* Other names do not resolve, and no query for them reaches the upstream: nothing leaks by lookups. */
static void test_unlisted_names(void **state)
{
	int64_t before;

	(void)state;
	need_vm();
	before = denied(true);
	assert_string_equal(lookup("unlisted.test"), "");
	assert_string_equal(lookup("c2VjcmV0.wild.test.exfil.example"), "");
	assert_string_equal(lookup("wild.test"), ""); /* a wildcard is strictly below */
	assert_false(vmtest_world_asked("unlisted.test"));
	assert_false(vmtest_world_asked("c2VjcmV0.wild.test.exfil.example"));
	assert_false(vmtest_world_asked("wild.test"));
	assert_true(denied(true) >= before + 3);
	/* Nor does its address connect (it was never answered). */
	before = denied(false);
	assert_false(connects(NS_OTHER));
	assert_int_equal(vmtest_world_reached(NS_OTHER), 0);
	assert_true(denied(false) > before);
}

/* A CIDR rule: its address connects without any lookup. */
static void test_cidr_rule(void **state)
{
	(void)state;
	need_vm();
	assert_true(connects(NS_CIDR));
	assert_true(vmtest_world_reached(NS_CIDR) > 0);
}

/* The host's own services and addresses, under the policy. */
static void test_host_unreachable_policy(void **state)
{
	int64_t before;

	(void)state;
	need_vm();
	before = denied(false);
	check_host_unreachable();
	assert_true(denied(false) > before);
}

/* A policy changed while the VM runs takes effect at once. */
static void test_runtime_change(void **state)
{
	static const char *const allow[] = { "later.test", NULL };
	static const char *const deny[] = { "www.wild.test", NULL };
	static const char *const wild[] = { "*.wild.test", NULL };

	(void)state;
	need_vm();
	set(SAAS_NET_POLICY, allow, deny);
	assert_string_equal(lookup("allowed.test"), "");
	assert_false(connects(NS_CIDR));
	assert_false(connects(NS_DNS)); /* learned under the old policy: forgotten */
	assert_false(connects(NS_WILD));
	assert_string_equal(lookup("later.test"), NS_WILD);
	assert_true(connects(NS_WILD));
	/* Deny wins over allow. */
	set(SAAS_NET_POLICY, wild, deny);
	assert_string_equal(lookup("www.wild.test"), "");
	check_host_unreachable();

	/* Isolated: nothing at all. No lookups here: they would fail anyway. */
	set(SAAS_NET_ISOLATED, NULL, NULL);
	assert_false(connects(NS_OTHER));
	check_host_unreachable();

	/* Internet: out, but never to the host (no lookups: they would go to the host's resolvers). */
	set(SAAS_NET_INTERNET, NULL, NULL);
	assert_true(connects(NS_OTHER));
	check_host_unreachable();

	/* And back to a policy. */
	set(SAAS_NET_POLICY, allow, NULL);
	assert_false(connects(NS_OTHER));
	assert_string_equal(lookup("later.test"), NS_WILD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed_names),
		cmocka_unit_test(test_unlisted_names),
		cmocka_unit_test(test_cidr_rule),
		cmocka_unit_test(test_host_unreachable_policy),
		cmocka_unit_test(test_runtime_change),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
