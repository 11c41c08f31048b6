/*
 * Images: a directory per image under the images directory, described by its
 * manifest.json (kernel, initramfs, optional disk, boot arguments, the
 * guest's pinned host key). A rebuilt image is noticed by its manifest's
 * mtime and reloaded.
 *
 * Confined QEMUs open an image's kernel, initramfs and base disk by path, as
 * uids of their own. When they cannot reach the images directory (the quick
 * start's cache under a private home), each build of an image is staged: its
 * files linked (or, across filesystems or when not readable by all, copied)
 * into STATE/libvirt/images/NAME-TAG/, 0644 files in 0711 directories, TAG
 * naming the build. A rebuild stages anew; a staging no disk backs onto any
 * more is removed at the next open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/image.h"
#include "driver/libvirt/libvirt_driver.h"
#include "transport/control.h"

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
	free(im->host_kernel);
	free(im->host_initrd);
	free(im->host_disk);
	free(im);
}

/* ---- staging --------------------------------------------------------------------------------- */

/* A copy of src at dst (a new file, 0644), done by the kernel (reflinks where the filesystem has them). */
static int copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = SAAS_OK;
	ssize_t n;

	if (in < 0 || (out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 || fchmod(out, 0644) < 0)
		goto fail;
	while ((n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) > 0)
		;
	/* Not between these filesystems (or an old kernel): sendfile, from the offsets where it stopped. */
	if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
		while ((n = sendfile(out, in, NULL, 1 << 30)) > 0)
			;
	if (n < 0)
		goto fail;
	goto out;
fail:
	rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot copy %s to %s: %s", src, dst, strerror(errno));
out:
	if (out >= 0 && close(out) < 0 && rc == SAAS_OK)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot write %s: %s", dst, strerror(errno));
	if (in >= 0)
		close(in);
	return rc;
}

/* The last part of a path. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * One file of an image into the staging directory dir, under its own name. A
 * file readable by all is linked (instant, and its mode stays what the
 * operator made it); any other is copied, as is one on another filesystem or
 * one the kernel will not let us link (fs.protected_hardlinks).
 */
static int stage_file(const char *dir, const char *src)
{
	char *dst = saas__lv_path_join(dir, base_name(src));
	struct stat st;
	int rc = SAAS_OK;

	if (!dst)
		return SAAS_ENOMEM;
	if (stat(src, &st) < 0 || !S_ISREG(st.st_mode))
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, errno, "%s is not a file QEMU can boot", src);
	else if (!(st.st_mode & S_IROTH) || link(src, dst) < 0)
		rc = copy_file(src, dst);
	free(dst);
	return rc;
}

/* The staging of im's build: STATE/libvirt/images/NAME-TAG, made unless a previous engine made it. */
static int image_stage(struct drv *d, struct image *im)
{
	char text[PATH_MAX + 256], hash[65], *images = NULL, *dir = NULL, *tmp = NULL;
	char **paths[] = { &im->kernel, &im->initrd, &im->disk };
	struct stat st;
	int rc = SAAS_OK;

	/* A build is its directory, recipe and manifest: a rebuild of the same recipe is still other files. */
	snprintf(text, sizeof(text), "%s|%s|%lld.%09ld", im->dir, im->recipe, (long long)im->mtime.tv_sec,
	         im->mtime.tv_nsec);
	saas__sha256_hex(hash, text, strlen(text));
	hash[16] = '\0';
	if (!(images = saas__lv_path_join(d->dir, "images")) || asprintf(&dir, "%s/%s-%s", images, im->name, hash) < 0 ||
	    asprintf(&tmp, "%s/.%s-%s.tmp", images, im->name, hash) < 0) {
		dir = tmp = NULL;
		rc = saas__oom();
		goto out;
	}
	if (stat(dir, &st) < 0) {
		saas__lv_rm_tree(tmp); /* a staging cut short */
		if (saas__mkdir_p(tmp, 0711) < 0 || chmod(tmp, 0711) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", tmp, strerror(errno));
			goto out;
		}
		for (size_t i = 0; i < SAAS_ARRAY_SIZE(paths) && rc == SAAS_OK; i++)
			if (*paths[i])
				rc = stage_file(tmp, *paths[i]);
		if (rc == SAAS_OK && rename(tmp, dir) < 0)
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", dir, strerror(errno));
		if (rc < 0) {
			saas__lv_rm_tree(tmp);
			goto out;
		}
		saas__lv_log(d, SAAS_LOG_INFO, "image %s staged in %s: QEMU's uids cannot reach %s", im->name, dir, im->dir);
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(paths); i++) {
		char *p;
		if (!*paths[i])
			continue;
		if (!(p = saas__lv_path_join(dir, base_name(*paths[i])))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		free(*paths[i]);
		*paths[i] = p;
	}
out:
	free(images);
	free(dir);
	free(tmp);
	return rc;
}

/*
 * The name of the file a qcow2 image is backed by (NULL: none, or not
 * qcow2). The header (QEMU's docs/interop/qcow2.txt) holds its offset and
 * length, big-endian, at bytes 8 and 16; QEMU refuses names over 1023 bytes.
 */
char *saas__lv_qcow2_backing(const char *path)
{
	unsigned char h[20];
	uint64_t off = 0;
	uint32_t len = 0;
	char *name = NULL;
	struct stat st;
	/*
	 * The names come from headers a VM's QEMU writes: one naming a FIFO or a
	 * device must not hang or touch anything; only a regular file is read.
	 */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "QFI\xfb", 4) != 0)
		goto out;
	for (int i = 0; i < 8; i++)
		off = off << 8 | h[8 + i];
	for (int i = 0; i < 4; i++)
		len = len << 8 | h[16 + i];
	if (!off || !len || len > 1023 || !(name = calloc(1, len + 1)))
		goto out;
	if (pread(fd, name, len, (off_t)off) != (ssize_t)len || memchr(name, '\0', len)) {
		free(name);
		name = NULL;
	}
out:
	close(fd);
	return name;
}

/* Append to *list (a string of "\n"-ended names) the backing file of every disk.qcow2 in STATE/libvirt/kind/ * /. */
static void backings(struct drv *d, const char *kind, saas__buf *list)
{
	char *parent = saas__lv_path_join(d->dir, kind);
	DIR *dh = parent ? opendir(parent) : NULL;
	struct dirent *e;

	while (dh && (e = readdir(dh))) {
		char *disk, *backing;
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (asprintf(&disk, "%s/%s/disk.qcow2", parent, e->d_name) < 0)
			break;
		if ((backing = saas__lv_qcow2_backing(disk))) {
			saas__buf_puts(list, backing);
			saas__buf_puts(list, "\n");
		}
		free(backing);
		free(disk);
	}
	if (dh)
		closedir(dh);
	free(parent);
}

/*
 * At open: remove the stagings no disk backs onto (a VM's overlay, a
 * template's or a snapshot's frozen disk). Those of a current image build are made again at
 * its first use: links cost nothing, copies once per start.
 */
void saas__lv_images_prune(struct drv *d)
{
	char *images = saas__lv_path_join(d->dir, "images");
	DIR *dh = images ? opendir(images) : NULL;
	saas__buf list = SAAS__BUF_INIT;
	struct dirent *e;

	backings(d, "vms", &list);
	backings(d, "templates", &list);
	backings(d, "snapshots", &list);
	while (dh && (e = readdir(dh))) {
		char *dir, *prefix;
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (asprintf(&dir, "%s/%s", images, e->d_name) < 0)
			break;
		if (asprintf(&prefix, "%s/", dir) < 0) {
			free(dir);
			break;
		}
		if (!list.data || !strstr(list.data, prefix)) {
			saas__lv_log(d, SAAS_LOG_DEBUG, "removing %s: no disk uses that image build any more", dir);
			saas__lv_rm_tree(dir);
		}
		free(prefix);
		free(dir);
	}
	if (dh)
		closedir(dh);
	saas__buf_free(&list);
	free(images);
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
	/* An image built before the control port has none: its clones get their fix-ups over SSH. */
	s = json_string_value(json_object_get(root, "control_port"));
	im->control = s && strcmp(s, CONTROL_PORT_NAME) == 0;
	/* An image with a code server: its templates are saved with the server warm (template_code.c). */
	{
		json_int_t port = json_integer_value(json_object_get(root, "code_port"));
		im->code_port = port > 0 && port < 65536 ? (unsigned int)port : 0;
	}
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
	if (d->cf.stage_images && (rc = image_stage(d, im)) < 0)
		goto out;
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
