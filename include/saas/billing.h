/*
 * libsaas: sizes, prices, balance and usage.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_BILLING_H
#define SAAS_BILLING_H

#include "common.h"

SAAS_BEGIN_DECLS

/**
 * A size class and its price.
 *
 * Since: 0.1.0
 */
typedef struct saas_size {
	const char *name;            /**< "small", "medium", "large" ... */
	unsigned int vcpus;
	unsigned int memory_mb;
	unsigned int disk_gb;
	int64_t usd_micro_per_hour;  /**< Price per hour of running, in micro-dollars. */
} saas_size;

/**
 * Limits as an account sees them: the engine's defaults, or what an operator
 * set for this account (saas_account_limits_set()). Library-allocated; held
 * behind a pointer by the structs that give it, so that it can grow. Engine
 * options take the same limits as fields of their own.
 *
 * Since: 0.1.0
 */
typedef struct saas_limits {
	unsigned int max_sandboxes;       /**< Sandboxes not yet destroyed. */
	int64_t default_timeout_s;        /**< Lifetime when create names none. */
	int64_t max_timeout_s;            /**< Longest lifetime from now. */
	int64_t min_balance_s;            /**< Create needs credit for this many seconds of the size. */
	unsigned int max_executions;      /**< Executions running at once, background ones included. */
	unsigned int creates_per_minute;  /**< Sandbox creates per rolling minute. */
	unsigned int requests_per_second; /**< API requests per second per key (aas-server enforces it). */
	int64_t execution_retention_s;    /**< Finished executions and their output are deleted this long after. */
} saas_limits;

/**
 * What saas_account_info_get() returns; library-allocated, fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_account_info {
	char *id;
	char *name;
	int64_t credit_usd_micro;     /**< Everything credited, ever. */
	int64_t spent_usd_micro;      /**< Charged plus accrued by running sandboxes. */
	int64_t balance_usd_micro;    /**< credit - spent. */
	unsigned int active_sandboxes;/**< Not yet destroyed. */
	size_t nsizes;
	saas_size **sizes;            /**< Every size class with its price. */
	unsigned int running_executions; /**< Executions running now (this engine's count). */
	saas_limits *limits;          /**< The account's effective limits. */
	/**
	 * Since 0.2.0: the price of keeping a paused sandbox, per GiB-hour of its
	 * size's memory and disk; saas_size_paused_usd_micro_per_hour() gives each
	 * size's. Billed per whole second paused, as compute is.
	 */
	int64_t paused_usd_micro_per_gib_hour;
} saas_account_info;

/**
 * The account the client is bound to: balance, limits and pricing.
 *
 * @param out [out] free with saas_account_info_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EAUTH, SAAS_ESTORE, SAAS_ENETWORK, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_account_info_get(saas_account_info **out, saas_client *client);

/**
 * Free account info; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_account_info_free(saas_account_info *info);

/**
 * One sandbox's share of a usage period. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_usage_line {
	char *sandbox_id;
	char *size;
	int64_t seconds;              /**< Whole seconds run inside the period. */
	int64_t cost_usd_micro;       /**< rate x seconds / 3600, rounded down. */
	int running;                  /**< Non-zero if it still runs (cost accrued so far). */
} saas_usage_line;

/**
 * Usage over a period; library-allocated, fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_usage {
	int64_t from_ms;
	int64_t to_ms;
	size_t count;
	saas_usage_line **lines;      /**< Newest sandbox first. */
	int64_t total_seconds;
	int64_t total_usd_micro;      /**< Sum of the lines' costs. */
} saas_usage;

/**
 * Usage of the client's account over [from_ms, to_ms).
 *
 * @param from_ms start of the period (ms since epoch); 0 means 30 days before `to_ms`.
 * @param to_ms   end of the period; 0 means now. Must be after from_ms.
 * @param flags   0.
 * @param out     [out] free with saas_usage_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EAUTH, SAAS_ESTORE, SAAS_ENETWORK, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_usage_get(saas_usage **out, saas_client *client, int64_t from_ms, int64_t to_ms, unsigned int flags);

/**
 * Free usage; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_usage_free(saas_usage *usage);

/**
 * The cost of running a size for a number of seconds: rate x seconds / 3600,
 * rounded down once. This is the only rounding billing ever does.
 *
 * @return micro-dollars; 0 for seconds <= 0 or a negative rate.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int64_t) saas_cost(int64_t usd_micro_per_hour, int64_t seconds);

/**
 * What an hour paused costs a sandbox of this size: the per-GiB-hour price
 * times its memory and disk in GiB ((memory_mb + 1024 x disk_gb) / 1024),
 * rounded down once. A sandbox keeps the rate it was created with.
 *
 * @return micro-dollars per hour; 0 for a NULL size or a price <= 0.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int64_t) saas_size_paused_usd_micro_per_hour(const saas_size *size, int64_t usd_micro_per_gib_hour);

/**
 * Format micro-dollars as a decimal string with six places: 5000000 -> "5.000000",
 * -25 -> "-0.000025". Exact; no floating point.
 *
 * @param buf  [out] at least 32 bytes.
 * @return buf.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(char *) saas_usd_format(char *buf, size_t bufsize, int64_t usd_micro);

SAAS_END_DECLS

#endif
