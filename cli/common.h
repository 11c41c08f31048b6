/*
 * aas: the command-line tool. Shared helpers: configuration, option parsing,
 * error reporting and exit codes, formatting. Over <saas.h> only.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_CLI_COMMON_H
#define AAS_CLI_COMMON_H

#include <jansson.h>
#include <saas.h>
#include <stdbool.h>
#include "wire.h"
#include <stdio.h>

/* Exit codes (documented in `aas --help`, aas(1) and docs/cli.md). */
enum {
	AAS_EXIT_OK = 0,
	AAS_EXIT_ERROR = 1,     /* anything else */
	AAS_EXIT_USAGE = 2,     /* bad command line (or arguments the server rejects) */
	AAS_EXIT_AUTH = 3,      /* missing or wrong API key */
	AAS_EXIT_NOTFOUND = 4,  /* no such sandbox, execution or file */
	AAS_EXIT_SERVER = 5,    /* the server or the network failed */
	AAS_EXIT_CREDIT = 6     /* insufficient credit, or an account limit */
};

/* What every command gets: the global options and the resolved configuration. */
typedef struct {
	const char *url_flag;   /* --url, or NULL */
	const char *key_flag;   /* --key, or NULL */
	int json;               /* --json */
	int help;               /* --help seen */
} aas_ctx;

typedef int (*aas_cmd_fn)(aas_ctx *ctx, int argc, char **argv);

int aas_cmd_create(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_ls(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_get(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_exec(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_cp(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_files(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_expose(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_unexpose(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_extend(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_rm(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_usage(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_account(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_login(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_network(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_shell(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_fork(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_pause(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_resume(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_history(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_e2b(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_metrics(aas_ctx *ctx, int argc, char **argv);
int aas_cmd_run(aas_ctx *ctx, int argc, char **argv);

/* --network, --isolated, --internet, --allow and --deny, as aas create and aas network take them. */
typedef struct {
	const char *mode;                                /* "isolated", "internet", "policy", or NULL */
	const char *allow[SAAS_NETWORK_RULES_MAX + 1];   /* NULL-terminated */
	const char *deny[SAAS_NETWORK_RULES_MAX + 1];
	size_t nallow, ndeny;
} aas_net_opts;
/* Consume one of them at argv[*i]: 1 consumed, 0 not ours, -1 usage error already reported. */
int aas_net_opt(const char *cmd, int argc, char **argv, int *i, aas_net_opts *n);
/* The spec they make (pointing into n); false when none was given (the default). */
bool aas_net_spec(aas_net_opts *n, saas_network_spec *spec);
/* A sandbox's network, as aas get and aas network print it. */
void aas_print_network(const saas_network_info *ni);

#define AAS_DEFAULT_URL "http://127.0.0.1:8080"

/*
 * Option parsing. aas_common_opt() consumes --url/--key/--json/--help at argv[*i]
 * (1 consumed, 0 not ours, -1 usage error already reported). aas_opt() matches
 * "--name VALUE", "--name=VALUE" or "-s VALUE" and sets *val (1 matched, 0 not,
 * -1 missing value, reported).
 */
int aas_common_opt(aas_ctx *ctx, const char *cmd, int argc, char **argv, int *i);
int aas_opt(const char *cmd, int argc, char **argv, int *i, const char *lng, const char *shrt, const char **val);
/*
 * A repeatable KEY=VALUE option (aas_opt's spellings; shape names it in the
 * message, "NAME=VALUE") appended to list[*n], borrowed from argv, at most
 * max: 1 taken, 0 not this option, -1 a usage error, reported (no '=', an
 * empty key, one too many). The library checks each pair's own bounds.
 */
int aas_pair_opt(const char *cmd, int argc, char **argv, int *i, const char *lng, const char *shrt, const char *shape,
                 const char **list, size_t *n, size_t max);

/*
 * One argument that is not the command's own option: a common option, or an
 * operand, kept in pos[*n] (pos NULL: only counted) while fewer than `max`
 * came before it. Anything else is a usage error. AAS_EXIT_OK, or
 * AAS_EXIT_USAGE once reported.
 */
int aas_arg(aas_ctx *ctx, const char *cmd, int argc, char **argv, int *i, const char **pos, int max, int *n);
/* aas_args_done(): go on with the command. */
#define AAS_GO (-1)
/*
 * After the arguments: print `help` when --help was seen (AAS_EXIT_OK), or
 * report the first operand missing when fewer than `min` came ("missing
 * sandbox ID", named `first` or `second`; AAS_EXIT_USAGE), or AAS_GO.
 */
int aas_args_done(const aas_ctx *ctx, const char *cmd, const char *help, int n, int min, const char *first,
                  const char *second);
/* A duration argument ("90", "15m"...) into *secs: AAS_EXIT_OK, or AAS_EXIT_USAGE once reported. */
int aas_duration(const char *cmd, const char *v, int64_t *secs);
/* A count from 1 to max given to option `opt`: AAS_EXIT_OK, or AAS_EXIT_USAGE once reported. */
int aas_count(const char *cmd, const char *opt, const char *v, unsigned long max, unsigned long *out);

/* Report a usage error ("aas CMD: ...; see `aas CMD --help`") and return AAS_EXIT_USAGE. */
int aas_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print a one-line error "aas: ..." and return `code`. */
int aas_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report a failed libsaas call from saas_error_last() and return the exit code for `rc`. */
int aas_fail(int rc, const char *what);
/*
 * The same for a call on `path` in sandbox `id`: SAAS_ENOTFOUND says whether
 * the sandbox or the path is missing (it asks the server which).
 */
int aas_fail_path(saas_client *client, int rc, const char *id, const char *path);
/* The exit code for a libsaas status (the table in errors.c). */
int aas_exit_code(int rc);
/* What to do about a failure with status rc, or NULL. */
const char *aas_hint(int rc);
/* Whether the table has rc's own row (the error table test checks every code). */
bool aas_status_known(int rc);

/*
 * The server URL and API key, each from flags > environment > config file
 * (the URL defaults to AAS_DEFAULT_URL): both malloc'd. AAS_EXIT_OK, or an
 * exit code once reported (no key: AAS_EXIT_AUTH).
 */
int aas_credentials(const aas_ctx *ctx, char **url, char **key);
/* Open the client with them. On failure reports and returns an exit code. */
int aas_open(aas_ctx *ctx, saas_client **out);
/* The config file's path (malloc'd) or NULL. */
char *aas_config_path(void);
/* Read `name` ("url" or "key") from the config file; malloc'd or NULL. */
char *aas_config_get(const char *name);

/* "90", "90s", "15m", "2h", "1d" -> seconds. 0 ok, -1 invalid. */
int aas_parse_duration(const char *s, int64_t *out);
/* ms -> "2024-05-01T12:00:00Z" (UTC); "-" for 0. */
const char *aas_fmt_time(char *buf, size_t size, int64_t ms);
/* micro-dollars -> "$1.234567", exact. */
const char *aas_fmt_usd(char *buf, size_t size, int64_t micro);

/* JSON: the REST API's shapes are lib/wire's (wire.h, docs/wire.md), so that --json prints what the server sends. */
/* Print `v` (stolen) to stdout, indented; returns AAS_EXIT_OK (or AAS_EXIT_ERROR on failure). */
int aas_json_print(json_t *v);

/* Print a usage text when --help was seen; returns 1 if printed. */
int aas_help(const aas_ctx *ctx, const char *text);

#endif
