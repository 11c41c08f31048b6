/*
 * Internal: a guest's serial console log. QEMU appends what the guest writes
 * to a file in the VM's directory; the guest decides how much, so the driver
 * keeps the file short and reads only its end.
 */
#ifndef SAAS_DRIVER_LIBVIRT_CONSOLE_H
#define SAAS_DRIVER_LIBVIRT_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

/* A console log longer than this is cut down to its last CONSOLE_LOG_KEEP bytes... */
#define CONSOLE_LOG_MAX (1 << 20)
#define CONSOLE_LOG_KEEP (64 << 10)
/* ...looked at this often: a guest can pass the bound by what it writes in that time. */
#define CONSOLE_TRIM_MS 1000
/* How much of a console's end a failed launch quotes. */
#define CONSOLE_TAIL 400

/*
 * If the file at path is longer than max bytes, keep only its last keep
 * bytes (keep < max). The writer may go on appending (QEMU opens it with
 * O_APPEND): its writes land after what was kept; bytes it appends while
 * the cut runs may be lost. Returns 1 when it cut, 0 when there was nothing
 * to do (or no such file), -errno on failure.
 */
int saas__console_trim(const char *path, int64_t max, size_t keep);

/*
 * The last n bytes of the file at path as a string, control characters
 * turned to spaces. NULL if it cannot be read; "" if empty. Free with free().
 */
char *saas__console_tail(const char *path, size_t n);

#endif
