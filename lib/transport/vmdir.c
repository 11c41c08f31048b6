/*
 * The VM's directory as the engine trusts it (docs/security.md): opened
 * O_NOFOLLOW and checked to be the engine's alone, so that nothing in it can
 * be swapped between the engine's look and its act, and the engine's record
 * of the VM's QEMU uid kept there. The control port's socket (control.c) and
 * the driver's disks (lib/driver/libvirt/vmfs.c) are both reached through it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/vmdir.h"
#include "saas/errors.h"
#include "util/error.h"

bool saas__vmdir_stat_ok(const struct stat *st, unsigned int euid)
{
	/* The engine's (root's, or its own user's) and written by nobody else: no VM uid can swap a name in it. */
	return S_ISDIR(st->st_mode) && (st->st_uid == 0 || st->st_uid == euid) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int saas__vmdir_open(const char *vmdir, int *out)
{
	struct stat st;
	int fd;

	*out = -1;
	if ((fd = open(vmdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open the VM's directory %s: %s", vmdir,
		                   strerror(errno));
	if (fstat(fd, &st) < 0 || !saas__vmdir_stat_ok(&st, (unsigned int)geteuid())) {
		close(fd);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0,
		                   "the VM's directory %s is not the engine's alone (owner %u, mode %03o): refused", vmdir,
		                   (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
	}
	*out = fd;
	return SAAS_OK;
}

int saas__vmdir_uid_read(int dfd, unsigned int *uid)
{
	char text[16] = "", *end;
	unsigned long v;
	struct stat st;
	ssize_t n;
	int fd;

	*uid = 0;
	if ((fd = openat(dfd, VM_UID_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? SAAS_OK : saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno,
		                                                "the VM's uid record: %s", strerror(errno));
	n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid())
	            ? read(fd, text, sizeof(text) - 1)
	            : -1;
	close(fd);
	if (n <= 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the VM's uid record is not the engine's: refused");
	text[n] = '\0';
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end != '\n' || v == 0 || v > UINT32_MAX - 1)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the VM's uid record is unreadable: refused");
	*uid = (unsigned int)v;
	return SAAS_OK;
}

int saas__vmdir_uid_write(int dfd, unsigned int uid)
{
	char text[16];
	int fd, n = snprintf(text, sizeof(text), "%u\n", uid), rc = SAAS_OK;

	/* Replaced whole: a directory taken back from an older engine may hold none, or a stale one. */
	if (unlinkat(dfd, VM_UID_FILE, 0) < 0 && errno != ENOENT)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the VM's uid record: %s", strerror(errno));
	if ((fd = openat(dfd, VM_UID_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the VM's uid record: %s", strerror(errno));
	if (write(fd, text, (size_t)n) != n)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the VM's uid record: %s", strerror(errno));
	close(fd);
	return rc;
}
