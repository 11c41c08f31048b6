/*
 * Template RAM that clones map copy-on-write (driver option
 * template_memory=mapped). A template VM's RAM is a memfd, the file of a
 * memory-backend-file with share=on; once it is saved (without its RAM:
 * x-ignore-shared), the memfd is sealed for good (F_SEAL_WRITE, SHRINK,
 * GROW, SEAL), and each clone maps it with share=off: its pages are the
 * template's until the clone writes them, and clones share every page they
 * have not written.
 *
 * Why a sealed memfd and not a file on tmpfs: QEMU 7.2 opens a
 * memory-backend-file read-write even with share=off, so a file would have
 * to be writable by every clone's uid, and a tenant who escaped into one
 * clone's QEMU could change every other tenant's memory (the pages their
 * clones have not written yet follow the file). A sealed memfd opens
 * read-write and maps privately, yet write(), shared writable mappings,
 * hole punching and truncation fail with EPERM for everyone, root too, and
 * the seals cannot be taken off. It also lives on no mounted filesystem, so
 * a full tmpfs cannot kill clones with SIGBUS.
 *
 * QEMU opens its memory file by path. A memfd has one: /proc/PID/fd/N of a
 * process holding it, which only a process of the holder's uid may open. The
 * holder is a short-lived child of the engine that runs as the VM's QEMU uid
 * and holds nothing else; it is a fresh program (cat, waiting on a pipe), so
 * nothing of the engine's memory is readable through it. It lives until the
 * VM's QEMU has opened the file.
 *
 * The sealed memory is kept on disk as the template's "ram" file (sparse,
 * 0600, the engine's) and loaded again into a sealed memfd when an engine
 * first clones a template it did not build.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "util/file.h"

#define COPY_CHUNK (1u << 20)

int saas__lv_memfd_new(const char *name, uint64_t bytes, int *out)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)bytes) < 0) {
		int err = errno;
		close(fd);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "sizing the guest's memory: %s", strerror(err));
	}
	*out = fd;
	return SAAS_OK;
}

int saas__lv_memfd_seal(int fd)
{
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "sealing the template's memory: %s", strerror(errno));
	return SAAS_OK;
}

bool saas__lv_memfd_sealed(int fd)
{
	int want = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & want) == want;
}

/* Copy the data of from into to at the same offsets; holes (never-written guest pages) stay holes. */
static int copy_sparse(int from, int to, uint64_t bytes)
{
	char *buf = malloc(COPY_CHUNK);
	off_t at = 0;
	int rc = SAAS_OK;

	if (!buf)
		return saas__oom();
	while ((uint64_t)at < bytes) {
		off_t data = lseek(from, at, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break; /* nothing but a hole to the end */
		if (data < 0 || (hole = lseek(from, data, SEEK_HOLE)) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "seeking the template's memory: %s", strerror(errno));
			break;
		}
		for (at = data; at < hole && rc == SAAS_OK;) {
			size_t want = (size_t)(hole - at < COPY_CHUNK ? hole - at : COPY_CHUNK);
			ssize_t n = pread(from, buf, want, at);
			if (n > 0 && pwrite(to, buf, (size_t)n, at) != n)
				n = -1;
			if (n <= 0)
				rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, n < 0 ? errno : EIO, "copying the template's memory: %s",
				                 n < 0 ? strerror(errno) : "short read");
			else
				at += n;
		}
		if (rc < 0)
			break;
	}
	free(buf);
	return rc;
}

int saas__lv_memfd_save(int fd, uint64_t bytes, const char *path)
{
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc;

	if (out < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
	rc = copy_sparse(fd, out, bytes);
	if (rc == SAAS_OK && (ftruncate(out, (off_t)bytes) < 0 || fsync(out) < 0))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
	close(out);
	return rc;
}

int saas__lv_memfd_load(const char *name, const char *path, uint64_t bytes, int *out)
{
	int in = open(path, O_RDONLY | O_CLOEXEC), fd = -1, rc;
	struct stat st;

	if (in < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
	/* A file of another size was not saved for this shape: QEMU would refuse it, or read past it. */
	if (fstat(in, &st) < 0 || (uint64_t)st.st_size != bytes) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "%s holds %lld bytes, not the %llu of the guest's memory",
		                 path, (long long)st.st_size, (unsigned long long)bytes);
		goto out;
	}
	if ((rc = saas__lv_memfd_new(name, bytes, &fd)) < 0 || (rc = copy_sparse(in, fd, bytes)) < 0 ||
	    (rc = saas__lv_memfd_seal(fd)) < 0)
		goto out;
	*out = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	close(in);
	return rc;
}

int saas__lv_memfd_get(struct drv *d, const char *dir, const char *name, uint64_t bytes, saas__lv_memfd_slot_fn slot,
                       const char *key, const char *what, int *fd, bool *broken)
{
	char *path = saas__lv_path_join(dir, "ram");
	struct stat st;
	int rc = SAAS_OK, loaded = -1, *held;

	*fd = -1;
	*broken = false;
	if (!path)
		return SAAS_ENOMEM;
	if (stat(path, &st) < 0) {
		free(path);
		return SAAS_ENOTFOUND;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_mutex_lock(&d->mu);
		held = slot(d, key);
		if (held && *held < 0 && loaded >= 0) {
			*held = loaded;
			loaded = -1;
		}
		/* A copy for this VM: the driver's may be let go of (pruned, deleted) while the VM starts. */
		if (held && *held >= 0 && (*fd = fcntl(*held, F_DUPFD_CLOEXEC, 3)) < 0)
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "dup: %s", strerror(errno));
		else
			rc = SAAS_OK;
		pthread_mutex_unlock(&d->mu);
		if (rc < 0 || *fd >= 0 || !held)
			break;
		/* Not in memory yet (an engine that did not make it): loaded once, outside the lock (it takes a while). */
		if ((rc = saas__lv_memfd_load(name, path, bytes, &loaded)) < 0) {
			*broken = true;
			break;
		}
	}
	if (loaded >= 0)
		close(loaded);
	if (rc == SAAS_OK && *fd < 0)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "%s %s is not known", what, key);
	/* Whatever it came from, only a sealed memory may be handed to a VM. */
	if (rc == SAAS_OK && !saas__lv_memfd_sealed(*fd)) {
		close(*fd);
		*fd = -1;
		*broken = true;
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "%s %s's memory is not sealed", what, key);
	}
	free(path);
	return rc;
}

/*
 * The holder's child side, between fork and exec: only async-signal-safe
 * calls. Its one file beyond stdio is the memfd, as fd 3; stdin is the pipe
 * whose end the engine closes to let it go. It reports a failure by errno
 * on the CLOEXEC pipe `ready` (an exec closes it: EOF means it runs).
 */
static void holder_child(int memfd, int go, int ready, uid_t uid, gid_t gid)
{
	int err = 0, report = ready, null = open("/dev/null", O_WRONLY);

	/* Every source above 4 first, so that no dup2 below overwrites another's source. */
	if (null < 0 || (null = fcntl(null, F_DUPFD, 5)) < 0 || (memfd = fcntl(memfd, F_DUPFD, 5)) < 0 ||
	    (go = fcntl(go, F_DUPFD, 5)) < 0 || (ready = fcntl(ready, F_DUPFD, 5)) < 0 || dup2(go, 0) < 0 ||
	    dup2(null, 1) < 0 || dup2(null, 2) < 0 || dup2(memfd, 3) < 0 || dup2(ready, 4) < 0 ||
	    fcntl(4, F_SETFD, FD_CLOEXEC) < 0)
		err = errno;
	/* Nothing of the engine's stays open in it: not a socket, not a key. */
	if (!err) {
		report = 4;
		close_range(5, ~0U, 0);
	}
	if (!err && uid && (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0))
		err = errno;
	if (!err) {
		static char *const argv[] = { "cat", NULL };
		execvp(argv[0], argv);
		err = errno;
	}
	if (write(report, &err, sizeof(err)) < 0)
		err = 0;
	_exit(127);
}

int saas__lv_holder_start(struct saas__lv_holder *h, int memfd, uid_t uid, gid_t gid)
{
	int go[2] = { -1, -1 }, ready[2] = { -1, -1 }, err = 0, rc = SAAS_OK;
	ssize_t n;

	h->pid = -1;
	h->go = -1;
	h->path[0] = '\0';
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "pipe: %s", strerror(errno));
		goto out;
	}
	if ((h->pid = fork()) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "fork: %s", strerror(errno));
		goto out;
	}
	if (h->pid == 0)
		holder_child(memfd, go[0], ready[1], uid, gid);
	close(ready[1]);
	ready[1] = -1;
	while ((n = read(ready[0], &err, sizeof(err))) < 0 && errno == EINTR)
		;
	if (n != 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "starting the holder of the template's memory: %s",
		                 n == sizeof(err) ? strerror(err) : "no answer");
		goto out;
	}
	h->go = go[1];
	go[1] = -1;
	snprintf(h->path, sizeof(h->path), "/proc/%ld/fd/3", (long)h->pid);
out:
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ready[i] >= 0)
			close(ready[i]);
	}
	if (rc < 0)
		saas__lv_holder_stop(h);
	return rc;
}

void saas__lv_holder_stop(struct saas__lv_holder *h)
{
	if (h->go >= 0)
		close(h->go); /* cat reads EOF and ends */
	h->go = -1;
	if (h->pid > 0)
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	h->pid = -1;
	h->path[0] = '\0';
}

/*
 * Mapped template memory needs the engine to start the holder as the VM's
 * QEMU uid: the embedded driver, and either per-VM uids (the engine is root)
 * or QEMU running as the engine's own uid (an unprivileged engine). Why not
 * otherwise, in why.
 */
bool saas__lv_mapped_possible(const struct drv *d, char *why, size_t why_len)
{
	if (!d->root)
		snprintf(why, why_len, "a system libvirtd starts QEMU, and the engine cannot hand it the template's "
		                       "memory under QEMU's uid");
	else if (geteuid() == 0 && !d->cf.confined)
		snprintf(why, why_len, "QEMU runs as root without a uid of its own (uids=off or not possible here)");
	else
		return true;
	return false;
}

uint64_t saas__lv_mem_available_mib(void)
{
	char *text, *p;
	uint64_t kib = 0;

	/* 0 (unknown) when it cannot be read: nothing is then refused for memory. */
	if (saas__file_read(&text, NULL, AT_FDCWD, "/proc/meminfo", 16384, SAAS__FILE_QUIET) == SAAS_OK &&
	    (p = strstr(text, "MemAvailable:")))
		kib = strtoull(p + 13, NULL, 10);
	free(text);
	return kib >> 10;
}

int saas__lv_memory_room(uint64_t avail_mib, unsigned int need_mb, unsigned int reserve_mb)
{
	if (!avail_mib || avail_mib >= (uint64_t)need_mb + reserve_mb)
		return SAAS_OK;
	/* The tenant learns that the server is short, not what it runs. */
	return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
	                   "the server is short of memory for a sandbox of %u MiB (%llu MiB available, %u MiB kept "
	                   "free); try again later or choose a smaller size",
	                   need_mb, (unsigned long long)avail_mib, reserve_mb);
}

/*
 * Every VM the driver starts here could come to hold its whole memory: a cold
 * boot's guest touches what it uses, a loaded clone or a restored snapshot
 * can hold all of it at once (docs/sandboxes.md, "Memory, loaded"). A host
 * that has not that much and the reserve says so now, before a VM starts that
 * would have the kernel kill VMs to make room.
 */
int saas__lv_memory_check(struct drv *d, const saas_vm_spec *spec)
{
	int rc;

	if (!d->host->local_memory)
		return SAAS_OK;
	rc = saas__lv_memory_room(saas__lv_mem_available_mib(), spec->memory_mb, d->min_free_memory_mb);
	if (rc < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s not started: %s", spec->name, saas_error_last()->message);
	return rc;
}
