#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/core.h"
#include "saas/version.h"
#include "store/store.h"

#ifdef SAAS_WITH_LIBVIRT
extern const saas_driver saas__driver_libvirt;
#endif

/* The seeds' price list: per hour, in micro-dollars. */
static const saas_size default_sizes[] = {
	{ "small", 2, 4096, 40, 90000 },
	{ "medium", 4, 8192, 80, 280000 },
	{ "large", 8, 16384, 160, 550000 },
};
static const saas_size *const default_size_list[] = { &default_sizes[0], &default_sizes[1], &default_sizes[2] };

#define DEFAULT_MAX_SANDBOXES 10
#define DEFAULT_TIMEOUT_S 900
#define DEFAULT_MAX_TIMEOUT_S 86400
#define DEFAULT_MIN_BALANCE_S 60
#define DEFAULT_REAPER_MS 1000
#define DEFAULT_PREVIEW "http://{name}.localhost:8080/"

/*
 * How much of saas_engine_options a caller of each version has: version 1 ends
 * before `pool`, 2 before the tenant limits, 3 before `store` (version 4 added
 * `store`, `store_userdata` and `default_size`), 4 before `disk_budget_gb`,
 * 5 before `lease_ttl_ms`, the VM hosts' heartbeat and grace, and
 * `paused_usd_micro_per_gib_hour`, 6 before `mcp_sessions_max`, 7 before
 * `max_transfers`, 8 before the metrics' three.
 */
static const size_t options_size[] = {
	0,
	offsetof(saas_engine_options, pool),
	offsetof(saas_engine_options, max_executions),
	offsetof(saas_engine_options, store),
	offsetof(saas_engine_options, disk_budget_gb),
	offsetof(saas_engine_options, lease_ttl_ms),
	offsetof(saas_engine_options, mcp_sessions_max),
	offsetof(saas_engine_options, max_transfers),
	offsetof(saas_engine_options, metrics_interval_ms),
	sizeof(saas_engine_options),
};

/* Ten years: longer is a typo, and the retention's milliseconds must not overflow. */
#define RETENTION_MAX_S ((int64_t)10 * 366 * 86400)

SAAS_EXTERN(const char *) saas_version(void)
{
	return SAAS_VERSION_STRING;
}

SAAS_EXTERN(void) saas_free(void *str)
{
	free(str);
}

static int64_t real_clock(void *userdata)
{
	(void)userdata;
	return saas__now_ms();
}

static void null_log(void *userdata, int level, const char *msg)
{
	(void)userdata;
	(void)level;
	(void)msg;
}

int64_t saas__engine_now(saas_engine *e)
{
	return e->clock(e->clock_userdata);
}

void saas__log(saas_engine *e, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!e || level > e->log_level || e->log == null_log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->log(e->log_userdata, level, msg);
}

const saas_size *saas__engine_size(saas_engine *e, const char *name)
{
	for (size_t i = 0; i < e->nsizes; i++)
		if (strcmp(e->sizes[i].name, name) == 0)
			return &e->sizes[i];
	return NULL;
}

/* Free bytes for an unprivileged writer on path's filesystem, or -1 if it cannot be read; its size in *size. */
static int64_t free_bytes(const char *path, uint64_t *size)
{
	struct statvfs st;

	if (statvfs(path, &st) < 0)
		return -1;
	if (size)
		*size = (uint64_t)st.f_blocks * st.f_frsize;
	return (int64_t)((uint64_t)st.f_bavail * st.f_frsize);
}

static int add_disk(void *ud, const saas_store_sandbox *sb)
{
	*(uint64_t *)ud += sb->disk_gb;
	return 0;
}

/*
 * The disk budget: what the live sandboxes' sizes (their rows, whatever their
 * state) and the warm pools at full count may grow to, plus need_gb, against
 * the budget (its default a share of fs_size, the overlays' filesystem).
 */
static int disk_budget(saas_engine *e, unsigned int need_gb, uint64_t fs_size)
{
	saas_store_filter filter;
	uint64_t budget = e->disk_budget_gb ? e->disk_budget_gb : (fs_size >> 30) * SAAS_ENGINE_DISK_BUDGET_PCT / 100;
	uint64_t held = e->pool_disk_gb;
	int rc;

	if (!e->disk_budget_gb && !fs_size)
		return SAAS_OK; /* a driver whose disks are not ours to see, or the overlays' directory not there yet */
	if (saas__hosts_any(e))
		return SAAS_OK; /* new sandboxes go to VM hosts, whose disks are theirs: placement weighs them */
	memset(&filter, 0, sizeof(filter));
	filter.live = 1;
	if ((rc = e->store->sandbox_list(e->store_ctx, &filter, add_disk, &held)) < 0)
		return rc;
	if (held + need_gb <= budget)
		return SAAS_OK;
	saas__log(e, SAAS_LOG_WARN, "sandboxes hold %llu GiB of the %llu GiB disk budget: refusing a create of %u GiB",
	          (unsigned long long)held, (unsigned long long)budget, need_gb);
	return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_OS, ENOSPC,
	                   "the server's disk budget for sandboxes is spent (%llu of %llu GiB held, this size needs %u GiB); "
	                   "no new sandbox until some end; try again later or choose a smaller size",
	                   (unsigned long long)held, (unsigned long long)budget, need_gb);
}

int saas__engine_room(saas_engine *e, unsigned int need_gb)
{
	char *overlays = NULL;
	const char *paths[2];
	uint64_t size = 0;
	size_t n = 0;
	int rc = SAAS_OK;

	paths[n++] = e->state_dir;
	/* The libvirt driver keeps each VM's overlay under STATE/libvirt/vms, which may be a mount of its own. */
	if (e->driver && strcmp(e->driver->name, "libvirt") == 0) {
		if (asprintf(&overlays, "%s/libvirt/vms", e->state_dir) < 0)
			return saas__oom();
		paths[n++] = overlays;
	}
	for (size_t i = 0; i < n && rc == SAAS_OK; i++) {
		uint64_t fs_size = 0;
		int64_t have = free_bytes(paths[i], &fs_size);
		/* The budget's default is a share of the filesystem the overlays are on. */
		if (have >= 0 && i == 1)
			size = fs_size;
		/* A check that cannot run refuses nothing (the overlay directory appears with the first VM). */
		if (have < 0 || (uint64_t)have >= e->min_free_bytes)
			continue;
		saas__log(e, SAAS_LOG_WARN, "%s has %lld MiB free, under the %llu MiB kept free: refusing creates",
		          paths[i], (long long)(have >> 20), (unsigned long long)(e->min_free_bytes >> 20));
		/* The tenant learns that the server is short of space, not where its files are. */
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_OS, ENOSPC,
		                 "the server is short of disk space (%lld MiB free, %llu MiB kept free); "
		                 "no new sandbox until an operator frees some; try again later",
		                 (long long)(have >> 20), (unsigned long long)(e->min_free_bytes >> 20));
	}
	free(overlays);
	return rc == SAAS_OK ? disk_budget(e, need_gb, size) : rc;
}

int saas__engine_need_driver(saas_engine *e)
{
	if (!e->driver)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
		                   "this engine was opened store-only; sandboxes need a full engine");
	return SAAS_OK;
}

static char *default_state_dir(void)
{
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char *dir = NULL;

	if (xdg && *xdg) {
		if (asprintf(&dir, "%s/aas", xdg) < 0)
			dir = NULL;
	} else if (geteuid() == 0) {
		dir = strdup("/var/lib/aas");
	} else if (home && *home) {
		if (asprintf(&dir, "%s/.local/state/aas", home) < 0)
			dir = NULL;
	} else {
		saas__inval("no state directory given and neither XDG_STATE_HOME nor HOME is set");
		return NULL;
	}
	if (!dir)
		saas__oom();
	return dir;
}

static int check_sizes(const saas_size *const *sizes, size_t n)
{
	if (n == 0 || n > 64)
		return saas__inval("sizes: between 1 and 64 size classes");
	for (size_t i = 0; i < n; i++) {
		const saas_size *s = sizes[i];
		if (!s)
			return saas__inval("sizes[%zu] is NULL", i);
		if (!saas__valid_text(s->name, 31))
			return saas__inval("sizes[%zu]: name must be 1 to 31 printable bytes", i);
		if (s->vcpus == 0 || s->memory_mb == 0 || s->disk_gb == 0)
			return saas__inval("size '%s': vcpus, memory and disk must be positive", s->name);
		if (s->vcpus > 1024 || s->memory_mb > (16u << 20) || s->disk_gb > (1u << 20))
			return saas__inval("size '%s': at most 1024 vCPUs, 16 TiB of memory and 1 PiB of disk", s->name);
		if (s->usd_micro_per_hour < 0 || s->usd_micro_per_hour > SAAS_USD(1000000))
			return saas__inval("size '%s': price out of range", s->name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(sizes[j]->name, s->name) == 0)
				return saas__inval("size '%s' named twice", s->name);
	}
	return SAAS_OK;
}

static int check_limits(const saas_engine_options *o)
{
	if (o->default_timeout_s < 0 || o->max_timeout_s < 0 || o->min_balance_s < 0)
		return saas__inval("limits may not be negative");
	if (o->max_sandboxes > SAAS_LIMIT_MAX)
		return saas__inval("max_sandboxes is over %u", SAAS_LIMIT_MAX);
	if (o->max_executions > SAAS_LIMIT_MAX)
		return saas__inval("max_executions is over %u", SAAS_LIMIT_MAX);
	if (o->creates_per_minute > SAAS_LIMIT_MAX)
		return saas__inval("creates_per_minute is over %u", SAAS_LIMIT_MAX);
	if (o->max_transfers > SAAS_LIMIT_MAX)
		return saas__inval("max_transfers is over %u", SAAS_LIMIT_MAX);
	if (o->requests_per_second > SAAS_LIMIT_MAX)
		return saas__inval("requests_per_second is over %u", SAAS_LIMIT_MAX);
	if (o->execution_retention_s < 0 || o->execution_retention_s > RETENTION_MAX_S)
		return saas__inval("execution_retention_s must be 0 to %lld (ten years)", (long long)RETENTION_MAX_S);
	return SAAS_OK;
}

static void sizes_free(saas_size *sizes, size_t n)
{
	for (size_t i = 0; sizes && i < n; i++)
		free((char *)sizes[i].name);
	free(sizes);
}

/* The engine's own table: one array, names owned. `sizes` holds n pointers, as options give them. */
static int sizes_copy(saas_size **out, size_t *nout, const saas_size *const *sizes, size_t n)
{
	saas_size *copy = calloc(n ? n : 1, sizeof(*copy));

	*out = NULL;
	*nout = 0;
	if (!copy)
		return saas__oom();
	for (size_t i = 0; i < n; i++) {
		copy[i] = *sizes[i];
		if (!(copy[i].name = saas__strdup(sizes[i]->name))) {
			sizes_free(copy, i);
			return SAAS_ENOMEM;
		}
	}
	*out = copy;
	*nout = n;
	return SAAS_OK;
}

int saas__sizes_public(saas_size ***out, size_t *nout, const saas_size *sizes, size_t n)
{
	saas_size **copy = calloc(n ? n : 1, sizeof(*copy));

	*out = NULL;
	*nout = 0;
	if (!copy)
		return saas__oom();
	for (size_t i = 0; i < n; i++) {
		if (!(copy[i] = malloc(sizeof(*copy[i])))) {
			saas__sizes_public_free(copy, i);
			return saas__oom();
		}
		*copy[i] = sizes[i];
		if (!(copy[i]->name = saas__strdup(sizes[i].name))) {
			saas__sizes_public_free(copy, i + 1);
			return SAAS_ENOMEM;
		}
	}
	*out = copy;
	*nout = n;
	return SAAS_OK;
}

/* One engine owns a state directory: its VMs and (for libvirt) the embedded root. */
static int lock_state_dir(saas_engine *e)
{
	char *path = NULL;
	int fd;

	if (asprintf(&path, "%s/engine.lock", e->state_dir) < 0)
		return saas__oom();
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int err = errno;
		saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "cannot open %s: %s", path, strerror(err));
		free(path);
		return SAAS_EIO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;
		close(fd);
		saas__error(SAAS_EBUSY, SAAS_ERRCLASS_OS, err,
		            "state directory %s is in use by another engine (%s)", e->state_dir, strerror(err));
		free(path);
		return SAAS_EBUSY;
	}
	free(path);
	e->lock_fd = fd;
	return SAAS_OK;
}

static int open_store(saas_engine *e, const saas_engine_options *o)
{
	char *url = NULL;
	saas_store_env env = { 0 };
	int rc;

	if (o->store) {
		/* The caller's own store: checked in saas_engine_open, found through its userdata. */
		e->store = o->store;
		env.userdata = o->store_userdata;
	} else {
		if (o->store_url) {
			url = saas__strdup(o->store_url);
		} else if (asprintf(&url, "sqlite:%s/aas.db", e->state_dir) < 0) {
			url = NULL;
			saas__oom();
		}
		if (!url)
			return SAAS_ENOMEM;
		if ((rc = saas__store_for_url(&e->store, url)) < 0)
			goto out;
	}
	env.url = url;
	env.state_dir = e->state_dir;
	env.log = e->log;
	env.log_userdata = e->log_userdata;
	rc = e->store->open(&e->store_ctx, &env);
	if (rc < 0) {
		e->store = NULL;
		e->store_ctx = NULL;
	}
out:
	free(url);
	return rc;
}

void saas__driver_env(saas_engine *e, saas_driver_env *env, const char *state_dir, const char *config)
{
	env->state_dir = state_dir;
	env->config = config;
	env->log = e->log;
	env->log_userdata = e->log_userdata;
	env->clock = e->clock;
	env->clock_userdata = e->clock_userdata;
	env->lease = saas__driver_lease;
	env->lease_userdata = e;
	env->stopping = &e->abandon;
}

static int open_driver(saas_engine *e, const saas_engine_options *o)
{
	saas_driver_env env;
	int rc;

	e->driver = o->driver;
#ifdef SAAS_WITH_LIBVIRT
	if (!e->driver)
		e->driver = &saas__driver_libvirt;
#endif
	if (!e->driver)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
		                   "no VM driver given and this libsaas was built without libvirt");
	/* A version 2 table (before terminals) ends before pty_open: its slots past it are never read. */
	if (e->driver->version < 2 || e->driver->version > SAAS_DRIVER_VERSION || !e->driver->name || !e->driver->open ||
	    !e->driver->vm_create || !e->driver->vm_destroy || !e->driver->vm_state || !e->driver->vm_list)
		return saas__inval("driver table is incomplete or of version %u (want 2 to %u)", e->driver->version,
		                   SAAS_DRIVER_VERSION);
	saas__driver_env(e, &env, e->state_dir, o->driver_config);
	if ((rc = e->driver->open(&e->driver_ctx, &env)) < 0) {
		e->driver = NULL;
		return saas__error_wrap(rc, "cannot open the VM driver");
	}
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_engine_open(saas_engine **out, const saas_engine_options *options)
{
	saas_engine_options opts = SAAS_ENGINE_OPTIONS_INIT;
	const saas_engine_options *o = &opts;
	saas_engine *e = NULL;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if ((rc = saas__options_read(&opts, options, options_size, SAAS_ENGINE_OPTIONS_VERSION, "engine")) < 0)
		return rc;
	if (o->flags & ~(SAAS_ENGINE_NO_REAPER | SAAS_ENGINE_STORE_ONLY))
		return saas__inval("unknown engine flags 0x%x", o->flags);
	if (o->state_dir && (!*o->state_dir || strlen(o->state_dir) > 3000))
		return saas__inval("state_dir is empty or too long");
	if (o->default_image && !saas__valid_text(o->default_image, SAAS_STORE_IMAGE_MAX))
		return saas__inval("default_image must be 1 to 63 printable bytes");
	/* {port}-{id} alone made URLs anyone could guess; only the exposure's name opens a preview now. */
	if (o->preview_url && (!saas__valid_text(o->preview_url, 512) || !strstr(o->preview_url, "{name}")))
		return saas__inval("preview_url must be printable, at most 512 bytes, and contain {name} "
		                   "(the exposure's unguessable host label, e.g. \"https://{name}.preview.example.com/\")");
	if (o->store && o->store_url)
		return saas__inval("give the store as store_url or as a store table, not both");
	if (o->store && (rc = saas__store_check(o->store)) < 0)
		return rc;
	if (o->sizes && (rc = check_sizes(o->sizes, o->nsizes)) < 0)
		return rc;
	if ((rc = check_limits(o)) < 0)
		return rc;
	if (o->new_account_credit < 0)
		return saas__inval("new_account_credit may not be negative");
	if (o->min_free_mb > SAAS_ENGINE_MIN_FREE_MB_MAX)
		return saas__inval("min_free_mb %u is over %u (16 TiB)", o->min_free_mb, SAAS_ENGINE_MIN_FREE_MB_MAX);
	if (o->lease_ttl_ms && (o->lease_ttl_ms < SAAS_ENGINE_LEASE_TTL_MS_MIN || o->lease_ttl_ms > SAAS_ENGINE_LEASE_TTL_MS_MAX))
		return saas__inval("lease_ttl_ms %u is out of range (%u to %u)", o->lease_ttl_ms, SAAS_ENGINE_LEASE_TTL_MS_MIN,
		                   SAAS_ENGINE_LEASE_TTL_MS_MAX);
	if (o->disk_budget_gb > SAAS_ENGINE_DISK_BUDGET_GB_MAX)
		return saas__inval("disk_budget_gb %u is over %u (1 PiB)", o->disk_budget_gb, SAAS_ENGINE_DISK_BUDGET_GB_MAX);
	if (o->host_heartbeat_ms && (o->host_heartbeat_ms < 100 || o->host_heartbeat_ms > 600000))
		return saas__inval("host_heartbeat_ms %u is out of range (100 to 600000)", o->host_heartbeat_ms);
	if (o->host_grace_ms > 86400000)
		return saas__inval("host_grace_ms %u is over a day", o->host_grace_ms);
	if (o->driver_config && strlen(o->driver_config) > 4096)
		return saas__inval("driver_config is over 4096 bytes");
	if (o->paused_usd_micro_per_gib_hour < SAAS_ENGINE_PAUSED_PRICE_FREE ||
	    o->paused_usd_micro_per_gib_hour > SAAS_ENGINE_PAUSED_PRICE_MAX)
		return saas__inval("paused_usd_micro_per_gib_hour %lld is not a price: 1 to %lld micro-dollars, "
		                   "0 for the default or %d for free", (long long)o->paused_usd_micro_per_gib_hour,
		                   (long long)SAAS_ENGINE_PAUSED_PRICE_MAX, SAAS_ENGINE_PAUSED_PRICE_FREE);
	if (o->mcp_sessions_max > SAAS_ENGINE_MCP_SESSIONS_MAX)
		return saas__inval("mcp_sessions_max %u is over %u", o->mcp_sessions_max, SAAS_ENGINE_MCP_SESSIONS_MAX);

	if (!(e = calloc(1, sizeof(*e))))
		return saas__oom();
	e->lock_fd = -1;
	e->closes.fd = -1;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cond, NULL);
	pthread_mutex_init(&e->tenants_mu, NULL);
	pthread_mutex_init(&e->network_mu, NULL);
	pthread_mutex_init(&e->live_mu, NULL);
	pthread_mutex_init(&e->closes.mu, NULL);
	pthread_mutex_init(&e->claims.mu, NULL);
	pthread_cond_init(&e->claims.cond, NULL);
	pthread_mutex_init(&e->hosts.mu, NULL);
	pthread_mutex_init(&e->hosts.open_mu, NULL);
	pthread_cond_init(&e->hosts.beat_cond, NULL);
	e->min_free_bytes = (uint64_t)(o->min_free_mb ? o->min_free_mb : SAAS_ENGINE_MIN_FREE_MB) << 20;
	e->disk_budget_gb = o->disk_budget_gb;
	e->paused_price = o->paused_usd_micro_per_gib_hour == SAAS_ENGINE_PAUSED_PRICE_FREE ? 0
	                  : o->paused_usd_micro_per_gib_hour        ? o->paused_usd_micro_per_gib_hour
	                                                            : SAAS_ENGINE_PAUSED_PRICE_DEFAULT;
	e->mcp_sessions_max = o->mcp_sessions_max ? o->mcp_sessions_max : SAAS_ENGINE_MCP_SESSIONS_DEFAULT;
	e->max_transfers = o->max_transfers ? o->max_transfers : SAAS_MAX_TRANSFERS_DEFAULT;
	e->stop_wait_ms = SAAS_ENGINE_STOP_WAIT_MS;
	e->flags = o->flags;
	e->clock = o->clock ? o->clock : real_clock;
	e->clock_userdata = o->clock_userdata;
	e->log = o->log ? o->log : null_log;
	e->log_userdata = o->log_userdata;
	e->log_level = o->log_level;
	e->limits.max_sandboxes = o->max_sandboxes ? o->max_sandboxes : DEFAULT_MAX_SANDBOXES;
	e->limits.default_timeout_s = o->default_timeout_s ? o->default_timeout_s : DEFAULT_TIMEOUT_S;
	e->limits.max_timeout_s = o->max_timeout_s ? o->max_timeout_s : DEFAULT_MAX_TIMEOUT_S;
	e->limits.min_balance_s = o->min_balance_s ? o->min_balance_s : DEFAULT_MIN_BALANCE_S;
	e->limits.max_executions = o->max_executions ? o->max_executions : SAAS_MAX_EXECUTIONS_DEFAULT;
	e->limits.creates_per_minute = o->creates_per_minute ? o->creates_per_minute : SAAS_CREATES_PER_MINUTE_DEFAULT;
	e->limits.requests_per_second = o->requests_per_second ? o->requests_per_second : SAAS_REQUESTS_PER_SECOND_DEFAULT;
	e->limits.execution_retention_s =
		o->execution_retention_s ? o->execution_retention_s : SAAS_EXECUTION_RETENTION_DEFAULT;
	if (e->limits.default_timeout_s > e->limits.max_timeout_s) {
		rc = saas__inval("default timeout %lld s is over the maximum %lld s",
		                 (long long)e->limits.default_timeout_s, (long long)e->limits.max_timeout_s);
		goto fail;
	}
	e->new_account_credit = o->new_account_credit ? o->new_account_credit : SAAS_USD(5);
	e->reaper_interval_ms = o->reaper_interval_ms ? o->reaper_interval_ms : DEFAULT_REAPER_MS;
	if (o->sizes)
		rc = sizes_copy(&e->sizes, &e->nsizes, o->sizes, o->nsizes);
	else
		rc = sizes_copy(&e->sizes, &e->nsizes, default_size_list, SAAS_ARRAY_SIZE(default_size_list));
	if (rc < 0)
		goto fail;
	/* Unnamed, the table's first size: "small" in the built-in one, and one that exists in any other. */
	if (!(e->default_size = saas__engine_size(e, o->default_size ? o->default_size : e->sizes[0].name))) {
		rc = saas__inval("default_size '%s' is not one of the sizes", o->default_size);
		goto fail;
	}
	e->state_dir = o->state_dir ? saas__strdup(o->state_dir) : default_state_dir();
	e->default_image = saas__strdup(o->default_image ? o->default_image : "default");
	e->preview_url = saas__strdup(o->preview_url ? o->preview_url : DEFAULT_PREVIEW);
	if (o->driver_config && !(e->driver_config = saas__strdup(o->driver_config))) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	if (!e->state_dir || !e->default_image || !e->preview_url) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	/* Checked before anything is opened: a bad spec must not cost a reconcile. */
	if ((rc = saas__pool_setup(e, o->pool)) < 0 || (rc = saas__metrics_setup(e, o)) < 0)
		goto fail;
	if ((rc = saas__mkdir_p(e->state_dir, 0700)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, -rc, "cannot create state directory %s: %s",
		                 e->state_dir, strerror(-rc));
		goto fail;
	}
	if (!(e->flags & SAAS_ENGINE_STORE_ONLY) && (rc = lock_state_dir(e)) < 0)
		goto fail;
	if ((rc = open_store(e, o)) < 0 || (rc = saas__hosts_open(e, o)) < 0)
		goto fail;
	if (!(e->flags & SAAS_ENGINE_STORE_ONLY)) {
		/* Before reconcile: it must know who this engine is, and whose work the last crash left. */
		if ((rc = saas__claims_open(e, o->lease_ttl_ms ? (int64_t)o->lease_ttl_ms : SAAS_ENGINE_LEASE_TTL_MS)) < 0)
			goto fail;
		if ((rc = saas__closes_open(e)) < 0 || (rc = open_driver(e, o)) < 0)
			goto fail;
		/* Reconcile first: it destroys a previous run's pooled VMs, which have no row. */
		if ((rc = saas__reconcile(e)) < 0)
			goto fail;
		if (!(e->flags & SAAS_ENGINE_NO_REAPER) &&
		    ((rc = saas__claims_start(e)) < 0 || (rc = saas__pool_start(e)) < 0 || (rc = saas__reaper_start(e)) < 0 ||
		     (rc = saas__hosts_start(e)) < 0 || (rc = saas__metrics_start(e)) < 0))
			goto fail;
	}
	saas__log(e, SAAS_LOG_INFO, "engine open on %s (store %s, driver %s)", e->state_dir, e->store->name,
	          e->driver ? e->driver->name : "none");
	*out = e;
	return SAAS_OK;
fail:
	saas_engine_free(e);
	return rc;
}

SAAS_EXTERN(int) saas_engine_stop(saas_engine *e, unsigned int flags)
{
	saas__error_clear();
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	/* The drivers read it (saas_driver_env.stopping): their own work gives up at its next look. */
	if (e)
		__atomic_store_n(&e->abandon, 1, __ATOMIC_RELEASE);
	return SAAS_OK;
}

SAAS_EXTERN(void) saas_engine_free(saas_engine *e)
{
	if (!e)
		return;
	/* First: a pooled create or a request may hold up what follows, a template build need not wait for them. */
	__atomic_store_n(&e->abandon, 1, __ATOMIC_RELEASE);
	saas__reaper_stop(e);
	saas__hosts_stop(e);
	saas__metrics_stop(e);
	/* Background executions hold the engine; tell them to stop and wait. */
	pthread_mutex_lock(&e->mu);
	__atomic_store_n(&e->cancel, 1, __ATOMIC_SEQ_CST);
	while (e->background > 0)
		pthread_cond_wait(&e->cond, &e->mu);
	pthread_mutex_unlock(&e->mu);
	/* A last try for ends the store refused; what is left waits in STATE for the next start. */
	if (e->store && e->driver)
		saas__closes_retry(e);
	/* The driver's counters go with it; the next engine's add to what is recorded now. */
	saas__network_counts_save_all(e);
	/*
	 * After the reaper (which asks the pool what it owns), before the driver
	 * goes. A pooled VM still being made past the bound is left to the refill
	 * thread, which needs the driver until its create returns: it releases the
	 * rest. The store it never uses is closed now.
	 */
	if (saas__pool_stop(e)) {
		saas__log(e, SAAS_LOG_WARN, "a pooled VM is still being made after %u ms; not waiting for it "
		          "(it is destroyed when made, or by the next start)", e->stop_wait_ms);
		saas__claims_close(e);
		if (e->store)
			e->store->close(e->store_ctx);
		e->store = NULL;
		return;
	}
	saas__engine_release(e);
}

void saas__engine_release(saas_engine *e)
{
	saas__pool_free(e);
	/* The last of the store's users here: the pool let its VMs' leases go. */
	saas__claims_close(e);
	saas__hosts_free(e);
	if (e->driver && e->driver->close)
		e->driver->close(e->driver_ctx);
	if (e->store)
		e->store->close(e->store_ctx);
	saas__closes_free(e);
	pthread_mutex_destroy(&e->closes.mu);
	saas__claims_free(e);
	pthread_cond_destroy(&e->claims.cond);
	pthread_mutex_destroy(&e->claims.mu);
	pthread_mutex_destroy(&e->hosts.mu);
	pthread_mutex_destroy(&e->hosts.open_mu);
	pthread_cond_destroy(&e->hosts.beat_cond);
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	sizes_free(e->sizes, e->nsizes);
	free(e->state_dir);
	free(e->default_image);
	free(e->preview_url);
	free(e->driver_config);
	saas__tenants_free(e);
	saas__metrics_free(e);
	pthread_mutex_destroy(&e->tenants_mu);
	pthread_mutex_destroy(&e->network_mu);
	pthread_mutex_destroy(&e->live_mu);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

SAAS_EXTERN(int) saas_engine_sweep(unsigned int *destroyed, saas_engine *e)
{
	int rc;

	saas__error_clear();
	if (destroyed)
		*destroyed = 0;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	return saas__sweep(e, destroyed);
}

SAAS_EXTERN(int) saas_engine_info_get(saas_engine_info **out, saas_engine *e)
{
	saas_engine_info *info;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (!(info = calloc(1, sizeof(*info))))
		return saas__oom();
	info->new_account_credit_usd_micro = e->new_account_credit;
	if (!(info->limits = malloc(sizeof(*info->limits))))
		goto oom;
	*info->limits = e->limits;
	info->paused_usd_micro_per_gib_hour = e->paused_price;
	if (!(info->default_image = saas__strdup(e->default_image)) ||
	    !(info->default_size = saas__strdup(e->default_size->name)) || !(info->preview_url = saas__strdup(e->preview_url)) ||
	    !(info->driver = saas__strdup(e->driver ? e->driver->name : "")) ||
	    saas__sizes_public(&info->sizes, &info->nsizes, e->sizes, e->nsizes) < 0)
		goto oom;
	*out = info;
	return SAAS_OK;
oom:
	saas_engine_info_free(info);
	return saas__oom();
}

SAAS_EXTERN(void) saas_engine_info_free(saas_engine_info *info)
{
	if (!info)
		return;
	saas__sizes_public_free(info->sizes, info->nsizes);
	free(info->limits);
	free(info->default_image);
	free(info->default_size);
	free(info->preview_url);
	free(info->driver);
	free(info);
}

struct count_live {
	saas_engine *e;
	saas_engine_stats *stats;
	char (*accounts)[SAAS_ID_MAX + 1];
	size_t naccounts, cap;
	int rc;
};

static int count_live(void *ud, const saas_store_sandbox *sb)
{
	struct count_live *c = ud;
	saas_store_sandbox shown = *sb;
	size_t i;

	/* Ended already, its close waiting for the store: not live. */
	if (saas__closes_view(c->e, &shown))
		return 0;
	if (sb->status == SAAS_SANDBOX_CREATING)
		c->stats->creating++;
	else if (sb->status == SAAS_SANDBOX_READY)
		c->stats->ready++;
	for (i = 0; i < c->naccounts; i++)
		if (strcmp(c->accounts[i], sb->account_id) == 0)
			return 0;
	if ((c->rc = SAAS__ARRAY_RESERVE(c->accounts, c->cap, c->naccounts + 1)) < 0)
		return 1;
	saas__strlcpy(c->accounts[c->naccounts++], sb->account_id, SAAS_ID_MAX + 1);
	return 0;
}

SAAS_EXTERN(const char *) saas_template_state_name(int state)
{
	switch (state) {
	case SAAS_TEMPLATE_BUILDING: return "building";
	case SAAS_TEMPLATE_READY: return "ready";
	case SAAS_TEMPLATE_FAILED: return "failed";
	}
	return "unknown";
}

struct collect_templates {
	saas_engine *e;
	saas_engine_template ***items;
	size_t *n;
	size_t cap;
	int rc;
};

static int collect_template(void *ud, const saas_driver_template *t)
{
	struct collect_templates *c = ud;
	saas_engine_template *o;
	const char *size = "";

	/* What the driver says is shown to operators: only what it may say. */
	if (!t || !saas__valid_text(t->image, SAAS_NAME_MAX) || t->state < SAAS_TEMPLATE_BUILDING ||
	    t->state > SAAS_TEMPLATE_FAILED)
		return 0;
	for (size_t i = 0; i < c->e->nsizes; i++) {
		const saas_size *s = &c->e->sizes[i];
		if (s->vcpus == t->vcpus && s->memory_mb == t->memory_mb && s->disk_gb == t->disk_gb) {
			size = s->name;
			break;
		}
	}
	if ((c->rc = SAAS__ARRAY_RESERVE(*c->items, c->cap, *c->n + 1)) < 0)
		return 1;
	if (!(o = calloc(1, sizeof(*o))) || !(o->image = saas__strdup(t->image)) || !(o->size = saas__strdup(size))) {
		if (o)
			free(o->image);
		free(o);
		c->rc = saas__oom();
		return 1;
	}
	o->vcpus = t->vcpus;
	o->memory_mb = t->memory_mb;
	o->disk_gb = t->disk_gb;
	o->state = t->state;
	o->state_bytes = t->state == SAAS_TEMPLATE_READY && t->state_bytes > 0 ? t->state_bytes : 0;
	(*c->items)[(*c->n)++] = o;
	return 0;
}

static int by_shape(const void *a, const void *b)
{
	const saas_engine_template *x = *(saas_engine_template *const *)a, *y = *(saas_engine_template *const *)b;
	int d = strcmp(x->image, y->image);

	if (d)
		return d;
	if (x->vcpus != y->vcpus)
		return x->vcpus < y->vcpus ? -1 : 1;
	if (x->memory_mb != y->memory_mb)
		return x->memory_mb < y->memory_mb ? -1 : 1;
	return x->disk_gb < y->disk_gb ? -1 : x->disk_gb > y->disk_gb;
}

/*
 * The templates of the driver opened as ctx (version 5 tables only), by
 * shape. A driver that cannot list them now costs the view its templates,
 * not the rest of what is read with them (metrics read them too): logged,
 * and none reported. Only running out of memory fails.
 */
int saas__templates_read(saas_engine *e, void *ctx, saas_engine_template ***items, size_t *n)
{
	struct collect_templates c = { e, items, n, *n, SAAS_OK };
	int rc;

	if (!e->driver || e->driver->version < 5 || !e->driver->template_list)
		return SAAS_OK;
	if ((rc = e->driver->template_list(ctx, collect_template, &c)) == SAAS_OK)
		rc = c.rc;
	if (rc == SAAS_ENOMEM)
		return rc;
	if (rc < 0) {
		saas__log(e, SAAS_LOG_WARN, "the driver's templates cannot be listed: %s", saas_error_last()->message);
		saas__error_clear();
	}
	if (*n > 1)
		qsort(*items, *n, sizeof(**items), by_shape);
	return SAAS_OK;
}

void saas__templates_free(saas_engine_template **items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(items[i]->image);
		free(items[i]->size);
		free(items[i]);
	}
	free(items);
}

SAAS_EXTERN(int) saas_engine_stats_get(saas_engine_stats **out, saas_engine *e)
{
	struct count_live c = { e, NULL, NULL, 0, 0, SAAS_OK };
	saas_store_filter f;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (!(c.stats = calloc(1, sizeof(*c.stats))))
		return saas__oom();
	memset(&f, 0, sizeof(f));
	f.live = 1;
	rc = e->store->sandbox_list(e->store_ctx, &f, count_live, &c);
	if (rc == SAAS_OK)
		rc = c.rc;
	c.stats->accounts_with_sandboxes = (unsigned int)c.naccounts;
	free(c.accounts);
	if (rc == SAAS_OK)
		rc = saas__pool_stats(e, c.stats);
	if (rc == SAAS_OK)
		rc = saas__templates_read(e, e->driver_ctx, &c.stats->templates, &c.stats->ntemplates);
	if (rc < 0) {
		saas_engine_stats_free(c.stats);
		return rc;
	}
	*out = c.stats;
	return SAAS_OK;
}

SAAS_EXTERN(void) saas_engine_stats_free(saas_engine_stats *stats)
{
	if (!stats)
		return;
	for (size_t i = 0; i < stats->npools; i++) {
		free(stats->pools[i]->size);
		free(stats->pools[i]->image);
		free(stats->pools[i]);
	}
	free(stats->pools);
	saas__templates_free(stats->templates, stats->ntemplates);
	free(stats);
}
