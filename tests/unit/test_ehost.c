/*
 * The servers' end of the egress channel of guests on VM hosts
 * (lib/driver/libvirt/egress_host.c) without a VM: its real thread, a
 * socket pair standing in for the channel (the test speaks the guest's
 * side of the protocol, its frames checked by the guest's own table), and
 * a test internet in network namespaces of the test's own. The test's
 * process moves into a namespace (the "server"), and a child into another
 * (the "internet", 198.51.100.2 and .3 on a veth pair, TEST-NET-2, routed
 * nowhere else; the server's side is 198.51.100.1; in IPv6, documentation
 * addresses: the veth's /64 is 2001:db8:a::/64, and 2001:db8:b::2 and ::3
 * are routed through it), where a nameserver answers allowed.test and
 * other.test (A and AAAA) and a TCP server on port 80 (both families) sends
 * what it is asked for and counts what it receives. Root only (77: skip).
 *
 * What it checks, by one machine's rules: a policy's lookups (allowed
 * answered and learned, others refused and counted), connections to
 * learned addresses and allow CIDRs, deny CIDRs, the guard (private,
 * link-local, loopback, this server's own address) whatever the mode,
 * isolation, a swap forgetting what lookups allowed; the same in IPv6 (and
 * the server's on-link neighbours, addresses that embed a refused IPv4 one,
 * the guest's end over IPv6); a megabyte each way
 * through one connection with its window, half-close and the CLOSE
 * handshake; the connection bound; a connect refused; a guest that breaks
 * the protocol losing its channel. Then the guest's own end
 * (images/guest/aas-egress.c) in a third namespace with the guest's
 * redirect as nftables rules: lookups over UDP and TCP and a download by a
 * plain client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aas-egress.h"
#include "driver/libvirt/egress_host.h"
#include "transport/egress_mux.h"

#define NET_SERVER "198.51.100.1"
#define NET_A "198.51.100.2"     /* allowed.test */
#define NET_B "198.51.100.3"     /* other.test */
#define NET_SERVER6 "2001:db8:a::1" /* the server's side: its /64 is on-link, so its neighbours are refused */
#define NET_LINK6 "2001:db8:a::2"   /* the internet's side of that /64 */
#define NET_A6 "2001:db8:b::2"      /* allowed.test, routed through NET_LINK6 */
#define NET_B6 "2001:db8:b::3"      /* other.test */
#define QTYPE_A 1
#define QTYPE_AAAA 28
#define BULK (1024 * 1024)

static pid_t internet = -1;
static struct drv drv;
static struct saas__lv_ehost *host;

static void quiet(void *ud, int level, const char *msg)
{
	(void)ud;
	(void)level;
	if (getenv("EHOST_LOG"))
		fprintf(stderr, "log: %s\n", msg);
	(void)msg;
}

/* ---- the internet (the child's namespace) ---------------------------------------------------- */

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 % 251);
}

/* One connection: "N\n" asks N bytes; then everything until EOF is counted and "got M\n" answers it. */
static void serve_tcp(int c)
{
	char line[32];
	size_t n = 0, got = 0;
	uint8_t buf[16384];
	ssize_t r;

	while (n < sizeof(line) - 1 && read(c, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = '\0';
	n = strtoul(line, NULL, 10);
	for (size_t off = 0; off < n;) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i);
		if ((r = write(c, buf, k)) <= 0)
			_exit(1);
		off += (size_t)r;
	}
	while ((r = read(c, buf, sizeof(buf))) > 0)
		got += (size_t)r;
	n = (size_t)snprintf(line, sizeof(line), "got %zu\n", got);
	if (write(c, line, n) != (ssize_t)n)
		_exit(1);
	_exit(0);
}

/*
 * allowed.test A 198.51.100.2 and AAAA 2001:db8:b::2, other.test A
 * 198.51.100.3 and AAAA 2001:db8:b::3 (TTL 300), else NXDOMAIN.
 */
static void serve_dns(int fd)
{
	uint8_t q[512], a[600];
	struct sockaddr_storage from;

	for (;;) {
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		const char *ip = NULL;
		size_t len, end = 12;
		bool v6;
		if (n < 17)
			continue;
		while (end < (size_t)n && q[end])
			end += (size_t)q[end] + 1;
		if (end + 5 > (size_t)n)
			continue;
		v6 = q[end + 1] == 0 && q[end + 2] == QTYPE_AAAA;
		if (memmem(q, (size_t)n, "\x09" "blackhole\x04test", 15))
			continue;            /* a zone whose nameserver never answers */
		if (memmem(q, (size_t)n, "\x07" "allowed\x04test", 13))
			ip = v6 ? NET_A6 : NET_A;
		else if (memmem(q, (size_t)n, "\x05" "other\x04test", 11))
			ip = v6 ? NET_B6 : NET_B;
		memcpy(a, q, (size_t)n);
		len = (size_t)n;
		a[2] = 0x81;
		a[3] = ip ? 0x80 : 0x83;
		if (ip) {
			uint8_t rr[] = { 0xc0, 0x0c, 0, QTYPE_A, 0, 1, 0, 0, 0x01, 0x2c, 0, 4 };
			if (v6) {
				rr[3] = QTYPE_AAAA;
				rr[11] = 16;
			}
			a[7] = 1;
			memcpy(a + len, rr, sizeof(rr));
			len += sizeof(rr);
			inet_pton(v6 ? AF_INET6 : AF_INET, ip, a + len);
			len += rr[11];
		}
		sendto(fd, a, len, 0, (struct sockaddr *)&from, fl);
	}
}

static void internet_main(int ready, int go)
{
	int tcp, udp, one = 1, zero = 0;
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWNET) < 0 || write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
		_exit(1);
	if (system("ip link set lo up && ip addr add " NET_A "/24 dev aasx1 && ip addr add " NET_B
	           "/24 dev aasx1 && ip -6 addr add " NET_LINK6 "/64 dev aasx1 nodad && ip -6 addr add " NET_A6
	           "/128 dev lo && ip -6 addr add " NET_B6 "/128 dev lo && ip link set aasx1 up") != 0)
		_exit(1);
	/* Port 80 in both families: one socket, IPv4 as mapped addresses. */
	tcp = socket(AF_INET6, SOCK_STREAM, 0);
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(tcp, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(tcp, (struct sockaddr *)&any6, sizeof(any6)) < 0 || listen(tcp, 128) < 0)
		_exit(1);
	any.sin_port = htons(53);
	if (bind(udp, (struct sockaddr *)&any, sizeof(any)) < 0)
		_exit(1);
	if (write(ready, "s", 1) != 1)
		_exit(1);
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		serve_dns(udp);
	}
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		int conn = accept(tcp, NULL, NULL);
		if (conn < 0)
			continue;
		if (fork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			serve_tcp(conn);
		}
		close(conn);
	}
}

static int setup(void **state)
{
	int ready[2], go[2];
	char c, cmd[256];
	struct sockaddr_storage up = { 0 };
	struct sockaddr_in *u4 = (struct sockaddr_in *)&up;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	if ((internet = fork()) == 0)
		internet_main(ready[1], go[0]);
	assert_true(internet > 0);
	assert_int_equal(read(ready[0], &c, 1), 1);
	snprintf(cmd, sizeof(cmd),
	         "ip link add aasx0 type veth peer name aasx1 netns %d && ip addr add " NET_SERVER
	         "/24 dev aasx0 && ip -6 addr add " NET_SERVER6 "/64 dev aasx0 nodad && ip link set aasx0 up && "
	         "ip -6 route add 2001:db8:b::/64 via " NET_LINK6,
	         (int)internet);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 's');
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	drv.log = quiet;
	u4->sin_family = AF_INET;
	u4->sin_port = htons(53);
	inet_pton(AF_INET, NET_A, &u4->sin_addr);
	assert_int_equal(saas__lv_ehost_start(&host, &drv, &up, 1), SAAS_OK);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	saas__lv_ehost_stop(host);
	if (internet > 0) {
		kill(internet, SIGKILL);
		waitpid(internet, NULL, 0);
	}
	return 0;
}

/* ---- the guest's side ------------------------------------------------------------------------ */

struct guest {
	int fd;
	struct saas__mux_track t;
	uint8_t in[2 * MUX_FRAME_MAX];
	size_t have, used;
	uint8_t frame[MUX_FRAME_MAX];     /* the last frame read */
	struct saas__mux_frame f;
};

static void gsend(struct guest *g, const void *b, size_t n)
{
	const uint8_t *p = b;

	while (n) {
		ssize_t w = write(g->fd, p, n);
		assert_true(w > 0);
		p += w;
		n -= (size_t)w;
	}
}

/* The next frame from the server, checked by the guest's table: its verdict. 0 when the channel closed. */
static int grecv(struct guest *g)
{
	for (;;) {
		long n;
		if (g->used < g->have &&
		    (n = saas__mux_frame_read(g->in + g->used, g->have - g->used, MUX_SERVER, &g->f)) != 0) {
			assert_true(n > 0);
			memcpy(g->frame, g->in + g->used, (size_t)n);
			g->f.payload = g->frame + MUX_HEADER;
			g->used += (size_t)n;
			return saas__mux_track_received(&g->t, &g->f) + 10;
		}
		memmove(g->in, g->in + g->used, g->have - g->used);
		g->have -= g->used;
		g->used = 0;
		struct pollfd p = { .fd = g->fd, .events = POLLIN };
		assert_int_equal(poll(&p, 1, 15000), 1);
		ssize_t r = read(g->fd, g->in + g->have, sizeof(g->in) - g->have);
		if (r <= 0)
			return 0;
		g->have += (size_t)r;
	}
}

#define V(x) ((x) + 10)

static void guest_open(struct guest *g, const char *name, const saas_vm_network *net)
{
	int sv[2];
	uint8_t b[16];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	memset(g, 0, sizeof(*g));
	g->fd = sv[0];
	saas__mux_track_init(&g->t, MUX_GUEST);
	assert_int_equal(saas__lv_ehost_set(host, name, net), SAAS_OK);
	assert_int_equal(saas__lv_ehost_attach(host, name, sv[1]), SAAS_OK);
	assert_int_equal(saas__mux_track_sent(&g->t, MUX_HELLO, 0, 2, MUX_VERSION), 0);
	gsend(g, b, saas__mux_u16_frame(b, MUX_HELLO, 0, MUX_VERSION));
	assert_int_equal(grecv(g), V(MUX_V_OK));
	assert_int_equal(g->f.type, MUX_HELLO);
}

/* A query for name (of qtype) with id, at q (room for 12 + 255 + 4 bytes): its length. */
static size_t query_build(uint8_t *q, const char *name, uint16_t qtype, uint16_t id)
{
	size_t n = 12;

	memset(q, 0, 12);
	q[0] = (uint8_t)(id >> 8);
	q[1] = (uint8_t)id;
	q[2] = 0x01;
	q[5] = 1;
	while (*name) {
		size_t l = strcspn(name, ".");
		q[n++] = (uint8_t)l;
		memcpy(q + n, name, l);
		n += l;
		name += l + (name[l] == '.');
	}
	memset(q + n, 0, 5);
	n += 5;
	q[n - 4] = (uint8_t)(qtype >> 8);
	q[n - 3] = (uint8_t)qtype;
	q[n - 1] = 1;
	return n;
}

/* Ask for name (of qtype) under tag, without waiting for the answer. */
static void ask_as(struct guest *g, const char *name, uint16_t qtype, uint32_t tag)
{
	uint8_t b[MUX_HEADER + 300];
	size_t n = query_build(b + MUX_HEADER, name, qtype, 0x1234);

	saas__mux_header(b, MUX_DNS_QUERY, tag, (uint32_t)n);
	assert_int_equal(saas__mux_track_sent(&g->t, MUX_DNS_QUERY, tag, (uint32_t)n, 0), 0);
	gsend(g, b, MUX_HEADER + n);
}

static void ask(struct guest *g, const char *name, uint32_t tag)
{
	ask_as(g, name, QTYPE_A, tag);
}

/* The address an answer ends with, as text in ip (INET6_ADDRSTRLEN), for a question of qtype. */
static void answer_addr(const uint8_t *a, size_t len, uint16_t qtype, char *ip)
{
	size_t size = qtype == QTYPE_AAAA ? 16 : 4;

	assert_true(len >= 12 + size);
	inet_ntop(qtype == QTYPE_AAAA ? AF_INET6 : AF_INET, a + len - size, ip, INET6_ADDRSTRLEN);
}

/* The next answer to a question of qtype: its rcode (its tag in *tag), its first address in ip (when there is one). */
static int answer_as(struct guest *g, uint16_t qtype, uint32_t *tag, char *ip)
{
	assert_int_equal(grecv(g), V(MUX_V_OK));
	assert_int_equal(g->f.type, MUX_DNS_ANSWER);
	*tag = g->f.id;
	assert_int_equal(g->f.payload[0], 0x12); /* the guest's id back */
	assert_int_equal(g->f.payload[1], 0x34);
	if (ip && (g->f.payload[7] & 0xff))
		answer_addr(g->f.payload, g->f.len, qtype, ip);
	return g->f.payload[3] & 0xf;
}

static int answer(struct guest *g, uint32_t *tag, char *ip)
{
	return answer_as(g, QTYPE_A, tag, ip);
}

/* Look name up (of qtype): the answer's rcode, and its first address in ip (when there is one). */
static int lookup_as(struct guest *g, const char *name, uint16_t qtype, uint32_t tag, char *ip)
{
	uint32_t got;
	int rcode;

	ask_as(g, name, qtype, tag);
	rcode = answer_as(g, qtype, &got, ip);
	assert_int_equal(got, tag);
	return rcode;
}

static int lookup(struct guest *g, const char *name, uint32_t tag, char *ip)
{
	return lookup_as(g, name, QTYPE_A, tag, ip);
}

/* Open id to ip:port (IPv4 or IPv6, by its text): the OPENED's status. */
static int gopen(struct guest *g, uint32_t id, const char *ip, uint16_t port)
{
	bool v6 = strchr(ip, ':') != NULL;
	struct saas__mux_open o = { .family = v6 ? 6 : 4, .port = port };
	uint8_t b[64];
	size_t n;

	assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, ip, o.addr), 1);
	n = saas__mux_open_write(b, sizeof(b), id, &o);
	assert_int_equal(saas__mux_track_sent(&g->t, MUX_OPEN_ADDR, id, (uint32_t)(n - MUX_HEADER), 0), 0);
	gsend(g, b, n);
	assert_int_equal(grecv(g), V(MUX_V_OK));
	assert_int_equal(g->f.type, MUX_OPENED);
	assert_int_equal(g->f.id, id);
	return g->f.payload[0];
}

static void gdata(struct guest *g, uint32_t id, const void *p, size_t len)
{
	uint8_t b[MUX_HEADER];

	assert_int_equal(saas__mux_track_sent(&g->t, MUX_DATA, id, (uint32_t)len, 0), 0);
	saas__mux_header(b, MUX_DATA, id, (uint32_t)len);
	gsend(g, b, sizeof(b));
	gsend(g, p, len);
}

static void gctl(struct guest *g, uint8_t type, uint32_t id, uint32_t value)
{
	uint8_t b[MUX_HEADER + 4];
	size_t n = type == MUX_WINDOW_UPDATE ? saas__mux_u32_frame(b, type, id, value) : (saas__mux_header(b, type, id, 0),
	                                                                                    (size_t)MUX_HEADER);

	assert_int_equal(saas__mux_track_sent(&g->t, type, id, 0, value), 0);
	gsend(g, b, n);
}

static void stats(const char *name, int64_t conns, int64_t lookups)
{
	saas_vm_network_stats s;

	assert_int_equal(saas__lv_ehost_stats(host, name, &s, NULL), SAAS_OK);
	assert_int_equal(s.denied_connections, conns);
	assert_int_equal(s.denied_lookups, lookups);
}

/* ---- the cases ------------------------------------------------------------------------------- */

static void test_policy(void **state)
{
	const char *allow[] = { "allowed.test", "198.51.100.64/26", NULL };
	saas_vm_network net = { .mode = SAAS_NET_POLICY, .allow = allow };
	struct guest g;
	char ip[INET_ADDRSTRLEN] = "";

	(void)state;
	guest_open(&g, "policy", &net);
	/* Not looked up yet: not allowed. */
	assert_int_equal(gopen(&g, 1, NET_A, 80), MUX_ST_REFUSED);
	assert_int_equal(lookup(&g, "allowed.test", 7, ip), 0);
	assert_string_equal(ip, NET_A);
	assert_int_equal(gopen(&g, 2, NET_A, 80), MUX_ST_OK);
	/* Another name: refused, never asked, counted; its address is no more allowed than before. */
	assert_int_equal(lookup(&g, "other.test", 8, NULL), 5);
	assert_int_equal(gopen(&g, 3, NET_B, 80), MUX_ST_REFUSED);
	stats("policy", 2, 1);
	/* The swap forgets what the lookup allowed. */
	assert_int_equal(saas__lv_ehost_set(host, "policy", &net), SAAS_OK);
	assert_int_equal(gopen(&g, 4, NET_A, 80), MUX_ST_REFUSED);
	stats("policy", 3, 1);
	close(g.fd);
	saas__lv_ehost_remove(host, "policy");
}

static void test_cidrs(void **state)
{
	const char *allow[] = { "*", NULL }, *deny[] = { NET_A "/32", NULL };
	const char *allow_b[] = { NET_B "/32", NULL };
	saas_vm_network net = { .mode = SAAS_NET_POLICY, .allow = allow, .deny = deny };
	struct guest g;

	(void)state;
	guest_open(&g, "cidrs", &net);
	/* Every name, but a deny CIDR wins over what the lookup allowed. */
	assert_int_equal(lookup(&g, "allowed.test", 1, NULL), 0);
	assert_int_equal(gopen(&g, 1, NET_A, 80), MUX_ST_REFUSED);
	assert_int_equal(gopen(&g, 2, NET_B, 80), MUX_ST_OK);
	/* An allow CIDR alone: no lookup needed, and no name allowed. */
	net.allow = allow_b;
	net.deny = NULL;
	assert_int_equal(saas__lv_ehost_set(host, "cidrs", &net), SAAS_OK);
	assert_int_equal(gopen(&g, 3, NET_B, 80), MUX_ST_OK);
	assert_int_equal(lookup(&g, "other.test", 2, NULL), 5);
	assert_int_equal(gopen(&g, 4, NET_A, 80), MUX_ST_REFUSED);
	/* A connect refused there. */
	assert_int_equal(gopen(&g, 5, NET_B, 81), MUX_ST_UNREACHABLE);
	close(g.fd);
	saas__lv_ehost_remove(host, "cidrs");
}

static void test_guard(void **state)
{
	static const char *const refused[] = { "10.0.0.1", "127.0.0.1", "169.254.169.254", "192.168.1.1",
		                                   "100.64.0.1", "172.16.0.1", "0.0.0.0", NET_SERVER };
	const char *allow[] = { "*", NULL };
	saas_vm_network internet_net = { .mode = SAAS_NET_INTERNET };
	saas_vm_network all = { .mode = SAAS_NET_POLICY, .allow = allow };
	struct guest g;
	uint32_t id = 1;

	(void)state;
	/* Internet, and a policy allowing everything: the guard still refuses, and counts. */
	guest_open(&g, "guard", &internet_net);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(gopen(&g, id++, refused[i], 80), MUX_ST_REFUSED);
	assert_int_equal(gopen(&g, id++, NET_A, 80), MUX_ST_OK);
	assert_int_equal(lookup(&g, "other.test", 9, NULL), 0);
	stats("guard", 8, 0);
	assert_int_equal(saas__lv_ehost_set(host, "guard", &all), SAAS_OK);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(gopen(&g, id++, refused[i], 80), MUX_ST_REFUSED);
	assert_int_equal(gopen(&g, id++, NET_B, 80), MUX_ST_OK);
	/* Isolated: nothing. */
	assert_int_equal(saas__lv_ehost_set(host, "guard", NULL), SAAS_OK);
	assert_int_equal(gopen(&g, id++, NET_B, 80), MUX_ST_REFUSED);
	assert_int_equal(lookup(&g, "other.test", 10, NULL), 5);
	close(g.fd);
	saas__lv_ehost_remove(host, "guard");
}

/* On an opened id: ask the server there for n bytes and check they are the pattern. */
static void gfetch(struct guest *g, uint32_t id, size_t n)
{
	char req[32];
	size_t down = 0;

	gdata(g, id, req, (size_t)snprintf(req, sizeof(req), "%zu\n", n));
	while (down < n) {
		assert_int_equal(grecv(g), V(MUX_V_OK));
		if (g->f.type == MUX_WINDOW_UPDATE)
			continue;
		assert_int_equal(g->f.type, MUX_DATA);
		assert_int_equal(g->f.id, id);
		for (size_t i = 0; i < g->f.len; i++)
			assert_int_equal(g->f.payload[i], pattern(down + i));
		down += g->f.len;
	}
	assert_int_equal(down, n);
}

/*
 * IPv6, by the same rules: AAAA lookups learned, deny and allow CIDRs, the
 * guard's ranges (with the prefixes that embed a refused IPv4 address), the
 * server's own address, and its on-link neighbours (its /64 is not the
 * internet), whatever the mode.
 */
static void test_ipv6(void **state)
{
	static const char *const refused[] = { "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:10.0.0.1",
		                                   "64:ff9b::a00:1", "2002:a00:1::1", "ff02::1", NET_SERVER6, NET_LINK6 };
	const char *names[] = { "allowed.test", NULL }, *all[] = { "*", NULL }, *deny[] = { NET_A6 "/128", NULL };
	const char *cidr[] = { "2001:db8:b::3/128", NULL };
	saas_vm_network policy = { .mode = SAAS_NET_POLICY, .allow = names };
	saas_vm_network internet_net = { .mode = SAAS_NET_INTERNET };
	struct guest g;
	char ip[INET6_ADDRSTRLEN] = "";
	uint32_t id = 1;

	(void)state;
	guest_open(&g, "v6", &policy);
	/* A name's AAAA: its address allowed once looked up, not before; another name's refused and not learned. */
	assert_int_equal(gopen(&g, id++, NET_A6, 80), MUX_ST_REFUSED);
	assert_int_equal(lookup_as(&g, "allowed.test", QTYPE_AAAA, 1, ip), 0);
	assert_string_equal(ip, NET_A6);
	assert_int_equal(gopen(&g, id, NET_A6, 80), MUX_ST_OK);
	gfetch(&g, id++, 5000);
	assert_int_equal(lookup_as(&g, "other.test", QTYPE_AAAA, 2, NULL), 5);
	assert_int_equal(gopen(&g, id++, NET_B6, 80), MUX_ST_REFUSED);
	stats("v6", 2, 1);
	/* Every name but a deny CIDR: the lookup answers, the address stays refused. */
	policy.allow = all;
	policy.deny = deny;
	assert_int_equal(saas__lv_ehost_set(host, "v6", &policy), SAAS_OK);
	assert_int_equal(lookup_as(&g, "allowed.test", QTYPE_AAAA, 3, ip), 0);
	assert_int_equal(gopen(&g, id++, NET_A6, 80), MUX_ST_REFUSED);
	assert_int_equal(lookup_as(&g, "other.test", QTYPE_AAAA, 4, ip), 0);
	assert_string_equal(ip, NET_B6);
	assert_int_equal(gopen(&g, id++, NET_B6, 80), MUX_ST_OK);
	/* An allow CIDR alone: no lookup needed, and no other address. */
	policy.allow = cidr;
	policy.deny = NULL;
	assert_int_equal(saas__lv_ehost_set(host, "v6", &policy), SAAS_OK);
	assert_int_equal(gopen(&g, id, NET_B6, 80), MUX_ST_OK);
	gfetch(&g, id++, 100);
	assert_int_equal(gopen(&g, id++, NET_A6, 80), MUX_ST_REFUSED);
	/* The guard, and the server's own /64, in internet mode as in a policy allowing everything. */
	assert_int_equal(saas__lv_ehost_set(host, "v6", &internet_net), SAAS_OK);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(gopen(&g, id++, refused[i], 80), MUX_ST_REFUSED);
	assert_int_equal(gopen(&g, id++, NET_A6, 80), MUX_ST_OK);
	policy.allow = all;
	assert_int_equal(saas__lv_ehost_set(host, "v6", &policy), SAAS_OK);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(gopen(&g, id++, refused[i], 80), MUX_ST_REFUSED);
	close(g.fd);
	saas__lv_ehost_remove(host, "v6");
}

/* A megabyte down and up through one connection: the window, half-close each way, the CLOSE handshake. */
static void test_bulk(void **state)
{
	const char *allow[] = { NET_A "/32", NULL };
	saas_vm_network net = { .mode = SAAS_NET_POLICY, .allow = allow };
	static uint8_t up[BULK];
	struct guest g;
	char req[32], *got = req;
	size_t down = 0, sent = 0, n;
	bool shut = false, closed = false;
	int v;

	(void)state;
	guest_open(&g, "bulk", &net);
	assert_int_equal(gopen(&g, 1, NET_A, 80), MUX_ST_OK);
	n = (size_t)snprintf(req, sizeof(req), "%d\n", BULK);
	gdata(&g, 1, req, n);
	/* Down: exactly BULK bytes of the pattern, never more in flight than the window (the table checks). */
	while (down < BULK) {
		assert_int_equal(grecv(&g), V(MUX_V_OK));
		if (g.f.type == MUX_WINDOW_UPDATE)
			continue;
		assert_int_equal(g.f.type, MUX_DATA);
		for (size_t i = 0; i < g.f.len; i++)
			assert_int_equal(g.f.payload[i], pattern(down + i));
		down += g.f.len;
		gctl(&g, MUX_WINDOW_UPDATE, 1, g.f.len);
	}
	/* Up: a megabyte within the window the server gives back, then our half closed. */
	for (size_t i = 0; i < BULK; i++)
		up[i] = (uint8_t)i;
	while (sent < BULK) {
		struct saas__mux_conn *c = saas__mux_conn_find(&g.t, 1);
		size_t k = BULK - sent < MUX_DATA_MAX ? BULK - sent : MUX_DATA_MAX;
		if (k > c->credit_out)
			k = c->credit_out;
		if (k) {
			gdata(&g, 1, up + sent, k);
			sent += k;
			continue;
		}
		assert_int_equal(grecv(&g), V(MUX_V_OK));
		assert_int_equal(g.f.type, MUX_WINDOW_UPDATE);
	}
	gctl(&g, MUX_SHUT, 1, 0);
	/* The server counted it, then its half ends, then the connection: answered with our CLOSE. */
	memset(req, 0, sizeof(req));
	while (!closed) {
		v = grecv(&g);
		if (g.f.type == MUX_CLOSE) {
			assert_int_equal(v, V(MUX_V_CLOSE));
			closed = true;
		} else if (g.f.type == MUX_DATA) {
			assert_int_equal(v, V(MUX_V_OK));
			memcpy(got, g.f.payload, g.f.len);
			got += g.f.len;
		} else if (g.f.type == MUX_SHUT) {
			shut = true;
		}
	}
	assert_true(shut);
	assert_string_equal(req, "got 1048576\n");
	gsend(&g, (uint8_t[MUX_HEADER]){ MUX_CLOSE, 0, 0, 0, 0, 0, 0, 1 }, MUX_HEADER);
	/* The id is free at both ends: opened again. */
	assert_int_equal(gopen(&g, 1, NET_A, 80), MUX_ST_OK);
	close(g.fd);
	saas__lv_ehost_remove(host, "bulk");
}

static void test_limits(void **state)
{
	const char *allow[] = { NET_A "/32", NULL };
	saas_vm_network net = { .mode = SAAS_NET_POLICY, .allow = allow };
	struct guest g;
	uint8_t b[64];
	struct saas__mux_open o = { .family = 4, .port = 80 };
	bool live;
	saas_vm_network_stats s;

	(void)state;
	guest_open(&g, "limits", &net);
	for (uint32_t id = 1; id <= MUX_CONNS_MAX; id++)
		assert_int_equal(gopen(&g, id, NET_A, 80), MUX_ST_OK);
	/* One more: LIMIT (the guest's own table would not even send it). */
	inet_pton(AF_INET, NET_A, o.addr);
	gsend(&g, b, saas__mux_open_write(b, sizeof(b), 1000, &o));
	assert_int_equal(read(g.fd, b, MUX_HEADER + 1), MUX_HEADER + 1);
	assert_int_equal(b[0], MUX_OPENED);
	assert_int_equal(b[MUX_HEADER], MUX_ST_LIMIT);
	assert_int_equal(saas__lv_ehost_stats(host, "limits", &s, &live), SAAS_OK);
	assert_true(live);
	/* DATA on an id never opened: the channel is closed with every connection. */
	saas__mux_header(b, MUX_DATA, 5000, 1);
	gsend(&g, b, MUX_HEADER + 1);
	{
		struct pollfd p = { .fd = g.fd, .events = POLLIN };
		assert_int_equal(poll(&p, 1, 15000), 1);
		assert_int_equal(read(g.fd, b, sizeof(b)), 0);
	}
	assert_int_equal(saas__lv_ehost_stats(host, "limits", &s, &live), SAAS_OK);
	assert_false(live);
	close(g.fd);
	/* Attached again: a new channel, a new table. */
	guest_open(&g, "limits", &net);
	assert_int_equal(gopen(&g, 1, NET_A, 80), MUX_ST_OK);
	close(g.fd);
	saas__lv_ehost_remove(host, "limits");
}

/*
 * Lookups in flight are shared between accounts as on one machine: one
 * account flooding a zone that never answers from many VMs holds only its
 * share of the pool, and another account's lookups are still asked.
 */
static void test_accounts(void **state)
{
	const char *allow[] = { "*", NULL };
	saas_vm_network flood = { .mode = SAAS_NET_POLICY, .allow = allow, .account = "acct-a" };
	saas_vm_network other = { .mode = SAAS_NET_POLICY, .allow = allow, .account = "acct-b" };
	unsigned int share = EGRESS_PENDING_MAX / 2, vms = share / MUX_DNS_PENDING;
	struct guest a[8], last, b;
	char name[32], ip[INET_ADDRSTRLEN] = "";
	uint32_t tag;

	(void)state;
	assert_true(vms < sizeof(a) / sizeof(a[0]));
	for (unsigned int i = 0; i < vms; i++) {
		snprintf(name, sizeof(name), "flood%u", i);
		guest_open(&a[i], name, &flood);
	}
	guest_open(&last, "flood-last", &flood);
	guest_open(&b, "other", &other);
	/* The account's share, exactly: each VM its own bound of lookups into the black hole. */
	for (unsigned int i = 0; i < vms; i++)
		for (uint32_t t = 0; t < MUX_DNS_PENDING; t++) {
			snprintf(name, sizeof(name), "n%u-%u.blackhole.test", i, t);
			ask(&a[i], name, t);
		}
	/* Another account is asked and answered (and, answered, the flood was read before it). */
	assert_int_equal(lookup(&b, "allowed.test", 1, ip), 0);
	assert_string_equal(ip, NET_A);
	/* The flooding account's next lookup, from a VM with none in flight: its share is taken. */
	assert_int_equal(lookup(&last, "allowed.test", 1, NULL), 2);
	/* The black hole's lookups end at the upstream's deadline (SERVFAIL), and the share is free again. */
	for (unsigned int i = 0; i < vms; i++)
		for (uint32_t t = 0; t < MUX_DNS_PENDING; t++)
			assert_int_equal(answer(&a[i], &tag, NULL), 2);
	assert_int_equal(lookup(&last, "allowed.test", 2, NULL), 0);
	for (unsigned int i = 0; i < vms; i++) {
		snprintf(name, sizeof(name), "flood%u", i);
		close(a[i].fd);
		saas__lv_ehost_remove(host, name);
	}
	close(last.fd);
	close(b.fd);
	saas__lv_ehost_remove(host, "flood-last");
	saas__lv_ehost_remove(host, "other");
}

/* ---- the guest's end (images/guest/aas-egress.c) --------------------------------------------- */

#define GUEST_LISTEN 15001
#define GUEST_DNS 15053

struct guest_run {
	int port, listener, listener6, dns;
	volatile int stop;
	int rc;
};

static void *guest_main(void *arg)
{
	struct guest_run *r = arg;

	int listener[2] = { r->listener, r->listener6 }, dns[2] = { r->dns, -1 };

	r->rc = aas_egress_serve(r->port, listener, dns, &r->stop);
	return NULL;
}

/* A socket of family and type bound to port as aas-egress's (IPv4 DNS on loopback; IPv6 only IPv6). */
static int bound(int family, int type, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	int one = 1, fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(type == SOCK_STREAM ? INADDR_ANY : INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	if (family == AF_INET6) {
		assert_int_equal(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)), 0);
		assert_int_equal(bind(fd, (struct sockaddr *)&a6, sizeof(a6)), 0);
	} else {
		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	}
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 16), 0);
	return fd;
}

/* A plain client's lookup of name (of qtype) at the guest's nameserver 10.0.2.3: rcode, first address in ip. */
static int plain_lookup_as(const char *name, uint16_t qtype, char *ip)
{
	struct sockaddr_in ns = { .sin_family = AF_INET, .sin_port = htons(53) };
	uint8_t q[300], a[1024];
	size_t n = query_build(q, name, qtype, 0x7701);
	ssize_t r;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	inet_pton(AF_INET, "10.0.2.3", &ns.sin_addr);
	assert_int_equal(sendto(fd, q, n, 0, (struct sockaddr *)&ns, sizeof(ns)), (ssize_t)n);
	assert_int_equal(poll(&p, 1, 15000), 1);
	r = recv(fd, a, sizeof(a), 0);
	close(fd);
	assert_true(r >= 12);
	assert_int_equal(a[0], 0x77);
	if (ip && a[7])
		answer_addr(a, (size_t)r, qtype, ip);
	return a[3] & 0xf;
}

static int plain_lookup(const char *name, char *ip)
{
	return plain_lookup_as(name, QTYPE_A, ip);
}

/* A plain client's connection to ip (IPv4 or IPv6, by its text) and port. */
static int plain_connect(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	bool v6 = strchr(ip, ':') != NULL;
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { 15, 0 };

	if (v6) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		assert_int_equal(inet_pton(AF_INET6, ip, &a6->sin6_addr), 1);
	} else {
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, v6 ? sizeof(*a6) : sizeof(*a)), 0);
	return fd;
}

/*
 * A plain client's download from the test internet's ip: size bytes of the
 * pattern down, then 1000 up and its half closed, counted by the far end.
 */
static void plain_download(const char *ip, size_t size)
{
	char req[32], got[64] = "";
	uint8_t buf[65536];
	size_t have = 0;
	ssize_t r;
	int fd = plain_connect(ip, 80);
	int n = snprintf(req, sizeof(req), "%zu\n", size);

	assert_int_equal(write(fd, req, (size_t)n), n);
	for (size_t down = 0; down < size; down += (size_t)r) {
		assert_true((r = read(fd, buf, sizeof(buf))) > 0);
		for (ssize_t i = 0; i < r; i++)
			assert_int_equal(buf[i], pattern(down + (size_t)i));
	}
	assert_int_equal(write(fd, buf, 1000), 1000);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	while ((r = read(fd, got + have, sizeof(got) - 1 - have)) > 0)
		have += (size_t)r;
	assert_int_equal(r, 0);
	assert_string_equal(got, "got 1000\n");
	close(fd);
}

/* The same over TCP (a truncated answer's retry): its 2-byte length, then it, each way. */
static int tcp_lookup(const char *name, char *ip)
{
	uint8_t q[302], a[1024];
	size_t n = query_build(q + 2, name, QTYPE_A, 0x7701), have = 0;
	ssize_t r;
	int fd = plain_connect("10.0.2.3", 53);

	q[0] = (uint8_t)(n >> 8);
	q[1] = (uint8_t)n;
	assert_int_equal(write(fd, q, n + 2), (ssize_t)(n + 2));
	while ((r = read(fd, a + have, sizeof(a) - have)) > 0)
		have += (size_t)r;
	close(fd);
	assert_true(have >= 14);
	assert_int_equal((size_t)(a[0] << 8 | a[1]), have - 2);
	assert_int_equal(a[2], 0x77);
	if (ip && a[9])
		inet_ntop(AF_INET, a + have - 4, ip, INET_ADDRSTRLEN);
	return a[5] & 0xf;
}

static void test_guest_end(void **state)
{
	const char *allow[] = { "allowed.test", NULL };
	saas_vm_network net = { .mode = SAAS_NET_POLICY, .allow = allow };
	struct guest_run run = { 0 };
	char ip[INET6_ADDRSTRLEN] = "";
	pthread_t th;
	int sv[2], fd, saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	uint8_t buf[64];

	(void)state;
	/*
	 * This thread becomes the guest (the servers' thread stays where it
	 * is): an interface with default routes going nowhere (IPv4 and IPv6, as
	 * slirp's), and the guest's redirect of other users' TCP and of DNS to
	 * aas-egress, in both families (one inet table, as aas-init's).
	 */
	assert_true(saved >= 0);
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	assert_int_equal(system("ip link set lo up && ip link add aasg0 type veth peer name aasg1 && ip link set aasg1 up && "
	                        "ip addr add 10.0.2.15/24 dev aasg0 && ip -6 addr add fec0::15/64 dev aasg0 nodad && "
	                        "ip link set aasg0 up && ip route add default dev aasg0 && ip -6 route add default dev aasg0 && "
	                        "nft 'add table inet aasg; add chain inet aasg o { type nat hook output priority -100; }; "
	                        "add rule inet aasg o ip daddr != 127.0.0.0/8 tcp dport != 0 redirect to :15001; "
	                        "add rule inet aasg o ip6 daddr != ::1 tcp dport != 0 redirect to :15001; "
	                        "add rule inet aasg o udp dport 53 redirect to :15053'"),
	                 0);
	run.listener = bound(AF_INET, SOCK_STREAM, GUEST_LISTEN);
	run.listener6 = bound(AF_INET6, SOCK_STREAM, GUEST_LISTEN);
	run.dns = bound(AF_INET, SOCK_DGRAM, GUEST_DNS);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	run.port = sv[0];
	assert_int_equal(saas__lv_ehost_set(host, "guest", &net), SAAS_OK);
	assert_int_equal(saas__lv_ehost_attach(host, "guest", sv[1]), SAAS_OK);
	assert_int_equal(pthread_create(&th, NULL, guest_main, &run), 0);

	/* A lookup through the stub, and a download from what it answered. */
	assert_int_equal(plain_lookup("allowed.test", ip), 0);
	assert_string_equal(ip, NET_A);
	plain_download(NET_A, 300000);
	/* The same over IPv6: its AAAA through the stub, the connection's IPv6 destination carried. */
	assert_int_equal(plain_lookup_as("allowed.test", QTYPE_AAAA, ip), 0);
	assert_string_equal(ip, NET_A6);
	plain_download(NET_A6, 300000);
	/* Over TCP, answered and refused alike. */
	memset(ip, 0, sizeof(ip));
	assert_int_equal(tcp_lookup("allowed.test", ip), 0);
	assert_string_equal(ip, NET_A);
	assert_int_equal(tcp_lookup("other.test", NULL), 5);
	/* Refused by the policy (never looked up): reset, not a connection. */
	assert_int_equal(plain_lookup("other.test", NULL), 5);
	fd = plain_connect(NET_B, 80);
	assert_true(read(fd, buf, sizeof(buf)) < 0);
	assert_int_equal(errno, ECONNRESET);
	close(fd);
	fd = plain_connect(NET_B6, 80);
	assert_true(read(fd, buf, sizeof(buf)) < 0);
	assert_int_equal(errno, ECONNRESET);
	close(fd);
	stats("guest", 2, 2);

	run.stop = 1;
	pthread_join(th, NULL);
	assert_int_equal(run.rc, 0);
	close(run.listener);
	close(run.listener6);
	close(run.dns);
	close(sv[0]);
	saas__lv_ehost_remove(host, "guest");
	assert_int_equal(setns(saved, CLONE_NEWNET), 0);
	close(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy), cmocka_unit_test(test_cidrs),  cmocka_unit_test(test_guard),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_bulk),   cmocka_unit_test(test_limits), cmocka_unit_test(test_accounts),
		cmocka_unit_test(test_guest_end),
	};

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0) {
		printf("SKIP: needs root to make its network namespaces\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
