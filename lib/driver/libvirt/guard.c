/*
 * The network policy and the guard. Slirp's connections are QEMU's own
 * sockets on the host, so an internet guest can reach whatever the host can:
 * its loopback services (the API, the database, libvirt), every host address,
 * and the networks behind it. QEMU therefore runs under GUEST_GROUP, and the
 * nftables table GUARD_TABLE rejects that group's new connections to
 * host-local addresses and to the ranges below; replies on connections made
 * to QEMU (the SSH forward) pass as established, and DNS passes to the host's
 * resolvers only (slirp forwards the guest's queries there). Anything may
 * flush the host's ruleset (a firewall reload runs "flush ruleset"), so every
 * internet create checks the guard is still there first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "driver/libvirt/conf.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/nftnl.h"
#include "util/file.h"
#include "util/spawn.h"

/* What the guard reads of /etc/resolv.conf at most: far more than any real one. */
#define RESOLV_CONF_MAX (64 << 10)

/*
 * Two rules of the ruleset carry the comment "GUARD_TABLE DIGEST", DIGEST
 * being the first GUARD_DIGEST_HEX hex digits of the SHA-256 of the ruleset
 * without them: finding both in the loaded table says this very guard is
 * there, whole chains and all.
 */
#define GUARD_DIGEST_HEX 16
#define GUARD_MARKER_SIZE (sizeof(GUARD_TABLE) + GUARD_DIGEST_HEX + 1)
#define GUARD_MARKS 2

/*
 * Never the internet: what IANA's special-purpose registries (RFC 6890) call
 * not globally reachable, cloud metadata services, and prefixes that embed an
 * IPv4 address a translator or tunnel on the host's path would deliver to,
 * past blocked4. Left reachable on purpose: the documentation ranges
 * (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20),
 * routed nowhere and the tests' stand-in for the internet; and the special
 * addresses IANA marks globally reachable (AS112, AMT, anycast relays).
 */
static const char *const guard_blocked_v4[] = {
	"0.0.0.0/8",        /* "this network": a connect to 0.0.0.0 lands on the host */
	"10.0.0.0/8",       /* private (RFC 1918) */
	"100.64.0.0/10",    /* carrier-grade NAT (RFC 6598): the provider's side of the host; Alibaba's metadata */
	"127.0.0.0/8",      /* loopback */
	"168.63.129.16/32", /* Azure's wire server (agent, health, metadata, DNS): public, but the host's own */
	"169.254.0.0/16",   /* link-local, and cloud metadata services (169.254.169.254) */
	"172.16.0.0/12",    /* private (RFC 1918) */
	"192.0.0.0/24",     /* IETF protocol assignments (RFC 6890): DS-Lite, NAT64 discovery, PCP to the local NAT */
	"192.168.0.0/16",   /* private (RFC 1918) */
	"198.18.0.0/15",    /* benchmarking (RFC 2544): used inside networks, e.g. a local proxy's fake addresses */
	"224.0.0.0/4",      /* multicast: looped back to the host's own listeners */
	"240.0.0.0/4",      /* reserved, and the limited broadcast */
};
static const char *const guard_blocked_v6[] = {
	"::/128",         /* unspecified: a connect to :: lands on the host */
	"::1/128",        /* loopback */
	"::ffff:0:0/96",  /* IPv4-mapped: leaves as IPv4 (blocked4 judges it), never valid on the wire */
	"64:ff9b::/96",   /* NAT64 well-known prefix (RFC 6052): 64:ff9b::10.0.0.1 becomes 10.0.0.1 */
	"64:ff9b:1::/48", /* NAT64 local-use prefix (RFC 8215): the same, at the operator's translator */
	"100::/64",       /* discard-only (RFC 6666): nothing to reach */
	"2001::/32",      /* Teredo (RFC 4380): a host tunnel delivers to the IPv4 address inside */
	"2001:2::/48",    /* benchmarking (RFC 5180): the twin of 198.18.0.0/15 */
	"2002::/16",      /* 6to4 (RFC 3056, deprecated): a host tunnel delivers to the IPv4 address inside */
	"5f00::/16",      /* SRv6 segment identifiers (RFC 9602): run functions inside the operator's network */
	"fc00::/7",       /* unique local (private), and cloud metadata services (fd00:ec2::254) */
	"fe80::/10",      /* link-local */
	"fec0::/10",      /* site-local (deprecated, still routed by some) */
	"ff00::/8",       /* multicast */
};

bool saas__lv_cidr_parse(const char *rule, int *family, uint8_t addr[16], unsigned int *len, bool *canonical)
{
	char text[INET6_ADDRSTRLEN + 1], *end;
	const char *slash = strchr(rule, '/');
	size_t alen = slash ? (size_t)(slash - rule) : 0;
	unsigned long bits;
	uint8_t masked[16];
	int f;

	if (!slash || alen == 0 || alen >= sizeof(text) || slash[1] < '0' || slash[1] > '9')
		return false;
	memcpy(text, rule, alen);
	text[alen] = '\0';
	f = strchr(text, ':') ? AF_INET6 : AF_INET;
	memset(addr, 0, 16);
	if (inet_pton(f, text, addr) != 1)
		return false;
	errno = 0;
	bits = strtoul(slash + 1, &end, 10);
	if (*end || errno || bits > (f == AF_INET ? 32u : 128u))
		return false;
	memcpy(masked, addr, 16);
	for (unsigned int i = 0; i < 16; i++) {
		unsigned int b = bits > i * 8 ? (unsigned int)bits - i * 8 : 0;
		if (b < 8)
			masked[i] &= (uint8_t)(0xff << (8 - b));
	}
	*family = f;
	*len = (unsigned int)bits;
	*canonical = memcmp(masked, addr, 16) == 0;
	return true;
}

bool saas__lv_cidr_contains(const char *rule, int family, const uint8_t *addr)
{
	uint8_t net[16];
	unsigned int len;
	bool canonical;
	int f;

	return saas__lv_cidr_parse(rule, &f, net, &len, &canonical) && f == family && saas__lv_prefix_has(net, len, addr);
}

bool saas__lv_prefix_has(const uint8_t *net, unsigned int len, const uint8_t *addr)
{
	for (unsigned int i = 0; i < len / 8; i++)
		if (net[i] != addr[i])
			return false;
	return len % 8 == 0 || ((net[len / 8] ^ addr[len / 8]) & (uint8_t)(0xff << (8 - len % 8))) == 0;
}

bool saas__lv_guard_refuses(int family, const uint8_t *addr)
{
	const char *const *list = family == AF_INET ? guard_blocked_v4 : guard_blocked_v6;
	size_t n = family == AF_INET ? sizeof(guard_blocked_v4) / sizeof(guard_blocked_v4[0])
	                             : sizeof(guard_blocked_v6) / sizeof(guard_blocked_v6[0]);

	if (family != AF_INET && family != AF_INET6)
		return true;
	for (size_t i = 0; i < n; i++)
		if (saas__lv_cidr_contains(list[i], family, addr))
			return true;
	return false;
}

bool saas__lv_guest_gid(gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096];

	if (getgrnam_r(GUEST_GROUP, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	if (gid)
		*gid = res->gr_gid;
	return true;
}

void saas__lv_resolvers(const char *resolv_conf, saas__buf *v4, saas__buf *v6)
{
	char line[512], addr[64];
	unsigned char bin[sizeof(struct in6_addr)];

	for (const char *p = resolv_conf; p && *p;) {
		size_t n = strcspn(p, "\n");
		char *pct;
		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), p);
		p += n + (p[n] == '\n');
		if (sscanf(line, " nameserver %63s", addr) != 1)
			continue;
		if ((pct = strchr(addr, '%')))
			*pct = '\0';
		if (inet_pton(AF_INET, addr, bin) == 1)
			saas__buf_printf(v4, "%s%s", v4->len ? ", " : "", addr);
		else if (inet_pton(AF_INET6, addr, bin) == 1)
			saas__buf_printf(v6, "%s%s", v6->len ? ", " : "", addr);
	}
}

/* Keep the first len bits of a. */
static void mask6(struct in6_addr *a, unsigned int len)
{
	for (unsigned int i = 0; i < sizeof(a->s6_addr); i++) {
		unsigned int bits = len > i * 8 ? len - i * 8 : 0;
		if (bits < 8)
			a->s6_addr[i] &= (uint8_t)(0xff << (8 - bits));
	}
}

/* Is a inside p? */
static bool prefix_in(const struct saas__lv_prefix6 *a, const struct saas__lv_prefix6 *p)
{
	struct in6_addr m = a->addr;

	if (p->len > a->len)
		return false;
	mask6(&m, p->len);
	return memcmp(&m, &p->addr, sizeof(m)) == 0;
}

/* The length of an IPv6 netmask (its leading ones); none is a single address. */
static unsigned int mask_len(const struct sockaddr *netmask)
{
	const struct sockaddr_in6 *m = (const struct sockaddr_in6 *)(const void *)netmask;
	unsigned int i = 0, len = 0;

	if (!netmask || netmask->sa_family != AF_INET6)
		return 128;
	for (; i < sizeof(m->sin6_addr.s6_addr) && m->sin6_addr.s6_addr[i] == 0xff; i++)
		len += 8;
	if (i < sizeof(m->sin6_addr.s6_addr))
		for (unsigned int b = m->sin6_addr.s6_addr[i]; b & 0x80; b = (b << 1) & 0xff)
			len++;
	return len;
}

/* An address whose neighbours only the host's prefix list can block (the ranges above cover the rest). */
static bool global6(const struct in6_addr *a)
{
	return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_LOOPBACK(a) && !IN6_IS_ADDR_LINKLOCAL(a) &&
	        !IN6_IS_ADDR_SITELOCAL(a) && !IN6_IS_ADDR_MULTICAST(a) && !IN6_IS_ADDR_V4MAPPED(a) &&
	        (a->s6_addr[0] & 0xfe) != 0xfc;
}

int saas__lv_host_prefixes6(const struct ifaddrs *ifa, struct saas__lv_prefix6 **out, size_t *n)
{
	struct saas__lv_prefix6 *v = NULL;
	size_t len = 0, cap = 0;

	for (; ifa; ifa = ifa->ifa_next) {
		struct saas__lv_prefix6 p;
		size_t kept = 0;
		bool inside = false;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET6)
			continue;
		p.addr = ((const struct sockaddr_in6 *)(const void *)ifa->ifa_addr)->sin6_addr;
		if (!global6(&p.addr))
			continue;
		p.len = mask_len(ifa->ifa_netmask);
		mask6(&p.addr, p.len);
		for (size_t i = 0; i < len && !inside; i++)
			inside = prefix_in(&p, &v[i]);
		if (inside)
			continue;
		/* The new prefix holds these: an nft interval set refuses overlapping elements. */
		for (size_t i = 0; i < len; i++)
			if (!prefix_in(&v[i], &p))
				v[kept++] = v[i];
		len = kept;
		if (SAAS__ARRAY_RESERVE(v, cap, len + 1) < 0) {
			free(v);
			return SAAS_ENOMEM;
		}
		v[len++] = p;
	}
	*out = v;
	*n = len;
	return SAAS_OK;
}

void saas__lv_guard_sets(saas__buf *b, const char *r4, const char *r6, const struct saas__lv_prefix6 *host6,
                         size_t n_host6)
{
	char addr[INET6_ADDRSTRLEN];

	saas__buf_puts(b, "\tset blocked4 {\n\t\ttype ipv4_addr; flags interval;\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(guard_blocked_v4) / sizeof(guard_blocked_v4[0]); i++)
		saas__buf_printf(b, "%s%s", i ? ", " : "", guard_blocked_v4[i]);
	saas__buf_puts(b, " }\n\t}\n\tset blocked6 {\n\t\ttype ipv6_addr; flags interval;\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(guard_blocked_v6) / sizeof(guard_blocked_v6[0]); i++)
		saas__buf_printf(b, "%s%s", i ? ", " : "", guard_blocked_v6[i]);
	/* The host's own prefixes: its neighbours there are no more the internet than 10.0.0.0/8 is. */
	saas__buf_puts(b, " }\n\t}\n\tset host6 {\n\t\ttype ipv6_addr; flags interval;\n");
	if (n_host6) {
		saas__buf_puts(b, "\t\telements = { ");
		for (size_t i = 0; i < n_host6; i++)
			saas__buf_printf(b, "%s%s/%u", i ? ", " : "",
			                 inet_ntop(AF_INET6, &host6[i].addr, addr, sizeof(addr)), host6[i].len);
		saas__buf_puts(b, " }\n");
	}
	saas__buf_puts(b, "\t}\n\tset resolvers4 {\n\t\ttype ipv4_addr;\n");
	if (r4[0])
		saas__buf_printf(b, "\t\telements = { %s }\n", r4);
	saas__buf_puts(b, "\t}\n\tset resolvers6 {\n\t\ttype ipv6_addr;\n");
	if (r6[0])
		saas__buf_printf(b, "\t\telements = { %s }\n", r6);
	saas__buf_puts(b, "\t}\n");
}

/* The ruleset, its two marked rules commented with marker (may be ""). */
static char *ruleset(unsigned int gid, const char *r4, const char *r6, const struct saas__lv_prefix6 *host6,
                     size_t n_host6, const char *marker)
{
	saas__buf b = SAAS__BUF_INIT;

	/* Created, deleted and made again in one transaction: an atomic replace, whether it existed or not. */
	saas__buf_puts(&b, "# Written by libsaas (the libvirt driver's guard); see docs/sandboxes.md.\n"
	                   "table inet " GUARD_TABLE " {}\ndelete table inet " GUARD_TABLE "\n"
	                   "table inet " GUARD_TABLE " {\n");
	saas__lv_guard_sets(&b, r4, r6, host6, n_host6);
	/*
	 * Only packets of QEMU's sockets go to the guest chain: the host's own
	 * traffic, and packets of no socket (kernel replies), are never touched.
	 * The output chain comes last, so that both marked rules end the
	 * listing saas__lv_guard_ensure reads.
	 */
	saas__buf_printf(&b,
	                 "\tchain guest {\n"
	                 "\t\tct state established,related accept\n"
	                 "\t\tip daddr @resolvers4 meta l4proto { tcp, udp } th dport 53 accept\n"
	                 "\t\tip6 daddr @resolvers6 meta l4proto { tcp, udp } th dport 53 accept\n"
	                 /* A policy guest's DNS, which its engine's egress table redirects to its resolver on loopback. */
	                 "\t\tmeta l4proto { tcp, udp } ct original proto-dst 53 ct status dnat ip daddr 127.0.0.1 accept\n"
	                 "\t\tmeta l4proto { tcp, udp } ct original proto-dst 53 ct status dnat ip6 daddr ::1 accept\n"
	                 "\t\tfib daddr type { local, broadcast, anycast, multicast } counter reject with icmpx "
	                 "type admin-prohibited\n"
	                 "\t\tip daddr @blocked4 counter reject with icmpx type admin-prohibited\n"
	                 "\t\tip6 daddr @blocked6 counter reject with icmpx type admin-prohibited\n"
	                 "\t\tip6 daddr @host6 counter reject with icmpx type admin-prohibited comment \"%s\"\n"
	                 "\t}\n"
	                 "\tchain output {\n"
	                 "\t\ttype filter hook output priority filter; policy accept;\n"
	                 "\t\tmeta skgid %u jump guest comment \"%s\"\n"
	                 "\t}\n"
	                 "}\n",
	                 marker, gid, marker);
	return saas__buf_detach(&b, NULL);
}

/* The ruleset, and in marker (GUARD_MARKER_SIZE bytes) the comment that marks it. */
static char *guard_ruleset(unsigned int gid, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                           size_t n_host6, char *marker)
{
	saas__buf r4 = SAAS__BUF_INIT, r6 = SAAS__BUF_INIT;
	char digest[65], *rules;

	saas__lv_resolvers(resolv_conf, &r4, &r6);
	rules = ruleset(gid, r4.len ? r4.data : "", r6.len ? r6.data : "", host6, n_host6, "");
	if (rules) {
		saas__sha256_hex(digest, rules, strlen(rules));
		snprintf(marker, GUARD_MARKER_SIZE, GUARD_TABLE " %.*s", GUARD_DIGEST_HEX, digest);
		free(rules);
		rules = ruleset(gid, r4.len ? r4.data : "", r6.len ? r6.data : "", host6, n_host6, marker);
	}
	saas__buf_free(&r4);
	saas__buf_free(&r6);
	return rules;
}

char *saas__lv_guard_ruleset(unsigned int gid, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                             size_t n_host6)
{
	char marker[GUARD_MARKER_SIZE];

	return guard_ruleset(gid, resolv_conf, host6, n_host6, marker);
}

int saas__lv_host_now(char **resolv_conf, struct saas__lv_prefix6 **host6, size_t *n_host6, char *why,
                      size_t why_len)
{
	struct ifaddrs *ifa = NULL;
	int rc;

	*resolv_conf = NULL;
	*host6 = NULL;
	*n_host6 = 0;
	/* Without the host's addresses its neighbours cannot be blocked: no guard then. */
	if (getifaddrs(&ifa) < 0) {
		snprintf(why, why_len, "cannot read the host's addresses (getifaddrs): %s", strerror(errno));
		return SAAS_ENOTSUP;
	}
	rc = saas__lv_host_prefixes6(ifa, host6, n_host6);
	freeifaddrs(ifa);
	if (rc == SAAS_OK)
		/* The system's, often a link (a resolver daemon's stub file): followed. None when it cannot be read. */
		(void)saas__file_read(resolv_conf, NULL, AT_FDCWD, "/etc/resolv.conf", RESOLV_CONF_MAX, SAAS__FILE_QUIET);
	return rc;
}

/*
 * The guard for the host as it is now: QEMU's group, the resolvers of
 * /etc/resolv.conf (slirp forwards guest DNS there; none when it cannot be
 * read), the host's IPv6 prefixes. SAAS_OK; SAAS_ENOTSUP with why; SAAS_ENOMEM.
 */
static int guard_rules_now(char **rules, char *marker, char *why, size_t why_len)
{
	struct saas__lv_prefix6 *host6 = NULL;
	char *resolv_conf = NULL;
	size_t n_host6 = 0;
	gid_t gid = 0;
	int rc;

	*rules = NULL;
	if (!saas__lv_guest_gid(&gid)) {
		snprintf(why, why_len, "the group " GUEST_GROUP " does not exist (create it: groupadd --system "
		         GUEST_GROUP ")");
		return SAAS_ENOTSUP;
	}
	if ((rc = saas__lv_host_now(&resolv_conf, &host6, &n_host6, why, why_len)) < 0)
		return rc;
	if (!(*rules = guard_ruleset((unsigned int)gid, resolv_conf, host6, n_host6, marker)))
		rc = SAAS_ENOMEM;
	free(resolv_conf);
	free(host6);
	return rc;
}

const char *saas__lv_nft(const struct drv *d)
{
	return d->nft ? d->nft : "nft";
}

int saas__lv_nft_load(struct drv *d, const char *rules, const char *keep, char *why, size_t why_len)
{
	const char *argv[] = { saas__lv_nft(d), "-f", NULL, NULL };
	char *tmp = NULL, *path = NULL, *out = NULL;
	int rc = SAAS_OK;

	if (!(path = saas__lv_path_join(d->dir, keep ? keep : "nft"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	/* The rules nft loads, beside the file they are kept as: renamed over it once loaded, never before. */
	if (saas__file_write_tmp(&tmp, AT_FDCWD, path, rules, strlen(rules), 0600, 0) < 0) {
		snprintf(why, why_len, "%s", saas_error_last()->message);
		saas__error_clear();
		rc = SAAS_ENOTSUP;
		goto out;
	}
	argv[2] = tmp;
	if (saas__run(argv, &out) < 0) {
		snprintf(why, why_len, "loading nftables rules failed: %s", saas_error_last()->message);
		saas__error_clear();
		rc = SAAS_ENOTSUP;
		goto out;
	}
	if (keep) {
		/* As before: rules loaded but not kept are only not kept (the next load writes them again). */
		if (saas__file_commit(AT_FDCWD, tmp, path) < 0)
			saas__error_clear();
		free(tmp);
		tmp = NULL;
	}
out:
	if (tmp)
		unlink(tmp);
	free(tmp);
	free(path);
	free(out);
	return rc;
}

/*
 * Can this engine load rules, and with what (d->nft)? Root can, with nft; an
 * unprivileged engine can when CAP_NET_ADMIN is in its ambient set, which its
 * children (nft) keep across exec: a capability only effective here would be
 * lost there. Without either, the aas-nft helper can, when it is installed
 * with that capability (its file's) and this engine may run it: it loads
 * only rules of the engine's own tables, and the engine holds nothing.
 */
static bool nft_capable(struct drv *d)
{
	const char *helper = d->nft_helper ? d->nft_helper : SAAS_NFT_HELPER;
	const char *argv[] = { helper, "--check", NULL };

	d->nft = NULL;
	if (geteuid() == 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_ADMIN, 0, 0) == 1)
		return true;
	if (access(helper, X_OK) < 0)
		return false;
	if (saas__run(argv, NULL) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "%s does not hold CAP_NET_ADMIN (setcap cap_net_admin+ep %s)", helper,
		             helper);
		saas__error_clear();
		return false;
	}
	d->nft = helper;
	saas__lv_log(d, SAAS_LOG_INFO, "nftables: the engine's tables are loaded by %s", helper);
	return true;
}

/*
 * Install the guard, replacing any older one (every engine on the host writes
 * the same table). The guard matches QEMU's group, so it holds only where the
 * engine decides that group: the embedded driver as root (its qemu.conf), or
 * per-VM labels on a system libvirtd (every VM's QEMU under GUEST_GROUP).
 * Sets d->guard, or d->guard_why. Never fails the open: an engine without a
 * guard still runs isolated guests.
 */
static int guard_install(struct drv *d, bool embedded)
{
	char *rules = NULL, marker[GUARD_MARKER_SIZE];
	int rc = SAAS_OK;

	d->guard = false;
	if (embedded && geteuid() != 0) {
		snprintf(d->guard_why, sizeof(d->guard_why), "the engine does not run as root, so it cannot "
		         "install the nftables guard nor run QEMU under the group " GUEST_GROUP);
		goto out;
	}
	if (!embedded && !d->cf.confined) {
		snprintf(d->guard_why, sizeof(d->guard_why), "QEMU does not run under a uid of its own per VM on this "
		         "libvirt (that needs the system libvirtd and the driver option uids), so its qemu.conf, not the "
		         "engine, decides QEMU's group: the guard cannot be relied on");
		goto out;
	}
	if (!embedded && !d->cf.guest_gid) {
		snprintf(d->guard_why, sizeof(d->guard_why), "the group " GUEST_GROUP " does not exist, so each VM's "
		         "QEMU runs under its own uid as its group, which the guard cannot match (create it: groupadd "
		         "--system " GUEST_GROUP ")");
		goto out;
	}
	if (!nft_capable(d)) {
		snprintf(d->guard_why, sizeof(d->guard_why), "the engine has no CAP_NET_ADMIN to install the nftables "
		         "guard with, nor an aas-nft helper that has it (%s; as a systemd unit: install the helper with "
		         "its capability, or AmbientCapabilities=CAP_NET_ADMIN; docs/operations.md)",
		         d->nft_helper ? d->nft_helper : SAAS_NFT_HELPER);
		goto out;
	}
	if ((rc = guard_rules_now(&rules, marker, d->guard_why, sizeof(d->guard_why))) == SAAS_OK &&
	    (rc = saas__lv_nft_load(d, rules, "guard.nft", d->guard_why, sizeof(d->guard_why))) == SAAS_OK)
		d->guard = true;
out:
	free(rules);
	/* A guard that cannot be had is a reason in guard_why, not a failed open. */
	return rc == SAAS_ENOMEM ? rc : SAAS_OK;
}

int saas__lv_guard_ensure(struct drv *d)
{
	const char *argv[] = { saas__lv_nft(d), "list", "table", "inet", GUARD_TABLE, NULL };
	char *rules = NULL, *out = NULL, marker[GUARD_MARKER_SIZE], needle[GUARD_MARKER_SIZE + 16], why[512];
	bool listed;
	unsigned int marked = 0;
	int rc, found = 0;

	if (!d->guard)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "network policy internet is refused: %s",
		                   d->guard_why);
	if ((rc = guard_rules_now(&rules, marker, why, sizeof(why))) < 0)
		goto out;
	/*
	 * All is well when the table has both marked rules: asked of the kernel
	 * where this process runs nft itself (one dump of the table's rules, no
	 * process: a burst of creates checks it once each), else one nft run.
	 * A netlink answer that is not "both" goes to nft too, which says why.
	 */
	if (!d->nft && saas__nftnl_rules_marked(GUARD_TABLE, marker, &marked) == 0 && marked == GUARD_MARKS)
		goto out;
	snprintf(needle, sizeof(needle), "comment \"%s\"", marker);
	if ((listed = saas__run(argv, &out) == 0))
		for (const char *p = out; (p = strstr(p, needle)); p += strlen(needle))
			found++;
	else
		saas__error_clear();
	if (found == GUARD_MARKS)
		goto out;
	saas__lv_log(d, SAAS_LOG_WARN, "the nftables guard (table inet " GUARD_TABLE ") is %s: installing it again",
	             listed ? "not the one this engine would write (an edit, or the host's addresses or resolvers "
	                      "changed)" : "gone (was the ruleset flushed?)");
	rc = saas__lv_nft_load(d, rules, "guard.nft", why, sizeof(why));
out:
	if (rc == SAAS_ENOTSUP)
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "network policy internet is refused: the "
		                 "nftables guard cannot be checked or installed again: %s", why);
	free(rules);
	free(out);
	return rc;
}

/* Does the host have a default route (IPv4 or IPv6)? */
static bool default_route(void)
{
	char line[512];
	bool found = false;
	FILE *f;

	if ((f = fopen("/proc/net/route", "re"))) {
		unsigned long dst, flags, mask;
		char iface[64];
		/* Iface Destination Gateway Flags RefCnt Use Metric Mask ... */
		while (!found && fgets(line, sizeof(line), f))
			if (sscanf(line, "%63s %lx %*x %lx %*d %*d %*d %lx", iface, &dst, &flags, &mask) == 4)
				found = dst == 0 && mask == 0 && (flags & 0x1) && !(flags & 0x200);
		fclose(f);
	}
	if (!found && (f = fopen("/proc/net/ipv6_route", "re"))) {
		char dst[64];
		unsigned int plen;
		unsigned long flags;
		/* dst plen src src_plen nexthop metric refcnt use flags iface; RTF_UP 0x1, RTF_REJECT 0x200 */
		while (!found && fgets(line, sizeof(line), f))
			if (sscanf(line, "%63s %x %*s %*x %*s %*x %*x %*x %lx", dst, &plen, &flags) == 3)
				found = plen == 0 && strspn(dst, "0") == 32 && (flags & 0x1) && !(flags & 0x200);
		fclose(f);
	}
	return found;
}

int saas__lv_network_setup(struct drv *d, bool embedded)
{
	int rc;

	if ((rc = guard_install(d, embedded)) < 0)
		return rc;
	/* Asked for by name, internet without the guard is refused, never given unguarded. */
	if (d->network == NET_INTERNET && !d->guard)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "network=internet, but %s", d->guard_why);
	if (d->network == NET_INTERNET) {
		d->internet = true;
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests get the internet by default (network=internet; guard "
		             "table inet " GUARD_TABLE ")");
	} else if (d->network == NET_ISOLATED) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated by default (network=isolated)%s%s",
		             d->guard ? "" : "; internet is refused: ", d->guard ? "" : d->guard_why);
	} else if (!d->guard) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated; internet is refused: %s", d->guard_why);
	} else if (!default_route()) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated by default: the host has no default route");
	} else {
		d->internet = true;
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests get the internet by default (guard table inet "
		             GUARD_TABLE ")");
	}
	return SAAS_OK;
}
