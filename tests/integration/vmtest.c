/* What the real-VM test programs share: see vmtest.h. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmtest.h"

int vmtest_env(const char **images, const char **state)
{
	*images = getenv("SAAS_TEST_IMAGES");
	*state = getenv("SAAS_TEST_STATE");
	if (!*images || !*state) {
		fprintf(stderr, "SAAS_TEST_IMAGES and SAAS_TEST_STATE must be set (ctest sets them)\n");
		return -1;
	}
	/*
	 * What this test inherited beyond stdin, stdout and stderr goes to
	 * nothing it starts: a daemon (a libvirtd of vm-hosts, the test
	 * internet's dnsmasq) would hold it for as long as it lives, a lock its
	 * caller holds (flock FILE ctest ...) long after the test.
	 */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
		fprintf(stderr, "close_range: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- the engine's log -------------------------------------------------------------------------- */

/* Every line logged, each ended by '\n'; the callback may run on any of the engine's threads. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char *log_text;
static size_t log_len;

void vmtest_log(void *userdata, int level, const char *msg)
{
	size_t n = strlen(msg);
	char *grown;

	if (level <= SAAS_LOG_WARN || getenv("SAAS_TEST_VERBOSE"))
		fprintf(stderr, "  [%s] %s\n", userdata ? (const char *)userdata : "engine", msg);
	pthread_mutex_lock(&log_mu);
	if ((grown = realloc(log_text, log_len + n + 2))) {
		log_text = grown;
		memcpy(log_text + log_len, msg, n);
		log_text[log_len + n] = '\n';
		log_len += n + 1;
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_mu);
}

bool logged(const char *a, const char *b)
{
	bool anchored = a[0] == '^', found = false;
	size_t alen;

	if (anchored)
		a++;
	alen = strlen(a);
	pthread_mutex_lock(&log_mu);
	for (const char *line = log_text; line && *line && !found;) {
		const char *eol = strchr(line, '\n'), *p = line;
		size_t len = (size_t)(eol - line);
		/* Each place a starts on this line, and b somewhere after that place. */
		while (!found && (p = memmem(p, len - (size_t)(p - line), a, alen)) && (!anchored || p == line)) {
			found = !b || memmem(p, len - (size_t)(p - line), b, strlen(b));
			p++;
		}
		line = eol + 1;
	}
	pthread_mutex_unlock(&log_mu);
	return found;
}

size_t logged_vms(const char *what, char (*names)[64], size_t max)
{
	size_t count = 0, wlen = strlen(what);

	pthread_mutex_lock(&log_mu);
	for (const char *line = log_text; line && *line;) {
		const char *eol = strchr(line, '\n'), *name = line + 3, *end;
		if (strncmp(line, "VM ", 3) == 0 && (end = strchr(name, ' ')) && end < eol && (size_t)(eol - end - 1) >= wlen &&
		    strncmp(end + 1, what, wlen) == 0) {
			if (count < max)
				snprintf(names[count], 64, "%.*s", (int)(end - name), name);
			count++;
		}
		line = eol + 1;
	}
	pthread_mutex_unlock(&log_mu);
	return count;
}

void vmtest_log_reset(void)
{
	pthread_mutex_lock(&log_mu);
	free(log_text);
	log_text = NULL;
	log_len = 0;
	pthread_mutex_unlock(&log_mu);
}

/* ---- egress tables of engines that are gone --------------------------------------------------- */

void vmtest_egress_table(const char *state_dir, char *out, size_t size)
{
	char cmd[4400], hex[65] = "";
	FILE *p;

	out[0] = '\0';
	/* Quoted for the shell: a name with a quote in it is no test's. */
	if (strchr(state_dir, '\'') || snprintf(cmd, sizeof(cmd), "printf %%s '%s' | sha256sum", state_dir) >= (int)sizeof(cmd))
		return;
	if (!(p = popen(cmd, "re")))
		return;
	if (fscanf(p, "%64[0-9a-f]", hex) == 1 && strlen(hex) == 64)
		snprintf(out, size, "aas_egress_%.16s", hex);
	pclose(p);
}

/* Process pid's arguments, NUL-separated, into args (NUL-terminated); their length (0: none, or gone). */
static size_t proc_cmdline(const char *pid, char *args, size_t size)
{
	char path[300];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	n = fread(args, 1, size - 1, f);
	fclose(f);
	args[n] = '\0';
	return n;
}

/* The egress tables on the host (names only), up to max; how many. */
static size_t egress_tables(char (*names)[32], size_t max)
{
	FILE *p = popen("nft list tables inet 2>/dev/null", "re");
	char line[256], name[64];
	size_t n = 0;

	while (p && fgets(line, sizeof(line), p))
		if (sscanf(line, "table inet %63s", name) == 1 && strncmp(name, "aas_egress_", 11) == 0 &&
		    strlen(name) == 27 && n < max)
			snprintf(names[n++], 32, "%s", name);
	if (p)
		pclose(p);
	return n;
}

/* Does a QEMU run whose command line names dir/ or its embedded root (.../aas-libvirt[-UID]/HASH/)? */
static bool qemu_of(const char *dir, const char *table)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char mine[4200], root[64];
	bool found = false;

	snprintf(mine, sizeof(mine), "%s/", dir);
	snprintf(root, sizeof(root), "/%.16s/", table + 11);
	while (d && !found && (e = readdir(d))) {
		char cmd[65536];
		size_t len;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !(len = proc_cmdline(e->d_name, cmd, sizeof(cmd))))
			continue;
		for (size_t i = 0; i < len; i++)
			cmd[i] = cmd[i] ? cmd[i] : ' ';
		found = strstr(cmd, "qemu-system") &&
		        (strstr(cmd, mine) || (strstr(cmd, root) && strstr(cmd, "aas-libvirt")));
	}
	if (d)
		closedir(d);
	return found;
}

/* What nftw's callback compares the directories it walks with. */
static struct {
	char (*tables)[32];
	size_t n;
	int removed;
	int depth;
} sweep;

static int sweep_dir(const char *dir, const struct stat *st, int type, struct FTW *ftw)
{
	char lock[4200], table[32];
	int fd;

	(void)st;
	if (type != FTW_D)
		return FTW_CONTINUE;
	if (ftw->level > sweep.depth || strcmp(dir + ftw->base, "libvirt") == 0)
		return FTW_SKIP_SUBTREE;
	snprintf(lock, sizeof(lock), "%s/engine.lock", dir);
	if (access(lock, F_OK) != 0)
		return FTW_CONTINUE;
	vmtest_egress_table(dir, table, sizeof(table));
	for (size_t i = 0; i < sweep.n && table[0]; i++) {
		if (strcmp(sweep.tables[i], table) != 0)
			continue;
		/* The engine's own lock, held while its table goes: none can open there meanwhile. */
		if ((fd = open(lock, O_RDWR | O_CLOEXEC)) < 0)
			break;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && !qemu_of(dir, table)) {
			fprintf(stderr, "removing the egress table inet %s, left by an engine on %s that is gone\n", table, dir);
			if (sh("nft delete table inet %s", table) == 0)
				sweep.removed++;
		}
		close(fd);
		break;
	}
	return FTW_CONTINUE;
}

int vmtest_egress_leftovers_remove(const char *roots)
{
	char tables[64][32];
	glob_t g;

	if ((sweep.n = egress_tables(tables, 64)) == 0 || glob(roots, GLOB_ONLYDIR, NULL, &g) != 0)
		return 0;
	sweep.tables = tables;
	sweep.removed = 0;
	sweep.depth = 3;
	for (size_t i = 0; i < g.gl_pathc; i++)
		nftw(g.gl_pathv[i], sweep_dir, 16, FTW_PHYS | FTW_ACTIONRETVAL);
	globfree(&g);
	return sweep.removed;
}

/*
 * As root, before an engine opens: the egress tables that engines of these
 * tests left, whichever build tree's (every state directory of a build tree
 * is under its /var/tmp/aas-test-KEY, beside the other trees'; an engine of
 * the gcc stage killed hard, say, would otherwise bend the DNS of the
 * sanitizer stage's guests).
 */
void vmtest_egress_leftovers_near(const char *state_dir)
{
	char roots[4200], *slash;

	if (geteuid() != 0 || snprintf(roots, sizeof(roots), "%s", state_dir) >= (int)sizeof(roots) - 16 ||
	    !(slash = strrchr(roots, '/')) || slash == roots)
		return;
	*slash = '\0'; /* the tree's parent of state directories */
	slash = strrchr(roots, '/');
	if (slash && strncmp(slash + 1, "aas-test-", 9) == 0)
		strcpy(slash + 1, "aas-test-*");
	vmtest_egress_leftovers_remove(roots);
}

/* ---- the engine -------------------------------------------------------------------------------- */

/*
 * The per-build-tree parent of the state directories (/var/tmp/aas-test-KEY)
 * is made by whichever test runs first, and an engine's mkdir makes it 0700;
 * vm-cleanup removes it when it is empty. As root, QEMU runs under uids of
 * its own that must pass through it (docs/security.md), so it is made 0711
 * here, whatever ran before: otherwise confinement depends on test order.
 */
void vmtest_state_parent_traversable(const char *state_dir)
{
	char parent[4096], *slash;

	if (geteuid() != 0 || snprintf(parent, sizeof(parent), "%s", state_dir) >= (int)sizeof(parent))
		return;
	if (!(slash = strrchr(parent, '/')) || slash == parent)
		return;
	*slash = '\0';
	if (mkdir(parent, 0711) < 0 && errno != EEXIST)
		return;
	chmod(parent, 0711);
}

saas_engine_options vmtest_engine_options(const char *state_dir, const char *driver_config)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;

	vmtest_state_parent_traversable(state_dir);
	vmtest_egress_leftovers_near(state_dir);

	o.state_dir = state_dir;
	o.driver_config = driver_config;
	o.log = vmtest_log;
	o.log_level = SAAS_LOG_INFO;
	return o;
}

void vmtest_tenant(saas_engine *engine, const char *name, char **key, saas_client **client)
{
	saas_account *a = NULL;

	check(saas_account_create(&a, engine, name, SAAS_CREDIT_DEFAULT, 0), name);
	check(saas_key_create(key, NULL, engine, a->id, NULL, 0), "key");
	saas_account_free(a);
	check(saas_client_open_local(client, engine, *key, 0), "client");
}

char *vmtest_exec_line(saas_client *c, const char *id, const char *cmd, int *code)
{
	saas_execution *x = NULL;
	char *out;

	check(saas_exec(&x, c, id, cmd, NULL, 0), cmd);
	if (code)
		*code = x->exit_code;
	else
		assert_int_equal(x->exit_code, 0);
	out = strdup(x->stdout_data ? x->stdout_data : "");
	saas_execution_free(x);
	assert_non_null(out);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

void vmtest_destroy_all(saas_client *c)
{
	saas_sandbox_list *list = NULL;

	if (c && saas_sandbox_list_get(&list, c, NULL, 1000, SAAS_LIST_ACTIVE) == SAAS_OK) {
		for (size_t i = 0; i < list->count; i++)
			saas_sandbox_destroy(NULL, c, list->items[i]->id, 0);
		saas_sandbox_list_free(list);
	}
}

void check(int rc, const char *what)
{
	if (rc != SAAS_OK)
		fail_msg("%s: %s (%s)", what, saas_strerror(rc), saas_error_last()->message);
}

/* ---- the host ---------------------------------------------------------------------------------- */

int sh(const char *fmt, ...)
{
	char *cmd = NULL;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = system(cmd);
	free(cmd);
	return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The embedded roots' "/HASH/" of the engines' state directories vmtest_own_qemus was given. */
static char own_roots[8][20];
static size_t own_n;

void vmtest_own_qemus(const char *state_dir)
{
	char table[32], root[sizeof(own_roots[0])];

	vmtest_egress_table(state_dir, table, sizeof(table));
	assert_true(table[0]);
	snprintf(root, sizeof(root), "/%.16s/", table + 11);
	for (size_t i = 0; i < own_n; i++)
		if (strcmp(own_roots[i], root) == 0)
			return;
	assert_true(own_n < sizeof(own_roots) / sizeof(own_roots[0]));
	memcpy(own_roots[own_n++], root, sizeof(root));
}

/* Is a QEMU's command line (its arguments joined by spaces) one of this test's engines'? */
static bool qemu_own(const char *cmd)
{
	if (own_n == 0)
		return true;
	if (!strstr(cmd, "aas-libvirt"))
		return false;
	for (size_t i = 0; i < own_n; i++)
		if (strstr(cmd, own_roots[i]))
			return true;
	return false;
}

pid_t qemu_pid(const char *name)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	size_t nlen = strlen(name);
	pid_t found = 0;

	while (proc && !found && (e = readdir(proc))) {
		char args[65536];
		bool named = false;
		size_t n;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !(n = proc_cmdline(e->d_name, args, sizeof(args))))
			continue;
		/* The arguments are NUL-separated; QEMU's -name takes "guest=NAME,debug-threads=on". */
		for (size_t i = 0; i < n && !named; i += strlen(args + i) + 1) {
			const char *a = args + i;
			named = strncmp(a, "guest=", 6) == 0 && strncmp(a + 6, name, nlen) == 0 &&
			        (a[6 + nlen] == ',' || a[6 + nlen] == '\0');
		}
		if (!named)
			continue;
		for (size_t i = 0; i + 1 < n; i++)
			args[i] = args[i] ? args[i] : ' ';
		if (qemu_own(args))
			found = (pid_t)atoi(e->d_name);
	}
	if (proc)
		closedir(proc);
	return found;
}

unsigned long long proc_status(pid_t pid, const char *field, int base)
{
	char path[64], line[512];
	unsigned long long v = ~0ULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	assert_non_null(f = fopen(path, "re"));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtoull(line + strlen(field), NULL, base);
	fclose(f);
	assert_true(v != ~0ULL);
	return v;
}

struct vmtest_out {
	char *text;
	size_t size, len;
};

static int collect(void *ud, int stream, const void *data, size_t len)
{
	struct vmtest_out *o = ud;

	if (stream == SAAS_STREAM_STDOUT && o->len + len < o->size) {
		memcpy(o->text + o->len, data, len);
		o->len += len;
		o->text[o->len] = '\0';
	}
	return 0;
}

int vmtest_driver_exec(const saas_driver *drv, void *ctx, const char *vm, const char *cmd, int64_t timeout_ms,
                       int *code, char *out, size_t size)
{
	static const int cancel = 0;
	struct vmtest_out o = { out, size, 0 };
	saas_driver_exec req;

	memset(&req, 0, sizeof(req));
	memset(out, 0, size);
	req.command = cmd;
	req.cwd = "/";
	req.timeout_ms = timeout_ms;
	req.output = collect;
	req.output_userdata = &o;
	req.cancel = &cancel;
	return drv->exec(ctx, vm, &req, code);
}

char *vmtest_chomp(char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '\n')
		s[--n] = '\0';
	return s;
}

size_t vmtest_http_get(int fd, const char *path, char *buf, size_t size)
{
	char req[256];
	size_t got = 0;

	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;
		if (poll(&p, 1, 60000) <= 0)
			break;
		n = recv(fd, buf + got, size - 1 - got, 0);
		if (n <= 0 || (got += (size_t)n) >= size - 1)
			break;
	}
	close(fd);
	buf[got] = '\0';
	return got;
}

int64_t vmtest_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t vmtest_clock(void *ud)
{
	(void)ud;
	return vmtest_now_ms();
}

int vmtest_memfd_of(pid_t pid, const char *name)
{
	char dir[64], path[PATH_MAX], target[PATH_MAX], want[128];
	struct dirent *e;
	DIR *d;
	int fd = -1;

	snprintf(want, sizeof(want), "memfd:%s", name);
	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)pid);
	assert_non_null(d = opendir(dir));
	while (fd < 0 && (e = readdir(d))) {
		ssize_t n;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((n = readlink(path, target, sizeof(target) - 1)) > 0) {
			target[n] = '\0';
			if (strstr(target, want))
				fd = atoi(e->d_name);
		}
	}
	closedir(d);
	return fd;
}

unsigned long long vmtest_rollup_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	unsigned long long sum = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", (long)pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			sum += strtoull(line + strlen(field), NULL, 10);
	fclose(f);
	return sum;
}

void vmtest_memfd_mapping_kib(pid_t pid, const char *name, unsigned long long *rss, unsigned long long *anon)
{
	char path[64], line[512], want[128];
	bool in = false;
	FILE *f;

	*rss = *anon = 0;
	snprintf(want, sizeof(want), "memfd:%s", name);
	snprintf(path, sizeof(path), "/proc/%ld/smaps", (long)pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f)) {
		/* A mapping's header: "start-end perms offset dev inode [path]"; its fields are "Name:  N kB". */
		if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ') && !strstr(line, " kB"))
			in = strstr(line, want) != NULL;
		else if (in && strncmp(line, "Rss:", 4) == 0)
			*rss += strtoull(line + 4, NULL, 10);
		else if (in && strncmp(line, "Anonymous:", 10) == 0)
			*anon += strtoull(line + 10, NULL, 10);
	}
	fclose(f);
}

/* ---- a test internet ------------------------------------------------------------------------- */

/* One listener on every address of the namespace: counts connections per local address. */
static struct {
	int fd;
	unsigned int port;
	pthread_t thread;
	volatile int stop;
	pthread_mutex_t mu;
	char reached[64][INET6_ADDRSTRLEN];
	int n;
} world;
static char world_ns[32], world_veth[16], world_dns_log[4200];
static pid_t world_dnsmasq = -1;

static void *world_listener(void *arg)
{
	(void)arg;
	while (!world.stop) {
		struct pollfd p = { world.fd, POLLIN, 0 };
		if (poll(&p, 1, 100) > 0) {
			struct sockaddr_storage a;
			socklen_t len = sizeof(a);
			int c = accept(world.fd, NULL, NULL);
			if (c < 0)
				continue;
			if (getsockname(c, (struct sockaddr *)&a, &len) == 0) {
				pthread_mutex_lock(&world.mu);
				if (world.n < 64)
					inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, world.reached[world.n++],
					          sizeof(world.reached[0]));
				pthread_mutex_unlock(&world.mu);
			}
			close(c);
		}
	}
	return NULL;
}

int vmtest_world_reached(const char *addr)
{
	int count = 0;

	pthread_mutex_lock(&world.mu);
	for (int i = 0; i < world.n; i++)
		count += strcmp(world.reached[i], addr) == 0;
	pthread_mutex_unlock(&world.mu);
	return count;
}

unsigned int vmtest_world_port(void)
{
	return world.port;
}

/* A listening socket made in the namespace (this thread comes back to its own). */
static int listen_in_namespace(unsigned int *port)
{
	char path[64];
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), nsfd, fd, on = 1;
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	snprintf(path, sizeof(path), "/run/netns/%s", world_ns);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* this thread would stay in the namespace */
	close(nsfd);
	close(self);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int start_dnsmasq(const char *state_dir)
{
	char pidfile[4200], cmd[12288];

	/* In the state directory, which vm-cleanup removes whatever happens. */
	snprintf(world_dns_log, sizeof(world_dns_log), "%s/dnsmasq.log", state_dir);
	snprintf(pidfile, sizeof(pidfile), "%s/dnsmasq.pid", state_dir);
	unlink(world_dns_log);
	/* No upstream of its own (--no-resolv), .test answered locally: a name it does not know goes nowhere. */
	snprintf(cmd, sizeof(cmd),
	         "ip netns exec %s dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces "
	         "--listen-address=" VMTEST_NET_DNS " --user=root --group=root --pid-file='%s' --log-queries "
	         "--log-facility='%s' --local=/test/ --host-record=allowed.test," VMTEST_NET_DNS
	         " --host-record=www.wild.test," VMTEST_NET_WILD " --host-record=later.test," VMTEST_NET_WILD
	         " --host-record=unlisted.test," VMTEST_NET_OTHER,
	         world_ns, pidfile, world_dns_log);
	if (sh("%s", cmd) != 0)
		return -1;
	{
		FILE *f = fopen(pidfile, "re");
		int pid = 0;
		if (!f || fscanf(f, "%d", &pid) != 1)
			pid = 0;
		if (f)
			fclose(f);
		unlink(pidfile);
		world_dnsmasq = pid > 0 ? pid : -1;
	}
	return world_dnsmasq > 0 ? 0 : -1;
}

void vmtest_world_down(void)
{
	if (world.fd > 0) {
		world.stop = 1;
		pthread_join(world.thread, NULL);
		close(world.fd);
		world.fd = 0;
	}
	if (world_dnsmasq > 0)
		kill(world_dnsmasq, SIGTERM);
	world_dnsmasq = -1;
	if (world_veth[0])
		sh("ip link del %s 2>/dev/null", world_veth);
	if (world_ns[0])
		sh("ip netns del %s 2>/dev/null", world_ns);
	world_ns[0] = world_veth[0] = '\0';
}

/*
 * A test internet left by a run of these tests that died without its
 * teardown (a watchdog's exit, a crash): its namespace aas-egress-PID, PID a
 * process no more, with its dnsmasq inside and its veth here holding the same
 * address as ours, which the kernel's route would prefer. Removed before a
 * new one is made, so that one dead run does not answer the next one's
 * queries.
 */
static void world_leftovers_remove(void)
{
	DIR *dir = opendir("/run/netns");
	struct dirent *e;

	while (dir && (e = readdir(dir))) {
		char proc[64], *end;
		long pid;
		if (strncmp(e->d_name, "aas-egress-", 11) != 0)
			continue;
		pid = strtol(e->d_name + 11, &end, 10);
		snprintf(proc, sizeof(proc), "/proc/%ld", pid);
		if (*end || pid <= 0 || access(proc, F_OK) == 0)
			continue;
		fprintf(stderr, "removing the test internet %s, left by a run that died\n", e->d_name);
		sh("for p in $(ip netns pids %s); do kill $p; done; ip link del aase%ld 2>/dev/null; ip netns del %s",
		   e->d_name, pid % 1000000, e->d_name);
	}
	if (dir)
		closedir(dir);
}

int vmtest_world_up(const char *state_dir)
{
	world_leftovers_remove();
	snprintf(world_ns, sizeof(world_ns), "aas-egress-%d", (int)getpid());
	snprintf(world_veth, sizeof(world_veth), "aase%d", (int)getpid() % 1000000);
	if (sh("ip netns add %s", world_ns) != 0) {
		world_ns[0] = '\0';
		return -1;
	}
	/*
	 * One address each side with a peer route, and a /32 route to each other
	 * address of the world: never a whole range here, whose route would take
	 * this machine's traffic to any real address in it (a package registry's,
	 * on a machine whose network uses documentation ranges) while the test runs.
	 */
	if (sh("ip link add %s type veth peer name aasi0 netns %s && "
	       "ip addr add " VMTEST_NET_SELF " peer " VMTEST_NET_DNS " dev %s && "
	       "ip -n %s addr add " VMTEST_NET_DNS " peer " VMTEST_NET_SELF " dev aasi0 && "
	       "ip link set %s up && ip -n %s link set aasi0 up && ip -n %s link set lo up && "
	       "for a in " VMTEST_NET_WILD " " VMTEST_NET_CIDR " " VMTEST_NET_OTHER "; do "
	       "ip -n %s addr add $a/32 dev aasi0 && ip route add $a/32 dev %s src " VMTEST_NET_SELF " || exit 1; done",
	       world_veth, world_ns, world_veth, world_ns, world_veth, world_ns, world_ns, world_ns, world_veth) != 0)
		return -1;
	if (start_dnsmasq(state_dir) < 0)
		return -1;
	memset(&world, 0, sizeof(world));
	pthread_mutex_init(&world.mu, NULL);
	if ((world.fd = listen_in_namespace(&world.port)) < 0 ||
	    pthread_create(&world.thread, NULL, world_listener, NULL) != 0) {
		world.fd = 0;
		return -1;
	}
	return 0;
}

bool vmtest_world_asked(const char *name)
{
	char needle[300], line[1024];
	bool found = false;
	FILE *f = fopen(world_dns_log, "re");

	snprintf(needle, sizeof(needle), " %s from ", name);
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "query[") && strstr(line, needle);
	if (f)
		fclose(f);
	return found;
}

int vmtest_listen_everywhere(unsigned int *port)
{
	struct sockaddr_in6 a6;
	socklen_t len = sizeof(a6);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), off = 0, on = 1;

	assert_true(fd >= 0);
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	assert_int_equal(bind(fd, (struct sockaddr *)&a6, sizeof(a6)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a6, &len), 0);
	*port = ntohs(a6.sin6_port);
	return fd;
}

int vmtest_accepted(int fd)
{
	int got = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 0) != 1)
			break;
		close(accept(fd, NULL, NULL));
		got++;
	}
	close(fd);
	return got;
}
