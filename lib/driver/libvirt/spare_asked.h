/*
 * Internal: the templates creates asked for, remembered across the engine's
 * restarts (spare_asked.c), so that spares (spare.c) go to them from open on
 * rather than from each one's first create after it.
 */
#ifndef SAAS_DRIVER_LIBVIRT_SPARE_ASKED_H
#define SAAS_DRIVER_LIBVIRT_SPARE_ASKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saas/sys/driver.h"

struct drv;
struct tmpl;

/*
 * The file, STATE/libvirt/SPARE_ASKED_FILE: at most SPARE_ASKED_MAX
 * templates (the ones asked for last), within SPARE_ASKED_FILE_MAX bytes; one
 * asked for more than SPARE_ASKED_KEEP_MS ago is not revived at open, nor
 * written again. A create of a template already in it rewrites it only when
 * its shape changed or its time there is SPARE_ASKED_REFRESH_MS old.
 */
#define SPARE_ASKED_FILE "asked.json"
#define SPARE_ASKED_FORMAT 1
#define SPARE_ASKED_MAX 32
#define SPARE_ASKED_FILE_MAX 16384
#define SPARE_ASKED_KEEP_MS (7LL * 24 * 60 * 60 * 1000)
#define SPARE_ASKED_REFRESH_MS (60 * 60 * 1000)

/* One template as the file says it: its key, image and shape, when a create last asked for it (ms since the epoch). */
struct saas__lv_asked {
	char key[33];
	char image[64];
	unsigned int vcpus, memory_mb, disk_gb;
	int64_t asked_ms;
};

/*
 * Pure, for the file's text (tests/unit/test_libvirt.c): saas__lv_asked_parse
 * reads text into out[0..*n) (at most max): 0, or -1 with why (the whole file
 * refused: not the format, more than max entries, a key that is no key, an
 * image that is no image name, a shape or time out of bounds).
 * saas__lv_asked_format writes in[0..n) (malloc'd, NULL when out of memory).
 */
int saas__lv_asked_parse(struct saas__lv_asked *out, size_t max, size_t *n, const char *text, char *why,
                         size_t whylen);
char *saas__lv_asked_format(const struct saas__lv_asked *in, size_t n);

/*
 * At open, before the spares' threads start: the templates the file holds,
 * asked for within SPARE_ASKED_KEEP_MS, of their image's current build and
 * ready, are taken as asked for at the time the file says (their image and
 * shape too), and a quiet spell counts from the open until a create comes
 * (spare.h's quiet_from). Logged; a
 * file missing says nothing, one bad or too big is ignored with a line.
 * Nothing is done without spares, without templates, or on a VM host.
 */
void saas__lv_asked_load(struct drv *d);
/*
 * A create asks for template t in spec's shape at now (ms since the epoch):
 * t takes it (spares go to the templates asked for last), and the file is
 * marked to be written again when t is new to it, of another shape, or its
 * time there is SPARE_ASKED_REFRESH_MS old. Under d->mu.
 */
void saas__lv_asked_note_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec, int64_t now);
/*
 * The file written, when marked (a spare thread's turn, and close): under
 * d->mu, which is let go during the write and held again after it. One
 * writer at a time; a mark made meanwhile is the next turn's.
 */
void saas__lv_asked_write_locked(struct drv *d);

#endif
