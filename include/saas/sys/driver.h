/*
 * libsaas: the VM driver table, for backend authors.
 *
 * A driver makes and unmakes virtual machines and reaches into them (commands,
 * files, ports). It stays thin: the core validates every argument, enforces
 * tenancy, runs the lifecycle state machine, caps output and bills. A slot a
 * driver does not implement is NULL and the core answers SAAS_ENOTSUP.
 *
 * Stable within a minor release only.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_SYS_DRIVER_H
#define SAAS_SYS_DRIVER_H

#include "../common.h"
#include "../engine.h"
#include "../files.h"
#include "../pty.h"
#include "error.h"

SAAS_BEGIN_DECLS

/**
 * Version of struct saas_driver this header describes. History:
 * 1 the VM and guest calls; 2 port_open and the rest of the guest calls;
 * 3 terminals (pty_*); 4 snapshots (fork, pause, resume); 5 template_list;
 * 6 host_info (VM hosts); 7 saas_driver_env.lease (work done once across the
 * engines that share a store, such as a template built once per VM host);
 * 8 vm_take (VMs started ahead of the creates that take them); 9
 * saas_vm_network.account (whose VM a policy is for) and
 * saas_driver_env.stopping; 10 vm_sample (a VM's CPU, memory and disk); 11 file_mkdir,
 * file_remove, file_rename; 12 saas_driver_pty.cwd and .env (a terminal's directory and
 * environment); 13 snapshot_scan (the snapshots a VM host's storage holds, for
 * the core's sweep of those no sandbox names); 14 saas_driver_host.spare_mb (what
 * VMs started ahead on a VM host hold, which placement leaves to them); 15
 * saas_driver_exec.started (the moment the guest runs a command); 16
 * snapshot_expect (a fork's children begun while its snapshot is taken).
 */
#define SAAS_DRIVER_VERSION 16

/**
 * A lease in the store the engines share, for work a driver must do once
 * across all of them (since version 7). take 1: take `name` for ttl_ms, or
 * renew it if this engine holds it; take 0: let it go. Returns 1 held by
 * this engine (taken or renewed), 0 held by another live engine (take 0:
 * always 0), or a negative SAAS_E* code. A lease not renewed runs out after
 * ttl_ms: an engine that died while holding one gives it up within that time.
 * Names are at most 127 bytes; the core prefixes nothing, so a driver chooses
 * names of its own kind ("template:HOST:KEY"). May be called from any thread.
 */
typedef int (*saas_driver_lease_fn)(void *userdata, const char *name, int64_t ttl_ms, int take);

/** What the engine hands a driver when opening it. Valid until close. */
typedef struct {
	const char *state_dir;     /**< The engine's state directory; a driver keeps its files under STATE/<driver name>/. */
	const char *config;        /**< The engine's driver_config, or NULL. */
	saas_log_fn log;           /**< Never NULL (a no-op when the caller set none). */
	void *log_userdata;
	saas_clock_fn clock;       /**< Never NULL. */
	void *clock_userdata;
	/**
	 * Version 7: the store's leases (saas_driver_lease_fn), or NULL when this
	 * engine is the only one (a store nobody shares): then whatever the
	 * driver would take is its own already.
	 */
	saas_driver_lease_fn lease;
	void *lease_userdata;
	/**
	 * Version 9: read with __atomic_load_n; once non-zero the engine is
	 * stopping (saas_engine_stop, or its free has begun): work the driver
	 * does on its own behalf, such as building a template, gives up at once
	 * and destroys its VMs. Calls in flight go on until close. Never NULL.
	 */
	const int *stopping;
} saas_driver_env;

/** Egress modes (docs/sandboxes.md, "Network policy"). */
typedef enum {
	SAAS_NET_ISOLATED = 0,     /**< No connection out, no name resolved. */
	SAAS_NET_INTERNET = 1,     /**< Outbound to the internet; the host's own services and private ranges never. */
	SAAS_NET_POLICY = 2        /**< Only what `allow` names, less what `deny` names; never more than INTERNET. */
} saas_vm_network_mode;

/**
 * An egress policy as a driver enforces it. Rules are validated and
 * normalised by the core before a driver sees them: a lowercase domain name
 * ("example.com"), a wildcard ("*.example.com": every name below it, not the
 * name itself), a CIDR in canonical form ("203.0.113.0/24", "2001:db8::/32";
 * a bare address is a /32 or /128), or "*" (every destination INTERNET allows).
 * A destination in both lists is denied.
 */
typedef struct saas_vm_network {
	int mode;                  /**< saas_vm_network_mode */
	const char *const *allow;  /**< POLICY: NULL-terminated rules; NULL is empty. */
	const char *const *deny;   /**< POLICY: NULL-terminated rules; NULL is empty. */
	/**
	 * Version 9: the account whose sandbox the VM is, so that a driver can
	 * share what its VMs use in common (a policy VM's pending name lookups)
	 * by account rather than by VM, and one account's many VMs cannot take
	 * all of it. The core always sets it; NULL (a caller that predates it):
	 * the VM counts as an account of its own.
	 */
	const char *account;
} saas_vm_network;

/**
 * What a driver counted of a VM's egress since the VM was made, or since the
 * driver opened if later: a driver need keep no counts across restarts. The
 * core records them in the store and adds what earlier drivers counted.
 */
typedef struct {
	int64_t denied_connections; /**< Connection attempts refused by policy (or the host guard). */
	int64_t denied_lookups;     /**< Name lookups refused by policy (never sent upstream). */
} saas_vm_network_stats;

/** A VM to make. */
typedef struct {
	const char *name;          /**< The sandbox id; also the hostname. The driver names its VM after it. */
	const char *image;         /**< Image name. */
	unsigned int vcpus;
	unsigned int memory_mb;
	unsigned int disk_gb;
	/**
	 * Egress policy, or NULL for the driver's default. A driver that cannot give
	 * the policy safely answers SAAS_ENOTSUP, never something weaker.
	 */
	const struct saas_vm_network *network;
} saas_vm_spec;

/** The state of a VM as the driver sees it. */
typedef enum {
	SAAS_VM_ABSENT = 0,        /**< No such VM. */
	SAAS_VM_RUNNING = 1,
	SAAS_VM_STOPPED = 2        /**< Exists but does not run (crashed, shut off). */
} saas_vm_state;

/** Output streams of an execution. */
enum { SAAS_STREAM_STDOUT = 1, SAAS_STREAM_STDERR = 2 };

/**
 * Receives a command's output as it arrives. The core caps and stores it; the
 * driver keeps reading (so the command never blocks on a full pipe) and keeps
 * calling. Return 0.
 */
typedef int (*saas_output_fn)(void *userdata, int stream, const void *data, size_t len);

/** A command to run; every field is validated by the core. */
typedef struct {
	const char *command;       /**< Run as `/bin/sh -c command` by the unprivileged user. */
	const char *cwd;           /**< Absolute; never NULL. */
	const char *const *env;    /**< NULL-terminated NAME=VALUE list, or NULL. */
	const void *stdin_data;    /**< May be NULL. */
	size_t stdin_len;
	int64_t timeout_ms;        /**< > 0: kill the command (and its process group) when it passes. */
	saas_output_fn output;     /**< Never NULL. */
	void *output_userdata;
	/**
	 * Read with __atomic_load_n; once non-zero the engine is shutting down:
	 * kill the command and return SAAS_EIO. Never NULL.
	 */
	const int *cancel;
	/*
	 * Appended in 0.2.0 (a running command's input and signals); a driver that
	 * ignores them runs commands as before.
	 */
	/**
	 * More stdin after stdin_data: copies up to `cap` bytes into buf and
	 * returns how many, 0 when none waits yet (ask again after a while), or
	 * -1 at the end of input. NULL: the input ends after stdin_data.
	 */
	long (*input)(void *userdata, void *buf, size_t cap);
	/**
	 * Asked while the command runs: a signal to deliver now (its number;
	 * *group non-zero for the command's whole process group, else its shell
	 * alone), 0 for none, or -1 to kill the command and all it started, as at
	 * a timeout, and return SAAS_EIO. NULL: never.
	 */
	int (*control)(void *userdata, int *group);
	void *control_userdata;    /**< For input, control and started. */
	/*
	 * Version 15. The core sets it only for a table of version 15 or later;
	 * for an older one it counts a command running from the moment exec is
	 * called.
	 */
	/**
	 * Called once, when the guest runs the command (its shell or program has
	 * started), before any of its output; not at all when it never ran. A
	 * driver that cannot tell calls it when it hands the command over. May
	 * be NULL.
	 */
	void (*started)(void *userdata);
} saas_driver_exec;

/** A terminal session to start (version 3); every field is validated by the core. */
typedef struct {
	const char *term;          /**< TERM for the shell; never NULL. */
	unsigned int cols, rows;   /**< 1 to SAAS_PTY_SIZE_MAX. */
	int tty;                   /**< 0: no terminal; the shell reads a pipe and its stderr joins its output. */
	/*
	 * Version 12: where the shell starts and what it adds to its environment,
	 * as saas_driver_exec's cwd and env. The core sets them only for a table
	 * of version 12 or later (an older one is refused a terminal that asks
	 * for either), so an older driver, which cannot read them, never drops
	 * them unseen.
	 */
	const char *cwd;           /**< Absolute, or NULL: the login shell's own start (the home). */
	const char *const *env;    /**< NULL-terminated NAME=VALUE list, or NULL. */
} saas_driver_pty;

/** Receives a listing's entries, depth first, each directory's entries sorted by name. Return non-zero to stop. */
typedef int (*saas_entry_fn)(void *userdata, const saas_file_entry *entry);

/** Receives a VM name from vm_list. Return non-zero to stop. */
typedef int (*saas_name_fn)(void *userdata, const char *name);

/** A template, as template_list reports it (version 5). Valid during the callback only. */
typedef struct {
	const char *image;         /**< The image it boots. */
	unsigned int vcpus;        /**< The VM shape its clones have. */
	unsigned int memory_mb;
	unsigned int disk_gb;
	int state;                 /**< saas_template_state: building, ready or failed. */
	int64_t state_bytes;       /**< What its saved state takes on storage; 0 unless ready. */
} saas_driver_template;

/** Receives a template from template_list. Return non-zero to stop. */
typedef int (*saas_template_fn)(void *userdata, const saas_driver_template *tmpl);

/**
 * A snapshot as snapshot_scan reports it (version 13). Valid during the
 * callback only.
 */
typedef struct {
	const char *name;          /**< Its name, as vm_snapshot was given it. */
	/**
	 * When its newest piece was last written, in Unix ms by the clock of
	 * the storage that holds it; 0: the driver cannot tell.
	 */
	int64_t written_ms;
	/** 1: complete (restorable); 0: pieces of one being written, cut short or half deleted. */
	int complete;
} saas_driver_snapshot;

/** Receives a snapshot from snapshot_scan. Return non-zero to stop. */
typedef int (*saas_snapshot_fn)(void *userdata, const saas_driver_snapshot *snap);

/** The machine a driver runs its VMs on, as host_info reports it (version 6). */
typedef struct {
	unsigned int cpus;         /**< Host CPUs (libvirt's node info: active CPUs). */
	uint64_t memory_mb;        /**< Host memory in MiB. */
	unsigned int vms;          /**< VMs of this driver's owner running there now (sandboxes, pooled, templates). */
	/**
	 * Version 14: MiB that VMs started ahead there (vm_take's, every engine's, not
	 * in vms) hold now: placement leaves it to them. 0: none, or a driver that does
	 * not say (the engine zeroes the struct before host_info, so an older table's
	 * reads 0). A field at the end: an engine of version 13 refuses a table of 14,
	 * which would write past its struct.
	 */
	uint64_t spare_mb;
} saas_driver_host;

/**
 * One VM's use of the machine at one instant, as vm_sample reports it
 * (version 10): what the host sees of the VM, never what its guest says, so
 * that no tenant can make these numbers lie about anyone (docs/sandboxes.md,
 * "Metrics"). The core turns CPU time into a percentage between two samples.
 */
typedef struct {
	unsigned int vcpus;        /**< The VM's virtual CPUs. */
	uint64_t cpu_time_ns;      /**< CPU time its vCPUs (and the emulator) used since the VM started; only grows. */
	uint64_t memory_total;     /**< Bytes of memory the VM was given. */
	uint64_t memory_used;      /**< Bytes of it the host holds for the VM now; at most memory_total. */
	uint64_t disk_total;       /**< Bytes its disk may hold (its size's disk); 0: the VM has no disk. */
	uint64_t disk_used;        /**< Bytes its own writable disk takes on the host now; at most disk_total. */
} saas_driver_sample;

/**
 * A VM driver. Every slot returns SAAS_OK or a negative SAAS_E* code, says why
 * it failed through saas_sys_error_set() (saas/sys/error.h), and may be called
 * from any thread, several at once (docs/backends.md).
 */
typedef struct saas_driver {
	unsigned int version;      /**< SAAS_DRIVER_VERSION */
	const char *name;          /**< "libvirt", "fake" ... */

	/** Open the driver; *ctx is passed to every other slot. */
	int (*open)(void **ctx, const saas_driver_env *env);
	/** Release the driver. VMs keep running. */
	void (*close)(void *ctx);

	/**
	 * Make and boot a VM and return once commands can run in it. On failure
	 * nothing may be left behind.
	 */
	int (*vm_create)(void *ctx, const saas_vm_spec *spec);
	/** Destroy a VM and everything of it (disk, sockets, sessions). A missing VM is success. */
	int (*vm_destroy)(void *ctx, const char *name);
	/** The state of one VM. */
	int (*vm_state)(void *ctx, const char *name, int *state);
	/** Every VM this driver runs for this state directory (for reconcile). */
	int (*vm_list)(void *ctx, saas_name_fn fn, void *userdata);

	/**
	 * Run a command. Returns SAAS_OK with *exit_code set (128+N for a signal),
	 * or SAAS_ETIMEOUT when the command was killed at its timeout, or an error.
	 */
	int (*exec)(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code);
	/**
	 * Write a file as the unprivileged user, creating parent directories.
	 * `size` is the byte count the reader supplies, or -1. On failure no partial
	 * file is left. SAAS_EISDIR if path is a directory.
	 */
	int (*file_write)(void *ctx, const char *name, const char *path, unsigned int mode,
	                  saas_read_fn reader, void *userdata, int64_t size);
	/**
	 * Read a file. `*size` is set before the first byte is delivered.
	 * SAAS_ENOTFOUND, SAAS_EISDIR, SAAS_ETOOBIG (larger than max) as the case is.
	 */
	int (*file_read)(void *ctx, const char *name, const char *path, int64_t max,
	                 saas_write_fn writer, void *userdata, int64_t *size);
	/** List a tree to max_depth levels. SAAS_ENOTFOUND if path does not exist. */
	int (*file_list)(void *ctx, const char *name, const char *path, unsigned int max_depth,
	                 saas_entry_fn fn, void *userdata);
	/**
	 * Open a TCP connection to a port inside the VM; *fd is a connected stream
	 * socket the caller owns and closes. May be NULL (no preview URLs).
	 */
	int (*port_connect)(void *ctx, const char *name, unsigned int port, int *fd);

	/* Version 2. */

	/**
	 * The mode a spec without a network gets (SAAS_NET_ISOLATED or
	 * SAAS_NET_INTERNET), so the core can report it. May be NULL: isolated.
	 */
	int (*network_default)(void *ctx);
	/**
	 * Replace a running VM's egress policy. New connections and lookups follow
	 * it at once; connections already open may live on. The engine also calls
	 * it for every live VM with a POLICY after it opens the driver (a driver
	 * keeps no policy across restarts). SAAS_EBUSY: another engine enforces
	 * this VM's egress (with the policy it was given) and only it may change
	 * it; the engine's reconcile leaves the VM as it is. NULL: SAAS_ENOTSUP.
	 */
	int (*vm_network_set)(void *ctx, const char *name, const saas_vm_network *network);
	/** A VM's egress counters. NULL: the core reports zeros. */
	int (*vm_network_stats)(void *ctx, const char *name, saas_vm_network_stats *out);

	/* Version 3. */

	/**
	 * Start the unprivileged user's login shell on a pseudo-terminal. *fd is
	 * the caller's end of a stream socket carrying the terminal's bytes both
	 * ways: its shutdown(SHUT_WR) is end-of-input; its EOF means the shell
	 * ended, and its exit status is known by then. *pty is passed to
	 * pty_resize and pty_close. NULL: SAAS_ENOTSUP.
	 */
	int (*pty_open)(void *ctx, const char *name, const saas_driver_pty *req, int *fd, void **pty);
	/** Tell the terminal its new size. */
	int (*pty_resize)(void *ctx, void *pty, unsigned int cols, unsigned int rows);
	/**
	 * Hang up if the shell still runs and free the session; the caller then
	 * closes its fd. *exit_status: the shell's, 128+N for signal N, -1 unknown.
	 */
	void (*pty_close)(void *ctx, void *pty, int *exit_status);

	/* Version 4: snapshots, for fork and for pause and resume. */

	/**
	 * Save a running VM's memory, device state and disk, as they are at one
	 * moment, into snapshot `snap` (a name the core chooses: 1 to 63 of
	 * [a-z0-9-], unique for this driver). keep non-zero (a fork): the VM is
	 * paused only while its state is taken and then runs on. keep zero (a
	 * pause): once the state is saved the VM is gone, as after vm_destroy, and
	 * lives on only in the snapshot. On failure the VM runs on as before and
	 * no snapshot is left. *bytes (may be NULL): what the snapshot holds on
	 * storage. SAAS_ENOTFOUND: no such VM.
	 */
	int (*vm_snapshot)(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes);
	/**
	 * Make VM spec->name from snapshot `snap`, with the memory, processes and
	 * disk its source had at that moment, as a machine of its own: spec->name
	 * is its hostname, its kernel RNG is reseeded, its clock set to now. The
	 * spec's shape (vcpus, memory_mb, disk_gb, image) is its source's; network
	 * is the new VM's own. Returns once commands can run; the snapshot stays
	 * and may be restored again (a fork restores it N times, several at once
	 * from threads of its own, as vm_create is called for concurrent
	 * creates). On failure nothing is left behind. SAAS_ENOTFOUND: no such
	 * snapshot.
	 */
	int (*vm_restore)(void *ctx, const saas_vm_spec *spec, const char *snap);
	/**
	 * Delete a snapshot. VMs restored from it run on: the driver keeps what
	 * they still use until they are destroyed. A missing snapshot is success.
	 */
	int (*snapshot_delete)(void *ctx, const char *snap);
	/** Every snapshot this driver holds for this state directory (for reconcile). */
	int (*snapshot_list)(void *ctx, saas_name_fn fn, void *userdata);
	/**
	 * Was VM name made from a build of its image that is no longer the
	 * current one (the image was rebuilt since)? *outdated: 1 if so, else 0
	 * (also for a VM the driver cannot tell about). The core never hands out
	 * a pooled VM that is outdated: it destroys it and makes a new one. NULL:
	 * never outdated.
	 */
	int (*vm_outdated)(void *ctx, const char *name, int *outdated);

	/* Version 5. */

	/**
	 * Every template the driver holds, is building or failed to build, for
	 * the operator's view of the host (saas_engine_stats). Cheap: no VM is
	 * touched. NULL: the driver makes no templates.
	 */
	int (*template_list)(void *ctx, saas_template_fn fn, void *userdata);

	/* Version 6. */

	/**
	 * Reach the machine the VMs run on and say what it has, for placement by
	 * capacity and to tell that the host is alive: the engine calls it every
	 * few seconds for each VM host. It must answer within a few seconds or
	 * fail (SAAS_EBACKEND, naming why), never
	 * hang. NULL: the core assumes the host is alive and has room.
	 */
	int (*host_info)(void *ctx, saas_driver_host *out);

	/* Version 8. */

	/**
	 * Hand over a VM the driver started ahead for a create of spec's shape
	 * (image, vcpus, memory_mb, disk_gb; spec->name is not read) and the
	 * driver's default network (spec->network NULL: a spec with a network is
	 * never given one), so that its vm_create returns sooner. Returns 1 with
	 * the VM's name in name (size bytes): a fresh sandbox id, "sbx-" and 20
	 * of [a-z2-7], that the caller makes the sandbox's; the caller then
	 * either makes it with vm_create under that name or lets it go with
	 * vm_destroy. Returns 0 when the driver has none for that shape. Until
	 * then such VMs belong to no sandbox and vm_list leaves them out; the
	 * driver destroys them at close and when they can no longer serve (their
	 * image rebuilt). NULL: creates are made the ordinary way.
	 */
	int (*vm_take)(void *ctx, const saas_vm_spec *spec, char *name, size_t size);

	/* Version 10. */

	/**
	 * One sample of a running VM (saas_driver_sample), cheap enough for the
	 * engine to take every few seconds for every VM, and bounded in time as
	 * host_info is. SAAS_ENOTFOUND: no such VM running. NULL: the core
	 * answers metrics requests with SAAS_ENOTSUP.
	 */
	int (*vm_sample)(void *ctx, const char *name, saas_driver_sample *out);

	/* Version 11: directories, removal and renames, as the unprivileged user. NULL: SAAS_ENOTSUP. */

	/**
	 * Make directory `path` and its missing parents, mode 0755. *created: 1
	 * if it made path, 0 if a directory was there. SAAS_EEXISTS: something
	 * not a directory is at path.
	 */
	int (*file_mkdir)(void *ctx, const char *name, const char *path, int *created);
	/**
	 * Remove a file, a symbolic link (never followed) or a directory tree. At
	 * most SAAS_FILE_REMOVE_ENTRIES_MAX entries and SAAS_FILE_REMOVE_DEPTH_MAX
	 * levels, else SAAS_ELIMIT once that much is gone: the driver's work per
	 * call is bounded. SAAS_ENOTFOUND: nothing at path.
	 */
	int (*file_remove)(void *ctx, const char *name, const char *path);
	/**
	 * Rename `from` to `to` (the core has checked that `to` is not inside
	 * `from`), making to's missing parents. SAAS_ENOTFOUND: no from.
	 * SAAS_EEXISTS: something at `to`, unless flags has
	 * SAAS_FILE_RENAME_REPLACE and both are not directories: then to is
	 * replaced.
	 */
	int (*file_rename)(void *ctx, const char *name, const char *from, const char *to, unsigned int flags);

	/* Version 13. */

	/**
	 * Every snapshot of this driver's owner that a storage shared by several
	 * engines holds (a VM host's pool), complete or not: what a fork, a
	 * pause or a delete of any engine left there, for the core's sweep of
	 * those no sandbox names (a delete whose engine stopped before the host
	 * answered). Another owner's are never reported. A storage that cannot
	 * be read whole fails (never a shorter list). NULL, or SAAS_ENOTSUP: the
	 * driver's snapshots are its engine's alone (snapshot_list covers them).
	 */
	int (*snapshot_scan)(void *ctx, saas_snapshot_fn fn, void *userdata);

	/* Version 16. */

	/**
	 * A fork's children begun while its snapshot is taken. on 1: the caller
	 * is about to call vm_snapshot(ctx, VM, snap, 1, ...) (a fork). From then
	 * until that call returns, vm_restore of snap from other threads waits
	 * for the snapshot instead of failing with SAAS_ENOTFOUND, and may start
	 * the new VM's first half while the state is still being saved; once
	 * vm_snapshot failed, it fails as for a snapshot that is not there. on 0:
	 * that vm_snapshot will not be called after all (or has returned), and
	 * restores still waiting go on as for any snapshot. SAAS_ENOTSUP: this
	 * driver (or this VM host) restores a snapshot only once it is taken,
	 * and the caller calls vm_restore after vm_snapshot. NULL: the same.
	 */
	int (*snapshot_expect)(void *ctx, const char *snap, int on);
} saas_driver;

SAAS_END_DECLS

#endif
