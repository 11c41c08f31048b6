/*
 * Internal: the engine's hands in a VM's files (vmfs.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_VMFS_H
#define SAAS_DRIVER_LIBVIRT_VMFS_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- the engine's hands in a VM's files (vmfs.c) --------------------------------------------- */

/* Remove name under the directory parent (a tree: depth levels below the first), never following a link. */
int saas__lv_rm_tree_at(int parent, const char *name, int depth);
/*
 * Is path, as QEMU reports it, one of the VM's own disks: vmdir/disk.qcow2
 * or vmdir/disk-SNAP.qcow2 (SNAP a snapshot's name)? Its name in *name (cap
 * bytes). Pure: nothing is resolved.
 */
bool saas__lv_vm_disk_name(const char *vmdir, const char *path, char *name, size_t cap);
/* Is st a VM's disk as the engine made it: a regular file of owner? Pure. */
bool saas__lv_vm_disk_stat_ok(const struct stat *st, unsigned int owner);
/*
 * The disk QEMU reports at path, opened (read-only, O_NOFOLLOW) into *fd
 * after the checks above, owner its expected owner: SAAS_OK, or
 * SAAS_EBACKEND saying what was refused.
 */
int saas__lv_vm_disk_open(const char *vmdir, const char *path, unsigned int owner, int *fd);
/* A hard link at to of the file open as fd (its inode, not a path): SAAS_OK or SAAS_EIO. */
int saas__lv_link_fd(int fd, const char *to);
/* A new file vmdir/name, 0600, made O_EXCL|O_NOFOLLOW, open read-write in *fd: SAAS_OK or SAAS_EIO. */
int saas__lv_vm_file_create(const char *vmdir, const char *name, int *fd);

#endif
