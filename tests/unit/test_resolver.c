/*
 * The policy VMs' resolver (lib/driver/libvirt/resolver.c) driven without
 * VMs: its real thread and sockets on loopback, "guests" that are UDP
 * sockets sending to a VM's resolver port, and an upstream of the test's
 * own that answers every name except those under blackhole.test, which it
 * never answers (a nameserver that black-holes a zone). nftables is not
 * touched: the driver's nft is `true`, so every rule load succeeds and
 * changes nothing.
 *
 * What it checks: one account flooding the black hole from many VMs holds
 * at most its share of the pending lookups, and another account's lookups
 * are still asked and answered while it floods.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver/libvirt/egress.h"

/* The flooding account's VMs and what each keeps outstanding: over the per-VM bound, to fill the pool. */
#define FLOOD_VMS 8
#define FLOOD_EACH 40
/* The other account's lookups, one VM, under its per-VM bound. */
#define OTHER_LOOKUPS 20
#define UID_BASE 61000

static void quiet(void *ud, int level, const char *msg)
{
	(void)ud;
	(void)level;
	(void)msg;
}

/* A driver with an egress table and no nft (its "true" takes every ruleset), its state in dir (made). */
static struct drv *fake_driver(char *dir)
{
	struct drv *d = calloc(1, sizeof(*d));
	struct saas__lv_egress *e = calloc(1, sizeof(*e));

	assert_non_null(d);
	assert_non_null(e);
	assert_non_null(mkdtemp(dir));
	d->dir = dir;
	d->host = &saas__lv_host_local;
	d->nft = "true";
	d->log = quiet;
	pthread_mutex_init(&e->mu, NULL);
	e->wake = -1;
	snprintf(e->table, sizeof(e->table), "aas_egress_test");
	d->egress = e;
	return d;
}

static void fake_driver_free(struct drv *d)
{
	pthread_mutex_destroy(&d->egress->mu);
	free(d->egress);
	rmdir(d->dir);
	free(d);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A UDP socket on 127.0.0.1, port *port (0: any; set to the one bound). */
static int udp_loopback(unsigned int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A guest's socket, connected to VM port's resolver. */
static int guest(unsigned int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	unsigned int mine;
	int fd = udp_loopback(&mine);

	a.sin_port = htons((uint16_t)port);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Send a query for name (type A) with id. */
static void ask(int fd, uint16_t id, const char *name)
{
	uint8_t m[DNS_HEADER + DNS_NAME_MAX + 2 + 4] = { (uint8_t)(id >> 8), (uint8_t)id, 0x01, 0, 0, 1 };
	size_t n = DNS_HEADER;

	while (*name) {
		size_t l = strcspn(name, ".");
		m[n++] = (uint8_t)l;
		memcpy(m + n, name, l);
		n += l;
		name += l + (name[l] == '.');
	}
	m[n++] = 0;
	m[n++] = 0;
	m[n++] = DNS_TYPE_A;
	m[n++] = 0;
	m[n++] = DNS_CLASS_IN;
	assert_int_equal(send(fd, m, n, 0), (ssize_t)n);
}

/* The upstream: answers NOERROR (no records) to everything but names under blackhole.test. */
struct upstream {
	int fd;
	int stop;                        /* atomic */
	pthread_t thread;
};

static void *upstream_main(void *arg)
{
	struct upstream *u = arg;
	uint8_t m[DNS_UDP_MAX];

	while (!__atomic_load_n(&u->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p = { u->fd, POLLIN, 0 };
		struct sockaddr_storage from;
		socklen_t from_len = sizeof(from);
		struct saas__dns_question q;
		ssize_t n;
		if (poll(&p, 1, 50) <= 0)
			continue;
		if ((n = recvfrom(u->fd, m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&from, &from_len)) < DNS_HEADER ||
		    saas__dns_query_parse(m, (size_t)n, &q) < 0)
			continue;
		if (strlen(q.name) >= 14 && strcmp(q.name + strlen(q.name) - 14, "blackhole.test") == 0)
			continue;
		m[2] = 0x81; /* QR, RD */
		m[3] = 0x80; /* RA, NOERROR */
		sendto(u->fd, m, q.end, 0, (struct sockaddr *)&from, from_len);
	}
	return NULL;
}

/* The flooding account's guests: each keeps FLOOD_EACH lookups of the black hole outstanding. */
struct flood {
	int fd[FLOOD_VMS];
	int stop;                        /* atomic */
	unsigned int sent;
	pthread_t thread;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct pollfd p[FLOOD_VMS];
	uint8_t m[DNS_UDP_MAX];
	char name[64];

	for (int i = 0; i < FLOOD_VMS; i++) {
		p[i] = (struct pollfd){ f->fd[i], POLLIN, 0 };
		for (int k = 0; k < FLOOD_EACH; k++) {
			snprintf(name, sizeof(name), "q%u.blackhole.test", f->sent);
			ask(f->fd[i], (uint16_t)f->sent++, name);
		}
	}
	/* Every answer (a SERVFAIL: refused at once, or given up at the upstream's deadline) is asked again. */
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		if (poll(p, FLOOD_VMS, 50) <= 0)
			continue;
		for (int i = 0; i < FLOOD_VMS; i++)
			while (p[i].revents && recv(f->fd[i], m, sizeof(m), MSG_DONTWAIT) > 0) {
				snprintf(name, sizeof(name), "q%u.blackhole.test", f->sent);
				ask(f->fd[i], (uint16_t)f->sent++, name);
			}
	}
	return NULL;
}

static unsigned int account_pending(struct saas__lv_egress *e, const char *id)
{
	unsigned int n = 0;

	pthread_mutex_lock(&e->mu);
	for (struct eacct *a = e->accts; a; a = a->next)
		if (strcmp(a->id, id) == 0)
			n = a->pending;
	pthread_mutex_unlock(&e->mu);
	return n;
}

static void test_share_under_flood(void **state)
{
	static const char *const flood_allow[] = { "*.blackhole.test", NULL };
	static const char *const other_allow[] = { "*.ok.test", NULL };
	char dir[] = "/tmp/test_resolver.XXXXXX", name[64];
	struct drv *d = fake_driver(dir);
	struct saas__lv_egress *e = d->egress;
	struct upstream u = { .fd = -1 };
	struct flood f = { .sent = 0 };
	struct sockaddr_in *up;
	unsigned int port, share, want, served = 0, servfail = 0, in_flight;
	int other, flood_vm_port[FLOOD_VMS], other_port = 0;
	int64_t until;

	(void)state;
	assert_true((e->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0);
	u.fd = udp_loopback(&port);
	up = (struct sockaddr_in *)&e->upstream[0];
	up->sin_family = AF_INET;
	up->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	up->sin_port = htons((uint16_t)port);
	e->n_upstream = 1;
	assert_int_equal(pthread_create(&u.thread, NULL, upstream_main, &u), 0);

	/* Account acc-flood: FLOOD_VMS policy VMs; account acc-other: one. */
	for (int i = 0; i < FLOOD_VMS; i++) {
		saas_vm_network net = { SAAS_NET_POLICY, flood_allow, NULL, "acc-flood" };
		snprintf(name, sizeof(name), "sbx-flood%d", i);
		assert_int_equal(saas__lv_egress_vm_set(d, name, UID_BASE + (unsigned int)i, &net, false), SAAS_OK);
		flood_vm_port[i] = (int)saas__lv_egress_find_uid(e, UID_BASE + (unsigned int)i)->port;
	}
	{
		saas_vm_network net = { SAAS_NET_POLICY, other_allow, NULL, "acc-other" };
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-other", UID_BASE + 100, &net, false), SAAS_OK);
		other_port = (int)saas__lv_egress_find_uid(e, UID_BASE + 100)->port;
	}
	share = saas__lv_egress_share(e);
	assert_int_equal(share, EGRESS_PENDING_MAX / 2);
	assert_int_equal(saas__lv_resolver_start(d), SAAS_OK);

	for (int i = 0; i < FLOOD_VMS; i++)
		f.fd[i] = guest((unsigned int)flood_vm_port[i]);
	assert_int_equal(pthread_create(&f.thread, NULL, flood_main, &f), 0);

	/* The flood is in place once its account holds all it can: its share (or every VM's bound, if less). */
	want = FLOOD_VMS * EGRESS_PENDING_VM < share ? FLOOD_VMS * EGRESS_PENDING_VM : share;
	for (until = now_ms() + 20000; account_pending(e, "acc-flood") < want && now_ms() < until;)
		usleep(10000);
	in_flight = account_pending(e, "acc-flood");
	assert_true(in_flight >= want);

	/* The other account asks while it floods: every lookup is asked upstream and answered. */
	other = guest((unsigned int)other_port);
	for (unsigned int i = 0; i < OTHER_LOOKUPS; i++) {
		uint8_t m[DNS_UDP_MAX];
		struct pollfd p = { other, POLLIN, 0 };
		ssize_t n;
		snprintf(name, sizeof(name), "h%u.ok.test", i);
		ask(other, (uint16_t)(0x4000 + i), name);
		if (poll(&p, 1, 10000) != 1 || (n = recv(other, m, sizeof(m), 0)) < DNS_HEADER)
			continue;
		if ((m[3] & 0x0f) == DNS_RCODE_NOERROR)
			served++;
		else if ((m[3] & 0x0f) == DNS_RCODE_SERVFAIL)
			servfail++;
		if (account_pending(e, "acc-flood") > in_flight)
			in_flight = account_pending(e, "acc-flood");
	}
	print_message("while account 1 held up to %u lookups at a black hole from %d VMs, account 2 had %u of %d "
	              "served (%u SERVFAIL)\n", in_flight, FLOOD_VMS, served, OTHER_LOOKUPS, servfail);
	assert_int_equal(served, OTHER_LOOKUPS);
	/* Never more than its share, however hard it asks. */
	assert_true(in_flight <= share);

	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(f.thread, NULL);
	for (int i = 0; i < FLOOD_VMS; i++)
		close(f.fd[i]);
	close(other);
	saas__lv_resolver_stop(d);
	/* Every account goes with its last VM and its last query. */
	for (int i = 0; i < FLOOD_VMS; i++) {
		snprintf(name, sizeof(name), "sbx-flood%d", i);
		saas__lv_egress_vm_remove(d, name);
	}
	saas__lv_egress_vm_remove(d, "sbx-other");
	assert_null(e->accts);
	__atomic_store_n(&u.stop, 1, __ATOMIC_RELEASE);
	pthread_join(u.thread, NULL);
	close(u.fd);
	close(e->wake);
	fake_driver_free(d);
}

/* The share as accounts come and go, and as their VMs change mode. */
static void test_share_accounts(void **state)
{
	static const char *const allow[] = { "example.com", NULL };
	char dir[] = "/tmp/test_resolver.XXXXXX", name[64], acct[32];
	struct drv *d = fake_driver(dir);
	struct saas__lv_egress *e = d->egress;
	saas_vm_network internet = { SAAS_NET_INTERNET, NULL, NULL, NULL };

	(void)state;

	/* No policy VM: the whole pool. */
	assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX);
	/* Two policy VMs of one account: still one account. */
	for (int i = 0; i < 2; i++) {
		saas_vm_network net = { SAAS_NET_POLICY, allow, NULL, "acc-a" };
		snprintf(name, sizeof(name), "sbx-a%d", i);
		assert_int_equal(saas__lv_egress_vm_set(d, name, UID_BASE + (unsigned int)i, &net, false), SAAS_OK);
	}
	assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX);
	/* A VM told no account (adopted at open) is one of its own... */
	{
		saas_vm_network net = { SAAS_NET_POLICY, allow, NULL, NULL };
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-b", UID_BASE + 10, &net, false), SAAS_OK);
		assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX / 2);
		/* ...until it is told, and an account without policy VMs has no share. */
		net.account = "acc-a";
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-b", UID_BASE + 10, &net, false), SAAS_OK);
		assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX);
		/* Told nothing again: it keeps the account it has. */
		net.account = NULL;
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-b", UID_BASE + 10, &net, false), SAAS_OK);
		assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX);
	}
	/* An account whose VMs leave the policy has no share. */
	{
		saas_vm_network net = { SAAS_NET_POLICY, allow, NULL, "acc-c" };
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-c", UID_BASE + 20, &net, false), SAAS_OK);
		assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX / 2);
		internet.account = "acc-c";
		assert_int_equal(saas__lv_egress_vm_set(d, "sbx-c", UID_BASE + 20, &internet, false), SAAS_OK);
		assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_MAX);
	}
	/* Very many accounts: each still has its minimum. */
	for (unsigned int i = 0; i < 2 * EGRESS_PENDING_MAX / EGRESS_PENDING_ACCOUNT_MIN; i++) {
		saas_vm_network net = { SAAS_NET_POLICY, allow, NULL, acct };
		snprintf(name, sizeof(name), "sbx-m%u", i);
		snprintf(acct, sizeof(acct), "acc-m%u", i);
		assert_int_equal(saas__lv_egress_vm_set(d, name, UID_BASE + 100 + i, &net, false), SAAS_OK);
	}
	assert_int_equal(saas__lv_egress_share(e), EGRESS_PENDING_ACCOUNT_MIN);
	for (unsigned int i = 0; i < 2 * EGRESS_PENDING_MAX / EGRESS_PENDING_ACCOUNT_MIN; i++) {
		snprintf(name, sizeof(name), "sbx-m%u", i);
		saas__lv_egress_vm_remove(d, name);
	}
	saas__lv_egress_vm_remove(d, "sbx-a0");
	saas__lv_egress_vm_remove(d, "sbx-a1");
	saas__lv_egress_vm_remove(d, "sbx-b");
	saas__lv_egress_vm_remove(d, "sbx-c");
	assert_null(e->accts);
	fake_driver_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share_accounts),
		cmocka_unit_test(test_share_under_flood),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
