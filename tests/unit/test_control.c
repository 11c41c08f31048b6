/*
 * The control port's protocol, both ends: the engine's request and its
 * reading of the guest's reply (lib/driver/libvirt/control.c), and the
 * guest's parser and line reader (images/guest/aas-control.c, built here
 * without its main): a request the engine writes is one the guest takes,
 * every bound holds at its edge, garbage is refused. Then the pieces around
 * it: the channel in the domain XML exactly when the image serves the port,
 * the metadata and snapshot description that carry it to a restore, the
 * driver option.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h>

#include "driver/libvirt/control.h"
#include "driver/libvirt/libvirt_driver.h"
#include "saas/errors.h"
#include "util/error.h"

/* The guest's side: images/guest/aas-control.c, compiled into this test with AAS_CONTROL_NO_MAIN. */
#include "aas-control.h"

/* Both ends read one protocol. */
_Static_assert(AAS_CONTROL_LINE_MAX == CONTROL_LINE_MAX, "the line bound differs between engine and guest");
_Static_assert(AAS_CONTROL_NONCE_LEN == CONTROL_NONCE_LEN, "the nonce differs between engine and guest");

#define NONCE "0123456789abcdef"
#define SEED64 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static int parse(const char *line, struct aas_fixup *f, const char **why)
{
	return aas_control_parse(line, strlen(line), f, why);
}

/* What the engine writes, the guest reads back field by field. */
static void test_request_round_trip(void **state)
{
	struct timespec now = { 1764660000, 123456789 };
	struct aas_fixup f;
	char line[CONTROL_LINE_MAX + 1];
	const char *why = NULL;
	int n;

	(void)state;
	n = saas__lv_control_request(line, sizeof(line), NONCE, "sbx-abcdefghij0123456789", &now, SEED64);
	assert_true(n > 0 && (size_t)n == strlen(line));
	assert_int_equal(line[n - 1], '\n');
	assert_int_equal(aas_control_parse(line, (size_t)n - 1, &f, &why), 0);
	assert_string_equal(f.nonce, NONCE);
	assert_string_equal(f.hostname, "sbx-abcdefghij0123456789");
	assert_int_equal(f.seconds, 1764660000);
	assert_int_equal(f.nanos, 123456789);
	assert_int_equal(f.seed_len, 32);
	assert_int_equal(f.seed[0], 0);
	assert_int_equal(f.seed[31], 0x1f);
	/* Nanoseconds of fewer digits are scaled; none at all is whole seconds (the SSH form). */
	assert_int_equal(parse("fixup " NONCE " h 12.5 " SEED64, &f, &why), 0);
	assert_int_equal(f.nanos, 500000000);
	assert_int_equal(parse("fixup " NONCE " h 12 " SEED64, &f, &why), 0);
	assert_int_equal(f.seconds, 12);
	assert_int_equal(f.nanos, 0);
	/* A hostname longer than the guest takes makes no request at all. */
	{
		char big[300];
		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		assert_int_equal(saas__lv_control_request(line, sizeof(line), NONCE, big, &now, SEED64), SAAS_EINVAL);
	}
}

/* Every field at its bound, and one past it. */
static void test_request_bounds(void **state)
{
	struct aas_fixup f;
	const char *why;
	char line[600], name[80], seed[200];

	(void)state;
	/* Hostname: 63 characters of [a-z0-9-], not starting with '-'. */
	memset(name, 'a', 63);
	name[63] = '\0';
	snprintf(line, sizeof(line), "fixup " NONCE " %s 1 " SEED64, name);
	assert_int_equal(parse(line, &f, &why), 0);
	name[63] = 'a';
	name[64] = '\0';
	snprintf(line, sizeof(line), "fixup " NONCE " %s 1 " SEED64, name);
	assert_int_equal(parse(line, &f, &why), -1);
	assert_string_equal(why, "bad hostname");
	assert_int_equal(parse("fixup " NONCE " -x 1 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " A 1 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " a.b 1 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " a/b 1 " SEED64, &f, &why), -1);
	/* Seconds: 1 to 12 digits; nanoseconds 1 to 9. */
	assert_int_equal(parse("fixup " NONCE " h 999999999999 " SEED64, &f, &why), 0);
	assert_int_equal(parse("fixup " NONCE " h 1000000000000 " SEED64, &f, &why), -1);
	assert_string_equal(why, "bad time");
	assert_int_equal(parse("fixup " NONCE " h 1.999999999 " SEED64, &f, &why), 0);
	assert_int_equal(f.nanos, 999999999);
	assert_int_equal(parse("fixup " NONCE " h 1.0000000000 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h 1. " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h .5 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h -1 " SEED64, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h 1e3 " SEED64, &f, &why), -1);
	/* Seed: 32 to 128 lowercase hex digits, an even count. */
	memset(seed, 'a', 128);
	seed[128] = '\0';
	snprintf(line, sizeof(line), "fixup " NONCE " h 1 %s", seed);
	assert_int_equal(parse(line, &f, &why), 0);
	assert_int_equal(f.seed_len, 64);
	seed[128] = 'a';
	seed[130] = '\0';
	seed[129] = 'a';
	snprintf(line, sizeof(line), "fixup " NONCE " h 1 %s", seed);
	assert_int_equal(parse(line, &f, &why), -1);
	seed[32] = '\0';
	snprintf(line, sizeof(line), "fixup " NONCE " h 1 %s", seed);
	assert_int_equal(parse(line, &f, &why), 0);
	seed[31] = '\0';
	snprintf(line, sizeof(line), "fixup " NONCE " h 1 %s", seed);
	assert_int_equal(parse(line, &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h 1 " SEED64 "A", &f, &why), -1);
	assert_int_equal(parse("fixup " NONCE " h 1 00000000000000000000000000000000G0", &f, &why), -1);
	/* The nonce: exactly 16 hex digits; kept for the answer once well formed, even when a later field is not. */
	assert_int_equal(parse("fixup 0123456789abcde h 1 " SEED64, &f, &why), -1);
	assert_string_equal(why, "bad nonce");
	assert_string_equal(f.nonce, "");
	assert_int_equal(parse("fixup " NONCE " -bad 1 " SEED64, &f, &why), -1);
	assert_string_equal(f.nonce, NONCE);
	/* A whole line: at most CONTROL_LINE_MAX - 1 bytes before its '\n'. */
	memset(line, 'x', sizeof(line));
	assert_int_equal(aas_control_parse(line, CONTROL_LINE_MAX, &f, &why), -1);
}

/* Garbage: other verbs, missing or extra words, doubled spaces, NUL bytes, empty lines. */
static void test_request_garbage(void **state)
{
	static const char *const bad[] = {
		"",
		"fixup",
		"fixup ",
		"FIXUP " NONCE " h 1 " SEED64,
		"fixupx " NONCE " h 1 " SEED64,
		"fixup " NONCE " h 1",
		"fixup " NONCE " h 1 " SEED64 " extra",
		"fixup " NONCE " h 1 " SEED64 " ",
		"fixup  " NONCE " h 1 " SEED64,
		"fixup " NONCE "  h 1 " SEED64,
		" fixup " NONCE " h 1 " SEED64,
		"fixup " NONCE " h\t1 " SEED64,
		"fixup " NONCE " h 1 " SEED64 "\r",
	};
	struct aas_fixup f;
	const char *why;
	char nul[128];
	int n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], &f, &why), -1);
		assert_non_null(why);
	}
	/* A NUL inside the line is a byte like any other: refused where it lands, not the end of the line. */
	n = snprintf(nul, sizeof(nul), "fixup " NONCE " h 1 " SEED64);
	nul[20] = '\0';
	assert_int_equal(aas_control_parse(nul, (size_t)n, &f, &why), -1);
}

struct seen {
	char lines[8][CONTROL_LINE_MAX];
	size_t lens[8];
	bool over[8];
	int n;
	int stop_after;               /* 0: never */
};

static int on_line(const char *line, size_t len, bool overlong, void *ud)
{
	struct seen *s = ud;

	assert_true(s->n < 8);
	memcpy(s->lines[s->n], line, len);
	s->lens[s->n] = len;
	s->over[s->n] = overlong;
	s->n++;
	return s->stop_after && s->n == s->stop_after;
}

/* The guest's line reader: lines split across reads, too long ones dropped whole, a reset drops a half line. */
static void test_lines(void **state)
{
	struct aas_lines r = { .len = 0 };
	struct seen s;
	char big[CONTROL_LINE_MAX * 3];

	(void)state;
	memset(&s, 0, sizeof(s));
	assert_int_equal(aas_lines_feed(&r, "ab", 2, on_line, &s), 2);
	assert_int_equal(s.n, 0);
	assert_int_equal(aas_lines_feed(&r, "c\nde\n\nf", 7, on_line, &s), 7);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.lens[0], 3);
	assert_memory_equal(s.lines[0], "abc", 3);
	assert_int_equal(s.lens[1], 2);
	assert_int_equal(s.lens[2], 0);
	/* The longest line kept is CONTROL_LINE_MAX - 1 bytes; one more and all of it is dropped, said once. */
	memset(&s, 0, sizeof(s));
	aas_lines_reset(&r);
	memset(big, 'x', sizeof(big));
	big[CONTROL_LINE_MAX - 1] = '\n';
	assert_int_equal(aas_lines_feed(&r, big, CONTROL_LINE_MAX, on_line, &s), CONTROL_LINE_MAX);
	assert_int_equal(s.n, 1);
	assert_false(s.over[0]);
	assert_int_equal(s.lens[0], CONTROL_LINE_MAX - 1);
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	assert_int_equal(aas_lines_feed(&r, big, sizeof(big), on_line, &s), sizeof(big));
	assert_int_equal(s.n, 2);
	assert_true(s.over[1]);
	assert_int_equal(s.lens[1], 0);
	/* And the line after it is whole again. */
	assert_int_equal(aas_lines_feed(&r, "ok\n", 3, on_line, &s), 3);
	assert_int_equal(s.n, 3);
	assert_false(s.over[2]);
	assert_int_equal(s.lens[2], 2);
	/* A half line from a host that went away is no request. */
	memset(&s, 0, sizeof(s));
	aas_lines_feed(&r, "fixup half", 10, on_line, &s);
	aas_lines_reset(&r);
	aas_lines_feed(&r, "x\n", 2, on_line, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.lens[0], 1);
	/* A callback that asks to stop leaves the rest of the bytes unread. */
	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	assert_int_equal(aas_lines_feed(&r, "a\nb\n", 4, on_line, &s), 2);
}

static int reply(const char *text)
{
	return saas__lv_control_reply(text, strlen(text), NONCE);
}

/* The guest's reply, read as hostile bytes. */
static void test_reply(void **state)
{
	char big[CONTROL_REPLY_MAX + 8];

	(void)state;
	assert_int_equal(reply("ok " NONCE "\n"), SAAS_OK);
	/* Another request's nonce, a nonce cut short or grown, no newline, more after it: no. */
	assert_int_equal(reply("ok fedcba9876543210\n"), SAAS_EBACKEND);
	assert_int_equal(reply("ok 0123456789abcde\n"), SAAS_EBACKEND);
	assert_int_equal(reply("ok " NONCE "0\n"), SAAS_EBACKEND);
	assert_int_equal(reply("ok " NONCE), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered no line");
	assert_int_equal(reply("ok " NONCE "\nok " NONCE "\n"), SAAS_EBACKEND);
	assert_int_equal(reply("\n"), SAAS_EBACKEND);
	assert_int_equal(reply(""), SAAS_EBACKEND);
	assert_int_equal(reply("OK " NONCE "\n"), SAAS_EBACKEND);
	/* A refusal says why, in printable characters only. */
	assert_int_equal(reply("error " NONCE " bad hostname\n"), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port refused the fix-ups: bad hostname");
	assert_int_equal(reply("error - line too long\n"), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "line too long"));
	assert_int_equal(reply("error " NONCE "\n"), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "no reason given"));
	assert_int_equal(reply("error x \x1b[31mred\x07\n"), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port refused the fix-ups: ?[31mred?");
	assert_int_equal(reply("\xff\xfe garbage\n"), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered '?? garbage'");
	/* Long words are cut to CONTROL_SAID_MAX; a reply past CONTROL_REPLY_MAX is no reply. */
	memset(big, 'w', sizeof(big));
	big[CONTROL_REPLY_MAX - 1] = '\n';
	assert_int_equal(saas__lv_control_reply(big, CONTROL_REPLY_MAX, NONCE), SAAS_EBACKEND);
	assert_true(strlen(saas_error_last()->message) < 60 + CONTROL_SAID_MAX);
	big[CONTROL_REPLY_MAX - 1] = 'w';
	big[CONTROL_REPLY_MAX] = '\n';
	assert_int_equal(saas__lv_control_reply(big, CONTROL_REPLY_MAX + 1, NONCE), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered no line");
}

/* The socket's path must fit a sockaddr_un: a VM directory too long has no port. */
static void test_fits(void **state)
{
	struct sockaddr_un sa;
	char dir[200];
	size_t room = sizeof(sa.sun_path) - 1 - strlen("/" CONTROL_SOCKET);

	(void)state;
	memset(dir, 'd', sizeof(dir));
	dir[0] = '/';
	dir[room] = '\0';
	assert_true(saas__lv_control_fits(dir));
	dir[room] = 'd';
	dir[room + 1] = '\0';
	assert_false(saas__lv_control_fits(dir));
	assert_true(saas__lv_control_fits("/var/lib/aas/libvirt/vms/sbx-abcdefghij0123456789"));
}

/* The channel is in the domain exactly when asked for, the same in a template and its clone; the metadata says so. */
static void test_domain_channel(void **state)
{
	struct image im;
	saas_vm_spec spec;
	struct saas__lv_domain def;
	char *xml[3];

	(void)state;
	memset(&im, 0, sizeof(im));
	snprintf(im.name, sizeof(im.name), "tiny");
	im.kernel = "/img/vmlinux";
	im.initrd = "/img/initrd.img";
	im.boot_args = "console=ttyS0";
	im.host_key = "ssh-ed25519 AAAA";
	memset(&spec, 0, sizeof(spec));
	spec.name = "sbx-abcdefghij0123456789";
	spec.vcpus = 1;
	spec.memory_mb = 512;
	memset(&def, 0, sizeof(def));
	def.spec = &spec;
	def.im = &im;
	def.owner = "/var/lib/aas";
	def.authkey_b64 = "a2V5";
	def.vmdir = "/var/lib/aas/libvirt/vms/sbx-abcdefghij0123456789";
	def.port = 40022;
	assert_non_null(xml[0] = saas__lv_domain_xml(&def));
	def.control = true;
	assert_non_null(xml[1] = saas__lv_domain_xml(&def));
	def.incoming = true;
	def.vmdir = "/var/lib/aas/libvirt/vms/sbx-0123456789abcdefghij";
	assert_non_null(xml[2] = saas__lv_domain_xml(&def));
	assert_null(strstr(xml[0], "<channel"));
	assert_false(saas__lv_meta_control(xml[0]));
	for (int i = 1; i < 3; i++) {
		assert_non_null(strstr(xml[i], "<channel type='unix'>"));
		assert_non_null(strstr(xml[i], "<target type='virtio' name='org.libsaas.control.0'/>"));
		assert_true(saas__lv_meta_control(xml[i]));
	}
	assert_non_null(
	        strstr(xml[1], "<source mode='bind' path='/var/lib/aas/libvirt/vms/sbx-abcdefghij0123456789/ctl'/>"));
	assert_non_null(
	        strstr(xml[2], "<source mode='bind' path='/var/lib/aas/libvirt/vms/sbx-0123456789abcdefghij/ctl'/>"));
	for (int i = 0; i < 3; i++)
		free(xml[i]);
}

/* A snapshot remembers the port (its restores need the same devices); one without says nothing, as before. */
static void test_snapshot_control(void **state)
{
	struct saas__lv_snapshot s, back;
	char *chain[] = { NULL }, *text;

	(void)state;
	memset(&s, 0, sizeof(s));
	snprintf(s.source, sizeof(s.source), "sbx-a");
	snprintf(s.image, sizeof(s.image), "tiny");
	s.host_key = "ssh-ed25519 AAAA";
	s.vcpus = 1;
	s.memory_mib = 512;
	snprintf(s.ram_block, sizeof(s.ram_block), "aas-mem");
	s.chain = chain;
	assert_non_null(text = saas__lv_snapshot_json(&s));
	assert_null(strstr(text, "control"));
	assert_int_equal(saas__lv_snapshot_parse(text, &back), SAAS_OK);
	assert_false(back.control);
	saas__lv_snapshot_clear(&back);
	free(text);
	s.control = true;
	assert_non_null(text = saas__lv_snapshot_json(&s));
	assert_int_equal(saas__lv_snapshot_parse(text, &back), SAAS_OK);
	assert_true(back.control);
	saas__lv_snapshot_clear(&back);
	free(text);
}

static void test_config(void **state)
{
	struct saas__lv_config cfg;

	(void)state;
	assert_int_equal(saas__lv_config_parse(&cfg, ""), SAAS_OK);
	assert_true(cfg.control_port);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_port=off"), SAAS_OK);
	assert_false(cfg.control_port);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_port=maybe"), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "control_port must be on or off, not 'maybe'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_request_bounds),
		cmocka_unit_test(test_request_garbage),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_domain_channel),
		cmocka_unit_test(test_snapshot_control),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
