/*
 * The templates creates asked for, remembered in the state directory
 * (STATE/libvirt/asked.json), so that an engine that restarts (a deploy, a
 * crash, a reboot) starts VMs ahead for them from its open on. Without it,
 * spares go only to templates asked for since the driver opened: the first
 * create after a restart was a clone made whole, and a burst after it found
 * no spares however long the engine then sat idle.
 *
 * The file is the engine's, a hint and nothing more: read once at open with
 * a bound and never through a link, ignored with a line in the log when it
 * is anything but what this file writes (a template that is no longer the
 * current one, or not ready, is simply not revived: a rebuilt image has
 * another key, and a pruned template no files). It is written again only
 * when what it holds changes (a template new to it, a shape changed) or a
 * template's time in it is an hour old, by a spare thread (or close), never
 * by the create itself, and never under d->mu: a lost or torn write costs
 * the next start what it cost before this file.
 *
 * Not on a VM host: its templates are the host's, shared with the other
 * engines and replaced by whichever of them builds a newer one, and whether
 * one is there is a question to the host over the network, which its first
 * create asks anyway; the spares follow from that create as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "driver/libvirt/image.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/spare_asked.h"
#include "driver/libvirt/template.h"
#include "util/file.h"
#include "util/util.h"

/* What a shape in the file may say: beyond any size an engine offers, so that only nonsense is refused. */
#define ASKED_VCPUS_MAX 1024
#define ASKED_MEMORY_MB_MAX (16u << 20)
#define ASKED_DISK_GB_MAX (1u << 20)

/* One entry of the file, checked whole: 0, or -1 with why. */
static int asked_entry(struct saas__lv_asked *a, json_t *j, char *why, size_t whylen)
{
	const char *key = json_string_value(json_object_get(j, "key"));
	const char *image = json_string_value(json_object_get(j, "image"));
	json_t *vcpus = json_object_get(j, "vcpus"), *mem = json_object_get(j, "memory_mb");
	json_t *disk = json_object_get(j, "disk_gb"), *asked = json_object_get(j, "asked_ms");

	memset(a, 0, sizeof(*a));
	if (!json_is_object(j) || !key || strlen(key) != 32 || !saas__is_hex(key, 32)) {
		snprintf(why, whylen, "an entry without a template's key");
		return -1;
	}
	if (!image || !saas__valid_image(image)) {
		snprintf(why, whylen, "template %s: no image name", key);
		return -1;
	}
	if (!json_is_integer(vcpus) || json_integer_value(vcpus) < 1 || json_integer_value(vcpus) > ASKED_VCPUS_MAX ||
	    !json_is_integer(mem) || json_integer_value(mem) < 1 || json_integer_value(mem) > ASKED_MEMORY_MB_MAX ||
	    !json_is_integer(disk) || json_integer_value(disk) < 0 || json_integer_value(disk) > ASKED_DISK_GB_MAX) {
		snprintf(why, whylen, "template %s: no shape (vcpus, memory_mb, disk_gb)", key);
		return -1;
	}
	if (!json_is_integer(asked) || json_integer_value(asked) < 1) {
		snprintf(why, whylen, "template %s: no time asked (asked_ms)", key);
		return -1;
	}
	memcpy(a->key, key, 33);
	saas__strlcpy(a->image, image, sizeof(a->image));
	a->vcpus = (unsigned int)json_integer_value(vcpus);
	a->memory_mb = (unsigned int)json_integer_value(mem);
	a->disk_gb = (unsigned int)json_integer_value(disk);
	a->asked_ms = (int64_t)json_integer_value(asked);
	return 0;
}

int saas__lv_asked_parse(struct saas__lv_asked *out, size_t max, size_t *n, const char *text, char *why,
                         size_t whylen)
{
	json_error_t err;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err), *list = json_object_get(root, "templates");
	size_t i = 0;
	int rc = -1;

	*n = 0;
	if (!root)
		snprintf(why, whylen, "not JSON (%s, line %d)", err.text, err.line);
	else if (!json_is_object(root) || json_integer_value(json_object_get(root, "format")) != SPARE_ASKED_FORMAT ||
	         !json_is_array(list))
		snprintf(why, whylen, "not format %d (an object with a templates list)", SPARE_ASKED_FORMAT);
	else if (json_array_size(list) > max)
		snprintf(why, whylen, "%zu templates, over its bound of %zu", json_array_size(list), max);
	else
		for (rc = 0; rc == 0 && i < json_array_size(list); i++)
			rc = asked_entry(&out[i], json_array_get(list, i), why, whylen);
	if (rc == 0)
		*n = i;
	json_decref(root);
	return rc;
}

char *saas__lv_asked_format(const struct saas__lv_asked *in, size_t n)
{
	json_t *list = json_array(), *root = NULL;
	char *text = NULL;

	for (size_t i = 0; list && i < n; i++)
		if (json_array_append_new(list, json_pack("{s:s, s:s, s:i, s:i, s:i, s:I}", "key", in[i].key, "image",
		                                          in[i].image, "vcpus", (int)in[i].vcpus, "memory_mb",
		                                          (int)in[i].memory_mb, "disk_gb", (int)in[i].disk_gb, "asked_ms",
		                                          (json_int_t)in[i].asked_ms)) < 0) {
			json_decref(list);
			list = NULL;
		}
	if (list)
		root = json_pack("{s:i, s:o}", "format", SPARE_ASKED_FORMAT, "templates", list);
	if (root)
		text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return text;
}

/* Spares, templates, and this machine's (why not a VM host's: the top of this file). */
static bool asked_applies(struct drv *d)
{
	return d->templates && d->spare.ceiling && d->host->spares && !d->host->shared_templates;
}

/* A remembered template taken as asked for, if it is current and ready. Under d->mu. */
static bool asked_revive_locked(struct drv *d, const struct saas__lv_asked *a, int64_t now)
{
	saas_vm_spec shape = { .image = a->image, .vcpus = a->vcpus, .memory_mb = a->memory_mb, .disk_gb = a->disk_gb };
	struct image *im = NULL;
	struct tmpl *t = NULL;
	const char *not = NULL;
	char key[33] = "";

	if (now - a->asked_ms > SPARE_ASKED_KEEP_MS) {
		not = "asked for too long ago";
	} else if (saas__lv_image_get(d, a->image, &im) < 0) {
		not = "its image cannot be read";
		saas__error_clear();
	} else {
		saas__lv_template_key(d, &shape, im, key);
		if (strcmp(key, a->key) != 0)
			not = "no longer current (its image rebuilt, or this engine's key or accelerator changed)";
		else if (!(t = saas__lv_template_get_locked(d, key)))
			not = "out of memory";
		else if (t->state != TMPL_READY)
			not = "not ready (its files gone, or never finished)";
	}
	if (not) {
		saas__lv_log(d, SAAS_LOG_DEBUG, "template %s (%s, %u vCPU, %u MiB), asked for before this start: %s; "
		             "nothing is started ahead for it until a create asks for it", a->key, a->image, a->vcpus,
		             a->memory_mb, not);
		return false;
	}
	/* A time ahead of the clock (it was set back) is now: a create after this is still the later. */
	t->asked_ms = t->remembered_ms = a->asked_ms < now ? a->asked_ms : now;
	saas__strlcpy(t->image, a->image, sizeof(t->image));
	t->vcpus = a->vcpus;
	t->memory_mb = a->memory_mb;
	t->disk_gb = a->disk_gb;
	return true;
}

void saas__lv_asked_load(struct drv *d)
{
	struct saas__lv_asked *list = NULL;
	size_t n = 0, revived = 0;
	char *path = NULL, *text = NULL, why[256];
	int64_t now = saas__now_ms();

	if (!asked_applies(d))
		return;
	if (!(path = saas__lv_path_join(d->dir, SPARE_ASKED_FILE)) || !(list = calloc(SPARE_ASKED_MAX, sizeof(*list))))
		goto out;
	if (saas__file_read(&text, NULL, AT_FDCWD, path, SPARE_ASKED_FILE_MAX, SAAS__FILE_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			saas__lv_log(d, SAAS_LOG_WARN, "%s; ignored: VMs are started ahead for templates once creates ask for "
			             "them", saas_error_last()->message);
		goto out;
	}
	if (saas__lv_asked_parse(list, SPARE_ASKED_MAX, &n, text, why, sizeof(why)) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "%s: %s; ignored: VMs are started ahead for templates once creates ask for "
		             "them", path, why);
		goto out;
	}
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < n; i++)
		revived += asked_revive_locked(d, &list[i], now);
	/*
	 * A quiet spell (spare_idle) counts from the open, as from a create: an
	 * engine restarted and left idle gets the quiet floor. Not an ask: a
	 * create soon after the open is no burst nor a stream of two.
	 */
	if (revived)
		d->spare.quiet_from = now;
	pthread_mutex_unlock(&d->mu);
	if (n)
		saas__lv_log(d, SAAS_LOG_INFO, "%zu of the %zu templates creates asked for before this start (within %lld "
		             "days) are current and ready: VMs are started ahead for them from now on", revived, n,
		             SPARE_ASKED_KEEP_MS / (24 * 60 * 60 * 1000));
out:
	saas__error_clear();
	free(text);
	free(list);
	free(path);
}

void saas__lv_asked_note_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec, int64_t now)
{
	bool changed = !t->asked_ms || strcmp(t->image, spec->image) != 0 || t->vcpus != spec->vcpus ||
	               t->memory_mb != spec->memory_mb || t->disk_gb != spec->disk_gb;

	t->asked_ms = now;
	saas__strlcpy(t->image, spec->image, sizeof(t->image));
	t->vcpus = spec->vcpus;
	t->memory_mb = spec->memory_mb;
	t->disk_gb = spec->disk_gb;
	if (asked_applies(d) && (changed || now - t->remembered_ms >= SPARE_ASKED_REFRESH_MS))
		d->spare.asked_dirty = true;
}

/* t into list (n of at most SPARE_ASKED_MAX, the latest asked first), unless SPARE_ASKED_MAX later ones are in. */
static void asked_insert(struct saas__lv_asked *list, size_t *n, const struct tmpl *t)
{
	size_t at = 0;

	while (at < *n && list[at].asked_ms >= t->asked_ms)
		at++;
	if (at == SPARE_ASKED_MAX)
		return;
	if (*n < SPARE_ASKED_MAX)
		(*n)++;
	memmove(&list[at + 1], &list[at], (*n - 1 - at) * sizeof(list[0]));
	memcpy(list[at].key, t->key, sizeof(list[at].key));
	saas__strlcpy(list[at].image, t->image, sizeof(list[at].image));
	list[at].vcpus = t->vcpus;
	list[at].memory_mb = t->memory_mb;
	list[at].disk_gb = t->disk_gb;
	list[at].asked_ms = t->asked_ms;
}

void saas__lv_asked_write_locked(struct drv *d)
{
	struct saas__lv_asked list[SPARE_ASKED_MAX];
	size_t n = 0;
	int64_t now = saas__now_ms();
	char *text, *path;
	int rc;

	if (!d->spare.asked_dirty || d->spare.asked_writing)
		return;
	d->spare.asked_dirty = false;
	d->spare.asked_writing = true;
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (t->asked_ms && t->image[0] && now - t->asked_ms <= SPARE_ASKED_KEEP_MS)
			asked_insert(list, &n, t);
	pthread_mutex_unlock(&d->mu);
	text = saas__lv_asked_format(list, n);
	path = saas__lv_path_join(d->dir, SPARE_ASKED_FILE);
	/* No fsync: a hint, which a crash may cost, not worth a flush on the creates' disk. */
	rc = text && path ? saas__file_write_atomic(AT_FDCWD, path, text, strlen(text), 0600, 0) : saas__oom();
	if (rc < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "the templates creates asked for are not remembered for the next start: %s",
		             saas_error_last()->message);
	saas__error_clear();
	free(text);
	free(path);
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; rc == SAAS_OK && i < n; i++)
		for (struct tmpl *t = d->tmpls; t; t = t->next)
			if (strcmp(t->key, list[i].key) == 0)
				t->remembered_ms = list[i].asked_ms;
	d->spare.asked_writing = false;
}
