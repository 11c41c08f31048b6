/*
 * Host limits: each VM's QEMU in cgroups that hold it to its size. libvirt
 * does most of it: CPU (<cputune> global quota) and I/O weight (<blkiotune>)
 * go into the domain XML (domain.c), the memory hard limit is set live once
 * the domain runs (in the XML, libvirt first raises RLIMIT_MEMLOCK, which a
 * root without CAP_SYS_RESOURCE may not). libvirt has no pids tuning, and on
 * a cgroup v1 host without systemd it makes the domain no pids cgroup at all:
 * there the driver makes one per VM, STATE's own group of them under the pids
 * hierarchy (PIDS_MOUNT/aas-HASH/NAME), moves QEMU into it and removes it at
 * destroy. On cgroup v2 (and under machined) the domain's own cgroup has
 * pids.max, which is written instead.
 *
 * What the host has is read once at open (saas__lv_cg_detect, from
 * /proc/self/mounts); a limit the host cannot give is said once in the log
 * and the VMs run without it. The path logic takes the mounts' and
 * /proc/PID/cgroup's text as arguments, so tests/unit/test_libvirt.c runs it
 * against a fake tree in a temporary directory.
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

#include "driver/libvirt/libvirt_driver.h"
#include "util/file.h"

/* The name of each controller in /proc/self/mounts (v1 options) and cgroup.controllers (v2): enum cg_ctl order. */
static const char *const v1_names[CG_NCTL] = { [CG_CPU] = "cpu", [CG_MEMORY] = "memory", [CG_PIDS] = "pids",
	                                          [CG_IO] = "blkio" };
static const char *const v2_names[CG_NCTL] = { [CG_CPU] = "cpu", [CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_IO] = "io" };

/* Is word one of the separated words of list (sep: a set of separator characters)? */
static bool has_word(const char *list, const char *word, const char *sep)
{
	size_t n = strlen(word);

	for (const char *p = list; *p; p += strcspn(p, sep), p += strspn(p, sep)) {
		p += strspn(p, sep);
		if (strncmp(p, word, n) == 0 && (p[n] == '\0' || strchr(sep, p[n])))
			return true;
	}
	return false;
}

void saas__lv_cg_clear(struct saas__lv_cg *cg)
{
	for (int i = 0; i < CG_NCTL; i++)
		free(cg->v1[i]);
	free(cg->v2);
	memset(cg, 0, sizeof(*cg));
}

int saas__lv_cg_detect(struct saas__lv_cg *cg, const char *mounts)
{
	const char *line = mounts;
	int rc = SAAS_OK;

	memset(cg, 0, sizeof(*cg));
	/* "SOURCE DIR TYPE OPTIONS 0 0" per line; a mount point with a space is escaped (\040): never ours to use. */
	while (line && *line && rc == SAAS_OK) {
		char dir[512], type[32], opts[512];
		const char *nl = strchr(line, '\n');
		if (sscanf(line, "%*s %511s %31s %511s", dir, type, opts) == 3) {
			if (strcmp(type, "cgroup2") == 0 && !cg->v2) {
				rc = (cg->v2 = saas__strdup(dir)) ? SAAS_OK : SAAS_ENOMEM;
			} else if (strcmp(type, "cgroup") == 0) {
				for (int i = 0; i < CG_NCTL && rc == SAAS_OK; i++)
					if (!cg->v1[i] && has_word(opts, v1_names[i], ","))
						rc = (cg->v1[i] = saas__strdup(dir)) ? SAAS_OK : SAAS_ENOMEM;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	/*
	 * v1 weighs I/O only through a scheduler that honours weights (CFQ's
	 * blkio.weight before Linux 5.0, BFQ's files since): without one,
	 * libvirt's write of the weight fails the domain's start.
	 */
	if (rc == SAAS_OK && cg->v1[CG_IO]) {
		char *cfq = saas__lv_path_join(cg->v1[CG_IO], "blkio.weight"),
		     *bfq = saas__lv_path_join(cg->v1[CG_IO], "blkio.bfq.io_service_bytes");
		if (!cfq || !bfq) {
			rc = SAAS_ENOMEM;
		} else if (access(cfq, F_OK) < 0 && access(bfq, F_OK) < 0) {
			free(cg->v1[CG_IO]);
			cg->v1[CG_IO] = NULL;
		}
		free(cfq);
		free(bfq);
	}
	/* A v2 hierarchy offers the controllers no v1 hierarchy took (a hybrid host's is often empty). */
	if (rc == SAAS_OK && cg->v2) {
		char *path = saas__lv_path_join(cg->v2, "cgroup.controllers"), *text = NULL;
		if (!path)
			rc = SAAS_ENOMEM;
		else if (saas__file_read(&text, NULL, AT_FDCWD, path, 4096, SAAS__FILE_QUIET) == SAAS_OK)
			for (int i = 0; i < CG_NCTL; i++)
				cg->v2_has[i] = !cg->v1[i] && has_word(text, v2_names[i], " \n");
		free(path);
		free(text);
	}
	if (rc < 0)
		saas__lv_cg_clear(cg);
	return rc;
}

bool saas__lv_cg_has(const struct saas__lv_cg *cg, int ctl)
{
	return cg->v1[ctl] || cg->v2_has[ctl];
}

unsigned int saas__lv_pids_max(unsigned int vcpus)
{
	return PIDS_BASE + vcpus;
}

unsigned int saas__lv_memory_limit_mib(unsigned int memory_mib, bool kvm)
{
	return memory_mib + MEM_OVERHEAD_MIB + (kvm ? 0 : TCG_CACHE_MIB);
}

unsigned int saas__lv_io_weight(unsigned int vcpus)
{
	return vcpus >= IO_WEIGHT_MAX / IO_WEIGHT_PER_VCPU ? IO_WEIGHT_MAX : IO_WEIGHT_PER_VCPU * vcpus;
}

/*
 * The path of one hierarchy in /proc/PID/cgroup's text ("ID:CONTROLLERS:PATH"
 * lines; v2's is "0::PATH"), without the sub-groups libvirt makes inside a
 * domain's own (".../libvirt/emulator" on v2, ".../emulator" on v1): the
 * domain's cgroup. ctl is a v1 controller name, or NULL for v2. Freed by the
 * caller; NULL when the hierarchy is not listed (or out of memory).
 */
static char *domain_path(const char *proc_cgroup, const char *ctl)
{
	for (const char *line = proc_cgroup; line && *line;) {
		const char *nl = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2;
		size_t end = nl ? (size_t)(nl - line) : strlen(line);
		if (c1 && (size_t)(c1 - line) < end && (c2 = strchr(c1 + 1, ':')) && (size_t)(c2 - line) < end) {
			char ctls[256];
			size_t n = (size_t)(c2 - c1 - 1);
			bool match;
			if (n >= sizeof(ctls))
				n = sizeof(ctls) - 1;
			memcpy(ctls, c1 + 1, n);
			ctls[n] = '\0';
			match = ctl ? has_word(ctls, ctl, ",") : n == 0 && strncmp(line, "0:", 2) == 0;
			if (match) {
				char *path = strndup(c2 + 1, end - (size_t)(c2 + 1 - line)), *slash;
				static const char *const subs[] = { "/emulator", "/libvirt" };
				if (!path)
					saas__oom();
				for (size_t i = 0; path && i < 2; i++)
					if ((slash = strrchr(path, '/')) && strcmp(slash, subs[i]) == 0)
						*slash = '\0';
				if (path && !*path)
					strcpy(path, "/");
				return path;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return NULL;
}

int saas__lv_cg_pids_dir(const struct saas__lv_cg *cg, const char *proc_cgroup, const char *group, const char *name,
                         char **dir, bool *own)
{
	char *pids = NULL, *cpu = NULL;
	int rc = SAAS_OK;

	*dir = NULL;
	*own = false;
	if (cg->v2_has[CG_PIDS]) {
		/* v2: the domain's own cgroup (machined's scope, or libvirt's) limits all it holds. */
		if (!(pids = domain_path(proc_cgroup, NULL)) || strcmp(pids, "/") == 0)
			rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "QEMU has no cgroup of its own");
		else if (asprintf(dir, "%s%s", cg->v2, pids) < 0)
			rc = saas__oom();
		goto out;
	}
	if (!cg->v1[CG_PIDS]) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "the host has no pids controller");
		goto out;
	}
	/*
	 * v1: when libvirt (through machined) gave the domain a pids cgroup, it
	 * is the one its cpu cgroup names; otherwise QEMU sits in whatever its
	 * parent had, and gets one of ours.
	 */
	pids = domain_path(proc_cgroup, v1_names[CG_PIDS]);
	cpu = domain_path(proc_cgroup, v1_names[CG_CPU]);
	if (pids && cpu && strcmp(pids, "/") != 0 && strcmp(pids, cpu) == 0) {
		if (asprintf(dir, "%s%s", cg->v1[CG_PIDS], pids) < 0)
			rc = saas__oom();
	} else {
		*own = true;
		if (asprintf(dir, "%s/%s/%s", cg->v1[CG_PIDS], group, name) < 0)
			rc = saas__oom();
	}
out:
	if (rc < 0 && rc != SAAS_ENOTSUP)
		*dir = NULL;
	free(pids);
	free(cpu);
	return rc;
}

static int write_file(const char *dir, const char *file, const char *text)
{
	char *path = saas__lv_path_join(dir, file);
	int fd, rc = SAAS_OK;

	if (!path)
		return SAAS_ENOMEM;
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot write %s to %s: %s", text, path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

int saas__lv_cg_pids_limit(const char *dir, bool own, long pid, unsigned int max)
{
	char text[32];
	int rc;

	/* Ours: made (with its parent), limited, then QEMU moved in (the tgid moves every thread of it). */
	if (own && saas__mkdir_p(dir, 0755) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", dir, strerror(errno));
	snprintf(text, sizeof(text), "%u", max);
	if ((rc = write_file(dir, "pids.max", text)) < 0 || !own)
		return rc;
	snprintf(text, sizeof(text), "%ld", pid);
	return write_file(dir, "cgroup.procs", text);
}

int saas__lv_cg_pids_remove(const struct saas__lv_cg *cg, const char *group, const char *name)
{
	char *dir;
	int rc = SAAS_OK;

	if (!cg->v1[CG_PIDS] || cg->v2_has[CG_PIDS])
		return SAAS_OK;
	if (asprintf(&dir, "%s/%s/%s", cg->v1[CG_PIDS], group, name) < 0)
		return saas__oom();
	/* A QEMU that was just killed may still be leaving (its threads exit one by one): give it a moment. */
	for (int i = 0; rmdir(dir) < 0; i++) {
		if (errno == ENOENT)
			break;
		if (errno != EBUSY || i == 50) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot remove %s: %s", dir, strerror(errno));
			break;
		}
		saas__sleep_ms(20);
	}
	free(dir);
	return rc;
}

void saas__lv_cg_pids_sweep(const struct saas__lv_cg *cg, const char *group)
{
	char *parent;
	DIR *dir;
	struct dirent *e;

	if (!cg->v1[CG_PIDS] || cg->v2_has[CG_PIDS] || asprintf(&parent, "%s/%s", cg->v1[CG_PIDS], group) < 0)
		return;
	/* A cgroup a process still runs in refuses rmdir (EBUSY): only the VMs that are gone lose theirs. */
	if ((dir = opendir(parent))) {
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.' && e->d_type == DT_DIR)
				unlinkat(dirfd(dir), e->d_name, AT_REMOVEDIR);
		closedir(dir);
	}
	free(parent);
}

/*
 * libvirt without machined on a cgroup v1 host makes its partition
 * ("machine") under the cpuset hierarchy at the first VM start after boot:
 * mkdir, then the root's cpuset.cpus and cpuset.mems copied in. Two starts at
 * that moment (a create beside the template builder, or two engines) race:
 * the second finds the directory, makes its VM's group under it while it is
 * still empty, and its QEMU cannot join an empty cpuset ("No space left on
 * device"). Made here, before the driver starts anything, there is no first
 * start to race. What this process may not write (not root) is left alone.
 */
int saas__lv_cg_cpuset_prime(const char *mounts, const char *partition)
{
	static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
	const char *line = mounts;
	char root[512] = "", *dir = NULL;
	int rc = SAAS_OK;

	while (line && *line && !root[0]) {
		char type[32], opts[512];
		const char *nl = strchr(line, '\n');
		if (sscanf(line, "%*s %511s %31s %511s", root, type, opts) != 3 || strcmp(type, "cgroup") != 0 ||
		    !has_word(opts, "cpuset", ","))
			root[0] = '\0';
		line = nl ? nl + 1 : NULL;
	}
	if (!root[0])
		return SAAS_OK; /* no cpuset hierarchy of v1: nothing to race on */
	if (!(dir = saas__lv_path_join(root, partition)))
		return SAAS_ENOMEM;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		free(dir);
		return SAAS_OK;
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(files) && rc == SAAS_OK; i++) {
		char *path = saas__lv_path_join(dir, files[i]), *from = saas__lv_path_join(root, files[i]), *have = NULL,
		     *want = NULL;
		/* cgroupfs (the host's, as /proc/self/mounts names it): an unreadable file reads as empty. */
		if (path)
			(void)saas__file_read(&have, NULL, AT_FDCWD, path, 4096, SAAS__FILE_QUIET);
		if (from)
			(void)saas__file_read(&want, NULL, AT_FDCWD, from, 4096, SAAS__FILE_QUIET);
		if (!path || !from)
			rc = SAAS_ENOMEM;
		else if ((!have || strspn(have, " \n") == strlen(have)) && want && strspn(want, " \n") < strlen(want))
			rc = write_file(dir, files[i], want);
		free(path);
		free(have);
		free(from);
		free(want);
	}
	free(dir);
	return rc;
}

/* ---- the driver's side ----------------------------------------------------------------------- */

void saas__lv_limits_setup(struct drv *d, bool embedded)
{
	char *mounts = NULL;
	/* libvirt makes cgroups as root only: an embedded driver of another user gets none. */
	bool cgroups = !embedded || geteuid() == 0;

	/* None read (or over 1 MiB of mounts): no cgroup limits, said below. */
	(void)saas__file_read(&mounts, NULL, AT_FDCWD, "/proc/self/mounts", 1 << 20, SAAS__FILE_QUIET);
	if (!mounts || saas__lv_cg_detect(&d->cg, mounts) < 0)
		memset(&d->cg, 0, sizeof(d->cg));
	if (mounts && embedded && geteuid() == 0 && saas__lv_cg_cpuset_prime(mounts, "machine") < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "cannot prepare the cpuset cgroup \"machine\" (two VMs starting at once "
		             "right after boot may fail): %s", saas_error_last()->message);
	free(mounts);
	d->lim_cpu = cgroups && d->cpu_milli && saas__lv_cg_has(&d->cg, CG_CPU);
	d->lim_memory = cgroups && saas__lv_cg_has(&d->cg, CG_MEMORY);
	d->lim_io = cgroups && saas__lv_cg_has(&d->cg, CG_IO);
	/* The pids cgroup is ours to make and fill, which needs QEMU's pid (the embedded driver's pidfile) and root. */
	d->lim_pids = embedded && geteuid() == 0 && saas__lv_cg_has(&d->cg, CG_PIDS) && d->root;
	saas__lv_log(d, d->lim_cpu && d->lim_memory && d->lim_pids && d->lim_io ? SAAS_LOG_INFO : SAAS_LOG_WARN,
	             "VM limits on this host (cgroup %s): CPU %s, memory %s, pids %s, I/O weight %s%s",
	             d->cg.v2 && !d->cg.v1[CG_CPU] ? "v2" : d->cg.v2 ? "v1 hybrid" : d->cg.v1[CG_CPU] ? "v1" : "none",
	             d->lim_cpu ? "on" : d->cpu_milli ? "unavailable" : "off (cpu_limit=off)", d->lim_memory ? "on" : "unavailable",
	             d->lim_pids ? "on" : "unavailable", d->lim_io ? "on" : "unavailable",
	             cgroups ? "" : " (libvirt makes cgroups only as root)");
	if (d->lim_pids)
		saas__lv_cg_pids_sweep(&d->cg, d->cg_group);
}

long saas__lv_qemu_pid(struct drv *d, const char *name)
{
	char *path, *text;
	long pid = 0;

	if (asprintf(&path, "%s/run/qemu/%s.pid", d->root, name) < 0)
		return 0;
	/* libvirt's pidfile, in the embedded root: never read through a link put there. */
	if (saas__file_read(&text, NULL, AT_FDCWD, path, 64, SAAS__FILE_NOFOLLOW | SAAS__FILE_QUIET) == SAAS_OK)
		pid = strtol(text, NULL, 10);
	free(text);
	free(path);
	return pid > 0 ? pid : 0;
}

static int pids_apply(struct drv *d, const char *name, unsigned int vcpus)
{
	long pid = saas__lv_qemu_pid(d, name);
	char *proc = NULL, *text = NULL, *dir = NULL;
	bool own = false;
	int rc;

	if (!pid)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "cannot find QEMU's pid for %s", name);
	if (asprintf(&proc, "/proc/%ld/cgroup", pid) < 0)
		return saas__oom();
	if ((rc = saas__file_read(&text, NULL, AT_FDCWD, proc, 1 << 16, 0)) == SAAS_OK &&
	    (rc = saas__lv_cg_pids_dir(&d->cg, text, d->cg_group, name, &dir, &own)) == SAAS_OK)
		rc = saas__lv_cg_pids_limit(dir, own, pid, saas__lv_pids_max(vcpus));
	free(proc);
	free(text);
	free(dir);
	return rc;
}

int saas__lv_limits_apply(struct drv *d, virDomainPtr dom, const char *name, unsigned int vcpus, unsigned int memory_mib,
                          bool kvm)
{
	int rc;

	if (d->lim_memory) {
		virTypedParameter p;
		memset(&p, 0, sizeof(p));
		saas__strlcpy(p.field, VIR_DOMAIN_MEMORY_HARD_LIMIT, sizeof(p.field));
		p.type = VIR_TYPED_PARAM_ULLONG;
		p.value.ul = (unsigned long long)saas__lv_memory_limit_mib(memory_mib, kvm) << 10; /* KiB */
		if (virDomainSetMemoryParameters(dom, &p, 1, VIR_DOMAIN_AFFECT_LIVE) < 0) {
			rc = saas__error_wrap(saas__lv_virt_error("setting the VM's memory limit"), "%s", name);
			/*
			 * A remote host whose libvirtd has no memory controller: as on a
			 * host without one here (limits_setup), VMs run without the limit,
			 * said once in the log.
			 */
			if (!d->host->limits_learned || !strstr(saas_error_last()->message, "memory controller"))
				return rc;
			saas__lv_log(d, SAAS_LOG_WARN, "VM host %s gives libvirt no memory cgroup controller: VMs run there "
			             "without their memory limit (%s)", d->uri, saas_error_last()->message);
			saas__error_clear();
			pthread_mutex_lock(&d->mu);
			d->lim_memory = false;
			pthread_mutex_unlock(&d->mu);
		}
	}
	if (d->lim_pids && (rc = pids_apply(d, name, vcpus)) < 0)
		return saas__error_wrap(rc, "setting the VM's pids limit");
	return SAAS_OK;
}

void saas__lv_limits_release(struct drv *d, const char *name)
{
	if (d->lim_pids && saas__lv_cg_pids_remove(&d->cg, d->cg_group, name) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: %s", name, saas_error_last()->message);
}
