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
 * Under the embedded driver the second clone is made, used and destroyed
 * with an escaped QEMU at work beside it: a process under that
 * VM's uid that keeps trying to swap the names in the VM's directory for
 * symlinks (the control socket to the first clone's, the console and a new
 * name to a file of root's). The names cannot change, no file outside
 * changes, the first clone never hears the second's requests, and both
 * sandboxes go on working.
 *
 * Environment: SAAS_TEST_IMAGES (where the tiny image is), SAAS_TEST_STATE;
 * SAAS_TEST_URI (a system libvirtd's URI) for vm.system.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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
	char staged[4400], table[32];
	unsigned int uid;

	(void)state;
	assert_true(logged("QEMU uids per VM", NULL));
	/* Under a system libvirtd with CAP_NET_ADMIN: the guard and per-VM egress, as in the embedded mode. */
	if (getenv("SAAS_TEST_URI")) {
		assert_true(logged("network: guests are isolated by default (network=isolated)", NULL));
		assert_false(logged("internet is refused", NULL));
		assert_true(logged("egress: per-VM policies in table inet aas_egress_", NULL));
	}
	/* Its table has the name the VM tests' sweep of dead engines' tables gives this directory (vmtest.c). */
	vmtest_egress_table(getenv("SAAS_TEST_STATE"), table, sizeof(table));
	assert_true(table[0]);
	if (logged("egress: per-VM policies in table inet aas_egress_", NULL))
		assert_true(logged("egress: per-VM policies in table inet ", table));
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

/* ---- an escaped QEMU at work ------------------------------------------------------------------ */

/* The uid a VM's QEMU runs as (0: no QEMU of that name now), read without cmocka's asserts (in a child). */
static unsigned int qemu_uid(const char *name)
{
	pid_t pid = qemu_pid(name);
	char path[64], line[256];
	unsigned int uid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!pid || !(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Uid:", 4) == 0)
			uid = (unsigned int)strtoul(line + 4, NULL, 10);
	fclose(f);
	return uid;
}

/*
 * Play the escaped QEMU of the VM in vmdir, as its uid, until killed (or
 * 300 s): swap its control socket for a symlink to victim_ctl, its console
 * for one to canary, and plant a new name. Every swap that works writes a
 * byte to won.
 */
static void escaped_qemu(const char *vmdir, unsigned int uid, const char *victim_ctl, const char *canary, int won)
{
	char ctl[4100], aside[4100], console[4100], planted[4100];
	time_t end = time(NULL) + 300;
	struct stat st;

	if (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
		_exit(1);
	snprintf(ctl, sizeof(ctl), "%.4000s/ctl", vmdir);
	snprintf(aside, sizeof(aside), "%.4000s/ctl.real", vmdir);
	snprintf(console, sizeof(console), "%.4000s/console.log", vmdir);
	snprintf(planted, sizeof(planted), "%.4000s/disk-planted.qcow2", vmdir);
	/* "here": the test knows a player ran, so that no swap is not for want of one. */
	if (write(won, "r", 1) < 0)
		_exit(1);
	while (time(NULL) < end) {
		if (lstat(ctl, &st) == 0 && S_ISSOCK(st.st_mode) && rename(ctl, aside) == 0 && symlink(victim_ctl, ctl) == 0 &&
		    write(won, "c", 1) < 0)
			_exit(1);
		if (lstat(console, &st) == 0 && S_ISREG(st.st_mode) && unlink(console) == 0 && symlink(canary, console) == 0 &&
		    write(won, "l", 1) < 0)
			_exit(1);
		if (symlink(canary, planted) == 0 && write(won, "p", 1) < 0)
			_exit(1);
		usleep(1000);
	}
	_exit(0);
}

/*
 * Watch the VMs' directories (as root) and put an escaped QEMU beside every
 * VM but the victim and the template's as soon as its QEMU runs: the one a
 * create takes may be a spare, started ahead. The watcher and its players
 * are one process group: the caller's kill(-pid) ends them all.
 */
static pid_t escape_start(const char *victim, const char *canary, int won)
{
	char vms[4200], victim_ctl[4400], seen[16][64];
	size_t nseen = 0;
	pid_t pid;

	snprintf(vms, sizeof(vms), "%.4000s/libvirt/vms", getenv("SAAS_TEST_STATE"));
	snprintf(victim_ctl, sizeof(victim_ctl), "%.4000s/%.128s/ctl", vms, victim);
	assert_true((pid = fork()) >= 0);
	if (pid > 0) {
		setpgid(pid, pid);
		return pid;
	}
	setpgid(0, 0);
	for (time_t end = time(NULL) + 300; time(NULL) < end;) {
		DIR *dh = opendir(vms);
		struct dirent *e;
		while (dh && (e = readdir(dh))) {
			bool known = e->d_name[0] == '.' || strcmp(e->d_name, victim) == 0 || strncmp(e->d_name, "aas-tpl-", 8) == 0;
			unsigned int uid;
			char vmdir[4400];
			for (size_t i = 0; i < nseen && !known; i++)
				known = strcmp(seen[i], e->d_name) == 0;
			if (known || nseen == 16 || !(uid = qemu_uid(e->d_name)))
				continue;
			snprintf(seen[nseen++], sizeof(seen[0]), "%.63s", e->d_name);
			snprintf(vmdir, sizeof(vmdir), "%.4000s/%.255s", vms, e->d_name);
			if (fork() == 0)
				escaped_qemu(vmdir, uid, victim_ctl, canary, won);
		}
		if (dh)
			closedir(dh);
		usleep(1000);
	}
	_exit(0);
}

/* The swaps that worked, and in *players how many escaped QEMUs ran (the group is ended first). */
static size_t escape_stop(pid_t pid, int won, size_t *players)
{
	char buf[256];
	size_t n = 0;
	ssize_t r;

	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	*players = 0;
	while ((r = read(won, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			*(buf[i] == 'r' ? players : &n) += 1;
	return n;
}

/* What a file outside the VMs' directories is: owner, mode, links and content. */
static void file_state(const char *path, char *out, size_t cap)
{
	char text[256] = "";
	struct stat st;
	FILE *f;

	assert_int_equal(lstat(path, &st), 0);
	assert_non_null(f = fopen(path, "re"));
	text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
	fclose(f);
	snprintf(out, cap, "%u:%u %o %lu [%s]", (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode,
	         (unsigned long)st.st_nlink, text);
}

/* The output of cmd in sandbox id (a fresh string for free). */
static char *exec_out(const char *id, const char *cmd)
{
	saas_exec_options eo = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	char *out;

	eo.timeout_s = 120;
	check(saas_exec(&x, client, id, cmd, &eo, 0), "exec");
	assert_int_equal(x->exit_code, 0);
	assert_non_null(out = strdup(x->stdout_data ? x->stdout_data : ""));
	saas_execution_free(x);
	return out;
}

/*
 * The second clone made, used and destroyed with an escaped QEMU of
 * its uid at work (escaped_qemu): nothing it tries works, the victim (the
 * first clone, still running) never hears the attacked one's requests, the
 * canary (a root file outside) is as it was, and both sandboxes serve.
 */
static void attacked_clone(saas_sandbox *victim)
{
	saas_sandbox *sb = NULL;
	char canary[4200], before[512], after[512], *out;
	int won[2], fd;
	pid_t watcher;
	size_t swaps, players;

	snprintf(canary, sizeof(canary), "%.4000s/private/canary", getenv("SAAS_TEST_STATE"));
	assert_true((fd = open(canary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) >= 0);
	assert_int_equal(write(fd, "root's own\n", 11), 11);
	close(fd);
	file_state(canary, before, sizeof(before));
	assert_int_equal(pipe2(won, O_CLOEXEC | O_NONBLOCK), 0);
	watcher = escape_start(victim->id, canary, won[1]);
	close(won[1]);

	/* Its first commands: the fix-ups at create, then an exec and a file over its control port. */
	check(saas_sandbox_create(&sb, client, NULL, 0), "create the attacked clone");
	assert_confined(sb);
	/* Its directory is root's, 0711: its QEMU passes through, and changes no name in it. */
	{
		char vmdir[4300];
		struct stat st;
		snprintf(vmdir, sizeof(vmdir), "%.4000s/libvirt/vms/%.128s", getenv("SAAS_TEST_STATE"), sb->id);
		assert_int_equal(stat(vmdir, &st), 0);
		assert_int_equal(st.st_uid, 0);
		assert_int_equal(st.st_mode & 0777, 0711);
	}
	out = exec_out(sb->id, "hostname");
	assert_non_null(strstr(out, sb->id));
	free(out);
	check(saas_file_write(client, sb->id, "/tmp/from-attacked", "attacked's\n", 11, NULL), "file write");
	/*
	 * Its end, its VM and directory destroyed with the player still at work.
	 * Not a pause (until 2026-12): a pause saves the state through an fd of
	 * root's into the snapshots' directory, links the disk from an fd, and
	 * then destroys the VM and its directory with this same destroy; of a
	 * clone whose RAM maps its template's it scans all 4 GiB of that RAM,
	 * 80 s and more of this test under TCG for nothing the player can reach.
	 * Pause and resume are vm.snapshot's and server.fork.vm's.
	 */
	check(saas_sandbox_destroy(NULL, client, sb->id, 0), "destroy the attacked clone");
	swaps = escape_stop(watcher, won[0], &players);
	close(won[0]);

	/* It ran (beside the attacked clone at least), nothing it tried worked, nothing outside changed. */
	assert_true(players >= 1);
	assert_int_equal(swaps, 0);
	file_state(canary, after, sizeof(after));
	assert_string_equal(before, after);
	/* The victim never took the attacked one's fix-ups nor its file, and serves still. */
	out = exec_out(victim->id, "hostname; ls /tmp; echo served");
	assert_null(strstr(out, sb->id));
	assert_null(strstr(out, "from-attacked"));
	assert_non_null(strstr(out, "served"));
	free(out);
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
		/*
		 * Embedded, over the control port (its listener checked). A system
		 * libvirtd makes the socket root's, 0775: the unprivileged engine
		 * cannot connect, and the fix-ups go over SSH.
		 */
		assert_true(logged(line, system ? "(clone," : "(clone, fix-ups over the control port"));
		uids[i] = assert_confined(sb[i]);
		if (system)
			assert_policy_enforced(sb[i]->id);
	}
	if (n == 2)
		assert_int_not_equal(uids[0], uids[1]);
	/* The engine's control connections were all to libvirt's listeners: none was refused. */
	assert_false(logged("control port's listener", NULL));
	if (!system)
		attacked_clone(sb[0]);
	for (int i = 0; i < n; i++)
		destroy_gone(sb[i]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_images_confined),
		cmocka_unit_test(test_clones_confined),
	};

	/* `sweep STATE`: vm-system's, as root, before its engine runs as aas-test (vmtest.h). */
	if (argc == 3 && strcmp(argv[1], "sweep") == 0) {
		vmtest_egress_leftovers_near(argv[2]);
		return 0;
	}

	/* SAAS_TEST_FILTER=test_clones_* runs a subset. */
	if (getenv("SAAS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SAAS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
