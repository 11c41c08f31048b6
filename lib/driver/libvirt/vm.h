/*
 * Internal: the registry of running VMs and their SSH sessions (vm.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_VM_H
#define SAAS_DRIVER_LIBVIRT_VM_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- running VMs (vm.c) ---------------------------------------------------------------------- */

/*
 * Register a running VM made from im (NULL: adopted, its build not known);
 * ssh (may be NULL: connected on first use) becomes the registry's.
 */
int saas__lv_vm_add(struct drv *d, const char *name, const struct image *im, unsigned int port, unsigned int uid,
                    const char *host_key, saas__ssh *ssh);
/* A reference to the VM of name, or NULL; let go with saas__lv_vm_put. */
struct vm *saas__lv_vm_get(struct drv *d, const char *name);
void saas__lv_vm_put(struct drv *d, struct vm *v);
/* Take a VM out of the registry; the registry's reference is dropped by the caller. */
struct vm *saas__lv_vm_unlink(struct drv *d, const char *name);
/*
 * The VM's control port for one user (enum port_user): true once it has it.
 * A file transfer waits for another transfer to end, however long; any
 * other holder is waited for at most wait_ms (0: not at all), since a
 * command may run for an hour and what does not get the port goes over
 * SSH instead. Given back with saas__lv_port_give.
 */
bool saas__lv_port_take(struct vm *v, int user, int wait_ms);
void saas__lv_port_give(struct vm *v);
/*
 * Wait until the port has been free for quiet_ms in a row (true), or the
 * driver closes or the VM is being destroyed (false: saas__lv_vm_going). A user that takes it meanwhile starts the count
 * again once it gives it back.
 */
#define PORT_QUIET_POLL_MS 100
bool saas__lv_port_quiet(struct drv *d, struct vm *v, int quiet_ms);
/* The VM of that name (if the registry has it) is being destroyed: no SSH login is started for it after this. */
void saas__lv_vm_going(struct drv *d, const char *name);

/* The VM's SSH session, reopened if it died, with a reference the caller lets go with saas__ssh_close. */
int saas__lv_vm_session(struct drv *d, const char *name, saas__ssh **out);
/*
 * Open the engine's session to a VM's SSH forward (on d->listen). It gives up
 * while it waits once the driver closes, or for background (a template's VM)
 * once the engine stops.
 */
int saas__lv_ssh_connect(struct drv *d, bool background, unsigned int port, const char *host_key, int timeout_ms,
                         saas__ssh **out);

#endif
