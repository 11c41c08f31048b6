#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake/fake_driver.h"
#include "saas/sys/error.h"

#define MAX_VMS 256
#define MAX_FILES 256
#define MAX_SNAPS 64
#define MAX_TEMPLATES 32

struct file {
	char vm[SAAS_ID_MAX + 1];
	char *path;
	unsigned char *data;
	size_t len;
	unsigned int mode;
	unsigned long gen;               /* which write made it (a watcher sees a change) */
	bool dir;            /* a directory file_mkdir made; other directories are implied by the files under them */
};

struct vm {
	char name[SAAS_ID_MAX + 1];
	int state;
	/* Its egress as last given (-1: none since the driver opened), "allow|deny" rules. */
	int net_mode;
	char net_rules[4096];
	saas_vm_network_stats stats;
	char image[64];
	int outdated;                    /* its image was "rebuilt" since (saas_fake_image_rebuilt) */
	unsigned int execs;              /* commands run in it (saas_fake_vm_execs) */
	unsigned int vcpus, memory_mb, disk_gb; /* its shape, for vm_sample */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct vm vms[MAX_VMS];
static struct file files[MAX_FILES];
static unsigned int fail_creates, busy_creates, create_calls, fail_execs;
static unsigned long file_gen;
/* A VM "started ahead" (vm_take): its name, whether a create took it, and whether it is gone. */
static char ahead[SAAS_ID_MAX + 1];
static int ahead_state; /* 0 none, 1 held, 2 taken */
static int refuse_internet;
static int default_mode = SAAS_NET_ISOLATED;
static unsigned int fail_network_sets;
static int network_set_enotsup;
static saas_fake_create_fn on_create;
static void *on_create_ud;
/* Templates as template_list reports them: one per image and shape made, or as a test set it. */
static struct {
	char image[64];
	saas_driver_template t;
} templates[MAX_TEMPLATES];
static unsigned int ntemplates;

/* A snapshot: its files are kept in `files` under the owner "=NAME", which no VM name can be. */
struct snap {
	char name[SAAS_ID_MAX];
	bool used;
};
static struct snap snaps[MAX_SNAPS];
static unsigned int fail_snapshots, fail_restores, busy_restores, snapshot_calls, restore_calls;
/* Restores under way at once (saas_fake_restore_gate): the most seen, and the hold. */
static unsigned int fail_restore_nth, restores_now, restores_peak, gate_n;
static unsigned long gate_opened;      /* how many times gate_n were under way: those held then go */
static int gate_wait_ms;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
/*
 * Snapshots said to be coming (snapshot_expect): a restore of one waits
 * until it is taken or no longer expected. A snapshot may be held until
 * hold_n restores wait for it (saas_fake_snapshot_hold), for a test that
 * must know its children were begun before it.
 */
static char expected[4][SAAS_ID_MAX];
static unsigned int restores_waiting, restores_waited, hold_n;
static int hold_wait_ms;
static pthread_cond_t snap_cv = PTHREAD_COND_INITIALIZER;

/*
 * Shared mode (saas_fake_shared): a VM exists while a file of its name does
 * in this directory, so that several server processes on one store see the
 * same VMs, as engines sharing VM hosts do. The records in memory then only
 * cache what the directory says; files written to a VM stay per process.
 */
static char shared_dir[512];

static bool shared_path(char *out, size_t size, const char *name)
{
	int n = snprintf(out, size, "%s/%s", shared_dir, name);

	return n > 0 && (size_t)n < size && !strchr(name, '/');
}

static void drop_files(const char *vm);

static struct vm *find_vm(const char *name)
{
	char path[600];
	int i, free_slot = -1;

	for (i = 0; i < MAX_VMS; i++) {
		if (vms[i].state != SAAS_VM_ABSENT && strcmp(vms[i].name, name) == 0)
			break;
		if (free_slot < 0 && vms[i].state == SAAS_VM_ABSENT)
			free_slot = i;
	}
	if (!shared_dir[0])
		return i < MAX_VMS ? &vms[i] : NULL;
	if (!shared_path(path, sizeof(path), name) || access(path, F_OK) != 0) {
		/* Destroyed through another process. */
		if (i < MAX_VMS) {
			vms[i].state = SAAS_VM_ABSENT;
			drop_files(name);
		}
		return NULL;
	}
	if (i < MAX_VMS)
		return &vms[i];
	/* Made through another process: it runs, with the driver's default network. */
	if (free_slot < 0)
		return NULL;
	memset(&vms[free_slot], 0, sizeof(vms[free_slot]));
	snprintf(vms[free_slot].name, sizeof(vms[free_slot].name), "%s", name);
	vms[free_slot].state = SAAS_VM_RUNNING;
	vms[free_slot].net_mode = -1;
	return &vms[free_slot];
}

void saas_fake_shared(const char *dir)
{
	pthread_mutex_lock(&mu);
	snprintf(shared_dir, sizeof(shared_dir), "%s", dir ? dir : "");
	pthread_mutex_unlock(&mu);
}

static struct file *find_file(const char *vm, const char *path)
{
	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && strcmp(files[i].vm, vm) == 0 && strcmp(files[i].path, path) == 0)
			return &files[i];
	return NULL;
}

static void drop_files(const char *vm)
{
	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && strcmp(files[i].vm, vm) == 0) {
			free(files[i].path);
			free(files[i].data);
			memset(&files[i], 0, sizeof(files[i]));
		}
}

/* Every file, snapshots' too; mu held. */
static void forget_files(void)
{
	for (int i = 0; i < MAX_FILES; i++) {
		free(files[i].path);
		free(files[i].data);
	}
	memset(files, 0, sizeof(files));
}

void saas_fake_forget_files(void)
{
	pthread_mutex_lock(&mu);
	forget_files();
	pthread_mutex_unlock(&mu);
}

void saas_fake_reset(void)
{
	pthread_mutex_lock(&mu);
	forget_files();
	memset(vms, 0, sizeof(vms));
	fail_creates = busy_creates = create_calls = fail_execs = 0;
	refuse_internet = 0;
	default_mode = SAAS_NET_ISOLATED;
	fail_network_sets = 0;
	network_set_enotsup = 0;
	on_create = NULL;
	on_create_ud = NULL;
	memset(snaps, 0, sizeof(snaps));
	fail_snapshots = fail_restores = busy_restores = snapshot_calls = restore_calls = 0;
	fail_restore_nth = restores_now = restores_peak = gate_n = 0;
	gate_wait_ms = 0;
	memset(expected, 0, sizeof(expected));
	restores_waiting = restores_waited = hold_n = 0;
	hold_wait_ms = 0;
	memset(templates, 0, sizeof(templates));
	ntemplates = 0;
	ahead[0] = '\0';
	ahead_state = 0;
	pthread_mutex_unlock(&mu);
}

void saas_fake_ahead(const char *name)
{
	pthread_mutex_lock(&mu);
	snprintf(ahead, sizeof(ahead), "%s", name);
	ahead_state = 1;
	pthread_mutex_unlock(&mu);
}

int saas_fake_ahead_state(void)
{
	int state;

	pthread_mutex_lock(&mu);
	state = ahead_state;
	pthread_mutex_unlock(&mu);
	return state;
}

/* The one VM started ahead, for any shape of the default network. */
static int fake_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size)
{
	int taken = 0;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if (ahead_state == 1 && !spec->network && spec->image && spec->vcpus) {
		snprintf(name, size, "%s", ahead);
		ahead_state = 2;
		taken = 1;
	}
	pthread_mutex_unlock(&mu);
	return taken;
}

/* Set the template of image and shape (added if new; the table holds MAX_TEMPLATES). Caller holds mu. */
static void template_set_locked(const char *image, unsigned int vcpus, unsigned int memory_mb, unsigned int disk_gb,
                                int state, int64_t state_bytes)
{
	unsigned int i;

	for (i = 0; i < ntemplates; i++)
		if (strcmp(templates[i].image, image) == 0 && templates[i].t.vcpus == vcpus &&
		    templates[i].t.memory_mb == memory_mb && templates[i].t.disk_gb == disk_gb)
			break;
	if (i == MAX_TEMPLATES)
		return;
	if (i == ntemplates)
		ntemplates++;
	snprintf(templates[i].image, sizeof(templates[i].image), "%s", image);
	templates[i].t.image = templates[i].image;
	templates[i].t.vcpus = vcpus;
	templates[i].t.memory_mb = memory_mb;
	templates[i].t.disk_gb = disk_gb;
	templates[i].t.state = state;
	templates[i].t.state_bytes = state_bytes;
}

void saas_fake_template_set(const char *image, unsigned int vcpus, unsigned int memory_mb, unsigned int disk_gb,
                            int state, int64_t state_bytes)
{
	pthread_mutex_lock(&mu);
	template_set_locked(image, vcpus, memory_mb, disk_gb, state, state_bytes);
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_vm_count(void)
{
	unsigned int n = 0;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMS; i++)
		n += vms[i].state != SAAS_VM_ABSENT;
	pthread_mutex_unlock(&mu);
	return n;
}

int saas_fake_vm_exists(const char *name)
{
	int found;

	pthread_mutex_lock(&mu);
	found = find_vm(name) != NULL;
	pthread_mutex_unlock(&mu);
	return found;
}

void saas_fake_fail_creates(unsigned int n)
{
	pthread_mutex_lock(&mu);
	fail_creates = n;
	pthread_mutex_unlock(&mu);
}

void saas_fake_busy_creates(unsigned int n)
{
	pthread_mutex_lock(&mu);
	busy_creates = n;
	pthread_mutex_unlock(&mu);
}

void saas_fake_fail_execs(unsigned int n)
{
	pthread_mutex_lock(&mu);
	fail_execs = n;
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_vm_execs(const char *name)
{
	struct vm *v;
	unsigned int n;

	pthread_mutex_lock(&mu);
	v = find_vm(name);
	n = v ? v->execs : 0;
	pthread_mutex_unlock(&mu);
	return n;
}

void saas_fake_refuse_internet(int on)
{
	pthread_mutex_lock(&mu);
	refuse_internet = on;
	pthread_mutex_unlock(&mu);
}

void saas_fake_on_create(saas_fake_create_fn fn, void *userdata)
{
	pthread_mutex_lock(&mu);
	on_create = fn;
	on_create_ud = userdata;
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_create_calls(void)
{
	unsigned int n;

	pthread_mutex_lock(&mu);
	n = create_calls;
	pthread_mutex_unlock(&mu);
	return n;
}

void saas_fake_vm_stop(const char *name)
{
	struct vm *v;

	pthread_mutex_lock(&mu);
	if ((v = find_vm(name)))
		v->state = SAAS_VM_STOPPED;
	pthread_mutex_unlock(&mu);
}

void saas_fake_image_rebuilt(const char *image)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMS; i++)
		if (vms[i].state != SAAS_VM_ABSENT && strcmp(vms[i].image, image) == 0)
			vms[i].outdated = 1;
	pthread_mutex_unlock(&mu);
}

static int fake_outdated(void *ctx, const char *name, int *outdated)
{
	struct vm *v;

	(void)ctx;
	pthread_mutex_lock(&mu);
	*outdated = (v = find_vm(name)) && v->outdated;
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

/* "allow a,b deny c" into v: what a test reads back with saas_fake_vm_network. */
static void net_store(struct vm *v, const saas_vm_network *net)
{
	size_t n = 0;

	v->net_mode = net ? net->mode : default_mode;
	v->net_rules[0] = '\0';
	for (int l = 0; net && l < 2; l++) {
		const char *const *rules = l ? net->deny : net->allow;

		n += (size_t)snprintf(v->net_rules + n, sizeof(v->net_rules) - n, "%s", l ? " deny " : "allow ");
		for (size_t i = 0; rules && rules[i] && n < sizeof(v->net_rules); i++)
			n += (size_t)snprintf(v->net_rules + n, sizeof(v->net_rules) - n, "%s%s", i ? "," : "", rules[i]);
		if (n >= sizeof(v->net_rules))
			n = sizeof(v->net_rules) - 1;
	}
}

static void shape_set(struct vm *v, const saas_vm_spec *spec)
{
	v->vcpus = spec->vcpus;
	v->memory_mb = spec->memory_mb;
	v->disk_gb = spec->disk_gb;
}

static int add_vm_locked(const char *name, const saas_vm_network *net)
{
	char path[600];
	int fd;

	/* Exclusive, as a hypervisor refuses a second domain of one name. */
	if (shared_dir[0]) {
		if (!shared_path(path, sizeof(path), name))
			return SAAS_EINVAL;
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
			return errno == EEXIST ? SAAS_EEXISTS : SAAS_EIO;
		close(fd);
	}
	for (int i = 0; i < MAX_VMS; i++)
		if (vms[i].state == SAAS_VM_ABSENT) {
			memset(&vms[i], 0, sizeof(vms[i]));
			snprintf(vms[i].name, sizeof(vms[i].name), "%s", name);
			vms[i].state = SAAS_VM_RUNNING;
			net_store(&vms[i], net);
			return SAAS_OK;
		}
	return SAAS_EBACKEND;
}

void saas_fake_network_default(int mode)
{
	pthread_mutex_lock(&mu);
	default_mode = mode;
	pthread_mutex_unlock(&mu);
}

void saas_fake_fail_network_sets(unsigned int n, int enotsup)
{
	pthread_mutex_lock(&mu);
	fail_network_sets = n;
	network_set_enotsup = enotsup;
	pthread_mutex_unlock(&mu);
}

int saas_fake_vm_network(const char *name, char *rules, size_t size)
{
	struct vm *v;
	int mode = -2;

	pthread_mutex_lock(&mu);
	if ((v = find_vm(name))) {
		mode = v->net_mode;
		snprintf(rules, size, "%s", v->net_mode == SAAS_NET_POLICY ? v->net_rules : "");
	}
	pthread_mutex_unlock(&mu);
	return mode;
}

void saas_fake_vm_denied(const char *name, int64_t connections, int64_t lookups)
{
	struct vm *v;

	pthread_mutex_lock(&mu);
	if ((v = find_vm(name))) {
		v->stats.denied_connections += connections;
		v->stats.denied_lookups += lookups;
	}
	pthread_mutex_unlock(&mu);
}

void saas_fake_vm_add(const char *name)
{
	pthread_mutex_lock(&mu);
	add_vm_locked(name, NULL);
	pthread_mutex_unlock(&mu);
}

static int fake_open(void **ctx, const saas_driver_env *env)
{
	(void)env;
	*ctx = NULL;
	/*
	 * As a real driver: the VMs run on, their policies were the last engine's
	 * and are gone, and so are its counters (this one counts from zero).
	 */
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMS; i++) {
		if (vms[i].state != SAAS_VM_ABSENT && vms[i].net_mode == SAAS_NET_POLICY)
			vms[i].net_mode = -1;
		memset(&vms[i].stats, 0, sizeof(vms[i].stats));
	}
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

static void fake_close(void *ctx)
{
	(void)ctx;
}

static int fake_create(void *ctx, const saas_vm_spec *spec)
{
	saas_fake_create_fn fn;
	void *ud;
	int rc;

	(void)ctx;
	pthread_mutex_lock(&mu);
	create_calls++;
	if (fail_creates > 0) {
		fail_creates--;
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: this create fails as the test asked");
	}
	if (busy_creates > 0) {
		busy_creates--;
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
		                          "fake: every QEMU uid of the range 70000-70063 is in use; 312 MiB of memory free");
	}
	if (refuse_internet && spec->network && spec->network->mode != SAAS_NET_ISOLATED) {
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "fake: internet access cannot be guarded here");
	}
	/* The VM started ahead under this name is made now: no longer the driver's to let go. */
	if (ahead_state == 2 && strcmp(ahead, spec->name) == 0)
		ahead_state = 0;
	rc = find_vm(spec->name) ? SAAS_EEXISTS : add_vm_locked(spec->name, spec->network);
	if (rc == SAAS_OK) {
		snprintf(find_vm(spec->name)->image, sizeof(vms[0].image), "%s", spec->image ? spec->image : "");
		shape_set(find_vm(spec->name), spec);
	}
	/* Its shape's template, ready at once (as if saved from this VM: its memory's worth of state). */
	if (rc == SAAS_OK) {
		unsigned int i;
		for (i = 0; i < ntemplates; i++)
			if (strcmp(templates[i].image, spec->image) == 0 && templates[i].t.vcpus == spec->vcpus &&
			    templates[i].t.memory_mb == spec->memory_mb && templates[i].t.disk_gb == spec->disk_gb)
				break;
		if (i == ntemplates)
			template_set_locked(spec->image, spec->vcpus, spec->memory_mb, spec->disk_gb, SAAS_TEMPLATE_READY,
			                    (int64_t)spec->memory_mb << 20);
	}
	fn = on_create;
	ud = on_create_ud;
	pthread_mutex_unlock(&mu);
	if (rc == SAAS_OK && fn)
		fn(ud, spec);
	return rc;
}

static int fake_destroy(void *ctx, const char *name)
{
	struct vm *v;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if (ahead_state && strcmp(ahead, name) == 0)
		ahead_state = 0;
	if ((v = find_vm(name))) {
		char path[600];
		v->state = SAAS_VM_ABSENT;
		drop_files(name);
		if (shared_dir[0] && shared_path(path, sizeof(path), name))
			unlink(path);
	}
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

static int fake_state(void *ctx, const char *name, int *state)
{
	struct vm *v;

	(void)ctx;
	pthread_mutex_lock(&mu);
	v = find_vm(name);
	*state = v ? v->state : SAAS_VM_ABSENT;
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

static int fake_list(void *ctx, saas_name_fn fn, void *ud)
{
	char names[MAX_VMS][SAAS_ID_MAX + 1];
	int n = 0;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if (shared_dir[0]) {
		DIR *d = opendir(shared_dir);
		struct dirent *de;
		while (d && n < MAX_VMS && (de = readdir(d)))
			if (de->d_name[0] != '.' && strlen(de->d_name) <= SAAS_ID_MAX)
				snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
		if (d)
			closedir(d);
	} else {
		for (int i = 0; i < MAX_VMS; i++)
			if (vms[i].state != SAAS_VM_ABSENT)
				memcpy(names[n++], vms[i].name, sizeof(names[0]));
	}
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < n; i++)
		if (fn(ud, names[i]))
			break;
	return SAAS_OK;
}

static int running(const char *name)
{
	struct vm *v;
	int ok;

	pthread_mutex_lock(&mu);
	v = find_vm(name);
	ok = v && v->state == SAAS_VM_RUNNING;
	pthread_mutex_unlock(&mu);
	return ok;
}

/*
 * A command that runs until told: echoes its input (echo) until its end, and
 * ends at a signal but `ignored` (128+N, as a shell reports it), a cancel
 * (SAAS_EIO) or the VM's end, as the SSH transport does.
 */
static int fake_running(const char *name, const saas_driver_exec *req, int *exit_code, bool echo, int ignored)
{
	char buf[4096];

	for (;;) {
		int group, sig = req->control ? req->control(req->control_userdata, &group) : 0;
		long n = echo && req->input ? req->input(req->control_userdata, buf, sizeof(buf)) : 0;
		if (sig < 0 || __atomic_load_n(req->cancel, __ATOMIC_SEQ_CST) || !running(name))
			return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "fake: cancelled");
		if (sig > 0 && sig != ignored) {
			*exit_code = 128 + sig;
			return SAAS_OK;
		}
		if (n > 0)
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, buf, (size_t)n);
		else if (n < 0)
			return SAAS_OK;
		else
			usleep(1000);
	}
}

/*
 * The E2B face's directory watcher (server/e2b/watch.c): `exec python3 -c
 * '<watcher>' '<dir>' 0|1`, played on the fake's files as the real one
 * plays inotify: "E notfound" for a directory that has no file and is not
 * a writable root, "E notdir" for a file, else "S", then a line per change
 * seen by polling (a new file: create and write; a new write: write; a
 * file gone: remove), names relative to the directory in hex, until a
 * signal, a cancel or the VM's end.
 */
#define WATCH_FILES MAX_FILES

static void watch_line(const saas_driver_exec *req, char type, const char *rel)
{
	char line[2 * 512 + 4];
	size_t k = 0;

	line[k++] = type;
	line[k++] = ' ';
	for (const char *p = rel; *p && k + 3 < sizeof(line); p++)
		k += (size_t)snprintf(line + k, sizeof(line) - k, "%02x", (unsigned char)*p);
	line[k++] = '\n';
	req->output(req->output_userdata, SAAS_STREAM_STDOUT, line, k);
}

static int fake_watch(const char *name, const char *args, const saas_driver_exec *req, int *exit_code)
{
	struct seen {
		char rel[512];
		unsigned long gen;
	} *was = calloc(WATCH_FILES, sizeof(*was)), *now = calloc(WATCH_FILES, sizeof(*now));
	char dir[512];
	size_t k = 0, nwas = 0;
	bool recursive, started = false;
	int rc = SAAS_OK;

	/* The directory, out of its shell quoting ('\'' is a quote). */
	while (*args && k + 1 < sizeof(dir)) {
		if (strncmp(args, "'\\''", 4) == 0) {
			dir[k++] = '\'';
			args += 4;
		} else if (*args == '\'') {
			break;
		} else {
			dir[k++] = *args++;
		}
	}
	dir[k] = '\0';
	recursive = strcmp(args, "' 1") == 0;
	if (!was || !now) {
		free(was);
		free(now);
		return SAAS_ENOMEM;
	}
	for (;;) {
		int group, sig = req->control ? req->control(req->control_userdata, &group) : 0;
		bool exists = strcmp(dir, "/workspace") == 0 || strcmp(dir, "/tmp") == 0 ||
		              strcmp(dir, "/home/sandbox") == 0, isfile = false;
		size_t nnow = 0;

		if (sig < 0 || __atomic_load_n(req->cancel, __ATOMIC_SEQ_CST) || !running(name)) {
			rc = saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "fake: cancelled");
			break;
		}
		if (sig > 0) {
			*exit_code = 128 + sig;
			break;
		}
		pthread_mutex_lock(&mu);
		for (int i = 0; i < MAX_FILES; i++) {
			const char *p = files[i].path, *rel;
			if (!p || strcmp(files[i].vm, name) != 0)
				continue;
			isfile = isfile || strcmp(p, dir) == 0;
			if (strncmp(p, dir, strlen(dir)) != 0 || p[strlen(dir)] != '/')
				continue;
			rel = p + strlen(dir) + 1;
			exists = true;
			if ((!recursive && strchr(rel, '/')) || strlen(rel) >= sizeof(now[0].rel))
				continue;
			snprintf(now[nnow].rel, sizeof(now[nnow].rel), "%s", rel);
			now[nnow++].gen = files[i].gen;
		}
		pthread_mutex_unlock(&mu);
		if (!started) {
			/* The first look: what is there already is no change. */
			if (isfile || !exists) {
				const char *e = isfile ? "E notdir\n" : "E notfound\n";
				req->output(req->output_userdata, SAAS_STREAM_STDOUT, e, strlen(e));
				*exit_code = 1;
				break;
			}
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, "S\n", 2);
			started = true;
		} else {
			for (size_t i = 0; i < nnow; i++) {
				size_t j;
				for (j = 0; j < nwas && strcmp(was[j].rel, now[i].rel) != 0; j++)
					;
				if (j == nwas) {
					watch_line(req, 'C', now[i].rel);
					watch_line(req, 'W', now[i].rel);
				} else if (was[j].gen != now[i].gen) {
					watch_line(req, 'W', now[i].rel);
				}
			}
			for (size_t j = 0; j < nwas; j++) {
				size_t i;
				for (i = 0; i < nnow && strcmp(was[j].rel, now[i].rel) != 0; i++)
					;
				if (i == nnow)
					watch_line(req, 'R', was[j].rel);
			}
		}
		memcpy(was, now, nnow * sizeof(*now));
		nwas = nnow;
		usleep(2000);
	}
	free(was);
	free(now);
	return rc;
}

/* `startafter PATH`: held before it runs (the guest's "ready" late) until PATH exists on the host. */
static int fake_start_after(const char *name, const char *path, const saas_driver_exec *req)
{
	int64_t waited = 0;

	while (access(path, F_OK) != 0) {
		int group;
		if ((req->control && req->control(req->control_userdata, &group) < 0) ||
		    __atomic_load_n(req->cancel, __ATOMIC_SEQ_CST) || !running(name))
			return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "fake: cancelled before it started");
		if (req->timeout_ms > 0 && waited >= req->timeout_ms)
			return saas_sys_error_set(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "fake: never started");
		usleep(5000);
		waited += 5;
	}
	if (req->started)
		req->started(req->control_userdata);
	return SAAS_OK;
}

static int fake_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	static const char watcher[] = "exec python3 -c 'import ctypes"; /* server/e2b/watch.c's */
	const char *cmd = req->command;
	struct vm *v;
	bool fail;

	(void)ctx;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	pthread_mutex_lock(&mu);
	if ((v = find_vm(name)))
		v->execs++;
	if ((fail = fail_execs > 0))
		fail_execs--;
	pthread_mutex_unlock(&mu);
	if (fail)
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: an exec made to fail");
	*exit_code = 0;
	if (strncmp(cmd, "startafter ", 11) == 0)
		return fake_start_after(name, cmd + 11, req);
	if (req->started)
		req->started(req->control_userdata);
	if (strncmp(cmd, watcher, sizeof(watcher) - 1) == 0 && strstr(cmd, "\n' '")) {
		return fake_watch(name, strstr(cmd, "\n' '") + 4, req, exit_code);
	} else if (strcmp(cmd, "true") == 0 || strcmp(cmd, ":") == 0 || strncmp(cmd, ": ", 2) == 0) {
		/* Nothing, as the shell's builtins. */
	} else if (strncmp(cmd, "echo ", 5) == 0) {
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, cmd + 5, strlen(cmd + 5));
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, "\n", 1);
	} else if (strncmp(cmd, "exit ", 5) == 0) {
		*exit_code = atoi(cmd + 5);
	} else if (strncmp(cmd, "sleep ", 6) == 0) {
		if (atoll(cmd + 6) * 1000 > req->timeout_ms)
			return SAAS_ETIMEOUT;
	} else if (strcmp(cmd, "cat") == 0) {
		if (req->stdin_len)
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, req->stdin_data, req->stdin_len);
		if (req->input)
			return fake_running(name, req, exit_code, true, 0);
	} else if (strcmp(cmd, "tick") == 0) {
		/* A line, then on until a signal or a cancel (the CLI's live output). */
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, "tick\n", 5);
		return fake_running(name, req, exit_code, false, 0);
	} else if (strcmp(cmd, "wait") == 0) {
		/* Until a signal ends it (or a cancel, or the VM goes). */
		return fake_running(name, req, exit_code, false, 0);
	} else if (strcmp(cmd, "wait-noint") == 0) {
		/* The same, but deaf to SIGINT, as `trap '' INT` makes a shell (the CLI's second Ctrl-C). */
		return fake_running(name, req, exit_code, false, SIGINT);
	} else if (strncmp(cmd, "lines ", 6) == 0) {
		/* N lines on stdout, one chunk each, then one on stderr. */
		char line[32];
		for (int i = 1, n = atoi(cmd + 6); i <= n; i++) {
			int k = snprintf(line, sizeof(line), "line %d\n", i);
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, line, (size_t)k);
		}
		req->output(req->output_userdata, SAAS_STREAM_STDERR, "done\n", 5);
	} else if (strcmp(cmd, "pwd") == 0) {
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, req->cwd, strlen(req->cwd));
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, "\n", 1);
	} else if (strcmp(cmd, "env") == 0) {
		for (const char *const *e = req->env; e && *e; e++) {
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, *e, strlen(*e));
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, "\n", 1);
		}
	} else if (strncmp(cmd, "spew ", 5) == 0 || strncmp(cmd, "spewctl ", 8) == 0) {
		/* N bytes on each stream: letters, or (spewctl) control bytes, JSON's most expensive to escape. */
		char chunk[4096];
		int ctl = cmd[4] == 'c';
		long long n = atoll(cmd + (ctl ? 8 : 5));
		for (int s = SAAS_STREAM_STDOUT; s <= SAAS_STREAM_STDERR; s++) {
			memset(chunk, ctl ? '\x01' : s == SAAS_STREAM_STDOUT ? 'x' : 'y', sizeof(chunk));
			for (long long left = n; left > 0; left -= (long long)sizeof(chunk))
				req->output(req->output_userdata, s, chunk,
				            left < (long long)sizeof(chunk) ? (size_t)left : sizeof(chunk));
		}
	} else if (strncmp(cmd, "busy-restores ", 14) == 0) {
		/* Through any client, as saas_fake_busy_restores: the next N restores refused for room. */
		saas_fake_busy_restores((unsigned int)strtoul(cmd + 14, NULL, 10));
	} else if (strncmp(cmd, "busy-creates ", 13) == 0) {
		saas_fake_busy_creates((unsigned int)strtoul(cmd + 13, NULL, 10));
	} else if (strcmp(cmd, "block") == 0) {
		while (!__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST) && running(name))
			usleep(1000);
		return SAAS_EIO;
	} else {
		static const char msg[] = "sh: command not found\n";
		req->output(req->output_userdata, SAAS_STREAM_STDERR, msg, sizeof(msg) - 1);
		*exit_code = 127;
	}
	return SAAS_OK;
}

/*
 * The guest's permissions, as its unprivileged sandbox user meets them: it may
 * write only under the workspace, its home and the temporary directories, and
 * may not read root's secrets. The messages are the SSH transport's.
 */
static bool guest_may_write(const char *path)
{
	static const char *const dirs[] = { "/workspace/", "/home/sandbox/", "/tmp/", "/var/tmp/", "/dev/shm/" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
			return true;
	return false;
}

static bool guest_may_read(const char *path)
{
	return strcmp(path, "/etc/shadow") != 0 && strcmp(path, "/etc/gshadow") != 0 && strncmp(path, "/root/", 6) != 0;
}

static int fake_write(void *ctx, const char *name, const char *path, unsigned int mode, saas_read_fn reader,
                      void *ud, int64_t size)
{
	unsigned char *data = NULL, buf[65536];
	size_t len = 0, cap = 0;
	struct file *f;
	long n;

	(void)ctx;
	(void)size;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	if (!guest_may_write(path))
		return saas_sys_error_set(SAAS_EPERM, SAAS_ERRCLASS_GUEST, 3, "writing %s: permission denied", path);
	while ((n = reader(ud, buf, sizeof(buf))) > 0) {
		if (len + (size_t)n > cap) {
			size_t ncap = cap ? cap * 2 : sizeof(buf);
			unsigned char *p;
			while (ncap < len + (size_t)n)
				ncap *= 2;
			if (!(p = realloc(data, ncap))) {
				free(data);
				return SAAS_ENOMEM;
			}
			data = p;
			cap = ncap;
		}
		memcpy(data + len, buf, (size_t)n);
		len += (size_t)n;
	}
	if (n < 0) {
		free(data);
		return SAAS_EIO;
	}
	pthread_mutex_lock(&mu);
	if ((f = find_file(name, path)) && f->dir) {
		pthread_mutex_unlock(&mu);
		free(data);
		return saas_sys_error_set(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 24, "writing %s: is a directory", path);
	}
	if (!f) {
		for (int i = 0; i < MAX_FILES && !f; i++)
			if (!files[i].path)
				f = &files[i];
		if (f) {
			snprintf(f->vm, sizeof(f->vm), "%s", name);
			f->path = strdup(path);
		}
	}
	if (!f || !f->path) {
		pthread_mutex_unlock(&mu);
		free(data);
		return SAAS_ENOMEM;
	}
	free(f->data);
	f->data = data;
	f->len = len;
	f->mode = mode;
	f->gen = ++file_gen;
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

static int fake_read(void *ctx, const char *name, const char *path, int64_t max, saas_write_fn writer, void *ud,
                     int64_t *size)
{
	struct file *f;
	unsigned char *copy;
	size_t len;
	int rc = SAAS_OK;

	(void)ctx;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	if (!guest_may_read(path))
		return saas_sys_error_set(SAAS_EPERM, SAAS_ERRCLASS_GUEST, 3, "reading %s: permission denied", path);
	pthread_mutex_lock(&mu);
	if (!(f = find_file(name, path))) {
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 2, "%s: no such file", path);
	}
	if (f->dir) {
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 24, "reading %s: is a directory", path);
	}
	len = f->len;
	copy = malloc(len ? len : 1);
	if (copy && len)
		memcpy(copy, f->data, len);
	pthread_mutex_unlock(&mu);
	if (!copy)
		return SAAS_ENOMEM;
	*size = (int64_t)len;
	if ((int64_t)len > max)
		rc = SAAS_ETOOBIG;
	else if (len && writer(ud, copy, len))
		rc = SAAS_EIO;
	free(copy);
	return rc;
}

static int fake_kind(const char *vm, const char *path);
static void fake_norm(char *out, size_t size, const char *path);

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int fake_list_files(void *ctx, const char *name, const char *given, unsigned int depth, saas_entry_fn fn,
                           void *ud)
{
	char *paths[MAX_FILES + 1], path[SAAS_PATH_MAX];
	size_t plen, n = 0;
	int rc = SAAS_OK;

	(void)ctx;
	fake_norm(path, sizeof(path), given);
	plen = strcmp(path, "/") ? strlen(path) : 0;
	(void)depth;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	pthread_mutex_lock(&mu);
	/* As the guest: a missing path is not found, a file lists as itself. */
	switch (fake_kind(name, path)) {
	case 0:
		pthread_mutex_unlock(&mu);
		return saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 2, "listing %s: no such file or directory",
		                          path);
	case 1:
		paths[n++] = strdup(path);
		break;
	}
	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && strcmp(files[i].vm, name) == 0 && strncmp(files[i].path, path, plen) == 0 &&
		    files[i].path[plen] == '/')
			paths[n++] = strdup(files[i].path);
	pthread_mutex_unlock(&mu);
	qsort(paths, n, sizeof(*paths), cmp_str);
	for (size_t i = 0; i < n; i++) {
		saas_file_entry e;
		struct file *f;
		memset(&e, 0, sizeof(e));
		e.path = paths[i];
		e.type = SAAS_FILE_REGULAR;
		pthread_mutex_lock(&mu);
		if ((f = find_file(name, paths[i]))) {
			e.size = (int64_t)f->len;
			e.mode = f->mode;
			if (f->dir)
				e.type = SAAS_FILE_DIRECTORY;
		}
		pthread_mutex_unlock(&mu);
		if (rc == SAAS_OK && fn(ud, &e))
			rc = 1;
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	return SAAS_OK;
}

/*
 * Directories, removal and renames (version 10), over the same table of
 * files: a directory is one file_mkdir made (a `dir` entry) or one that
 * files lie under. The guest's permissions are guest_may_write's, and its
 * answers those SFTP gives (ssh_sftp.c), so the E2B and REST paths meet the
 * errors a real guest sends.
 */

/* What is at path (mu held): 0 nothing, 1 a file, 2 a directory. */
static int fake_kind(const char *vm, const char *path)
{
	size_t plen = strlen(path);
	struct file *f = find_file(vm, path);

	if (f)
		return f->dir ? 2 : 1;
	if (!strcmp(path, "/") || !strcmp(path, "/workspace") || !strcmp(path, "/tmp") ||
	    !strcmp(path, "/home/sandbox"))
		return 2;
	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && !strcmp(files[i].vm, vm) && !strncmp(files[i].path, path, plen) &&
		    files[i].path[plen] == '/')
			return 2;
	return 0;
}

/* path without its trailing slashes, as the guest's kernel takes "/a/b/" for "/a/b". */
static void fake_norm(char *out, size_t size, const char *path)
{
	size_t len;

	snprintf(out, size, "%s", path);
	for (len = strlen(out); len > 1 && out[len - 1] == '/'; len--)
		out[len - 1] = '\0';
}

/* A new entry (mu held); NULL when the table is full. */
static struct file *fake_add(const char *vm, const char *path, bool dir)
{
	for (int i = 0; i < MAX_FILES; i++)
		if (!files[i].path) {
			if (!(files[i].path = strdup(path)))
				return NULL;
			snprintf(files[i].vm, sizeof(files[i].vm), "%s", vm);
			files[i].dir = dir;
			files[i].mode = dir ? 0755 : 0644;
			return &files[i];
		}
	return NULL;
}

static int fake_mkdir(void *ctx, const char *name, const char *given, int *created)
{
	char path[SAAS_PATH_MAX], buf[SAAS_PATH_MAX + 1], probe[SAAS_PATH_MAX + 2];
	int rc = SAAS_OK;

	(void)ctx;
	fake_norm(path, sizeof(path), given);
	*created = 0;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	pthread_mutex_lock(&mu);
	switch (fake_kind(name, path)) {
	case 2:
		goto out;
	case 1:
		rc = saas_sys_error_set(SAAS_EEXISTS, SAAS_ERRCLASS_GUEST, 0,
		                        "making directory %s: something that is not a directory is there", path);
		goto out;
	}
	/* Each missing ancestor, then path itself, as mkdir -p makes them. */
	snprintf(buf, sizeof(buf), "%s/", path);
	for (char *s = strchr(buf + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		switch (fake_kind(name, buf)) {
		case 1:
			rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 0,
			                        "creating %s: it is a file, not a directory", buf);
			goto out;
		case 0:
			snprintf(probe, sizeof(probe), "%s/", buf);
			if (!guest_may_write(probe)) {
				rc = saas_sys_error_set(SAAS_EPERM, SAAS_ERRCLASS_GUEST, 3,
				                        "creating directory %s: permission denied", buf);
				goto out;
			}
			if (!fake_add(name, buf, true)) {
				rc = saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "fake: no room for more files");
				goto out;
			}
		}
		*s = '/';
	}
	*created = 1;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

/*
 * The directory path is in stays when path goes (mu held): a directory only
 * implied by the files under it is made one of its own first, as a real
 * directory outlives its last entry.
 */
static void fake_keep_parent(const char *vm, const char *path)
{
	char parent[SAAS_PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	if (!(slash = strrchr(parent, '/')) || slash == parent)
		return;
	*slash = '\0';
	if (!find_file(vm, parent) && fake_kind(vm, parent) == 2 && strcmp(parent, "/workspace") &&
	    strcmp(parent, "/tmp") && strcmp(parent, "/home/sandbox"))
		fake_add(vm, parent, true);
}

/* Drop path and everything under it (mu held). */
static void fake_drop_tree(const char *vm, const char *path)
{
	size_t plen = strlen(path);

	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && !strcmp(files[i].vm, vm) && !strncmp(files[i].path, path, plen) &&
		    (files[i].path[plen] == '\0' || files[i].path[plen] == '/')) {
			free(files[i].path);
			free(files[i].data);
			memset(&files[i], 0, sizeof(files[i]));
		}
}

static int fake_remove(void *ctx, const char *name, const char *given)
{
	char path[SAAS_PATH_MAX], probe[SAAS_PATH_MAX + 1];
	int rc = SAAS_OK;

	(void)ctx;
	fake_norm(path, sizeof(path), given);
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	snprintf(probe, sizeof(probe), "%s/", path);
	pthread_mutex_lock(&mu);
	if (!fake_kind(name, path))
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 2, "removing %s: no such file or directory",
		                        path);
	else if (!guest_may_write(probe) || !strcmp(probe, "/workspace/"))
		rc = saas_sys_error_set(SAAS_EPERM, SAAS_ERRCLASS_GUEST, 3, "removing %s: permission denied", path);
	else {
		fake_keep_parent(name, path);
		fake_drop_tree(name, path);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static int fake_rename(void *ctx, const char *name, const char *gfrom, const char *gto, unsigned int flags)
{
	char from[SAAS_PATH_MAX], to[SAAS_PATH_MAX], pfrom[SAAS_PATH_MAX + 1], pto[SAAS_PATH_MAX + 1];
	size_t flen;
	int rc = SAAS_OK, kfrom, kto;

	(void)ctx;
	fake_norm(from, sizeof(from), gfrom);
	fake_norm(to, sizeof(to), gto);
	flen = strlen(from);
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	snprintf(pfrom, sizeof(pfrom), "%s/", from);
	snprintf(pto, sizeof(pto), "%s/", to);
	pthread_mutex_lock(&mu);
	kfrom = fake_kind(name, from);
	kto = fake_kind(name, to);
	if (!kfrom) {
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 2, "renaming %s: no such file or directory",
		                        from);
	} else if (!guest_may_write(pfrom) || !guest_may_write(pto) || !strcmp(pfrom, "/workspace/")) {
		rc = saas_sys_error_set(SAAS_EPERM, SAAS_ERRCLASS_GUEST, 3, "renaming %s to %s: permission denied", from,
		                        to);
	} else if (!strcmp(from, to)) {
		/* rename(2) of a name onto itself does nothing. */
	} else if (kto && (!(flags & SAAS_FILE_RENAME_REPLACE) || kto == 2 || kfrom == 2)) {
		rc = saas_sys_error_set(SAAS_EEXISTS, SAAS_ERRCLASS_GUEST, 0, "renaming %s: %s already exists", from, to);
	} else {
		fake_keep_parent(name, from);
		if (kto)
			fake_drop_tree(name, to);
		for (int i = 0; i < MAX_FILES; i++) {
			char *p;

			if (!files[i].path || strcmp(files[i].vm, name) || strncmp(files[i].path, from, flen) ||
			    (files[i].path[flen] != '\0' && files[i].path[flen] != '/'))
				continue;
			if (asprintf(&p, "%s%s", to, files[i].path + flen) < 0) {
				rc = saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, ENOMEM, "fake: out of memory");
				break;
			}
			free(files[i].path);
			files[i].path = p;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

/*
 * SAAS_FAKE_PORTS="GUEST=HOST:PORT[,...]" (e.g. 49999=127.0.0.1:8123): a
 * guest port served by a real TCP server on the host, so that tests reach a
 * real server (the code server run on the host) through every VM of the
 * fake driver. 1 and *fd connected, 0 when the port is not mapped, or an error.
 */
int saas_fake_port_mapped(unsigned int port, int *fd)
{
	const char *spec = getenv("SAAS_FAKE_PORTS");
	char item[128];

	while (spec && *spec) {
		size_t n = strcspn(spec, ",");
		unsigned int guest, hport;
		char host[64];
		struct sockaddr_in sa;
		int s;

		snprintf(item, sizeof(item), "%.*s", (int)(n < sizeof(item) - 1 ? n : sizeof(item) - 1), spec);
		spec += n + (spec[n] == ',');
		if (sscanf(item, "%u=%63[0-9.]:%u", &guest, host, &hport) != 3 || guest != port)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)hport);
		if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
			return saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0, "fake: SAAS_FAKE_PORTS: bad address %s", host);
		if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socket");
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			int err = errno;
			close(s);
			return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, err,
			                          "fake: nothing listens on %s:%u (guest port %u)", host, hport, port);
		}
		*fd = s;
		return 1;
	}
	return 0;
}

/* The "guest" answers every connection with one line naming the port, then hangs up (unless the port is mapped). */
static int fake_port_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	char line[64];
	int sv[2], n;

	(void)ctx;
	if (!running(name))
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: VM %s is not running", name);
	if ((n = saas_fake_port_mapped(port, fd)) != 0)
		return n < 0 ? n : SAAS_OK;
	if (port == 9)
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "nothing listens on port 9 in the sandbox");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair");
	n = snprintf(line, sizeof(line), "port %u of %s\n", port, name);
	if (write(sv[1], line, (size_t)n) != n) {
		close(sv[0]);
		close(sv[1]);
		return SAAS_EIO;
	}
	close(sv[1]);
	*fd = sv[0];
	return SAAS_OK;
}

static int fake_network_default(void *ctx)
{
	int mode;

	(void)ctx;
	pthread_mutex_lock(&mu);
	mode = default_mode;
	pthread_mutex_unlock(&mu);
	return mode;
}

static int fake_network_set(void *ctx, const char *name, const saas_vm_network *net)
{
	struct vm *v;
	int rc = SAAS_OK;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if (!(v = find_vm(name)))
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "fake: no VM %s", name);
	else if (fail_network_sets > 0) {
		fail_network_sets--;
		rc = network_set_enotsup == 2 ? saas_sys_error_set(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
		                                                   "fake: another engine serves this VM's egress")
		     : network_set_enotsup
		             ? saas_sys_error_set(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "fake: cannot enforce this policy")
		             : saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: this change fails as the test asked");
	} else
		net_store(v, net);
	pthread_mutex_unlock(&mu);
	return rc;
}

static int fake_network_stats(void *ctx, const char *name, saas_vm_network_stats *out)
{
	struct vm *v;
	int rc = SAAS_OK;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if ((v = find_vm(name)))
		*out = v->stats;
	else
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "fake: no VM %s", name);
	pthread_mutex_unlock(&mu);
	return rc;
}

/*
 * A sample a test can predict: each command run so far took one CPU-second;
 * a quarter of the memory is held, and a MiB more per command; the disk
 * holds the files written to the VM. A VM nobody gave a shape (one a test
 * added) has 1 vCPU, 512 MiB and no disk.
 */
static int fake_sample(void *ctx, const char *name, saas_driver_sample *out)
{
	struct vm *v;
	int rc = SAAS_OK;

	(void)ctx;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&mu);
	if ((v = find_vm(name)) && v->state == SAAS_VM_RUNNING) {
		out->vcpus = v->vcpus ? v->vcpus : 1;
		out->cpu_time_ns = (uint64_t)v->execs * 1000000000u;
		out->memory_total = (uint64_t)(v->memory_mb ? v->memory_mb : 512) << 20;
		out->memory_used = out->memory_total / 4 + ((uint64_t)v->execs << 20);
		if (out->memory_used > out->memory_total)
			out->memory_used = out->memory_total;
		out->disk_total = (uint64_t)v->disk_gb << 30;
		for (int i = 0; i < MAX_FILES; i++)
			if (files[i].path && strcmp(files[i].vm, name) == 0)
				out->disk_used += files[i].len;
		if (out->disk_used > out->disk_total)
			out->disk_used = out->disk_total;
	} else {
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "fake: no VM %s is running", name);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

/*
 * A terminal: a thread that plays a shell on a socket pair. It greets with
 * "fake-shell TERM CxR tty|notty\r\n", echoes every byte as a terminal
 * would (a typed CR as CR LF, as a tty's ICRNL and ONLCR make it; the rest,
 * LF included, as it came), answers a resize with "resize CxR\r\n", and ends at a line
 * "exit N" (status N), "exit" (0, as a shell's builtin) or at end-of-input
 * (status 0). After a line "hold" it
 * reads nothing more, as a busy shell does, until it is hung up on. A line
 * "pwd" answers its directory (the one it was started in, else /workspace),
 * "echo $NAME" the variable's value (empty when unset) and "echo WORDS" the
 * words as they are, each on a line.
 */
struct fake_pty {
	int fd;                   /* the shell's end */
	pthread_t tid;
	pthread_mutex_t mu;
	unsigned int cols, rows;
	int resized;
	int stop;
	int status;
	char *cwd;                /* NULL: /workspace */
	char **env;               /* NAME=VALUE, NULL-terminated; never NULL */
};

/* What the fake shell says to a line other than exit and hold: pwd, echo $NAME and echo WORDS. */
static void fake_pty_answer(struct fake_pty *t, const char *line)
{
	const char *answer = NULL;

	if (strcmp(line, "pwd") == 0) {
		answer = t->cwd ? t->cwd : "/workspace";
	} else if (strncmp(line, "echo $", 6) == 0) {
		size_t n = strlen(line + 6);
		answer = "";
		for (char **e = t->env; *e; e++)
			if (strncmp(*e, line + 6, n) == 0 && (*e)[n] == '=')
				answer = *e + n + 1;
	} else if (strncmp(line, "echo ", 5) == 0) {
		answer = line + 5;
	}
	if (answer) {
		send(t->fd, answer, strlen(answer), MSG_NOSIGNAL);
		send(t->fd, "\r\n", 2, MSG_NOSIGNAL);
	}
}

static void fake_pty_free(struct fake_pty *t)
{
	for (char **e = t->env; e && *e; e++)
		free(*e);
	free(t->env);
	free(t->cwd);
	free(t);
}

static void *fake_pty_main(void *arg)
{
	struct fake_pty *t = arg;
	char line[256], buf[512];
	size_t used = 0;
	bool holding = false;

	for (;;) {
		ssize_t n;
		int stop, resized;
		unsigned int cols, rows;

		pthread_mutex_lock(&t->mu);
		stop = t->stop;
		resized = t->resized;
		t->resized = 0;
		cols = t->cols;
		rows = t->rows;
		pthread_mutex_unlock(&t->mu);
		if (stop)
			break;
		if (resized) {
			int k = snprintf(buf, sizeof(buf), "resize %ux%u\r\n", cols, rows);
			send(t->fd, buf, (size_t)k, MSG_NOSIGNAL);
		}
		if (holding) {
			usleep(2000);
			continue;
		}
		n = recv(t->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0) {
			t->status = 0;
			break;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				break;
			usleep(2000);
			continue;
		}
		/* The echo, a CR (Enter) as CR LF: what the line answers goes under it, not over it. */
		for (ssize_t i = 0, from = 0; i <= n; i++) {
			if (i < n && buf[i] != '\r')
				continue;
			send(t->fd, buf + from, (size_t)(i - from), MSG_NOSIGNAL);
			if (i < n)
				send(t->fd, "\r\n", 2, MSG_NOSIGNAL);
			from = i + 1;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\r' || buf[i] == '\n') {
				int code;
				line[used] = '\0';
				used = 0;
				if (strcmp(line, "exit") == 0)
					code = 0;
				if (strcmp(line, "exit") == 0 || sscanf(line, "exit %d", &code) == 1) {
					pthread_mutex_lock(&t->mu);
					t->status = code;
					pthread_mutex_unlock(&t->mu);
					goto out;
				}
				if (strcmp(line, "hold") == 0)
					holding = true;
				fake_pty_answer(t, line);
			} else if (used < sizeof(line) - 1) {
				line[used++] = buf[i];
			}
		}
	}
out:
	shutdown(t->fd, SHUT_RDWR);
	return NULL;
}

static int fake_pty_open(void *ctx, const char *name, const saas_driver_pty *req, int *fd, void **pty)
{
	struct fake_pty *t;
	int sv[2];
	char greet[160];
	size_t nenv = 0;
	int k, ok;

	(void)ctx;
	pthread_mutex_lock(&mu);
	ok = find_vm(name) != NULL;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: no VM %s", name);
	if (!(t = calloc(1, sizeof(*t))))
		return SAAS_ENOMEM;
	/* The core hands these over for the call only. */
	while (req->env && req->env[nenv])
		nenv++;
	if ((req->cwd && !(t->cwd = strdup(req->cwd))) || !(t->env = calloc(nenv + 1, sizeof(*t->env)))) {
		fake_pty_free(t);
		return SAAS_ENOMEM;
	}
	for (size_t i = 0; i < nenv; i++)
		if (!(t->env[i] = strdup(req->env[i]))) {
			fake_pty_free(t);
			return SAAS_ENOMEM;
		}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		fake_pty_free(t);
		return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "fake: socketpair");
	}
	t->fd = sv[1];
	t->status = -1;
	pthread_mutex_init(&t->mu, NULL);
	k = snprintf(greet, sizeof(greet), "fake-shell %s %ux%u %s\r\n", req->term, req->cols, req->rows,
	             req->tty ? "tty" : "notty");
	send(t->fd, greet, (size_t)k, MSG_NOSIGNAL);
	if (pthread_create(&t->tid, NULL, fake_pty_main, t) != 0) {
		close(sv[0]);
		close(sv[1]);
		pthread_mutex_destroy(&t->mu);
		fake_pty_free(t);
		return saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 0, "fake: thread");
	}
	*fd = sv[0];
	*pty = t;
	return SAAS_OK;
}

static int fake_pty_resize(void *ctx, void *pty, unsigned int cols, unsigned int rows)
{
	struct fake_pty *t = pty;

	(void)ctx;
	pthread_mutex_lock(&t->mu);
	t->cols = cols;
	t->rows = rows;
	t->resized = 1;
	pthread_mutex_unlock(&t->mu);
	return SAAS_OK;
}

static void fake_pty_close(void *ctx, void *pty, int *exit_status)
{
	struct fake_pty *t = pty;

	(void)ctx;
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->tid, NULL);
	*exit_status = t->status;
	close(t->fd);
	pthread_mutex_destroy(&t->mu);
	fake_pty_free(t);
}

/* ---- snapshots (version 4) ---- */

static struct snap *find_snap(const char *name)
{
	for (int i = 0; i < MAX_SNAPS; i++)
		if (snaps[i].used && strcmp(snaps[i].name, name) == 0)
			return &snaps[i];
	return NULL;
}

static void snap_owner(char out[SAAS_ID_MAX + 1], const char *snap)
{
	snprintf(out, SAAS_ID_MAX + 1, "=%s", snap);
}

/* Copy every file of owner `from` to owner `to`; the caller holds mu. */
static int copy_files_locked(const char *from, const char *to)
{
	for (int i = 0; i < MAX_FILES; i++) {
		struct file *src = &files[i], *dst = NULL;

		if (!src->path || strcmp(src->vm, from) != 0)
			continue;
		for (int j = 0; j < MAX_FILES && !dst; j++)
			if (!files[j].path)
				dst = &files[j];
		if (!dst)
			return saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "fake: no room for more files");
		snprintf(dst->vm, sizeof(dst->vm), "%s", to);
		dst->mode = src->mode;
		dst->len = src->len;
		dst->dir = src->dir;
		if (!(dst->path = strdup(src->path)) || !(dst->data = malloc(src->len ? src->len : 1))) {
			free(dst->path);
			memset(dst, 0, sizeof(*dst));
			return saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, ENOMEM, "fake: out of memory");
		}
		memcpy(dst->data, src->data, src->len);
	}
	return SAAS_OK;
}

void saas_fake_fail_snapshots(unsigned int n)
{
	pthread_mutex_lock(&mu);
	fail_snapshots = n;
	pthread_mutex_unlock(&mu);
}

void saas_fake_fail_restores(unsigned int n)
{
	pthread_mutex_lock(&mu);
	fail_restores = n;
	pthread_mutex_unlock(&mu);
}

void saas_fake_busy_restores(unsigned int n)
{
	pthread_mutex_lock(&mu);
	busy_restores = n;
	pthread_mutex_unlock(&mu);
}

/* A counter of the fake's, read under its lock. */
static unsigned int counter(const unsigned int *c)
{
	unsigned int n;

	pthread_mutex_lock(&mu);
	n = *c;
	pthread_mutex_unlock(&mu);
	return n;
}

void saas_fake_fail_restore_nth(unsigned int k)
{
	pthread_mutex_lock(&mu);
	fail_restore_nth = k;
	pthread_mutex_unlock(&mu);
}

void saas_fake_restore_gate(unsigned int n, int wait_ms)
{
	pthread_mutex_lock(&mu);
	gate_n = n;
	gate_wait_ms = wait_ms;
	restores_peak = 0;
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_restores_peak(void)
{
	return counter(&restores_peak);
}

/* *until: ms from now on CLOCK_REALTIME (the clock of a pthread_cond_timedwait). */
static void deadline_in(struct timespec *until, int ms)
{
	clock_gettime(CLOCK_REALTIME, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

/* mu held: one more restore under way; held at the gate until gate_n are, or its wait ran out. */
static void restore_gate_locked(void)
{
	unsigned long round = gate_opened;
	struct timespec until;

	if (++restores_now > restores_peak)
		restores_peak = restores_now;
	if (!gate_n)
		return;
	if (restores_now >= gate_n) {
		gate_opened++;
		pthread_cond_broadcast(&gate_cv);
		return;
	}
	deadline_in(&until, gate_wait_ms);
	while (gate_opened == round && pthread_cond_timedwait(&gate_cv, &mu, &until) == 0)
		;
}

unsigned int saas_fake_snapshot_count(void)
{
	unsigned int n = 0;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_SNAPS; i++)
		n += snaps[i].used;
	pthread_mutex_unlock(&mu);
	return n;
}

int saas_fake_snapshot_exists(const char *name)
{
	int found;

	pthread_mutex_lock(&mu);
	found = find_snap(name) != NULL;
	pthread_mutex_unlock(&mu);
	return found;
}

void saas_fake_snapshot_add(const char *name)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_SNAPS; i++)
		if (!snaps[i].used) {
			snaps[i].used = true;
			snprintf(snaps[i].name, sizeof(snaps[i].name), "%s", name);
			break;
		}
	pthread_mutex_unlock(&mu);
}

void saas_fake_snapshot_lose(const char *name)
{
	char owner[SAAS_ID_MAX + 1];
	struct snap *sn;

	pthread_mutex_lock(&mu);
	if ((sn = find_snap(name))) {
		snap_owner(owner, name);
		drop_files(owner);
		memset(sn, 0, sizeof(*sn));
	}
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_snapshot_calls(void)
{
	return counter(&snapshot_calls);
}

unsigned int saas_fake_restore_calls(void)
{
	return counter(&restore_calls);
}

/* mu held: is snap said to be coming (snapshot_expect)? */
static bool expected_locked(const char *snap)
{
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		if (expected[i][0] && strcmp(expected[i], snap) == 0)
			return true;
	return false;
}

static int fake_snapshot_expect(void *ctx, const char *snap, int on)
{
	int rc = SAAS_OK;
	size_t i;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if (on) {
		for (i = 0; i < sizeof(expected) / sizeof(expected[0]) && expected[i][0]; i++)
			;
		if (expected_locked(snap) || strlen(snap) >= sizeof(expected[0]) || i == sizeof(expected) / sizeof(expected[0]))
			rc = saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0, "fake: cannot expect snapshot '%s'", snap);
		else
			snprintf(expected[i], sizeof(expected[i]), "%s", snap);
	} else {
		for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
			if (strcmp(expected[i], snap) == 0)
				expected[i][0] = '\0';
		pthread_cond_broadcast(&snap_cv);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

void saas_fake_snapshot_hold(unsigned int n, int wait_ms)
{
	pthread_mutex_lock(&mu);
	hold_n = n;
	hold_wait_ms = wait_ms;
	pthread_mutex_unlock(&mu);
}

unsigned int saas_fake_restores_waited(void)
{
	return counter(&restores_waited);
}

static int fake_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes)
{
	char owner[SAAS_ID_MAX + 1];
	struct snap *sn = NULL;
	struct vm *v;
	int64_t held = 0;
	int rc = SAAS_OK;

	(void)ctx;
	pthread_mutex_lock(&mu);
	snapshot_calls++;
	/* Held (saas_fake_snapshot_hold) until that many restores wait for it, or the wait ran out. */
	if (hold_n && expected_locked(snap)) {
		struct timespec until;
		deadline_in(&until, hold_wait_ms);
		while (restores_waiting < hold_n && pthread_cond_timedwait(&snap_cv, &mu, &until) == 0)
			;
	}
	if (!(v = find_vm(name)) || v->state != SAAS_VM_RUNNING) {
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "fake: no running VM '%s'", name);
		goto out;
	}
	if (fail_snapshots > 0) {
		fail_snapshots--;
		rc = saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: this snapshot fails as the test asked");
		goto out;
	}
	if (strlen(snap) >= sizeof(sn->name) || find_snap(snap)) {
		rc = saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0, "fake: bad or taken snapshot name '%s'", snap);
		goto out;
	}
	for (int i = 0; i < MAX_SNAPS && !sn; i++)
		if (!snaps[i].used)
			sn = &snaps[i];
	if (!sn) {
		rc = saas_sys_error_set(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "fake: no room for more snapshots");
		goto out;
	}
	snap_owner(owner, snap);
	if ((rc = copy_files_locked(name, owner)) < 0) {
		drop_files(owner);
		goto out;
	}
	sn->used = true;
	snprintf(sn->name, sizeof(sn->name), "%s", snap);
	for (int i = 0; i < MAX_FILES; i++)
		if (files[i].path && strcmp(files[i].vm, owner) == 0)
			held += (int64_t)files[i].len;
	/* A pause: the VM is gone, as after vm_destroy. */
	if (!keep) {
		v->state = SAAS_VM_ABSENT;
		drop_files(name);
	}
out:
	/* The restores waiting for it go on: to it, or, once it is no longer expected, to its absence. */
	pthread_cond_broadcast(&snap_cv);
	pthread_mutex_unlock(&mu);
	if (rc == SAAS_OK && bytes)
		*bytes = held;
	return rc;
}

static int fake_restore(void *ctx, const saas_vm_spec *spec, const char *snap)
{
	char owner[SAAS_ID_MAX + 1];
	int rc;

	(void)ctx;
	pthread_mutex_lock(&mu);
	/* A fork's child begun while its snapshot is taken: waits for it, as the libvirt driver's does. */
	if (expected_locked(snap) && !find_snap(snap)) {
		restores_waited++;
		restores_waiting++;
		pthread_cond_broadcast(&snap_cv);
		while (expected_locked(snap) && !find_snap(snap))
			pthread_cond_wait(&snap_cv, &mu);
		restores_waiting--;
	}
	restore_calls++;
	restore_gate_locked();
	if (fail_restore_nth && --fail_restore_nth == 0) {
		rc = saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: this restore fails as the test asked");
		goto out;
	}
	if (!find_snap(snap)) {
		rc = saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "fake: no snapshot '%s'", snap);
		goto out;
	}
	if (busy_restores > 0) {
		/* As a real driver's refusal for memory: the host's facts, which a tenant must not read. */
		busy_restores--;
		rc = saas_sys_error_set(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
		                        "fake: the host is short of memory for a VM of %u MiB (312 MiB available)",
		                        spec->memory_mb);
		goto out;
	}
	if (fail_restores > 0) {
		fail_restores--;
		rc = saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "fake: this restore fails as the test asked");
		goto out;
	}
	if (find_vm(spec->name)) {
		rc = saas_sys_error_set(SAAS_EEXISTS, SAAS_ERRCLASS_DRIVER, 0, "fake: VM '%s' exists", spec->name);
		goto out;
	}
	if ((rc = add_vm_locked(spec->name, spec->network)) == SAAS_OK)
		shape_set(find_vm(spec->name), spec);
	if (rc < 0)
		goto out;
	snap_owner(owner, snap);
	if ((rc = copy_files_locked(owner, spec->name)) < 0) {
		/* Nothing left behind. */
		find_vm(spec->name)->state = SAAS_VM_ABSENT;
		drop_files(spec->name);
	}
out:
	restores_now--;
	pthread_mutex_unlock(&mu);
	return rc;
}

static int fake_snapshot_delete(void *ctx, const char *snap)
{
	char owner[SAAS_ID_MAX + 1];
	struct snap *sn;

	(void)ctx;
	pthread_mutex_lock(&mu);
	if ((sn = find_snap(snap))) {
		snap_owner(owner, snap);
		drop_files(owner);
		memset(sn, 0, sizeof(*sn));
	}
	pthread_mutex_unlock(&mu);
	return SAAS_OK;
}

static int fake_snapshot_list(void *ctx, saas_name_fn fn, void *ud)
{
	char names[MAX_SNAPS][SAAS_ID_MAX];
	int n = 0;

	(void)ctx;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_SNAPS; i++)
		if (snaps[i].used)
			memcpy(names[n++], snaps[i].name, sizeof(names[0]));
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < n; i++)
		if (fn(ud, names[i]))
			break;
	return SAAS_OK;
}

static int fake_template_list(void *ctx, saas_template_fn fn, void *ud)
{
	saas_driver_template copy[MAX_TEMPLATES];
	char images[MAX_TEMPLATES][64];
	unsigned int n;

	(void)ctx;
	/* Called back without the lock held: the callback may call into the driver. */
	pthread_mutex_lock(&mu);
	n = ntemplates;
	for (unsigned int i = 0; i < n; i++) {
		memcpy(images[i], templates[i].image, sizeof(images[i]));
		copy[i] = templates[i].t;
		copy[i].image = images[i];
	}
	pthread_mutex_unlock(&mu);
	for (unsigned int i = 0; i < n; i++)
		if (fn(ud, &copy[i]))
			break;
	return SAAS_OK;
}

const saas_driver saas_fake_driver = {
	SAAS_DRIVER_VERSION,
	"fake",
	fake_open,
	fake_close,
	fake_create,
	fake_destroy,
	fake_state,
	fake_list,
	fake_exec,
	fake_write,
	fake_read,
	fake_list_files,
	fake_port_connect,
	fake_network_default,
	fake_network_set,
	fake_network_stats,
	fake_pty_open,
	fake_pty_resize,
	fake_pty_close,
	fake_snapshot,
	fake_restore,
	fake_snapshot_delete,
	fake_snapshot_list,
	fake_outdated,
	.template_list = fake_template_list,
	.vm_take = fake_take,
	.vm_sample = fake_sample,
	.file_mkdir = fake_mkdir,
	.file_remove = fake_remove,
	.file_rename = fake_rename,
	.snapshot_expect = fake_snapshot_expect,
};
