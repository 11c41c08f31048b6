/*
 * VM hosts in the core: the registry, placement by capacity, routing every
 * call by the sandbox's host, drain, lost hosts billed to when they were last
 * seen, and their return. The "hosts" are one fake driver (its VMs in
 * memory) seen through a thin table of our own: each context the engine opens
 * is one simulated host, named by the host part of its uri= option, and sees
 * only the VMs and snapshots made through it, as a libvirtd on another machine
 * would. A clock the test moves; the same suite on SQLite and PostgreSQL.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "store/store.h"
#include "saas/sys/error.h"
#include "fixture.h"
#include "testutil.h"

/* ---- simulated hosts over the fake driver ---- */

#define SIM_HOSTS 8
#define SIM_OWNED 256

struct sim_host {
	char name[64];                 /* "local": the engine's own context (no uri=) */
	char config[512];              /* the configuration it was last opened with */
	char state_dir[512];
	unsigned int cpus;
	uint64_t memory_mb;
	int down;                      /* unreachable: open and every call fail */
	int64_t answer_ms;             /* how long host_info takes to answer (the fake clock moves) */
	int stuck;                     /* host_info waits until it is cleared (sim_unstick), for real */
	unsigned int stuck_calls;      /* host_info calls that waited */
	unsigned int execs;            /* commands run on it */
	unsigned int snap_deletes;     /* snapshot deletes asked of it */
	char ahead[SAAS_ID_MAX + 1];   /* a VM started ahead on it (vm_take), "" none */
	int ahead_taken;               /* taken by a create, not yet made */
	uint64_t spare_mb;             /* what host_info says VMs started ahead there hold */
};

static struct sim_host sims[SIM_HOSTS];
static unsigned int nsims;
/* Which host holds each VM and snapshot. */
static struct {
	char name[SAAS_ID_MAX + 1];
	struct sim_host *host;
} owned[SIM_OWNED];

/*
 * What each host's storage holds of snapshots, as snapshot_scan reports it:
 * those made through a host (complete, written when they were made) and
 * those the test leaves there (pieces of one cut short, another cluster's).
 */
#define SIM_SNAPS 32
static struct sim_snap {
	char name[64];
	struct sim_host *host;         /* NULL: a free entry */
	int64_t written_ms;
	int complete;
	int theirs;                    /* another cluster's: never reported */
} snaps[SIM_SNAPS];

static void sim_reset(void)
{
	memset(sims, 0, sizeof(sims));
	nsims = 0;
	memset(owned, 0, sizeof(owned));
	memset(snaps, 0, sizeof(snaps));
}

/* Snapshot name in h's storage, last written at written_ms. */
static void sim_snap_put(struct sim_host *h, const char *name, int64_t written_ms, int complete, int theirs)
{
	for (int i = 0; i < SIM_SNAPS; i++)
		if (!snaps[i].host) {
			snprintf(snaps[i].name, sizeof(snaps[i].name), "%s", name);
			snaps[i].host = h;
			snaps[i].written_ms = written_ms;
			snaps[i].complete = complete;
			snaps[i].theirs = theirs;
			return;
		}
	fail_msg("sim: too many snapshots");
}

/* Is snapshot name in h's storage? */
static int sim_snap_there(const struct sim_host *h, const char *name)
{
	for (int i = 0; i < SIM_SNAPS; i++)
		if (snaps[i].host == h && strcmp(snaps[i].name, name) == 0)
			return 1;
	return 0;
}

static struct sim_host *sim_find(const char *name)
{
	for (unsigned int i = 0; i < nsims; i++)
		if (strcmp(sims[i].name, name) == 0)
			return &sims[i];
	return NULL;
}

/* A host of that name with cpus and memory, made now if new. */
static struct sim_host *sim_host(const char *name, unsigned int cpus, uint64_t memory_mb)
{
	struct sim_host *h = sim_find(name);

	if (!h) {
		assert_true(nsims < SIM_HOSTS);
		h = &sims[nsims++];
		snprintf(h->name, sizeof(h->name), "%s", name);
	}
	h->cpus = cpus;
	h->memory_mb = memory_mb;
	return h;
}

static struct sim_host *owner_of(const char *name)
{
	for (int i = 0; i < SIM_OWNED; i++)
		if (owned[i].host && strcmp(owned[i].name, name) == 0)
			return owned[i].host;
	return NULL;
}

static void own(const char *name, struct sim_host *h)
{
	for (int i = 0; i < SIM_OWNED; i++)
		if (!owned[i].host || strcmp(owned[i].name, name) == 0) {
			snprintf(owned[i].name, sizeof(owned[i].name), "%s", name);
			owned[i].host = h;
			return;
		}
	fail_msg("sim: too many VMs");
}

static void disown(const char *name)
{
	for (int i = 0; i < SIM_OWNED; i++)
		if (owned[i].host && strcmp(owned[i].name, name) == 0)
			owned[i].host = NULL;
}

/* VMs of one host, as its libvirtd would count them. */
static unsigned int sim_vms(const struct sim_host *h)
{
	unsigned int n = 0;

	for (int i = 0; i < SIM_OWNED; i++)
		if (owned[i].host == h && saas_fake_vm_exists(owned[i].name))
			n++;
	return n;
}

static int sim_down(const struct sim_host *h)
{
	return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "sim: host %s does not answer", h->name);
}

/* A call about VM `name` through host h: is it there? */
static int sim_check(const struct sim_host *h, const char *name)
{
	if (h->down)
		return sim_down(h);
	if (owner_of(name) != h)
		return saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "sim: no VM %s on host %s", name, h->name);
	return SAAS_OK;
}

static int sim_open(void **ctx, const saas_driver_env *env)
{
	const char *uri = env->config ? strstr(env->config, "uri=") : NULL;
	char name[64] = "local";
	struct sim_host *h;
	int rc;

	if (uri) {
		const char *at = strstr(uri, "://"), *end;
		assert_non_null(at);
		at += 3;
		end = strchr(at, '/');
		assert_non_null(end);
		snprintf(name, sizeof(name), "%.*s", (int)(end - at), at);
	}
	if (!(h = sim_find(name)))
		h = sim_host(name, 4, 8192);
	if (h->down)
		return sim_down(h);
	snprintf(h->config, sizeof(h->config), "%s", env->config ? env->config : "");
	snprintf(h->state_dir, sizeof(h->state_dir), "%s", env->state_dir);
	if ((rc = saas_fake_driver.open(ctx, env)) < 0)
		return rc;
	*ctx = h;
	return SAAS_OK;
}

static void sim_close(void *ctx)
{
	(void)ctx;
}

/* The host's VM started ahead, to the create that asks for one of the default network. */
static int sim_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size)
{
	struct sim_host *h = ctx;

	if (h->down)
		return sim_down(h);
	if (!h->ahead[0] || h->ahead_taken || spec->network)
		return 0;
	snprintf(name, size, "%s", h->ahead);
	h->ahead_taken = 1;
	return 1;
}

static int sim_create(void *ctx, const saas_vm_spec *spec)
{
	struct sim_host *h = ctx;
	int rc;

	if (h->down)
		return sim_down(h);
	/* Made from the VM started ahead when it is the one taken; made anew either way here. */
	if (h->ahead_taken && strcmp(spec->name, h->ahead) == 0)
		h->ahead[0] = '\0', h->ahead_taken = 0;
	if ((rc = saas_fake_driver.vm_create(NULL, spec)) == SAAS_OK)
		own(spec->name, h);
	return rc;
}

static int sim_destroy(void *ctx, const char *name)
{
	struct sim_host *h = ctx;

	if (h->down)
		return sim_down(h);
	/* Another host's VM: there is no such domain here, which a destroy takes as done. */
	if (owner_of(name) != h)
		return SAAS_OK;
	disown(name);
	return saas_fake_driver.vm_destroy(NULL, name);
}

static int sim_state(void *ctx, const char *name, int *state)
{
	struct sim_host *h = ctx;

	if (h->down)
		return sim_down(h);
	if (owner_of(name) != h) {
		*state = SAAS_VM_ABSENT;
		return SAAS_OK;
	}
	return saas_fake_driver.vm_state(NULL, name, state);
}

struct sim_list {
	struct sim_host *h;
	saas_name_fn fn;
	void *ud;
};

static int sim_list_one(void *ud, const char *name)
{
	struct sim_list *l = ud;

	return owner_of(name) == l->h ? l->fn(l->ud, name) : 0;
}

static int sim_list(void *ctx, saas_name_fn fn, void *userdata)
{
	struct sim_list l = { ctx, fn, userdata };

	if (l.h->down)
		return sim_down(l.h);
	return saas_fake_driver.vm_list(NULL, sim_list_one, &l);
}

static int sim_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	struct sim_host *h = ctx;
	int rc;

	if ((rc = sim_check(h, name)) < 0)
		return rc;
	h->execs++;
	return saas_fake_driver.exec(NULL, name, req, exit_code);
}

static int sim_write(void *ctx, const char *name, const char *path, unsigned int mode, saas_read_fn reader, void *ud,
                     int64_t size)
{
	int rc = sim_check(ctx, name);

	return rc < 0 ? rc : saas_fake_driver.file_write(NULL, name, path, mode, reader, ud, size);
}

static int sim_read(void *ctx, const char *name, const char *path, int64_t max, saas_write_fn writer, void *ud,
                    int64_t *size)
{
	int rc = sim_check(ctx, name);

	return rc < 0 ? rc : saas_fake_driver.file_read(NULL, name, path, max, writer, ud, size);
}

static int sim_network_default(void *ctx)
{
	(void)ctx;
	return saas_fake_driver.network_default(NULL);
}

static int sim_network_set(void *ctx, const char *name, const saas_vm_network *net)
{
	int rc = sim_check(ctx, name);

	return rc < 0 ? rc : saas_fake_driver.vm_network_set(NULL, name, net);
}

static int sim_network_stats(void *ctx, const char *name, saas_vm_network_stats *out)
{
	int rc = sim_check(ctx, name);

	return rc < 0 ? rc : saas_fake_driver.vm_network_stats(NULL, name, out);
}

static int sim_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes)
{
	int rc = sim_check(ctx, name);

	if (rc == SAAS_OK && (rc = saas_fake_driver.vm_snapshot(NULL, name, snap, keep, bytes)) == SAAS_OK) {
		if (!keep)
			disown(name);
		own(snap, ctx);
		sim_snap_put(ctx, snap, saas_test_now(), 1, 0);
	}
	return rc;
}

static int sim_restore(void *ctx, const saas_vm_spec *spec, const char *snap)
{
	int rc = sim_check(ctx, snap);

	if (rc == SAAS_OK && (rc = saas_fake_driver.vm_restore(NULL, spec, snap)) == SAAS_OK)
		own(spec->name, ctx);
	return rc;
}

static int sim_snapshot_delete(void *ctx, const char *snap)
{
	struct sim_host *h = ctx;

	if (h->down)
		return sim_down(h);
	h->snap_deletes++;
	for (int i = 0; i < SIM_SNAPS; i++)
		if (snaps[i].host == h && strcmp(snaps[i].name, snap) == 0 && !snaps[i].theirs)
			snaps[i].host = NULL;
	if (owner_of(snap) != h)
		return SAAS_OK;
	disown(snap);
	return saas_fake_driver.snapshot_delete(NULL, snap);
}

static int sim_snapshot_scan(void *ctx, saas_snapshot_fn fn, void *userdata)
{
	struct sim_host *h = ctx;
	int stop = 0;

	if (h->down)
		return sim_down(h);
	for (int i = 0; i < SIM_SNAPS && !stop; i++)
		if (snaps[i].host == h && !snaps[i].theirs) {
			saas_driver_snapshot s = { snaps[i].name, snaps[i].written_ms, snaps[i].complete };
			stop = fn(userdata, &s);
		}
	return SAAS_OK;
}

static int sim_snapshot_list(void *ctx, saas_name_fn fn, void *userdata)
{
	struct sim_list l = { ctx, fn, userdata };

	if (l.h->down)
		return sim_down(l.h);
	return saas_fake_driver.snapshot_list(NULL, sim_list_one, &l);
}

static pthread_mutex_t stuck_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stuck_cond = PTHREAD_COND_INITIALIZER;

static void sim_unstick(struct sim_host *h)
{
	pthread_mutex_lock(&stuck_mu);
	h->stuck = 0;
	pthread_cond_broadcast(&stuck_cond);
	pthread_mutex_unlock(&stuck_mu);
}

static int sim_host_info(void *ctx, saas_driver_host *out)
{
	struct sim_host *h = ctx;

	if (h->down)
		return sim_down(h);
	pthread_mutex_lock(&stuck_mu);
	if (h->stuck)
		h->stuck_calls++;
	while (h->stuck)
		pthread_cond_wait(&stuck_cond, &stuck_mu);
	pthread_mutex_unlock(&stuck_mu);
	saas_test_advance(h->answer_ms);
	out->cpus = h->cpus;
	out->memory_mb = h->memory_mb;
	out->vms = sim_vms(h);
	out->spare_mb = h->spare_mb;
	return SAAS_OK;
}

/* Each host reports one ready template of its own image ("img-NAME"): whose templates a host shows is checked. */
static int sim_template_list(void *ctx, saas_template_fn fn, void *userdata)
{
	struct sim_host *h = ctx;
	char image[80];
	saas_driver_template t = { image, 2, 4096, 20, SAAS_TEMPLATE_READY, 1 << 20 };

	if (h->down)
		return sim_down(h);
	snprintf(image, sizeof(image), "img-%s", h->name);
	fn(userdata, &t);
	return SAAS_OK;
}

static const saas_driver sim_driver = {
	.version = SAAS_DRIVER_VERSION,
	.name = "sim",
	.open = sim_open,
	.close = sim_close,
	.vm_create = sim_create,
	.vm_take = sim_take,
	.vm_destroy = sim_destroy,
	.vm_state = sim_state,
	.vm_list = sim_list,
	.exec = sim_exec,
	.file_write = sim_write,
	.file_read = sim_read,
	.network_default = sim_network_default,
	.vm_network_set = sim_network_set,
	.vm_network_stats = sim_network_stats,
	.vm_snapshot = sim_snapshot,
	.vm_restore = sim_restore,
	.snapshot_delete = sim_snapshot_delete,
	.snapshot_list = sim_snapshot_list,
	.snapshot_scan = sim_snapshot_scan,
	.host_info = sim_host_info,
	.template_list = sim_template_list,
};

/* ---- fixture ---- */

/* The store-only engine the admin commands open (`aas-server host ...`), beside the fixture's. */
static saas_engine *admin;

static int setup(void **state)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&sim_driver, SAAS_TEST_FAKE_CLOCK);
	saas_engine_options o;

	sim_reset();
	f->opts.max_sandboxes = 20;
	f->opts.driver_config = "owner=test";
	f->credit_a = SAAS_USD(100);
	saas_test_fixture_open(f);
	o = f->opts;
	o.flags = SAAS_ENGINE_STORE_ONLY;
	o.driver = NULL;
	if (saas_engine_open(&admin, &o) != SAAS_OK)
		fail_msg("admin engine open: %s", saas_error_last()->message);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_engine_free(admin);
	admin = NULL;
	saas_test_fixture_free(*state);
	sim_reset();
	return 0;
}

/* Register host `name` (reached as qemu+ssh://NAME/system) of cpus and memory, as the admin does; its id into id. */
static void host_add(const char *name, unsigned int cpus, uint64_t memory_mb, char *id)
{
	char uri[128];
	saas_host *h = NULL;

	sim_host(name, cpus, memory_mb);
	snprintf(uri, sizeof(uri), "qemu+ssh://%s/system", name);
	if (saas_host_add(&h, admin, name, uri, "10.0.0.2", NULL, 0) != SAAS_OK)
		fail_msg("host add: %s", saas_error_last()->message);
	if (id)
		snprintf(id, SAAS_ID_MAX + 1, "%s", h->id);
	saas_host_free(h);
}

/* One reaper sweep: with no heartbeat thread, also the hosts' heartbeat. */
static void sweep(struct saas_test_fixture *f)
{
	assert_int_equal(saas_engine_sweep(NULL, f->engine), SAAS_OK);
}

static saas_sandbox *create(struct saas_test_fixture *f)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	o.timeout_s = 3600;
	if (saas_sandbox_create(&sb, f->a, &o, 0) != SAAS_OK)
		fail_msg("create: %s", saas_error_last()->message);
	return sb;
}

/* The host a sandbox's row names. */
static void host_of(struct saas_test_fixture *f, const char *id, char *out)
{
	saas_store_sandbox row;

	assert_int_equal(f->engine->store->sandbox_get(f->engine->store_ctx, id, &row), SAAS_OK);
	snprintf(out, SAAS_ID_MAX + 1, "%s", row.host_id);
}

/* A sandbox's prices per hour, running and paused, as its row has them. */
static void rates(struct saas_test_fixture *f, const char *id, int64_t *run, int64_t *paused)
{
	saas_store_sandbox row;

	assert_int_equal(f->engine->store->sandbox_get(f->engine->store_ctx, id, &row), SAAS_OK);
	*run = row.usd_micro_per_hour;
	*paused = row.paused_usd_micro_per_hour;
}

static saas_host *host_get(const char *name)
{
	saas_host *h = NULL;

	assert_int_equal(saas_host_get(&h, admin, name), SAAS_OK);
	return h;
}

/* ---- tests ---- */

/* No host registered: the engine's own driver runs every VM, as it always did. */
static void test_single_machine(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_host_list *l = NULL;
	saas_sandbox *sb;
	char host[SAAS_ID_MAX + 1];

	sweep(f);
	sb = create(f);
	host_of(f, sb->id, host);
	assert_string_equal(host, "");
	assert_ptr_equal(owner_of(sb->id), sim_find("local"));
	assert_int_equal(saas_host_list_get(&l, f->engine), SAAS_OK);
	assert_int_equal(l->count, 0);
	saas_host_list_free(l);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	saas_sandbox_free(sb);
}

static void test_registry(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_host_options o = SAAS_HOST_OPTIONS_INIT;
	saas_host *h = NULL;
	saas_host_list *l = NULL;
	static const char *const bad_names[] = { "", "-a", "a-", "A", "a.b", "a_b",
		                                 "a234567890123456789012345678901234567890123456789012345678901234" };
	static const char *const bad_uris[] = { "", "ssh://h/system", "qemu+ssh//h/system", "qemu+ssh://h/system x",
		                                "qemu+ssh://h/\"system", "xen://h/", "://h/",
		                                "qemu+ssh://h/system?keyfile=/k,x" };
	static const char *const bad_addresses[] = { "", "host.example", "10.0.0.256", "10.0.0.1 ", "fe80::1%eth0", "fd00::2" };

	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
		assert_int_equal(saas_host_add(NULL, admin, bad_names[i], "qemu+ssh://h/system", "10.0.0.2", NULL, 0),
		                 SAAS_EINVAL);
	for (size_t i = 0; i < sizeof(bad_uris) / sizeof(bad_uris[0]); i++)
		assert_int_equal(saas_host_add(NULL, admin, "h", bad_uris[i], "10.0.0.2", NULL, 0), SAAS_EINVAL);
	for (size_t i = 0; i < sizeof(bad_addresses) / sizeof(bad_addresses[0]); i++)
		assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", bad_addresses[i], NULL, 0),
		                 SAAS_EINVAL);
	/* IPv6: said so, not "not an address". */
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", "fd00::2", NULL, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "IPv4"));
	/* Unauthenticated TCP only when asked for by name. */
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+tcp://h/system", "10.0.0.2", NULL, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "qemu+tcp"));
	/*
	 * A libvirtd on the server's own machine: only by its socket's path (the server's embedded driver answers
	 * qemu:// in its process), and the refusal names the URI that works.
	 */
	{
		static const char *const local_bad[] = {
			"qemu:///system",
			"qemu:///system?socket=/run/libvirt/libvirt-sock",
			"qemu+unix:///system",
			"qemu+unix:///system?socket=",
			"qemu+unix:///system?socket=run/libvirt-sock",
			"qemu+unix:///system?sockets=/run/libvirt/libvirt-sock",
			"qemu+unix:///system?socket=%2",
		};
		static const char *const local_good[] = {
			"qemu+unix:///system?socket=/run/libvirt/libvirt-sock",
			"qemu+unix:///system?mode=direct&socket=/run/libvirt/virtqemud-sock",
			"qemu+unix:///system?socket=%2Frun%2Flibvirt%2Flibvirt-sock",
		};

		for (size_t i = 0; i < sizeof(local_bad) / sizeof(local_bad[0]); i++) {
			assert_int_equal(saas_host_add(NULL, admin, "h", local_bad[i], "127.0.0.1", NULL, 0), SAAS_EINVAL);
			assert_non_null(strstr(saas_error_last()->message, "qemu+unix:///system?socket=/run/libvirt/libvirt-sock"));
		}
		for (size_t i = 0; i < sizeof(local_good) / sizeof(local_good[0]); i++) {
			char name[8];

			snprintf(name, sizeof(name), "l%zu", i);
			assert_int_equal(saas_host_add(NULL, admin, name, local_good[i], "127.0.0.1", NULL, 0), SAAS_OK);
			assert_int_equal(saas_host_remove(admin, name), SAAS_OK);
		}
	}
	/* A query that turns off the check of the host's identity, however it is spelled, only when allowed by name. */
	{
		static const char *const unverified[] = {
			"qemu+tls://h/system?no_verify=1",
			"qemu+tls://h/system?pkipath=/etc/pki&no_verify=1",
			"qemu+tls://h/system?NO_VERIFY=2",
			"qemu+tls://h/system?no_verify=-1",
			"qemu+tls://h/system?no_verify=",
			"qemu+tls://h/system?no%5Fverify=1",
			"qemu+tls://h/system?keyfile=k;no_verify=1",
			"qemu+ssh://h/system?known_hosts_verify=ignore",
			"qemu+ssh://h/system?sshauth=privkey&known_hosts_verify=IGNORE",
			"qemu+ssh://h/system?known_hosts_verify=%69gnore",
			"qemu+libssh://root@h/system?known_hosts_verify=auto",
			"qemu+ssh://h/system?no_verify=%1",
		};
		static const char *const verified[] = {
			"qemu+tls://h/system?no_verify=0",
			"qemu+tls://h/system?no_verify=00",
			"qemu+ssh://h/system?known_hosts_verify=normal",
			"qemu+ssh://h/system?keyfile=/k&no_tty=1",
			"qemu+libssh://root@h/system?keyfile=/k&known_hosts=/kh&sshauth=privkey",
			"qemu+ssh://h/system?",
		};

		for (size_t i = 0; i < sizeof(unverified) / sizeof(unverified[0]); i++) {
			assert_int_equal(saas_host_add(NULL, admin, "h", unverified[i], "10.0.0.2", NULL, 0), SAAS_EINVAL);
			assert_non_null(strstr(saas_error_last()->message, "query field") ||
			                strstr(saas_error_last()->message, "identity"));
		}
		for (size_t i = 0; i < sizeof(verified) / sizeof(verified[0]); i++) {
			char name[8];

			snprintf(name, sizeof(name), "v%zu", i);
			assert_int_equal(saas_host_add(NULL, admin, name, verified[i], "10.0.0.2", NULL, 0), SAAS_OK);
			assert_int_equal(saas_host_remove(admin, name), SAAS_OK);
		}
		assert_int_equal(saas_host_add(NULL, admin, "u1", unverified[0], "10.0.0.2", NULL,
		                               SAAS_HOST_ALLOW_UNVERIFIED), SAAS_OK);
		assert_int_equal(saas_host_remove(admin, "u1"), SAAS_OK);
	}
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", "10.0.0.2", NULL, 4), SAAS_EINVAL);
	o.cpu_overcommit_milli = 99;
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", "10.0.0.2", &o, 0), SAAS_EINVAL);
	o.cpu_overcommit_milli = SAAS_HOST_OVERCOMMIT_MAX + 1;
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", "10.0.0.2", &o, 0), SAAS_EINVAL);
	o.cpu_overcommit_milli = 0;
	o.version = 2;
	assert_int_equal(saas_host_add(NULL, admin, "h", "qemu+ssh://h/system", "10.0.0.2", &o, 0), SAAS_EINVAL);

	o.version = SAAS_HOST_OPTIONS_VERSION;
	o.mem_overcommit_milli = 1500;
	assert_int_equal(saas_host_add(&h, admin, "h1", "qemu+tcp://h1/system", "10.0.0.9", &o, SAAS_HOST_ALLOW_TCP),
	                 SAAS_OK);
	assert_string_equal(h->name, "h1");
	assert_int_equal(h->state, SAAS_HOST_ACTIVE);
	assert_int_equal(h->cpu_overcommit_milli, SAAS_HOST_CPU_OVERCOMMIT_DEFAULT);
	assert_int_equal(h->mem_overcommit_milli, 1500);
	assert_int_equal(h->last_seen_ms, 0);
	saas_host_free(h);
	assert_int_equal(saas_host_add(NULL, admin, "h1", "qemu+ssh://other/system", "10.0.0.3", NULL, 0),
	                 SAAS_EEXISTS);
	saas_test_advance(1); /* listed oldest first */
	host_add("h2", 8, 16384, NULL);

	/* Drain and back; by name or id; twice is fine. */
	assert_int_equal(saas_host_drain(admin, "h1"), SAAS_OK);
	assert_int_equal(saas_host_drain(admin, "h1"), SAAS_OK);
	h = host_get("h1");
	assert_int_equal(h->state, SAAS_HOST_DRAINING);
	assert_int_equal(saas_host_activate(admin, h->id), SAAS_OK);
	saas_host_free(h);
	h = host_get("h1");
	assert_int_equal(h->state, SAAS_HOST_ACTIVE);
	saas_host_free(h);
	assert_int_equal(saas_host_drain(admin, "nope"), SAAS_ENOTFOUND);
	assert_int_equal(saas_host_remove(admin, "nope"), SAAS_ENOTFOUND);
	assert_int_equal(saas_host_drain(admin, ""), SAAS_EINVAL);

	/* The engine reaches them: their capacity is what they report times the overcommit. */
	sweep(f);
	assert_int_equal(saas_host_list_get(&l, admin), SAAS_OK);
	assert_int_equal(l->count, 2);
	assert_string_equal(l->items[0]->name, "h1");
	assert_int_equal(l->items[0]->cpus, 4);
	assert_int_equal(l->items[0]->vcpus_capacity, 16);
	assert_int_equal(l->items[0]->memory_mb_capacity, 8192 * 3 / 2);
	assert_int_equal(l->items[0]->last_seen_ms, saas_test_now());
	assert_string_equal(l->items[1]->name, "h2");
	assert_int_equal(l->items[1]->vcpus_capacity, 32);
	assert_int_equal(l->items[1]->memory_mb_capacity, 16384);
	saas_host_list_free(l);
	/* Each host's context: its own state directory, the engine's configuration with its uri and address. */
	h = host_get("h2");
	{
		char want[512];
		snprintf(want, sizeof(want), "%s/hosts/%s", f->dir, h->id);
		assert_string_equal(sim_find("h2")->state_dir, want);
	}
	assert_string_equal(sim_find("h2")->config, "owner=test uri=qemu+ssh://h2/system listen=10.0.0.2");
	assert_int_equal(saas_host_remove(admin, h->id), SAAS_OK);
	saas_host_free(h);
	assert_int_equal(saas_host_get(&h, admin, "h2"), SAAS_ENOTFOUND);
}

/* New sandboxes go to the host with the most memory left, and none past every host's capacity. */
static void test_placement(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_sandbox *sb[4];
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *none = NULL;
	unsigned int on_a = 0, on_b = 0;

	/* Registered by another process; this engine takes them up at its next heartbeat. */
	host_add("a", 4, 8192, a);
	host_add("b", 4, 8192, b);
	sweep(f);
	for (int i = 0; i < 4; i++) {
		sb[i] = create(f);
		host_of(f, sb[i]->id, where);
		if (strcmp(where, a) == 0)
			on_a++;
		else if (strcmp(where, b) == 0)
			on_b++;
		/* The VM runs where the row says. */
		assert_ptr_equal(owner_of(sb[i]->id), sim_find(strcmp(where, a) == 0 ? "a" : "b"));
		/* Spread: never two more on one than the other. */
		assert_true(on_a <= on_b + 1 && on_b <= on_a + 1);
	}
	assert_int_equal(on_a, 2);
	assert_int_equal(on_b, 2);
	assert_int_equal(sim_vms(sim_find("local")), 0);
	/* Both full (two smalls of 4096 MiB each): busy, and nothing made. */
	o.timeout_s = 3600;
	assert_int_equal(saas_sandbox_create(&none, f->a, &o, 0), SAAS_EBUSY);
	assert_non_null(strstr(saas_error_last()->message, "no VM host has room for a small sandbox"));
	assert_null(none);
	assert_int_equal(saas_fake_vm_count(), 4);
	/* One ends: its room is free again. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb[0]->id, 0), SAAS_OK);
	none = create(f);
	saas_sandbox_free(none);
	for (int i = 0; i < 4; i++)
		saas_sandbox_free(sb[i]);
}

/*
 * A VM started ahead on a host is taken by a create placed on that host:
 * the one placement would choose now (the most memory left), never another
 * host's; a create with a network of its own takes none. When the chosen
 * host fills up before the row is placed there, the VM started ahead is let
 * go and the create is placed as any other.
 */
static void test_started_ahead_on_hosts(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb, *isolated = NULL, *other;
	struct sim_host *ha, *hb;

	host_add("a", 4, 8192, a);
	host_add("b", 4, 14336, b);
	sweep(f);
	ha = sim_find("a");
	hb = sim_find("b");
	if (!ha || !hb) {
		fail_msg("the hosts' simulations are missing");
		return;
	}
	/* b has the more memory left: a's VM started ahead is not what placement would choose. */
	snprintf(ha->ahead, sizeof(ha->ahead), "sbx-aheadonhostaaaaaaaaa");
	snprintf(hb->ahead, sizeof(hb->ahead), "sbx-aheadonhostbbbbbbbbb");
	o.network = "isolated";
	assert_int_equal(saas_sandbox_create(&isolated, f->a, &o, 0), SAAS_OK);
	assert_string_not_equal(isolated->id, hb->ahead);
	assert_int_equal(hb->ahead_taken, 0);
	sb = create(f);
	assert_string_equal(sb->id, "sbx-aheadonhostbbbbbbbbb");
	host_of(f, sb->id, where);
	assert_string_equal(where, b);
	assert_ptr_equal(owner_of(sb->id), hb);
	assert_int_equal(ha->ahead_taken, 0);
	assert_string_equal(ha->ahead, "sbx-aheadonhostaaaaaaaaa");
	/* Now a has the more memory left (b holds two smalls): its own is taken. */
	other = create(f);
	assert_string_equal(other->id, "sbx-aheadonhostaaaaaaaaa");
	host_of(f, other->id, where);
	assert_string_equal(where, a);
	assert_ptr_equal(owner_of(other->id), ha);
	saas_sandbox_free(sb);
	saas_sandbox_free(other);
	saas_sandbox_free(isolated);
}

/*
 * What an operator sees of each host: its sandboxes (every account's, and
 * only its own), its templates as its own context reports them, and none
 * from an engine that opened no host or from a host that does not answer.
 */
static void test_host_views(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_sandbox *sb[3];
	saas_sandbox_list *l = NULL, *next = NULL;
	saas_host *h = NULL;
	unsigned int on_a = 0;

	host_add("a", 4, 16384, a);
	host_add("b", 4, 14336, b);
	sweep(f);
	for (int i = 0; i < 3; i++) {
		sb[i] = create(f);
		host_of(f, sb[i]->id, where);
		on_a += strcmp(where, a) == 0;
	}
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, "a", NULL, 0, 0), SAAS_OK);
	assert_int_equal(l->count, on_a);
	assert_null(l->next_cursor);
	for (size_t i = 0; i < l->count; i++) {
		host_of(f, l->items[i]->id, where);
		assert_string_equal(where, a);
		if (i)
			assert_true(l->items[i - 1]->created_at_ms >= l->items[i]->created_at_ms);
	}
	saas_sandbox_list_free(l);
	/* By id too, in pages of one that follow each other, on the host that has two (spread: 2 and 1). */
	assert_true(on_a == 1 || on_a == 2);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, on_a == 2 ? a : b, NULL, 1, 0), SAAS_OK);
	assert_int_equal(l->count, 1);
	assert_non_null(l->next_cursor);
	assert_int_equal(saas_host_sandbox_list_get(&next, f->engine, on_a == 2 ? a : b, l->next_cursor, 1, 0), SAAS_OK);
	assert_int_equal(next->count, 1);
	assert_null(next->next_cursor);
	assert_string_not_equal(next->items[0]->id, l->items[0]->id);
	saas_sandbox_list_free(next);
	saas_sandbox_list_free(l);
	/* An ended one is no longer there. */
	host_of(f, sb[0]->id, where);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb[0]->id, 0), SAAS_OK);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, where, NULL, 0, 0), SAAS_OK);
	for (size_t i = 0; i < l->count; i++)
		assert_string_not_equal(l->items[i]->id, sb[0]->id);
	saas_sandbox_list_free(l);
	/* Bad arguments, each with its error. */
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, "nope", NULL, 0, 0), SAAS_ENOTFOUND);
	assert_null(l);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, "a", NULL, 1001, 0), SAAS_EINVAL);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, "a", NULL, 0, 1), SAAS_EINVAL);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, "a", "not-a-cursor", 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_host_sandbox_list_get(&l, f->engine, NULL, NULL, 0, 0), SAAS_EINVAL);
	assert_int_equal(saas_host_sandbox_list_get(NULL, f->engine, "a", NULL, 0, 0), SAAS_EINVAL);
	/* Templates: each host's own, from the engine that reached it; none from one that opened no host. */
	assert_int_equal(saas_host_get(&h, f->engine, "a"), SAAS_OK);
	assert_int_equal(h->ntemplates, 1);
	assert_string_equal(h->templates[0]->image, "img-a");
	assert_int_equal(h->templates[0]->state, SAAS_TEMPLATE_READY);
	assert_int_equal(h->pool_vms, 0);
	saas_host_free(h);
	h = host_get("a");
	assert_int_equal(h->ntemplates, 0);
	saas_host_free(h);
	/* A host that does not answer lists none, and the rest still list. */
	sim_find("b")->down = 1;
	{
		saas_host_list *hl = NULL;
		assert_int_equal(saas_host_list_get(&hl, f->engine), SAAS_OK);
		assert_int_equal(hl->count, 2);
		for (size_t i = 0; i < hl->count; i++)
			assert_int_equal(hl->items[i]->ntemplates, strcmp(hl->items[i]->name, "a") == 0 ? 1 : 0);
		saas_host_list_free(hl);
	}
	sim_find("b")->down = 0;
	/* Nobody reached it for three heartbeats: it is not asked (its answer may be a timeout away). */
	saas_test_advance(4 * (int64_t)f->engine->hosts.heartbeat_ms);
	assert_int_equal(saas_host_get(&h, f->engine, "a"), SAAS_OK);
	assert_int_equal(h->ntemplates, 0);
	saas_host_free(h);
	sweep(f);
	assert_int_equal(saas_host_get(&h, f->engine, "a"), SAAS_OK);
	assert_int_equal(h->ntemplates, 1);
	saas_host_free(h);
	for (int i = 0; i < 3; i++)
		saas_sandbox_free(sb[i]);
}

/* Every call for a sandbox goes to its host's context. */
static void test_routing(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1];
	saas_sandbox *x, *y;
	saas_execution *ex = NULL;
	struct sim_host *ha, *hb;

	host_add("a", 4, 8192, a);
	host_add("b", 4, 14336, b);
	sweep(f);
	/* b has the most memory left, then a. */
	x = create(f);
	y = create(f);
	ha = sim_find("a");
	hb = sim_find("b");
	assert_ptr_equal(owner_of(x->id), hb);
	assert_ptr_equal(owner_of(y->id), hb);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, y->id, 0), SAAS_OK);
	assert_null(owner_of(y->id));
	saas_sandbox_free(y);
	assert_int_equal(saas_exec(&ex, f->a, x->id, "echo hi", NULL, 0), SAAS_OK);
	assert_int_equal(ex->exit_code, 0);
	saas_execution_free(ex);
	assert_int_equal(hb->execs, 1);
	assert_int_equal(ha->execs, 0);
	assert_int_equal(saas_file_write(f->a, x->id, "f.txt", "data", 4, NULL), SAAS_OK);
	{
		void *data = NULL;
		size_t len = 0;
		assert_int_equal(saas_file_read(&data, &len, f->a, x->id, "f.txt", 0), SAAS_OK);
		assert_int_equal(len, 4);
		saas_free(data);
	}
	/* Pause and resume stay on the host that holds the snapshot. */
	assert_int_equal(saas_sandbox_pause(NULL, f->a, x->id, 0), SAAS_OK);
	assert_int_equal(sim_vms(hb), 0);
	assert_int_equal(saas_sandbox_resume(NULL, f->a, x->id, 0), SAAS_OK);
	assert_ptr_equal(owner_of(x->id), hb);
	/* A fork's children too. */
	{
		saas_sandbox_list *kids = NULL;
		if (saas_sandbox_fork(&kids, f->a, x->id, 2, NULL, 0) != SAAS_OK)
			fail_msg("fork: %s", saas_error_last()->message);
		for (size_t i = 0; i < kids->count; i++)
			assert_ptr_equal(owner_of(kids->items[i]->id), hb);
		saas_sandbox_list_free(kids);
	}
	/* Its host out of reach: a clear error, not a crash. */
	hb->down = 1;
	assert_int_equal(saas_exec(&ex, f->a, x->id, "echo hi", NULL, 0), SAAS_OK);
	assert_int_equal(ex->status, SAAS_EXEC_FAILED);
	assert_non_null(strstr(ex->error, "host b does not answer"));
	saas_execution_free(ex);
	hb->down = 0;
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, x->id, 0), SAAS_OK);
	assert_null(owner_of(x->id));
	saas_sandbox_free(x);
}

/*
 * Snapshots on a host that no sandbox names: what a delete whose server
 * stopped before the host answered left (that server kept it in memory only),
 * a fork or a pause cut short. The sweep deletes this cluster's once they are
 * older than the grace: a young one may be a fork's that a server is making
 * children from, named by no row meanwhile. A paused sandbox's stays, another
 * cluster's too; a host that does not answer is swept when it does.
 */
static void test_host_snapshot_sweep(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_store_sandbox row;
	saas_sandbox *x;
	struct sim_host *ha, *hb, *hx;
	int64_t t0;

	host_add("a", 4, 16384, NULL);
	host_add("b", 4, 16384, NULL);
	sweep(f);
	ha = sim_find("a");
	hb = sim_find("b");
	{
		saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
		/* Paused past two graces, and still to be resumed. */
		o.timeout_s = 4 * SAAS_HOST_SNAPSHOT_GRACE_MS / 1000;
		x = NULL;
		if (saas_sandbox_create(&x, f->a, &o, 0) != SAAS_OK)
			fail_msg("create: %s", saas_error_last()->message);
	}
	hx = owner_of(x->id);
	assert_non_null(hx);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, x->id, 0), SAAS_OK);
	assert_int_equal(f->engine->store->sandbox_get(f->engine->store_ctx, x->id, &row), SAAS_OK);
	assert_true(sim_snap_there(hx, row.snapshot));
	t0 = saas_test_now();
	/* Left on a: a fork's whose delete was missed, a take cut short, another cluster's, one of no known age. */
	sim_snap_put(ha, "snap-missed", t0, 1, 0);
	sim_snap_put(ha, "snap-cut-short", t0, 0, 0);
	sim_snap_put(ha, "snap-theirs", t0, 1, 1);
	sim_snap_put(ha, "snap-no-age", 0, 1, 0);
	sim_snap_put(hb, "snap-on-b", t0, 1, 0);
	/* Within the grace: nothing is deleted. */
	saas_test_advance(SAAS_HOST_SNAPSHOT_GRACE_MS - 1000);
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	assert_int_equal(ha->snap_deletes + hb->snap_deletes, 0);
	assert_true(sim_snap_there(ha, "snap-missed"));
	assert_true(sim_snap_there(ha, "snap-cut-short"));
	/* One written just now, as a fork's being made into children by another server. */
	sim_snap_put(ha, "snap-young", saas_test_now(), 1, 0);
	saas_test_advance(2000);
	/* Past the grace, b not answering: a's old ones go; the rest stay, b's until it answers. */
	hb->down = 1;
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	assert_false(sim_snap_there(ha, "snap-missed"));
	assert_false(sim_snap_there(ha, "snap-cut-short"));
	assert_true(sim_snap_there(ha, "snap-theirs"));
	assert_true(sim_snap_there(ha, "snap-no-age"));
	assert_true(sim_snap_there(ha, "snap-young"));
	assert_true(sim_snap_there(hb, "snap-on-b"));
	assert_true(sim_snap_there(hx, row.snapshot));
	/* b answers: a restarted server's reconcile sweeps it. */
	hb->down = 0;
	assert_int_equal(saas__reconcile(f->engine), SAAS_OK);
	assert_false(sim_snap_there(hb, "snap-on-b"));
	assert_true(sim_snap_there(ha, "snap-young"));
	assert_true(sim_snap_there(hx, row.snapshot));
	/* The young one, once old, goes too; the paused sandbox's never while it is paused. */
	saas_test_advance(SAAS_HOST_SNAPSHOT_GRACE_MS);
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	assert_false(sim_snap_there(ha, "snap-young"));
	assert_true(sim_snap_there(ha, "snap-theirs"));
	assert_true(sim_snap_there(hx, row.snapshot));
	/* It resumes from it, on its host, and then its snapshot goes. */
	if (saas_sandbox_resume(NULL, f->a, x->id, 0) != SAAS_OK)
		fail_msg("resume: %s", saas_error_last()->message);
	assert_ptr_equal(owner_of(x->id), hx);
	assert_false(sim_snap_there(hx, row.snapshot));
	saas_sandbox_free(x);
}

/* An engine that cannot open a host's context at all says which host is unreachable. */
static void test_unreachable_open(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1];
	saas_sandbox *x;
	saas_execution *ex = NULL;

	host_add("a", 4, 8192, a);
	sweep(f);
	x = create(f);
	/* A new engine (a restart) while the host is down: reconcile leaves its sandbox to the heartbeats. */
	saas_test_fixture_close(f);
	sim_find("a")->down = 1;
	saas_test_fixture_open(f);
	assert_int_equal(saas_exec(&ex, f->a, x->id, "echo hi", NULL, 0), SAAS_EBACKEND);
	assert_non_null(strstr(saas_error_last()->message, "VM host a is unreachable"));
	{
		saas_sandbox *now = NULL;
		assert_int_equal(saas_sandbox_get(&now, f->a, x->id), SAAS_OK);
		assert_int_equal(now->status, SAAS_SANDBOX_READY);
		saas_sandbox_free(now);
	}
	sim_find("a")->down = 0;
	saas_test_advance(10000); /* past the retry's back-off */
	ex = NULL;
	assert_int_equal(saas_exec(&ex, f->a, x->id, "echo hi", NULL, 0), SAAS_OK);
	saas_execution_free(ex);
	saas_sandbox_free(x);
}

/* A draining host takes nothing new; its sandboxes run on; it is removed once empty. */
static void test_drain(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_sandbox *x, *y, *z = NULL;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_execution *ex = NULL;
	saas_host *h;

	host_add("a", 4, 16384, a);
	host_add("b", 4, 8192, b);
	sweep(f);
	x = create(f);
	host_of(f, x->id, where);
	assert_string_equal(where, a);
	assert_int_equal(saas_host_drain(admin, "a"), SAAS_OK);
	/* Though a has the most room left, new ones go to b, until b is full. */
	y = create(f);
	host_of(f, y->id, where);
	assert_string_equal(where, b);
	saas_sandbox_free(create(f));
	o.timeout_s = 60;
	assert_int_equal(saas_sandbox_create(&z, f->a, &o, 0), SAAS_EBUSY);
	/* x lives on. */
	assert_int_equal(saas_exec(&ex, f->a, x->id, "echo still here", NULL, 0), SAAS_OK);
	saas_execution_free(ex);
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_DRAINING);
	assert_int_equal(h->sandboxes, 1);
	assert_int_equal(h->memory_mb_used, 4096);
	saas_host_free(h);
	/* Not removed while x lives. */
	assert_int_equal(saas_host_remove(admin, "a"), SAAS_EBUSY);
	assert_non_null(strstr(saas_error_last()->message, "still has 1 sandboxes"));
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, x->id, 0), SAAS_OK);
	assert_int_equal(saas_host_remove(admin, "a"), SAAS_OK);
	sweep(f);
	saas_sandbox_free(x);
	saas_sandbox_free(y);
}

/*
 * A host nobody reaches past the grace is lost; its sandboxes are closed billed
 * to the moment it was last seen, to the micro-dollar; when it answers again,
 * its VMs go and it takes sandboxes again.
 */
static void test_lost_host(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1];
	saas_sandbox *x, *p, *now = NULL;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_account *acc = NULL;
	struct sim_host *ha;
	int64_t ready, last_seen, credit_before, run, paused;
	saas_host *h;

	host_add("a", 4, 16384, a);
	sweep(f);
	ha = sim_find("a");
	x = create(f);
	p = create(f);
	ready = x->ready_at_ms;
	rates(f, x->id, &run, &paused);
	assert_true(run > 0 && paused > 0);
	saas_test_advance(100000);
	assert_int_equal(saas_sandbox_pause(NULL, f->a, p->id, 0), SAAS_OK);
	saas_test_advance(200500);
	sweep(f);
	last_seen = saas_test_now();
	ha->down = 1;
	/* Within the grace (60 s): not lost, nothing closed. */
	saas_test_advance(30000);
	sweep(f);
	saas_test_advance(30000);
	sweep(f);
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_ACTIVE);
	assert_int_equal(h->last_seen_ms, last_seen);
	saas_host_free(h);
	assert_int_equal(saas_sandbox_get(&now, f->a, x->id), SAAS_OK);
	assert_int_equal(now->status, SAAS_SANDBOX_READY);
	saas_sandbox_free(now);
	/* Meanwhile nothing is placed on it (not reached within three heartbeats). */
	o.timeout_s = 60;
	now = NULL;
	assert_int_equal(saas_sandbox_create(&now, f->a, &o, 0), SAAS_EBUSY);
	/* Past the grace: lost, and its sandboxes closed, billed to last_seen and not a millisecond more. */
	saas_test_advance(1);
	sweep(f);
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_LOST);
	assert_int_equal(h->state_at_ms, saas_test_now());
	assert_int_equal(h->sandboxes, 0);
	saas_host_free(h);
	assert_int_equal(saas_sandbox_get(&now, f->a, x->id), SAAS_OK);
	assert_int_equal(now->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(now->end_reason, SAAS_END_LOST);
	assert_int_equal(now->cost_usd_micro, saas_cost(run, (last_seen - ready) / 1000));
	saas_sandbox_free(now);
	assert_int_equal(saas_sandbox_get(&now, f->a, p->id), SAAS_OK);
	assert_int_equal(now->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(now->end_reason, SAAS_END_LOST);
	/* 100 s running, then paused to last_seen. */
	assert_int_equal(now->cost_usd_micro,
	                 saas_cost(run, 100) + saas_cost(paused, (last_seen - p->ready_at_ms - 100000) / 1000));
	saas_sandbox_free(now);
	/* Time passes while it is lost: nothing more is billed. */
	assert_int_equal(saas_account_get(&acc, admin, f->account_a), SAAS_OK);
	credit_before = acc->balance_usd_micro;
	saas_account_free(acc);
	saas_test_advance(3600000);
	sweep(f);
	assert_int_equal(saas_account_get(&acc, admin, f->account_a), SAAS_OK);
	assert_int_equal(acc->balance_usd_micro, credit_before);
	saas_account_free(acc);
	assert_int_equal(sim_vms(ha), 1);
	/* It answers again: what ran there belongs to nobody and goes; it is active again. */
	ha->down = 0;
	sweep(f);
	assert_int_equal(sim_vms(ha), 0);
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_ACTIVE);
	assert_int_equal(h->last_seen_ms, saas_test_now());
	saas_host_free(h);
	now = create(f);
	assert_ptr_equal(owner_of(now->id), ha);
	saas_sandbox_free(now);
	saas_sandbox_free(x);
	saas_sandbox_free(p);
}

/* The last host removed: creates go to the engine's own driver at once, not 503 until the next heartbeat. */
/*
 * A host slow to answer (libvirt busy starting VMs) is seen when it answered:
 * an answer that took longer than placement's three heartbeats must not keep
 * a live host out of placement.
 */
static void test_slow_answer(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1];
	saas_host *h = NULL;
	saas_sandbox *x;

	host_add("a", 4, 16384, a);
	sim_find("a")->answer_ms = 4 * SAAS_ENGINE_HOST_HEARTBEAT_MS;
	sweep(f);
	assert_int_equal(saas_host_get(&h, admin, "a"), SAAS_OK);
	assert_int_equal(h->last_seen_ms, saas_test_now());
	saas_host_free(h);
	x = create(f);
	saas_sandbox_free(x);
}

/*
 * A host that does not answer (libvirt's keepalive and connect timeouts take
 * seconds) holds up no other host's beat: each host beats in a thread of its
 * own, and the next heartbeats skip a host whose last beat has not ended.
 */
static void test_stuck_host(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1];
	saas_host *h = NULL;
	unsigned int calls;

	host_add("a", 4, 16384, a);
	host_add("b", 4, 14336, b);
	sweep(f);
	pthread_mutex_lock(&stuck_mu);
	sim_find("a")->stuck = 1;
	pthread_mutex_unlock(&stuck_mu);
	for (int beat = 0; beat < 2; beat++) {
		saas_test_advance(1000);
		sweep(f);
		assert_int_equal(saas_host_get(&h, admin, "b"), SAAS_OK);
		assert_int_equal(h->last_seen_ms, saas_test_now());
		saas_host_free(h);
		assert_int_equal(saas_host_get(&h, admin, "a"), SAAS_OK);
		assert_true(h->last_seen_ms < saas_test_now() - 500);
		saas_host_free(h);
	}
	pthread_mutex_lock(&stuck_mu);
	calls = sim_find("a")->stuck_calls;
	pthread_mutex_unlock(&stuck_mu);
	/* One beat waits on it; the second heartbeat did not start another. */
	assert_int_equal(calls, 1);
	/* Placement takes the host that answers. */
	saas_sandbox_free(create(f));
	sim_unstick(sim_find("a"));
	/* Its beat ends, and it is seen again: the next heartbeat beats it. */
	for (int i = 0; i < 100; i++) {
		sweep(f);
		assert_int_equal(saas_host_get(&h, admin, "a"), SAAS_OK);
		calls = h->last_seen_ms == saas_test_now();
		saas_host_free(h);
		if (calls)
			break;
	}
	assert_true(calls);
}

static void test_last_host_removed(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_sandbox *x;

	host_add("a", 4, 8192, a);
	sweep(f);
	x = create(f);
	host_of(f, x->id, where);
	assert_string_equal(where, a);
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, x->id, 0), SAAS_OK);
	saas_sandbox_free(x);
	assert_int_equal(saas_host_remove(admin, "a"), SAAS_OK);
	x = create(f);
	host_of(f, x->id, where);
	assert_string_equal(where, "");
	assert_ptr_equal(owner_of(x->id), sim_find("local"));
	saas_sandbox_free(x);
}

/* The engine options for hosts are checked. */
static void test_options(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *e = NULL;

	o.flags = SAAS_ENGINE_STORE_ONLY;
	o.host_heartbeat_ms = 50;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	o.host_heartbeat_ms = 10000;
	o.host_grace_ms = 15000;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "twice"));
	o.host_grace_ms = 20000;
	assert_int_equal(saas_engine_open(&e, &o), SAAS_OK);
	saas_engine_free(e);
}

/* ---- warm pools on VM hosts ---- */

/* The engine reopened with a pool spec (the fixture's has none). */
static void reopen_pooled(struct saas_test_fixture *f, const char *pool)
{
	saas_test_fixture_close(f);
	f->opts.pool = pool;
	saas_test_fixture_open(f);
}

/* Refill until the pools are full or nothing more can be made; how many were made. */
static unsigned int refill(saas_engine *e)
{
	unsigned int made = 0;
	int rc;

	while ((rc = saas__pool_refill(e)) == 1)
		made++;
	assert_true(rc >= 0);
	return made;
}

/* Which pooled VM the engine holds on a host: the first VM owned by h that has no row. */
static int pooled_on(struct saas_test_fixture *f, const struct sim_host *h, char *name)
{
	for (int i = 0; i < SIM_OWNED; i++) {
		saas_store_sandbox row;
		if (owned[i].host != h || !saas_fake_vm_exists(owned[i].name) ||
		    f->engine->store->sandbox_get(f->engine->store_ctx, owned[i].name, &row) == SAAS_OK)
			continue;
		saas__strlcpy(name, owned[i].name, SAAS_ID_MAX + 1);
		return 1;
	}
	return 0;
}

/*
 * With hosts registered the pools fill on them, spread by room; a create is
 * served from a pooled VM, its row on that VM's host, billed from the claim.
 */
static void test_pool_on_hosts(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	struct sim_host *ha, *hb;
	saas_sandbox *sb, *now = NULL;
	unsigned int calls;
	int64_t claimed_at, run, paused;

	host_add("a", 4, 8192, a);
	host_add("b", 4, 8192, b);
	reopen_pooled(f, "small=2");
	/* Before any host is seen, nothing is made (no host has room), not even on the engine's own driver. */
	assert_int_equal(refill(f->engine), 0);
	assert_int_equal(saas_fake_vm_count(), 0);
	sweep(f);
	saas_test_advance(10000); /* the refill looks again a heartbeat later */
	assert_int_equal(refill(f->engine), 2);
	ha = sim_find("a");
	hb = sim_find("b");
	/* One on each: the second goes where the most memory is left. */
	assert_int_equal(sim_vms(ha), 1);
	assert_int_equal(sim_vms(hb), 1);
	assert_int_equal(sim_vms(sim_find("local")), 0);
	/* The host list does not count pooled VMs as sandboxes: they belong to nobody yet. */
	{
		saas_host *h = host_get("a");
		assert_int_equal(h->sandboxes, 0);
		saas_host_free(h);
		/* The engine that keeps them counts them, per host. */
		assert_int_equal(saas_host_get(&h, f->engine, "a"), SAAS_OK);
		assert_int_equal(h->pool_vms, 1);
		saas_host_free(h);
	}
	saas_test_advance(5000);
	claimed_at = saas_test_now();
	calls = saas_fake_create_calls();
	sb = create(f);
	/* Claimed: no VM was made for it, and it is one of the pooled VMs, on its host. */
	assert_int_equal(saas_fake_create_calls(), calls);
	assert_false(saas__pool_owns(f->engine, sb->id));
	host_of(f, sb->id, where);
	assert_ptr_equal(owner_of(sb->id), strcmp(where, a) == 0 ? ha : hb);
	assert_true(strcmp(where, a) == 0 || strcmp(where, b) == 0);
	assert_int_equal(sb->ready_at_ms, claimed_at);
	/* Billed from the claim, to the micro-dollar. */
	rates(f, sb->id, &run, &paused);
	saas_test_advance(100000);
	assert_int_equal(saas_sandbox_get(&now, f->a, sb->id), SAAS_OK);
	assert_int_equal(now->cost_usd_micro, saas_cost(run, 100));
	saas_sandbox_free(now);
	/* Commands run on its host. */
	{
		saas_execution *ex = NULL;
		struct sim_host *on = owner_of(sb->id);
		unsigned int before = on->execs;
		assert_int_equal(saas_exec(&ex, f->a, sb->id, "echo hi", NULL, 0), SAAS_OK);
		assert_int_equal(ex->exit_code, 0);
		saas_execution_free(ex);
		assert_int_equal(on->execs, before + 1);
	}
	/* The pool makes its replacement (a heartbeat first: the hosts were seen too long ago to take it). */
	assert_int_equal(refill(f->engine), 0);
	saas_test_advance(5000);
	sweep(f);
	refill(f->engine);
	assert_int_equal(sim_vms(ha) + sim_vms(hb), 3);
	saas_test_fixture_close(f);
	assert_int_equal(sim_vms(ha) + sim_vms(hb), 1);
	assert_ptr_not_equal(owner_of(sb->id), NULL);
	f->opts.pool = NULL;
	saas_test_fixture_open(f);
	saas_sandbox_free(sb);
}

/* Pooled VMs take room on their host: placement and the refill leave it to them. */
static void test_pool_room(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	/* Room for two smalls (4096 MiB each). */
	host_add("a", 4, 8192, a);
	reopen_pooled(f, "small=3");
	/* The sweep's refill makes the first, ours the second; a third finds no room. */
	sweep(f);
	saas_test_advance(10000);
	refill(f->engine);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	/* A create the pool cannot serve (it names a network) finds no room: the pooled VMs hold it. */
	o.timeout_s = 3600;
	o.network = "isolated";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EBUSY);
	assert_null(sb);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	/* One served from the pool takes the room its pooled VM held: no more, no less. */
	sb = create(f);
	host_of(f, sb->id, where);
	assert_string_equal(where, a);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	/* The refill makes nothing while the host is full. */
	assert_int_equal(saas__pool_refill(f->engine), 0);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	/* The sandbox ends: the refill takes its room. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(sim_vms(sim_find("a")), 1);
	saas_test_advance(10000); /* past the no-room wait (a heartbeat); the sweep sees the host again */
	sweep(f);
	refill(f->engine);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	saas_sandbox_free(sb);
}

/* A draining host's pooled VMs are never handed out, and go at the next heartbeat. */
static void test_pool_drain(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1], name[SAAS_ID_MAX + 1];
	struct sim_host *ha, *hb;
	saas_sandbox *sb;

	host_add("a", 4, 8192, a);
	host_add("b", 4, 8192, b);
	reopen_pooled(f, "small=2");
	sweep(f);
	saas_test_advance(10000);
	refill(f->engine);
	assert_int_equal(saas_fake_vm_count(), 2);
	ha = sim_find("a");
	hb = sim_find("b");
	assert_true(pooled_on(f, ha, name));
	/* Drained by an operator; this engine has not had a heartbeat since. */
	assert_int_equal(saas_host_drain(admin, "a"), SAAS_OK);
	sb = create(f);
	host_of(f, sb->id, where);
	assert_string_equal(where, b);
	assert_ptr_equal(owner_of(sb->id), hb);
	/* If a's pooled VM was offered first, the claim destroyed it; either way it is nobody's sandbox. */
	{
		saas_sandbox *gone = NULL;
		assert_int_equal(saas_sandbox_get(&gone, f->a, name), SAAS_ENOTFOUND);
		assert_null(gone);
	}
	/* The heartbeat: what is pooled on a goes, and nothing new is made there. */
	sweep(f);
	assert_int_equal(sim_vms(ha), 0);
	assert_false(saas__pool_owns(f->engine, name));
	saas_test_advance(10000);
	sweep(f);
	refill(f->engine);
	assert_int_equal(sim_vms(ha), 0);
	saas_sandbox_free(sb);
}

/* A lost host's pooled VMs are forgotten; its return destroys them. */
static void test_pool_lost(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], name[SAAS_ID_MAX + 1];
	struct sim_host *ha;
	saas_host *h;

	host_add("a", 4, 8192, a);
	reopen_pooled(f, "small=1");
	sweep(f);
	saas_test_advance(10000);
	refill(f->engine);
	ha = sim_find("a");
	assert_int_equal(sim_vms(ha), 1);
	assert_true(pooled_on(f, ha, name));
	assert_true(saas__pool_owns(f->engine, name));
	ha->down = 1;
	for (int i = 0; i < 7; i++) {
		saas_test_advance(10000);
		sweep(f);
	}
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_LOST);
	saas_host_free(h);
	/* Forgotten, not destroyed (the host does not answer); a create is not served by it. */
	assert_false(saas__pool_owns(f->engine, name));
	assert_int_equal(sim_vms(ha), 1);
	{
		saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
		saas_sandbox *none = NULL;
		o.timeout_s = 60;
		assert_int_equal(saas_sandbox_create(&none, f->a, &o, 0), SAAS_EBUSY);
		assert_null(none);
	}
	/* Back: its VMs nobody owns go, the pooled one with them; then the pool fills there again. */
	ha->down = 0;
	sweep(f);
	assert_false(saas_fake_vm_exists(name));
	h = host_get("a");
	assert_int_equal(h->state, SAAS_HOST_ACTIVE);
	saas_host_free(h);
	/* (that sweep's refill may have made it already) */
	saas_test_advance(10000);
	refill(f->engine);
	assert_int_equal(sim_vms(ha), 1);
}

/* A removed host's pooled VMs go; once hosts exist, the engine's own pooled VMs go too. */
static void test_pool_host_set_changes(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], local_vm[SAAS_ID_MAX + 1], name[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	struct sim_host *local;
	saas_sandbox *sb;

	reopen_pooled(f, "small=1");
	/* A single machine: the pool is the engine's own. */
	assert_int_equal(refill(f->engine), 1);
	local = sim_find("local");
	assert_int_equal(sim_vms(local), 1);
	assert_true(pooled_on(f, local, local_vm));
	/* A host registered: the local pooled VM goes at the heartbeat, and the pool fills on the host (the sweep's refill). */
	host_add("a", 4, 8192, a);
	sweep(f);
	assert_false(saas_fake_vm_exists(local_vm));
	refill(f->engine);
	assert_int_equal(sim_vms(local), 0);
	assert_true(pooled_on(f, sim_find("a"), name));
	/* The host removed (no sandbox holds it): its pooled VM goes, and the pool is local again. */
	assert_int_equal(saas_host_remove(admin, "a"), SAAS_OK);
	sweep(f);
	assert_false(saas_fake_vm_exists(name));
	assert_false(saas__pool_owns(f->engine, name));
	refill(f->engine);
	assert_int_equal(sim_vms(local), 1);
	sb = create(f);
	host_of(f, sb->id, where);
	assert_string_equal(where, "");
	saas_sandbox_free(sb);
}

/* A claim on a host still counts the account's limit: refused, the pooled VM stays pooled. */
static void test_pool_limit(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], name[SAAS_ID_MAX + 1];
	saas_sandbox *sb, *none = NULL;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;

	host_add("a", 4, 16384, a);
	f->opts.max_sandboxes = 1;
	reopen_pooled(f, "small=2");
	sweep(f);
	saas_test_advance(5000);
	refill(f->engine);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	sb = create(f);
	assert_true(pooled_on(f, sim_find("a"), name));
	o.timeout_s = 60;
	assert_int_equal(saas_sandbox_create(&none, f->a, &o, 0), SAAS_ELIMIT);
	assert_non_null(strstr(saas_error_last()->message, "max_sandboxes"));
	assert_null(none);
	assert_true(saas__pool_owns(f->engine, name));
	assert_true(saas_fake_vm_exists(name));
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	/* Room in the limit again: the pooled VM is handed out now. */
	none = create(f);
	assert_string_equal(none->id, name);
	saas_sandbox_free(none);
	saas_sandbox_free(sb);
}

/* After a heartbeat, one sandbox fits on host id and a second is refused (busy): the one made. */
static saas_sandbox *one_fits(struct saas_test_fixture *f, const char *id)
{
	char where[SAAS_ID_MAX + 1];
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb, *none = NULL;

	sweep(f);
	sb = create(f);
	host_of(f, sb->id, where);
	assert_string_equal(where, id);
	co.timeout_s = 60;
	assert_int_equal(saas_sandbox_create(&none, f->a, &co, 0), SAAS_EBUSY);
	assert_null(none);
	return sb;
}

/*
 * What the VMs started ahead on a host hold (every engine's, as the driver
 * says at the heartbeat) is theirs: placement leaves it to them, and has it
 * back at the heartbeat after they go.
 */
static void test_spares_memory_counted(void **state)
{
	struct saas_test_fixture *f = *state;
	char a[SAAS_ID_MAX + 1], where[SAAS_ID_MAX + 1];
	saas_sandbox *sb, *none;

	/* Room for two smalls, less 1 MiB the spares there hold: one fits, not two. */
	host_add("a", 4, 8192, a);
	sim_find("a")->spare_mb = 1;
	sb = one_fits(f, a);
	/* They went: the next heartbeat gives the room back. */
	sim_find("a")->spare_mb = 0;
	saas_test_advance(5000);
	sweep(f);
	none = create(f);
	host_of(f, none->id, where);
	assert_string_equal(where, a);
	saas_sandbox_free(none);
	saas_sandbox_free(sb);
}

/*
 * Another engine's pooled VMs have no row and are not this engine's: the
 * heartbeat estimates them from what the host runs, and placement leaves
 * them their room.
 */
static void test_pool_other_engine_counted(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o;
	saas_engine *e2 = NULL;
	char *dir2 = saas_test_tmpdir();
	char a[SAAS_ID_MAX + 1];
	saas_sandbox *sb, *none;

	assert_non_null(dir2);
	saas_test_shared_store(&f->opts);
	reopen_pooled(f, NULL); /* this engine pools nothing */
	o = f->opts;
	o.pool = "small=1";
	o.state_dir = dir2;
	/* Room for two smalls; the other engine pools one there. */
	host_add("a", 4, 8192, a);
	if (saas_engine_open(&e2, &o) != SAAS_OK)
		fail_msg("second engine open: %s", saas_error_last()->message);
	assert_int_equal(saas_engine_sweep(NULL, e2), SAAS_OK);
	refill(e2);
	assert_int_equal(sim_vms(sim_find("a")), 1);
	/* This engine's heartbeat sees a VM that is neither a sandbox nor its own: one sandbox fits, not two. */
	sb = one_fits(f, a);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	/* The other engine goes, its pooled VM with it: at the next heartbeat the room is free again. */
	saas_engine_free(e2);
	assert_int_equal(sim_vms(sim_find("a")), 1);
	saas_test_advance(5000);
	sweep(f);
	none = create(f);
	assert_int_equal(sim_vms(sim_find("a")), 2);
	saas_sandbox_free(none);
	saas_sandbox_free(sb);
	saas_test_rmdir(dir2);
}

/*
 * Two engines on one store, pools on the same hosts: neither one's orphan
 * sweep destroys the other's pooled VMs (their leases say whose they are),
 * and each one's claim takes its own.
 */
static void test_pool_two_engines(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_engine_options o = f->opts;
	saas_engine *e2 = NULL;
	saas_client *c2 = NULL;
	char *dir2 = saas_test_tmpdir();
	char a[SAAS_ID_MAX + 1], b[SAAS_ID_MAX + 1];
	unsigned int vms;
	saas_sandbox *sb = NULL;

	assert_non_null(dir2);
	saas_test_shared_store(&f->opts);
	o = f->opts;
	reopen_pooled(f, "small=1");
	assert_true(f->engine->claims.shared);
	o.pool = "small=1";
	o.state_dir = dir2;
	if (saas_engine_open(&e2, &o) != SAAS_OK)
		fail_msg("second engine open: %s", saas_error_last()->message);
	assert_int_equal(saas_client_open_local(&c2, e2, f->key_a, 0), SAAS_OK);
	host_add("a", 4, 16384, a);
	host_add("b", 4, 14336, b);
	/* Each one's heartbeat, then its refill (the sweep's, or ours). */
	sweep(f);
	assert_int_equal(saas_engine_sweep(NULL, e2), SAAS_OK);
	refill(f->engine);
	refill(e2);
	vms = saas_fake_vm_count();
	assert_int_equal(vms, 2);
	/* Each sweeps every host for VMs without a row: the other's pooled VM has none, but its lease. */
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	assert_int_equal(saas__orphan_sweep(e2), SAAS_OK);
	assert_int_equal(saas_fake_vm_count(), vms);
	/* A claim through the second engine takes its own pooled VM. */
	assert_int_equal(saas_sandbox_create(&sb, c2, &(saas_create_options)SAAS_CREATE_OPTIONS_INIT, 0), SAAS_OK);
	assert_int_equal(saas_fake_vm_count(), vms);
	assert_false(saas__pool_owns(f->engine, sb->id));
	saas_sandbox_free(sb);
	/* Its refill holds off 2 s after the claim, then makes the replacement. */
	assert_int_equal(refill(e2), 0);
	saas_test_advance(2000);
	assert_int_equal(refill(e2), 1);
	assert_int_equal(saas_fake_vm_count(), vms + 1);
	/* The second engine goes: its pooled VM with it; the first one's stays. */
	saas_client_free(c2);
	saas_engine_free(e2);
	assert_int_equal(saas_fake_vm_count(), vms);
	assert_int_equal(saas__orphan_sweep(f->engine), SAAS_OK);
	assert_int_equal(saas_fake_vm_count(), vms);
	saas_test_rmdir(dir2);
}

/* A server's sweeps, in a thread of their own, until told to stop. */
struct sweeper {
	saas_engine *e;
	pthread_t thread;
	int stop;
};

static void *sweeper_main(void *arg)
{
	struct sweeper *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		saas_engine_sweep(NULL, w->e);
		saas__sleep_ms(20);
	}
	return NULL;
}

/*
 * Two servers on one store, a VM host's guest made through the first, which
 * holds its egress channel (and lease "egress:<id>", isolated as it is). A
 * change of its network asked of the second, whose driver cannot make it
 * (SAAS_EBUSY: the channel is the first's), is stored and applied by the
 * first at its sweep; the second answers once it is. Not answered in time
 * (the first not sweeping), the second says so, the policy stored, and the
 * first applies it at its next sweep. Bad rules are refused as ever.
 */
static void test_network_through_other_server(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const allow[] = { "example.com", NULL };
	static const char *const bad[] = { "not a rule", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	struct sweeper w = { 0 };
	saas_engine_options o;
	saas_engine *e2 = NULL;
	saas_client *c2 = NULL;
	char *dir2 = saas_test_tmpdir(), lease[SAAS_STORE_LEASE_NAME_MAX + 1], rules[256];
	saas_sandbox *sb, *got = NULL;

	assert_non_null(dir2);
	saas_test_shared_store(&f->opts);
	f->opts.lease_ttl_ms = 900; /* the second's wait: 600 ms */
	reopen_pooled(f, NULL);
	assert_true(f->engine->claims.shared);
	host_add("a", 4, 16384, NULL);
	sweep(f);
	sb = create(f);
	assert_int_equal(saas__claim_name(lease, "egress", sb->id), SAAS_OK);
	assert_true(saas__claim_mine(f->engine, lease));
	o = f->opts;
	o.state_dir = dir2;
	if (saas_engine_open(&e2, &o) != SAAS_OK)
		fail_msg("second engine open: %s", saas_error_last()->message);
	assert_int_equal(saas_client_open_local(&c2, e2, f->key_a, 0), SAAS_OK);

	/* Answered once the first applied it. */
	spec.allow = allow;
	saas_fake_fail_network_sets(1, 2);
	w.e = f->engine;
	assert_int_equal(pthread_create(&w.thread, NULL, sweeper_main, &w), 0);
	if (saas_sandbox_network_set(&got, c2, sb->id, &spec, 0) != SAAS_OK)
		fail_msg("network set through the second server: %s", saas_error_last()->message);
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	pthread_join(w.thread, NULL);
	assert_int_equal(got->network->mode, SAAS_NETWORK_POLICY);
	assert_string_equal(got->network->allow[0], "example.com");
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_POLICY);
	assert_non_null(strstr(rules, "allow example.com"));
	saas_sandbox_free(got);
	got = NULL;

	/* Bad rules: refused before anything is stored or asked. */
	spec.allow = bad;
	assert_int_equal(saas_sandbox_network_set(&got, c2, sb->id, &spec, 0), SAAS_EINVAL);
	assert_null(got);

	/* Not answered in time: said so, stored; applied at the first's next sweep. */
	spec.mode = SAAS_NETWORK_INTERNET;
	spec.allow = NULL;
	saas_fake_fail_network_sets(1, 2);
	assert_int_equal(saas_sandbox_network_set(&got, c2, sb->id, &spec, 0), SAAS_EBUSY);
	assert_null(got);
	assert_non_null(strstr(saas_error_last()->message, "its new network is stored"));
	/* When to send it again: the rest of the request's ttl (REST's Retry-After). */
	assert_int_equal(saas_error_last()->retry_after_ms, 900 - 600);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_POLICY);
	assert_int_equal(saas_sandbox_get(&got, c2, sb->id), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_INTERNET);
	saas_sandbox_free(got);
	sweep(f);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_INTERNET);

	/* A change through the server holding its channel is made there at once, as ever. */
	spec.mode = SAAS_NETWORK_ISOLATED;
	assert_int_equal(saas_sandbox_network_set(NULL, f->a, sb->id, &spec, 0), SAAS_OK);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_ISOLATED);
	assert_true(saas__claim_mine(f->engine, lease));

	/*
	 * Destroyed while a request waits and nobody answers it: the request goes
	 * with the sandbox (it was a lease row left for good: nobody serves the
	 * egress of a sandbox that ended, so nobody would release it).
	 */
	{
		char netset[SAAS_STORE_LEASE_NAME_MAX + 1], holder[SAAS_STORE_HOLDER_MAX + 1];
		int64_t until;

		assert_int_equal(saas__claim_name(netset, "netset", sb->id), SAAS_OK);
		spec.mode = SAAS_NETWORK_INTERNET;
		saas_fake_fail_network_sets(1, 2);
		assert_int_equal(saas_sandbox_network_set(NULL, c2, sb->id, &spec, 0), SAAS_EBUSY);
		assert_int_equal(f->engine->store->lease_get(f->engine->store_ctx, netset, holder, &until), SAAS_OK);
		assert_string_equal(holder, e2->claims.holder);
		assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
		assert_int_equal(f->engine->store->lease_get(f->engine->store_ctx, netset, holder, &until),
		                 SAAS_ENOTFOUND);
		assert_false(saas__claim_mine(f->engine, lease));
		/* A change asked of it now is refused, and asks nobody. */
		assert_int_equal(saas_sandbox_network_set(NULL, c2, sb->id, &spec, 0), SAAS_ESTATE);
		assert_int_equal(f->engine->store->lease_get(f->engine->store_ctx, netset, holder, &until),
		                 SAAS_ENOTFOUND);
	}

	saas_sandbox_free(sb);
	saas_client_free(c2);
	saas_engine_free(e2);
	saas_test_rmdir(dir2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_single_machine, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_started_ahead_on_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_snapshot_sweep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_views, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreachable_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_host, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stuck_host, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_host_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_on_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_host_set_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_two_engines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_other_engine_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spares_memory_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_network_through_other_server, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
