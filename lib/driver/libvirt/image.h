/*
 * Internal: image manifests (image.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_IMAGE_H
#define SAAS_DRIVER_LIBVIRT_IMAGE_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- images (image.c) ------------------------------------------------------------------------ */

void saas__lv_image_free(struct image *im);
/*
 * An image by name, reloaded when its manifest changes (a rebuild). Caller
 * holds d->mu; the image stays valid until close (a replaced one is retired,
 * not freed: creates and template builds use it without the lock).
 */
int saas__lv_image_get(struct drv *d, const char *name, struct image **out);
/* The backing file named in a qcow2 image's header (NULL: none, not qcow2, unreadable). Free with free(). */
char *saas__lv_qcow2_backing(const char *path);
/* At open: remove the image stagings (STATE/libvirt/images) that no VM's or template's disk backs onto. */
void saas__lv_images_prune(struct drv *d);

#endif
