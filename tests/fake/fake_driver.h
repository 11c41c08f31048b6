/*
 * A fake VM driver for fast unit tests. Its "VMs" are records in memory that
 * outlive any one engine (as real VMs outlive their engine process), and its
 * guest understands a handful of commands:
 *   true, : [WORDS]     nothing (exit 0)
 *   echo WORDS          prints WORDS and a newline
 *   exit N              exits with N
 *   sleep N             takes N seconds (of the timeout; it does not really sleep)
 *   cat                 copies stdin to stdout
 *   pwd                 prints the working directory
 *   env                 prints the extra environment, one per line
 *   spew N              prints N bytes of 'x' to stdout and N of 'y' to stderr
 *   block               waits until the engine cancels it
 *   busy-restores N     the next N restores (a resume, a fork's child) are refused for room, as
 *                       saas_fake_busy_restores (through any client: a remote one's server's fake)
 *   busy-creates N      the next N creates are refused for room, as saas_fake_busy_creates
 *   startafter PATH     starts (says so through the exec's `started`) only once the host file
 *                       PATH exists, then exits 0; a cancel or its timeout first: it never ran
 * Every other command starts at once.
 * anything else exits 127 with "not found" on stderr. Files live in a map.
 * Its terminal echoes, reports resizes, and ends at "exit N" (fake_driver.c).
 * Never part of the library.
 */
#ifndef SAAS_FAKE_DRIVER_H
#define SAAS_FAKE_DRIVER_H

#include "saas/sys/driver.h"

extern const saas_driver saas_fake_driver;

/*
 * SAAS_FAKE_PORTS="GUEST=HOST:PORT[,...]" maps a guest port to a real TCP
 * server on the host (a code server's test double, say): 1 with *fd
 * connected to it, 0 when `port` is not mapped, or an error. The fake
 * driver's port_connect honours it; a test's own port_connect may too.
 */
int saas_fake_port_mapped(unsigned int port, int *fd);

/*
 * Keep the VMs' existence as files in `dir` (NULL or "": in memory again), so
 * that several processes see the same VMs, as servers sharing VM hosts do.
 * Files written to a VM stay in the process that wrote them.
 */
void saas_fake_shared(const char *dir);
/* Forget every VM and file (between tests). */
void saas_fake_reset(void);
/* Forget every file (snapshots' too), the VMs kept: for a fuzzer that names the files it writes. */
void saas_fake_forget_files(void);
/* How many VMs exist. */
unsigned int saas_fake_vm_count(void);
/* Does a VM of this name exist? */
int saas_fake_vm_exists(const char *name);
/* Make the next n vm_create calls fail. */
void saas_fake_fail_creates(unsigned int n);
/*
 * Make the next n vm_create calls refuse for room (SAAS_EBUSY, naming the
 * host's QEMU uids and memory, as a real driver's: facts a tenant must not read).
 */
void saas_fake_busy_creates(unsigned int n);
/* Make the next n exec calls fail (SAAS_EBACKEND), in whatever VM. */
void saas_fake_fail_execs(unsigned int n);
/* How many commands ran (or were tried) in a VM: 0 for one that does not exist. */
unsigned int saas_fake_vm_execs(const char *name);
/* Simulate a VM dying (it stays listed, state STOPPED) or vanishing (gone). */
void saas_fake_vm_stop(const char *name);
/* The image was rebuilt: every VM made from it so far is outdated (vm_outdated says so). */
void saas_fake_image_rebuilt(const char *image);
/* Add a VM nobody asked for (what a crashed engine might leave). */
void saas_fake_vm_add(const char *name);
/* Refuse (SAAS_ENOTSUP) every create that asks for the internet, as a host that cannot guard it does. */
void saas_fake_refuse_internet(int on);
/* The mode network_default answers (SAAS_NET_ISOLATED after a reset). */
void saas_fake_network_default(int mode);
/*
 * Make the next n vm_network_set calls fail: SAAS_ENOTSUP if enotsup is 1,
 * SAAS_EBUSY if 2 (another engine serves the VM's egress), else SAAS_EBACKEND.
 */
void saas_fake_fail_network_sets(unsigned int n, int enotsup);
/*
 * A VM's egress as the driver holds it: its mode (-1 once a new driver opened
 * and nobody gave its policy again; -2: no such VM), and for POLICY its rules
 * into `rules` as "allow a,b deny c".
 */
int saas_fake_vm_network(const char *name, char *rules, size_t size);
/* Count denied attempts against a VM, as its guest's refused traffic would. */
void saas_fake_vm_denied(const char *name, int64_t connections, int64_t lookups);
/*
 * Hold one VM "started ahead" under name (vm_take, driver version 8): the
 * next create of the default network takes it. Its state: 0 none (never
 * held, made by a create, or destroyed), 1 held, 2 taken and not yet made.
 */
void saas_fake_ahead(const char *name);
int saas_fake_ahead_state(void);
/* How many times vm_create was called. */
unsigned int saas_fake_create_calls(void);
/*
 * Call fn after every vm_create that made its VM (which then exists and is
 * listed), on the creating thread and outside the driver's lock; NULL: none.
 * Reset clears it.
 */
typedef void (*saas_fake_create_fn)(void *userdata, const saas_vm_spec *spec);
/*
 * Set what template_list says of the template of image and shape (added if
 * new). Every vm_create also adds its shape's template, ready, if it has none.
 * Reset forgets them.
 */
void saas_fake_template_set(const char *image, unsigned int vcpus, unsigned int memory_mb, unsigned int disk_gb,
                            int state, int64_t state_bytes);
void saas_fake_on_create(saas_fake_create_fn fn, void *userdata);

/*
 * Snapshots (driver version 4): a snapshot keeps a copy of its VM's files; a
 * restore makes a VM with a copy of them. Make the next n vm_snapshot /
 * vm_restore calls fail (SAAS_EBACKEND; the VM runs on, nothing is left).
 */
void saas_fake_fail_snapshots(unsigned int n);
void saas_fake_fail_restores(unsigned int n);
/* Make the next n vm_restore calls refuse for room (SAAS_EBUSY, the host's memory named, as a real driver's). */
void saas_fake_busy_restores(unsigned int n);
/* Make the k-th vm_restore call from now fail as above (0: none), whichever thread makes it. */
void saas_fake_fail_restore_nth(unsigned int k);
/*
 * Hold every vm_restore, in whatever thread, until n are under way at once
 * or it waited wait_ms (n 0: no hold, as after a reset); and count again the
 * most under way at once, which saas_fake_restores_peak says.
 */
void saas_fake_restore_gate(unsigned int n, int wait_ms);
/*
 * Hold the next snapshots said to be coming (snapshot_expect) until n
 * restores wait for them, or wait_ms passed (0 for n: not held).
 */
void saas_fake_snapshot_hold(unsigned int n, int wait_ms);
/* Restores that waited for a snapshot being taken (a fork's children begun early), since the reset. */
unsigned int saas_fake_restores_waited(void);
unsigned int saas_fake_restores_peak(void);
unsigned int saas_fake_snapshot_count(void);
int saas_fake_snapshot_exists(const char *name);
/* Add a snapshot nobody made (what a crashed engine might leave), or lose one (a disk lost it). */
void saas_fake_snapshot_add(const char *name);
void saas_fake_snapshot_lose(const char *name);
/* How many times vm_snapshot / vm_restore were called. */
unsigned int saas_fake_snapshot_calls(void);
unsigned int saas_fake_restore_calls(void);

#endif
