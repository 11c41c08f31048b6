/*
 * Internal: where QEMU runs, as one table. The driver's rooms ask the VM host
 * through d->host, never which host it is: the local one (host_local.c:
 * libvirt on this machine, embedded or a daemon, the VMs' files in the state
 * directory) or a remote one (host_remote.c: a libvirtd reached by its URI,
 * images, overlays and templates as volumes of a storage pool there).
 */
#ifndef SAAS_DRIVER_LIBVIRT_HOST_H
#define SAAS_DRIVER_LIBVIRT_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <libvirt/libvirt.h>

#include "saas/sys/driver.h"

struct drv;
struct image;
struct launch;
struct tmpl;
struct tmpl_job;
struct saas__lv_domain;
struct saas__lv_snapshot;

struct saas__lv_host {
	/*
	 * Open, in two steps around libvirt's event loop: what is set up before
	 * the connection (the accelerator, the network and confinement this
	 * machine gives its QEMUs), then the connection and what it tells (the
	 * limits VMs get, where templates live).
	 */
	int (*prepare)(struct drv *d, const saas_driver_env *env);
	int (*connect)(struct drv *d, const saas_driver_env *env);
	/* The connection is up, opened again when the host died and answers now: SAAS_OK or why not. */
	int (*check)(struct drv *d);
	/* The image's files where the host's QEMU reads them (uploaded once per build to a remote host). */
	int (*image_place)(struct drv *d, struct image *im);
	/* A VM's disk overlay on base (the image's disk, or the template's frozen one: l->tdir). */
	int (*overlay_make)(struct launch *l);
	/* The overlay of vol (a VM's name, or a clone's volume stem) removed where the VM's directory is not. */
	void (*overlay_drop)(struct drv *d, const char *vol);
	/*
	 * A remote host's VM disks need not be named as the VM (a resume's
	 * overlay is the snapshot's): the domain's disk read before a destroy,
	 * and deleted after it. NULL: the overlay is the VM's directory's.
	 */
	char *(*domain_disk)(virDomainPtr dom);
	void (*disk_drop)(struct drv *d, const char *path);
	/* The domain's SSH forward port and the paths its QEMU sees, into *def. */
	int (*domain_place)(struct launch *l, struct saas__lv_domain *def);
	/*
	 * A clone's saved state poured into its paused domain (the template's or
	 * the snapshot's, at state_path), errors said as `what` failing.
	 */
	int (*state_in)(struct launch *l, const char *what, const char *state_path, const struct timespec *t0,
	                int64_t budget_ms);
	/*
	 * Templates: what an interrupted build left, cleaned at open; whether a
	 * template is there already (a new entry, d->mu held); a ready one's
	 * place for a clone (its directory, or its volumes' stem); the build
	 * (its result marked on the entry); one that broke deleted; one a clone
	 * found gone looked for again; the ready ones listed.
	 */
	void (*templates_cleanup)(struct drv *d);
	void (*template_known)(struct drv *d, struct tmpl *t);
	char *(*template_place)(struct drv *d, const struct tmpl *t);
	void (*template_build)(struct tmpl_job *job);
	void (*template_break)(struct drv *d, const char *key);
	void (*template_lost)(struct drv *d, const char *key);
	/* Another engine's finished template of key, marked ready: 1 and its place in *place (NULL: no memory), or 0. */
	int (*template_find)(struct drv *d, const char *key, char **place);
	int (*template_list)(struct drv *d, saas_template_fn fn, void *userdata, int *stop);
	/*
	 * The VM's control port where it is not a socket in the VM's directory
	 * here: a connection to it, in *fd (channel.c). NULL: the socket.
	 */
	int (*control_open)(struct drv *d, const char *name, int *fd);
	/*
	 * The memory the host has available for more VMs, in MiB (0: it cannot
	 * say): this machine's MemAvailable, or a remote host's free, buffers
	 * and cache as its libvirtd reports them.
	 */
	uint64_t (*mem_available_mib)(struct drv *d);
	/*
	 * Snapshots (fork, pause) kept on the host, as volumes of its pool
	 * (host_remote_snap.c): one taken of VM name (keep: it runs on, a fork);
	 * one's description read for a restore, with its place (what a clone's
	 * l->tdir is); one deleted; this owner's listed (complete ones); this
	 * owner's scanned, complete or not, with when each was last written (the
	 * core's sweep). NULL: files of the state directory, as snapshot.c keeps
	 * them on this machine.
	 */
	int (*snap_take)(struct drv *d, const char *name, const char *snap, int keep, int64_t *bytes);
	int (*snap_read)(struct drv *d, const char *snap, struct saas__lv_snapshot *s, char **place);
	int (*snap_delete)(struct drv *d, const char *snap);
	int (*snap_list)(struct drv *d, saas_name_fn fn, void *userdata);
	int (*snap_scan)(struct drv *d, saas_snapshot_fn fn, void *userdata);
	/*
	 * What the host offers, as facts: the VM's control port (fix-ups,
	 * files and commands over it: its socket here, or control_open); QEMU shares this
	 * machine's memory (mapped templates, mapped forks, the free memory
	 * check); spares are made there; other engines share the host's templates
	 * (a missing one is looked for there before it is built); the host
	 * may stop answering mid-call (a listing cut short is an error); the
	 * host's cgroup controllers are learned from its refusals.
	 */
	bool control_port;
	/*
	 * Guests' egress goes through the servers over a channel of each domain
	 * (egress_host.h): a VM host's, where the engine installs nothing.
	 */
	bool egress_port;
	bool local_memory;
	bool spares;
	bool shared_templates;
	bool may_vanish;
	bool limits_learned;
	/* For the log at open: " (remote: ...)" after the URI, and whose uids QEMU runs under (NULL: the engine's). */
	const char *said;
	const char *uids_said;
};

extern const struct saas__lv_host saas__lv_host_local;
extern const struct saas__lv_host saas__lv_host_remote;

#endif
