/*
 * Internal: what egress.c (the nftables side of per-VM egress) and
 * resolver.c (the DNS resolver of policy VMs) share. libvirt_driver.h has
 * what the rest of the driver calls.
 */
#ifndef SAAS_DRIVER_LIBVIRT_EGRESS_H
#define SAAS_DRIVER_LIBVIRT_EGRESS_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver/libvirt/dns.h"
#include "driver/libvirt/libvirt_driver.h"

/* Upstream resolvers the resolver asks: the driver option dns_upstream, else resolv.conf's first ones. */
#define EGRESS_UPSTREAMS_MAX 3
/*
 * Queries waiting for an upstream, per VM and in all: more are answered
 * SERVFAIL. The pool is shared evenly by the accounts that have policy VMs
 * here, whatever their number of VMs, so that one account asking a
 * nameserver that never answers (its lookups held to the upstream's
 * deadline) cannot take the others' share; with very many accounts each
 * still gets EGRESS_PENDING_ACCOUNT_MIN and the pool grows to that.
 */
#define EGRESS_PENDING_VM 32
#define EGRESS_PENDING_MAX 256
#define EGRESS_PENDING_ACCOUNT_MIN 8
/* TCP connections from one VM's guest at once, and how long one may stay idle. */
#define EGRESS_TCP_VM 4
#define EGRESS_TCP_IDLE_MS 10000
/* How long an upstream has to answer before the next is asked (then SERVFAIL). */
#define EGRESS_UPSTREAM_MS 2500
/* How often the resolver's thread checks that the tables are still loaded. */
#define EGRESS_CHECK_MS 5000

/*
 * An account with VMs here (saas_vm_network.account; a VM made without one
 * is an account of its own): what its VMs have in flight. Referenced by its
 * VMs and by its queries in flight; it goes with the last of them.
 */
struct eacct {
	unsigned int vms;                /* its VMs in the list */
	unsigned int policy_vms;         /* of which under a policy: it has a share of the pool */
	unsigned int pending;            /* its queries in flight */
	struct eacct *next;
	char id[];
};

/* One VM's egress: its uid's rules and, under a policy, its resolver's sockets. */
struct evm {
	char name[SAAS_ID_MAX + 1];
	unsigned int uid;
	int mode;                        /* saas_vm_network_mode */
	bool restricted;                 /* made isolated: slirp's restrict=on, no way out to open later */
	char **allow, **deny;            /* POLICY: NULL-terminated copies */
	unsigned int port;               /* POLICY: the resolver's port on loopback (its DNS is redirected there) */
	int udp4, udp6, tcp4, tcp6;      /* POLICY: the resolver's sockets, -1 when closed */
	unsigned int pending, tcp_conns; /* in flight, to bound them */
	struct eacct *acct;              /* its account: never NULL once in the list */
	int64_t denied_lookups;
	struct evm *next;
};

struct resolver;

struct saas__lv_egress {
	char table[48];                  /* "aas_egress_<hash>": one per engine (state directory) */
	pthread_mutex_t mu;              /* the list, every VM's policy, and every nft load */
	struct evm *vms;
	struct eacct *accts;
	struct sockaddr_storage upstream[EGRESS_UPSTREAMS_MAX];
	unsigned int n_upstream;
	int wake;                        /* eventfd: the resolver's thread looks at the list again */
	int closing;                     /* atomic */
	pthread_t thread;
	bool thread_started;
	struct resolver *res;            /* the thread's own state */
};

/* Under e->mu. */
struct evm *saas__lv_egress_find_uid(struct saas__lv_egress *e, unsigned int uid);

/* Free a when nothing refers to it any more (no VM, no query in flight). Under e->mu. */
void saas__lv_egress_acct_drop(struct saas__lv_egress *e, struct eacct *a);

/*
 * How many queries one account may have in flight now: the pool's even
 * share among the accounts with policy VMs (EGRESS_PENDING_MAX, at least
 * EGRESS_PENDING_ACCOUNT_MIN each). Under e->mu.
 */
unsigned int saas__lv_egress_share(const struct saas__lv_egress *e);

/*
 * Put the addresses a policy VM's lookup answered into its uid's learned
 * sets, each for its TTL clamped to EGRESS_TTL_MIN..EGRESS_TTL_MAX, in one nft
 * transaction. Caller holds e->mu (so no policy swap runs in between).
 */
int saas__lv_egress_learn(struct drv *d, const struct evm *v, const struct saas__dns_addr *addrs, size_t n);

/* The resolver (resolver.c): its thread, and each policy VM's sockets. */
int saas__lv_resolver_start(struct drv *d);
void saas__lv_resolver_stop(struct drv *d);
/* Open v's sockets on a free loopback port (v->port); under e->mu. */
int saas__lv_resolver_bind(struct evm *v);
/* Close v's sockets; its queries in flight are dropped by the thread. Under e->mu. */
void saas__lv_resolver_unbind(struct evm *v);

#endif
