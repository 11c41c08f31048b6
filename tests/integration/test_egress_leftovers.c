/*
 * The VM tests' sweep of egress tables left by engines that are gone
 * (vmtest_egress_leftovers_remove, which every VM test's engine setup runs):
 * on the host's real nftables, with tables of its own named after state
 * directories of its own (no VM, no engine: the engine's side of it, a table
 * named after its state directory and its flock on engine.lock, is the
 * driver's and the core's, which vm.confine's first test checks against the
 * name made here).
 *
 *   dead     engine.lock free, no QEMU: removed
 *   live     engine.lock held (by this process, through another open file,
 *            as an engine of another process would hold it): kept
 *   running  engine.lock free, but a QEMU's command line names the directory
 *            (its VMs run on; the table outlives its engine on purpose): kept
 *   nolock   no engine.lock, so no engine's directory: kept
 *   outside  an engine's directory, but not under the roots given: kept
 *
 * Then the lock is let go and the QEMU ends: both go at the next sweep, and
 * the others stay. Needs root and nft (SKIP otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmtest.h"

static const char *const names[] = { "dead", "live", "running", "nolock", "outside" };
enum { DEAD, LIVE, RUNNING, NOLOCK, OUTSIDE, N };

static char top[64], roots[96], dirs[N][160], tables[N][32];

static bool table_there(const char *table)
{
	return sh("nft list table inet %s >/dev/null 2>&1", table) == 0;
}

static int setup(void **state)
{
	(void)state;
	if (geteuid() != 0 || sh("command -v nft >/dev/null && nft list tables >/dev/null 2>&1") != 0) {
		printf("SKIP: the sweep needs root and nft\n");
		exit(0);
	}
	snprintf(top, sizeof(top), "/var/tmp/aas-sweep-XXXXXX");
	if (!mkdtemp(top))
		return -1;
	/* Two roots that the glob takes, a third that it does not. */
	snprintf(roots, sizeof(roots), "%s/root-[ab]", top);
	for (int i = 0; i < N; i++) {
		snprintf(dirs[i], sizeof(dirs[i]), "%s/%s/tree/%s", top, i == OUTSIDE ? "other" : i % 2 ? "root-b" : "root-a",
		         names[i]);
		if (sh("mkdir -p '%s'", dirs[i]) != 0)
			return -1;
		if (i != NOLOCK && sh("touch '%s/engine.lock'", dirs[i]) != 0)
			return -1;
		vmtest_egress_table(dirs[i], tables[i], sizeof(tables[i]));
		if (!tables[i][0] || sh("nft add table inet %s", tables[i]) != 0)
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N; i++)
		if (tables[i][0])
			sh("nft delete table inet %s 2>/dev/null", tables[i]);
	if (top[0])
		sh("rm -rf '%s'", top);
	return 0;
}

static void test_sweep(void **state)
{
	char lock[200];
	int fd;
	pid_t qemu;

	(void)state;
	/* The name is egress.c's: the first 16 hex digits of the directory's SHA-256. */
	assert_int_equal(strlen(tables[DEAD]), 27);
	assert_int_equal(strncmp(tables[DEAD], "aas_egress_", 11), 0);
	assert_string_not_equal(tables[DEAD], tables[LIVE]);

	snprintf(lock, sizeof(lock), "%s/engine.lock", dirs[LIVE]);
	assert_true((fd = open(lock, O_RDWR | O_CLOEXEC)) >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	/* A QEMU as vm-cleanup finds one: its command line names a file in the directory. */
	assert_true((qemu = fork()) >= 0);
	if (qemu == 0) {
		char disk[220];
		setpgid(0, 0); /* its sleep too goes with the group */
		snprintf(disk, sizeof(disk), "file=%s/disk.qcow2", dirs[RUNNING]);
		execl("/bin/sh", "sh", "-c", "sleep 600; :", "qemu-system-x86_64", "-drive", disk, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && sh("grep -q qemu-system /proc/%d/cmdline", (int)qemu) != 0; i++)
		usleep(20 * 1000);
	assert_int_equal(sh("grep -q qemu-system /proc/%d/cmdline", (int)qemu), 0);

	assert_int_equal(vmtest_egress_leftovers_remove(roots), 1);
	assert_false(table_there(tables[DEAD]));
	assert_true(table_there(tables[LIVE]));
	assert_true(table_there(tables[RUNNING]));
	assert_true(table_there(tables[NOLOCK]));
	assert_true(table_there(tables[OUTSIDE]));

	/* The engine gone, its VMs gone: their tables go at the next sweep. */
	close(fd);
	kill(-qemu, SIGKILL);
	assert_int_equal(waitpid(qemu, NULL, 0), qemu);
	assert_int_equal(vmtest_egress_leftovers_remove(roots), 2);
	assert_false(table_there(tables[LIVE]));
	assert_false(table_there(tables[RUNNING]));
	assert_true(table_there(tables[NOLOCK]));
	assert_true(table_there(tables[OUTSIDE]));
	assert_int_equal(vmtest_egress_leftovers_remove(roots), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
