/*
 * aas login: verify an API key and server URL, and save them (0600).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas login [--key KEY] [--url URL] [--json]\n"
	"\n"
	"Verify an API key against a server and save both, mode 0600, in\n"
	"$XDG_CONFIG_HOME/aas/config (~/.config/aas/config). Without --key the key is\n"
	"read from AAS_API_KEY, else asked for on the terminal (not echoed), else read\n"
	"from stdin's first line.\n";

static char *read_line(const char *prompt, int hide)
{
	struct termios old, quiet;
	char buf[4096], *nl;
	int tty = isatty(STDIN_FILENO), restore = 0;

	if (tty) {
		fputs(prompt, stderr);
		fflush(stderr);
		if (hide && tcgetattr(STDIN_FILENO, &old) == 0) {
			quiet = old;
			quiet.c_lflag &= ~(tcflag_t)ECHO;
			restore = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
		}
	}
	nl = fgets(buf, sizeof(buf), stdin);
	if (restore) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (!nl)
		return NULL;
	buf[strcspn(buf, "\r\n")] = '\0';
	return strdup(buf);
}

static int mkdirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	return 0;
}

int aas_cmd_login(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	char *key = NULL, *url = NULL, *cfg = NULL, *tmp = NULL;
	const char *v;
	int i, code, nargs = 0, fd = -1;
	FILE *f;
	size_t n;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "login", argc, argv, &i, NULL, 0, &nargs)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "login", help, nargs, 0, NULL, NULL)) != AAS_GO)
		return code;
	if (ctx->url_flag && *ctx->url_flag)
		url = strdup(ctx->url_flag);
	else if ((v = getenv("AAS_BASE_URL")) && *v)
		url = strdup(v);
	else if (!(url = aas_config_get("url")))
		url = strdup(AAS_DEFAULT_URL);
	if (ctx->key_flag && *ctx->key_flag)
		key = strdup(ctx->key_flag);
	else if ((v = getenv("AAS_API_KEY")) && *v)
		key = strdup(v);
	else
		key = read_line("API key: ", 1);
	if (!url || !key || !*key) {
		code = aas_error(AAS_EXIT_USAGE, "no API key given: pass --key or type it when asked");
		goto out;
	}
	{
		aas_ctx c = *ctx;

		c.url_flag = url;
		c.key_flag = key;
		if ((code = aas_open(&c, &client)) != AAS_EXIT_OK)
			goto out;
	}
	if (!(cfg = aas_config_path())) {
		code = aas_error(AAS_EXIT_ERROR, "cannot find a config directory: set XDG_CONFIG_HOME or HOME");
		goto out;
	}
	n = strlen(cfg) + sizeof(".tmp-XXXXXX");
	if (!(tmp = malloc(n)) || mkdirs(cfg) < 0) {
		code = aas_error(AAS_EXIT_ERROR, "cannot create the directory of %s: %s", cfg, strerror(errno));
		goto out;
	}
	snprintf(tmp, n, "%s.tmp-XXXXXX", cfg);
	if ((fd = mkstemp(tmp)) < 0 || fchmod(fd, 0600) < 0 || !(f = fdopen(fd, "w"))) {
		code = aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", cfg, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		goto out;
	}
	fd = -1;
	fprintf(f, "# aas configuration, written by `aas login`. Keep it private (mode 0600).\nurl = %s\nkey = %s\n", url, key);
	if (fclose(f) != 0 || rename(tmp, cfg) < 0) {
		code = aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", cfg, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (ctx->json)
		code = aas_json_print(json_pack("{s:s,s:s,s:s}", "url", url, "account_id", saas_client_account_id(client),
		                                "config", cfg));
	else
		printf("logged in to %s as %s; saved to %s\n", url, saas_client_account_id(client), cfg);
out:
	saas_client_free(client);
	free(key);
	free(url);
	free(cfg);
	free(tmp);
	return code;
}
