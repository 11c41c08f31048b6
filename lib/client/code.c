/*
 * The public calls on code contexts: arguments checked once, for every
 * provider, then the provider's table (core/code.c locally, remote/code.c
 * over REST). The frees are in core/code_wire.c, beside what allocates.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "client/provider.h"

/* What every call checks first: the client, the sandbox id, the flags (none is defined). */
static int check_call(saas_client *c, const char *id, unsigned int flags)
{
	if (!c)
		return saas__inval("client is NULL");
	if (!id || !*id)
		return saas__inval("sandbox id is missing");
	if (!saas__valid_text(id, SAAS_ID_MAX))
		return saas__inval("sandbox id is too long or not printable");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	return SAAS_OK;
}

static int check_context_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (!n)
		return saas__inval("context id is missing");
	if (n > SAAS_CODE_CONTEXT_ID_MAX)
		return saas__inval("context id is longer than %d bytes", SAAS_CODE_CONTEXT_ID_MAX);
	for (const char *p = id; *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.'))
			return saas__inval("context id may hold only letters, digits, '.', '_' and '-'");
	if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return saas__inval("context id may not be \".\" or \"..\"");
	return SAAS_OK;
}

/* A language as the code server names it (E2B's normalisation: case and spaces, "js"); NULL in, NULL out. */
static int language_of(const char *in, const char **out)
{
	static const char *const names[] = { "python", "javascript", "bash" };
	char buf[32];
	size_t n;

	*out = NULL;
	if (!in)
		return SAAS_OK;
	while (isspace((unsigned char)*in))
		in++;
	n = strlen(in);
	while (n && isspace((unsigned char)in[n - 1]))
		n--;
	if (n == 0)
		return SAAS_OK;
	if (n >= sizeof(buf))
		return saas__inval("language must be \"python\", \"javascript\" or \"bash\"");
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)in[i]);
	buf[n] = '\0';
	if (strcmp(buf, "js") == 0)
		snprintf(buf, sizeof(buf), "javascript");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(buf, names[i]) == 0) {
			*out = names[i];
			return SAAS_OK;
		}
	return saas__inval("language \"%.*s\" is not served: use \"python\", \"javascript\" or \"bash\"", (int)n, in);
}

/*
 * The caller's options (at any version up to `version`, into o whose
 * defaults are set) and their language normalised in place: what create
 * and run read alike.
 */
static int read_options(void *o, const void *options, const size_t *sizes, unsigned int version, const char *what,
                        const char **language)
{
	int rc = saas__options_read(o, options, sizes, version, what);

	return rc < 0 ? rc : language_of(*language, language);
}

static int need(bool slot)
{
	if (!slot)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot reach code contexts");
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_code_context_create(saas_code_context **out, saas_client *c, const char *id,
                                          const saas_code_context_options *options, unsigned int flags)
{
	static const size_t sizes[] = { 0, sizeof(saas_code_context_options) };
	saas_code_context_options o = SAAS_CODE_CONTEXT_OPTIONS_INIT;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if ((rc = check_call(c, id, flags)) < 0 ||
	    (rc = read_options(&o, options, sizes, SAAS_CODE_CONTEXT_OPTIONS_VERSION, "code context", &o.language)) < 0)
		return rc;
	if (o.cwd && (rc = saas__check_path(o.cwd, true)) < 0)
		return rc;
	if ((rc = saas__check_env(o.env)) < 0 || (rc = need(c->ops->code_context_create != NULL)) < 0)
		return rc;
	return c->ops->code_context_create(c, id, &o, out);
}

SAAS_EXTERN(int) saas_code_context_list_get(saas_code_context_list **out, saas_client *c, const char *id,
                                        unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if ((rc = check_call(c, id, flags)) < 0 || (rc = need(c->ops->code_context_list != NULL)) < 0)
		return rc;
	return c->ops->code_context_list(c, id, out);
}

SAAS_EXTERN(int) saas_code_context_restart(saas_client *c, const char *id, const char *context_id,
                                           unsigned int flags)
{
	int rc;

	saas__error_clear();
	if ((rc = check_call(c, id, flags)) < 0 || (rc = check_context_id(context_id)) < 0 ||
	    (rc = need(c->ops->code_context_restart != NULL)) < 0)
		return rc;
	return c->ops->code_context_restart(c, id, context_id);
}

SAAS_EXTERN(int) saas_code_context_delete(saas_client *c, const char *id, const char *context_id, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if ((rc = check_call(c, id, flags)) < 0 || (rc = check_context_id(context_id)) < 0 ||
	    (rc = need(c->ops->code_context_delete != NULL)) < 0)
		return rc;
	return c->ops->code_context_delete(c, id, context_id);
}

SAAS_EXTERN(int) saas_code_run(saas_code_execution **out, saas_client *c, const char *id, const char *code,
                               const saas_code_run_options *options, unsigned int flags)
{
	static const size_t sizes[] = { 0, sizeof(saas_code_run_options) };
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if ((rc = check_call(c, id, flags)) < 0 ||
	    (rc = read_options(&o, options, sizes, SAAS_CODE_RUN_OPTIONS_VERSION, "code run", &o.language)) < 0)
		return rc;
	if (!code || !*code)
		return saas__inval("code is missing");
	if (strlen(code) > SAAS_CODE_SOURCE_MAX)
		return saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0, "code is over %u bytes", SAAS_CODE_SOURCE_MAX);
	if (!saas__valid_utf8(code, strlen(code)))
		return saas__inval("code is not valid UTF-8");
	if (o.context_id && o.language)
		return saas__inval("give a language or a context id, not both");
	if (o.context_id && (rc = check_context_id(o.context_id)) < 0)
		return rc;
	if ((rc = saas__check_env(o.env)) < 0)
		return rc;
	if (o.timeout_ms < 0 || o.timeout_ms > SAAS_CODE_TIMEOUT_MAX_MS)
		return saas__inval("timeout_ms must be between 0 (the default) and %d", SAAS_CODE_TIMEOUT_MAX_MS);
	if (o.max_output > SAAS_CODE_OUTPUT_MAX)
		return saas__inval("max_output is over %u bytes", SAAS_CODE_OUTPUT_MAX);
	if (o.max_result > SAAS_CODE_RESULT_MAX)
		return saas__inval("max_result is over %u bytes", SAAS_CODE_RESULT_MAX);
	if (!o.timeout_ms)
		o.timeout_ms = SAAS_CODE_TIMEOUT_DEFAULT_MS;
	if (!o.max_output)
		o.max_output = SAAS_CODE_OUTPUT_DEFAULT;
	if (!o.max_result)
		o.max_result = SAAS_CODE_RESULT_DEFAULT;
	if ((rc = need(c->ops->code_run != NULL)) < 0)
		return rc;
	return c->ops->code_run(c, id, code, &o, out);
}
