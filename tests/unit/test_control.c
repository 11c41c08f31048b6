/*
 * The control port's protocol, both ends: the engine's request and its
 * reading of the guest's reply (lib/transport/control.c), and the
 * guest's parser and line reader (images/guest/aas-control.c, built here
 * without its main): a request the engine writes is one the guest takes,
 * every bound holds at its edge, garbage is refused. Then the pieces around
 * it: the channel in the domain XML exactly when the image serves the port,
 * the metadata and snapshot description that carry it to a restore, the
 * driver option.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver/libvirt/conf.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/snapshot.h"
#include "transport/control.h"
#include "transport/ssh.h"
#include "saas/errors.h"
#include "util/error.h"
#include "util/util.h"
#include "util/xxh64.h"

/* The guest's side: images/guest/aas-control.c, compiled into this test with AAS_CONTROL_NO_MAIN. */
#include "aas-control.h"

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
	n = saas__ctl_request(line, sizeof(line), NONCE, "sbx-abcdefghij0123456789", &now, SEED64);
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
		assert_int_equal(saas__ctl_request(line, sizeof(line), NONCE, big, &now, SEED64), SAAS_EINVAL);
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
	return saas__ctl_reply(text, strlen(text), NONCE);
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
	assert_int_equal(saas__ctl_reply(big, CONTROL_REPLY_MAX, NONCE), SAAS_EBACKEND);
	assert_true(strlen(saas_error_last()->message) < 60 + CONTROL_SAID_MAX);
	big[CONTROL_REPLY_MAX - 1] = 'w';
	big[CONTROL_REPLY_MAX] = '\n';
	assert_int_equal(saas__ctl_reply(big, CONTROL_REPLY_MAX + 1, NONCE), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered no line");
}

static int answer(const char *text, bool at_start, int *rc)
{
	return saas__ctl_fixup_answer(text, strlen(text), NONCE, at_start, rc);
}

/*
 * The fix-ups' answer after stale bytes: the rest of a paused command's
 * output frame comes first on the resume's connection. Only a line naming
 * this nonce is the answer, wherever it is; a nonce-less refusal only where
 * nothing came before it; anything else is waited past.
 */
static void test_fixup_answer(void **state)
{
	char big[3 * CONTROL_REPLY_MAX];
	int rc = 1;

	(void)state;
	assert_int_equal(answer("ok " NONCE "\n", true, &rc), 1);
	assert_int_equal(rc, SAAS_OK);
	/* After an output frame's rest with lines and no line end, and other answers' words. */
	{
		static const char stale[] = "y\ny\nok fedcba9876543210\nerror - x\ny\x01\x00\x00\x02yok " NONCE "\n";
		rc = 1;
		assert_int_equal(saas__ctl_fixup_answer(stale, sizeof(stale) - 1, NONCE, true, &rc), 1);
		assert_int_equal(rc, SAAS_OK);
	}
	/* Not yet: the answer cut short, another nonce, a nonce grown, output alone. */
	assert_int_equal(answer("y\nok " NONCE, true, &rc), 0);
	assert_int_equal(answer("ok fedcba9876543210\n", true, &rc), 0);
	assert_int_equal(answer("ok " NONCE "0\n", true, &rc), 0);
	assert_int_equal(answer("\xff\xfe garbage\n", true, &rc), 0);
	assert_int_equal(answer("", true, &rc), 0);
	/* A refusal naming the nonce, after stale bytes too, says why; once its line is whole. */
	assert_int_equal(answer("y\nerror " NONCE " bad hostn", true, &rc), 0);
	assert_int_equal(answer("y\nerror " NONCE "0 x\n", true, &rc), 0);
	assert_int_equal(answer("y\nerror " NONCE " bad hostname\n", false, &rc), 1);
	assert_int_equal(rc, SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port refused the fix-ups: bad hostname");
	assert_int_equal(answer("error " NONCE "\n", true, &rc), 1);
	assert_int_equal(rc, SAAS_EBACKEND);
	/* The helper's refusal of a line it could not read: only at the stream's start. */
	assert_int_equal(answer("error - line too long\n", true, &rc), 1);
	assert_int_equal(rc, SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "line too long"));
	assert_int_equal(answer("error - line too long\n", false, &rc), 0);
	assert_int_equal(answer("y\nerror - line too long\n", true, &rc), 0);
	/* A refusal with no line end within CONTROL_REPLY_MAX is no answer's line: refused as such. */
	memset(big, 'w', sizeof(big));
	memcpy(big, "error " NONCE " ", 7 + strlen(NONCE));
	assert_int_equal(saas__ctl_fixup_answer(big, CONTROL_REPLY_MAX - 1, NONCE, true, &rc), 0);
	assert_int_equal(saas__ctl_fixup_answer(big, CONTROL_REPLY_MAX, NONCE, true, &rc), 1);
	assert_int_equal(rc, SAAS_EBACKEND);
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
	assert_true(saas__ctl_fits(dir));
	dir[room] = 'd';
	dir[room + 1] = '\0';
	assert_false(saas__ctl_fits(dir));
	assert_true(saas__ctl_fits("/var/lib/aas/libvirt/vms/sbx-abcdefghij0123456789"));
}

/*
 * A driver's way that cannot open the port: the port is not used (SSH is),
 * nothing sent, the driver's words kept; and the VM not marked as without
 * the port, since a remote channel's open may fail for a while (its host
 * briefly gone, another engine holding it): its driver asks again.
 */
static int way_refuse(void *ud, int *fd);
static void test_way_refused(void **state)
{
	int opens = 0;
	const struct saas__ctl_way way = { .open = way_refuse, .ud = &opens };
	struct saas__ctl *ctl = NULL;
	saas_driver_exec req;
	int serves = 0, execs = 0, code = 0, cancel = 0;

	(void)state;
	memset(&req, 0, sizeof(req));
	req.command = "true";
	req.cwd = "/";
	req.cancel = &cancel;
	assert_int_equal(saas__ctl_exec(&ctl, &way, &serves, &execs, &req, &code), SAAS_ENOTSUP);
	assert_null(ctl);
	assert_int_equal(serves, 0);
	assert_int_equal(execs, 0);
	assert_int_equal(opens, 1);
	assert_non_null(strstr(saas_error_last()->message, "no control channel on the host"));
	/* Asked again at the next use. */
	assert_int_equal(saas__ctl_exec(&ctl, &way, &serves, &execs, &req, &code), SAAS_ENOTSUP);
	assert_int_equal(opens, 2);
	/* A VM's own socket that is not there: no port for good. */
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR("/nonexistent"), &serves, &execs, &req, &code), SAAS_ENOTSUP);
	assert_int_equal(serves, -1);
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
	/* A remote host's domain: the same channel, its socket named by libvirt there (channel.c opens it). */
	def.vmdir = NULL;
	assert_non_null(xml[0] = saas__lv_domain_xml(&def));
	assert_non_null(strstr(xml[0], "<channel type='unix'>\n      <source mode='bind'/>\n      <target type='virtio' "
	                               "name='org.libsaas.control.0'/>"));
	assert_null(strstr(xml[0], "path='"));
	assert_true(saas__lv_meta_control(xml[0]));
	free(xml[0]);
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

static int files_parse(const char *line, struct aas_file_req *q, const char **why)
{
	return aas_files_parse(line, strlen(line), q, why);
}

/* The file requests the engine writes (control_files.c's formats), as the guest reads them, and their bounds. */
static void test_files_request(void **state)
{
	struct aas_file_req q;
	const char *why = NULL;
	char line[CONTROL_LINE_MAX];

	(void)state;
	assert_int_equal(aas_request_kind("fixup " NONCE, 22), AAS_REQ_FIXUP);
	assert_int_equal(aas_request_kind("files " NONCE, 22), AAS_REQ_FILES);
	assert_int_equal(aas_request_kind("put", 3), AAS_REQ_PUT);
	assert_int_equal(aas_request_kind("get x", 5), AAS_REQ_GET);
	assert_int_equal(aas_request_kind("gets x", 6), -1);
	assert_int_equal(aas_request_kind("", 0), -1);
	assert_int_equal(aas_request_kind(" put", 4), -1);

	assert_int_equal(files_parse("files " NONCE, &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_FILES);
	assert_string_equal(q.nonce, NONCE);
	snprintf(line, sizeof(line), "put %s %o %zu", NONCE, 0755u, (size_t)CONTROL_FILES_PATH_MAX);
	assert_int_equal(files_parse(line, &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_PUT);
	assert_int_equal(q.mode, 0755);
	assert_int_equal(q.path_len, CONTROL_FILES_PATH_MAX);
	assert_int_equal(files_parse("put " NONCE " 7777 1", &q, &why), 0);
	assert_int_equal(q.mode, 07777);
	assert_int_equal(files_parse("put " NONCE " 0 1", &q, &why), 0);
	assert_int_equal(q.mode, 0);
	snprintf(line, sizeof(line), "get %s %lld %zu", NONCE, 999999999999999999LL, (size_t)12);
	assert_int_equal(files_parse(line, &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_GET);
	assert_true(q.max == 999999999999999999LL);
	assert_int_equal(q.path_len, 12);
	assert_int_equal(files_parse("get " NONCE " 0 1", &q, &why), 0);
	assert_true(q.max == 0);

	/* Each field one past its bound, or malformed. */
	assert_int_equal(files_parse("put " NONCE " 17777 1", &q, &why), -1);
	assert_string_equal(why, "bad mode");
	assert_string_equal(q.nonce, NONCE); /* the answer can name the request */
	assert_int_equal(files_parse("put " NONCE " 8 1", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644", &q, &why), -1);
	assert_string_equal(why, "bad path length");
	assert_int_equal(files_parse("put " NONCE " 644 0", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644 4097", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644 01", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644 1x", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644 1 ", &q, &why), -1);
	assert_int_equal(files_parse("put " NONCE " 644 1 2", &q, &why), -1);
	assert_string_equal(why, "trailing words");
	assert_int_equal(files_parse("get " NONCE " 1000000000000000000 1", &q, &why), -1);
	assert_string_equal(why, "bad bound");
	assert_int_equal(files_parse("get " NONCE " 01 1", &q, &why), -1);
	assert_int_equal(files_parse("get " NONCE " 1", &q, &why), -1);
	assert_int_equal(files_parse("get 0123456789abcdeg 0 1", &q, &why), -1);
	assert_string_equal(why, "bad nonce");
	assert_string_equal(q.nonce, "");
	assert_int_equal(files_parse("files " NONCE " x", &q, &why), -1);
	assert_int_equal(files_parse("files", &q, &why), -1);
	/* A fix-up is not a file request, and a fix-up's parser takes no file request. */
	assert_int_equal(files_parse("fixup " NONCE " h 12 " SEED64, &q, &why), -1);
	assert_string_equal(why, "not a request");
	{
		struct aas_fixup f;
		assert_int_equal(parse("put " NONCE " 644 1", &f, &why), -1);
	}
}

static int freply(const char *text, struct files_reply *r)
{
	return saas__ctl_files_reply(text, strlen(text), NONCE, r);
}

/* The guest's lines during a transfer, read as hostile bytes. */
static void test_files_reply(void **state)
{
	struct files_reply r;
	char big[CONTROL_REPLY_MAX + 8];

	(void)state;
	assert_int_equal(freply("ready " NONCE "\n", &r), SAAS_OK);
	assert_int_equal(r.kind, FILES_SAID_READY);
	assert_int_equal(freply("ok " NONCE "\n", &r), SAAS_OK);
	assert_int_equal(r.kind, FILES_SAID_OK);
	assert_string_equal(r.digest, "");
	assert_int_equal(freply("ok " NONCE " 0123456789abcdef\n", &r), SAAS_OK);
	assert_string_equal(r.digest, "0123456789abcdef");
	assert_int_equal(freply("size " NONCE " 0\n", &r), SAAS_OK);
	assert_int_equal(r.kind, FILES_SAID_SIZE);
	assert_true(r.size == 0);
	assert_int_equal(freply("size " NONCE " 999999999999999999\n", &r), SAAS_OK);
	assert_true(r.size == 999999999999999999LL);
	assert_int_equal(freply("error " NONCE " 2 reading: No such file or directory\n", &r), SAAS_OK);
	assert_int_equal(r.kind, FILES_SAID_ERROR);
	assert_int_equal(r.err, 2);
	assert_string_equal(r.what, "reading: No such file or directory");
	/* A helper that predates files refuses the request with no nonce and no errno. */
	assert_int_equal(freply("error - not a request\n", &r), SAAS_OK);
	assert_int_equal(r.err, 0);
	assert_string_equal(r.what, "not a request");
	assert_int_equal(freply("error " NONCE " 13 \x1b[31m\n", &r), SAAS_OK);
	assert_string_equal(r.what, "?[31m");

	/* Another nonce, a size too long or with a leading zero, an uppercase or short digest, a wrong verb. */
	assert_int_equal(freply("ready fedcba9876543210\n", &r), SAAS_EBACKEND);
	assert_int_equal(r.kind, 0);
	assert_int_equal(freply("error fedcba9876543210 2 x\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("size " NONCE " 1000000000000000000\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("size " NONCE " 01\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("size " NONCE " -1\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("size " NONCE " 1 2\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("size " NONCE "\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ok " NONCE " 0123456789ABCDEF\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ok " NONCE " 0001\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ok " NONCE " " SEED64 "\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ready " NONCE " 0123456789abcdef\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ready " NONCE "x\n", &r), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered 'ready " NONCE "x'");
	assert_int_equal(freply("readyx " NONCE "\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("ok " NONCE, &r), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port answered no line");
	assert_int_equal(freply("ok " NONCE "\nok " NONCE "\n", &r), SAAS_EBACKEND);
	assert_int_equal(freply("", &r), SAAS_EBACKEND);
	memset(big, 'w', sizeof(big));
	big[CONTROL_REPLY_MAX] = '\n';
	assert_int_equal(saas__ctl_files_reply(big, CONTROL_REPLY_MAX + 1, NONCE, &r), SAAS_EBACKEND);
	memcpy(big, "error - ", 8);
	big[CONTROL_REPLY_MAX - 1] = '\n';
	assert_int_equal(saas__ctl_files_reply(big, CONTROL_REPLY_MAX, NONCE, &r), SAAS_OK);
	assert_int_equal(strlen(r.what), CONTROL_SAID_MAX);
}

/* A guest's errno, as SFTP's statuses map (the same codes whichever way the file went). */
static void test_files_error(void **state)
{
	(void)state;
	assert_int_equal(saas__ctl_files_error(ENOENT, "x", "reading", "/a"), SAAS_ENOTFOUND);
	assert_string_equal(saas_error_last()->message, "reading /a: no such file or directory");
	assert_int_equal(saas__ctl_files_error(ENOTDIR, "x", "writing", "/a/b"), SAAS_ENOTFOUND);
	assert_int_equal(saas__ctl_files_error(EACCES, "x", "writing", "/root/a"), SAAS_EPERM);
	assert_string_equal(saas_error_last()->message, "writing /root/a: permission denied");
	assert_int_equal(saas__ctl_files_error(EPERM, "x", "writing", "/a"), SAAS_EPERM);
	assert_int_equal(saas__ctl_files_error(EROFS, "x", "writing", "/a"), SAAS_EPERM);
	assert_int_equal(saas__ctl_files_error(EISDIR, "x", "reading", "/tmp"), SAAS_EISDIR);
	assert_string_equal(saas_error_last()->message, "/tmp is a directory");
	assert_int_equal(saas__ctl_files_error(ENAMETOOLONG, "x", "writing", "/a"), SAAS_EINVAL);
	assert_int_equal(saas__ctl_files_error(ENOSPC, "x", "writing", "/a"), SAAS_EIO);
	assert_string_equal(saas_error_last()->message, "writing /a: no space left on the sandbox's disk");
	assert_int_equal(saas__ctl_files_error(EBADMSG, "the bytes' checksum does not match", "writing", "/a"), SAAS_EIO);
	assert_string_equal(saas_error_last()->message,
	                    "writing /a failed in the guest: the bytes' checksum does not match");
	assert_int_equal(saas__ctl_files_error(0, "", "writing", "/a"), SAAS_EIO);
	assert_string_equal(saas_error_last()->message, "writing /a failed in the guest: no reason given");
	assert_int_equal(saas__ctl_files_error(-5, NULL, "writing", "/a"), SAAS_EIO);
}

/* No socket where the VM's port would be: SFTP's turn, remembered, with nothing moved. */
static void test_files_no_port(void **state)
{
	char dir[] = "/tmp/aas-test-control-XXXXXX";
	struct saas__ctl *ctl = NULL;
	int serves = 0, calls = 0;
	int64_t size = -1;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(dir), &serves, "/etc/hostname", 0, NULL, &calls, &size, NULL), SAAS_ENOTSUP);
	assert_int_equal(serves, -1);
	assert_null(ctl);
	assert_true(size == -1);
	assert_int_equal(saas__ctl_files_write(&ctl, SAAS__CTL_DIR(dir), &serves, "/tmp/x", 0644, NULL, &calls, NULL), SAAS_ENOTSUP);
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR("/nonexistent"), &serves, "relative", 0, NULL, NULL, NULL, NULL),
	                 SAAS_EINVAL);
	rmdir(dir);
}

/*
 * The engine's end of file transfers against a scripted guest on the
 * port's socket: a get and a put as the protocol has them, a guest that
 * lies (a frame past the size it announced: the connection is dropped), the
 * next connection resynchronised through a guest still sending the rest of
 * an old transfer, a checksum that does not match, a helper that predates
 * files. What a real guest does is vm.control's.
 */
struct fake_guest {
	char dir[64];
	int lfd;
	int step;                      /* which script the next connection plays */
	int ok;                        /* the script's own checks passed */
	pthread_t tid;
};

/* One line from the engine into buf (without '\n'); false at EOF. */
static bool fake_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	char c;

	while (read(fd, &c, 1) == 1) {
		if (c == '\n') {
			buf[n] = '\0';
			return true;
		}
		if (n + 1 < cap)
			buf[n++] = c;
	}
	return false;
}

static bool fake_exact(int fd, void *buf, size_t n)
{
	char *b = buf;

	while (n) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

/* Count the zeros at the head of the stream; false once the first other byte is taken into *c (or the stream ended). */
static bool fake_zeros(int fd, size_t *zeros, unsigned char *c)
{
	unsigned char buf[64 * 1024];
	ssize_t r = recv(fd, buf, sizeof(buf), MSG_PEEK);
	size_t n = 0;

	if (r <= 0) {
		*c = 0;
		return false;
	}
	while (n < (size_t)r && buf[n] == 0)
		n++;
	*zeros += n;
	if (n == (size_t)r)
		return fake_exact(fd, buf, n);
	/* Take the zeros and the byte after them. */
	assert_true(fake_exact(fd, buf, n + 1));
	*c = buf[n];
	return false;
}

static void fake_say(int fd, const void *buf, size_t n)
{
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void fake_frame(int fd, const char *data, uint32_t len)
{
	unsigned char h[4] = { (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
		               (unsigned char)len };

	fake_say(fd, h, 4);
	if (len && len != CONTROL_FILES_FRAME_ABORT)
		fake_say(fd, data, len);
}

/* The engine's probe, "VERB NONCE" or "VERB NONCE 0" as the format says, answered "ok NONCE". */
static void fake_probe(int fd, const char *format)
{
	char line[128], nonce[17], out[64];

	assert_true(fake_line(fd, line, sizeof(line)));
	assert_int_equal(sscanf(line, format, nonce), 1);
	snprintf(out, sizeof(out), "ok %s\n", nonce);
	fake_say(fd, out, strlen(out));
}

/* A helper that predates `verb`: its files probe answered, then the verb's line refused as no request. */
static void fake_predates(int fd, const char *verb)
{
	char line[128];

	fake_probe(fd, "files %16s");
	assert_true(fake_line(fd, line, sizeof(line)));
	assert_int_equal(strncmp(line, verb, strlen(verb)), 0);
	assert_int_equal(line[strlen(verb)], ' ');
	fake_say(fd, "error - not a request\n", 22);
	assert_false(fake_line(fd, line, sizeof(line)));
}

/* The scripted guest's socket in a directory of its own (from template), served by main in a thread. */
static void fake_start(struct fake_guest *g, struct sockaddr_un *sa, const char *template, void *(*main)(void *))
{
	snprintf(g->dir, sizeof(g->dir), "%s", template);
	assert_non_null(mkdtemp(g->dir));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/" CONTROL_SOCKET, g->dir);
	assert_true((g->lfd = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(g->lfd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	assert_int_equal(listen(g->lfd, 4), 0);
	assert_int_equal(pthread_create(&g->tid, NULL, main, g), 0);
}

/* Its script played to the end, and its socket and directory gone. */
static void fake_stop(struct fake_guest *g, const struct sockaddr_un *sa)
{
	assert_int_equal(pthread_join(g->tid, NULL), 0);
	assert_int_equal(g->ok, 1);
	close(g->lfd);
	unlink(sa->sun_path);
	rmdir(g->dir);
}

/* A connection's script played: its socket closed; true after the last (the guest's checks passed). */
static bool fake_hang_up(struct fake_guest *g, int fd, bool last)
{
	close(fd);
	if (last)
		g->ok = 1;
	return last;
}

/*
 * saas__ctl_fixup against a guest whose port still carries a paused
 * command's output: its answer after 70 KiB of an output frame's rest (more
 * than the engine keeps), a refusal after stale bytes, the helper's refusal
 * of a line at once, and a guest that never answers (at the deadline).
 * Until 2026-12 the first line read was the answer: the stale bytes made the
 * resume's fix-ups go over SSH.
 */
static void *fake_fixup_main(void *arg)
{
	struct fake_guest *g = arg;
	char line[CONTROL_LINE_MAX + 1], nonce[17], out[80];
	static char stale[70 * 1024];
	int fd;

	for (size_t i = 0; i + 1 < sizeof(stale); i += 2)
		memcpy(stale + i, "y\n", 2);
	while ((fd = accept(g->lfd, NULL, NULL)) >= 0) {
		int step = g->step++;
		if (step < 2)
			fake_say(fd, stale, sizeof(stale));
		assert_true(fake_line(fd, line, sizeof(line)));
		assert_int_equal(sscanf(line, "fixup %16s", nonce), 1);
		/* An output frame's header first where there is one: its zeros too. */
		if (step == 0 || step == 3)
			fake_say(fd, "\x01\x00\x00\x05yyyyy", 9);
		if (step == 0)
			snprintf(out, sizeof(out), "ok %s\n", nonce);
		else if (step == 1)
			snprintf(out, sizeof(out), "y\nerror %s bad hostname\n", nonce);
		else if (step == 2)
			snprintf(out, sizeof(out), "error - line too long\n");
		else
			snprintf(out, sizeof(out), "y\n");
		fake_say(fd, out, strlen(out));
		assert_false(fake_line(fd, line, sizeof(line))); /* until the engine hangs up */
		if (fake_hang_up(g, fd, step == 3))
			break;
	}
	return NULL;
}

static void test_fixup_stale(void **state)
{
	struct fake_guest g = { .lfd = -1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *seed = "00112233445566778899aabbccddeeff";

	(void)state;
	fake_start(&g, &sa, "/tmp/aas-test-fixup-XXXXXX", fake_fixup_main);
	assert_int_equal(saas__ctl_fixup(SAAS__CTL_DIR(g.dir), "sbx-a", seed, 10000), SAAS_OK);
	assert_int_equal(saas__ctl_fixup(SAAS__CTL_DIR(g.dir), "sbx-a", seed, 10000), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "the guest's control port refused the fix-ups: bad hostname");
	assert_int_equal(saas__ctl_fixup(SAAS__CTL_DIR(g.dir), "sbx-a", seed, 10000), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "line too long"));
	assert_int_equal(saas__ctl_fixup(SAAS__CTL_DIR(g.dir), "sbx-a", seed, 300), SAAS_ETIMEOUT);
	fake_stop(&g, &sa);
}

/* Serve a get of `content` for the request line in `line` (its path read and checked), with `digest` to claim. */
static void fake_get(int fd, const char *line, const char *content, const char *digest)
{
	char nonce[17], path[64], out[160], hex[17];
	long long max;
	size_t plen;
	saas__xxh64_ctx sum;

	assert_int_equal(sscanf(line, "get %16s %lld %zu", nonce, &max, &plen), 3);
	assert_true(plen < sizeof(path));
	assert_true(fake_exact(fd, path, plen));
	snprintf(out, sizeof(out), "size %s %zu\n", nonce, strlen(content));
	fake_say(fd, out, strlen(out));
	fake_frame(fd, content, 4);
	fake_frame(fd, content + 4, (uint32_t)strlen(content) - 4);
	fake_frame(fd, NULL, 0);
	saas__xxh64_init(&sum, 0);
	saas__xxh64_update(&sum, content, strlen(content));
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)saas__xxh64_digest(&sum));
	snprintf(out, sizeof(out), "ok %s %s\n", nonce, digest ? digest : hex);
	fake_say(fd, out, strlen(out));
}

static void *fake_main(void *arg)
{
	struct fake_guest *g = arg;
	char line[512], nonce[17], out[160];
	int fd;

	while ((fd = accept(g->lfd, NULL, NULL)) >= 0) {
		int step = g->step++;
		if (step == 0) {
			/* A first connection: the probe, a get, a put, then a get that lies (the engine drops the connection). */
			unsigned char hdr[4], digest[8];
			saas__xxh64_ctx sum;
			uint64_t want;
			char path[64], data[64];
			size_t plen, got = 0;
			unsigned int mode;
			fake_probe(fd, "files %16s");
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_get(fd, line, "abcdefghij", NULL);
			assert_true(fake_line(fd, line, sizeof(line)));
			assert_int_equal(sscanf(line, "put %16s %o %zu", nonce, &mode, &plen), 3);
			assert_int_equal(mode, 0600);
			assert_true(fake_exact(fd, path, plen));
			assert_memory_equal(path, "/w/put.bin", plen);
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			for (;;) {
				uint32_t len;
				assert_true(fake_exact(fd, hdr, 4));
				len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
				if (!len)
					break;
				assert_true(got + len <= sizeof(data));
				assert_true(fake_exact(fd, data + got, len));
				got += len;
			}
			assert_true(fake_exact(fd, digest, 8));
			saas__xxh64_init(&sum, 0);
			saas__xxh64_update(&sum, data, got);
			want = saas__xxh64_digest(&sum);
			for (int i = 0; i < 8; i++)
				assert_int_equal(digest[i], (unsigned char)(want >> (56 - 8 * i)));
			assert_int_equal(got, 7);
			assert_memory_equal(data, "payload", 7);
			snprintf(out, sizeof(out), "ok %s\n", nonce);
			fake_say(fd, out, strlen(out));
			/* The lie: 3 bytes announced, 5 sent. */
			assert_true(fake_line(fd, line, sizeof(line)));
			assert_int_equal(sscanf(line, "get %16s", nonce), 1);
			assert_true(fake_exact(fd, path, 2));
			snprintf(out, sizeof(out), "size %s 3\n", nonce);
			fake_say(fd, out, strlen(out));
			/* The engine may hang up after the header: what is sent after it goes nowhere. */
			if (send(fd, "\0\0\0\00512345", 9, MSG_NOSIGNAL) < 0)
				line[0] = '\0';
			/* The engine hangs up. */
			assert_false(fake_line(fd, line, sizeof(line)));
		} else if (step == 1) {
			/*
			 * The next connection: the engine resynchronises. This guest is
			 * still sending an old get's frames, with a line that looks like
			 * an answer; it reads the zeros, the abort frame, then the probe.
			 */
			static char junk[200000];
			size_t zeros = 0;
			unsigned char c;
			memset(junk, 'j', sizeof(junk));
			memcpy(junk + 1000, "\nok 0000000000000000\n", 21);
			fake_say(fd, junk, sizeof(junk));
			/* A megabyte of zeros: counted a read at a time, not a byte at a time (valgrind's pace). */
			while (fake_zeros(fd, &zeros, &c))
				;
			assert_true(zeros >= CONTROL_FILES_FRAME_MAX + 4);
			assert_int_equal(c, 0xff);
			assert_true(fake_exact(fd, line, 3));
			assert_memory_equal(line, "\xff\xff\xff", 3);
			assert_true(fake_line(fd, line, sizeof(line))); /* the newline after the abort frame */
			assert_string_equal(line, "");
			assert_true(fake_line(fd, line, sizeof(line)));
			assert_int_equal(sscanf(line, "files %16s", nonce), 1);
			fake_say(fd, "error - line too long\n", 22);
			snprintf(out, sizeof(out), "ok %s\n", nonce);
			fake_say(fd, out, strlen(out));
			/* In step again: a get, then one whose digest is wrong (the stream stays whole). */
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_get(fd, line, "second file", NULL);
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_get(fd, line, "third file", "0000000000000000");
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_get(fd, line, "fourth", NULL);
			assert_false(fake_line(fd, line, sizeof(line)));
		} else {
			/* A helper that predates files. */
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_say(fd, "error - not a request\n", 22);
			assert_false(fake_line(fd, line, sizeof(line)));
		}
		close(fd);
		if (step == 2) {
			g->ok = 1;
			break;
		}
	}
	return NULL;
}

struct sink {
	char buf[64];
	size_t len;
};

static int sink_write(void *ud, const void *data, size_t size)
{
	struct sink *k = ud;

	assert_true(k->len + size < sizeof(k->buf));
	memcpy(k->buf + k->len, data, size);
	k->len += size;
	k->buf[k->len] = '\0';
	return 0;
}

static long payload_read(void *ud, void *buf, size_t size)
{
	int *calls = ud;

	(void)size;
	if ((*calls)++ == 0) {
		memcpy(buf, "pay", 3);
		return 3;
	}
	if (*calls == 2) {
		memcpy(buf, "load", 4);
		return 4;
	}
	return 0;
}

static void test_files_engine(void **state)
{
	struct fake_guest g = { .lfd = -1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct saas__ctl *ctl = NULL;
	struct sink k = { .len = 0 };
	int serves = 0, calls = 0;
	int64_t size = 0;

	(void)state;
	fake_start(&g, &sa, "/tmp/aas-test-files-XXXXXX", fake_main);

	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/a", 0, sink_write, &k, &size, NULL), SAAS_OK);
	assert_int_equal(serves, 1);
	assert_true(size == 10);
	assert_string_equal(k.buf, "abcdefghij");
	assert_int_equal(saas__ctl_files_write(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/put.bin", 0600, payload_read, &calls, NULL), SAAS_OK);
	/* The lie: the connection is given up. */
	k.len = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/x", 0, sink_write, &k, &size, NULL), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "a frame of 5 bytes with 3 of 3 left"));
	assert_null(ctl);
	/* Reconnected and resynchronised, through the rest of an old get and a fake answer. */
	k.len = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/b", 0, sink_write, &k, &size, NULL), SAAS_OK);
	assert_string_equal(k.buf, "second file");
	assert_non_null(ctl);
	k.len = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/c", 0, sink_write, &k, &size, NULL), SAAS_EIO);
	assert_string_equal(saas_error_last()->message, "reading /w/c: the bytes' checksum does not match the guest's");
	assert_non_null(ctl); /* the stream is whole: the connection stays */
	k.len = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/d", 0, sink_write, &k, &size, NULL), SAAS_OK);
	assert_string_equal(k.buf, "fourth");
	saas__ctl_close(ctl);
	ctl = NULL;
	/* A helper that predates files: SFTP's turn, at once, and remembered. */
	serves = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(g.dir), &serves, "/w/e", 0, sink_write, &k, &size, NULL), SAAS_ENOTSUP);
	assert_int_equal(serves, -1);
	assert_null(ctl);
	fake_stop(&g, &sa);
}

/* ---- commands over the port ---- */

/* The exec lines the engine writes (control_exec.c's), as the guest reads them, and their bounds. */
static void test_exec_request(void **state)
{
	struct aas_file_req q;
	const char *why = NULL;
	char line[CONTROL_LINE_MAX];

	(void)state;
	assert_int_equal(aas_request_kind("exec " NONCE " 0", 23), AAS_REQ_EXEC);
	assert_int_equal(aas_request_kind("execs", 5), -1);
	/* The probe: a length of 0. */
	assert_int_equal(files_parse("exec " NONCE " 0", &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_EXEC);
	assert_int_equal(q.path_len, 0);
	assert_string_equal(q.nonce, NONCE);
	snprintf(line, sizeof(line), "exec %s %d", NONCE, CONTROL_EXEC_SCRIPT_MAX);
	assert_int_equal(files_parse(line, &q, &why), 0);
	assert_int_equal(q.path_len, CONTROL_EXEC_SCRIPT_MAX);
	/* One past the bound, malformed, missing, trailing. */
	snprintf(line, sizeof(line), "exec %s %d", NONCE, CONTROL_EXEC_SCRIPT_MAX + 1);
	assert_int_equal(files_parse(line, &q, &why), -1);
	assert_string_equal(why, "bad script length");
	assert_string_equal(q.nonce, NONCE);
	assert_int_equal(files_parse("exec " NONCE " 00", &q, &why), -1);
	assert_int_equal(files_parse("exec " NONCE " -1", &q, &why), -1);
	assert_int_equal(files_parse("exec " NONCE, &q, &why), -1);
	assert_int_equal(files_parse("exec " NONCE " 5 5", &q, &why), -1);
	assert_string_equal(why, "trailing words");
	assert_int_equal(files_parse("exec 0123 5", &q, &why), -1);
	assert_string_equal(why, "bad nonce");
	/* Not a fix-up either. */
	{
		struct aas_fixup f;
		assert_int_equal(parse("exec " NONCE " 5", &f, &why), -1);
	}
}


/* ---- commands with no shell: the engine's classifier, the guest's request, ~/.bashrc and bash's environment ---- */

/* saas__exec_plain on command (cwd /workspace, env as given): its count, and its words joined by '|' into out. */
static int plain(const char *command, const char *const *env, char *out, size_t len)
{
	saas_driver_exec req;
	saas__buf w = SAAS__BUF_INIT;
	int n;

	memset(&req, 0, sizeof(req));
	req.command = command;
	req.cwd = "/workspace";
	req.env = env;
	n = saas__exec_plain(&w, &req);
	if (out) {
		out[0] = '\0';
		for (size_t i = 0; i < w.len; i += strlen(w.data + i) + 1)
			snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "|" : "", w.data + i);
	}
	if (n == 0)
		assert_int_equal(w.len, 0);
	saas__buf_free(&w);
	return n;
}

static void test_plain_commands(void **state)
{
	static const char *const refused[] = {
		"", " ", "\t", "echo hi", "ls $HOME", "ls ${HOME}", "ls `pwd`", "ls $(pwd)", "ls 'a b'", "ls \"a\"",
		"ls a\\ b", "ls *", "ls ?", "ls [ab]", "ls ~", "ls ~/x", "ls a=~", "A=1 ls", "ls > x", "ls < x", "ls >> x",
		"ls 2>&1", "ls | cat", "ls & ", "ls; ls", "ls && ls", "ls || ls", "(ls)", "{ ls; }", "ls # c", "ls\nls",
		"ls\r", "!ls", "ls !x", "ls ^x", "cd /", "export A=1", "exit 3", "pwd", "printf x", "test -e x", "[ -e x ]",
		"[[ x ]]", "source x", ". x", "eval ls", "exec ls", "kill 1", "read x", "time ls", "if", "for", "while",
		"function", "coproc", "true x", "false x", ": x", "%1", "%ls", "ls\x80", "caf\xc3\xa9", "ls é", "ls {a,b}",
		"ls a}", "ls (", "ls )", "ls ,\x01", "ls a\x7f",
	};
	static const char *const env_refused[][2] = {
		{ "BASH_FUNC_ls%%=() { echo no; }", NULL }, { "BASH_ENV=/x", NULL }, { "IFS=x", NULL }, { "LC_ALL=xx", NULL },
		{ "LANG=C", NULL }, { "POSIXLY_CORRECT=1", NULL }, { "_=x", NULL }, { "SHELLOPTS=x", NULL }, { "1A=x", NULL },
		{ "A-B=x", NULL }, { "=x", NULL }, { "A", NULL }, { "CDPATH=/", NULL }, { "PS4=x", NULL },
	};
	saas_driver_exec req;
	saas__buf w = SAAS__BUF_INIT;
	char out[512], big[SAAS_EXEC_PLAIN_MAX + 8];
	const char *many[SAAS_EXEC_PLAIN_ENV_MAX + 2];

	(void)state;
	assert_int_equal(plain("true", NULL, out, sizeof(out)), 1);
	assert_string_equal(out, "true");
	assert_int_equal(plain("  ls\t-la   /tmp ", NULL, out, sizeof(out)), 3);
	assert_string_equal(out, "ls|-la|/tmp");
	assert_int_equal(plain("false", NULL, out, sizeof(out)), 1);
	assert_int_equal(plain(":", NULL, out, sizeof(out)), 1);
	assert_int_equal(plain("python3 -c pass", NULL, out, sizeof(out)), 3);
	assert_int_equal(plain("/bin/echo a=b c,d e:f g@h 1%2 +x", NULL, out, sizeof(out)), 7);
	assert_int_equal(plain("./x.sh --flag=1", NULL, out, sizeof(out)), 2);
	assert_int_equal(plain("date +%s", NULL, out, sizeof(out)), 2);
	/* A builtin's name with a path is no builtin. */
	assert_int_equal(plain("/usr/bin/echo hi", NULL, out, sizeof(out)), 2);
	assert_int_equal(plain("/usr/bin/true x", NULL, out, sizeof(out)), 2);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (plain(refused[i], NULL, NULL, 0) != 0)
			fail_msg("plain: %s", refused[i]);
	for (size_t i = 0; i < sizeof(env_refused) / sizeof(env_refused[0]); i++)
		if (plain("ls", env_refused[i], NULL, 0) != 0)
			fail_msg("plain env: %s", env_refused[i][0]);
	{
		static const char *const ok[] = { "A=it's $x `y`", "PATH=/bin", "HOME=/h", "X_1=", NULL };
		assert_int_equal(plain("ls", ok, NULL, 0), 1);
	}
	for (int i = 0; i <= SAAS_EXEC_PLAIN_ENV_MAX; i++)
		many[i] = "A=1";
	many[SAAS_EXEC_PLAIN_ENV_MAX + 1] = NULL;
	assert_int_equal(plain("ls", many, NULL, 0), 0);
	many[SAAS_EXEC_PLAIN_ENV_MAX] = NULL;
	assert_int_equal(plain("ls", many, NULL, 0), 1);
	/* Every byte outside the words' set, anywhere in a word. */
	for (int c = 1; c < 256; c++) {
		char cmd[16];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-_./,:+@%=", c) ||
		          c == ' ' || c == '\t';
		snprintf(cmd, sizeof(cmd), "ls a%cb", c);
		if ((plain(cmd, NULL, NULL, 0) > 0) != ok)
			fail_msg("byte %d", c);
	}
	/* Long: at the bound, past it; too many words. */
	memset(big, 'a', sizeof(big));
	big[SAAS_EXEC_PLAIN_MAX] = '\0';
	assert_int_equal(plain(big, NULL, NULL, 0), 1);
	big[SAAS_EXEC_PLAIN_MAX] = 'a';
	big[SAAS_EXEC_PLAIN_MAX + 1] = '\0';
	assert_int_equal(plain(big, NULL, NULL, 0), 0);
	for (int i = 0; i < SAAS_EXEC_PLAIN_ARGS_MAX + 1; i++)
		memcpy(big + 2 * i, "a ", 2);
	big[2 * (SAAS_EXEC_PLAIN_ARGS_MAX + 1)] = '\0';
	assert_int_equal(plain(big, NULL, NULL, 0), 0);
	big[2 * SAAS_EXEC_PLAIN_ARGS_MAX] = '\0';
	assert_int_equal(plain(big, NULL, NULL, 0), SAAS_EXEC_PLAIN_ARGS_MAX);
	/* The directory: absolute and as cd names it, or the shell's. */
	memset(&req, 0, sizeof(req));
	req.command = "ls";
	{
		static const char *const dirs_ok[] = { "/", "/workspace", "/a b/c'd", "/.x/..y/x." };
		static const char *const dirs_no[] = { "", "w", "/w/", "/w//x", "//w", "/w/.", "/w/./x", "/w/..", "/../x" };
		req.cwd = NULL;
		assert_int_equal(saas__exec_plain(&w, &req), 1);
		for (size_t i = 0; i < sizeof(dirs_ok) / sizeof(*dirs_ok); i++) {
			req.cwd = dirs_ok[i];
			w.len = 0;
			assert_int_equal(saas__exec_plain(&w, &req), 1);
		}
		for (size_t i = 0; i < sizeof(dirs_no) / sizeof(*dirs_no); i++) {
			req.cwd = dirs_no[i];
			w.len = 0;
			if (saas__exec_plain(&w, &req) != 0)
				fail_msg("cwd %s", dirs_no[i]);
		}
	}
	saas__buf_free(&w);
}

/*
 * Which way a command goes (saas__exec_port_first): the port while the SSH
 * session is down, whatever the command; with it up, a plain command whose
 * helper runs it with no shell or was not asked yet (a cold boot's, a pooled
 * VM's whose session its boot made), never one for the shell, nor on a
 * helper that predates commands or runs every one through the shell.
 */
static void test_port_first(void **state)
{
	static const int execs_all[] = { -1, 0, 1, 2, 3 };
	saas_driver_exec req;

	(void)state;
	memset(&req, 0, sizeof(req));
	req.cwd = "/workspace";
	for (size_t i = 0; i < sizeof(execs_all) / sizeof(*execs_all); i++) {
		req.command = "echo $HOME";
		assert_true(saas__exec_port_first(&req, execs_all[i], false));
		req.command = "true";
		assert_true(saas__exec_port_first(&req, execs_all[i], false));
	}
	req.command = "true";
	assert_true(saas__exec_port_first(&req, 0, true));
	assert_true(saas__exec_port_first(&req, 1, true));
	assert_true(saas__exec_port_first(&req, 2, true));
	assert_false(saas__exec_port_first(&req, 3, true));
	assert_false(saas__exec_port_first(&req, -1, true));
	req.command = "ls -l /";
	assert_true(saas__exec_port_first(&req, 2, true));
	req.command = "echo $HOME";
	assert_false(saas__exec_port_first(&req, 2, true));
	req.command = "true | cat";
	assert_false(saas__exec_port_first(&req, 0, true));
	/* Plain words, but a directory the shell must name: the shell's, so SSH's. */
	req.command = "true";
	req.cwd = "/w/../x";
	assert_false(saas__exec_port_first(&req, 2, true));
}

static void test_run_request(void **state)
{
	struct aas_run r;
	struct aas_file_req q;
	const char *why = NULL;
	char b[256];

	(void)state;
	assert_int_equal(aas_request_kind("run " NONCE " 0", 22), AAS_REQ_RUN);
	assert_int_equal(files_parse("run " NONCE " 0", &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_RUN);
	assert_int_equal(q.path_len, 0);
	assert_int_equal(files_parse("run " NONCE " 17", &q, &why), 0);
	assert_int_equal(q.path_len, 17);
	memcpy(b, "S\0/w\0A=1\0B=\0\0ls\0-l\0", 19);
	assert_int_equal(aas_run_parse(b, 19, &r, &why), 0);
	assert_string_equal(r.script, "S");
	assert_string_equal(r.cwd, "/w");
	assert_int_equal(r.nenv, 2);
	assert_string_equal(r.env[1], "B=");
	assert_int_equal(r.argc, 2);
	assert_string_equal(r.argv[1], "-l");
	assert_null(r.argv[2]);
	memcpy(b, "S\0\0\0true\0", 9);
	assert_int_equal(aas_run_parse(b, 9, &r, &why), 0);
	assert_null(r.cwd);
	assert_int_equal(r.nenv, 0);
	assert_int_equal(r.argc, 1);
	/* Malformed: no final NUL, no script, a relative directory, no words, an empty word, a variable with no =. */
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0\0ls", 8), 8, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "\0/w\0\0ls\0", 8), 8, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0w\0\0ls\0", 8), 8, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0\0", 6), 6, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0", 5), 5, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0\0ls\0\0", 10), 10, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0A\0\0ls\0", 11), 11, &r, &why), -1);
	assert_int_equal(aas_run_parse(memcpy(b, "S\0/w\0=A\0\0ls\0", 12), 12, &r, &why), -1);
	assert_int_equal(aas_run_parse(b, 0, &r, &why), -1);
}

/* Debian's skeleton, as far as the helper looks at it. */
#define SKEL "# ~/.bashrc: executed by bash(1) for non-login shells.\n# c\n\n# If not\ncase $- in\n    *i*) ;;\n      *) return;;\nesac\n\nHISTSIZE=1\n"

static void test_bashrc(void **state)
{
	static const char skel[] = SKEL, with[] = AAS_BASHRC_HEADER SKEL;
	char path[300], buildpath[4096], *b;
	FILE *f;
	size_t n;

	(void)state;
	assert_int_equal(aas_bashrc_kind(NULL, 0, skel, strlen(skel)), 0);
	assert_int_equal(aas_bashrc_kind(skel, strlen(skel), skel, strlen(skel)), 0);
	assert_int_equal(aas_bashrc_kind(with, strlen(with), skel, strlen(skel)), 1);
	/* One byte more, less or other; a skeleton that does something first. */
	assert_int_equal(aas_bashrc_kind(skel, strlen(skel) - 1, skel, strlen(skel)), -1);
	assert_int_equal(aas_bashrc_kind(with, strlen(with) - 1, skel, strlen(skel)), -1);
	assert_int_equal(aas_bashrc_kind("export A=1\n", 11, skel, strlen(skel)), -1);
	assert_int_equal(aas_bashrc_kind(AAS_BASHRC_HEADER "export A=1\n" SKEL, strlen(with) + 11, skel, strlen(skel)), -1);
	assert_int_equal(aas_bashrc_kind("", 0, skel, strlen(skel)), -1);
	{
		static const char bad[] = "# c\nexport A=1\ncase $- in\n    *i*) ;;\n      *) return;;\nesac\n";
		assert_int_equal(aas_bashrc_kind(bad, strlen(bad), bad, strlen(bad)), -1);
		assert_int_equal(aas_bashrc_kind("", 0, "", 0), -1);
	}
	aas_bashrc_path(path, sizeof(path), "/home/s", "/usr/bin:/bin");
	assert_string_equal(path, "/home/s/.local/bin:/usr/bin:/bin");
	aas_bashrc_path(path, sizeof(path), "/home/s", "/bin:/home/s/.local/bin");
	assert_string_equal(path, "/bin:/home/s/.local/bin");
	/* This host's skeleton, where it has Debian's. */
	if ((f = fopen("/etc/skel/.bashrc", "r"))) {
		static char host[65536], rc[70000];
		n = fread(host, 1, sizeof(host), f);
		fclose(f);
		if (strstr(host, "*) return;;")) {
			assert_int_equal(aas_bashrc_kind(host, n, host, n), 0);
			memcpy(rc, AAS_BASHRC_HEADER, strlen(AAS_BASHRC_HEADER));
			memcpy(rc + strlen(AAS_BASHRC_HEADER), host, n);
			assert_int_equal(aas_bashrc_kind(rc, n + strlen(AAS_BASHRC_HEADER), host, n), 1);
		}
	}
	/* images/build writes the header the helper knows, line for line. */
	snprintf(buildpath, sizeof(buildpath), "%s/build", SAAS_IMAGES_DIR);
	assert_non_null(f = fopen(buildpath, "r"));
	assert_non_null(b = malloc(1 << 20));
	n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	for (const char *l = AAS_BASHRC_HEADER; *l;) {
		const char *nl = strchr(l, '\n');
		char want[300];
		snprintf(want, sizeof(want), "echo '%.*s'", (int)(nl - l), l);
		if (!strstr(b, want))
			fail_msg("images/build does not write: %s", want);
		l = nl + 1;
	}
	free(b);
}

/* What bash says of a command killed by a signal, as the helper says it for one run with no shell. */
static void test_signal_note(void **state)
{
	static const char *const argv[] = { "sleep", "100", NULL };
	char out[512];

	(void)state;
	assert_int_equal(aas_bash_signal_note(out, sizeof(out), SIGTERM, false, 42, argv), 11);
	assert_string_equal(out, "Terminated\n");
	aas_bash_signal_note(out, sizeof(out), SIGQUIT, true, 42, argv);
	assert_string_equal(out, "Quit (core dumped)\n");
	assert_int_equal(aas_bash_signal_note(out, sizeof(out), SIGINT, false, 42, argv), 0);
	assert_int_equal(aas_bash_signal_note(out, sizeof(out), SIGPIPE, false, 42, argv), 0);
	assert_string_equal(out, "");
	aas_bash_signal_note(out, sizeof(out), SIGKILL, false, 1234, argv);
	assert_string_equal(out, "bash: line 1:  1234 Killed                  sleep 100\n");
	aas_bash_signal_note(out, sizeof(out), SIGSEGV, true, 123456, argv);
	assert_string_equal(out, "bash: line 1: 123456 Segmentation fault      (core dumped) sleep 100\n");
	/* Cut, never past the buffer. */
	assert_int_equal(aas_bash_signal_note(out, 20, SIGKILL, false, 1, argv), 19);
	assert_int_equal(strlen(out), 19);
}

/* fn run in a child of this test's (its changes to the process stay there): what it returns, 0 when all held. */
static void in_child(int (*fn)(void))
{
	pid_t pid;
	int st;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int signals_default_child(void)
{
	/* The ones a shell's `&` ignores, and others a helper might (not the sanitizers' own: they keep theirs). */
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGHUP, SIGUSR1 };
	struct sigaction sa;
	int bad = 0;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_IGN);
	aas_signals_default();
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], NULL, &sa) != 0 || sa.sa_handler != SIG_DFL)
			bad = sigs[i];
	return bad;
}

/* A command's child starts with no signal ignored, whatever the helper got from aas-init's `&`. */
static void test_signals_default(void **state)
{
	(void)state;
	in_child(signals_default_child);
}

/*
 * The serve loop's read between requests (aas_serve_read): an idle port
 * says EAGAIN, whatever the reaping before it found. After a command the
 * helper has no child left, and a waitpid after the read put its ECHILD in
 * place of the EAGAIN: the loop took the idle port for a failed one and
 * slept a second, so the next request (every command's) waited for it.
 * In a child, so that it has no children but those made here.
 */
static int serve_read_child(void)
{
	char buf[512];
	siginfo_t si;
	pid_t k;
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0 || fcntl(sp[0], F_SETFL, O_NONBLOCK) < 0)
		return 10;
	/* No child at all, the port idle: the read's EAGAIN, which the loop polls on. */
	errno = 0;
	if (aas_serve_read(sp[0], buf, sizeof(buf), 0) != -1 || errno != EAGAIN)
		return 1;
	/* A child that ended: reaped, and still the read's EAGAIN. */
	if ((k = fork()) == 0)
		_exit(0);
	if (k < 0 || waitid(P_PID, (id_t)k, &si, WEXITED | WNOWAIT) < 0)
		return 11;
	errno = 0;
	if (aas_serve_read(sp[0], buf, sizeof(buf), 0) != -1 || errno != EAGAIN)
		return 2;
	if (waitpid(k, NULL, WNOHANG) != -1 || errno != ECHILD)
		return 3;
	/* A request: its bytes. */
	if (write(sp[1], "exec x 1\n", 9) != 9 || aas_serve_read(sp[0], buf, sizeof(buf), 0) != 9 ||
	    memcmp(buf, "exec x 1\n", 9) != 0)
		return 4;
	/* What a lost stream left in buf: its length, and the port is not read. */
	if (write(sp[1], "abc", 3) != 3 || aas_serve_read(sp[0], buf, sizeof(buf), 5) != 5 ||
	    read(sp[0], buf, sizeof(buf)) != 3)
		return 5;
	return 0;
}

static void test_serve_read(void **state)
{
	(void)state;
	in_child(serve_read_child);
}

/*
 * The environment against bash's own: the helper's six variables, a cd,
 * variables exported (some sharing a bucket of bash's table, some replacing
 * the helper's), then `env`, run by this host's bash where it has one.
 */
static void test_bash_env(void **state)
{
	static const char *const base[] = { "USER=sandbox", "LOGNAME=sandbox", "HOME=/", "PATH=/usr/bin:/bin",
		                            "MAIL=/var/mail/sandbox", "SHELL=/bin/bash" };
	/* SZ and IFR share a bucket, as do the two P... names below and HOME with nothing: the order within one counts. */
	static const char *const user[] = { "SZ=1", "IFR=2", "A=3", "ZZTOP=4", "HOME=/tmp", "K_1=5", "PWD=/x", "ab=6",
		                            "SHLVL=7", "Q=8", "SZ=9" };
	const char *vars[32], *out[34];
	char under[64], cmd[2048], got[4096], want[4096] = "";
	size_t n = 0, m;
	FILE *p;

	(void)state;
	if (access("/bin/bash", X_OK) != 0 || access("/usr/bin/env", X_OK) != 0)
		skip();
	for (size_t i = 0; i < 6; i++)
		vars[n++] = base[i];
	vars[n++] = "PWD=/usr";
	vars[n++] = "OLDPWD=/";
	vars[n++] = "SHLVL=1";
	for (size_t i = 0; i < sizeof(user) / sizeof(*user); i++)
		vars[n++] = user[i];
	m = aas_bash_env(vars, n, "/usr/bin/env", under, sizeof(under), out);
	assert_null(out[m]);
	for (size_t i = 0; i < m; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s\n", out[i]);
	snprintf(cmd, sizeof(cmd), "cd / && env -i");
	for (size_t i = 0; i < 6; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " '%s'", base[i]);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " /bin/bash -c \"cd -- '/usr' || exit 126; ");
	for (size_t i = 0; i < sizeof(user) / sizeof(*user); i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "export '%s'; ", user[i]);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "eval 'env'\"");
	assert_non_null(p = popen(cmd, "r"));
	n = fread(got, 1, sizeof(got) - 1, p);
	got[n] = '\0';
	pclose(p);
	assert_string_equal(got, want);
}

/* A frame from the scripted guest: a header of type and length, then the bytes. */
static void fake_xframe(int fd, unsigned int type, const void *data, uint32_t len)
{
	unsigned char h[4] = { (unsigned char)type, (unsigned char)(len >> 16), (unsigned char)(len >> 8),
		               (unsigned char)len };

	fake_say(fd, h, 4);
	if (data && len)
		fake_say(fd, data, len);
}

static void fake_xword(int fd, unsigned int type, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
		               (unsigned char)v };

	fake_xframe(fd, type, b, 4);
}

/* The engine's next frame: its type, its bytes into buf (cap), their count into *len. */
static unsigned int fake_xread(int fd, void *buf, size_t cap, size_t *len)
{
	unsigned char h[4];

	assert_true(fake_exact(fd, h, 4));
	*len = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	assert_true(*len <= cap);
	assert_true(fake_exact(fd, buf, *len));
	return h[0];
}

/* An exec line and its script: the nonce out, the script into a malloc()ed string. */
static char *fake_exec_line(int fd, char nonce[17])
{
	char line[128], *script;
	size_t len;

	assert_true(fake_line(fd, line, sizeof(line)));
	assert_int_equal(sscanf(line, "exec %16s %zu", nonce, &len), 2);
	assert_true(len > 0);
	assert_non_null(script = malloc(len + 1));
	assert_true(fake_exact(fd, script, len));
	script[len] = '\0';
	return script;
}

#define BIG_STDIN (CONTROL_EXEC_WINDOW + 50000)

static void *fake_exec_main(void *arg)
{
	struct fake_guest *g = arg;
	static unsigned char buf[CONTROL_EXEC_FRAME_MAX];
	char line[512], nonce[17], out[160], *script;
	size_t len, got;
	int fd;

	while ((fd = accept(g->lfd, NULL, NULL)) >= 0) {
		int step = g->step++;
		if (step == 0) {
			/* The probes, then a command with more stdin than the window. */
			fake_probe(fd, "files %16s");
			fake_probe(fd, "exec %16s 0");
			script = fake_exec_line(fd, nonce);
			/* The SSH wrapper's script without its markers. */
			assert_non_null(strstr(script, "cd -- '/w' || exit 126; export 'A=it'\\''s'; "));
			assert_non_null(strstr(script, "trap 'exit 143' TERM; "));
			assert_non_null(strstr(script, "eval 'cat; echo hi'"));
			assert_null(strstr(script, "aas-"));
			free(script);
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			/* A window's worth of stdin, and not a byte more until it is taken. */
			for (got = 0; got < CONTROL_EXEC_WINDOW;) {
				assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_IN);
				for (size_t i = 0; i < len; i++)
					assert_int_equal(buf[i], (unsigned char)((got + i) % 251));
				got += len;
			}
			assert_int_equal(got, CONTROL_EXEC_WINDOW);
			{
				struct pollfd p = { fd, POLLIN, 0 };
				assert_int_equal(poll(&p, 1, 300), 0);
			}
			fake_xword(fd, CTL_X_TOOK, CONTROL_EXEC_WINDOW);
			while (got < BIG_STDIN) {
				assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_IN);
				got += len;
			}
			assert_int_equal(got, BIG_STDIN);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_EOF);
			assert_int_equal(len, 0);
			fake_xword(fd, CTL_X_TOOK, BIG_STDIN - CONTROL_EXEC_WINDOW);
			fake_xframe(fd, CTL_X_OUT, "h", 1);
			fake_xframe(fd, CTL_X_OUT, "i\n", 2);
			fake_xframe(fd, CTL_X_ERR, "oops", 4);
			fake_xword(fd, CTL_X_EXIT, 3);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_END);
			fake_xframe(fd, CTL_X_DONE, NULL, 0);

			/* A command past its timeout: the engine kills it, ends it, and waits for DONE. */
			free(fake_exec_line(fd, nonce));
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_SIGNAL);
			assert_int_equal(len, 2);
			assert_int_equal(buf[0], 2);
			assert_int_equal(buf[1], 1);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_EOF);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_KILL);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_END);
			fake_xframe(fd, CTL_X_OUT, "late", 4);
			fake_xframe(fd, CTL_X_DONE, NULL, 0);

			/* A guest that lies: an output frame past the bound. The engine hangs up. */
			free(fake_exec_line(fd, nonce));
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			fake_xframe(fd, CTL_X_OUT, NULL, CONTROL_EXEC_FRAME_MAX + 1);
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		} else if (step == 1) {
			/* Resynchronised (the zeros, the abort frame, the probe), then a shell that cannot start. */
			unsigned char c;
			size_t zeros = 0;
			/* A megabyte of zeros: counted a read at a time, not a byte at a time (valgrind's pace). */
			while (fake_zeros(fd, &zeros, &c))
				;
			assert_true(zeros >= CONTROL_FILES_FRAME_MAX + 4);
			assert_true(fake_exact(fd, line, 3));
			assert_true(fake_line(fd, line, sizeof(line)));
			fake_probe(fd, "files %16s");
			free(fake_exec_line(fd, nonce));
			snprintf(out, sizeof(out), "error %s 12 starting the shell: Cannot allocate memory\n", nonce);
			fake_say(fd, out, strlen(out));
			assert_false(fake_line(fd, line, sizeof(line)));
		} else {
			/* A helper that predates commands: never sent a script. */
			fake_predates(fd, "exec");
		}
		close(fd);
		if (step == 2) {
			g->ok = 1;
			break;
		}
	}
	return NULL;
}

struct xout {
	char out[64], err[64];
	size_t nout, nerr;
	int signals;                   /* control: how many signals it gave */
};

static int xout_output(void *ud, int stream, const void *data, size_t len)
{
	struct xout *o = ud;
	char *b = stream == SAAS_STREAM_STDOUT ? o->out : o->err;
	size_t *n = stream == SAAS_STREAM_STDOUT ? &o->nout : &o->nerr;

	assert_true(*n + len < sizeof(o->out));
	memcpy(b + *n, data, len);
	*n += len;
	b[*n] = '\0';
	return 0;
}

static int xout_control(void *ud, int *group)
{
	struct xout *o = ud;

	*group = 1;
	return o->signals++ == 0 ? 2 : 0; /* one SIGINT to the group */
}

/*
 * The engine's end of commands against a scripted guest: the script it
 * sends, stdin within the window, output in frames that straddle reads, the
 * status; a timeout (KILL, END, then DONE awaited); a lying guest (the
 * connection dropped); a resynchronised connection and a shell that could not
 * start; a helper that predates commands (never sent a script). What a real
 * guest does is vm.exec.port's.
 */
/* A driver's way to the port (a remote host's channel): here a blocking connection to the fake guest's socket. */
static int way_connect(void *ud, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" CONTROL_SOCKET, (const char *)ud);
	if ((*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return SAAS_EIO;
	if (connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(*fd);
		*fd = -1;
		return SAAS_EIO;
	}
	return SAAS_OK;
}

/* A driver's ready: counted. */
static void way_ready(void *ud)
{
	++*(int *)ud;
}

static int way_refuse(void *ud, int *fd)
{
	++*(int *)ud;
	*fd = -1;
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "no control channel on the host");
}

static void test_exec_engine(void **state)
{
	static const char *const env[] = { "A=it's", NULL };
	struct fake_guest g = { .lfd = -1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct saas__ctl *ctl = NULL;
	saas_driver_exec req;
	struct xout o;
	unsigned char *in;
	int serves = 0, execs = 0, code = 0, cancel = 0, readies = 0;

	(void)state;
	fake_start(&g, &sa, "/tmp/aas-test-exec-XXXXXX", fake_exec_main);
	assert_non_null(in = malloc(BIG_STDIN));
	for (size_t i = 0; i < BIG_STDIN; i++)
		in[i] = (unsigned char)(i % 251);

	memset(&req, 0, sizeof(req));
	memset(&o, 0, sizeof(o));
	req.command = "cat; echo hi";
	req.cwd = "/w";
	req.env = env;
	req.stdin_data = in;
	req.stdin_len = BIG_STDIN;
	req.output = xout_output;
	req.output_userdata = &o;
	req.cancel = &cancel;
	{
		/* A remote channel refused a first time (another engine held it): the port is used once it opens. */
		int opens = 0;
		const struct saas__ctl_way refused = { .open = way_refuse, .ud = &opens };
		assert_int_equal(saas__ctl_exec(&ctl, &refused, &serves, &execs, &req, &code), SAAS_ENOTSUP);
		assert_int_equal(opens, 1);
	}
	{
		/*
		 * The way a driver gives (a remote host's channel): its connection
		 * made non-blocking, then the same bytes; its ready told once, when
		 * the guest said the command runs.
		 */
		const struct saas__ctl_way way = { .open = way_connect, .ud = g.dir, .ready = way_ready, .ready_ud = &readies };
		assert_int_equal(saas__ctl_exec(&ctl, &way, &serves, &execs, &req, &code), SAAS_OK);
		assert_true(fcntl(ctl->fd, F_GETFL) & O_NONBLOCK);
		assert_int_equal(readies, 1);
	}
	assert_int_equal(serves, 1);
	assert_int_equal(execs, 1);
	assert_int_equal(code, 3);
	assert_string_equal(o.out, "hi\n");
	assert_string_equal(o.err, "oops");

	/* Past its timeout, after a signal to its group. */
	memset(&o, 0, sizeof(o));
	req.stdin_data = NULL;
	req.stdin_len = 0;
	req.timeout_ms = 300;
	req.control = xout_control;
	req.control_userdata = &o;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(g.dir), &serves, &execs, &req, &code), SAAS_ETIMEOUT);
	assert_int_equal(code, -1);
	assert_non_null(strstr(saas_error_last()->message, "timeout of 300 ms"));
	assert_non_null(ctl); /* the stream is whole: the connection stays */
	req.control = NULL;

	/* The lie. */
	req.timeout_ms = 0;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(g.dir), &serves, &execs, &req, &code), SAAS_EIO);
	assert_non_null(strstr(saas_error_last()->message, "an output frame out of bounds"));
	assert_null(ctl);

	/* Resynchronised; the guest could not start the shell: no ready told. */
	{
		const struct saas__ctl_way way = { .vmdir = g.dir, .ready = way_ready, .ready_ud = &readies };
		assert_int_equal(saas__ctl_exec(&ctl, &way, &serves, &execs, &req, &code), SAAS_EIO);
		assert_int_equal(readies, 1);
	}
	assert_string_equal(saas_error_last()->message,
	                    "the command could not start in the guest: starting the shell: Cannot allocate memory");
	assert_non_null(ctl);
	saas__ctl_close(ctl);
	ctl = NULL;

	/*
	 * One past the script's bound (the variables make it 1 MiB + 1 byte):
	 * SSH's turn, before the port is asked anything.
	 */
	{
		static char big[CONTROL_EXEC_SCRIPT_MAX + 1];
		const char *const bigenv[] = { big, NULL };
		size_t fixed;
		saas__buf probe = SAAS__BUF_INIT;
		memcpy(big, "B=", 2);
		memset(big + 2, 'x', 8);
		big[10] = '\0';
		req.env = bigenv;
		assert_int_equal(saas__exec_script(&probe, &req), SAAS_OK);
		fixed = probe.len - 8; /* the script with an empty value */
		saas__buf_free(&probe);
		memset(big + 2, 'x', CONTROL_EXEC_SCRIPT_MAX + 1 - fixed);
		big[2 + CONTROL_EXEC_SCRIPT_MAX + 1 - fixed] = '\0';
		assert_int_equal(saas__exec_script(&probe, &req), SAAS_OK);
		assert_int_equal(probe.len, CONTROL_EXEC_SCRIPT_MAX + 1);
		saas__buf_free(&probe);
		assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(g.dir), &serves, &execs, &req, &code), SAAS_ENOTSUP);
		assert_null(ctl);
		assert_non_null(strstr(saas_error_last()->message, "longer than the control port takes"));
		req.env = NULL;
	}

	/* A helper that predates commands: SSH's turn, and remembered. */
	serves = execs = 0;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(g.dir), &serves, &execs, &req, &code), SAAS_ENOTSUP);
	assert_int_equal(execs, -1);
	saas__ctl_close(ctl);
	ctl = NULL;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(g.dir), &serves, &execs, &req, &code), SAAS_ENOTSUP);
	assert_null(ctl);

	fake_stop(&g, &sa);
	free(in);
}

/* ---- port connections over the port ---- */

/* The connect lines the engine writes (control_conn.c's), as the guest reads them, and their bounds. */
static void test_conn_request(void **state)
{
	struct aas_file_req q;
	const char *why = NULL;

	(void)state;
	assert_int_equal(aas_request_kind("connect " NONCE " 0", 26), AAS_REQ_CONNECT);
	assert_int_equal(aas_request_kind("connects", 8), -1);
	/* The probe: port 0. */
	assert_int_equal(files_parse("connect " NONCE " 0", &q, &why), 0);
	assert_int_equal(q.kind, AAS_REQ_CONNECT);
	assert_int_equal(q.port, 0);
	assert_string_equal(q.nonce, NONCE);
	assert_int_equal(files_parse("connect " NONCE " 49999", &q, &why), 0);
	assert_int_equal(q.port, 49999);
	assert_int_equal(files_parse("connect " NONCE " 65535", &q, &why), 0);
	assert_int_equal(q.port, 65535);
	/* One past the bound, malformed, an address (there is none to give), missing, trailing. */
	assert_int_equal(files_parse("connect " NONCE " 65536", &q, &why), -1);
	assert_string_equal(why, "bad port");
	assert_string_equal(q.nonce, NONCE);
	assert_int_equal(files_parse("connect " NONCE " 100000", &q, &why), -1);
	assert_int_equal(files_parse("connect " NONCE " 080", &q, &why), -1);
	assert_int_equal(files_parse("connect " NONCE " -1", &q, &why), -1);
	assert_int_equal(files_parse("connect " NONCE " 10.0.2.2:80", &q, &why), -1);
	assert_string_equal(why, "bad port");
	assert_int_equal(files_parse("connect " NONCE, &q, &why), -1);
	assert_int_equal(files_parse("connect " NONCE " 80 10.0.2.2", &q, &why), -1);
	assert_string_equal(why, "trailing words");
	assert_int_equal(files_parse("connect 0123 80", &q, &why), -1);
	assert_string_equal(why, "bad nonce");
}

/* A connect line: its nonce out, its port returned. */
static unsigned int fake_connect_line(int fd, char nonce[17])
{
	char line[128];
	unsigned int port;

	assert_true(fake_line(fd, line, sizeof(line)));
	assert_int_equal(sscanf(line, "connect %16s %u", nonce, &port), 2);
	return port;
}

static void *fake_conn_main(void *arg)
{
	struct fake_guest *g = arg;
	static unsigned char buf[CONTROL_EXEC_FRAME_MAX];
	char nonce[17], out[160];
	size_t len;
	int fd;

	while ((fd = accept(g->lfd, NULL, NULL)) >= 0) {
		int step = g->step++;
		if (step == 0) {
			fake_probe(fd, "files %16s");
			fake_probe(fd, "connect %16s 0");
			/* Nothing listens there. */
			assert_int_equal(fake_connect_line(fd, nonce), 8080);
			snprintf(out, sizeof(out), "error %s 111 connecting to port 8080: Connection refused\n", nonce);
			fake_say(fd, out, strlen(out));
			/* A request, its half-close, the answer and the port's end. */
			assert_int_equal(fake_connect_line(fd, nonce), 8080);
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_IN);
			assert_int_equal(len, 4);
			assert_memory_equal(buf, "GET\n", 4);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_EOF);
			fake_xword(fd, CTL_X_TOOK, 4);
			fake_xframe(fd, CTL_X_OUT, "hello", 5);
			fake_xframe(fd, CTL_X_OUT, " world", 6);
			fake_xword(fd, CTL_X_EXIT, 0);
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_END);
			fake_xframe(fd, CTL_X_DONE, NULL, 0);
			/* The caller's close: END at once, whatever the port still sends. */
			assert_int_equal(fake_connect_line(fd, nonce), 49999);
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			assert_int_equal(fake_xread(fd, buf, sizeof(buf), &len), CTL_X_END);
			fake_xframe(fd, CTL_X_OUT, "late", 4);
			fake_xframe(fd, CTL_X_DONE, NULL, 0);
			/* A guest that lies: more than a frame. The engine hangs up. */
			assert_int_equal(fake_connect_line(fd, nonce), 49999);
			snprintf(out, sizeof(out), "ready %s\n", nonce);
			fake_say(fd, out, strlen(out));
			fake_xframe(fd, CTL_X_OUT, NULL, CONTROL_EXEC_FRAME_MAX + 1);
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		} else {
			/* A helper that predates connections: asked once, never sent a port. */
			fake_predates(fd, "connect");
		}
		close(fd);
		if (step == 1) {
			g->ok = 1;
			break;
		}
	}
	return NULL;
}

/*
 * The engine's end of port connections against a scripted guest: a refused
 * port (SSH's words for it), a connection whose caller half-closes (EOF, then
 * the answer and the port's end reach the caller, and EOF), one whose caller
 * closes (END at once), a lying guest (the connection dropped), and a helper
 * that predates connections (SSH's turn, remembered). What a real guest does
 * is vm.exec.port's and vm.default_image's.
 */
static void test_conn_engine(void **state)
{
	struct fake_guest g = { .lfd = -1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct saas__ctl *ctl = NULL;
	int serves = 0, conns = 0, cancel = 0, sp[2];
	char got[64];
	ssize_t n;

	(void)state;
	fake_start(&g, &sa, "/tmp/aas-test-conn-XXXXXX", fake_conn_main);

	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 0, &cancel), SAAS_EINVAL);
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 8080, &cancel), SAAS_EBACKEND);
	assert_string_equal(saas_error_last()->message, "nothing listens on port 8080 in the sandbox");
	assert_int_equal(conns, 1);
	assert_non_null(ctl); /* refused before anything flowed: the port takes the next request */

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(send(sp[0], "GET\n", 4, 0), 4);
	assert_int_equal(shutdown(sp[0], SHUT_WR), 0);
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 8080, &cancel), SAAS_OK);
	assert_int_equal(saas__ctl_conn_pump(&ctl, sp[1], &cancel), SAAS_OK);
	assert_non_null(ctl);
	close(sp[1]);
	for (size_t off = 0; (n = recv(sp[0], got + off, sizeof(got) - 1 - off, 0)) > 0;)
		got[off += (size_t)n] = '\0';
	assert_int_equal(n, 0);
	assert_string_equal(got, "hello world");
	close(sp[0]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 49999, &cancel), SAAS_OK);
	close(sp[0]);
	assert_int_equal(saas__ctl_conn_pump(&ctl, sp[1], &cancel), SAAS_OK);
	assert_non_null(ctl);
	close(sp[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 49999, &cancel), SAAS_OK);
	assert_int_equal(saas__ctl_conn_pump(&ctl, sp[1], &cancel), SAAS_EIO);
	assert_non_null(strstr(saas_error_last()->message, "an output frame out of bounds"));
	assert_null(ctl);
	close(sp[0]);
	close(sp[1]);

	serves = conns = 0;
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 8080, &cancel), SAAS_ENOTSUP);
	assert_int_equal(conns, -1);
	assert_non_null(strstr(saas_error_last()->message, "predates port connections"));
	saas__ctl_close(ctl);
	ctl = NULL;
	assert_int_equal(saas__ctl_conn_open(&ctl, SAAS__CTL_DIR(g.dir), &serves, &conns, 8080, &cancel), SAAS_ENOTSUP);
	assert_null(ctl);

	fake_stop(&g, &sa);
}

/*
 * The bounds on what the guest makes the engine wait for: a guest that
 * trickles a get (a byte now and then, each well within the idle bound) is
 * given up once the guest's budget is spent, with a clear error, long before
 * it runs out of bytes to trickle; a command's probe that the guest never
 * answers ends at the caller's cancel, and at its timeout, with that error
 * and not a fall back to SSH; a transfer under way ends at the driver's
 * close (its cancel flag), whatever the guest's budget still allows.
 */
#define TRICKLE_MAX 400            /* bytes the trickling guest has; at 20 ms each, 8 s */

struct slow_guest {
	struct fake_guest g;
	int trickled;                  /* bytes the guest sent before the engine hung up */
	int cancel;                    /* the probe's and the transfer's flag, set by the guest once it saw them */
};

static void *slow_main(void *arg)
{
	struct slow_guest *s = arg;
	struct fake_guest *g = &s->g;
	char line[512], nonce[17], out[160], path[64];
	size_t plen;
	int fd;

	while ((fd = accept(g->lfd, NULL, NULL)) >= 0) {
		int step = g->step++;
		if (step == 0 || step == 3) {
			/* A get of a megabyte, trickled a byte at a time until the engine hangs up (the last: cancelled). */
			unsigned char h[4] = { 0, 0x10, 0, 0 };
			fake_probe(fd, "files %16s");
			assert_true(fake_line(fd, line, sizeof(line)));
			assert_int_equal(sscanf(line, "get %16s %*d %zu", nonce, &plen), 2);
			assert_true(plen < sizeof(path) && fake_exact(fd, path, plen));
			snprintf(out, sizeof(out), "size %s %d\n", nonce, 1 << 20);
			fake_say(fd, out, strlen(out));
			fake_say(fd, h, 4);
			for (s->trickled = 0; s->trickled < TRICKLE_MAX; s->trickled++) {
				struct pollfd p = { fd, POLLIN, 0 };
				if (step == 3 && s->trickled == 10)
					__atomic_store_n(&s->cancel, 1, __ATOMIC_SEQ_CST);
				if (send(fd, "x", 1, MSG_NOSIGNAL) != 1 || (poll(&p, 1, 20) > 0 && (p.revents & (POLLIN | POLLHUP))))
					break; /* the engine hung up */
			}
		} else {
			/* Commands: a probe never answered, once for a cancel, once for a timeout. */
			fake_probe(fd, "files %16s");
			assert_true(fake_line(fd, line, sizeof(line)));
			assert_int_equal(sscanf(line, "exec %16s 0", nonce), 1);
			if (step == 1)
				__atomic_store_n(&s->cancel, 1, __ATOMIC_SEQ_CST);
			assert_false(fake_line(fd, line, sizeof(line))); /* until the engine hangs up */
		}
		close(fd);
		if (step == 3) {
			g->ok = 1;
			break;
		}
	}
	return NULL;
}

static int discard_write(void *ud, const void *data, size_t size)
{
	(void)ud;
	(void)data;
	(void)size;
	return 0;
}

static void test_guest_bounds(void **state)
{
	struct slow_guest s = { .g = { .lfd = -1 } };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct saas__ctl *ctl = NULL;
	saas_driver_exec req;
	struct xout o;
	int serves = 0, execs = 0, code = 0;
	int64_t size = 0;

	(void)state;
	snprintf(s.g.dir, sizeof(s.g.dir), "/tmp/aas-test-slow-XXXXXX");
	assert_non_null(mkdtemp(s.g.dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" CONTROL_SOCKET, s.g.dir);
	assert_true((s.g.lfd = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(s.g.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s.g.lfd, 4), 0);
	assert_int_equal(pthread_create(&s.g.tid, NULL, slow_main, &s), 0);

	/* The trickle: the budget (shortened from its minute) is spent on a few bytes. */
	assert_int_equal(saas__ctl_get(&ctl, SAAS__CTL_DIR(s.g.dir), &serves), SAAS_OK);
	ctl->grace_ms = 300;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(s.g.dir), &serves, "/w/slow", 0, discard_write, NULL, &size, NULL),
	                 SAAS_ETIMEOUT);
	assert_non_null(strstr(saas_error_last()->message, "slower than the least it must (256 KiB/s after 0 s)"));
	assert_null(ctl); /* the stream is lost: the next use resynchronises */

	/* The probe of a command, cancelled while the guest says nothing: no SSH instead. */
	memset(&req, 0, sizeof(req));
	memset(&o, 0, sizeof(o));
	req.command = "true";
	req.cwd = "/w";
	req.output = xout_output;
	req.output_userdata = &o;
	req.cancel = &s.cancel;
	serves = 0;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(s.g.dir), &serves, &execs, &req, &code), SAAS_EIO);
	assert_string_equal(saas_error_last()->message, "cancelled: the engine is shutting down");
	assert_int_equal(execs, 0); /* not answered: asked again next time */
	assert_null(ctl);

	/* And at its timeout. */
	s.cancel = 0;
	serves = 0;
	req.timeout_ms = 300;
	assert_int_equal(saas__ctl_exec(&ctl, SAAS__CTL_DIR(s.g.dir), &serves, &execs, &req, &code), SAAS_ETIMEOUT);
	assert_string_equal(saas_error_last()->message, "the command's timeout of 300 ms passed before the guest started it");
	assert_int_equal(execs, 0);
	assert_null(ctl);

	/* A transfer under way, with a budget of a minute left: the driver's close ends it. */
	s.cancel = 0;
	serves = 0;
	assert_int_equal(saas__ctl_files_read(&ctl, SAAS__CTL_DIR(s.g.dir), &serves, "/w/slow", 0, discard_write, NULL, &size, &s.cancel),
	                 SAAS_EIO);
	assert_string_equal(saas_error_last()->message, "cancelled: the engine is shutting down");
	assert_null(ctl);

	assert_int_equal(pthread_join(s.g.tid, NULL), 0);
	assert_int_equal(s.g.ok, 1);
	/* The engine gave up, not the guest: it had bytes left to trickle. */
	assert_true(s.trickled < TRICKLE_MAX);
	close(s.g.lfd);
	unlink(sa.sun_path);
	rmdir(s.g.dir);
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
	assert_true(cfg.control_files);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_files=off"), SAAS_OK);
	assert_false(cfg.control_files);
	assert_true(cfg.control_port);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_files=1"), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "control_files must be on or off, not '1'");
	assert_int_equal(saas__lv_config_parse(&cfg, ""), SAAS_OK);
	assert_true(cfg.control_exec);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_exec=off"), SAAS_OK);
	assert_false(cfg.control_exec);
	assert_true(cfg.control_files);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "control_exec=no"), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "control_exec must be on or off, not 'no'");
	/* A spare's guest warmed before a take: on unless said off. */
	assert_int_equal(saas__lv_config_parse(&cfg, "control_exec=off"), SAAS_OK);
	assert_true(cfg.spare_warm);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spare_warm=off"), SAAS_OK);
	assert_false(cfg.spare_warm);
	assert_true(cfg.control_exec);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "spare_warm=maybe"), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "spare_warm must be on or off, not 'maybe'");
	/* libvirt reads a started guest's CPU by its feature words unless told otherwise (emulator.h). */
	assert_int_equal(saas__lv_config_parse(&cfg, NULL), SAAS_OK);
	assert_true(cfg.cpu_words);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "cpu_readback=properties"), SAAS_OK);
	assert_false(cfg.cpu_words);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "cpu_readback=properties,cpu_readback=words"), SAAS_OK);
	assert_true(cfg.cpu_words);
	saas__lv_config_clear(&cfg);
	assert_int_equal(saas__lv_config_parse(&cfg, "cpu_readback=fast"), SAAS_EINVAL);
	assert_string_equal(saas_error_last()->message, "cpu_readback must be words or properties, not 'fast'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_request_bounds),
		cmocka_unit_test(test_request_garbage),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_fixup_answer),
		cmocka_unit_test(test_fixup_stale),
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_domain_channel),
		cmocka_unit_test(test_way_refused),
		cmocka_unit_test(test_snapshot_control),
		cmocka_unit_test(test_files_request),
		cmocka_unit_test(test_files_reply),
		cmocka_unit_test(test_files_error),
		cmocka_unit_test(test_files_no_port),
		cmocka_unit_test(test_files_engine),
		cmocka_unit_test(test_exec_request),
		cmocka_unit_test(test_exec_engine),
		cmocka_unit_test(test_plain_commands),
		cmocka_unit_test(test_port_first),
		cmocka_unit_test(test_run_request),
		cmocka_unit_test(test_bashrc),
		cmocka_unit_test(test_bash_env),
		cmocka_unit_test(test_signals_default),
		cmocka_unit_test(test_serve_read),
		cmocka_unit_test(test_signal_note),
		cmocka_unit_test(test_conn_request),
		cmocka_unit_test(test_conn_engine),
		cmocka_unit_test(test_guest_bounds),
		cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
