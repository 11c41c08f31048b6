/*
 * Templates. A template is a VM booted once to ready, paused and saved (its
 * memory and device state, and its disk overlay frozen), from which clones
 * are restored (clone.c). One background builder makes them, one at a time;
 * creates never wait for it: until its template is ready, a sandbox boots cold.
 *
 * A mapped template (template_memory=mapped, memfile.c) keeps its RAM out of
 * its saved state: the RAM is a sealed memfd that clones map copy-on-write,
 * kept on disk as the template's "ram" file. A loaded one's state holds its
 * RAM, which each clone reads.
 *
 * On a remote VM host the template lives in the host's pool and is built
 * once across every engine that shares the host (host_remote_tpl.c); its memory is
 * always loaded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/qmp.h"
#include "driver/libvirt/template.h"
#include "transport/control.h"

/* What the template builder makes: a template VM of this shape. */
struct tmpl_job {
	struct drv *d;
	struct saas__lv_tpl_job s;
};

static int destroy_template_vm(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	char *vmdir;

	(void)ud;
	saas__lv_log(d, SAAS_LOG_INFO, "destroying template VM %s, left over from an interrupted build", name);
	virDomainDestroy(dom);
	saas__lv_limits_release(d, name);
	if ((vmdir = saas__lv_drv_path(d, "vms", name)))
		saas__lv_rm_tree(vmdir);
	free(vmdir);
	return 0;
}

/* A template VM still running, half-written template directories: what an interrupted build left. */
void saas__lv_templates_cleanup(struct drv *d)
{
	char *root = saas__lv_path_join(d->dir, "templates");
	DIR *dir;
	struct dirent *e;

	d->host->templates_cleanup(d);
	if (root && saas__mkdir_p(root, 0700) == 0 && (dir = opendir(root))) {
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			char *sub;
			if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0 && (sub = saas__lv_path_join(root, e->d_name))) {
				saas__lv_rm_tree(sub);
				free(sub);
			}
		}
		closedir(dir);
	}
	free(root);
}

/*
 * A template VM's directory whose domain is gone: its build was cut short
 * while libvirt was still starting the domain, and libvirt, reconnecting at
 * this open, stopped that QEMU itself (a domain found half started is killed,
 * in a thread of its own that may end before or after our listing).
 * Its files are all that is left. A directory whose domain still exists
 * (its metadata unreadable just now) is left for the next open.
 */
static void template_vm_dirs_drop(struct drv *d)
{
	virConnectPtr conn = saas__lv_conn(d);
	char *vms = saas__lv_path_join(d->dir, "vms");
	DIR *dir = vms ? opendir(vms) : NULL;
	struct dirent *e;

	while (dir && conn && (e = readdir(dir))) {
		virDomainPtr dom;
		virErrorPtr err;
		char *vmdir;
		bool found, busy;
		int st = VIR_DOMAIN_NOSTATE;
		if (strncmp(e->d_name, TPL_PREFIX, strlen(TPL_PREFIX)) != 0 || !e->d_name[strlen(TPL_PREFIX)])
			continue;
		/*
		 * Only a domain libvirt says is not there, or no longer running (a
		 * stopped transient one is being removed): any other answer may be
		 * a QEMU still using the files.
		 */
		dom = virDomainLookupByName(conn, e->d_name);
		found = dom != NULL;
		busy = found ? virDomainGetState(dom, &st, NULL, 0) < 0 || st != VIR_DOMAIN_SHUTOFF
		             : !(err = virGetLastError()) || err->code != VIR_ERR_NO_DOMAIN;
		if (found)
			virDomainFree(dom);
		if (busy) {
			saas__lv_log(d, SAAS_LOG_WARN, "template VM %s, left over from an interrupted build: %s; its files "
			             "are left for the next start", e->d_name,
			             found ? "its domain runs but was not found as this engine's" : "libvirt cannot say whether "
			             "its domain is there");
			continue;
		}
		saas__lv_log(d, SAAS_LOG_INFO, "template VM %s, left over from an interrupted build, was stopped by "
		             "libvirt (found half started); removing its files", e->d_name);
		saas__lv_limits_release(d, e->d_name);
		if ((vmdir = saas__lv_path_join(vms, e->d_name)))
			saas__lv_rm_tree(vmdir);
		free(vmdir);
	}
	if (dir)
		closedir(dir);
	free(vms);
	saas__error_clear();
}

/*
 * The template VMs an interrupted build of this engine's left. (A remote
 * host's may be other engines' builds, under their lease: one a dead engine
 * left is destroyed by the next build of its template, host_remote.c.)
 */
void saas__lv_template_vms_destroy(struct drv *d)
{
	saas__lv_own_domains(d, TPL_PREFIX, destroy_template_vm, NULL);
	template_vm_dirs_drop(d);
}

/* A new entry of the local host's: ready when its directory is complete. Caller holds d->mu. */
void saas__lv_template_known_local(struct drv *d, struct tmpl *t)
{
	char *dir, *meta = NULL;
	struct stat st;

	if ((dir = saas__lv_drv_path(d, "templates", t->key)) && (meta = saas__lv_path_join(dir, "template.json")) &&
	    stat(meta, &st) == 0)
		t->state = TMPL_READY;
	free(meta);
	free(dir);
}

/*
 * A clone of the template of key failed (the local host's template_lost):
 * its directory no longer complete (deleted by another engine on this state
 * directory, or by hand), a ready entry is not ready any more, so that the
 * next create builds it again rather than failing its clone, and no spare is
 * made of it meanwhile (spare.c).
 */
void saas__lv_template_lost_local(struct drv *d, const char *key)
{
	char *dir = saas__lv_drv_path(d, "templates", key), *meta = dir ? saas__lv_path_join(dir, "template.json") : NULL;
	struct stat st;

	if (meta && stat(meta, &st) < 0 && errno == ENOENT) {
		pthread_mutex_lock(&d->mu);
		for (struct tmpl *t = d->tmpls; t; t = t->next)
			if (strcmp(t->key, key) == 0 && t->state == TMPL_READY) {
				saas__lv_log(d, SAAS_LOG_INFO, "template %s is gone from its directory; built again when a create "
				             "asks for it", key);
				t->state = TMPL_NONE;
			}
		pthread_mutex_unlock(&d->mu);
	}
	saas__error_clear();
	free(meta);
	free(dir);
}

/* Where a clone finds a ready template: its directory here, or its volumes' stem on a remote host. */
char *saas__lv_template_place_local(struct drv *d, const struct tmpl *t)
{
	return saas__lv_drv_path(d, "templates", t->key);
}

char *saas__lv_template_place_remote(struct drv *d, const struct tmpl *t)
{
	(void)d;
	return saas__strdup(t->stem);
}

/*
 * A template is keyed by everything its saved state depends on: the format,
 * the accelerator, the image build, the VM's shape, the engine's key (the
 * guest holds it) and how clones get its RAM. A rebuilt image or a new size
 * gets a new key, so a new template; the old one is deleted once the new one
 * is ready.
 */
void saas__lv_template_key(struct drv *d, const saas_vm_spec *spec, const struct image *im, char key[33])
{
	char *text = NULL, hash[65];
	unsigned int mem = spec->memory_mb;

	if (im->min_memory_mib && mem < im->min_memory_mib)
		mem = im->min_memory_mib;
	/*
	 * A remote host's domains gained the control channel (a device: clones
	 * must match their template's): the engines that share its templates
	 * tell the two kinds apart by the key. So they do for the egress channel,
	 * which came later: a template made before it is never cloned into a
	 * domain that has it. Local keys are as they were.
	 */
	if (asprintf(&text, "%d|%s|%s|%s|%s|%u|%u|%u|%s|%s%s%s", TEMPLATE_FORMAT, d->kvm ? "kvm" : "tcg", im->name,
	             im->recipe, im->boot_args, spec->vcpus, mem, im->disk ? spec->disk_gb : 0, d->pub,
	             d->mapped ? "mapped" : "loaded", d->host->control_open && im->control ? "|channel" : "",
	             d->host->egress_port ? "|egress" : "") < 0) {
		key[0] = '\0';
		return;
	}
	saas__sha256_hex(hash, text, strlen(text));
	free(text);
	memcpy(key, hash, 32);
	key[32] = '\0';
}

/* The template entry of a key, made on first sight (ready if its directory is complete). Caller holds d->mu. */
struct tmpl *saas__lv_template_get_locked(struct drv *d, const char *key)
{
	struct tmpl *t;

	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			return t;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	saas__strlcpy(t->key, key, sizeof(t->key));
	t->memfd = -1;
	/* Remote: the host says whether it is complete (lv_create looks, outside the lock). */
	d->host->template_known(d, t);
	t->next = d->tmpls;
	d->tmpls = t;
	return t;
}

/*
 * Let go of the sealed RAM of the template of key (clones that map it keep
 * it until they end); replaced (deleted for a newer build), forget it too:
 * not ready, no spare made of it (spare.c) until a create asks for it again.
 */
static void template_ram_drop(struct drv *d, const char *key, bool replaced)
{
	pthread_mutex_lock(&d->mu);
	for (struct tmpl *t = d->tmpls; t; t = t->next) {
		if (strcmp(t->key, key) != 0)
			continue;
		if (t->memfd >= 0) {
			close(t->memfd);
			t->memfd = -1;
		}
		if (replaced) {
			t->state = TMPL_NONE;
			t->asked_ms = 0;
		}
	}
	pthread_mutex_unlock(&d->mu);
}

/* Delete the other templates of the same image and shape: a newer build of it replaced them. */
static void template_prune(struct drv *d, const struct tmpl_job *job)
{
	char *root = saas__lv_path_join(d->dir, "templates");
	DIR *dir = root ? opendir(root) : NULL;
	struct dirent *e;

	while (dir && (e = readdir(dir))) {
		char *sub, *meta;
		json_t *j;
		if (e->d_name[0] == '.' || strcmp(e->d_name, job->s.key) == 0)
			continue;
		if (!(sub = saas__lv_path_join(root, e->d_name)))
			break;
		if ((meta = saas__lv_path_join(sub, "template.json")) && (j = json_load_file(meta, 0, NULL))) {
			const char *image = json_string_value(json_object_get(j, "image"));
			if (image && strcmp(image, job->s.image) == 0 &&
			    json_integer_value(json_object_get(j, "vcpus")) == job->s.vcpus &&
			    json_integer_value(json_object_get(j, "memory_mb")) == job->s.memory_mb &&
			    json_integer_value(json_object_get(j, "disk_gb")) == job->s.disk_gb) {
				saas__lv_log(d, SAAS_LOG_INFO, "template %s replaced by %s; deleting it", e->d_name, job->s.key);
				saas__lv_rm_tree(sub);
				template_ram_drop(d, e->d_name, true);
			}
			json_decref(j);
		}
		free(meta);
		free(sub);
	}
	if (dir)
		closedir(dir);
	free(root);
}

/* Set the state of the template of key (a broken one waits TEMPLATE_RETRY_MS before its next build). */
static void template_mark(struct drv *d, const char *key, enum tmpl_state state)
{
	pthread_mutex_lock(&d->mu);
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0) {
			t->state = state;
			t->retry_at_ms = saas__now_ms() + TEMPLATE_RETRY_MS;
		}
	pthread_mutex_unlock(&d->mu);
}

/*
 * Save a paused VM's memory and device state to path (QMP migrate to an fd):
 * a template's, and a snapshot's (snapshot.c). ignore_shared: RAM mapped
 * shared is left out (x-ignore-shared); set on every save, as a QEMU keeps
 * its capabilities from one migration to the next. The file is held to the
 * guest's RAM and STATE_MARGIN_MIB. A save that fails once begun is
 * cancelled: a migration left running would stop the VM when it ends, after
 * the caller ran it again.
 */
int saas__lv_state_save(struct drv *d, virDomainPtr dom, const char *path, bool ignore_shared, int64_t *bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600), rc, undo_level = SAAS_LOG_DEBUG;
	const char *undo = NULL;
	virDomainInfo info;
	char caps[160];

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
	snprintf(caps, sizeof(caps), "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
	         "[{\"capability\":\"x-ignore-shared\",\"state\":%s}]}}", ignore_shared ? "true" : "false");
	/* The bound's RAM is the domain's, as the engine defined it (KiB). */
	rc = virDomainGetInfo(dom, &info) < 0 ? saas__lv_virt_error("the VM's memory") : SAAS_OK;
	/* QEMU caps migration bandwidth by default (128 MiB/s); a file takes what it gets. */
	if (rc == SAAS_OK)
		rc = saas__lv_qmp(dom, caps, -1, NULL);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp(dom, "{\"execute\":\"migrate-set-parameters\",\"arguments\":{\"max-bandwidth\":1099511627776}}",
		                  -1, NULL);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp_getfd(dom, "aas-save", fd);
	if (rc < 0) {
		close(fd);
		return saas__error_wrap(rc, "saving the VM's state");
	}
	/* A migrate refused leaves the descriptor with QEMU, named: let go of. */
	if ((rc = saas__lv_qmp(dom, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:aas-save\"}}", -1, NULL)) < 0) {
		undo = "{\"execute\":\"closefd\",\"arguments\":{\"fdname\":\"aas-save\"}}";
	} else if ((rc = saas__lv_qmp_migration_wait(d, dom, TEMPLATE_SAVE_STALL_MS, fd,
	                                             ((int64_t)(info.maxMem >> 10) + STATE_MARGIN_MIB) << 20, bytes)) < 0) {
		undo = "{\"execute\":\"migrate_cancel\"}";
		undo_level = SAAS_LOG_WARN;
	}
	close(fd);
	if (undo) {
		struct saas__kept_error failed;
		saas__error_keep(&failed, rc);
		/* The descriptor may be QEMU's own by then: not found is no news. */
		if (saas__lv_qmp(dom, undo, -1, NULL) < 0)
			saas__lv_log(d, undo_level, "a failed save could not be undone: %s", saas_error_last()->message);
		saas__error_raise(&failed);
	}
	return rc < 0 ? saas__error_wrap(rc, "saving the VM's state") : SAAS_OK;
}

/* The template VM of a job's shape, here or on a remote host: isolated, named after its key. */
void saas__lv_tpl_spec(const struct saas__lv_tpl_job *job, saas_vm_spec *spec, char name[64])
{
	static const saas_vm_network isolated = { SAAS_NET_ISOLATED, NULL, NULL };

	snprintf(name, 64, TPL_PREFIX "%.16s", job->key);
	memset(spec, 0, sizeof(*spec));
	spec->name = name;
	spec->image = job->image;
	spec->vcpus = job->vcpus;
	spec->memory_mb = job->memory_mb;
	spec->disk_gb = job->disk_gb;
	spec->network = &isolated;
}

/*
 * A build gives up at its next step once the driver closes (the engine
 * stops): its VM is destroyed on the way out, never left running with no
 * engine. Every wait of a step sees it too (the boot's knocks, the warming
 * command's cancel, the save's wait).
 */
static int abandoned(struct drv *d)
{
	return stopping(d) ? saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the engine is stopping") : SAAS_OK;
}

/*
 * `: warm` over the template's control port (lib/transport/control_exec.c), so that a
 * clone's first command finds the helper's fork, the user's shell and its
 * start-up files in memory. The connection is closed before the state is
 * taken. A failure costs only that.
 */
void saas__lv_template_warm_port(struct drv *d, struct launch *l, const char *key)
{
	struct saas__lv_way w;
	struct saas__ctl *ctl = NULL;
	saas_driver_exec req;
	int serves = 0, execs = 0, status = -1;

	memset(&req, 0, sizeof(req));
	/* Not `true`, which the helper answers with no shell (exec_plain.c): the shell is what is warmed. */
	req.command = ": warm";
	req.cwd = "/";
	req.timeout_ms = TEMPLATE_WARM_TIMEOUT_MS;
	req.output = saas__output_discard;
	req.cancel = d->stopping;
	/* Worded without "failed": that word after "template" is the log's news of a template that did. */
	if (saas__ctl_exec(&ctl, saas__lv_ctl_way(&w, d, l->spec->name, l->dir), &serves, &execs, &req, &status) < 0)
		saas__lv_log(d, SAAS_LOG_DEBUG, "template %s: no warming command over the control port (%s); saved anyway",
		             key, saas_error_last()->message);
	else if (status != 0)
		saas__lv_log(d, SAAS_LOG_DEBUG, "template %s: its warming command over the control port exited %d; saved "
		             "anyway", key, status);
	saas__error_clear();
	saas__ctl_close(ctl);
}

/*
 * Build one template: boot a VM of the job's shape to ready (isolated: it
 * makes no connection), let it settle, pause it, save its state, and freeze
 * its disk overlay as the base of every clone's. Written under KEY.tmp and
 * renamed into place when complete, so a half-built template is never used.
 * Mapped, its RAM is a memfd from the start, sealed once its VM is gone.
 */
static int template_build(struct tmpl_job *job)
{
	struct drv *d = job->d;
	struct image *im;
	saas_vm_spec spec;
	struct launch l;
	struct saas__lv_holder holder = { -1, -1, "" };
	char name[64], *tdir = NULL, *tmp = NULL, *path = NULL, *host_key = NULL;
	struct timespec t0;
	int64_t bytes = 0;
	uint64_t ram_bytes = 0, avail;
	json_t *meta = NULL;
	bool mapped;
	int rc, memfd = -1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	saas__lv_tpl_spec(&job->s, &spec, name);
	memset(&l, 0, sizeof(l));
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, job->s.image, &im);
	if (rc == SAAS_OK && !(host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	/* The template VM is confined as its clones will be: it runs the same guest. */
	if (rc == SAAS_OK && d->cf.confined && (rc = saas__lv_uid_take(d, &l.uid)) < 0)
		free(host_key);
	mapped = d->mapped;
	pthread_mutex_unlock(&d->mu);
	if (rc < 0)
		return rc;
	l.d = d;
	l.background = true;
	l.spec = &spec;
	l.im = im;
	l.host_key = host_key;
	if (!(tdir = saas__lv_drv_path(d, "templates", job->s.key)) || asprintf(&tmp, "%s.tmp", tdir) < 0) {
		tmp = NULL;
		rc = saas__oom();
		goto out;
	}
	ram_bytes = (uint64_t)saas__lv_domain_memory(&spec, im) << 20;
	if (mapped && (avail = saas__lv_mem_available_mib()) < (ram_bytes >> 20) + MAPPED_RESERVE_MIB) {
		saas__lv_log(d, SAAS_LOG_WARN, "template %s: its memory is loaded by each clone, not mapped: the host has "
		             "%llu MiB available, less than its %llu MiB and %u MiB to spare", job->s.key,
		             (unsigned long long)avail, (unsigned long long)(ram_bytes >> 20), MAPPED_RESERVE_MIB);
		mapped = false;
	}
	if (mapped) {
		if ((rc = saas__lv_memfd_new(MEMFD_TEMPLATE, ram_bytes, &memfd)) < 0 ||
		    (rc = saas__lv_holder_start(&holder, memfd, l.uid, d->cf.guest_gid ? d->cf.guest_gid : l.uid)) < 0)
			goto out;
		l.mem = LV_MEM_SHARED;
		l.mem_path = holder.path;
	}
	rc = saas__lv_boot_cold(&l);
	saas__lv_holder_stop(&holder); /* QEMU has its RAM open (or is gone) */
	l.mem_path = NULL;
	if (rc < 0 || (rc = abandoned(d)) < 0)
		goto out;
	/*
	 * One command as the sandbox user before the state is taken, so that every
	 * clone finds its shell and the session's code paths in its page cache:
	 * a clone's first `true` of `default` took 250 ms, its next 100 ms; with
	 * this, 160 ms. A failure costs only that.
	 */
	{
		char out[16];
		int status = -1;
		if (saas__ssh_run(l.ssh, "true", TEMPLATE_WARM_TIMEOUT_MS, out, sizeof(out), &status) < 0)
			saas__lv_log(d, SAAS_LOG_DEBUG, "template %s: no warming command (%s); saved anyway", job->s.key,
			             saas_error_last()->message);
		else if (status != 0)
			saas__lv_log(d, SAAS_LOG_DEBUG, "template %s: its warming command exited %d; saved anyway", job->s.key,
			             status);
		saas__error_clear();
	}
	/* And once over the control port, where a clone's first commands go: the helper's way to the shell. */
	if ((rc = abandoned(d)) < 0)
		goto out;
	/* An image with a code server: its clones start with its default kernel warm, or there is no template. */
	if ((rc = saas__lv_template_code_wait(d, l.ssh, im, job->s.key)) < 0 || (rc = abandoned(d)) < 0)
		goto out;
	if (l.control && d->control_port && d->control_exec)
		saas__lv_template_warm_port(d, &l, job->s.key);
	/* The engine's session must not live on in every clone, half open. */
	saas__ssh_close(l.ssh);
	l.ssh = NULL;
	for (int waited = 0; waited < TEMPLATE_SETTLE_MS && !stopping(d); waited += 50)
		saas__sleep_ms(50);
	if ((rc = abandoned(d)) < 0)
		goto out;
	saas__lv_rm_tree(tmp);
	if (saas__mkdir_p(tmp, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (virDomainSuspend(l.dom) < 0) {
		rc = saas__lv_virt_error("pausing the template VM");
		goto out;
	}
	if (!(path = saas__lv_path_join(tmp, "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = saas__lv_state_save(d, l.dom, path, mapped, &bytes)) < 0)
		goto out;
	virDomainDestroy(l.dom);
	virDomainFree(l.dom);
	l.dom = NULL;
	free(path);
	path = NULL;
	/* Its one writer gone, the RAM is sealed: from here on nobody, root included, can change it. */
	if (mapped && ((rc = saas__lv_memfd_seal(memfd)) < 0 || !(path = saas__lv_path_join(tmp, "ram")) ||
	               (rc = saas__lv_memfd_save(memfd, ram_bytes, path)) < 0)) {
		rc = rc < 0 ? rc : SAAS_ENOMEM;
		goto out;
	}
	free(path);
	path = NULL;
	if (l.overlay) {
		if (!(path = saas__lv_path_join(tmp, "disk.qcow2"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if (rename(l.overlay, path) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "freezing the template's disk: %s", strerror(errno));
			goto out;
		}
	}
	if (d->cf.confined && (rc = saas__lv_confine_template(d, tmp, path)) < 0)
		goto out;
	free(path);
	path = NULL;
	meta = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:I, s:I}", "format", TEMPLATE_FORMAT, "image",
	                 im->name, "recipe", im->recipe, "vcpus", (json_int_t)job->s.vcpus, "memory_mb",
	                 (json_int_t)job->s.memory_mb, "disk_gb", (json_int_t)job->s.disk_gb, "accel", d->kvm ? "kvm" : "tcg",
	                 "memory", mapped ? "mapped" : "loaded", "state_bytes", (json_int_t)bytes, "build_ms",
	                 (json_int_t)saas__ms_since(&t0));
	if (!meta || !(path = saas__lv_path_join(tmp, "template.json")) || json_dump_file(meta, path, JSON_INDENT(2)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing the template's description");
		goto out;
	}
	saas__lv_rm_tree(tdir);
	if (rename(tmp, tdir) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", tdir, strerror(errno));
		goto out;
	}
	/* Its clones map the memfd it has, not a copy loaded from disk. */
	if (mapped) {
		pthread_mutex_lock(&d->mu);
		for (struct tmpl *t = d->tmpls; t; t = t->next)
			if (strcmp(t->key, job->s.key) == 0 && t->memfd < 0) {
				t->memfd = memfd;
				memfd = -1;
			}
		pthread_mutex_unlock(&d->mu);
	}
	/*
	 * Ready before it is said to be: a create that reads "ready" (a test,
	 * an operator) and comes in before the builder thread ends would
	 * otherwise still find it building, and boot cold.
	 */
	template_mark(d, job->s.key, TMPL_READY);
	saas__lv_log(d, SAAS_LOG_INFO, "template %s ready in %lld ms (%s, %u vCPU, %u MiB, %s, %lld KiB of state)",
	             job->s.key, (long long)saas__ms_since(&t0), im->name, job->s.vcpus, job->s.memory_mb,
	             mapped ? "memory mapped by clones" : "memory loaded by clones", (long long)(bytes >> 10));
	template_prune(d, job);
out:
	saas__lv_holder_stop(&holder);
	saas__lv_launch_undo(&l);
	if (memfd >= 0)
		close(memfd);
	if (l.uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, l.uid);
		pthread_mutex_unlock(&d->mu);
	}
	if (rc < 0 && tmp)
		saas__lv_rm_tree(tmp);
	json_decref(meta);
	free(path);
	free(tmp);
	free(tdir);
	free(host_key);
	return rc;
}

/* Mark the template of key ready at stem on the host (remote). */
static void template_mark_remote(struct drv *d, const char *key, const char *stem)
{
	pthread_mutex_lock(&d->mu);
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0) {
			t->state = stem ? TMPL_READY : TMPL_NONE;
			saas__strlcpy(t->stem, stem ? stem : "", sizeof(t->stem));
		}
	pthread_mutex_unlock(&d->mu);
}

void saas__lv_template_vmhost_ready(struct drv *d, const char *key, const char *stem)
{
	template_mark_remote(d, key, stem);
}

/*
 * A remote host's build: once across the engines that share the host
 * (host_remote_tpl.c). Another engine's build under way is no failure: this engine
 * looks for its result again soon.
 */
static int template_build_remote(struct tmpl_job *job)
{
	struct drv *d = job->d;
	char stem[TPL_STEM_MAX] = "";
	int rc;

	rc = saas__lv_vmhost_tpl_build(d, &job->s, stem);
	if (rc == SAAS_OK) {
		template_mark_remote(d, job->s.key, stem);
	} else if (rc == SAAS_EBUSY) {
		saas__lv_log(d, SAAS_LOG_INFO, "%s; sandboxes boot cold until it is ready", saas_error_last()->message);
		pthread_mutex_lock(&d->mu);
		for (struct tmpl *t = d->tmpls; t; t = t->next)
			if (strcmp(t->key, job->s.key) == 0) {
				t->state = TMPL_ELSEWHERE;
				t->retry_at_ms = saas__now_ms() + TEMPLATE_ELSEWHERE_MS;
			}
		pthread_mutex_unlock(&d->mu);
	}
	return rc;
}

/* A remote host's build, said and marked: another engine's build under way is no failure. */
void saas__lv_template_build_remote(struct tmpl_job *job)
{
	struct drv *d = job->d;
	int rc = template_build_remote(job);

	if (rc == SAAS_OK)
		return;
	if (rc != SAAS_EBUSY && !closing(d))
		saas__lv_log(d, SAAS_LOG_WARN, "template %s (%s, %u vCPU, %u MiB) on VM host %s failed: %s; sandboxes "
		             "boot cold, next try in %d s", job->s.key, job->s.image, job->s.vcpus, job->s.memory_mb, d->uri,
		             saas_error_last()->message, TEMPLATE_RETRY_MS / 1000);
	if (rc != SAAS_EBUSY)
		template_mark(d, job->s.key, TMPL_BROKEN);
}

/* A local build, said and marked. */
void saas__lv_template_build_local(struct tmpl_job *job)
{
	struct drv *d = job->d;
	int rc = template_build(job);

	if (rc < 0 && !stopping(d))
		saas__lv_log(d, SAAS_LOG_WARN, "template %s (%s, %u vCPU, %u MiB) failed: %s; sandboxes boot cold, next try in %d s",
		             job->s.key, job->s.image, job->s.vcpus, job->s.memory_mb, saas_error_last()->message, TEMPLATE_RETRY_MS / 1000);
	else if (rc < 0)
		saas__lv_log(d, SAAS_LOG_INFO, "template %s: build abandoned, the engine is stopping; its VM is destroyed",
		             job->s.key);
	template_mark(d, job->s.key, rc == SAAS_OK ? TMPL_READY : TMPL_BROKEN);
}

static void *builder_main(void *arg)
{
	struct tmpl_job *job = arg;
	struct drv *d = job->d;

	d->host->template_build(job);
	pthread_mutex_lock(&d->mu);
	d->builder_busy = false;
	pthread_mutex_unlock(&d->mu);
	free(job);
	return NULL;
}

/*
 * Start building the template of key (if no build runs and it is due), and
 * say why it cannot serve this create: a cold boot's reason, for the log
 * (static text; SAAS_LOG_WARN in *level when something is wrong, not merely
 * not done yet). Caller holds d->mu.
 */
const char *saas__lv_template_request_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec,
                                             const struct image *im, int *level)
{
	struct tmpl_job *job;

	*level = SAAS_LOG_INFO;
	if (stopping(d))
		return "the engine is stopping";
	if (t->state == TMPL_BUILDING)
		return "its template is being built";
	if (t->state == TMPL_ELSEWHERE && saas__now_ms() < t->retry_at_ms)
		return "its template is being built by another engine on this VM host";
	if (t->state == TMPL_BROKEN && saas__now_ms() < t->retry_at_ms) {
		*level = SAAS_LOG_WARN;
		return "its template failed (see above) and is not tried again yet";
	}
	if (d->builder_busy)
		return "its template waits for another one's build to end";
	if (d->builder_started) {
		pthread_join(d->builder, NULL); /* finished: builder_busy is false */
		d->builder_started = false;
	}
	*level = SAAS_LOG_WARN;
	if (!(job = calloc(1, sizeof(*job))))
		return "its template cannot be built: out of memory";
	job->d = d;
	saas__strlcpy(job->s.key, t->key, sizeof(job->s.key));
	saas__strlcpy(job->s.image, im->name, sizeof(job->s.image));
	job->s.vcpus = spec->vcpus;
	job->s.memory_mb = spec->memory_mb;
	job->s.disk_gb = spec->disk_gb;
	if (pthread_create(&d->builder, NULL, builder_main, job) != 0) {
		free(job);
		return "its template cannot be built: no thread for the builder";
	}
	*level = SAAS_LOG_INFO;
	d->builder_started = d->builder_busy = true;
	t->state = TMPL_BUILDING;
	saas__strlcpy(t->image, job->s.image, sizeof(t->image));
	t->vcpus = job->s.vcpus;
	t->memory_mb = job->s.memory_mb;
	t->disk_gb = job->s.disk_gb;
	saas__lv_log(d, SAAS_LOG_INFO, "building template %s (%s, %u vCPU, %u MiB) in the background", t->key, im->name,
	             spec->vcpus, spec->memory_mb);
	return "its template is being built";
}

/* A template that failed to clone: delete it and build it again later. */
void saas__lv_template_break(struct drv *d, const char *key)
{
	template_mark(d, key, TMPL_BROKEN);
	d->host->template_break(d, key);
}

/* Its directory, and the sealed RAM this engine holds of it. */
void saas__lv_template_break_local(struct drv *d, const char *key)
{
	char *dir = saas__lv_drv_path(d, "templates", key);

	template_ram_drop(d, key, false);
	if (dir)
		saas__lv_rm_tree(dir);
	free(dir);
}

/* A template's slot: its entry's memfd (d->mu held). */
static int *template_slot(struct drv *d, const char *key)
{
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			return &t->memfd;
	return NULL;
}

int saas__lv_template_ram(struct drv *d, const char *tdir, uint64_t bytes, int *fd, bool *broken)
{
	const char *key = strrchr(tdir, '/') ? strrchr(tdir, '/') + 1 : tdir;

	return saas__lv_memfd_get(d, tdir, MEMFD_TEMPLATE, bytes, template_slot, key, "template", fd, broken);
}

/* The local host's ready templates, as their description on disk says (a previous engine's too). */
int saas__lv_template_list_local(struct drv *d, saas_template_fn fn, void *userdata, int *stop)
{
	char *root = saas__lv_path_join(d->dir, "templates");
	DIR *dir = root ? opendir(root) : NULL;
	struct dirent *e;
	int rc = root ? SAAS_OK : SAAS_ENOMEM;

	while (dir && !*stop && (e = readdir(dir))) {
		saas_driver_template t;
		char *sub, *meta = NULL;
		json_t *j = NULL;
		if (e->d_name[0] == '.' || strlen(e->d_name) != 32) /* "KEY.tmp" is a build not done yet */
			continue;
		if (!(sub = saas__lv_path_join(root, e->d_name)) || !(meta = saas__lv_path_join(sub, "template.json"))) {
			free(sub);
			rc = SAAS_ENOMEM;
			break;
		}
		free(sub);
		if ((j = json_load_file(meta, 0, NULL)) && json_is_string(json_object_get(j, "image"))) {
			saas__lv_template_from_json(j, &t);
			*stop = fn(userdata, &t);
		}
		json_decref(j);
		free(meta);
	}
	if (dir)
		closedir(dir);
	free(root);
	return rc;
}

/*
 * A remote host's ready templates are its volumes, this owner's (every
 * engine of the cluster sees them). A host that does not answer has none to
 * report now: the builds this driver knows of still are.
 */
int saas__lv_template_list_remote(struct drv *d, saas_template_fn fn, void *userdata, int *stop)
{
	if (saas__lv_vmhost_tpl_list(d, fn, userdata, stop) < 0) {
		saas__lv_log(d, SAAS_LOG_DEBUG, "templates on VM host %s not listed: %s", d->uri, saas_error_last()->message);
		saas__error_clear();
	}
	return SAAS_OK;
}

/*
 * Report each template: the ready ones the host has, then the builds this
 * driver asked for that run or failed. The callback is called without d->mu
 * held.
 */
void saas__lv_template_from_json(const json_t *j, saas_driver_template *t)
{
	memset(t, 0, sizeof(*t));
	t->image = json_string_value(json_object_get(j, "image"));
	t->vcpus = (unsigned int)json_integer_value(json_object_get(j, "vcpus"));
	t->memory_mb = (unsigned int)json_integer_value(json_object_get(j, "memory_mb"));
	t->disk_gb = (unsigned int)json_integer_value(json_object_get(j, "disk_gb"));
	t->state = SAAS_TEMPLATE_READY;
	t->state_bytes = json_integer_value(json_object_get(j, "state_bytes"));
}

int saas__lv_template_list(void *ctx, saas_template_fn fn, void *userdata)
{
	struct drv *d = ctx;
	struct tmpl *pending = NULL;
	size_t npending = 0, cap = 0;
	int stop = 0, rc = d->host->template_list(d, fn, userdata, &stop);

	pthread_mutex_lock(&d->mu);
	for (struct tmpl *t = d->tmpls; rc == SAAS_OK && t; t = t->next) {
		if ((t->state != TMPL_BUILDING && t->state != TMPL_BROKEN) || !t->image[0])
			continue;
		if ((rc = SAAS__ARRAY_RESERVE(pending, cap, npending + 1)) == SAAS_OK)
			pending[npending++] = *t;
	}
	pthread_mutex_unlock(&d->mu);
	for (size_t i = 0; rc == SAAS_OK && !stop && i < npending; i++) {
		saas_driver_template t = { pending[i].image, pending[i].vcpus, pending[i].memory_mb, pending[i].disk_gb,
			                       pending[i].state == TMPL_BUILDING ? SAAS_TEMPLATE_BUILDING : SAAS_TEMPLATE_FAILED,
			                       0 };
		stop = fn(userdata, &t);
	}
	free(pending);
	return rc == SAAS_ENOMEM ? saas__oom() : rc;
}
