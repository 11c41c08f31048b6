/*
 * The control port's protocol read from hostile bytes, both ends: the
 * engine's reading of a guest's reply and of its lines during a file
 * transfer (lib/transport/control.c, control_files.c: the bytes come
 * from inside a VM) and the guest's line reader and request parsers
 * (images/guest/aas-control.c, built without its main).
 *
 * Oracle: nothing is read or written outside the input (the sanitizers); a
 * reply is accepted only when it is exactly "ok NONCE\n"; a refusal's
 * message is printable ASCII and bounded; the guest's lines never pass
 * CONTROL_LINE_MAX - 1 bytes, and a request it takes has every field
 * within its bounds; a file line is taken only in one of its four forms,
 * with this nonce (or none, for an error), a size in range and a checksum of
 * 16 lowercase hex digits; a file request has its fields in their bounds.
 * A command's frames (control_exec.c) are taken the same whichever way the
 * bytes were cut into reads: the same output, the same status, the same end
 * or the same refusal; never a byte past the input, never an output frame
 * longer than the protocol's, never a status past 255. A disk path as QEMU
 * reports it (query-block: a VM's QEMU may lie) is taken only as one of the
 * VM's own names in its directory: disk.qcow2 or disk-SNAP.qcow2, no '/'.
 * A run's request (the guest's aas_run_parse) is taken only with a script,
 * an absolute directory or none, variables with '=' and 1 to
 * CONTROL_RUN_ARGS_MAX non-empty words, all within the input; the engine's
 * plain-command classifier (exec_plain.c) takes the bytes as a command only
 * as words of its set, never a shell's special character, and gives them
 * back as they were.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aas-control.h"
#include "transport/control.h"
#include "transport/ssh.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/vmfs.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NONCE "0123456789abcdef"

static int on_line(const char *line, size_t len, bool overlong, void *ud)
{
	struct aas_fixup f;
	const char *why = NULL;

	(void)ud;
	if (len >= CONTROL_LINE_MAX || (overlong && len))
		abort();
	if (aas_control_parse(line, len, &f, &why) == 0) {
		size_t n = strlen(f.hostname);
		if (overlong || n < 1 || n > CONTROL_HOSTNAME_MAX || f.hostname[0] == '-' ||
		    strspn(f.hostname, "abcdefghijklmnopqrstuvwxyz0123456789-") != n || f.nanos < 0 ||
		    f.nanos > 999999999 || f.seconds < 0 || f.seconds > 999999999999LL ||
		    f.seed_len < CONTROL_SEED_MIN / 2 || f.seed_len > CONTROL_SEED_MAX / 2 ||
		    strlen(f.nonce) != CONTROL_NONCE_LEN)
			abort();
	} else if (!why) {
		abort();
	}
	{
		struct aas_file_req q;
		why = NULL;
		if (aas_files_parse(line, len, &q, &why) == 0) {
			if (overlong || strlen(q.nonce) != CONTROL_NONCE_LEN || q.kind < AAS_REQ_FILES ||
			    q.kind > AAS_REQ_RUN || q.mode > 07777 || q.max < 0 || q.max > 999999999999999999LL ||
			    ((q.kind == AAS_REQ_PUT || q.kind == AAS_REQ_GET) &&
			     (q.path_len < 1 || q.path_len > CONTROL_FILES_PATH_MAX)) ||
			    ((q.kind == AAS_REQ_EXEC || q.kind == AAS_REQ_RUN) && q.path_len > CONTROL_EXEC_SCRIPT_MAX) ||
			    q.port > 65535 || (q.kind != AAS_REQ_CONNECT && q.port != 0))
				abort();
		} else if (!why) {
			abort();
		}
	}
	return 0;
}

/* The engine's reading of one line of a guest's during a file transfer. */
static void files_line(const char *in, size_t size)
{
	struct files_reply r;
	size_t n;

	if (saas__ctl_files_reply(in, size, NONCE, &r) == 0) {
		if (size > CONTROL_REPLY_MAX || in[size - 1] != '\n' || r.kind < FILES_SAID_READY || r.kind > FILES_SAID_ERROR ||
		    r.size < 0 || r.size > 999999999999999999LL || r.err < 0 || r.err > 9999)
			abort();
		n = strlen(r.digest);
		if ((n != 0 && n != 16) || strspn(r.digest, "0123456789abcdef") != n ||
		    (n && r.kind != FILES_SAID_OK))
			abort();
		n = strlen(r.what);
		if (n > CONTROL_SAID_MAX || (n && r.kind != FILES_SAID_ERROR))
			abort();
		for (size_t i = 0; i < n; i++)
			if (r.what[i] < 0x20 || r.what[i] > 0x7e)
				abort();
		if (r.kind != FILES_SAID_ERROR && !memmem(in, size, NONCE, strlen(NONCE)))
			abort();
	} else if (r.kind != 0 || strlen(saas_error_last()->message) > 80 + CONTROL_SAID_MAX) {
		abort();
	}
}

/* What a command's frames delivered: its output, in order, with the stream of each byte. */
struct xseen {
	unsigned char bytes[4096];
	size_t n;
};

static int xseen_output(void *ud, int stream, const void *data, size_t len)
{
	struct xseen *x = ud;

	if ((stream != SAAS_STREAM_STDOUT && stream != SAAS_STREAM_STDERR) || len == 0 || len > CONTROL_EXEC_FRAME_MAX)
		abort();
	for (size_t i = 0; i < len && x->n + 2 <= sizeof(x->bytes); i++) {
		x->bytes[x->n++] = (unsigned char)stream;
		x->bytes[x->n++] = ((const unsigned char *)data)[i];
	}
	return 0;
}

/* The bytes in reads cut at `cut` (what one read left untaken comes again first in the next): the taker's result. */
static long exec_run(const char *in, size_t size, size_t cut, struct saas__ctl_xread *r, struct xseen *seen)
{
	char *joined;
	long a, b;

	memset(r, 0, sizeof(*r));
	memset(seen, 0, sizeof(*seen));
	r->ahead = 1000;
	r->end_sent = size && (in[0] & 1);
	if ((a = saas__ctl_exec_take(r, in, cut, xseen_output, seen)) < 0)
		return a;
	if ((size_t)a > cut)
		abort();
	if (!(joined = malloc(size - (size_t)a + 1)))
		abort();
	memcpy(joined, in + a, size - (size_t)a);
	b = saas__ctl_exec_take(r, joined, size - (size_t)a, xseen_output, seen);
	free(joined);
	if (b >= 0 && (size_t)b > size - (size_t)a)
		abort();
	return b < 0 ? b : a + b;
}

/* A command's frames from the guest, cut into reads two ways. */
static void exec_frames(const char *in, size_t size)
{
	static struct xseen s1, s2;
	struct saas__ctl_xread r1, r2;
	long n1 = exec_run(in, size, size, &r1, &s1), n2 = exec_run(in, size, size / 2, &r2, &s2);

	if ((n1 < 0) != (n2 < 0) || (n1 >= 0 && n1 != n2))
		abort();
	if (n1 < 0)
		return;
	if (s1.n != s2.n || memcmp(s1.bytes, s2.bytes, s1.n) != 0 || r1.exited != r2.exited || r1.done != r2.done ||
	    r1.status != r2.status || r1.ahead != r2.ahead || r1.rleft != r2.rleft)
		abort();
	if (r1.status < 0 || r1.status > 255 || r1.ahead > 1000 || r1.rleft > CONTROL_EXEC_FRAME_MAX ||
	    (r1.done && !r1.end_sent) || (r1.done && (size_t)n1 < 4))
		abort();
}

#define VMDIR "/var/lib/aas/libvirt/vms/sbx-fuzz"

/* The input as the path QEMU names as the VM's disk. */
static void disk_name(const char *in, size_t size)
{
	char *path = strndup(in, size), name[NAME_MAX + 1];
	size_t n;

	if (!path)
		abort();
	if (saas__lv_vm_disk_name(VMDIR, path, name, sizeof(name))) {
		n = strlen(name);
		if (strchr(name, '/') || strncmp(path, VMDIR "/", strlen(VMDIR) + 1) != 0 ||
		    strcmp(path + strlen(VMDIR) + 1, name) != 0 ||
		    (strcmp(name, "disk.qcow2") != 0 &&
		     (n <= strlen("disk-.qcow2") || strncmp(name, "disk-", 5) != 0 || strcmp(name + n - 6, ".qcow2") != 0)))
			abort();
	}
	free(path);
}

/* The guest's reading of a run's request: every field inside the input, within its bounds. */
static void run_request(const char *in, size_t size)
{
	char *b = malloc(size + 1);
	struct aas_run r;
	const char *why;

	if (!b)
		return;
	memcpy(b, in, size);
	if (aas_run_parse(b, size, &r, &why) == 0) {
		if (!*r.script || (r.cwd && r.cwd[0] != '/') || r.argc < 1 || r.argc > CONTROL_RUN_ARGS_MAX ||
		    r.nenv > CONTROL_RUN_ENV_MAX || r.argv[r.argc])
			abort();
		for (size_t i = 0; i < r.nenv; i++)
			if (r.env[i] < b || r.env[i] >= b + size || !strchr(r.env[i], '='))
				abort();
		for (size_t i = 0; i < r.argc; i++)
			if (r.argv[i] < b || r.argv[i] >= b + size || !*r.argv[i])
				abort();
	}
	free(b);
}

/* The engine's plain-command classifier: the words it takes are the command's, none with a special character. */
static void plain_command(const char *in, size_t size)
{
	char *cmd = strndup(in, size);
	saas_driver_exec req;
	saas__buf w = SAAS__BUF_INIT;
	int n;

	if (!cmd)
		return;
	memset(&req, 0, sizeof(req));
	req.command = cmd;
	req.cwd = "/workspace";
	if ((n = saas__exec_plain(&w, &req)) > 0) {
		size_t off = 0;
		const char *p = cmd;
		for (int i = 0; i < n; i++) {
			size_t len = strlen(w.data + off);
			if (off + len >= w.len || len == 0 || strcspn(w.data + off, " \t\n$`'\"\\*?[]~{}()<>|&;#!^") != len)
				abort();
			p += strspn(p, " \t");
			if (strncmp(p, w.data + off, len) != 0)
				abort();
			p += len;
			off += len + 1;
		}
		if (off != w.len || p[strspn(p, " \t")] != '\0')
			abort();
	} else if (n < 0 || w.len != 0) {
		abort();
	}
	saas__buf_free(&w);
	free(cmd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct aas_lines lines = { .len = 0 };
	size_t half = size / 2;

	/* The engine: the reply as it came. */
	if (saas__ctl_reply(in, size, NONCE) == 0) {
		if (size != 3 + strlen(NONCE) + 1 || memcmp(in, "ok " NONCE "\n", size) != 0)
			abort();
	} else {
		const char *msg = saas_error_last()->message;
		size_t n = strlen(msg);
		if (n > 80 + CONTROL_SAID_MAX)
			abort();
		for (size_t i = 0; i < n; i++)
			if (msg[i] < 0x20 || msg[i] > 0x7e)
				abort();
	}
	/* The fix-ups' answer behind stale bytes: OK only where the stream holds "ok NONCE\n". */
	{
		int rc = 1;
		if (saas__ctl_fixup_answer(in, size, NONCE, (size & 1) != 0, &rc) == 1 && rc == 0 &&
		    !memmem(in, size, "ok " NONCE "\n", 4 + strlen(NONCE)))
			abort();
	}
	files_line(in, size);
	exec_frames(in, size);
	disk_name(in, size);
	run_request(in, size);
	plain_command(in, size);
	/* The guest: the bytes in two reads, split anywhere, then a host gone and back. */
	aas_lines_feed(&lines, in, half, on_line, NULL);
	aas_lines_feed(&lines, in + half, size - half, on_line, NULL);
	aas_lines_reset(&lines);
	aas_lines_feed(&lines, in, size, on_line, NULL);
	return 0;
}
