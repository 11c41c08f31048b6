/*
 * Real sandboxes: the libvirt driver, real QEMU VMs (KVM or TCG), real SSH,
 * the `tiny` image. Every VM started here is destroyed at the end, pass or fail;
 * tests/integration/vm-cleanup catches what a crashed run leaves.
 *
 * Environment: SAAS_TEST_IMAGES (directory holding the built `tiny` image),
 * SAAS_TEST_STATE (a state directory for this run; created).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "vmtest.h"

static char state_dir[4096], config[4096];
static saas_engine *engine;
static char *key_a, *key_b;
static saas_client *ca, *cb;
static saas_sandbox *shared;

static void open_engine(unsigned int flags)
{
	saas_engine_options o = vmtest_engine_options(state_dir, config);

	o.default_image = "tiny";
	o.reaper_interval_ms = 200;
	o.flags = flags;
	check(saas_engine_open(&engine, &o), "engine open");
}

static void close_all(void)
{
	saas_client_free(ca);
	saas_client_free(cb);
	ca = cb = NULL;
	saas_engine_free(engine);
	engine = NULL;
}

static int group_setup(void **state)
{
	const char *images, *dir;

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	/* A private copy of the image: one test rebuilds it (in name) under the engine's feet. */
	{
		char cmd[16384];
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s/images' && cp -r '%s/tiny' '%s/images/'", dir, images, dir);
		if (system(cmd) != 0) {
			fprintf(stderr, "cannot copy the tiny image: %s\n", cmd);
			return -1;
		}
	}
	snprintf(config, sizeof(config), "images=%s/images boot_timeout=300", dir);
	open_engine(0);
	vmtest_tenant(engine, "alice", &key_a, &ca);
	vmtest_tenant(engine, "bob", &key_b, &cb);
	check(saas_sandbox_create(&shared, ca, NULL, 0), "create the shared sandbox");
	return 0;
}

/* test_engine_killed's engine in a child process: killed by the teardown if a failed check left it running. */
static pid_t killed_child;

/* Destroy everything either account still has, whatever happened. */
static int group_teardown(void **state)
{
	saas_client *clients[2] = { ca, cb };

	(void)state;
	/* Left running by a failed check, it would hold the test's output open until its timeout. */
	if (killed_child > 0 && kill(killed_child, SIGKILL) == 0)
		waitpid(killed_child, NULL, 0);
	for (int i = 0; i < 2 && engine; i++) {
		saas_sandbox_list *list = NULL;
		if (!clients[i] || saas_sandbox_list_get(&list, clients[i], NULL, 1000, SAAS_LIST_ACTIVE) != SAAS_OK)
			continue;
		for (size_t j = 0; j < list->count; j++)
			saas_sandbox_destroy(NULL, clients[i], list->items[j]->id, 0);
		saas_sandbox_list_free(list);
	}
	saas_sandbox_free(shared);
	close_all();
	saas_free(key_a);
	saas_free(key_b);
	vmtest_log_reset();
	return 0;
}

static saas_execution *run(const char *cmd)
{
	saas_execution *x = NULL;

	check(saas_exec(&x, ca, shared->id, cmd, NULL, 0), cmd);
	return x;
}

static void test_own_kernel(void **state)
{
	struct utsname host;
	saas_execution *x = run("uname -r; hostname; pwd");
	char want[512];

	(void)state;
	uname(&host);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	assert_int_equal(x->exit_code, 0);
	/* Its own kernel: booted, not shared. The host's release string may match
	 * (the tiny image boots the host's kernel package), so prove it by boot id. */
	snprintf(want, sizeof(want), "\n%s\n/workspace\n", shared->id);
	assert_non_null(strstr(x->stdout_data, want));
	saas_execution_free(x);
	x = run("cat /proc/sys/kernel/random/boot_id");
	{
		char host_boot[64] = "";
		FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
		assert_non_null(f);
		assert_non_null(fgets(host_boot, sizeof(host_boot), f));
		fclose(f);
		assert_int_equal(x->stdout_len, strlen(host_boot));
		assert_string_not_equal(x->stdout_data, host_boot);
	}
	saas_execution_free(x);
	/* And it runs its own init as PID 1, which is no process of ours. */
	x = run("cat /proc/1/comm; cat /proc/uptime");
	assert_int_equal(x->exit_code, 0);
	saas_execution_free(x);
}

static void test_unprivileged(void **state)
{
	saas_execution *x = run("id -u; id -un");

	(void)state;
	assert_string_equal(x->stdout_data, "1000\nsandbox\n");
	saas_execution_free(x);
	x = run("sudo true");
	assert_int_not_equal(x->exit_code, 0);
	saas_execution_free(x);
	x = run("touch /etc/owned");
	assert_int_not_equal(x->exit_code, 0);
	saas_execution_free(x);
	x = run("touch /workspace/mine && ls -l /workspace/mine");
	assert_int_equal(x->exit_code, 0);
	saas_execution_free(x);
}

static void test_exec_details(void **state)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	const char *env[] = { "GREETING=it's a \"test\" $HOME", NULL };
	saas_execution *x = NULL;

	(void)state;
	x = run("echo out; echo err >&2; exit 7");
	assert_string_equal(x->stdout_data, "out\n");
	assert_string_equal(x->stderr_data, "err\n");
	assert_int_equal(x->exit_code, 7);
	saas_execution_free(x);
	o.env = env;
	o.cwd = "/tmp";
	o.stdin_data = "line one\nline two\n";
	o.stdin_len = strlen(o.stdin_data);
	check(saas_exec(&x, ca, shared->id, "pwd; printf '%s\\n' \"$GREETING\"; wc -l", &o, 0), "exec with options");
	assert_string_equal(x->stdout_data, "/tmp\nit's a \"test\" $HOME\n2\n");
	saas_execution_free(x);
	/* A server started with & does not hold the call open. */
	x = run("sleep 300 & echo started");
	assert_int_equal(x->exit_code, 0);
	assert_string_equal(x->stdout_data, "started\n");
	assert_true(x->duration_ms < 60000);
	saas_execution_free(x);
}

static void test_timeout_kills(void **state)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;

	(void)state;
	o.timeout_s = 2;
	check(saas_exec(&x, ca, shared->id, "sleep 77.5; echo never", &o, 0), "exec with timeout");
	assert_int_equal(x->status, SAAS_EXEC_TIMEDOUT);
	assert_null(strstr(x->stdout_data, "never"));
	saas_execution_free(x);
	/* Killed, not left behind. */
	x = run("ps -o args 2>/dev/null | grep -c '[s]leep 77.5' || true");
	assert_string_equal(x->stdout_data, "0\n");
	saas_execution_free(x);
}

static void test_output_cap(void **state)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;

	(void)state;
	o.max_output = 100000;
	check(saas_exec(&x, ca, shared->id, "head -c 300000 /dev/zero | tr '\\0' a; echo done >&2", &o, 0), "spew");
	assert_int_equal(x->exit_code, 0);
	assert_int_equal(x->stdout_len, 100000);
	assert_true(x->stdout_truncated);
	assert_string_equal(x->stderr_data, "done\n");
	assert_false(x->stderr_truncated);
	saas_execution_free(x);
}

static void test_files_binary(void **state)
{
	unsigned char *data = malloc(1 << 20);
	void *back = NULL;
	size_t len = 0;
	saas_file_list *list = NULL;
	saas_execution *x;
	int found = 0, created = -1;

	(void)state;
	for (size_t i = 0; i < (1 << 20); i++)
		data[i] = (unsigned char)(rand() & 0xff);
	check(saas_file_write(ca, shared->id, "deep/dir/random.bin", data, 1 << 20, NULL), "write 1 MiB");
	check(saas_file_read(&back, &len, ca, shared->id, "/workspace/deep/dir/random.bin", 0), "read it back");
	assert_int_equal(len, 1 << 20);
	assert_memory_equal(back, data, 1 << 20);
	saas_free(back);
	check(saas_file_list_get(&list, ca, shared->id, NULL, 0, 0, 0), "list");
	for (size_t i = 0; i < list->count; i++)
		if (strcmp(list->entries[i]->path, "/workspace/deep/dir/random.bin") == 0) {
			found = 1;
			assert_int_equal(list->entries[i]->size, 1 << 20);
			assert_int_equal(list->entries[i]->type, SAAS_FILE_REGULAR);
		}
	assert_true(found);
	saas_file_list_free(list);
	/* Owned by the sandbox user, as if it had written it. */
	x = run("stat -c '%U %s' deep/dir/random.bin");
	assert_string_equal(x->stdout_data, "sandbox 1048576\n");
	saas_execution_free(x);
	assert_int_equal(saas_file_read(&back, &len, ca, shared->id, "nope.txt", 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_read(&back, &len, ca, shared->id, "/workspace", 0), SAAS_EISDIR);
	assert_int_not_equal(saas_file_write(ca, shared->id, "/etc/passwd", "x", 1, NULL), SAAS_OK);

	/* Directories, removal and renames over SFTP, as the sandbox user, seen from inside. */
	check(saas_file_mkdir(&created, ca, shared->id, "ops/a/b", 0), "mkdir");
	assert_int_equal(created, 1);
	check(saas_file_mkdir(&created, ca, shared->id, "ops/a/b", 0), "mkdir again");
	assert_int_equal(created, 0);
	assert_int_equal(saas_file_mkdir(NULL, ca, shared->id, "deep/dir/random.bin", 0), SAAS_EEXISTS);
	assert_int_equal(saas_file_mkdir(NULL, ca, shared->id, "/etc/nope", 0), SAAS_EPERM);
	check(saas_file_rename(ca, shared->id, "deep/dir/random.bin", "ops/a/b/moved.bin", 0), "rename");
	assert_int_equal(saas_file_rename(ca, shared->id, "nope", "x", 0), SAAS_ENOTFOUND);
	check(saas_file_write(ca, shared->id, "ops/other", "o", 1, NULL), "write other");
	assert_int_equal(saas_file_rename(ca, shared->id, "ops/other", "ops/a/b/moved.bin", 0), SAAS_EEXISTS);
	check(saas_file_rename(ca, shared->id, "ops/other", "ops/a/b/moved.bin", SAAS_FILE_RENAME_REPLACE),
	      "rename over a file");
	x = run("stat -c '%U %a' ops/a; stat -c '%U %s' ops/a/b/moved.bin; ls ops; test -e deep/dir/random.bin || echo gone");
	assert_string_equal(x->stdout_data, "sandbox 755\nsandbox 1\na\ngone\n");
	saas_execution_free(x);
	x = run("mkdir -p ops/a/b/c/d && touch ops/a/b/c/d/e ops/a/f && ln -s /etc ops/a/link");
	saas_execution_free(x);
	check(saas_file_remove(ca, shared->id, "ops", 0), "remove a tree");
	assert_int_equal(saas_file_remove(ca, shared->id, "ops", 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_file_remove(ca, shared->id, "/etc/passwd", 0), SAAS_EPERM);
	x = run("test -e ops || echo gone; test -e /etc/passwd && echo kept");
	assert_string_equal(x->stdout_data, "gone\nkept\n");
	saas_execution_free(x);
	free(data);
}

/* A listener on the host that counts connections: the guest must never reach it. */
struct listener {
	int fds[8];
	int nfds;
	unsigned int port;
	volatile int accepted;
	volatile int stop;
};

static void *listener_main(void *arg)
{
	struct listener *l = arg;
	struct pollfd p[8];

	while (!l->stop) {
		for (int i = 0; i < l->nfds; i++) {
			p[i].fd = l->fds[i];
			p[i].events = POLLIN;
		}
		if (poll(p, (nfds_t)l->nfds, 100) > 0)
			for (int i = 0; i < l->nfds; i++)
				if (p[i].revents & POLLIN) {
					int c = accept(l->fds[i], NULL, NULL);
					if (c >= 0) {
						l->accepted++;
						close(c);
					}
				}
	}
	return NULL;
}

static void listen_any(struct listener *l)
{
	struct sockaddr_in6 a6;
	socklen_t len = sizeof(a6);
	int fd = socket(AF_INET6, SOCK_STREAM, 0), off = 0, on = 1;

	/* One dual-stack socket on every address: loopback, ::1, and every host address. */
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	a6.sin6_addr = in6addr_any;
	assert_int_equal(bind(fd, (struct sockaddr *)&a6, sizeof(a6)), 0);
	assert_int_equal(listen(fd, 16), 0);
	getsockname(fd, (struct sockaddr *)&a6, &len);
	l->port = ntohs(a6.sin6_port);
	l->fds[l->nfds++] = fd;
}

/* From inside sandbox `id`, try every route to a listener on all the host's addresses: none may connect. */
static void check_host_unreachable(const char *id)
{
	struct listener l;
	pthread_t t;
	char cmd[2048];
	saas_execution *x = NULL;

	memset(&l, 0, sizeof(l));
	listen_any(&l);
	assert_int_equal(pthread_create(&t, NULL, listener_main, &l), 0);
	/*
	 * Every route a guest could take to the host's own services: the
	 * user-mode gateway (the host's loopback), the DNS and SMB aliases, and
	 * the IPv6 host alias. (Tests send nothing to any other address.) All four at once: a probe
	 * that is dropped (isolated) waits out its 2 s, and one after another they were 8.
	 */
	snprintf(cmd, sizeof(cmd),
	         "for a in 10.0.2.2 10.0.2.3 10.0.2.4 fec0::2; do "
	         "(if timeout 3 nc -w 2 $a %u </dev/null >/dev/null 2>&1; then echo reached $a; fi) & done; wait; echo checked",
	         l.port);
	check(saas_exec(&x, ca, id, cmd, NULL, 0), cmd);
	assert_non_null(strstr(x->stdout_data, "checked"));
	assert_null(strstr(x->stdout_data, "reached"));
	saas_execution_free(x);
	l.stop = 1;
	pthread_join(t, NULL);
	assert_int_equal(l.accepted, 0);
	close(l.fds[0]);
}

/* The shared sandbox has the engine's default policy (isolated, or internet behind the guard). */
static void test_host_isolation(void **state)
{
	(void)state;
	check_host_unreachable(shared->id);
}

/*
 * "The internet": a network namespace of this test's own, joined to the host
 * by a veth pair, 198.51.100.1 on the host's side and 198.51.100.2 in the
 * namespace, each the other's peer (TEST-NET-2: neither local nor private,
 * routed by nothing else; a /32 route each way, never the whole range, whose
 * route would take this machine's traffic to any real address in it).
 * Traffic goes to that address only. Made by net_setup and removed by
 * net_teardown whether the test passes or not.
 */
#define NET_ADDR "198.51.100.2"
static char net_ns[32], net_veth[16], net_skip[256];

static int net_teardown(void **state)
{
	(void)state;
	/* Deleting one end of a veth pair deletes both. */
	if (net_veth[0])
		sh("ip link del %s 2>/dev/null", net_veth);
	if (net_ns[0])
		sh("ip netns del %s 2>/dev/null", net_ns);
	net_ns[0] = net_veth[0] = '\0';
	return 0;
}

static int net_setup(void **state)
{
	(void)state;
	net_skip[0] = '\0';
	if (geteuid() != 0) {
		snprintf(net_skip, sizeof(net_skip), "not root: cannot make a network namespace");
		return 0;
	}
	snprintf(net_ns, sizeof(net_ns), "aas-test-%d", (int)getpid());
	snprintf(net_veth, sizeof(net_veth), "aast%d", (int)getpid() % 1000000);
	if (sh("ip netns add %s", net_ns) != 0) {
		net_ns[0] = '\0';
		snprintf(net_skip, sizeof(net_skip), "ip netns add failed: cannot make a network namespace here");
		return 0;
	}
	if (sh("ip link add %s type veth peer name aasi0 netns %s && ip addr add 198.51.100.1 peer " NET_ADDR " dev %s && "
	       "ip link set %s up && ip -n %s addr add " NET_ADDR " peer 198.51.100.1 dev aasi0 && "
	       "ip -n %s link set aasi0 up && "
	       "ip -n %s link set lo up",
	       net_veth, net_ns, net_veth, net_veth, net_ns, net_ns, net_ns) != 0) {
		snprintf(net_skip, sizeof(net_skip), "cannot make a veth pair into %s", net_ns);
		net_teardown(state);
	}
	return 0;
}

/* A listener on NET_ADDR inside the namespace (the socket lives there; this thread comes back). */
static void listen_in_namespace(struct listener *l)
{
	char path[64];
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns, fd, on = 1;
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	snprintf(path, sizeof(path), "/run/netns/%s", net_ns);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(self >= 0 && ns >= 0);
	assert_int_equal(setns(ns, CLONE_NEWNET), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(setns(self, CLONE_NEWNET), 0);
	close(ns);
	close(self);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	inet_pton(AF_INET, NET_ADDR, &a.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	getsockname(fd, (struct sockaddr *)&a, &len);
	l->port = ntohs(a.sin_port);
	l->fds[l->nfds++] = fd;
}

/* Can sandbox `id` open a TCP connection to "the internet"? Counted on the listener's side too. */
static int reaches_internet(const char *id)
{
	struct listener l;
	pthread_t t;
	char cmd[512];
	saas_execution *x = NULL;
	int said;

	memset(&l, 0, sizeof(l));
	listen_in_namespace(&l);
	assert_int_equal(pthread_create(&t, NULL, listener_main, &l), 0);
	snprintf(cmd, sizeof(cmd),
	         "if timeout 10 nc -w 5 " NET_ADDR " %u </dev/null >/dev/null 2>&1; then echo reached; fi; echo checked",
	         l.port);
	check(saas_exec(&x, ca, id, cmd, NULL, 0), cmd);
	assert_non_null(strstr(x->stdout_data, "checked"));
	said = strstr(x->stdout_data, "reached") != NULL;
	saas_execution_free(x);
	/* The guest saying so and the listener counting it must agree. */
	for (int i = 0; i < 20 && said && !l.accepted; i++)
		usleep(100000);
	l.stop = 1;
	pthread_join(t, NULL);
	close(l.fds[0]);
	assert_int_equal(said, l.accepted > 0);
	return said;
}

static saas_sandbox *create_with_network(const char *network)
{
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	co.network = network;
	check(saas_sandbox_create(&sb, ca, &co, 0), network);
	return sb;
}

/*
 * The internet policy: out to the internet, never to the host. Where the
 * guard cannot be installed, asking for it is refused, never given unguarded.
 */
static void test_network_internet(void **state)
{
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	saas_execution *x = NULL;
	int rc;

	(void)state;
	co.network = "internet";
	rc = saas_sandbox_create(&sb, ca, &co, 0);
	if (rc == SAAS_ENOTSUP) {
		/* Refused, with the reason; nothing was made or billed. */
		fprintf(stderr, "  internet refused here: %s\n", saas_error_last()->message);
		assert_non_null(strstr(saas_error_last()->message, "internet"));
		skip();
	}
	check(rc, "create with network internet");
	/* The SSH forward (its replies leave QEMU's sockets) works under the guard. */
	check(saas_exec(&x, ca, sb->id, "echo up", NULL, 0), "exec");
	assert_string_equal(x->stdout_data, "up\n");
	saas_execution_free(x);
	check_host_unreachable(sb->id);
	if (net_skip[0]) {
		fprintf(stderr, "  outbound check skipped: %s\n", net_skip);
	} else {
		assert_true(reaches_internet(sb->id));
	}
	check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy");
	saas_sandbox_free(sb);
	if (net_skip[0])
		skip();
}

/* The isolated policy: neither the host nor the internet. */
static void test_network_isolated(void **state)
{
	saas_sandbox *sb = create_with_network("isolated");

	(void)state;
	check_host_unreachable(sb->id);
	if (net_skip[0])
		fprintf(stderr, "  outbound check skipped: %s\n", net_skip);
	else
		assert_false(reaches_internet(sb->id));
	check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy");
	saas_sandbox_free(sb);
}

/* Asked for internet where the guard cannot hold (a custom libvirt URI), the driver refuses to open. */
static void test_network_internet_refused(void **state)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_engine *e = NULL;
	char dir[4200], cfg[4300];
	int rc;

	(void)state;
	snprintf(dir, sizeof(dir), "%s-refused", state_dir);
	snprintf(cfg, sizeof(cfg), "uri=qemu:///embed?root=%s/root network=internet", dir);
	o.state_dir = dir;
	o.driver_config = cfg;
	o.default_image = "tiny";
	rc = saas_engine_open(&e, &o);
	saas_engine_free(e);
	sh("rm -rf '%s'", dir);
	assert_int_equal(rc, SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "network=internet"));
}

/*
 * A host short of memory refuses a VM before it starts it: the create fails
 * with SAAS_EBUSY (a 503 for a tenant) saying so, no QEMU runs for it, the
 * account has no sandbox and pays nothing. Short here means under the
 * reserve (min_free_memory_mb, as large as it may be) plus the size's memory.
 * In a process of its own (this program with --memory-short): one process
 * holds one embedded libvirt driver, and this one's is the suite's engine's.
 */
static int memory_short_main(const char *dir, const char *cfg)
{
	saas_engine_options o;
	saas_engine *e = NULL;
	saas_client *c = NULL;
	saas_sandbox *sb = NULL;
	saas_account_info *info = NULL;
	char *key = NULL, full[8400];
	int rc, ok;

	snprintf(full, sizeof(full), "%s min_free_memory_mb=16777216", cfg);
	o = vmtest_engine_options(dir, full);
	o.default_image = "tiny";
	if ((rc = saas_engine_open(&e, &o)) < 0) {
		fprintf(stderr, "child: engine open: %s\n", saas_error_last()->message);
		return 1;
	}
	vmtest_tenant(e, "carol", &key, &c);
	rc = saas_sandbox_create(&sb, c, NULL, 0);
	if (rc == SAAS_OK) {
		fprintf(stderr, "child: a create on a host without the memory kept started VM %d\n", (int)qemu_pid(sb->id));
		saas_sandbox_destroy(NULL, c, sb->id, 0);
		saas_sandbox_free(sb);
		return 1;
	}
	printf("%d %s\n", rc, saas_error_last()->message);
	ok = saas_account_info_get(&info, c) == SAAS_OK && info->active_sandboxes == 0 && info->spent_usd_micro == 0 &&
	     logged("not started: the server is short of memory", NULL);
	if (!ok)
		fprintf(stderr, "child: the refused create left a sandbox, a charge or no log line\n");
	saas_account_info_free(info);
	saas_client_free(c);
	saas_free(key);
	saas_engine_free(e);
	return ok ? 0 : 1;
}

static void test_memory_short(void **state)
{
	char dir[4200], self[4096], cmd[16384], line[1024] = "";
	ssize_t n;
	FILE *p;

	(void)state;
	snprintf(dir, sizeof(dir), "%s-memory", state_dir);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	snprintf(cmd, sizeof(cmd), "'%s' --memory-short '%s' '%s'", self, dir, config);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	assert_int_equal(pclose(p), 0);
	sh("rm -rf '%s'", dir);
	assert_int_equal(atoi(line), SAAS_EBUSY);
	assert_non_null(strstr(line, "the server is short of memory for a sandbox of 4096 MiB"));
}

static void test_tenancy(void **state)
{
	saas_sandbox *sb = NULL;
	saas_execution *x = NULL;
	saas_sandbox_list *list = NULL;

	(void)state;
	assert_int_equal(saas_sandbox_get(&sb, cb, shared->id), SAAS_ENOTFOUND);
	assert_int_equal(saas_exec(&x, cb, shared->id, "id", NULL, 0), SAAS_ENOTFOUND);
	check(saas_sandbox_list_get(&list, cb, NULL, 0, 0), "list b");
	assert_int_equal(list->count, 0);
	saas_sandbox_list_free(list);
}

static char *run_in(saas_client *c, const char *id, const char *cmd)
{
	saas_execution *x = NULL;
	char *out;

	check(saas_exec(&x, c, id, cmd, NULL, 0), cmd);
	assert_int_equal(x->exit_code, 0);
	out = strndup(x->stdout_data ? x->stdout_data : "", x->stdout_len);
	saas_execution_free(x);
	assert_non_null(out);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/*
 * Clones: the setup's first create started the small template in the
 * background; once it is ready, creates restore it. Two clones must be two
 * machines: their own hostname, random bytes, clock and files.
 */
static void test_clones(void **state)
{
	saas_sandbox *sb[2] = { NULL, NULL };
	char line[256], *rand[2], *out;

	(void)state;
	for (int i = 0; i < 600 && !logged("template ", " ready in"); i++) {
		assert_false(logged("template ", " failed"));
		usleep(500 * 1000);
	}
	assert_true(logged("template ", " ready in"));
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_create(&sb[i], ca, NULL, 0), "create a clone");
		snprintf(line, sizeof(line), "VM %s up in", sb[i]->id);
		assert_true(logged(line, "(clone,"));
	}
	for (int i = 0; i < 2; i++) {
		time_t host;
		long long guest;
		out = run_in(ca, sb[i]->id, "hostname");
		assert_string_equal(out, sb[i]->id);
		free(out);
		out = run_in(ca, sb[i]->id, "date -u +%s");
		host = time(NULL);
		guest = atoll(out);
		if (!(guest > host - 5 && guest <= host + 1)) {
			/*
			 * Seen three times, each ~270 s ahead, never reproduced: what the guest's
			 * kernel said of its clocks, and the clock again, so the next one tells more.
			 */
			char *why = run_in(ca, sb[i]->id,
			                   "{ cat /sys/devices/system/clocksource/clocksource0/current_clocksource; "
			                   "dmesg | grep -i -E 'clock|tsc|time|rtc' | tail -n 20; date -u +%s.%N; "
			                   "cat /proc/uptime; } 2>&1 | tr '\\n' '|'");
			fprintf(stderr, "clone %s, host now %lld: %s\n", sb[i]->id, (long long)time(NULL), why);
			free(why);
			fail_msg("clone %s: guest clock %lld, host %lld ('%s' said the guest)", sb[i]->id, guest, (long long)host,
			         out);
		}
		free(out);
		rand[i] = run_in(ca, sb[i]->id, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'");
		assert_int_equal(strlen(rand[i]), 64);
		/* Root's forced-command key file is not the sandbox user's to read. */
		out = run_in(ca, sb[i]->id, "cat /etc/ssh/authorized_keys/root >/dev/null 2>&1 && echo readable || echo refused");
		assert_string_equal(out, "refused");
		free(out);
	}
	assert_string_not_equal(rand[0], rand[1]);
	free(rand[0]);
	free(rand[1]);
	out = run_in(ca, sb[0]->id, "echo mine > /workspace/only-in-first && echo ok");
	free(out);
	out = run_in(ca, sb[1]->id, "test -e /workspace/only-in-first && echo shared || echo own");
	assert_string_equal(out, "own");
	free(out);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, ca, sb[i]->id, 0), "destroy a clone");
		saas_sandbox_free(sb[i]);
	}
}

/* Does cmd (a shell command) succeed as uid:gid with no supplementary groups and no capabilities? */
static bool as_uid(unsigned int uid, unsigned int gid, const char *cmd)
{
	char line[8192];

	snprintf(line, sizeof(line), "setpriv --reuid=%u --regid=%u --clear-groups --inh-caps=-all sh -c '%s' "
	         ">/dev/null 2>&1", uid, gid, cmd);
	return system(line) == 0;
}

/* No file of the engine's (the store, its SSH key, libvirt's log) can be read by uid. */
static void assert_engine_files_unreadable(unsigned int uid, unsigned int gid, const char *dir)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int files = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[4400], cmd[4500];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(cmd, sizeof(cmd), "cat \"%s\"", path);
		if (as_uid(uid, gid, cmd))
			fail_msg("QEMU's uid %u can read %s", uid, path);
		files++;
	}
	closedir(d);
	assert_true(files > 0);
}

/*
 * Confinement (as root): every sandbox's QEMU, cold-booted or cloned, runs
 * under a uid of its own in the guard's group, with no capabilities,
 * no_new_privs and the seccomp sandbox, and cannot read the engine's files
 * or another sandbox's.
 */
static void test_confined(void **state)
{
	saas_sandbox *sb[2] = { NULL, NULL };
	const char *names[3];
	unsigned int uids[3], gid = 0;
	struct group *gr = getgrnam("aas-guest");
	char path[4400], cmd[4500];
	struct stat st;

	(void)state;
	if (geteuid() != 0 || !getpwnam("aas-qemu") || !gr)
		skip(); /* QEMU runs as the engine's user then: docs/security.md */
	assert_true(logged("QEMU uids per VM", NULL));
	gid = (unsigned int)gr->gr_gid;
	for (int i = 0; i < 600 && !logged("template ", " ready in"); i++)
		usleep(500 * 1000);
	for (int i = 0; i < 2; i++) {
		char line[256];
		check(saas_sandbox_create(&sb[i], ca, NULL, 0), "create a confined clone");
		snprintf(line, sizeof(line), "VM %s up in", sb[i]->id);
		assert_true(logged(line, "(clone,"));
	}
	names[0] = shared->id;
	names[1] = sb[0]->id;
	names[2] = sb[1]->id;
	for (int i = 0; i < 3; i++) {
		pid_t pid = qemu_pid(names[i]);
		char *out;
		assert_true(pid > 0);
		uids[i] = (unsigned int)proc_status(pid, "Uid:", 10);
		assert_int_not_equal(uids[i], 0);
		assert_int_not_equal(uids[i], geteuid());
		assert_int_equal(proc_status(pid, "Gid:", 10), gid);
		assert_int_equal(proc_status(pid, "CapEff:", 16), 0);
		assert_int_equal(proc_status(pid, "CapPrm:", 16), 0);
		assert_int_equal(proc_status(pid, "NoNewPrivs:", 10), 1);
		assert_int_equal(proc_status(pid, "Seccomp:", 10), 2);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(uids[i], uids[j]);
		/* It still works: an exec over its SSH forward. */
		out = run_in(ca, names[i], "echo alive");
		assert_string_equal(out, "alive");
		free(out);
	}
	snprintf(path, sizeof(path), "%s/libvirt", state_dir);
	assert_engine_files_unreadable(uids[1], gid, state_dir);
	assert_engine_files_unreadable(uids[1], gid, path);
	/*
	 * Into its own directory it may go (the checks below are not setpriv
	 * failing), but no VM's directory may be listed, its own included: it
	 * is root's (0711), so nothing in it can be renamed or planted.
	 */
	snprintf(cmd, sizeof(cmd), "cd \"%s/libvirt/vms/%s\"", state_dir, names[1]);
	assert_true(as_uid(uids[1], gid, cmd));
	snprintf(path, sizeof(path), "%s/libvirt/vms/%s", state_dir, names[1]);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0711);
	snprintf(cmd, sizeof(cmd), "ls \"%s/libvirt/vms/%s\"", state_dir, names[1]);
	assert_false(as_uid(uids[1], gid, cmd));
	snprintf(cmd, sizeof(cmd), "ls \"%s/libvirt/vms/%s\"", state_dir, names[2]);
	assert_false(as_uid(uids[1], gid, cmd));
	/* Nor can it list the state directory, the VMs' or the templates'. */
	snprintf(cmd, sizeof(cmd), "ls \"%s\"", state_dir);
	assert_false(as_uid(uids[1], gid, cmd));
	snprintf(cmd, sizeof(cmd), "ls \"%s/libvirt/vms\"", state_dir);
	assert_false(as_uid(uids[1], gid, cmd));
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, ca, sb[i]->id, 0), "destroy a confined clone");
		saas_sandbox_free(sb[i]);
	}
}

/* The names in STATE/libvirt/templates, space-separated (each followed by a space). */
static void template_names(char *out, size_t size)
{
	char root[4200];
	struct dirent *e;
	DIR *d;

	out[0] = '\0';
	snprintf(root, sizeof(root), "%s/libvirt/templates", state_dir);
	if (!(d = opendir(root)))
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && strlen(out) + strlen(e->d_name) + 2 < size) {
			strcat(out, e->d_name);
			strcat(out, " ");
		}
	closedir(d);
}

/*
 * A rebuilt image (here: its manifest's recipe hash changes) must never be
 * restored from the old template: the next create boots cold and builds a
 * new template, which then replaces the old one on disk. VMs are then
 * started ahead for the new template, and none is tried for the old one
 * once it is gone (a try would fail on its deleted files, every minute).
 */
static void test_template_follows_image(void **state)
{
	char manifest[4200], before[1024], after[1024], line[256], *text, *p, *key;
	saas_sandbox *sb = NULL;
	FILE *f;
	long len;

	(void)state;
	template_names(before, sizeof(before));
	assert_true(strlen(before) > 0);
	snprintf(manifest, sizeof(manifest), "%s/images/tiny/manifest.json", state_dir);
	f = fopen(manifest, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 2);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	p = strstr(text, "\"recipe_hash\": \"");
	assert_non_null(p);
	p += strlen("\"recipe_hash\": \"");
	memmove(p + 1, p, strlen(p) + 1);
	*p = 'f'; /* a different recipe, as a rebuild would have */
	f = fopen(manifest, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	free(text);

	check(saas_sandbox_create(&sb, ca, NULL, 0), "create after the image changed");
	snprintf(line, sizeof(line), "VM %s up in", sb->id);
	assert_true(logged(line, "(cold boot,"));
	check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy");
	saas_sandbox_free(sb);
	for (int i = 0; i < 600; i++) {
		template_names(after, sizeof(after));
		/* Done when one template is left (the new one is in place and the old one pruned). */
		if (strlen(after) > 0 && strchr(after, ' ') == after + strlen(after) - 1 && !strstr(before, after))
			break;
		usleep(500 * 1000);
	}
	/* Exactly one template now, and not the old one. */
	template_names(after, sizeof(after));
	assert_int_equal(strchr(after, ' ') - after + 1, (long)strlen(after));
	assert_null(strstr(before, after));
	/* A VM started ahead for the new template (the cold create asked for it), which the next create takes. */
	snprintf(line, sizeof(line), " started ahead for template %.32s ", after);
	for (int i = 0; i < 600 && !logged(line, NULL); i++)
		usleep(100 * 1000);
	assert_true(logged(line, NULL));
	sb = NULL;
	check(saas_sandbox_create(&sb, ca, NULL, 0), "create from the new template");
	snprintf(line, sizeof(line), "VM %s up in", sb->id);
	assert_true(logged(line, "(clone,"));
	assert_true(logged(line, ", started ahead,"));
	check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy");
	saas_sandbox_free(sb);
	/* Never a start ahead for an old template that met its deleted files. */
	for (key = strtok(before, " "); key; key = strtok(NULL, " ")) {
		snprintf(line, sizeof(line), "starting a VM ahead for template %s failed", key);
		assert_false(logged(line, "No such file"));
	}
}

/* A template whose saved state is damaged: the create still succeeds, by a cold boot, and says so. */
static void test_broken_template_falls_back(void **state)
{
	char root[4200], path[4600], line[256];
	saas_sandbox *sb = NULL;
	struct dirent *e;
	DIR *d;
	int broken = 0;

	(void)state;
	snprintf(root, sizeof(root), "%s/libvirt/templates", state_dir);
	d = opendir(root);
	assert_non_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/state", root, e->d_name);
		if (truncate(path, 4096) == 0)
			broken++;
	}
	closedir(d);
	assert_true(broken > 0);
	/*
	 * A VM started ahead before the damage (its state already in) is a
	 * sound clone, which a create takes as it may: the next create meets
	 * the damage (after as many as were started ahead, at most 32).
	 */
	for (int ahead = 0;; ahead++) {
		check(saas_sandbox_create(&sb, ca, NULL, 0), "create over a broken template");
		snprintf(line, sizeof(line), "VM %s up in", sb->id);
		if (ahead == 32 || !logged(line, "started ahead,"))
			break;
		check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy a clone started before the damage");
		saas_sandbox_free(sb);
		sb = NULL;
	}
	/*
	 * Either this create met the damage itself, or a clone started ahead
	 * from the damaged template met it first (its failure breaks the
	 * template): both must say why this VM boots cold.
	 */
	snprintf(line, sizeof(line), "VM %s: cloning template", sb->id);
	if (!logged(line, "booting it cold")) {
		snprintf(line, sizeof(line), "VM %s boots cold:", sb->id);
		assert_true(logged(line, "its template failed"));
	}
	snprintf(line, sizeof(line), "VM %s up in", sb->id);
	assert_true(logged(line, "(cold boot,"));
	free(run_in(ca, sb->id, "true"));
	check(saas_sandbox_destroy(NULL, ca, sb->id, 0), "destroy");
	saas_sandbox_free(sb);
}

static void test_reaper_destroys(void **state)
{
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *got = NULL;
	int tries = 0;

	(void)state;
	co.timeout_s = 5;
	check(saas_sandbox_create(&sb, ca, &co, 0), "create short-lived");
	assert_true(qemu_pid(sb->id));
	do {
		saas_sandbox_free(got);
		got = NULL;
		check(saas_sandbox_get(&got, ca, sb->id), "get");
		if (got->status != SAAS_SANDBOX_DESTROYED || qemu_pid(sb->id))
			usleep(200000);
	} while ((got->status != SAAS_SANDBOX_DESTROYED || qemu_pid(sb->id)) && ++tries < 300);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_EXPIRED);
	assert_false(qemu_pid(sb->id));
	/* Billed exactly to its expiry: 5 s of small. */
	assert_int_equal(got->cost_usd_micro, 5 * 25);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

/* Waits up to seconds for a line of the engine's log with a and, after it, b (logged()). */
static bool logged_within(int seconds, const char *a, const char *b)
{
	for (int i = 0; i < seconds * 5 && !logged(a, b); i++)
		usleep(200000);
	return logged(a, b);
}

/*
 * The engine's process killed with SIGKILL while its sandboxes run: a fresh
 * process on the same state directory finds them, still running and billed,
 * and nothing strays. Each engine runs in a process of its own (this program
 * re-executed), as a server and its restart would.
 *
 * The first engine's template is saved before it dies: the next one
 * remembers the template its creates asked for (STATE/libvirt/asked.json)
 * and starts a VM ahead for it at open, before any create, which its first
 * create then takes.
 */
static int child_main(int argc, char **argv)
{
	saas_sandbox *s1 = NULL, *s2 = NULL, *got = NULL;
	saas_account *a = NULL;
	char *key = NULL, line[128];

	if (argc < 4)
		return 2;
	if (strcmp(argv[1], "--memory-short") == 0)
		return memory_short_main(argv[2], argv[3]);
	snprintf(state_dir, sizeof(state_dir), "%s", argv[2]);
	snprintf(config, sizeof(config), "%s", argv[3]);
	open_engine(0);
	if (strcmp(argv[1], "--create") == 0) {
		/* Make two sandboxes, say their ids and the key, then wait to be killed. */
		if (saas_account_create(&a, engine, "victim", SAAS_CREDIT_DEFAULT, 0) != SAAS_OK ||
		    saas_key_create(&key, NULL, engine, a->id, NULL, 0) != SAAS_OK ||
		    saas_client_open_local(&ca, engine, key, 0) != SAAS_OK ||
		    saas_sandbox_create(&s1, ca, NULL, 0) != SAAS_OK || saas_sandbox_create(&s2, ca, NULL, 0) != SAAS_OK) {
			fprintf(stderr, "child: %s\n", saas_error_last()->message);
			return 1;
		}
		/* Their template saved (both booted cold, the first asked for its build), for the next engine. */
		if (!logged_within(600, "template ", " ready in ")) {
			fprintf(stderr, "child: the template was not saved in 10 minutes\n");
			return 1;
		}
		printf("%s %s %s\n", key, s1->id, s2->id);
		fflush(stdout);
		for (;;)
			pause();
	}
	/* --check KEY ID...: each is still there and works; destroy it and print its cost. */
	if (argc < 6 || saas_client_open_local(&ca, engine, argv[4], 0) != SAAS_OK)
		return 1;
	for (int i = 5; i < argc; i++) {
		saas_execution *x = NULL;
		if (saas_sandbox_get(&got, ca, argv[i]) != SAAS_OK || got->status != SAAS_SANDBOX_READY ||
		    saas_exec(&x, ca, argv[i], "echo alive", NULL, 0) != SAAS_OK || strcmp(x->stdout_data, "alive\n") != 0) {
			fprintf(stderr, "child: %s not alive after restart: %s\n", argv[i], saas_error_last()->message);
			return 1;
		}
		saas_execution_free(x);
		saas_sandbox_free(got);
		if (saas_sandbox_destroy(&got, ca, argv[i], 0) != SAAS_OK) {
			fprintf(stderr, "child: destroying %s: %s\n", argv[i], saas_error_last()->message);
			return 1;
		}
		if (got->cost_usd_micro <= 0) {
			fprintf(stderr, "child: %s destroyed, billed %lld micro-USD\n", argv[i], (long long)got->cost_usd_micro);
			return 1;
		}
		printf("%s %lld\n", argv[i], (long long)got->cost_usd_micro);
		saas_sandbox_free(got);
	}
	/* The template the first engine's creates asked for: a VM started ahead for it with no create yet, and taken by the first. */
	if (!logged("1 of the 1 templates creates asked for before this start", NULL) ||
	    !logged_within(300, "started ahead for template ", NULL) || logged(" up in ", "started ahead")) {
		fprintf(stderr, "child: no VM started ahead at open for the template asked for before (or a create took it)\n");
		return 1;
	}
	if (saas_sandbox_create(&got, ca, NULL, 0) != SAAS_OK) {
		fprintf(stderr, "child: create after restart: %s\n", saas_error_last()->message);
		return 1;
	}
	snprintf(line, sizeof(line), "VM %s up in ", got->id);
	if (!logged(line, ", started ahead")) {
		fprintf(stderr, "child: the first create after restart (%s) did not take the VM started ahead\n", got->id);
		return 1;
	}
	saas_sandbox_destroy(NULL, ca, got->id, 0);
	saas_sandbox_free(got);
	close_all();
	return 0;
}

static void test_engine_killed(void **state)
{
	char dir[4200], cmd[16384], line[512], key[128], id1[SAAS_ID_MAX + 1], id2[SAAS_ID_MAX + 1], self[4096];
	FILE *p;
	pid_t pid;
	int out[2], status;
	ssize_t n;

	(void)state;
	snprintf(dir, sizeof(dir), "%s-killed", state_dir);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		execl(self, self, "--create", dir, config, (char *)NULL);
		_exit(127);
	}
	killed_child = pid;
	close(out[1]);
	p = fdopen(out[0], "r");
	assert_non_null(fgets(line, sizeof(line), p));
	fclose(p);
	assert_int_equal(sscanf(line, "%127s %63s %63s", key, id1, id2), 3);
	assert_true(qemu_pid(id1) && qemu_pid(id2));
	/* What its creates asked for is in the state directory for the next engine. */
	snprintf(cmd, sizeof(cmd), "%s/libvirt/asked.json", dir);
	assert_int_equal(access(cmd, R_OK), 0);
	/*
	 * Both have run a whole second (billing counts whole seconds) before
	 * their engine dies: each is billed something however fast the next
	 * engine's destroys are (a QEMU it destroys is gone in milliseconds).
	 */
	sleep(1);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	killed_child = 0;
	assert_true(WIFSIGNALED(status));
	/* The VMs outlive their engine. */
	assert_true(qemu_pid(id1) && qemu_pid(id2));
	snprintf(cmd, sizeof(cmd), "'%s' --check '%s' '%s' '%s' %s %s", self, dir, config, key, id1, id2);
	p = popen(cmd, "r");
	assert_non_null(p);
	for (int i = 0; i < 2; i++) {
		char id[SAAS_ID_MAX + 1];
		long long cost = 0;
		assert_non_null(fgets(line, sizeof(line), p));
		assert_int_equal(sscanf(line, "%63s %lld", id, &cost), 2);
		assert_true(cost > 0);
	}
	assert_int_equal(pclose(p), 0);
	assert_false(qemu_pid(id1));
	assert_false(qemu_pid(id2));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_kernel),
		cmocka_unit_test(test_unprivileged),
		cmocka_unit_test(test_exec_details),
		cmocka_unit_test(test_timeout_kills),
		cmocka_unit_test(test_output_cap),
		cmocka_unit_test(test_files_binary),
		cmocka_unit_test(test_host_isolation),
		cmocka_unit_test_setup_teardown(test_network_internet, net_setup, net_teardown),
		cmocka_unit_test_setup_teardown(test_network_isolated, net_setup, net_teardown),
		cmocka_unit_test(test_network_internet_refused),
		cmocka_unit_test(test_memory_short),
		cmocka_unit_test(test_tenancy),
		cmocka_unit_test(test_clones),
		cmocka_unit_test(test_confined),
		cmocka_unit_test(test_template_follows_image),
		cmocka_unit_test(test_broken_template_falls_back),
		cmocka_unit_test(test_reaper_destroys),
		cmocka_unit_test(test_engine_killed),
	};

	if (argc > 1)
		return child_main(argc, argv);
	/* SAAS_TEST_FILTER=test_files_* runs a subset. */
	if (getenv("SAAS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SAAS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
