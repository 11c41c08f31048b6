/*
 * Internal: the control port (control.c), the engine's end of the line
 * protocol that images/guest/aas-control.c serves in the guest:
 *   engine: fixup NONCE HOSTNAME SECONDS.NANOS HEX_SEED\n
 *   guest:  ok NONCE\n   or   error NONCE|- WHAT\n
 * The reply is guest-sent bytes: saas__lv_control_reply reads it as hostile
 * input (tests/unit/test_control.c, tests/fuzz/fuzz_control.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_CONTROL_H
#define SAAS_DRIVER_LIBVIRT_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* The virtio-serial port's name: the guest finds its device by it. The manifest's "control_port" must say it. */
#define CONTROL_PORT_NAME "org.libsaas.control.0"
/* The host end: a socket QEMU listens on, in the VM's directory. */
#define CONTROL_SOCKET "ctl"
#define CONTROL_LINE_MAX 256       /* a request, '\n' included: the guest refuses a longer one whole */
#define CONTROL_NONCE_LEN 16       /* hex digits */
#define CONTROL_REPLY_MAX 256      /* what the engine reads back, at most */
#define CONTROL_SAID_MAX 120       /* of a guest's words, what goes into an error message */
/*
 * How long the engine waits for the guest's answer before it does the
 * fix-ups over SSH instead. The helper answers in milliseconds once the
 * restored guest runs; this is for a guest that lost it.
 */
#define CONTROL_TIMEOUT_MS 15000

/* Can a socket in vmdir be bound (its path fits a sockaddr_un)? */
bool saas__lv_control_fits(const char *vmdir);

/*
 * The request line for hostname, the time now and seed_hex, with its '\n',
 * into out (cap bytes): its length, or SAAS_EINVAL when it is longer than
 * CONTROL_LINE_MAX. Pure.
 */
int saas__lv_control_request(char *out, size_t cap, const char *nonce, const char *hostname,
                             const struct timespec *now, const char *seed_hex);

/*
 * The guest's reply, len bytes at buf (one line with its '\n'): SAAS_OK when
 * it is exactly "ok NONCE"; SAAS_EBACKEND otherwise, the message quoting the
 * guest's reason or words in printable ASCII, at most CONTROL_SAID_MAX bytes.
 * Pure; reads nothing past len.
 */
int saas__lv_control_reply(const char *buf, size_t len, const char *nonce);

/*
 * The fix-ups of the restored VM whose directory is vmdir, over its control
 * port: connect, send the request, read the answer, all within timeout_ms.
 * SAAS_OK once the guest said it applied them; SAAS_EIO (no connection, the
 * port closed), SAAS_ETIMEOUT (no answer), SAAS_EBACKEND (refused, or a
 * wrong answer) otherwise, and the caller does them over SSH instead.
 */
int saas__lv_control_fixup(const char *vmdir, const char *hostname, const char *seed_hex, int timeout_ms);

#endif
