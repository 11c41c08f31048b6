/*
 * Images: a directory per image under the images directory, described by its
 * manifest.json (kernel, initramfs, optional disk, boot arguments, the
 * guest's pinned host key). A rebuilt image is noticed by its manifest's
 * mtime and reloaded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/libvirt/libvirt_driver.h"

void saas__lv_image_free(struct image *im)
{
	if (!im)
		return;
	free(im->dir);
	free(im->kernel);
	free(im->initrd);
	free(im->disk);
	free(im->boot_args);
	free(im->host_key);
	free(im->recipe);
	free(im);
}

static int image_load(struct drv *d, const char *name, struct image **out)
{
	struct image *im = NULL;
	json_t *root = NULL;
	json_error_t jerr;
	struct stat st;
	char *manifest = NULL;
	const char *s;
	int rc = SAAS_OK;

	if (!(im = calloc(1, sizeof(*im))))
		return saas__oom();
	saas__strlcpy(im->name, name, sizeof(im->name));
	if (!(im->dir = saas__lv_path_join(d->images, name)) || !(manifest = saas__lv_path_join(im->dir, "manifest.json"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (stat(manifest, &st) < 0) {
		/* The caller may be a tenant: the host's paths go to the operator's log only. */
		saas__lv_log(d, SAAS_LOG_WARN, "image '%s' is not built (no %s); build it with: images/build %s", name, manifest,
		             name);
		rc = saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, errno, "unknown image '%s'", name);
		goto out;
	}
	im->mtime = st.st_mtim;
	if (!(root = json_load_file(manifest, 0, &jerr))) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "%s: %s (line %d)", manifest, jerr.text,
		                 jerr.line);
		goto out;
	}
	if (!(s = json_string_value(json_object_get(root, "kernel"))) || !(im->kernel = saas__lv_path_join(im->dir, s)) ||
	    !(s = json_string_value(json_object_get(root, "initrd"))) || !(im->initrd = saas__lv_path_join(im->dir, s)) ||
	    !(s = json_string_value(json_object_get(root, "ssh_host_key"))) || !(im->host_key = saas__strdup(s)) ||
	    !(s = json_string_value(json_object_get(root, "boot_args"))) || !(im->boot_args = saas__strdup(s))) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
		                 "%s lacks kernel, initrd, ssh_host_key or boot_args", manifest);
		goto out;
	}
	{
		json_t *disk = json_object_get(root, "disk");
		if (json_is_object(disk) && (s = json_string_value(json_object_get(disk, "file"))) &&
		    !(im->disk = saas__lv_path_join(im->dir, s))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if (im->disk)
			im->disk_bytes = (uint64_t)json_integer_value(json_object_get(disk, "virtual_size"));
	}
	im->min_memory_mib = (unsigned int)json_integer_value(json_object_get(root, "min_memory_mib"));
	/* A rebuilt image must never restore an old template: key them by the recipe (or, lacking one, the build). */
	if ((s = json_string_value(json_object_get(root, "recipe_hash"))) ||
	    (s = json_string_value(json_object_get(root, "built_at"))))
		im->recipe = saas__strdup(s);
	else if (asprintf(&im->recipe, "mtime-%lld.%09ld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec) < 0)
		im->recipe = NULL;
	if (!im->recipe) {
		rc = saas__oom();
		goto out;
	}
	*out = im;
	im = NULL;
out:
	json_decref(root);
	free(manifest);
	saas__lv_image_free(im);
	return rc;
}

/*
 * An image by name, reloaded when its manifest changes (a rebuild). Caller
 * holds d->mu; the image stays valid until close (a replaced one is retired,
 * not freed: creates and template builds use it without the lock).
 */
int saas__lv_image_get(struct drv *d, const char *name, struct image **out)
{
	struct image **pp, *im = NULL;
	struct stat st;
	char *manifest;
	int rc;

	for (pp = &d->imgs; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->name, name) != 0)
			continue;
		if (!(manifest = saas__lv_path_join((*pp)->dir, "manifest.json")))
			return SAAS_ENOMEM;
		rc = stat(manifest, &st);
		free(manifest);
		if (rc == 0 && st.st_mtim.tv_sec == (*pp)->mtime.tv_sec && st.st_mtim.tv_nsec == (*pp)->mtime.tv_nsec) {
			*out = *pp;
			return SAAS_OK;
		}
		im = *pp;
		*pp = im->next;
		im->next = d->old_imgs;
		d->old_imgs = im;
		break;
	}
	if ((rc = image_load(d, name, &im)) < 0)
		return rc;
	im->next = d->imgs;
	d->imgs = im;
	*out = im;
	return SAAS_OK;
}
