/*
 * aas exec: run a command in a sandbox; exit with its exit code.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas exec ID [--timeout DURATION] [--cwd DIR] [-e NAME=VALUE]... [-n] [--json] -- CMD [ARG...]\n"
	"\n"
	"Run a command in a sandbox. The words are quoted for the shell and joined into one\n"
	"command line (use `-- sh -c '...'` for pipes and redirections). Its stdout and stderr\n"
	"go to yours as it writes them; aas exits with its exit code (124 if it timed out).\n"
	"Stdin is passed through when it is not a terminal (up to 16 MiB); -n gives the\n"
	"command no stdin. --json prints the execution, output included, at the end.\n"
	"Ctrl-C sends SIGINT to the command's process group; a second Ctrl-C cancels it\n"
	"(it and everything it started are killed) and aas exits with 130; a third leaves\n"
	"at once.\n";

/*
 * Ctrl-C while the command runs is the command's, as it is over ssh: the
 * first sends INT to its process group (it may handle it, as it could at a
 * local terminal), the second cancels it, the third leaves without waiting
 * for the server. SIGINT is blocked in every thread and taken by one of ours
 * with sigwait(): it never interrupts the transfer, and the library is
 * called from an ordinary thread, never from a handler.
 */
struct interrupts {
	pthread_mutex_t mu;
	pthread_t tid;
	sigset_t set, old;          /* {SIGINT}; the mask to restore */
	saas_client *client;
	char id[SAAS_ID_MAX + 1];   /* the execution, once started */
	unsigned int count;         /* Ctrl-Cs so far */
	bool done;                  /* the call returned: the thread leaves */
};

/* Act on the first or second Ctrl-C; id is "" until the execution started (then on_started acts). */
static void interrupt_act(saas_client *client, const char *id, unsigned int count)
{
	if (!*id)
		return;
	if (count == 1) {
		saas_execution_signal(client, id, "INT", SAAS_SIGNAL_GROUP);
	} else {
		fprintf(stderr, "aas: cancelling %s (Ctrl-C again to leave without waiting)\n", id);
		saas_execution_cancel(client, id, 0);
	}
}

/* The third Ctrl-C: die of SIGINT, as a shell expects of a program its user interrupted. */
static void interrupt_leave(const sigset_t *set, const char *id)
{
	fprintf(stderr, "aas: left without waiting; the command may still be running%s%s\n", *id ? ": " : "", id);
	signal(SIGINT, SIG_DFL);
	pthread_sigmask(SIG_UNBLOCK, set, NULL);
	raise(SIGINT);
	_exit(130); /* not reached */
}

static void *interrupt_main(void *arg)
{
	struct interrupts *in = arg;

	for (;;) {
		char id[SAAS_ID_MAX + 1];
		unsigned int count;
		int sig;

		if (sigwait(&in->set, &sig) != 0)
			continue;
		pthread_mutex_lock(&in->mu);
		if (in->done) {
			pthread_mutex_unlock(&in->mu);
			break;
		}
		count = ++in->count;
		memcpy(id, in->id, sizeof(id));
		pthread_mutex_unlock(&in->mu);
		if (count >= 3)
			interrupt_leave(&in->set, id);
		interrupt_act(in->client, id, count);
	}
	return NULL;
}

/*
 * Take Ctrl-C from here on (before any thread of the library starts, so that
 * they all block it). Not when SIGINT is ignored (aas run in the background
 * by a shell without job control, or under nohup): then it stays ignored.
 * false when not taken.
 */
static bool interrupts_take(struct interrupts *in)
{
	struct sigaction sa;

	memset(in, 0, sizeof(*in));
	if (sigaction(SIGINT, NULL, &sa) < 0 || sa.sa_handler == SIG_IGN)
		return false;
	sigemptyset(&in->set);
	sigaddset(&in->set, SIGINT);
	pthread_mutex_init(&in->mu, NULL);
	pthread_sigmask(SIG_BLOCK, &in->set, &in->old);
	if (pthread_create(&in->tid, NULL, interrupt_main, in) != 0) {
		pthread_sigmask(SIG_SETMASK, &in->old, NULL);
		pthread_mutex_destroy(&in->mu);
		return false;
	}
	return true;
}

/* Stop taking Ctrl-C; how many there were. */
static unsigned int interrupts_release(struct interrupts *in)
{
	unsigned int count;

	pthread_mutex_lock(&in->mu);
	in->done = true;
	pthread_mutex_unlock(&in->mu);
	pthread_kill(in->tid, SIGINT);
	pthread_join(in->tid, NULL);
	count = in->count;
	pthread_mutex_destroy(&in->mu);
	pthread_sigmask(SIG_SETMASK, &in->old, NULL);
	return count;
}

/* The execution runs: Ctrl-Cs from now on reach it; one that came before does now (non-zero: cancel). */
static int on_started(void *userdata, const char *execution_id)
{
	struct interrupts *in = userdata;
	unsigned int count;

	if (!in)
		return 0;
	pthread_mutex_lock(&in->mu);
	snprintf(in->id, sizeof(in->id), "%s", execution_id);
	count = in->count;
	pthread_mutex_unlock(&in->mu);
	if (count == 1)
		interrupt_act(in->client, execution_id, count);
	return count >= 2;
}

/* Output as it comes, to ours: each chunk flushed, so a pipe sees lines as the command writes them. */
static int print_chunk(void *userdata, int stream, uint64_t offset, const void *data, size_t len)
{
	FILE *f = stream == SAAS_EXEC_STDERR ? stderr : stdout;

	(void)userdata;
	(void)offset;
	/* A reader that went away (EPIPE) does not stop the command: it runs to its end, as it would have. */
	if (fwrite(data, 1, len, f) == len)
		fflush(f);
	return 0;
}

/* Append `w` to `s`, quoted for /bin/sh unless it needs none. */
static int append_word(char **s, size_t *len, size_t *cap, const char *w)
{
	size_t need = strlen(w) * 4 + 4, k;
	int plain = *w != '\0';
	char *p;

	for (k = 0; w[k]; k++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", w[k]))
			plain = 0;
	if (*len + need + 1 > *cap) {
		size_t ncap = (*len + need + 1) * 2;

		if (!(p = realloc(*s, ncap)))
			return -1;
		*s = p;
		*cap = ncap;
	}
	p = *s + *len;
	if (*len)
		*p++ = ' ';
	if (plain) {
		memcpy(p, w, strlen(w));
		p += strlen(w);
	} else {
		*p++ = '\'';
		for (k = 0; w[k]; k++) {
			if (w[k] == '\'') {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = w[k];
			}
		}
		*p++ = '\'';
	}
	*p = '\0';
	*len = (size_t)(p - *s);
	return 0;
}

static char *read_stdin(size_t *len)
{
	size_t cap = 65536;
	char *buf = malloc(cap), *p;
	ssize_t n;

	*len = 0;
	if (!buf)
		return NULL;
	while ((n = read(STDIN_FILENO, buf + *len, cap - *len)) != 0) {
		if (n < 0) {
			free(buf);
			return NULL;
		}
		*len += (size_t)n;
		if (*len > SAAS_EXEC_STDIN_MAX)
			break;
		if (*len == cap) {
			if (!(p = realloc(buf, cap * 2))) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap *= 2;
		}
	}
	return buf;
}

int aas_cmd_exec(aas_ctx *ctx, int argc, char **argv)
{
	saas_exec_options opts = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	struct interrupts intr;
	bool taking = false;
	unsigned int interrupted = 0;
	saas_client *client = NULL;
	saas_execution *ex = NULL;
	const char *id = NULL, *v, **env = NULL;
	char *cmd = NULL, *in = NULL;
	size_t len = 0, cap = 0, nenv = 0, inlen = 0;
	int i, r, rc, code = AAS_EXIT_OK, no_stdin = 0, dashdash = 0;

	if (!(env = calloc((size_t)argc + 1, sizeof(*env))))
		return aas_error(AAS_EXIT_ERROR, "out of memory");
	for (i = 1; i < argc; i++) {
		if (dashdash || (id && argv[i][0] != '-')) {
			if (append_word(&cmd, &len, &cap, argv[i]) < 0) {
				code = aas_error(AAS_EXIT_ERROR, "out of memory");
				goto out;
			}
		} else if (strcmp(argv[i], "--") == 0) {
			dashdash = 1;
		} else if ((r = aas_common_opt(ctx, "exec", argc, argv, &i)) != 0) {
			if (r < 0)
				goto usage;
		} else if (strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--no-stdin") == 0) {
			no_stdin = 1;
		} else if ((r = aas_opt("exec", argc, argv, &i, "--cwd", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			opts.cwd = v;
		} else if ((r = aas_pair_opt("exec", argc, argv, &i, "--env", "-e", "NAME=VALUE", env, &nenv,
		                             (size_t)argc)) != 0) {
			if (r < 0)
				goto usage;
		} else if ((r = aas_opt("exec", argc, argv, &i, "--timeout", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			if ((code = aas_duration("exec", v, &opts.timeout_s)) != AAS_EXIT_OK)
				goto out;
		} else if (argv[i][0] == '-') {
			code = aas_usage_error("exec", "unknown option '%s'", argv[i]);
			goto out;
		} else {
			id = argv[i];
		}
	}
	if (aas_help(ctx, help))
		goto out;
	if (!id || !cmd) {
		code = aas_usage_error("exec", "missing %s", id ? "COMMAND (after --)" : "sandbox ID");
		goto out;
	}
	if (nenv)
		opts.env = env;
	if (!no_stdin && !isatty(STDIN_FILENO)) {
		if (!(in = read_stdin(&inlen))) {
			code = aas_error(AAS_EXIT_ERROR, "cannot read stdin");
			goto out;
		}
		if (inlen > SAAS_EXEC_STDIN_MAX) {
			code = aas_error(AAS_EXIT_USAGE, "stdin is over 16 MiB: copy the data in with `aas cp` instead");
			goto out;
		}
		if (inlen) {
			opts.stdin_data = in;
			opts.stdin_len = inlen;
		}
	}
	taking = interrupts_take(&intr);
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		goto out;
	if (taking) {
		pthread_mutex_lock(&intr.mu);
		intr.client = client;
		pthread_mutex_unlock(&intr.mu);
		cb.userdata = &intr;
	}
	/* A stream with --json too: the execution's id comes at its start, for Ctrl-C. */
	cb.started = on_started;
	if (!ctx->json)
		cb.output = print_chunk;
	rc = saas_exec_stream(&ex, client, id, cmd, &opts, &cb, 0);
	if (taking) {
		interrupted = interrupts_release(&intr);
		taking = false;
	}
	/* Interrupted and not ended by its own exit (cancelled, or the stream cut): 128 + SIGINT, silently. */
	if (interrupted && (rc != SAAS_OK || ex->status != SAAS_EXEC_EXITED)) {
		code = 128 + SIGINT;
		goto out;
	}
	if (rc != SAAS_OK) {
		code = aas_fail(rc, id);
		/* The command could not run at all (docs/cli.md): 5, which a command's own 1 cannot be taken for. */
		if (code == AAS_EXIT_ERROR)
			code = AAS_EXIT_SERVER;
		goto out;
	}
	/* Streamed, the output was all printed as it came; only the record keeps no more than max_output. */
	if (ctx->json)
		aas_json_print(saas__wire_execution(ex));
	switch (ex->status) {
	case SAAS_EXEC_EXITED:
		code = ex->exit_code & 255;
		break;
	case SAAS_EXEC_TIMEDOUT:
		code = 124;
		if (!ctx->json)
			aas_error(code, "the command timed out: raise --timeout (at most 1h)");
		break;
	default:
		code = aas_error(AAS_EXIT_SERVER, "the command could not run: %s", ex->error && *ex->error ? ex->error : "unknown error");
		break;
	}
	goto out;
usage:
	code = AAS_EXIT_USAGE;
out:
	if (taking)
		interrupts_release(&intr);
	saas_execution_free(ex);
	saas_client_free(client);
	free(cmd);
	free(in);
	free(env);
	return code;
}
