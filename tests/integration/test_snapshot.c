/*
 * Snapshots on real VMs: the libvirt driver's table (its version 4 slots:
 * vm_snapshot, vm_restore, snapshot_delete, snapshot_list), driven directly,
 * so that what fork and pause/resume rest on is tested apart from the core
 * and the surfaces that carry them.
 *
 * One booted VM for everything. Before its snapshot it holds a file, a
 * background process and a web server on a port. A fork (keep=1) into two
 * restored VMs while the parent runs on: each has the file, the process and
 * the port, and each is a machine of its own (its hostname, its random
 * bytes, its disk writes), whose RAM maps the snapshot's sealed memory
 * copy-on-write where the driver maps memory (as a template's clone maps
 * its template's: it copied few of its pages). The fork's snapshot is
 * deleted while both run:
 * they run on. Then a pause (keep=0) and a restore under the same name, as a
 * resume is: the file, the process and the port are back. Every VM and
 * snapshot destroyed leaves nothing in the state directory. A pause's RAM
 * stays in its state, loaded by the resume. Once resumed, the VM is paused
 * again with a command running (and writing) on its control port: it runs
 * on after the second resume, and the resume's fix-ups go over the port.
 * Before the pause, one whose files cannot be written (their filesystem
 * full, or another than the VM's disk) fails and leaves the VM running,
 * with nothing of it left; so does one whose saved state grows past its
 * bound, as an escaped QEMU's could.
 * As root, every VM's QEMU runs under a uid of its own.
 *
 * Prints what a fork, a pause and a resume took (ms) and what a pause wrote
 * per GiB of guest RAM: these are TCG figures on a shared host, not asserted.
 *
 * `test_snapshot disk` does the same with the default image, whose disk the
 * snapshots freeze (vm.snapshot.disk, slow), and between the two forks the
 * parent three times more: its disk chain stays as deep as a new VM's (the
 * merge after each fork), children restored late still have their fork's
 * disk, and each snapshot's files go with its children.
 *
 * In disk mode the default image's code server (images/guest/aas-code) is
 * there too, and what issue #33 promises of it is tested on this one VM
 * before the snapshots, through the engine's own reader of its answers
 * (lib/core/code_wire.c) over the driver's port channel, as the engine
 * reaches it: a variable lives from run to run; a chart is a PNG; a
 * DataFrame comes as HTML and as data; an exception with its traceback; a
 * run cut off (the engine's timeout and cancel close the connection) is
 * interrupted and its context goes on; two contexts share nothing;
 * JavaScript and bash contexts keep theirs. Then every child of the fork and
 * the resumed VM has every context and its variables, and a child's change
 * is its own.
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/code_wire.h"
#include "saas/sys/driver.h"
#include "util/util.h"
#include "vmtest.h"

extern const saas_driver saas__driver_libvirt;

#define PARENT "sbx-snap-parent"
#define CHILD1 "sbx-snap-child1"
#define CHILD2 "sbx-snap-child2"
#define CHAIN_FORKS 3
#define WEB_PORT 8080

static const saas_driver *drv = &saas__driver_libvirt;
static void *ctx;
static char state_dir[4096], mark[64];
static const char *image = "tiny";
static bool with_disk;
static saas_vm_spec shape;
static const char *made[3];      /* VMs to destroy at teardown */
static int depth0;               /* files in a new VM's disk chain (with_disk) */
static char code_ctx[SAAS_CODE_CONTEXT_ID_MAX + 1]; /* a Python context made by test_code (with_disk) */

/* ---- the guest ------------------------------------------------------------------------------- */

/* Run cmd in VM vm; its stdout, with trailing newlines cut (a static buffer: copy what is kept). */
static char *run(const char *vm, const char *cmd)
{
	static char out[8192];
	int code = -1;

	check(vmtest_driver_exec(drv, ctx, vm, cmd, 120000, &code, out, sizeof(out)), cmd);
	assert_int_equal(code, 0);
	return vmtest_chomp(out);
}

/* The web server's answer for /mark over a connection to the VM's port (its body's first line). */
static char *web_get(const char *vm)
{
	static char buf[4096];
	char *body;
	int fd = -1;

	check(drv->port_connect(ctx, vm, WEB_PORT, &fd), "port_connect");
	vmtest_http_get(fd, "/mark", buf, sizeof(buf));
	body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	body[strcspn(body, "\n")] = '\0';
	return body;
}

/* The file, the background process and the web server of the parent, as they were before the snapshot. */
static void assert_survived(const char *vm)
{
	assert_string_equal(run(vm, "cat /workspace/mark"), mark);
	assert_string_equal(run(vm, "kill -0 \"$(cat /workspace/sleeper.pid)\" && echo alive"), "alive");
	assert_string_equal(web_get(vm), mark);
}

/* 32 bytes of the guest's /dev/urandom, in hex. */
static void urandom(const char *vm, char out[65])
{
	snprintf(out, 65, "%s", run(vm, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"));
	assert_int_equal(strlen(out), 64);
}

/* The uid VM's QEMU runs under (0 when not confined or not found). */
static unsigned int qemu_uid(const char *vm)
{
	pid_t pid = qemu_pid(vm);

	return pid > 0 ? (unsigned int)proc_status(pid, "Uid:", 10) : 0;
}

struct names {
	char list[8][64];
	int n;
};

static int add_name(void *ud, const char *name)
{
	struct names *ns = ud;

	if (ns->n < 8)
		snprintf(ns->list[ns->n++], sizeof(ns->list[0]), "%s", name);
	return 0;
}

static bool listed(const char *snap)
{
	struct names ns = { .n = 0 };

	check(drv->snapshot_list(ctx, add_name, &ns), "snapshot_list");
	for (int i = 0; i < ns.n; i++)
		if (strcmp(ns.list[i], snap) == 0)
			return true;
	return false;
}

/* The size of dir/name, or -1 when it is not there. */
static long long file_size(const char *dir, const char *name)
{
	char path[4600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Does the driver still keep snapshot snap's directory? */
static bool kept(const char *snap)
{
	char path[4400];
	struct stat st;

	snprintf(path, sizeof(path), "%s/libvirt/snapshots/%s", state_dir, snap);
	return stat(path, &st) == 0;
}

static int vm_state(const char *vm)
{
	int s = -1;

	check(drv->vm_state(ctx, vm, &s), "vm_state");
	return s;
}

static void destroy(const char *vm)
{
	check(drv->vm_destroy(ctx, vm), "vm_destroy");
	assert_int_equal(vm_state(vm), SAAS_VM_ABSENT);
	for (int i = 0; i < 100 && qemu_pid(vm); i++)
		usleep(100 * 1000);
	assert_int_equal(qemu_pid(vm), 0);
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(made); i++)
		if (made[i] && strcmp(made[i], vm) == 0)
			made[i] = NULL;
}

static void restore(const char *vm, const char *snap, size_t slot)
{
	saas_vm_spec spec = shape;

	spec.name = vm;
	check(drv->vm_restore(ctx, &spec, snap), "vm_restore");
	made[slot] = vm;
	assert_int_equal(vm_state(vm), SAAS_VM_RUNNING);
}

/* One vm_restore of a VM restored side by side with others (restores_begin): asserted by the caller. */
struct side_restore {
	const char *vm, *snap;
	int rc;
	int64_t ms;
	char message[512];
};

static void *side_restore_main(void *arg)
{
	struct side_restore *r = arg;
	saas_vm_spec spec = shape;
	int64_t t0 = vmtest_now_ms();

	spec.name = r->vm;
	if ((r->rc = drv->vm_restore(ctx, &spec, r->snap)) < 0)
		snprintf(r->message, sizeof(r->message), "%s", saas_error_last()->message);
	r->ms = vmtest_now_ms() - t0;
	return NULL;
}

/* Restores side by side, begun (restores_begin) and then waited for (restores_end). */
struct side_restores {
	size_t n;
	struct side_restore r[4];
	pthread_t threads[4];
};

/* Begin restoring n VMs (slots 1..n of made) from snap at once, each in a thread of its own. */
static void restores_begin(struct side_restores *all, const char *const *vms, size_t n, const char *snap)
{
	assert_true(n <= SAAS_ARRAY_SIZE(all->r) && n < SAAS_ARRAY_SIZE(made));
	all->n = n;
	for (size_t i = 0; i < n; i++) {
		all->r[i] = (struct side_restore){ vms[i], snap, SAAS_OK, 0, "" };
		assert_int_equal(pthread_create(&all->threads[i], NULL, side_restore_main, &all->r[i]), 0);
	}
}

/* Wait for them: each made, running; ms[i] is each one's time. */
static void restores_end(struct side_restores *all, const char *const *vms, int64_t *ms)
{
	struct side_restore *r = all->r;
	size_t n = all->n;

	for (size_t i = 0; i < n; i++) {
		pthread_join(all->threads[i], NULL);
		if (r[i].rc == SAAS_OK)
			made[i + 1] = vms[i]; /* destroyed at teardown, whatever the others did */
	}
	for (size_t i = 0; i < n; i++) {
		if (r[i].rc < 0)
			fail_msg("vm_restore %s, side by side with %zu more: %s", r[i].vm, n - 1, r[i].message);
		ms[i] = r[i].ms;
		assert_int_equal(vm_state(vms[i]), SAAS_VM_RUNNING);
	}
}

/* Files in the chain of the disk at path (itself included), as qemu-img reads them; -1 when it cannot. */
static int chain_depth(const char *path)
{
	char cmd[4600];
	int n = -1;
	FILE *p;

	/* -U: QEMU holds the image's lock while the VM runs. */
	snprintf(cmd, sizeof(cmd), "qemu-img info -U --backing-chain '%s' 2>/dev/null | grep -c '^image:'", path);
	if ((p = popen(cmd, "r"))) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* The parent's top overlay after a fork of it into snap (the driver names it after the snapshot). */
static const char *parent_top(const char *snap)
{
	static char path[4400];

	snprintf(path, sizeof(path), "%s/libvirt/vms/%s/disk-%s.qcow2", state_dir, PARENT, snap);
	return path;
}

/* Wait until the parent's disk chain is as deep as a new VM's again (the merge after a fork runs in QEMU). */
static int parent_depth_settled(const char *snap)
{
	int depth = chain_depth(parent_top(snap));

	for (int i = 0; i < 1200 && depth != depth0; i++) {
		usleep(250 * 1000);
		depth = chain_depth(parent_top(snap));
	}
	return depth;
}

/* Disk image files QEMU of vm holds open (every node of its chain opens its file once). */
static int qcow2_fds(const char *vm)
{
	char cmd[256];
	int n = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd 2>/dev/null | grep -c '\\.qcow2'", (int)qemu_pid(vm));
	if ((p = popen(cmd, "r"))) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* ---- code contexts (disk mode: the default image's code server) ------------------------------ */

/* How long the code server may take to answer GET /health "OK" after boot (its Python warm, under TCG). */
#define CODE_HEALTH_MS (5 * 60 * 1000)
/* A run's or a call's deadline here: none should come near it, it only keeps a hung guest from hanging the test. */
#define CODE_CALL_MS (3 * 60 * 1000)

struct code_watch {
	const char *until;   /* stdout text that starts the cut-off clock (NULL: none) */
	bool seen;
};

static int code_watch_event(void *ud, const saas_code_event *ev)
{
	struct code_watch *w = ud;

	if (w && w->until && ev->type == SAAS_CODE_EVENT_STDOUT && strstr(ev->text, w->until))
		w->seen = true;
	return 0;
}

/*
 * One request to vm's code server (SAAS_CODE_PORT of its loopback, through
 * the driver's port channel) read by r: 0 when the answer ended, or
 * SAAS_ETIMEOUT when `cut_ms` after w's text was printed the connection was
 * closed instead, as the engine closes it at a run's timeout.
 */
static int code_io(const char *vm, const char *method, const char *path, const char *body,
                   struct saas__code_reader *r, struct code_watch *w, int64_t cut_ms)
{
	char head[512], buf[65536];
	int64_t deadline = vmtest_now_ms() + CODE_CALL_MS;
	bool cut_set = false;
	size_t blen = body ? strlen(body) : 0;
	int fd = -1, rc = 0;

	check(drv->port_connect(ctx, vm, SAAS_CODE_PORT, &fd), "port_connect to the code server");
	snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\nContent-Length: %zu\r\n"
	         "Content-Type: application/json\r\n\r\n", method, path, SAAS_CODE_PORT, blen);
	assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	if (blen)
		assert_int_equal(send(fd, body, blen, MSG_NOSIGNAL), (ssize_t)blen);
	while (!r->done) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left;
		ssize_t n;
		if (w && w->seen && !cut_set) {
			deadline = vmtest_now_ms() + cut_ms;
			cut_set = true;
		}
		if ((left = deadline - vmtest_now_ms()) <= 0) {
			rc = SAAS_ETIMEOUT;
			break;
		}
		if (poll(&p, 1, left > 500 ? 500 : (int)left) <= 0)
			continue;
		if ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
			if ((rc = saas__code_reader_feed(r, buf, (size_t)n)) != 0)
				break;
		} else {
			rc = saas__code_reader_eof(r);
			break;
		}
	}
	close(fd);
	if (rc == SAAS_ETIMEOUT && !cut_set)
		fail_msg("%s %s on %s: no answer in %d s", method, path, vm, CODE_CALL_MS / 1000);
	if (rc != 0 && rc != SAAS_ETIMEOUT)
		fail_msg("%s %s on %s: the engine's reader says %d (%s)", method, path, vm, rc, r->why);
	return rc;
}

/* A context call's answer: its body (NUL-terminated, the caller's to free); the status must be 200. */
static char *code_call(const char *vm, const char *method, const char *path, const char *body)
{
	struct saas__code_reader r;
	char *text;

	saas__code_reader_init(&r, false, 0, NULL, NULL);
	code_io(vm, method, path, body, &r, NULL, 0);
	if (r.status != 200)
		fail_msg("%s %s: %d %.*s", method, path, r.status, (int)r.body.len, r.body.data ? r.body.data : "");
	assert_non_null(text = calloc(1, r.body.len + 1));
	if (r.body.len)
		memcpy(text, r.body.data, r.body.len);
	saas__code_reader_free(&r);
	return text;
}

/*
 * POST /execute with the JSON body, read into an execution as the engine
 * reads it; with w, cut off cut_ms after w's text was printed (the
 * execution's status then SAAS_CODE_TIMEDOUT).
 */
static saas_code_execution *code_run_cut(const char *vm, const char *body, struct code_watch *w, int64_t cut_ms)
{
	struct saas__code_reader r;
	struct saas__code_run s;
	saas_code_execution *x;
	int rc;

	memset(&s, 0, sizeof(s));
	check(saas__code_run_init(&s, SAAS_CODE_OUTPUT_DEFAULT, SAAS_CODE_RESULT_DEFAULT, code_watch_event, w),
	      "code run init");
	saas__code_reader_init(&r, true, SAAS_CODE_RESULT_DEFAULT / 3 * 4 + (64u << 10), saas__code_run_line, &s);
	rc = code_io(vm, "POST", "/execute", body, &r, w, cut_ms);
	if (rc == SAAS_ETIMEOUT) {
		s.x->status = SAAS_CODE_TIMEDOUT;
	} else {
		if (r.status != 200)
			fail_msg("POST /execute %s: %d %.*s", body, r.status, (int)r.body.len, r.body.data ? r.body.data : "");
		assert_true(s.ended);
		s.x->status = SAAS_CODE_DONE;
	}
	x = s.x;
	saas__code_reader_free(&r);
	return x;
}

static saas_code_execution *code_run(const char *vm, const char *body)
{
	return code_run_cut(vm, body, NULL, 0);
}

/* Format mime of x's main result (the last expression's value), or NULL. */
static const saas_code_format *main_format(const saas_code_execution *x, const char *mime)
{
	for (size_t i = 0; i < x->result_count; i++)
		for (size_t j = 0; x->results[i]->is_main && j < x->results[i]->count; j++)
			if (strcmp(x->results[i]->formats[j]->mime, mime) == 0)
				return x->results[i]->formats[j];
	return NULL;
}

/* Run body on vm: it raises nothing, and its last value's text is want (or its stdout, for bash). */
static void code_expect_value(const char *vm, const char *body, const char *want)
{
	saas_code_execution *x = code_run(vm, body);
	const saas_code_format *t = main_format(x, "text/plain");

	if (x->error)
		fail_msg("%s on %s raised %s: %s\n%s", body, vm, x->error->name, x->error->value, x->error->traceback);
	if (t)
		assert_string_equal((const char *)t->data, want);
	else
		assert_string_equal(vmtest_chomp(x->stdout_data), want);
	saas_code_execution_free(x);
}

/* Run body on vm: it raises an error named name. */
static void code_expect_raises(const char *vm, const char *body, const char *name)
{
	saas_code_execution *x = code_run(vm, body);

	if (!x->error)
		fail_msg("%s on %s raised nothing", body, vm);
	assert_string_equal(x->error->name, name);
	saas_code_execution_free(x);
}

/* Wait for vm's code server to say its default Python context is warm. */
static void code_wait_health(const char *vm)
{
	int64_t t0 = vmtest_now_ms();
	char last[256] = "(no answer)";

	while (vmtest_now_ms() - t0 < CODE_HEALTH_MS) {
		struct saas__code_reader r;
		char buf[4096];
		int fd = -1;
		saas__code_reader_init(&r, false, 0, NULL, NULL);
		if (drv->port_connect(ctx, vm, SAAS_CODE_PORT, &fd) == SAAS_OK) {
			static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
			if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1) {
				for (;;) {
					struct pollfd p = { fd, POLLIN, 0 };
					ssize_t n;
					if (poll(&p, 1, 10000) <= 0 || (n = recv(fd, buf, sizeof(buf), 0)) <= 0 ||
					    saas__code_reader_feed(&r, buf, (size_t)n) != 0 || r.done)
						break;
				}
			}
			close(fd);
			snprintf(last, sizeof(last), "%d %.*s", r.status, (int)r.body.len, r.body.data ? r.body.data : "");
		} else {
			snprintf(last, sizeof(last), "%s", saas_error_last()->message);
		}
		saas__code_reader_free(&r);
		if (strcmp(last, "200 \"OK\"") == 0) {
			printf("code server warm %lld ms after the test asked first\n", (long long)(vmtest_now_ms() - t0));
			return;
		}
		usleep(500 * 1000);
	}
	fail_msg("the code server of %s is not warm after %d s: %s", vm, CODE_HEALTH_MS / 1000, last);
}

/* The big-endian 32 bits at p. */
static unsigned int be32(const unsigned char *p)
{
	return (unsigned int)p[0] << 24 | (unsigned int)p[1] << 16 | (unsigned int)p[2] << 8 | p[3];
}

/*
 * A PNG whole: its signature, an IHDR of a chart's size first, every chunk's
 * length within the bytes, and IEND last.
 */
static void code_expect_png(const saas_code_format *f)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const unsigned char *p;
	size_t at = 8;
	unsigned int w, h;
	bool iend = false;

	assert_non_null(f);
	p = f->data;
	assert_true(f->len > 8 + 25 + 12);
	assert_memory_equal(p, sig, sizeof(sig));
	assert_memory_equal(p + 12, "IHDR", 4);
	w = be32(p + 16);
	h = be32(p + 20);
	/* matplotlib's default figure (6.4 x 4.8 in) at the inline backend's dpi, cut to its bounding box. */
	if (w < 200 || w > 4000 || h < 150 || h > 3000)
		fail_msg("the chart is %ux%u pixels", w, h);
	while (at + 12 <= f->len && !iend) {
		size_t len = be32(p + at);
		iend = memcmp(p + at + 4, "IEND", 4) == 0;
		assert_true(len <= f->len - at - 12);
		at += 12 + len;
	}
	assert_true(iend);
	assert_int_equal(at, f->len);
	printf("chart: a %ux%u PNG of %zu bytes\n", w, h, f->len);
}

/* What every context of vm holds after test_code (x of the default context is `want`). */
static void code_expect_state(const char *vm, const char *want)
{
	char body[256];

	code_expect_value(vm, "{\"code\": \"x + 1\"}", want);
	snprintf(body, sizeof(body), "{\"code\": \"x\", \"context_id\": \"%s\"}", code_ctx);
	code_expect_value(vm, body, "mine");
	code_expect_value(vm, "{\"language\": \"javascript\", \"code\": \"j * 2 + 2\"}", "42");
	code_expect_value(vm, "{\"language\": \"bash\", \"code\": \"echo $((B * 7))\"}", "42");
}

static void test_code(void **state)
{
	saas_code_execution *x;
	saas_code_context *c = NULL;
	struct code_watch w = { "started", false };
	const saas_code_format *f;
	json_t *data, *want;
	char body[512], why[256], *text;
	int64_t count;

	(void)state;
	if (!with_disk) {
		printf("no code server in the tiny image\n");
		return;
	}
	code_wait_health(PARENT);

	/* A variable lives from run to run; the count goes up. */
	x = code_run(PARENT, "{\"code\": \"x = 41\"}");
	assert_null(x->error);
	assert_int_equal(x->result_count, 0);
	count = x->execution_count;
	assert_true(count > 0);
	saas_code_execution_free(x);
	x = code_run(PARENT, "{\"code\": \"x + 1\"}");
	assert_string_equal((const char *)main_format(x, "text/plain")->data, "42");
	assert_int_equal(x->execution_count, count + 1);
	saas_code_execution_free(x);

	/* A chart shown is a PNG result (decoded by the engine's reader), printed output beside it. */
	x = code_run(PARENT, "{\"code\": \"import matplotlib.pyplot as plt\\nprint('drawing')\\n"
	                     "plt.plot([1, 3, 2, 4])\\nplt.title('t')\\nplt.show()\"}");
	assert_null(x->error);
	assert_string_equal(x->stdout_data, "drawing\n");
	f = NULL;
	for (size_t i = 0; i < x->result_count && !f; i++)
		for (size_t j = 0; j < x->results[i]->count; j++)
			if (strcmp(x->results[i]->formats[j]->mime, "image/png") == 0)
				f = x->results[i]->formats[j];
	code_expect_png(f);
	saas_code_execution_free(x);

	/* A DataFrame: its HTML table, its text, and its data as JSON (E2B's "data"). */
	x = code_run(PARENT, "{\"code\": \"import pandas as pd\\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\"}");
	assert_null(x->error);
	assert_non_null(f = main_format(x, "text/html"));
	assert_non_null(strstr((const char *)f->data, "<table"));
	assert_non_null(strstr((const char *)f->data, "<td>y</td>"));
	assert_non_null(main_format(x, "text/plain"));
	assert_non_null(f = main_format(x, "e2b/data"));
	assert_non_null(data = json_loadb((const char *)f->data, f->len, 0, NULL));
	assert_non_null(want = json_loads("{\"a\": [1, 2], \"b\": [\"x\", \"y\"]}", 0, NULL));
	if (!json_equal(data, want))
		fail_msg("the DataFrame's data: %s", (const char *)f->data);
	json_decref(data);
	json_decref(want);
	saas_code_execution_free(x);

	/* An exception: its name, value and traceback, down to the line that raised. */
	x = code_run(PARENT, "{\"code\": \"def f():\\n    return 1 / 0\\nf()\"}");
	assert_non_null(x->error);
	assert_string_equal(x->error->name, "ZeroDivisionError");
	assert_string_equal(x->error->value, "division by zero");
	/* IPython's colours cut its lines into pieces: the exception's name is whole, and more than one line. */
	assert_non_null(strstr(x->error->traceback, "ZeroDivisionError"));
	assert_non_null(strchr(x->error->traceback, '\n'));
	assert_int_equal(x->result_count, 0);
	saas_code_execution_free(x);

	/* A run cut off as the engine cuts one at its timeout (the connection closed): interrupted, the context lives. */
	x = code_run_cut(PARENT, "{\"code\": \"import time\\nprint('started', flush=True)\\ntime.sleep(3600)\"}", &w, 2000);
	assert_int_equal(x->status, SAAS_CODE_TIMEDOUT);
	assert_true(w.seen);
	saas_code_execution_free(x);
	/* Had the sleep not been interrupted, this run would wait its turn for an hour. */
	code_expect_value(PARENT, "{\"code\": \"x + 1\"}", "42");

	/* Another context: its own variables, none of the default one's. */
	text = code_call(PARENT, "POST", "/contexts", "{\"language\": \"python\", \"cwd\": \"/tmp\"}");
	if (saas__code_context_parse(&c, text, strlen(text), why, sizeof(why)) != 0)
		fail_msg("POST /contexts: %s: %s", why, text);
	assert_string_equal(c->language, "python");
	assert_string_equal(c->cwd, "/tmp");
	snprintf(code_ctx, sizeof(code_ctx), "%s", c->id);
	saas_code_context_free(c);
	free(text);
	snprintf(body, sizeof(body), "{\"code\": \"x\", \"context_id\": \"%s\"}", code_ctx);
	code_expect_raises(PARENT, body, "NameError");
	snprintf(body, sizeof(body), "{\"code\": \"import os\\nx = 'mine'\\nos.getcwd()\", \"context_id\": \"%s\"}",
	         code_ctx);
	code_expect_value(PARENT, body, "/tmp");
	code_expect_value(PARENT, "{\"code\": \"x + 1\"}", "42");
	text = code_call(PARENT, "GET", "/contexts", NULL);
	assert_non_null(strstr(text, code_ctx));
	free(text);

	/* JavaScript and bash: each language's default context keeps its variables. */
	code_expect_value(PARENT, "{\"language\": \"javascript\", \"code\": \"var j = 20\\nj\"}", "20");
	code_expect_raises(PARENT, "{\"language\": \"javascript\", \"code\": \"null.boom\"}", "TypeError");
	code_expect_value(PARENT, "{\"language\": \"bash\", \"code\": \"B=6\\ncd /tmp\"}", "");
	code_expect_value(PARENT, "{\"language\": \"bash\", \"code\": \"echo $((B * 7)) $PWD\"}", "42 /tmp");
	code_expect_state(PARENT, "42");
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	const char *images, *dir;
	saas_driver_env env;
	static char config[8192], driver_name[] = "driver";
	static const saas_vm_network isolated = { SAAS_NET_ISOLATED, NULL, NULL };
	unsigned char seed[8];
	FILE *f;

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	vmtest_state_parent_traversable(state_dir);
	if (sh("mkdir -p '%s'", state_dir) != 0)
		return -1;
	vmtest_own_qemus(state_dir);
	snprintf(config, sizeof(config), "images=%s templates=off boot_timeout=600", images);
	memset(&env, 0, sizeof(env));
	env.state_dir = state_dir;
	env.config = config;
	env.log = vmtest_log;
	env.log_userdata = driver_name;
	env.clock = vmtest_clock;
	if (drv->open(&ctx, &env) != SAAS_OK) {
		fprintf(stderr, "opening the libvirt driver: %s\n", saas_error_last()->message);
		ctx = NULL;
		return -1;
	}
	memset(&shape, 0, sizeof(shape));
	shape.name = PARENT;
	shape.image = image;
	shape.vcpus = 1;
	shape.memory_mb = 512;
	shape.disk_gb = with_disk ? 4 : 1;
	shape.network = &isolated;
	if (drv->vm_create(ctx, &shape) != SAAS_OK) {
		fprintf(stderr, "creating the VM: %s\n", saas_error_last()->message);
		return -1;
	}
	made[0] = PARENT;
	if (with_disk) {
		char disk[4400];
		snprintf(disk, sizeof(disk), "%s/libvirt/vms/%s/disk.qcow2", state_dir, PARENT);
		if ((depth0 = chain_depth(disk)) < 1) {
			fprintf(stderr, "cannot read the chain of %s\n", disk);
			return -1;
		}
	}
	if (!(f = fopen("/dev/urandom", "rb")) || fread(seed, 1, sizeof(seed), f) != sizeof(seed))
		return -1;
	fclose(f);
	snprintf(mark, sizeof(mark), "mark-%02x%02x%02x%02x%02x%02x%02x%02x", seed[0], seed[1], seed[2], seed[3], seed[4],
	         seed[5], seed[6], seed[7]);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (ctx) {
		for (size_t i = 0; i < SAAS_ARRAY_SIZE(made); i++)
			if (made[i])
				drv->vm_destroy(ctx, made[i]);
		drv->snapshot_delete(ctx, "t-fork");
		drv->snapshot_delete(ctx, "t-pause");
		drv->snapshot_delete(ctx, "t-pause-held");
		for (int i = 1; i <= CHAIN_FORKS; i++) {
			char snap[32];
			snprintf(snap, sizeof(snap), "t-chain-%d", i);
			drv->snapshot_delete(ctx, snap);
		}
		drv->close(ctx);
	}
	return 0;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/*
 * Fork: two VMs restored from the parent's snapshot while it runs on. Then
 * the snapshot is deleted while they run, and they run on.
 */
static void test_fork(void **state)
{
	char cmd[1024], rnd[3][65], boot[3][64];
	const char *const vms[3] = { PARENT, CHILD1, CHILD2 };
	int64_t bytes = 0, t0, fork_ms, restore_ms[2], both_ms;
	struct side_restores waiting;
	unsigned int uids[3];
	saas_driver_sample before, after;

	(void)state;
	/* vm_sample (driver version 10), on the VM this test has anyway: the host's view of it. */
	check(drv->vm_sample(ctx, PARENT, &before), "vm_sample");
	assert_int_equal(drv->vm_sample(ctx, "sbx-snap-none", &after), SAAS_ENOTFOUND);
	/* The file and the process the children must find, and a web server with the file to serve. */
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p /workspace/www && echo %s >/workspace/mark && cp /workspace/mark /workspace/www/mark && sync && "
	         "(setsid sleep 100000 </dev/null >/dev/null 2>&1 & echo $! >/workspace/sleeper.pid) && "
	         "if command -v python3 >/dev/null; then "
	         "setsid python3 -m http.server %d --directory /workspace/www </dev/null >/dev/null 2>&1 & "
	         "else setsid busybox httpd -f -p %d -h /workspace/www </dev/null >/dev/null 2>&1 & fi; "
	         "for i in $(seq 50); do nc -z 127.0.0.1 %d 2>/dev/null && break; sleep 0.2; done; echo ready",
	         mark, WEB_PORT, WEB_PORT, WEB_PORT);
	assert_string_equal(run(PARENT, cmd), "ready");
	assert_survived(PARENT);
	/* That work took CPU; the shape is the one made; what is held is within it. */
	check(drv->vm_sample(ctx, PARENT, &after), "vm_sample after work");
	assert_true(after.cpu_time_ns > before.cpu_time_ns);
	assert_int_equal(after.vcpus, 1);
	assert_true(after.memory_total == 512ull << 20);
	assert_true(after.memory_used > 0 && after.memory_used <= after.memory_total);
	assert_true(after.disk_total == 0 || after.disk_total == (uint64_t)(with_disk ? 4 : 1) << 30);
	assert_true(after.disk_used <= after.disk_total);
	/* Read before the fork, so that the kernel has one to carry into the children. */
	snprintf(boot[0], sizeof(boot[0]), "%s", run(PARENT, "cat /proc/sys/kernel/random/boot_id"));

	/*
	 * A fork whose snapshot fails while its children wait for it
	 * (snapshot_expect): they fail as for a snapshot that is not there,
	 * and leave nothing.
	 */
	{
		const char *late[1] = { "sbx-snap-late" };
		check(drv->snapshot_expect(ctx, "t-none", 1), "snapshot_expect");
		assert_int_equal(drv->snapshot_expect(ctx, "t-none", 1), SAAS_EINVAL);
		restores_begin(&waiting, late, 1, "t-none");
		assert_int_equal(drv->vm_snapshot(ctx, "sbx-snap-none", "t-none", 1, NULL), SAAS_ENOTFOUND);
		check(drv->snapshot_expect(ctx, "t-none", 0), "snapshot_expect 0");
		pthread_join(waiting.threads[0], NULL);
		assert_int_equal(waiting.r[0].rc, SAAS_ENOTFOUND);
		assert_int_equal(vm_state("sbx-snap-late"), SAAS_VM_ABSENT);
	}

	/*
	 * Both children begun before the snapshot is taken, as the core begins
	 * a fork's (snapshot_expect): each waits for it in the driver, and
	 * starts its VM while the parent's state is saved.
	 */
	check(drv->snapshot_expect(ctx, "t-fork", 1), "snapshot_expect");
	t0 = vmtest_now_ms();
	restores_begin(&waiting, vms + 1, 2, "t-fork");
	check(drv->vm_snapshot(ctx, PARENT, "t-fork", 1, &bytes), "vm_snapshot keep=1");
	fork_ms = vmtest_now_ms() - t0;
	check(drv->snapshot_expect(ctx, "t-fork", 0), "snapshot_expect 0");
	assert_true(bytes > 0);
	assert_true(listed("t-fork"));
	/* The parent paused only for the snapshot: it runs on, with all it had. */
	assert_int_equal(vm_state(PARENT), SAAS_VM_RUNNING);
	assert_survived(PARENT);
	/* A snapshot's name is the core's choice, once. */
	assert_int_equal(drv->vm_snapshot(ctx, PARENT, "t-fork", 1, NULL), SAAS_EINVAL);
	assert_int_equal(drv->vm_snapshot(ctx, PARENT, "Bad/Name", 1, NULL), SAAS_EINVAL);
	assert_int_equal(drv->vm_snapshot(ctx, "sbx-snap-none", "t-none", 1, NULL), SAAS_ENOTFOUND);

	/* Both children at once, as the core makes a fork's (SAAS_FORK_AT_ONCE): each its own VM, from the one snapshot. */
	restores_end(&waiting, vms + 1, restore_ms);
	both_ms = vmtest_now_ms() - t0;
	for (int i = 1; i < 3; i++)
		assert_true(logged(vms[i], "restored from snapshot t-fork"));
	for (int i = 0; i < 3; i++) {
		assert_survived(vms[i]);
		/* Each its own machine: its name, and random bytes of its own. */
		assert_string_equal(run(vms[i], "hostname"), vms[i]);
		urandom(vms[i], rnd[i]);
		if (i > 0)
			snprintf(boot[i], sizeof(boot[i]), "%s", run(vms[i], "cat /proc/sys/kernel/random/boot_id"));
		uids[i] = qemu_uid(vms[i]);
	}
	/*
	 * Each child's RAM is the snapshot's sealed memory, mapped copy-on-write
	 * as a template's clone maps its template's: of the guest RAM it has
	 * touched, most is still the snapshot's pages, not copies of its own. (A
	 * child that loaded the snapshot held its pages as its own.)
	 */
	if (logged("forks' memory is loaded by each child", NULL)) {
		printf("forks' memory is not mapped on this host: the children's is not checked\n");
	} else {
		assert_true(logged("forked as snapshot t-fork", "(mapped by its children)"));
		for (int i = 1; i < 3; i++) {
			assert_true(logged(vms[i], "begun while it was saved"));
			pid_t pid = qemu_pid(vms[i]);
			unsigned long long map_rss, map_anon;
			assert_true(pid > 0);
			assert_true(vmtest_memfd_of(pid, "aas-snapshot-ram") >= 0);
			assert_true(vmtest_memfd_of(pid, "aas-template-ram") < 0);
			vmtest_memfd_mapping_kib(pid, "aas-snapshot-ram", &map_rss, &map_anon);
			printf("child %d: guest RAM resident %llu KiB, of which copied %llu KiB; QEMU's Anonymous %llu KiB\n",
			       i, map_rss, map_anon, vmtest_rollup_kib(pid, "Anonymous:"));
			assert_true(map_rss > 0);
			assert_true(map_anon * 2 < map_rss);
		}
		/*
		 * While it stands, its RAM is whole only in the memory the children
		 * map: on storage its stream stays whole beside the split's state,
		 * and it is marked so (an engine without the memory makes the stream
		 * the state at its open: unit.libvirt's test_snapshot_unsplit).
		 */
		{
			char dir[4400];
			snprintf(dir, sizeof(dir), "%s/libvirt/snapshots/t-fork", state_dir);
			assert_true(file_size(dir, "splitting") == 0);
			assert_true(file_size(dir, "stream") > 0);
			assert_true(file_size(dir, "ram") < 0);
			assert_true(file_size(dir, "saving") < 0);
			assert_true(file_size(dir, "state") > 0);
		}
	}
	/* Every context and its variables are in each child, and a child's change is its own. */
	if (with_disk) {
		for (int i = 0; i < 3; i++)
			code_expect_state(vms[i], "42");
		code_expect_value(CHILD1, "{\"code\": \"x = 99\\nx + 1\"}", "100");
		code_expect_state(CHILD2, "42");
		code_expect_state(PARENT, "42");
	}
	assert_string_not_equal(rnd[0], rnd[1]);
	assert_string_not_equal(rnd[0], rnd[2]);
	assert_string_not_equal(rnd[1], rnd[2]);
	/* A boot_id the kernel made before the snapshot stays in its memory: vmgenid reseeds the RNG only. */
	printf("boot_id: parent %s, children %s %s (%s)\n", boot[0], boot[1], boot[2],
	       strcmp(boot[0], boot[1]) == 0 && strcmp(boot[1], boot[2]) == 0 ? "the same" : "different");
	/* A write in one is in no other. */
	run(CHILD1, "echo child1 >/workspace/own && sync");
	assert_string_equal(run(CHILD1, "cat /workspace/own"), "child1");
	assert_string_equal(run(CHILD2, "test -e /workspace/own && echo there || echo absent"), "absent");
	assert_string_equal(run(PARENT, "test -e /workspace/own && echo there || echo absent"), "absent");
	run(PARENT, "echo parent >/workspace/after && sync");
	assert_string_equal(run(CHILD2, "test -e /workspace/after && echo there || echo absent"), "absent");
	/* Confined: every VM's QEMU under a uid of its own. */
	if (geteuid() == 0 && uids[0]) {
		assert_int_not_equal(uids[0], 0);
		assert_int_not_equal(uids[0], uids[1]);
		assert_int_not_equal(uids[0], uids[2]);
		assert_int_not_equal(uids[1], uids[2]);
	} else {
		printf("not confined (not root, or no QEMU uids here): uids not compared\n");
	}

	/* Deleted while both run: they run on, and it is neither listed nor restored again. */
	check(drv->snapshot_delete(ctx, "t-fork"), "snapshot_delete");
	assert_false(listed("t-fork"));
	{
		saas_vm_spec spec = shape;
		spec.name = "sbx-snap-late";
		assert_int_equal(drv->vm_restore(ctx, &spec, "t-fork"), SAAS_ENOTFOUND);
		assert_int_equal(vm_state("sbx-snap-late"), SAAS_VM_ABSENT);
	}
	check(drv->snapshot_delete(ctx, "t-fork"), "snapshot_delete again");
	assert_string_equal(run(CHILD1, "cat /workspace/own"), "child1");
	assert_survived(CHILD2);
	/* With a disk, its frozen disk stays while a VM backs onto it (the parent does, too). */
	if (with_disk)
		assert_true(kept("t-fork"));
	else
		assert_false(kept("t-fork"));
	destroy(CHILD1);
	destroy(CHILD2);
	assert_survived(PARENT);
	printf("fork: snapshot %lld ms (%lld MiB), restores side by side %lld and %lld ms, both %lld ms (load: ",
	       (long long)fork_ms, (long long)(bytes >> 20), (long long)restore_ms[0], (long long)restore_ms[1],
	       (long long)both_ms);
	fflush(stdout);
	sh("cut -d' ' -f1-3 /proc/loadavg | tr -d '\\n'");
	printf(")\n");
}

/*
 * A parent forked again and again (with a disk): its disk chain stays as
 * deep as a new VM's, as the merge after each fork leaves it. The first
 * fork's child, restored only after every later merge, still has the disk
 * of its fork's moment, as the last fork's child has its own; the parent
 * keeps what it wrote after each fork; and each snapshot's files go once its
 * children do (at once for a fork without any), while the parent runs on.
 */
static void test_fork_chain(void **state)
{
	char snap[32], cmd[256], want[64];
	int fds_first = -1;

	(void)state;
	if (!with_disk) {
		printf("no disk to chain (the tiny image runs from its initramfs)\n");
		return;
	}
	for (int i = 1; i <= CHAIN_FORKS; i++) {
		snprintf(snap, sizeof(snap), "t-chain-%d", i);
		snprintf(cmd, sizeof(cmd), "echo gen-%d >/workspace/gen && sync", i);
		run(PARENT, cmd);
		check(drv->vm_snapshot(ctx, PARENT, snap, 1, NULL), "vm_snapshot keep=1");
		/* Written while the merge may be running: the parent's own from now on. */
		snprintf(cmd, sizeof(cmd), "echo after-%d >/workspace/after-gen && sync", i);
		run(PARENT, cmd);
		assert_int_equal(parent_depth_settled(snap), depth0);
		if (i == 1)
			fds_first = qcow2_fds(PARENT);
		if (i > 1 && i < CHAIN_FORKS) {
			/* A fork whose children are gone (none here): deleted, nothing backs onto it any more. */
			check(drv->snapshot_delete(ctx, snap), "snapshot_delete");
			assert_false(kept(snap));
		}
	}
	/* Restored after the later merges of the parent: the frozen disks are as their forks left them. */
	restore(CHILD1, "t-chain-1", 1);
	snprintf(snap, sizeof(snap), "t-chain-%d", CHAIN_FORKS);
	restore(CHILD2, snap, 2);
	assert_string_equal(run(CHILD1, "echo $(cat /workspace/gen) $(cat /workspace/after-gen 2>/dev/null || echo none)"),
	                    "gen-1 none");
	snprintf(want, sizeof(want), "gen-%d after-%d", CHAIN_FORKS, CHAIN_FORKS - 1);
	assert_string_equal(run(CHILD2, "echo $(cat /workspace/gen /workspace/after-gen)"), want);
	check(drv->snapshot_delete(ctx, "t-chain-1"), "snapshot_delete");
	check(drv->snapshot_delete(ctx, snap), "snapshot_delete");
	snprintf(want, sizeof(want), "gen-%d after-%d", CHAIN_FORKS, CHAIN_FORKS);
	assert_string_equal(run(PARENT, "echo $(cat /workspace/gen /workspace/after-gen)"), want);
	assert_survived(PARENT);
	/* QEMU holds no more of the parent's files after the last fork than after the first. */
	if (geteuid() == 0 && fds_first > 0)
		assert_int_equal(qcow2_fds(PARENT), fds_first);
	/* Each fork's files go with its last child, while the parent runs on. */
	assert_true(kept("t-chain-1"));
	destroy(CHILD1);
	assert_false(kept("t-chain-1"));
	assert_false(kept("t-fork"));
	assert_true(kept(snap));
	destroy(CHILD2);
	assert_false(kept(snap));
	assert_int_equal(vm_state(PARENT), SAAS_VM_RUNNING);
	printf("parent's chain: %d files after %d forks (a new VM's: %d); QEMU holds %d disk files\n",
	       chain_depth(parent_top(snap)), CHAIN_FORKS + 1, depth0, qcow2_fds(PARENT));
}

/* A command held by a thread (as the server's background executions are) until it ends or its connection does. */
struct held {
	const char *vm, *cmd;
	int rc;
};

static void *held_main(void *arg)
{
	struct held *h = arg;
	char out[256];
	int code = -1;

	h->rc = vmtest_driver_exec(drv, ctx, h->vm, h->cmd, 600000, &code, out, sizeof(out));
	return NULL;
}

/*
 * A command on the control port outlives a pause, as one over SSH does. The
 * VM just resumed has no SSH session yet: a `yes` started now goes over the
 * port (the helper is its parent), held by a thread; the pause ends its
 * connection (the thread's call fails), and after the resume it runs on,
 * and the port serves again at once: the fix-ups and the next command went
 * over it, which the helper, still carrying the lost command, would not
 * have read as requests (until 2026-12 their first bytes broke its stream
 * and it killed the command: the fix-ups fell back to SSH). It writes all
 * the while: the helper has its output under way at the pause, and sends
 * the rest to the resume's fix-ups before it reads their request, which the
 * engine must pass over to find its answer (until 2026-12 it read that
 * output as the answer, and the fix-ups went over SSH).
 */
static void pause_with_port_command(void)
{
	/* Static: a failed assertion leaves the thread running (until teardown destroys the VM), writing here. */
	static struct held h = { PARENT, "echo $$ >/workspace/held.pid && exec yes held", 0 };
	char pid[32], cmd[200];
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, held_main, &h), 0);
	/*
	 * Its head start: it takes the port before it reaches the guest, and the
	 * polls below go over SSH then (which brings the session up: no second
	 * try would find the port again, so a starved thread fails here).
	 */
	usleep(500000);
	for (int i = 0; i < 300 && !run(PARENT, "cat /workspace/held.pid 2>/dev/null || true")[0]; i++)
		usleep(100000);
	snprintf(pid, sizeof(pid), "%s", run(PARENT, "cat /workspace/held.pid"));
	assert_true(pid[0] >= '1' && pid[0] <= '9');
	/* The command, and its parent the helper (`control`): it is on the port. */
	snprintf(cmd, sizeof(cmd), "cat /proc/%s/comm /proc/$(cut -d' ' -f4 /proc/%s/stat)/comm | tr '\\n' ' '", pid, pid);
	assert_string_equal(run(PARENT, cmd), "yes control ");
	check(drv->vm_snapshot(ctx, PARENT, "t-pause-held", 0, NULL), "vm_snapshot keep=0 with a command on the port");
	made[0] = NULL;
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(h.rc < 0);
	vmtest_log_reset();
	restore(PARENT, "t-pause-held", 0);
	snprintf(cmd, sizeof(cmd), "kill -0 %s && cat /proc/%s/comm", pid, pid);
	assert_string_equal(run(PARENT, cmd), "yes");
	assert_true(logged(PARENT, "its commands go over the control port"));
	assert_false(logged(PARENT, "fix-ups over SSH instead"));
	/* It writes until killed (its output dropped by the helper's drainer): its CPU is the tests' after. */
	snprintf(cmd, sizeof(cmd), "kill %s", pid);
	run(PARENT, cmd);
	check(drv->snapshot_delete(ctx, "t-pause-held"), "snapshot_delete");
}

/*
 * A pause that fails once the VM is paused: a tmpfs of 1 MiB over the
 * snapshots' directory (as root). Without a disk the save fills it up and
 * fails (its migration over: cancelled); with one, the disk's freeze (a hard
 * link into the snapshot) fails first, across filesystems. Either way the
 * pause fails saying why, nothing of the snapshot is left, and the VM runs
 * on with all it had.
 */
static void pause_fails_on_full_storage(void)
{
	char snaps[4200];
	int rc;

	if (geteuid() != 0) {
		printf("not root: a save that fails on a full filesystem is not tested (it mounts a tmpfs)\n");
		return;
	}
	snprintf(snaps, sizeof(snaps), "%s/libvirt/snapshots", state_dir);
	if (mount("aas-test-full", snaps, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0700") != 0)
		fail_msg("mount a tmpfs on %s: %s", snaps, strerror(errno));
	rc = drv->vm_snapshot(ctx, PARENT, "t-full", 0, NULL);
	if (umount2(snaps, MNT_DETACH) != 0)
		fail_msg("umount %s: %s", snaps, strerror(errno));
	assert_true(rc < 0);
	if (!strstr(saas_error_last()->message, with_disk ? "freezing the VM's disk" : "saving the VM's state"))
		fail_msg("the failed pause said: %s", saas_error_last()->message);
	assert_int_equal(vm_state(PARENT), SAAS_VM_RUNNING);
	assert_survived(PARENT);
	assert_false(listed("t-full"));
	assert_false(kept("t-full"));
}

/*
 * A writer that grows a save's file, as an escaped QEMU could: once the
 * file of snapshot snap is there, it is made 64 GiB long (sparse).
 */
struct grower {
	const char *snap;
	volatile int stop;
	int grown;
};

static void *grower_main(void *arg)
{
	static const char *const files[] = { ".tmp/stream", ".tmp/state", "/stream", "/state" };
	struct grower *g = arg;
	char path[4300];

	while (!g->stop && !g->grown) {
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && !g->grown; i++) {
			int fd;
			snprintf(path, sizeof(path), "%s/libvirt/snapshots/%s%s", state_dir, g->snap, files[i]);
			if ((fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
				continue;
			g->grown = ftruncate(fd, (off_t)64 << 30) == 0;
			close(fd);
		}
		usleep(500);
	}
	return NULL;
}

/*
 * A pause whose saved state grows past its bound (the guest's RAM and
 * STATE_MARGIN_MIB): the grower above, run real-time (as root) so that it
 * acts while the save goes on (at least ~100 ms of QEMU's writes), makes the
 * file 64 GiB long. The save is cancelled, the pause fails saying why, the
 * VM runs on with all it had, and nothing of the snapshot is left.
 */
static void pause_fails_past_its_bound(void)
{
	struct grower g = { "t-big", 0, 0 };
	struct sched_param prio = { .sched_priority = 1 };
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (geteuid() != 0) {
		printf("not root: a save grown past its bound is not tested (its writer runs real-time)\n");
		return;
	}
	assert_int_equal(pthread_attr_init(&attr), 0);
	assert_int_equal(pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED), 0);
	assert_int_equal(pthread_attr_setschedpolicy(&attr, SCHED_FIFO), 0);
	assert_int_equal(pthread_attr_setschedparam(&attr, &prio), 0);
	assert_int_equal(pthread_create(&t, &attr, grower_main, &g), 0);
	pthread_attr_destroy(&attr);
	rc = drv->vm_snapshot(ctx, PARENT, g.snap, 0, NULL);
	g.stop = 1;
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(g.grown);
	assert_true(rc < 0);
	if (!strstr(saas_error_last()->message, "grew past its bound"))
		fail_msg("the pause grown past its bound said: %s", saas_error_last()->message);
	assert_int_equal(vm_state(PARENT), SAAS_VM_RUNNING);
	assert_survived(PARENT);
	assert_false(listed(g.snap));
	assert_false(kept(g.snap));
}

/* Pause and resume: the VM gone into its snapshot, then restored under its own name. */
static void test_pause_resume(void **state)
{
	int64_t bytes = 0, t0, pause_ms, resume_ms;

	(void)state;
	pause_fails_on_full_storage();
	pause_fails_past_its_bound();
	t0 = vmtest_now_ms();
	check(drv->vm_snapshot(ctx, PARENT, "t-pause", 0, &bytes), "vm_snapshot keep=0");
	pause_ms = vmtest_now_ms() - t0;
	made[0] = NULL;
	assert_int_equal(vm_state(PARENT), SAAS_VM_ABSENT);
	assert_int_equal(qemu_pid(PARENT), 0);
	assert_true(listed("t-pause"));
	/* A pause's RAM stays in its state: mapped, it would stay in the host's memory while the sandbox is paused. */
	assert_true(logged("paused as snapshot t-pause", "(loaded by its resume)"));
	t0 = vmtest_now_ms();
	restore(PARENT, "t-pause", 0);
	resume_ms = vmtest_now_ms() - t0;
	/* First, while it has no SSH session (the end of assert_survived's port connection makes one). */
	pause_with_port_command();
	assert_survived(PARENT);
	assert_string_equal(run(PARENT, "cat /workspace/after"), "parent");
	assert_string_equal(run(PARENT, "hostname"), PARENT);
	if (with_disk)
		code_expect_state(PARENT, "42");
	/* A snapshot restores again (a fork of N does): deleted, it does not. */
	check(drv->snapshot_delete(ctx, "t-pause"), "snapshot_delete");
	assert_false(listed("t-pause"));
	destroy(PARENT);
	/* Everything is gone: no snapshot is left, deleted or half-written, and no VM's directory. */
	assert_false(kept("t-pause"));
	assert_false(kept("t-fork"));
	assert_int_equal(sh("test -z \"$(ls -A '%s/libvirt/snapshots')$(ls -A '%s/libvirt/vms')\"", state_dir, state_dir), 0);
	printf("pause: %lld ms, %lld MiB on storage (%lld MiB per GiB of guest RAM); resume: %lld ms (load: ",
	       (long long)pause_ms, (long long)(bytes >> 20), (long long)((bytes >> 20) * 1024 / shape.memory_mb),
	       (long long)resume_ms);
	fflush(stdout);
	sh("cut -d' ' -f1-3 /proc/loadavg | tr -d '\\n'");
	printf(")\n");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_code),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_fork_chain),
		cmocka_unit_test(test_pause_resume),
	};

	if (argc > 1 && strcmp(argv[1], "disk") == 0) {
		with_disk = true;
		image = "default";
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
