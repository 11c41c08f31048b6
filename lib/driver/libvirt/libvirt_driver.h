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
 * One file per concern, as libvirt splits its own QEMU driver, each with
 * its header (what the other rooms call); this header holds what they all
 * share: the constants, struct drv and the structs of VMs, images and
 * templates, and the helpers.
 *   libvirt.c     the driver table: open/close (drv_free), create/destroy/
 *                 state/list and the guest calls; the event loop, the
 *                 console keeper, helpers
 *   host.h        where QEMU runs, as one table (d->host):
 *   host_local.c    libvirt on this machine: open's local steps, overlays
 *                   with qemu-img, loopback ports, restores from a file
 *   host_remote.c   a VM host reached by a remote URI: the bounded
 *                   connection, its storage pool (the spool) and volumes,
 *                   host_info, templates kept on the host (host_remote.h)
 *   channel.c     the way to a VM's control port: its socket here, or on a
 *                 remote host its channel through libvirt (channel.h)
 *   conf.c        driver_config, the engine's key pair, the embedded root
 *                 and its qemu.conf (conf.h)
 *   guard.c       the network policy at open and the nftables guard (guard.h)
 *   egress.c      per-VM egress: nftables keyed on each QEMU's uid (egress.h)
 *   resolver.c    the DNS resolver of policy VMs, one thread (egress.h)
 *   dns.c         DNS messages, read as hostile input (dns.h)
 *   image.c       image manifests, reloaded when an image is rebuilt; their
 *                 files staged where confined QEMUs can reach them (image.h)
 *   vm.c          the registry of running VMs and their SSH sessions (vm.h)
 *   uid.c         each VM's own QEMU uid: the range, the allocator, the
 *                 files (uid.h)
 *   vmfs.c        the engine's hands in a VM's files: fds, never paths a VM
 *                 can redirect (the rule below; vmfs.h)
 *   cgroup.c      each VM's host limits: memory and pids cgroups, what the
 *                 host has (cgroup.h)
 *   reap.c        the embedded driver's QEMUs reaped the moment they exit
 *                 (a child subreaper, a pidfd each; reap.h)
 *   domain.c      domain XML and the metadata read back from running
 *                 domains (domain.h)
 *   boot.c        making a VM: its directory, overlay, domain; cold boots
 *                 (launch.h)
 *   clone.c       a VM restored from a template's saved state (launch.h)
 *   qmp.c         QEMU monitor commands (migration to and from a file; qmp.h)
 *   memfile.c     memory mapped by clones and fork children: the memfd, its
 *                 seals, the holder (memfile.h)
 *   migstream.c   a fork's migration stream split: its RAM into the memfd
 *                 (migstream.h)
 *   template.c    templates: keys, the background builder, pruning (template.h)
 *   spare.c       clones' QEMUs started ahead for vm_take (spare.h; one
 *                 spare: spare_item.h)
 *   spare_policy.c  how many: a pure function of the creates lately asked
 *                 for and the memory budget (spare_policy.h)
 *   snapshot.c    snapshots of running VMs (fork, pause) and VMs restored
 *                 from them (snapshot.h)
 *   console.c     the console log's bounds (console.h)
 *   stats.c       vm_sample: a VM's CPU, memory and disk for the engine's
 *                 metrics, as the host sees them
 *   rpc.c         one libvirt call at a time on a VM host's connection (a
 *                 libvirt bug, rpc.h): the driver's libvirt names stand for
 *                 its wrappers
 * The guest transports the driver calls are lib/transport's: SSH, and the
 * control port (control.c, control_files.c, control_exec.c: a clone's
 * fix-ups, files and commands without SSH) with the VM's directory as the
 * engine trusts it (vmdir.c), or on a remote host through libvirt (channel.c).
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
 *    byte is sent (lib/transport/control.c);
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
#include "driver/libvirt/cgroup.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/rpc.h"
#include "driver/libvirt/spare.h"
#include "driver/libvirt/uid.h"
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
/* disk_sweep_grace: how old an unused disk volume on a VM host is before the sweep deletes it (host_remote_snap.c). */
#define DISK_SWEEP_GRACE_S 3600
#define DISK_SWEEP_GRACE_MAX_S 86400
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
#define TEMPLATE_CODE_TIMEOUT_MS 300000    /* an image's code server warm (GET /health 200), before the save */
#define SPARES_AUTO_FLOOR 1                /* spares=auto (the default): at least this many started ahead (spare.c) */
#define SPARES_AUTO_MAX 32                 /* and at most this many, within spare_memory_mb */
#define SPARES_MAX 32                      /* spares=N: at most this */
#define SPARE_IDLE_S_DEFAULT 120           /* spare_idle: a quiet spell, no create for this long (spare_policy.c) */
#define SPARE_IDLE_MAX_S 86400             /* spare_idle=SECONDS: at most this */
#define SPARE_IDLE_COUNT_DEFAULT 16        /* spare_idle_count: spares=auto keeps this many from a quiet spell on */
#define SPARE_COST_MIB 64                  /* what one spare is reckoned to hold: a paused QEMU, ~42 MiB measured */
#define SPARE_MEMORY_MB_MAX 65536          /* spare_memory_mb=MIB: at most this; auto: spare_policy.c */
#define SPARE_MAKE_MS_FIRST 1500           /* a spare's make time until one was measured */
#define SPARE_WARM_TIMEOUT_MS 60000        /* a spare's code server warm-up (template_code.c), at most */
#define SPARE_WARM_MIB 64                  /* a warmed spare holds more: its TCG code, the pages it wrote (~63 MiB) */
#define SPARE_HOLD_MS 2000                 /* after a lone create, no spare made this soon (spare_policy.c) */
#define SPARE_CHECK_MS 1000                /* the spare thread looks again at least this often */
/*
 * A spare on a host other engines share stands for this long (its mark,
 * domain.h): their listings leave it out until then, so that their orphan
 * sweeps do not take it for a VM no sandbox owns. Its maker replaces it
 * SPARE_LEASE_MARGIN_MS before the end; an engine that died leaves its
 * spares to the others' sweeps once the time has passed.
 */
#define SPARE_LEASE_MS (30 * 60 * 1000)
#define SPARE_LEASE_MARGIN_MS (2 * 60 * 1000)
#define SPARE_BACKOFF_FIRST_MS 1000
#define SPARE_BACKOFF_MAX_MS 60000
#define LAUNCH_START_TRIES 3                /* a domain start that fails for the moment: tried this often in all, */
#define LAUNCH_START_RETRY_MS 100           /* this long apart, doubling (boot.c, saas__lv_virt_transient) */
#define TEMPLATE_SAVE_STALL_MS 120000      /* a state save (template, pause, fork) with no progress this long fails */
/*
 * A state save's file holds at most the guest's RAM and this much more (its
 * devices' state, video memory, the stream's page headers): past it the save
 * is cancelled (qmp.c). Checked at each poll, at most 100 ms apart.
 */
#define STATE_MARGIN_MIB 256
/*
 * A mapped template's RAM stays in memory for as long as the template does,
 * and can grow to the guest's whole RAM (clones reading never-written pages
 * fill them in): one is built only while the host has that much available
 * and this much more; else the template is built loaded.
 */
#define MAPPED_RESERVE_MIB 2048u
/*
 * A template on a remote VM host (host_remote_tpl.c) is built once across the
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
#define SNAPSHOT_GONE_NAME 64              /* a snapshot's name (SNAPSHOT_NAME_MAX) and its NUL */
#define SNAPSHOTS_GONE_MAX 4096            /* a VM host's snapshots kept to delete once it answers, at most */
#define SNAPSHOTS_GONE_RETRY_MS 15000      /* and tried again this often */
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

/* ---- shared state ---------------------------------------------------------------------------- */

struct image {
	char name[64];
	char *dir;
	char *kernel, *initrd, *disk;    /* absolute paths; disk NULL for initramfs images */
	uint64_t disk_bytes;             /* the disk's virtual size (its filesystem's), 0 if the manifest lacks it */
	char *boot_args;
	char *host_key;                  /* "ssh-ed25519 AAAA..." */
	char *recipe;                    /* what the image was built from (its recipe hash), for template keys */
	/* Remote (host_remote.c): the files as the VM host's QEMU sees them, once uploaded (under d->upload_mu). */
	char *host_kernel, *host_initrd, *host_disk;
	unsigned int min_memory_mib;
	bool control;                    /* its guest serves the control port (manifest "control_port", lib/transport/control.h) */
	unsigned int code_port;          /* its guest's code server listens there (manifest "code_port"); 0: none */
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
	 * Its control port takes one user at a time: a file transfer, a
	 * command or a port connection (vm.c, saas__lv_port_take). The fields after ctl_free_at belong
	 * to the user that has it.
	 */
	pthread_mutex_t ctl_mu;
	pthread_cond_t ctl_cv;           /* signalled when ctl_user goes back to PORT_FREE (CLOCK_MONOTONIC) */
	int ctl_user;                    /* under ctl_mu: enum port_user */
	int64_t ctl_free_at;             /* under ctl_mu: when it last went back to PORT_FREE (ms, CLOCK_MONOTONIC) */
	bool ctl_starting;               /* under ctl_mu: a command sent over the port has not started yet */
	int files;                       /* its helper serves files (1), does not (-1), not asked (0) */
	/* its helper runs commands (1; plain ones with no shell 2, or not 3), does not (-1), not asked (0) */
	int execs;
	int conns;                       /* its helper opens port connections (1), does not (-1), not asked (0) */
	struct saas__ctl *ctl;           /* the connection (lib/transport/control.h), or NULL */
	bool relayed;                    /* atomic: a port connection went over the control port (said once) */
	bool quiet_wait;                 /* atomic: a relay's thread waits for the port's quiet to log in (guest.c) */
	bool gone;                       /* atomic: being destroyed: no login starts for it, no quiet is waited for */
	int port_fails;                  /* remote: the channel's opens failed in a row (guest.c, port_opened) */
	int64_t port_retry_at;           /* remote: not asked for again before (saas__now_ms) */
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
	int64_t asked_ms;                /* when a create last asked for it (0: not since open, nor remembered from before */
	                                 /* it: spare_asked.c): spares go to the latest */
	int64_t remembered_ms;           /* its asked_ms as STATE/libvirt/asked.json last said it (0: not in it) */
	int64_t spare_retry_at_ms;       /* a spare of it failed: none made for it before this (spare.c) */
	unsigned int spare_backoff_ms;   /* the wait after its spares' next failure (0: SPARE_BACKOFF_FIRST_MS) */
	struct tmpl *next;
};

/*
 * A fork's snapshot the core said is coming (snapshot_expect, snapshot.c):
 * restores of it wait until its directory is in place (published) or the
 * fork is over.
 */
struct forking {
	char name[64];
	bool published;                  /* in place, its RAM's memory made: a child's VM may start on it */
	struct forking *next;
};

/* A fork's snapshot's sealed RAM, which its children map (snapshot.c): held from the fork to the snapshot's delete. */
struct snapram {
	char name[64];
	int memfd;                       /* -1: not loaded (yet) */
	/*
	 * Its RAM is being split off its stream into memfd, not sealed yet, after
	 * the parent runs on (snapshot.c): a child starts its QEMU on it meanwhile
	 * and waits for the end (snaps_cond) before its state goes in.
	 */
	bool splitting;
	bool joinable;                   /* thread, the split's, is to be joined (snapshot delete, close) */
	pthread_t thread;
	struct snapram *next;
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
	struct saas__lv_confine cf;      /* each VM's QEMU under its own uid (uid.h) */
	char *root;                      /* the embedded driver's root, or NULL */
	int reap;                        /* enum reapcfg, from driver_config */
	bool reaping;                    /* this engine holds the process's reaper (reap.h) */
	int reap_wd;                     /* its watch of ROOT/run/qemu's pidfiles, or -1 */
	int reap_probe_wd;               /* its watch of ROOT/lib/qemu for capability probes, or -1 */
	unsigned int cpu_milli;          /* from cpu_limit */
	unsigned int min_free_memory_mb; /* from driver_config: local VMs start only with it and their memory available */
	struct saas__lv_cg cg;           /* the host's cgroup hierarchies */
	char cg_group[32];               /* our pids cgroups' parent: aas-HASH of the state directory */
	bool lim_cpu, lim_memory, lim_pids, lim_io; /* the limits this host gives VMs (cgroup.c) */
	char guard_why[512];             /* why not, when !guard */
	struct saas__lv_egress *egress;  /* per-VM egress by uid (egress.c); NULL: only the guard, by group */
	char egress_why[512];            /* why not, when !egress */
	struct saas__lv_ehost *ehost;    /* a VM host's: its guests' egress through this server (egress_host.h) */
	char *dns_upstream;              /* driver option dns_upstream, or NULL */
	char *nft_helper;                /* driver option nft_helper, or NULL */
	const char *nft;                 /* the aas-nft helper when it loads our tables; NULL: nft (saas__lv_nft) */
	bool internet;                   /* the policy of a spec that leaves it to the driver */
	int boot_timeout_ms;
	int disk_sweep_grace_ms;         /* driver option disk_sweep_grace (a VM host's) */
	bool templates;                  /* make sandboxes as clones of templates (driver option templates=on) */
	/*
	 * control_port=off: clones' fix-ups go over SSH even where the port is
	 * there (it stays in the domains: a template is the same either way).
	 */
	bool control_port;
	/*
	 * control_files=off: files go over SFTP even where the guest's helper
	 * serves them over the port (lib/transport/control_files.c).
	 */
	bool control_files;
	/*
	 * control_exec=off: a clone returns once its SSH session is up, and every
	 * command goes over SSH (lib/transport/control_exec.c says what it changes).
	 */
	bool control_exec;
	/* spare_warm=off: a spare's guest first runs when a create takes it (spare.c, saas__lv_clone_warm). */
	bool spare_warm;
	/* cpu_readback=properties: domains name libvirt's QEMU, not emulator (emulator.h). */
	bool cpu_words;
	/*
	 * Embedded: the QEMU binary as domains name it, a link in the root whose
	 * capabilities make libvirt's read of a started guest's CPU cheap
	 * (emulator.h); NULL: libvirt's own choice. Set at open, then read-only.
	 */
	char *emulator;
	bool mapped;                     /* templates' RAM mapped by clones (template_memory=mapped, and possible) */
	char mapped_why[256];            /* why not, when template_memory=mapped and !mapped */
	virConnectPtr conn;              /* remote: replaced when it died (host->check); read with saas__lv_conn */
	/*
	 * Where QEMU runs (host.h): this machine, or a remote VM host
	 * (host_remote.c), where nothing of the engine's filesystem is QEMU's and
	 * images and overlays are volumes of a storage pool.
	 */
	const struct saas__lv_host *host;
	char *listen;                    /* where guests' SSH forwards listen and the engine connects */
	char *spool_name, *spool_dir;    /* remote: the host's storage pool (driver options pool, pool_dir) */
	/*
	 * Remote: the pool's handle on conn, under conn_mu; looked up again on a
	 * new conn by saas__lv_vmhost_pool, the only way to it.
	 */
	virStoragePoolPtr spool;
	pthread_mutex_t upload_mu;       /* one image upload at a time */
	pthread_mutex_t conn_mu;         /* reconnecting; spool */
	/*
	 * Handles on dead connections (a connection, or a pool of one) that other
	 * threads may still hold: kept until close. One of the two in each.
	 */
	struct saas__lv_retired {
		virConnectPtr conn;
		virStoragePoolPtr spool;
	} *retired;
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
	struct saas__lv_spares spare;    /* clones' QEMUs started ahead (spare.h) */
	pthread_cond_t keeper_cond;      /* with mu: signalled at close, and when the last relay ends */
	int relays;                      /* under mu: port connections relayed over control ports (guest.c) */
	/*
	 * Snapshots (snapshot.c): restores hold it shared while they read a
	 * snapshot's files; deleting and collecting snapshots hold it exclusive.
	 */
	pthread_rwlock_t snaps_lock;
	struct snapram *snaprams;        /* under mu */
	struct forking *forkings;        /* under mu: forks' snapshots said to be coming (snapshot_expect) */
	pthread_cond_t snaps_cond;       /* with mu: a split of a fork's RAM ended, or a fork's snapshot came or went */
	/* Under mu: a VM host's snapshots whose delete it did not answer, tried again by the keeper. */
	char (*snaps_gone)[SNAPSHOT_GONE_NAME];
	size_t n_snaps_gone;
	int64_t snaps_gone_next_ms;      /* under mu: not tried again before this (a dead host's connect takes seconds) */
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

static inline bool closing(struct drv *d)
{
	return __atomic_load_n(&d->closing, __ATOMIC_ACQUIRE) != 0;
}

/*
 * The driver's connection, as every reader takes it: on a remote host the
 * check (host->check) replaces one the keepalive closed while other threads
 * read it. Which call is made on the one read stays theirs (a retired one is
 * kept until close).
 */
static inline virConnectPtr saas__lv_conn(struct drv *d)
{
	return __atomic_load_n(&d->conn, __ATOMIC_ACQUIRE);
}

/* The engine is stopping, or the driver closing: the driver's own work (a template build) gives up. */
static inline bool stopping(struct drv *d)
{
	return closing(d) || (d->stopping && __atomic_load_n(d->stopping, __ATOMIC_ACQUIRE) != 0);
}

/* ---- the driver table's calls other rooms make (libvirt.c) ------------------------------------ */

int saas__lv_vm_destroy(void *ctx, const char *name);
/*
 * A VM host's guest: its egress channel opened through libvirt and given to
 * this server's end (d->ehost), which holds it for the VM's life. SAAS_EBUSY
 * when another server of the cluster holds it.
 */
int saas__lv_egress_attach(struct drv *d, const char *name);
/*
 * The state of VM name (SAAS_VM_*); a running one of this owner that the
 * registry lacks (made by another engine of the cluster, or before a
 * restart) is added to it. An error when the host cannot tell.
 */
int saas__lv_vm_adopt(struct drv *d, const char *name, int *state);
/* vm_sample (stats.c): a VM's CPU time, memory and disk as libvirt sees them. */
int saas__lv_vm_sample(void *ctx, const char *name, saas_driver_sample *out);
/*
 * The egress a new VM gets from spec (*net: its own, or the driver's default
 * in *fallback), checked and admitted: a policy only where per-VM egress is,
 * an internet guest only with the guard in place.
 */
int saas__lv_net_admit(struct drv *d, const saas_vm_spec *spec, saas_vm_network *fallback,
                       const saas_vm_network **net);

#endif
