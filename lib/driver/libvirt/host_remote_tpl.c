/*
 * Templates on a remote VM host (host_remote.h): a template's saved state,
 * frozen disk and description are volumes of the host's storage pool, built
 * once across the engines that share the host under the store's lease, and
 * restored into clones over the network. Split from host_remote.c, which
 * holds the host's connection, pool, images and overlays.
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

#include "driver/libvirt/conf.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/qmp.h"
#include "driver/libvirt/template.h"

static uint32_t rd32(const unsigned char *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

/* The header's version, data length and format; false when head is no save image's header. */
static bool save_header(const unsigned char *head, size_t n, bool partial_too, uint32_t *version, uint32_t *data_len,
                        uint32_t *format)
{
	bool swap;

	if (n < LV_SAVE_HEADER_BYTES ||
	    (memcmp(head, "LibvirtQemudSave", 16) != 0 && (!partial_too || memcmp(head, "LibvirtQemudPart", 16) != 0)))
		return false;
	/* libvirt writes the header in its own byte order and reads a swapped one back. */
	*version = rd32(head + 16, false);
	swap = *version > 0xffffu;
	*version = rd32(head + 16, swap);
	*data_len = rd32(head + 20, swap);
	*format = rd32(head + 28, swap);
	return true;
}

int saas__lv_save_xml_len(const unsigned char *head, size_t n, uint32_t *len)
{
	uint32_t version, format;

	if (!save_header(head, n, true, &version, len, &format) || version != 2 || *len == 0 || *len > (16u << 20))
		return saas__inval("not a libvirt save image of a version this code reads");
	return SAAS_OK;
}

int saas__lv_save_stream_offset(const unsigned char *head, size_t n, uint64_t *offset)
{
	uint32_t version, data_len, format;

	if (n < LV_SAVE_HEADER_BYTES)
		return saas__inval("a save image of %zu bytes is too short for its header", n);
	if (memcmp(head, "LibvirtQemudPart", 16) == 0)
		return saas__inval("the save image is partial: libvirt did not finish writing it");
	if (!save_header(head, n, false, &version, &data_len, &format))
		return saas__inval("not a libvirt save image");
	if (version != 2)
		return saas__inval("save image version %u (only 2 is read)", version);
	if (format != 0)
		return saas__inval("the save image is compressed (format %u): set save_image_format = \"raw\" in the VM "
		                   "host's qemu.conf", format);
	if (data_len == 0 || data_len > (16u << 20))
		return saas__inval("the save image's domain description takes %u bytes", data_len);
	*offset = (uint64_t)LV_SAVE_HEADER_BYTES + data_len;
	/* QEMU's stream starts with its own magic: said where the bytes are there to check. */
	if (n >= *offset + 4 && memcmp(head + *offset, "QEVM", 4) != 0)
		return saas__inval("no QEMU migration stream after the save image's header");
	return SAAS_OK;
}

#define TPL_KEY_LEN 32
#define TPL_GEN_LEN 8

bool saas__lv_tpl_volume(const char *name, const char *key, const char *suffix, char stem[TPL_STEM_MAX])
{
	size_t pre = strlen(TPL_PREFIX), stem_len = pre + TPL_KEY_LEN + 1 + TPL_GEN_LEN;

	if (strncmp(name, TPL_PREFIX, pre) != 0 || strlen(name) <= stem_len || !saas__is_hex(name + pre, TPL_KEY_LEN) ||
	    name[pre + TPL_KEY_LEN] != '-' || !saas__is_hex(name + pre + TPL_KEY_LEN + 1, TPL_GEN_LEN) ||
	    name[stem_len] != '.' || strcmp(name + stem_len + 1, suffix) != 0)
		return false;
	if (key && strncmp(name + pre, key, TPL_KEY_LEN) != 0)
		return false;
	memcpy(stem, name, stem_len);
	stem[stem_len] = '\0';
	return true;
}

bool saas__lv_tpl_lease_name(char *out, size_t len, const char *host, const char *key)
{
	int n = snprintf(out, len, "template:%s:%s", host, key);

	return n > 0 && (size_t)n < len && n <= 127;
}

/* The names of the pool's volumes (*names freed with saas__lv_vmhost_names_free). */
int saas__lv_vmhost_vol_names(struct drv *d, char ***names, int *n)
{
	virStoragePoolPtr pool;
	virStorageVolPtr *vols = NULL;
	int count, rc;

	*names = NULL;
	*n = 0;
	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if ((count = virStoragePoolListAllVolumes(pool, &vols, 0)) < 0)
		return saas__error_wrap(saas__lv_virt_error("listing the storage pool's volumes"), "VM host %s", d->uri);
	if (count && !(*names = calloc((size_t)count, sizeof(char *))))
		rc = saas__oom();
	for (int i = 0; i < count; i++) {
		const char *name = virStorageVolGetName(vols[i]);
		if (rc == SAAS_OK && name && !((*names)[(*n)++] = saas__strdup(name)))
			rc = SAAS_ENOMEM;
		virStorageVolFree(vols[i]);
	}
	free(vols);
	if (rc < 0) {
		for (int i = 0; i < *n; i++)
			free((*names)[i]);
		free(*names);
		*names = NULL;
		*n = 0;
	}
	return rc;
}

void saas__lv_vmhost_names_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void saas__lv_vmhost_vol_delete(struct drv *d, const char *name)
{
	virStorageVolPtr v = saas__lv_vmhost_vol_lookup(d, name);

	if (v) {
		if (virStorageVolDelete(v, 0) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "volume %s on VM host %s stays: %s", name, d->uri,
			             virGetLastErrorMessage());
		virStorageVolFree(v);
	}
}

struct mem_src {
	const char *data;
	size_t len, at;
};

static int send_mem(virStreamPtr st, char *data, size_t n, void *ud)
{
	struct mem_src *m = ud;
	size_t k = m->len - m->at < n ? m->len - m->at : n;

	(void)st;
	memcpy(data, m->data + m->at, k);
	m->at += k;
	return (int)k;
}

/* A new volume of the pool holding len bytes of data (len 0: an empty mark), readable by root only. */
int saas__lv_vmhost_vol_put(struct drv *d, const char *name, const char *data, size_t len)
{
	char xml[512];
	virStoragePoolPtr pool;
	virStorageVolPtr vol;
	virStreamPtr st = NULL;
	struct mem_src m = { data, len, 0 };
	int rc;

	snprintf(xml, sizeof(xml), "<volume><name>%s</name><capacity unit='bytes'>%zu</capacity><allocation "
	         "unit='bytes'>0</allocation><target><format type='raw'/><permissions><mode>0600</mode></permissions>"
	         "</target></volume>", name, len);
	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if (!(vol = virStorageVolCreateXML(pool, xml, 0)))
		return saas__error_wrap(saas__lv_virt_error("making a volume on the VM host"), "%s", name);
	/* Streams on the volume's connection, which d->conn may no longer be. */
	if (len && (!(st = virStreamNew(virStorageVolGetConnect(vol), 0)) || virStorageVolUpload(vol, st, 0, len, 0) < 0 ||
	            virStreamSendAll(st, send_mem, &m) < 0 || virStreamFinish(st) < 0)) {
		rc = saas__error_wrap(saas__lv_virt_error("writing a volume on the VM host"), "%s", name);
		if (st)
			virStreamAbort(st);
		virStorageVolDelete(vol, 0);
	}
	if (st)
		virStreamFree(st);
	virStorageVolFree(vol);
	return rc;
}

struct mem_sink {
	unsigned char *buf;
	size_t cap, len;
};

static int recv_mem(virStreamPtr st, const char *data, size_t n, void *ud)
{
	struct mem_sink *m = ud;
	size_t k = m->cap - m->len < n ? m->cap - m->len : n;

	(void)st;
	memcpy(m->buf + m->len, data, k);
	m->len += k;
	return (int)n;
}

/* Up to cap bytes of volume name from offset into buf (*got of them). */
int saas__lv_vmhost_vol_get(struct drv *d, const char *name, uint64_t offset, unsigned char *buf, size_t cap,
                            size_t *got)
{
	virStorageVolPtr vol = saas__lv_vmhost_vol_lookup(d, name);
	virStreamPtr st = NULL;
	struct mem_sink m = { buf, cap, 0 };
	int rc = SAAS_OK;

	*got = 0;
	if (!vol)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no volume %s on VM host %s", name, d->uri);
	if (!(st = virStreamNew(virStorageVolGetConnect(vol), 0)) || virStorageVolDownload(vol, st, offset, cap, 0) < 0 ||
	    virStreamRecvAll(st, recv_mem, &m) < 0 || virStreamFinish(st) < 0) {
		rc = saas__error_wrap(saas__lv_virt_error("reading a volume on the VM host"), "%s", name);
		if (st)
			virStreamAbort(st);
	}
	if (st)
		virStreamFree(st);
	virStorageVolFree(vol);
	*got = m.len;
	return rc;
}

/* A template's description (STEM.json), or NULL. */
static json_t *tpl_json(struct drv *d, const char *stem)
{
	char name[TPL_STEM_MAX + 8];
	unsigned char *buf = malloc(65536);
	size_t got = 0;
	json_t *j = NULL;

	snprintf(name, sizeof(name), "%s.json", stem);
	if (buf && saas__lv_vmhost_vol_get(d, name, 0, buf, 65535, &got) == SAAS_OK)
		j = json_loadb((const char *)buf, got, JSON_DISABLE_EOF_CHECK, NULL); /* a volume may be longer than its text */
	free(buf);
	saas__error_clear();
	return j;
}

int saas__lv_vmhost_tpl_find(struct drv *d, const char *key, char stem[TPL_STEM_MAX])
{
	char **names;
	int n, rc, found = 0;

	if ((rc = saas__lv_vmhost_vol_names(d, &names, &n)) < 0)
		return rc;
	for (int i = 0; i < n && !found; i++)
		found = saas__lv_tpl_volume(names[i], key, "ready", stem);
	saas__lv_vmhost_names_free(names, n);
	return found;
}

/*
 * Does a volume of the pool back onto the disk at path (a clone's overlay,
 * of any engine of any cluster that shares the pool)? Made before its
 * domain starts and deleted after it ends, an overlay covers its clone's
 * whole life. When the pool cannot be read, the answer is yes.
 */
bool saas__lv_vmhost_vol_backs(struct drv *d, const char *path)
{
	virStoragePoolPtr pool;
	virStorageVolPtr *vols = NULL;
	int count = saas__lv_vmhost_pool(d, &pool) < 0 ? -1 : virStoragePoolListAllVolumes(pool, &vols, 0);
	bool used = count < 0;

	for (int i = 0; i < count; i++) {
		char *xml = used ? NULL : virStorageVolGetXMLDesc(vols[i], 0);
		const char *bs = xml ? strstr(xml, "<backingStore>") : NULL;
		if (bs && strstr(bs, path))
			used = true;
		free(xml);
		virStorageVolFree(vols[i]);
	}
	free(vols);
	saas__error_clear();
	return used;
}

/* Delete a template's volumes unless a volume backs onto its disk; the ready mark goes first either way. */
static bool tpl_delete(struct drv *d, const char *stem)
{
	static const char *const suffixes[] = { "json", "state", "qcow2" };
	char name[TPL_STEM_MAX + 8], *path = NULL;
	virStorageVolPtr v;

	snprintf(name, sizeof(name), "%s.ready", stem);
	saas__lv_vmhost_vol_delete(d, name);
	snprintf(name, sizeof(name), "%s.qcow2", stem);
	if ((v = saas__lv_vmhost_vol_lookup(d, name))) {
		path = virStorageVolGetPath(v);
		virStorageVolFree(v);
		if (!path || saas__lv_vmhost_vol_backs(d, path)) {
			free(path);
			return false;
		}
		free(path);
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(suffixes); i++) {
		snprintf(name, sizeof(name), "%s.%s", stem, suffixes[i]);
		saas__lv_vmhost_vol_delete(d, name);
	}
	return true;
}

void saas__lv_vmhost_tpl_break(struct drv *d, const char *key)
{
	char stem[TPL_STEM_MAX], name[TPL_STEM_MAX + 8];

	if (saas__lv_vmhost_check(d) == SAAS_OK && saas__lv_vmhost_tpl_find(d, key, stem) == 1) {
		snprintf(name, sizeof(name), "%s.ready", stem);
		saas__lv_vmhost_vol_delete(d, name);
	}
	saas__error_clear();
}

/*
 * What a build of key that died left (we hold its lease, so nobody builds
 * it now): its template VM, and the volumes of builds never marked ready
 * that no clone backs onto.
 */
static void tpl_sweep_key(struct drv *d, const char *key)
{
	static const char *const suffixes[] = { "qcow2", "state", "json" };
	char **names, stem[TPL_STEM_MAX], vm[64], ready[TPL_STEM_MAX + 8];
	virDomainPtr dom;
	virStorageVolPtr v;
	int n;

	snprintf(vm, sizeof(vm), TPL_PREFIX "%.16s", key);
	if ((dom = virDomainLookupByName(saas__lv_conn(d), vm))) {
		saas__lv_log(d, SAAS_LOG_INFO, "destroying template VM %s on VM host %s, left by a build that did not end",
		             vm, d->uri);
		virDomainDestroy(dom);
		virDomainFree(dom);
	}
	saas__error_clear();
	if (saas__lv_vmhost_vol_names(d, &names, &n) < 0) {
		saas__error_clear();
		return;
	}
	for (int i = 0; i < n; i++) {
		bool match = false;
		for (size_t s = 0; s < SAAS_ARRAY_SIZE(suffixes) && !match; s++)
			match = saas__lv_tpl_volume(names[i], key, suffixes[s], stem);
		if (!match)
			continue;
		snprintf(ready, sizeof(ready), "%s.ready", stem);
		if ((v = saas__lv_vmhost_vol_lookup(d, ready))) {
			virStorageVolFree(v);
			continue;
		}
		if (tpl_delete(d, stem))
			saas__lv_log(d, SAAS_LOG_INFO, "template build %s on VM host %s did not complete: deleted", stem,
			             d->uri);
	}
	saas__lv_vmhost_names_free(names, n);
}

/* Delete this owner's other templates of the same image and shape: the new one replaced them. */
static void tpl_prune(struct drv *d, const struct saas__lv_tpl_job *job, const char *keep)
{
	char **names, stem[TPL_STEM_MAX];
	int n;

	if (saas__lv_vmhost_vol_names(d, &names, &n) < 0) {
		saas__error_clear();
		return;
	}
	for (int i = 0; i < n; i++) {
		json_t *j;
		const char *image, *owner;
		if (!saas__lv_tpl_volume(names[i], NULL, "json", stem) || strcmp(stem, keep) == 0 || !(j = tpl_json(d, stem)))
			continue;
		image = json_string_value(json_object_get(j, "image"));
		owner = json_string_value(json_object_get(j, "owner"));
		if (image && owner && strcmp(owner, d->owner) == 0 && strcmp(image, job->image) == 0 &&
		    json_integer_value(json_object_get(j, "vcpus")) == job->vcpus &&
		    json_integer_value(json_object_get(j, "memory_mb")) == job->memory_mb &&
		    json_integer_value(json_object_get(j, "disk_gb")) == job->disk_gb) {
			if (tpl_delete(d, stem))
				saas__lv_log(d, SAAS_LOG_INFO, "template %s on VM host %s replaced by %s: deleted", stem, d->uri,
				             keep);
			else
				saas__lv_log(d, SAAS_LOG_INFO, "template %s on VM host %s replaced by %s: kept while clones back "
				             "onto its disk (deleted by a later build)", stem, d->uri, keep);
		}
		json_decref(j);
	}
	saas__lv_vmhost_names_free(names, n);
}

/* Renews a template build's lease every third of its ttl; lost: another engine has it now. */
struct renewer {
	struct drv *d;
	const char *name;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;
	int lost;                        /* atomic */
};

static void *renewer_main(void *arg)
{
	struct renewer *r = arg;
	struct timespec ts;
	int failures = 0;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		int held;
		saas__deadline(&ts, CLOCK_REALTIME, TEMPLATE_LEASE_MS / 3);
		if (pthread_cond_timedwait(&r->cond, &r->mu, &ts) != ETIMEDOUT || r->stop)
			continue;
		pthread_mutex_unlock(&r->mu);
		held = r->d->lease(r->d->lease_userdata, r->name, TEMPLATE_LEASE_MS, 1);
		failures = held < 0 ? failures + 1 : 0;
		/* Not renewed for a whole ttl is as good as lost: another engine may have taken it. */
		if (held == 0 || failures >= 2) {
			saas__lv_log(r->d, SAAS_LOG_WARN, "template build: lease %s lost%s%s", r->name,
			             held < 0 ? ": " : "", held < 0 ? saas_error_last()->message : "");
			__atomic_store_n(&r->lost, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_lock(&r->mu);
		if (__atomic_load_n(&r->lost, __ATOMIC_ACQUIRE))
			break;
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static int still_held(struct renewer *r)
{
	if (r && __atomic_load_n(&r->lost, __ATOMIC_ACQUIRE))
		return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "the build's lease %s was lost", r->name);
	return SAAS_OK;
}

/* Boot the template VM, save it into STEM.state and its disk STEM.qcow2; describe it; mark it ready. */
static int tpl_build_one(struct drv *d, const struct saas__lv_tpl_job *job, struct renewer *r, char stem[TPL_STEM_MAX])
{
	struct image *im;
	saas_vm_spec spec;
	struct launch l;
	struct timespec t0;
	virStorageVolPtr vol = NULL;
	virStorageVolInfo info;
	unsigned char gen[TPL_GEN_LEN / 2], head[LV_SAVE_HEADER_BYTES], magic[4];
	char name[64], vname[TPL_STEM_MAX + 8], *host_key = NULL, *path = NULL, *text = NULL;
	uint64_t offset;
	size_t got;
	json_t *meta = NULL;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&l, 0, sizeof(l));
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, job->image, &im);
	if (rc == SAAS_OK && !(host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	pthread_mutex_unlock(&d->mu);
	if (rc < 0 || (rc = saas__lv_vmhost_image(d, im)) < 0 || (rc = saas__random(gen, sizeof(gen))) < 0)
		goto out;
	snprintf(stem, TPL_STEM_MAX, TPL_PREFIX "%s-%02x%02x%02x%02x", job->key, gen[0], gen[1], gen[2], gen[3]);
	saas__lv_tpl_spec(job, &spec, name);
	l.d = d;
	l.spec = &spec;
	l.im = im;
	l.host_key = host_key;
	l.vol = stem;                    /* its overlay is the template's disk, STEM.qcow2 */
	if ((rc = saas__lv_boot_cold(&l)) < 0 || (rc = saas__lv_template_code_wait(d, l.ssh, im, job->key)) < 0)
		goto out;
	/* As on one machine (template.c): the clones' first command, over the port, finds its way warm. */
	if (l.control && d->control_port && d->control_exec)
		saas__lv_template_warm_port(d, &l, job->key);
	saas__ssh_close(l.ssh);
	l.ssh = NULL;
	for (int waited = 0; waited < TEMPLATE_SETTLE_MS && !closing(d); waited += 50)
		saas__sleep_ms(50);
	if ((rc = still_held(r)) < 0)
		goto out;
	if (virDomainSuspend(l.dom) < 0) {
		rc = saas__lv_virt_error("pausing the template VM");
		goto out;
	}
	/* The state's volume first, so that it is one of the pool's; libvirt's save writes into it (as root). */
	snprintf(vname, sizeof(vname), "%s.state", stem);
	if ((rc = saas__lv_vmhost_vol_put(d, vname, NULL, 0)) < 0 || !(vol = saas__lv_vmhost_vol_lookup(d, vname)) ||
	    !(path = virStorageVolGetPath(vol))) {
		rc = rc < 0 ? rc : saas__lv_virt_error("reading the state volume's path on the VM host");
		goto out;
	}
	if (virDomainSaveFlags(l.dom, path, NULL, VIR_DOMAIN_SAVE_PAUSED) < 0) {
		rc = saas__lv_virt_error("saving the template VM on the VM host");
		goto out;
	}
	virDomainFree(l.dom);            /* saved: its domain is gone */
	l.dom = NULL;
	/* Checked now rather than by each clone: what clones will read is a complete, raw stream. */
	if ((rc = saas__lv_vmhost_vol_get(d, vname, 0, head, sizeof(head), &got)) < 0 ||
	    (rc = saas__lv_save_stream_offset(head, got, &offset)) < 0 ||
	    (rc = saas__lv_vmhost_vol_get(d, vname, offset, magic, sizeof(magic), &got)) < 0)
		goto out;
	if (got != 4 || memcmp(magic, "QEVM", 4) != 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the template's saved state holds no QEMU stream");
		goto out;
	}
	if (virStorageVolGetInfo(vol, &info) < 0)
		info.allocation = 0;
	if ((rc = still_held(r)) < 0)
		goto out;
	meta = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:I, s:I}", "format", TEMPLATE_FORMAT,
	                 "key", job->key, "owner", d->owner, "image", im->name, "recipe", im->recipe ? im->recipe : "",
	                 "vcpus", (json_int_t)job->vcpus, "memory_mb", (json_int_t)job->memory_mb, "disk_gb",
	                 (json_int_t)job->disk_gb, "accel", d->kvm ? "kvm" : "tcg", "memory", "loaded", "state_bytes",
	                 (json_int_t)info.allocation, "build_ms", (json_int_t)saas__ms_since(&t0));
	if (!meta || !(text = json_dumps(meta, JSON_COMPACT))) {
		rc = saas__oom();
		goto out;
	}
	snprintf(vname, sizeof(vname), "%s.json", stem);
	if ((rc = saas__lv_vmhost_vol_put(d, vname, text, strlen(text))) < 0)
		goto out;
	/* Last: its existence is what says the template is complete. */
	snprintf(vname, sizeof(vname), "%s.ready", stem);
	if ((rc = saas__lv_vmhost_vol_put(d, vname, NULL, 0)) < 0)
		goto out;
	free(l.overlay);                 /* the template's disk now, not the VM's to delete */
	l.overlay = NULL;
	saas__lv_log(d, SAAS_LOG_INFO, "template %s ready on VM host %s in %lld ms as %s (%s, %u vCPU, %u MiB, memory "
	             "loaded by each clone, %llu KiB of state)", job->key, d->uri, (long long)saas__ms_since(&t0), stem,
	             im->name, job->vcpus, job->memory_mb, (unsigned long long)(info.allocation >> 10));
	tpl_prune(d, job, stem);
out:
	if (l.d)
		saas__lv_launch_undo(&l);
	if (rc < 0 && stem[0]) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
		tpl_delete(d, stem);
		rc = saas__error(rc, SAAS_ERRCLASS_DRIVER, 0, "%s", msg);
	}
	if (vol)
		virStorageVolFree(vol);
	json_decref(meta);
	free(text);
	free(path);
	free(host_key);
	return rc;
}

int saas__lv_vmhost_tpl_build(struct drv *d, const struct saas__lv_tpl_job *job, char stem[TPL_STEM_MAX])
{
	struct renewer r = { d, NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	char lease[160];
	pthread_t thread;
	bool held = false, renewing = false;
	int rc;

	stem[0] = '\0';
	if ((rc = saas__lv_vmhost_check(d)) < 0)
		return rc;
	if ((rc = saas__lv_vmhost_tpl_find(d, job->key, stem)) != 0)
		return rc < 0 ? rc : SAAS_OK;
	if (!saas__lv_tpl_lease_name(lease, sizeof(lease), d->host_tag, job->key))
		return saas__inval("template lease name too long");
	r.name = lease;
	if (d->lease) {
		int got = d->lease(d->lease_userdata, lease, TEMPLATE_LEASE_MS, 1);
		if (got < 0)
			return saas__error_wrap(got, "taking the template's lease");
		if (got == 0)
			return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
			                   "template %s is being built on VM host %s by another engine", job->key, d->uri);
		held = true;
		renewing = pthread_create(&thread, NULL, renewer_main, &r) == 0;
		if (!renewing) {
			rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 0, "no thread to renew the template's lease");
			goto out;
		}
	}
	/* Finished by another engine between the look and the lease: nothing to build. */
	if ((rc = saas__lv_vmhost_tpl_find(d, job->key, stem)) != 0) {
		rc = rc < 0 ? rc : SAAS_OK;
		goto out;
	}
	stem[0] = '\0';
	tpl_sweep_key(d, job->key);
	rc = tpl_build_one(d, job, d->lease ? &r : NULL, stem);
out:
	if (renewing) {
		pthread_mutex_lock(&r.mu);
		r.stop = true;
		pthread_cond_signal(&r.cond);
		pthread_mutex_unlock(&r.mu);
		pthread_join(thread, NULL);
	}
	if (held)
		d->lease(d->lease_userdata, lease, TEMPLATE_LEASE_MS, 0);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cond);
	return rc;
}

int saas__lv_vmhost_tpl_disk(struct drv *d, const char *stem, char **path)
{
	char name[TPL_STEM_MAX + 8];
	virStorageVolPtr v;

	*path = NULL;
	snprintf(name, sizeof(name), "%s.qcow2", stem);
	if (!(v = saas__lv_vmhost_vol_lookup(d, name)))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "template disk %s is not on VM host %s", name,
		                   d->uri);
	if (!(*path = virStorageVolGetPath(v)))
		return saas__lv_virt_error("reading the template disk's path on the VM host");
	virStorageVolFree(v);
	return SAAS_OK;
}

struct sock_sink {
	int fd;
	int64_t bytes;                   /* sent so far */
};

static int send_sock(virStreamPtr st, const char *data, size_t n, void *ud)
{
	struct sock_sink *k = ud;
	size_t done = 0;

	(void)st;
	while (done < n) {
		ssize_t w = send(k->fd, data + done, n - done, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	k->bytes += (int64_t)n;
	return (int)n;
}

/* A TCP connection to addr:port, tried for up to timeout_ms while refused (QEMU's listener comes up). */
static int tcp_connect(const char *addr, unsigned int port, int timeout_ms, int *out)
{
	struct sockaddr_in sa;
	int err = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return saas__inval("listen address %s is not IPv4", addr);
	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			*out = fd;
			return SAAS_OK;
		}
		err = errno;
		close(fd);
		saas__sleep_ms(100);
	}
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_OS, err, "cannot reach the clone's migration port %s:%u: %s",
	                   addr, port, strerror(err));
}

int saas__lv_vmhost_tpl_restore(struct launch *l, const struct timespec *t0, int64_t budget_ms)
{
	struct drv *d = l->d;
	unsigned char head[LV_SAVE_HEADER_BYTES];
	char name[TPL_STEM_MAX + 8], cmd[256];
	virStorageVolPtr vol = NULL;
	virStreamPtr st = NULL;
	struct sock_sink sink = { -1, 0 };
	uint64_t offset;
	unsigned int port = 0;
	size_t got;
	int rc;

	(void)t0;
	(void)budget_ms;
	snprintf(name, sizeof(name), "%s.state", l->tdir);
	if ((rc = saas__lv_vmhost_vol_get(d, name, 0, head, sizeof(head), &got)) < 0 ||
	    (rc = saas__lv_save_stream_offset(head, got, &offset)) < 0)
		goto out;
	/*
	 * QEMU listens for the stream on the host's address, on a port of the
	 * forwards' range: what a firewall keeps to the servers already. A port
	 * taken there is chosen again.
	 */
	for (int attempt = 0; attempt < 5; attempt++) {
		uint32_t rnd;
		if (saas__random(&rnd, sizeof(rnd)) < 0)
			rnd = (uint32_t)rand();
		port = REMOTE_PORT_FIRST + rnd % REMOTE_PORT_COUNT;
		snprintf(cmd, sizeof(cmd), "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"tcp:%s:%u\"}}",
		         d->listen, port);
		if ((rc = saas__lv_qmp(l->dom, cmd, -1, NULL)) == SAAS_OK)
			break;
	}
	if (rc < 0 || (rc = tcp_connect(d->listen, port, 5000, &sink.fd)) < 0)
		goto out;
	if (!(vol = saas__lv_vmhost_vol_lookup(d, name))) {
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no volume %s on VM host %s", name, d->uri);
		goto out;
	}
	/* From the host through the engine to the host: QEMU there can open no file of ours (seccomp, AppArmor). */
	if (!(st = virStreamNew(virStorageVolGetConnect(vol), 0)) || virStorageVolDownload(vol, st, offset, 0, 0) < 0 ||
	    virStreamRecvAll(st, send_sock, &sink) < 0 || virStreamFinish(st) < 0) {
		rc = saas__lv_virt_error("pouring the template's state into the clone");
		if (st)
			virStreamAbort(st);
	}
	l->state_bytes = sink.bytes;
out:
	if (sink.fd >= 0)
		close(sink.fd);
	if (st)
		virStreamFree(st);
	if (vol)
		virStorageVolFree(vol);
	return rc;
}

int saas__lv_vmhost_tpl_list(struct drv *d, saas_template_fn fn, void *userdata, int *stop)
{
	char **names, stem[TPL_STEM_MAX];
	int n, rc;

	if ((rc = saas__lv_vmhost_check(d)) < 0 || (rc = saas__lv_vmhost_vol_names(d, &names, &n)) < 0)
		return rc;
	for (int i = 0; i < n && !*stop; i++) {
		saas_driver_template t;
		const char *owner;
		json_t *j;
		if (!saas__lv_tpl_volume(names[i], NULL, "ready", stem) || !(j = tpl_json(d, stem)))
			continue;
		owner = json_string_value(json_object_get(j, "owner"));
		if (owner && strcmp(owner, d->owner) == 0 && json_is_string(json_object_get(j, "image"))) {
			saas__lv_template_from_json(j, &t);
			*stop = fn(userdata, &t);
		}
		json_decref(j);
	}
	saas__lv_vmhost_names_free(names, n);
	return SAAS_OK;
}
