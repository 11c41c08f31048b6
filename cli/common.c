/*
 * aas: shared helpers (configuration, options, errors, formatting).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int aas_help(const aas_ctx *ctx, const char *text)
{
	if (!ctx->help)
		return 0;
	fputs(text, stdout);
	return 1;
}

int aas_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "aas%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see `aas%s%s --help`\n", cmd ? " " : "", cmd ? cmd : "");
	return AAS_EXIT_USAGE;
}

int aas_error(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("aas: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int aas_opt(const char *cmd, int argc, char **argv, int *i, const char *lng, const char *shrt, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(lng);

	if (strncmp(a, lng, n) == 0 && a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (strcmp(a, lng) != 0 && !(shrt && strcmp(a, shrt) == 0))
		return 0;
	if (*i + 1 >= argc) {
		aas_usage_error(cmd, "%s needs a value", a);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}

int aas_pair_opt(const char *cmd, int argc, char **argv, int *i, const char *lng, const char *shrt, const char *shape,
                 const char **list, size_t *n, size_t max)
{
	const char *v;
	int r = aas_opt(cmd, argc, argv, i, lng, shrt, &v);

	if (r <= 0)
		return r;
	if (!strchr(v, '=') || v[0] == '=') {
		aas_usage_error(cmd, "%s needs %s, not '%s'", lng, shape, v);
		return -1;
	}
	if (*n >= max) {
		aas_usage_error(cmd, "at most %zu %s", max, lng);
		return -1;
	}
	list[(*n)++] = v;
	return 1;
}

int aas_common_opt(aas_ctx *ctx, const char *cmd, int argc, char **argv, int *i)
{
	const char *v;
	int r;

	if (strcmp(argv[*i], "--json") == 0) {
		ctx->json = 1;
		return 1;
	}
	if (strcmp(argv[*i], "--help") == 0 || strcmp(argv[*i], "-h") == 0) {
		ctx->help = 1;
		return 1;
	}
	if ((r = aas_opt(cmd, argc, argv, i, "--url", NULL, &v)) != 0) {
		if (r > 0)
			ctx->url_flag = v;
		return r;
	}
	if ((r = aas_opt(cmd, argc, argv, i, "--key", NULL, &v)) != 0) {
		if (r > 0)
			ctx->key_flag = v;
		return r;
	}
	return 0;
}

int aas_arg(aas_ctx *ctx, const char *cmd, int argc, char **argv, int *i, const char **pos, int max, int *n)
{
	int r;

	if ((r = aas_common_opt(ctx, cmd, argc, argv, i)) != 0)
		return r < 0 ? AAS_EXIT_USAGE : AAS_EXIT_OK;
	if (argv[*i][0] == '-' || *n >= max)
		return aas_usage_error(cmd, "unexpected argument '%s'", argv[*i]);
	if (pos)
		pos[*n] = argv[*i];
	++*n;
	return AAS_EXIT_OK;
}

int aas_args_done(const aas_ctx *ctx, const char *cmd, const char *help, int n, int min, const char *first,
                  const char *second)
{
	if (aas_help(ctx, help))
		return AAS_EXIT_OK;
	if (n < min)
		return aas_usage_error(cmd, "missing %s", n == 0 ? first : second);
	return AAS_GO;
}

int aas_duration(const char *cmd, const char *v, int64_t *secs)
{
	if (aas_parse_duration(v, secs) < 0)
		return aas_usage_error(cmd, "bad duration '%s' (use 90, 90s, 15m or 2h)", v);
	return AAS_EXIT_OK;
}

int aas_count(const char *cmd, const char *opt, const char *v, unsigned long max, unsigned long *out)
{
	char *end;

	*out = strtoul(v, &end, 10);
	if (!*v || *end || v[0] == '-' || *out < 1 || *out > max)
		return aas_usage_error(cmd, "%s wants a count from 1 to %lu, not '%s'", opt, max, v);
	return AAS_EXIT_OK;
}

int aas_fail(int rc, const char *what)
{
	const saas_error *e = saas_error_last();
	const char *msg = (e->code == rc && e->message && e->message[0]) ? e->message : saas_strerror(rc);
	const char *hint = aas_hint(rc);
	char line[1024], when[64];
	size_t k;

	/* One line, whatever the message holds. */
	snprintf(line, sizeof(line), "%s", msg);
	for (k = 0; line[k]; k++)
		if (line[k] == '\n' || line[k] == '\r')
			line[k] = ' ';
	if (rc == SAAS_EAUTH)
		return aas_error(AAS_EXIT_AUTH, "%s: invalid API key (%s): %s", what, line, hint);
	/* Busy (no room now, a change not confirmed yet): the server said when to come back (Retry-After). */
	if (rc == SAAS_EBUSY && e->code == rc && e->retry_after_ms > 0) {
		snprintf(when, sizeof(when), "try again in %lld s", (long long)((e->retry_after_ms + 999) / 1000));
		hint = when;
	}
	if (hint)
		return aas_error(aas_exit_code(rc), "%s: %s: %s", what, line, hint);
	return aas_error(aas_exit_code(rc), "%s: %s", what, line);
}

int aas_fail_path(saas_client *client, int rc, const char *id, const char *path)
{
	saas_sandbox *sb = NULL;

	if (rc != SAAS_ENOTFOUND)
		return aas_fail(rc, path);
	/* Not found is the sandbox or the path: ask which, so the hint is the right one. */
	if (saas_sandbox_get(&sb, client, id) != SAAS_OK || sb->status == SAAS_SANDBOX_DESTROYED) {
		saas_sandbox_free(sb);
		return aas_fail(rc, id);
	}
	saas_sandbox_free(sb);
	return aas_error(AAS_EXIT_NOTFOUND, "%s:%s: no such file or directory: `aas files %s DIR` lists what is there",
	                 id, path, id);
}

/* ---- configuration ---- */

char *aas_config_path(void)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char *p;
	size_t n;

	if (xdg && xdg[0] == '/') {
		n = strlen(xdg) + sizeof("/aas/config");
		if ((p = malloc(n)))
			snprintf(p, n, "%s/aas/config", xdg);
		return p;
	}
	if (!home || !home[0])
		return NULL;
	n = strlen(home) + sizeof("/.config/aas/config");
	if ((p = malloc(n)))
		snprintf(p, n, "%s/.config/aas/config", home);
	return p;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

char *aas_config_get(const char *name)
{
	char *path = aas_config_path(), *res = NULL;
	char line[4096];
	FILE *f;

	if (!path)
		return NULL;
	f = fopen(path, "r");
	free(path);
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq;

		if (!*s || *s == '#' || !(eq = strchr(s, '=')))
			continue;
		*eq = '\0';
		if (strcmp(trim(s), name) == 0) {
			free(res);
			res = strdup(trim(eq + 1));
		}
	}
	fclose(f);
	return res;
}

int aas_credentials(const aas_ctx *ctx, char **url_out, char **key_out)
{
	char *cfg_url = NULL, *cfg_key = NULL;
	const char *url = ctx->url_flag, *key = ctx->key_flag;
	int code = AAS_EXIT_OK;

	*url_out = *key_out = NULL;
	if (!url || !*url)
		url = getenv("AAS_BASE_URL");
	if (!key || !*key)
		key = getenv("AAS_API_KEY");
	if (!url || !*url)
		url = cfg_url = aas_config_get("url");
	if (!key || !*key)
		key = cfg_key = aas_config_get("key");
	if (!url || !*url)
		url = AAS_DEFAULT_URL;
	if (!key || !*key)
		code = aas_error(AAS_EXIT_AUTH, "no API key: run `aas login` or set AAS_API_KEY");
	else if (!(*url_out = strdup(url)) || !(*key_out = strdup(key)))
		code = aas_error(AAS_EXIT_ERROR, "out of memory");
	if (code != AAS_EXIT_OK) {
		free(*url_out);
		*url_out = NULL;
	}
	free(cfg_url);
	free(cfg_key);
	return code;
}

int aas_open(aas_ctx *ctx, saas_client **out)
{
	saas_remote_options opts = SAAS_REMOTE_OPTIONS_INIT;
	char *url = NULL, *key = NULL;
	int rc, code;

	if ((code = aas_credentials(ctx, &url, &key)) != AAS_EXIT_OK)
		return code;
	opts.user_agent = "aas-cli";
	rc = saas_client_open_remote(out, url, key, &opts, 0);
	if (rc == SAAS_EAUTH)
		code = aas_error(AAS_EXIT_AUTH, "invalid API key for %s: run `aas login` or set AAS_API_KEY", url);
	else if (rc == SAAS_ENETWORK)
		code = aas_error(AAS_EXIT_SERVER, "cannot reach the server at %s (%s): check that it runs and --url / AAS_BASE_URL",
		                 url, saas_error_last()->message);
	else if (rc == SAAS_EINVAL)
		code = aas_error(AAS_EXIT_USAGE, "bad server URL '%s': give an origin such as http://127.0.0.1:8080 (--url or AAS_BASE_URL)", url);
	else if (rc != SAAS_OK)
		code = aas_fail(rc, url);
	free(url);
	free(key);
	return code;
}

/* ---- parsing and formatting ---- */

int aas_parse_duration(const char *s, int64_t *out)
{
	char *end;
	long long v, mul = 1;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || v <= 0)
		return -1;
	if (*end == '\0' || strcmp(end, "s") == 0)
		mul = 1;
	else if (strcmp(end, "m") == 0)
		mul = 60;
	else if (strcmp(end, "h") == 0)
		mul = 3600;
	else if (strcmp(end, "d") == 0)
		mul = 86400;
	else
		return -1;
	if (v > INT64_MAX / mul / 1000)
		return -1;
	*out = (int64_t)v * mul;
	return 0;
}

const char *aas_fmt_time(char *buf, size_t size, int64_t ms)
{
	char full[32];
	size_t n;

	/* The library's RFC 3339 (what --json prints), to the second: a terminal needs no milliseconds. */
	if (ms <= 0 || (n = strlen(saas_time_format(full, sizeof(full), ms))) < sizeof(".000Z")) {
		snprintf(buf, size, "-");
		return buf;
	}
	snprintf(buf, size, "%.*sZ", (int)(n - strlen(".000Z")), full);
	return buf;
}

const char *aas_fmt_usd(char *buf, size_t size, int64_t micro)
{
	char tmp[40];

	saas_usd_format(tmp, sizeof(tmp), micro);
	if (tmp[0] == '-')
		snprintf(buf, size, "-$%s", tmp + 1);
	else
		snprintf(buf, size, "$%s", tmp);
	return buf;
}

int aas_json_print(json_t *v)
{
	int rc;

	if (!v)
		return aas_error(AAS_EXIT_ERROR, "out of memory building JSON");
	rc = json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(v);
	fputc('\n', stdout);
	return rc == 0 ? AAS_EXIT_OK : AAS_EXIT_ERROR;
}
