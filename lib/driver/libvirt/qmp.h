/*
 * Internal: QEMU monitor commands libvirt does not wrap (qmp.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_QMP_H
#define SAAS_DRIVER_LIBVIRT_QMP_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- QEMU's monitor (qmp.c) ------------------------------------------------------------------ */

int saas__lv_qmp(virDomainPtr dom, const char *cmd, int fd, json_t **ret);
int saas__lv_qmp_getfd(virDomainPtr dom, const char *fdname, int fd);
/* A migration's end; fd (or -1) the file it writes, held to max_bytes (qmp.c). */
int saas__lv_qmp_migration_wait(struct drv *d, virDomainPtr dom, int64_t stall_ms, int fd, int64_t max_bytes,
                                int64_t *bytes);

#endif
