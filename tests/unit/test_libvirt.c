/*
 * The libvirt driver's pure parts, without libvirt running: driver_config
 * parsing, the embedded qemu.conf, the domain XML and the guard's nftables
 * ruleset (both pinned by golden files), the metadata read back from a
 * domain, and the allocator of QEMU's per-VM uids.
 *
 * The guard and the per-VM egress table are also loaded for real, in a
 * network namespace of the test's own (root only; skipped elsewhere): the
 * guard comes back after a flush; egress decides by uid, swaps at runtime,
 * and its resolver answers allowed names only.
 *
 * Golden files live in tests/fixtures/libvirt/ and are compared byte for
 * byte. When a change to the XML or the ruleset is meant, regenerate them on
 * purpose and review the diff:
 *
 *     SAAS_UPDATE_GOLDEN=1 ctest -R '^unit\.libvirt$'
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libvirt/virterror.h>

#include "transport/control.h"
#include "transport/egress_mux.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/dns.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/migstream.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/spare_asked.h"
#include "driver/libvirt/spare_item.h"
#include "driver/libvirt/template.h"
#include "driver/libvirt/vm.h"
#include "driver/libvirt/vmfs.h"
#include "testutil.h"
#include "util/file.h"
#include "util/spawn.h"

/* ---- the control port's one user (vm.c) ------------------------------------------------------- */

struct port_holder {
	struct vm *v;
	int hold_ms;
	int64_t given_at;                /* saas__now_ms once given back */
};

/* Takes the port (free), holds it hold_ms, gives it back. */
static void *port_hold_main(void *arg)
{
	struct port_holder *h = arg;

	saas__sleep_ms(h->hold_ms);
	h->given_at = saas__now_ms();
	saas__lv_port_give(h->v);
	return NULL;
}

/* The port, held, is given back by another thread while this one waits wait_ms to take it for user: it has it. */
static void take_when_given(struct port_holder *h, int user, int wait_ms)
{
	pthread_t t;

	h->given_at = 0;
	assert_int_equal(pthread_create(&t, NULL, port_hold_main, h), 0);
	assert_true(saas__lv_port_take(h->v, user, wait_ms));
	assert_int_not_equal(h->given_at, 0);
	pthread_join(t, NULL);
}

static struct vm *port_vm(struct drv *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->mu, NULL);
	assert_int_equal(saas__lv_vm_add(d, "sb-port", NULL, 2222, 0, "ssh-ed25519 AAAA", NULL), SAAS_OK);
	return saas__lv_vm_get(d, "sb-port");
}

static void port_vm_free(struct drv *d, struct vm *v)
{
	saas__lv_vm_put(d, v);
	saas__lv_vm_put(d, saas__lv_vm_unlink(d, "sb-port"));
	pthread_mutex_destroy(&d->mu);
}

/*
 * A command or a connection that finds the port held waits for it a bounded
 * while (a relay winding down gives it back soon), then goes without it; a
 * transfer waits for a transfer as long as it takes.
 */
static void test_port_take_waits(void **state)
{
	struct drv d;
	struct vm *v = port_vm(&d);
	struct port_holder h = { v, 100, 0 };

	(void)state;
	assert_true(saas__lv_port_take(v, PORT_EXEC, 0));
	assert_false(saas__lv_port_take(v, PORT_EXEC, 0));
	assert_false(saas__lv_port_take(v, PORT_EXEC, 50));
	assert_false(saas__lv_port_take(v, PORT_FILES, 0));
	/* Given back while a command waits: the command has it. */
	take_when_given(&h, PORT_EXEC, 60000);
	/* A transfer's turn after a command's, given back while it waits. */
	take_when_given(&h, PORT_FILES, 60000);
	/* A transfer waits for a transfer however long it is asked to wait: wait_ms 0. */
	take_when_given(&h, PORT_FILES, 0);
	saas__lv_port_give(v);
	port_vm_free(&d, v);
}

/*
 * The port's quiet (when a relay's end brings the SSH session up): only
 * once it has been free for the whole span since its last user gave it
 * back, a user that takes it meanwhile starting the span again; never
 * while it is held; the driver closing ends the wait.
 */
static void test_port_quiet(void **state)
{
	struct drv d;
	struct vm *v = port_vm(&d);
	struct port_holder h = { v, 300, 0 };
	pthread_t t;

	(void)state;
	assert_true(saas__lv_port_quiet(&d, v, 0));
	assert_true(saas__lv_port_take(v, PORT_EXEC, 0));
	assert_int_equal(pthread_create(&t, NULL, port_hold_main, &h), 0);
	assert_true(saas__lv_port_quiet(&d, v, 200));
	/* (Counted on another clock than given_at's: a millisecond's rounding either way.) */
	assert_int_not_equal(h.given_at, 0);
	assert_true(saas__now_ms() - h.given_at >= 190);
	pthread_join(t, NULL);
	/* Given back just now: the span starts there. */
	assert_true(saas__lv_port_take(v, PORT_EXEC, 0));
	h.given_at = saas__now_ms();
	saas__lv_port_give(v);
	assert_true(saas__lv_port_quiet(&d, v, 200));
	assert_true(saas__now_ms() - h.given_at >= 190);
	/* Held, and the driver closes: no quiet. */
	assert_true(saas__lv_port_take(v, PORT_EXEC, 0));
	d.closing = 1;
	assert_false(saas__lv_port_quiet(&d, v, 0));
	saas__lv_port_give(v);
	port_vm_free(&d, v);
}

/* ---- golden files ---------------------------------------------------------------------------- */

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
	want = saas_test_slurp(path, NULL);
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
	assert_int_equal(cfg->disk_sweep_grace_ms, 3600 * 1000);
	assert_int_equal(cfg->uids, UIDS_AUTO);
	assert_int_equal(cfg->uid_first, 200000);
	assert_int_equal(cfg->uid_count, 1000);
	assert_int_equal(cfg->cpu_milli, 1000);
	assert_int_equal(cfg->min_free_memory_mb, 1024);
	/* Spares adapt to the creates asked for, within a memory budget worked out from the host's. */
	assert_true(cfg->spares_auto);
	assert_int_equal(cfg->spare_memory_mb, 0);
	/* And, after two minutes without a create, keep 16 for the next burst. */
	assert_int_equal(cfg->spare_idle_ms, 120000);
	assert_int_equal(cfg->spare_idle_count, 16);
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

	assert_int_equal(saas__lv_config_parse(&cfg, "accel=auto network=auto boot_timeout=1 disk_sweep_grace=1"), SAAS_OK);
	assert_int_equal(cfg.accel, ACCEL_AUTO);
	assert_int_equal(cfg.network, NET_AUTO);
	assert_int_equal(cfg.boot_timeout_ms, 1000);
	assert_int_equal(cfg.disk_sweep_grace_ms, 1000);
	assert_null(cfg.nft_helper);
	saas__lv_config_clear(&cfg);

	/* The nftables helper is run by path, never looked up in PATH. */
	assert_int_equal(saas__lv_config_parse(&cfg, "nft_helper=/opt/aas/libexec/aas-nft"), SAAS_OK);
	assert_string_equal(cfg.nft_helper, "/opt/aas/libexec/aas-nft");
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "nft_helper=aas-nft"), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "absolute path"));

	/* The memory a host keeps: 0 (keep none) to 16 TiB. */
	assert_int_equal(saas__lv_config_parse(&cfg, "min_free_memory_mb=0"), SAAS_OK);
	assert_int_equal(cfg.min_free_memory_mb, 0);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "min_free_memory_mb=16777216"), SAAS_OK);
	assert_int_equal(cfg.min_free_memory_mb, 16u << 20);
	saas__lv_config_clear(&cfg);

	/* Clones' QEMUs started ahead: none to SPARES_MAX. */
	assert_int_equal(saas__lv_config_parse(&cfg, "spares=0"), SAAS_OK);
	assert_int_equal(cfg.spares, 0);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spares=32"), SAAS_OK);
	assert_int_equal(cfg.spares, SPARES_MAX);
	assert_false(cfg.spares_auto);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spares=4 spares=auto spare_memory_mb=512"), SAAS_OK);
	assert_true(cfg.spares_auto);
	assert_int_equal(cfg.spare_memory_mb, 512);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spare_memory_mb=65536 spare_memory_mb=auto"), SAAS_OK);
	assert_int_equal(cfg.spare_memory_mb, 0);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spare_idle=off spare_idle_count=0"), SAAS_OK);
	assert_int_equal(cfg.spare_idle_ms, 0);
	assert_int_equal(cfg.spare_idle_count, 0);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spare_idle=86400 spare_idle_count=32"), SAAS_OK);
	assert_int_equal(cfg.spare_idle_ms, 86400000);
	assert_int_equal(cfg.spare_idle_count, 32);
	saas__lv_config_clear(&cfg);
}

/*
 * A VM starts only where the host has its memory and the reserve available;
 * short, the refusal is SAAS_EBUSY (a 503 for a tenant) and names no path.
 * An unknown reading (0) refuses nothing.
 */
static void test_memory_room(void **state)
{
	(void)state;
	assert_int_equal(saas__lv_memory_room(5120, 4096, 1024), SAAS_OK);
	assert_int_equal(saas__lv_memory_room(65536, 4096, 1024), SAAS_OK);
	assert_int_equal(saas__lv_memory_room(0, 4096, 1024), SAAS_OK);
	assert_int_equal(saas__lv_memory_room(4096, 4096, 0), SAAS_OK);
	assert_int_equal(saas__lv_memory_room(5119, 4096, 1024), SAAS_EBUSY);
	assert_string_equal(saas_error_last()->message,
	                    "the server is short of memory for a sandbox of 4096 MiB (5119 MiB available, 1024 MiB kept "
	                    "free); try again later or choose a smaller size");
	/* No overflow: the largest reserve with the largest size. */
	assert_int_equal(saas__lv_memory_room(UINT64_MAX >> 20, UINT32_MAX, 16u << 20), SAAS_OK);
	assert_int_equal(saas__lv_memory_room(1, UINT32_MAX, 16u << 20), SAAS_EBUSY);
}

/* uids=auto|off|FIRST-LAST: a range keeps its bounds exactly, from one uid to UIDS_COUNT_MAX. */
/* The options of a remote VM host and of the cluster its engines form. */
static void test_config_remote(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, "uri=qemu+tls://vm1.example/system listen=10.0.0.5 owner=prod-1 "
	                                             "ssh_key=/etc/aas/cluster_key pool=aasvm pool_dir=/srv/aas remote=on"),
	                 SAAS_OK);
	assert_string_equal(cfg.uri, "qemu+tls://vm1.example/system");
	assert_string_equal(cfg.listen, "10.0.0.5");
	assert_string_equal(cfg.owner, "prod-1");
	assert_string_equal(cfg.ssh_key, "/etc/aas/cluster_key");
	assert_string_equal(cfg.pool, "aasvm");
	assert_string_equal(cfg.pool_dir, "/srv/aas");
	assert_int_equal(cfg.remote, REMOTE_ON);
	saas__lv_config_clear(&cfg);
	/* Unset, each has its default (the driver fills them in at open). */
	assert_int_equal(saas__lv_config_parse(&cfg, "accel=tcg"), SAAS_OK);
	assert_int_equal(cfg.remote, REMOTE_AUTO);
	assert_null(cfg.listen);
	assert_null(cfg.owner);
	assert_null(cfg.ssh_key);
	assert_null(cfg.pool);
	assert_null(cfg.pool_dir);
	saas__lv_config_clear(&cfg);
	/* The engine's driver_config, then the host's uri= and listen= (what the core appends) win. */
	assert_int_equal(saas__lv_config_parse(&cfg, "owner=c1 uri=qemu:///system uri=qemu+ssh://root@h2/system "
	                                             "listen=10.1.0.2"),
	                 SAAS_OK);
	assert_string_equal(cfg.uri, "qemu+ssh://root@h2/system");
	saas__lv_config_clear(&cfg);
	/* A bare URI followed by options (a VM host's, appended by the engine) is the first uri=. */
	assert_int_equal(saas__lv_config_parse(&cfg, "qemu:///system uri=qemu+tcp://10.231.1.2/system listen=10.231.1.2"),
	                 SAAS_OK);
	assert_string_equal(cfg.uri, "qemu+tcp://10.231.1.2/system");
	assert_string_equal(cfg.listen, "10.231.1.2");
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "qemu+unix:///system?socket=/run/l.sock accel=tcg"), SAAS_OK);
	assert_string_equal(cfg.uri, "qemu+unix:///system?socket=/run/l.sock");
	saas__lv_config_clear(&cfg);
}

/* A URI that names a host is a remote VM host (remote=auto). */
/* A libvirt save image's head: the header, data_len bytes of description, then QEMU's stream. */
static size_t save_head(unsigned char *buf, size_t cap, const char *magic, uint32_t version, uint32_t data_len,
                        uint32_t format, bool swap, const char *stream)
{
	uint32_t words[5] = { version, data_len, 1, format, 0 };
	size_t n = LV_SAVE_HEADER_BYTES + data_len + strlen(stream);

	assert_true(n <= cap);
	memset(buf, 0, n);
	memcpy(buf, magic, 16);
	for (size_t i = 0; i < 5; i++) {
		uint32_t w = swap ? __builtin_bswap32(words[i]) : words[i];
		memcpy(buf + 16 + 4 * i, &w, 4);
	}
	memcpy(buf + LV_SAVE_HEADER_BYTES, "<domain/>", 9);
	memcpy(buf + LV_SAVE_HEADER_BYTES + data_len, stream, strlen(stream));
	return n;
}

static void test_save_stream_offset(void **state)
{
	unsigned char buf[4096];
	uint64_t off = 0;
	size_t n;

	(void)state;
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_OK);
	assert_int_equal(off, LV_SAVE_HEADER_BYTES + 1000);
	/* Only the header at hand: the offset, the stream's magic unchecked. */
	assert_int_equal(saas__lv_save_stream_offset(buf, LV_SAVE_HEADER_BYTES, &off), SAAS_OK);
	assert_int_equal(off, LV_SAVE_HEADER_BYTES + 1000);
	/* Written on a host of the other byte order. */
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 1000, 0, true, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_OK);
	assert_int_equal(off, LV_SAVE_HEADER_BYTES + 1000);
	/* A save libvirt did not finish, another file, a compressed one, another version, no stream after it. */
	n = save_head(buf, sizeof(buf), "LibvirtQemudPart", 2, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "partial"));
	n = save_head(buf, sizeof(buf), "QEVMQEVMQEVMQEVM", 2, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 1000, 1, false, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "save_image_format"));
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 3, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 1000, 0, false, "JUNK");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 0, 0, false, "");
	assert_int_equal(saas__lv_save_stream_offset(buf, n, &off), SAAS_EINVAL);
	assert_int_equal(saas__lv_save_stream_offset(buf, LV_SAVE_HEADER_BYTES - 1, &off), SAAS_EINVAL);
}

/* The domain description's length (whose a state is, for the snapshot sweep): complete or still being written. */
static void test_save_xml_len(void **state)
{
	unsigned char buf[4096];
	uint32_t len = 0;
	size_t n;

	(void)state;
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_xml_len(buf, n, &len), SAAS_OK);
	assert_int_equal(len, 1000);
	n = save_head(buf, sizeof(buf), "LibvirtQemudPart", 2, 700, 0, true, "");
	assert_int_equal(saas__lv_save_xml_len(buf, LV_SAVE_HEADER_BYTES, &len), SAAS_OK);
	assert_int_equal(len, 700);
	/* Another file, another version, none, or too little of it. */
	n = save_head(buf, sizeof(buf), "QEVMQEVMQEVMQEVM", 2, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_xml_len(buf, n, &len), SAAS_EINVAL);
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 3, 1000, 0, false, "QEVM");
	assert_int_equal(saas__lv_save_xml_len(buf, n, &len), SAAS_EINVAL);
	n = save_head(buf, sizeof(buf), "LibvirtQemudSave", 2, 0, 0, false, "");
	assert_int_equal(saas__lv_save_xml_len(buf, n, &len), SAAS_EINVAL);
	assert_int_equal(saas__lv_save_xml_len(buf, LV_SAVE_HEADER_BYTES - 1, &len), SAAS_EINVAL);
}

static void test_tpl_volume_names(void **state)
{
	const char *key = "0123456789abcdef0123456789abcdef";
	char stem[TPL_STEM_MAX], lease[160];

	(void)state;
	assert_true(saas__lv_tpl_volume(TPL_PREFIX "0123456789abcdef0123456789abcdef-a1b2c3d4.ready", key, "ready", stem));
	assert_string_equal(stem, TPL_PREFIX "0123456789abcdef0123456789abcdef-a1b2c3d4");
	assert_true(saas__lv_tpl_volume(TPL_PREFIX "ffffffffffffffffffffffffffffffff-00000000.json", NULL, "json", stem));
	assert_string_equal(stem, TPL_PREFIX "ffffffffffffffffffffffffffffffff-00000000");
	/* Another key, another suffix, a suffix that only starts alike, no generation, not ours at all. */
	assert_false(saas__lv_tpl_volume(TPL_PREFIX "ffffffffffffffffffffffffffffffff-00000000.ready", key, "ready", stem));
	assert_false(saas__lv_tpl_volume(TPL_PREFIX "0123456789abcdef0123456789abcdef-a1b2c3d4.state", key, "ready", stem));
	assert_false(saas__lv_tpl_volume(TPL_PREFIX "0123456789abcdef0123456789abcdef-a1b2c3d4.readyx", key, "ready", stem));
	assert_false(saas__lv_tpl_volume(TPL_PREFIX "0123456789abcdef0123456789abcdef.ready", key, "ready", stem));
	assert_false(saas__lv_tpl_volume(TPL_PREFIX "0123456789abcdef0123456789abcdeX-a1b2c3d4.ready", NULL, "ready", stem));
	assert_false(saas__lv_tpl_volume("sbx-abc.qcow2", NULL, "qcow2", stem));
	assert_false(saas__lv_tpl_volume("img-0123-disk", NULL, "ready", stem));
	/* The lease name fits the store's limit. */
	assert_true(saas__lv_tpl_lease_name(lease, sizeof(lease), "0011223344556677", key));
	assert_string_equal(lease, "template:0011223344556677:0123456789abcdef0123456789abcdef");
	assert_true(strlen(lease) <= 127);
	assert_false(saas__lv_tpl_lease_name(lease, 20, "0011223344556677", key));
}

/* A snapshot's volumes on a host: named by the core's snapshot name only, read back exactly. */
static void test_snap_volume_names(void **state)
{
	char snap[64];

	(void)state;
	assert_true(saas__lv_snap_volume(SNAP_PREFIX "snap-0123456789abcdefghij.ready", "ready", snap));
	assert_string_equal(snap, "snap-0123456789abcdefghij");
	assert_true(saas__lv_snap_volume(SNAP_PREFIX "a.state", "state", snap));
	assert_string_equal(snap, "a");
	/* Another suffix, one that only starts alike, no name, a name no snapshot has, a template's, an overlay. */
	assert_false(saas__lv_snap_volume(SNAP_PREFIX "snap-1.state", "ready", snap));
	assert_false(saas__lv_snap_volume(SNAP_PREFIX "snap-1.readyx", "ready", snap));
	assert_false(saas__lv_snap_volume(SNAP_PREFIX ".ready", "ready", snap));
	assert_false(saas__lv_snap_volume(SNAP_PREFIX "Snap_1.ready", "ready", snap));
	assert_false(saas__lv_snap_volume(SNAP_PREFIX "a.b.ready", "ready", snap));
	assert_false(saas__lv_snap_volume(SNAP_PREFIX "0123456789012345678901234567890123456789012345678901234567890123.ready",
	                                  "ready", snap));
	assert_false(saas__lv_snap_volume(TPL_PREFIX "0123456789abcdef0123456789abcdef-a1b2c3d4.ready", "ready", snap));
	assert_false(saas__lv_snap_volume("sbx-abc.qcow2", "qcow2", snap));
}

/* A RAM block's name in a stream's head, as a remote host's state is read (through libvirt, into memory). */
static void test_ram_block_in(void **state)
{
	static const char aas[] = "QEVM\0\0\0\3\3ram\0\0\0\0\0\0\0\4\7aas-mem\0\0\0\0\40\0\0\0";
	char block[64];

	(void)state;
	saas__lv_ram_block_in(aas, sizeof(aas) - 1, block, sizeof(block));
	assert_string_equal(block, "aas-mem");
	saas__lv_ram_block_in("QEVM pc.ram aas-mem", 19, block, sizeof(block));
	assert_string_equal(block, "");
	saas__lv_ram_block_in(aas, 0, block, sizeof(block));
	assert_string_equal(block, "");
}

static void test_uri_remote(void **state)
{
	(void)state;
	assert_true(saas__lv_uri_vmhost("qemu+tcp://10.231.1.2/system"));
	assert_true(saas__lv_uri_vmhost("qemu+ssh://root@vm1.example/system?keyfile=/k"));
	assert_true(saas__lv_uri_vmhost("qemu+tls://vm1.example:16514/system"));
	assert_true(saas__lv_uri_vmhost("qemu+ssh://a@b@vm1/system"));
	assert_false(saas__lv_uri_vmhost("qemu:///system"));
	assert_false(saas__lv_uri_vmhost("qemu+unix:///system?socket=/run/x.sock"));
	assert_false(saas__lv_uri_vmhost("qemu:///embed?root=/run/aas-libvirt/x"));
	assert_false(saas__lv_uri_vmhost("qemu+ssh://root@/system"));
	assert_false(saas__lv_uri_vmhost(NULL));
	assert_false(saas__lv_uri_vmhost("qemu"));
}

static void test_caps_cpu_virt(void **state)
{
	(void)state;
	assert_true(saas__lv_caps_cpu_virt("<capabilities><host><uuid>u</uuid><cpu><arch>x86_64</arch>"
	                                   "<feature name='vme'/><feature name='vmx'/></cpu></host></capabilities>"));
	assert_true(saas__lv_caps_cpu_virt("<capabilities><host><cpu><feature name=\"svm\"/></cpu></host>"));
	/* A CPU without the flag (what a nested host with a usable /dev/kvm can show). */
	assert_false(saas__lv_caps_cpu_virt("<capabilities><host><cpu><model>kvm64</model><feature name='vme'/>"
	                                    "<feature name='hypervisor'/></cpu></host></capabilities>"));
	/* Only the host's CPU counts, and only a whole name. */
	assert_false(saas__lv_caps_cpu_virt("<capabilities><host><cpu><feature name='vmxx'/></cpu>"
	                                    "<feature name='vmx'/></host></capabilities>"));
	assert_false(saas__lv_caps_cpu_virt("<capabilities><guest><cpu><feature name='svm'/></cpu></guest>"));
	assert_false(saas__lv_caps_cpu_virt("<capabilities><host><cpu><feature name='svm'/></host>"));
	assert_false(saas__lv_caps_cpu_virt("<capabilities><host><cpu><feature name=svm/></cpu></host>"));
	assert_false(saas__lv_caps_cpu_virt(""));
	assert_false(saas__lv_caps_cpu_virt(NULL));
}

static void test_config_uids(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, "uids=off"), SAAS_OK);
	assert_int_equal(cfg.uids, UIDS_OFF);
	/* Template memory: mapped unless told otherwise. */
	assert_int_equal(cfg.template_memory, TMPL_MEM_MAPPED);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "template_memory=loaded"), SAAS_OK);
	assert_int_equal(cfg.template_memory, TMPL_MEM_LOADED);
	assert_int_equal(saas__lv_config_parse(&cfg, "template_memory=loaded template_memory=mapped"), SAAS_OK);
	assert_int_equal(cfg.template_memory, TMPL_MEM_MAPPED);
	/* The embedded driver reaps its QEMUs unless told not to. */
	assert_int_equal(cfg.reap, REAP_AUTO);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "reap=off"), SAAS_OK);
	assert_int_equal(cfg.reap, REAP_OFF);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "reap=off reap=auto"), SAAS_OK);
	assert_int_equal(cfg.reap, REAP_AUTO);
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

/* cpu_limit=on|off|RATIO: thousandths exactly, at both bounds. */
static void test_config_cpu_limit(void **state)
{
	static const struct {
		const char *config;
		unsigned int milli;
	} good[] = {
		{ "cpu_limit=off", 0 },      { "cpu_limit=on", 1000 },     { "cpu_limit=0.5", 500 },
		{ "cpu_limit=2", 2000 },     { "cpu_limit=0.01", 10 },     { "cpu_limit=16", 16000 },
		{ "cpu_limit=1.125", 1125 }, { "cpu_limit=16.000", 16000 }, { "cpu_limit=00001.5", 1500 },
		{ "cpu_limit=off cpu_limit=0.25", 250 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct saas__lv_config cfg;
		assert_int_equal(saas__lv_config_parse(&cfg, good[i].config), SAAS_OK);
		assert_int_equal(cfg.cpu_milli, good[i].milli);
		saas__lv_config_clear(&cfg);
	}
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
		{ "template_memory=shared", "template_memory must be mapped or loaded, not 'shared'" },
		{ "reap=on", "reap must be auto or off, not 'on'" },
		{ "reap=", "reap must be auto or off, not ''" },
		{ "boot_timeout=0", "boot_timeout must be 1 to 3600 seconds" },
		{ "min_free_memory_mb=-1", "min_free_memory_mb must be 0 to 16777216 MiB, not '-1'" },
		{ "min_free_memory_mb=16777217", "min_free_memory_mb must be 0 to 16777216 MiB, not '16777217'" },
		{ "min_free_memory_mb=", "min_free_memory_mb must be 0 to 16777216 MiB, not ''" },
		{ "min_free_memory_mb=1g", "min_free_memory_mb must be 0 to 16777216 MiB, not '1g'" },
		{ "min_free_memory_mb=99999999999999999999", "min_free_memory_mb must be 0 to 16777216 MiB, not '99999999999999999999'" },
		{ "spares=33", "spares must be auto or 0 to 32, not '33'" },
		{ "spares=-1", "spares must be auto or 0 to 32, not '-1'" },
		{ "spares=+1", "spares must be auto or 0 to 32, not '+1'" },
		{ "spares=", "spares must be auto or 0 to 32, not ''" },
		{ "spares=one", "spares must be auto or 0 to 32, not 'one'" },
		{ "spares=AUTO", "spares must be auto or 0 to 32, not 'AUTO'" },
		{ "spare_memory_mb=0", "spare_memory_mb must be auto or 1 to 65536 MiB (spares=0 starts none), not '0'" },
		{ "spare_idle=0", "spare_idle must be off or 1 to 86400 seconds, not '0'" },
		{ "spare_idle=86401", "spare_idle must be off or 1 to 86400 seconds, not '86401'" },
		{ "spare_idle=2m", "spare_idle must be off or 1 to 86400 seconds, not '2m'" },
		{ "spare_idle_count=33", "spare_idle_count must be 0 to 32, not '33'" },
		{ "spare_idle_count=-1", "spare_idle_count must be 0 to 32, not '-1'" },
		{ "spare_memory_mb=65537", "spare_memory_mb must be auto or 1 to 65536 MiB (spares=0 starts none), not '65537'" },
		{ "spare_memory_mb=1g", "spare_memory_mb must be auto or 1 to 65536 MiB (spares=0 starts none), not '1g'" },
		{ "spare_memory_mb=", "spare_memory_mb must be auto or 1 to 65536 MiB (spares=0 starts none), not ''" },
		{ "boot_timeout=3601", "boot_timeout must be 1 to 3600 seconds" },
		{ "disk_sweep_grace=0", "disk_sweep_grace must be 1 to 86400 seconds" },
		{ "disk_sweep_grace=86401", "disk_sweep_grace must be 1 to 86400 seconds" },
		{ "disk_sweep_grace=1h", "disk_sweep_grace must be 1 to 86400 seconds" },
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
		{ "cpu_limit=yes", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not 'yes'" },
		{ "cpu_limit=", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not ''" },
		{ "cpu_limit=.5", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '.5'" },
		{ "cpu_limit=1.", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '1.'" },
		{ "cpu_limit=-1", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '-1'" },
		{ "cpu_limit=0.5x", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '0.5x'" },
		{ "cpu_limit=1.0001", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '1.0001'" },
		{ "cpu_limit=123456", "cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '123456'" },
		{ "cpu_limit=0", "cpu_limit must be a ratio of host CPUs per vCPU from 0.01 to 16, not '0'" },
		{ "cpu_limit=0.009", "cpu_limit must be a ratio of host CPUs per vCPU from 0.01 to 16, not '0.009'" },
		{ "cpu_limit=16.001", "cpu_limit must be a ratio of host CPUs per vCPU from 0.01 to 16, not '16.001'" },
		{ "cpu_limit=99999", "cpu_limit must be a ratio of host CPUs per vCPU from 0.01 to 16, not '99999'" },
		{ "accel=tcg,oops", "libvirt driver option 'oops' is not key=value" },
		{ "remote=yes", "remote must be auto, off or on, not 'yes'" },
		{ "listen=host.example", "listen must be the VM host's IPv4 address, not 'host.example'" },
		{ "listen=::1", "listen must be the VM host's IPv4 address, not '::1'" },
		{ "listen=10.0.0.256", "listen must be the VM host's IPv4 address, not '10.0.0.256'" },
		{ "owner=", "owner must be 1 to 64 letters, digits, '.', '_' or '-', not ''" },
		{ "owner=a/b", "owner must be 1 to 64 letters, digits, '.', '_' or '-', not 'a/b'" },
		{ "owner=-x", "owner must be 1 to 64 letters, digits, '.', '_' or '-', not '-x'" },
		{ "owner=a<b>", "owner must be 1 to 64 letters, digits, '.', '_' or '-', not 'a<b>'" },
		{ "owner=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "owner must be 1 to 64 letters, digits, '.', '_' or '-', not "
		  "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'" },
		{ "ssh_key=cluster_key", "ssh_key must be an absolute path, not 'cluster_key'" },
		{ "pool=a'b", "pool must be 1 to 64 letters, digits, '.', '_' or '-', not 'a'b'" },
		{ "pool_dir=srv/aas", "pool_dir must be an absolute path on the VM host, not 'srv/aas'" },
		{ "pool_dir=/srv/a'b", "pool_dir must be an absolute path on the VM host, not '/srv/a'b'" },
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
	spec.network = NULL;
	return spec;
}

static char *xml_of_uid(const saas_vm_spec *spec, const struct image *im, bool kvm, bool internet, bool incoming,
                        const char *owner, unsigned int uid)
{
	struct saas__lv_domain def = {
		spec, im, owner, "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUVuZ2luZSBhYXMtZW5naW5l",
		VMDIR, im->disk ? VMDIR "/disk.qcow2" : NULL, 40022, kvm, internet, incoming, uid, uid ? 994 : 0,
	};

	/* Confined VMs are the embedded root's: they name its QEMU link (emulator.h). */
	if (uid)
		def.emulator = "/run/aas-libvirt/0123456789abcdef/bin/qemu-system-x86_64";
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

/*
 * On a remote host: the SSH forward on the host's address, the image's files
 * as the host has them (volumes), the console a pty (no file of the engine's).
 */
static void test_domain_remote(void **state)
{
	struct image im = test_image(false);
	saas_vm_spec spec = test_spec();
	struct saas__lv_domain def = { &spec, &im, "prod-1", "a2V5", NULL, NULL, 20022, false, false, false };
	char *xml;

	(void)state;
	def.listen = "10.231.1.2";
	def.kernel = "/var/lib/libvirt/images/aas/img-0123-kernel";
	def.initrd = "/var/lib/libvirt/images/aas/img-0123-initrd";
	assert_non_null(xml = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml, "restrict=on,hostfwd=tcp:10.231.1.2:20022-:22'"));
	assert_non_null(strstr(xml, "<kernel>/var/lib/libvirt/images/aas/img-0123-kernel</kernel>"));
	assert_non_null(strstr(xml, "<initrd>/var/lib/libvirt/images/aas/img-0123-initrd</initrd>"));
	assert_non_null(strstr(xml, "<serial type='pty'>"));
	assert_non_null(strstr(xml, "<aas:owner>prod-1</aas:owner>"));
	assert_null(strstr(xml, "console.log"));
	assert_null(strstr(xml, im.kernel));
	assert_null(strstr(xml, MUX_PORT_NAME));
	free(xml);
	/*
	 * Its egress through the servers: the channel, before the control
	 * channel (the guest learns the ports' names in that order), and slirp
	 * restricted even for a guest with internet.
	 */
	def.egress = def.control = def.internet = true;
	assert_non_null(xml = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml, "<target type='virtio' name='" MUX_PORT_NAME "'/>"));
	assert_true(strstr(xml, MUX_PORT_NAME) < strstr(xml, "<target type='virtio' name='" CONTROL_PORT_NAME "'/>"));
	assert_non_null(strstr(xml, "restrict=on,hostfwd=tcp:10.231.1.2:20022-:22'"));
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

/*
 * Host limits in the XML: the CPU quota (2 vCPUs at 0.5 host CPU each: one
 * host CPU per period) and the I/O weight; neither when the host has no
 * controller for it (0). Under TCG, the code cache's cap is there either way.
 */
static void test_domain_limits(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	struct saas__lv_domain def = {
		&spec, &im, "/var/lib/aas", "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUVuZ2luZSBhYXMtZW5naW5l",
		VMDIR, VMDIR "/disk.qcow2", 40022, false, false, false, 200007, 994, false, 500, 200,
	};
	char *xml;

	(void)state;
	golden("domain-cold-limited.xml", xml = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml, "<global_period>100000</global_period>"));
	assert_non_null(strstr(xml, "<global_quota>100000</global_quota>"));
	assert_non_null(strstr(xml, "<weight>200</weight>"));
	assert_non_null(strstr(xml, "<tb-cache unit='MiB'>256</tb-cache>"));
	free(xml);
	/* 3 vCPUs at 1.125 host CPUs: 337500 us of every 100000. */
	spec.vcpus = 3;
	def.cpu_milli = 1125;
	xml = saas__lv_domain_xml(&def);
	assert_non_null(strstr(xml, "<global_quota>337500</global_quota>"));
	free(xml);
	def.cpu_milli = def.io_weight = 0;
	def.kvm = true;
	xml = saas__lv_domain_xml(&def);
	assert_null(strstr(xml, "<cputune>"));
	assert_null(strstr(xml, "<blkiotune>"));
	assert_null(strstr(xml, "<tcg>"));
	free(xml);
}

/*
 * Guest RAM: one backend of id aas-mem in every VM, chosen with -machine
 * memory-backend (after libvirt's own -machine, so it wins): anonymous for a
 * cold boot, a template's file shared, a clone's the same file private.
 * Commas in the path are doubled (QEMU's option syntax), XML escaped.
 */
static void test_domain_memory(void **state)
{
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	struct saas__lv_domain def = {
		&spec, &im, "/var/lib/aas", "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUVuZ2luZSBhYXMtZW5naW5l",
		VMDIR, VMDIR "/disk.qcow2", 40022, false, false, false, 200007, 994, false, 0, 0, LV_MEM_RAM, NULL,
	};
	char *xml;

	(void)state;
	xml = saas__lv_domain_xml(&def);
	assert_non_null(strstr(xml, "<qemu:arg value='memory-backend-ram,id=aas-mem,size=1024M'/>"));
	assert_non_null(strstr(xml, "<qemu:arg value='-machine'/>\n    <qemu:arg value='memory-backend=aas-mem'/>"));
	free(xml);
	def.mem = LV_MEM_SHARED;
	def.mem_path = "/proc/4242/fd/7";
	golden("domain-template-mapped.xml", xml = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml, "memory-backend-file,id=aas-mem,size=1024M,share=on,mem-path=/proc/4242/fd/7'"));
	free(xml);
	def.mem = LV_MEM_PRIVATE;
	def.incoming = true;
	def.mem_path = "/run/a,b&c";
	xml = saas__lv_domain_xml(&def);
	assert_non_null(strstr(xml, "size=1024M,share=off,mem-path=/run/a,,b&amp;c'"));
	free(xml);
}

/* Per size: pids, memory and I/O weight. */
static void test_limits_per_size(void **state)
{
	(void)state;
	assert_int_equal(saas__lv_pids_max(1), 129);
	assert_int_equal(saas__lv_pids_max(8), 136);
	assert_int_equal(saas__lv_memory_limit_mib(1024, false), 1024 + 256 + 256);
	assert_int_equal(saas__lv_memory_limit_mib(1024, true), 1024 + 256);
	assert_int_equal(saas__lv_io_weight(1), 100);
	assert_int_equal(saas__lv_io_weight(4), 400);
	assert_int_equal(saas__lv_io_weight(10), 1000);
	assert_int_equal(saas__lv_io_weight(4096), 1000);
}

/* ---- host limits: the cgroup hierarchies and the pids cgroup, against a fake tree ---------------- */

static void put_text(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static char *get_text(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return saas_test_slurp(path, NULL);
}

/* A hierarchy of the fake tree: T/name, made. */
static char *fake_mount(const char *t, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", t, name) > 0);
	assert_int_equal(saas__mkdir_p(p, 0755), 0);
	return p;
}

/* This kind of host: cgroup v1 hybrid, no systemd: libvirt makes the domain cpu cgroups, no pids one. */
static void test_cgroup_v1_ours(void **state)
{
	char *t = saas_test_tmpdir(), *pids = fake_mount(t, "pids"), *cpu = fake_mount(t, "cpu,cpuacct"),
	     *blkio = fake_mount(t, "blkio"), *mem = fake_mount(t, "memory"), *v2 = fake_mount(t, "unified"), *mounts,
	     *dir = NULL, *text;
	struct saas__lv_cg cg;
	bool own = false;

	(void)state;
	put_text(v2, "cgroup.controllers", "hugetlb\n");
	put_text(blkio, "blkio.bfq.io_service_bytes", "Total 0\n"); /* BFQ is there to honour weights */
	assert_true(asprintf(&mounts,
	                     "tmpfs %s tmpfs rw 0 0\n"
	                     "cgroup %s cgroup rw,relatime,cpu,cpuacct 0 0\n"
	                     "cgroup %s cgroup rw,relatime,memory 0 0\n"
	                     "cgroup %s cgroup rw,relatime,blkio 0 0\n"
	                     "cgroup %s cgroup rw,relatime,pids 0 0\n"
	                     "cgroup %s/systemd cgroup rw,relatime,name=systemd 0 0\n"
	                     "cgroup2 %s cgroup2 rw,relatime 0 0\n",
	                     t, cpu, mem, blkio, pids, t, v2) > 0);
	assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
	for (int i = 0; i < CG_NCTL; i++)
		assert_true(saas__lv_cg_has(&cg, i));
	assert_string_equal(cg.v1[CG_PIDS], pids);
	assert_string_equal(cg.v1[CG_CPU], cpu);
	assert_false(cg.v2_has[CG_PIDS]);

	assert_int_equal(saas__lv_cg_pids_dir(&cg,
	                                      "9:name=systemd:/\n8:pids:/\n7:blkio:/machine/qemu-embed-1-sbx-a.libvirt-qemu\n"
	                                      "2:cpu,cpuacct:/machine/qemu-embed-1-sbx-a.libvirt-qemu/emulator\n0::/\n",
	                                      "aas-0123456789abcdef", "sbx-a", &dir, &own),
	                 SAAS_OK);
	assert_true(own);
	assert_true(strstr(dir, "/pids/aas-0123456789abcdef/sbx-a") && strncmp(dir, pids, strlen(pids)) == 0);

	/* Made, limited, QEMU moved in; removed at destroy (a real cgroup's files go with it). */
	assert_int_equal(saas__lv_cg_pids_limit(dir, own, 4242, saas__lv_pids_max(2)), SAAS_OK);
	assert_string_equal(text = get_text(dir, "pids.max"), "130");
	free(text);
	assert_string_equal(text = get_text(dir, "cgroup.procs"), "4242");
	free(text);
	assert_int_equal(saas__lv_cg_pids_remove(&cg, "aas-0123456789abcdef", "sbx-a"), SAAS_EIO); /* not empty */
	put_text(dir, "pids.max", "");
	{
		char path[4096];
		snprintf(path, sizeof(path), "%s/pids.max", dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
		unlink(path);
	}
	assert_int_equal(saas__lv_cg_pids_remove(&cg, "aas-0123456789abcdef", "sbx-a"), SAAS_OK);
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(saas__lv_cg_pids_remove(&cg, "aas-0123456789abcdef", "sbx-a"), SAAS_OK); /* gone already */
	free(dir);

	/* The sweep at open: a VM gone while no engine ran loses its cgroup; one still running keeps it. */
	{
		char *gone, *busy;
		assert_true(asprintf(&gone, "%s/aas-0123456789abcdef/sbx-gone", pids) > 0);
		assert_true(asprintf(&busy, "%s/aas-0123456789abcdef/sbx-busy", pids) > 0);
		assert_int_equal(saas__mkdir_p(gone, 0755), 0);
		assert_int_equal(saas__mkdir_p(busy, 0755), 0);
		put_text(busy, "cgroup.procs", "4243"); /* a fake tree's stand-in for EBUSY: not empty */
		saas__lv_cg_pids_sweep(&cg, "aas-0123456789abcdef");
		assert_int_equal(access(gone, F_OK), -1);
		assert_int_equal(access(busy, F_OK), 0);
		free(gone);
		free(busy);
	}
	saas__lv_cg_clear(&cg);
	free(mounts);
	free(pids);
	free(cpu);
	free(blkio);
	free(mem);
	free(v2);
	saas_test_rmdir(t);
}

/* v1 under machined: the domain's scope is in the pids hierarchy too, and is the one limited. */
/* libvirt's cpuset partition is made before any VM starts, with the root's CPUs and memory nodes. */
static void test_cgroup_cpuset_prime(void **state)
{
	char *t = saas_test_tmpdir(), *cpuset = fake_mount(t, "cpuset"), *mounts, *part, *text;

	(void)state;
	put_text(cpuset, "cpuset.cpus", "0-3\n");
	put_text(cpuset, "cpuset.mems", "0\n");
	assert_true(asprintf(&mounts, "cgroup %s/cpu cgroup rw,cpu 0 0\ncgroup %s cgroup rw,relatime,cpuset 0 0\n", t,
	                     cpuset) > 0);
	assert_true(asprintf(&part, "%s/machine", cpuset) > 0);
	/* Not there: made and filled. */
	assert_int_equal(saas__lv_cg_cpuset_prime(mounts, "machine"), SAAS_OK);
	assert_string_equal(text = get_text(part, "cpuset.cpus"), "0-3\n");
	free(text);
	assert_string_equal(text = get_text(part, "cpuset.mems"), "0\n");
	free(text);
	/* There, empty (another start made it a moment ago): filled; there and set: left as it is. */
	put_text(part, "cpuset.cpus", "1\n");
	put_text(part, "cpuset.mems", "\n");
	assert_int_equal(saas__lv_cg_cpuset_prime(mounts, "machine"), SAAS_OK);
	assert_string_equal(text = get_text(part, "cpuset.cpus"), "1\n");
	free(text);
	assert_string_equal(text = get_text(part, "cpuset.mems"), "0\n");
	free(text);
	/* No cpuset hierarchy of v1 (cgroup v2, or none): nothing to do, nothing made. */
	assert_int_equal(saas__lv_cg_cpuset_prime("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "other"), SAAS_OK);
	assert_int_equal(saas__lv_cg_cpuset_prime("", "other"), SAAS_OK);
	free(mounts);
	free(part);
	free(cpuset);
	saas_test_rmdir(t);
}

static void test_cgroup_v1_machined(void **state)
{
	char *t = saas_test_tmpdir(), *pids = fake_mount(t, "pids"), *cpu = fake_mount(t, "cpu"), *mounts, *dir = NULL;
	struct saas__lv_cg cg;
	bool own = true;

	(void)state;
	assert_true(asprintf(&mounts, "cgroup %s cgroup rw,cpu 0 0\ncgroup %s cgroup rw,pids 0 0\n", cpu, pids) > 0);
	assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
	assert_false(saas__lv_cg_has(&cg, CG_MEMORY));
	assert_false(saas__lv_cg_has(&cg, CG_IO));
	saas__lv_cg_clear(&cg);
	free(mounts);
	/* A blkio hierarchy without a scheduler that weighs (no CFQ nor BFQ files) gives no I/O weight. */
	{
		char *blkio = fake_mount(t, "blkio");
		assert_true(asprintf(&mounts, "cgroup %s cgroup rw,blkio 0 0\n", blkio) > 0);
		assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
		assert_false(saas__lv_cg_has(&cg, CG_IO));
		saas__lv_cg_clear(&cg);
		free(mounts);
		put_text(blkio, "blkio.weight", "100\n");
		assert_true(asprintf(&mounts, "cgroup %s cgroup rw,blkio 0 0\n", blkio) > 0);
		assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
		assert_true(saas__lv_cg_has(&cg, CG_IO));
		saas__lv_cg_clear(&cg);
		free(mounts);
		free(blkio);
	}
	assert_true(asprintf(&mounts, "cgroup %s cgroup rw,cpu 0 0\ncgroup %s cgroup rw,pids 0 0\n", cpu, pids) > 0);
	assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
	assert_int_equal(saas__lv_cg_pids_dir(&cg,
	                                      "5:pids:/machine.slice/machine-qemu\\x2d1\\x2dsbx.scope\n"
	                                      "1:cpu:/machine.slice/machine-qemu\\x2d1\\x2dsbx.scope/libvirt/emulator\n",
	                                      "aas-x", "sbx", &dir, &own),
	                 SAAS_OK);
	assert_false(own);
	assert_true(strncmp(dir, pids, strlen(pids)) == 0);
	assert_string_equal(dir + strlen(pids), "/machine.slice/machine-qemu\\x2d1\\x2dsbx.scope");
	free(dir);
	saas__lv_cg_clear(&cg);
	free(mounts);
	free(pids);
	free(cpu);
	saas_test_rmdir(t);
}

/* cgroup v2: the domain's own cgroup (above libvirt's emulator and vcpu groups) has pids.max. */
static void test_cgroup_v2(void **state)
{
	char *t = saas_test_tmpdir(), *v2 = fake_mount(t, "v2"), *mounts, *dir = NULL;
	struct saas__lv_cg cg;
	bool own = true;

	(void)state;
	put_text(v2, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	assert_true(asprintf(&mounts, "cgroup2 %s cgroup2 rw,nsdelegate 0 0\n", v2) > 0);
	assert_int_equal(saas__lv_cg_detect(&cg, mounts), SAAS_OK);
	for (int i = 0; i < CG_NCTL; i++)
		assert_true(saas__lv_cg_has(&cg, i));
	assert_int_equal(saas__lv_cg_pids_dir(&cg, "0::/machine.slice/machine-qemu\\x2d3\\x2dsbx.scope/libvirt/emulator\n",
	                                      "aas-x", "sbx", &dir, &own),
	                 SAAS_OK);
	assert_false(own);
	assert_string_equal(dir + strlen(v2), "/machine.slice/machine-qemu\\x2d3\\x2dsbx.scope");
	free(dir);
	/* A QEMU left in the root cgroup has none of its own to limit. */
	assert_int_equal(saas__lv_cg_pids_dir(&cg, "0::/\n", "aas-x", "sbx", &dir, &own), SAAS_ENOTSUP);
	assert_null(dir);
	/* Nothing is ever removed on v2: the domain's cgroup is libvirt's (or machined's). */
	assert_int_equal(saas__lv_cg_pids_remove(&cg, "aas-x", "sbx"), SAAS_OK);
	saas__lv_cg_clear(&cg);
	free(mounts);

	/* A host with no cgroups at all: no limits, said so. */
	assert_int_equal(saas__lv_cg_detect(&cg, "proc /proc proc rw 0 0\n"), SAAS_OK);
	for (int i = 0; i < CG_NCTL; i++)
		assert_false(saas__lv_cg_has(&cg, i));
	assert_int_equal(saas__lv_cg_pids_dir(&cg, "0::/\n", "aas-x", "sbx", &dir, &own), SAAS_ENOTSUP);
	assert_string_equal(saas_error_last()->message, "the host has no pids controller");
	saas__lv_cg_clear(&cg);
	free(v2);
	saas_test_rmdir(t);
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

/* Snapshot names: what the core chooses (driver.h), and nothing that could leave the snapshots directory. */
static void test_snapshot_names(void **state)
{
	static const char *const good[] = { "a", "0", "fork-1", "pause-abc-123",
		"abcdefghijklmnopqrstuvwxyz0123456789-abcdefghijklmnopqrstuvwxyz" };
	static const char *const bad[] = { "", ".", "..", "a/b", "../x", "A", "a_b", "a.tmp", "a b", "snap\n",
		"abcdefghijklmnopqrstuvwxyz0123456789-abcdefghijklmnopqrstuvwxyz0" };

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(saas__lv_snapshot_name_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(saas__lv_snapshot_name_ok(bad[i]));
	assert_false(saas__lv_snapshot_name_ok(NULL));
}

/* The names of disk volumes a snapshot on a VM host may keep: the pool's own, never a path. */
static void test_disk_volume_name(void **state)
{
	static const char *const good[] = { "sbx-abc.qcow2", "aas-disk-s1-0a1b2c3d.qcow2", "a.b.qcow2" };
	static const char *const bad[] = { "", ".qcow2", "x.qcow", "../x.qcow2", "/p/x.qcow2", "X.qcow2", "x y.qcow2",
		                           ".hidden.qcow2" };
	char longest[SNAPSHOT_VOLUME_MAX + 2];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(saas__lv_disk_volume_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(saas__lv_disk_volume_ok(bad[i]));
	assert_false(saas__lv_disk_volume_ok(NULL));
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	memcpy(longest + sizeof(longest) - 7, ".qcow2", 6);
	assert_false(saas__lv_disk_volume_ok(longest)); /* one byte over */
	assert_true(saas__lv_disk_volume_ok(longest + 1));
}

/* A snapshot's description reads back as it was written; one this driver did not write is refused. */
static void test_snapshot_json(void **state)
{
	static const char *const refused[] = {
		"",
		"[]",
		"{\"format\": 1}",
		/* a format to come */
		"{\"format\": 3, \"source\": \"sbx-a\", \"image\": \"tiny\", \"host_key\": \"k\", \"vcpus\": 1, "
		"\"memory_mib\": 512, \"disk_gb\": 0, \"ram_block\": \"pc.ram\", \"state_bytes\": 1, \"disk_bytes\": 0, "
		"\"chain\": []}",
		/* no vCPU */
		"{\"format\": 1, \"source\": \"sbx-a\", \"image\": \"tiny\", \"host_key\": \"k\", \"vcpus\": 0, "
		"\"memory_mib\": 512, \"disk_gb\": 0, \"ram_block\": \"pc.ram\", \"state_bytes\": 1, \"disk_bytes\": 0, "
		"\"chain\": []}",
		/* a relative path in the chain */
		"{\"format\": 1, \"source\": \"sbx-a\", \"image\": \"tiny\", \"host_key\": \"k\", \"vcpus\": 1, "
		"\"memory_mib\": 512, \"disk_gb\": 1, \"ram_block\": \"pc.ram\", \"state_bytes\": 1, \"disk_bytes\": 0, "
		"\"chain\": [\"disk.qcow2\"]}",
		/* an image name longer than any */
		"{\"format\": 1, \"source\": \"sbx-a\", \"image\": \"iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii\", "
		"\"host_key\": \"k\", \"vcpus\": 1, \"memory_mib\": 512, \"disk_gb\": 0, \"ram_block\": \"pc.ram\", "
		"\"state_bytes\": 1, \"disk_bytes\": 0, \"chain\": []}",
		/* a kept disk volume that is a path, not a volume's name */
		"{\"format\": 2, \"source\": \"sbx-a\", \"image\": \"default\", \"host_key\": \"k\", \"vcpus\": 1, "
		"\"memory_mib\": 512, \"disk_gb\": 1, \"ram_block\": \"aas-mem\", \"state_bytes\": 1, \"disk_bytes\": 0, "
		"\"chain\": [], \"disk_volume\": \"../etc/x.qcow2\"}",
	};
	static const char later[] =
		"{\"format\": 99, \"owner\": \"another\", \"disk_volume\": \"aas-disk-s1-0a1b2c3d.qcow2\"}";
	char *chain[] = { (char *)"/s/libvirt/snapshots/a/disk.qcow2", (char *)"/s/libvirt/images/default-1/disk.qcow2",
		          NULL };
	struct saas__lv_snapshot in, out;
	char *text, disk[SNAPSHOT_VOLUME_MAX + 1];

	(void)state;
	memset(&in, 0, sizeof(in));
	strcpy(in.source, "sbx-parent");
	strcpy(in.image, "default");
	in.host_key = (char *)"ssh-ed25519 AAAA test";
	in.vcpus = 2;
	in.memory_mib = 1024;
	in.disk_gb = 4;
	strcpy(in.ram_block, "aas-mem");
	in.state_bytes = 123456789;
	in.disk_bytes = 4096;
	in.chain = chain;
	in.ignore_shared = true;
	assert_non_null(text = saas__lv_snapshot_json(&in));
	assert_int_equal(saas__lv_snapshot_parse(text, &out), SAAS_OK);
	assert_true(out.ignore_shared);
	assert_false(out.control);
	assert_string_equal(out.source, in.source);
	assert_string_equal(out.image, in.image);
	assert_string_equal(out.host_key, in.host_key);
	assert_int_equal(out.vcpus, 2);
	assert_int_equal(out.memory_mib, 1024);
	assert_int_equal(out.disk_gb, 4);
	assert_string_equal(out.ram_block, "aas-mem");
	assert_int_equal(out.state_bytes, 123456789);
	assert_int_equal(out.disk_bytes, 4096);
	assert_string_equal(out.chain[0], chain[0]);
	assert_string_equal(out.chain[1], chain[1]);
	assert_null(out.chain[2]);
	assert_int_equal(out.format, SNAPSHOT_FORMAT);
	assert_string_equal(out.disk_volume, "");
	saas__lv_snapshot_clear(&out);
	free(text);
	/* A VM host's pause keeps the VM's disk volume, named in its description. */
	strcpy(in.disk_volume, "sbx-parent.qcow2");
	in.chain = NULL;
	assert_non_null(text = saas__lv_snapshot_json(&in));
	assert_int_equal(saas__lv_snapshot_parse(text, &out), SAAS_OK);
	assert_string_equal(out.disk_volume, "sbx-parent.qcow2");
	saas__lv_snapshot_clear(&out);
	/* Its disk alone, as a VM host's deletes read it: the same name. */
	assert_int_equal(saas__lv_snapshot_disk_volume(text, disk), SAAS_OK);
	assert_string_equal(disk, "sbx-parent.qcow2");
	free(text);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(saas__lv_snapshot_parse(refused[i], &out), SAAS_EINVAL);
		assert_null(out.host_key);
		assert_null(out.chain);
	}
	/* A description parse refuses (a format to come) still names the disk it keeps. */
	assert_int_equal(saas__lv_snapshot_parse(later, &out), SAAS_EINVAL);
	assert_int_equal(saas__lv_snapshot_disk_volume(later, disk), SAAS_OK);
	assert_string_equal(disk, "aas-disk-s1-0a1b2c3d.qcow2");
	/* None named, no description, or a path instead of a volume's name: none ("" and EINVAL for the path). */
	memset(disk, 'x', sizeof(disk));
	assert_int_equal(saas__lv_snapshot_disk_volume("{\"format\": 2}", disk), SAAS_OK);
	assert_string_equal(disk, "");
	memset(disk, 'x', sizeof(disk));
	assert_int_equal(saas__lv_snapshot_disk_volume(NULL, disk), SAAS_OK);
	assert_string_equal(disk, "");
	memset(disk, 'x', sizeof(disk));
	assert_int_equal(saas__lv_snapshot_disk_volume(refused[sizeof(refused) / sizeof(refused[0]) - 1], disk), SAAS_EINVAL);
	assert_string_equal(disk, "");
}

/* ---- a migration stream's RAM split out (migstream.c) ---- */

struct stream {
	unsigned char b[65536];
	size_t n;
};

static void s_bytes(struct stream *s, const void *p, size_t n)
{
	assert_true(s->n + n <= sizeof(s->b));
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void s_u8(struct stream *s, unsigned v)
{
	unsigned char c = (unsigned char)v;
	s_bytes(s, &c, 1);
}

static void s_u32(struct stream *s, uint32_t v)
{
	for (int i = 3; i >= 0; i--)
		s_u8(s, (v >> (8 * i)) & 0xff);
}

static void s_u64(struct stream *s, uint64_t v)
{
	s_u32(s, (uint32_t)(v >> 32));
	s_u32(s, (uint32_t)v);
}

static void s_name(struct stream *s, const char *name)
{
	s_u8(s, (unsigned)strlen(name));
	s_bytes(s, name, strlen(name));
}

/* A page record: offset | flags, the block's name unless CONTINUE (0x20), then 4096 bytes of fill (PAGE) or one (ZERO). */
static void s_page(struct stream *s, uint64_t offset, unsigned flags, const char *block, int fill)
{
	unsigned char page[4096];

	s_u64(s, offset | flags);
	if (!(flags & 0x20))
		s_name(s, block);
	memset(page, fill, sizeof(page));
	s_bytes(s, page, flags & 0x08 ? 4096 : 1);
}

/*
 * The stream QEMU 7.2 writes for a VM of two RAM blocks (the guest's aas-mem,
 * 4 pages (mem_pages), and a ROM, 2, its first page with rom_flags), saved
 * with x-ignore-shared on; with `guest` false, the same without the guest's
 * pages: what the split must leave.
 */
/* Its head, to the first PART of the "ram" section (section 2) opened. */
static void s_vm_head(struct stream *s, uint64_t mem_pages)
{
	s->n = 0;
	s_bytes(s, "QEVM", 4);
	s_u32(s, 3);
	s_u8(s, 0x07); /* configuration */
	s_u32(s, 6);
	s_bytes(s, "pc-q35", 6);
	s_u8(s, 0x05);
	s_name(s, "configuration/capabilities");
	s_u32(s, 1);
	s_u32(s, 1);
	s_name(s, "x-ignore-shared");
	s_u8(s, 0x01); /* START of "ram", section 2 */
	s_u32(s, 2);
	s_name(s, "ram");
	s_u32(s, 0);
	s_u32(s, 4);
	s_u64(s, (mem_pages + 2) * 4096 | 0x04);
	s_name(s, "aas-mem");
	s_u64(s, mem_pages * 4096);
	s_u64(s, 0);
	s_name(s, "pc.rom");
	s_u64(s, 2 * 4096);
	s_u64(s, 0xfffc0000);
	s_u64(s, 0x10);
	s_u8(s, 0x7e);
	s_u32(s, 2);
	s_u8(s, 0x02); /* PART */
	s_u32(s, 2);
}

/* Its tail: the open section's end, the devices. */
static void s_vm_tail(struct stream *s)
{
	s_u64(s, 0x10);
	s_u8(s, 0x7e);
	s_u32(s, 2);
	s_u8(s, 0x04); /* the devices, as they are */
	s_u32(s, 3);
	s_name(s, "timer");
	s_u64(s, 1);
	s_bytes(s, "device state", 12);
	s_u8(s, 0x1f); /* EOF */
}

static void s_vm(struct stream *s, bool guest, uint64_t mem_pages, unsigned rom_flags)
{
	s_vm_head(s, mem_pages);
	if (guest) {
		s_page(s, 0x1000, 0x08, "aas-mem", 'A');
		s_page(s, 0x2000, 0x28, NULL, 'B');
	}
	s_page(s, 0x0000, rom_flags, "pc.rom", 'R');
	s_page(s, 0x1000, 0x28, NULL, 'S');
	if (guest)
		s_page(s, 0x3000, 0x02, "aas-mem", 0);
	s_page(s, 0x0000, 0x02, "pc.rom", 0);
	s_u64(s, 0x10);
	s_u8(s, 0x7e);
	s_u32(s, 2);
	s_u8(s, 0x03); /* END: the page written before is zero now */
	s_u32(s, 2);
	if (guest)
		s_page(s, 0x2000, 0x02, "aas-mem", 0);
	s_vm_tail(s);
}

/* Split s; the kept stream in *kept (when SAAS_OK), the guest's RAM in ram (16 KiB). */
static int split_of(const struct stream *s, struct stream *kept, unsigned char ram[4 * 4096], uint64_t *pages)
{
	int in = memfd_create("in", MFD_CLOEXEC), out = memfd_create("out", MFD_CLOEXEC),
	    fd = memfd_create("ram", MFD_CLOEXEC), rc;
	struct saas__lv_split_stats st;

	assert_true(in >= 0 && out >= 0 && fd >= 0);
	assert_int_equal(write(in, s->b, s->n), (ssize_t)s->n);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(ftruncate(fd, 4 * 4096), 0);
	rc = saas__lv_stream_split(in, out, fd, "aas-mem", 4 * 4096, &st);
	/* Nothing written past the block, whatever the stream said. */
	{
		struct stat sb;
		assert_int_equal(fstat(fd, &sb), 0);
		assert_int_equal(sb.st_size, 4 * 4096);
	}
	if (rc == SAAS_OK) {
		kept->n = (size_t)pread(out, kept->b, sizeof(kept->b), 0);
		assert_int_equal(st.out_bytes, kept->n);
		assert_int_equal(pread(fd, ram, 4 * 4096, 0), 4 * 4096);
		*pages = st.pages;
	}
	close(in);
	close(out);
	close(fd);
	return rc;
}

/*
 * A fork's stream split: the guest's pages go into its memory file at their
 * offsets (a page zeroed after it was written is a hole again), everything
 * else stays, byte for byte what QEMU would have written without them; a
 * stream cut short, or holding what the split does not know, is refused with
 * SAAS_ENOTSUP (the caller keeps it whole) and never read past its bounds.
 */
static void test_stream_split(void **state)
{
	static struct stream whole, want, kept, bad;
	unsigned char ram[4 * 4096], zero[4096];
	uint64_t pages = 0;

	(void)state;
	memset(zero, 0, sizeof(zero));
	s_vm(&whole, true, 4, 0x08);
	s_vm(&want, false, 4, 0x08);
	assert_int_equal(split_of(&whole, &kept, ram, &pages), SAAS_OK);
	assert_int_equal(kept.n, want.n);
	assert_memory_equal(kept.b, want.b, want.n);
	assert_memory_equal(ram, zero, 4096);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(ram[4096 + i], 'A');
	assert_memory_equal(ram + 2 * 4096, zero, 4096);
	assert_memory_equal(ram + 3 * 4096, zero, 4096);
	assert_int_equal(pages, 2);
	/* Cut anywhere before the devices: refused. */
	for (size_t cut = 0; cut + 30 < whole.n; cut += 97) {
		bad = whole;
		bad.n = cut;
		assert_int_equal(split_of(&bad, &kept, ram, &pages), SAAS_ENOTSUP);
	}
	/* Another format, a guest block of another length than the VM's, a compressed page: refused. */
	bad = whole;
	bad.b[0] = 'X';
	assert_int_equal(split_of(&bad, &kept, ram, &pages), SAAS_ENOTSUP);
	s_vm(&bad, true, 8, 0x08);
	assert_int_equal(split_of(&bad, &kept, ram, &pages), SAAS_ENOTSUP);
	s_vm(&bad, true, 4, 0x108);
	assert_int_equal(split_of(&bad, &kept, ram, &pages), SAAS_ENOTSUP);
	/* Every byte changed in turn: refused or split, never a write past the block (the memfd would grow). */
	for (size_t at = 0; at < whole.n; at += 7) {
		bad = whole;
		bad.b[at] ^= 0xa5;
		if (split_of(&bad, &kept, ram, &pages) != SAAS_OK)
			saas__error_clear();
	}
}

static void s_flush(struct stream *s, int fd)
{
	assert_int_equal(write(fd, s->b, s->n), (ssize_t)s->n);
	s->n = 0;
}

/*
 * The split gathers the block's pages into runs it writes at once: a run
 * longer than it gathers, a page sent again after others, pages apart, a
 * page zeroed while its run is still gathered and one zeroed long after:
 * the memory holds what the stream said last of each page.
 */
static void test_stream_split_runs(void **state)
{
	enum { PAGES = 512 };
	static struct stream s;
	static const struct {
		unsigned page;
		int fill;                        /* 0: a ZERO record */
	} later[] = { { 5, 'X' }, { 310, 'Q' }, { 460, 'a' }, { 461, 'b' }, { 460, 0 }, { 450, 'W' }, { 451, 'V' },
		      { 100, 0 }, { 511, 'E' } };
	unsigned char want[PAGES], page[4096];
	int in = memfd_create("in", MFD_CLOEXEC), out = memfd_create("out", MFD_CLOEXEC),
	    fd = memfd_create("ram", MFD_CLOEXEC);
	struct saas__lv_split_stats st;

	(void)state;
	assert_true(in >= 0 && out >= 0 && fd >= 0);
	assert_int_equal(ftruncate(fd, PAGES * 4096), 0);
	memset(want, 0, sizeof(want));
	s_vm_head(&s, PAGES);
	for (unsigned i = 0; i < 300; i++) {
		want[i] = (unsigned char)(1 + i % 200);
		s_page(&s, (uint64_t)i * 4096, i ? 0x28 : 0x08, "aas-mem", want[i]);
		if (s.n > sizeof(s.b) - 8192)
			s_flush(&s, in);
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(later); i++) {
		want[later[i].page] = (unsigned char)later[i].fill;
		s_page(&s, (uint64_t)later[i].page * 4096, later[i].fill ? 0x28 : 0x22, NULL, later[i].fill);
	}
	s_u64(&s, 0x10);
	s_u8(&s, 0x7e);
	s_u32(&s, 2);
	s_u8(&s, 0x03); /* END, nothing more */
	s_u32(&s, 2);
	s_vm_tail(&s);
	s_flush(&s, in);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(saas__lv_stream_split(in, out, fd, "aas-mem", PAGES * 4096, &st), SAAS_OK);
	/* 300 in the first run, then 310, 460, 461, 450, 451 and 511: a page zeroed later still counts once. */
	assert_int_equal(st.pages, 306);
	for (unsigned i = 0; i < PAGES; i++) {
		assert_int_equal(pread(fd, page, sizeof(page), (off_t)i * 4096), (ssize_t)sizeof(page));
		for (size_t b = 0; b < sizeof(page); b++)
			if (page[b] != want[i])
				fail_msg("page %u byte %zu of the memory: %d, not %d", i, b, page[b], want[i]);
	}
	close(in);
	close(out);
	close(fd);
}

/*
 * A runtime change of a VM's egress is recorded in its metadata, so that an
 * engine adopting it after a restart loads the rules of the mode it runs
 * under now; everything else in the element stays as it was.
 */
static void test_meta_network_rewrite(void **state)
{
	static const char meta[] = "<aas:vm xmlns:aas='https://libsaas.org/xmlns/vm/1'><aas:ssh-port>40022</aas:ssh-port>"
	                           "<aas:network>internet</aas:network><aas:uid>200001</aas:uid></aas:vm>";
	char *policy, *back;

	(void)state;
	assert_int_equal(saas__lv_meta_network(meta), SAAS_NET_INTERNET);
	assert_non_null(policy = saas__lv_meta_with_network(meta, SAAS_NET_POLICY));
	assert_int_equal(saas__lv_meta_network(policy), SAAS_NET_POLICY);
	assert_int_equal(saas__lv_meta_uid(policy), 200001);
	assert_non_null(strstr(policy, "<aas:ssh-port>40022</aas:ssh-port>"));
	assert_non_null(back = saas__lv_meta_with_network(policy, SAAS_NET_INTERNET));
	assert_string_equal(back, meta);
	free(policy);
	free(back);
	/* No network recorded (an element some older engine wrote): nothing to rewrite. */
	assert_null(saas__lv_meta_with_network("<aas:vm><aas:ssh-port>1</aas:ssh-port></aas:vm>", SAAS_NET_POLICY));
	assert_null(saas__lv_meta_with_network("<aas:vm><aas:network>intern", SAAS_NET_POLICY));
}

/*
 * A spare's mark (domain.h): written into a spare's domain on a shared host,
 * read back as its time, and taken out whole by the create that takes the
 * spare, everything else of the element as it was. Anything but digits up
 * to the closing tag reads as no mark.
 */
static void test_meta_spare_mark(void **state)
{
	static const char plain[] = "<aas:vm xmlns:aas='https://libsaas.org/xmlns/vm/1'>\n"
	                            "  <aas:ssh-port>40022</aas:ssh-port>\n  <aas:network>isolated</aas:network>\n</aas:vm>";
	static const char marked[] = "<aas:vm xmlns:aas='https://libsaas.org/xmlns/vm/1'>\n"
	                             "  <aas:ssh-port>40022</aas:ssh-port>\n  <aas:network>isolated</aas:network>\n"
	                             "  <aas:spare-until>1796000000000</aas:spare-until>\n</aas:vm>";
	struct image im = test_image(true);
	saas_vm_spec spec = test_spec();
	struct saas__lv_domain def = { &spec, &im, "/var/lib/aas", "a2V5", VMDIR, NULL, 40022, false, false, true };
	char *xml, *out;

	(void)state;
	assert_int_equal(saas__lv_meta_spare_until(marked), 1796000000000LL);
	assert_int_equal(saas__lv_meta_spare_until(plain), 0);
	assert_int_equal(saas__lv_meta_spare_until("<aas:spare-until>12x</aas:spare-until>"), 0);
	assert_int_equal(saas__lv_meta_spare_until("<aas:spare-until>-5</aas:spare-until>"), 0);
	assert_int_equal(saas__lv_meta_spare_until("<aas:spare-until>99999999999999999999999</aas:spare-until>"), 0);
	assert_int_equal(saas__lv_meta_spare_until("<aas:spare-until>123"), 0);
	assert_non_null(out = saas__lv_meta_without_spare(marked));
	assert_string_equal(out, plain);
	free(out);
	assert_non_null(out = saas__lv_meta_without_spare(plain));
	assert_string_equal(out, plain);
	free(out);
	/* The domain of a spare carries it; any other domain none. */
	def.spare_until_ms = 1796000000000LL;
	assert_non_null(xml = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml, "<" META_PREFIX ":spare-until>1796000000000</" META_PREFIX ":spare-until>"));
	assert_int_equal(saas__lv_meta_spare_until(xml), 1796000000000LL);
	free(xml);
	def.spare_until_ms = 0;
	assert_non_null(xml = saas__lv_domain_xml(&def));
	assert_null(strstr(xml, "spare-until"));
	free(xml);
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
	assert_int_equal(saas__lv_uids_free(&u), 3);
	assert_int_equal(saas__lv_uids_take(&u, &a), SAAS_OK);
	assert_int_equal(saas__lv_uids_take(&u, &b), SAAS_OK);
	assert_int_equal(saas__lv_uids_free(&u), 1);
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
	assert_int_equal(saas__lv_uids_free(&u), 0);
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

/*
 * A uid some process already runs as (another engine's QEMU, say) is skipped,
 * and only for this choice: nothing of the scan stays held. The fake /proc
 * has a "process" owned by the first uid of a range made of the test's own
 * uid, and entries that are no process (named otherwise) owned by it too.
 */
static void test_uids_skip_running(void **state)
{
	struct saas__lv_uids u;
	unsigned int me = (unsigned int)geteuid(), uid;
	char *dir, path[4200];

	(void)state;
	assert_non_null(dir = saas_test_tmpdir());
	snprintf(path, sizeof(path), "%s/4242", dir);
	assert_int_equal(mkdir(path, 0555), 0);
	snprintf(path, sizeof(path), "%s/self", dir);
	assert_int_equal(mkdir(path, 0555), 0);
	snprintf(path, sizeof(path), "%s/0", dir);
	assert_int_equal(mkdir(path, 0555), 0);
	assert_int_equal(saas__lv_uids_init(&u, me, 3), SAAS_OK);
	assert_int_equal(saas__lv_uids_take_unused(&u, dir, &uid), SAAS_OK);
	assert_int_equal(uid, me + 1);
	/* The running uid was not taken: with the process gone, it is the one left after the next. */
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(uid, me + 2);
	assert_int_equal(saas__lv_uids_take(&u, &uid), SAAS_OK);
	assert_int_equal(uid, me);
	/* Every uid held but the running one: none for a new VM, and the error says why. */
	saas__lv_uids_put(&u, me);
	assert_int_equal(saas__lv_uids_take_unused(&u, dir, &uid), SAAS_EBUSY);
	assert_non_null(strstr(saas_error_last()->message, "every QEMU uid of the range"));
	/* A /proc that cannot be read hides nothing but takes nothing away either. */
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(saas__lv_uids_take_unused(&u, path, &uid), SAAS_OK);
	assert_int_equal(uid, me);
	saas__lv_uids_clear(&u);
	saas_test_rmdir(dir);
}

/* ---- staged images --------------------------------------------------------------------------- */

static void write_text(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void quiet_log(void *userdata, int level, const char *msg)
{
	(void)userdata;
	(void)level;
	print_message("  driver: %s\n", msg);
}

/* A snapshot's description of this format with the RAM block ram (NULL: none recorded, an empty string). */
static void old_snapshot(char *out, size_t len, int format, const char *ram)
{
	snprintf(out, len,
	         "{\"format\": %d, \"source\": \"sbx-a\", \"image\": \"tiny\", \"host_key\": \"k\", \"vcpus\": 1, "
	         "\"memory_mib\": 512, \"disk_gb\": 0, \"ram_block\": \"%s\", \"state_bytes\": 1, \"disk_bytes\": 0, "
	         "\"chain\": []}", format, ram ? ram : "");
}

/*
 * A snapshot saved before every VM's RAM was the backend "aas-mem" (its
 * block QEMU's "pc.ram") is read, but no VM of this driver can load it: the
 * restore refuses it before making anything, saying why, and the snapshot
 * stays. Those of format 2, and of format 1 with the block "aas-mem", pass.
 */
static void test_snapshot_old_format(void **state)
{
	struct saas__lv_snapshot s;
	struct drv d;
	saas_vm_spec spec;
	static const saas_vm_network isolated = { SAAS_NET_ISOLATED, NULL, NULL };
	char text[1024], dir[4200], *top;
	const char *msg;
	struct stat st;

	(void)state;
	old_snapshot(text, sizeof(text), 1, "pc.ram");
	assert_int_equal(saas__lv_snapshot_parse(text, &s), SAAS_OK);
	assert_int_equal(s.format, 1);
	assert_int_equal(saas__lv_snapshot_check(&s, "snap-old"), SAAS_ENOTSUP);
	assert_string_equal(saas_error_last()->message,
	                    "snapshot snap-old was saved by an older version of this driver (format 1, its RAM block "
	                    "\"pc.ram\", not \"aas-mem\"), whose memory layout this one no longer makes: it cannot be "
	                    "restored; destroy its sandbox");
	saas__lv_snapshot_clear(&s);
	/* Nothing recorded in format 1: it cannot be told apart from the old layout. */
	old_snapshot(text, sizeof(text), 1, NULL);
	assert_int_equal(saas__lv_snapshot_parse(text, &s), SAAS_OK);
	assert_int_equal(saas__lv_snapshot_check(&s, "snap-old"), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "its RAM block not found in its saved state"));
	saas__lv_snapshot_clear(&s);
	old_snapshot(text, sizeof(text), 1, "aas-mem");
	assert_int_equal(saas__lv_snapshot_parse(text, &s), SAAS_OK);
	assert_int_equal(saas__lv_snapshot_check(&s, "snap-new"), SAAS_OK);
	saas__lv_snapshot_clear(&s);
	old_snapshot(text, sizeof(text), 2, NULL);
	assert_int_equal(saas__lv_snapshot_parse(text, &s), SAAS_OK);
	assert_int_equal(saas__lv_snapshot_check(&s, "snap-new"), SAAS_OK);
	saas__lv_snapshot_clear(&s);

	/* Format 1 recorded a wrong name ("4", a column of HMP's table): the stream says which block it holds. */
	{
		static const char aas[] = "QEVM\0\0\0\3\7\0\0\0\4pc-q\1\0\0\0\2\3ram\0\0\0\0\0\0\0\4"
		                          "\0\0\0\0\40\0\0\4\7aas-mem\0\0\0\0\40\0\0\0";
		static const char pc[] = "QEVM\0\0\0\3\7\0\0\0\4pc-q\1\0\0\0\2\3ram\0\0\0\0\0\0\0\4"
		                         "\0\0\0\0\40\0\0\4\6pc.ram\0\0\0\0\40\0\0\0";
		char block[64], path[4300];
		FILE *f;

		assert_non_null(top = saas_test_tmpdir());
		snprintf(path, sizeof(path), "%s/state", top);
		assert_non_null(f = fopen(path, "w"));
		assert_int_equal(fwrite(aas, 1, sizeof(aas) - 1, f), sizeof(aas) - 1);
		assert_int_equal(fclose(f), 0);
		saas__lv_state_ram_block(path, block, sizeof(block));
		assert_string_equal(block, "aas-mem");
		assert_non_null(f = fopen(path, "w"));
		assert_int_equal(fwrite(pc, 1, sizeof(pc) - 1, f), sizeof(pc) - 1);
		assert_int_equal(fclose(f), 0);
		saas__lv_state_ram_block(path, block, sizeof(block));
		assert_string_equal(block, "pc.ram");
		/* "pc.ram" unframed (a device's text) is no block. */
		assert_non_null(f = fopen(path, "w"));
		fputs("QEVM pc.ram aas-mem", f);
		assert_int_equal(fclose(f), 0);
		saas__lv_state_ram_block(path, block, sizeof(block));
		assert_string_equal(block, "");
		saas__lv_state_ram_block("/nonexistent/state", block, sizeof(block));
		assert_string_equal(block, "");
		saas_test_rmdir(top);
	}

	/* Through the driver's slot: the stream read, refused before any VM, uid or file is made. */
	assert_non_null(top = saas_test_tmpdir());
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = top;
	pthread_rwlock_init(&d.snaps_lock, NULL);
	pthread_mutex_init(&d.mu, NULL);
	d.log = quiet_log;
	snprintf(dir, sizeof(dir), "%s/snapshots/snap-old", top);
	assert_int_equal(saas__mkdir_p(dir, 0700), 0);
	old_snapshot(text, sizeof(text), 1, "4"); /* what format 1 recorded */
	write_text(dir, "snapshot.json", text, 0600);
	{
		static const char pc[] = "QEVM\0\0\0\3\3ram\0\0\0\0\0\0\0\4\6pc.ram\0\0\0\0\40\0\0\0";
		char path[4300];
		FILE *f;
		snprintf(path, sizeof(path), "%s/state", dir);
		assert_non_null(f = fopen(path, "w"));
		assert_int_equal(fwrite(pc, 1, sizeof(pc) - 1, f), sizeof(pc) - 1);
		assert_int_equal(fclose(f), 0);
	}
	memset(&spec, 0, sizeof(spec));
	spec.name = "sbx-resumed";
	spec.image = "tiny";
	spec.vcpus = 1;
	spec.memory_mb = 512;
	spec.disk_gb = 1;
	spec.network = &isolated;
	assert_int_equal(saas__lv_vm_restore(&d, &spec, "snap-old"), SAAS_ENOTSUP);
	msg = saas_error_last()->message;
	assert_non_null(strstr(msg, "snapshot snap-old was saved by an older version"));
	assert_non_null(strstr(msg, "its RAM block \"pc.ram\""));
	assert_int_equal(stat(dir, &st), 0);
	snprintf(dir, sizeof(dir), "%s/vms", top);
	assert_int_not_equal(stat(dir, &st), 0);
	pthread_mutex_destroy(&d.mu);
	pthread_rwlock_destroy(&d.snaps_lock);
	saas_test_rmdir(top);
}

/* A qcow2 file at dir/name, backing onto `backing` by name only (NULL: none). */
static void qcow2_at(const char *dir, const char *name, const char *backing)
{
	char path[4400];
	const char *plain[] = { "qemu-img", "create", "-q", "-f", "qcow2", path, "16M", NULL };
	const char *over[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-u", "-b", backing, path, "16M",
		               NULL };

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(saas__run(backing ? over : plain, NULL), 0);
}

static int count_name(void *ud, const char *name)
{
	(void)name;
	++*(int *)ud;
	return 0;
}

static bool path_exists(const char *dir, const char *name)
{
	char path[4400];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* A driver of a state directory of its own (returned; snaps: its snapshots' directory), with no libvirt. */
static char *snap_drv(struct drv *d, char *snaps, size_t len)
{
	char *top;

	assert_non_null(top = saas_test_tmpdir());
	memset(d, 0, sizeof(*d));
	d->host = &saas__lv_host_local;
	d->dir = top;
	d->log = quiet_log;
	pthread_rwlock_init(&d->snaps_lock, NULL);
	snprintf(snaps, len, "%s/snapshots", top);
	return top;
}

/*
 * What an engine that died during a fork leaves (snapshots/NAME.tmp, the
 * VM named in its "vm" file), as the next open makes of it. Cut short before
 * the VM ran on its new overlay (or the VM is gone): the snapshot and that
 * overlay go. Cut short after: the overlay's header names the snapshot's
 * disk by its final name, so that disk is kept there, marked deleted, never
 * listed, and collected once nothing backs onto it. A directory left by an
 * older engine (no "vm" file) goes as before.
 */
static void test_snapshot_left(void **state)
{
	struct drv d;
	char *top, snaps[4200], vmdir[4200], tmp[4300], final[4300], base[4400];
	int listed = 0;

	(void)state;
	top = snap_drv(&d, snaps, sizeof(snaps));
	snprintf(vmdir, sizeof(vmdir), "%s/vms/sbx-p", top);
	assert_int_equal(saas__mkdir_p(vmdir, 0700), 0);

	/* Before the switch, or a VM no longer there: everything goes, the unused overlay too. */
	snprintf(tmp, sizeof(tmp), "%s/snap-a.tmp", snaps);
	assert_int_equal(saas__mkdir_p(tmp, 0700), 0);
	write_text(tmp, "vm", "sbx-p", 0600);
	write_text(tmp, "state", "half a stream", 0600);
	qcow2_at(tmp, "disk.qcow2", NULL);
	snprintf(base, sizeof(base), "%s/snap-a/disk.qcow2", snaps);
	qcow2_at(vmdir, "disk-snap-a.qcow2", base);
	/* And one an older engine left, with no "vm" file. */
	snprintf(tmp, sizeof(tmp), "%s/snap-c.tmp", snaps);
	assert_int_equal(saas__mkdir_p(tmp, 0700), 0);
	write_text(tmp, "state", "half a stream", 0600);
	saas__lv_snapshots_cleanup(&d); /* no libvirt here: no VM runs on anything */
	assert_false(path_exists(snaps, "snap-a.tmp"));
	assert_false(path_exists(snaps, "snap-a"));
	assert_false(path_exists(vmdir, "disk-snap-a.qcow2"));
	assert_false(path_exists(snaps, "snap-c.tmp"));

	/* After the switch: the VM reads the frozen disk under the snapshot's name. */
	snprintf(tmp, sizeof(tmp), "%s/snap-b.tmp", snaps);
	assert_int_equal(saas__mkdir_p(tmp, 0700), 0);
	write_text(tmp, "vm", "sbx-p", 0600);
	write_text(tmp, "state", "half a stream", 0600);
	write_text(tmp, "stream", "a fork's stream, not split yet", 0600);
	write_text(tmp, "ram", "a fork's RAM", 0600);
	qcow2_at(tmp, "disk.qcow2", NULL);
	snprintf(base, sizeof(base), "%s/snap-b/disk.qcow2", snaps);
	qcow2_at(vmdir, "disk-snap-b.qcow2", base);
	saas__lv_snapshot_left(&d, "snap-b", "sbx-p", true);
	snprintf(final, sizeof(final), "%s/snap-b", snaps);
	assert_false(path_exists(snaps, "snap-b.tmp"));
	assert_true(path_exists(final, "disk.qcow2"));
	assert_true(path_exists(final, "deleted"));
	assert_false(path_exists(final, "state"));
	assert_false(path_exists(final, "stream"));
	assert_false(path_exists(final, "ram"));
	assert_false(path_exists(final, "vm"));
	assert_true(path_exists(vmdir, "disk-snap-b.qcow2"));
	assert_int_equal(saas__lv_snapshot_list(&d, count_name, &listed), SAAS_OK);
	assert_int_equal(listed, 0);
	/* Kept while the VM's overlay backs onto it; collected once it does not (the VM destroyed). */
	saas__lv_snapshots_collect(&d);
	assert_true(path_exists(final, "disk.qcow2"));
	snprintf(base, sizeof(base), "%s/disk-snap-b.qcow2", vmdir);
	assert_int_equal(unlink(base), 0);
	saas__lv_snapshots_collect(&d);
	assert_false(path_exists(snaps, "snap-b"));

	pthread_rwlock_destroy(&d.snaps_lock);
	saas_test_rmdir(top);
}

static void no_virt_errors(void *userdata, virErrorPtr e)
{
	(void)userdata;
	(void)e;
}

/*
 * A driver connected to libvirt's test driver (test:///default), logging to
 * log; libvirt's errors not printed ("not found" is what these tests look
 * for). The caller fills in the rest; test_drv_close ends it.
 */
static struct drv *test_drv_open(void (*log)(void *, int, const char *), void *log_userdata)
{
	static char uri[] = "test:///default";
	struct drv *d = calloc(1, sizeof(*d));

	assert_non_null(d);
	d->uri = uri;
	d->log = log;
	d->log_userdata = log_userdata;
	pthread_mutex_init(&d->conn_mu, NULL);
	virSetErrorFunc(NULL, no_virt_errors);
	assert_non_null(d->conn = virConnectOpen(uri));
	return d;
}

static void test_drv_close(struct drv *d)
{
	virConnectClose(d->conn);
	pthread_mutex_destroy(&d->conn_mu);
	free(d);
}

/* A volume of libvirt's test driver's pool, backed onto below (a path) or nothing. */
static void test_vol(virStoragePoolPtr pool, const char *name, const char *below)
{
	char xml[1024];
	virStorageVolPtr v;

	snprintf(xml, sizeof(xml), "<volume><name>%s</name><capacity unit='MiB'>1</capacity><target><format "
	         "type='qcow2'/></target>%s%s%s</volume>", name, below ? "<backingStore><path>" : "", below ? below : "",
	         below ? "</path><format type='qcow2'/></backingStore>" : "");
	assert_non_null(v = virStorageVolCreateXML(pool, xml, 0));
	virStorageVolFree(v);
}

/* Volumes names[0..], each backed onto the one before it (the first onto below, a name or NULL); NULL ends. */
static void test_chain(virStoragePoolPtr pool, const char *below, const char *const *names)
{
	char path[256];

	for (size_t i = 0; names[i]; i++) {
		if (below)
			snprintf(path, sizeof(path), "/default-pool/%s", below);
		test_vol(pool, names[i], below ? path : NULL);
		below = names[i];
	}
}

static bool test_vol_there(virStoragePoolPtr pool, const char *name)
{
	virStorageVolPtr v = virStorageVolLookupByName(pool, name);

	if (v)
		virStorageVolFree(v);
	return v != NULL;
}

/*
 * A VM host's destroyed VM whose disk backed onto a failed fork's frozen
 * disks (aas-disk-…, not merged away): they go with it, down the chain, as
 * long as nothing else uses them; the image's disk and a VM's NAME.qcow2
 * never; one another volume backs onto, or one a snapshot of the pool may
 * name (its description unreadable here: kept), stays. libvirt's test driver
 * plays the host's pool (paths /default-pool/NAME).
 */
static void test_vmhost_chain_drop(void **state)
{
	static char pool_name[] = "default-pool";
	struct drv *d = test_drv_open(quiet_log, NULL);
	virStoragePoolPtr pool;

	(void)state;
	d->spool_name = pool_name;
	assert_non_null(pool = d->spool = virStoragePoolLookupByName(d->conn, "default-pool"));

	/* img <- a <- b <- top: top's destroy takes b and a, never the image's disk. */
	test_chain(pool, NULL, (const char *const[]){ "img-x-disk", "aas-disk-snap-a-00000001.qcow2",
	                                              "aas-disk-snap-b-00000002.qcow2", "aas-disk-snap-c-00000003.qcow2",
	                                              NULL });
	saas__lv_vmhost_disk_drop(d, "/default-pool/aas-disk-snap-c-00000003.qcow2");
	for (const char *const *n = (const char *const[]){ "aas-disk-snap-c-00000003.qcow2", "aas-disk-snap-b-00000002.qcow2",
	                                                   "aas-disk-snap-a-00000001.qcow2", NULL }; *n; n++)
		assert_false(test_vol_there(pool, *n));
	assert_true(test_vol_there(pool, "img-x-disk"));

	/* A frozen disk another VM's overlay backs onto stays; so does a VM's NAME.qcow2 under it. */
	test_chain(pool, "img-x-disk", (const char *const[]){ "sbx-p.qcow2", "aas-disk-snap-d-00000004.qcow2",
	                                                      "aas-disk-snap-e-00000005.qcow2", NULL });
	test_chain(pool, "aas-disk-snap-d-00000004.qcow2", (const char *const[]){ "aas-disk-snap-f-00000006.qcow2", NULL });
	saas__lv_vmhost_disk_drop(d, "/default-pool/aas-disk-snap-e-00000005.qcow2");
	assert_false(test_vol_there(pool, "aas-disk-snap-e-00000005.qcow2"));
	assert_true(test_vol_there(pool, "aas-disk-snap-d-00000004.qcow2"));
	/* The last user gone, d goes; sbx-p.qcow2 is the VM's own, which its destroy deletes by name. */
	saas__lv_vmhost_disk_drop(d, "/default-pool/aas-disk-snap-f-00000006.qcow2");
	assert_false(test_vol_there(pool, "aas-disk-snap-d-00000004.qcow2"));
	assert_true(test_vol_there(pool, "sbx-p.qcow2"));

	/* A pool with a complete snapshot whose description cannot be read keeps every frozen disk. */
	test_vol(pool, "aas-snap-snap-g.ready", NULL);
	test_vol(pool, "aas-snap-snap-g.json", NULL);
	test_chain(pool, "img-x-disk", (const char *const[]){ "aas-disk-snap-h-00000008.qcow2",
	                                                      "aas-disk-snap-i-00000009.qcow2", NULL });
	saas__lv_vmhost_disk_drop(d, "/default-pool/aas-disk-snap-i-00000009.qcow2");
	assert_false(test_vol_there(pool, "aas-disk-snap-i-00000009.qcow2"));
	assert_true(test_vol_there(pool, "aas-disk-snap-h-00000008.qcow2"));
	/* Nothing below: nothing more done. */
	saas__lv_vmhost_chain_drop(d, NULL, "nothing");

	virStoragePoolFree(pool);
	test_drv_close(d);
}

/* Every line the driver logs, kept (one after another, '\n' after each) for a test to look through. */
static void keep_log(void *userdata, int level, const char *msg)
{
	char *kept = userdata;
	size_t n = strlen(kept);

	(void)level;
	snprintf(kept + n, 8192 - n, "%s\n", msg);
}

/* A transient domain of libvirt's test driver, named name, with the engine's metadata naming owner. */
static void tpl_domain(virConnectPtr conn, const char *name, const char *owner)
{
	char xml[2048];
	virDomainPtr dom;

	snprintf(xml, sizeof(xml),
	         "<domain type='test'><name>%s</name><memory>65536</memory><os><type>hvm</type></os>"
	         "<metadata><" META_PREFIX ":vm xmlns:" META_PREFIX "='" META_NS "'><" META_PREFIX ":ssh-port>40022</"
	         META_PREFIX ":ssh-port><" META_PREFIX ":image>tiny</" META_PREFIX ":image><" META_PREFIX ":host-key>k</"
	         META_PREFIX ":host-key><" META_PREFIX ":owner>%s</" META_PREFIX ":owner></" META_PREFIX ":vm></metadata>"
	         "</domain>", name, owner);
	assert_non_null(dom = virDomainCreateXML(conn, xml, 0));
	virDomainFree(dom);
}

static bool domain_there(virConnectPtr conn, const char *name)
{
	virDomainPtr dom = virDomainLookupByName(conn, name);

	if (dom)
		virDomainFree(dom);
	return dom != NULL;
}

/*
 * What a killed engine's template builds leave, as the next open cleans it
 * up: a template VM of ours still running is destroyed and its directory
 * removed; a directory whose domain libvirt already stopped (it kills a
 * domain it finds half started when it reconnects) is removed and said so;
 * a running domain of that name that is not ours keeps its files; nothing
 * but template VMs is touched.
 */
static void test_template_vms_left(void **state)
{
	static char owner[] = "/srv/state-a";
	char *top, path[4200], kept[8192] = "";
	struct drv *d = test_drv_open(keep_log, kept);
	static const char *const dirs[] = { "aas-tpl-a", "aas-tpl-b", "aas-tpl-c", "sbx-d" };

	(void)state;
	assert_non_null(top = saas_test_tmpdir());
	d->host = &saas__lv_host_local;
	d->dir = top;
	d->owner = owner;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(dirs); i++) {
		snprintf(path, sizeof(path), "%s/vms/%s", top, dirs[i]);
		assert_int_equal(saas__mkdir_p(path, 0700), 0);
		write_text(path, "disk.qcow2", "an overlay", 0600);
	}
	tpl_domain(d->conn, "aas-tpl-a", owner);        /* ours, still running */
	tpl_domain(d->conn, "aas-tpl-c", "/srv/state-b"); /* not ours */
	tpl_domain(d->conn, "aas-tpl-e", "/srv/state-b"); /* not ours, no directory here */

	saas__lv_template_vms_destroy(d);
	snprintf(path, sizeof(path), "%s/vms", top);
	assert_false(domain_there(d->conn, "aas-tpl-a"));
	assert_false(path_exists(path, "aas-tpl-a"));
	assert_non_null(strstr(kept, "destroying template VM aas-tpl-a, left over from an interrupted build"));
	assert_false(path_exists(path, "aas-tpl-b"));
	assert_non_null(strstr(kept, "template VM aas-tpl-b, left over from an interrupted build, was stopped by libvirt"));
	assert_true(domain_there(d->conn, "aas-tpl-c"));
	assert_true(path_exists(path, "aas-tpl-c"));
	assert_non_null(strstr(kept, "template VM aas-tpl-c, left over from an interrupted build: its domain runs"));
	assert_true(domain_there(d->conn, "aas-tpl-e"));
	assert_null(strstr(kept, "aas-tpl-e"));
	assert_true(path_exists(path, "sbx-d"));
	assert_null(strstr(kept, "sbx-d"));

	/* Done once: the next open finds nothing more to say of a or b. */
	kept[0] = '\0';
	saas__lv_template_vms_destroy(d);
	assert_null(strstr(kept, "aas-tpl-a"));
	assert_null(strstr(kept, "aas-tpl-b"));

	saas_test_rmdir(top);
	test_drv_close(d);
}

/*
 * A fork's RAM split cut short after its snapshot was renamed into place
 * (the split runs once the parent runs on; its "splitting" file marks it):
 * while the stream is there it is whole and becomes the state, the RAM's
 * half-written file goes, and the children load it; once the split removed
 * the stream, RAM and state are whole and stay. A whole snapshot is not touched.
 */
static void test_snapshot_unsplit(void **state)
{
	struct drv d;
	char *top, snaps[4200], a[4300], b[4300], c[4300], *text;

	(void)state;
	top = snap_drv(&d, snaps, sizeof(snaps));
	for (int i = 0; i < 3; i++) {
		char *at = i == 0 ? a : i == 1 ? b : c;
		snprintf(at, 4300, "%s/snap-%c", snaps, 'a' + i);
		assert_int_equal(saas__mkdir_p(at, 0700), 0);
	}
	/* snap-a cut short with its stream there, snap-b after the stream went, snap-c whole. */
	static const struct {
		int at;
		const char *name, *text;
	} files[] = {
		{ 0, "snapshot.json", "{}" }, { 0, "stream", "the whole stream" }, { 0, "state", "half" },
		{ 0, "ram", "half" },         { 0, "splitting", "" },               { 1, "snapshot.json", "{}" },
		{ 1, "state", "devices" },    { 1, "ram", "pages" },                { 1, "splitting", "" },
		{ 2, "snapshot.json", "{}" }, { 2, "state", "devices" },            { 2, "ram", "pages" },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		write_text(files[i].at == 0 ? a : files[i].at == 1 ? b : c, files[i].name, files[i].text, 0600);
	saas__lv_snapshots_cleanup(&d);
	assert_false(path_exists(a, "splitting"));
	assert_false(path_exists(a, "stream"));
	assert_false(path_exists(a, "ram"));
	snprintf(a + strlen(a), sizeof(a) - strlen(a), "/state");
	assert_int_equal(saas__file_read(&text, NULL, AT_FDCWD, a, 4096, 0), SAAS_OK);
	assert_string_equal(text, "the whole stream");
	free(text);
	assert_false(path_exists(b, "splitting"));
	assert_true(path_exists(b, "state") && path_exists(b, "ram"));
	assert_true(path_exists(c, "state") && path_exists(c, "ram") && path_exists(c, "snapshot.json"));
	pthread_rwlock_destroy(&d.snaps_lock);
	saas_test_rmdir(top);
}

struct split_end {
	struct drv *d;
	int memfd;                       /* -1: the split failed */
};

/* The end of a split as split_main makes it, a little later: sealed (or let go of), then said to the waiters. */
static void *split_end_main(void *arg)
{
	struct split_end *e = arg;

	usleep(50 * 1000);
	if (e->memfd >= 0)
		assert_int_equal(saas__lv_memfd_seal(e->memfd), SAAS_OK);
	pthread_mutex_lock(&e->d->mu);
	if (e->memfd < 0) {
		close(e->d->snaprams->memfd);
		e->d->snaprams->memfd = -1;
	}
	e->d->snaprams->splitting = false;
	pthread_cond_broadcast(&e->d->snaps_cond);
	pthread_mutex_unlock(&e->d->mu);
	return NULL;
}

/*
 * A child's QEMU starts on a fork's memory while the RAM is still split into
 * it: what it maps privately before the memory is filled shows each page as
 * the split writes it later (unless the child wrote that page itself), the
 * seal goes on with the mapping there, and the child's state waits for the
 * split's end: in (0) once the memory is sealed, started again (1) when the
 * split failed.
 */
static void test_snapshot_ram_pending(void **state)
{
	struct drv d;
	struct snapram slot;
	struct split_end end;
	pthread_t thread;
	char path[64], page[4096], dir[4200], *top;
	unsigned char *map;
	int fd = -1, qemu;
	bool broken, pending;

	(void)state;
	memset(&d, 0, sizeof(d));
	memset(&slot, 0, sizeof(slot));
	d.host = &saas__lv_host_local;
	d.log = quiet_log;
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.snaps_cond, NULL);
	snprintf(slot.name, sizeof(slot.name), "snap-a");
	assert_int_equal(saas__lv_memfd_new(MEMFD_SNAPSHOT, 4 * 4096, &slot.memfd), SAAS_OK);
	slot.splitting = true;
	d.snaprams = &slot;

	assert_int_equal(saas__lv_snapshot_ram(&d, "/nowhere/snapshots/snap-a", 4 * 4096, &fd, &broken, &pending), SAAS_OK);
	assert_true(pending);
	assert_false(broken);
	assert_true(fd >= 0 && fd != slot.memfd);
	/* As QEMU maps it: opened again by path, share=off. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	assert_true((qemu = open(path, O_RDWR | O_CLOEXEC)) >= 0);
	map = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, qemu, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(map[0], 0);       /* read before it is filled */
	map[4096] = 'q';                   /* written by the child itself */
	memset(page, 'r', sizeof(page));
	assert_int_equal(pwrite(slot.memfd, page, sizeof(page), 0), (ssize_t)sizeof(page));
	assert_int_equal(pwrite(slot.memfd, page, sizeof(page), 4096), (ssize_t)sizeof(page));
	assert_int_equal(pwrite(slot.memfd, page, sizeof(page), 3 * 4096), (ssize_t)sizeof(page));

	end.d = &d;
	end.memfd = slot.memfd;
	assert_int_equal(pthread_create(&thread, NULL, split_end_main, &end), 0);
	assert_int_equal(saas__lv_snapshot_split_wait(&d, "/nowhere/snapshots/snap-a"), SAAS_OK);
	pthread_join(thread, NULL);
	assert_true(saas__lv_memfd_sealed(slot.memfd));
	assert_int_equal(map[0], 'r');
	assert_int_equal(map[4095], 'r');
	assert_int_equal(map[4096], 'q');
	assert_int_equal(map[4097], 0);
	assert_int_equal(map[2 * 4096], 0);
	assert_int_equal(map[3 * 4096], 'r');
	/* Sealed: no one writes it any more, the child's QEMU neither. */
	assert_true(pwrite(qemu, page, 1, 0) < 0);
	munmap(map, 4 * 4096);
	close(qemu);
	close(fd);

	/* Taken once it is split: the sealed memory the driver holds, not pending (its file is there, not read). */
	assert_non_null(top = saas_test_tmpdir());
	snprintf(dir, sizeof(dir), "%s/snap-a", top);
	assert_int_equal(saas__mkdir_p(dir, 0700), 0);
	write_text(dir, "ram", "", 0600);
	assert_int_equal(saas__lv_snapshot_ram(&d, dir, 4 * 4096, &fd, &broken, &pending), SAAS_OK);
	assert_false(pending);
	assert_true(fd >= 0 && saas__lv_memfd_sealed(fd));
	close(fd);
	/*
	 * Split, and its RAM still being written to storage (marked): the
	 * driver that holds the memory hands it out; one that does not (another
	 * engine's) is told the snapshot is still being written.
	 */
	write_text(dir, "splitting", "", 0600);
	assert_int_equal(saas__lv_snapshot_ram(&d, dir, 4 * 4096, &fd, &broken, &pending), SAAS_OK);
	assert_false(pending);
	assert_true(fd >= 0 && saas__lv_memfd_sealed(fd));
	close(fd);
	d.snaprams = NULL;
	assert_int_equal(saas__lv_snapshot_ram(&d, dir, 4 * 4096, &fd, &broken, &pending), SAAS_EBUSY);
	assert_true(fd < 0);
	saas__error_clear();
	d.snaprams = &slot;
	saas_test_rmdir(top);

	/* A split that fails: the child started on it starts again, loading. */
	slot.splitting = true;
	end.memfd = -1;
	assert_int_equal(pthread_create(&thread, NULL, split_end_main, &end), 0);
	assert_int_equal(saas__lv_snapshot_split_wait(&d, "/nowhere/snapshots/snap-a"), 1);
	pthread_join(thread, NULL);
	assert_int_equal(slot.memfd, -1);
	/* No such split known: nothing to wait for, and nothing mapped. */
	assert_int_equal(saas__lv_snapshot_split_wait(&d, "/nowhere/snapshots/snap-b"), 1);

	pthread_cond_destroy(&d.snaps_cond);
	pthread_mutex_destroy(&d.mu);
}

/*
 * An image "tiny" of manifest under a fresh directory (returned; images and
 * img get TOP/images and TOP/images/tiny): its kernel, and its initrd of mode
 * initrd_mode.
 */
static char *tiny_image(char *images, size_t ilen, char *img, size_t glen, mode_t initrd_mode, const char *manifest)
{
	char *top;

	assert_non_null(top = saas_test_tmpdir());
	snprintf(images, ilen, "%s/images", top);
	snprintf(img, glen, "%s/tiny", images);
	assert_int_equal(saas__mkdir_p(img, 0755), 0);
	write_text(img, "vmlinuz", "kernel", 0644);
	write_text(img, "initrd.img", "initrd", initrd_mode);
	write_text(img, "manifest.json", manifest, 0644);
	return top;
}

/*
 * Images confined QEMUs cannot reach are staged under STATE/libvirt/images,
 * 0644 files in 0711 directories: a file readable by all is linked, one that
 * is not is copied (its private mode left alone); a rebuild is staged anew;
 * at open a staging no disk backs onto is removed, one a VM's overlay backs
 * onto is kept.
 */
static void test_images_staged(void **state)
{
	struct drv d;
	struct image *im = NULL, *im2 = NULL;
	struct stat st, src;
	char *top, images[4200], img[4300], ddir[4200], stage[4200], path[4400], overlay[4400], *backing;
	const char *manifest = "{\"kernel\": \"vmlinuz\", \"initrd\": \"initrd.img\", \"disk\": {\"file\": "
	                       "\"disk.qcow2\"}, \"ssh_host_key\": \"ssh-ed25519 AAAA\", \"boot_args\": \"console=ttyS0\", "
	                       "\"recipe_hash\": \"r1\"}";

	(void)state;
	top = tiny_image(images, sizeof(images), img, sizeof(img), 0600, manifest);
	{
		const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", path, "16M", NULL };
		snprintf(path, sizeof(path), "%s/disk.qcow2", img);
		assert_int_equal(saas__run(argv, NULL), SAAS_OK);
		assert_int_equal(chmod(path, 0644), 0);
	}
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	snprintf(ddir, sizeof(ddir), "%s/libvirt", top);
	d.dir = ddir;
	d.images = images;
	d.log = quiet_log;
	d.cf.stage_images = true;
	snprintf(path, sizeof(path), "%s/libvirt/images", top);
	assert_int_equal(saas__mkdir_p(path, 0711), 0);

	assert_int_equal(saas__lv_image_get(&d, "tiny", &im), SAAS_OK);
	snprintf(stage, sizeof(stage), "%s/libvirt/images/tiny-", top);
	assert_memory_equal(im->kernel, stage, strlen(stage));
	assert_memory_equal(im->initrd, stage, strlen(stage));
	assert_memory_equal(im->disk, stage, strlen(stage));
	assert_string_equal(strrchr(im->kernel, '/'), "/vmlinuz");
	assert_string_equal(strrchr(im->disk, '/'), "/disk.qcow2");
	/* The image's own directory is still where the manifest is. */
	assert_string_equal(im->dir, img);
	/* Readable by all: linked. */
	snprintf(path, sizeof(path), "%s/vmlinuz", img);
	assert_int_equal(stat(path, &src), 0);
	assert_int_equal(stat(im->kernel, &st), 0);
	assert_int_equal(st.st_ino, src.st_ino);
	/* Private: copied, 0644, and the operator's file keeps its mode. */
	snprintf(path, sizeof(path), "%s/initrd.img", img);
	assert_int_equal(stat(path, &src), 0);
	assert_int_equal(stat(im->initrd, &st), 0);
	assert_int_not_equal(st.st_ino, src.st_ino);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(src.st_mode & 07777, 0600);
	/* The staging directory: traversable, not listable. */
	snprintf(stage, sizeof(stage), "%s", im->kernel);
	*strrchr(stage, '/') = '\0';
	assert_int_equal(stat(stage, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0711);

	/* A VM's overlay on the staged disk: its header names it. */
	snprintf(overlay, sizeof(overlay), "%s/libvirt/vms/sbx-a", top);
	assert_int_equal(saas__mkdir_p(overlay, 0700), 0);
	strcat(overlay, "/disk.qcow2");
	{
		const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", im->disk, overlay, NULL };
		assert_int_equal(saas__run(argv, NULL), SAAS_OK);
	}
	assert_non_null(backing = saas__lv_qcow2_backing(overlay));
	assert_string_equal(backing, im->disk);
	free(backing);
	assert_null(saas__lv_qcow2_backing(im->kernel)); /* not qcow2 */
	assert_null(saas__lv_qcow2_backing(im->disk));   /* no backing file */

	/* A rebuild: staged anew, beside the old one. */
	saas__sleep_ms(20);
	write_text(img, "manifest.json", manifest, 0644);
	assert_int_equal(saas__lv_image_get(&d, "tiny", &im2), SAAS_OK);
	assert_ptr_not_equal(im2, im);
	assert_string_not_equal(im2->kernel, im->kernel);
	assert_int_equal(stat(im2->kernel, &st), 0);

	/* At the next open: the build the overlay backs onto stays, the other goes. */
	saas__lv_images_prune(&d);
	assert_int_equal(stat(im->disk, &st), 0);
	assert_int_not_equal(stat(im2->kernel, &st), 0);
	unlink(overlay);
	saas__lv_images_prune(&d);
	assert_int_not_equal(stat(im->disk, &st), 0);

	while (d.imgs) {
		struct image *next = d.imgs->next;
		saas__lv_image_free(d.imgs);
		d.imgs = next;
	}
	while (d.old_imgs) {
		struct image *next = d.old_imgs->next;
		saas__lv_image_free(d.old_imgs);
		d.old_imgs = next;
	}
	saas_test_rmdir(top);
}

/* ---- a create and a spare being made (spare.c) ------------------------------------------------ */

/* A driver made by hand (no connection, no VM) on a `tiny` image of its own, logging to log. */
static char *hand_driver(struct drv *d, char *images, size_t ilen, char *img, size_t glen,
                         void (*log)(void *, int, const char *), void *userdata)
{
	static char pub[] = "ssh-ed25519 AAAA test";
	char *top = tiny_image(images, ilen, img, glen, 0644,
	                       "{\"kernel\": \"vmlinuz\", \"initrd\": \"initrd.img\", \"ssh_host_key\": \"ssh-ed25519 AAAA\", "
	                       "\"boot_args\": \"console=ttyS0\", \"recipe_hash\": \"r1\"}");

	memset(d, 0, sizeof(*d));
	d->host = &saas__lv_host_local;
	d->dir = top;
	d->images = images;
	d->pub = pub;
	d->log = log;
	d->log_userdata = userdata;
	pthread_mutex_init(&d->mu, NULL);
	return top;
}

static void images_free(struct image **list)
{
	while (*list) {
		struct image *next = (*list)->next;
		saas__lv_image_free(*list);
		*list = next;
	}
}

static void hand_driver_free(struct drv *d, char *top)
{
	images_free(&d->imgs);
	images_free(&d->old_imgs);
	pthread_mutex_destroy(&d->mu);
	saas_test_rmdir(top);
}

/* One create's take on its own thread, and what the test sees of it. */
struct take_watch {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool waiting, done; /* its log said it waits for a spare being made; it came back */
	int taken;
	struct drv *d;
	const saas_vm_spec *spec;
	pthread_t thread;
	char name[SAAS_ID_MAX + 1];
};

static void take_log(void *userdata, int level, const char *msg)
{
	struct take_watch *w = userdata;

	(void)level;
	print_message("  driver: %s\n", msg);
	if (strstr(msg, " is being made, ")) {
		pthread_mutex_lock(&w->mu);
		w->waiting = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->mu);
	}
}

static void *take_main(void *arg)
{
	struct take_watch *w = arg;
	int taken = saas__lv_take(w->d, w->spec, w->name, sizeof(w->name));

	pthread_mutex_lock(&w->mu);
	w->taken = taken;
	w->done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* A take started on its thread; true once it waits for a spare being made, false if it came back first. */
static bool take_waits(struct take_watch *w)
{
	bool waiting;

	w->waiting = w->done = false;
	w->taken = -1;
	w->name[0] = '\0';
	assert_int_equal(pthread_create(&w->thread, NULL, take_main, w), 0);
	pthread_mutex_lock(&w->mu);
	while (!w->waiting && !w->done)
		pthread_cond_wait(&w->cond, &w->mu);
	waiting = w->waiting;
	pthread_mutex_unlock(&w->mu);
	return waiting;
}

/* A spare of spec's shape (template key), being made since now, first in d's list. */
static struct spare *spare_making(struct drv *d, const saas_vm_spec *spec, const char *key, const char *name)
{
	struct spare *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->image, sizeof(s->image), "%s", spec->image);
	s->spec = *spec;
	s->state = SPARE_MAKING;
	s->begun_ms = saas__now_ms();
	s->next = d->spare.list;
	d->spare.list = s;
	return s;
}

/*
 * A create that finds no spare ready, but one of its shape being made, waits
 * for it rather than making its own beside it (saas__lv_take): made ready
 * while the create waits, it is the one the create takes. The create is seen
 * waiting (its log says so) before the spare is ready, so a take that did not
 * wait would have come back with none: states, not times (the wait's bound,
 * the make's usual time, is ten minutes here). While it waits it is counted
 * (d->spare.waiting), which keeps the makers from warming the spares they
 * make meanwhile (spare_awaited). One undone while a create
 * waits for it (destroyed meanwhile) leaves the create to make its own, and
 * is not waited for again; a create of another shape, or with a network of
 * its own, waits for none.
 */
static void test_take_waits_for_spare_being_made(void **state)
{
	struct drv d;
	struct image *im = NULL;
	struct tmpl t;
	struct spare *s, *undone;
	struct take_watch w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .d = &d };
	saas_vm_spec shape = { .image = "tiny", .vcpus = 1, .memory_mb = 512, .disk_gb = 1 }, other = shape;
	saas_vm_network net = { SAAS_NET_ISOLATED, NULL, NULL };
	char *top, images[4200], img[4300], name[SAAS_ID_MAX + 1];

	(void)state;
	top = hand_driver(&d, images, sizeof(images), img, sizeof(img), take_log, &w);
	assert_int_equal(saas__cond_init_monotonic(&d.spare.cond), 0);
	d.spare.make_ms = 600000;
	/* Its template, ready: a spare of it is current. */
	memset(&t, 0, sizeof(t));
	assert_int_equal(saas__lv_image_get(&d, "tiny", &im), SAAS_OK);
	saas__lv_template_key(&d, &shape, im, t.key);
	assert_int_not_equal(t.key[0], '\0');
	t.state = TMPL_READY;
	t.memfd = -1;
	d.tmpls = &t;

	/* Being made when the create comes, ready while it waits: taken by it. */
	s = spare_making(&d, &shape, t.key, "sbx-spare000000000000001");
	w.spec = &shape;
	assert_true(take_waits(&w));
	pthread_mutex_lock(&d.mu);
	assert_int_equal(s->state, SPARE_MAKING); /* the create has not taken it: it waits */
	assert_int_equal(d.spare.waiting, 1);     /* counted: its maker warms no spare meanwhile */
	s->state = SPARE_READY;
	pthread_cond_broadcast(&d.spare.cond);
	pthread_mutex_unlock(&d.mu);
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.taken, 1);
	assert_string_equal(w.name, s->name);
	assert_int_equal(s->state, SPARE_TAKEN);
	assert_int_equal(d.spare.waiting, 0);

	/* Undone while a create waits for it: the create makes its own. */
	undone = spare_making(&d, &shape, t.key, "sbx-spare000000000000002");
	assert_true(take_waits(&w));
	pthread_mutex_lock(&d.mu);
	undone->cancelled = true;
	pthread_cond_broadcast(&d.spare.cond);
	pthread_mutex_unlock(&d.mu);
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.taken, 0);
	assert_string_equal(w.name, "");
	/* Nor is it waited for again, still listed as it is. */
	assert_false(take_waits(&w));
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.taken, 0);

	/* One being made of another shape, or a create with a network of its own: no wait, none taken. */
	undone->cancelled = false;
	other.memory_mb = 1024;
	w.spec = &other;
	assert_false(take_waits(&w));
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.taken, 0);
	shape.network = &net;
	assert_int_equal(saas__lv_take(&d, &shape, name, sizeof(name)), 0);
	assert_int_equal(undone->state, SPARE_MAKING);

	while ((s = d.spare.list)) {
		d.spare.list = s->next;
		free(s);
	}
	pthread_cond_destroy(&d.spare.cond);
	hand_driver_free(&d, top);
}

/* ---- which template a spare is made for, and a failed one (spare.c) ---------------------------- */

static char spare_said[8192]; /* what the driver logged, each line ended by '\n' */

static void spare_log(void *userdata, int level, const char *msg)
{
	(void)userdata;
	(void)level;
	print_message("  driver: %s\n", msg);
	if (strlen(spare_said) + strlen(msg) + 2 < sizeof(spare_said)) {
		strcat(spare_said, msg);
		strcat(spare_said, "\n");
	}
}

/* A ready template of image tiny in shape's size, asked for at asked; its key computed (0: current) or given. */
static void spare_tmpl(struct drv *d, struct tmpl *t, const saas_vm_spec *shape, const char *key, int64_t asked)
{
	struct image *im = NULL;

	memset(t, 0, sizeof(*t));
	if (key) {
		snprintf(t->key, sizeof(t->key), "%s", key);
	} else {
		assert_int_equal(saas__lv_image_get(d, "tiny", &im), SAAS_OK);
		saas__lv_template_key(d, shape, im, t->key);
		assert_int_not_equal(t->key[0], '\0');
	}
	snprintf(t->image, sizeof(t->image), "%s", shape->image);
	t->vcpus = shape->vcpus;
	t->memory_mb = shape->memory_mb;
	t->disk_gb = shape->disk_gb;
	t->state = TMPL_READY;
	t->memfd = -1;
	t->asked_ms = asked;
	t->next = d->tmpls;
	d->tmpls = t;
}

/*
 * Spares go to the templates a create would clone now. One its image's
 * rebuild replaced (another key than the image's build gives), though asked
 * for last and with no spare, gets none: each would be destroyed as soon as
 * made, or, its files pruned, fail every minute. A failed make holds back
 * its own template's spares, doubling, and no other's (nor the driver's
 * global wait); a failure of a template no longer current forgets it. The
 * image rebuilt, no template of the old build gets one; the new build's
 * does. A template whose directory is gone is not ready any more
 * (template_lost), one whose directory is whole stays ready. The driver is
 * made by hand, with no VM: states and times given, not waited for.
 */
static void test_spares_follow_templates(void **state)
{
	struct drv d;
	struct tmpl cur, old, other, rebuilt;
	struct spare *s;
	saas_vm_spec shape = { .image = "tiny", .vcpus = 1, .memory_mb = 512, .disk_gb = 1 }, big = shape;
	char *top, images[4200], img[4300], dir[4400];
	const int64_t now = 1000000;
	struct timespec later[2] = { { 2000000000, 0 }, { 2000000000, 0 } };

	(void)state;
	top = hand_driver(&d, images, sizeof(images), img, sizeof(img), spare_log, NULL);
	spare_said[0] = '\0';
	big.memory_mb = 1024;
	/* A template of another size, asked first; the current one; one replaced, asked for last. */
	spare_tmpl(&d, &other, &big, NULL, 100);
	spare_tmpl(&d, &cur, &shape, NULL, 200);
	spare_tmpl(&d, &old, &shape, "4a69000000000000000000000000beef", 300);

	/* The replaced one is never wanted: the current one is, then (it has one) the other size. */
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now), &cur);
	assert_non_null(s = calloc(1, sizeof(*s)));
	snprintf(s->key, sizeof(s->key), "%s", cur.key);
	s->state = SPARE_READY;
	d.spare.list = s;
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now), &other);
	assert_null(saas__lv_spare_wanted_locked(&d, 1, now)); /* as many as the target listed */
	d.spare.list = NULL;
	free(s);

	/* A failure of the current one holds back its spares only, and longer each time. */
	assert_false(saas__lv_spare_failed_locked(&d, cur.key, "a test's failure", now));
	assert_int_equal(cur.spare_retry_at_ms, now + SPARE_BACKOFF_FIRST_MS);
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now), &other);
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now + SPARE_BACKOFF_FIRST_MS), &cur);
	assert_false(saas__lv_spare_failed_locked(&d, cur.key, "a test's failure", now));
	assert_int_equal(cur.spare_retry_at_ms, now + 2 * SPARE_BACKOFF_FIRST_MS);
	for (int i = 0; i < 10; i++)
		assert_false(saas__lv_spare_failed_locked(&d, cur.key, "a test's failure", now));
	assert_int_equal(cur.spare_retry_at_ms, now + SPARE_BACKOFF_MAX_MS);
	assert_int_equal(other.spare_retry_at_ms, 0);
	assert_int_equal(d.spare.retry_at_ms, 0);
	assert_non_null(strstr(spare_said, "failed (a test's failure); next try for it in 1 s\n"));

	/* A failure of the replaced one (its files pruned) forgets it, and holds back no other. */
	assert_true(saas__lv_spare_failed_locked(&d, old.key, "templates/4a69.../state: No such file or directory", now));
	assert_int_equal(old.asked_ms, 0);
	assert_int_equal(old.spare_retry_at_ms, 0);
	assert_int_equal(other.spare_retry_at_ms, 0);
	assert_non_null(strstr(spare_said, "no more VMs are started ahead for template 4a69000000000000000000000000beef: "
	                                   "it is no longer current"));
	assert_null(strstr(spare_said, "template 4a69000000000000000000000000beef failed"));

	/* The image rebuilt: no template of its old build is wanted; the new build's is. */
	write_text(img, "manifest.json", "{\"kernel\": \"vmlinuz\", \"initrd\": \"initrd.img\", \"ssh_host_key\": "
	           "\"ssh-ed25519 AAAA\", \"boot_args\": \"console=ttyS0\", \"recipe_hash\": \"r2\"}", 0644);
	snprintf(dir, sizeof(dir), "%s/manifest.json", img);
	assert_int_equal(utimensat(AT_FDCWD, dir, later, 0), 0); /* a new mtime, however coarse the clock */
	cur.spare_retry_at_ms = other.spare_retry_at_ms = 0;
	assert_null(saas__lv_spare_wanted_locked(&d, 4, now));
	spare_tmpl(&d, &rebuilt, &shape, NULL, 400);
	assert_string_not_equal(rebuilt.key, cur.key);
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now), &rebuilt);

	/* Its directory whole, a template stays ready; gone, it is not (a create builds it again). */
	snprintf(dir, sizeof(dir), "%s/templates/%s", top, rebuilt.key);
	assert_int_equal(saas__mkdir_p(dir, 0700), 0);
	write_text(dir, "template.json", "{}", 0600);
	d.host->template_lost(&d, rebuilt.key);
	assert_int_equal(rebuilt.state, TMPL_READY);
	d.host->template_lost(&d, cur.key);
	assert_int_equal(cur.state, TMPL_NONE);
	assert_non_null(strstr(spare_said, "is gone from its directory"));
	hand_driver_free(&d, top);
}

/* ---- the templates asked for, remembered across restarts (spare_asked.c) ------------------------ */

/*
 * The file's text: what is written reads back the same, latest first; the
 * whole file is refused (with why) when it is not the format, holds more
 * than its bound of templates, or any entry is not one: a key that is no
 * key, an image that is no image name (a path, capitals), a shape or time
 * out of bounds.
 */
static void test_asked_file_format(void **state)
{
	struct saas__lv_asked in[2] = {
		{ "0123456789abcdef0123456789abcdef", "tiny", 1, 512, 1, 1765000000123 },
		{ "fedcba9876543210fedcba9876543210", "default-2.x_y", 4, 4096, 20, 1700000000000 },
	};
	struct saas__lv_asked out[SPARE_ASKED_MAX + 1];
	static const char *const bad[] = {
		"{\"format\": 1, \"templates\": [",
		"[]",
		"{\"format\": 2, \"templates\": []}",
		"{\"format\": 1}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123\", \"image\": \"tiny\", \"vcpus\": 1, \"memory_mb\": 512, "
		"\"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789ABCDEF0123456789abcdef\", \"image\": \"tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"../tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"Tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"tiny\", "
		"\"vcpus\": 0, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 99999999999, \"disk_gb\": 1, \"asked_ms\": 5}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 512, \"disk_gb\": 1}]}",
		"{\"format\": 1, \"templates\": [{\"key\": \"0123456789abcdef0123456789abcdef\", \"image\": \"tiny\", "
		"\"vcpus\": 1, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": \"soon\"}]}",
		"{\"format\": 1, \"templates\": [7]}",
	};
	char *text, why[256], many[8192];
	size_t n = 99, len;

	(void)state;
	assert_non_null(text = saas__lv_asked_format(in, 2));
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, text, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(out[i].key, in[i].key);
		assert_string_equal(out[i].image, in[i].image);
		assert_int_equal(out[i].vcpus, in[i].vcpus);
		assert_int_equal(out[i].memory_mb, in[i].memory_mb);
		assert_int_equal(out[i].disk_gb, in[i].disk_gb);
		assert_int_equal(out[i].asked_ms, in[i].asked_ms);
	}
	free(text);
	/* None is a file too. */
	assert_non_null(text = saas__lv_asked_format(in, 0));
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, text, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	free(text);

	for (size_t i = 0; i < SAAS_ARRAY_SIZE(bad); i++) {
		why[0] = '\0';
		n = 99;
		assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, bad[i], why, sizeof(why)), -1);
		assert_int_equal(n, 0);
		assert_int_not_equal(why[0], '\0');
	}
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, bad[6], why, sizeof(why)), -1);
	assert_non_null(strstr(why, "no image name"));

	/* At the bound, read; one over, refused whole. */
	len = (size_t)snprintf(many, sizeof(many), "{\"format\": 1, \"templates\": [");
	for (int i = 0; i < SPARE_ASKED_MAX + 1; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s{\"key\": \"%032x\", \"image\": \"tiny\", \"vcpus\": "
		                        "1, \"memory_mb\": 512, \"disk_gb\": 1, \"asked_ms\": %d}", i ? ", " : "", i, i + 1);
	snprintf(many + len, sizeof(many) - len, "]}");
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX + 1, &n, many, why, sizeof(why)), 0);
	assert_int_equal(n, SPARE_ASKED_MAX + 1);
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, many, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "over its bound of 32"));
}

/* The key of tiny's template in shape's size, on d as it is. */
static void asked_key(struct drv *d, const saas_vm_spec *shape, char key[33])
{
	struct image *im = NULL;

	pthread_mutex_lock(&d->mu);
	assert_int_equal(saas__lv_image_get(d, "tiny", &im), SAAS_OK);
	saas__lv_template_key(d, shape, im, key);
	pthread_mutex_unlock(&d->mu);
	assert_int_not_equal(key[0], '\0');
}

/* Template key's directory made whole (ready, as a finished build leaves it). */
static void asked_ready(const char *top, const char *key)
{
	char dir[4400];

	snprintf(dir, sizeof(dir), "%s/templates/%s", top, key);
	assert_int_equal(saas__mkdir_p(dir, 0700), 0);
	write_text(dir, "template.json", "{}", 0600);
}

/* The entry of key in d's templates, or NULL. */
static struct tmpl *asked_tmpl(struct drv *d, const char *key)
{
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			return t;
	return NULL;
}

/* A driver's templates as the driver frees them, and its quiet clock: as after close, for the next open. */
static void asked_forget(struct drv *d)
{
	while (d->tmpls) {
		struct tmpl *t = d->tmpls;
		d->tmpls = t->next;
		free(t);
	}
	d->spare.quiet_from = 0;
	spare_said[0] = '\0';
}

/*
 * What an open takes from the file (saas__lv_asked_load): a template of its
 * image's current build, ready, asked for within the week, is asked for
 * again at the time the file says, with its image and shape, and a quiet
 * spell counts from the open: the spare thread wants it at once. Not revived: one
 * asked for over a week ago, one of another key than its image's build now
 * gives (replaced), one whose files are gone. A file over its bound, a link,
 * or no JSON is ignored with a line, and nothing revived; none at all says
 * nothing. Without spares, or on a VM host, nothing is read.
 */
static void test_asked_at_open(void **state)
{
	struct drv d;
	struct saas__lv_asked list[4];
	saas_vm_spec shape = { .image = "tiny", .vcpus = 1, .memory_mb = 512, .disk_gb = 1 }, old = shape, gone = shape;
	char *top, images[4200], img[4300], path[4400], *text, big[SPARE_ASKED_FILE_MAX + 2];
	const int64_t now = saas__now_ms(), day = 24 * 60 * 60 * 1000;
	struct tmpl *t;

	(void)state;
	top = hand_driver(&d, images, sizeof(images), img, sizeof(img), spare_log, NULL);
	spare_said[0] = '\0';
	d.templates = true;
	d.spare.ceiling = d.spare.floor = 1;
	old.memory_mb = 1024;
	gone.memory_mb = 256;
	memset(list, 0, sizeof(list));
	asked_key(&d, &shape, list[0].key);
	asked_key(&d, &old, list[1].key);
	asked_key(&d, &gone, list[3].key);
	snprintf(list[2].key, sizeof(list[2].key), "4a69000000000000000000000000beef");
	for (int i = 0; i < 4; i++) {
		const saas_vm_spec *s = i == 1 ? &old : i == 3 ? &gone : &shape;
		snprintf(list[i].image, sizeof(list[i].image), "tiny");
		list[i].vcpus = s->vcpus;
		list[i].memory_mb = s->memory_mb;
		list[i].disk_gb = s->disk_gb;
		list[i].asked_ms = now - (i == 1 ? 8 * day : day);
		if (i != 3)
			asked_ready(top, list[i].key);
	}
	assert_non_null(text = saas__lv_asked_format(list, 4));
	write_text(top, SPARE_ASKED_FILE, text, 0600);
	free(text);

	saas__lv_asked_load(&d);
	assert_non_null(t = asked_tmpl(&d, list[0].key));
	assert_int_equal(t->state, TMPL_READY);
	assert_int_equal(t->asked_ms, now - day);
	assert_string_equal(t->image, "tiny");
	assert_int_equal(t->memory_mb, 512);
	assert_int_equal(t->vcpus, 1);
	assert_int_equal(t->disk_gb, 1);
	assert_ptr_equal(saas__lv_spare_wanted_locked(&d, 4, now), t);
	assert_int_equal(d.spare.nasks, 0); /* no create: a create soon after is no burst */
	assert_true(d.spare.quiet_from >= now);
	for (int i = 1; i < 4; i++)
		assert_true(!(t = asked_tmpl(&d, list[i].key)) || !t->asked_ms);
	assert_non_null(strstr(spare_said, "1 of the 4 templates creates asked for before this start"));
	assert_non_null(strstr(spare_said, "asked for too long ago"));
	assert_non_null(strstr(spare_said, "no longer current"));
	assert_non_null(strstr(spare_said, "not ready"));
	assert_false(d.spare.asked_dirty); /* nothing to write: the file says it */

	/* Without spares (spares=0): nothing read, nothing wanted. */
	asked_forget(&d);
	d.spare.ceiling = d.spare.floor = 0;
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_int_equal(d.spare.quiet_from, 0);
	assert_string_equal(spare_said, "");
	d.spare.ceiling = d.spare.floor = 1;
	/* On a VM host (its templates the host's, shared): nothing read either. */
	d.host = &saas__lv_host_remote;
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_int_equal(d.spare.quiet_from, 0);
	assert_string_equal(spare_said, "");
	d.host = &saas__lv_host_local;

	/* Over its bound, a link, not JSON: ignored, said, nothing revived. */
	snprintf(path, sizeof(path), "%s/%s", top, SPARE_ASKED_FILE);
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	write_text(top, SPARE_ASKED_FILE, big, 0600);
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_non_null(strstr(spare_said, "; ignored: "));
	assert_non_null(strstr(spare_said, "over its bound"));
	asked_forget(&d);
	assert_non_null(text = saas__lv_asked_format(list, 1));
	write_text(top, "elsewhere.json", text, 0600);
	free(text);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("elsewhere.json", path), 0);
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_non_null(strstr(spare_said, "it is a link"));
	asked_forget(&d);
	assert_int_equal(unlink(path), 0);
	write_text(top, SPARE_ASKED_FILE, "{\"format\": 1, \"templates\": [{\"key\": ", 0600);
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_non_null(strstr(spare_said, "not JSON"));
	asked_forget(&d);
	assert_int_equal(unlink(path), 0);
	saas__lv_asked_load(&d);
	assert_null(d.tmpls);
	assert_string_equal(spare_said, "");
	hand_driver_free(&d, top);
}

/*
 * What creates write (saas__lv_asked_note_locked, then a spare thread's
 * saas__lv_asked_write_locked): a template new to the file marks it, and the
 * write holds it; asked again within the hour it is not written again, nor
 * when the file says it already; of another shape, or its time in the file
 * an hour old, it is. At most SPARE_ASKED_MAX are written, the ones asked
 * for last. Without spares, or on a VM host, nothing is marked.
 */
static void test_asked_written(void **state)
{
	struct drv d;
	struct tmpl many[SPARE_ASKED_MAX + 2];
	struct saas__lv_asked out[SPARE_ASKED_MAX];
	saas_vm_spec shape = { .image = "tiny", .vcpus = 1, .memory_mb = 512, .disk_gb = 1 }, shape2 = shape;
	char *top, images[4200], img[4300], *text, why[256];
	const int64_t now = saas__now_ms();
	size_t n;
	struct tmpl *t;

	(void)state;
	top = hand_driver(&d, images, sizeof(images), img, sizeof(img), spare_log, NULL);
	d.templates = true;
	d.spare.ceiling = d.spare.floor = 1;
	pthread_mutex_lock(&d.mu);
	assert_non_null(t = saas__lv_template_get_locked(&d, "0123456789abcdef0123456789abcdef"));
	saas__lv_asked_note_locked(&d, t, &shape, now - 1000);
	assert_true(d.spare.asked_dirty);
	saas__lv_asked_write_locked(&d);
	assert_false(d.spare.asked_dirty);
	assert_false(d.spare.asked_writing);
	assert_int_equal(t->remembered_ms, now - 1000);
	pthread_mutex_unlock(&d.mu);
	{
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", top, SPARE_ASKED_FILE);
		assert_int_equal(saas__file_read(&text, NULL, AT_FDCWD, path, SPARE_ASKED_FILE_MAX, SAAS__FILE_NOFOLLOW), 0);
	}
	saas__error_clear();
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, text, why, sizeof(why)), 0);
	free(text);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].key, t->key);
	assert_string_equal(out[0].image, "tiny");
	assert_int_equal(out[0].memory_mb, 512);
	assert_int_equal(out[0].asked_ms, now - 1000);

	pthread_mutex_lock(&d.mu);
	/* Within the hour, the same shape: not written again; the time is the create's. */
	saas__lv_asked_note_locked(&d, t, &shape, now);
	assert_false(d.spare.asked_dirty);
	assert_int_equal(t->asked_ms, now);
	/* Another shape of the same key (a size under the image's least memory): written. */
	shape2.memory_mb = 256;
	saas__lv_asked_note_locked(&d, t, &shape2, now);
	assert_true(d.spare.asked_dirty);
	assert_int_equal(t->memory_mb, 256);
	d.spare.asked_dirty = false;
	/* Its time in the file an hour old: written. */
	saas__lv_asked_note_locked(&d, t, &shape2, t->remembered_ms + SPARE_ASKED_REFRESH_MS);
	assert_true(d.spare.asked_dirty);
	d.spare.asked_dirty = false;
	/* Without spares, or on a VM host: never. */
	d.spare.ceiling = 0;
	saas__lv_asked_note_locked(&d, t, &shape, t->remembered_ms + 2 * SPARE_ASKED_REFRESH_MS);
	assert_false(d.spare.asked_dirty);
	d.spare.ceiling = 1;
	d.host = &saas__lv_host_remote;
	saas__lv_asked_note_locked(&d, t, &shape, t->remembered_ms + 2 * SPARE_ASKED_REFRESH_MS);
	assert_false(d.spare.asked_dirty);
	d.host = &saas__lv_host_local;

	/* More than the bound asked: the latest SPARE_ASKED_MAX written, latest first. */
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(many); i++) {
		memset(&many[i], 0, sizeof(many[i]));
		snprintf(many[i].key, sizeof(many[i].key), "%032zx", i + 1);
		many[i].memfd = -1;
		saas__lv_asked_note_locked(&d, &many[i], &shape, now - 1000 * (int64_t)(i + 10));
		many[i].next = d.tmpls;
		d.tmpls = &many[i];
	}
	assert_true(d.spare.asked_dirty);
	saas__lv_asked_write_locked(&d);
	d.tmpls = t; /* the array's entries are the test's */
	t->next = NULL;
	pthread_mutex_unlock(&d.mu);
	{
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", top, SPARE_ASKED_FILE);
		assert_int_equal(saas__file_read(&text, NULL, AT_FDCWD, path, SPARE_ASKED_FILE_MAX, SAAS__FILE_NOFOLLOW), 0);
	}
	assert_int_equal(saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, text, why, sizeof(why)), 0);
	free(text);
	assert_int_equal(n, SPARE_ASKED_MAX);
	assert_string_equal(out[0].key, t->key);
	for (size_t i = 1; i < n; i++) {
		assert_true(out[i].asked_ms < out[i - 1].asked_ms);
		assert_string_equal(out[i].key, many[i - 1].key);
	}
	asked_forget(&d);
	hand_driver_free(&d, top);
}

/* ---- a domain start that failed for the moment (boot.c) --------------------------------------- */

/*
 * Which failed domain starts are tried again (saas__lv_launch_start): libvirt's
 * error for a system call's EAGAIN, as the cgroup v2 device filter's BPF
 * program refused right after many VMs ended (seen once, and the clone
 * booted cold), whatever its words; one that says so only in words (QEMU's
 * own error, passed on as text). Not another errno of the same call, not an
 * int1 of EAGAIN's value in an error that is no system call's (int1 is then
 * something else), nor the usual lasting failures.
 */
static void test_start_transient(void **state)
{
	static const struct {
		int code, domain, int1;
		const char *message;
		bool transient;
	} cases[] = {
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_CGROUP, EAGAIN,
		  "failed to load cgroup BPF prog: Resource temporarily unavailable", true },
		/* The errno says it, whatever the language, or with no words at all. */
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_CGROUP, EAGAIN,
		  "failed to load cgroup BPF prog: Ressource temporairement non disponible", true },
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_CGROUP, EAGAIN, NULL, true },
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_NONE, EAGAIN, "cannot fork child process: Resource temporarily unavailable",
		  true },
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_CGROUP, ENOMEM, "failed to load cgroup BPF prog: Cannot allocate memory",
		  false },
		{ VIR_ERR_SYSTEM_ERROR, VIR_FROM_CGROUP, EPERM, "failed to load cgroup BPF prog: Operation not permitted",
		  false },
		/* An error of another kind: its int1 is not an errno, only its words count. */
		{ VIR_ERR_INTERNAL_ERROR, VIR_FROM_QEMU, -1,
		  "internal error: qemu unexpectedly closed the monitor: qemu-system-x86_64: failed to create thread: "
		  "Resource temporarily unavailable", true },
		{ VIR_ERR_INTERNAL_ERROR, VIR_FROM_QEMU, EAGAIN, "internal error: process exited while connecting to monitor",
		  false },
		{ VIR_ERR_INTERNAL_ERROR, VIR_FROM_QEMU, EAGAIN,
		  "internal error: qemu unexpectedly closed the monitor: kvm run failed Function not implemented", false },
		{ VIR_ERR_CONFIG_UNSUPPORTED, VIR_FROM_QEMU, 0,
		  "unsupported configuration: host doesn't support invariant TSC", false },
		{ VIR_ERR_OPERATION_FAILED, VIR_FROM_DOMAIN, 0, "operation failed: domain 'sbx-x' already exists with uuid 1",
		  false },
	};
	char message[256];
	virError e;

	(void)state;
	assert_false(saas__lv_virt_transient(NULL));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&e, 0, sizeof(e));
		e.code = cases[i].code;
		e.domain = cases[i].domain;
		e.level = VIR_ERR_ERROR;
		e.int1 = cases[i].int1;
		if (cases[i].message) {
			snprintf(message, sizeof(message), "%s", cases[i].message);
			e.message = message;
		}
		print_message("  %s -> %s\n", cases[i].message ? cases[i].message : "(no words)",
		              cases[i].transient ? "tried again" : "fails");
		assert_int_equal(saas__lv_virt_transient(&e), cases[i].transient);
	}
}

/* ---- a VM's files without root --------------------------------------------------------------- */

#define ENGINE_UID 65534u  /* an unprivileged engine (nobody) */
#define VM_UID 200123u
#define OTHER_UID 200124u

/* In a child as uid (and gid the same): 0 when open(path, flags) (a directory: opendir) works. */
static int as_uid_open(unsigned int uid, const char *path, int flags, bool dir)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		int ok;
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
			_exit(2);
		if (dir) {
			DIR *d = opendir(path);
			ok = d != NULL;
			if (d)
				closedir(d);
		} else {
			int fd = open(path, flags);
			ok = fd >= 0;
		}
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 2);
	return WEXITSTATUS(status);
}

/*
 * An unprivileged engine (a system libvirtd's) cannot chown: it grants a VM's
 * uid its directory and overlay with ACL entries, and no other uid gets in;
 * the console log is made, the engine's; a template's frozen disk loses the
 * entry, so a clone given that uid later can read it but never write it.
 */
static void test_vm_files_unprivileged(void **state)
{
	struct drv d;
	struct launch l;
	char *top, vmdir[4200], overlay[4300], console[4300];
	struct stat st;
	pid_t pid;
	int status;

	(void)state;
	if (geteuid() != 0)
		skip(); /* switching to the engine's and the VMs' uids needs root */
	assert_non_null(top = saas_test_tmpdir());
	assert_int_equal(chmod(top, 0711), 0);
	snprintf(vmdir, sizeof(vmdir), "%s/sbx-a", top);
	snprintf(overlay, sizeof(overlay), "%s/disk.qcow2", vmdir);
	snprintf(console, sizeof(console), "%s/console.log", vmdir);
	assert_int_equal(mkdir(vmdir, 0700), 0);
	write_text(vmdir, "disk.qcow2", "disk", 0600);
	assert_int_equal(chown(vmdir, ENGINE_UID, ENGINE_UID), 0);
	assert_int_equal(chown(overlay, ENGINE_UID, ENGINE_UID), 0);

	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	memset(&l, 0, sizeof(l));
	l.d = &d;
	l.uid = VM_UID;
	l.dir = vmdir;
	l.overlay = overlay;
	if ((pid = fork()) == 0) {
		/* The child never uses top again: freed, so that valgrind's leak check at its _exit finds nothing. */
		free(top);
		if (setresgid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0 || setresuid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0)
			_exit(2);
		_exit(saas__lv_confine_vm_files(&l) == SAAS_OK ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	assert_int_equal(stat(overlay, &st), 0);
	assert_int_equal(st.st_uid, ENGINE_UID);
	assert_int_equal(stat(console, &st), 0);
	assert_int_equal(st.st_uid, ENGINE_UID);
	assert_int_equal(st.st_mode & 077, 0);
	assert_int_equal(as_uid_open(VM_UID, overlay, O_RDWR, false), 0);
	assert_int_equal(as_uid_open(VM_UID, vmdir, 0, true), 0);
	assert_int_equal(as_uid_open(OTHER_UID, overlay, O_RDONLY, false), 1);
	assert_int_equal(as_uid_open(OTHER_UID, vmdir, 0, true), 1);
	assert_int_equal(as_uid_open(VM_UID, console, O_RDONLY, false), 1);

	/* Frozen as a template's disk (the engine does it): readable by all, writable by none but the engine. */
	if ((pid = fork()) == 0) {
		free(top); /* as above */
		if (setresgid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0 || setresuid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0)
			_exit(2);
		_exit(saas__lv_confine_template(&d, vmdir, overlay) == SAAS_OK ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(as_uid_open(VM_UID, overlay, O_RDWR, false), 1);
	assert_int_equal(as_uid_open(VM_UID, overlay, O_RDONLY, false), 0);
	assert_int_equal(as_uid_open(OTHER_UID, overlay, O_RDONLY, false), 0);
	assert_int_equal(as_uid_open(OTHER_UID, vmdir, 0, true), 1); /* 0711: passed through, not listed */
	saas_test_rmdir(top);
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
	rules = saas__lv_guard_ruleset(4242, resolv_conf, NULL, 0);
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
	rules = saas__lv_guard_ruleset(999, NULL, NULL, 0);
	golden("guard-no-resolvers.nft", rules);
	free(rules);
	rules = saas__lv_guard_ruleset(999, "# nothing here\n", NULL, 0);
	golden("guard-no-resolvers.nft", rules);
	free(rules);
}

/* ---- egress policies ------------------------------------------------------------------------- */

static void test_egress_names(void **state)
{
	static const char *const allow[] = { "example.com", "*.example.org", "198.51.100.0/24", NULL };
	static const char *const deny[] = { "secret.example.org", "*.ads.example.org", NULL };
	static const char *const all[] = { "*", NULL };
	static const char *const cidrs[] = { "203.0.113.0/24", "2001:db8::/32", NULL };

	(void)state;
	assert_true(saas__lv_egress_name_allowed(allow, deny, "example.com"));
	/* A name allows itself only; a wildcard what is strictly below, on a label boundary. */
	assert_false(saas__lv_egress_name_allowed(allow, deny, "www.example.com"));
	assert_false(saas__lv_egress_name_allowed(allow, deny, "example.org"));
	assert_true(saas__lv_egress_name_allowed(allow, deny, "www.example.org"));
	assert_true(saas__lv_egress_name_allowed(allow, deny, "a.b.example.org"));
	assert_false(saas__lv_egress_name_allowed(allow, deny, "badexample.org"));
	assert_false(saas__lv_egress_name_allowed(allow, deny, "example.org.evil.net"));
	/* Deny wins. */
	assert_false(saas__lv_egress_name_allowed(allow, deny, "secret.example.org"));
	assert_true(saas__lv_egress_name_allowed(allow, deny, "ads.example.org"));
	assert_false(saas__lv_egress_name_allowed(allow, deny, "x.ads.example.org"));
	/* CIDRs name no name; "*" every one; nothing allowed by an empty list. */
	assert_false(saas__lv_egress_name_allowed(cidrs, NULL, "198.51.100.1"));
	assert_true(saas__lv_egress_name_allowed(all, deny, "anything.example"));
	assert_false(saas__lv_egress_name_allowed(all, deny, "secret.example.org"));
	assert_false(saas__lv_egress_name_allowed(NULL, NULL, "example.com"));
	assert_false(saas__lv_egress_name_allowed(all, all, "example.com"));
}

static void test_egress_check(void **state)
{
	const char *rules[EGRESS_RULES_MAX + 2];
	char names[EGRESS_RULES_MAX + 1][32], longname[300];
	saas_vm_network net = { SAAS_NET_POLICY, rules, NULL };
	static const char *const good[] = { "example.com", "*.example.com", "*", "198.51.100.0/24", "203.0.113.7/32",
		                            "2001:db8::/32", "::/0", "0.0.0.0/0", "_srv.x-y.example", NULL };
	static const char *const bad[] = { "198.51.100.1/24", "2001:db8::1/32", "198.51.100.0/33", "10.0.0.0/",
		                           "10.0.0.0/+8", "example.com.", "Example.com", "*.", "a..b", "ex ample.com",
		                           "x.*.example", "1.2.3.4/8;flush ruleset", "*example.com" };
	(void)state;
	net.allow = good;
	assert_int_equal(saas__lv_egress_check(&net), SAAS_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *one[] = { bad[i], NULL };
		net.allow = one;
		if (saas__lv_egress_check(&net) != SAAS_EINVAL)
			fail_msg("rule '%s' was accepted", bad[i]);
		assert_non_null(strstr(saas_error_last()->message, "allow"));
		net.allow = NULL;
		net.deny = one;
		assert_int_equal(saas__lv_egress_check(&net), SAAS_EINVAL);
		net.deny = NULL;
	}
	/* EGRESS_RULES_MAX rules a list, and names of up to 253 characters. */
	for (int i = 0; i <= EGRESS_RULES_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "host%d.example.com", i);
		rules[i] = names[i];
	}
	rules[EGRESS_RULES_MAX] = NULL;
	net.allow = rules;
	assert_int_equal(saas__lv_egress_check(&net), SAAS_OK);
	rules[EGRESS_RULES_MAX] = names[EGRESS_RULES_MAX];
	rules[EGRESS_RULES_MAX + 1] = NULL;
	assert_int_equal(saas__lv_egress_check(&net), SAAS_EINVAL);
	memset(longname, 'a', sizeof(longname));
	for (int i = 63; i < 253; i += 64)
		longname[i] = '.';
	longname[253] = '\0';
	rules[0] = longname;
	rules[1] = NULL;
	assert_int_equal(saas__lv_egress_check(&net), SAAS_OK);
	longname[253] = 'a';
	longname[254] = '\0';
	assert_int_equal(saas__lv_egress_check(&net), SAAS_EINVAL);
	/* Modes other than a policy carry no rules to check. */
	net.mode = 7;
	assert_int_equal(saas__lv_egress_check(&net), SAAS_EINVAL);
}

/* Without per-VM uids (or without the guard): no table, and policies are refused saying why. */
static void test_egress_refused(void **state)
{
	static const char *const allow[] = { "example.com", NULL };
	saas_vm_network net = { SAAS_NET_POLICY, allow, NULL };
	saas_vm_network_stats st = { 5, 5 };
	struct drv d;

	(void)state;
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.guard = true;
	assert_int_equal(saas__lv_egress_open(&d, "/var/lib/aas"), SAAS_OK);
	assert_null(d.egress);
	assert_non_null(strstr(d.egress_why, "uid of its own"));
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-x", 200001, &net, false), SAAS_ENOTSUP);
	/* The tenant's words: what is missing, not why (the host's uids: logged at open). */
	assert_non_null(strstr(saas_error_last()->message, "network policies are not available on this server"));
	assert_null(strstr(saas_error_last()->message, "uid"));
	assert_int_equal(saas_error_last()->klass, SAAS_ERRCLASS_ARGS);
	d.cf.confined = true;
	d.guard = false;
	snprintf(d.guard_why, sizeof(d.guard_why), "the group aas-guest does not exist");
	assert_int_equal(saas__lv_egress_open(&d, "/var/lib/aas"), SAAS_OK);
	assert_null(d.egress);
	assert_string_equal(d.egress_why, d.guard_why);
	/* No counters to read: zeros. */
	assert_int_equal(saas__lv_egress_vm_stats(&d, "sbx-x", &st), SAAS_OK);
	assert_int_equal(st.denied_connections, 0);
	assert_int_equal(st.denied_lookups, 0);
	saas__lv_egress_vm_remove(&d, "sbx-x");
}

static const char *const policy_allow[] = { "example.com", "*.example.org", "198.51.100.0/24", "203.0.113.7/32",
	                                    "2001:db8:1::/48", NULL };
static const char *const policy_deny[] = { "198.51.100.128/25", "2001:db8:1:2::/64", "secret.example.org", NULL };

static void test_egress_ruleset(void **state)
{
	saas_vm_network net = { SAAS_NET_POLICY, policy_allow, policy_deny };
	static const char *const all[] = { "*", NULL };
	char *text;

	(void)state;
	golden("egress-table.nft", text = saas__lv_egress_table_text("aas_egress_0123456789abcdef",
	                                                              "nameserver 192.0.2.53\nnameserver 2001:db8::53\n",
	                                                              NULL, 0));
	free(text);
	golden("egress-vm-policy.nft", text = saas__lv_egress_vm_text("aas_egress_0123456789abcdef", 200001, &net, 40053));
	free(text);
	net.allow = all;
	net.deny = NULL;
	golden("egress-vm-policy-all.nft", text = saas__lv_egress_vm_text("aas_egress_0123456789abcdef", 200001, &net,
	                                                                  40053));
	free(text);
	net.mode = SAAS_NET_INTERNET;
	golden("egress-vm-internet.nft", text = saas__lv_egress_vm_text("aas_egress_0123456789abcdef", 200002, &net, 0));
	free(text);
	golden("egress-vm-isolated.nft", text = saas__lv_egress_vm_text("aas_egress_0123456789abcdef", 200003, NULL, 0));
	free(text);
	golden("egress-vm-remove.nft", text = saas__lv_egress_remove_text("aas_egress_0123456789abcdef", 200003));
	free(text);
}

/* ---- the host's IPv6 prefixes ---------------------------------------------------------------- */

/* An entry of a fake getifaddrs() list. */
struct fake_if {
	struct ifaddrs ifa;
	struct sockaddr_in6 addr, mask;
	struct sockaddr_in addr4;
};

/* fake[i]: addr (NULL: none; an IPv4 address is AF_INET) with a netmask of len bits (-1: none). */
static void fake_if(struct fake_if *fake, size_t i, size_t n, const char *addr, int len)
{
	struct fake_if *f = &fake[i];

	memset(f, 0, sizeof(*f));
	f->ifa.ifa_name = (char *)"eth0";
	f->ifa.ifa_next = i + 1 < n ? &fake[i + 1].ifa : NULL;
	if (addr && inet_pton(AF_INET, addr, &f->addr4.sin_addr) == 1) {
		f->addr4.sin_family = AF_INET;
		f->ifa.ifa_addr = (struct sockaddr *)&f->addr4;
		return;
	}
	if (addr) {
		assert_int_equal(inet_pton(AF_INET6, addr, &f->addr.sin6_addr), 1);
		f->addr.sin6_family = AF_INET6;
		f->ifa.ifa_addr = (struct sockaddr *)&f->addr;
	}
	if (len >= 0) {
		f->mask.sin6_family = AF_INET6;
		for (int b = 0; b < len; b++)
			f->mask.sin6_addr.s6_addr[b / 8] |= (uint8_t)(0x80 >> (b % 8));
		f->ifa.ifa_netmask = (struct sockaddr *)&f->mask;
	}
}

/* "P/LEN, P/LEN" */
static void format_prefixes(char *out, size_t size, const struct saas__lv_prefix6 *p, size_t n)
{
	char addr[INET6_ADDRSTRLEN];
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		assert_non_null(inet_ntop(AF_INET6, &p[i].addr, addr, sizeof(addr)));
		used += (size_t)snprintf(out + used, size - used, "%s%s/%u", i ? ", " : "", addr, p[i].len);
		assert_true(used < size);
	}
}

static const struct {
	const char *addr;
	int len;
} host_addrs[] = {
	{ "192.0.2.1", 24 },            /* IPv4: not this list's */
	{ NULL, -1 },                   /* an interface without an address */
	{ "::1", 128 },                 /* loopback, link-local, unique local, multicast, IPv4-mapped: */
	{ "fe80::1", 64 },              /*   blocked by range already */
	{ "fd00:ec2::1", 64 },
	{ "ff02::1", 16 },
	{ "::ffff:192.0.2.1", 96 },
	{ "2001:db8:2:4::1", 64 },      /* inside the /56 that comes later: dropped then */
	{ "2001:db8:1::5", 64 },
	{ "2001:db8:1::6", 64 },        /* the same prefix */
	{ "2001:db8:2:3::1", 56 },      /* 2001:db8:2::/56 */
	{ "2001:db8:2:ff::1", 64 },     /* inside it */
	{ "2001:db8:ab::1", -1 },       /* no netmask: the address alone */
	{ "2001:db8:c7:1::1", 45 },     /* a mask that ends inside a byte: 2001:db8:c0::/45 */
};
#define HOST_ADDRS (sizeof(host_addrs) / sizeof(host_addrs[0]))
#define HOST_PREFIXES "2001:db8:1::/64, 2001:db8:2::/56, 2001:db8:ab::1/128, 2001:db8:c0::/45"

static void host_prefixes(struct saas__lv_prefix6 **p, size_t *n)
{
	struct fake_if fake[HOST_ADDRS];

	for (size_t i = 0; i < HOST_ADDRS; i++)
		fake_if(fake, i, HOST_ADDRS, host_addrs[i].addr, host_addrs[i].len);
	assert_int_equal(saas__lv_host_prefixes6(&fake[0].ifa, p, n), SAAS_OK);
}

/* Global prefixes only, masked, each once, none inside another (an nft interval set refuses overlaps). */
static void test_host_prefixes6(void **state)
{
	struct saas__lv_prefix6 *p = NULL;
	char got[512];
	size_t n = 0;

	(void)state;
	host_prefixes(&p, &n);
	format_prefixes(got, sizeof(got), p, n);
	assert_string_equal(got, HOST_PREFIXES);
	free(p);
	/* No interfaces, or none with a global address: none. */
	assert_int_equal(saas__lv_host_prefixes6(NULL, &p, &n), SAAS_OK);
	assert_int_equal(n, 0);
	assert_null(p);
}

/* The host's prefixes go into a set of their own; the marker changes with what the guard holds. */
static void test_guard_ruleset_host_prefixes(void **state)
{
	struct saas__lv_prefix6 *p = NULL;
	char *rules, *plain, *mark;
	size_t n = 0;

	(void)state;
	host_prefixes(&p, &n);
	rules = saas__lv_guard_ruleset(4242, NULL, p, n);
	golden("guard-host-prefixes.nft", rules);
	assert_non_null(strstr(rules, "elements = { " HOST_PREFIXES " }"));
	/* Marked twice, with a marker of its own. */
	assert_non_null(mark = strstr(rules, "comment \"" GUARD_TABLE " "));
	assert_non_null(mark = strstr(mark + 1, "comment \"" GUARD_TABLE " "));
	assert_null(strstr(mark + 1, "comment \""));
	plain = saas__lv_guard_ruleset(4242, NULL, NULL, 0);
	assert_null(strstr(plain, mark));
	free(plain);
	free(rules);
	free(p);
}

/* ---- the guard, loaded ----------------------------------------------------------------------- */

static int guard_warnings;

static void count_warnings(void *userdata, int level, const char *msg)
{
	(void)userdata;
	if (level == SAAS_LOG_WARN)
		guard_warnings++;
	print_message("  driver: %s\n", msg);
}

/* nft with args; 0 when it exited 0. */
static int nft(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5)
{
	const char *argv[] = { "nft", a1, a2, a3, a4, a5, NULL };
	char *out = NULL;
	int rc = saas__run(argv, &out);

	free(out);
	saas__error_clear();
	return rc;
}

/* Is the guard loaded with its rules (the guest chain's last reject)? */
static bool guard_loaded(void)
{
	const char *argv[] = { "nft", "list", "chain", "inet", GUARD_TABLE, "guest", NULL };
	char *out = NULL;
	bool loaded = saas__run(argv, &out) == 0 && strstr(out, "@host6");

	free(out);
	saas__error_clear();
	return loaded;
}

/*
 * Move this process into a network namespace of its own, once: nft then
 * loads into that namespace's ruleset, never the host's, and the namespace
 * goes with the process. Skips where that cannot be done.
 */
static void own_namespace(void)
{
	static int entered; /* 1 in it, -1 could not */

	if (!entered) {
		entered = -1;
		if (geteuid() != 0)
			print_message("  skipped: not root\n");
		else if (!saas__lv_guest_gid(NULL))
			print_message("  skipped: no group " GUEST_GROUP "\n");
		else if (unshare(CLONE_NEWNET) < 0)
			print_message("  skipped: cannot make a network namespace\n");
		else
			entered = 1;
	}
	if (entered < 0)
		skip();
}

/*
 * Why there is no guard, as an engine on a system libvirtd (embedded false)
 * is told: the guard matches QEMU's group, which only per-VM labels decide
 * there, and loading it takes CAP_NET_ADMIN (an unprivileged engine's is
 * checked in its ambient set, which nft inherits). Nothing is loaded here.
 */
static void test_guard_refused_system(void **state)
{
	struct drv d;
	bool root = geteuid() == 0;

	(void)state;
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.log = count_warnings;
	/* Not confined: libvirtd's qemu.conf decides QEMU's group. */
	assert_int_equal(saas__lv_network_setup(&d, false), SAAS_OK);
	assert_false(d.guard);
	assert_non_null(strstr(d.guard_why, "uid of its own per VM"));
	assert_null(strstr(d.guard_why, "run as root"));
	/* Confined, without the group: each QEMU's gid is its uid. */
	d.cf.confined = true;
	assert_int_equal(saas__lv_network_setup(&d, false), SAAS_OK);
	assert_false(d.guard);
	assert_non_null(strstr(d.guard_why, "groupadd --system " GUEST_GROUP));
	/* Confined under the group, unprivileged and without the capability (as root: an effective uid of nobody's). */
	d.cf.guest_gid = 4242;
	if (root)
		assert_int_equal(seteuid(65534), 0);
	assert_int_equal(saas__lv_network_setup(&d, false), SAAS_OK);
	if (root)
		assert_int_equal(seteuid(0), 0);
	assert_false(d.guard);
	assert_non_null(strstr(d.guard_why, "CAP_NET_ADMIN"));
	assert_non_null(strstr(d.guard_why, "AmbientCapabilities"));
	/* Asked for by name, internet is refused with that reason. */
	d.network = NET_INTERNET;
	if (root)
		assert_int_equal(seteuid(65534), 0);
	assert_int_equal(saas__lv_network_setup(&d, false), SAAS_ENOTSUP);
	if (root)
		assert_int_equal(seteuid(0), 0);
	assert_non_null(strstr(saas_error_last()->message, "CAP_NET_ADMIN"));
}

/*
 * Checked before every internet create, and installed again when something
 * flushed it; refused when that fails.
 */
static void test_guard_reinstalled(void **state)
{
	struct drv d;
	char *dir, *gone;

	(void)state;
	own_namespace();
	assert_non_null(dir = saas_test_tmpdir());
	assert_non_null(gone = saas__lv_path_join(dir, "gone"));
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = dir;
	d.log = count_warnings;

	/* No guard at open: refused, saying why. */
	snprintf(d.guard_why, sizeof(d.guard_why), "no guard in this test");
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "internet"));
	assert_non_null(strstr(saas_error_last()->message, "no guard in this test"));
	assert_false(guard_loaded());

	/* Not loaded (a fresh namespace): installed. */
	d.guard = true;
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	assert_int_equal(guard_warnings, 1);
	assert_true(guard_loaded());
	/* In place: left alone. */
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	assert_int_equal(guard_warnings, 1);
	/* As root the check asks the kernel itself: with no nft to run (none on PATH), all the same. */
	if (geteuid() == 0) {
		char *path = strdup(getenv("PATH") ? getenv("PATH") : "");
		assert_non_null(path);
		assert_int_equal(setenv("PATH", "/nonexistent", 1), 0);
		assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
		assert_int_equal(setenv("PATH", path, 1), 0);
		free(path);
		assert_int_equal(guard_warnings, 1);
	}

	/* An operator's "nft flush ruleset": installed again. */
	assert_int_equal(nft("flush", "ruleset", NULL, NULL, NULL), 0);
	assert_false(guard_loaded());
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	assert_int_equal(guard_warnings, 2);
	assert_true(guard_loaded());

	/* Its rules flushed, the table left: installed again too. */
	assert_int_equal(nft("flush", "chain", "inet", GUARD_TABLE, "guest"), 0);
	assert_false(guard_loaded());
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	assert_int_equal(guard_warnings, 3);
	assert_true(guard_loaded());

	/* Flushed, and it cannot be installed again: refused, never an unguarded guest. */
	assert_int_equal(nft("flush", "ruleset", NULL, NULL, NULL), 0);
	d.dir = gone;
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "network policy internet is refused"));
	assert_non_null(strstr(saas_error_last()->message, "cannot write"));
	assert_false(guard_loaded());

	free(gone);
	saas_test_rmdir(dir);
}

/* On a system libvirtd with per-VM uids under the group, an engine that may load rules installs the guard. */
static void test_guard_system(void **state)
{
	struct drv d;
	char *dir;

	(void)state;
	own_namespace();
	assert_non_null(dir = saas_test_tmpdir());
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = dir;
	d.log = count_warnings;
	d.cf.confined = true;
	assert_true(saas__lv_guest_gid(&d.cf.guest_gid));
	assert_int_equal(saas__lv_network_setup(&d, false), SAAS_OK);
	assert_true(d.guard);
	assert_true(guard_loaded());
	assert_int_equal(nft("flush", "ruleset", NULL, NULL, NULL), 0);
	saas_test_rmdir(dir);
}

/* Can a socket of QEMU's group send a datagram to addr? false: the guard rejected it (EPERM). */
static bool guest_sends_to(const char *addr)
{
	struct sockaddr_storage sa;
	socklen_t len;
	gid_t gid;
	int fd, sent, err;

	memset(&sa, 0, sizeof(sa));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&sa)->sin_addr) == 1) {
		((struct sockaddr_in *)&sa)->sin_family = AF_INET;
		((struct sockaddr_in *)&sa)->sin_port = htons(9);
		len = sizeof(struct sockaddr_in);
	} else {
		assert_int_equal(inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&sa)->sin6_addr), 1);
		((struct sockaddr_in6 *)&sa)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&sa)->sin6_port = htons(9);
		len = sizeof(struct sockaddr_in6);
	}
	/* The guard matches the socket's group, taken when it is made. */
	assert_true(saas__lv_guest_gid(&gid));
	assert_int_equal(setegid(gid), 0);
	fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_int_equal(setegid(0), 0);
	assert_true(fd >= 0);
	sent = (int)sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, len);
	err = errno;
	close(fd);
	if (sent < 0 && err != EPERM)
		fail_msg("sending to %s: %s", addr, strerror(err));
	return sent == 1;
}

/*
 * What the guard blocks, on a real kernel: one end of a veth pair routes
 * everything (to nobody), with 2001:db8:5::1/64 as "the host's own global
 * prefix", found by the driver's getifaddrs().
 */
/* An address in family's text, as bytes (16, the rest zero). */
static const uint8_t *addr_of(int family, const char *text)
{
	static uint8_t b[16];

	memset(b, 0, sizeof(b));
	assert_int_equal(inet_pton(family, text, b), 1);
	return b;
}

/*
 * The guard's ranges read as the servers' end of VM hosts reads them
 * (saas__lv_guard_refuses, egress_host.c): the same list as its nft sets,
 * through one CIDR parser.
 */
static void test_guard_refuses(void **state)
{
	static const char *const refused4[] = { "0.0.0.0", "10.1.2.3", "100.64.0.1", "127.0.0.1", "168.63.129.16",
		                                    "169.254.169.254", "172.31.255.255", "192.0.0.8", "192.168.0.1",
		                                    "198.18.0.1", "224.0.0.1", "255.255.255.255" };
	static const char *const passed4[] = { "8.8.8.8", "192.0.2.1", "198.51.100.2", "203.0.113.9", "172.32.0.1",
		                                   "100.128.0.1", "168.63.129.17" };
	static const char *const refused6[] = { "::", "::1", "::ffff:1.2.3.4", "64:ff9b::a00:1", "2001::1", "2002::1",
		                                    "fd00:ec2::254", "fe80::1", "fec0::3", "ff02::1" };
	static const char *const passed6[] = { "2001:db8::1", "2606:4700::1111", "3fff::1" };
	uint8_t net[16];
	unsigned int len;
	bool canonical;
	int family;

	(void)state;
	for (size_t i = 0; i < sizeof(refused4) / sizeof(refused4[0]); i++)
		assert_true(saas__lv_guard_refuses(AF_INET, addr_of(AF_INET, refused4[i])));
	for (size_t i = 0; i < sizeof(passed4) / sizeof(passed4[0]); i++)
		assert_false(saas__lv_guard_refuses(AF_INET, addr_of(AF_INET, passed4[i])));
	for (size_t i = 0; i < sizeof(refused6) / sizeof(refused6[0]); i++)
		assert_true(saas__lv_guard_refuses(AF_INET6, addr_of(AF_INET6, refused6[i])));
	for (size_t i = 0; i < sizeof(passed6) / sizeof(passed6[0]); i++)
		assert_false(saas__lv_guard_refuses(AF_INET6, addr_of(AF_INET6, passed6[i])));
	/* CIDRs at their edges; a family that is not the rule's never matches. */
	assert_true(saas__lv_cidr_contains("192.0.2.0/25", AF_INET, addr_of(AF_INET, "192.0.2.127")));
	assert_false(saas__lv_cidr_contains("192.0.2.0/25", AF_INET, addr_of(AF_INET, "192.0.2.128")));
	assert_true(saas__lv_cidr_contains("0.0.0.0/0", AF_INET, addr_of(AF_INET, "203.0.113.1")));
	assert_true(saas__lv_cidr_contains("2001:db8::/33", AF_INET6, addr_of(AF_INET6, "2001:db8:7fff::1")));
	assert_false(saas__lv_cidr_contains("2001:db8::/33", AF_INET6, addr_of(AF_INET6, "2001:db8:8000::1")));
	assert_false(saas__lv_cidr_contains("192.0.2.0/24", AF_INET6, addr_of(AF_INET6, "2001:db8::1")));
	assert_false(saas__lv_cidr_contains("allowed.test", AF_INET, addr_of(AF_INET, "192.0.2.1")));
	/* The parser: non-canonical read but said so; what is not a CIDR refused. */
	assert_true(saas__lv_cidr_parse("192.0.2.1/24", &family, net, &len, &canonical));
	assert_int_equal(family, AF_INET);
	assert_int_equal(len, 24);
	assert_false(canonical);
	assert_true(saas__lv_cidr_parse("2001:db8::/32", &family, net, &len, &canonical));
	assert_true(canonical);
	assert_false(saas__lv_cidr_parse("192.0.2.0/33", &family, net, &len, &canonical));
	assert_false(saas__lv_cidr_parse("192.0.2.0", &family, net, &len, &canonical));
	assert_false(saas__lv_cidr_parse("192.0.2.0/", &family, net, &len, &canonical));
	assert_false(saas__lv_cidr_parse("192.0.2.0/2x", &family, net, &len, &canonical));
	/* A bare prefix, as the host's IPv6 prefixes are matched. */
	memcpy(net, addr_of(AF_INET6, "2001:db8:1::"), 16);
	assert_true(saas__lv_prefix_has(net, 48, addr_of(AF_INET6, "2001:db8:1::5")));
	assert_false(saas__lv_prefix_has(net, 48, addr_of(AF_INET6, "2001:db8:2::5")));
	assert_false(saas__lv_prefix_has(net, 47, addr_of(AF_INET6, "2001:db8:2::5")));
	assert_true(saas__lv_prefix_has(net, 46, addr_of(AF_INET6, "2001:db8:2::5")));
	assert_true(saas__lv_prefix_has(net, 0, addr_of(AF_INET6, "::1")));
}

static void test_guard_blocks(void **state)
{
	static const char *const blocked[] = {
		"127.0.0.1", "203.0.113.1", /* loopback; the host's own address */
		"10.1.2.3", "100.64.0.1", "169.254.169.254", "168.63.129.16", "192.0.0.170", "198.18.0.1",
		"198.19.255.254", "224.0.0.251", "::1", "fd00:ec2::254", "fe80::1", "64:ff9b::a00:1",
		"64:ff9b:1::1", "::ffff:10.0.0.1", "2002:a00:1::1", "2001:0:a00:1::1", "5f00::1",
		"2001:db8:5::7", /* a neighbour on the host's prefix */
	};
	static const char *const passed[] = { "198.51.100.7", "192.0.3.1", "2001:db8:6::1", "2003::1" };
	struct drv d;
	char *dir;

	(void)state;
	own_namespace();
	assert_int_equal(system("ip link add aasd0 type veth peer name aasd1 && ip link set aasd1 up && "
	                        "ip link set aasd0 up && "
	                        "ip addr add 203.0.113.1/24 dev aasd0 && ip -6 addr add 2001:db8:5::1/64 dev aasd0 nodad && "
	                        "ip route add default dev aasd0 && ip -6 route add default dev aasd0"),
	                 0);
	assert_non_null(dir = saas_test_tmpdir());
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = dir;
	d.log = count_warnings;
	d.guard = true;
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		if (guest_sends_to(blocked[i]))
			fail_msg("the guard let a guest send to %s", blocked[i]);
	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
		if (!guest_sends_to(passed[i]))
			fail_msg("the guard stopped a guest sending to %s", passed[i]);
	/* Deleting one end of a veth pair deletes both. */
	assert_int_equal(system("ip link del aasd0"), 0);
	saas_test_rmdir(dir);
}


/* ---- per-VM egress, loaded ------------------------------------------------------------------- */

#define EGRESS_UID 200001u

/* A socket made as QEMU makes them: owned by uid (`meta skuid`) in GUEST_GROUP (the guard's `meta skgid`). */
static int qemu_socket(unsigned int uid, int family, int type)
{
	gid_t gid;
	int fd;

	assert_true(saas__lv_guest_gid(&gid));
	assert_int_equal(setegid(gid), 0);
	assert_int_equal(seteuid(uid), 0);
	fd = socket(family, type | SOCK_CLOEXEC, 0);
	assert_int_equal(seteuid(0), 0);
	assert_int_equal(setegid(0), 0);
	assert_true(fd >= 0);
	return fd;
}

/* Can a socket of uid's QEMU send a datagram to addr? */
static bool uid_sends_to(unsigned int uid, const char *addr)
{
	struct sockaddr_storage sa;
	socklen_t len;
	int fd, sent, err;

	memset(&sa, 0, sizeof(sa));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&sa)->sin_addr) == 1) {
		((struct sockaddr_in *)&sa)->sin_family = AF_INET;
		((struct sockaddr_in *)&sa)->sin_port = htons(9);
		len = sizeof(struct sockaddr_in);
	} else {
		assert_int_equal(inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&sa)->sin6_addr), 1);
		((struct sockaddr_in6 *)&sa)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&sa)->sin6_port = htons(9);
		len = sizeof(struct sockaddr_in6);
	}
	fd = qemu_socket(uid, sa.ss_family, SOCK_DGRAM);
	sent = (int)sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, len);
	err = errno;
	close(fd);
	if (sent < 0 && err != EPERM)
		fail_msg("sending to %s: %s", addr, strerror(err));
	return sent == 1;
}

/* A UDP socket on 127.0.0.1 (port out), the test's stand-in for the upstream resolver. */
static int udp_loopback(unsigned int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	getsockname(fd, (struct sockaddr *)&a, &len);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A datagram within ms, or 0 bytes. */
static size_t recv_within(int fd, uint8_t *buf, size_t cap, int ms, struct sockaddr_in *from)
{
	struct pollfd p = { fd, POLLIN, 0 };
	socklen_t len = sizeof(*from);
	ssize_t n;

	if (poll(&p, 1, ms) != 1)
		return 0;
	n = recvfrom(fd, buf, cap, 0, (struct sockaddr *)from, &len);
	return n > 0 ? (size_t)n : 0;
}

/* A query for name (type A), id 0x4242, into buf. */
static size_t make_query(uint8_t *buf, const char *name)
{
	size_t n = 12;

	memset(buf, 0, 12);
	buf[0] = 0x42;
	buf[1] = 0x42;
	buf[2] = 0x01;
	buf[5] = 1;
	while (*name) {
		size_t l = strcspn(name, ".");
		buf[n++] = (uint8_t)l;
		memcpy(buf + n, name, l);
		n += l;
		name += l + (name[l] == '.');
	}
	buf[n++] = 0;
	memcpy(buf + n, "\x00\x01\x00\x01", 4);
	return n + 4;
}

/* How many sets of uid's the table holds (a policy VM's six; none for the other modes). */
static int uid_sets(const char *table, unsigned int uid)
{
	const char *argv[] = { "nft", "list", "sets", "table", "inet", table, NULL };
	char *out = NULL, suffix[24];
	int n = 0;

	assert_int_equal(saas__run(argv, &out), 0);
	snprintf(suffix, sizeof(suffix), "_%u {", uid);
	for (const char *p = out; (p = strstr(p, suffix)); p++)
		n++;
	free(out);
	return n;
}

/*
 * The upstream answers the query it got (len bytes in q) with one A record,
 * addr4 (4 bytes), TTL 30.
 */
static void upstream_answer(int fd, const struct sockaddr_in *to, uint8_t *q, size_t len, const char *addr4)
{
	uint8_t a[600];

	memcpy(a, q, len);
	a[2] = 0x81;
	a[3] = 0x80;
	a[7] = 1;
	memcpy(a + len, "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x1e\x00\x04", 12);
	memcpy(a + len + 12, addr4, 4);
	assert_int_equal(sendto(fd, a, len + 16, 0, (const struct sockaddr *)to, sizeof(*to)), (ssize_t)(len + 16));
}

static int64_t denied(struct drv *d, const char *name, bool lookups)
{
	saas_vm_network_stats st;

	assert_int_equal(saas__lv_egress_vm_stats(d, name, &st), SAAS_OK);
	return lookups ? st.denied_lookups : st.denied_connections;
}

/*
 * The egress table on a real kernel, in the test's namespace, with the
 * guard (sockets as QEMU's: its uid, the guest group): a policy's
 * CIDRs, deny winning, the guard's ranges never, counters; a lookup through
 * the redirect, allowed names learned and others refused without an upstream
 * query; swaps at runtime; a flush repaired; removal.
 */
static void test_egress_loaded(void **state)
{
	static const char *const allow[] = { "198.51.100.0/24", "ok.example", NULL };
	static const char *const deny[] = { "198.51.100.128/25", NULL };
	saas_vm_network policy = { SAAS_NET_POLICY, allow, deny }, internet = { SAAS_NET_INTERNET, NULL, NULL };
	uint8_t q[512], got[600];
	struct sockaddr_in from, to;
	unsigned int port, dns_port;
	struct drv d;
	char *dir, upstream[64], *out = NULL;
	size_t n, len;
	int up, fd;

	(void)state;
	own_namespace();
	assert_int_equal(system("ip link set lo up && ip link add aase0 type veth peer name aase1 && ip link set aase1 up && "
	                        "ip link set aase0 up && ip addr add 192.0.2.1/24 dev aase0 && "
	                        "ip -6 addr add 2001:db8:9::1/64 dev aase0 nodad && "
	                        "ip route add default dev aase0 && ip -6 route add default dev aase0"),
	                 0);
	assert_non_null(dir = saas_test_tmpdir());
	up = udp_loopback(&port);
	snprintf(upstream, sizeof(upstream), "127.0.0.1#%u", port);
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = dir;
	d.log = count_warnings;
	d.cf.confined = d.guard = true;
	d.dns_upstream = upstream;
	/* The guard too, as on a host: the redirected lookups must pass it. */
	assert_int_equal(saas__lv_guard_ensure(&d), SAAS_OK);
	assert_int_equal(saas__lv_egress_open(&d, dir), SAAS_OK);
	assert_non_null(d.egress);

	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-a", EGRESS_UID, &policy, false), SAAS_OK);
	assert_true(uid_sends_to(EGRESS_UID, "198.51.100.7"));
	assert_false(uid_sends_to(EGRESS_UID, "198.51.100.200")); /* denied inside the allowed range */
	assert_false(uid_sends_to(EGRESS_UID, "203.0.113.9"));    /* not allowed */
	assert_false(uid_sends_to(EGRESS_UID, "10.1.2.3"));       /* the guard's, under any policy */
	assert_false(uid_sends_to(EGRESS_UID, "2001:db8:6::1"));
	assert_true(uid_sends_to(EGRESS_UID + 5, "203.0.113.9")); /* uids of no VM: not ours to judge */
	assert_int_equal(denied(&d, "sbx-a", false), 4);

	/* A lookup as QEMU would send it (to any address's port 53), redirected to the resolver. */
	pthread_mutex_lock(&d.egress->mu);
	dns_port = d.egress->vms->port;
	pthread_mutex_unlock(&d.egress->mu);
	assert_true(dns_port > 0);
	fd = qemu_socket(EGRESS_UID, AF_INET, SOCK_DGRAM);
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_port = htons(53);
	inet_pton(AF_INET, "192.0.2.53", &to.sin_addr);
	len = make_query(q, "ok.example");
	assert_int_equal(sendto(fd, q, len, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)len);
	assert_int_equal(n = recv_within(up, got, sizeof(got), 5000, &from), len);
	upstream_answer(up, &from, got, n, "\xcb\x00\x71\x32"); /* 203.0.113.50 */
	n = recv_within(fd, got, sizeof(got), 5000, &from);
	assert_int_equal(n, len + 16);
	assert_int_equal(got[0], 0x42); /* the guest's id back */
	assert_int_equal(got[3] & 0xf, 0);
	/* The answered address is allowed for its TTL, clamped up to EGRESS_TTL_MIN. */
	assert_true(uid_sends_to(EGRESS_UID, "203.0.113.50"));
	{
		char set[32];
		const char *argv[] = { "nft", "list", "set", "inet", d.egress->table, set, NULL };
		snprintf(set, sizeof(set), "l4_%u", EGRESS_UID);
		assert_int_equal(saas__run(argv, &out), 0);
		assert_non_null(strstr(out, "203.0.113.50 timeout 1m"));
		free(out);
		out = NULL;
	}
	/* Another name: REFUSED at once, counted, and nothing reaches the upstream. */
	len = make_query(q, "leak-0123456789abcdef.evil.example");
	assert_int_equal(sendto(fd, q, len, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)len);
	n = recv_within(fd, got, sizeof(got), 5000, &from);
	assert_int_equal(n, len);
	assert_int_equal(got[3] & 0xf, DNS_RCODE_REFUSED);
	assert_int_equal(recv_within(up, got, sizeof(got), 300, &from), 0);
	assert_int_equal(denied(&d, "sbx-a", true), 1);
	close(fd);

	/* Over TCP (a client retrying a truncated answer): the same, length-prefixed. */
	fd = qemu_socket(EGRESS_UID, AF_INET, SOCK_STREAM);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	len = make_query(q + 2, "ok.example");
	q[0] = 0;
	q[1] = (uint8_t)len;
	assert_int_equal(send(fd, q, len + 2, 0), (ssize_t)len + 2);
	assert_int_equal(n = recv_within(up, got, sizeof(got), 5000, &from), len);
	upstream_answer(up, &from, got, n, "\xcb\x00\x71\x33"); /* 203.0.113.51 */
	{
		struct pollfd p = { fd, POLLIN, 0 };
		size_t have = 0;
		while (have < len + 18 && poll(&p, 1, 5000) == 1) {
			ssize_t r = recv(fd, got + have, sizeof(got) - have, 0);
			if (r <= 0)
				break;
			have += (size_t)r;
		}
		assert_int_equal(have, len + 18);
		assert_int_equal(got[0] << 8 | got[1], len + 16);
		assert_int_equal(got[2], 0x42);
	}
	assert_true(uid_sends_to(EGRESS_UID, "203.0.113.51"));
	close(fd);

	/* Swapped at runtime: internet (never the guard's ranges), isolated, and the policy again. */
	assert_int_equal(uid_sets(d.egress->table, EGRESS_UID), 6);
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-a", EGRESS_UID, &internet, false), SAAS_OK);
	assert_int_equal(uid_sets(d.egress->table, EGRESS_UID), 0); /* a policy's sets go with it */
	assert_true(uid_sends_to(EGRESS_UID, "203.0.113.9"));
	assert_false(uid_sends_to(EGRESS_UID, "10.1.2.3"));
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-a", EGRESS_UID, NULL, false), SAAS_OK);
	assert_int_equal(uid_sets(d.egress->table, EGRESS_UID), 0);
	assert_false(uid_sends_to(EGRESS_UID, "198.51.100.7"));
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-a", EGRESS_UID, &policy, false), SAAS_OK);
	assert_int_equal(uid_sets(d.egress->table, EGRESS_UID), 6);
	assert_true(uid_sends_to(EGRESS_UID, "198.51.100.7"));
	assert_false(uid_sends_to(EGRESS_UID, "203.0.113.50")); /* learned under the old policy: forgotten */
	assert_int_equal(denied(&d, "sbx-a", false), 7);        /* counted since the VM was made */

	/* Made isolated: no way out to open later. */
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-b", EGRESS_UID + 1, NULL, true), SAAS_OK);
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-b", EGRESS_UID + 1, &policy, false), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "made isolated"));
	assert_false(uid_sends_to(EGRESS_UID + 1, "198.51.100.7"));

	/* A flushed ruleset: loaded again, with every VM's rules. */
	assert_int_equal(nft("flush", "ruleset", NULL, NULL, NULL), 0);
	assert_int_equal(saas__lv_egress_ensure(&d), SAAS_OK);
	assert_false(uid_sends_to(EGRESS_UID, "203.0.113.9"));
	assert_true(uid_sends_to(EGRESS_UID, "198.51.100.7"));

	/* Removed: nothing of the uid is left. */
	saas__lv_egress_vm_remove(&d, "sbx-a");
	saas__lv_egress_vm_remove(&d, "sbx-b");
	{
		const char *argv[] = { "nft", "list", "table", "inet", d.egress->table, NULL };
		assert_int_equal(saas__run(argv, &out), 0);
		assert_null(strstr(out, "200001"));
		assert_null(strstr(out, "200002"));
		free(out);
	}
	assert_int_equal(denied(&d, "sbx-a", false), 0);
	saas__lv_egress_close(&d);
	close(up);
	assert_int_equal(system("ip link del aase0"), 0);
	saas_test_rmdir(dir);
}

/* Is this engine's egress table loaded? */
static bool egress_table_loaded(const char *table)
{
	const char *argv[] = { "nft", "list", "table", "inet", table, NULL };
	char *out = NULL;
	bool loaded = saas__run(argv, &out) == 0;

	free(out);
	saas__error_clear();
	return loaded;
}

/*
 * The egress table stays past a close while a VM has rules in it (they hold
 * while the engine is away), and goes with the close that leaves none.
 */
static void test_egress_table_dropped(void **state)
{
	saas_vm_network internet = { SAAS_NET_INTERNET, NULL, NULL };
	char table[sizeof(((struct saas__lv_egress *)0)->table)];
	char upstream[] = "127.0.0.1#9"; /* nothing is looked up here */
	struct drv d;
	char *dir;

	(void)state;
	own_namespace();
	assert_non_null(dir = saas_test_tmpdir());
	memset(&d, 0, sizeof(d));
	d.host = &saas__lv_host_local;
	d.dir = dir;
	d.log = count_warnings;
	d.cf.confined = d.guard = true;
	d.dns_upstream = upstream;
	assert_int_equal(saas__lv_egress_open(&d, dir), SAAS_OK);
	assert_non_null(d.egress);
	snprintf(table, sizeof(table), "%s", d.egress->table);
	assert_int_equal(saas__lv_egress_vm_set(&d, "sbx-a", EGRESS_UID, &internet, false), SAAS_OK);
	saas__lv_egress_close(&d);
	assert_true(egress_table_loaded(table));
	/* The next engine (no VM of the old one adopted here): its close leaves nothing. */
	assert_int_equal(saas__lv_egress_open(&d, dir), SAAS_OK);
	assert_true(egress_table_loaded(table));
	saas__lv_egress_close(&d);
	assert_false(egress_table_loaded(table));
	saas_test_rmdir(dir);
}

/* ---- the engine's hands in a VM's files (vmfs.c) and its control port's listener (control.c) -- */

/* A file at path holding text, mode 0600. */
static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/*
 * A QMP reply naming a disk that is not one of the VM's own is refused before
 * anything is resolved: the engine's key, a file beside the VM's directory,
 * a name that climbs out or goes down, a sibling directory sharing a prefix.
 */
static void test_vmfs_disk_name(void **state)
{
	static const char *const refused[] = {
		"/var/lib/aas/libvirt/id_ed25519",
		"/var/lib/aas/quickstart.key",
		"/var/lib/aas/libvirt/vms/sbx-a/../sbx-b/disk.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/sub/disk.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/disk.qcow2/x",
		"/var/lib/aas/libvirt/vms/sbx-ab/disk.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/disk-.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/disk-Fork.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/disk-../../x.qcow2",
		"/var/lib/aas/libvirt/vms/sbx-a/disk-a.qcow2x",
		"/var/lib/aas/libvirt/vms/sbx-a/disk.raw",
		"/var/lib/aas/libvirt/vms/sbx-a/",
		"/var/lib/aas/libvirt/vms/sbx-a",
		"json:{\"file\":{\"filename\":\"/var/lib/aas/libvirt/vms/sbx-a/disk.qcow2\"}}",
		"",
	};
	const char *vmdir = "/var/lib/aas/libvirt/vms/sbx-a";
	char name[NAME_MAX + 1];

	(void)state;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(refused); i++) {
		if (saas__lv_vm_disk_name(vmdir, refused[i], name, sizeof(name)))
			fail_msg("accepted %s", refused[i]);
	}
	assert_true(saas__lv_vm_disk_name(vmdir, "/var/lib/aas/libvirt/vms/sbx-a/disk.qcow2", name, sizeof(name)));
	assert_string_equal(name, "disk.qcow2");
	assert_true(saas__lv_vm_disk_name(vmdir, "/var/lib/aas/libvirt/vms/sbx-a/disk-fork-1.qcow2", name, sizeof(name)));
	assert_string_equal(name, "disk-fork-1.qcow2");
	/* No room for the name: refused, not cut. */
	assert_false(saas__lv_vm_disk_name(vmdir, "/var/lib/aas/libvirt/vms/sbx-a/disk.qcow2", name, 8));
}

/*
 * A name that passes is still opened without following and checked on the
 * fd: a symlink put in its place (to a root file), a FIFO (which must not
 * hang the engine), another owner's file, a directory others may write:
 * all refused, and the file outside untouched. The one right file is linked
 * by its fd.
 */
static void test_vmfs_disk_open(void **state)
{
	char *t = saas_test_tmpdir(), vmdir[4200], path[4300], secret[4300], link[4300];
	unsigned int me = (unsigned int)geteuid();
	struct stat st, st2;
	int fd = -1;

	(void)state;
	snprintf(vmdir, sizeof(vmdir), "%s/vm", t);
	snprintf(secret, sizeof(secret), "%s/secret", t);
	assert_int_equal(mkdir(vmdir, 0711), 0);
	put_file(secret, "the engine's key");
	/* A symlink at the disk's name. */
	snprintf(path, sizeof(path), "%s/disk.qcow2", vmdir);
	assert_int_equal(symlink(secret, path), 0);
	assert_int_equal(saas__lv_vm_disk_open(vmdir, path, me, &fd), SAAS_EBACKEND);
	assert_int_equal(fd, -1);
	assert_int_equal(unlink(path), 0);
	/* A FIFO: refused at once. */
	snprintf(path, sizeof(path), "%s/disk-a.qcow2", vmdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(saas__lv_vm_disk_open(vmdir, path, me, &fd), SAAS_EBACKEND);
	assert_int_equal(unlink(path), 0);
	/* Not the expected owner's. */
	put_file(path, "QFI");
	assert_int_equal(saas__lv_vm_disk_open(vmdir, path, me + 1, &fd), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "refused"));
	/* A directory others may write: the names in it could be anyone's. */
	assert_int_equal(chmod(vmdir, 0777), 0);
	assert_int_equal(saas__lv_vm_disk_open(vmdir, path, me, &fd), SAAS_EIO);
	assert_int_equal(chmod(vmdir, 0711), 0);
	/* The right one: linked by its inode. */
	assert_int_equal(saas__lv_vm_disk_open(vmdir, path, me, &fd), SAAS_OK);
	snprintf(link, sizeof(link), "%s/frozen", t);
	assert_int_equal(saas__lv_link_fd(fd, link), SAAS_OK);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(stat(link, &st2), 0);
	assert_int_equal(st.st_ino, st2.st_ino);
	close(fd);
	/* The secret is as it was. */
	assert_int_equal(stat(secret, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_nlink, 1);
	/* A file made for QEMU: never over a name already there, never through a symlink. */
	snprintf(path, sizeof(path), "%s/disk-b.qcow2", vmdir);
	assert_int_equal(symlink(secret, path), 0);
	assert_int_equal(saas__lv_vm_file_create(vmdir, "disk-b.qcow2", &fd), SAAS_EIO);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(saas__lv_vm_file_create(vmdir, "disk-b.qcow2", &fd), SAAS_OK);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);
	saas_test_rmdir(t);
}

/*
 * Removing a VM's tree never follows: a symlink in it (to a directory
 * outside) goes as a link, and a directory swapped for a symlink while the
 * removal runs (what a surviving process of the VM's uid could do) takes the
 * removal nowhere outside. The swap is made by a child once the removal has
 * started on the directory's files, a bounded number of times.
 */
static void test_vmfs_rm_tree(void **state)
{
	enum { FILES = 2000 };
	char *t = saas_test_tmpdir(), tree[4200], sub[4300], outside[4200], path[4400];
	struct stat st;
	pid_t pid;
	int left = 0, status = 0;

	(void)state;
	snprintf(tree, sizeof(tree), "%s/vm", t);
	snprintf(sub, sizeof(sub), "%s/vm/sub", t);
	snprintf(outside, sizeof(outside), "%s/outside", t);
	assert_int_equal(mkdir(tree, 0711), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(mkdir(outside, 0700), 0);
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", sub, i);
		put_file(path, "x");
		snprintf(path, sizeof(path), "%s/f%d", outside, i);
		put_file(path, "keep");
	}
	snprintf(path, sizeof(path), "%s/link", tree);
	assert_int_equal(symlink(outside, path), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Wait (bounded) for the removal to start on sub, then swap it for a link to outside. */
		char moved[4400];
		snprintf(moved, sizeof(moved), "%s/moved", t);
		for (long n = 0; n < 50000000; n++) {
			snprintf(path, sizeof(path), "%s/f%d", sub, FILES / 2);
			if (access(path, F_OK) < 0) {
				if (rename(sub, moved) == 0 && symlink(outside, sub) == 0)
					_exit(0);
				_exit(2);
			}
		}
		_exit(3);
	}
	saas__lv_rm_tree(tree);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* Whether or not the swap won its race, nothing outside went. */
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", outside, i);
		left += stat(path, &st) == 0;
	}
	assert_int_equal(left, FILES);
	/* A link as the tree's own name goes as a link. */
	snprintf(tree, sizeof(tree), "%s/vm2", t);
	assert_int_equal(symlink(outside, tree), 0);
	saas__lv_rm_tree(tree);
	assert_int_equal(lstat(tree, &st), -1);
	assert_int_equal(stat(outside, &st), 0);
	saas_test_rmdir(t);
}

/* Listen on dir/ctl, as uid when not 0 (a child that binds, drops to uid, listens): the child's pid, or 0 for ours. */
static pid_t listen_as(const char *dir, unsigned int uid, int *lfd)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ready[2];
	pid_t pid;
	char c;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ctl", dir);
	unlink(sa.sun_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	*lfd = fd;
	if (!uid) {
		assert_int_equal(listen(fd, 4), 0);
		return 0;
	}
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The listener's credentials are the listening process's at listen(). */
		if (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0 || listen(fd, 4) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

/*
 * The control port's listener: root's or libvirt's in this process is
 * accepted, the VM's own QEMU too (its pid where known); another VM's QEMU
 * (another uid) is refused before a byte is sent, and so is a socket whose
 * name is a symlink.
 */
static void test_control_peer(void **state)
{
	struct saas__ctl_peer_want want = { 1000, 4242, 0, 0 };
	struct ucred cr;
	char *t = saas_test_tmpdir(), vmdir[4200], other[4200], path[4300], target[4300];
	int fd = -1, lfd = -1, dfd;
	pid_t pid;

	(void)state;
	/* A VM without a uid of its own: its QEMU's uid is everyone's, nothing to tell apart. */
	cr = (struct ucred){ .pid = 77, .uid = 63001, .gid = 63001 };
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_OK);
	/* With one: its QEMU, root, or libvirt in the engine's own process; not another VM's QEMU. */
	want.vm_uid = 63000;
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_EIO);
	assert_non_null(strstr(saas_error_last()->message, "uid 63001"));
	cr.uid = 63000;
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_OK);
	want.qemu_pid = 78;
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_EIO);
	want.qemu_pid = 77;
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_OK);
	cr = (struct ucred){ .pid = 1, .uid = 0, .gid = 0 };
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_OK);
	cr = (struct ucred){ .pid = 4242, .uid = 1000, .gid = 1000 };
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_OK);
	cr.pid = 4243;
	assert_int_equal(saas__ctl_peer_check(&cr, &want), SAAS_EIO);

	/* For real: the VM's directory with the engine's record of its uid, 63000. */
	snprintf(vmdir, sizeof(vmdir), "%s/vm", t);
	snprintf(other, sizeof(other), "%s/other", t);
	assert_int_equal(mkdir(vmdir, 0711), 0);
	assert_int_equal(mkdir(other, 0711), 0);
	assert_true((dfd = open(vmdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	assert_int_equal(saas__vmdir_uid_write(dfd, 63000), SAAS_OK);
	close(dfd);
	/* A listener of the engine's own (libvirt in this process) is taken. */
	listen_as(vmdir, 0, &lfd);
	assert_int_equal(saas__ctl_connect(vmdir, &fd), SAAS_OK);
	close(fd);
	close(lfd);
	/* A symlink at the socket's name (to another VM's socket): refused, nothing connected. */
	listen_as(other, 0, &lfd);
	snprintf(path, sizeof(path), "%s/ctl", vmdir);
	snprintf(target, sizeof(target), "%s/ctl", other);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(saas__ctl_connect(vmdir, &fd), SAAS_EIO);
	assert_int_equal(fd, -1);
	assert_int_equal(unlink(path), 0);
	close(lfd);
	if (geteuid() == 0) {
		/* Another VM's QEMU (uid 63001) listening there: refused before a byte is sent. */
		pid = listen_as(vmdir, 63001, &lfd);
		assert_int_equal(saas__ctl_connect(vmdir, &fd), SAAS_EIO);
		assert_non_null(strstr(saas_error_last()->message, "uid 63001"));
		assert_int_equal(fd, -1);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(lfd);
		/* The VM's own QEMU: taken. */
		pid = listen_as(vmdir, 63000, &lfd);
		assert_int_equal(saas__ctl_connect(vmdir, &fd), SAAS_OK);
		close(fd);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(lfd);
	}
	/* A record that is not the engine's (a VM's uid wrote it): nothing is connected. */
	snprintf(path, sizeof(path), "%s/" VM_UID_FILE, vmdir);
	assert_int_equal(chown(path, 63000, 63000) == 0 || geteuid() != 0, true);
	if (geteuid() == 0) {
		listen_as(vmdir, 0, &lfd);
		assert_int_equal(saas__ctl_connect(vmdir, &fd), SAAS_EIO);
		close(lfd);
	}
	saas_test_rmdir(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_vmfs_disk_name),
		cmocka_unit_test(test_vmfs_disk_open),
		cmocka_unit_test(test_vmfs_rm_tree),
		cmocka_unit_test(test_control_peer),
		cmocka_unit_test(test_config_bare_uri),
		cmocka_unit_test(test_config_every_option),
		cmocka_unit_test(test_memory_room),
		cmocka_unit_test(test_config_bad_values),
		cmocka_unit_test(test_config_cpu_limit),
		cmocka_unit_test(test_config_remote),
		cmocka_unit_test(test_uri_remote),
		cmocka_unit_test(test_caps_cpu_virt),
		cmocka_unit_test(test_save_stream_offset),
		cmocka_unit_test(test_save_xml_len),
		cmocka_unit_test(test_tpl_volume_names),
		cmocka_unit_test(test_snap_volume_names),
		cmocka_unit_test(test_ram_block_in),
		cmocka_unit_test(test_config_uids),
		cmocka_unit_test(test_default_images_dir),
		cmocka_unit_test(test_qemu_conf),
		cmocka_unit_test(test_domain_cold),
		cmocka_unit_test(test_domain_remote),
		cmocka_unit_test(test_domain_clone),
		cmocka_unit_test(test_domain_initramfs_kvm),
		cmocka_unit_test(test_domain_confined),
		cmocka_unit_test(test_domain_limits),
		cmocka_unit_test(test_port_take_waits),
		cmocka_unit_test(test_port_quiet),
		cmocka_unit_test(test_domain_memory),
		cmocka_unit_test(test_limits_per_size),
		cmocka_unit_test(test_cgroup_v1_ours),
		cmocka_unit_test(test_cgroup_v1_machined),
		cmocka_unit_test(test_cgroup_cpuset_prime),
		cmocka_unit_test(test_cgroup_v2),
		cmocka_unit_test(test_domain_clone_matches_template),
		cmocka_unit_test(test_meta_round_trip),
		cmocka_unit_test(test_meta_incomplete),
		cmocka_unit_test(test_snapshot_names),
		cmocka_unit_test(test_disk_volume_name),
		cmocka_unit_test(test_snapshot_json),
		cmocka_unit_test(test_snapshot_old_format),
		cmocka_unit_test(test_snapshot_left),
		cmocka_unit_test(test_vmhost_chain_drop),
		cmocka_unit_test(test_template_vms_left),
		cmocka_unit_test(test_snapshot_unsplit),
		cmocka_unit_test(test_snapshot_ram_pending),
		cmocka_unit_test(test_stream_split),
		cmocka_unit_test(test_stream_split_runs),
		cmocka_unit_test(test_meta_network_rewrite),
		cmocka_unit_test(test_meta_spare_mark),
		cmocka_unit_test(test_meta_uid),
		cmocka_unit_test(test_uids_allocate_release),
		cmocka_unit_test(test_uids_exhausted),
		cmocka_unit_test(test_uids_adoption),
		cmocka_unit_test(test_uids_skip_running),
		cmocka_unit_test(test_images_staged),
		cmocka_unit_test(test_take_waits_for_spare_being_made),
		cmocka_unit_test(test_spares_follow_templates),
		cmocka_unit_test(test_asked_file_format),
		cmocka_unit_test(test_asked_at_open),
		cmocka_unit_test(test_asked_written),
		cmocka_unit_test(test_start_transient),
		cmocka_unit_test(test_vm_files_unprivileged),
		cmocka_unit_test(test_guard_ruleset),
		cmocka_unit_test(test_guard_ruleset_no_resolvers),
		cmocka_unit_test(test_host_prefixes6),
		cmocka_unit_test(test_guard_ruleset_host_prefixes),
		cmocka_unit_test(test_egress_names),
		cmocka_unit_test(test_egress_check),
		cmocka_unit_test(test_egress_ruleset),
		cmocka_unit_test(test_egress_refused),
		cmocka_unit_test(test_guard_refused_system),
		/* Last: these move the process into a network namespace of its own. */
		cmocka_unit_test(test_guard_reinstalled),
		cmocka_unit_test(test_guard_system),
		cmocka_unit_test(test_guard_blocks),
		cmocka_unit_test(test_guard_refuses),
		cmocka_unit_test(test_egress_loaded),
		cmocka_unit_test(test_egress_table_dropped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
