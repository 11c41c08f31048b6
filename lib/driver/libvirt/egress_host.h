/*
 * Internal: the servers' end of the egress channel of guests on VM hosts
 * (egress_host.c; the protocol is egress_mux.h). One thread per driver
 * serves every VM's channel: it decides each connection a guest opens with
 * that VM's policy, by the same rules as one machine's nftables and
 * resolver (egress.c's rule matching, the guard's ranges, resolver.c's
 * upstreams and answer walk), connects from this server and splices, and
 * answers the guest's DNS.
 */
#ifndef SAAS_DRIVER_LIBVIRT_EGRESS_HOST_H
#define SAAS_DRIVER_LIBVIRT_EGRESS_HOST_H

#include <sys/socket.h>

#include "driver/libvirt/egress.h"

/* How long a connect from the server may take before the guest is told UNREACHABLE. */
#define EGRESS_HOST_CONNECT_MS 10000
/* A channel that ended is opened again after 2 s, then 4, 8 ... up to a minute between tries. */
#define EGRESS_HOST_RETRY_MS 2000
#define EGRESS_HOST_RETRY_MAX_MS 60000

struct saas__lv_ehost;

/*
 * Start the thread. upstream: the resolvers the guests' lookups go to
 * (n_upstream of them, at most EGRESS_UPSTREAMS_MAX; none: every lookup is
 * answered SERVFAIL). d is for its log only. SAAS_OK, SAAS_ENOMEM, or
 * SAAS_EBACKEND when the thread cannot start.
 */
int saas__lv_ehost_start(struct saas__lv_ehost **out, struct drv *d, const struct sockaddr_storage *upstream,
                         unsigned int n_upstream);
/* Stop it: every channel and connection closed. NULL-safe. */
void saas__lv_ehost_stop(struct saas__lv_ehost *h);

/*
 * VM name's egress is net (NULL: isolated): made when it is new, its policy
 * swapped when not (what its lookups allowed under the old one is
 * forgotten; connections already open stay, as on one machine). SAAS_OK,
 * SAAS_EINVAL (saas__lv_egress_check), SAAS_ENOMEM.
 */
int saas__lv_ehost_set(struct saas__lv_ehost *h, const char *name, const saas_vm_network *net);

/*
 * Give VM name's channel to the thread: fd is a stream socket (the engine's
 * end of the pump of the VM's egress port, channel.c, or a test's socket
 * pair), taken in every case. A channel it had is closed with its
 * connections. SAAS_OK, or SAAS_ENOTFOUND when the VM was never set.
 */
int saas__lv_ehost_attach(struct saas__lv_ehost *h, const char *name, int fd);

/*
 * The VMs whose channel ended and is due to be opened again (at most max,
 * into names): the host's libvirtd restarted, the engine's pump broke, the
 * guest's end broke the protocol. Each is due again later, by the backoff
 * above, until an attach (or its removal).
 */
size_t saas__lv_ehost_lost(struct saas__lv_ehost *h, char (*names)[SAAS_ID_MAX + 1], size_t max);

/*
 * The host's connection died (back: and a new one is up): every channel,
 * a stream of the dead connection that may never be told, is closed and
 * lost; back, every lost one is due to be opened again at once.
 */
void saas__lv_ehost_conn_lost(struct saas__lv_ehost *h, bool back);

/*
 * Has VM name a channel (attached, not closed since, whether or not the
 * guest spoke yet)? 1 yes, 0 no, -1: the VM was never set.
 */
int saas__lv_ehost_channel(struct saas__lv_ehost *h, const char *name);

/* Forget VM name: its channel and connections closed. */
void saas__lv_ehost_remove(struct saas__lv_ehost *h, const char *name);

/*
 * VM name's counters: connections refused (by its policy or the guard) and
 * lookups refused by its policy; zeros for a VM never set. *live (may be
 * NULL): whether its channel is attached and speaking the protocol.
 */
int saas__lv_ehost_stats(struct saas__lv_ehost *h, const char *name, saas_vm_network_stats *out, bool *live);

#endif
