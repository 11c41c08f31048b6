/*
 * Internal: driver_config parsed (pure), the engine's SSH key pair, the embedded root and its qemu.conf (conf.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_CONF_H
#define SAAS_DRIVER_LIBVIRT_CONF_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- configuration (conf.c) ------------------------------------------------------------------ */

enum accel { ACCEL_AUTO, ACCEL_KVM, ACCEL_TCG };
enum netcfg { NET_AUTO, NET_ISOLATED, NET_INTERNET };
/* template_memory=mapped: clones map the template's RAM copy-on-write (memfile.c); loaded: they read a copy. */
enum tmplmem { TMPL_MEM_MAPPED, TMPL_MEM_LOADED };
/* uids=auto: per-VM uids when the host allows them; off: QEMU runs as today; a range: per-VM uids or fail. */
enum uidcfg { UIDS_AUTO, UIDS_OFF, UIDS_ON };
/* remote=auto: the VM host is remote when the URI names a host; on/off: say so (host.h). */
enum remotecfg { REMOTE_AUTO, REMOTE_OFF, REMOTE_ON };
/* reap=auto: the embedded driver reaps its QEMUs (reap.h); off: the host's init does. */
enum reapcfg { REAP_AUTO, REAP_OFF };

#define OWNER_MAX 64                     /* owner=NAME: 1 to this many of [A-Za-z0-9._-] */
#define POOL_DEFAULT "aas"
#define POOL_DIR_DEFAULT "/var/lib/libvirt/images/aas"

/* driver_config, parsed. */
struct saas__lv_config {
	char *uri;                       /* NULL: the embedded driver */
	char *images;                    /* NULL: saas__lv_default_images_dir() */
	int accel;                       /* enum accel */
	int network;                     /* enum netcfg */
	bool templates;                  /* make sandboxes as clones of templates */
	bool control_port;               /* clones' fix-ups over the control port where the image serves it */
	bool control_files;              /* files over the control port where the guest's helper serves them */
	bool control_exec;               /* commands over the control port until the SSH session is up, plain ones after */
	bool spare_warm;                 /* a spare's guest run once, fix-ups and a first command, before a take (spare.c) */
	bool cpu_words;                  /* cpu_readback=words: libvirt reads a started guest's CPU cheaply (emulator.h) */
	int boot_timeout_ms;
	int disk_sweep_grace_ms;         /* remote: an unused aas-disk volume's age before the sweep deletes it */
	int uids;                        /* enum uidcfg */
	unsigned int uid_first, uid_count;
	char *dns_upstream;              /* the policy resolver's upstream "ADDR" or "ADDR#PORT"; NULL: resolv.conf's */
	unsigned int cpu_milli;          /* host CPU per vCPU in thousandths (cpu_limit); 0: no limit */
	int template_memory;             /* enum tmplmem */
	char *nft_helper;                /* aas-nft to run when the engine cannot run nft; NULL: SAAS_NFT_HELPER */
	int remote;                      /* enum remotecfg */
	int reap;                        /* enum reapcfg */
	char *listen;                    /* the VM host's address for guests' SSH forwards; NULL: 127.0.0.1 */
	char *owner;                     /* the cluster's name in each domain; NULL: the state directory */
	char *ssh_key;                   /* the cluster's private key (PATH.pub beside it); NULL: the engine's own */
	char *pool;                      /* remote: the storage pool's name; NULL: POOL_DEFAULT */
	char *pool_dir;                  /* remote: its directory on the VM host; NULL: POOL_DIR_DEFAULT */
	unsigned int min_free_memory_mb; /* a local VM starts only with this and its memory available */
	unsigned int spares;             /* clones' QEMUs started ahead (spare.c), when not spares_auto */
	bool spares_auto;                /* spares=auto (the default): as many as lately asked for */
	unsigned int spare_memory_mb;    /* what spares may hold together; 0: auto (spare_policy.c) */
	int spare_idle_ms;               /* spares=auto: a quiet spell, no create this long (0: off) */
	unsigned int spare_idle_count;   /* spares=auto: kept from a quiet spell on */
};

/*
 * Parse driver_config: a libvirt URI, or space- or comma-separated key=value
 * pairs: uri=URI images=DIR accel=auto|kvm|tcg network=auto|isolated|internet
 * templates=on|off control_port=on|off control_files=on|off control_exec=on|off boot_timeout=SECONDS uids=auto|off|FIRST-LAST
 * dns_upstream=ADDR[#PORT] cpu_limit=on|off|RATIO template_memory=mapped|loaded
 * nft_helper=PATH remote=auto|off|on listen=IPV4 owner=NAME ssh_key=PATH
 * pool=NAME pool_dir=PATH min_free_memory_mb=MIB spares=auto|N spare_memory_mb=auto|MIB
 * spare_warm=on|off spare_idle=off|SECONDS spare_idle_count=N cpu_readback=words|properties
 * reap=auto|off. NULL or ""
 * gives the defaults. On
 * failure *cfg holds nothing (SAAS_EINVAL says which option and why).
 */
int saas__lv_config_parse(struct saas__lv_config *cfg, const char *text);
void saas__lv_config_clear(struct saas__lv_config *cfg);

/* $AAS_IMAGE_DIR, else the user's cache directory (XDG), else /var/cache/aas/images. Free with free(). */
char *saas__lv_default_images_dir(void);

/*
 * The embedded driver's qemu.conf: QEMU writes its own logs; as root (euid_root)
 * it runs under GUEST_GROUP when that group exists (has_guest_group), else root;
 * confined, libvirt's own processes run as QEMU_USER and each domain carries
 * its own uid (saas__lv_domain.uid).
 */
char *saas__lv_qemu_conf_text(bool euid_root, bool has_guest_group, bool confined);

/* ---- the engine's key and the embedded root (conf.c) ----------------------------------------- */

/*
 * The engine's SSH key pair (d->key, d->pub, d->authkey_b64): the cluster's
 * at path (ssh_key=PATH and PATH.pub), else made once per state directory.
 */
int saas__lv_ensure_key(struct drv *d, const char *path);
/* The embedded driver's root for state_dir, created; *out freed by the caller. */
int saas__lv_embed_root(const char *state_dir, char **out);
/* Write ROOT/etc/qemu.conf for the embedded driver (confined: per-VM uids). */
int saas__lv_write_qemu_conf(const char *root, bool confined);

#endif
