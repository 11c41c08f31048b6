/*
 * aas metrics: a running sandbox's CPU, memory and disk over time.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas metrics ID [--from TIME] [--to TIME] [-n N] [--json]\n"
	"\n"
	"A running sandbox's CPU, memory and disk as its host sees them, oldest first: the time,\n"
	"the CPU used over the interval before (percent of all its vCPUs), memory and disk used\n"
	"of their totals (MiB). The server samples every few seconds and keeps the last hour;\n"
	"TIME is RFC 3339 (2025-06-01T12:00:00Z), a date or unix seconds. Shows the newest N\n"
	"(default 20); --json gives every sample in the window as the REST API does.\n"
	"A paused or destroyed sandbox has none.\n";

static void print_row(const saas_metric *m)
{
	char at[32];

	printf("%-21s %6.2f%% %5u %9lld/%-9lld %9lld/%lld\n", aas_fmt_time(at, sizeof(at), m->at_ms), m->cpu_used_pct,
	       m->vcpus, (long long)(m->memory_used >> 20), (long long)(m->memory_total >> 20),
	       (long long)(m->disk_used >> 20), (long long)(m->disk_total >> 20));
}

int aas_cmd_metrics(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_metric_list *l = NULL;
	const char *id = NULL, *v;
	int64_t from = 0, to = 0;
	unsigned long want = 20;
	int i, r, rc, code, n = 0;

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("metrics", argc, argv, &i, "--from", NULL, &v)) != 0) {
			if (r < 0 || saas_time_parse(&from, v, 0) < 0)
				return r < 0 ? AAS_EXIT_USAGE : aas_usage_error("metrics", "%s", saas_error_last()->message);
		} else if ((r = aas_opt("metrics", argc, argv, &i, "--to", NULL, &v)) != 0) {
			if (r < 0 || saas_time_parse(&to, v, SAAS_TIME_DAY_END) < 0)
				return r < 0 ? AAS_EXIT_USAGE : aas_usage_error("metrics", "%s", saas_error_last()->message);
		} else if ((r = aas_opt("metrics", argc, argv, &i, "--limit", "-n", &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if ((code = aas_count("metrics", "-n", v, SAAS_METRICS_LIST_MAX, &want)) != AAS_EXIT_OK)
				return code;
		} else if ((code = aas_arg(ctx, "metrics", argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "metrics", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_sandbox_metrics_get(&l, client, id, from, to, 0)) != SAAS_OK) {
		code = aas_fail(rc, id);
		goto out;
	}
	if (ctx->json) {
		code = aas_json_print(saas__wire_metric_list(l));
	} else if (!l->count) {
		fprintf(stderr, "no samples of %s in that window (is it running?)\n", id);
	} else {
		printf("%-21s %7s %5s %19s %19s\n", "TIME", "CPU", "VCPUS", "MEMORY MiB", "DISK MiB");
		for (size_t k = l->count > want ? l->count - want : 0; k < l->count; k++)
			print_row(l->items[k]);
	}
out:
	saas_metric_list_free(l);
	saas_client_free(client);
	return code;
}
