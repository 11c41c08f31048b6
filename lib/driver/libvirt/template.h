/*
 * Internal: templates: keys, the builder, pruning (template.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_TEMPLATE_H
#define SAAS_DRIVER_LIBVIRT_TEMPLATE_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- templates (template.c) ------------------------------------------------------------------ */

/*
 * Save a paused VM's memory and device state to path (a template's, a
 * snapshot's); ignore_shared: leave out RAM mapped shared (x-ignore-shared).
 * *bytes (may be NULL): the RAM bytes the stream carried.
 */
int saas__lv_state_save(struct drv *d, virDomainPtr dom, const char *path, bool ignore_shared, int64_t *bytes);

/* The key of the template for spec and im ("" when out of memory). */
void saas__lv_template_key(struct drv *d, const saas_vm_spec *spec, const struct image *im, char key[33]);
struct tmpl *saas__lv_template_get_locked(struct drv *d, const char *key);
/* Ask for the build of t (not ready); why it cannot serve this create, and at which log level to say it. */
const char *saas__lv_template_request_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec,
                                             const struct image *im, int *level);
void saas__lv_template_break(struct drv *d, const char *key);
/*
 * An image with a code server (im->code_port): wait, at most
 * TEMPLATE_CODE_TIMEOUT_MS, until the server in the template VM at the other
 * end of ssh answers GET /health with 200 (template_code.c). SAAS_OK at once
 * for an image without one; SAAS_ETIMEOUT with the reason when it never
 * does, so that no template with a cold kernel is saved.
 */
int saas__lv_template_code_wait(struct drv *d, saas__ssh *ssh, const struct image *im, const char *key);
/*
 * A spare of an image with a code server (template_code.c), its domain made
 * and paused: its state in (unless it is), the guest let run, `POST /warm`
 * sent to the code server over the control port, as a client's first run
 * comes, and the domain paused again, l->restored set. 1: warmed; 0: not
 * (no code server, no control port or connections, or a server that ran
 * nothing: the spare is as without); an error, when the warm-up was cut off
 * or the VM failed (the caller gives the spare up).
 */
int saas__lv_spare_code_warm(struct launch *l, const struct timespec *t0, int64_t budget_ms);
/*
 * `true` over the template VM's control port (l->control), so that its
 * clones' first commands find the helper's way to the shell warm; the
 * connection closed before the state is taken. A failure costs only that.
 */
void saas__lv_template_warm_port(struct drv *d, struct launch *l, const char *key);
/* Remote: the template of key found complete on the host, at stem (NULL: not there after all, look again). */
void saas__lv_template_vmhost_ready(struct drv *d, const char *key, const char *stem);
/*
 * The sealed RAM of the mapped template in tdir, loaded from its "ram" file
 * on first use, as a new descriptor the caller closes: SAAS_OK;
 * SAAS_ENOTFOUND when the template is a loaded one; an error otherwise
 * (*broken: the template's file is bad).
 */
int saas__lv_template_ram(struct drv *d, const char *tdir, uint64_t bytes, int *fd, bool *broken);
/* What a previous engine on this state directory left of template builds. */
void saas__lv_templates_cleanup(struct drv *d);
/* The driver's template_list slot: the ready templates the host has, then those building or failed. */
int saas__lv_template_list(void *ctx, saas_template_fn fn, void *userdata);
/* A ready template as its template.json describes it (local and on a VM host); borrows `j`'s strings. */
void saas__lv_template_from_json(const json_t *j, saas_driver_template *t);
/*
 * The templates' parts of each VM host's table (host.h), local and remote:
 * template VMs left by an interrupted build, whether a new entry is ready,
 * a ready one's place, the build said and marked, a broken one deleted, one
 * whose clone failed looked for (local: not ready once its directory is gone),
 * the ready ones listed.
 */
void saas__lv_template_vms_destroy(struct drv *d);
void saas__lv_template_known_local(struct drv *d, struct tmpl *t);
void saas__lv_template_lost_local(struct drv *d, const char *key);
char *saas__lv_template_place_local(struct drv *d, const struct tmpl *t);
char *saas__lv_template_place_remote(struct drv *d, const struct tmpl *t);
void saas__lv_template_build_local(struct tmpl_job *job);
void saas__lv_template_build_remote(struct tmpl_job *job);
void saas__lv_template_break_local(struct drv *d, const char *key);
int saas__lv_template_list_local(struct drv *d, saas_template_fn fn, void *userdata, int *stop);
int saas__lv_template_list_remote(struct drv *d, saas_template_fn fn, void *userdata, int *stop);

#endif
