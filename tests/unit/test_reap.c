/*
 * The embedded driver's reaper (lib/driver/libvirt/reap.c), with real
 * processes: this process made a child subreaper, a double-forked
 * grandchild (as libvirt daemonizes QEMU) becomes its child and is reaped
 * once registered and killed; a child it did not register keeps its exit
 * status for its own waitpid; a registered process that is another's child
 * gets ECHILD and is let go; a pidfile written in a watched directory
 * registers its process, in another engine's root too (a child process's,
 * whose QEMUs become ours when it dies), a stale one or libvirt's
 * driver.pid never. The waits are bounds (10 s) for the kernel and the
 * reaper's thread to act, not timings.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver/libvirt/reap.h"
#include "util/error.h"

#define BOUND_MS 10000

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* pid's state letter and parent from /proc/PID/stat; 0 when it has no entry (reaped). */
static char proc_state(pid_t pid, pid_t *ppid)
{
	char path[64], text[512], *rp, st = 0;
	FILE *f;
	int pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fgets(text, sizeof(text), f) && (rp = strrchr(text, ')')) && sscanf(rp + 1, " %c %d", &st, &pp) == 2 && ppid)
		*ppid = pp;
	fclose(f);
	return st;
}

static bool gone_within(pid_t pid, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (!proc_state(pid, NULL))
			return true;
		sleep_ms(10);
	}
	return !proc_state(pid, NULL);
}

static bool zombie_within(pid_t pid, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (proc_state(pid, NULL) == 'Z')
			return true;
		sleep_ms(10);
	}
	return proc_state(pid, NULL) == 'Z';
}

static bool count_within(size_t want, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (saas__lv_reap_count() == want)
			return true;
		sleep_ms(10);
	}
	return saas__lv_reap_count() == want;
}

/* A process that waits to be killed, daemonized as libvirt does QEMU: its parent exits, so it is re-parented. */
static pid_t grandchild(void)
{
	int p[2];
	pid_t mid, pid = 0;

	assert_int_equal(pipe(p), 0);
	mid = fork();
	assert_true(mid >= 0);
	if (mid == 0) {
		pid_t g = fork();
		if (g == 0) {
			close(p[0]);
			close(p[1]);
			for (;;)
				pause();
		}
		_exit(write(p[1], &g, sizeof(g)) == sizeof(g) ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &pid, sizeof(pid)), sizeof(pid));
	close(p[0]);
	assert_int_equal(waitpid(mid, NULL, 0), mid);
	assert_true(pid > 0);
	return pid;
}

/*
 * Where pidfds are missing (a kernel before 5.4; valgrind, which does not
 * know pidfd_open) the reaper says so and changes nothing: the tests that
 * need processes reaped skip, saying why.
 */
static int up_rc;

static int reaper_up(void **state)
{
	(void)state;
	up_rc = saas__lv_reap_acquire();
	return up_rc == SAAS_OK || up_rc == SAAS_ENOTSUP ? 0 : -1;
}

static int reaper_down(void **state)
{
	(void)state;
	if (up_rc == SAAS_OK)
		saas__lv_reap_release();
	return 0;
}

#define NEED_PIDFD()                                                                                   \
	do {                                                                                               \
		if (up_rc == SAAS_ENOTSUP) {                                                                   \
			print_message("skipped: %s\n", saas_error_last()->message);                                \
			skip();                                                                                    \
		}                                                                                              \
	} while (0)

/* The attribute is set by the first user and unset by the last; the host program's own setting stays. */
static void test_subreaper_count(void **state)
{
	int on = -1;

	(void)state;
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
	assert_int_equal(on, 0);
	assert_false(saas__lv_reap_active());
	if ((up_rc = saas__lv_reap_acquire()) == SAAS_ENOTSUP) {
		/* Nothing changed: no thread, the attribute unset. */
		assert_non_null(strstr(saas_error_last()->message, "pidfd"));
		assert_false(saas__lv_reap_active());
		assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
		assert_int_equal(on, 0);
		NEED_PIDFD();
	}
	assert_int_equal(up_rc, SAAS_OK);
	assert_int_equal(saas__lv_reap_acquire(), SAAS_OK);
	assert_true(saas__lv_reap_active());
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
	assert_int_equal(on, 1);
	saas__lv_reap_release();
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
	assert_int_equal(on, 1);
	saas__lv_reap_release();
	assert_false(saas__lv_reap_active());
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
	assert_int_equal(on, 0);
	/* Set by the program before: left set. */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	assert_int_equal(saas__lv_reap_acquire(), SAAS_OK);
	saas__lv_reap_release();
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0), 0);
	assert_int_equal(on, 1);
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
	/* Not running: an addition is nothing to do. */
	assert_int_equal(saas__lv_reap_add(getpid()), SAAS_OK);
	assert_int_equal(saas__lv_reap_count(), 0);
	assert_int_equal(saas__lv_reap_add(0), SAAS_EINVAL);
}

/* A registered grandchild, killed, is reaped; twice registered while it runs, it is held once. */
static void test_registered_reaped(void **state)
{
	pid_t g, ppid = 0;
	char st;
	size_t held;

	(void)state;
	NEED_PIDFD();
	g = grandchild();
	st = proc_state(g, &ppid);
	assert_int_equal(saas__lv_reap_add(g), SAAS_OK);
	assert_int_equal(saas__lv_reap_add(g), SAAS_OK);
	held = saas__lv_reap_count();
	/* Killed before any check, so that a failing one leaves no process behind. */
	assert_int_equal(kill(g, SIGKILL), 0);
	/* It was running, re-parented to this process, the subreaper, not to init. */
	assert_true(st == 'S' || st == 'R');
	assert_int_equal(ppid, getpid());
	assert_int_equal(held, 1);
	assert_true(gone_within(g, BOUND_MS));
	assert_true(count_within(0, BOUND_MS));
}

/* A child the program did not register is left alone: its zombie waits for the program's own waitpid. */
static void test_unregistered_left(void **state)
{
	pid_t own, g;
	int status = 0;

	(void)state;
	NEED_PIDFD();
	own = fork();
	assert_true(own >= 0);
	if (own == 0) {
		for (;;)
			pause();
	}
	g = grandchild();
	assert_int_equal(kill(own, SIGKILL), 0);
	assert_true(zombie_within(own, BOUND_MS));
	/* The reaper wakes for g's exit with own's zombie there: it takes g alone. */
	assert_int_equal(saas__lv_reap_add(g), SAAS_OK);
	assert_int_equal(kill(g, SIGKILL), 0);
	assert_true(gone_within(g, BOUND_MS));
	assert_int_equal(proc_state(own, NULL), 'Z');
	assert_int_equal(waitpid(own, &status, 0), own);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* Registered but another process's child (a QEMU an earlier process started): ECHILD, let go, its parent's status kept. */
static void test_not_ours_echild(void **state)
{
	int p[2], status = 0;
	pid_t parent, g = 0;

	(void)state;
	NEED_PIDFD();
	assert_int_equal(pipe(p), 0);
	parent = fork();
	assert_true(parent >= 0);
	if (parent == 0) {
		int st = 0;
		pid_t c = fork();
		if (c == 0) {
			for (;;)
				pause();
		}
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(2);
		/* Its own child's status, which the reaper must not take. */
		_exit(waitpid(c, &st, 0) == c && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &g, sizeof(g)), sizeof(g));
	close(p[0]);
	assert_int_equal(saas__lv_reap_add(g), SAAS_OK);
	assert_int_equal(saas__lv_reap_count(), 1);
	assert_int_equal(kill(g, SIGKILL), 0);
	assert_true(count_within(0, BOUND_MS));
	assert_int_equal(waitpid(parent, &status, 0), parent);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A pidfile at path naming pid (its time set to when, 0: now). */
static void pidfile_write(const char *path, pid_t pid, time_t when)
{
	char text[32];
	int fd, n = snprintf(text, sizeof(text), "%d\n", (int)pid);

	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0);
	assert_int_equal(write(fd, text, (size_t)n), n);
	if (when) {
		struct timespec t[2] = { { when, 0 }, { when, 0 } };
		assert_int_equal(futimens(fd, t), 0);
	}
	assert_int_equal(close(fd), 0);
}

/* A pidfile written in a watched directory registers its process, as libvirt's does at a domain's start. */
static void test_pidfile_watch(void **state)
{
	char dir[] = "/tmp/saas-reap-XXXXXX", path[64];
	pid_t g;
	int wd = -1;

	(void)state;
	NEED_PIDFD();
	assert_non_null(mkdtemp(dir));
	assert_int_equal(saas__lv_reap_watch(dir, &wd), SAAS_OK);
	assert_true(wd >= 0);
	g = grandchild();
	snprintf(path, sizeof(path), "%s/vm.pid", dir);
	pidfile_write(path, g, 0);
	assert_true(count_within(1, BOUND_MS));
	assert_int_equal(kill(g, SIGKILL), 0);
	assert_true(gone_within(g, BOUND_MS));
	assert_true(count_within(0, BOUND_MS));
	saas__lv_reap_unwatch(wd);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	/* A directory that is not there: said. */
	assert_int_equal(saas__lv_reap_watch("/nonexistent/run/qemu", &wd), SAAS_EIO);
	assert_int_equal(wd, -1);
	assert_non_null(strstr(saas_error_last()->message, "/nonexistent/run/qemu"));
}

/*
 * A capabilities probe as libvirt makes one under ROOT/lib/qemu: its
 * qmp-XXXXXX directory made in the watched directory, then its qmp.pid
 * written there, registers its process; the directory's removal drops its
 * watch. Something else made there (not qmp-*, or a file) registers nothing.
 */
static void test_probe_watch(void **state)
{
	char dir[] = "/tmp/saas-reap-XXXXXX", sub[64], other[64], path[96];
	pid_t g;
	int wd = -1;

	(void)state;
	NEED_PIDFD();
	assert_non_null(mkdtemp(dir));
	assert_int_equal(saas__lv_reap_watch_probes(dir, &wd), SAAS_OK);
	assert_true(wd >= 0);
	/* Not a probe's: a directory of another name with a pidfile in it is not watched. */
	snprintf(other, sizeof(other), "%s/channel", dir);
	assert_int_equal(mkdir(other, 0700), 0);
	g = grandchild();
	snprintf(path, sizeof(path), "%s/qmp.pid", other);
	pidfile_write(path, g, 0);
	sleep_ms(200);
	assert_int_equal(saas__lv_reap_count(), 0);
	assert_int_equal(unlink(path), 0);
	/* A probe's: registered, and reaped once killed. */
	snprintf(sub, sizeof(sub), "%s/qmp-AbC123", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(path, sizeof(path), "%s/qmp.pid", sub);
	pidfile_write(path, g, 0);
	assert_true(count_within(1, BOUND_MS));
	assert_int_equal(kill(g, SIGKILL), 0);
	assert_true(gone_within(g, BOUND_MS));
	assert_true(count_within(0, BOUND_MS));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(other), 0);
	saas__lv_reap_unwatch(wd);
	assert_int_equal(rmdir(dir), 0);
}

/*
 * The roots beside an engine's (saas__lv_reap_watch_roots): an engine in a
 * child process (itself a subreaper, as an engine makes it) with a QEMU of
 * its own, in a root made after the watch. Its QEMU's pidfile registers it;
 * the child's driver.pid (the child's own pid) does not, so its exit
 * status stays this program's. The child killed, its QEMU is re-parented
 * here and reaped once it exits. A stale pidfile (written before its pid's
 * process started: the program's own child, given a reused pid) registers
 * nothing either.
 */
static void test_roots_adopted(void **state)
{
	char base[] = "/tmp/saas-reap-XXXXXX", root[64], run[80], qemu[96], path[128], stale[128];
	int p[2], status = 0;
	pid_t engine, q = 0, own, ppid = 0;
	size_t held;
	bool registered;
	char st;

	(void)state;
	NEED_PIDFD();
	assert_non_null(mkdtemp(base));
	/* A root there before the watch, with a stale pidfile to come. */
	snprintf(root, sizeof(root), "%s/old", base);
	snprintf(run, sizeof(run), "%s/run", root);
	snprintf(qemu, sizeof(qemu), "%s/qemu", run);
	assert_int_equal(mkdir(root, 0711), 0);
	assert_int_equal(mkdir(run, 0755), 0);
	assert_int_equal(mkdir(qemu, 0755), 0);
	assert_int_equal(saas__lv_reap_watch_roots(base), SAAS_OK);
	assert_int_equal(saas__lv_reap_watch_roots(base), SAAS_OK); /* once per base */
	own = fork();
	assert_true(own >= 0);
	if (own == 0) {
		for (;;)
			pause();
	}
	/* Written aside and moved in, as an old file: its write's own event must not come first. */
	snprintf(stale, sizeof(stale), "%s/old.pid", root);
	pidfile_write(stale, own, time(NULL) - 3600);
	snprintf(path, sizeof(path), "%s/old.pid", qemu);
	assert_int_equal(rename(stale, path), 0);
	/* The child engine's root, made after the watch: root, run/, run/qemu/ each awaited in turn. */
	snprintf(root, sizeof(root), "%s/new", base);
	snprintf(run, sizeof(run), "%s/run", root);
	snprintf(qemu, sizeof(qemu), "%s/qemu", run);
	assert_int_equal(pipe(p), 0);
	engine = fork();
	assert_true(engine >= 0);
	if (engine == 0) {
		char drv[128];
		pid_t c;
		close(p[0]);
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 || mkdir(root, 0711) < 0 || mkdir(run, 0755) < 0 ||
		    mkdir(qemu, 0755) < 0)
			_exit(2);
		snprintf(drv, sizeof(drv), "%s/driver.pid", qemu);
		pidfile_write(drv, getpid(), 0);
		if ((c = fork()) == 0) {
			for (;;)
				pause();
		}
		snprintf(drv, sizeof(drv), "%s/vm.pid", qemu);
		pidfile_write(drv, c, 0);
		if (write(p[1], &c, sizeof(c)) != sizeof(c))
			_exit(2);
		for (;;)
			pause();
	}
	close(p[1]);
	assert_int_equal(read(p[0], &q, sizeof(q)), sizeof(q));
	close(p[0]);
	registered = count_within(1, BOUND_MS);
	sleep_ms(200);
	held = saas__lv_reap_count();
	/* Every process killed before any check, so that a failing one leaves none behind. */
	assert_int_equal(kill(engine, SIGKILL), 0);
	assert_int_equal(waitpid(engine, &status, 0), engine);
	st = proc_state(q, &ppid);
	assert_int_equal(kill(q, SIGKILL), 0);
	assert_int_equal(kill(own, SIGKILL), 0);
	assert_true(registered);
	assert_int_equal(held, 1);
	assert_true(WIFSIGNALED(status));
	/* Its QEMU is this process's child now, and reaped when it exits. */
	assert_true(st == 'S' || st == 'R');
	assert_int_equal(ppid, getpid());
	assert_true(gone_within(q, BOUND_MS));
	assert_true(count_within(0, BOUND_MS));
	/* The stale pidfile's process: not registered, its status the program's own. */
	assert_true(zombie_within(own, BOUND_MS));
	sleep_ms(200);
	assert_int_equal(proc_state(own, NULL), 'Z');
	assert_int_equal(waitpid(own, &status, 0), own);
	assert_true(WIFSIGNALED(status));
	snprintf(path, sizeof(path), "rm -rf '%s'", base);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_subreaper_count),
		cmocka_unit_test_setup_teardown(test_registered_reaped, reaper_up, reaper_down),
		cmocka_unit_test_setup_teardown(test_unregistered_left, reaper_up, reaper_down),
		cmocka_unit_test_setup_teardown(test_not_ours_echild, reaper_up, reaper_down),
		cmocka_unit_test_setup_teardown(test_pidfile_watch, reaper_up, reaper_down),
		cmocka_unit_test_setup_teardown(test_probe_watch, reaper_up, reaper_down),
		cmocka_unit_test_setup_teardown(test_roots_adopted, reaper_up, reaper_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
