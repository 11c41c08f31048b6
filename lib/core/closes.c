/*
 * Ending a sandbox whatever the store says. An end has two halves: the VM
 * goes, and the row is closed and billed. The VM must go even when the store
 * cannot record the close (a tenant filled the disk under a SQLite store, or
 * PostgreSQL is down): otherwise an expired or unpaid sandbox keeps running
 * for as long as the outage lasts. So the close is tried first (it is also
 * the reaper's atomic re-check of the expiry); if the store fails, the VM is
 * destroyed all the same and the close is kept, in memory and in a small
 * file of the state directory allocated ahead (so that it can be written on a
 * full disk). Every sweep tries again; reconcile at the next start finishes
 * what a stopped engine left. Until then reads show the sandbox as it will be
 * recorded, so its owner sees it destroyed and is billed to the right moment.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/*
 * The file's fixed size: allocated at open, rewritten in place, never grown.
 * One line a close ("ID REASON DESTROYED_AT BILL_UNTIL"), at most ~110 bytes:
 * room for 500 or so; closes past that are kept in memory only (after a
 * crash, reconcile bills those to the last heartbeat, never past expiry).
 */
#define CLOSES_FILE_SIZE 65536
#define CLOSES_FILE "closes.pending"

static char *closes_path(saas_engine *e)
{
	char *p;

	if (asprintf(&p, "%s/" CLOSES_FILE, e->state_dir) < 0)
		return NULL;
	return p;
}

/* Write the pending list over the file, whole; the caller holds closes.mu. */
static void closes_save_locked(saas_engine *e)
{
	struct saas__closes *c = &e->closes;
	char *buf;
	size_t off = 0, kept = 0;

	if (c->fd < 0 || !(buf = calloc(1, CLOSES_FILE_SIZE)))
		return;
	for (size_t i = 0; i < c->count; i++) {
		const struct saas__pending_close *p = &c->items[i];
		int n = snprintf(buf + off, CLOSES_FILE_SIZE - off, "%s %d %" PRId64 " %" PRId64 "\n", p->id, p->reason,
		                 p->destroyed_at_ms, p->bill_until_ms);
		if (n < 0 || (size_t)n >= CLOSES_FILE_SIZE - off) {
			memset(buf + off, 0, CLOSES_FILE_SIZE - off);
			break;
		}
		off += (size_t)n;
		kept++;
	}
	if (kept < c->count)
		saas__log(e, SAAS_LOG_WARN, "%zu pending closes do not fit in %s; they are kept in memory only",
		          c->count - kept, CLOSES_FILE);
	if (pwrite(c->fd, buf, CLOSES_FILE_SIZE, 0) != CLOSES_FILE_SIZE || fdatasync(c->fd) < 0)
		saas__log(e, SAAS_LOG_ERROR, "cannot write %s/%s: %s", e->state_dir, CLOSES_FILE, strerror(errno));
	free(buf);
}

static struct saas__pending_close *find_locked(struct saas__closes *c, const char *id)
{
	for (size_t i = 0; i < c->count; i++)
		if (strcmp(c->items[i].id, id) == 0)
			return &c->items[i];
	return NULL;
}

/* Keep a close to record later; the first one kept for a sandbox stands. */
static int closes_add(saas_engine *e, const char *id, int reason, int64_t destroyed_at_ms, int64_t bill_until_ms)
{
	struct saas__closes *c = &e->closes;
	struct saas__pending_close *p;
	int rc = SAAS_OK;

	pthread_mutex_lock(&c->mu);
	if (find_locked(c, id))
		goto out;
	if ((rc = SAAS__ARRAY_RESERVE(c->items, c->cap, c->count + 1)) < 0)
		goto out;
	p = &c->items[c->count++];
	saas__strlcpy(p->id, id, sizeof(p->id));
	p->reason = reason;
	p->destroyed_at_ms = destroyed_at_ms;
	p->bill_until_ms = bill_until_ms;
	closes_save_locked(e);
out:
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static void closes_drop(saas_engine *e, const char *id)
{
	struct saas__closes *c = &e->closes;
	struct saas__pending_close *p;

	pthread_mutex_lock(&c->mu);
	if ((p = find_locked(c, id))) {
		*p = c->items[--c->count];
		closes_save_locked(e);
	}
	pthread_mutex_unlock(&c->mu);
}

bool saas__closes_pending(saas_engine *e, const char *id)
{
	bool found;

	pthread_mutex_lock(&e->closes.mu);
	found = find_locked(&e->closes, id) != NULL;
	pthread_mutex_unlock(&e->closes.mu);
	return found;
}

bool saas__closes_view(saas_engine *e, saas_store_sandbox *row)
{
	struct saas__pending_close *p, copy;
	bool found = false;

	if (row->status == SAAS_SANDBOX_DESTROYED)
		return false;
	pthread_mutex_lock(&e->closes.mu);
	if ((p = find_locked(&e->closes, row->id))) {
		copy = *p;
		found = true;
	}
	pthread_mutex_unlock(&e->closes.mu);
	if (!found)
		return false;
	row->cost_usd_micro = saas__close_cost(row, copy.bill_until_ms);
	row->status = SAAS_SANDBOX_DESTROYED;
	row->end_reason = copy.reason;
	row->destroyed_at_ms = copy.destroyed_at_ms;
	return true;
}

static void destroy_vm(saas_engine *e, const saas_store_sandbox *sb)
{
	void *ctx;

	/* A VM that outlives a closed row is found and destroyed by the orphan sweep (of its host, once it answers). */
	if (saas__vm_driver(e, sb->host_id, &ctx) < 0 || e->driver->vm_destroy(ctx, sb->id) < 0)
		saas__log(e, SAAS_LOG_ERROR, "destroying VM %s failed (%s); the reaper will retry", sb->id,
		          saas_error_last()->message);
}

int saas__sandbox_end(saas_engine *e, const saas_store_sandbox *sb, int reason, int64_t destroyed_at_ms,
                      int64_t bill_until_ms, unsigned int flags)
{
	int rc;

	/* The VM's counters go with it: its last counts are recorded first, and stay on the destroyed sandbox. */
	saas__network_counts_save(e, sb);
	rc = saas__sandbox_close(e, sb, reason, destroyed_at_ms, bill_until_ms,
	                         (flags & SAAS__END_IF_EXPIRY) ? sb->expires_at_ms : 0);

	/* Extended since it was read: it is not over, and its VM stays. */
	if (rc == SAAS_ESTATE)
		return rc;
	if (rc < 0 && rc != SAAS_ENOTFOUND) {
		saas__log(e, SAAS_LOG_WARN, "sandbox %s: the store cannot record its end (%s); destroying its VM "
		          "and recording the end when the store recovers", sb->id, saas_error_last()->message);
		if (closes_add(e, sb->id, reason, destroyed_at_ms, bill_until_ms) == SAAS_OK)
			rc = SAAS_OK;
	}
	/* Whatever the store said: no row that can pay for it (any more) means no VM, and no saved state. */
	destroy_vm(e, sb);
	if (sb->snapshot[0])
		saas__snapshot_drop(e, sb->host_id, sb->snapshot);
	/* Paused (or being paused) since sb was read: the row names the snapshot its close leaves behind. */
	if (e->driver && saas__can_snapshot(e)) {
		saas_store_sandbox now;
		if (e->store->sandbox_get(e->store_ctx, sb->id, &now) == SAAS_OK && now.snapshot[0] &&
		    strcmp(now.snapshot, sb->snapshot) != 0)
			saas__snapshot_drop(e, sb->host_id, now.snapshot);
	}
	return rc;
}

size_t saas__closes_retry(saas_engine *e)
{
	struct saas__closes *c = &e->closes;
	size_t left;

	/* The lock is not held across the store: a drop moves the last entry into slot i, so i stays. */
	for (size_t i = 0;;) {
		struct saas__pending_close p;
		saas_store_sandbox row;
		int rc;

		pthread_mutex_lock(&c->mu);
		if (i >= c->count) {
			pthread_mutex_unlock(&c->mu);
			break;
		}
		p = c->items[i];
		pthread_mutex_unlock(&c->mu);
		/*
		 * Again, in case the first destroy failed: the orphan sweep spares a VM
		 * whose row is live. Only the engine's own driver: the store that would
		 * name a VM host is what fails here, and each host's orphan sweep
		 * finds what a failed destroy left there.
		 */
		if (e->driver)
			e->driver->vm_destroy(e->driver_ctx, p.id);
		rc = e->store->sandbox_get(e->store_ctx, p.id, &row);
		if (rc == SAAS_OK && row.status != SAAS_SANDBOX_DESTROYED)
			rc = saas__sandbox_close(e, &row, p.reason, p.destroyed_at_ms, p.bill_until_ms, 0);
		if (rc == SAAS_OK || rc == SAAS_ENOTFOUND) {
			saas__log(e, SAAS_LOG_INFO, "sandbox %s: its end is recorded now", p.id);
			closes_drop(e, p.id);
		} else {
			i++;
		}
	}
	pthread_mutex_lock(&c->mu);
	left = c->count;
	pthread_mutex_unlock(&c->mu);
	return left;
}

/* One "ID REASON DESTROYED_AT BILL_UNTIL" line of the file, or false. */
_Static_assert(SAAS_ID_MAX == 63, "the %63s below reads at most SAAS_ID_MAX bytes of id");
static bool parse_line(const char *line, struct saas__pending_close *p)
{
	char id[SAAS_ID_MAX + 1];
	long long destroyed, until;
	int reason, used = 0;

	if (sscanf(line, "%63s %d %lld %lld%n", id, &reason, &destroyed, &until, &used) != 4 || line[used] != '\0')
		return false;
	if (!saas__valid_text(id, SAAS_ID_MAX) || reason < SAAS_END_USER || reason > SAAS_END_DISABLED)
		return false;
	saas__strlcpy(p->id, id, sizeof(p->id));
	p->reason = reason;
	p->destroyed_at_ms = destroyed;
	p->bill_until_ms = until;
	return true;
}

int saas__closes_open(saas_engine *e)
{
	struct saas__closes *c = &e->closes;
	char *path = closes_path(e), *buf = NULL, *line, *next;
	ssize_t n;
	int err;

	if (!path)
		return saas__oom();
	c->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->fd < 0) {
		err = errno;
		saas__log(e, SAAS_LOG_WARN, "cannot open %s (%s): pending closes are kept in memory only", path,
		          strerror(err));
		goto out;
	}
	if (!(buf = calloc(1, CLOSES_FILE_SIZE + 1))) {
		free(path);
		return saas__oom();
	}
	/* What a previous engine could not record; reconcile records it now. */
	n = pread(c->fd, buf, CLOSES_FILE_SIZE, 0);
	for (line = buf; n > 0 && line && *line; line = next) {
		struct saas__pending_close p;
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		if (parse_line(line, &p))
			closes_add(e, p.id, p.reason, p.destroyed_at_ms, p.bill_until_ms);
		else
			saas__log(e, SAAS_LOG_WARN, "%s: ignoring a malformed line", path);
	}
	/* Allocated now, while there is room, so that it can be rewritten on a full disk. */
	if ((err = posix_fallocate(c->fd, 0, CLOSES_FILE_SIZE)) != 0)
		saas__log(e, SAAS_LOG_WARN, "cannot allocate %s (%s): pending closes may not survive a restart", path,
		          strerror(err));
	pthread_mutex_lock(&c->mu);
	closes_save_locked(e);
	pthread_mutex_unlock(&c->mu);
out:
	free(buf);
	free(path);
	return SAAS_OK;
}

void saas__closes_free(saas_engine *e)
{
	if (e->closes.fd >= 0)
		close(e->closes.fd);
	e->closes.fd = -1;
	free(e->closes.items);
	e->closes.items = NULL;
	e->closes.count = e->closes.cap = 0;
}
