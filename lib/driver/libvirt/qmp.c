/*
 * QEMU's monitor, through libvirt's QMP passthrough: what templates and
 * clones need that libvirt does not offer (a migration to and from a file
 * descriptor, with x-ignore-shared next).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt-qemu.h>

#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/qmp.h"

/*
 * A QMP command on a domain, with an optional file descriptor passed along
 * (for getfd). *ret (may be NULL) gets the "return" member; a QEMU error
 * becomes SAAS_EBACKEND with its description.
 */
int saas__lv_qmp(virDomainPtr dom, const char *cmd, int fd, json_t **ret)
{
	char *out = NULL;
	json_t *root, *err;
	json_error_t jerr;
	int fds[1] = { fd };
	int rc = SAAS_OK;

	if (ret)
		*ret = NULL;
	if (virDomainQemuMonitorCommandWithFiles(dom, cmd, fd >= 0 ? 1 : 0, fd >= 0 ? fds : NULL, NULL, NULL, &out,
	                                         0) < 0)
		return saas__lv_virt_error("QEMU monitor");
	root = json_loads(out, 0, &jerr);
	free(out);
	if (!root)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "QEMU monitor: unreadable answer (%s)", jerr.text);
	if ((err = json_object_get(root, "error"))) {
		const char *desc = json_string_value(json_object_get(err, "desc"));
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "QEMU: %s", desc ? desc : "error");
	} else if (ret) {
		*ret = json_incref(json_object_get(root, "return"));
	}
	json_decref(root);
	return rc;
}

/* Hand QEMU a file descriptor under a name (for an fd: migration URI). Ours stays ours. */
int saas__lv_qmp_getfd(virDomainPtr dom, const char *fdname, int fd)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"%s\"}}", fdname);
	return saas__lv_qmp(dom, cmd, fd, NULL);
}

/* Poll query-migrate until the migration completed (SAAS_OK) or failed. */
int saas__lv_qmp_migration_wait(struct drv *d, virDomainPtr dom, int64_t timeout_ms, int64_t *bytes)
{
	int64_t deadline = saas__now_ms() + timeout_ms;

	for (;;) {
		json_t *r = NULL;
		const char *status;
		int rc = saas__lv_qmp(dom, "{\"execute\":\"query-migrate\"}", -1, &r);
		if (rc < 0)
			return rc;
		status = json_string_value(json_object_get(r, "status"));
		if (status && strcmp(status, "completed") == 0) {
			if (bytes)
				*bytes = json_integer_value(json_object_get(json_object_get(r, "ram"), "transferred"));
			json_decref(r);
			return SAAS_OK;
		}
		if (status && (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)) {
			const char *why = json_string_value(json_object_get(r, "error-desc"));
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "migration %s: %s", status,
			                 why ? why : "no reason given");
			json_decref(r);
			return rc;
		}
		json_decref(r);
		if (saas__now_ms() > deadline || closing(d))
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "migration did not finish in time");
		saas__sleep_ms(5);
	}
}
