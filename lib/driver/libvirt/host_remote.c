/*
 * A VM host that is not this machine: a libvirtd reached by a remote URI
 * (qemu+tls://, qemu+ssh://, qemu+tcp://). Nothing of the engine's
 * filesystem is visible to its QEMUs, so an image's files are uploaded once
 * per build into a storage pool on the host and each VM's overlay is a volume
 * there; the connection has libvirt's keepalive, so that a host that stops
 * answering fails every call within seconds, and is opened again (within a
 * bound) once the host answers again. host_info reports the host's size.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress_host.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/template.h"
#include "util/file.h"

bool saas__lv_uri_vmhost(const char *uri)
{
	const char *host = uri ? strstr(uri, "://") : NULL;
	size_t n;

	if (!host)
		return false;
	host += 3;
	n = strcspn(host, "/?");
	/* user@host: the host is what follows the last '@' before the path. */
	for (const char *at = memchr(host, '@', n); at; at = memchr(host, '@', n)) {
		n -= (size_t)(at + 1 - host);
		host = at + 1;
	}
	return n > 0;
}

/* ---- a bounded connection -------------------------------------------------------------------- */

/*
 * virConnectOpen has no timeout of its own: to a host that drops packets
 * the TCP connect alone takes minutes. It runs in a thread of its own, and
 * whoever of the two finishes last frees the call.
 */
struct opening {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char *uri;
	virConnectPtr conn;
	char msg[512];
	bool done, abandoned;
};

static void opening_free(struct opening *o)
{
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cond);
	free(o->uri);
	free(o);
}

static void *opening_main(void *arg)
{
	struct opening *o = arg;
	virConnectPtr conn = virConnectOpen(o->uri);
	bool abandoned;

	pthread_mutex_lock(&o->mu);
	if (!conn) {
		virErrorPtr e = virGetLastError();
		snprintf(o->msg, sizeof(o->msg), "%s", e && e->message ? e->message : "unknown error");
	}
	o->conn = conn;
	o->done = true;
	abandoned = o->abandoned;
	pthread_cond_signal(&o->cond);
	pthread_mutex_unlock(&o->mu);
	if (abandoned) {
		if (conn)
			virConnectClose(conn);
		opening_free(o);
	}
	return NULL;
}

/*
 * What libvirt's words for a refusal leave out. A libvirtd that refuses
 * the client's certificate after the handshake (a name not in its
 * tls_allowed_dn_list) just closes: libvirt says it cannot read the
 * confirmation. libssh, meeting a host key its known_hosts file lacks,
 * says it has no callback to ask (the engine never asks: no key is taken
 * on first sight).
 */
static const char *connect_hint(const char *uri, const char *msg)
{
	if (strncmp(uri, "qemu+tls:", 9) == 0 && strstr(msg, "TLS confirmation"))
		return " (the host refused this server's certificate: its subject must be in the host's "
		       "tls_allowed_dn_list, and it must be signed by the host's CA)";
	if (strstr(msg, "verify the session host key"))
		return " (the host's key is not in the known_hosts file: add the host's own public key there, "
		       "as 'ADDRESS KEYTYPE KEY')";
	return "";
}

int saas__lv_vmhost_connect(const char *uri, virConnectPtr *out)
{
	struct opening *o = calloc(1, sizeof(*o));
	struct timespec ts;
	pthread_t t;
	bool done;
	int rc = SAAS_OK;

	*out = NULL;
	if (!o || !(o->uri = saas__strdup(uri))) {
		free(o);
		return saas__oom();
	}
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cond, NULL);
	if ((rc = pthread_create(&t, NULL, opening_main, o)) != 0) {
		opening_free(o);
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a thread to connect to %s", uri);
	}
	pthread_detach(t);
	saas__deadline(&ts, CLOCK_REALTIME, REMOTE_CONNECT_TIMEOUT_MS);
	pthread_mutex_lock(&o->mu);
	while (!o->done && pthread_cond_timedwait(&o->cond, &o->mu, &ts) != ETIMEDOUT)
		;
	done = o->done;
	o->abandoned = !done;
	pthread_mutex_unlock(&o->mu);
	if (!done)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
		                   "VM host %s does not answer (no connection within %d s)", uri,
		                   REMOTE_CONNECT_TIMEOUT_MS / 1000);
	if (!o->conn) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "cannot connect to VM host %s: %s%s", uri, o->msg,
		                 connect_hint(uri, o->msg));
	} else if (virConnectSetKeepAlive(o->conn, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT) < 0) {
		/* Without keepalive a dead host hangs every call: no connection rather than that. */
		rc = saas__lv_virt_error("turning libvirt's keepalive on");
		saas__error_wrap(rc, "%s", uri);
		virConnectClose(o->conn);
	} else if ((rc = saas__lv_rpc_serialise(o->conn)) < 0) {
		virConnectClose(o->conn);
	} else {
		*out = o->conn;
	}
	opening_free(o);
	return rc;
}

/* A handle of a dead connection's kept until close (another thread may be in a call with it). d->conn_mu held. */
static int retire(struct drv *d, virConnectPtr conn, virStoragePoolPtr spool)
{
	struct saas__lv_retired *r = realloc(d->retired, (d->n_retired + 1) * sizeof(*r));

	if (!r)
		return saas__oom();
	d->retired = r;
	d->retired[d->n_retired++] = (struct saas__lv_retired){ conn, spool };
	return SAAS_OK;
}

int saas__lv_vmhost_check(struct drv *d)
{
	virConnectPtr conn;
	int rc = SAAS_OK;

	pthread_mutex_lock(&d->conn_mu);
	if (virConnectIsAlive(saas__lv_conn(d)) == 1)
		goto out;
	/* Its guests' egress channels were streams of it, which libvirt may never say ended. */
	if (d->ehost)
		saas__lv_ehost_conn_lost(d->ehost, false);
	/* The keepalive gave up on it (or the host closed it): a new one, if the host answers now. */
	if ((rc = saas__lv_vmhost_connect(d->uri, &conn)) < 0)
		goto out;
	/*
	 * The old one may still be in another thread's hands: it is closed with
	 * the driver. So is the pool's handle on it, which saas__lv_vmhost_pool
	 * looks up again on the new one when it is next wanted.
	 */
	if ((rc = retire(d, saas__lv_conn(d), NULL)) < 0) {
		virConnectClose(conn);
		goto out;
	}
	__atomic_store_n(&d->conn, conn, __ATOMIC_RELEASE);
	saas__lv_log(d, SAAS_LOG_INFO, "reconnected to VM host %s", d->uri);
	/* Opened again on the new connection by the keeper, at once. */
	if (d->ehost)
		saas__lv_ehost_conn_lost(d->ehost, true);
out:
	pthread_mutex_unlock(&d->conn_mu);
	return rc;
}

/* ---- host_info ------------------------------------------------------------------------------- */

/* Spares are not counted: placement would take each (a paused QEMU) for another engine's pooled VM of full size. */
/* A VM counts as one, a spare (every engine's) as what it holds: placement leaves that to it. */
static int count_one(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	saas_driver_host *out = ud;

	if (!saas__lv_spare_domain(d, dom, name))
		out->vms++;
	else
		out->spare_mb += saas__lv_spare_held_mib(d, name);
	return 0;
}

int saas__lv_host_info(void *ctx, saas_driver_host *out)
{
	struct drv *d = ctx;
	virNodeInfo info;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = saas__lv_vmhost_check(d)) < 0)
		return rc;
	/* A call in flight when the host stops answering fails at the keepalive's count: never a hang. */
	if (virNodeGetInfo(saas__lv_conn(d), &info) < 0) {
		rc = saas__lv_virt_error("reading the VM host's node info");
		return saas__error_wrap(rc, "%s", d->uri);
	}
	if ((rc = saas__lv_own_domains(d, VM_PREFIX, count_one, out)) < 0 ||
	    (rc = saas__lv_own_domains(d, TPL_PREFIX, count_one, out)) < 0) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	out->cpus = info.cpus;
	out->memory_mb = info.memory / 1024; /* libvirt gives KiB */
	return SAAS_OK;
}

/*
 * What the host's kernel could give more VMs: free, buffers and cache as its
 * libvirtd reads them (libvirt has no MemAvailable), or 0 when it cannot say
 * (the connection down: whoever next needs the host opens it again).
 */
static uint64_t remote_mem_available_mib(struct drv *d)
{
	virNodeMemoryStatsPtr st = NULL;
	int n = 0;
	uint64_t kib = 0;

	/* Not a reason to open the connection again: the spares' threads ask every second. */
	if (virConnectIsAlive(saas__lv_conn(d)) != 1 ||
	    virNodeGetMemoryStats(saas__lv_conn(d), VIR_NODE_MEMORY_STATS_ALL_CELLS, NULL, &n, 0) < 0 || n <= 0 ||
	    n > 64 || !(st = calloc((size_t)n, sizeof(*st))) ||
	    virNodeGetMemoryStats(saas__lv_conn(d), VIR_NODE_MEMORY_STATS_ALL_CELLS, st, &n, 0) < 0) {
		saas__error_clear();
		free(st);
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (strcmp(st[i].field, VIR_NODE_MEMORY_STATS_FREE) == 0 ||
		    strcmp(st[i].field, VIR_NODE_MEMORY_STATS_BUFFERS) == 0 ||
		    strcmp(st[i].field, VIR_NODE_MEMORY_STATS_CACHED) == 0)
			kib += st[i].value;
	free(st);
	return kib >> 10;
}

/* ---- the storage pool and its volumes -------------------------------------------------------- */

virStorageVolPtr saas__lv_vmhost_vol_lookup(struct drv *d, const char *name)
{
	virStoragePoolPtr pool;
	virStorageVolPtr v = NULL;

	/* Not there is the answer, not an error worth keeping. */
	if (saas__lv_vmhost_pool(d, &pool) < 0 || !(v = virStorageVolLookupByName(pool, name)))
		saas__error_clear();
	return v;
}

/* The host's storage pool on d->conn (d->spool_name at d->spool_dir), made and started if missing. d->conn_mu held. */
static int spool_open(struct drv *d)
{
	saas__buf b = SAAS__BUF_INIT;
	char *xml = NULL;
	int active, rc = SAAS_OK;

	if (!(d->spool = virStoragePoolLookupByName(saas__lv_conn(d), d->spool_name))) {
		/*
		 * A directory pool of ours, persistent and autostarted, so that the
		 * host's libvirtd keeps it across restarts. Two engines making it
		 * at once: the loser's define fails and it looks it up again.
		 */
		saas__buf_printf(&b, "<pool type='dir'><name>%s</name><target><path>%s</path>"
		                     "<permissions><mode>0711</mode></permissions></target></pool>",
		                 d->spool_name, d->spool_dir);
		if (!(xml = saas__buf_detach(&b, NULL)))
			return saas__oom();
		d->spool = virStoragePoolDefineXML(saas__lv_conn(d), xml, 0);
		if (d->spool && virStoragePoolBuild(d->spool, 0) < 0) {
			rc = saas__lv_virt_error("making the storage pool's directory on the VM host");
			goto out;
		}
		if (d->spool)
			virStoragePoolSetAutostart(d->spool, 1);
		else if (!(d->spool = virStoragePoolLookupByName(saas__lv_conn(d), d->spool_name))) {
			rc = saas__lv_virt_error("defining the storage pool on the VM host");
			goto out;
		}
		saas__lv_log(d, SAAS_LOG_INFO, "storage pool %s made on VM host %s (%s)", d->spool_name, d->uri,
		             d->spool_dir);
	}
	if ((active = virStoragePoolIsActive(d->spool)) == 0 && virStoragePoolCreate(d->spool, 0) < 0 &&
	    virStoragePoolIsActive(d->spool) != 1) {
		rc = saas__lv_virt_error("starting the storage pool on the VM host");
		goto out;
	}
	if (active < 0)
		rc = saas__lv_virt_error("reading the storage pool's state on the VM host");
out:
	if (rc < 0) {
		saas__error_wrap(rc, "pool %s at %s", d->spool_name, d->spool_dir);
		if (d->spool)
			virStoragePoolFree(d->spool);
		d->spool = NULL;
	}
	free(xml);
	return rc;
}

/*
 * A pool's handle is its connection's: once the keepalive closed that one,
 * every call with it fails ("client socket is closed"). So the handle is
 * taken here each time, looked up again on the connection in use now when
 * it was another's. An old handle is retired (another thread may be in a
 * call with it), never freed before the driver closes.
 */
int saas__lv_vmhost_pool(struct drv *d, virStoragePoolPtr *pool)
{
	int rc = SAAS_OK;

	pthread_mutex_lock(&d->conn_mu);
	if (d->spool && virStoragePoolGetConnect(d->spool) != saas__lv_conn(d) && (rc = retire(d, NULL, d->spool)) == SAAS_OK)
		d->spool = NULL;
	if (rc == SAAS_OK && !d->spool)
		rc = spool_open(d);
	*pool = d->spool;
	pthread_mutex_unlock(&d->conn_mu);
	if (rc < 0)
		saas__error_wrap(rc, "VM host %s", d->uri);
	return rc;
}

static int send_file(virStreamPtr st, char *data, size_t n, void *ud)
{
	ssize_t got;

	(void)st;
	while ((got = read(*(int *)ud, data, n)) < 0 && errno == EINTR)
		;
	return (int)got;
}

/* One file into a new volume named name of the pool, readable by the host's QEMU user. */
static int upload_one(struct drv *d, const char *name, const char *path, char **host_path)
{
	saas__buf b = SAAS__BUF_INIT;
	virStorageVolPtr vol = NULL;
	virStreamPtr st = NULL;
	virStoragePoolPtr pool;
	struct stat sb;
	char *xml = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = SAAS_OK;

	if (fd < 0 || fstat(fd, &sb) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	saas__buf_printf(&b, "<volume><name>%s</name><capacity unit='bytes'>%lld</capacity>"
	                     "<allocation unit='bytes'>0</allocation><target><format type='raw'/>"
	                     "<permissions><mode>0644</mode></permissions></target></volume>",
	                 name, (long long)sb.st_size);
	if (!(xml = saas__buf_detach(&b, NULL))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		goto out;
	if (!(vol = virStorageVolCreateXML(pool, xml, 0))) {
		virErrorPtr e = virGetLastError();
		/* Another engine's upload of the same build (build_upload's claim). */
		if (e && e->code == VIR_ERR_STORAGE_VOL_EXIST)
			rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "volume %s is being uploaded", name);
		else
			rc = saas__lv_virt_error("making a volume on the VM host");
		goto out;
	}
	/* On the volume's connection, which d->conn may no longer be. */
	if (!(st = virStreamNew(virStorageVolGetConnect(vol), 0)) ||
	    virStorageVolUpload(vol, st, 0, (unsigned long long)sb.st_size, 0) < 0 ||
	    virStreamSendAll(st, send_file, &fd) < 0 || virStreamFinish(st) < 0) {
		rc = saas__lv_virt_error("uploading to the VM host");
		if (st)
			virStreamAbort(st);
		virStorageVolDelete(vol, 0);
		goto out;
	}
	if (!(*host_path = virStorageVolGetPath(vol)))
		rc = saas__lv_virt_error("reading a volume's path on the VM host");
out:
	if (rc < 0)
		saas__error_wrap(rc, "%s as volume %s", path, name);
	if (st)
		virStreamFree(st);
	if (vol)
		virStorageVolFree(vol);
	if (fd >= 0)
		close(fd);
	free(xml);
	return rc;
}

static const char *const part_names[] = { "kernel", "initrd", "disk" };

/* Remove what there is of a build's volumes (a failed or abandoned upload). */
static void build_delete(struct drv *d, const char *id)
{
	char name[96];

	for (size_t i = 0; i <= SAAS_ARRAY_SIZE(part_names); i++) {
		virStorageVolPtr v;
		if (i < SAAS_ARRAY_SIZE(part_names))
			snprintf(name, sizeof(name), "%s-%s", id, part_names[i]);
		else
			snprintf(name, sizeof(name), "%s.done", id);
		if ((v = saas__lv_vmhost_vol_lookup(d, name))) {
			virStorageVolDelete(v, 0);
			virStorageVolFree(v);
		}
	}
}

/*
 * The build's three files (disk may be NULL) uploaded, then its ".done"
 * marker. Making the kernel's volume is the claim: SAAS_EBUSY when another
 * engine made it first (its upload runs, or it died in it). Any other
 * failure leaves nothing of the build behind.
 */
static int build_upload(struct drv *d, const struct image *im, const char *id, char *paths[3])
{
	const char *local[3] = { im->kernel, im->initrd, im->disk };
	char name[96];
	virStoragePoolPtr pool;
	virStorageVolPtr done;
	int rc = SAAS_OK;

	for (size_t i = 0; i < 3 && rc == SAAS_OK; i++) {
		if (!local[i])
			continue;
		snprintf(name, sizeof(name), "%s-%s", id, part_names[i]);
		if ((rc = upload_one(d, name, local[i], &paths[i])) == SAAS_EBUSY && i == 0)
			return rc;
	}
	if (rc == SAAS_OK) {
		char xml[256];
		snprintf(xml, sizeof(xml), "<volume><name>%s.done</name><capacity>0</capacity></volume>", id);
		if ((rc = saas__lv_vmhost_pool(d, &pool)) == SAAS_OK) {
			if (!(done = virStorageVolCreateXML(pool, xml, 0)))
				rc = saas__lv_virt_error("marking an upload complete on the VM host");
			else
				virStorageVolFree(done);
		}
	}
	if (rc < 0) {
		/* The cleanup's lookups clear the error: what failed is said again after it. */
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
		build_delete(d, id);
		rc = saas__error(rc, SAAS_ERRCLASS_DRIVER, 0, "%s", msg);
	}
	return rc;
}

/* The paths on the host of a complete build's volumes; false while it is not complete. */
static bool build_ready(struct drv *d, const struct image *im, const char *id, char *paths[3])
{
	char name[96];
	virStorageVolPtr v;
	bool ok = true;

	snprintf(name, sizeof(name), "%s.done", id);
	if (!(v = saas__lv_vmhost_vol_lookup(d, name)))
		return false;
	virStorageVolFree(v);
	for (size_t i = 0; i < 3 && ok; i++) {
		if (i == 2 && !im->disk)
			continue;
		snprintf(name, sizeof(name), "%s-%s", id, part_names[i]);
		ok = (v = saas__lv_vmhost_vol_lookup(d, name)) && (paths[i] = virStorageVolGetPath(v));
		if (v)
			virStorageVolFree(v);
	}
	return ok;
}

/*
 * The build's id: its manifest's hash (a rebuild writes a new manifest, with
 * its own build time and host key), so two engines with the same build name
 * the same volumes.
 */
static int build_id(const struct image *im, char id[40])
{
	char *path = saas__lv_path_join(im->dir, "manifest.json"), *text, hash[65];
	int rc;

	if (!path)
		return SAAS_ENOMEM;
	/* The operator's image directory, whose files may be links (a shared build): followed. */
	rc = saas__file_read(&text, NULL, AT_FDCWD, path, 1 << 20, 0);
	free(path);
	if (rc < 0)
		return saas__error_wrap(rc, "cannot read image %s's manifest", im->name);
	saas__sha256_hex(hash, text, strlen(text));
	free(text);
	snprintf(id, 40, "img-%.24s", hash);
	return SAAS_OK;
}

int saas__lv_vmhost_image(struct drv *d, struct image *im)
{
	char id[40], *paths[3] = { NULL, NULL, NULL };
	int64_t waited = 0;
	bool retried = false;
	int rc = SAAS_OK;

	pthread_mutex_lock(&d->upload_mu);
	if (im->host_kernel)
		goto out;
	if ((rc = build_id(im, id)) < 0)
		goto out;
	/*
	 * Engines share the host's pool: whoever makes the build's kernel
	 * volume first uploads it all and marks it done; the others wait for
	 * the mark. An upload that never finishes (its engine died) is removed
	 * once the wait is over, and done again here.
	 */
	while (!build_ready(d, im, id, paths)) {
		for (size_t i = 0; i < 3; i++) {
			free(paths[i]);
			paths[i] = NULL;
		}
		if ((rc = build_upload(d, im, id, paths)) == SAAS_OK) {
			saas__lv_log(d, SAAS_LOG_INFO, "image %s uploaded to VM host %s as %s", im->name, d->uri, id);
			break;
		}
		if (rc != SAAS_EBUSY)
			goto out;
		saas__error_clear();
		if (closing(d)) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the engine is shutting down");
			goto out;
		}
		if (waited >= UPLOAD_WAIT_MS) {
			if (retried) {
				rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
				                 "image %s's upload to VM host %s (%s) does not complete", im->name, d->uri, id);
				goto out;
			}
			saas__lv_log(d, SAAS_LOG_WARN, "image %s's upload %s on VM host %s did not complete in %d s: "
			             "removed, to upload it again", im->name, id, d->uri, UPLOAD_WAIT_MS / 1000);
			build_delete(d, id);
			retried = true;
			waited = 0;
			continue;
		}
		saas__sleep_ms(500);
		waited += 500;
	}
	rc = SAAS_OK;
	im->host_kernel = paths[0];
	im->host_initrd = paths[1];
	im->host_disk = paths[2];
	paths[0] = paths[1] = paths[2] = NULL;
out:
	for (size_t i = 0; i < 3; i++)
		free(paths[i]);
	pthread_mutex_unlock(&d->upload_mu);
	return rc;
}

static void overlay_name(const char *vm, char name[SAAS_ID_MAX + 16])
{
	snprintf(name, SAAS_ID_MAX + 16, "%s.qcow2", vm);
}

int saas__lv_vmhost_overlay(struct drv *d, const char *vm, const char *base, unsigned int disk_gb, char **path)
{
	saas__buf b = SAAS__BUF_INIT;
	char name[SAAS_ID_MAX + 16], *xml;
	virStoragePoolPtr pool;
	virStorageVolPtr vol;
	int rc = SAAS_OK;

	overlay_name(vm, name);
	saas__lv_vmhost_overlay_delete(d, vm); /* a leftover of a failed attempt */
	saas__buf_printf(&b, "<volume><name>%s</name><capacity unit='GiB'>%u</capacity><target><format type='qcow2'/>"
	                     "</target><backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>",
	                 name, disk_gb, base);
	if (!(xml = saas__buf_detach(&b, NULL)))
		return saas__oom();
	if ((rc = saas__lv_vmhost_pool(d, &pool)) == SAAS_OK) {
		if (!(vol = virStorageVolCreateXML(pool, xml, 0))) {
			rc = saas__lv_virt_error("creating the disk overlay on the VM host");
		} else {
			if (!(*path = virStorageVolGetPath(vol)))
				rc = saas__lv_virt_error("reading the disk overlay's path on the VM host");
			virStorageVolFree(vol);
		}
	}
	free(xml);
	return rc;
}

/* An overlay that cannot be deleted (or looked for) is said: it stays in the pool, for the operator to delete. */
void saas__lv_vmhost_overlay_delete(struct drv *d, const char *vm)
{
	char name[SAAS_ID_MAX + 16], why[512] = "";
	virStoragePoolPtr pool;
	virStorageVolPtr vol;
	virErrorPtr e;

	overlay_name(vm, name);
	if (saas__lv_vmhost_pool(d, &pool) < 0) {
		snprintf(why, sizeof(why), "%s", saas_error_last()->message);
	} else if ((vol = virStorageVolLookupByName(pool, name))) {
		/*
		 * Once the VM was paused its overlay is the snapshot's disk, which
		 * no destroy of a domain-less VM of that name, nor a launch's undo,
		 * takes away: it goes with the snapshot (host_remote_snap.c).
		 */
		if (saas__lv_vmhost_disk_kept(d, name))
			saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s: its disk volume %s on VM host %s is a paused VM's, kept with "
			             "its snapshot", vm, name, d->uri);
		else if (virStorageVolDelete(vol, 0) < 0)
			snprintf(why, sizeof(why), "%s", virGetLastErrorMessage());
		virStorageVolFree(vol);
	} else if ((e = virGetLastError()) && e->code != VIR_ERR_NO_STORAGE_VOL) {
		snprintf(why, sizeof(why), "%s", virGetLastErrorMessage());
	}
	if (why[0])
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its disk overlay on VM host %s stays: %s", vm, d->uri, why);
	saas__error_clear();
}

char *saas__lv_vmhost_domain_disk(virDomainPtr dom)
{
	char *xml = virDomainGetXMLDesc(dom, 0), *out = NULL;
	const char *disk = xml ? strstr(xml, "<disk type='file' device='disk'>") : NULL;
	const char *end = disk ? strstr(disk, "</disk>") : NULL, *src = disk ? strstr(disk, "<source file='") : NULL;
	size_t n;

	/* The first source of the disk is its top (backing files follow, nested); the pool's paths have no escapes. */
	if (src && end && src < end) {
		src += strlen("<source file='");
		n = strcspn(src, "'&");
		if (src[n] == '\'' && src[0] == '/')
			out = strndup(src, n);
	}
	free(xml);
	saas__error_clear();
	return out;
}

void saas__lv_vmhost_disk_drop(struct drv *d, const char *path)
{
	const char *name = strrchr(path, '/') + 1;
	virStorageVolPtr vol = saas__lv_vmhost_vol_lookup(d, name);
	char *at = vol ? virStorageVolGetPath(vol) : NULL, *below = NULL;

	/*
	 * A domain's own top overlay (the pool's volume at that very path), never
	 * a complete snapshot's disk: a pause ends the domain whose disk it
	 * keeps, and a resume runs on a new one. What it backed onto goes after
	 * it when nothing else uses it (a failed fork's frozen disk: normally it
	 * is the image's or a template's disk, which stays).
	 */
	if (at && strcmp(at, path) == 0) {
		if (saas__lv_vmhost_disk_base(d, name, &below) < 0)
			below = NULL;
		if (virStorageVolDelete(vol, 0) < 0) {
			saas__lv_log(d, SAAS_LOG_WARN, "the disk %s on VM host %s stays: %s", path, d->uri,
			             virGetLastErrorMessage());
		} else {
			char whose[512];
			snprintf(whose, sizeof(whose), "the destroyed VM's disk %s", name);
			saas__lv_vmhost_chain_drop(d, below, whose);
		}
	}
	if (vol)
		virStorageVolFree(vol);
	free(below);
	free(at);
	saas__error_clear();
}

/* ---- the host's table ---------------------------------------------------------------------------- */

/*
 * A remote host's network: the guard and per-VM egress of this machine are
 * nftables its QEMU sockets never meet, and the engine installs nothing on
 * the host. Its guests' slirp is restrict=on (it opens no connection for
 * them); their egress comes to the servers over a channel of each domain,
 * decided here by the same policy code (egress_host.h). Isolated unless
 * network=internet says otherwise (or a sandbox's own network does).
 */
static void remote_network(struct drv *d)
{
	d->internet = d->network == NET_INTERNET;
	saas__lv_log(d, SAAS_LOG_INFO, "network: guests on VM host %s are %s by default; internet and policies go "
	             "through this server (the egress channel)", d->uri, d->internet ? "given the internet" : "isolated");
}

/* accel=auto on a remote host: KVM when its libvirt offers a kvm domain for x86_64. */
bool saas__lv_caps_cpu_virt(const char *caps)
{
	const char *host = caps ? strstr(caps, "<host>") : NULL;
	const char *cpu = host ? strstr(host, "<cpu>") : NULL;
	const char *end = cpu ? strstr(cpu, "</cpu>") : NULL;

	for (const char *f = cpu; end && (f = strstr(f, "<feature name=")) && f < end; f++) {
		const char *v = f + strlen("<feature name=");
		if (*v != '\'' && *v != '"')
			continue;
		if ((strncmp(v + 1, "vmx", 3) == 0 || strncmp(v + 1, "svm", 3) == 0) && v[4] == *v)
			return true;
	}
	return false;
}

/*
 * KVM on a host, by the rule this machine's is chosen by (host_local.c):
 * its libvirtd can run KVM guests (domain capabilities for kvm) and its CPU
 * says it has hardware virtualisation. A host with /dev/kvm but no vmx/svm
 * flag (some nested setups) would otherwise cost each engine failed starts,
 * and a clone or resume of a snapshot saved under KVM there cannot fall
 * back to TCG.
 */
static bool remote_kvm(struct drv *d)
{
	char *dcaps = virConnectGetDomainCapabilities(saas__lv_conn(d), NULL, "x86_64", "q35", "kvm", 0);
	char *caps = dcaps ? virConnectGetCapabilities(saas__lv_conn(d)) : NULL;
	bool kvm = dcaps && saas__lv_caps_cpu_virt(caps);

	if (dcaps && !kvm)
		saas__lv_log(d, SAAS_LOG_INFO, "VM host %s has /dev/kvm but its CPU shows no vmx or svm flag: TCG there "
		             "(accel=kvm forces KVM)", d->uri);
	free(caps);
	free(dcaps);
	saas__error_clear();
	return kvm;
}

/*
 * A remote host's limits: what the domain's XML and libvirt's API carry
 * (the CPU quota, the memory limit) are the host's libvirtd to apply; the
 * pids cgroup and the I/O weight are not given (the first is this
 * machine's cgroup files; the second needs the io controller, which not
 * every host delegates to libvirt).
 */
static void remote_limits(struct drv *d)
{
	d->lim_cpu = d->cpu_milli != 0;
	d->lim_memory = true;
	d->lim_pids = d->lim_io = false;
	saas__lv_log(d, SAAS_LOG_INFO, "VM limits on VM host %s: CPU %s, memory on (the host's cgroups, by its "
	             "libvirtd); pids and I/O weight not given", d->uri, d->lim_cpu ? "on" : "off (cpu_limit=off)");
}

static int remote_prepare(struct drv *d, const saas_driver_env *env)
{
	(void)env;
	/* A remote host's KVM is its own: accel=auto asks libvirt there (remote_connect). */
	d->kvm = d->accel == ACCEL_KVM;
	remote_network(d);
	return SAAS_OK;
}

static int remote_connect(struct drv *d, const saas_driver_env *env)
{
	virStoragePoolPtr pool;
	char hash[65];
	int rc;

	(void)env;
	if ((rc = saas__lv_vmhost_connect(d->uri, &d->conn)) < 0 || (rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if (!d->ehost) {
		struct sockaddr_storage up[EGRESS_UPSTREAMS_MAX];
		unsigned int n_up = 0;
		if ((rc = saas__lv_egress_upstreams(d, up, &n_up)) < 0 || (rc = saas__lv_ehost_start(&d->ehost, d, up, n_up)) < 0)
			return rc;
	}
	if (d->accel == ACCEL_AUTO)
		d->kvm = remote_kvm(d);
	remote_limits(d);
	/*
	 * A remote host's templates live there, as volumes of its storage pool,
	 * built once across the engines that share the host. Their memory is
	 * loaded by each clone: mapping it needs a memfd held on the machine
	 * that runs QEMU.
	 */
	saas__sha256_hex(hash, d->uri, strlen(d->uri));
	snprintf(d->host_tag, sizeof(d->host_tag), "%.16s", hash);
	if (d->templates)
		saas__lv_log(d, SAAS_LOG_INFO, "templates on VM host %s: kept in its pool, built once for every engine "
		             "that shares it, memory loaded by each clone%s", d->uri,
		             d->mapped ? " (template_memory=mapped needs this machine's memory: not on a remote host)" : "");
	d->mapped = false;
	return SAAS_OK;
}

static int remote_image_place(struct drv *d, struct image *im)
{
	int rc;

	if ((rc = saas__lv_vmhost_check(d)) < 0)
		return rc;
	return saas__lv_vmhost_image(d, im);
}

/* The overlay is a volume on the host, on the image's disk there (uploaded) or a template's frozen one. */
static int remote_overlay_make(struct launch *l)
{
	char *tbase = NULL;
	int rc;

	if (!l->im->disk)
		return SAAS_OK;
	/* A paused VM's resume: on the disk its snapshot kept. */
	if (l->base_vol) {
		virStorageVolPtr v = saas__lv_vmhost_vol_lookup(l->d, l->base_vol);
		if (!v)
			return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "the paused VM's disk %s is not in pool "
			                   "%s on VM host %s", l->base_vol, l->d->spool_name, l->d->uri);
		tbase = virStorageVolGetPath(v);
		virStorageVolFree(v);
		if (!tbase)
			return saas__lv_virt_error("reading the paused VM's disk's path on the VM host");
	} else if (l->tdir && (rc = saas__lv_vmhost_tpl_disk(l->d, l->tdir, &tbase)) < 0) {
		return rc;
	}
	rc = saas__lv_vmhost_overlay(l->d, l->vol ? l->vol : l->spec->name, tbase ? tbase : l->im->host_disk,
	                             l->spec->disk_gb, &l->overlay);
	free(tbase);
	return rc;
}

/*
 * A port for the guest's SSH forward on a remote host, which the engine
 * cannot probe: one at random from a range, tried again (saas__lv_launch_start) when
 * QEMU finds it taken. The domain's files are the host's: its console a pty,
 * its kernel and initrd the uploaded volumes.
 */
static int remote_domain_place(struct launch *l, struct saas__lv_domain *def)
{
	uint32_t r;

	if (saas__random(&r, sizeof(r)) < 0)
		r = (uint32_t)rand();
	l->port = REMOTE_PORT_FIRST + r % REMOTE_PORT_COUNT;
	def->vmdir = NULL;
	def->listen = l->d->listen;
	def->kernel = l->im->host_kernel;
	def->initrd = l->im->host_initrd;
	def->egress = true;
	return SAAS_OK;
}

/* A remote host's template: its state is a volume there, poured in over the network. */
static int remote_state_in(struct launch *l, const char *what, const char *state_path, const struct timespec *t0,
                           int64_t budget_ms)
{
	int rc;

	(void)state_path;
	if ((rc = saas__lv_vmhost_tpl_restore(l, t0, budget_ms)) < 0)
		return saas__error_wrap(rc, "%s", what);
	return SAAS_OK;
}

/* Other engines' template VMs may be builds under their lease: a dead engine's goes with the next build. */
static void remote_templates_cleanup(struct drv *d)
{
	(void)d;
}

/* The host says whether it is complete: lv_create looks, outside the lock (template_find). */
static void remote_template_known(struct drv *d, struct tmpl *t)
{
	(void)d;
	(void)t;
}

/* Pruned meanwhile? Looked for again on the host at the next create. */
static void remote_template_lost(struct drv *d, const char *key)
{
	saas__lv_template_vmhost_ready(d, key, NULL);
}

static int remote_template_find(struct drv *d, const char *key, char **place)
{
	char stem[TPL_STEM_MAX];

	*place = NULL;
	if (saas__lv_vmhost_check(d) != SAAS_OK || saas__lv_vmhost_tpl_find(d, key, stem) != 1)
		return 0;
	saas__lv_template_vmhost_ready(d, key, stem);
	*place = saas__strdup(stem);
	return 1;
}

const struct saas__lv_host saas__lv_host_remote = {
	.prepare = remote_prepare,
	.connect = remote_connect,
	.check = saas__lv_vmhost_check,
	.image_place = remote_image_place,
	.overlay_make = remote_overlay_make,
	.overlay_drop = saas__lv_vmhost_overlay_delete,
	.domain_disk = saas__lv_vmhost_domain_disk,
	.disk_drop = saas__lv_vmhost_disk_drop,
	.domain_place = remote_domain_place,
	.state_in = remote_state_in,
	.templates_cleanup = remote_templates_cleanup,
	.template_known = remote_template_known,
	.template_place = saas__lv_template_place_remote,
	.template_build = saas__lv_template_build_remote,
	.template_break = saas__lv_vmhost_tpl_break,
	.template_lost = remote_template_lost,
	.template_find = remote_template_find,
	.template_list = saas__lv_template_list_remote,
	.control_open = saas__lv_channel_open,
	.mem_available_mib = remote_mem_available_mib,
	.snap_take = saas__lv_vmhost_snap_take,
	.snap_read = saas__lv_vmhost_snap_read,
	.snap_delete = saas__lv_vmhost_snap_delete,
	.snap_list = saas__lv_vmhost_snap_list,
	.snap_scan = saas__lv_vmhost_snap_scan,
	.control_port = true,
	.egress_port = true,
	.local_memory = false,
	.spares = true,
	.shared_templates = true,
	.may_vanish = true,
	.limits_learned = true,
	.said = " (remote: guests' SSH on its address, their control ports through libvirt, volumes in its pool)",
	.uids_said = "the host's",
};
