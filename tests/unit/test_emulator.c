/*
 * The embedded root's QEMU link and its libvirt capabilities entry
 * (lib/driver/libvirt/emulator.c): the rewrite of libvirt's entry against a
 * real one's lines and every way an entry can be wrong; the link and the
 * entry in a root of the test's own (made, kept, remade, never through a
 * planted link); and, as root with QEMU installed, the real thing: libvirt's
 * embedded driver in that root loads the entry without probing the link again,
 * and a QEMU it starts by the link costs it a few monitor commands, not the
 * hundreds of a read of every CPU property.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/emulator.h"
#include "testutil.h"
#include "util/util.h"

#define BINARY "/usr/bin/qemu-system-x86_64"
#define ALIAS "/run/aas-libvirt/0123456789abcdef/bin/qemu-system-x86_64"

static char *fixture(const char *name, size_t *len)
{
	char path[512];
	char *text;

	snprintf(path, sizeof(path), "%s/libvirt/%s", SAAS_FIXTURES_DIR, name);
	assert_non_null(text = saas_test_slurp(path, len));
	return text;
}

/* The entry rewritten: its emulator the alias, the two CPU flags gone, every other byte kept. */
static void test_rewrite(void **state)
{
	size_t len, want_len, out_len;
	char *text = fixture("qemucaps-x86_64.xml", &len), *want = fixture("qemucaps-x86_64-alias.xml", &want_len);
	char *out;

	(void)state;
	assert_int_equal(saas__lv_caps_for_alias(text, len, BINARY, ALIAS, &out, &out_len), SAAS_OK);
	assert_non_null(out);
	assert_int_equal(out_len, want_len);
	assert_memory_equal(out, want, want_len);
	assert_int_equal(out[out_len], '\0');
	assert_null(strstr(out, "cpu-unavailable-features"));
	assert_null(strstr(out, "canonical-cpu-features"));
	/* Its own output has nothing left to take out: libvirt already reads that CPU cheaply. */
	free(text);
	text = out;
	len = out_len;
	assert_int_equal(saas__lv_caps_for_alias(text, len, ALIAS, "/x/bin/qemu", &out, &out_len), SAAS_OK);
	assert_null(out);
	assert_int_equal(out_len, 0);
	free(text);
	free(want);
}

/* text with its first `from` replaced by `to`. */
static char *replaced(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	char *s;

	assert_non_null(at);
	assert_true(asprintf(&s, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)) > 0);
	return s;
}

static void expect_inval(const char *text, size_t len, const char *binary, const char *alias, const char *says)
{
	char *out = (char *)1;
	size_t out_len = 1;

	assert_int_equal(saas__lv_caps_for_alias(text, len, binary, alias, &out, &out_len), SAAS_EINVAL);
	assert_null(out);
	assert_int_equal(out_len, 0);
	if (!strstr(saas_error_last()->message, says))
		fail_msg("'%s' does not say '%s'", saas_error_last()->message, says);
}

/* Whatever is not such an entry, and paths the XML would have to escape, are refused with words. */
static void test_refused(void **state)
{
	size_t len;
	char *text = fixture("qemucaps-x86_64.xml", &len), *bad;

	(void)state;
	expect_inval(text, len, "/usr/bin/qemu-system-i386", ALIAS, "do not name it once as their emulator");
	bad = replaced(text, "<selfvers>", "<emulator>" BINARY "</emulator>\n  <selfvers>");
	expect_inval(bad, strlen(bad), BINARY, ALIAS, "do not name it once as their emulator");
	free(bad);
	bad = replaced(text, "<emulator>" BINARY "</emulator>", "<emulator>" BINARY "</emulator><emulator>/x</emulator>");
	expect_inval(bad, strlen(bad), BINARY, ALIAS, "do not name it once as their emulator");
	free(bad);
	bad = replaced(text, "<flag name='kvm'/>", "<flag name='cpu-unavailable-features'/>");
	expect_inval(bad, strlen(bad), BINARY, ALIAS, "hold the flag cpu-unavailable-features more than once");
	free(bad);
	bad = replaced(text, "<qemuCaps>", "<domainCapabilities>");
	expect_inval(bad, strlen(bad), BINARY, ALIAS, "do not start with <qemuCaps>");
	free(bad);
	expect_inval("", 0, BINARY, ALIAS, "do not start with <qemuCaps>");
	/* A NUL anywhere: the bytes are not libvirt's XML. */
	bad = saas__strdup(text);
	bad[len / 2] = '\0';
	expect_inval(bad, len, BINARY, ALIAS, "hold a NUL byte");
	free(bad);
	expect_inval(text, len, BINARY, "/run/it's/qemu", "would escape");
	expect_inval(text, len, BINARY, "bin/qemu", "would escape");
	expect_inval(text, len, "/usr/bin/qemu&", ALIAS, "would escape");
	free(text);
}

/* Every prefix of an entry: refused or rewritten, never a read past it (the sanitizers watch). */
static void test_prefixes(void **state)
{
	size_t len;
	char *text = fixture("qemucaps-x86_64.xml", &len);

	(void)state;
	for (size_t n = 0; n <= len; n++) {
		char *copy = malloc(n ? n : 1), *out = NULL;
		size_t out_len = 0;
		int rc;

		assert_non_null(copy);
		memcpy(copy, text, n);
		rc = saas__lv_caps_for_alias(copy, n, BINARY, ALIAS, &out, &out_len);
		assert_true(rc == SAAS_OK || rc == SAAS_EINVAL);
		if (out) {
			assert_int_equal(out[out_len], '\0');
			assert_null(memmem(out, out_len, "cpu-unavailable-features", 24));
		}
		free(out);
		free(copy);
	}
	free(text);
}

/* ---- in a root of the test's own -------------------------------------------------------------- */

static char *entry_path(const char *root, const char *path)
{
	char hex[65], *p;

	saas__sha256_hex(hex, path, strlen(path));
	assert_true(asprintf(&p, "%s/cache/qemu/capabilities/%s.xml", root, hex) > 0);
	return p;
}

static void put_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *make_root(void)
{
	char *root = saas__strdup("/tmp/aas-emulator-XXXXXX"), *caps;

	assert_non_null(mkdtemp(root));
	assert_true(asprintf(&caps, "%s/cache/qemu/capabilities", root) > 0);
	assert_int_equal(saas__mkdir_p(caps, 0700), 0);
	free(caps);
	return root;
}

static void rm_root(const char *root)
{
	char *cmd;

	assert_true(asprintf(&cmd, "rm -rf '%s'", root) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

/* The link to the binary and the link's entry: made, kept as they are, remade when wrong. */
static void test_root(void **state)
{
	char *root = make_root(), *alias = NULL, *want_alias, *real_entry, *alias_entry, *text, *got;
	size_t len, got_len;
	char target[512];
	struct stat st;
	ssize_t n;

	(void)state;
	text = fixture("qemucaps-x86_64.xml", &len);
	real_entry = entry_path(root, BINARY);
	/* No entry of the binary yet: nothing made, and it says why. */
	assert_int_equal(saas__lv_emulator_alias(root, BINARY, &alias), SAAS_EIO);
	assert_null(alias);
	assert_non_null(strstr(saas_error_last()->message, "libvirt's capabilities of " BINARY ": cannot open"));
	put_file(real_entry, text, len);
	assert_true(asprintf(&want_alias, "%s/bin/qemu-system-x86_64", root) > 0);
	alias_entry = entry_path(root, want_alias);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(saas__lv_emulator_alias(root, BINARY, &alias), SAAS_OK);
		assert_string_equal(alias, want_alias);
		free(alias);
		assert_true((n = readlink(want_alias, target, sizeof(target) - 1)) > 0);
		target[n] = '\0';
		assert_string_equal(target, BINARY);
		assert_int_equal(stat(alias_entry, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		got = saas_test_slurp(alias_entry, &got_len);
		assert_non_null(got);
		assert_null(strstr(got, "cpu-unavailable-features"));
		assert_non_null(strstr(got, want_alias));
		free(got);
		/* The second round finds a link to something else: it is remade. */
		assert_int_equal(unlink(want_alias), 0);
		assert_int_equal(symlink("/bin/false", want_alias), 0);
	}
	/* An entry without the flag: no alias, and the link's entry left alone. */
	assert_int_equal(unlink(alias_entry), 0);
	got = replaced(text, "  <flag name='cpu-unavailable-features'/>\n", "");
	put_file(real_entry, got, strlen(got));
	free(got);
	assert_int_equal(saas__lv_emulator_alias(root, BINARY, &alias), SAAS_OK);
	assert_null(alias);
	assert_int_equal(access(alias_entry, F_OK), -1);
	/* The binary's entry a planted link: never read through it. */
	assert_int_equal(unlink(real_entry), 0);
	assert_int_equal(symlink("/etc/passwd", real_entry), 0);
	assert_int_equal(saas__lv_emulator_alias(root, BINARY, &alias), SAAS_EIO);
	assert_null(alias);
	/* A binary that is no plain path: refused before anything is touched. */
	assert_int_equal(saas__lv_emulator_alias(root, "qemu", &alias), SAAS_EINVAL);
	assert_int_equal(saas__lv_emulator_alias(root, "/usr/bin/", &alias), SAAS_EINVAL);
	rm_root(root);
	free(root);
	free(text);
	free(real_entry);
	free(alias_entry);
	free(want_alias);
}

/* ---- real libvirt and QEMU ---------------------------------------------------------------------- */

/* QEMU's output to a file (no virtlogd), and no labels: the engine's qemu.conf, less its users. */
#define QEMU_CONF "stdio_handler = \"file\"\nsecurity_driver = \"none\"\n"

static volatile int events_stop;

/* libvirt's errors are read back (virGetLastErrorMessage), not printed as they happen. */
static void quiet(void *ud, virErrorPtr err)
{
	(void)ud;
	(void)err;
}

static void log_line(void *ud, int level, const char *msg)
{
	(void)ud;
	fprintf(stderr, "# driver log (%d): %s\n", level, msg);
}

static void tick(int timer, void *ud)
{
	(void)timer;
	(void)ud;
}

static void *events(void *ud)
{
	(void)ud;
	while (!__atomic_load_n(&events_stop, __ATOMIC_ACQUIRE))
		virEventRunDefaultImpl();
	return NULL;
}

/* QMP replies libvirt logged per QEMU it started (a greeting starts each) from byte `from` on, in order. */
static int replies_per_start(const char *log, size_t from, int *counts, int max)
{
	size_t len;
	char *text = saas_test_slurp(log, &len), *line, *save = NULL;
	int n = -1;

	assert_non_null(text);
	assert_true(from <= len);
	for (line = strtok_r(text + from, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, "\"QMP\": {\"version\"") && strstr(line, "qemuMonitorJSONIOProcessLine") && n + 1 < max)
			counts[++n] = 0;
		else if (strstr(line, "QEMU_MONITOR_RECV_REPLY") && n >= 0)
			counts[n]++;
	}
	free(text);
	return n + 1;
}

static void start_once(virConnectPtr conn, const char *name, const char *emulator)
{
	char *xml;
	virDomainPtr dom;

	assert_true(asprintf(&xml,
	                     "<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
	                     "<os><type arch='x86_64' machine='q35'>hvm</type></os><cpu mode='maximum'/>"
	                     "<devices>%s%s%s<memballoon model='none'/></devices></domain>",
	                     name, emulator ? "<emulator>" : "", emulator ? emulator : "",
	                     emulator ? "</emulator>" : "") > 0);
	dom = virDomainCreateXML(conn, xml, VIR_DOMAIN_START_PAUSED);
	free(xml);
	if (!dom)
		fail_msg("libvirt did not start %s: %s", name, virGetLastErrorMessage());
	assert_int_equal(virDomainDestroy(dom), 0);
	virDomainFree(dom);
}

/*
 * The entry as libvirt takes it: the root's emulator link set up as the
 * engine does at open; a QEMU started by the link, then one by libvirt's own
 * path, each counted in libvirt's monitor log. libvirt must not have probed
 * the link (its entry is byte for byte what the engine wrote).
 */
static void test_libvirt(void **state)
{
	char *root, *uri, *conf, *log, *alias = NULL, *entry, *before, *after, *xml, *binary;
	int counts[4] = { 0 }, starts, timer;
	struct drv d;
	struct stat st;
	virConnectPtr conn;
	pthread_t t;

	(void)state;
	if (geteuid() != 0 || access(BINARY, X_OK) != 0) {
		fprintf(stderr, "# skipped: libvirt's embedded driver starting QEMU needs root and " BINARY "\n");
		skip();
	}
	root = make_root();
	/* QEMU starts as qemu.conf's user, which resolves the link's path: the root is passed through, as the engine's is. */
	assert_int_equal(chmod(root, 0711), 0);
	assert_true(asprintf(&conf, "%s/etc", root) > 0);
	assert_int_equal(saas__mkdir_p(conf, 0700), 0);
	free(conf);
	assert_true(asprintf(&conf, "%s/etc/qemu.conf", root) > 0);
	put_file(conf, QEMU_CONF, strlen(QEMU_CONF));
	free(conf);
	assert_true(asprintf(&log, "%s/monitor.log", root) > 0);
	assert_true(asprintf(&uri, "qemu:///embed?root=%s", root) > 0);
	/* Read by libvirt once, at its first call: the monitor's replies, to count them. */
	setenv("LIBVIRT_LOG_FILTERS", "1:qemu.qemu_monitor_json", 1);
	assert_true(asprintf(&conf, "1:file:%s", log) > 0);
	setenv("LIBVIRT_LOG_OUTPUTS", conf, 1);
	free(conf);
	assert_int_equal(virInitialize(), 0);
	virSetErrorFunc(NULL, quiet);
	assert_int_equal(virEventRegisterDefaultImpl(), 0);
	assert_true((timer = virEventAddTimeout(100, tick, NULL, NULL)) >= 0);
	assert_int_equal(pthread_create(&t, NULL, events, NULL), 0);
	conn = virConnectOpen(uri);
	if (!conn)
		fail_msg("cannot open %s: %s", uri, virGetLastErrorMessage());

	memset(&d, 0, sizeof(d));
	pthread_mutex_init(&d.mu, NULL);
	pthread_mutex_init(&d.conn_mu, NULL);
	d.root = root;
	d.cpu_words = true;
	d.conn = conn;
	d.log = log_line;
	/* As lv_open asks for them, once: the answer names the binary, and its entry is written. */
	assert_non_null(xml = virConnectGetDomainCapabilities(conn, NULL, "x86_64", "q35", "qemu", 0));
	saas__lv_emulator_setup(&d, xml);
	assert_non_null(d.emulator);
	alias = d.emulator;
	assert_non_null(strstr(xml, "<path>"));
	binary = strndup(strstr(xml, "<path>") + 6, (size_t)(strstr(xml, "</path>") - strstr(xml, "<path>") - 6));
	free(xml);
	entry = entry_path(root, alias);
	assert_non_null(before = saas_test_slurp(entry, NULL));
	/* The probe of the binary is in the log already: only the starts are counted. */
	assert_int_equal(stat(log, &st), 0);

	start_once(conn, "aas-emulator-alias", alias);
	start_once(conn, "aas-emulator-binary", binary);
	assert_non_null(after = saas_test_slurp(entry, NULL));
	assert_string_equal(before, after);
	starts = replies_per_start(log, (size_t)st.st_size, counts, 4);
	fprintf(stderr, "# monitor replies a start: %d by the link, %d by %s\n", counts[0], counts[1], binary);
	assert_int_equal(starts, 2);
	assert_in_range(counts[0], 1, 40);

	assert_int_equal(virConnectClose(conn), 0);
	__atomic_store_n(&events_stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	virEventRemoveTimeout(timer);
	rm_root(root);
	free(root);
	free(uri);
	free(log);
	free(alias);
	free(entry);
	free(before);
	free(after);
	free(binary);
	pthread_mutex_destroy(&d.mu);
	pthread_mutex_destroy(&d.conn_mu);
}

/*
 * --no-libvirt: the engine's code alone, for valgrind (libvirt's embedded driver keeps allocations of
 * its own to the end of the process, and its children's, which are not the engine's to free).
 */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_root),
		cmocka_unit_test(test_libvirt),
	};
	const struct CMUnitTest engine_only[] = {
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_root),
	};

	if (argc > 1 && strcmp(argv[1], "--no-libvirt") == 0)
		return cmocka_run_group_tests(engine_only, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
