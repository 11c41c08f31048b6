/*
 * The libvirt driver's pure parts, without libvirt running: driver_config
 * parsing, the embedded qemu.conf, the domain XML and the guard's nftables
 * ruleset (both pinned by golden files), the metadata read back from a
 * domain, and the allocator of QEMU's per-VM uids.
 *
 * Golden files live in tests/fixtures/libvirt/ and are compared byte for
 * byte. When a change to the XML or the ruleset is meant, regenerate them on
 * purpose and review the diff:
 *
 *     SAAS_UPDATE_GOLDEN=1 ctest -R '^unit\.libvirt$'
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver/libvirt/libvirt_driver.h"
#include "testutil.h"

/* ---- golden files ---------------------------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (data = malloc((size_t)len + 1))) {
		if (fread(data, 1, (size_t)len, f) != (size_t)len) {
			free(data);
			data = NULL;
		} else {
			data[len] = '\0';
		}
	}
	fclose(f);
	return data;
}

/* got must equal tests/fixtures/libvirt/NAME exactly; SAAS_UPDATE_GOLDEN=1 rewrites the file instead. */
static void golden(const char *name, const char *got)
{
	char path[1024];
	const char *update = getenv("SAAS_UPDATE_GOLDEN");
	char *want;

	assert_non_null(got);
	snprintf(path, sizeof(path), "%s/libvirt/%s", SAAS_FIXTURES_DIR, name);
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fputs(got, f) >= 0, 1);
		assert_int_equal(fclose(f), 0);
		print_message("rewrote %s\n", path);
		return;
	}
	want = slurp(path);
	if (!want)
		fail_msg("no golden file %s (make it with SAAS_UPDATE_GOLDEN=1 and review it)", path);
	assert_string_equal(got, want);
	free(want);
}

/* ---- configuration --------------------------------------------------------------------------- */

static void assert_defaults(const struct saas__lv_config *cfg)
{
	assert_null(cfg->uri);
	assert_null(cfg->images);
	assert_int_equal(cfg->accel, ACCEL_AUTO);
	assert_int_equal(cfg->network, NET_AUTO);
	assert_true(cfg->templates);
	assert_int_equal(cfg->boot_timeout_ms, DEFAULT_BOOT_TIMEOUT_MS);
	assert_int_equal(cfg->uids, UIDS_AUTO);
	assert_int_equal(cfg->uid_first, 200000);
	assert_int_equal(cfg->uid_count, 1000);
}

static void test_config_defaults(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, NULL), SAAS_OK);
	assert_defaults(&cfg);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, ""), SAAS_OK);
	assert_defaults(&cfg);
	saas__lv_config_clear(&cfg);
}

/* A config with no '=' is a libvirt URI, whole. */
static void test_config_bare_uri(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, "qemu:///system"), SAAS_OK);
	assert_string_equal(cfg.uri, "qemu:///system");
	assert_null(cfg.images);
	assert_int_equal(cfg.accel, ACCEL_AUTO);
	saas__lv_config_clear(&cfg);
}

static void test_config_every_option(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	/* Spaces and commas both separate; a repeated key takes its last value. */
	assert_int_equal(saas__lv_config_parse(&cfg, "uri=qemu:///session images=/srv/images,accel=tcg "
	                                             "network=isolated templates=off boot_timeout=90 "
	                                             "uri=qemu:///system"),
	                 SAAS_OK);
	assert_string_equal(cfg.uri, "qemu:///system");
	assert_string_equal(cfg.images, "/srv/images");
	assert_int_equal(cfg.accel, ACCEL_TCG);
	assert_int_equal(cfg.network, NET_ISOLATED);
	assert_false(cfg.templates);
	assert_int_equal(cfg.boot_timeout_ms, 90000);
	saas__lv_config_clear(&cfg);

	assert_int_equal(saas__lv_config_parse(&cfg, "accel=kvm,network=internet,templates=on,boot_timeout=3600"),
	                 SAAS_OK);
	assert_null(cfg.uri);
	assert_int_equal(cfg.accel, ACCEL_KVM);
	assert_int_equal(cfg.network, NET_INTERNET);
	assert_true(cfg.templates);
	assert_int_equal(cfg.boot_timeout_ms, 3600 * 1000);
	saas__lv_config_clear(&cfg);

	assert_int_equal(saas__lv_config_parse(&cfg, "accel=auto network=auto boot_timeout=1"), SAAS_OK);
	assert_int_equal(cfg.accel, ACCEL_AUTO);
	assert_int_equal(cfg.network, NET_AUTO);
	assert_int_equal(cfg.boot_timeout_ms, 1000);
	saas__lv_config_clear(&cfg);
}

/* uids=auto|off|FIRST-LAST: a range keeps its bounds exactly, from one uid to UIDS_COUNT_MAX. */
static void test_config_uids(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=off"), SAAS_OK);
	assert_int_equal(cfg.uids, UIDS_OFF);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=off,uids=auto"), SAAS_OK);
	assert_int_equal(cfg.uids, UIDS_AUTO);
	assert_int_equal(cfg.uid_first, UIDS_FIRST_DEFAULT);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=300000-300009"), SAAS_OK);
	assert_int_equal(cfg.uids, UIDS_ON);
	assert_int_equal(cfg.uid_first, 300000);
	assert_int_equal(cfg.uid_count, 10);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=1000-1000"), SAAS_OK);
	assert_int_equal(cfg.uid_first, 1000);
	assert_int_equal(cfg.uid_count, 1);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=2146483647-2147483646"), SAAS_OK);
	assert_int_equal(cfg.uid_count, UIDS_COUNT_MAX);
	saas__lv_config_clear(&cfg);
}

static void test_config_bad_values(void **state)
{
	static const struct {
		const char *config;
		const char *message;
	} bad[] = {
		{ "accel=fast", "accel must be auto, kvm or tcg, not 'fast'" },
		{ "network=open", "network must be auto, isolated or internet, not 'open'" },
		{ "templates=yes", "templates must be on or off, not 'yes'" },
		{ "boot_timeout=0", "boot_timeout must be 1 to 3600 seconds" },
		{ "boot_timeout=3601", "boot_timeout must be 1 to 3600 seconds" },
		{ "boot_timeout=-5", "boot_timeout must be 1 to 3600 seconds" },
		{ "boot_timeout=60s", "boot_timeout must be 1 to 3600 seconds" },
		{ "boot_timeout=", "boot_timeout must be 1 to 3600 seconds" },
		{ "colour=blue", "unknown libvirt driver option 'colour'" },
		{ "uids=on", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not 'on'" },
		{ "uids=200000", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not '200000'" },
		{ "uids=200000-", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not '200000-'" },
		{ "uids=-5-10", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not '-5-10'" },
		{ "uids=2000--3000", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not '2000--3000'" },
		{ "uids=2000-3000x", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not '2000-3000x'" },
		{ "uids=99999999999999999999-1", "uids must be auto, off or FIRST-LAST (e.g. 200000-200999), not "
		                                 "'99999999999999999999-1'" },
		{ "uids=0-999", "uids must be a range of 1 to 1000000 uids from 1000 to 2147483646, not '0-999'" },
		{ "uids=300000-299999", "uids must be a range of 1 to 1000000 uids from 1000 to 2147483646, not "
		                        "'300000-299999'" },
		{ "uids=1000-1001000", "uids must be a range of 1 to 1000000 uids from 1000 to 2147483646, not "
		                       "'1000-1001000'" },
		{ "uids=2147483000-2147483647", "uids must be a range of 1 to 1000000 uids from 1000 to 2147483646, not "
		                                "'2147483000-2147483647'" },
		{ "accel=tcg,oops", "libvirt driver option 'oops' is not key=value" },
		/* Whatever was parsed before the bad option is let go of (the leak checkers see to it). */
		{ "uri=qemu:///system images=/srv accel=none", "accel must be auto, kvm or tcg, not 'none'" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct saas__lv_config cfg;
		saas__error_clear();
		assert_int_equal(saas__lv_config_parse(&cfg, bad[i].config), SAAS_EINVAL);
		assert_int_equal(saas_error_last()->code, SAAS_EINVAL);
		assert_string_equal(saas_error_last()->message, bad[i].message);
		assert_null(cfg.uri);
		assert_null(cfg.images);
	}
}

static void setenv_or_unset(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

static void test_default_images_dir(void **state)
{
	const char *names[] = { "AAS_IMAGE_DIR", "XDG_CACHE_HOME", "HOME" };
	char *saved[3], *dir;

	(void)state;
	for (int i = 0; i < 3; i++)
		saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;

	setenv("AAS_IMAGE_DIR", "/srv/aas-images", 1);
	setenv("XDG_CACHE_HOME", "/cache", 1);
	assert_string_equal(dir = saas__lv_default_images_dir(), "/srv/aas-images");
	free(dir);
	setenv("AAS_IMAGE_DIR", "", 1); /* empty counts as unset */
	assert_string_equal(dir = saas__lv_default_images_dir(), "/cache/aas/images");
	free(dir);
	unsetenv("AAS_IMAGE_DIR");
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/home/op", 1);
	assert_string_equal(dir = saas__lv_default_images_dir(), "/home/op/.cache/aas/images");
	free(dir);
	unsetenv("HOME");
	assert_string_equal(dir = saas__lv_default_images_dir(), "/var/cache/aas/images");
	free(dir);

	for (int i = 0; i < 3; i++) {
		setenv_or_unset(names[i], saved[i]);
		free(saved[i]);
	}
}

static void test_qemu_conf(void **state)
{
	char *text;

	(void)state;
	/* Not root: QEMU runs as the engine's user, confined or not (per-VM uids need root). */
	for (int confined = 0; confined < 2; confined++) {
		text = saas__lv_qemu_conf_text(false, true, confined);
		assert_string_equal(text, "# Written by libsaas for its embedded libvirt driver.\n"
		                          "stdio_handler = \"file\"\n");
		free(text);
	}
	text = saas__lv_qemu_conf_text(true, true, false);
	assert_string_equal(text, "# Written by libsaas for its embedded libvirt driver.\n"
	                          "stdio_handler = \"file\"\n"
	                          "user = \"root\"\ngroup = \"aas-guest\"\ndynamic_ownership = 0\n"
	                          "remember_owner = 0\nsecurity_driver = \"none\"\n");
	free(text);
	/* Without the group the guard cannot be installed, and QEMU stays in root's group. */
	text = saas__lv_qemu_conf_text(true, false, false);
	assert_non_null(strstr(text, "group = \"root\"\n"));
	free(text);
	/* Confined: libvirt's own processes run unprivileged, and nothing of ours is chowned by libvirt. */
	text = saas__lv_qemu_conf_text(true, true, true);
	assert_string_equal(text, "# Written by libsaas for its embedded libvirt driver.\n"
	                          "stdio_handler = \"file\"\n"
	                          "user = \"aas-qemu\"\ngroup = \"aas-guest\"\ndynamic_ownership = 0\n"
	                          "remember_owner = 0\nsecurity_driver = \"none\"\nseccomp_sandbox = 1\n");
	free(text);
}

/* ---- domain XML ------------------------------------------------------------------------------ */

#define VMDIR "/var/lib/aas/libvirt/vms/sbx-5d41402abc4b2a76"

static struct image test_image(bool disk)
{
	struct image im;

	memset(&im, 0, sizeof(im));
	snprintf(im.name, sizeof(im.name), "%s", disk ? "default" : "tiny");
	im.dir = disk ? "/images/default" : "/images/tiny";
	im.kernel = disk ? "/images/default/vmlinuz" : "/images/tiny/vmlinuz";
	im.initrd = disk ? "/images/default/initrd.img" : "/images/tiny/initramfs.cpio.gz";
	im.disk = disk ? "/images/default/disk.qcow2" : NULL;
	im.boot_args = "console=ttyS0 quiet panic=-1";
	im.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyForTheGoldenFilesOnly";
	im.recipe = "0123abcd";
	im.min_memory_mib = disk ? 0 : 512;
	return im;
}

static saas_vm_spec test_spec(void)
{
	saas_vm_spec spec;

	memset(&spec, 0, sizeof(spec));
	spec.name = "sbx-5d41402abc4b2a76";
	spec.vcpus = 2;
	spec.memory_mb = 1024;
	spec.disk_gb = 8;
	spec.internet = -1;
	return spec;
}

static char *xml_of_uid(const saas_vm_spec *spec, const struct image *im, bool kvm, bool internet, bool incoming,
                        const char *owner, unsigned int uid)
{
	struct saas__lv_domain def = {
		spec, im, owner, "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUVuZ2luZSBhYXMtZW5naW5l",
		VMDIR, im->disk ? VMDIR "/disk.qcow2" : NULL, 40022, kvm, internet, incoming, uid, uid ? 994 : 0,
	};

	return saas__lv_domain_xml(&def);
}

static char *xml_of(const saas_vm_spec *spec, const struct image *im, bool kvm, bool internet, bool incoming,
                    const char *owner)
{
	return xml_of_uid(spec, im, kvm, internet, incoming, owner, 0);
}

/* Cold boots of a disk image, each network policy. */
static void test_domain_cold(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	char *xml;

	(void)state;
	golden("domain-cold-isolated.xml", xml = xml_of(&spec, &im, false, false, false, "/var/lib/aas"));
	free(xml);
	golden("domain-cold-internet.xml", xml = xml_of(&spec, &im, false, true, false, "/var/lib/aas"));
	free(xml);
}

/* Clones (restored, no kernel, -incoming defer), each network policy. */
static void test_domain_clone(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	char *xml;

	(void)state;
	golden("domain-clone-isolated.xml", xml = xml_of(&spec, &im, false, false, true, "/var/lib/aas"));
	free(xml);
	golden("domain-clone-internet.xml", xml = xml_of(&spec, &im, false, true, true, "/var/lib/aas"));
	free(xml);
}

/*
 * An initramfs image under KVM, asked for less memory than the image needs,
 * with an owner that needs escaping.
 */
static void test_domain_initramfs_kvm(void **state)
{
	struct image im = test_image(false);
	saas_vm_spec spec = test_spec();
	char *xml;

	(void)state;
	spec.memory_mb = 256;
	spec.vcpus = 1;
	xml = xml_of(&spec, &im, true, false, false, "/srv/a&b <'q'> \"x\"");
	golden("domain-cold-initramfs-kvm.xml", xml);
	assert_non_null(strstr(xml, "<memory unit='MiB'>512</memory>"));
	assert_null(strstr(xml, "a&b"));
	free(xml);
}

/* Confined: the VM's own uid in a static DAC label, and in the metadata for adoption. */
static void test_domain_confined(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	char *xml;

	(void)state;
	golden("domain-cold-confined.xml", xml = xml_of_uid(&spec, &im, false, true, false, "/var/lib/aas", 200007));
	free(xml);
	golden("domain-clone-confined.xml", xml = xml_of_uid(&spec, &im, false, false, true, "/var/lib/aas", 200999));
	free(xml);
}

/* Drop the lines only a cold boot has (the kernel) and only a clone has (-incoming defer). */
static char *devices_only(const char *xml)
{
	static const char *const boot_only[] = { "<kernel>", "<initrd>", "<cmdline>", "'-incoming'", "'defer'",
		                                  ":uid>", "<label>" };
	saas__buf b = SAAS__BUF_INIT;

	for (const char *p = xml; *p;) {
		size_t n = strcspn(p, "\n") + (p[strcspn(p, "\n")] == '\n');
		bool skip = false;
		for (size_t i = 0; i < sizeof(boot_only) / sizeof(boot_only[0]); i++)
			if (memmem(p, n, boot_only[i], strlen(boot_only[i])))
				skip = true;
		if (!skip)
			saas__buf_put(&b, p, n);
		p += n;
	}
	return saas__buf_detach(&b, NULL);
}

/*
 * QEMU's migration stream carries device state, not configuration: a clone's
 * domain must be its template's (a cold boot of the same shape) in every
 * device, whatever the network policy.
 */
static void test_domain_clone_matches_template(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();

	(void)state;
	for (int internet = 0; internet < 2; internet++) {
		/* The clone's QEMU runs under another uid than its template's did. */
		char *cold = xml_of_uid(&spec, &im, false, internet, false, "/var/lib/aas", internet ? 200001 : 0);
		char *clone = xml_of_uid(&spec, &im, false, internet, true, "/var/lib/aas", internet ? 200002 : 0);
		char *a = devices_only(cold), *b = devices_only(clone);
		assert_string_equal(a, b);
		assert_string_not_equal(cold, clone);
		free(a);
		free(b);
		free(cold);
		free(clone);
	}
}

/* ---- domain metadata ------------------------------------------------------------------------- */

/*
 * What libvirt gives back for our metadata element is what the domain XML put
 * in, escaped as XML: an owner (a state directory) with '&' in its name must
 * still be recognised as ours.
 */
static void test_meta_round_trip(void **state)
{
	static const char *const owners[] = { "/var/lib/aas", "/srv/a&b <'q'> \"x\"", "/srv/&amp;" };
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();

	(void)state;
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		char *xml = xml_of(&spec, &im, false, false, false, owners[i]), *host_key, *owner, *meta;
		const char *start, *end;
		unsigned int port;
		assert_non_null(start = strstr(xml, "<" META_PREFIX ":vm "));
		assert_non_null(end = strstr(start, "</" META_PREFIX ":vm>"));
		assert_non_null(meta = strndup(start, (size_t)(end - start) + strlen("</" META_PREFIX ":vm>")));
		assert_int_equal(saas__lv_meta_parse(meta, &port, &host_key, &owner), SAAS_OK);
		assert_int_equal(port, 40022);
		assert_string_equal(host_key, im.host_key);
		assert_string_equal(owner, owners[i]);
		free(host_key);
		free(owner);
		free(meta);
		free(xml);
	}
}

static void test_meta_incomplete(void **state)
{
	static const char *const incomplete[] = {
		"",
		"<aas:vm><aas:host-key>k</aas:host-key><aas:owner>/o</aas:owner></aas:vm>",
		"<aas:vm><aas:ssh-port>0</aas:ssh-port><aas:host-key>k</aas:host-key><aas:owner>/o</aas:owner></aas:vm>",
		"<aas:vm><aas:ssh-port>22</aas:ssh-port><aas:owner>/o</aas:owner></aas:vm>",
		"<aas:vm><aas:ssh-port>22</aas:ssh-port><aas:host-key>k</aas:host-key></aas:vm>",
		"<aas:vm><aas:ssh-port>22</aas:ssh-port><aas:host-key>k",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(incomplete) / sizeof(incomplete[0]); i++) {
		unsigned int port = 7;
		char *host_key = (char *)"x", *owner = (char *)"x";
		assert_int_equal(saas__lv_meta_parse(incomplete[i], &port, &host_key, &owner), SAAS_ENOTFOUND);
		assert_null(host_key);
		assert_null(owner);
	}
}

/* The uid goes into the metadata and comes back out; no uid, or a malformed one, reads as 0. */
static void test_meta_uid(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	char *xml;

	(void)state;
	xml = xml_of_uid(&spec, &im, false, false, false, "/var/lib/aas", 200042);
	assert_int_equal(saas__lv_meta_uid(xml), 200042);
	free(xml);
	xml = xml_of(&spec, &im, false, false, false, "/var/lib/aas");
	assert_int_equal(saas__lv_meta_uid(xml), 0);
	free(xml);
	assert_int_equal(saas__lv_meta_uid("<aas:uid>12x</aas:uid>"), 0);
	assert_int_equal(saas__lv_meta_uid("<aas:uid>4294967295</aas:uid>"), 0);
	assert_int_equal(saas__lv_meta_uid("<aas:uid>"), 0);
}

/* ---- per-VM uids ----------------------------------------------------------------------------- */

static void test_uids_allocate_release(void **state)
{
	struct saas__lv_uids u;
	unsigned int a, b, c, d;

	(void)state;
	assert_int_equal(saas__lv_uids_init(&u, 200000, 3), SAAS_OK);
	assert_int_equal(saas__lv_uids_take(&u, &a), SAAS_OK);
	assert_int_equal(saas__lv_uids_take(&u, &b), SAAS_OK);
	assert_int_equal(a, 200000);
	assert_int_equal(b, 200001);
	/* A uid let go is reused last: the next VM gets one no QEMU had a moment ago. */
	saas__lv_uids_put(&u, a);
	assert_int_equal(saas__lv_uids_take(&u, &c), SAAS_OK);
	assert_int_equal(c, 200002);
	assert_int_equal(saas__lv_uids_take(&u, &d), SAAS_OK);
	assert_int_equal(d, 200000);
	/* Outside the range and 0: ignored. */
	saas__lv_uids_put(&u, 0);
	saas__lv_uids_put(&u, 199999);
	saas__lv_uids_put(&u, 200003);
	saas__error_clear();
	assert_int_equal(saas__lv_uids_take(&u, &a), SAAS_EBUSY);
	saas__lv_uids_clear(&u);
}

/* Every uid held: SAAS_EBUSY (a 503 at the server) with a message that says what to change. */
static void test_uids_exhausted(void **state)
{
	struct saas__lv_uids u;
	unsigned int uid;

	(void)state;
	assert_int_equal(saas__lv_uids_init(&u, 300000, 2), SAAS_OK);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	saas__error_clear();
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->code, SAAS_EBUSY);
	assert_string_equal(saas_error_last()->message, "every QEMU uid of the range 300000-300001 is in use (2 VMs): "
	                                                "raise the driver option uids");
	saas__lv_uids_put(&u, 300001);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(uid, 300001);
	saas__lv_uids_clear(&u);
}

/* VMs adopted after a restart keep their uids: a new VM never gets one of them. */
static void test_uids_adoption(void **state)
{
	struct saas__lv_uids u;
	unsigned int uid;

	(void)state;
	assert_int_equal(saas__lv_uids_init(&u, 200000, 4), SAAS_OK);
	assert_true(saas__lv_uids_mark(&u, 200000));
	assert_true(saas__lv_uids_mark(&u, 200002));
	assert_true(saas__lv_uids_mark(&u, 200002)); /* seen twice (open, then vm_state): still one VM */
	assert_false(saas__lv_uids_mark(&u, 199999));
	assert_false(saas__lv_uids_mark(&u, 200004));
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(uid, 200001);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(uid, 200003);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_EBUSY);
	saas__lv_uids_clear(&u);
}

/* ---- the guard ------------------------------------------------------------------------------- */

static void test_guard_ruleset(void **state)
{
	static const char resolv_conf[] = "# Generated by the host's resolver manager\n"
	                                  "search example.org\n"
	                                  "nameserver 192.0.2.53\n"
	                                  "nameserver 2001:db8::53\n"
	                                  "  nameserver\t198.51.100.7  \n"
	                                  "nameserver fe80::1%eth0\n"
	                                  "nameserver 203.0.113.1;flush ruleset\n"
	                                  "nameserver resolver.example.org\n"
	                                  "options edns0 trust-ad\n"
	                                  "nameserver 192.0.2.54"; /* no newline at the end */
	char *rules;

	(void)state;
	rules = saas__lv_guard_ruleset(4242, resolv_conf);
	golden("guard-resolvers.nft", rules);
	/* Only well-formed addresses reach the ruleset. */
	assert_null(strstr(rules, "flush"));
	assert_null(strstr(rules, "resolver.example.org"));
	free(rules);
}

/* No resolv.conf: the resolver sets are empty, and nothing else changes. */
static void test_guard_ruleset_no_resolvers(void **state)
{
	char *rules;

	(void)state;
	rules = saas__lv_guard_ruleset(999, NULL);
	golden("guard-no-resolvers.nft", rules);
	free(rules);
	rules = saas__lv_guard_ruleset(999, "# nothing here\n");
	golden("guard-no-resolvers.nft", rules);
	free(rules);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_bare_uri),
		cmocka_unit_test(test_config_every_option),
		cmocka_unit_test(test_config_bad_values),
		cmocka_unit_test(test_config_uids),
		cmocka_unit_test(test_default_images_dir),
		cmocka_unit_test(test_qemu_conf),
		cmocka_unit_test(test_domain_cold),
		cmocka_unit_test(test_domain_clone),
		cmocka_unit_test(test_domain_initramfs_kvm),
		cmocka_unit_test(test_domain_confined),
		cmocka_unit_test(test_domain_clone_matches_template),
		cmocka_unit_test(test_meta_round_trip),
		cmocka_unit_test(test_meta_incomplete),
		cmocka_unit_test(test_meta_uid),
		cmocka_unit_test(test_uids_allocate_release),
		cmocka_unit_test(test_uids_exhausted),
		cmocka_unit_test(test_uids_adoption),
		cmocka_unit_test(test_guard_ruleset),
		cmocka_unit_test(test_guard_ruleset_no_resolvers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
