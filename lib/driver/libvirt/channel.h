/*
 * Internal: how the engine reaches a VM's control port (channel.c): the
 * socket in its directory on this machine, or on a remote host its
 * virtio-serial channel, opened through libvirt (virDomainOpenChannel) over
 * the connection the driver already has.
 */
#ifndef SAAS_DRIVER_LIBVIRT_CHANNEL_H
#define SAAS_DRIVER_LIBVIRT_CHANNEL_H

#include "driver/libvirt/libvirt_driver.h"
#include "transport/control.h"

/*
 * How long an open waits while the host says the channel is in use: the
 * engine's own previous connection, closed a moment ago, is torn down by
 * libvirt's event loop; a channel another engine holds (a VM of the
 * cluster made through another server) is not waited for longer.
 */
#define CHANNEL_BUSY_WAIT_MS 1000
/* How soon the pump tries again a send put off because a call had the host's connection (rpc.h). */
#define CHANNEL_RETRY_MS 5
/* What the pump holds each way between the engine's socket and libvirt's stream. */
#define CHANNEL_BUF_BYTES (64 * 1024)

/* The way to VM name's control port (its directory here: dir), filled into w, which must outlive its use. */
struct saas__lv_way {
	struct saas__ctl_way way;
	struct drv *d;
	const char *name;
	int open_rc; /* the remote channel's last open: SAAS_OK, an error, or 1 (not asked) */
};
const struct saas__ctl_way *saas__lv_ctl_way(struct saas__lv_way *w, struct drv *d, const char *name, const char *dir);

/*
 * VM name's control channel on a remote host: *fd, the engine's end of a
 * socket pair whose other end libvirt's event loop pumps to and from the
 * channel's stream. SAAS_OK; SAAS_EBUSY (the host holds it for another
 * engine past CHANNEL_BUSY_WAIT_MS); SAAS_EBACKEND (no such VM, no channel,
 * the host refused it); SAAS_ENOMEM, SAAS_EIO. Closing *fd closes the channel.
 */
int saas__lv_channel_open(struct drv *d, const char *name, int *fd);
/*
 * The same for VM name's channel port (CONTROL_PORT_NAME, or the egress
 * channel's MUX_PORT_NAME), its errors saying what (e.g. "egress").
 */
int saas__lv_channel_open_port(struct drv *d, const char *name, const char *port, const char *what, int *fd);

/* Wait (a second at most) until the pumps of closed channels have let their streams go: at the driver's close. */
void saas__lv_channels_drain(void);

#endif
