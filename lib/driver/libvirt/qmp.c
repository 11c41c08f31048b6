/*
 * QEMU's monitor, through libvirt's QMP passthrough: what templates and
 * clones need that libvirt does not offer (a migration to and from a file
 * descriptor, with x-ignore-shared next).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/*
 * A save's file against its bound: what it takes on storage is its length,
 * or the blocks given it where a writer allocated past its end.
 */
static int within_bound(int fd, int64_t max_bytes)
{
	struct stat st;
	int64_t held;

	if (fd < 0)
		return SAAS_OK;
	if (fstat(fd, &st) != 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the saved state's file: %s", strerror(errno));
	held = (int64_t)st.st_blocks * 512 > (int64_t)st.st_size ? (int64_t)st.st_blocks * 512 : (int64_t)st.st_size;
	if (held <= max_bytes)
		return SAAS_OK;
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
	                   "the saved state grew past its bound of %lld MiB (the guest's RAM and %d MiB): %lld MiB",
	                   (long long)(max_bytes >> 20), STATE_MARGIN_MIB, (long long)(held >> 20));
}

/*
 * Poll query-migrate until the migration completed (SAAS_OK) or failed.
 * stall_ms bounds the time without progress (RAM transferred), not the whole
 * save: a paused VM's state is finite, so a save that moves is never cut
 * however loaded the host is (a clone whose memory maps its template's writes
 * all of it: 70-85 s under TCG on a quiet 2-core host, past a fixed 120 s
 * under load). The poll backs off from 2 ms to 100 ms: each one is a QMP round
 * trip through libvirtd, CPU the save itself wants.
 *
 * fd (or -1), the file being written, is held to max_bytes on storage at
 * each poll and at the end: a QEMU (an escaped one) writes what it likes,
 * and its progress says nothing of it. Past the bound the wait fails, and
 * its caller cancels the migration.
 */
int saas__lv_qmp_migration_wait(struct drv *d, virDomainPtr dom, int64_t stall_ms, int fd, int64_t max_bytes,
                                int64_t *bytes)
{
	int64_t last_moved = saas__now_ms(), seen = -1, nap = 2;

	for (;;) {
		json_t *r = NULL, *ram;
		const char *status;
		int64_t moved;
		int rc = saas__lv_qmp(dom, "{\"execute\":\"query-migrate\"}", -1, &r);
		if (rc < 0)
			return rc;
		status = json_string_value(json_object_get(r, "status"));
		ram = json_object_get(r, "ram");
		moved = json_integer_value(json_object_get(ram, "transferred"));
		if ((rc = within_bound(fd, max_bytes)) < 0) {
			json_decref(r);
			return rc;
		}
		if (status && strcmp(status, "completed") == 0) {
			if (bytes)
				*bytes = moved;
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
		if (moved > seen) {
			seen = moved;
			last_moved = saas__now_ms();
		}
		if (saas__now_ms() - last_moved > stall_ms || closing(d))
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0,
			                   "migration made no progress for %lld ms (%lld bytes written)",
			                   (long long)stall_ms, (long long)(seen > 0 ? seen : 0));
		saas__sleep_ms(nap);
		if (nap < 100)
			nap *= 2;
	}
}
