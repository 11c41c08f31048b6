/*
 * Internal: the QEMU binary the embedded driver's domains name (emulator.c).
 *
 * After it starts a QEMU, libvirt reads back the guest CPU it got. When its
 * capabilities of the binary say QEMU has the CPU property
 * "unavailable-features" (QEMU 4.1 and later), libvirt 9.0 reads every CPU
 * property with its own qom-get: some 400 monitor commands, ~1 ms each
 * (QEMU's monitor takes its input a byte per main-loop turn), ~0.37 s of a
 * core per start under TCG. Without that flag it reads the x86 CPUID feature
 * words: two commands. Both tell libvirt the same thing about a guest whose
 * CPU the engine asks as mode 'maximum' or 'host-passthrough' (no named
 * features).
 *
 * libvirt keys its capabilities cache by the binary's path and loads an entry
 * from ROOT/cache/qemu/capabilities/SHA256(PATH).xml when its stamps (the
 * binary's ctime, libvirt's own) still hold. So the engine names a second
 * path to the same binary, ROOT/bin/NAME (a symbolic link), and writes that
 * path's entry before libvirt first looks it up: the binary's own entry, as
 * libvirt just probed it, with the flag (and "canonical-cpu-features", which
 * libvirt derives from it) taken out. A QEMU or libvirt upgraded under it
 * makes libvirt probe the link afresh, flag and all: the slow read, never a
 * wrong one; the engine's next open writes the entry again.
 */
#ifndef SAAS_DRIVER_LIBVIRT_EMULATOR_H
#define SAAS_DRIVER_LIBVIRT_EMULATOR_H

#include <stddef.h>

#include "driver/libvirt/libvirt_driver.h"

/* Largest capabilities entry read (libvirt 9.0's for qemu-system-x86_64: ~210 KiB). */
#define EMULATOR_CAPS_MAX (8u << 20)

/*
 * libvirt's entry `text` (len bytes) for `binary`, as the entry for `alias`:
 * its <emulator> says alias, and the two CPU flags are gone. *out (malloc'd,
 * NUL-terminated, *out_len bytes) or, when the entry has no
 * "cpu-unavailable-features" flag (libvirt reads the CPU cheaply already),
 * NULL and SAAS_OK. SAAS_EINVAL when the text is not such an entry (no
 * <qemuCaps>, not exactly one <emulator> naming binary, a NUL in it) or a
 * path needs XML escaping. Pure: the bytes are libvirt's, read as untrusted.
 */
int saas__lv_caps_for_alias(const char *text, size_t len, const char *binary, const char *alias, char **out,
                            size_t *out_len);

/*
 * The embedded root's alias (cpu_readback=words): the link and its entry.
 * binary is the QEMU libvirt chose (its domain capabilities' <path>), whose
 * entry libvirt has just written. *alias (malloc'd) is the path domains
 * name, or NULL when there is nothing to gain (the entry has no such flag);
 * a failure says why and leaves *alias NULL.
 */
int saas__lv_emulator_alias(const char *root, const char *binary, char **alias);

/*
 * At open (the embedded driver): d->emulator set by saas__lv_emulator_alias
 * for the binary libvirt uses for d's guests, or left NULL (libvirt's default)
 * with the reason logged. xml is libvirt's domain capabilities for them, as
 * lv_open asked for them once (after the reaper's open: the asking may run
 * libvirt's probe, which wrote the binary's entry); NULL when that failed,
 * libvirt's error still the last. Never fails the open: this only makes
 * starts cheaper.
 */
void saas__lv_emulator_setup(struct drv *d, const char *xml);

#endif
