/*
 * aas exec: run a command in a sandbox; exit with its exit code.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
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
	"command no stdin. --json prints the execution, output included, at the end.\n";

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
		} else if ((r = aas_opt("exec", argc, argv, &i, "--env", "-e", &v)) != 0) {
			if (r < 0)
				goto usage;
			if (!strchr(v, '=') || v[0] == '=') {
				code = aas_usage_error("exec", "-e needs NAME=VALUE, not '%s'", v);
				goto out;
			}
			env[nenv++] = v;
		} else if ((r = aas_opt("exec", argc, argv, &i, "--timeout", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			if (aas_parse_duration(v, &opts.timeout_s) < 0) {
				code = aas_usage_error("exec", "bad duration '%s' (use 90, 90s, 15m or 2h)", v);
				goto out;
			}
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
		code = aas_usage_error("exec", "need a sandbox ID and a command after --");
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
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		goto out;
	if (ctx->json) {
		rc = saas_exec(&ex, client, id, cmd, &opts, 0);
	} else {
		saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
		cb.output = print_chunk;
		rc = saas_exec_stream(&ex, client, id, cmd, &opts, &cb, 0);
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
	saas_execution_free(ex);
	saas_client_free(client);
	free(cmd);
	free(in);
	free(env);
	return code;
}
