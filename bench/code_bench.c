/*
 * Code contexts against real VMs (issue #33's targets; docs/code.md), each
 * figure next to a baseline measured in the same run, since these machines
 * are shared and noisy:
 *   - create -> the first run of `1+1` has its result, against create -> the
 *     first `true` exec, alternating, on clones of one template of the image
 *     (its code server's Python warm in the template: goal within 1.5x)
 *   - a second and later run of `1+1` in the same context (goal p50 under
 *     100 ms), against the `true` exec round trip of the same sandbox
 *   - a matplotlib line chart back as a PNG once the kernel is warm (goal
 *     p50 under 1 s), against `1+1` in the same runs
 * One engine (the library's local provider on the libvirt driver, templates
 * on) in this process; every run's result is checked (the value "2", a PNG),
 * so that a failure is never timed as a success. Each create of the first
 * figure waits (untimed, at most 30 s) until a spare is ready. Prints a Markdown table, and
 * how many of the first figure's creates took a spare (a clone started
 * ahead) and how many of those had their code server warmed ahead.
 *
 * usage: code_bench STATE_DIR IMAGES_DIR [image]   (image: default unless named)
 * BENCH_RUNS (default 5): creates of each kind; BENCH_CODE_RUNS (default 20): runs of each warm figure.
 * BENCH_CODE_SPLIT=1 adds where a clone's first `1+1` goes (2 x BENCH_RUNS more clones): after a first
 * `true` (its control channel up), its first and second `1+1`; and, in other clones, after `true` and
 * two `python3 -c pass` (the guest's Python code translated by TCG once, shared by every process that
 * maps it), the first `1+1`; both kinds back to back (a stream of creates, whose spares the driver makes
 * beside them), then (3 x BENCH_RUNS clones in all) a lone clone's first and second `1+1`, made once no
 * spare is being made and long enough after the last create that its replacement waits for the driver's
 * hold. BENCH_CODE_SPLIT_ONLY=1: that table alone.
 * BENCH_CODE_WHY=N: N lone clones' runs of `1+1` one after the other, each with its QEMU's time on a CPU
 * and waiting for one, its faults and the host's busy time (why(); BENCH_CODE_PERF=DIR: perf samples too);
 * that table alone, so run code_bench itself for it (bench/run would write it over the code section).
 * BENCH_CODE_DRIVER_B=OPTIONS: the same against an engine with those driver options, the lone clones
 * alternating between the two engines (each opened anew on the state dir's template), a table for each.
 * A state dir used before keeps its template: the first create is then a clone, and nothing is built.
 * BENCH_CODE_HOPS=N: N lone clones (alternating with BENCH_CODE_DRIVER_B's engine, as above), each after its
 * first `true` and 8 runs: 10 runs of `1+1` from here, then bench/code_hops.py in the guest (BENCH_CODE_HOPS_PY
 * names another copy): the same `1+1` over the guest's loopback to the code server, and straight to its
 * kernel over ZeroMQ, split by its messages' dates. That table alone (p50 of the clones' p50s).
 * BENCH_VERBOSE=1 prints the engine's log, its debug lines too (which way each port connection went).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <saas.h>

#include "bench.h"

#define CHART_CODE                                                                                                    \
	"import matplotlib.pyplot as plt\n"                                                                           \
	"plt.figure()\n"                                                                                               \
	"plt.plot(range(100), [i * i for i in range(100)])\n"                                                          \
	"plt.title('line')\n"                                                                                          \
	"plt.show()\n"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int templates_ready, templates_failed, clones_made, clones_ahead, clones_warmed, spares_made, spares_gone;
static unsigned int spares_wanted = 1; /* the driver's last "VMs started ahead: N wanted" */
static int make_ms_max;                /* the longest spare make logged ("started ahead ... in N ms") */

/* Counts the driver's template and clone lines; warnings go to stderr. */
static void on_log(void *ud, int level, const char *msg)
{
	(void)ud;
	pthread_mutex_lock(&log_mu);
	bench_count_templates(msg, &templates_ready, &templates_failed, &clones_made);
	if (strncmp(msg, "VM ", 3) == 0 && strstr(msg, " started ahead for template ")) {
		const char *in = strstr(msg, ") in ");
		int ms;
		spares_made++;
		if (in && sscanf(in + 5, "%d", &ms) == 1 && ms > make_ms_max)
			make_ms_max = ms;
	}
	/* Destroyed: outdated, one too many, stood too long. */
	if (strncmp(msg, "VM ", 3) == 0 && (strstr(msg, ", started ahead, is ") || strstr(msg, ", started ahead, has stood ")))
		spares_gone++;
	if (strncmp(msg, "VMs started ahead: ", 19) == 0)
		sscanf(msg + 19, "%u", &spares_wanted);
	if (strstr(msg, " up in ") && strstr(msg, "(clone,")) {
		clones_ahead += strstr(msg, ", started ahead") != NULL;
		clones_warmed += strstr(msg, ", its code server warmed ahead") != NULL;
	}
	pthread_mutex_unlock(&log_mu);
	if (level <= SAAS_LOG_WARN || getenv("BENCH_VERBOSE"))
		fprintf(stderr, "code_bench: [engine] %s\n", msg);
}

static void destroy(saas_client *c, saas_sandbox *sb)
{
	saas_sandbox_destroy(NULL, c, sb->id, 0);
	saas_sandbox_free(sb);
}

/* Run a command that must exit 0. */
static void exec_ok(saas_client *c, const char *id, const char *command)
{
	saas_execution *x = NULL;
	int rc = saas_exec(&x, c, id, command, NULL, 0);

	if (rc < 0)
		die(command, rc);
	if (x->exit_code != 0) {
		fprintf(stderr, "code_bench: `%s` exited %d\n", command, x->exit_code);
		exit(1);
	}
	saas_execution_free(x);
}

static void exec_true(saas_client *c, const char *id)
{
	exec_ok(c, id, "true");
}

/* Run code; it must end without an error, with a main text result `want` or (want NULL) a PNG result. */
static void run_code(saas_client *c, const char *id, const char *code, const char *want)
{
	saas_code_execution *x = NULL;
	bool found = false;
	int rc = saas_code_run(&x, c, id, code, NULL, 0);

	if (rc < 0)
		die("code run", rc);
	if (x->status != SAAS_CODE_DONE || x->error) {
		fprintf(stderr, "code_bench: the run ended %s%s%s\n", saas_code_status_name(x->status),
		        x->error ? ", raising " : "", x->error ? x->error->name : "");
		exit(1);
	}
	for (size_t i = 0; i < x->result_count; i++)
		for (size_t j = 0; j < x->results[i]->count; j++) {
			const saas_code_format *f = x->results[i]->formats[j];
			if (want && x->results[i]->is_main && strcmp(f->mime, "text/plain") == 0 &&
			    strcmp((const char *)f->data, want) == 0)
				found = true;
			if (!want && strcmp(f->mime, "image/png") == 0 && f->len > 8 && memcmp(f->data, "\x89PNG", 4) == 0)
				found = true;
		}
	if (!found) {
		fprintf(stderr, "code_bench: the run did not give %s\n", want ? want : "a PNG");
		exit(1);
	}
	saas_code_execution_free(x);
}

/* Adds to *ahead and *warmed the clones started ahead and warmed logged since *a0, *w0, which it moves on. */
static void took(int *ahead, int *warmed, int *a0, int *w0)
{
	pthread_mutex_lock(&log_mu);
	if (ahead)
		*ahead += clones_ahead - *a0;
	if (warmed)
		*warmed += clones_warmed - *w0;
	*a0 = clones_ahead;
	*w0 = clones_warmed;
	pthread_mutex_unlock(&log_mu);
}

/*
 * Until a spare is ready (made, not taken nor destroyed), at most 30 s: each
 * create of the first figure, either kind, then takes one, as creates that
 * do not come back to back do, instead of whichever the makers had done.
 */
static void spare_wait(void)
{
	for (int i = 0; i < 300; i++) {
		int ready;
		pthread_mutex_lock(&log_mu);
		ready = spares_made - spares_gone - clones_ahead;
		pthread_mutex_unlock(&log_mu);
		if (ready > 0)
			return;
		usleep(100 * 1000);
	}
}

/*
 * Until the engine makes no spare (as many ready as it wants), at most 30 s, and then until the driver's hold
 * (2 s), the longest make seen and a second more have passed since the last create began: the next create is
 * a lone one, whose spare's replacement waits for the hold (creates closer than the hold and a make are a
 * stream, whose spares are made at once).
 */
static void quiet_wait(double last_create)
{
	int gap;

	for (int i = 0; i < 300; i++) {
		int ready;
		unsigned int wanted;
		pthread_mutex_lock(&log_mu);
		ready = spares_made - spares_gone - clones_ahead;
		wanted = spares_wanted;
		pthread_mutex_unlock(&log_mu);
		if (ready > 0 && (unsigned int)ready >= wanted)
			break;
		usleep(100 * 1000);
	}
	pthread_mutex_lock(&log_mu);
	gap = 2000 + make_ms_max + 1000;
	pthread_mutex_unlock(&log_mu);
	while (now_ms() - last_create < gap)
		usleep(100 * 1000);
}

/* The template of image: the first create starts its build, or is a clone of it (a state dir used before). */
static void template_warm(saas_client *c, const char *image)
{
	saas_sandbox *sb;
	int clones;

	pthread_mutex_lock(&log_mu);
	clones = clones_made;
	pthread_mutex_unlock(&log_mu);
	sb = bench_create(c, image);
	destroy(c, sb);
	pthread_mutex_lock(&log_mu);
	clones = clones_made - clones;
	pthread_mutex_unlock(&log_mu);
	if (clones)
		return;
	for (int i = 0; i < 2400; i++) {
		int ready, failed;
		pthread_mutex_lock(&log_mu);
		ready = templates_ready;
		failed = templates_failed;
		pthread_mutex_unlock(&log_mu);
		if (ready)
			return;
		if (failed) {
			fprintf(stderr, "code_bench: the %s template failed to build\n", image);
			exit(1);
		}
		usleep(500 * 1000);
	}
	fprintf(stderr, "code_bench: the %s template was not ready in 20 minutes\n", image);
	exit(1);
}

/*
 * Where a run's time goes on the host: the sandbox's QEMU's threads' time on a CPU and waiting for one
 * (/proc/PID/task/TID/schedstat, ns), and every CPU's busy time (/proc/stat, the host's: other QEMUs, the
 * engine, other users). Zero where the files cannot be read (a kernel without schedstat).
 */
struct cpu {
	double run_ms, wait_ms, host_busy_ms;
	double minflt, majflt, user_ms, sys_ms; /* the QEMU's, from /proc/PID/stat (times in USER_HZ ticks) */
};

/* The QEMU of sandbox id: its command line names the domain (guest=ID); 0 if none is found. */
static int qemu_pid(const char *id)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;
	char path[300], buf[8192], want[128];
	int pid = 0;

	snprintf(want, sizeof(want), "guest=%s", id);
	while (dir && !pid && (de = readdir(dir)) != NULL) {
		FILE *f;
		size_t n;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n] = 0;
		if (strstr(buf, "qemu-system") && strstr(buf, want))
			pid = atoi(de->d_name);
	}
	if (dir)
		closedir(dir);
	return pid;
}

static void cpu_now(int pid, struct cpu *c)
{
	char path[300];
	DIR *dir;
	struct dirent *de;
	FILE *f;
	unsigned long long v[10] = { 0 };

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = pid ? opendir(path) : NULL;
	while (dir && (de = readdir(dir)) != NULL) {
		unsigned long long run, wait;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", pid, de->d_name);
		if ((f = fopen(path, "r")) != NULL) {
			if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
				c->run_ms += run / 1e6;
				c->wait_ms += wait / 1e6;
			}
			fclose(f);
		}
	}
	if (dir)
		closedir(dir);
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (pid && (f = fopen(path, "r")) != NULL) {
		char line[1024], *p;
		unsigned long long minflt, majflt, ut, st;
		/* After the command's ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
		if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu %*u %llu %llu", &minflt, &majflt, &ut, &st) == 4) {
			c->minflt = (double)minflt;
			c->majflt = (double)majflt;
			c->user_ms = (double)ut * 1000.0 / sysconf(_SC_CLK_TCK);
			c->sys_ms = (double)st * 1000.0 / sysconf(_SC_CLK_TCK);
		}
		fclose(f);
	}
	/* cpu user nice system idle iowait irq softirq steal: busy = all but idle and iowait (USER_HZ ticks) */
	if ((f = fopen("/proc/stat", "r")) != NULL) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		           &v[7]) == 8)
			c->host_busy_ms = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000.0 / sysconf(_SC_CLK_TCK);
		fclose(f);
	}
}

/* After a clone's first `true`: two runs of `1+1`, the second right after the first; ms of each into first[i], second[i]. */
static void two_runs(saas_client *c, const char *id, double *first, double *second, int i)
{
	double t[3];

	t[0] = now_ms();
	run_code(c, id, "1+1", "2");
	t[1] = now_ms();
	run_code(c, id, "1+1", "2");
	t[2] = now_ms();
	first[i] = t[1] - t[0];
	second[i] = t[2] - t[1];
}

/*
 * BENCH_CODE_WHY=N: N lone clones (no spare made meanwhile: quiet_wait), each its first `true`, then 36 runs
 * of `1+1`, one right after the other but for two: the 33rd after 1.5 s idle (the engine's SSH session for
 * the clone comes up once its control port stayed unused 1 s: later connections go over it), the 36th after
 * a chart. For the runs in why_at, the wall time and its QEMU's side (cpu_now): where a fresh clone's runs'
 * time goes that a long-lived context's does not. BENCH_CODE_PERF=DIR: each clone's QEMU sampled by `perf
 * record` (DIR/perf-N.data, on the monotonic clock) from before its first `true`, and DIR/perf-N.runs the
 * measured runs' start and end (ms, the same clock), for a reading of where each run's samples fall.
 */
#define WHY_RUNS 10
#define WHY_LAST 36
static const int why_at[WHY_RUNS] = { 1, 2, 3, 4, 6, 16, 32, 33, 34, 36 };

/* perf record of pid into BENCH_CODE_PERF/perf-i.data, and its runs file; 0 (and *runs NULL) without. */
static pid_t perf_start(int pid, int i, FILE **runs)
{
	const char *dir = getenv("BENCH_CODE_PERF");
	char data[4200], spid[16];
	pid_t p;

	*runs = NULL;
	if (!dir || !pid)
		return 0;
	snprintf(data, sizeof(data), "%s/perf-%d.runs", dir, i);
	*runs = fopen(data, "w");
	snprintf(data, sizeof(data), "%s/perf-%d.data", dir, i);
	snprintf(spid, sizeof(spid), "%d", pid);
	if ((p = fork()) == 0) {
		execlp("perf", "perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-F", "1999", "-p", spid, "-o", data,
		       (char *)NULL);
		_exit(127);
	}
	usleep(1000 * 1000); /* attached before the first `true` */
	return p > 0 ? p : 0;
}

static void perf_stop(pid_t p, FILE *runs)
{
	if (runs)
		fclose(runs);
	if (p > 0) {
		kill(p, SIGINT);
		waitpid(p, NULL, 0);
	}
}
static double why_v[2][WHY_RUNS][8][64]; /* way, run, figure (wall, on-CPU, run-queue, host busy, faults, user, sys), clone */

/* Clones from..from+n of the figures' way (0, or 1: BENCH_CODE_DRIVER_B's engine). */
static void why(saas_client *c, const char *image, int from, int n, int way)
{
	double (*v)[8][64] = why_v[way];
	double last = now_ms(); /* template_warm's create was just before: the first clone a lone one too */
	FILE *runs = NULL;
	pid_t perf;

	for (int i = from; i < from + n && i < 64; i++) {
		saas_sandbox *sb;
		int pid;
		quiet_wait(last);
		last = now_ms();
		sb = bench_create(c, image);
		pid = qemu_pid(sb->id);
		perf = perf_start(pid, i, &runs);
		exec_true(c, sb->id);
		for (int k = 1, r = 0; k <= WHY_LAST; k++) {
			struct cpu a, b;
			double t0;
			if (k == 33)
				usleep(1500 * 1000);
			if (k == 36)
				run_code(c, sb->id, CHART_CODE, NULL);
			if (r == WHY_RUNS || why_at[r] != k) {
				run_code(c, sb->id, "1+1", "2");
				continue;
			}
			cpu_now(pid, &a);
			t0 = now_ms();
			run_code(c, sb->id, "1+1", "2");
			v[r][0][i] = now_ms() - t0;
			if (runs)
				fprintf(runs, "%d %.3f %.3f\n", k, t0, t0 + v[r][0][i]);
			cpu_now(pid, &b);
			v[r][1][i] = b.run_ms - a.run_ms;
			v[r][2][i] = b.wait_ms - a.wait_ms;
			v[r][3][i] = b.host_busy_ms - a.host_busy_ms;
			v[r][4][i] = b.minflt - a.minflt;
			v[r][5][i] = b.majflt - a.majflt;
			v[r][6][i] = b.user_ms - a.user_ms;
			v[r][7][i] = b.sys_ms - a.sys_ms;
			r++;
		}
		perf_stop(perf, runs);
		destroy(c, sb);
	}
}

static void why_print(int way, int n, const char *label)
{
	static const char *const names[8] = { "wall", "QEMU on a CPU", "QEMU waiting for a CPU", "host busy (2 cores)",
		                              "QEMU minor faults", "major faults", "QEMU user", "QEMU sys" };
	double (*v)[8][64] = why_v[way];

	if (n > 64)
		n = 64;
	printf("\n%s", label);
	printf("A lone clone's runs of `1+1` one after the other, after its first `true` (%d clones; p50, and the mean "
	       "for the tick-counted user and sys; ms but faults; run 33 after 1.5 s idle, 36 after a chart):\n\n"
	       "| figure |", n);
	for (int r = 0; r < WHY_RUNS; r++)
		printf(" run %d |", why_at[r]);
	printf("\n|---|");
	for (int r = 0; r < WHY_RUNS; r++)
		printf("---|");
	printf("\n");
	for (int f = 0; f < 8; f++) {
		printf("| %s |", names[f]);
		for (int r = 0; r < WHY_RUNS; r++) {
			double sum = 0;
			for (int i = 0; i < n; i++)
				sum += v[r][f][i];
			printf(" %.0f |", f >= 6 ? sum / n : pct(v[r][f], n, 0.5));
		}
		printf("\n");
	}
}

/*
 * BENCH_CODE_HOPS: where a warm `1+1` goes, hop by hop (bench/code_hops.py says how each is measured):
 * from here (the engine, the relay, the guest), over the guest's loopback (the code server and the
 * kernel), straight to the kernel, and the kernel's parts. Per way, clone, figure.
 */
#define HOPS 7
static double hops_v[2][HOPS][64];

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "code_bench: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

static void hops(saas_client *c, const char *image, int i, int way)
{
	const char *py = getenv("BENCH_CODE_HOPS_PY") ? getenv("BENCH_CODE_HOPS_PY") : "bench/code_hops.py";
	double engine[10], last = now_ms();
	saas_execution *x = NULL;
	saas_sandbox *sb;
	size_t len;
	char *script = slurp(py, &len);
	int rc;

	if (i >= 64)
		return;
	quiet_wait(last);
	sb = bench_create(c, image);
	exec_true(c, sb->id);
	for (int k = 0; k < 8; k++)
		run_code(c, sb->id, "1+1", "2");
	for (int k = 0; k < 10; k++) {
		double t0 = now_ms();
		run_code(c, sb->id, "1+1", "2");
		engine[k] = now_ms() - t0;
	}
	hops_v[way][0][i] = pct(engine, 10, 0.5);
	if ((rc = saas_file_write(c, sb->id, "/tmp/code_hops.py", script, len, NULL)) < 0)
		die("writing code_hops.py", rc);
	if ((rc = saas_exec(&x, c, sb->id, "python3 /tmp/code_hops.py 10", NULL, 0)) < 0)
		die("code_hops.py", rc);
	if (x->exit_code != 0 || sscanf(x->stdout_data, "hops %lf %lf %lf %lf %lf %lf", &hops_v[way][1][i],
	                                &hops_v[way][2][i], &hops_v[way][3][i], &hops_v[way][4][i],
	                                &hops_v[way][5][i], &hops_v[way][6][i]) != 6) {
		fprintf(stderr, "code_bench: code_hops.py exited %d: %s%s\n", x->exit_code, x->stdout_data,
		        x->stderr_data);
		exit(1);
	}
	saas_execution_free(x);
	free(script);
	destroy(c, sb);
}

static void hops_print(int way, int n, const char *label)
{
	static const char *const names[HOPS] = { "from here (engine, relay, guest)", "guest loopback HTTP (code server + kernel)",
		                                  "straight to the kernel (ZeroMQ)", "... to the kernel (request -> execute_input)",
		                                  "... execution (execute_input -> execute_result)",
		                                  "... after it (execute_result -> idle)", "... back (idle -> the client has it)" };

	if (n > 64)
		n = 64;
	printf("\n%sA warm `1+1` hop by hop (%d clones, each after 9 runs; p50 of the clones' p50s of 10 runs, ms; "
	       "the guest's parts by the guest's clock):\n\n| hop | ms |\n|---|---|\n", label, n);
	for (int f = 0; f < HOPS; f++)
		printf("| %s | %.1f |\n", names[f], pct(hops_v[way][f], n, 0.5));
}

/* One engine: the library's local provider on the libvirt driver, templates on. */
struct eng {
	saas_engine *engine;
	saas_account *account;
	saas_client *client;
	char *key;
};

static void eng_open(struct eng *e, const char *state, const char *images, const char *image, const char *extra)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	char config[4400];
	int rc;

	memset(e, 0, sizeof(*e));
	snprintf(config, sizeof(config), "images=%s boot_timeout=600 templates=on%s%s", images, *extra ? " " : "", extra);
	o.state_dir = state;
	o.driver_config = config;
	o.default_image = image;
	/* The figures are the VMs', not the account limits': no create or execution waits for one. */
	o.creates_per_minute = SAAS_LIMIT_MAX;
	o.max_executions = SAAS_LIMIT_MAX;
	o.log = on_log;
	o.log_level = getenv("BENCH_VERBOSE") ? SAAS_LOG_DEBUG : SAAS_LOG_INFO;
	if ((rc = saas_engine_open(&e->engine, &o)) < 0)
		die("engine", rc);
	if ((rc = saas_account_create(&e->account, e->engine, "bench", SAAS_USD(1000), 0)) < 0 ||
	    (rc = saas_key_create(&e->key, NULL, e->engine, e->account->id, NULL, 0)) < 0 ||
	    (rc = saas_client_open_local(&e->client, e->engine, e->key, 0)) < 0)
		die("account", rc);
}

static void eng_close(struct eng *e)
{
	saas_client_free(e->client);
	saas_account_free(e->account);
	saas_free(e->key);
	saas_engine_free(e->engine);
	/*
	 * The next engine's log starts with none of its spares: what this one counted went with it. Nor with its
	 * template's build (BENCH_CODE_DRIVER_B's images= may be another image: its template is its own).
	 */
	pthread_mutex_lock(&log_mu);
	spares_made = spares_gone = clones_ahead = 0;
	templates_ready = templates_failed = 0;
	spares_wanted = 1;
	pthread_mutex_unlock(&log_mu);
}

/*
 * BENCH_CODE_WHY (hop false) and BENCH_CODE_HOPS (true): n lone clones, alternating with BENCH_CODE_DRIVER_B's
 * engine if it is set (each engine opened anew on the state dir's template), then a table for each engine.
 */
static int alternating(const char *state, const char *images, const char *image, int n, bool hop)
{
	const char *b = getenv("BENCH_CODE_DRIVER_B");
	char load[2][64], label[2][256];
	struct eng e;

	load_now(load[0], sizeof(load[0]));
	for (int i = 0; i < n; i++)
		for (int way = 0; way < (b ? 2 : 1); way++) {
			eng_open(&e, state, images, image, way ? b : "");
			template_warm(e.client, image);
			if (hop)
				hops(e.client, image, i, way);
			else
				why(e.client, image, i, b ? 1 : n, way);
			eng_close(&e);
			if (!b && !hop)
				i = n;
		}
	load_now(load[1], sizeof(load[1]));
	snprintf(label[0], sizeof(label[0]), "The driver's defaults. ");
	snprintf(label[1], sizeof(label[1]), "With `%s`, the clones alternating with the defaults'. ", b ? b : "");
	for (int way = 0; way < (b ? 2 : 1); way++)
		if (hop)
			hops_print(way, n, b ? label[way] : "");
		else
			why_print(way, n, b ? label[way] : "");
	printf("\nLoad (1, 5, 15 min) at the start: %s; at the end: %s.\n", load[0], load[1]);
	return 0;
}

/* The table of where a clone's first `1+1` goes (BENCH_CODE_SPLIT). */
static void split_print(double split[][64], int runs)
{
	printf("\nWhere a clone's first `1+1` goes (%d clones of each kind, p50 / p95 ms; each clone's first `true` "
	       "came first: p50 %.0f ms from create):\n\n| in a clone, after its first `true` | first | second |\n"
	       "|---|---|---|\n",
	       runs, pct(split[5], runs, 0.5));
	printf("| `1+1` | %.0f / %.0f | %.0f / %.0f |\n", pct(split[0], runs, 0.5), pct(split[0], runs, 0.95),
	       pct(split[1], runs, 0.5), pct(split[1], runs, 0.95));
	printf("| `python3 -c pass` (exec) | %.0f / %.0f | %.0f / %.0f |\n", pct(split[2], runs, 0.5),
	       pct(split[2], runs, 0.95), pct(split[3], runs, 0.5), pct(split[3], runs, 0.95));
	printf("| `1+1` after the two `python3 -c pass` | %.0f / %.0f | |\n", pct(split[4], runs, 0.5),
	       pct(split[4], runs, 0.95));
	printf("| `1+1`, a lone clone (no spare made meanwhile; its `true` p50 %.0f ms from create) | %.0f / %.0f | "
	       "%.0f / %.0f |\n", pct(split[8], runs, 0.5), pct(split[6], runs, 0.5), pct(split[6], runs, 0.95),
	       pct(split[7], runs, 0.5), pct(split[7], runs, 0.95));
}

int main(int argc, char **argv)
{
	struct eng e;
	saas_client *client;
	saas_sandbox *sb;
	char load[2][64];
	const char *image;
	int runs = env_int("BENCH_RUNS", 5), code_runs = env_int("BENCH_CODE_RUNS", 20), clones0;
	double *first_exec, *first_code, *next_code, *next_exec, *chart, *plain, t0;
	double split[9][64]; /* 1+1 after true: first, second; python3 -c pass: first, second; 1+1 after them; true;
	                     * a lone clone's 1+1 after true: first, second; its true */
	int ahead[2] = { 0, 0 }, warmed[2] = { 0, 0 }; /* of the creates -> first `true`, -> first `1+1` */
	bool want_split = (getenv("BENCH_CODE_SPLIT") || getenv("BENCH_CODE_SPLIT_ONLY")) && runs <= 64;
	bool split_only = want_split && getenv("BENCH_CODE_SPLIT_ONLY");

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: code_bench STATE_DIR IMAGES_DIR [image]\n");
		return 2;
	}
	image = argc == 4 ? argv[3] : "default";
	if (getenv("BENCH_CODE_HOPS"))
		return alternating(argv[1], argv[2], image, env_int("BENCH_CODE_HOPS", 4), true);
	if (getenv("BENCH_CODE_WHY"))
		return alternating(argv[1], argv[2], image, env_int("BENCH_CODE_WHY", 8), false);
	first_exec = calloc((size_t)runs, sizeof(double));
	first_code = calloc((size_t)runs, sizeof(double));
	next_code = calloc((size_t)code_runs, sizeof(double));
	next_exec = calloc((size_t)code_runs, sizeof(double));
	chart = calloc((size_t)code_runs, sizeof(double));
	plain = calloc((size_t)code_runs, sizeof(double));
	if (!first_exec || !first_code || !next_code || !next_exec || !chart || !plain)
		return 1;
	eng_open(&e, argv[1], argv[2], image, "");
	client = e.client;
	template_warm(client, image);
	load_now(load[0], sizeof(load[0]));
	clones0 = clones_made;

	/* create -> first `true` and create -> first `1+1`, alternating, so that a load that changes weighs on both. */
	for (int i = 0; !split_only && i < runs; i++) {
		int a0, w0;
		took(NULL, NULL, &a0, &w0);
		spare_wait();
		t0 = now_ms();
		sb = bench_create(client, image);
		exec_true(client, sb->id);
		first_exec[i] = now_ms() - t0;
		destroy(client, sb);
		took(&ahead[0], &warmed[0], &a0, &w0);
		spare_wait();
		t0 = now_ms();
		sb = bench_create(client, image);
		run_code(client, sb->id, "1+1", "2");
		first_code[i] = now_ms() - t0;
		destroy(client, sb);
		took(&ahead[1], &warmed[1], &a0, &w0);
	}

	/*
	 * Where the first `1+1` goes: one kind of clone after the other, in turn, back to back (a stream of
	 * creates: the driver makes their spares beside them); then a lone clone (quiet_wait: no spare being
	 * made, its replacement held) with the same first runs as the first kind.
	 */
	for (int i = 0; want_split && i < runs; i++) {
		double t[4];
		t0 = now_ms();
		sb = bench_create(client, image);
		exec_true(client, sb->id);
		split[5][i] = now_ms() - t0;
		two_runs(client, sb->id, split[0], split[1], i);
		destroy(client, sb);
		sb = bench_create(client, image);
		exec_true(client, sb->id);
		t[0] = now_ms();
		exec_ok(client, sb->id, "python3 -c pass");
		t[1] = now_ms();
		exec_ok(client, sb->id, "python3 -c pass");
		t[2] = now_ms();
		run_code(client, sb->id, "1+1", "2");
		t[3] = now_ms();
		split[2][i] = t[1] - t[0];
		split[3][i] = t[2] - t[1];
		split[4][i] = t[3] - t[2];
		destroy(client, sb);
		quiet_wait(t0);
		t0 = now_ms();
		sb = bench_create(client, image);
		exec_true(client, sb->id);
		split[8][i] = now_ms() - t0;
		two_runs(client, sb->id, split[6], split[7], i);
		destroy(client, sb);
	}

	if (split_only) {
		load_now(load[1], sizeof(load[1]));
		printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n", load[0], load[1]);
		split_print(split, runs);
		return 0;
	}
	/* One sandbox: the next runs of `1+1` against `true` round trips; the chart against `1+1`, interleaved. */
	sb = bench_create(client, image);
	run_code(client, sb->id, "1+1", "2");
	run_code(client, sb->id, CHART_CODE, NULL);
	for (int i = 0; i < code_runs; i++) {
		t0 = now_ms();
		run_code(client, sb->id, "1+1", "2");
		next_code[i] = now_ms() - t0;
		t0 = now_ms();
		exec_true(client, sb->id);
		next_exec[i] = now_ms() - t0;
		t0 = now_ms();
		run_code(client, sb->id, CHART_CODE, NULL);
		chart[i] = now_ms() - t0;
		t0 = now_ms();
		run_code(client, sb->id, "1+1", "2");
		plain[i] = now_ms() - t0;
	}
	destroy(client, sb);
	load_now(load[1], sizeof(load[1]));
	if (clones_made - clones0 < (want_split ? 4 : 2) * runs + 1) {
		fprintf(stderr, "code_bench: %d of %d creates were clones of the template\n", clones_made - clones0,
		        (want_split ? 4 : 2) * runs + 1);
		return 1;
	}

	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", load[0], load[1]);
	printf("| what, `%s` | libsaas | baseline (same run) | goal |\n|---|---|---|---|\n", image);
	{
		double c50 = pct(first_code, runs, 0.5), e50 = pct(first_exec, runs, 0.5);
		printf("| create -> first run of `1+1` has its result (%d runs, clones) | p50 %.0f ms, p95 %.0f ms | create -> "
		       "first `true` exec: p50 %.0f ms, p95 %.0f ms; ratio %.2fx at p50 | within 1.5x: %s |\n",
		       runs, c50, pct(first_code, runs, 0.95), e50, pct(first_exec, runs, 0.95), c50 / e50,
		       c50 / e50 <= 1.5 ? "met" : "not met");
	}
	{
		double n50 = pct(next_code, code_runs, 0.5);
		printf("| a later run of `1+1` in the same context (%d runs) | p50 %.0f ms, p95 %.0f ms | `true` exec in the "
		       "same sandbox: p50 %.0f ms, p95 %.0f ms; ratio %.2fx at p50 | p50 under 100 ms: %s |\n",
		       code_runs, n50, pct(next_code, code_runs, 0.95), pct(next_exec, code_runs, 0.5),
		       pct(next_exec, code_runs, 0.95), n50 / pct(next_exec, code_runs, 0.5), n50 < 100 ? "met" : "not met");
	}
	{
		double c50 = pct(chart, code_runs, 0.5);
		printf("| a matplotlib line chart back as a PNG, kernel warm (%d runs) | p50 %.0f ms, p95 %.0f ms | `1+1` in "
		       "the same runs: p50 %.0f ms | p50 under 1 s: %s |\n",
		       code_runs, c50, pct(chart, code_runs, 0.95), pct(plain, code_runs, 0.5), c50 < 1000 ? "met" : "not met");
	}
	printf("\nOf the %d creates -> first `true`, %d took a clone started ahead (%d with its code server warmed "
	       "ahead); of the %d -> first `1+1`, %d (%d warmed).\n", runs, ahead[0], warmed[0], runs, ahead[1], warmed[1]);
	if (want_split)
		split_print(split, runs);
	eng_close(&e);
	free(first_exec);
	free(first_code);
	free(next_code);
	free(next_exec);
	free(chart);
	free(plain);
	return 0;
}
