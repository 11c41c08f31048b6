/*
 * Internal: the driver table's guest calls (guest.c): commands, files, ports
 * and terminals in a running VM.
 */
#ifndef SAAS_DRIVER_LIBVIRT_GUEST_H
#define SAAS_DRIVER_LIBVIRT_GUEST_H

#include "driver/libvirt/libvirt_driver.h"

int saas__lv_guest_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code);
int saas__lv_guest_file_write(void *ctx, const char *name, const char *path, unsigned int mode, saas_read_fn reader,
                              void *ud, int64_t size);
int saas__lv_guest_file_read(void *ctx, const char *name, const char *path, int64_t max, saas_write_fn writer,
                             void *ud, int64_t *size);
int saas__lv_guest_file_list(void *ctx, const char *name, const char *path, unsigned int depth, saas_entry_fn fn, void *ud);
int saas__lv_guest_file_mkdir(void *ctx, const char *name, const char *path, int *created);
int saas__lv_guest_file_remove(void *ctx, const char *name, const char *path);
int saas__lv_guest_file_rename(void *ctx, const char *name, const char *from, const char *to, unsigned int flags);
int saas__lv_guest_port_connect(void *ctx, const char *name, unsigned int port, int *fd);
int saas__lv_guest_pty_open(void *ctx, const char *name, const saas_driver_pty *req, int *fd, void **pty);
int saas__lv_guest_pty_resize(void *ctx, void *pty, unsigned int cols, unsigned int rows);
void saas__lv_guest_pty_close(void *ctx, void *pty, int *exit_status);

#endif
