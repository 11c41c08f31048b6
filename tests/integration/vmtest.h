/*
 * What the real-VM test programs (tests/integration/test_*.c) share: their
 * environment, the engine's log kept for checks, failing on a status, a shell,
 * a command in a sandbox or in a guest through a driver's table, a GET to a
 * guest's web server, a monotonic clock, and finding a sandbox's QEMU on the
 * host. cmocka's fail_msg() and asserts
 * end the test on any failure here, as they would in the test itself.
 *
 * Include after <cmocka.h> (which needs <setjmp.h>, <stdarg.h>, <stddef.h>).
 */
#ifndef SAAS_TESTS_VMTEST_H
#define SAAS_TESTS_VMTEST_H

#include <stdbool.h>
#include <sys/types.h>

#include "saas.h"
#include "saas/sys/driver.h"

/*
 * SAAS_TEST_IMAGES (the built images) and SAAS_TEST_STATE (this test's state
 * directory), which ctest sets: 0, or -1 with a message when either is unset.
 */
int vmtest_env(const char **images, const char **state);

/*
 * The engine's (or a driver's) log callback: warnings and errors, or every
 * line with SAAS_TEST_VERBOSE set, go to stderr as "  [WHO] line", WHO being
 * userdata (a string) or "engine" when NULL; every line is kept for logged().
 */
void vmtest_log(void *userdata, int level, const char *msg);

/*
 * Has a line been logged that holds a and, after it, b (b NULL: a alone)?
 * A leading '^' anchors a at the start of the line.
 */
bool logged(const char *a, const char *b);

/*
 * The VMs named by lines "VM NAME WHAT...", in the order logged: up to max
 * names into names; returns how many such lines there are.
 */
size_t logged_vms(const char *what, char (*names)[64], size_t max);

/* Forgets the lines kept so far (and frees them). */
void vmtest_log_reset(void);

/*
 * As root, make the state directory's parent (the build tree's /var/tmp/aas-test-KEY)
 * 0711, so that QEMU's own uids pass through it whichever test made it first.
 */
void vmtest_state_parent_traversable(const char *state_dir);

/* SAAS_ENGINE_OPTIONS_INIT on state_dir with driver_config (its parent made traversable), the log to vmtest_log at INFO. */
saas_engine_options vmtest_engine_options(const char *state_dir, const char *driver_config);

/* A new account called name with a key (*key, for saas_free) and a local client on it (*client). */
void vmtest_tenant(saas_engine *engine, const char *name, char **key, saas_client **client);

/*
 * Runs cmd in sandbox id through c: the first line of its stdout (malloc()ed),
 * its exit status in *code; with code NULL, the test fails unless it is 0.
 */
char *vmtest_exec_line(saas_client *c, const char *id, const char *cmd, int *code);

/* Destroys every sandbox c's account has active (a teardown's last word: errors are not checked). */
void vmtest_destroy_all(saas_client *c);

/* Fails the test unless rc is SAAS_OK, with what was being done and the library's message. */
void check(int rc, const char *what);

/*
 * Runs cmd in VM vm through a driver's own table (ctx its context), in / and
 * within timeout_ms: the driver's code, the command's exit status in *code.
 * Its stdout goes to out, NUL-terminated: a piece that would not fit in size
 * is dropped, and so is all that comes after it.
 */
int vmtest_driver_exec(const saas_driver *drv, void *ctx, const char *vm, const char *cmd, int64_t timeout_ms,
                       int *code, char *out, size_t size);

/*
 * Sends an HTTP/1.0 GET of path on fd (a connection to a guest's port) and
 * reads the answer into buf, NUL-terminated, until it ends, a minute passes
 * with nothing, or size - 1 bytes came; closes fd. How many bytes came.
 */
size_t vmtest_http_get(int fd, const char *path, char *buf, size_t size);

/* Milliseconds on the monotonic clock; vmtest_clock is the same as a driver's or engine's clock. */
int64_t vmtest_now_ms(void);
int64_t vmtest_clock(void *ud);

/* Cuts the newlines at the end of s; s. */
char *vmtest_chomp(char *s);

/* Runs a shell command made from fmt: its exit status, or -1 when it did not exit. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A test internet (vm.egress, vm.hosts): a network namespace of the test's
 * own joined to this machine by a veth pair (VMTEST_NET_SELF on this side;
 * TEST-NET-2 addresses, each routed here by a /32 of its own, never the
 * range), a dnsmasq in it answering a few names
 * of .test (a driver's dns_upstream) and logging every query it gets, and
 * one TCP listener on every address of the namespace that counts who
 * connects where. Nothing is sent to any other address.
 */
#define VMTEST_NET_SELF "198.51.100.1"  /* this machine's side */
#define VMTEST_NET_DNS "198.51.100.2"   /* dnsmasq; allowed.test */
#define VMTEST_NET_WILD "198.51.100.3"  /* www.wild.test, later.test */
#define VMTEST_NET_CIDR "198.51.100.4"  /* reached by a CIDR rule only */
#define VMTEST_NET_OTHER "198.51.100.5" /* unlisted.test */
/* Up (its dnsmasq's files in state_dir): 0, or -1; down, whatever of it is up. */
int vmtest_world_up(const char *state_dir);
void vmtest_world_down(void);
/* The listener's port; how many connections reached addr so far; did dnsmasq get a query for name? */
unsigned int vmtest_world_port(void);
int vmtest_world_reached(const char *addr);
bool vmtest_world_asked(const char *name);

/*
 * The libvirt driver's egress table of an engine on state_dir: "aas_egress_" and the first
 * 16 hex digits of the SHA-256 of the directory's name, as egress.c makes it (out: 28 bytes
 * at least; empty if the name cannot be hashed).
 */
void vmtest_egress_table(const char *state_dir, char *out, size_t size);

/*
 * Removes the egress tables (inet aas_egress_*) of engines that are gone, as
 * root: an engine killed hard leaves its table, whose NAT chain still sends
 * the DNS of the per-VM uids it used (uids that every engine shares) to its
 * dead resolver. Only a table named after an engine state directory (one
 * holding an engine.lock) under a directory that roots (a glob) matches, at
 * most three levels down, is ours; it is provably dead, and removed, when no
 * process holds that engine.lock (an engine keeps its flock until it exits;
 * it is held here while the table goes, so no engine can open there
 * meanwhile) and no QEMU's command line names the directory or its embedded
 * libvirt root (a table outlives its engine on purpose while its VMs run).
 * How many tables it removed, each said on stderr.
 */
int vmtest_egress_leftovers_remove(const char *roots);
/*
 * The same as root over every build tree's state directories (/var/tmp/aas-test-*, beside
 * state_dir's own): vmtest_engine_options runs it before each engine opens.
 */
void vmtest_egress_leftovers_near(const char *state_dir);

/*
 * A TCP listener on every address of this machine (IPv4 and IPv6, loopback
 * included), its port in *port, for checks that a guest reaches none of
 * them; then how many connections it took (the socket closed).
 */
int vmtest_listen_everywhere(unsigned int *port);
int vmtest_accepted(int fd);

/*
 * The QEMUs qemu_pid looks at: those of engines on state_dir (their
 * embedded root, .../aas-libvirt[-UID]/HASH/, on their command line), so
 * that another test run on the host, with VMs of the same names, is not
 * taken for this one's. Only for a test whose engines are all its own
 * process's and embedded (vm.snapshot): one that starts an engine in a
 * child process, or on a system libvirtd (whose QEMUs name no such root),
 * does not call it. Without a call, qemu_pid looks at every QEMU.
 */
void vmtest_own_qemus(const char *state_dir);
/* The pid of the QEMU running the domain called name (an argument guest=NAME[,...]) of this test's engines, or 0. */
pid_t qemu_pid(const char *name);

/* The first word of a /proc/PID/status field ("Uid:"), as a number in base; fails if absent. */
unsigned long long proc_status(pid_t pid, const char *field, int base);
/* The fd of pid's QEMU that holds the memfd named name (a template's or a fork's sealed RAM), or -1. */
int vmtest_memfd_of(pid_t pid, const char *name);
/* A field of pid's /proc/PID/smaps_rollup, in KiB. */
unsigned long long vmtest_rollup_kib(pid_t pid, const char *field);
/* Rss and Anonymous (the pages it copied on write) of pid's mappings of the memfd named name, in KiB. */
void vmtest_memfd_mapping_kib(pid_t pid, const char *name, unsigned long long *rss, unsigned long long *anon);

#endif
