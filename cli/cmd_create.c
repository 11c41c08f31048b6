/*
 * aas create: create a sandbox and print its id.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas create [--size NAME] [--timeout DURATION] [--image NAME]\n"
	"                  [--network isolated|internet | --allow RULE... --deny RULE...]\n"
	"                  [--metadata KEY=VALUE]... [-e|--env NAME=VALUE]... [--json]\n"
	"\n"
	"Create a sandbox and print its id once it is ready. DURATION is 90, 90s, 15m or 2h.\n"
	"--metadata (repeatable, at most 64) labels it: `aas get --json` shows the labels, the\n"
	"guest never sees them. --env (repeatable, at most 128) gives every command and terminal\n"
	"in it a variable (`aas exec -e` wins over it).\n"
	"--allow and --deny (each repeatable, at most 64) make its network a policy: only what\n"
	"the allow rules name, less what the deny rules name. A RULE is a domain name\n"
	"(example.com), every name below one (*.example.com), an address or CIDR\n"
	"(203.0.113.0/24), or * (everything internet allows). See `aas network --help`.\n"
	"On a terminal, a spinner on stderr shows the seconds waited.\n";

/* A spinner on stderr while create waits, when stderr is a terminal. */
struct spinner {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

static void *spin(void *arg)
{
	static const char frames[] = "|/-\\";
	struct spinner *sp = arg;
	struct timespec start, now, until;
	unsigned int n = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_mutex_lock(&sp->lock);
	while (!sp->done) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		fprintf(stderr, "\r%c creating sandbox... %lds ", frames[n++ % 4], (long)(now.tv_sec - start.tv_sec));
		fflush(stderr);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 100000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&sp->cond, &sp->lock, &until);
	}
	pthread_mutex_unlock(&sp->lock);
	fputs("\r\033[K", stderr);
	fflush(stderr);
	return NULL;
}

int aas_cmd_create(aas_ctx *ctx, int argc, char **argv)
{
	saas_create_options opts = SAAS_CREATE_OPTIONS_INIT;
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	aas_net_opts net = { 0 };
	struct spinner sp = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	pthread_t th;
	/* NULL-terminated, borrowed from argv; the library checks each pair's bounds. */
	const char *metadata[SAAS_METADATA_MAX + 1] = { NULL }, *envs[SAAS_ENVS_MAX + 1] = { NULL };
	size_t nmeta = 0, nenvs = 0;
	int i, r, rc, code, n = 0, spinning = 0;
	const char *v;

	for (i = 1; i < argc; i++) {
		if ((r = aas_pair_opt("create", argc, argv, &i, "--metadata", NULL, "KEY=VALUE", metadata, &nmeta,
		                      SAAS_METADATA_MAX)) != 0 ||
		    (r = aas_pair_opt("create", argc, argv, &i, "--env", "-e", "NAME=VALUE", envs, &nenvs, SAAS_ENVS_MAX)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if ((r = aas_opt("create", argc, argv, &i, "--size", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			opts.size = v;
		} else if ((r = aas_opt("create", argc, argv, &i, "--image", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			opts.image = v;
		} else if ((r = aas_net_opt("create", argc, argv, &i, &net)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if ((r = aas_opt("create", argc, argv, &i, "--timeout", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if ((code = aas_duration("create", v, &opts.timeout_s)) != AAS_EXIT_OK)
				return code;
		} else if ((code = aas_arg(ctx, "create", argc, argv, &i, NULL, 0, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "create", help, n, 0, NULL, NULL)) != AAS_GO)
		return code;
	if (aas_net_spec(&net, &spec))
		opts.network_spec = &spec;
	if (nmeta)
		opts.metadata = metadata;
	if (nenvs)
		opts.envs = envs;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if (!ctx->json && isatty(STDERR_FILENO))
		spinning = pthread_create(&th, NULL, spin, &sp) == 0;
	rc = saas_sandbox_create(&sb, client, &opts, 0);
	if (spinning) {
		pthread_mutex_lock(&sp.lock);
		sp.done = 1;
		pthread_cond_signal(&sp.cond);
		pthread_mutex_unlock(&sp.lock);
		pthread_join(th, NULL);
	}
	if (rc != SAAS_OK)
		code = aas_fail(rc, "create");
	else if (ctx->json)
		code = aas_json_print(saas__wire_sandbox(sb));
	else
		printf("%s\n", sb->id);
	saas_sandbox_free(sb);
	saas_client_free(client);
	return code;
}
