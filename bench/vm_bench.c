/*
 * Sandbox benchmarks against real VMs, each figure next to a baseline measured
 * in the same run on the same VM (these machines are shared and noisy):
 *   - cold create -> first command completes (per image)
 *   - `true` round trip on the engine's reused SSH session vs OpenSSH with ControlMaster
 *   - file upload/download throughput vs OpenSSH sftp
 *   - idle RSS and CPU of a sandbox's QEMU
 *   - N creates at once, until all can run a command
 * Prints a Markdown section on stdout.
 *
 * usage: vm_bench STATE_DIR IMAGES_DIR [image...]
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <saas.h>

#define ROUNDS 200

static saas_engine *engine;
static saas_client *client;
static const char *state_dir;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "vm_bench: %s: %s (%s)\n", what, saas_strerror(rc), saas_error_last()->message);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

static saas_sandbox *create(const char *image)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	int rc;

	o.image = image;
	o.timeout_s = 3600;
	if ((rc = saas_sandbox_create(&sb, client, &o, 0)) < 0)
		die("create", rc);
	return sb;
}

static void exec_ok(const char *id, const char *cmd)
{
	saas_execution *x = NULL;
	int rc = saas_exec(&x, client, id, cmd, NULL, 0);

	if (rc < 0)
		die(cmd, rc);
	if (x->exit_code != 0) {
		fprintf(stderr, "vm_bench: '%s' exited %d: %s\n", cmd, x->exit_code, x->stderr_data);
		exit(1);
	}
	saas_execution_free(x);
}

/* The QEMU process of a sandbox, and the loopback port of its SSH forward (from its command line). */
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

static void bench_cold(const char *image)
{
	double t[3];
	for (int i = 0; i < 3; i++) {
		double t0 = now_ms();
		saas_sandbox *sb = create(image);
		exec_ok(sb->id, "true");
		t[i] = now_ms() - t0;
		saas_sandbox_destroy(NULL, client, sb->id);
		saas_sandbox_free(sb);
	}
	printf("| cold create -> first `true`, `%s` (3 runs) | median %.0f ms | min %.0f ms, max %.0f ms |\n", image,
	       pct(t, 3, 0.5), pct(t, 3, 0.0), pct(t, 3, 1.0));
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
	printf("| `true` round trip, reused session (%d runs) | median %.2f ms, p95 %.2f ms | OpenSSH ControlMaster: median %.2f ms, p95 %.2f ms; ratio %.2fx |\n",
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
	printf("| upload 64 MiB | %.1f MiB/s | OpenSSH sftp: %.1f MiB/s; ratio %.2fx |\n", 64e3 / up, 64e3 / sup, sup / up);
	printf("| download 64 MiB | %.1f MiB/s | OpenSSH sftp: %.1f MiB/s; ratio %.2fx |\n", 64e3 / down, 64e3 / sdown,
	       sdown / down);
	unlink(path);
	strcat(path, ".back");
	unlink(path);
	free(data);
}

static void bench_idle(const char *id)
{
	char path[64], line[256];
	long rss = 0, ticks0 = 0, ticks1 = 0, hz = sysconf(_SC_CLK_TCK);
	int pid = qemu_of(id, NULL);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (int pass = 0; pass < 2; pass++) {
		unsigned long ut = 0, st = 0;
		if ((f = fopen(path, "r"))) {
			if (fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
				ut = st = 0;
			fclose(f);
		}
		if (pass == 0) {
			ticks0 = (long)(ut + st);
			sleep(10);
		} else {
			ticks1 = (long)(ut + st);
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "VmRSS:", 6) == 0)
				rss = atol(line + 6);
		fclose(f);
	}
	printf("| idle sandbox (QEMU process, 10 s) | RSS %ld MiB | CPU %.1f %% of one core |\n", rss / 1024,
	       100.0 * (double)(ticks1 - ticks0) / (double)hz / 10.0);
}

struct racer {
	const char *image;
	double ready_ms;
	char id[SAAS_ID_MAX + 1];
};

static double race_t0;

static void *race(void *arg)
{
	struct racer *r = arg;
	saas_sandbox *sb = create(r->image);

	exec_ok(sb->id, "true");
	r->ready_ms = now_ms() - race_t0;
	strcpy(r->id, sb->id);
	saas_sandbox_free(sb);
	return NULL;
}

static void bench_parallel(const char *image, int n)
{
	struct racer r[16];
	pthread_t t[16];
	double last = 0;

	race_t0 = now_ms();
	for (int i = 0; i < n; i++) {
		r[i].image = image;
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		if (r[i].ready_ms > last)
			last = r[i].ready_ms;
	}
	printf("| %d creates at once, `%s`, until all ran `true` | %.0f ms | one cold create measured above |\n", n, image,
	       last);
	for (int i = 0; i < n; i++)
		saas_sandbox_destroy(NULL, client, r[i].id);
}

int main(int argc, char **argv)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_account *acc = NULL;
	saas_sandbox *sb;
	char config[4200], key[4200], *apikey = NULL;
	unsigned int port = 0;
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: %s STATE_DIR IMAGES_DIR [image...]\n", argv[0]);
		return 2;
	}
	state_dir = argv[1];
	snprintf(config, sizeof(config), "images=%s boot_timeout=600", argv[2]);
	snprintf(key, sizeof(key), "%s/libvirt/id_ed25519", state_dir);
	o.state_dir = state_dir;
	o.driver_config = config;
	o.limits.max_sandboxes = 32;
	if ((rc = saas_engine_open(&engine, &o)) < 0)
		die("engine", rc);
	if ((rc = saas_account_create(&acc, engine, "bench", SAAS_USD(100), 0)) < 0 ||
	    (rc = saas_key_create(&apikey, NULL, engine, acc->id, NULL)) < 0 ||
	    (rc = saas_client_open_local(&client, engine, apikey, 0)) < 0)
		die("account", rc);

	printf("| what | libsaas | baseline (same run) |\n|---|---|---|\n");
	for (int i = 3; i < argc; i++)
		bench_cold(argv[i]);
	sb = create("tiny");
	qemu_of(sb->id, &port);
	bench_exec(sb->id, port, key);
	bench_files(sb->id, port, key);
	bench_idle(sb->id);
	saas_sandbox_destroy(NULL, client, sb->id);
	saas_sandbox_free(sb);
	bench_parallel("tiny", 4);
	fflush(stdout);

	saas_client_free(client);
	saas_account_free(acc);
	saas_free(apikey);
	saas_engine_free(engine);
	return 0;
}
