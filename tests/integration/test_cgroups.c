/*
 * A size is what it says, on the host: real VMs (the tiny image) through the
 * libvirt driver, with the limits read back from the real QEMU's cgroups
 * (/proc/PID/cgroup names its directory in each hierarchy, v1 or v2):
 *
 *  - CPU quota, memory hard limit and pids.max are what the size says;
 *  - a 2-vCPU guest spinning 4 busy loops under cpu_limit=0.25 gets about half
 *    a host CPU, and more than half as much again with the limit off (QEMU's
 *    utime + stime over a few seconds: its share of the host, not wall time).
 *    A quarter, not a half: on a 2-core host shared with other tests, a free
 *    2-vCPU guest under TCG was seen to get only 1.5 CPUs, too close to one;
 *  - a VM adopted by a new engine keeps its limits, and every pids cgroup the
 *    driver made is gone once its VM is destroyed.
 *
 * The disk bound (a guest's filesystem grows to its size's disk, ENOSPC in the
 * guest, the overlay no bigger than the disk) is checked on vm.default_image's
 * sandbox (test_default_image.c), which boots the default image anyway.
 *
 * Needs root (libvirt makes cgroups only as root); skipped otherwise.
 */
#include <errno.h>
#include <pthread.h>
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

#include "saas.h"
#include "vmtest.h"

#define SIZE_VCPUS 2
#define SIZE_MEMORY_MB 512
/* As the driver states it (docs/security.md): guest + 256 MiB for QEMU + 256 MiB of TCG code cache. */
#define WANT_MEMORY_LIMIT ((unsigned long long)(SIZE_MEMORY_MB + 256 + 256) << 20)
#define WANT_PIDS_MAX (128 + SIZE_VCPUS)

static char state_dir[4096], images[4096];
static saas_engine *engine;
static saas_client *client;
static char *key;

static void open_engine(const char *cpu_limit)
{
	static const saas_size two = { "two", SIZE_VCPUS, SIZE_MEMORY_MB, 1, 100000 };
	static const saas_size *const sizes[] = { &two };
	saas_engine_options o;
	char config[8192];

	/* No templates: every VM boots cold, so that no template build competes for the CPU measured. */
	snprintf(config, sizeof(config), "images=%s boot_timeout=300 templates=off cpu_limit=%s", images, cpu_limit);
	o = vmtest_engine_options(state_dir, config);
	o.default_image = "tiny";
	o.sizes = sizes;
	o.nsizes = 1;
	check(saas_engine_open(&engine, &o), "engine open");
	if (key)
		check(saas_client_open_local(&client, engine, key, 0), "client");
}

static void close_engine(void)
{
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	engine = NULL;
}

/* ---- the real QEMU's cgroups ----------------------------------------------------------------- */

static bool cgroup_v2(void)
{
	return access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
}

/*
 * The directory of pid's cgroup for controller ctl (v1) or the unified one
 * (v2, ctl ignored), without libvirt's sub-groups (emulator, libvirt): the
 * domain's own, which holds all of QEMU's threads.
 */
static void cgroup_dir(long pid, const char *ctl, char *out, size_t size)
{
	char path[64], line[4096];
	FILE *f;
	bool v2 = cgroup_v2();

	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	assert_non_null(f = fopen(path, "re"));
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *slash;
		bool match = false;
		if (!c2)
			continue;
		*c2 = '\0';
		line[strcspn(c2 + 1, "\n") + (size_t)(c2 + 1 - line)] = '\0';
		if (v2)
			match = strcmp(line, "0") == 0;
		else
			for (char *tok = strtok(c1 + 1, ","); tok && !match; tok = strtok(NULL, ","))
				match = strcmp(tok, ctl) == 0;
		if (!match)
			continue;
		for (int i = 0; i < 2; i++)
			if ((slash = strrchr(c2 + 1, '/')) && (strcmp(slash, "/emulator") == 0 || strcmp(slash, "/libvirt") == 0))
				*slash = '\0';
		snprintf(out, size, "/sys/fs/cgroup%s%s%s", v2 ? "" : "/", v2 ? "" : ctl, c2 + 1);
		break;
	}
	fclose(f);
	if (!out[0])
		fail_msg("QEMU %ld is in no %s cgroup", pid, v2 ? "v2" : ctl);
}

static long long read_number(const char *dir, const char *file)
{
	char path[8192], buf[128] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!(f = fopen(path, "re")))
		fail_msg("cannot read %s: %s", path, strerror(errno));
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strncmp(buf, "max", 3) == 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

/* CPU quota per period in microseconds (-1: none), as the kernel enforces it. */
static long long cpu_quota(long pid)
{
	char dir[4096];

	if (cgroup_v2()) {
		cgroup_dir(pid, "cpu", dir, sizeof(dir));
		return read_number(dir, "cpu.max"); /* "QUOTA PERIOD" or "max PERIOD" */
	}
	cgroup_dir(pid, "cpu", dir, sizeof(dir));
	assert_int_equal(read_number(dir, "cpu.cfs_period_us"), 100000);
	return read_number(dir, "cpu.cfs_quota_us");
}

/* pids.max of QEMU's pids cgroup; its directory in dir. */
static long long pids_max(long pid, char *dir, size_t size)
{
	cgroup_dir(pid, "pids", dir, size);
	return read_number(dir, "pids.max");
}

static long long memory_limit(long pid)
{
	char dir[4096];

	cgroup_dir(pid, "memory", dir, sizeof(dir));
	return read_number(dir, cgroup_v2() ? "memory.max" : "memory.limit_in_bytes");
}

/* ---- the CPU a busy guest gets --------------------------------------------------------------- */

struct spin {
	const char *id;
	int rc;
};

/* 4 busy loops in the guest for SPIN_S seconds. */
#define SPIN_S 14
static void *spin_main(void *arg)
{
	struct spin *s = arg;
	saas_execution *x = NULL;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "for i in 1 2 3 4; do timeout %d sh -c 'while :; do :; done' & done; wait; echo spun",
	         SPIN_S);
	s->rc = saas_exec(&x, client, s->id, cmd, NULL, 0);
	if (s->rc == SAAS_OK && (!x->stdout_data || !strstr(x->stdout_data, "spun")))
		s->rc = SAAS_EBACKEND;
	saas_execution_free(x);
	return NULL;
}

/* QEMU's utime + stime, in clock ticks. */
static long long cpu_ticks(long pid)
{
	char path[64], buf[4096], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	assert_non_null(f = fopen(path, "re"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	/* The command name may hold spaces: fields count from after its closing parenthesis. */
	assert_non_null(p = strrchr(buf, ')'));
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st), 2);
	return (long long)(ut + st);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The host's busy clock ticks, every CPU's (the first line of /proc/stat: all but idle and iowait). */
static long long host_busy_ticks(void)
{
	unsigned long long v[8] = { 0 };
	char buf[512];
	FILE *f;

	assert_non_null(f = fopen("/proc/stat", "re"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_true(sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	                   &v[6], &v[7]) >= 7);
	return (long long)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
}

/*
 * Host CPUs QEMU used on average while its guest spun (measured in the middle
 * of the spin); in *others, the CPUs everything else on the host used meanwhile.
 */
static double busy_cpus(const char *id, long pid, double *others)
{
	struct spin s = { id, SAAS_OK };
	pthread_t t;
	long long t0, t1, h0, h1;
	double w0, w1, cpus, hz = (double)sysconf(_SC_CLK_TCK);

	assert_int_equal(pthread_create(&t, NULL, spin_main, &s), 0);
	sleep(4); /* the exec's SSH channel up, the loops started */
	t0 = cpu_ticks(pid);
	h0 = host_busy_ticks();
	w0 = now_s();
	sleep(6);
	t1 = cpu_ticks(pid);
	h1 = host_busy_ticks();
	w1 = now_s();
	pthread_join(t, NULL);
	check(s.rc, "spinning in the guest");
	cpus = (double)(t1 - t0) / hz / (w1 - w0);
	*others = (double)((h1 - h0) - (t1 - t0)) / hz / (w1 - w0);
	print_message("  QEMU of %s used %.2f host CPUs (everything else %.2f)\n", id, cpus, *others);
	return cpus;
}

/* ---- the test -------------------------------------------------------------------------------- */

static void test_limits(void **state)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *limited = NULL, *free_run = NULL, *got = NULL;
	char pids_a[4096], pids_b[4096];
	double cpus_limited, cpus_free, others;
	long pa, pb;

	(void)state;
	o.size = "two";
	o.timeout_s = 900;

	/* cpu_limit=0.25: 2 vCPUs get half a host CPU (50 ms of every 100 ms). */
	check(saas_sandbox_create(&limited, client, &o, 0), "create (cpu_limit=0.25)");
	assert_true((pa = qemu_pid(limited->id)) > 0);
	assert_int_equal(cpu_quota(pa), 50000);
	assert_int_equal(memory_limit(pa), (long long)WANT_MEMORY_LIMIT);
	assert_int_equal(pids_max(pa, pids_a, sizeof(pids_a)), WANT_PIDS_MAX);
	assert_true(read_number(pids_a, "pids.current") < WANT_PIDS_MAX);
	cpus_limited = busy_cpus(limited->id, pa, &others);
	assert_true(cpus_limited < 0.7);

	/* A new engine with the limit off adopts the first VM, limits and all. */
	close_engine();
	open_engine("off");
	check(saas_sandbox_get(&got, client, limited->id), "the first sandbox, adopted");
	saas_sandbox_free(got);
	got = NULL;
	assert_int_equal(qemu_pid(limited->id), pa);
	assert_int_equal(pids_max(pa, pids_b, sizeof(pids_b)), WANT_PIDS_MAX);
	assert_string_equal(pids_a, pids_b);

	check(saas_sandbox_create(&free_run, client, &o, 0), "create (cpu_limit=off)");
	assert_true((pb = qemu_pid(free_run->id)) > 0);
	assert_int_equal(cpu_quota(pb), -1);
	assert_int_equal(memory_limit(pb), (long long)WANT_MEMORY_LIMIT);
	assert_int_equal(pids_max(pb, pids_b, sizeof(pids_b)), WANT_PIDS_MAX);
	/*
	 * The first VM sits idle meanwhile: the second has the host's CPUs to
	 * itself, unless other work took them (tests beside this one, a shared
	 * machine): then the comparison says nothing, and is only printed. The
	 * limit itself is checked above, whatever the load: the quota in the
	 * cgroup, and the first VM under it.
	 */
	cpus_free = busy_cpus(free_run->id, pb, &others);
	if (others < 0.5)
		assert_true(cpus_free > 1.5 * cpus_limited);
	else
		print_message("  not compared: other work used %.2f host CPUs while the second VM spun\n", others);

	/* Destroyed, neither leaves a pids cgroup of the driver's behind. */
	check(saas_sandbox_destroy(NULL, client, limited->id, 0), "destroy the first");
	check(saas_sandbox_destroy(NULL, client, free_run->id, 0), "destroy the second");
	if (strstr(pids_a, "/aas-")) {
		assert_int_equal(access(pids_a, F_OK), -1);
		assert_int_equal(access(pids_b, F_OK), -1);
	}
	saas_sandbox_free(limited);
	saas_sandbox_free(free_run);
}

static int group_setup(void **state)
{
	const char *img, *dir;

	(void)state;
	if (vmtest_env(&img, &dir) < 0)
		return -1;
	snprintf(images, sizeof(images), "%s", img);
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	open_engine("0.25");
	vmtest_tenant(engine, "alice", &key, &client);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	vmtest_destroy_all(client);
	close_engine();
	saas_free(key);
	return 0;
}

int main(void)
{
	const struct CMUnitTest limits[] = {
		cmocka_unit_test(test_limits),
	};
	if (geteuid() != 0) {
		printf("vm.cgroups skipped: libvirt makes cgroups only as root\n");
		return 0;
	}
	return cmocka_run_group_tests(limits, group_setup, group_teardown);
}
