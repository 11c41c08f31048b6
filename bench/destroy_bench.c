/*
 * What a sandbox's destroy costs with the embedded driver reaping its own
 * QEMUs (driver option reap=auto) against the host's init reaping them
 * (reap=off, the baseline), in one run: per round, one engine each way in
 * turn, each in a child process of its own (libvirt allows one embedded
 * root per process, and the reaper's attribute is the process's), which
 * makes BENCH_RUNS (default 10) clones of `tiny` (or the image named) one
 * after another, then destroys them one by one, each destroy timed. Its
 * template is made first (untimed) and kept in STATE_DIR/reap-MODE across
 * rounds; spares=0, so that no VM starts ahead during the destroys.
 *
 * usage: destroy_bench STATE_DIR IMAGES_DIR [image]
 * BENCH_ROUNDS (default 2) alternating rounds; the figures are p50 and p95
 * of every destroy each way, printed as Markdown with the load at the start
 * and the end.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define RUNS_MAX 100
#define ROUNDS_MAX 10

static const char *state_root, *images, *image = "tiny";
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int templates_ready, templates_failed, clones_made;

static void on_log(void *ud, int level, const char *msg)
{
	(void)ud;
	pthread_mutex_lock(&log_mu);
	bench_count_templates(msg, &templates_ready, &templates_failed, &clones_made);
	pthread_mutex_unlock(&log_mu);
	if (level <= SAAS_LOG_WARN || strstr(msg, "reaped") || getenv("BENCH_VERBOSE"))
		fprintf(stderr, "destroy_bench: [engine] %s\n", msg);
}

/* One engine with reap=mode: runs clones made, then destroyed one by one; each destroy's ms into out. */
static void one_round(const char *mode, int runs, double *out)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_engine *engine = NULL;
	saas_account *account = NULL;
	saas_client *client = NULL;
	saas_sandbox *sb[RUNS_MAX];
	char dir[4096], config[4600], *key = NULL;
	int rc, ready;

	snprintf(dir, sizeof(dir), "%s/reap-%s", state_root, mode);
	snprintf(config, sizeof(config), "images=%s boot_timeout=600 templates=on spares=0 reap=%s", images, mode);
	o.state_dir = dir;
	o.driver_config = config;
	o.default_image = image;
	o.max_sandboxes = RUNS_MAX + 8;
	o.creates_per_minute = SAAS_LIMIT_MAX;
	o.max_executions = SAAS_LIMIT_MAX;
	o.log = on_log;
	o.log_level = SAAS_LOG_INFO;
	if ((rc = saas_engine_open(&engine, &o)) < 0)
		die("engine", rc);
	if ((rc = saas_account_create(&account, engine, "bench", SAAS_USD(1000), 0)) < 0 ||
	    (rc = saas_key_create(&key, NULL, engine, account->id, NULL, 0)) < 0 ||
	    (rc = saas_client_open_local(&client, engine, key, 0)) < 0)
		die("account", rc);
	/* The template: the first create of a fresh state boots cold and builds it; wait for it (10 minutes at most). */
	sb[0] = bench_create(client, image);
	saas_sandbox_destroy(NULL, client, sb[0]->id, 0);
	saas_sandbox_free(sb[0]);
	/* An earlier round's template, already there: the first create was a clone. */
	for (int i = 0; i < 1200; i++) {
		pthread_mutex_lock(&log_mu);
		ready = templates_ready + clones_made;
		pthread_mutex_unlock(&log_mu);
		if (ready)
			break;
		if (templates_failed) {
			fprintf(stderr, "destroy_bench: the %s template failed to build\n", image);
			exit(1);
		}
		usleep(500 * 1000);
	}
	for (int i = 0; i < runs; i++)
		sb[i] = bench_create(client, image);
	for (int i = 0; i < runs; i++) {
		double t0 = now_ms();
		if ((rc = saas_sandbox_destroy(NULL, client, sb[i]->id, 0)) < 0)
			die("destroy", rc);
		out[i] = now_ms() - t0;
		saas_sandbox_free(sb[i]);
	}
	saas_client_free(client);
	saas_account_free(account);
	saas_free(key);
	saas_engine_free(engine);
}

/* one_round in a child process; its figures come back through a pipe. */
static void round_in_child(const char *mode, int runs, double *out)
{
	int p[2], status = 0;
	pid_t pid;
	size_t want = (size_t)runs * sizeof(double), got = 0;

	if (pipe(p) < 0 || (pid = fork()) < 0) {
		perror("destroy_bench");
		exit(1);
	}
	if (pid == 0) {
		close(p[0]);
		one_round(mode, runs, out);
		_exit(write(p[1], out, want) == (ssize_t)want ? 0 : 1);
	}
	close(p[1]);
	while (got < want) {
		ssize_t n = read(p[0], (char *)out + got, want - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != want) {
		fprintf(stderr, "destroy_bench: the reap=%s round failed\n", mode);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	static double off[RUNS_MAX * ROUNDS_MAX], on[RUNS_MAX * ROUNDS_MAX];
	int runs = env_int("BENCH_RUNS", 10), rounds = env_int("BENCH_ROUNDS", 2), n = 0;
	char load0[64], load1[64];

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: destroy_bench STATE_DIR IMAGES_DIR [image]\n");
		return 2;
	}
	state_root = argv[1];
	images = argv[2];
	if (argc == 4)
		image = argv[3];
	if (runs > RUNS_MAX)
		runs = RUNS_MAX;
	if (rounds > ROUNDS_MAX)
		rounds = ROUNDS_MAX;
	load_now(load0, sizeof(load0));
	for (int r = 0; r < rounds; r++, n += runs) {
		round_in_child("off", runs, off + n);
		round_in_child("auto", runs, on + n);
	}
	load_now(load1, sizeof(load1));
	printf("### Destroy of a `%s` clone: the engine reaping its QEMUs (reap=auto) against the host's init (reap=off)\n\n",
	       image);
	printf("%d rounds of %d destroys each way, alternating; load %s at the start, %s at the end.\n\n", rounds, runs,
	       load0, load1);
	printf("| reap | destroy p50 ms | p95 ms |\n|---|---|---|\n");
	printf("| off (baseline) | %.0f | %.0f |\n", pct(off, n, 0.5), pct(off, n, 0.95));
	printf("| auto | %.0f | %.0f |\n", pct(on, n, 0.5), pct(on, n, 0.95));
	printf("\np50 ratio auto/off: %.3f\n", pct(on, n, 0.5) / pct(off, n, 0.5));
	return 0;
}
