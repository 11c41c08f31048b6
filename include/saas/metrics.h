/*
 * libsaas: a sandbox's use of CPU, memory and disk over time.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_METRICS_H
#define SAAS_METRICS_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * One sample of a running sandbox's VM, as its host sees it (never as its
 * guest says: docs/sandboxes.md, "Metrics"). Library-allocated; fields may be
 * appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_metric {
	int64_t at_ms;                  /**< When it was taken (ms since the Unix epoch). */
	unsigned int vcpus;             /**< Its virtual CPUs. */
	/**
	 * CPU used since the sample before, in percent of all its vCPUs together
	 * (0 to 100), two decimals. With no sample before (the first one, or one
	 * taken on demand): an estimate, the average since the sandbox became ready.
	 */
	double cpu_used_pct;
	int64_t memory_used;            /**< Bytes of its memory the host holds now (at most memory_total). */
	int64_t memory_total;           /**< Bytes of memory it was given. */
	int64_t disk_used;              /**< Bytes its writable disk takes on the host: what it wrote since its image. */
	int64_t disk_total;             /**< Bytes its disk may hold; 0 for an image without a disk. */
} saas_metric;

/**
 * Samples of a sandbox, oldest first. Library-allocated; fields may be appended.
 *
 * Since: 0.2.0
 */
typedef struct saas_metric_list {
	size_t count;
	saas_metric **items;
} saas_metric_list;

/** Default interval between two samples of a running sandbox (saas_engine_options.metrics_interval_ms): 5 s. */
#define SAAS_METRICS_INTERVAL_MS_DEFAULT 5000
/** Default span of the samples kept per sandbox (saas_engine_options.metrics_window_s): one hour. */
#define SAAS_METRICS_WINDOW_S_DEFAULT 3600
/**
 * Default of saas_engine_options.metrics_samples_max: samples one engine
 * keeps, every sandbox's together (48 bytes each: 12 MiB); past it a
 * sandbox's history stops growing and its oldest sample makes way.
 */
#define SAAS_METRICS_SAMPLES_DEFAULT 262144
/** The most samples one saas_sandbox_metrics_get() returns (a day at 5 s is 17,280). */
#define SAAS_METRICS_LIST_MAX 20000

/**
 * A sandbox's samples taken between start_ms and end_ms (both included),
 * oldest first. The engine samples each running sandbox every
 * metrics_interval_ms and keeps the last metrics_window_s of them while it
 * runs; they go when it is paused or destroyed. When the engine asked has
 * none in the window for a sandbox that runs (it has just started, or runs
 * on another server of the store), it takes one now: a window that reaches
 * into the last metrics_interval_ms gets at least one sample. The newest SAAS_METRICS_LIST_MAX are kept
 * when there are more.
 *
 * @param out       [out] free with saas_metric_list_free(); count 0 for a
 *                  sandbox paused, destroyed or still creating.
 * @param client    the client.
 * @param sandbox_id the sandbox.
 * @param start_ms  from (ms since the epoch); 0: the oldest kept.
 * @param end_ms    to; 0: now.
 * @param flags     0.
 * @return SAAS_OK, SAAS_EINVAL (negative times, start after end, a bad id or
 *         flag), SAAS_ENOTFOUND (unknown, or another account's),
 *         SAAS_ENOTSUP (the driver cannot sample its VMs), SAAS_EBACKEND (the
 *         VM host could not say), SAAS_ESTORE, SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_sandbox_metrics_get(saas_metric_list **out, saas_client *client, const char *sandbox_id,
                                          int64_t start_ms, int64_t end_ms, unsigned int flags);

/**
 * Free a list of samples. NULL-safe.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_metric_list_free(saas_metric_list *list);

SAAS_END_DECLS

#endif
