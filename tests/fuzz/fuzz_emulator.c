/*
 * The rewrite of libvirt's capabilities entry for the embedded root's QEMU
 * link (lib/driver/libvirt/emulator.c). The entry is libvirt's, written in
 * a root the engine owns, but its bytes are read as untrusted all the same:
 * any input, as the entry of /usr/bin/qemu-system-x86_64.
 *
 * Oracle: nothing read outside the input (the sanitizers); SAAS_OK or
 * SAAS_EINVAL; an output is NUL-terminated at its length, has one emulator,
 * the link, holds neither CPU flag, and is no longer than the input and the
 * two paths' difference.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdlib.h>
#include <string.h>

#include "driver/libvirt/emulator.h"
#include "saas/errors.h"

#define BINARY "/usr/bin/qemu-system-x86_64"
#define ALIAS "/run/aas-libvirt/0123456789abcdef/bin/qemu-system-x86_64"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t count(const char *s, size_t len, const char *needle)
{
	size_t n = 0, k = strlen(needle);

	for (const char *at = s; (at = memmem(at, len - (size_t)(at - s), needle, k)); at++)
		n++;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, *out = NULL;
	size_t out_len = 0;
	int rc;

	/* Its own allocation of exactly size bytes: a read past it is the sanitizer's to see. */
	if (!(copy = malloc(size ? size : 1)))
		return 0;
	memcpy(copy, data, size);
	rc = saas__lv_caps_for_alias(copy, size, BINARY, ALIAS, &out, &out_len);
	if (rc != SAAS_OK && rc != SAAS_EINVAL)
		abort();
	if (rc != SAAS_OK && out)
		abort();
	if (out) {
		if (out[out_len] != '\0' || strlen(out) != out_len || out_len > size + strlen(ALIAS) - strlen(BINARY))
			abort();
		if (count(out, out_len, "<emulator>" ALIAS "</emulator>") != 1 || count(out, out_len, "<emulator>") != 1)
			abort();
		if (count(out, out_len, "<flag name='cpu-unavailable-features'/>") ||
		    count(out, out_len, "<flag name='canonical-cpu-features'/>"))
			abort();
	}
	free(out);
	free(copy);
	return 0;
}
