/*
 * Internal: the libvirt VM driver's rooms and what they share. Every sandbox
 * is a transient QEMU domain named after its id, booted straight from the
 * image's kernel and initramfs (and, for disk images, a thin qcow2 overlay
 * sized by the size class), with user-mode networking whose only way in is
 * an SSH forward bound to host loopback. Guests with the internet policy
 * reach out through QEMU's sockets on the host, so those run under a group of
 * their own that one nftables table (the guard) keeps away from the host's
 * services and private networks; with a uid per QEMU, another table decides
 * each VM's egress by its uid (isolated, internet or allow/deny lists).
 *
 * The default connection is libvirt's embedded QEMU driver rooted in the
 * state directory: no daemon, and the engine is the one process that owns
 * the root (two processes opening one root fight over it and kill VMs).
 *
 * One file per concern, as libvirt splits its own QEMU driver:
 *   libvirt.c   the driver table: open/close, create/destroy/state/list and
 *               the guest calls; the event loop, the console keeper, helpers
 *   conf.c      driver_config, the engine's key pair, the embedded root and
 *               its qemu.conf
 *   guard.c     the network policy at open and the nftables guard
 *   egress.c    per-VM egress: nftables keyed on each QEMU's uid (egress.h)
 *   resolver.c  the DNS resolver of policy VMs, one thread (egress.h)
 *   dns.c       DNS messages, read as hostile input (dns.h)
 *   image.c     image manifests, reloaded when an image is rebuilt; their
 *               files staged where confined QEMUs can reach them
 *   vm.c        the registry of running VMs and their SSH sessions
 *   uid.c       each VM's own QEMU uid: the range, the allocator, the files
 *   vmfs.c      the engine's hands in a VM's files: fds, never paths a VM
 *               can redirect (the rule below)
 *   cgroup.c    each VM's host limits: memory and pids cgroups, what the host has
 *   domain.c    domain XML and the metadata read back from running domains
 *   boot.c      making a VM: its directory, overlay, domain; cold boots
 *   qmp.c       QEMU monitor commands (migration to and from a file)
 *   clone.c     a VM restored from a template's saved state
 *   control.c   the control port: a clone's fix-ups without SSH (control.h)
 *   template.c  templates: keys, the background builder, pruning
 *   snapshot.c  snapshots of running VMs (fork, pause) and VMs restored from them
 *   console.c   the console log's bounds (console.h)
 *   remote.c    a VM host reached by a remote URI: its storage pool and
 *               volumes, the bounded connection, host_info, templates kept
 *               on the host (built once under the store's lease)
 *
 * The pure parts (config parsing, the qemu.conf text, the guard ruleset, the
 * domain XML, the metadata parser) take their inputs as arguments and touch
 * neither libvirt nor the host, so tests/unit/test_libvirt.c pins them.
 *
 * Names shared between the rooms take the saas__lv_ prefix (the static
 * library exposes every non-static symbol to its consumers).
 *
 * The rule every file of the driver keeps (docs/security.md): a tenant may
 * have escaped into their QEMU, which then runs as the VM's uid and says
 * what it likes over QMP and on its sockets. So the engine never resolves a
 * path through a directory a VM's uid can write, and never acts on a path,
 * a file or a socket a VM can choose without checking it on an fd first:
 *  - a VM's directory is the engine's, 0711 (uid.c): its QEMU reaches its
 *    files by name but can neither add, rename nor remove one; a file the
 *    engine makes there is made O_CREAT|O_EXCL|O_NOFOLLOW and given to the
 *    VM's uid through its fd (vmfs.c);
 *  - a path from QEMU (query-block's disk) must be one of the VM's own disk
 *    names in its directory, opened O_NOFOLLOW and checked on the fd
 *    (saas__lv_vm_disk_open) before it is linked, chowned or chmodded;
 *  - the control socket's listener is checked with SO_PEERCRED before a
 *    byte is sent (control.c);
 *  - trees are removed through directory fds, never following (vmfs.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_DRIVER_H
#define SAAS_DRIVER_LIBVIRT_DRIVER_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>
#include <libvirt/libvirt.h>

#include "saas/sys/driver.h"
#include "driver/libvirt/host.h"
#include "transport/ssh.h"
#include "transport/vmdir.h"
#include "util/error.h"
#include "util/util.h"

struct ifaddrs;
struct stat;

#define VM_PREFIX "sbx-"
#define META_NS "https://libsaas.org/xmlns/vm/1"
#define META_PREFIX "aas"
#define DEFAULT_BOOT_TIMEOUT_MS 180000
#define BOOT_TIMEOUT_MAX_S 3600
#define SSH_USER "sandbox"
/* The guest's root may run one thing over SSH: the fix-ups of a restored clone (aas-control --restored). */
#define FIXUP_USER "root"

/*
 * Templates (template.c). A template VM is named TPL_PREFIX + its key, so it
 * is never taken for a sandbox. TEMPLATE_FORMAT goes into every template's
 * key: bump it when what a template holds changes.
 */
#define TPL_PREFIX "aas-tpl-"
#define TEMPLATE_FORMAT 2                  /* 2: the guest RAM is the backend MEM_ID; mapped or loaded */
#define TEMPLATE_RETRY_MS (5 * 60 * 1000)  /* a template that failed is built again after this */
#define TEMPLATE_SETTLE_MS 1000            /* the template VM's idle time between ready and save */
#define TEMPLATE_WARM_TIMEOUT_MS 30000     /* its one command as the sandbox user, before the save */
#define SPARES_DEFAULT 1                   /* spares=N: clones' QEMUs started ahead (spare.c) */
#define SPARES_MAX 16
#define SPARE_HOLD_MS 2000                 /* no spare made this soon after a create */
#define SPARE_CHECK_MS 1000                /* the spare thread looks again at least this often */
#define SPARE_BACKOFF_FIRST_MS 1000
#define SPARE_BACKOFF_MAX_MS 60000
#define TEMPLATE_SAVE_TIMEOUT_MS 120000
/*
 * A mapped template's RAM stays in memory for as long as the template does,
 * and can grow to the guest's whole RAM (clones reading never-written pages
 * fill them in): one is built only while the host has that much available
 * and this much more; else the template is built loaded.
 */
#define MAPPED_RESERVE_MIB 2048u
/*
 * A template on a remote VM host (remote.c) is built once across the
 * engines that share the host, under the store's lease
 * "template:HOST:KEY" (saas_driver_env.lease), taken for TEMPLATE_LEASE_MS
 * and renewed every third of it while the build runs. An engine that finds
 * the lease held looks for the finished template again after
 * TEMPLATE_ELSEWHERE_MS.
 */
#define TEMPLATE_LEASE_MS 15000
#define TEMPLATE_ELSEWHERE_MS 5000
/* A remote template's volumes: TPL_PREFIX KEY "-" GEN, then ".qcow2", ".state", ".json", ".ready". */
#define TPL_STEM_MAX 64
/* Both ends of a mapped template's save and clone: RAM in a shared backend is neither sent nor read. */
#define IGNORE_SHARED_ON                                                                                      \
	"{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":[{\"capability\":" \
	"\"x-ignore-shared\",\"state\":true}]}}"

/* The guard (guard.c): QEMU runs under GUEST_GROUP, which the nftables table GUARD_TABLE restrains. */
#define GUEST_GROUP "aas-guest"
#define GUARD_TABLE "aas_guard"

/*
 * Confinement (uid.c): as root, the embedded driver runs each VM's QEMU under
 * a uid of its own from a range (driver option uids), group GUEST_GROUP; a
 * system libvirtd does the same for an unprivileged engine.
 * libvirt's own processes (capability probes) run as QEMU_USER, an
 * unprivileged system account.
 */
#define QEMU_USER "aas-qemu"
#define UIDS_FIRST_DEFAULT 200000u
#define UIDS_COUNT_DEFAULT 1000u
#define UIDS_FIRST_MIN 1000u              /* below: the host's own users */
#define UIDS_LAST_MAX 2147483646u         /* uid_t stays positive as an int; (uid_t)-1 is "none" */
#define UIDS_COUNT_MAX 1000000u

/*
 * Host limits (cgroup.c). cpu_limit=RATIO gives each VM's QEMU, all its
 * threads together, RATIO host CPUs per vCPU (on: 1); in thousandths here.
 */
#define CPU_MILLI_DEFAULT 1000u
#define CPU_MILLI_MIN 10u                /* 0.01: the kernel takes no CFS quota under 1 ms per 100 ms */
#define CPU_MILLI_MAX 16000u
#define CPU_PERIOD_US 100000u            /* the quota's period: the kernel's default */
/*
 * Memory: the hard limit is the guest's memory plus QEMU's own (heap, device
 * buffers, libraries) and, under TCG, its translated-code cache, which the
 * domain caps at TCG_CACHE_MIB (QEMU's own default grows to 1 GiB).
 */
#define MEM_OVERHEAD_MIB 256u
#define TCG_CACHE_MIB 256u
/*
 * pids: QEMU's threads are its main loop, one per vCPU, a pool of up to 64
 * for blocking I/O, RCU, migration and a few more: the limit leaves room for
 * all of them at once (at exactly its count a migration failed to start a
 * thread and QEMU died) and none for a fork bomb.
 */
#define PIDS_BASE 128u
#define IO_WEIGHT_PER_VCPU 100u          /* the blkio/io weight, per vCPU: the host's own processes have 100 */
#define IO_WEIGHT_MAX 1000u

/* ---- configuration (conf.c) ------------------------------------------------------------------ */

enum accel { ACCEL_AUTO, ACCEL_KVM, ACCEL_TCG };
enum netcfg { NET_AUTO, NET_ISOLATED, NET_INTERNET };
/* template_memory=mapped: clones map the template's RAM copy-on-write (memfile.c); loaded: they read a copy. */
enum tmplmem { TMPL_MEM_MAPPED, TMPL_MEM_LOADED };
/* uids=auto: per-VM uids when the host allows them; off: QEMU runs as today; a range: per-VM uids or fail. */
enum uidcfg { UIDS_AUTO, UIDS_OFF, UIDS_ON };
/* remote=auto: the VM host is remote when the URI names a host; on/off: say so (remote.c). */
enum remotecfg { REMOTE_AUTO, REMOTE_OFF, REMOTE_ON };

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
	bool control_exec;               /* a clone's commands over the control port until its SSH session is up */
	int boot_timeout_ms;
	int uids;                        /* enum uidcfg */
	unsigned int uid_first, uid_count;
	char *dns_upstream;              /* the policy resolver's upstream "ADDR" or "ADDR#PORT"; NULL: resolv.conf's */
	unsigned int cpu_milli;          /* host CPU per vCPU in thousandths (cpu_limit); 0: no limit */
	int template_memory;             /* enum tmplmem */
	char *nft_helper;                /* aas-nft to run when the engine cannot run nft; NULL: SAAS_NFT_HELPER */
	int remote;                      /* enum remotecfg */
	char *listen;                    /* the VM host's address for guests' SSH forwards; NULL: 127.0.0.1 */
	char *owner;                     /* the cluster's name in each domain; NULL: the state directory */
	char *ssh_key;                   /* the cluster's private key (PATH.pub beside it); NULL: the engine's own */
	char *pool;                      /* remote: the storage pool's name; NULL: POOL_DEFAULT */
	char *pool_dir;                  /* remote: its directory on the VM host; NULL: POOL_DIR_DEFAULT */
	unsigned int min_free_memory_mb; /* a local VM starts only with this and its memory available */
	unsigned int spares;             /* clones' QEMUs started ahead (spare.c) */
};

/*
 * Parse driver_config: a libvirt URI, or space- or comma-separated key=value
 * pairs: uri=URI images=DIR accel=auto|kvm|tcg network=auto|isolated|internet
 * templates=on|off control_port=on|off control_files=on|off control_exec=on|off boot_timeout=SECONDS uids=auto|off|FIRST-LAST
 * dns_upstream=ADDR[#PORT] cpu_limit=on|off|RATIO template_memory=mapped|loaded
 * nft_helper=PATH remote=auto|off|on listen=IPV4 owner=NAME ssh_key=PATH
 * pool=NAME pool_dir=PATH min_free_memory_mb=MIB spares=N. NULL or "" gives the defaults. On
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

/* ---- per-VM uids (uid.c) --------------------------------------------------------------------- */

/* The uids of a range that VMs hold. Callers serialise (d->mu). */
struct saas__lv_uids {
	unsigned int first, count;
	unsigned int next;               /* where the next search starts: a uid just freed is the last reused */
	unsigned char *used;             /* count flags */
};

int saas__lv_uids_init(struct saas__lv_uids *u, unsigned int first, unsigned int count);
void saas__lv_uids_clear(struct saas__lv_uids *u);
/* A free uid of the range; SAAS_EBUSY when every one is held. */
int saas__lv_uids_take(struct saas__lv_uids *u, unsigned int *uid);
/* Hold a uid a running VM already has (adoption); false when it is outside the range. */
bool saas__lv_uids_mark(struct saas__lv_uids *u, unsigned int uid);
/* How many uids of the range are free. */
unsigned int saas__lv_uids_free(const struct saas__lv_uids *u);
/* Let a uid go (0 and uids outside the range are ignored). */
void saas__lv_uids_put(struct saas__lv_uids *u, unsigned int uid);
/*
 * A free uid of the range that no process runs as: the owners of proc's
 * numeric entries (a /proc tree; a fake one in the tests) are skipped, not
 * held. SAAS_EBUSY when none is left.
 */
int saas__lv_uids_take_unused(struct saas__lv_uids *u, const char *proc, unsigned int *uid);

/* ---- host limits (cgroup.c) ----------------------------------------------------------------- */

enum cg_ctl { CG_CPU, CG_MEMORY, CG_PIDS, CG_IO, CG_NCTL };

/* The host's cgroup hierarchies, from /proc/self/mounts. */
struct saas__lv_cg {
	char *v1[CG_NCTL];               /* where each v1 controller is mounted, or NULL */
	char *v2;                        /* where the cgroup2 hierarchy is mounted, or NULL */
	bool v2_has[CG_NCTL];            /* controllers v2 offers (those no v1 hierarchy holds) */
};

/* Read the hierarchies from mounts (the text of /proc/self/mounts) and v2's cgroup.controllers. */
int saas__lv_cg_detect(struct saas__lv_cg *cg, const char *mounts);
void saas__lv_cg_clear(struct saas__lv_cg *cg);
/* Make the v1 cpuset hierarchy's PARTITION (libvirt's "machine") with the root's CPUs and memory nodes, if empty. */
int saas__lv_cg_cpuset_prime(const char *mounts, const char *partition);
bool saas__lv_cg_has(const struct saas__lv_cg *cg, int ctl);

/* Per size: the pids limit, the memory hard limit (MiB; memory_mib as the domain has it), the I/O weight. */
unsigned int saas__lv_pids_max(unsigned int vcpus);
unsigned int saas__lv_memory_limit_mib(unsigned int memory_mib, bool kvm);
unsigned int saas__lv_io_weight(unsigned int vcpus);

/*
 * The directory whose pids.max limits a VM's QEMU, from its /proc/PID/cgroup
 * text: on v2, the domain's own cgroup; on v1, the domain's pids cgroup when
 * libvirt made one, else ours (*own): V1_PIDS/group/name. *dir freed by the
 * caller. SAAS_ENOTSUP (saying why) when the host offers none.
 */
int saas__lv_cg_pids_dir(const struct saas__lv_cg *cg, const char *proc_cgroup, const char *group, const char *name,
                         char **dir, bool *own);
/* Write max into dir's pids.max; own: make dir first and move pid (every thread of it) in. */
int saas__lv_cg_pids_limit(const char *dir, bool own, long pid, unsigned int max);
/* Remove our pids cgroup of name (nothing on v2 or when there is none). */
int saas__lv_cg_pids_remove(const struct saas__lv_cg *cg, const char *group, const char *name);
/* Remove every one of group's pids cgroups that no process is left in (VMs gone while no engine ran). */
void saas__lv_cg_pids_sweep(const struct saas__lv_cg *cg, const char *group);

/* ---- shared state ---------------------------------------------------------------------------- */

struct image {
	char name[64];
	char *dir;
	char *kernel, *initrd, *disk;    /* absolute paths; disk NULL for initramfs images */
	uint64_t disk_bytes;             /* the disk's virtual size (its filesystem's), 0 if the manifest lacks it */
	char *boot_args;
	char *host_key;                  /* "ssh-ed25519 AAAA..." */
	char *recipe;                    /* what the image was built from (its recipe hash), for template keys */
	/* Remote (remote.c): the files as the VM host's QEMU sees them, once uploaded (under d->upload_mu). */
	char *host_kernel, *host_initrd, *host_disk;
	unsigned int min_memory_mib;
	bool control;                    /* its guest serves the control port (manifest "control_port", control.h) */
	struct timespec mtime;           /* of the manifest, to notice rebuilds */
	struct image *next;
};

struct vm {
	char name[SAAS_ID_MAX + 1];
	const struct image *im;          /* the image build it was made from; NULL: adopted, not known */
	unsigned int port;
	unsigned int uid;                /* its QEMU's own uid, 0 when not confined */
	char *host_key;
	saas__ssh *ssh;
	pthread_mutex_t mu;              /* serialises (re)connecting */
	/*
	 * Its control port takes one user at a time: a file transfer or a
	 * command (libvirt.c, port_take). The fields after ctl_user belong to the
	 * user that has it.
	 */
	pthread_mutex_t ctl_mu;
	pthread_cond_t ctl_cv;           /* signalled when ctl_user goes back to PORT_FREE */
	int ctl_user;                    /* under ctl_mu: enum port_user */
	int files;                       /* its helper serves files (1), does not (-1), not asked (0) */
	int execs;                       /* its helper runs commands (1), does not (-1), not asked (0) */
	struct saas__ctl *ctl;        /* the connection (control.h), or NULL */
	unsigned int refs;
	struct vm *next;
};

enum port_user { PORT_FREE, PORT_FILES, PORT_EXEC };

/* A template's state, by key: one per image build, size and accelerator. */
enum tmpl_state { TMPL_NONE, TMPL_BUILDING, TMPL_READY, TMPL_BROKEN, TMPL_ELSEWHERE };
/* TMPL_ELSEWHERE: remote, another engine holds the build's lease; looked for again at retry_at_ms. */

struct tmpl {
	char key[33];
	int state;                       /* enum tmpl_state */
	int memfd;                       /* a mapped template's sealed RAM (memfile.c); -1: not loaded (yet) */
	int64_t retry_at_ms;             /* TMPL_BROKEN: not built again before this */
	char image[64];                  /* what it boots and its shape, once a build or a clone was asked for */
	unsigned int vcpus, memory_mb, disk_gb;
	char stem[TPL_STEM_MAX];         /* remote, TMPL_READY: its volumes' common name on the host */
	int64_t asked_ms;                /* when a create last asked for it (0: not since open): spares go to the latest */
	struct tmpl *next;
};

struct drv {
	char *dir;                       /* STATE/libvirt */
	char *uri;
	char *images;
	char *key, *pub, *authkey_b64;   /* the engine's key pair */
	char *owner;                     /* written into each domain: which engine owns it */
	int accel;
	bool kvm;
	int network;                     /* enum netcfg, from driver_config */
	bool guard;                      /* the guard is installed and QEMU runs under GUEST_GROUP */
	bool confined;                   /* each VM's QEMU runs under its own uid (d->uids) */
	bool stage_images;               /* confined, and QEMU's uids cannot reach d->images (image.c) */
	struct saas__lv_uids uids;       /* under mu */
	gid_t guest_gid;                 /* confined: every VM's QEMU group (0: each VM's uid as its gid) */
	int uids_mode;                   /* enum uidcfg, from driver_config */
	unsigned int uid_first, uid_count;
	char *root;                      /* the embedded driver's root, or NULL */
	unsigned int cpu_milli;          /* from cpu_limit */
	unsigned int min_free_memory_mb; /* from driver_config: local VMs start only with it and their memory available */
	struct saas__lv_cg cg;           /* the host's cgroup hierarchies */
	char cg_group[32];               /* our pids cgroups' parent: aas-HASH of the state directory */
	bool lim_cpu, lim_memory, lim_pids, lim_io; /* the limits this host gives VMs (cgroup.c) */
	char guard_why[512];             /* why not, when !guard */
	struct saas__lv_egress *egress;  /* per-VM egress by uid (egress.c); NULL: only the guard, by group */
	char egress_why[512];            /* why not, when !egress */
	char *dns_upstream;              /* driver option dns_upstream, or NULL */
	char *nft_helper;                /* driver option nft_helper, or NULL */
	const char *nft;                 /* the aas-nft helper when it loads our tables; NULL: nft (saas__lv_nft) */
	bool internet;                   /* the policy of a spec that leaves it to the driver */
	int boot_timeout_ms;
	bool templates;                  /* make sandboxes as clones of templates (driver option templates=on) */
	/*
	 * control_port=off: clones' fix-ups go over SSH even where the port is
	 * there (it stays in the domains: a template is the same either way).
	 */
	bool control_port;
	/*
	 * control_files=off: files go over SFTP even where the guest's helper
	 * serves them over the port (control_files.c).
	 */
	bool control_files;
	/*
	 * control_exec=off: a clone returns once its SSH session is up, and every
	 * command goes over SSH (control_exec.c says what it changes).
	 */
	bool control_exec;
	bool mapped;                     /* templates' RAM mapped by clones (template_memory=mapped, and possible) */
	char mapped_why[256];            /* why not, when template_memory=mapped and !mapped */
	virConnectPtr conn;              /* remote: replaced when it died (host->check); read atomically */
	/*
	 * Where QEMU runs (host.h): this machine, or a remote VM host
	 * (host_remote.c), where nothing of the engine's filesystem is QEMU's and
	 * images and overlays are volumes of a storage pool.
	 */
	const struct saas__lv_host *host;
	char *listen;                    /* where guests' SSH forwards listen and the engine connects */
	char *spool_name, *spool_dir;    /* remote: the host's storage pool (driver options pool, pool_dir) */
	virStoragePoolPtr spool;
	pthread_mutex_t upload_mu;       /* one image upload at a time */
	pthread_mutex_t conn_mu;         /* reconnecting */
	virConnectPtr *retired;          /* dead connections other threads may still hold, closed at close */
	char host_tag[17];               /* remote: the URI's hash, naming the host in template leases */
	saas_driver_lease_fn lease;      /* the store's leases (NULL: this engine is alone) */
	void *lease_userdata;
	const int *stopping;             /* atomic: the engine is stopping (saas_driver_env.stopping) */
	size_t n_retired;
	pthread_mutex_t mu;
	struct vm *vms;
	struct image *imgs;
	struct image *old_imgs;          /* replaced by a rebuild; kept until close, as creates may still use them */
	struct tmpl *tmpls;              /* under mu */
	pthread_t builder;               /* the template builder thread, one at a time */
	bool builder_started;            /* under mu: builder must be joined */
	bool builder_busy;               /* under mu: builder runs */
	int closing;                     /* atomic: the driver is closing; long waits give up */
	pthread_t keeper;                /* cuts the VMs' console logs back (console.h) */
	bool keeper_started;
	/* Clones' QEMUs started ahead (spare.c), under mu. */
	struct spare *spares;
	unsigned int spares_max;         /* driver option spares=N */
	unsigned int creating;           /* creates and restores running: no spare is made meanwhile */
	int64_t spare_hold_until_ms;     /* nor before this (after one) */
	int64_t spare_retry_at_ms;       /* nor before this (after a failure) */
	pthread_t spare_thread;
	bool spare_started;
	pthread_cond_t spare_cond;       /* with mu: signalled at close */
	pthread_cond_t keeper_cond;      /* with mu: signalled at close */
	/*
	 * Snapshots (snapshot.c): restores hold it shared while they read a
	 * snapshot's files; deleting and collecting snapshots hold it exclusive.
	 */
	pthread_rwlock_t snaps_lock;
	saas_log_fn log;
	void *log_userdata;
};

/* ---- helpers (libvirt.c) --------------------------------------------------------------------- */

void saas__lv_log(struct drv *d, int level, const char *fmt, ...) SAAS_PRINTF(3, 4);
/* libvirt's last error as SAAS_EBACKEND, prefixed by what was being done. */
int saas__lv_virt_error(const char *what);
/* "a/b"; NULL (and the error recorded) when out of memory. */
char *saas__lv_path_join(const char *a, const char *b);
/* A directory of the driver's: DIR/kind/name (kind "vms", "templates", "snapshots"); NULL when out of memory. */
char *saas__lv_drv_path(struct drv *d, const char *kind, const char *name);
/* Remove the tree at path, whose parent is one of the driver's directories, never following a link (vmfs.c). */
void saas__lv_rm_tree(const char *path);
/* A whole file (read up to about max bytes) as a string; NULL if it cannot be opened. */
char *saas__lv_read_file(const char *path, size_t max);

static inline bool closing(struct drv *d)
{
	return __atomic_load_n(&d->closing, __ATOMIC_ACQUIRE) != 0;
}

/* The engine is stopping, or the driver closing: the driver's own work (a template build) gives up. */
static inline bool stopping(struct drv *d)
{
	return closing(d) || (d->stopping && __atomic_load_n(d->stopping, __ATOMIC_ACQUIRE) != 0);
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

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

/* ---- host limits, the driver's side (cgroup.c) ----------------------------------------------- */

/* Which limits this host can give (d->lim_*), said once in the log; removes pids cgroups left behind. */
void saas__lv_limits_setup(struct drv *d, bool embedded);
/* A running domain's limits that are not in its XML: memory (live) and pids. */
int saas__lv_limits_apply(struct drv *d, virDomainPtr dom, const char *name, unsigned int vcpus, unsigned int memory_mib,
                          bool kvm);
/* At destroy: the VM's pids cgroup goes (its QEMU is gone). */
void saas__lv_limits_release(struct drv *d, const char *name);

/* ---- network policy and the guard (guard.c) -------------------------------------------------- */

/* Does GUEST_GROUP exist? Its id in *gid (may be NULL). */
bool saas__lv_guest_gid(gid_t *gid);

/* An IPv6 prefix: the address with every bit past len zero. */
struct saas__lv_prefix6 {
	struct in6_addr addr;
	unsigned int len;
};

/*
 * The host's own global IPv6 prefixes, from a getifaddrs() list: each IPv6
 * address masked to its netmask (no netmask: /128), without duplicates nor
 * prefixes inside another. Addresses the guard blocks by range anyway
 * (loopback, link-local, site-local, unique local, multicast, IPv4-mapped)
 * are left out. *out (free with free(); NULL when *n is 0) holds *n prefixes.
 * SAAS_OK, or SAAS_ENOMEM.
 */
int saas__lv_host_prefixes6(const struct ifaddrs *ifa, struct saas__lv_prefix6 **out, size_t *n);

/*
 * The guard's nftables ruleset for QEMU's group gid. resolv_conf is the text
 * of /etc/resolv.conf (may be NULL): its nameservers are the resolvers slirp
 * forwards guest DNS to, the only host-side addresses the guard lets through.
 * host6 (n_host6 of them) are the host's own global IPv6 prefixes
 * (saas__lv_host_prefixes6): the host's neighbours on them are reached by no
 * guest. Two rules carry a comment marking this exact ruleset, which
 * saas__lv_guard_ensure looks for. Free with free(); NULL when out of memory.
 */
char *saas__lv_guard_ruleset(unsigned int gid, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                             size_t n_host6);

/*
 * The host as the guard sees it now: the text of /etc/resolv.conf (NULL when
 * unreadable) and the host's global IPv6 prefixes (saas__lv_host_prefixes6).
 * Both freed by the caller. SAAS_OK; SAAS_ENOTSUP with why; SAAS_ENOMEM.
 */
int saas__lv_host_now(char **resolv_conf, struct saas__lv_prefix6 **host6, size_t *n_host6, char *why,
                      size_t why_len);

/* The nameservers of a resolv.conf text (may be NULL), as nft set elements ("a, b"): only well-formed addresses. */
void saas__lv_resolvers(const char *resolv_conf, saas__buf *v4, saas__buf *v6);

/*
 * The guard's sets, as nft declarations inside a table block: blocked4 and
 * blocked6 (never the internet), host6 (the host's prefixes), resolvers4 and
 * resolvers6 (r4, r6: saas__lv_resolvers's lists, may be ""). The egress
 * table (egress.c) declares the same, so that it can count per VM what the
 * guard would refuse anyway.
 */
void saas__lv_guard_sets(saas__buf *b, const char *r4, const char *r6, const struct saas__lv_prefix6 *host6,
                         size_t n_host6);

/*
 * Load rules (one transaction) with nft, from a file of this call's own in
 * d->dir (concurrent loads never read each other's half-written file), kept
 * afterwards as d->dir/keep for the operator when keep is not NULL.
 * SAAS_OK; SAAS_ENOTSUP with why; SAAS_ENOMEM.
 */
int saas__lv_nft_load(struct drv *d, const char *rules, const char *keep, char *why, size_t why_len);
/* What loads and lists the engine's tables: nft, or the aas-nft helper (argv[0] for saas__run). */
const char *saas__lv_nft(const struct drv *d);

/*
 * Install the guard when it can be relied on (the group exists, and either
 * the embedded driver as root or a system libvirtd with per-VM uids and
 * CAP_NET_ADMIN in the engine's ambient set; embedded says which), then choose the default policy of a spec that leaves it to
 * the driver (d->internet) from d->network. Fails only when network=internet
 * was asked for and cannot be guarded, or out of memory.
 */
int saas__lv_network_setup(struct drv *d, bool embedded);

/*
 * Before every internet guest: is the guard this engine would write still
 * loaded (its marked rules are there)? If not (an operator flushed the
 * ruleset, or the host's prefixes or resolvers changed), install it again.
 * SAAS_ENOTSUP, saying why, when there is no guard or it cannot be
 * reinstalled: never an unguarded internet guest.
 */
int saas__lv_guard_ensure(struct drv *d);

/* ---- per-VM egress (egress.c, resolver.c, dns.c) -------------------------------------------- */

/* Rules in one list of a policy, and how long a name may be (docs/sandboxes.md, "Network policy"). */
#define EGRESS_RULES_MAX 64
/* What an answered address stays allowed for: its TTL, clamped to this range (seconds). */
#define EGRESS_TTL_MIN 60
#define EGRESS_TTL_MAX 3600
/* Addresses learned from lookups that one VM holds at once, per family. */
#define EGRESS_LEARNED_MAX 4096

struct saas__dns_addr;

/*
 * May a policy VM look name up? Not when a deny rule matches it, else when an
 * allow rule does: "*" matches every name, "*.suffix" every name strictly
 * below suffix, a name itself only; CIDRs match no name.
 */
bool saas__lv_egress_name_allowed(const char *const *allow, const char *const *deny, const char *name);

/*
 * Is net one the driver can enforce? Rules as driver.h says the core
 * normalises them, at most EGRESS_RULES_MAX per list. SAAS_OK or SAAS_EINVAL
 * saying which rule. (Checked again here: CIDRs go into nft's input.)
 */
int saas__lv_egress_check(const saas_vm_network *net);
/*
 * SAAS_ENOTSUP for a tenant who asked for what needs policies (what: "network
 * policies", "changes to a running sandbox's network") on a driver that has
 * none: plain words of the arguments' class (what was asked cannot be had
 * here), so that they reach the tenant, as a driver's class would not. Why it has none
 * (d->egress_why: the host's nft, its uid, its resolver) was logged at open.
 */
int saas__lv_egress_refused(const char *what);

/*
 * The egress table: the guard's sets (saas__lv_guard_sets), and two maps from
 * a QEMU's uid to its chains, one in the output filter hook (before the
 * guard's) and one in the output nat hook. An atomic replace of the whole
 * table. Free with free(); NULL when out of memory.
 */
char *saas__lv_egress_table_text(const char *table, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                                 size_t n_host6);

/*
 * One uid's rules for net (mode, CIDR rules; names are the resolver's), with
 * its resolver on loopback port dns_port under a policy: its sets and chains
 * made or emptied and filled, its map entries set, its counter kept; one
 * atomic transaction. Free with free(); NULL when out of memory.
 */
char *saas__lv_egress_vm_text(const char *table, unsigned int uid, const saas_vm_network *net,
                              unsigned int dns_port);
/* Everything of uid's gone from the table (whatever of it was there). */
char *saas__lv_egress_remove_text(const char *table, unsigned int uid);

/*
 * Start per-VM egress when it can hold (VMs confined to uids of their own and
 * the guard installed): the table, and the resolver's thread. Otherwise
 * d->egress stays NULL and d->egress_why says why. Fails only when out of
 * memory or the upstream option is bad.
 */
int saas__lv_egress_open(struct drv *d, const char *state_dir);
/* Stop the resolver; the table stays while a VM has rules in it (the next open replaces it), else it goes. */
void saas__lv_egress_close(struct drv *d);

/*
 * Give VM name (its QEMU's uid) the egress of net (NULL: isolated). A VM made
 * isolated (restricted: slirp's restrict=on) can only stay so. Before the
 * VM starts and at any time after; atomic. SAAS_ENOTSUP saying why when
 * there is no per-VM egress here.
 */
int saas__lv_egress_vm_set(struct drv *d, const char *name, unsigned int uid, const saas_vm_network *net,
                           bool restricted);
/* Forget VM name's egress and remove its uid's rules. */
void saas__lv_egress_vm_remove(struct drv *d, const char *name);
/* VM name's counters; zeros for a VM egress does not know. */
int saas__lv_egress_vm_stats(struct drv *d, const char *name, saas_vm_network_stats *out);
/* Is the table still loaded? If not (a flushed ruleset), load it and every VM's rules again. */
int saas__lv_egress_ensure(struct drv *d);

/* ---- images (image.c) ------------------------------------------------------------------------ */

void saas__lv_image_free(struct image *im);
/*
 * An image by name, reloaded when its manifest changes (a rebuild). Caller
 * holds d->mu; the image stays valid until close (a replaced one is retired,
 * not freed: creates and template builds use it without the lock).
 */
int saas__lv_image_get(struct drv *d, const char *name, struct image **out);
/* The backing file named in a qcow2 image's header (NULL: none, not qcow2, unreadable). Free with free(). */
char *saas__lv_qcow2_backing(const char *path);
/* At open: remove the image stagings (STATE/libvirt/images) that no VM's or template's disk backs onto. */
void saas__lv_images_prune(struct drv *d);

/* ---- running VMs (vm.c) ---------------------------------------------------------------------- */

/*
 * Register a running VM made from im (NULL: adopted, its build not known);
 * ssh (may be NULL: connected on first use) becomes the registry's.
 */
int saas__lv_vm_add(struct drv *d, const char *name, const struct image *im, unsigned int port, unsigned int uid,
                    const char *host_key, saas__ssh *ssh);
/* A reference to the VM of name, or NULL; let go with saas__lv_vm_put. */
struct vm *saas__lv_vm_get(struct drv *d, const char *name);
void saas__lv_vm_put(struct drv *d, struct vm *v);
/* Take a VM out of the registry; the registry's reference is dropped by the caller. */
struct vm *saas__lv_vm_unlink(struct drv *d, const char *name);
/* The VM's SSH session, reopened if it died, with a reference the caller lets go with saas__ssh_close. */
int saas__lv_vm_session(struct drv *d, const char *name, saas__ssh **out);
/*
 * Open the engine's session to a VM's SSH forward (on d->listen). It gives up
 * while it waits once the driver closes, or for background (a template's VM)
 * once the engine stops.
 */
int saas__lv_ssh_connect(struct drv *d, bool background, unsigned int port, const char *host_key, int timeout_ms,
                         saas__ssh **out);

/* ---- domains (domain.c) ---------------------------------------------------------------------- */

/*
 * A VM's guest RAM: one QEMU memory backend whose id is MEM_ID in every VM,
 * given with -machine memory-backend=, so that its RAM block has one name
 * whether the VM was booted, cloned from a template or restored from a
 * snapshot (a migration stream names the blocks it carries). libvirt's own
 * backend (pc.ram) stays defined and unused, in every VM alike.
 */
#define MEM_ID "aas-mem"
enum saas__lv_mem {
	LV_MEM_RAM,                      /* anonymous memory: a cold boot, a VM restored from a snapshot */
	LV_MEM_SHARED,                   /* a template VM: the file at mem_path, its writes going to the file */
	LV_MEM_PRIVATE,                  /* a template's clone: the same file mapped copy-on-write (MAP_PRIVATE) */
};

/*
 * The <qemu:arg> elements of the memory backend of mode (enum saas__lv_mem):
 * mem_path (unused for LV_MEM_RAM) holds mib MiB. Never LV_MEM_SHARED for a
 * clone: its writes would change every other clone's memory.
 */
void saas__lv_domain_memory_args(saas__buf *b, int mode, const char *mem_path, unsigned int mib);

/* Everything a domain's XML depends on. */
struct saas__lv_domain {
	const saas_vm_spec *spec;        /* name, vcpus, memory_mb */
	const struct image *im;
	const char *owner;               /* the engine's state directory */
	const char *authkey_b64;         /* the engine's public key, for the kernel command line */
	const char *vmdir;               /* the VM's directory (console log); NULL: the console is a pty (remote) */
	const char *overlay;             /* the disk overlay, or NULL (initramfs images) */
	unsigned int port;               /* the SSH forward on the host's address listen */
	bool kvm;
	bool internet;
	bool incoming;                   /* a clone: -incoming defer, no kernel */
	unsigned int uid, gid;           /* QEMU's own uid and group (a static DAC label); uid 0: none */
	bool policy;                     /* internet, and the metadata says "policy" (egress.c decides) */
	unsigned int cpu_milli;          /* host CPU per vCPU in thousandths (<cputune>); 0: no limit */
	unsigned int io_weight;          /* <blkiotune> weight; 0: none */
	int mem;                         /* enum saas__lv_mem (0: LV_MEM_RAM) */
	const char *mem_path;            /* LV_MEM_SHARED, LV_MEM_PRIVATE: the file QEMU opens */
	/*
	 * The control port (control.h): a virtio-serial channel whose host end
	 * is the socket vmdir/CONTROL_SOCKET. A device like any other: a clone
	 * has it exactly when its template (or snapshot) has it.
	 */
	bool control;
	const char *listen;              /* the SSH forward's address; NULL: 127.0.0.1 */
	const char *kernel, *initrd;     /* as the host's QEMU sees them; NULL: the image's own */
};

/*
 * The domain XML. A clone's domain must equal its template's in every device
 * (QEMU's migration stream carries device state, not configuration): only the
 * name, genid, paths, SSH port and network restriction may differ. NULL when
 * out of memory.
 */
char *saas__lv_domain_xml(const struct saas__lv_domain *def);
/* The guest's memory in MiB, as the domain has it: the size's, or the image's minimum if more. */
unsigned int saas__lv_domain_memory(const saas_vm_spec *spec, const struct image *im);

/*
 * Our metadata element, as virDomainGetMetadata gives it: the SSH port, the
 * host key and the owner (both freed by the caller; NULL on failure).
 * SAAS_ENOTFOUND unless all three are there.
 */
int saas__lv_meta_parse(const char *xml, unsigned int *port, char **host_key, char **owner);
int saas__lv_domain_meta(virDomainPtr dom, unsigned int *port, char **host_key, char **owner);
/* Does our metadata element say the domain has the control port? */
bool saas__lv_meta_control(const char *xml);
/* The uid recorded in our metadata element (0: none, a VM not confined). */
unsigned int saas__lv_meta_uid(const char *xml);
unsigned int saas__lv_domain_uid(virDomainPtr dom);
/* The egress mode recorded in our metadata element (saas_vm_network_mode; isolated when unreadable). */
int saas__lv_meta_network(const char *xml);
/*
 * Our metadata element with its egress mode replaced by `mode` (internet or
 * policy), or NULL when it records none (or out of memory). Pure.
 */
char *saas__lv_meta_with_network(const char *xml, int mode);
/*
 * Record a runtime change of a running domain's egress mode in its live
 * metadata, so that an engine that adopts it after a restart loads the rules
 * of the mode it runs under now, not the one it was made with.
 */
int saas__lv_domain_meta_network_set(virDomainPtr dom, int mode);

typedef int (*saas__lv_domain_fn)(struct drv *d, virDomainPtr dom, const char *name, void *ud);
/*
 * Call fn on every domain named prefix... that this state directory owns (its
 * metadata says so: other engines on the host have their own), until fn
 * returns non-zero.
 */
int saas__lv_own_domains(struct drv *d, const char *prefix, saas__lv_domain_fn fn, void *ud);

/* ---- making VMs (boot.c, clone.c) ------------------------------------------------------------ */

/*
 * One VM being made. A cold boot starts its domain from the image's kernel; a
 * clone starts its domain paused with -incoming defer and restores a template's
 * saved state into it. Either way the VM is ready once the engine's SSH session
 * is up. saas__lv_launch_undo() leaves nothing behind.
 */
struct launch {
	struct drv *d;
	const saas_vm_spec *spec;
	const struct image *im;
	const char *host_key;
	bool internet;                   /* a way out (no restrict=on): internet or a policy */
	bool policy;
	const char *tdir;                /* clone: the template's directory (or the snapshot's); remote: its volumes' stem */
	const char *vol;                 /* remote: its overlay volume's stem (NULL: the VM's name) */
	/*
	 * A restore of the snapshot in tdir: its RAM comes whole in the stream
	 * (memory-backend-ram, never a mapped file; x-ignore-shared off).
	 */
	bool snapshot;
	bool template_bad;               /* clone: failed in a way that says the template is broken */
	bool died;                       /* the VM stopped before it answered (a guest dead in early boot) */
	unsigned int uid;                /* its QEMU's own uid (0: not confined), held by the caller */
	char *dir, *overlay;
	virDomainPtr dom;
	unsigned int port;
	saas__ssh *ssh;
	int mem;                         /* enum saas__lv_mem of its domain */
	const char *mem_path;            /* LV_MEM_SHARED, LV_MEM_PRIVATE: the file its QEMU opens */
	bool control;                    /* its domain has the control port (set by saas__lv_launch_prepare) */
	const char *fixups;              /* a clone: which way its fix-ups went, for the log ("the control port", "SSH") */
	bool session_later;              /* a clone made without the engine's SSH session: ssh is NULL, connected on first need */
	bool background;                 /* a template's VM: its waits give up once the engine stops, not at close */
};

/* Should l's launch give up now? The driver closing, or (a template's) the engine stopping. */
static inline bool saas__lv_launch_quit(struct launch *l)
{
	return l->background ? stopping(l->d) : closing(l->d);
}

int saas__lv_launch_prepare(struct launch *l);
int saas__lv_launch_start(struct launch *l);
int saas__lv_launch_wait_ssh(struct launch *l, const struct timespec *t0, int64_t budget_ms);
void saas__lv_launch_blame_console(struct launch *l, int rc);
void saas__lv_launch_undo(struct launch *l);
/* A cold boot, tried twice if the guest stalls or dies in boot. */
int saas__lv_boot_cold(struct launch *l);
/* A clone of the template in l->tdir; on failure l->template_bad says whether to rebuild it. */
int saas__lv_boot_clone(struct launch *l);
/*
 * Spares (spare.c): clones' QEMUs started ahead. saas__lv_take is the driver's
 * vm_take; saas__lv_spare_create makes VM spec->name from the spare a create
 * took under that name (SAAS_OK), or says there is none (1), or fails with
 * everything of it undone (the caller makes the VM the ordinary way).
 * saas__lv_spare_listed: a spare of that name exists (vm_list leaves it out);
 * saas__lv_spare_destroy: destroys it if so (true).
 */
int saas__lv_spares_start(struct drv *d);
void saas__lv_spares_stop(struct drv *d);
/* A VM being made (begin true) or made: no spare is started meanwhile nor for SPARE_HOLD_MS after. */
void saas__lv_spares_busy(struct drv *d, bool begin);
int saas__lv_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size);
int saas__lv_spare_create(struct drv *d, const saas_vm_spec *spec);
bool saas__lv_spare_listed(struct drv *d, const char *name);
bool saas__lv_spare_destroy(struct drv *d, const char *name);
/* Its two halves (clone.c): disk and paused domain; then state, fix-ups and session. at[]: ms since t0. */
int saas__lv_clone_start(struct launch *l, const struct timespec *t0, int64_t at[2]);
int saas__lv_clone_finish(struct launch *l, const struct timespec *t0, int64_t budget, int64_t at[2]);
/* Undo a clone that failed in either half (its console's last words added to the error). */
void saas__lv_clone_undo(struct launch *l, int rc);

/*
 * Confinement's files (uid.c): the directories QEMU must traverse (0711) and
 * the engine's own files made private, at open; a VM's directory and overlay
 * given to its uid; a template's frozen disk made readable by every clone.
 */
int saas__lv_confine_setup(struct drv *d, const char *state_dir, const char *root, bool required);
/*
 * The same under a system libvirtd (d->conn open): checks what the daemon's
 * side shows (a privileged daemon with its DAC driver) and what ours needs (a
 * traversable state directory on a filesystem with ACLs). Not possible: an
 * error when required (uids=FIRST-LAST), else the reason logged.
 */
int saas__lv_confine_system(struct drv *d, const char *state_dir, bool required);
/* A free uid of d->uids that no process on the host runs as (another engine's VMs); caller holds d->mu. */
int saas__lv_uid_take(struct drv *d, unsigned int *uid);
int saas__lv_confine_vm_files(struct launch *l);
/* One more file of a VM's (a disk overlay made while it runs, open as fd) given to its uid; path for errors. */
int saas__lv_confine_vm_fd(struct drv *d, int fd, const char *path, unsigned int uid);
int saas__lv_confine_template(struct drv *d, const char *tdir, const char *disk);
/* The same for a frozen disk the engine holds open (fd): no path is resolved again. */
int saas__lv_confine_template_fd(struct drv *d, const char *tdir, int fd);
/* Who owns a VM's disks: its QEMU's uid under a root engine that confines it, else the engine. */
unsigned int saas__lv_disk_owner(struct drv *d, unsigned int uid);

/* ---- the engine's hands in a VM's files (vmfs.c) --------------------------------------------- */

/* Remove name under the directory parent (a tree: depth levels below the first), never following a link. */
int saas__lv_rm_tree_at(int parent, const char *name, int depth);
/*
 * Is path, as QEMU reports it, one of the VM's own disks: vmdir/disk.qcow2
 * or vmdir/disk-SNAP.qcow2 (SNAP a snapshot's name)? Its name in *name (cap
 * bytes). Pure: nothing is resolved.
 */
bool saas__lv_vm_disk_name(const char *vmdir, const char *path, char *name, size_t cap);
/* Is st a VM's disk as the engine made it: a regular file of owner? Pure. */
bool saas__lv_vm_disk_stat_ok(const struct stat *st, unsigned int owner);
/*
 * The disk QEMU reports at path, opened (read-only, O_NOFOLLOW) into *fd
 * after the checks above, owner its expected owner: SAAS_OK, or
 * SAAS_EBACKEND saying what was refused.
 */
int saas__lv_vm_disk_open(const char *vmdir, const char *path, unsigned int owner, int *fd);
/* A hard link at to of the file open as fd (its inode, not a path): SAAS_OK or SAAS_EIO. */
int saas__lv_link_fd(int fd, const char *to);
/* A new file vmdir/name, 0600, made O_EXCL|O_NOFOLLOW, open read-write in *fd: SAAS_OK or SAAS_EIO. */
int saas__lv_vm_file_create(const char *vmdir, const char *name, int *fd);

/* ---- template memory mapped by clones (memfile.c) -------------------------------------------- */

/* A process holding a memfd as the VM's QEMU uid, so that QEMU can open it by path. */
struct saas__lv_holder {
	pid_t pid;
	int go;                          /* closing it ends the holder */
	char path[48];                   /* /proc/PID/fd/3 */
};

/* A new memfd of bytes (holes), sealable, for a template VM's RAM. */
int saas__lv_memfd_new(uint64_t bytes, int *out);
/* Seal it for good: no write, no shared writable mapping, no hole punched, no resize, no unsealing. */
int saas__lv_memfd_seal(int fd);
/* Does fd carry every one of those seals? */
bool saas__lv_memfd_sealed(int fd);
/* The memfd's bytes into a new file at path (0600, sparse where the memory is). */
int saas__lv_memfd_save(int fd, uint64_t bytes, const char *path);
/* A sealed memfd of the file at path, which must hold exactly bytes. */
int saas__lv_memfd_load(const char *path, uint64_t bytes, int *out);
/*
 * Start a holder of memfd running as uid:gid (uid 0: the engine's own), with
 * nothing else of the engine's; h->path is where QEMU of that uid opens it.
 * Stop it once QEMU has started. saas__lv_holder_stop is idempotent.
 */
int saas__lv_holder_start(struct saas__lv_holder *h, int memfd, uid_t uid, gid_t gid);
void saas__lv_holder_stop(struct saas__lv_holder *h);
/* Can this engine hand QEMU a memfd under QEMU's uid? Why not, in why. */
bool saas__lv_mapped_possible(const struct drv *d, char *why, size_t why_len);
/* The host's MemAvailable in MiB (0 when unknown). */
uint64_t saas__lv_mem_available_mib(void);

/* Default and largest min_free_memory_mb (driver_config). */
#define MIN_FREE_MEMORY_MB_DEFAULT 1024u
#define MIN_FREE_MEMORY_MB_MAX (16u << 20)

/*
 * May a VM of need_mb start on a host with avail_mib available, keeping
 * reserve_mb? SAAS_OK, or SAAS_EBUSY saying so. avail_mib 0 (unknown) passes.
 */
int saas__lv_memory_room(uint64_t avail_mib, unsigned int need_mb, unsigned int reserve_mb);

/*
 * The same for a VM of spec's shape about to start on this driver's host:
 * checked on the machine the engine runs on only (a remote host's memory is
 * its placement's business, saas/hosts.h).
 */
int saas__lv_memory_check(struct drv *d, const saas_vm_spec *spec);

/* ---- QEMU's monitor (qmp.c) ------------------------------------------------------------------ */

int saas__lv_qmp(virDomainPtr dom, const char *cmd, int fd, json_t **ret);
int saas__lv_qmp_getfd(virDomainPtr dom, const char *fdname, int fd);
int saas__lv_qmp_migration_wait(struct drv *d, virDomainPtr dom, int64_t timeout_ms, int64_t *bytes);

/* ---- templates (template.c) ------------------------------------------------------------------ */

/*
 * Save a paused VM's memory and device state to path (a template's, a
 * snapshot's); ignore_shared: leave out RAM mapped shared (x-ignore-shared).
 * *bytes (may be NULL): the RAM bytes the stream carried.
 */
int saas__lv_state_save(struct drv *d, virDomainPtr dom, const char *path, bool ignore_shared, int64_t *bytes);

/* The key of the template for spec and im ("" when out of memory). */
void saas__lv_template_key(struct drv *d, const saas_vm_spec *spec, const struct image *im, char key[33]);
struct tmpl *saas__lv_template_get_locked(struct drv *d, const char *key);
/* Ask for the build of t (not ready); why it cannot serve this create, and at which log level to say it. */
const char *saas__lv_template_request_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec,
                                             const struct image *im, int *level);
void saas__lv_template_break(struct drv *d, const char *key);
/* Remote: the template of key found complete on the host, at stem (NULL: not there after all, look again). */
void saas__lv_template_remote_ready(struct drv *d, const char *key, const char *stem);
/*
 * The sealed RAM of the mapped template in tdir, loaded from its "ram" file
 * on first use, as a new descriptor the caller closes: SAAS_OK;
 * SAAS_ENOTFOUND when the template is a loaded one; an error otherwise
 * (*broken: the template's file is bad).
 */
int saas__lv_template_ram(struct drv *d, const char *tdir, uint64_t bytes, int *fd, bool *broken);
/* What a previous engine on this state directory left of template builds. */
void saas__lv_templates_cleanup(struct drv *d);
/* The driver's template_list slot: the ready templates the host has, then those building or failed. */
int saas__lv_template_list(void *ctx, saas_template_fn fn, void *userdata);
/*
 * The templates' parts of each VM host's table (host.h), local and remote:
 * template VMs left by an interrupted build, whether a new entry is ready,
 * a ready one's place, the build said and marked, a broken one deleted, the
 * ready ones listed.
 */
void saas__lv_template_vms_destroy(struct drv *d);
void saas__lv_template_known_local(struct drv *d, struct tmpl *t);
char *saas__lv_template_place_local(struct drv *d, const struct tmpl *t);
char *saas__lv_template_place_remote(struct drv *d, const struct tmpl *t);
void saas__lv_template_build_local(struct tmpl_job *job);
void saas__lv_template_build_remote(struct tmpl_job *job);
void saas__lv_template_break_local(struct drv *d, const char *key);
int saas__lv_template_list_local(struct drv *d, saas_template_fn fn, void *userdata, int *stop);
int saas__lv_template_list_remote(struct drv *d, saas_template_fn fn, void *userdata, int *stop);

/* ---- snapshots (snapshot.c) ------------------------------------------------------------------ */

/*
 * The format of a snapshot's description. 1: the first, whose ram_block
 * is not to be trusted (read from a column of HMP's `info ramblock`); its
 * stream may hold QEMU's own block "pc.ram", from before every VM's RAM was
 * the backend MEM_ID. 2: ram_block is the block its stream holds. Both are
 * read; a restore refuses a snapshot whose RAM block is not MEM_ID, reading
 * a format 1 stream for it (saas__lv_snapshot_check, saas__lv_state_ram_block).
 */
#define SNAPSHOT_FORMAT 2
#define SNAPSHOT_FORMAT_MIN 1
#define SNAPSHOT_NAME_MAX 63
#define SNAPSHOT_CHAIN_MAX 64            /* backing files followed from one disk, at most */

/* A snapshot's description (its snapshot.json). */
struct saas__lv_snapshot {
	unsigned int format;             /* as read (SNAPSHOT_FORMAT_MIN..SNAPSHOT_FORMAT); written: SNAPSHOT_FORMAT */
	char source[SAAS_ID_MAX + 1];    /* the VM it was taken of */
	char image[64];
	char *host_key;                  /* the guest's, as its memory holds it (a rebuilt image has another) */
	unsigned int vcpus, memory_mib;  /* memory as the domain had it */
	unsigned int disk_gb;            /* 0: no disk (an initramfs image) */
	char ram_block[64];              /* the guest RAM's block name in the migration stream */
	int64_t state_bytes, disk_bytes; /* on storage */
	char **chain;                    /* the frozen disk's backing files, nearest first (NULL-terminated; may be NULL) */
	bool control;                    /* the VM had the control port: its restores have it too ("control", absent: no) */
};

/* Is name one the core may choose (1 to SNAPSHOT_NAME_MAX of [a-z0-9-])? */
bool saas__lv_snapshot_name_ok(const char *name);
/* The description as JSON text (free with free()), and read back (SAAS_EINVAL saying what is wrong). Pure. */
char *saas__lv_snapshot_json(const struct saas__lv_snapshot *s);
int saas__lv_snapshot_parse(const char *text, struct saas__lv_snapshot *s);
void saas__lv_snapshot_clear(struct saas__lv_snapshot *s);
/*
 * Can a VM of this driver load snapshot snap (described by s)? SAAS_OK, or
 * SAAS_ENOTSUP saying why not (one saved before every VM's RAM had the
 * block MEM_ID). Pure.
 */
int saas__lv_snapshot_check(const struct saas__lv_snapshot *s, const char *snap);
/* How much of a migration stream's head is searched for its RAM block's name. */
#define STATE_HEAD_MAX 65536
/*
 * The guest RAM's block that the migration stream at path holds: MEM_ID or
 * "pc.ram", found framed as QEMU writes it in the stream's first
 * STATE_HEAD_MAX bytes; "" when neither is there.
 */
void saas__lv_state_ram_block(const char *path, char *out, size_t len);

/* The driver table's version 4 slots. */
int saas__lv_vm_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes);
int saas__lv_vm_restore(void *ctx, const saas_vm_spec *spec, const char *snap);
int saas__lv_snapshot_delete(void *ctx, const char *snap);
int saas__lv_snapshot_list(void *ctx, saas_name_fn fn, void *userdata);
/*
 * What a fork or a pause cut short left of snapshot snap (its directory
 * snap.tmp), of VM vm (NULL: not known): with on_overlay (the VM runs on the
 * overlay the fork made, whose header names the snapshot's disk) the disk is
 * kept under the snapshot's name, marked deleted, to be collected once
 * nothing backs onto it; otherwise the directory and that overlay go.
 */
void saas__lv_snapshot_left(struct drv *d, const char *snap, const char *vm, bool on_overlay);
/*
 * At open: half-written snapshots recovered (their VM resumed if they left it
 * paused; see saas__lv_snapshot_left); deleted ones nobody uses any more collected.
 */
void saas__lv_snapshots_cleanup(struct drv *d);
/* Remove the snapshots whose deletion was asked and whose disk no VM or snapshot backs onto any more. */
void saas__lv_snapshots_collect(struct drv *d);

/* ---- a remote VM host (remote.c) ------------------------------------------------------------- */

/*
 * A dead host is told by libvirt's keepalive: a probe every INTERVAL
 * seconds, the connection closed (every call on it failing) after COUNT
 * unanswered, so within about INTERVAL * (COUNT + 1) seconds.
 */
#define KEEPALIVE_INTERVAL_S 2
#define KEEPALIVE_COUNT 2
#define REMOTE_CONNECT_TIMEOUT_MS 5000   /* opening a connection to a host */
#define UPLOAD_WAIT_MS (5 * 60 * 1000)   /* another engine's upload of one image build, at most */
/* A guest's SSH forward on a remote host: a port of this range (below Linux's ephemeral ports). */
#define REMOTE_PORT_FIRST 20000u
#define REMOTE_PORT_COUNT 12000u

/* Does uri name a host (qemu+tcp://HOST/system), i.e. a VM host that may not be this machine? Pure. */
bool saas__lv_uri_remote(const char *uri);
/* Open uri within REMOTE_CONNECT_TIMEOUT_MS, with libvirt's keepalive on. */
int saas__lv_connect_remote(const char *uri, virConnectPtr *out);
/* The driver table's host_info slot. */
int saas__lv_host_info(void *ctx, saas_driver_host *out);
/* The host's storage pool (d->spool_name at d->spool_dir), made and started if missing. */
int saas__lv_spool_open(struct drv *d);
/* im's files on the host (im->host_*), uploaded once per build by one engine of all that share the pool. */
int saas__lv_image_remote(struct drv *d, struct image *im);
/* VM vm's overlay volume on base (a host path) of disk_gb GiB; *path (freed by the caller) on the host. */
int saas__lv_overlay_remote(struct drv *d, const char *vm, const char *base, unsigned int disk_gb, char **path);
/* VM vm's overlay volume deleted, if there is one. */
void saas__lv_overlay_remote_delete(struct drv *d, const char *vm);

/*
 * Templates on a remote host. A template's saved state (libvirt's save
 * image, virDomainSaveFlags), its frozen disk and its description are
 * volumes of the pool named STEM.state, STEM.qcow2 and STEM.json, where STEM
 * is TPL_PREFIX KEY "-" GEN (GEN: random, per build, so that a build never
 * writes over a template clones may use); STEM.ready, made last, says the
 * template is complete. Clones are restored on the host: QEMU listens for
 * the migration stream on the host's address and the engine pours the
 * state volume's stream into it.
 */

/* libvirt's save image header (qemu_saveimage.h), as it is on disk. */
#define LV_SAVE_HEADER_BYTES 92u
/*
 * Where QEMU's migration stream starts in a save image whose first bytes
 * are head (n of them, at least LV_SAVE_HEADER_BYTES): SAAS_OK and *offset;
 * SAAS_EINVAL saying why it is not a complete, uncompressed save image of
 * a version this code reads. Pure.
 */
int saas__lv_save_stream_offset(const unsigned char *head, size_t n, uint64_t *offset);
/* Is name one of a remote template's volumes of key (TPL_PREFIX KEY "-" GEN ".suffix")? Its stem in stem. Pure. */
bool saas__lv_tpl_volume(const char *name, const char *key, const char *suffix, char stem[TPL_STEM_MAX]);
/* The lease name of the template of key on the host tagged host ("template:HOST:KEY"); false if too long. Pure. */
bool saas__lv_tpl_lease_name(char *out, size_t len, const char *host, const char *key);
/* The complete template of key on the host: 1 (its stem in stem), 0 none, or an error. */
int saas__lv_tpl_remote_find(struct drv *d, const char *key, char stem[TPL_STEM_MAX]);
/* Build the template of key on the host (template.c's builder for a remote host): see template.c. */
struct saas__lv_tpl_job {
	char key[33];
	char image[64];
	unsigned int vcpus, memory_mb, disk_gb;
};
/*
 * SAAS_OK and *stem when it is ready (built here, or found built);
 * SAAS_EBUSY when another engine holds its lease (it builds it).
 */
int saas__lv_tpl_remote_build(struct drv *d, const struct saas__lv_tpl_job *job, char stem[TPL_STEM_MAX]);
/* The template VM of a job's shape (template.c): its spec, isolated, and its name (64 bytes) after the key. */
void saas__lv_tpl_spec(const struct saas__lv_tpl_job *job, saas_vm_spec *spec, char name[64]);
/* A remote template that failed its clones: its ready mark goes (its volumes are pruned once nothing uses them). */
void saas__lv_tpl_remote_break(struct drv *d, const char *key);
/* The template's disk volume's path on the host (freed by the caller). */
int saas__lv_tpl_remote_disk(struct drv *d, const char *stem, char **path);
/* Pour the template's state into the clone's QEMU, paused with -incoming defer; then it runs. */
int saas__lv_tpl_remote_restore(struct launch *l, const struct timespec *t0, int64_t budget_ms);
/* template_list's part of a remote host: its complete templates of this owner. */
int saas__lv_tpl_remote_list(struct drv *d, saas_template_fn fn, void *userdata, int *stop);

/* ---- the driver table's calls other rooms make (libvirt.c) ------------------------------------ */

int saas__lv_vm_destroy(void *ctx, const char *name);
/*
 * The state of VM name (SAAS_VM_*); a running one of this owner that the
 * registry lacks (made by another engine of the cluster, or before a
 * restart) is added to it. An error when the host cannot tell.
 */
int saas__lv_vm_adopt(struct drv *d, const char *name, int *state);
/*
 * The egress a new VM gets from spec (*net: its own, or the driver's default
 * in *fallback), checked and admitted: a policy only where per-VM egress is,
 * an internet guest only with the guard in place.
 */
int saas__lv_net_admit(struct drv *d, const saas_vm_spec *spec, saas_vm_network *fallback,
                       const saas_vm_network **net);

#endif
