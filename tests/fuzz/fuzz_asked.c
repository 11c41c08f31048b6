/*
 * The templates creates asked for, as the libvirt driver reads them back at
 * its open (STATE/libvirt/asked.json, lib/driver/libvirt/spare_asked.c): the
 * file is the engine's own, but it is read as untrusted all the same. Any
 * input, as the file's text: the loader reads at most SPARE_ASKED_FILE_MAX
 * bytes and hands the parser a NUL-terminated text (a NUL inside ends it),
 * which this does too.
 *
 * Oracle: nothing read or written outside the input and the SPARE_ASKED_MAX
 * entries (the sanitizers; the entries are an allocation of exactly that
 * many); 0 or -1, and -1 leaves no entry and says why; what is accepted is
 * within the bounds, checked here again from the input's own JSON (at most
 * SPARE_ASKED_MAX templates, format 1, each key 32 lowercase hex digits,
 * each image a valid image name (saas__valid_image) and not cut, each shape
 * and time within its bound, each entry what the input says); and it is
 * written out (saas__lv_asked_format) and read again to the same entries,
 * the text written from those the same text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "driver/libvirt/spare_asked.h"
#include "util/util.h"

/* spare_asked.c's bounds on a shape (beyond any an engine offers): stated again here as the reference. */
#define VCPUS_MAX 1024
#define MEMORY_MB_MAX (16 << 20)
#define DISK_GB_MAX (1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const struct saas__lv_asked *a, json_t *j)
{
	json_int_t v;

	/* The record's own strings: NUL-terminated within their arrays. */
	if (strnlen(a->key, sizeof(a->key)) != 32 || !saas__is_hex(a->key, 32))
		abort();
	if (strnlen(a->image, sizeof(a->image)) == sizeof(a->image) || !saas__valid_image(a->image))
		abort();
	/* The input's entry said just that: nothing cut, nothing made up. */
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "key")) ||
	    strcmp(json_string_value(json_object_get(j, "key")), a->key) != 0 ||
	    !json_is_string(json_object_get(j, "image")) ||
	    strcmp(json_string_value(json_object_get(j, "image")), a->image) != 0)
		abort();
	v = json_integer_value(json_object_get(j, "vcpus"));
	if (!json_is_integer(json_object_get(j, "vcpus")) || v < 1 || v > VCPUS_MAX || (json_int_t)a->vcpus != v)
		abort();
	v = json_integer_value(json_object_get(j, "memory_mb"));
	if (!json_is_integer(json_object_get(j, "memory_mb")) || v < 1 || v > MEMORY_MB_MAX ||
	    (json_int_t)a->memory_mb != v)
		abort();
	v = json_integer_value(json_object_get(j, "disk_gb"));
	if (!json_is_integer(json_object_get(j, "disk_gb")) || v < 0 || v > DISK_GB_MAX || (json_int_t)a->disk_gb != v)
		abort();
	v = json_integer_value(json_object_get(j, "asked_ms"));
	if (!json_is_integer(json_object_get(j, "asked_ms")) || v < 1 || (json_int_t)a->asked_ms != v)
		abort();
}

static bool same(const struct saas__lv_asked *a, const struct saas__lv_asked *b)
{
	return strcmp(a->key, b->key) == 0 && strcmp(a->image, b->image) == 0 && a->vcpus == b->vcpus &&
	       a->memory_mb == b->memory_mb && a->disk_gb == b->disk_gb && a->asked_ms == b->asked_ms;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct saas__lv_asked *out, *again;
	char *text, *written = NULL, *rewritten = NULL, why[256];
	size_t n = 99, n2 = 99;
	json_t *root, *list;
	int rc;

	/* The loader's bound: a bigger file is refused before the parser sees it. */
	if (size > SPARE_ASKED_FILE_MAX)
		return 0;
	/* Exactly as many as the bound, and the text exactly its bytes and a NUL: an overrun is the sanitizers'. */
	if (!(out = malloc(SPARE_ASKED_MAX * sizeof(*out))) || !(again = malloc(SPARE_ASKED_MAX * sizeof(*again))) ||
	    !(text = malloc(size + 1)))
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	why[0] = '\0';
	rc = saas__lv_asked_parse(out, SPARE_ASKED_MAX, &n, text, why, sizeof(why));
	if (rc != 0 && rc != -1)
		abort();
	if (strnlen(why, sizeof(why)) == sizeof(why))
		abort();
	if (rc == -1) {
		if (n != 0 || !why[0])
			abort();
		goto out;
	}
	if (n > SPARE_ASKED_MAX)
		abort();
	/* The reference: the input's own JSON, read here, holds the same templates, within the bounds. */
	root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	list = json_object_get(root, "templates");
	if (!json_is_object(root) || !json_is_integer(json_object_get(root, "format")) ||
	    json_integer_value(json_object_get(root, "format")) != SPARE_ASKED_FORMAT || !json_is_array(list) ||
	    json_array_size(list) != n)
		abort();
	for (size_t i = 0; i < n; i++)
		check_entry(&out[i], json_array_get(list, i));
	json_decref(root);
	/* Written back and read again: the same entries, and written again the same text. */
	if (!(written = saas__lv_asked_format(out, n)))
		abort(); /* out of memory is not a fuzzer's input: none is expected */
	if (strlen(written) > SPARE_ASKED_FILE_MAX) {
		/*
		 * What the driver writes of at most SPARE_ASKED_MAX entries must fit
		 * the bound its reader keeps, or a full file would be lost at the
		 * next open.
		 */
		fprintf(stderr, "asked.json of %zu entries written in %zu bytes, over %d\n", n, strlen(written),
		        SPARE_ASKED_FILE_MAX);
		abort();
	}
	if (saas__lv_asked_parse(again, SPARE_ASKED_MAX, &n2, written, why, sizeof(why)) != 0 || n2 != n)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!same(&out[i], &again[i]))
			abort();
	if (!(rewritten = saas__lv_asked_format(again, n2)) || strcmp(written, rewritten) != 0)
		abort();
out:
	free(rewritten);
	free(written);
	free(text);
	free(again);
	free(out);
	return 0;
}
