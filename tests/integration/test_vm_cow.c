/*
 * Templates whose memory clones map copy-on-write (template_memory=mapped,
 * the default where it is safe): a template saved without its RAM, clones
 * that share its pages, that are still distinct machines, and whose QEMU (or
 * a tenant who escaped into it) cannot change the memory every other clone
 * maps. Clones' QEMUs started ahead (spares): a create takes one and makes
 * it a machine of its own, a create with a network of its own does not, the
 * orphan sweep leaves them be, the engine's close takes them down. Then a
 * warm pool whose VM's image is rebuilt: it is destroyed, never handed out,
 * and so is the VM started ahead for its template. Real VMs, the `tiny` image
 * (a private copy), one template, its clones and one pooled clone.
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE (vmtest.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "saas.h"
#include "vmtest.h"

static char state_dir[4096], config[4096];
static saas_engine *engine;
static char *key;
static saas_client *client;
static saas_sandbox *first;

/* The engine's own orphan sweep (core/reaper.c), run at once instead of after the reaper's minute. */
extern int saas__orphan_sweep(saas_engine *e);

#define SPARES_SEEN_MAX 64
static char spares[SPARES_SEEN_MAX][64];

static size_t spares_seen(void)
{
	return logged_vms("started ahead", spares, SPARES_SEEN_MAX);
}

/* A VM started ahead that no create has made and that was not destroyed. */
static bool spare_unused(const char *name)
{
	char up[128];

	snprintf(up, sizeof(up), "VM %s up in", name);
	return !logged(up, NULL) && !logged(name, "destroying it");
}

/* Whether name is a VM that was started ahead (whether or not a create took it since). */
static bool is_spare(const char *name)
{
	size_t n = spares_seen();

	for (size_t j = 0; j < n; j++)
		if (strcmp(spares[j], name) == 0)
			return true;
	return false;
}

/*
 * A VM started ahead, waited for: the latest of those logged from the
 * `from`th on that is unused.
 */
static const char *ready_spare(size_t from)
{
	for (int i = 0; i < 240; i++) {
		size_t n = spares_seen();
		assert_true(n <= SPARES_SEEN_MAX);
		for (size_t j = n; j-- > from;)
			if (spare_unused(spares[j]))
				return spares[j];
		usleep(500 * 1000);
	}
	fail_msg("no VM was started ahead");
	return NULL;
}

static void open_engine(const char *pool)
{
	saas_engine_options o = vmtest_engine_options(state_dir, config);

	o.default_image = "tiny";
	o.pool = pool;
	check(saas_engine_open(&engine, &o), "engine open");
}

static int group_setup(void **state)
{
	const char *images, *dir;

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	/* A private copy of the image: the pool's test rebuilds it (in name) under the engine's feet. */
	if (sh("mkdir -p '%s/images' && cp -r '%s/tiny' '%s/images/'", dir, images, dir) != 0)
		return -1;
	snprintf(config, sizeof(config), "images=%s/images boot_timeout=300", dir);
	open_engine(NULL);
	vmtest_tenant(engine, "alice", &key, &client);
	/* A cold boot, which starts the template's build in the background. */
	check(saas_sandbox_create(&first, client, NULL, 0), "create the first sandbox");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	vmtest_destroy_all(client);
	saas_sandbox_free(first);
	saas_client_free(client);
	saas_engine_free(engine);
	saas_free(key);
	vmtest_log_reset();
	return 0;
}

static char *run_in(const char *id, const char *cmd)
{
	return vmtest_exec_line(client, id, cmd, NULL);
}

/*
 * As the clone's QEMU uid, with no capability, the template's memory (opened
 * the way QEMU opened it) cannot be changed: not written, not mapped shared
 * and writable, no hole punched, not truncated, its seals not touched. A
 * private mapping still works (that is how QEMU maps it). Exit 0: all held.
 */
static int try_to_change(pid_t qemu, int fd, uid_t uid, gid_t gid)
{
	char path[64];
	int f;
	void *m;

	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)qemu, fd);
	if ((f = open(path, O_RDWR)) < 0)
		return 10;
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return 11;
	if (pwrite(f, "X", 1, 0) >= 0 || errno != EPERM)
		return 12;
	if (fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0 || errno != EPERM)
		return 13;
	if (ftruncate(f, 0) == 0 || errno != EPERM)
		return 14;
	if (mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) != MAP_FAILED || errno != EPERM)
		return 15;
	if (fcntl(f, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0 || errno != EPERM)
		return 16;
	if ((m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, f, 0)) == MAP_FAILED)
		return 17;
	((char *)m)[0] ^= 1;
	return 0;
}

/* The template of this run: its description (template.json), the one whose memory is mapped. */
static json_t *mapped_template(void)
{
	char root[4200], path[4700];
	struct dirent *e;
	json_t *found = NULL;
	DIR *d;

	snprintf(root, sizeof(root), "%s/libvirt/templates", state_dir);
	assert_non_null(d = opendir(root));
	while (!found && (e = readdir(d))) {
		json_t *j;
		snprintf(path, sizeof(path), "%s/%s/template.json", root, e->d_name);
		if (e->d_name[0] != '.' && (j = json_load_file(path, 0, NULL))) {
			const char *mem = json_string_value(json_object_get(j, "memory"));
			if (mem && strcmp(mem, "mapped") == 0)
				found = j;
			else
				json_decref(j);
		}
	}
	closedir(d);
	return found;
}

static void test_mapped_clones(void **state)
{
	saas_sandbox *sb[2] = { NULL, NULL };
	char *out[2][3];
	static const char *const probes[3] = { "hostname", "cat /proc/sys/kernel/random/boot_id",
		                               "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'" };
	json_t *tpl;
	unsigned long long mib;
	char spare[64];

	(void)state;
	for (int i = 0; i < 600 && !logged("template ", " ready in"); i++) {
		assert_false(logged("template ", " failed"));
		usleep(500 * 1000);
	}
	if (!logged("memory mapped by clones", NULL)) {
		/* The engine said why once (no per-VM uid, a system libvirtd, too little memory). */
		print_message("SKIP: templates' memory is not mapped on this host\n");
		skip();
	}
	/* Its saved state holds no RAM: device state and a few bookkeeping bytes per page of it. */
	assert_non_null(tpl = mapped_template());
	mib = (unsigned long long)json_integer_value(json_object_get(tpl, "memory_mb"));
	print_message("template state %lld bytes for %llu MiB of guest RAM\n",
	              (long long)json_integer_value(json_object_get(tpl, "state_bytes")), mib);
	assert_true(json_integer_value(json_object_get(tpl, "state_bytes")) < (8 << 20));
	json_decref(tpl);
	/*
	 * The first clone from the VM started ahead for the template (its name is
	 * the sandbox's); the second at once after, before the next is started:
	 * both ways make a machine of its own.
	 */
	snprintf(spare, sizeof(spare), "%s", ready_spare(0));
	for (int i = 0; i < 2; i++) {
		char line[256];
		check(saas_sandbox_create(&sb[i], client, NULL, 0), "create a clone");
		snprintf(line, sizeof(line), "VM %s up in", sb[i]->id);
		assert_true(logged(line, "(clone,"));
		assert_true(logged(line, ", started ahead,") == (i == 0));
	}
	assert_string_equal(sb[0]->id, spare);
	/* Two machines: their own hostname, boot id and random bytes. */
	for (int i = 0; i < 2; i++)
		for (int p = 0; p < 3; p++)
			out[i][p] = run_in(sb[i]->id, probes[p]);
	assert_string_equal(out[0][0], sb[0]->id);
	assert_string_equal(out[1][0], sb[1]->id);
	for (int p = 0; p < 3; p++) {
		assert_true(strlen(out[0][p]) > 8);
		assert_string_not_equal(out[0][p], out[1][p]);
	}
	for (int i = 0; i < 2; i++)
		for (int p = 0; p < 3; p++)
			free(out[i][p]);
	for (int i = 0; i < 2; i++) {
		pid_t pid = qemu_pid(sb[i]->id), child;
		int fd, status;
		unsigned long long rss, anon, priv, map_rss, map_anon;
		assert_true(pid > 0);
		/* Its RAM is the template's sealed memory, mapped... */
		assert_true((fd = vmtest_memfd_of(pid, "aas-template-ram")) >= 0);
		/* ...which its uid cannot change (as root without the uid's switch, neither: the seals bind root too). */
		if (geteuid() == 0) {
			uid_t uid = (uid_t)proc_status(pid, "Uid:", 10);
			gid_t gid = (gid_t)proc_status(pid, "Gid:", 10);
			if ((child = fork()) == 0)
				_exit(try_to_change(pid, fd, uid, gid));
			assert_true(child > 0);
			assert_int_equal(waitpid(child, &status, 0), child);
			assert_true(WIFEXITED(status));
			assert_int_equal(WEXITSTATUS(status), 0);
		}
		/*
		 * ...and shared: of the guest RAM it has touched, most is still the
		 * template's pages, not copies of its own.
		 */
		rss = vmtest_rollup_kib(pid, "Rss:");
		anon = vmtest_rollup_kib(pid, "Anonymous:");
		priv = vmtest_rollup_kib(pid, "Private_Clean:") + vmtest_rollup_kib(pid, "Private_Dirty:");
		vmtest_memfd_mapping_kib(pid, "aas-template-ram", &map_rss, &map_anon);
		print_message("clone %d: Rss %llu KiB, Pss %llu KiB, Private %llu KiB, Anonymous %llu KiB; guest RAM "
		              "(%llu MiB) resident %llu KiB, of which copied %llu KiB\n", i, rss, vmtest_rollup_kib(pid, "Pss:"),
		              priv, anon, mib, map_rss, map_anon);
		assert_true(map_rss > 0);
		assert_true(map_anon * 2 < map_rss);
		assert_true(priv < mib * 1024);
	}
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, client, sb[i]->id, 0), "destroy a clone");
		saas_sandbox_free(sb[i]);
	}
}

/*
 * A VM started ahead belongs to no sandbox until a create takes it: the
 * orphan sweep leaves it running, a create with a network of its own leaves
 * it be, a create without takes it (its name the sandbox's and hostname's),
 * and the engine's close takes the next one down.
 */
static void test_spares(void **state)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *isolated = NULL;
	char name[64], line[160], *host;

	(void)state;
	snprintf(name, sizeof(name), "%s", ready_spare(0));
	assert_true(qemu_pid(name) > 0);
	check(saas__orphan_sweep(engine), "orphan sweep");
	assert_true(qemu_pid(name) > 0);
	assert_false(logged(name, "belongs to no live sandbox"));
	o.network = "isolated";
	check(saas_sandbox_create(&isolated, client, &o, 0), "create an isolated sandbox");
	assert_false(is_spare(isolated->id));
	assert_true(qemu_pid(name) > 0);
	check(saas_sandbox_destroy(NULL, client, isolated->id, 0), "destroy the isolated sandbox");
	saas_sandbox_free(isolated);
	/*
	 * The create takes a VM started ahead: with spares=auto (the default)
	 * the earlier tests' creates in a row may have asked for more than one,
	 * so it is one of them, not necessarily the one named above.
	 */
	check(saas_sandbox_create(&sb, client, NULL, 0), "create from a VM started ahead");
	assert_true(is_spare(sb->id));
	snprintf(name, sizeof(name), "%s", sb->id);
	snprintf(line, sizeof(line), "VM %s up in", name);
	assert_true(logged(line, ", started ahead,"));
	host = run_in(sb->id, "hostname");
	assert_string_equal(host, name);
	free(host);
	check(saas_sandbox_destroy(NULL, client, sb->id, 0), "destroy it");
	saas_sandbox_free(sb);
	assert_true(qemu_pid(name) <= 0);
	/* The next one started after the create; nobody's, it goes with the engine. */
	snprintf(name, sizeof(name), "%s", ready_spare(0));
	assert_true(qemu_pid(name) > 0);
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	engine = NULL;
	assert_true(qemu_pid(name) <= 0);
	open_engine(NULL);
	check(saas_client_open_local(&client, engine, key, 0), "client");
}

/*
 * spares=2 on one template: both are started for it (each template has one
 * before any has two, and there is only one here), and two creates in a row,
 * within the driver's hold after a create, take one each.
 */
static void test_spares_of_one_template(void **state)
{
	char cfg[sizeof(config)], want[2][64], line[160];
	saas_sandbox *sb[3] = { NULL, NULL, NULL };
	size_t seen = spares_seen(), ready = 0;

	(void)state;
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	memcpy(cfg, config, sizeof(cfg));
	assert_true(strlen(config) + sizeof(" spares=2") <= sizeof(config));
	strcat(config, " spares=2");
	open_engine(NULL);
	check(saas_client_open_local(&client, engine, key, 0), "client");
	/*
	 * The template, asked for before this open (the driver remembers it),
	 * has its VMs started ahead from the open on; a create asks for it again.
	 */
	check(saas_sandbox_create(&sb[0], client, NULL, 0), "create a sandbox");
	check(saas_sandbox_destroy(NULL, client, sb[0]->id, 0), "destroy it");
	saas_sandbox_free(sb[0]);
	for (int i = 0; i < 240 && ready < 2; i++) {
		size_t n = spares_seen();
		ready = 0;
		for (size_t j = seen; j < n && ready < 2; j++)
			if (spare_unused(spares[j]))
				snprintf(want[ready++], sizeof(want[0]), "%s", spares[j]);
		if (ready < 2)
			usleep(500 * 1000);
	}
	assert_int_equal(ready, 2);
	assert_true(qemu_pid(want[0]) > 0 && qemu_pid(want[1]) > 0);
	check(saas_sandbox_create(&sb[1], client, NULL, 0), "create from the first VM started ahead");
	check(saas_sandbox_create(&sb[2], client, NULL, 0), "create from the second");
	assert_string_not_equal(sb[1]->id, sb[2]->id);
	for (int i = 1; i < 3; i++) {
		assert_true(strcmp(sb[i]->id, want[0]) == 0 || strcmp(sb[i]->id, want[1]) == 0);
		snprintf(line, sizeof(line), "VM %s up in", sb[i]->id);
		assert_true(logged(line, ", started ahead,"));
		check(saas_sandbox_destroy(NULL, client, sb[i]->id, 0), "destroy it");
		saas_sandbox_free(sb[i]);
	}
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	engine = NULL;
	memcpy(config, cfg, sizeof(config));
	open_engine(NULL);
	check(saas_client_open_local(&client, engine, key, 0), "client");
}

/*
 * A pooled VM whose image is rebuilt is never handed out: the refill
 * thread's check (every 10 s) finds it outdated and destroys it; the VM
 * started ahead for its template goes too, at once. The
 * "rebuild" names a kernel that is not there, so that the refill's next
 * create fails fast instead of booting and building a template.
 */
static void test_pool_follows_image(void **state)
{
	char manifest[4200], *text = NULL, *p;
	saas_engine_stats *st = NULL;
	unsigned int ready = 0;
	size_t seen = spares_seen();
	char spare[64];
	FILE *f;
	long len;

	(void)state;
	saas_client_free(client);
	client = NULL;
	saas_engine_free(engine);
	open_engine("small=1");
	check(saas_client_open_local(&client, engine, key, 0), "client");
	for (int i = 0; i < 600 && ready == 0; i++) {
		if (saas_engine_stats_get(&st, engine) == SAAS_OK)
			ready = st->pool_ready;
		saas_engine_stats_free(st);
		st = NULL;
		if (!ready)
			usleep(500 * 1000);
	}
	assert_int_equal(ready, 1);
	/* The pooled VM's create asked for the template: a VM is started ahead for it too. */
	snprintf(spare, sizeof(spare), "%s", ready_spare(seen));
	assert_true(qemu_pid(spare) > 0);
	snprintf(manifest, sizeof(manifest), "%s/images/tiny/manifest.json", state_dir);
	assert_non_null(f = fopen(manifest, "r"));
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	assert_non_null(text = calloc(1, (size_t)len + 16));
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	assert_non_null(p = strstr(text, "\"recipe_hash\": \""));
	p += strlen("\"recipe_hash\": \"");
	memmove(p + 1, p, strlen(p) + 1);
	*p = 'f'; /* a different recipe, as a rebuild would have */
	assert_non_null(p = strstr(text, "\"kernel\": \""));
	p += strlen("\"kernel\": \"");
	memmove(p + 8, p, strlen(p) + 1);
	memcpy(p, "missing-", 8);
	assert_non_null(f = fopen(manifest, "w"));
	fputs(text, f);
	fclose(f);
	free(text);
	for (int i = 0; i < 120 && !logged("no longer current; destroying it", NULL); i++)
		usleep(500 * 1000);
	assert_true(logged("no longer current; destroying it", NULL));
	for (int i = 0; i < 20 && !logged(spare, "is of an outdated template; destroying it"); i++)
		usleep(500 * 1000);
	assert_true(logged(spare, "is of an outdated template; destroying it"));
	for (int i = 0; i < 20 && qemu_pid(spare) > 0; i++)
		usleep(500 * 1000); /* logged just before it is destroyed */
	assert_true(qemu_pid(spare) <= 0);
	/* Gone from the pool (the log line comes just before), and none made since: the new build cannot boot. */
	for (int i = 0; i < 60 && ready > 0; i++) {
		assert_int_equal(saas_engine_stats_get(&st, engine), SAAS_OK);
		ready = st->pool_ready;
		saas_engine_stats_free(st);
		st = NULL;
		if (ready)
			usleep(500 * 1000);
	}
	assert_int_equal(ready, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mapped_clones),
		cmocka_unit_test(test_spares),
		cmocka_unit_test(test_spares_of_one_template),
		cmocka_unit_test(test_pool_follows_image),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
