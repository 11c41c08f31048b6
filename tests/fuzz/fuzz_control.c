/*
 * The control port's protocol read from hostile bytes, both ends: the
 * engine's reading of a guest's reply and of its lines during a file
 * transfer (lib/driver/libvirt/control.c, control_files.c: the bytes come
 * from inside a VM) and the guest's line reader and request parsers
 * (images/guest/aas-control.c, built without its main).
 *
 * Oracle: nothing is read or written outside the input (the sanitizers); a
 * reply is accepted only when it is exactly "ok NONCE\n"; a refusal's
 * message is printable ASCII and bounded; the guest's lines never pass
 * AAS_CONTROL_LINE_MAX - 1 bytes, and a request it takes has every field
 * within its bounds; a file line is taken only in one of its four forms,
 * with this nonce (or none, for an error), a size in range and a checksum of
 * 16 lowercase hex digits; a file request has its fields in their bounds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdlib.h>
#include <string.h>

#include "aas-control.h"
#include "driver/libvirt/control.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NONCE "0123456789abcdef"

static int on_line(const char *line, size_t len, bool overlong, void *ud)
{
	struct aas_fixup f;
	const char *why = NULL;

	(void)ud;
	if (len >= AAS_CONTROL_LINE_MAX || (overlong && len))
		abort();
	if (aas_control_parse(line, len, &f, &why) == 0) {
		size_t n = strlen(f.hostname);
		if (overlong || n < 1 || n > AAS_CONTROL_HOSTNAME_MAX || f.hostname[0] == '-' ||
		    strspn(f.hostname, "abcdefghijklmnopqrstuvwxyz0123456789-") != n || f.nanos < 0 ||
		    f.nanos > 999999999 || f.seconds < 0 || f.seconds > 999999999999LL ||
		    f.seed_len < AAS_CONTROL_SEED_MIN / 2 || f.seed_len > AAS_CONTROL_SEED_MAX / 2 ||
		    strlen(f.nonce) != AAS_CONTROL_NONCE_LEN)
			abort();
	} else if (!why) {
		abort();
	}
	{
		struct aas_file_req q;
		why = NULL;
		if (aas_files_parse(line, len, &q, &why) == 0) {
			if (overlong || strlen(q.nonce) != AAS_CONTROL_NONCE_LEN || q.kind < AAS_REQ_FILES ||
			    q.kind > AAS_REQ_GET || q.mode > 07777 || q.max < 0 || q.max > 999999999999999999LL ||
			    (q.kind != AAS_REQ_FILES && (q.path_len < 1 || q.path_len > AAS_FILES_PATH_MAX)))
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

	if (saas__lv_files_reply(in, size, NONCE, &r) == 0) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct aas_lines lines = { .len = 0 };
	size_t half = size / 2;

	/* The engine: the reply as it came. */
	if (saas__lv_control_reply(in, size, NONCE) == 0) {
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
	files_line(in, size);
	/* The guest: the bytes in two reads, split anywhere, then a host gone and back. */
	aas_lines_feed(&lines, in, half, on_line, NULL);
	aas_lines_feed(&lines, in + half, size - half, on_line, NULL);
	aas_lines_reset(&lines);
	aas_lines_feed(&lines, in, size, on_line, NULL);
	return 0;
}
