/*
 * Internal: per-VM egress: first what the rest of the driver calls, then
 * what egress.c (the nftables side) and resolver.c (the DNS resolver of
 * policy VMs) share.
 */
#ifndef SAAS_DRIVER_LIBVIRT_EGRESS_H
#define SAAS_DRIVER_LIBVIRT_EGRESS_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver/libvirt/dns.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/libvirt_driver.h"

/* ---- per-VM egress (egress.c, resolver.c, dns.c) -------------------------------------------- */

/* Rules in one list of a policy, and how long a name may be (docs/sandboxes.md, "Network policy"). */
#define EGRESS_RULES_MAX 64
/* What an answered address stays allowed for: its TTL, clamped to this range (seconds). */
#define EGRESS_TTL_MIN 60
#define EGRESS_TTL_MAX 3600
/* Addresses learned from lookups that one VM holds at once, per family. */
#define EGRESS_LEARNED_MAX 4096

struct saas__dns_addr;

/*
 * May a policy VM look name up? Not when a deny rule matches it, else when an
 * allow rule does: "*" matches every name, "*.suffix" every name strictly
 * below suffix, a name itself only; CIDRs match no name.
 */
bool saas__lv_egress_name_allowed(const char *const *allow, const char *const *deny, const char *name);

/*
 * Is net one the driver can enforce? Rules as driver.h says the core
 * normalises them, at most EGRESS_RULES_MAX per list. SAAS_OK or SAAS_EINVAL
 * saying which rule. (Checked again here: CIDRs go into nft's input.)
 */
int saas__lv_egress_check(const saas_vm_network *net);
/*
 * SAAS_ENOTSUP for a tenant who asked for what needs policies (what: "network
 * policies", "changes to a running sandbox's network") on a driver that has
 * none: plain words of the arguments' class (what was asked cannot be had
 * here), so that they reach the tenant, as a driver's class would not. Why it has none
 * (d->egress_why: the host's nft, its uid, its resolver) was logged at open.
 */
int saas__lv_egress_refused(const char *what);

/*
 * The egress table: the guard's sets (saas__lv_guard_sets), and two maps from
 * a QEMU's uid to its chains, one in the output filter hook (before the
 * guard's) and one in the output nat hook. An atomic replace of the whole
 * table. Free with free(); NULL when out of memory.
 */
char *saas__lv_egress_table_text(const char *table, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                                 size_t n_host6);

/*
 * One uid's rules for net (mode, CIDR rules; names are the resolver's), with
 * its resolver on loopback port dns_port under a policy: its sets and chains
 * made or emptied and filled, its map entries set, its counter kept; one
 * atomic transaction. Free with free(); NULL when out of memory.
 */
char *saas__lv_egress_vm_text(const char *table, unsigned int uid, const saas_vm_network *net,
                              unsigned int dns_port);
/* Everything of uid's gone from the table (whatever of it was there). */
char *saas__lv_egress_remove_text(const char *table, unsigned int uid);

/*
 * Start per-VM egress when it can hold (VMs confined to uids of their own and
 * the guard installed): the table, and the resolver's thread. Otherwise
 * d->egress stays NULL and d->egress_why says why. Fails only when out of
 * memory or the upstream option is bad.
 */
int saas__lv_egress_open(struct drv *d, const char *state_dir);
/* Stop the resolver; the table stays while a VM has rules in it (the next open replaces it), else it goes. */
void saas__lv_egress_close(struct drv *d);

/*
 * Give VM name (its QEMU's uid) the egress of net (NULL: isolated). A VM made
 * isolated (restricted: slirp's restrict=on) can only stay so. Before the
 * VM starts and at any time after; atomic. SAAS_ENOTSUP saying why when
 * there is no per-VM egress here.
 */
int saas__lv_egress_vm_set(struct drv *d, const char *name, unsigned int uid, const saas_vm_network *net,
                           bool restricted);
/* Forget VM name's egress and remove its uid's rules. */
void saas__lv_egress_vm_remove(struct drv *d, const char *name);
/* VM name's counters; zeros for a VM egress does not know. */
int saas__lv_egress_vm_stats(struct drv *d, const char *name, saas_vm_network_stats *out);
/* Is the table still loaded? If not (a flushed ruleset), load it and every VM's rules again. */
int saas__lv_egress_ensure(struct drv *d);

/* Upstream resolvers the resolver asks: the driver option dns_upstream, else resolv.conf's first ones. */
#define EGRESS_UPSTREAMS_MAX 3
/*
 * Those upstreams, into up (room for EGRESS_UPSTREAMS_MAX) and *n: for this
 * machine's resolver and for the servers' end of a VM host's egress
 * (egress_host.h). SAAS_EINVAL when dns_upstream is bad; none found is
 * logged, and every lookup is then answered SERVFAIL.
 */
int saas__lv_egress_upstreams(struct drv *d, struct sockaddr_storage *up, unsigned int *n);
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
	unsigned int policy_vms;         /* of which resolve through us (a policy; on a VM host, internet too): a share */
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
	int netlink_refused;             /* atomic: counters are not ours to read over netlink (no CAP_NET_ADMIN) */
};

/* Under e->mu. */
struct evm *saas__lv_egress_find_uid(struct saas__lv_egress *e, unsigned int uid);

/*
 * The same on any list of accounts (the servers' end of VM hosts keeps its
 * own, egress_host.c): the entry of id, made unreferenced when missing (NULL:
 * out of memory); a dropped when nothing refers to it; the pool's share.
 */
struct eacct *saas__lv_acct_get(struct eacct **list, const char *id);
void saas__lv_acct_drop(struct eacct **list, struct eacct *a);
unsigned int saas__lv_acct_share(const struct eacct *list);

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

/*
 * net checked (saas__lv_egress_check) and, under a policy, its lists copied
 * into *allow and *deny (else both NULL). SAAS_OK, SAAS_EINVAL, SAAS_ENOMEM.
 */
int saas__lv_egress_take(const saas_vm_network *net, char ***allow, char ***deny);
/* A policy's rule list copied (NULL-terminated; NULL when out of memory), and freed (NULL-safe). */
char **saas__lv_rules_dup(const char *const *rules);
void saas__lv_rules_free(char **rules);

/* Addresses of one answer that a VM learns; an answer with more is refused (SERVFAIL). */
#define EGRESS_ANSWER_ADDRS_MAX 64
struct saas__lv_answer_addrs {
	struct saas__dns_addr a[EGRESS_ANSWER_ADDRS_MAX];
	size_t n;
};
/* saas__dns_answer_walk's callback gathering into a struct saas__lv_answer_addrs (ud). */
int saas__lv_answer_collect(void *ud, const struct saas__dns_addr *a);

/*
 * Send a guest's query (len bytes at msg, its id in the first two bytes,
 * left as it was) to upstream up under a fresh random id (*id), from a fresh
 * UDP socket connected to up (only that address can answer it). The
 * socket, or -1.
 */
int saas__lv_dns_ask(const struct sockaddr_storage *up, uint8_t *msg, size_t len, uint16_t *id);

/* The resolver (resolver.c): its thread, and each policy VM's sockets. */
int saas__lv_resolver_start(struct drv *d);
void saas__lv_resolver_stop(struct drv *d);
/* Open v's sockets on a free loopback port (v->port); under e->mu. */
int saas__lv_resolver_bind(struct evm *v);
/* Close v's sockets; its queries in flight are dropped by the thread. Under e->mu. */
void saas__lv_resolver_unbind(struct evm *v);

#endif
