/*
 * A VM host that is not this machine: a libvirtd reached by a remote URI
 * (qemu+tls://, qemu+ssh://, qemu+tcp://). Nothing of the engine's
 * filesystem is visible to its QEMUs, so an image's files are uploaded once
 * per build into a storage pool on the host and each VM's overlay is a volume
 * there; the connection has libvirt's keepalive, so that a host that stops
 * answering fails every call within seconds, and is opened again (within a
 * bound) once the host answers again. host_info reports the host's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/libvirt_driver.h"

bool saas__lv_uri_remote(const char *uri)
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

int saas__lv_connect_remote(const char *uri, virConnectPtr *out)
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
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "cannot connect to VM host %s: %s", uri, o->msg);
	} else if (virConnectSetKeepAlive(o->conn, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT) < 0) {
		/* Without keepalive a dead host hangs every call: no connection rather than that. */
		rc = saas__lv_virt_error("turning libvirt's keepalive on");
		saas__error_wrap(rc, "%s", uri);
		virConnectClose(o->conn);
	} else {
		*out = o->conn;
	}
	opening_free(o);
	return rc;
}

int saas__lv_host_check(struct drv *d)
{
	virConnectPtr conn, *retired;
	int rc = SAAS_OK;

	if (!d->remote)
		return SAAS_OK;
	pthread_mutex_lock(&d->conn_mu);
	if (virConnectIsAlive(d->conn) == 1)
		goto out;
	/* The keepalive gave up on it (or the host closed it): a new one, if the host answers now. */
	if ((rc = saas__lv_connect_remote(d->uri, &conn)) < 0)
		goto out;
	/* The old one may still be in another thread's hands: it is closed with the driver. */
	if (!(retired = realloc(d->retired, (d->n_retired + 1) * sizeof(*retired)))) {
		virConnectClose(conn);
		rc = saas__oom();
		goto out;
	}
	d->retired = retired;
	d->retired[d->n_retired++] = d->conn;
	__atomic_store_n(&d->conn, conn, __ATOMIC_RELEASE);
	saas__lv_log(d, SAAS_LOG_INFO, "reconnected to VM host %s", d->uri);
out:
	pthread_mutex_unlock(&d->conn_mu);
	return rc;
}

/* ---- host_info ------------------------------------------------------------------------------- */

static int count_one(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	(void)d;
	(void)dom;
	(void)name;
	(*(unsigned int *)ud)++;
	return 0;
}

int saas__lv_host_info(void *ctx, saas_driver_host *out)
{
	struct drv *d = ctx;
	virNodeInfo info;
	unsigned int vms = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = saas__lv_host_check(d)) < 0)
		return rc;
	/* A call in flight when the host stops answering fails at the keepalive's count: never a hang. */
	if (virNodeGetInfo(d->conn, &info) < 0) {
		rc = saas__lv_virt_error("reading the VM host's node info");
		return saas__error_wrap(rc, "%s", d->uri);
	}
	if ((rc = saas__lv_own_domains(d, VM_PREFIX, count_one, &vms)) < 0 ||
	    (rc = saas__lv_own_domains(d, TPL_PREFIX, count_one, &vms)) < 0)
		return rc;
	out->cpus = info.cpus;
	out->memory_mb = info.memory / 1024; /* libvirt gives KiB */
	out->vms = vms;
	return SAAS_OK;
}

/* ---- the storage pool and its volumes -------------------------------------------------------- */

static virStorageVolPtr vol_lookup(struct drv *d, const char *name)
{
	virStorageVolPtr v = virStorageVolLookupByName(d->pool, name);

	/* Not there is the answer, not an error worth keeping. */
	if (!v)
		saas__error_clear();
	return v;
}

int saas__lv_pool_open(struct drv *d)
{
	saas__buf b = SAAS__BUF_INIT;
	char *xml = NULL;
	int active, rc = SAAS_OK;

	if (!(d->pool = virStoragePoolLookupByName(d->conn, d->pool_name))) {
		/*
		 * A directory pool of ours, persistent and autostarted, so that the
		 * host's libvirtd keeps it across restarts. Two engines making it
		 * at once: the loser's define fails and it looks it up again.
		 */
		saas__buf_printf(&b, "<pool type='dir'><name>%s</name><target><path>%s</path>"
		                     "<permissions><mode>0711</mode></permissions></target></pool>",
		                 d->pool_name, d->pool_dir);
		if (!(xml = saas__buf_detach(&b, NULL)))
			return saas__oom();
		d->pool = virStoragePoolDefineXML(d->conn, xml, 0);
		if (d->pool && virStoragePoolBuild(d->pool, 0) < 0) {
			rc = saas__lv_virt_error("making the storage pool's directory on the VM host");
			goto out;
		}
		if (d->pool)
			virStoragePoolSetAutostart(d->pool, 1);
		else if (!(d->pool = virStoragePoolLookupByName(d->conn, d->pool_name))) {
			rc = saas__lv_virt_error("defining the storage pool on the VM host");
			goto out;
		}
		saas__lv_log(d, SAAS_LOG_INFO, "storage pool %s made on VM host %s (%s)", d->pool_name, d->uri,
		             d->pool_dir);
	}
	if ((active = virStoragePoolIsActive(d->pool)) == 0 && virStoragePoolCreate(d->pool, 0) < 0 &&
	    virStoragePoolIsActive(d->pool) != 1) {
		rc = saas__lv_virt_error("starting the storage pool on the VM host");
		goto out;
	}
	if (active < 0)
		rc = saas__lv_virt_error("reading the storage pool's state on the VM host");
out:
	if (rc < 0) {
		saas__error_wrap(rc, "pool %s at %s", d->pool_name, d->pool_dir);
		if (d->pool)
			virStoragePoolFree(d->pool);
		d->pool = NULL;
	}
	free(xml);
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
	if (!(vol = virStorageVolCreateXML(d->pool, xml, 0))) {
		virErrorPtr e = virGetLastError();
		/* Another engine's upload of the same build (build_upload's claim). */
		if (e && e->code == VIR_ERR_STORAGE_VOL_EXIST)
			rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "volume %s is being uploaded", name);
		else
			rc = saas__lv_virt_error("making a volume on the VM host");
		goto out;
	}
	if (!(st = virStreamNew(d->conn, 0)) || virStorageVolUpload(vol, st, 0, (unsigned long long)sb.st_size, 0) < 0 ||
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
		if ((v = vol_lookup(d, name))) {
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
		if (!(done = virStorageVolCreateXML(d->pool, xml, 0)))
			rc = saas__lv_virt_error("marking an upload complete on the VM host");
		else
			virStorageVolFree(done);
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
	if (!(v = vol_lookup(d, name)))
		return false;
	virStorageVolFree(v);
	for (size_t i = 0; i < 3 && ok; i++) {
		if (i == 2 && !im->disk)
			continue;
		snprintf(name, sizeof(name), "%s-%s", id, part_names[i]);
		ok = (v = vol_lookup(d, name)) && (paths[i] = virStorageVolGetPath(v));
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

	if (!path)
		return SAAS_ENOMEM;
	text = saas__lv_read_file(path, 1 << 20);
	free(path);
	if (!text)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot read image %s's manifest", im->name);
	saas__sha256_hex(hash, text, strlen(text));
	free(text);
	snprintf(id, 40, "img-%.24s", hash);
	return SAAS_OK;
}

int saas__lv_image_remote(struct drv *d, struct image *im)
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
		sleep_ms(500);
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

int saas__lv_overlay_remote(struct drv *d, const char *vm, const char *base, unsigned int disk_gb, char **path)
{
	saas__buf b = SAAS__BUF_INIT;
	char name[SAAS_ID_MAX + 16], *xml;
	virStorageVolPtr vol;
	int rc = SAAS_OK;

	overlay_name(vm, name);
	saas__lv_overlay_remote_delete(d, vm); /* a leftover of a failed attempt */
	saas__buf_printf(&b, "<volume><name>%s</name><capacity unit='GiB'>%u</capacity><target><format type='qcow2'/>"
	                     "</target><backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>",
	                 name, disk_gb, base);
	if (!(xml = saas__buf_detach(&b, NULL)))
		return saas__oom();
	if (!(vol = virStorageVolCreateXML(d->pool, xml, 0))) {
		rc = saas__lv_virt_error("creating the disk overlay on the VM host");
	} else {
		if (!(*path = virStorageVolGetPath(vol)))
			rc = saas__lv_virt_error("reading the disk overlay's path on the VM host");
		virStorageVolFree(vol);
	}
	free(xml);
	return rc;
}

void saas__lv_overlay_remote_delete(struct drv *d, const char *vm)
{
	char name[SAAS_ID_MAX + 16];
	virStorageVolPtr vol;

	overlay_name(vm, name);
	if ((vol = vol_lookup(d, name))) {
		if (virStorageVolDelete(vol, 0) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its disk overlay on VM host %s stays: %s", vm, d->uri,
			             virGetLastErrorMessage());
		virStorageVolFree(vol);
	}
}
