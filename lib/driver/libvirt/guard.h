/*
 * Internal: the network policy at open and the nftables guard (guard.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_GUARD_H
#define SAAS_DRIVER_LIBVIRT_GUARD_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- network policy and the guard (guard.c) -------------------------------------------------- */

/* Does GUEST_GROUP exist? Its id in *gid (may be NULL). */
bool saas__lv_guest_gid(gid_t *gid);

/* An IPv6 prefix: the address with every bit past len zero. */
struct saas__lv_prefix6 {
	struct in6_addr addr;
	unsigned int len;
};

/*
 * The host's own global IPv6 prefixes, from a getifaddrs() list: each IPv6
 * address masked to its netmask (no netmask: /128), without duplicates nor
 * prefixes inside another. Addresses the guard blocks by range anyway
 * (loopback, link-local, site-local, unique local, multicast, IPv4-mapped)
 * are left out. *out (free with free(); NULL when *n is 0) holds *n prefixes.
 * SAAS_OK, or SAAS_ENOMEM.
 */
int saas__lv_host_prefixes6(const struct ifaddrs *ifa, struct saas__lv_prefix6 **out, size_t *n);

/*
 * The guard's nftables ruleset for QEMU's group gid. resolv_conf is the text
 * of /etc/resolv.conf (may be NULL): its nameservers are the resolvers slirp
 * forwards guest DNS to, the only host-side addresses the guard lets through.
 * host6 (n_host6 of them) are the host's own global IPv6 prefixes
 * (saas__lv_host_prefixes6): the host's neighbours on them are reached by no
 * guest. Two rules carry a comment marking this exact ruleset, which
 * saas__lv_guard_ensure looks for. Free with free(); NULL when out of memory.
 */
char *saas__lv_guard_ruleset(unsigned int gid, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                             size_t n_host6);

/*
 * The host as the guard sees it now: the text of /etc/resolv.conf (NULL when
 * unreadable) and the host's global IPv6 prefixes (saas__lv_host_prefixes6).
 * Both freed by the caller. SAAS_OK; SAAS_ENOTSUP with why; SAAS_ENOMEM.
 */
int saas__lv_host_now(char **resolv_conf, struct saas__lv_prefix6 **host6, size_t *n_host6, char *why,
                      size_t why_len);

/*
 * A CIDR ("192.0.2.0/24", "2001:db8::/32"): its family (AF_INET or AF_INET6),
 * address (4 or 16 bytes of addr) and length. false when it is not one; a
 * CIDR with bits set past its length is read, and *canonical says whether
 * it was canonical.
 */
bool saas__lv_cidr_parse(const char *rule, int *family, uint8_t addr[16], unsigned int *len, bool *canonical);
/* Is addr (family's bytes) inside the CIDR rule? false when rule is not a CIDR of that family. */
bool saas__lv_cidr_contains(const char *rule, int family, const uint8_t *addr);
/* Do addr's first len bits match net's (both of one family's bytes, len within them)? */
bool saas__lv_prefix_has(const uint8_t *net, unsigned int len, const uint8_t *addr);

/*
 * Does the guard refuse addr (AF_INET: 4 bytes, AF_INET6: 16) by range
 * alone? Its blocked4 and blocked6 sets, the same list: what a guest's
 * connection through the servers (a VM host's, egress_host.c) may never
 * reach, as the guard's table refuses it on one machine. The host's own
 * addresses and prefixes are the caller's to check.
 */
bool saas__lv_guard_refuses(int family, const uint8_t *addr);

/* The nameservers of a resolv.conf text (may be NULL), as nft set elements ("a, b"): only well-formed addresses. */
void saas__lv_resolvers(const char *resolv_conf, saas__buf *v4, saas__buf *v6);

/*
 * The guard's sets, as nft declarations inside a table block: blocked4 and
 * blocked6 (never the internet), host6 (the host's prefixes), resolvers4 and
 * resolvers6 (r4, r6: saas__lv_resolvers's lists, may be ""). The egress
 * table (egress.c) declares the same, so that it can count per VM what the
 * guard would refuse anyway.
 */
void saas__lv_guard_sets(saas__buf *b, const char *r4, const char *r6, const struct saas__lv_prefix6 *host6,
                         size_t n_host6);

/*
 * Load rules (one transaction) with nft, from a file of this call's own in
 * d->dir (concurrent loads never read each other's half-written file), kept
 * afterwards as d->dir/keep for the operator when keep is not NULL.
 * SAAS_OK; SAAS_ENOTSUP with why; SAAS_ENOMEM.
 */
int saas__lv_nft_load(struct drv *d, const char *rules, const char *keep, char *why, size_t why_len);
/* What loads and lists the engine's tables: nft, or the aas-nft helper (argv[0] for saas__run). */
const char *saas__lv_nft(const struct drv *d);

/*
 * Install the guard when it can be relied on (the group exists, and either
 * the embedded driver as root or a system libvirtd with per-VM uids and
 * CAP_NET_ADMIN in the engine's ambient set; embedded says which), then choose the default policy of a spec that leaves it to
 * the driver (d->internet) from d->network. Fails only when network=internet
 * was asked for and cannot be guarded, or out of memory.
 */
int saas__lv_network_setup(struct drv *d, bool embedded);

/*
 * Before every internet guest: is the guard this engine would write still
 * loaded (its marked rules are there)? If not (an operator flushed the
 * ruleset, or the host's prefixes or resolvers changed), install it again.
 * SAAS_ENOTSUP, saying why, when there is no guard or it cannot be
 * reinstalled: never an unguarded internet guest.
 */
int saas__lv_guard_ensure(struct drv *d);

#endif
