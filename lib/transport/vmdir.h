/*
 * Internal: the VM's directory as the engine trusts it (vmdir.c). The rule
 * (docs/security.md): the engine never resolves a path through a directory a
 * VM's uid can write, so every name in a VM's directory is reached through
 * the directory opened and checked here.
 */
#ifndef SAAS_TRANSPORT_VMDIR_H
#define SAAS_TRANSPORT_VMDIR_H

#include <stdbool.h>
#include <sys/stat.h>

/* Is st a directory no VM's uid can write (root's or the engine's euid, no group or other write)? Pure. */
bool saas__vmdir_stat_ok(const struct stat *st, unsigned int euid);
/* vmdir opened O_NOFOLLOW into *fd, and checked to be the engine's alone: SAAS_OK or SAAS_EIO. */
int saas__vmdir_open(const char *vmdir, int *fd);

/*
 * The engine's record of a VM's QEMU uid, in its directory (dfd): what the
 * control port's listener must run as (control.c). Written at the VM's
 * making (lib/driver/libvirt/uid.c); read back as *uid, 0 when there is none
 * (a VM without a uid of its own). SAAS_EIO when the record is not the
 * engine's or unreadable.
 */
#define VM_UID_FILE "uid"
int saas__vmdir_uid_read(int dfd, unsigned int *uid);
int saas__vmdir_uid_write(int dfd, unsigned int uid);

#endif
