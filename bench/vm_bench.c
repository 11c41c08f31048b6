/*
 * Sandbox benchmarks against real VMs, each figure next to a baseline measured
 * in the same run (these machines are shared and noisy):
 *   - create -> first command completes, p50/p95, for cold boot, clone and
 *     warm pool (per image), next to each other
 *   - N creates at once until all can run a command, cold and cloned
 *   - `true` round trip on the engine's reused SSH session vs OpenSSH with ControlMaster
 *   - file upload/download throughput vs OpenSSH sftp
 *   - idle RSS and CPU of a cold-booted and a cloned sandbox's QEMU, how
 *     many idle small sandboxes this host's memory holds at that RSS, and
 *     how many cores 300 idle clones would take at that CPU (#36)
 * Three engines, each on a state directory of its own under STATE_DIR: cold
 * (templates off), clone (templates on) and pool (templates on, a warm pool).
 * libvirt allows one embedded driver root per process, so each engine runs in
 * a child process of its own (forked while this one has no thread), which
 * leaves its figures in memory shared with the parent; the parent prints a
 * Markdown section on stdout.
 *
 * One program of ~2,000 lines on purpose: every mode below is a few phases
 * over the same machinery (the engines in child processes, the figures in
 * shared memory, the statistics and the Markdown they print), and a mode is
 * read, run and changed whole. A mode that needs helpers of its own gets a
 * file of its own.
 *
 * usage: vm_bench STATE_DIR IMAGES_DIR [image...]
 * BENCH_RUNS (default 20) sets the creates per figure, BENCH_AT_ONCE (default 20) the creates at once.
 *
 * vm_bench --confine STATE_DIR IMAGES_DIR: what confinement costs. Cold boot,
 * clone and the exec round trip of `tiny`, with each QEMU under a uid of its
 * own (driver option uids=auto, which must take effect: run as root) and with
 * uids=off, in one run: the four create phases run in turn (cold auto, cold
 * off, clone auto, clone off), each clone checked to be one.
 *
 * vm_bench --cow STATE_DIR IMAGES_DIR: templates whose memory clones map
 * (template_memory=mapped) against loaded ones, `tiny`, in one run: the
 * template's state bytes, clone create -> first `true`, and the memory of
 * idle clones (RSS, PSS, private); then the measured density: idle clones
 * started one after another until MemAvailable falls under BENCH_KEEP_MIB
 * (default 3072: 2 GiB for the host and a margin), BENCH_DENSITY_MAX
 * (default 1000) run, or one create -> `true` takes over BENCH_DENSITY_SLOW_S
 * (default 60: the CPUs ran out first); BENCH_DENSITY=0 leaves it out,
 * BENCH_DENSITY=only runs it alone. Once the count stops, the idle clones'
 * QEMUs' CPU time together, the engine's own (libvirt's embedded driver is
 * in it) and the host's busy time are taken over 60 s: what that many idle
 * guests cost the cores. Then they are destroyed in the order made, the
 * first DENS_DESTROYS one after another (all the others still there) and the
 * last DENS_DESTROYS too, timed: what a destroy costs at that count against
 * nearly alone; those between, DENS_DESTROY_THREADS at once, untimed.
 *
 * vm_bench --control STATE_DIR IMAGES_DIR: a clone's fix-ups over the
 * control port (control_port=on) against over SSH as root (control_port=off),
 * `tiny`, in one run on one template: clone create -> first `true`, in
 * BENCH_ROUNDS (default 2) alternating rounds of BENCH_RUNS (default 10)
 * creates each way, every create checked to be a clone whose fix-ups went
 * the way asked; the load at the start and the end.
 *
 * vm_bench --stream STATE_DIR IMAGES_DIR: output as it happens, on one
 * cold-booted `tiny` sandbox: a streaming exec's first byte next to a plain
 * exec's round trip of the same command; 100 MB of stdout streamed (every
 * byte to a callback) next to the same collected by saas_exec() (which keeps
 * max_output and reads the rest); a terminal's keystroke echo round trip next
 * to the plain exec's round trip.
 *
 * vm_bench --pool STATE_DIR IMAGES_DIR image...: a warm pool's create ->
 * first `true`, with the claim alone and the same sandbox's next `true` (the
 * baseline: a pooled sandbox's first command should cost what the next does),
 * BENCH_RUNS times (default 20) per image, each from a full pool whose refill
 * is idle; claims of clones, and apart from them claims of VMs the pool
 * booted cold before the image's template was ready.
 *
 * vm_bench --metrics STATE_DIR IMAGES_DIR: what sampling the sandboxes'
 * metrics costs the engine. BENCH_METRICS_VMS (default 4) cloned `tiny`
 * sandboxes left idle; the engine process's CPU time (user + system: its
 * threads and the embedded libvirt's, not the QEMUs') over BENCH_METRICS_S
 * (default 60) with sampling every hour (none in the window: the baseline),
 * every 5 s (the default) and every 200 ms, each engine opened in turn on the
 * same template with clones of its own; plus what reading them all takes.
 *
 * vm_bench --snapshot STATE_DIR IMAGES_DIR [image]: fork of 1 and of 10,
 * pause and resume of one prepared sandbox through the engine, between
 * clones of the same template started ahead (spares=1), after as many
 * clones made whole (spares=0) in an engine of their own (BENCH_RUNS,
 * default 5; BENCH_FORK10, default 1; BENCH_SNAPSHOT_MB, the guest's RAM,
 * default 1024).
 *
 * vm_bench --spares STATE_DIR IMAGES_DIR image...: clone create -> first
 * `true` with the clone's QEMU started ahead (driver option spares=1, each
 * create waiting until one is) and without (spares=0), BENCH_ROUNDS rounds
 * (default 2) of BENCH_RUNS creates (default 6) each way, alternating, 3.5 s
 * apart both ways; every create checked to be the kind it is timed as.
 *
 * vm_bench --first STATE_DIR IMAGES_DIR image...: a clone's first commands
 * over the control port, with no SSH login (control_exec=on) against the
 * clone waiting for the engine's SSH session and its commands going over
 * SSH (control_exec=off), both from a QEMU started ahead (spares=1): create
 * -> first `true`, and the next `true` (over the port, over SSH), as
 * --spares runs (BENCH_ROUNDS, BENCH_RUNS), every create checked to be a
 * clone from a QEMU started ahead.
 *
 * vm_bench --warm STATE_DIR IMAGES_DIR image...: a clone from a QEMU
 * started ahead whose guest ran once before the create (driver option
 * spare_warm=on: its fix-ups and a first `true`, paused again) against one
 * whose guest first runs when the create takes it (spare_warm=off), both
 * with spares=1 and commands over the port: create -> first `true` and the
 * next, as --first runs, every create checked to be a clone from a QEMU
 * started ahead.
 *
 * vm_bench --burst STATE_DIR IMAGES_DIR [image]: BENCH_AT_ONCE creates at
 * once (default 20) of one image (`tiny` unless named), ms until every one
 * ran `true`, five ways on the same template, each in an engine of its own:
 * the defaults right after the first create (spares=auto: one QEMU started
 * ahead before any burst), the same with cpu_readback=properties, the most
 * QEMUs started ahead the driver allows (spares=16, every one started before
 * the burst), a warm pool as large as the burst, and the defaults once the
 * creates paused for spare_idle (2 minutes: the 16 it then keeps made);
 * BENCH_ROUNDS rounds (default 2), alternating. Each burst's creates are
 * checked to be what the row says.
 *
 * vm_bench --adapt STATE_DIR IMAGES_DIR LABEL [image]: creates as they come,
 * against the driver's defaults (BENCH_SPARES sets spares= instead,
 * BENCH_SPARE_WARM spare_warm=), one
 * image (`tiny` unless named): BENCH_SPACED creates (default 4), each after
 * a VM was started ahead for it and 3.5 s after the last; BENCH_RUNS
 * (default 20) back to back, each as soon as the last ran `true`; then two
 * bursts of BENCH_AT_ONCE (default 20), each once the VMs started ahead
 * stopped coming. One Markdown row, LABEL first, so that runs of the same
 * program linked against two builds of the library (bench/run --adapt)
 * compare in one table.
 *
 * BENCH_VERBOSE=1: every engine log line to stderr, not only warnings; 2: the
 * driver's debug lines too (where a clone's or a snapshot's time goes).
 *
 * vm_bench --idle STATE_DIR IMAGES_DIR_A IMAGES_DIR_B [image]: an idle
 * clone's QEMU CPU (60 s after 30 s idle), image (`default` unless named)
 * from two image directories, A the baseline, one engine each in turn
 * (spares=0), BENCH_ROUNDS rounds (default 3); each guest's busiest threads
 * by context switches (/proc, counted by the guest around the window, not
 * in it), from the last round (#36: what wakes an idle guest, and how often).
 *
 * vm_bench --transport STATE_DIR IMAGES_DIR: the exec round trip and the file
 * figures alone, on one cold-booted `tiny` sandbox, BENCH_RUNS times (default
 * 3) in turn with their OpenSSH baselines: minutes instead of half an hour,
 * for whoever tunes the transport.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <saas.h>

#include "bench.h"

#define ROUNDS 200
#define MAX_AT_ONCE 64
#define MAX_IMAGES 8
#define CONTROL_SAMPLES 400
#define SPARE_SAMPLES 64
#define BURST_WAYS 5    /* --burst: the ways compared (burst_ways) */
#define SPARE_GAP_MS 3500 /* between creates, both ways: past the driver's 2 s hold and one start */
#define IDLE_SETTLE_S 30  /* an idle clone is measured this long after its restore and first command */
#define IDLE_WINDOW_S 60  /* over this long: 1 tick of 10 ms is 0.017 % */
#define IDLE_DENSITY 300  /* #36: what this many idle clones would cost the CPUs */

/* What the child processes measured, in memory shared with the parent. */
struct results {
	double cold[MAX_IMAGES][2], clone[MAX_IMAGES][2], pool[MAX_IMAGES][2]; /* create -> `true`: p50, p95 ms */
	double at_once_cold, at_once_clone;
	long rss_cold, rss_clone;                                                /* KiB */
	double cpu_cold, cpu_clone;
	char rows[8192];                                                         /* rows printed by a child */
	/* --confine: [0] uids=auto, [1] uids=off; p50, p95 ms */
	double conf_cold[2][2], conf_clone[2][2], conf_exec[2][2];
	bool conf_confined[2];
	/* --cow: [0] mapped, [1] loaded */
	double cow_clone[2][2];                  /* create -> `true`: p50, p95 ms */
	long long cow_state[2];                  /* the template's state, bytes */
	long cow_rss[2], cow_pss[2], cow_priv[2]; /* an idle clone's QEMU, KiB (mean of COW_IDLE) */
	bool cow_mapped[2];                      /* the engine built the template that way */
	int dens_count;
	long dens_rss, dens_pss, dens_avail0, dens_avail1; /* KiB */
	double dens_qemu_cpu, dens_host_busy;              /* % of one core, all idle QEMUs; % of the host's cores */
	double dens_engine_cpu;                            /* % of one core: the engine (libvirt embedded) meanwhile */
	double dens_destroy[2];                            /* p50 ms: the first DENS_DESTROYS destroys, the last */
	int dens_destroys;
	char dens_stop[256], load[2][64];
	/* --control: [0] control_port=on, [1] off; every create -> `true`, ms */
	double ctl_t[2][CONTROL_SAMPLES];
	int ctl_n[2];
	/* --snapshot: ms; p50 and p95 over the runs where there are several */
	double snap_clone[2], snap_whole[2], snap_fork1[2], snap_fork10, snap_at_once10, snap_pause[2], snap_resume[2];
	long long snap_pause_bytes;            /* what the last pause saved (state and disk), bytes */
	unsigned int snap_memory_mb;           /* the paused sandbox's guest RAM */
	int snap_runs, snap_fork10_runs;
	bool clone_mapped, clone_confined;     /* the clone engine's templates were mapped, its QEMUs confined */
	/* --pool: p50, p95 ms per image: the claim (the create call), claim -> first `true`, the next `true` */
	double pl_claim[MAX_IMAGES][2], pl_first[MAX_IMAGES][2], pl_next[MAX_IMAGES][2];
	int pl_cold[MAX_IMAGES]; /* claims of VMs booted cold (made before the template was ready): a row of their own */
	double pl_cold_first[MAX_IMAGES][2], pl_cold_next[MAX_IMAGES][2];
	/* --spares: [0] started ahead, [1] none; every create -> `true`, ms, per image */
	double sp_t[2][MAX_IMAGES][SPARE_SAMPLES];
	double sp_next[2][MAX_IMAGES][SPARE_SAMPLES]; /* --first: the same sandbox's next `true` */
	int sp_n[2][MAX_IMAGES];
	/* --burst: per way, per round: ms until all ran `true`, the median create's, the creates served ahead */
	double bu_all[BURST_WAYS][SPARE_SAMPLES], bu_p50[BURST_WAYS][SPARE_SAMPLES];
	int bu_ahead[BURST_WAYS][SPARE_SAMPLES], bu_n[BURST_WAYS];
	/* --adapt: create -> `true` ms spaced and back to back, those served ahead; two bursts: all, median, ahead */
	double ad_spaced[SPARE_SAMPLES], ad_b2b[SPARE_SAMPLES], ad_burst[2][2];
	int ad_nspaced, ad_nb2b, ad_b2b_ahead, ad_burst_ahead[2], ad_ready_before[2];
	/* --metrics: the engine's CPU (CPU-seconds per second) per interval mode, sandboxes, a read of them all */
	double metrics_cpu[3], metrics_read_ms;
	double metrics_qemu[3]; /* each sandbox's QEMU over the window, share of one CPU */
	int metrics_vms[3], metrics_samples;
	/* --idle: [0] the baseline images, [1] the others; per round an idle clone's QEMU CPU (% of a core), RSS */
	double idle_cpu[2][SPARE_SAMPLES];
	long idle_rss[2][SPARE_SAMPLES];
	int idle_n[2];
	char idle_wakes[2][4096]; /* the last round's busiest guest threads, as the guest counted them */
};
static struct results *res;

struct bench_engine {
	const char *name;
	char dir[4200];
	saas_engine *engine;
	saas_client *client;
	saas_account *account;
	char *apikey;
};

static struct bench_engine cold, cloned, pool;
static saas_client *client;        /* the clone engine's: exec, files and idle figures */
static const char *state_dir;      /* the clone engine's */
static int runs = 20, at_once = 20;
static const char *uids = "auto";  /* the driver option uids of the engines opened next */
static unsigned int metrics_interval; /* the engines' metrics_interval_ms opened next; 0: the default */
static const char *template_memory = "mapped"; /* the driver option template_memory of the engines opened next */
static const char *control_port = "on"; /* the driver option control_port of the engines opened next */
static const char *spares_opt = "1";      /* the driver option spares of the engines opened next; NULL: its default */
static const char *control_exec = "on";   /* the driver option control_exec of the engines opened next */
static const char *spare_warm = "on";     /* the driver option spare_warm of the engines opened next */
/*
 * The driver option cpu_readback of the engines opened next ($BENCH_CPU_READBACK); NULL: not given (the
 * default, and what a library from before the option takes: --adapt's baseline).
 */
static const char *cpu_readback;
static int max_sandboxes = MAX_AT_ONCE + 8;
static unsigned int disk_budget_gb; /* the engines opened next; 0: the engine's default */
static const saas_size *const *bench_sizes; /* the engines opened next; NULL: the engine's sizes */
static size_t bench_nsizes;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int templates_ready, templates_failed, clones_made, cold_boots;
static int fixups_port, fixups_ssh; /* clones whose fix-ups went over the control port, over SSH */
static int spares_started, clones_ahead; /* VMs started ahead; clones made from one */
static bool confined;               /* the engine said its QEMUs run under uids of their own */
static bool mapped;                 /* the engine built a template whose memory clones map */
static long long paused_bytes;      /* what the engine's last pause saved, from its log line */
#define CLONE_NAMES 64
static char clone_names[CLONE_NAMES][64]; /* the last clones' VM names, oldest overwritten first */
static int clone_names_n;

/* Counts the driver's template lines; warnings go to stderr. */
static void on_log(void *ud, int level, const char *msg)
{
	(void)ud;
	pthread_mutex_lock(&log_mu);
	if (strncmp(msg, "template ", 9) == 0 && strstr(msg, " ready in "))
		templates_ready++;
	if (strncmp(msg, "template ", 9) == 0 && strstr(msg, " failed"))
		templates_failed++;
	/* A clone, made the whole way or from a QEMU started ahead (", started ahead,"). */
	if (strstr(msg, " up in ") && strstr(msg, "(clone,")) {
		const char *up = strstr(msg, " up in ");
		if (strncmp(msg, "VM ", 3) == 0 && up - msg - 3 < 64)
			snprintf(clone_names[clone_names_n++ % CLONE_NAMES], 64, "%.*s", (int)(up - msg - 3), msg + 3);
		clones_made++;
		clones_ahead += strstr(msg, ", started ahead,") != NULL;
		fixups_port += strstr(msg, " fix-ups over the control port,") != NULL;
		fixups_ssh += strstr(msg, " fix-ups over SSH,") != NULL;
	}
	if (strncmp(msg, "VM ", 3) == 0 && strstr(msg, " started ahead for template "))
		spares_started++;
	if (strstr(msg, " up in ") && strstr(msg, "(cold boot,"))
		cold_boots++;
	if (strstr(msg, "QEMU uids per VM"))
		confined = true;
	if (strstr(msg, "memory mapped by clones"))
		mapped = true;
	if (strncmp(msg, "sandbox ", 8) == 0 && strstr(msg, " paused in ") && strstr(msg, " bytes saved as "))
		paused_bytes = atoll(strstr(msg, " ms (") + 5);
	pthread_mutex_unlock(&log_mu);
	if (level <= SAAS_LOG_WARN || getenv("BENCH_VERBOSE"))
		fprintf(stderr, "vm_bench: [engine] %s\n", msg);
}

static void engine_open(struct bench_engine *b, const char *name, const char *images, bool templates,
                        const char *pool_spec)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	char config[4300];
	int rc;

	b->name = name;
	snprintf(b->dir, sizeof(b->dir), "%s/%s", state_dir, name);
	snprintf(config, sizeof(config),
	         "images=%s boot_timeout=600 templates=%s uids=%s template_memory=%s control_port=%s%s%s "
	         "control_exec=%s spare_warm=%s%s%s",
	         images, templates ? "on" : "off", uids, template_memory, control_port, spares_opt ? " spares=" : "",
	         spares_opt ? spares_opt : "", control_exec, spare_warm, cpu_readback ? " cpu_readback=" : "",
	         cpu_readback ? cpu_readback : "");
	o.state_dir = b->dir;
	o.driver_config = config;
	o.default_image = "tiny";
	o.max_sandboxes = (unsigned int)max_sandboxes;
	/* The figures are the VMs', not the account limits': no create or execution waits for one. */
	o.creates_per_minute = SAAS_LIMIT_MAX;
	o.max_executions = SAAS_LIMIT_MAX;
	o.disk_budget_gb = disk_budget_gb;
	o.sizes = bench_sizes;
	o.nsizes = bench_nsizes;
	o.log = on_log;
	o.log_level = getenv("BENCH_VERBOSE") && atoi(getenv("BENCH_VERBOSE")) > 1 ? SAAS_LOG_DEBUG : SAAS_LOG_INFO;
	o.pool = pool_spec;
	o.metrics_interval_ms = metrics_interval;
	if ((rc = saas_engine_open(&b->engine, &o)) < 0)
		die("engine", rc);
	if ((rc = saas_account_create(&b->account, b->engine, "bench", SAAS_USD(1000), 0)) < 0 ||
	    (rc = saas_key_create(&b->apikey, NULL, b->engine, b->account->id, NULL, 0)) < 0 ||
	    (rc = saas_client_open_local(&b->client, b->engine, b->apikey, 0)) < 0)
		die("account", rc);
}

static void engine_close(struct bench_engine *b)
{
	saas_client_free(b->client);
	saas_account_free(b->account);
	saas_free(b->apikey);
	saas_engine_free(b->engine);
	memset(b, 0, sizeof(*b));
}

static void exec_on(saas_client *c, const char *id, const char *cmd)
{
	saas_execution *x = NULL;
	int rc = saas_exec(&x, c, id, cmd, NULL, 0);

	if (rc < 0)
		die(cmd, rc);
	if (x->exit_code != 0) {
		fprintf(stderr, "vm_bench: '%s' exited %d: %s\n", cmd, x->exit_code, x->stderr_data);
		exit(1);
	}
	saas_execution_free(x);
}

static void exec_ok(const char *id, const char *cmd)
{
	exec_on(client, id, cmd);
}

/* A sandbox's QEMU process (and its SSH forward port), found by its command line. */
static int qemu_of(const char *id, unsigned int *port)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int pid = 0;

	while (d && (e = readdir(d)) && !pid) {
		char path[300], buf[16384], *p;
		ssize_t n;
		int fd;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		if (!strstr(buf, "qemu-system") || !strstr(buf, id))
			continue;
		pid = atoi(e->d_name);
		if (port && (p = strstr(buf, "hostfwd=tcp:127.0.0.1:")))
			*port = (unsigned int)atoi(p + strlen("hostfwd=tcp:127.0.0.1:"));
	}
	if (d)
		closedir(d);
	return pid;
}

/* The clone engine's template for an image: the first create starts it; wait until it is ready. */
static void template_warm(const char *image)
{
	saas_sandbox *sb;
	int want, clones;

	/* Counted before the create: the template may be ready before a cold boot's create returns. */
	pthread_mutex_lock(&log_mu);
	clones = clones_made;
	want = templates_ready + 1;
	pthread_mutex_unlock(&log_mu);
	sb = bench_create(cloned.client, image);
	pthread_mutex_lock(&log_mu);
	clones = clones_made - clones;
	pthread_mutex_unlock(&log_mu);
	saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
	saas_sandbox_free(sb);
	/* A clone: the template was there already (an earlier engine's on the same state, as --adapt's rounds share). */
	for (int i = 0; i < 1200 && !clones; i++) {
		int ready, failed;
		pthread_mutex_lock(&log_mu);
		ready = templates_ready;
		failed = templates_failed;
		pthread_mutex_unlock(&log_mu);
		if (ready >= want)
			return;
		if (failed) {
			fprintf(stderr, "vm_bench: the %s template failed to build\n", image);
			exit(1);
		}
		usleep(500 * 1000);
	}
	if (clones)
		return;
	fprintf(stderr, "vm_bench: the %s template was not ready in 10 minutes\n", image);
	exit(1);
}

/* Until want becomes true (checked every 100 ms), ten minutes at most. */
static void wait_until(bool (*want)(int), int arg, const char *what)
{
	for (int i = 0; i < 6000; i++) {
		if (want(arg))
			return;
		usleep(100 * 1000);
	}
	fprintf(stderr, "vm_bench: %s: not in ten minutes\n", what);
	exit(1);
}

static bool spares_at_least(int n)
{
	bool ok;

	pthread_mutex_lock(&log_mu);
	ok = spares_started - clones_ahead >= n;
	pthread_mutex_unlock(&log_mu);
	return ok;
}

static bool pool_holds(int n)
{
	saas_engine_stats *st = NULL;
	bool ok = saas_engine_stats_get(&st, pool.engine) == SAAS_OK && st->pool_ready >= (unsigned int)n;

	saas_engine_stats_free(st);
	return ok;
}

/* create -> first `true`, `runs` times, one at a time; p50 and p95 into out[0..1]. */
static void time_creates(struct bench_engine *b, const char *image, bool from_pool, double out[2])
{
	double *t = calloc((size_t)runs, sizeof(*t));

	for (int i = 0; i < runs; i++) {
		double t0;
		saas_sandbox *sb;
		if (from_pool)
			wait_until(pool_holds, 1, "the pool refilling");
		t0 = now_ms();
		sb = bench_create(b->client, image);
		exec_on(b->client, sb->id, "true");
		t[i] = now_ms() - t0;
		saas_sandbox_destroy(NULL, b->client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	out[0] = pct(t, runs, 0.5);
	out[1] = pct(t, runs, 0.95);
	free(t);
}

/* Append a table row to the shared results (printed by the parent). */
static void row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void row(const char *fmt, ...)
{
	size_t used = strlen(res->rows);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->rows + used, sizeof(res->rows) - used, fmt, ap);
	va_end(ap);
}

static double openssh_rounds(unsigned int port, const char *key, const char *cmd, double *samples, int rounds)
{
	char line[16384];

	/* Open the master first, outside the timing, as ControlMaster users do. */
	snprintf(line, sizeof(line),
	         "ssh -q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
	         "-o ControlMaster=auto -o ControlPath=%s/bench-cm -o ControlPersist=120 -i %s -p %u sandbox@127.0.0.1 %s",
	         state_dir, key, port, cmd);
	if (system(line) != 0) {
		fprintf(stderr, "vm_bench: OpenSSH baseline failed: %s\n", line);
		exit(1);
	}
	for (int i = 0; i < rounds; i++) {
		double t0 = now_ms();
		if (system(line) != 0)
			exit(1);
		samples[i] = now_ms() - t0;
	}
	return pct(samples, rounds, 0.5);
}

static void bench_exec(const char *id, unsigned int port, const char *key)
{
	double ours[ROUNDS], theirs[ROUNDS], m_ours, m_theirs;

	exec_ok(id, "true");
	for (int i = 0; i < ROUNDS; i++) {
		double t0 = now_ms();
		exec_ok(id, "true");
		ours[i] = now_ms() - t0;
	}
	m_ours = pct(ours, ROUNDS, 0.5);
	m_theirs = openssh_rounds(port, key, "true", theirs, ROUNDS);
	row("| `true` round trip, reused session (%d runs) | median %.2f ms, p95 %.2f ms | OpenSSH ControlMaster: median %.2f ms, p95 %.2f ms; ratio %.2fx |\n",
	       ROUNDS, m_ours, pct(ours, ROUNDS, 0.95), m_theirs, pct(theirs, ROUNDS, 0.95), m_theirs / m_ours);
}

static void bench_files(const char *id, unsigned int port, const char *key)
{
	size_t size = 64u << 20;
	char *data = malloc(size), path[4200], cmd[16384];
	void *back = NULL;
	size_t len = 0;
	double t0, up, down, sup, sdown;
	FILE *f;
	int rc;

	for (size_t i = 0; i < size; i++)
		data[i] = (char)(i * 2654435761u >> 13);
	t0 = now_ms();
	if ((rc = saas_file_write(client, id, "/tmp/bench.bin", data, size, NULL)) < 0)
		die("upload", rc);
	up = now_ms() - t0;
	t0 = now_ms();
	if ((rc = saas_file_read(&back, &len, client, id, "/tmp/bench.bin", 0)) < 0)
		die("download", rc);
	down = now_ms() - t0;
	if (len != size || memcmp(back, data, size) != 0) {
		fprintf(stderr, "vm_bench: downloaded bytes differ\n");
		exit(1);
	}
	saas_free(back);
	/* The same bytes through OpenSSH's sftp, over a fresh connection each way (its usual use). */
	snprintf(path, sizeof(path), "%s/bench.bin", state_dir);
	f = fopen(path, "wb");
	fwrite(data, 1, size, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
	         "echo 'put %s /tmp/bench2.bin' | sftp -q -b - -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
	         "-i %s -P %u sandbox@127.0.0.1 >/dev/null",
	         path, key, port);
	t0 = now_ms();
	if (system(cmd) != 0)
		exit(1);
	sup = now_ms() - t0;
	snprintf(cmd, sizeof(cmd),
	         "echo 'get /tmp/bench2.bin %s.back' | sftp -q -b - -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
	         "-i %s -P %u sandbox@127.0.0.1 >/dev/null",
	         path, key, port);
	t0 = now_ms();
	if (system(cmd) != 0)
		exit(1);
	sdown = now_ms() - t0;
	row("| upload 64 MiB | %.1f MiB/s | OpenSSH sftp: %.1f MiB/s; ratio %.2fx |\n", 64e3 / up, 64e3 / sup, sup / up);
	row("| download 64 MiB | %.1f MiB/s | OpenSSH sftp: %.1f MiB/s; ratio %.2fx |\n", 64e3 / down, 64e3 / sdown,
	       sdown / down);
	unlink(path);
	strcat(path, ".back");
	unlink(path);
	free(data);
}

/* User + system clock ticks of a process so far; 0 when it is gone. */
static unsigned long proc_ticks(int pid)
{
	char path[64];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		ut = st = 0;
	fclose(f);
	return ut + st;
}

/*
 * RSS (KiB) and CPU share of one core of a sandbox's QEMU over win_s idle
 * seconds, after settle_s. The clock ticks are 10 ms: over 10 s a figure of
 * 0.3 % is 3 ticks, so the clone's, which #36's density rests on, is taken
 * over 60 s once the restore and its command are 30 s past.
 */
static void idle_of(const char *id, unsigned int settle_s, unsigned int win_s, long *rss, double *cpu)
{
	char path[64], line[256];
	long hz = sysconf(_SC_CLK_TCK);
	unsigned long ticks0, ticks1;
	int pid = qemu_of(id, NULL);
	FILE *f;

	*rss = 0;
	sleep(settle_s);
	ticks0 = proc_ticks(pid);
	sleep(win_s);
	ticks1 = proc_ticks(pid);
	*cpu = ticks1 >= ticks0 ? 100.0 * (double)(ticks1 - ticks0) / (double)hz / (double)win_s : 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "VmRSS:", 6) == 0)
				*rss = atol(line + 6);
		fclose(f);
	}
}

static long mem_total_kib(void)
{
	char line[256];
	long kib = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "MemTotal:", 9) == 0)
			kib = atol(line + 9);
	if (f)
		fclose(f);
	return kib;
}

/* A fresh sandbox (a clone, or a cold boot, as asked), having run one command, then left alone: its QEMU's RSS and CPU. */
static void idle_fresh(struct bench_engine *b, bool want_clone, long *rss, double *cpu)
{
	int before;
	saas_sandbox *sb;

	pthread_mutex_lock(&log_mu);
	before = want_clone ? clones_made : cold_boots;
	pthread_mutex_unlock(&log_mu);
	sb = bench_create(b->client, "tiny");
	pthread_mutex_lock(&log_mu);
	if ((want_clone ? clones_made : cold_boots) != before + 1) {
		fprintf(stderr, "vm_bench: the idle %s sandbox was not made that way\n", want_clone ? "cloned" : "cold");
		exit(1);
	}
	pthread_mutex_unlock(&log_mu);

	exec_on(b->client, sb->id, "true");
	if (want_clone)
		idle_of(sb->id, IDLE_SETTLE_S, IDLE_WINDOW_S, rss, cpu);
	else
		idle_of(sb->id, 0, 10, rss, cpu);
	saas_sandbox_destroy(NULL, b->client, sb->id, 0);
	saas_sandbox_free(sb);
}

struct racer {
	saas_client *client;
	const char *image;
	double ready_ms;
	char id[SAAS_ID_MAX + 1];
};

static double race_t0;

static void *race(void *arg)
{
	struct racer *r = arg;
	saas_sandbox *sb = bench_create(r->client, r->image);

	exec_on(r->client, sb->id, "true");
	r->ready_ms = now_ms() - race_t0;
	strcpy(r->id, sb->id);
	saas_sandbox_free(sb);
	return NULL;
}

/* The host's CPU and this process's (the engine, libvirt embedded in it) at a moment. */
#define CPU_PROCS 4096
struct cpu_at {
	unsigned long long busy, all;
	double self_s, children_s;
	/* BENCH_BURST_THREADS: every process's CPU (its own and its reaped children's), by pid. */
	int npid;
	int pid[CPU_PROCS];
	char comm[CPU_PROCS][20];
	double cpu[CPU_PROCS];
};

static void cpu_procs(struct cpu_at *c)
{
	double hz = (double)sysconf(_SC_CLK_TCK);
	DIR *d = opendir("/proc");
	struct dirent *e;

	c->npid = 0;
	while (d && (e = readdir(d)) && c->npid < CPU_PROCS) {
		char path[300], buf[1024], *lp, *rp;
		unsigned long long ut, st;
		FILE *f;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		if (!(lp = strchr(buf, '(')) || !(rp = strrchr(buf, ')')) ||
		    sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
			continue;
		*rp = '\0';
		c->pid[c->npid] = atoi(e->d_name);
		snprintf(c->comm[c->npid], sizeof(c->comm[0]), "%s", lp + 1);
		c->cpu[c->npid++] = (double)(ut + st) / hz;
	}
	if (d)
		closedir(d);
}

static void cpu_mark(struct cpu_at *c)
{
	unsigned long long v[8] = { 0 };
	struct rusage ru;
	FILE *f = fopen("/proc/stat", "re");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	                 &v[6], &v[7]) != 8)
		memset(v, 0, sizeof(v));
	if (f)
		fclose(f);
	c->all = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	c->busy = c->all - v[3] - v[4];
	getrusage(RUSAGE_SELF, &ru);
	c->self_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	            ru.ru_stime.tv_usec / 1e6;
	getrusage(RUSAGE_CHILDREN, &ru);
	c->children_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	                ru.ru_stime.tv_usec / 1e6;
	if (getenv("BENCH_BURST_THREADS"))
		cpu_procs(c);
}

/* Set: at_once_ms marks the CPU there once every create ran `true`. */
static struct cpu_at *at_once_cpu;

/*
 * BENCH_BURST_THREADS: the CPU the burst's QEMUs took so far, by thread (its
 * vCPUs, its main loop, the rest), on stderr: where a clone's CPU goes.
 */
static void burst_threads(const struct racer *r, int n)
{
	double hz = (double)sysconf(_SC_CLK_TCK), vcpu = 0, main_loop = 0, other = 0;
	int found = 0;

	for (int i = 0; i < n; i++) {
		char dir[64];
		struct dirent *e;
		DIR *d;
		int pid = qemu_of(r[i].id, NULL);
		if (!pid)
			continue;
		found++;
		snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
		for (d = opendir(dir); d && (e = readdir(d));) {
			char path[340], buf[1024], *rp;
			unsigned long long ut, st;
			FILE *f;
			double cpu;
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
			if (!(f = fopen(path, "re")))
				continue;
			buf[0] = '\0';
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
			/* After the name, in parentheses: state, then 10 fields, utime and stime (fields 14 and 15). */
			if (!(rp = strrchr(buf, ')')) ||
			    sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
				continue;
			cpu = (double)(ut + st) / hz;
			if (strstr(buf, "/TCG)") || strstr(buf, "/KVM)"))
				vcpu += cpu;
			else if (strstr(buf, "(qemu-system-x86"))
				main_loop += cpu;
			else
				other += cpu;
		}
		if (d)
			closedir(d);
	}
	fprintf(stderr, "vm_bench: the burst's %d QEMUs so far: vCPUs %.1f CPU-s, main loops %.1f CPU-s, other threads %.1f CPU-s\n",
	        found, vcpu, main_loop, other);
}

/* n creates at once on one engine: ms until all ran `true`; the median create's into *median if not NULL. */
static double at_once_ms(struct bench_engine *b, const char *image, int n, double *median)
{
	struct racer r[MAX_AT_ONCE];
	pthread_t t[MAX_AT_ONCE];
	double each[MAX_AT_ONCE], last = 0;

	race_t0 = now_ms();
	for (int i = 0; i < n; i++) {
		r[i].client = b->client;
		r[i].image = image;
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		each[i] = r[i].ready_ms;
		if (r[i].ready_ms > last)
			last = r[i].ready_ms;
	}
	if (at_once_cpu)
		cpu_mark(at_once_cpu); /* the burst's CPU ends here: the destroys below are not the creates' */
	if (getenv("BENCH_BURST_THREADS"))
		burst_threads(r, n);
	for (int i = 0; i < n; i++)
		saas_sandbox_destroy(NULL, b->client, r[i].id, 0);
	if (median)
		*median = pct(each, n, 0.5);
	return last;
}

/* ---- the phases, each a child process with one engine ---- */

static void phase_cold(char **images, int nimages, const char *dir)
{
	engine_open(&cold, "cold", dir, false, NULL);
	for (int i = 0; i < nimages; i++)
		time_creates(&cold, images[i], false, res->cold[i]);
	res->at_once_cold = at_once_ms(&cold, "tiny", at_once, NULL);
	idle_fresh(&cold, false, &res->rss_cold, &res->cpu_cold);
	engine_close(&cold);
}

static void phase_clone(char **images, int nimages, const char *dir)
{
	char key[4300];
	saas_sandbox *sb;
	unsigned int port = 0;

	engine_open(&cloned, "clone", dir, true, NULL);
	client = cloned.client;
	for (int i = 0; i < nimages; i++) {
		template_warm(images[i]);
		time_creates(&cloned, images[i], false, res->clone[i]);
	}
	res->clone_mapped = mapped;
	res->clone_confined = confined;
	res->at_once_clone = at_once_ms(&cloned, "tiny", at_once, NULL);
	idle_fresh(&cloned, true, &res->rss_clone, &res->cpu_clone);
	/* The transport figures, on a clone. */
	state_dir = cloned.dir;
	snprintf(key, sizeof(key), "%s/libvirt/id_ed25519", cloned.dir);
	sb = bench_create(cloned.client, "tiny");
	qemu_of(sb->id, &port);
	bench_exec(sb->id, port, key);
	bench_files(sb->id, port, key);
	saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
	saas_sandbox_free(sb);
	engine_close(&cloned);
}

/* The pool holds the image's small sandboxes; each create waits until one is ready, as a user of a full pool would. */
static void phase_pool(char **images, int i, const char *dir)
{
	char spec[128];

	snprintf(spec, sizeof(spec), "small:%s=2", images[i]);
	engine_open(&pool, "pool", dir, true, spec);
	time_creates(&pool, images[i], true, res->pool[i]);
	engine_close(&pool);
}

static void run_child(const char *what, void (*phase)(char **, int, const char *), char **images, int n,
                      const char *dir)
{
	pid_t pid;
	int status;

	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		perror("vm_bench: fork");
		exit(1);
	}
	if (pid == 0) {
		phase(images, n, dir);
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "vm_bench: the %s phase failed\n", what);
		exit(1);
	}
}

/* ---- --confine: the same creates and execs with uids=auto and uids=off ---- */

/* Which engine of a --confine run: [0] uids=auto, [1] uids=off. */
static const char *const conf_uids[2] = { "auto", "off" };

static void phase_confine_cold(char **images, int mode, const char *dir)
{
	(void)images;
	uids = conf_uids[mode];
	engine_open(&cold, mode ? "cold-off" : "cold-auto", dir, false, NULL);
	res->conf_confined[mode] = confined;
	time_creates(&cold, "tiny", false, res->conf_cold[mode]);
	engine_close(&cold);
}

static void phase_confine_clone(char **images, int mode, const char *dir)
{
	double t[ROUNDS];
	saas_sandbox *sb;
	int made;

	(void)images;
	uids = conf_uids[mode];
	engine_open(&cloned, mode ? "clone-off" : "clone-auto", dir, true, NULL);
	client = cloned.client;
	template_warm("tiny");
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	pthread_mutex_unlock(&log_mu);
	time_creates(&cloned, "tiny", false, res->conf_clone[mode]);
	/* A clone that fell back to a cold boot would be timed as a clone. */
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	pthread_mutex_unlock(&log_mu);
	if (made != runs) {
		fprintf(stderr, "vm_bench: uids=%s: %d of %d creates were clones (see the engine's log)\n", uids, made, runs);
		exit(1);
	}
	sb = bench_create(cloned.client, "tiny");
	exec_ok(sb->id, "true");
	for (int i = 0; i < ROUNDS; i++) {
		double t0 = now_ms();
		exec_ok(sb->id, "true");
		t[i] = now_ms() - t0;
	}
	res->conf_exec[mode][0] = pct(t, ROUNDS, 0.5);
	res->conf_exec[mode][1] = pct(t, ROUNDS, 0.95);
	saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
	saas_sandbox_free(sb);
	engine_close(&cloned);
}

static int confine_main(const char *dir)
{
	static const char *const what[] = { "create -> first `true`, `tiny`, cold boot", "create -> first `true`, `tiny`, clone" };
	double(*fig[2])[2] = { res->conf_cold, res->conf_clone };

	for (int mode = 0; mode < 2; mode++)
		run_child("confine cold", phase_confine_cold, NULL, mode, dir);
	for (int mode = 0; mode < 2; mode++)
		run_child("confine clone", phase_confine_clone, NULL, mode, dir);
	if (!res->conf_confined[0]) {
		fprintf(stderr, "vm_bench: uids=auto did not confine QEMU here (run as root; see the engine's log)\n");
		return 1;
	}
	printf("| what | QEMU under a uid of its own (`uids=auto`) | `uids=off` (same run) |\n|---|---|---|\n");
	for (int i = 0; i < 2; i++)
		printf("| %s (%d runs) | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, p95 %.0f ms; ratio %.2fx at p50 |\n", what[i],
		       runs, fig[i][0][0], fig[i][0][1], fig[i][1][0], fig[i][1][1], fig[i][0][0] / fig[i][1][0]);
	printf("| `true` round trip, reused session, clone (%d runs) | median %.2f ms, p95 %.2f ms | median %.2f ms, p95 "
	       "%.2f ms; ratio %.2fx |\n",
	       ROUNDS, res->conf_exec[0][0], res->conf_exec[0][1], res->conf_exec[1][0], res->conf_exec[1][1],
	       res->conf_exec[0][0] / res->conf_exec[1][0]);
	return 0;
}

/* ---- --cow: templates whose memory clones map, against loaded ones ---- */

static const char *const cow_modes[2] = { "mapped", "loaded" };
#define COW_IDLE 3
/* The density's destroys timed at each end: with all the others still there, and with few left. */
#define DENS_DESTROYS 20
/* ... and those between them, this many at once. */
#define DENS_DESTROY_THREADS 4

/* A field of /proc/meminfo (KiB). */
static long meminfo_kib(const char *field)
{
	char line[256];
	long kib = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			kib = atol(line + strlen(field));
	if (f)
		fclose(f);
	return kib;
}

/* The load, as uptime says it: the 1, 5 and 15 minute averages. */
/* Rss, Pss and private memory (clean + dirty) of a sandbox's QEMU, KiB. */
static void smaps_of(const char *id, long *rss, long *pss, long *priv)
{
	char path[64], line[256];
	int pid = qemu_of(id, NULL);
	FILE *f;

	*rss = *pss = *priv = 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	if (!pid || !(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Rss:", 4) == 0)
			*rss = atol(line + 4);
		else if (strncmp(line, "Pss:", 4) == 0)
			*pss = atol(line + 4);
		else if (strncmp(line, "Private_Clean:", 14) == 0 || strncmp(line, "Private_Dirty:", 14) == 0)
			*priv += atol(line + 14);
	}
	fclose(f);
}

/* The state_bytes of the (one) template under dir's libvirt/templates. */
static long long template_state_bytes(const char *dir)
{
	char root[4400], path[4700], buf[4096];
	struct dirent *e;
	long long bytes = -1;
	DIR *d;

	snprintf(root, sizeof(root), "%s/libvirt/templates", dir);
	if (!(d = opendir(root)))
		return -1;
	while (bytes < 0 && (e = readdir(d))) {
		FILE *f;
		size_t n;
		char *p;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/template.json", root, e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
		if ((p = strstr(buf, "\"state_bytes\":")))
			bytes = atoll(p + strlen("\"state_bytes\":"));
	}
	closedir(d);
	return bytes;
}

/* Idle clones: each has run `true`, then all are left alone for 10 s; the mean of their QEMUs' memory. */
static void idle_clones(saas_sandbox **sb, int n, long *rss, long *pss, long *priv)
{
	long r, p, v;

	*rss = *pss = *priv = 0;
	sleep(10);
	for (int i = 0; i < n; i++) {
		smaps_of(sb[i]->id, &r, &p, &v);
		*rss += r;
		*pss += p;
		*priv += v;
	}
	*rss /= n;
	*pss /= n;
	*priv /= n;
}

static void phase_cow(char **images, int mode, const char *dir)
{
	saas_sandbox *sb[COW_IDLE];

	(void)images;
	template_memory = cow_modes[mode];
	engine_open(&cloned, cow_modes[mode], dir, true, NULL);
	client = cloned.client;
	template_warm("tiny");
	res->cow_mapped[mode] = mapped;
	res->cow_state[mode] = template_state_bytes(cloned.dir);
	time_creates(&cloned, "tiny", false, res->cow_clone[mode]);
	for (int i = 0; i < COW_IDLE; i++) {
		sb[i] = bench_create(cloned.client, "tiny");
		exec_ok(sb[i]->id, "true");
	}
	idle_clones(sb, COW_IDLE, &res->cow_rss[mode], &res->cow_pss[mode], &res->cow_priv[mode]);
	for (int i = 0; i < COW_IDLE; i++) {
		saas_sandbox_destroy(NULL, cloned.client, sb[i]->id, 0);
		saas_sandbox_free(sb[i]);
	}
	engine_close(&cloned);
}

/* The host's busy and total clock ticks so far (/proc/stat's first line; iowait counts as idle). */
static void host_ticks(unsigned long long *busy, unsigned long long *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
	                 &v[7]) != 8)
		memset(v, 0, sizeof(v));
	if (f)
		fclose(f);
	*total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
	*busy = *total - v[3] - v[4];
}

/*
 * Over win_s seconds: the QEMUs of n idle sandboxes together (% of one
 * core) and the whole host (% of all its cores busy, the engine included).
 */
static void idle_cpu_of(saas_sandbox **sb, int n, unsigned int win_s, double *qemu_cpu, double *host_busy,
                        double *engine_cpu)
{
	int *pid = calloc((size_t)n, sizeof(*pid));
	unsigned long t0 = 0, t1 = 0, e0, e1;
	unsigned long long b0, a0, b1, a1;
	long hz = sysconf(_SC_CLK_TCK);

	if (!pid)
		exit(1);
	for (int i = 0; i < n; i++) {
		pid[i] = qemu_of(sb[i]->id, NULL);
		t0 += proc_ticks(pid[i]);
	}
	host_ticks(&b0, &a0);
	e0 = proc_ticks(getpid());
	sleep(win_s);
	e1 = proc_ticks(getpid());
	for (int i = 0; i < n; i++)
		t1 += proc_ticks(pid[i]);
	host_ticks(&b1, &a1);
	*qemu_cpu = t1 >= t0 ? 100.0 * (double)(t1 - t0) / (double)hz / (double)win_s : 0;
	*engine_cpu = 100.0 * (double)(e1 - e0) / (double)hz / (double)win_s;
	*host_busy = a1 > a0 ? 100.0 * (double)(b1 - b0) / (double)(a1 - a0) : 0;
	free(pid);
}

/* The middle of the density's destroys: every step-th sandbox from first, before end. */
struct dens_slice {
	saas_sandbox **sb;
	int first, end, step;
};

static void *dens_destroy_slice(void *arg)
{
	struct dens_slice *sl = arg;

	for (int i = sl->first; i < sl->end; i += sl->step) {
		saas_sandbox_destroy(NULL, cloned.client, sl->sb[i]->id, 0);
		saas_sandbox_free(sl->sb[i]);
	}
	return NULL;
}

/* Idle small clones, one after another, until the host has only keep_kib available (or max run). */
static void phase_density(char **images, int max, const char *dir)
{
	long keep_kib = (getenv("BENCH_KEEP_MIB") ? atol(getenv("BENCH_KEEP_MIB")) : 3072) * 1024;
	double slow_ms = (getenv("BENCH_DENSITY_SLOW_S") ? atof(getenv("BENCH_DENSITY_SLOW_S")) : 60) * 1e3, t0;
	saas_sandbox **sb = calloc((size_t)max, sizeof(*sb));
	int n = 0;

	(void)images;
	template_memory = "mapped";
	max_sandboxes = max + 8;
	/*
	 * Overlays are thin: an idle clone writes a few MiB of its 40 GiB. The
	 * engine's default budget counts the sizes' whole disks, which would stop
	 * the count at a share of the filesystem long before memory runs short.
	 */
	disk_budget_gb = (unsigned int)(max + 8) * 160;
	engine_open(&cloned, "density", dir, true, NULL);
	client = cloned.client;
	template_warm("tiny");
	res->dens_avail0 = meminfo_kib("MemAvailable:");
	snprintf(res->dens_stop, sizeof(res->dens_stop), "BENCH_DENSITY_MAX (%d) reached", max);
	while (n < max) {
		long avail = meminfo_kib("MemAvailable:");
		if (avail < keep_kib) {
			snprintf(res->dens_stop, sizeof(res->dens_stop), "MemAvailable %ld MiB, under the %ld MiB kept",
			         avail >> 10, keep_kib >> 10);
			break;
		}
		saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
		int rc;

		co.image = "tiny";
		co.timeout_s = 3600;
		t0 = now_ms();
		if ((rc = saas_sandbox_create(&sb[n], cloned.client, &co, 0)) < 0) {
			/* A limit of the engine's is a result too: say which, and keep the count. */
			snprintf(res->dens_stop, sizeof(res->dens_stop), "a create refused: %s", saas_error_last()->message);
			break;
		}
		exec_ok(sb[n]->id, "true");
		n++;
		/*
		 * Under TCG every idle guest still takes a sliver of a core (its
		 * timer ticks): past some count the CPUs, not memory, are what
		 * runs out, and each create crawls. Stop there and say so.
		 */
		if (now_ms() - t0 > slow_ms) {
			char load[64];
			load_now(load, sizeof(load));
			snprintf(res->dens_stop, sizeof(res->dens_stop),
			         "the CPUs: the last create took %.0f s, over %.0f s (load %s), MemAvailable %ld MiB",
			         (now_ms() - t0) / 1e3, slow_ms / 1e3, load, meminfo_kib("MemAvailable:") >> 10);
			break;
		}
	}
	res->dens_count = n;
	if (n > 0) {
		idle_clones(sb, n, &res->dens_rss, &res->dens_pss, &(long){ 0 });
		idle_cpu_of(sb, n, 60, &res->dens_qemu_cpu, &res->dens_host_busy, &res->dens_engine_cpu);
	}
	res->dens_avail1 = meminfo_kib("MemAvailable:");
	/*
	 * Destroyed in the order made: the first k one after another with all the
	 * others still there, the middle ones by DENS_DESTROY_THREADS at once (the
	 * bench's time, not a figure), the last k one after another nearly alone.
	 */
	double *ms = calloc((size_t)n + 1, sizeof(*ms));
	int k = n < 2 * DENS_DESTROYS ? n / 2 : DENS_DESTROYS;
	for (int i = 0; i < n; i++) {
		if (i == k && n - k > k) {
			struct dens_slice sl[DENS_DESTROY_THREADS];
			pthread_t th[DENS_DESTROY_THREADS];
			for (int t = 0; t < DENS_DESTROY_THREADS; t++) {
				sl[t] = (struct dens_slice){ sb, k + t, n - k, DENS_DESTROY_THREADS };
				if (pthread_create(&th[t], NULL, dens_destroy_slice, &sl[t]) != 0)
					die("thread", SAAS_EIO);
			}
			for (int t = 0; t < DENS_DESTROY_THREADS; t++)
				pthread_join(th[t], NULL);
			i = n - k;
		}
		t0 = now_ms();
		saas_sandbox_destroy(NULL, cloned.client, sb[i]->id, 0);
		ms[i] = now_ms() - t0;
		saas_sandbox_free(sb[i]);
	}
	if (k > 0) {
		res->dens_destroy[0] = pct(ms, k, 0.5);
		res->dens_destroy[1] = pct(ms + n - k, k, 0.5);
	}
	res->dens_destroys = k;
	free(ms);
	free(sb);
	engine_close(&cloned);
}

static int cow_main(const char *dir)
{
	int max = getenv("BENCH_DENSITY_MAX") ? atoi(getenv("BENCH_DENSITY_MAX")) : 1000;
	const char *only = getenv("BENCH_DENSITY");
	bool density = !only || strcmp(only, "only") == 0 || atoi(only) != 0;
	bool cow = !only || strcmp(only, "only") != 0;

	load_now(res->load[0], sizeof(res->load[0]));
	for (int mode = 0; cow && mode < 2; mode++)
		run_child(cow_modes[mode], phase_cow, NULL, mode, dir);
	if (cow && (!res->cow_mapped[0] || res->cow_mapped[1])) {
		fprintf(stderr, "vm_bench: template_memory=mapped did not map here (see the engine's log)\n");
		return 1;
	}
	if (density && max > 0)
		run_child("density", phase_density, NULL, max, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	if (cow) {
		printf("| what, `tiny` | memory mapped by clones | loaded by each clone (same run) |\n|---|---|---|\n");
		printf("| the template's saved state | %.2f MB | %.1f MB |\n", res->cow_state[0] / 1e6,
		       res->cow_state[1] / 1e6);
		printf("| create -> first `true`, clone (%d runs) | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, p95 %.0f ms; "
		       "mapped %.2fx at p50 |\n",
		       runs, res->cow_clone[0][0], res->cow_clone[0][1], res->cow_clone[1][0], res->cow_clone[1][1],
		       res->cow_clone[0][0] / res->cow_clone[1][0]);
		printf("| an idle clone's QEMU (mean of %d, 10 s idle) | RSS %ld MiB, PSS %ld MiB, private %ld MiB | RSS %ld "
		       "MiB, PSS %ld MiB, private %ld MiB |\n",
		       COW_IDLE, res->cow_rss[0] >> 10, res->cow_pss[0] >> 10, res->cow_priv[0] >> 10, res->cow_rss[1] >> 10,
		       res->cow_pss[1] >> 10, res->cow_priv[1] >> 10);
	} else if (density && max > 0) {
		printf("| what, `tiny` | measured | what it costs |\n|---|---|---|\n");
	}
	if (density && max > 0)
		printf("| idle small sandboxes started (measured, mapped) | %d, stopped at: %s | MemAvailable %ld -> %ld MiB: "
		       "%ld MiB per sandbox; RSS %ld MiB, PSS %ld MiB each (mean, 10 s idle); over the next 60 s their QEMUs "
		       "took %.1f%% of one core together (%.3f%% each), the engine (libvirt in it) %.1f%%, the host's %ld "
		       "cores were %.1f%% busy; destroyed one after another, the first %d p50 %.0f ms each, the last %d "
		       "p50 %.0f ms |\n",
		       res->dens_count, res->dens_stop, res->dens_avail0 >> 10, res->dens_avail1 >> 10,
		       res->dens_count ? ((res->dens_avail0 - res->dens_avail1) >> 10) / res->dens_count : 0,
		       res->dens_rss >> 10, res->dens_pss >> 10, res->dens_qemu_cpu,
		       res->dens_count ? res->dens_qemu_cpu / res->dens_count : 0, res->dens_engine_cpu,
		       sysconf(_SC_NPROCESSORS_ONLN), res->dens_host_busy, res->dens_destroys, res->dens_destroy[0],
		       res->dens_destroys, res->dens_destroy[1]);
	return 0;
}

/* ---- --control: a clone's fix-ups over the control port, against over SSH ---- */

static const char *const control_modes[2] = { "on", "off" };

/*
 * One round of one way: n creates of clones of the template, each timed to
 * its first `true`. The first round builds the template (which every later
 * round of either way reuses: control_port is no part of its key).
 */
static void phase_control(char **images, int n, const char *dir)
{
	int mode = n & 1, count = n >> 1, made, port, ssh;

	(void)images;
	control_port = control_modes[mode];
	engine_open(&cloned, "control", dir, true, NULL);
	client = cloned.client;
	if (res->ctl_n[0] + res->ctl_n[1] == 0)
		template_warm("tiny");
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	port = fixups_port;
	ssh = fixups_ssh;
	pthread_mutex_unlock(&log_mu);
	for (int i = 0; i < count && res->ctl_n[mode] < CONTROL_SAMPLES; i++) {
		double t0 = now_ms();
		saas_sandbox *sb = bench_create(cloned.client, "tiny");
		exec_on(cloned.client, sb->id, "true");
		res->ctl_t[mode][res->ctl_n[mode]++] = now_ms() - t0;
		saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	/* A cold boot, or fix-ups that went the other way, would be timed as what they are not. */
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	port = fixups_port - port;
	ssh = fixups_ssh - ssh;
	pthread_mutex_unlock(&log_mu);
	if (made != count || (mode == 0 ? port : ssh) != count) {
		fprintf(stderr, "vm_bench: control_port=%s: %d of %d creates were clones, %d with fix-ups over the port, %d "
		        "over SSH (see the engine's log)\n", control_port, made, count, port, ssh);
		exit(1);
	}
	engine_close(&cloned);
}

/* ---- --spares: clones from a QEMU started ahead, and without ---- */

static const char *const spare_modes[2] = { "1", "0" };
static const char *const exec_modes[2] = { "on", "off" };

enum { KIND_SPARES, KIND_FIRST, KIND_WARM };

/*
 * n: the image's index, the mode (--spares: 0 ahead, 1 none; --first: 0
 * control_exec=on, 1 off; --warm: 0 spare_warm=on, 1 off), the kind and the
 * count: count << 6 | kind << 4 | mode << 3 | image.
 */
static void phase_spares(char **images, int n, const char *dir)
{
	int image = n & 7, mode = n >> 3 & 1, kind = n >> 4 & 3, count = n >> 6, made, ahead;
	bool first = kind != KIND_SPARES; /* both other kinds compare clones from a QEMU started ahead */
	const char *name = images[image];

	spares_opt = first ? "1" : spare_modes[mode];
	control_exec = kind == KIND_FIRST ? exec_modes[mode] : "on";
	spare_warm = kind == KIND_WARM ? exec_modes[mode] : "on";
	engine_open(&cloned, "spares", dir, true, NULL);
	client = cloned.client;
	if (res->sp_n[0][image] + res->sp_n[1][image] == 0) {
		template_warm(name);
	} else {
		/* A new engine starts VMs ahead only for templates a create asked for since it opened: one, untimed. */
		saas_sandbox *sb = bench_create(cloned.client, name);
		saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	ahead = clones_ahead;
	pthread_mutex_unlock(&log_mu);
	for (int i = 0; i < count && res->sp_n[mode][image] < SPARE_SAMPLES; i++) {
		double t0;
		saas_sandbox *sb;
		usleep(SPARE_GAP_MS * 1000);
		/* Ahead: the next is started after the last create's hold; wait for it (a minute at most). */
		for (int w = 0; (mode == 0 || first) && w < 600; w++) {
			bool ready;
			pthread_mutex_lock(&log_mu);
			ready = spares_started > clones_ahead;
			pthread_mutex_unlock(&log_mu);
			if (ready)
				break;
			usleep(100 * 1000);
		}
		t0 = now_ms();
		sb = bench_create(cloned.client, name);
		exec_on(cloned.client, sb->id, "true");
		res->sp_t[mode][image][res->sp_n[mode][image]] = now_ms() - t0;
		t0 = now_ms();
		exec_on(cloned.client, sb->id, "true");
		res->sp_next[mode][image][res->sp_n[mode][image]++] = now_ms() - t0;
		saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	/* A cold boot, or a clone of the other kind, would be timed as what it is not. */
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	ahead = clones_ahead - ahead;
	pthread_mutex_unlock(&log_mu);
	if (made != count || ahead != (mode == 0 || first ? count : 0)) {
		fprintf(stderr, "vm_bench: spares=%s control_exec=%s spare_warm=%s, %s: %d of %d creates were clones, %d of them "
		        "from a QEMU started ahead (see the engine's log)\n", spares_opt, control_exec, spare_warm, name, made,
		        count, ahead);
		exit(1);
	}
	engine_close(&cloned);
}

static int spares_main(const char *dir, char **images, int n, int kind)
{
	static const char *const labels[3][2] = { { "spare", "no spare" }, { "over the port", "over SSH" },
		                                      { "warmed", "not warmed" } };
	int rounds = env_int("BENCH_ROUNDS", 2), per = env_int("BENCH_RUNS", 6);

	load_now(res->load[0], sizeof(res->load[0]));
	for (int i = 0; i < n; i++)
		for (int r = 0; r < rounds; r++)
			for (int mode = 0; mode < 2; mode++)
				run_child(labels[kind][mode], phase_spares, images, per << 6 | kind << 4 | mode << 3 | i, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	if (kind != KIND_SPARES) {
		bool warm = kind == KIND_WARM;
		const char *better = warm ? "warmed" : "over the port";
		printf("| clone started ahead (%d rounds of %d each way, alternating, %.1f s apart) | %s | %s |\n|---|---|---|\n",
		       rounds, per, SPARE_GAP_MS / 1000.0,
		       warm ? "its guest ran once before the create (`spare_warm=on`)"
		            : "commands over the control port, no login (`control_exec=on`)",
		       warm ? "its guest first runs at the create (`spare_warm=off`)"
		            : "the create waits for the SSH login, commands over SSH (`control_exec=off`)");
		for (int i = 0; i < n; i++) {
			double p[2][4];
			for (int mode = 0; mode < 2; mode++) {
				p[mode][0] = pct(res->sp_t[mode][i], res->sp_n[mode][i], 0.5);
				p[mode][1] = pct(res->sp_t[mode][i], res->sp_n[mode][i], 0.95);
				p[mode][2] = pct(res->sp_next[mode][i], res->sp_n[mode][i], 0.5);
				p[mode][3] = pct(res->sp_next[mode][i], res->sp_n[mode][i], 0.95);
			}
			printf("| `%s`: create -> first `true` | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, p95 %.0f ms; %s %.2fx at "
			       "p50 |\n",
			       images[i], p[0][0], p[0][1], p[1][0], p[1][1], better, p[0][0] / p[1][0]);
			printf("| `%s`: the next `true` | p50 %.1f ms, p95 %.1f ms | p50 %.1f ms, p95 %.1f ms; %s %.2fx at p50 "
			       "|\n",
			       images[i], p[0][2], p[0][3], p[1][2], p[1][3], better, p[0][2] / p[1][2]);
		}
		return 0;
	}
	printf("| create -> first `true`, clone (%d rounds of %d each way, alternating, %.1f s apart) | its QEMU started "
	       "ahead (`spares=1`) | made whole (`spares=0`, same run, same template) |\n|---|---|---|\n",
	       rounds, per, SPARE_GAP_MS / 1000.0);
	for (int i = 0; i < n; i++) {
		double p[2][2];
		for (int mode = 0; mode < 2; mode++) {
			p[mode][0] = pct(res->sp_t[mode][i], res->sp_n[mode][i], 0.5);
			p[mode][1] = pct(res->sp_t[mode][i], res->sp_n[mode][i], 0.95);
		}
		printf("| `%s` | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, p95 %.0f ms; started ahead %.2fx at p50 |\n",
		       images[i], p[0][0], p[0][1], p[1][0], p[1][1], p[0][0] / p[1][0]);
	}
	return 0;
}

static int control_main(const char *dir)
{
	int rounds = env_int("BENCH_ROUNDS", 2), per = env_int("BENCH_RUNS", 10);
	double p[2][2];

	load_now(res->load[0], sizeof(res->load[0]));
	for (int r = 0; r < rounds; r++)
		for (int mode = 0; mode < 2; mode++)
			run_child(control_modes[mode], phase_control, NULL, per << 1 | mode, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	for (int mode = 0; mode < 2; mode++) {
		p[mode][0] = pct(res->ctl_t[mode], res->ctl_n[mode], 0.5);
		p[mode][1] = pct(res->ctl_t[mode], res->ctl_n[mode], 0.95);
	}
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	printf("| what, `tiny` | fix-ups over the control port | over SSH as root (same run, same template) |\n"
	       "|---|---|---|\n");
	printf("| create -> first `true`, clone (%d rounds of %d, alternating) | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, "
	       "p95 %.0f ms; the port %.2fx at p50 |\n",
	       rounds, per, p[0][0], p[0][1], p[1][0], p[1][1], p[0][0] / p[1][0]);
	return 0;
}

/* ---- --burst: creates at once, with what the driver can have ready for them ---- */

/*
 * The ways of a --burst run: [0] the defaults, the burst right after the first create, [1] the same but
 * libvirt reading each started guest's CPU property by property (cpu_readback=properties, what every start
 * cost before), [2] spares=16, [3] a warm pool as large as the burst, [4] the defaults, the burst once the
 * creates paused for spare_idle (2 minutes) and the spares it keeps were made.
 */
static const char *const burst_ways[BURST_WAYS] = { "the defaults (`spares=auto`), right after the first create",
	                                            "the same but `cpu_readback=properties`",
	                                            "`spares=16`, all started before", "a warm pool of the burst's size",
	                                            "the defaults, after 2 minutes without a create (`spare_idle`)" };

static uint64_t pool_claims(void)
{
	saas_engine_stats *st = NULL;
	uint64_t n = 0;

	if (saas_engine_stats_get(&st, pool.engine) == SAAS_OK)
		n = st->pool_claims;
	saas_engine_stats_free(st);
	return n;
}

/* Where a burst's CPU went, on stderr: the host busy, this process's share, the rest (the QEMUs, others). */
/* From before to now (marked by at_once_ms). */
static void cpu_say(const struct cpu_at *before, const struct cpu_at *now_at, const char *what, double wall_ms)
{
	double hz = (double)sysconf(_SC_CLK_TCK), busy_s, self_s;

	busy_s = (double)(now_at->busy - before->busy) / hz;
	self_s = now_at->self_s - before->self_s;
	fprintf(stderr, "vm_bench: %s: %.1f s; the host busy %.0f%% (%.1f CPU-s), the engine and libvirt %.1f CPU-s, "
	        "the rest (QEMUs, others) %.1f CPU-s\n", what, wall_ms / 1000,
	        now_at->all > before->all ? 100.0 * (double)(now_at->busy - before->busy) / (double)(now_at->all - before->all) : 0,
	        busy_s, self_s, busy_s - self_s);
	if (getenv("BENCH_BURST_THREADS")) {
		/* By name: what each process took since (a new one all it took), this one's reaped children apart. */
		char names[64][20];
		double sum[64] = { 0 };
		int nn = 0;
		for (int i = 0; i < now_at->npid; i++) {
			double was = 0;
			int k;
			for (int j = 0; j < before->npid; j++)
				if (before->pid[j] == now_at->pid[i]) /* a kworker's name changes with its work */
					was = before->cpu[j];
			if (now_at->cpu[i] - was < 0.005)
				continue; /* idle: the names are kept for those that ran */
			for (k = 0; k < nn && strcmp(names[k], now_at->comm[i]) != 0; k++)
				;
			if (k == nn && nn < 64)
				snprintf(names[nn++], sizeof(names[0]), "%s", now_at->comm[i]);
			if (k < 64)
				sum[k] += now_at->cpu[i] - was;
		}
		fprintf(stderr, "vm_bench: its reaped children %.1f CPU-s; by process name (0.2 CPU-s or more):",
		        now_at->children_s - before->children_s);
		for (int k = 0; k < nn; k++)
			if (sum[k] >= 0.2)
				fprintf(stderr, " %s %.1f;", names[k], sum[k]);
		fprintf(stderr, "\n");
	}
}

static void phase_burst(char **images, int way, const char *dir)
{
	struct bench_engine *b = way == 3 ? &pool : &cloned;
	char spec[128];
	int made, ahead, i = res->bu_n[way];
	uint64_t claims = 0;
	double ms, median;
	static struct cpu_at cpu, cpu_end;

	snprintf(spec, sizeof(spec), "small:%s=%d", images[0], at_once);
	spares_opt = way == 2 ? "16" : NULL; /* NULL: the driver's default */
	cpu_readback = way == 1 ? "properties" : NULL;
	/* The pool's full count and the burst's sandboxes together, against a budget that would refuse some. */
	disk_budget_gb = (unsigned int)(2 * at_once + 8) * 160;
	engine_open(b, "burst", dir, true, way == 3 ? spec : NULL);
	client = b->client;
	if (way == 3) {
		wait_until(pool_holds, at_once, "the pool filling up");
		claims = pool_claims();
	} else {
		/* The first create builds the template (or finds it) and asks for it: spares follow. */
		saas_sandbox *sb = bench_create(b->client, images[0]);
		saas_sandbox_destroy(NULL, b->client, sb->id, 0);
		saas_sandbox_free(sb);
		/* [4]: the driver's quiet spell (spare_idle, 120 s) passes, then its spare_idle_count (16) are made. */
		wait_until(spares_at_least, way == 2 || way == 4 ? 16 : 1, "the QEMUs started ahead");
	}
	sleep(3); /* past the driver's hold after a start */
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	ahead = clones_ahead;
	pthread_mutex_unlock(&log_mu);
	cpu_mark(&cpu);
	at_once_cpu = &cpu_end;
	ms = at_once_ms(b, images[0], at_once, &median);
	at_once_cpu = NULL;
	cpu_say(&cpu, &cpu_end, burst_ways[way], ms);
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	ahead = clones_ahead - ahead;
	pthread_mutex_unlock(&log_mu);
	if (way == 3) {
		/* Every create a claim; the refill's clones, made meanwhile, are not the burst's. */
		made = ahead = (int)(pool_claims() - claims);
	}
	if (made != at_once) {
		fprintf(stderr, "vm_bench: --burst, %s: %d of %d creates were clones or claims (see the engine's log)\n",
		        burst_ways[way], made, at_once);
		exit(1);
	}
	res->bu_all[way][i] = ms;
	res->bu_p50[way][i] = median;
	res->bu_ahead[way][i] = ahead;
	res->bu_n[way]++;
	engine_close(b);
}

static int burst_main(const char *dir, const char *image)
{
	int rounds = env_int("BENCH_ROUNDS", 2);
	char *images[1] = { (char *)image };

	load_now(res->load[0], sizeof(res->load[0]));
	for (int r = 0; r < rounds && r < SPARE_SAMPLES; r++)
		for (int way = 0; way < BURST_WAYS; way++)
			if (!getenv("BENCH_BURST_WAYS") || strchr(getenv("BENCH_BURST_WAYS"), '0' + way))
				run_child(burst_ways[way], phase_burst, images, way, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	printf("| %d creates of `%s` at once (%d rounds, alternating) | all ran `true` (each round) | the median create "
	       "(each round) | served by a VM made ahead (each round) |\n|---|---|---|---|\n",
	       at_once, image, rounds);
	for (int way = 0; way < BURST_WAYS; way++) {
		char all[512] = "", mid[512] = "", ahead[256] = "";
		for (int r = 0; r < res->bu_n[way]; r++) {
			snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%.1f s", r ? ", " : "",
			         res->bu_all[way][r] / 1000);
			snprintf(mid + strlen(mid), sizeof(mid) - strlen(mid), "%s%.1f s", r ? ", " : "",
			         res->bu_p50[way][r] / 1000);
			snprintf(ahead + strlen(ahead), sizeof(ahead) - strlen(ahead), "%s%d", r ? ", " : "",
			         res->bu_ahead[way][r]);
		}
		printf("| %s | %s | %s | %s of %d |\n", burst_ways[way], all, mid, ahead, at_once);
	}
	return 0;
}

/* ---- --adapt: the driver's defaults against spaced, back-to-back and burst creates ---- */

/* VMs started ahead and not taken, as the log tells (destroyed ones aside: this run destroys none but by taking). */
static int spares_unused(void)
{
	int n;

	pthread_mutex_lock(&log_mu);
	n = spares_started - clones_ahead;
	pthread_mutex_unlock(&log_mu);
	return n;
}

/* Until the count of VMs started ahead has not grown for settle_s seconds, max_s at most. */
static void spares_settle(int settle_s, int max_s)
{
	int last = -1, same = 0;

	for (int i = 0; i < max_s * 10 && same < settle_s * 10; i++) {
		int n = spares_unused();
		same = n == last ? same + 1 : 0;
		last = n;
		usleep(100 * 1000);
	}
}

static void phase_adapt(char **images, int n, const char *dir)
{
	const char *image = images[0];
	int spaced = env_int("BENCH_SPACED", 4), made, ahead;

	(void)n;
	spares_opt = getenv("BENCH_SPARES"); /* unset: the driver's default, what the run compares */
	if (getenv("BENCH_SPARE_WARM"))
		spare_warm = getenv("BENCH_SPARE_WARM"); /* on or off: the driver option spare_warm */
	disk_budget_gb = (unsigned int)(at_once + 8) * 160;
	engine_open(&cloned, "adapt", dir, true, NULL);
	client = cloned.client;
	template_warm(image);
	spares_settle(5, 120);
	/* Spaced: each create after the VM started ahead for it, SPARE_GAP_MS after the last. */
	for (int i = 0; i < spaced && i < SPARE_SAMPLES; i++) {
		double t0;
		saas_sandbox *sb;
		usleep(SPARE_GAP_MS * 1000);
		for (int w = 0; w < 600 && spares_unused() < 1; w++)
			usleep(100 * 1000);
		t0 = now_ms();
		sb = bench_create(cloned.client, image);
		exec_on(cloned.client, sb->id, "true");
		res->ad_spaced[res->ad_nspaced++] = now_ms() - t0;
		saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	/* Back to back: each create as soon as the last ran `true` and was destroyed, as vm_bench's default run. */
	spares_settle(3, 60);
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	ahead = clones_ahead;
	pthread_mutex_unlock(&log_mu);
	for (int i = 0; i < runs && i < SPARE_SAMPLES; i++) {
		double t0 = now_ms();
		saas_sandbox *sb = bench_create(cloned.client, image);
		exec_on(cloned.client, sb->id, "true");
		res->ad_b2b[res->ad_nb2b++] = now_ms() - t0;
		saas_sandbox_destroy(NULL, cloned.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	res->ad_b2b_ahead = clones_ahead - ahead;
	pthread_mutex_unlock(&log_mu);
	if (made != res->ad_nb2b) {
		fprintf(stderr, "vm_bench: --adapt: %d of %d creates back to back were clones (see the engine's log)\n", made,
		        res->ad_nb2b);
		exit(1);
	}
	/* Two bursts, each once the VMs started ahead stopped coming: the first unforeseen, the second after one. */
	for (int b = 0; b < 2; b++) {
		spares_settle(10, 180);
		res->ad_ready_before[b] = spares_unused();
		pthread_mutex_lock(&log_mu);
		ahead = clones_ahead;
		pthread_mutex_unlock(&log_mu);
		res->ad_burst[b][0] = at_once_ms(&cloned, image, at_once, &res->ad_burst[b][1]);
		pthread_mutex_lock(&log_mu);
		res->ad_burst_ahead[b] = clones_ahead - ahead;
		pthread_mutex_unlock(&log_mu);
	}
	engine_close(&cloned);
}

static int adapt_main(const char *dir, const char *image, const char *label)
{
	char *images[1] = { (char *)image };

	load_now(res->load[0], sizeof(res->load[0]));
	run_child("adapt", phase_adapt, images, 1, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("| %s | %s | p50 %.0f ms, p95 %.0f ms | p50 %.0f ms, p95 %.0f ms (%.2fx spaced); %d of %d started ahead | "
	       "%.1f s (median %.1f s), %d of %d started ahead (%d ready before) | %.1f s (median %.1f s), %d of %d started "
	       "ahead (%d ready before) | %s -> %s |\n",
	       label, image, pct(res->ad_spaced, res->ad_nspaced, 0.5), pct(res->ad_spaced, res->ad_nspaced, 0.95),
	       pct(res->ad_b2b, res->ad_nb2b, 0.5), pct(res->ad_b2b, res->ad_nb2b, 0.95),
	       pct(res->ad_b2b, res->ad_nb2b, 0.5) / pct(res->ad_spaced, res->ad_nspaced, 0.5), res->ad_b2b_ahead,
	       res->ad_nb2b, res->ad_burst[0][0] / 1000, res->ad_burst[0][1] / 1000, res->ad_burst_ahead[0], at_once,
	       res->ad_ready_before[0], res->ad_burst[1][0] / 1000, res->ad_burst[1][1] / 1000, res->ad_burst_ahead[1],
	       at_once, res->ad_ready_before[1], res->load[0], res->load[1]);
	return 0;
}

/* ---- --snapshot: fork, pause and resume through the engine ---- */

static bool was_clone(const char *name);

/* The size --snapshot measures ("small" in name, 2 vCPUs, 40 GiB disk; BENCH_SNAPSHOT_MB of RAM). */
static void snapshot_size(void)
{
	/*
	 * A fork's children and a resumed sandbox load their RAM from the
	 * snapshot: where the host's kernel backs every page QEMU reads at
	 * restore (bench/RESULTS.md), each holds its whole memory, and ten
	 * children of `small` (4 GiB) would not fit in 23 GiB: the engine refuses
	 * the fork. BENCH_SNAPSHOT_MB (default 1024) sets the guest RAM of the
	 * size measured here.
	 */
	static saas_size size = { "small", 2, 1024, 40, 90000 };
	static const saas_size *sizes[] = { &size };

	if (getenv("BENCH_SNAPSHOT_MB") && atoi(getenv("BENCH_SNAPSHOT_MB")) > 0)
		size.memory_mb = (unsigned int)atoi(getenv("BENCH_SNAPSHOT_MB"));
	bench_sizes = sizes;
	bench_nsizes = 1;
}

/*
 * The second baseline of a fork of one: clones made whole at their creates
 * (spares=0: each QEMU started at the create, as a fork's child's is), in an
 * engine of their own (a process may open one embedded libvirt root).
 */
static void phase_snapshot_whole(char **images, int n, const char *dir)
{
	double *whole_t = calloc((size_t)runs, sizeof(double));

	(void)n;
	snapshot_size();
	spares_opt = "0";
	engine_open(&cloned, "snapshot-whole", dir, true, NULL);
	client = cloned.client;
	template_warm(images[0]);
	for (int i = 0; i < runs; i++) {
		double t0 = now_ms();
		saas_sandbox *c = bench_create(client, images[0]);
		exec_ok(c->id, "true");
		whole_t[i] = now_ms() - t0;
		if (!was_clone(c->id)) {
			fprintf(stderr, "vm_bench: %s was not a clone (see the engine's log)\n", c->id);
			exit(1);
		}
		saas_sandbox_destroy(NULL, client, c->id, 0);
		saas_sandbox_free(c);
	}
	res->snap_whole[0] = pct(whole_t, runs, 0.5);
	res->snap_whole[1] = pct(whole_t, runs, 0.95);
	free(whole_t);
	engine_close(&cloned);
}

/*
 * The sandbox a snapshot is taken of is not a fresh one: it holds a 16 MiB
 * file, a background process and a warm page cache, as a prepared sandbox an
 * agent forks or pauses would.
 */
#define SNAP_PREPARE                                                                                \
	"head -c 16777216 /dev/urandom > /tmp/prepared && sha256sum /tmp/prepared > /tmp/prepared.sum && " \
	"{ sleep 100000 > /dev/null 2>&1 & echo $! > /tmp/prepared.pid; }"

struct runner {
	const char *id;
	double done_ms;
};

static double run_t0;

static void *run_true(void *arg)
{
	struct runner *r = arg;

	exec_ok(r->id, "true");
	r->done_ms = now_ms() - run_t0;
	return NULL;
}

/* `true` in every sandbox of a list at once; ms from t0 until the last ran it. */
static double all_run_true(saas_sandbox_list *l, double t0)
{
	struct runner r[SAAS_FORK_MAX];
	pthread_t t[SAAS_FORK_MAX];
	double last = 0;

	run_t0 = t0;
	for (size_t i = 0; i < l->count; i++) {
		r[i].id = l->items[i]->id;
		pthread_create(&t[i], NULL, run_true, &r[i]);
	}
	for (size_t i = 0; i < l->count; i++) {
		pthread_join(t[i], NULL);
		if (r[i].done_ms > last)
			last = r[i].done_ms;
	}
	return last;
}

static void destroy_all(saas_sandbox_list *l)
{
	for (size_t i = 0; i < l->count; i++)
		saas_sandbox_destroy(NULL, client, l->items[i]->id, 0);
	saas_sandbox_list_free(l);
}

/* Fork count children of parent: ms from the call until every child ran `true`. */
static double fork_ms(const char *parent, unsigned int count)
{
	saas_sandbox_list *l = NULL;
	double t0 = now_ms(), ms;
	int rc;

	if ((rc = saas_sandbox_fork(&l, client, parent, count, NULL, 0)) < 0)
		die("fork", rc);
	if (l->count != count) {
		fprintf(stderr, "vm_bench: a fork of %u made %zu\n", count, l->count);
		exit(1);
	}
	ms = all_run_true(l, t0);
	destroy_all(l);
	return ms;
}

static void phase_snapshot(char **images, int n, const char *dir)
{
	int forks10 = getenv("BENCH_FORK10") && atoi(getenv("BENCH_FORK10")) > 0 ? atoi(getenv("BENCH_FORK10")) : 1;
	double *clone_t = calloc((size_t)runs, sizeof(double)), *fork_t = calloc((size_t)runs, sizeof(double));
	double *pause_t = calloc((size_t)runs, sizeof(double)), *resume_t = calloc((size_t)runs, sizeof(double));
	double t10 = 0;
	saas_sandbox *sb;

	snapshot_size();
	(void)n;
	engine_open(&cloned, "snapshot", dir, true, NULL);
	client = cloned.client;
	template_warm(images[0]);
	sb = bench_create(client, images[0]);
	exec_ok(sb->id, SNAP_PREPARE);
	{
		saas_account_info *ai = NULL;
		int rc = saas_account_info_get(&ai, client);
		if (rc < 0)
			die("account info", rc);
		for (size_t i = 0; i < ai->nsizes; i++)
			if (strcmp(ai->sizes[i]->name, sb->size) == 0)
				res->snap_memory_mb = ai->sizes[i]->memory_mb;
		saas_account_info_free(ai);
	}
	/*
	 * Each run: a clone's create (the baseline), a fork of one, a pause and
	 * a resume of the same prepared sandbox, in turn, so that a load that
	 * changes weighs on all four alike.
	 */
	for (int i = 0; i < runs; i++) {
		double t0 = now_ms();
		saas_sandbox *c = bench_create(client, images[0]), *p = NULL;
		int rc;
		exec_ok(c->id, "true");
		clone_t[i] = now_ms() - t0;
		saas_sandbox_destroy(NULL, client, c->id, 0);
		saas_sandbox_free(c);
		/*
		 * Untimed: the VM started ahead that the clone took is made again
		 * first, so that the fork shares the CPUs with no make of one (the
		 * made-whole baseline's engine has none: spares=0).
		 */
		wait_until(spares_at_least, 1, "a VM started ahead again");
		fork_t[i] = fork_ms(sb->id, 1);
		t0 = now_ms();
		if ((rc = saas_sandbox_pause(&p, client, sb->id, 0)) < 0)
			die("pause", rc);
		pause_t[i] = now_ms() - t0;
		saas_sandbox_free(p);
		p = NULL;
		t0 = now_ms();
		if ((rc = saas_sandbox_resume(&p, client, sb->id, 0)) < 0)
			die("resume", rc);
		exec_ok(sb->id, "true");
		resume_t[i] = now_ms() - t0;
		saas_sandbox_free(p);
	}
	/* What was prepared survived every pause, resume and fork. */
	exec_ok(sb->id, "sha256sum -c /tmp/prepared.sum > /dev/null && kill -0 $(cat /tmp/prepared.pid)");
	pthread_mutex_lock(&log_mu);
	res->snap_pause_bytes = paused_bytes;
	pthread_mutex_unlock(&log_mu);
	for (int i = 0; i < forks10; i++) {
		double ms = fork_ms(sb->id, SAAS_FORK_MAX);
		if (ms > t10)
			t10 = ms;
	}
	res->snap_fork10 = t10;
	res->snap_fork10_runs = forks10;
	/* The baseline of a fork of ten: ten clones of the template created at once. */
	res->snap_at_once10 = at_once_ms(&cloned, images[0], SAAS_FORK_MAX, NULL);
	res->snap_runs = runs;
	res->snap_clone[0] = pct(clone_t, runs, 0.5);
	res->snap_clone[1] = pct(clone_t, runs, 0.95);
	res->snap_fork1[0] = pct(fork_t, runs, 0.5);
	res->snap_fork1[1] = pct(fork_t, runs, 0.95);
	res->snap_pause[0] = pct(pause_t, runs, 0.5);
	res->snap_pause[1] = pct(pause_t, runs, 0.95);
	res->snap_resume[0] = pct(resume_t, runs, 0.5);
	res->snap_resume[1] = pct(resume_t, runs, 0.95);
	saas_sandbox_destroy(NULL, client, sb->id, 0);
	saas_sandbox_free(sb);
	free(clone_t);
	free(fork_t);
	free(pause_t);
	free(resume_t);
	engine_close(&cloned);
}

static int snapshot_main(const char *dir, char *image)
{
	double per_gib;

	load_now(res->load[0], sizeof(res->load[0]));
	run_child("snapshot-whole", phase_snapshot_whole, &image, 1, dir);
	run_child("snapshot", phase_snapshot, &image, 1, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	per_gib = res->snap_memory_mb ? res->snap_pause_bytes / (res->snap_memory_mb / 1024.0) : 0;
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	printf("| what, `%s`, 2 vCPUs, %u MiB of guest RAM | libsaas | baseline (same run) |\n|---|---|---|\n", image,
	       res->snap_memory_mb);
	printf("| fork of 1: the call until the child ran `true` (%d runs) | p50 %.0f ms, p95 %.0f ms | a clone of the "
	       "template, create -> first `true`, its QEMU started ahead (`spares=1`): p50 %.0f ms, p95 %.0f ms; fork "
	       "%.2fx at p50. A clone made whole at its create (`spares=0`, its QEMU started then, as a child's is; %d "
	       "runs just before): p50 %.0f ms, p95 %.0f ms; fork %.2fx at p50 |\n",
	       res->snap_runs, res->snap_fork1[0], res->snap_fork1[1], res->snap_clone[0], res->snap_clone[1],
	       res->snap_fork1[0] / res->snap_clone[0], res->snap_runs, res->snap_whole[0], res->snap_whole[1],
	       res->snap_fork1[0] / res->snap_whole[0]);
	printf("| fork of %d: the call until every child ran `true` (slowest of %d) | %.0f ms | %d clones of the template "
	       "created at once, until all ran `true`: %.0f ms; fork %.2fx |\n",
	       SAAS_FORK_MAX, res->snap_fork10_runs, res->snap_fork10, SAAS_FORK_MAX, res->snap_at_once10,
	       res->snap_fork10 / res->snap_at_once10);
	printf("| pause: the call (%d runs) | p50 %.0f ms, p95 %.0f ms; %.1f MiB saved (state and disk), %.1f MiB per GiB "
	       "of guest RAM | |\n",
	       res->snap_runs, res->snap_pause[0], res->snap_pause[1], res->snap_pause_bytes / 1048576.0,
	       per_gib / 1048576.0);
	printf("| resume: the call until `true` ran (%d runs) | p50 %.0f ms, p95 %.0f ms | a clone of the template, create "
	       "-> first `true`: p50 %.0f ms; resume %.2fx at p50 |\n",
	       res->snap_runs, res->snap_resume[0], res->snap_resume[1], res->snap_clone[0],
	       res->snap_resume[0] / res->snap_clone[0]);
	return 0;
}

/* ---- --pool: a claim from a full pool, its first command, and the next ---- */

#define POOL_COLD_MAX 20 /* --pool: claims of VMs booted cold, at most, before the template must be ready */

/* Was the VM of this name made a clone (the engine said so)? */
static bool was_clone(const char *name)
{
	bool found = false;

	pthread_mutex_lock(&log_mu);
	for (int i = 0; i < CLONE_NAMES && i < clone_names_n && !found; i++)
		found = strcmp(clone_names[i], name) == 0;
	pthread_mutex_unlock(&log_mu);
	return found;
}

/* Wait until every pool is full and its refill idle: the claim is measured alone, not beside a refill. */
static void pool_full(void)
{
	for (int i = 0; i < 6000; i++) {
		saas_engine_stats *st = NULL;
		bool full = false;
		if (saas_engine_stats_get(&st, pool.engine) == SAAS_OK)
			full = st->pool_ready == st->pool_target;
		saas_engine_stats_free(st);
		if (full)
			return;
		usleep(100 * 1000);
	}
	fprintf(stderr, "vm_bench: the pool did not fill in 10 minutes\n");
	exit(1);
}

static void phase_pool_only(char **images, int i, const char *dir)
{
	double *claim = calloc((size_t)runs, sizeof(double)), *first = calloc((size_t)runs, sizeof(double));
	double *next = calloc((size_t)runs, sizeof(double)), cold_first[POOL_COLD_MAX], cold_next[POOL_COLD_MAX];
	char spec[128];

	snprintf(spec, sizeof(spec), "small:%s=2", images[i]);
	engine_open(&pool, "pool", dir, true, spec);
	/*
	 * Only claims of clones count: until the image's template is ready the
	 * pool is filled by cold boots, whose commands go over the SSH session
	 * their boot waited for unless the command is plain. Those are timed
	 * apart (a row of their own), so that the clones come next (at most
	 * POOL_COLD_MAX of them).
	 */
	for (int r = 0; r < runs;) {
		double t0, t1, t2;
		saas_sandbox *sb;
		pool_full();
		t0 = now_ms();
		sb = bench_create(pool.client, images[i]);
		t1 = now_ms();
		exec_on(pool.client, sb->id, "true");
		t2 = now_ms();
		exec_on(pool.client, sb->id, "true");
		if (was_clone(sb->id)) {
			claim[r] = t1 - t0;
			first[r] = t2 - t0;
			next[r] = now_ms() - t2;
			r++;
		} else if (res->pl_cold[i] < POOL_COLD_MAX) {
			cold_first[res->pl_cold[i]] = t2 - t0;
			cold_next[res->pl_cold[i]++] = now_ms() - t2;
		} else {
			fprintf(stderr, "vm_bench: %d claims of VMs not cloned: the %s template is not ready\n", POOL_COLD_MAX,
			        images[i]);
			exit(1);
		}
		saas_sandbox_destroy(NULL, pool.client, sb->id, 0);
		saas_sandbox_free(sb);
	}
	if (res->pl_cold[i]) {
		res->pl_cold_first[i][0] = pct(cold_first, res->pl_cold[i], 0.5);
		res->pl_cold_first[i][1] = pct(cold_first, res->pl_cold[i], 0.95);
		res->pl_cold_next[i][0] = pct(cold_next, res->pl_cold[i], 0.5);
		res->pl_cold_next[i][1] = pct(cold_next, res->pl_cold[i], 0.95);
	}
	res->pl_claim[i][0] = pct(claim, runs, 0.5);
	res->pl_claim[i][1] = pct(claim, runs, 0.95);
	res->pl_first[i][0] = pct(first, runs, 0.5);
	res->pl_first[i][1] = pct(first, runs, 0.95);
	res->pl_next[i][0] = pct(next, runs, 0.5);
	res->pl_next[i][1] = pct(next, runs, 0.95);
	free(claim);
	free(first);
	free(next);
	engine_close(&pool);
}

static int pool_main(const char *dir, char **images, int n)
{
	load_now(res->load[0], sizeof(res->load[0]));
	for (int i = 0; i < n; i++)
		run_child("pool", phase_pool_only, images, i, dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	printf("| what (%d runs each, clones only, a full pool of 2 before each) | libsaas | baseline (same run, same sandbox) |\n"
	       "|---|---|---|\n", runs);
	for (int i = 0; i < n; i++) {
		printf("| create -> first `true`, `%s`, warm pool | p50 %.0f ms, p95 %.0f ms (the claim alone: p50 %.0f ms) | "
		       "its next `true`: p50 %.0f ms, p95 %.0f ms; the first %.2fx the next at p50 |\n",
		       images[i], res->pl_first[i][0], res->pl_first[i][1], res->pl_claim[i][0], res->pl_next[i][0],
		       res->pl_next[i][1], res->pl_first[i][0] / res->pl_next[i][0]);
		if (res->pl_cold[i])
			printf("| the same, pooled VMs booted cold before the template was ready (%d runs) | p50 %.0f ms, "
			       "p95 %.0f ms | its next `true`: p50 %.0f ms, p95 %.0f ms; the first %.2fx the next at p50 |\n",
			       res->pl_cold[i], res->pl_cold_first[i][0], res->pl_cold_first[i][1], res->pl_cold_next[i][0],
			       res->pl_cold_next[i][1], res->pl_cold_first[i][0] / res->pl_cold_next[i][0]);
	}
	return 0;
}

/* ---- --stream: output as it happens, and the terminal ---- */

#define STREAM_ROUNDS 50
#define STREAM_BIG "head -c 100000000 /dev/zero"
#define STREAM_BIG_RUNS 1  /* 100 MB through TCG takes minutes */

struct first_byte {
	double t0, first;
	uint64_t bytes;
};

static int on_chunk(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct first_byte *f = ud;

	(void)stream, (void)offset, (void)data;
	if (!f->first)
		f->first = now_ms() - f->t0;
	f->bytes += len;
	return 0;
}

/* A streamed run of cmd: the first byte's time (ms), and the whole's; *bytes delivered. */
static double stream_run(const char *id, const char *cmd, double *whole, uint64_t *bytes)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	struct first_byte f = { now_ms(), 0, 0 };
	saas_execution *x = NULL;
	int rc;

	cb.output = on_chunk;
	cb.userdata = &f;
	o.timeout_s = SAAS_EXEC_TIMEOUT_MAX; /* 100 MB through TCG on a loaded host can take minutes */
	if ((rc = saas_exec_stream(&x, client, id, cmd, &o, &cb, 0)) < 0)
		die(cmd, rc);
	if (x->status != SAAS_EXEC_EXITED || x->exit_code != 0) {
		fprintf(stderr, "vm_bench: '%s' did not exit 0 (status %d, %s)\n", cmd, (int)x->status, x->error ? x->error : "");
		exit(1);
	}
	*whole = now_ms() - f.t0;
	*bytes = f.bytes;
	saas_execution_free(x);
	return f.first;
}

static void pty_echo(const char *id, double *samples, int rounds)
{
	saas_pty *t = NULL;
	char buf[4096];
	size_t got;
	int rc;

	if ((rc = saas_pty_open(&t, client, id, NULL, 0)) < 0)
		die("pty", rc);
	/* Past the login's output: a marker echoed back, then quiet. */
	saas_pty_write(t, "stty -icanon; echo ready\r", 25);
	for (int quiet = 0; quiet < 3;)
		quiet = saas_pty_read(t, buf, sizeof(buf), &got, 300) == SAAS_ETIMEOUT ? quiet + 1 : 0;
	for (int i = 0; i < rounds; i++) {
		double t0 = now_ms();
		saas_pty_write(t, "x", 1);
		do
			if ((rc = saas_pty_read(t, buf, sizeof(buf), &got, 10000)) < 0 || !got)
				die("pty echo", rc < 0 ? rc : SAAS_EIO);
		while (!memchr(buf, 'x', got));
		samples[i] = now_ms() - t0;
	}
	saas_pty_close(t, NULL);
}

static void phase_stream(char **images, int n, const char *dir)
{
	double plain[STREAM_ROUNDS], first[STREAM_ROUNDS], echo[STREAM_ROUNDS], whole, t0;
	double streamed[STREAM_BIG_RUNS], collected[STREAM_BIG_RUNS];
	uint64_t bytes;
	saas_sandbox *sb;

	(void)images, (void)n;
	engine_open(&cold, "stream", dir, false, NULL);
	client = cold.client;
	sb = bench_create(client, "tiny");
	exec_ok(sb->id, "echo warm");
	/* Interleaved, so that a load that changes weighs on both alike. */
	for (int i = 0; i < STREAM_ROUNDS; i++) {
		t0 = now_ms();
		exec_ok(sb->id, "echo x");
		plain[i] = now_ms() - t0;
		first[i] = stream_run(sb->id, "echo x", &whole, &bytes);
	}
	pty_echo(sb->id, echo, STREAM_ROUNDS);
	row("| streaming exec, `echo x`: first byte (%d runs) | median %.1f ms, p95 %.1f ms | plain exec round trip: "
	    "median %.1f ms, p95 %.1f ms; ratio %.2fx |\n",
	    STREAM_ROUNDS, pct(first, STREAM_ROUNDS, 0.5), pct(first, STREAM_ROUNDS, 0.95), pct(plain, STREAM_ROUNDS, 0.5),
	    pct(plain, STREAM_ROUNDS, 0.95), pct(first, STREAM_ROUNDS, 0.5) / pct(plain, STREAM_ROUNDS, 0.5));
	row("| terminal keystroke echo round trip (%d keys) | median %.1f ms, p95 %.1f ms | plain exec round trip: "
	    "median %.1f ms; ratio %.2fx |\n",
	    STREAM_ROUNDS, pct(echo, STREAM_ROUNDS, 0.5), pct(echo, STREAM_ROUNDS, 0.95), pct(plain, STREAM_ROUNDS, 0.5),
	    pct(echo, STREAM_ROUNDS, 0.5) / pct(plain, STREAM_ROUNDS, 0.5));
	fputs(res->rows, stderr); /* what is measured so far, should the rest fail */
	for (int i = 0; i < STREAM_BIG_RUNS; i++) {
		saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
		saas_execution *x = NULL;
		int rc;
		stream_run(sb->id, STREAM_BIG, &streamed[i], &bytes);
		if (bytes != 100000000) {
			fprintf(stderr, "vm_bench: streamed %llu bytes of 100000000\n", (unsigned long long)bytes);
			exit(1);
		}
		o.max_output = SAAS_EXEC_OUTPUT_MAX;
		o.timeout_s = SAAS_EXEC_TIMEOUT_MAX;
		t0 = now_ms();
		if ((rc = saas_exec(&x, client, sb->id, STREAM_BIG, &o, 0)) < 0)
			die("collect", rc);
		collected[i] = now_ms() - t0;
		saas_execution_free(x);
	}
	row("| 100 MB of stdout streamed, every byte to a callback (%d runs) | median %.0f ms (%.2f MB/s) | collected by "
	    "saas_exec (keeps 16 MiB, reads all): median %.0f ms (%.2f MB/s); ratio %.2fx |\n",
	    STREAM_BIG_RUNS, pct(streamed, STREAM_BIG_RUNS, 0.5), 1e5 / pct(streamed, STREAM_BIG_RUNS, 0.5),
	    pct(collected, STREAM_BIG_RUNS, 0.5), 1e5 / pct(collected, STREAM_BIG_RUNS, 0.5),
	    pct(streamed, STREAM_BIG_RUNS, 0.5) / pct(collected, STREAM_BIG_RUNS, 0.5));
	saas_sandbox_destroy(NULL, client, sb->id, 0);
	saas_sandbox_free(sb);
	engine_close(&cold);
}

/* ---- --transport: exec and files only ---- */

static void phase_transport(char **images, int n, const char *dir)
{
	char key[4300];
	saas_sandbox *sb;
	unsigned int port = 0;

	(void)images;
	engine_open(&cold, "transport", dir, false, NULL);
	client = cold.client;
	state_dir = cold.dir;
	snprintf(key, sizeof(key), "%s/libvirt/id_ed25519", cold.dir);
	sb = bench_create(cold.client, "tiny");
	qemu_of(sb->id, &port);
	for (int i = 0; i < n; i++) {
		bench_exec(sb->id, port, key);
		bench_files(sb->id, port, key);
	}
	saas_sandbox_destroy(NULL, cold.client, sb->id, 0);
	saas_sandbox_free(sb);
	engine_close(&cold);
}

/* The results the phases' child processes fill in, shared with this one; false if they cannot be mapped. */
static bool results_map(void)
{
	res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("vm_bench: mmap");
		return false;
	}
	memset(res, 0, sizeof(*res));
	return true;
}

/* BENCH_RUNS if set to a positive number, else def. */
static int env_runs(int def)
{
	return env_int("BENCH_RUNS", def);
}

/* ---- --metrics: what sampling costs the engine ---- */

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static const unsigned int metrics_modes[3] = { 3600000, 5000, 200 };

/*
 * One engine per mode, each making its own clones of the one template (an
 * embedded libvirt's VMs end with the process that ran them) and destroying
 * them after.
 */
static void phase_metrics(char **images, int mode, const char *dir)
{
	int vms = getenv("BENCH_METRICS_VMS") ? atoi(getenv("BENCH_METRICS_VMS")) : 4;
	int secs = getenv("BENCH_METRICS_S") ? atoi(getenv("BENCH_METRICS_S")) : 60;
	saas_sandbox_list *l = NULL;
	double c0, t0;
	int rc;

	(void)images;
	metrics_interval = metrics_modes[mode];
	engine_open(&cloned, "metrics", dir, true, NULL);
	client = cloned.client;
	/* The template stays on disk: the next engines' creates are clones at once. */
	if (mode == 0)
		template_warm("tiny");
	for (int i = 0; i < vms; i++) {
		saas_sandbox *sb = bench_create(client, "tiny");
		exec_ok(sb->id, "true");
		saas_sandbox_free(sb);
	}
	if ((rc = saas_sandbox_list_get(&l, client, NULL, 100, SAAS_LIST_ACTIVE)) < 0)
		die("list", rc);
	/* Past the first pass (at open) and the creates' settling. */
	sleep(3);
	int *pid = calloc(l->count + 1, sizeof(*pid));
	unsigned long q0 = 0, q1 = 0;
	if (!pid)
		die("memory", SAAS_ENOMEM);
	for (size_t i = 0; i < l->count; i++)
		q0 += proc_ticks(pid[i] = qemu_of(l->items[i]->id, NULL));
	c0 = cpu_s();
	t0 = now_ms();
	sleep((unsigned int)secs);
	res->metrics_cpu[mode] = (cpu_s() - c0) / ((now_ms() - t0) / 1000.0);
	for (size_t i = 0; i < l->count; i++)
		q1 += proc_ticks(pid[i]);
	/* Each sample asks the QEMU (its monitor) too: what that costs the QEMUs, per sandbox. */
	res->metrics_qemu[mode] = q1 >= q0 && l->count ? (double)(q1 - q0) / (double)sysconf(_SC_CLK_TCK) /
	                                                     ((now_ms() - t0) / 1000.0) / (double)l->count
	                                               : 0;
	free(pid);
	res->metrics_vms[mode] = (int)l->count;
	if (mode == 1) {
		/* One pass by hand: a request for each, which reads the kept samples (no driver call). */
		double p0 = now_ms();
		for (size_t i = 0; i < l->count; i++) {
			saas_metric_list *m = NULL;
			if ((rc = saas_sandbox_metrics_get(&m, client, l->items[i]->id, 0, 0, 0)) < 0)
				die("metrics", rc);
			res->metrics_samples += (int)m->count;
			saas_metric_list_free(m);
		}
		res->metrics_read_ms = now_ms() - p0;
	}
	for (size_t i = 0; i < l->count; i++)
		saas_sandbox_destroy(NULL, client, l->items[i]->id, 0);
	saas_sandbox_list_free(l);
	engine_close(&cloned);
}

static int metrics_main(const char *dir)
{
	int secs = getenv("BENCH_METRICS_S") ? atoi(getenv("BENCH_METRICS_S")) : 60;

	for (int mode = 0; mode < 3; mode++)
		run_child("metrics", phase_metrics, NULL, mode, dir);
	printf("| engine CPU over %d s, idle cloned `tiny` sandboxes | share of one CPU | ratio to no sampling | each "
	       "sandbox's QEMU meanwhile, share of one CPU | ratio to no sampling |\n"
	       "|---|---|---|---|---|\n",
	       secs);
	for (int mode = 0; mode < 3; mode++)
		printf("| %d sandboxes, sampling every %u ms%s | %.3f %% | %.2fx | %.3f %% | %.2fx |\n", res->metrics_vms[mode],
		       metrics_modes[mode], mode == 0 ? " (none in the window: the baseline)" : mode == 1 ? " (the default)" : "",
		       res->metrics_cpu[mode] * 100, res->metrics_cpu[0] > 0 ? res->metrics_cpu[mode] / res->metrics_cpu[0] : 0,
		       res->metrics_qemu[mode] * 100,
		       res->metrics_qemu[0] > 0 ? res->metrics_qemu[mode] / res->metrics_qemu[0] : 0);
	printf("| reading every sandbox's samples (%d samples) | %.1f ms | |\n", res->metrics_samples, res->metrics_read_ms);
	return 0;
}

/* ---- --idle: an idle clone's QEMU CPU, two image directories alternating ---- */

#define IDLE_GUEST_AT 25 /* the guest's first count of its threads' switches, s after the first command */
#define IDLE_GUEST_S 70  /* and its second, this much later: around the host's window, not in it */
#define IDLE_STR_(x) #x
#define IDLE_STR(x) IDLE_STR_(x)

/* Where the guest's counts go: a tmpfs if the sandbox user may write there (no journal write in the window). */
#define IDLE_GUEST_DIR "d=/dev/shm; [ -d $d ] && [ -w $d ] || d=/tmp; "

/*
 * The guest's side, run as the sandbox user, detached from the command that
 * starts it (whose end would otherwise be in the window): each guest task's
 * voluntary and involuntary context switches (/proc/PID/task/TID/status,
 * readable by anyone) and /proc/stat's ctxt and intr, at IDLE_GUEST_AT and
 * IDLE_GUEST_S later; per second, the 20 busiest threads (process, thread,
 * tid) under a line of the totals.
 */
static const char idle_guest_script[] =
	IDLE_GUEST_DIR
	"cat > $d/aas-wake.sh <<'EOF'\n"
	"d=$1; W=$3\n"
	"snap() { grep -s -H -E '^(Name|voluntary_ctxt_switches|nonvoluntary_ctxt_switches):' "
	"/proc/[0-9]*/task/[0-9]*/status; grep -H -E '^(ctxt|intr) ' /proc/stat; }\n"
	"sleep $2; snap > $d/aas-w0; sleep $W; snap > $d/aas-w1\n"
	"awk -F: -v W=$W '\n"
	"FNR == 1 { f++ }\n"
	"$1 == \"/proc/stat\" { split($2, q, \" \"); if (f == 1) s0[q[1]] = q[2]; else s1[q[1]] = q[2]; next }\n"
	"{ split($1, p, \"/\"); t = p[5]; k = $2; v = $3; for (i = 4; i <= NF; i++) v = v \":\" $i; sub(/^[ \\t]+/, \"\", v)\n"
	"  own[t] = p[3]\n"
	"  if (k == \"Name\") nm[t] = v\n"
	"  if (k == \"voluntary_ctxt_switches\") { if (f == 1) a[t] = v; else b[t] = v }\n"
	"  if (k == \"nonvoluntary_ctxt_switches\") { if (f == 1) an[t] = v; else bn[t] = v } }\n"
	"END { printf \"all: ctxt %.2f/s, intr %.2f/s\\n\", (s1[\"ctxt\"] - s0[\"ctxt\"]) / W, (s1[\"intr\"] - s0[\"intr\"]) / W\n"
	"  for (t in b) if (t in a) { x = b[t] - a[t]; y = bn[t] - an[t]\n"
	"    if (x + y > 0) printf \"%.2f %.2f %s %s %s\\n\", x / W, y / W, nm[own[t]], nm[t], t } }\n"
	"' $d/aas-w0 $d/aas-w1 > $d/aas-w2\n"
	"{ grep '^all:' $d/aas-w2; grep -v '^all:' $d/aas-w2 | sort -rn | head -20; } > $d/aas-wakes.part\n"
	"mv $d/aas-wakes.part $d/aas-wakes\n"
	"EOF\n"
	"rm -f $d/aas-wakes; setsid -f sh $d/aas-wake.sh $d " IDLE_STR(IDLE_GUEST_AT) " " IDLE_STR(IDLE_GUEST_S) " </dev/null >/dev/null 2>&1";

/* n: which directory (0 the baseline, 1 the other) | the image's index << 1. */
static void phase_idle(char **dirs, int n, const char *image)
{
	int which = n & 1, made;
	const char *names[2] = { "idle-a", "idle-b" };
	saas_execution *x = NULL;
	saas_sandbox *sb;
	int k = res->idle_n[which], rc;

	spares_opt = "0"; /* no QEMU started ahead beside the one measured */
	engine_open(&cloned, names[which], dirs[which], true, NULL);
	client = cloned.client;
	if (k == 0)
		template_warm(image);
	pthread_mutex_lock(&log_mu);
	made = clones_made;
	pthread_mutex_unlock(&log_mu);
	sb = bench_create(client, image);
	pthread_mutex_lock(&log_mu);
	made = clones_made - made;
	pthread_mutex_unlock(&log_mu);
	if (made != 1) {
		fprintf(stderr, "vm_bench: the idle %s sandbox of %s was not a clone\n", image, dirs[which]);
		exit(1);
	}
	exec_ok(sb->id, idle_guest_script);
	idle_of(sb->id, IDLE_SETTLE_S, IDLE_WINDOW_S, &res->idle_rss[which][k], &res->idle_cpu[which][k]);
	/* The guest's second count, then its table (a minute more at most). */
	sleep(IDLE_GUEST_AT + IDLE_GUEST_S - IDLE_SETTLE_S - IDLE_WINDOW_S + 3);
	for (int i = 0; i < 60; i++) {
		if ((rc = saas_exec(&x, client, sb->id, IDLE_GUEST_DIR "cat $d/aas-wakes", NULL, 0)) < 0)
			die("exec", rc);
		if (x->exit_code == 0)
			break;
		saas_execution_free(x);
		x = NULL;
		sleep(1);
	}
	snprintf(res->idle_wakes[which], sizeof(res->idle_wakes[which]), "%s", x ? x->stdout_data : "(no count)\n");
	saas_execution_free(x);
	res->idle_n[which]++;
	saas_sandbox_destroy(NULL, client, sb->id, 0);
	saas_sandbox_free(sb);
	engine_close(&cloned);
}

static void phase_idle_of(char **dirs, int n, const char *state)
{
	(void)state;
	phase_idle(dirs, n, dirs[2]);
}

static int idle_main(char *dir_a, char *dir_b, char *image)
{
	char *dirs[3] = { dir_a, dir_b, image };
	int rounds = env_int("BENCH_ROUNDS", 3);
	double mean[2] = { 0, 0 };

	if (rounds > SPARE_SAMPLES)
		rounds = SPARE_SAMPLES;
	load_now(res->load[0], sizeof(res->load[0]));
	for (int r = 0; r < rounds; r++)
		for (int which = 0; which < 2; which++)
			run_child(which ? "idle B" : "idle A", phase_idle_of, dirs, which, state_dir);
	load_now(res->load[1], sizeof(res->load[1]));
	printf("Load (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", res->load[0], res->load[1]);
	printf("| idle `%s` clone's QEMU, CPU over %d s after %d s idle (%d rounds, alternating) | A: %s (the baseline) "
	       "| B: %s |\n|---|---|---|\n",
	       image, IDLE_WINDOW_S, IDLE_SETTLE_S, rounds, dir_a, dir_b);
	for (int r = 0; r < rounds; r++) {
		printf("| round %d | %.2f %% of a core, RSS %ld MiB | %.2f %% of a core, RSS %ld MiB |\n", r + 1,
		       res->idle_cpu[0][r], res->idle_rss[0][r] >> 10, res->idle_cpu[1][r], res->idle_rss[1][r] >> 10);
		mean[0] += res->idle_cpu[0][r] / rounds;
		mean[1] += res->idle_cpu[1][r] / rounds;
	}
	printf("| mean | %.2f %% (%d idle clones: %.2f cores) | %.2f %% (%d idle clones: %.2f cores); %.2fx A |\n\n", mean[0],
	       IDLE_DENSITY, mean[0] * IDLE_DENSITY / 100.0, mean[1], IDLE_DENSITY, mean[1] * IDLE_DENSITY / 100.0,
	       mean[0] > 0 ? mean[1] / mean[0] : 0);
	for (int which = 0; which < 2; which++)
		printf("Guest threads' context switches per second, voluntary and not (process, thread, tid), over %d s around "
		       "the last round's window, %s:\n\n```\n%s```\n\n",
		       IDLE_GUEST_S, which ? "B" : "A", res->idle_wakes[which]);
	return 0;
}

int main(int argc, char **argv)
{
	char **images = argv + 3;
	int nimages = argc - 3;
	long total = mem_total_kib();
	bool confine = argc > 1 && strcmp(argv[1], "--confine") == 0;
	bool cow = argc > 1 && strcmp(argv[1], "--cow") == 0;
	bool stream = argc > 1 && strcmp(argv[1], "--stream") == 0;
	bool metrics = argc > 1 && strcmp(argv[1], "--metrics") == 0;
	bool transport = argc > 1 && strcmp(argv[1], "--transport") == 0;
	bool control = argc > 1 && strcmp(argv[1], "--control") == 0;
	bool snapshot = argc > 1 && strcmp(argv[1], "--snapshot") == 0;
	bool pool_only = argc > 1 && strcmp(argv[1], "--pool") == 0;
	bool spares = argc > 1 && strcmp(argv[1], "--spares") == 0;
	bool first = argc > 1 && strcmp(argv[1], "--first") == 0;
	bool warm = argc > 1 && strcmp(argv[1], "--warm") == 0;
	bool burst = argc > 1 && strcmp(argv[1], "--burst") == 0;
	bool adapt = argc > 1 && strcmp(argv[1], "--adapt") == 0;
	bool idle = argc > 1 && strcmp(argv[1], "--idle") == 0;

	if (getenv("BENCH_CPU_READBACK"))
		cpu_readback = getenv("BENCH_CPU_READBACK"); /* words or properties: the driver option cpu_readback */

	if (cow) {
		if (argc != 4) {
			fprintf(stderr, "usage: vm_bench --cow STATE_DIR IMAGES_DIR\n");
			return 2;
		}
		if (getenv("BENCH_RUNS") && atoi(getenv("BENCH_RUNS")) > 0)
			runs = atoi(getenv("BENCH_RUNS"));
		state_dir = argv[2];
		res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (res == MAP_FAILED) {
			perror("vm_bench: mmap");
			return 1;
		}
		memset(res, 0, sizeof(*res));
		return cow_main(argv[3]);
	}
	if (control) {
		if (argc != 4) {
			fprintf(stderr, "usage: vm_bench --control STATE_DIR IMAGES_DIR\n");
			return 2;
		}
		state_dir = argv[2];
		if ((res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
			return 1;
		memset(res, 0, sizeof(*res));
		return control_main(argv[3]);
	}
	if (pool_only) {
		if (argc < 5 || argc - 4 > MAX_IMAGES) {
			fprintf(stderr, "usage: vm_bench --pool STATE_DIR IMAGES_DIR image...\n");
			return 2;
		}
		runs = env_runs(20);
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return pool_main(argv[3], argv + 4, argc - 4);
	}
	if (spares || first || warm) {
		if (argc < 5 || argc - 4 > MAX_IMAGES) {
			fprintf(stderr, "usage: vm_bench %s STATE_DIR IMAGES_DIR image...\n", argv[1]);
			return 2;
		}
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return spares_main(argv[3], argv + 4, argc - 4, warm ? KIND_WARM : first ? KIND_FIRST : KIND_SPARES);
	}
	if (burst) {
		if (argc != 4 && argc != 5) {
			fprintf(stderr, "usage: vm_bench --burst STATE_DIR IMAGES_DIR [image]\n");
			return 2;
		}
		if (getenv("BENCH_AT_ONCE") && atoi(getenv("BENCH_AT_ONCE")) > 0)
			at_once = atoi(getenv("BENCH_AT_ONCE")) > MAX_AT_ONCE ? MAX_AT_ONCE : atoi(getenv("BENCH_AT_ONCE"));
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return burst_main(argv[3], argc == 5 ? argv[4] : "tiny");
	}
	if (idle) {
		if (argc != 5 && argc != 6) {
			fprintf(stderr, "usage: vm_bench --idle STATE_DIR IMAGES_DIR_A IMAGES_DIR_B [image]\n");
			return 2;
		}
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return idle_main(argv[3], argv[4], argc == 6 ? argv[5] : "default");
	}
	if (adapt) {
		if (argc != 5 && argc != 6) {
			fprintf(stderr, "usage: vm_bench --adapt STATE_DIR IMAGES_DIR LABEL [image]\n");
			return 2;
		}
		runs = env_runs(20);
		if (getenv("BENCH_AT_ONCE") && atoi(getenv("BENCH_AT_ONCE")) > 0)
			at_once = atoi(getenv("BENCH_AT_ONCE")) > MAX_AT_ONCE ? MAX_AT_ONCE : atoi(getenv("BENCH_AT_ONCE"));
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return adapt_main(argv[3], argc == 6 ? argv[5] : "tiny", argv[4]);
	}
	if (snapshot) {
		if (argc != 4 && argc != 5) {
			fprintf(stderr, "usage: vm_bench --snapshot STATE_DIR IMAGES_DIR [image]\n");
			return 2;
		}
		runs = env_runs(5);
		state_dir = argv[2];
		if (!results_map())
			return 1;
		return snapshot_main(argv[3], argc == 5 ? argv[4] : "tiny");
	}
	if (metrics) {
		if (argc != 4) {
			fprintf(stderr, "usage: vm_bench --metrics STATE_DIR IMAGES_DIR\n");
			return 2;
		}
		state_dir = argv[2];
		if ((res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
			return 1;
		memset(res, 0, sizeof(*res));
		return metrics_main(argv[3]);
	}
	if (stream) {
		if (argc != 4) {
			fprintf(stderr, "usage: vm_bench --stream STATE_DIR IMAGES_DIR\n");
			return 2;
		}
		state_dir = argv[2];
		if ((res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
			return 1;
		memset(res, 0, sizeof(*res));
		run_child("stream", phase_stream, NULL, 0, argv[3]);
		printf("| what | libsaas | baseline (same run) |\n|---|---|---|\n");
		fputs(res->rows, stdout);
		return 0;
	}
	if (confine || transport) {
		argv++;
		argc--;
		images = argv + 3;
		nimages = 1;
	}
	if ((argc < 4 && !confine && !transport) || ((confine || transport) && argc != 3) || nimages > MAX_IMAGES) {
		fprintf(stderr, "usage: vm_bench STATE_DIR IMAGES_DIR image...\n       vm_bench --confine STATE_DIR IMAGES_DIR\n"
		                "       vm_bench --transport STATE_DIR IMAGES_DIR\n");
		return 2;
	}
	if (getenv("BENCH_RUNS") && atoi(getenv("BENCH_RUNS")) > 0)
		runs = atoi(getenv("BENCH_RUNS"));
	if (getenv("BENCH_AT_ONCE") && atoi(getenv("BENCH_AT_ONCE")) > 0)
		at_once = atoi(getenv("BENCH_AT_ONCE")) > MAX_AT_ONCE ? MAX_AT_ONCE : atoi(getenv("BENCH_AT_ONCE"));
	state_dir = argv[1];
	res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("vm_bench: mmap");
		return 1;
	}
	memset(res, 0, sizeof(*res));
	if (confine)
		return confine_main(argv[2]);
	if (transport) {
		run_child("transport", phase_transport, NULL, getenv("BENCH_RUNS") ? runs : 3, argv[2]);
		printf("| what | libsaas | baseline (same run) |\n|---|---|---|\n");
		fputs(res->rows, stdout);
		return 0;
	}
	run_child("cold", phase_cold, images, nimages, argv[2]);
	run_child("clone", phase_clone, images, nimages, argv[2]);
	for (int i = 0; i < nimages; i++)
		run_child("pool", phase_pool, images, i, argv[2]); /* n is the image index here */

	printf("| what | libsaas | baseline (same run) |\n|---|---|---|\n");
	for (int i = 0; i < nimages; i++) {
		double *c = res->cold[i], *k = res->clone[i], *p = res->pool[i];
		printf("| create -> first `true`, `%s`, clone (%d runs) | p50 %.0f ms, p95 %.0f ms | cold boot: p50 %.0f "
		       "ms, p95 %.0f ms; clone %.1fx faster at p50 |\n",
		       images[i], runs, k[0], k[1], c[0], c[1], c[0] / k[0]);
		printf("| create -> first `true`, `%s`, warm pool (%d runs) | p50 %.0f ms, p95 %.0f ms | cold boot: p50 "
		       "%.0f ms; pool %.0fx faster at p50 |\n",
		       images[i], runs, p[0], p[1], c[0], c[0] / p[0]);
	}
	printf("| %d creates at once, `tiny`, clones, until all ran `true` | %.0f ms | cold boots: %.0f ms; %.1fx faster "
	       "|\n",
	       at_once, res->at_once_clone, res->at_once_cold, res->at_once_cold / res->at_once_clone);
	printf("| idle small sandbox, `tiny`, cloned (QEMU process; CPU over %d s after %d s idle, cold boot's over 10 s) "
	       "| RSS %ld MiB, CPU %.2f %% of one core (%d such: %.2f cores) | cold boot: RSS %ld MiB, CPU %.1f %%; %.1fx "
	       "less memory |\n",
	       IDLE_WINDOW_S, IDLE_SETTLE_S, res->rss_clone / 1024, res->cpu_clone, IDLE_DENSITY,
	       res->cpu_clone * IDLE_DENSITY / 100.0, res->rss_cold / 1024, res->cpu_cold,
	       (double)res->rss_cold / (double)res->rss_clone);
	/* An estimate from the RSS, keeping 2 GiB for the host: memory, not CPU, bounds idle sandboxes. */
	printf("| idle small sandboxes this host's %ld GiB holds (estimate: (RAM - 2 GiB) / idle RSS) | %ld cloned | %ld "
	       "cold-booted |\n",
	       total >> 20, (total - (2L << 20)) / res->rss_clone, (total - (2L << 20)) / res->rss_cold);
	fputs(res->rows, stdout);
	printf("\nTemplates: %s; QEMU %s.\n",
	       res->clone_mapped ? "memory mapped by clones (`template_memory=mapped`)"
	                         : "memory loaded by each clone (mapping was not possible: see the engine's log)",
	       res->clone_confined ? "under a uid of its own per VM" : "as the engine's user");
	return 0;
}
