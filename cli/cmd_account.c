/*
 * aas account: balance, limits and prices.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

static const char help[] =
	"usage: aas account [--json]\n"
	"\n"
	"Show your account: balance, credit, spending, limits and the price of each size.\n";

int aas_cmd_account(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_account_info *a = NULL;
	int i, rc, code, n = 0;
	size_t k;
	char b[40];

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "account", argc, argv, &i, NULL, 0, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "account", help, n, 0, NULL, NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_account_info_get(&a, client)) != SAAS_OK) {
		code = aas_fail(rc, "account");
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_account(a));
	} else {
		printf("account:    %s%s%s%s\n", a->id, a->name && *a->name ? " (" : "", a->name ? a->name : "",
		       a->name && *a->name ? ")" : "");
		printf("balance:    %s\n", aas_fmt_usd(b, sizeof(b), a->balance_usd_micro));
		printf("credit:     %s\n", aas_fmt_usd(b, sizeof(b), a->credit_usd_micro));
		printf("spent:      %s\n", aas_fmt_usd(b, sizeof(b), a->spent_usd_micro));
		printf("sandboxes:  %u active (at most %u)\n", a->active_sandboxes, a->limits->max_sandboxes);
		printf("timeouts:   default %llds, at most %llds\n", (long long)a->limits->default_timeout_s,
		       (long long)a->limits->max_timeout_s);
		printf("executions: %u running (at most %u at once; kept %llds after they finish)\n",
		       a->running_executions, a->limits->max_executions, (long long)a->limits->execution_retention_s);
		printf("rates:      %u creates a minute, %u requests a second\n", a->limits->creates_per_minute,
		       a->limits->requests_per_second);
		printf("\n%-10s %5s %9s %7s %14s\n", "SIZE", "VCPUS", "MEMORY", "DISK", "PER HOUR");
		for (k = 0; k < a->nsizes; k++)
			printf("%-10s %5u %6u MB %4u GB %14s\n", a->sizes[k]->name, a->sizes[k]->vcpus, a->sizes[k]->memory_mb,
			       a->sizes[k]->disk_gb, aas_fmt_usd(b, sizeof(b), a->sizes[k]->usd_micro_per_hour));
	}
	saas_account_info_free(a);
	saas_client_free(client);
	return code;
}
