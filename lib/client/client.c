/*
 * The public client calls. Arguments are checked here, once, for every
 * provider, so that local and remote clients refuse the same things the same
 * way; then the provider does the work.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "client/provider.h"
#include "util/util.h"

#define CHECK_CLIENT(c)                                      \
	do {                                                     \
		if (!(c))                                            \
			return saas__inval("client is NULL");            \
	} while (0)

static int check_id(const char *id, const char *what)
{
	if (!id || !*id)
		return saas__inval("%s id is missing", what);
	if (!saas__valid_text(id, SAAS_ID_MAX))
		return saas__inval("%s id is too long or not printable", what);
	return SAAS_OK;
}

/*
 * A path the guest can take: checked here, before any guest call, so that a
 * name the guest's kernel would refuse (ENAMETOOLONG) is the caller's mistake
 * with a clear message, on every provider alike.
 */
int saas__check_path(const char *path, bool required)
{
	size_t len, abs_len, part;

	if (!path || !*path)
		return required ? saas__inval("path is missing") : SAAS_OK;
	len = strlen(path);
	/* A relative path is made absolute under the workspace; the guest's PATH_MAX counts the NUL. */
	abs_len = path[0] == '/' ? len : sizeof(SAAS_WORKSPACE "/") - 1 + len;
	if (abs_len >= SAAS_PATH_MAX)
		return saas__inval("path is too long: at most %d bytes once absolute (relative paths are under %s/)",
		                   SAAS_PATH_MAX - 1, SAAS_WORKSPACE);
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return saas__inval("path contains a control character");
	for (const char *p = path; *p; p += part) {
		p += strspn(p, "/");
		if ((part = strcspn(p, "/")) > SAAS_NAME_MAX)
			return saas__inval("a file or directory name in the path is %zu bytes; at most %d", part,
			                   SAAS_NAME_MAX);
	}
	return SAAS_OK;
}

SAAS_EXTERN(const char *) saas_client_account_id(const saas_client *c)
{
	return c ? c->account_id : NULL;
}

SAAS_EXTERN(void) saas_client_free(saas_client *c)
{
	if (!c)
		return;
	if (c->ops->free)
		c->ops->free(c);
	free(c);
}

SAAS_EXTERN(int) saas_account_info_get(saas_account_info **out, saas_client *c)
{
	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	return c->ops->account(c, out);
}

SAAS_EXTERN(int) saas_usage_get(saas_usage **out, saas_client *c, int64_t from_ms, int64_t to_ms,
                                unsigned int flags)
{
	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (from_ms < 0 || to_ms < 0)
		return saas__inval("usage period may not start or end before 1970");
	if (from_ms && to_ms && from_ms >= to_ms)
		return saas__inval("usage period is empty: 'from' must be before 'to'");
	return c->ops->usage(c, from_ms, to_ms, out);
}

/*
 * A list of "KEY=VALUE" strings (metadata, a sandbox's environment): at most
 * `max`, each key 1 to key_max bytes with no '=' and no control character
 * (a shell name when `shell`), each value at most value_max bytes, all of it
 * UTF-8 (it travels as JSON), each key once. Bounded before the quadratic
 * check for duplicates, which max keeps small.
 */
int saas__pairs_check(const char *const *list, size_t max, size_t key_max, size_t value_max, bool shell,
                      const char *what)
{
	size_t n = 0;

	if (!list)
		return SAAS_OK;
	for (; list[n]; n++) {
		const char *eq = strchr(list[n], '=');
		size_t klen = eq ? (size_t)(eq - list[n]) : 0;

		if (n >= max)
			return saas__inval("%s: at most %zu entries", what, max);
		if (!eq || klen == 0)
			return saas__inval("%s: entry %zu is not KEY=VALUE", what, n);
		if (klen > key_max)
			return saas__inval("%s: the key of entry %zu is over %zu bytes", what, n, key_max);
		if (strlen(eq + 1) > value_max)
			return saas__inval("%s: the value of '%.*s' is over %zu bytes", what, (int)klen, list[n], value_max);
		for (const char *p = list[n]; p < eq; p++) {
			bool ok = shell ? (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
			                      (p > list[n] && *p >= '0' && *p <= '9')
			                : (unsigned char)*p >= 0x20 && *p != 0x7f;
			if (!ok)
				return saas__inval(shell ? "%s: the name of entry %zu is not a shell name ([A-Za-z_][A-Za-z0-9_]*)"
				                         : "%s: the key of entry %zu has a control character",
				                   what, n);
		}
		if (!saas__valid_utf8(list[n], strlen(list[n])))
			return saas__inval("%s: entry %zu is not UTF-8", what, n);
		for (size_t i = 0; i < n; i++)
			if (strncmp(list[i], list[n], klen + 1) == 0)
				return saas__inval("%s: the key '%.*s' is given twice", what, (int)klen, list[n]);
	}
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_sandbox_create(saas_sandbox **out, saas_client *c, const saas_create_options *options,
                                     unsigned int flags)
{
	static const size_t sizes[] = { 0, offsetof(saas_create_options, network_spec),
		                            offsetof(saas_create_options, metadata), sizeof(saas_create_options) };
	saas_create_options opts = SAAS_CREATE_OPTIONS_INIT;
	const saas_create_options *o = &opts;
	struct saas__network net;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = saas__options_read(&opts, options, sizes, SAAS_CREATE_OPTIONS_VERSION, "create")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (o->size && !saas__valid_text(o->size, 31))
		return saas__inval("size must be a size class name such as small, medium or large");
	if (o->image && !saas__valid_image(o->image))
		return saas__inval("image name must be 1 to 63 characters of a-z, 0-9, '-', '_' and '.'");
	if (o->timeout_s < 0)
		return saas__inval("timeout may not be negative");
	if (o->network && o->network_spec)
		return saas__inval("set network or network_spec, not both");
	if ((rc = saas__pairs_check(o->metadata, SAAS_METADATA_MAX, SAAS_METADATA_KEY_MAX, SAAS_METADATA_VALUE_MAX,
	                            false, "metadata")) < 0 ||
	    (rc = saas__pairs_check(o->envs, SAAS_ENVS_MAX, SAAS_ENV_NAME_MAX, SAAS_ENV_VALUE_MAX, true, "envs")) < 0)
		return rc;
	if (o->on_timeout != SAAS_ON_TIMEOUT_DESTROY && o->on_timeout != SAAS_ON_TIMEOUT_PAUSE)
		return saas__inval("on_timeout must be destroy (0) or pause (1), not %d", o->on_timeout);
	if (o->auto_resume && o->on_timeout != SAAS_ON_TIMEOUT_PAUSE)
		return saas__inval("auto_resume needs on_timeout pause: a sandbox that ends at its timeout has nothing to resume");
	if (!o->network && !o->network_spec)
		return c->ops->sandbox_create(c, o, NULL, out);
	if ((rc = o->network_spec ? saas__network_read(&net, o->network_spec) : saas__network_of_name(&net, o->network)) < 0)
		return rc;
	rc = c->ops->sandbox_create(c, o, &net, out);
	saas__network_clear(&net);
	return rc;
}

SAAS_EXTERN(int) saas_sandbox_network_set(saas_sandbox **out, saas_client *c, const char *id,
                                          const saas_network_spec *spec, unsigned int flags)
{
	struct saas__network net;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if ((rc = saas__network_read(&net, spec)) < 0)
		return rc;
	rc = c->ops->sandbox_network_set ? c->ops->sandbox_network_set(c, id, &net, out)
	                                 : saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
	                                               "this client cannot change a sandbox's network");
	saas__network_clear(&net);
	return rc;
}

SAAS_EXTERN(int) saas_sandbox_fork(saas_sandbox_list **out, saas_client *c, const char *id, unsigned int count,
                                   const saas_fork_options *options, unsigned int flags)
{
	static const size_t sizes[] = { 0, sizeof(saas_fork_options) };
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	struct saas__network net;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if ((rc = saas__options_read(&o, options, sizes, SAAS_FORK_OPTIONS_VERSION, "fork")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (count < 1 || count > SAAS_FORK_MAX)
		return saas__inval("a fork makes 1 to %d sandboxes, not %u", SAAS_FORK_MAX, count);
	if (o.timeout_s < 0)
		return saas__inval("timeout may not be negative");
	if (!c->ops->sandbox_fork)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot fork a sandbox");
	if (!o.network_spec)
		return c->ops->sandbox_fork(c, id, count, o.timeout_s, NULL, out);
	if ((rc = saas__network_read(&net, o.network_spec)) < 0)
		return rc;
	rc = c->ops->sandbox_fork(c, id, count, o.timeout_s, &net, out);
	saas__network_clear(&net);
	return rc;
}

/* Pause and resume share their checks; `op` is the provider's slot, NULL where it has none. */
static int pause_or_resume(saas_sandbox **out, saas_client *c, const char *id, unsigned int flags,
                           int (*op)(saas_client *, const char *, saas_sandbox **), const char *what)
{
	int rc;

	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!op)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot %s a sandbox", what);
	return op(c, id, out);
}

SAAS_EXTERN(int) saas_sandbox_pause(saas_sandbox **out, saas_client *c, const char *id, unsigned int flags)
{
	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	return pause_or_resume(out, c, id, flags, c->ops->sandbox_pause, "pause");
}

SAAS_EXTERN(int) saas_sandbox_resume(saas_sandbox **out, saas_client *c, const char *id, unsigned int flags)
{
	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	return pause_or_resume(out, c, id, flags, c->ops->sandbox_resume, "resume");
}

SAAS_EXTERN(int) saas_sandbox_get(saas_sandbox **out, saas_client *c, const char *id)
{
	return saas_sandbox_get_ext(out, c, id, 0);
}

SAAS_EXTERN(int) saas_sandbox_get_ext(saas_sandbox **out, saas_client *c, const char *id, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags & ~SAAS_GET_RECORDED)
		return saas__inval("unknown flags 0x%x", flags);
	return c->ops->sandbox_get(c, id, flags, out);
}

SAAS_EXTERN(int) saas_sandbox_list_query(saas_sandbox_list **out, saas_client *c, const saas_list_options *options,
                                         unsigned int flags)
{
	static const size_t sizes[] = { 0, sizeof(saas_list_options) };
	saas_list_options o = SAAS_LIST_OPTIONS_INIT;
	size_t n = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = saas__options_read(&o, options, sizes, SAAS_LIST_OPTIONS_VERSION, "list")) < 0)
		return rc;
	if (flags & ~(SAAS_LIST_ACTIVE | SAAS_LIST_DESTROYED | SAAS_LIST_RECORDED))
		return saas__inval("unknown flags 0x%x", flags);
	if ((flags & SAAS_LIST_ACTIVE) && (flags & SAAS_LIST_DESTROYED))
		return saas__inval("list either active or destroyed sandboxes, not both filters at once");
	if (o.limit > 1000)
		return saas__inval("list limit %u is over 1000", o.limit);
	if (o.cursor && (!*o.cursor || strlen(o.cursor) > 128))
		return saas__inval("invalid list cursor");
	/* A filter may name a key twice (it then matches nothing, as two different values would): only the shape is checked. */
	for (; o.metadata && o.metadata[n]; n++) {
		const char *one[] = { o.metadata[n], NULL };
		if (n >= SAAS_LIST_METADATA_MAX)
			return saas__inval("a list filters on at most %d metadata pairs", SAAS_LIST_METADATA_MAX);
		if ((rc = saas__pairs_check(one, 1, SAAS_METADATA_KEY_MAX, SAAS_METADATA_VALUE_MAX, false,
		                            "metadata filter")) < 0)
			return rc;
	}
	return c->ops->sandbox_list(c, o.cursor, o.limit ? o.limit : 100, n ? o.metadata : NULL, flags, out);
}

SAAS_EXTERN(int) saas_sandbox_list_get(saas_sandbox_list **out, saas_client *c, const char *cursor,
                                   unsigned int limit, unsigned int flags)
{
	saas_list_options o = SAAS_LIST_OPTIONS_INIT;

	o.cursor = cursor;
	o.limit = limit;
	return saas_sandbox_list_query(out, c, &o, flags);
}

SAAS_EXTERN(int) saas_sandbox_extend(saas_sandbox **out, saas_client *c, const char *id, int64_t seconds,
                                     unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags & ~SAAS_EXTEND_FROM_NOW)
		return saas__inval("unknown flags 0x%x", flags);
	if ((flags & SAAS_EXTEND_FROM_NOW) ? seconds < 0 : seconds <= 0)
		return saas__inval((flags & SAAS_EXTEND_FROM_NOW) ? "a timeout from now may not be negative"
		                                                  : "extend by a positive number of seconds");
	return c->ops->sandbox_extend(c, id, seconds, flags, out);
}

SAAS_EXTERN(int) saas_sandbox_destroy(saas_sandbox **out, saas_client *c, const char *id, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	return c->ops->sandbox_destroy(c, id, out);
}

int saas__check_env(const char *const *env)
{
	size_t n = 0;

	if (!env)
		return SAAS_OK;
	for (; env[n]; n++) {
		const char *eq = strchr(env[n], '=');
		if (n >= 256)
			return saas__inval("at most 256 environment variables");
		if (!eq || eq == env[n])
			return saas__inval("environment entry %zu is not NAME=VALUE", n);
		for (const char *p = env[n]; p < eq; p++)
			if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
			      (p > env[n] && *p >= '0' && *p <= '9')))
				return saas__inval("environment name in entry %zu is not a valid shell name", n);
		if (strlen(env[n]) > 65536)
			return saas__inval("environment entry %zu is longer than 64 KiB", n);
	}
	return SAAS_OK;
}

/* The arguments of an exec, checked once for saas_exec and saas_exec_stream; `o` holds the defaults. */
static int check_exec(saas_execution **out, saas_client *c, const char *id, const char *command,
                      saas_exec_options *o, const saas_exec_options *options, unsigned int flags,
                      unsigned int known)
{
	static const size_t sizes[] = { 0, sizeof(saas_exec_options) };
	int rc;

	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if ((rc = saas__options_read(o, options, sizes, SAAS_EXEC_OPTIONS_VERSION, "exec")) < 0)
		return rc;
	if (flags & ~known)
		return saas__inval("unknown flags 0x%x", flags);
	if (!command || !*command)
		return saas__inval("command is missing");
	if (strlen(command) > SAAS_EXEC_COMMAND_MAX)
		return saas__inval("command is longer than %u bytes", SAAS_EXEC_COMMAND_MAX);
	if (!saas__valid_utf8(command, strlen(command)))
		return saas__inval("command is not valid UTF-8");
	if (o->cwd && ((rc = saas__check_path(o->cwd, true)) < 0))
		return rc;
	if ((rc = saas__check_env(o->env)) < 0)
		return rc;
	if (o->stdin_len && !o->stdin_data)
		return saas__inval("stdin_len is set but stdin_data is NULL");
	if (o->stdin_len > SAAS_EXEC_STDIN_MAX)
		return saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0, "stdin is over %u bytes", SAAS_EXEC_STDIN_MAX);
	if (o->timeout_s < 0 || o->timeout_s > SAAS_EXEC_TIMEOUT_MAX)
		return saas__inval("command timeout must be between 1 and %d seconds", SAAS_EXEC_TIMEOUT_MAX);
	if (o->max_output > SAAS_EXEC_OUTPUT_MAX)
		return saas__inval("max_output is over %u bytes", SAAS_EXEC_OUTPUT_MAX);
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_exec(saas_execution **out, saas_client *c, const char *id, const char *command,
                           const saas_exec_options *options, unsigned int flags)
{
	saas_exec_options opts = SAAS_EXEC_OPTIONS_INIT;
	int rc;

	saas__error_clear();
	if ((rc = check_exec(out, c, id, command, &opts, options, flags,
	                     SAAS_EXEC_BACKGROUND | SAAS_EXEC_STDIN_OPEN)) < 0)
		return rc;
	return c->ops->exec(c, id, command, &opts, flags, out);
}

/* A callbacks struct of any version up to this header's, read into the current one. */
static int callbacks_read(saas_exec_callbacks *cb, const saas_exec_callbacks *in)
{
	static const size_t sizes[] = { 0, sizeof(saas_exec_callbacks) };

	return saas__options_read(cb, in, sizes, SAAS_EXEC_CALLBACKS_VERSION, "exec callbacks");
}

SAAS_EXTERN(int) saas_exec_stream(saas_execution **out, saas_client *c, const char *id, const char *command,
                                  const saas_exec_options *options, const saas_exec_callbacks *callbacks,
                                  unsigned int flags)
{
	saas_exec_options opts = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	int rc;

	saas__error_clear();
	if ((rc = check_exec(out, c, id, command, &opts, options, flags, SAAS_EXEC_STDIN_OPEN)) < 0 ||
	    (rc = callbacks_read(&cb, callbacks)) < 0)
		return rc;
	if (!c->ops->exec_stream)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot stream an exec");
	return c->ops->exec_stream(c, id, command, &opts, &cb, flags, out);
}

SAAS_EXTERN(int) saas_execution_follow(saas_execution **out, saas_client *c, const char *id,
                                       saas_exec_cursor *cursor, const saas_exec_callbacks *callbacks,
                                       unsigned int wait_ms, unsigned int flags)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "execution")) < 0 || (rc = callbacks_read(&cb, callbacks)) < 0)
		return rc;
	if (!cursor)
		return saas__inval("cursor is NULL");
	if (flags & ~(SAAS_FOLLOW_WAIT | SAAS_FOLLOW_STARTED))
		return saas__inval("unknown flags 0x%x", flags);
	if ((flags & SAAS_FOLLOW_STARTED) && !(flags & SAAS_FOLLOW_WAIT))
		return saas__inval("SAAS_FOLLOW_STARTED is a way to wait: it needs SAAS_FOLLOW_WAIT");
	if (wait_ms > SAAS_EXEC_FOLLOW_WAIT_MAX)
		return saas__inval("wait_ms is over %u", SAAS_EXEC_FOLLOW_WAIT_MAX);
	if (!c->ops->execution_follow)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot follow an execution");
	return c->ops->execution_follow(c, id, cursor, &cb, wait_ms, flags, out);
}

SAAS_EXTERN(int) saas_execution_stdin(saas_client *c, const char *id, const void *data, size_t len,
                                      unsigned int flags)
{
	int rc;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "execution")) < 0)
		return rc;
	if (len && !data)
		return saas__inval("len is set but data is NULL");
	if (flags & ~SAAS_STDIN_CLOSE)
		return saas__inval("unknown flags 0x%x", flags);
	if (len > SAAS_EXEC_STDIN_PENDING_MAX)
		return saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0, "stdin writes are at most %u bytes",
		                   SAAS_EXEC_STDIN_PENDING_MAX);
	if (!c->ops->execution_stdin)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot write to an execution");
	return c->ops->execution_stdin(c, id, data, len, flags);
}

/* Signals a caller may send, by name. */
static const struct {
	const char *name;
	int num;
} signals[] = { { "HUP", 1 }, { "INT", 2 }, { "KILL", 9 }, { "TERM", 15 } };

/* "TERM" ("SIGTERM") -> 15 for the signals a caller may send; 0 for any other. */
static int signal_number(const char *name)
{
	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(signals); i++)
		if (!strcmp(signals[i].name, name))
			return signals[i].num;
	return 0;
}

SAAS_EXTERN(int) saas_execution_signal(saas_client *c, const char *id, const char *signal, unsigned int flags)
{
	int rc, num;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "execution")) < 0)
		return rc;
	if (!signal || !(num = signal_number(signal)))
		return saas__inval("signal must be TERM, KILL, INT or HUP");
	if (flags & ~SAAS_SIGNAL_GROUP)
		return saas__inval("unknown flags 0x%x", flags);
	if (!c->ops->execution_signal)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot signal an execution");
	return c->ops->execution_signal(c, id, num, flags);
}

SAAS_EXTERN(int) saas_execution_cancel(saas_client *c, const char *id, unsigned int flags)
{
	int rc;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "execution")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!c->ops->execution_cancel)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot cancel an execution");
	return c->ops->execution_cancel(c, id);
}

SAAS_EXTERN(int) saas_execution_list_running(saas_execution_list **out, saas_client *c, const char *sandbox_id,
                                             unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(sandbox_id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!c->ops->execution_list_running)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot list executions");
	return c->ops->execution_list_running(c, sandbox_id, out);
}

SAAS_EXTERN(int) saas_execution_list_get(saas_execution_list **out, saas_client *c, const char *sandbox_id,
                                         const char *cursor, unsigned int limit, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(sandbox_id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (limit > SAAS_EXECUTION_LIST_MAX)
		return saas__inval("list limit %u is over %u", limit, SAAS_EXECUTION_LIST_MAX);
	/* The shape is checked where it is parsed (the engine, or the server behind a remote client). */
	if (cursor && (!*cursor || strlen(cursor) > 128))
		return saas__inval("invalid list cursor");
	if (!c->ops->execution_list)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot list executions");
	return c->ops->execution_list(c, sandbox_id, cursor, limit ? limit : SAAS_EXECUTION_LIST_DEFAULT, out);
}

SAAS_EXTERN(int) saas_sandbox_metrics_get(saas_metric_list **out, saas_client *c, const char *sandbox_id,
                                          int64_t start_ms, int64_t end_ms, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(sandbox_id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (start_ms < 0 || end_ms < 0)
		return saas__inval("a metrics window's times may not be negative");
	if (end_ms && start_ms > end_ms)
		return saas__inval("the metrics window starts (%lld) after it ends (%lld)", (long long)start_ms,
		                   (long long)end_ms);
	if (!c->ops->sandbox_metrics)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot read sandbox metrics");
	return c->ops->sandbox_metrics(c, sandbox_id, start_ms, end_ms, out);
}

SAAS_EXTERN(int) saas_execution_get(saas_execution **out, saas_client *c, const char *id)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "execution")) < 0)
		return rc;
	return c->ops->execution_get(c, id, out);
}

/* Checks a write's arguments and reads its options into `o` (which holds the defaults). */
static int check_write(saas_client *c, const char *id, const char *path, int64_t size,
                       saas_file_write_options *o, const saas_file_write_options *options)
{
	static const size_t sizes[] = { 0, sizeof(saas_file_write_options) };
	int rc;

	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(path, true)) < 0)
		return rc;
	if ((rc = saas__options_read(o, options, sizes, SAAS_FILE_WRITE_OPTIONS_VERSION, "file write")) < 0)
		return rc;
	if (o->mode > 07777)
		return saas__inval("mode 0%o is not a permission mode", o->mode);
	if (size > SAAS_FILE_MAX)
		return saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0, "file is over the %lld byte limit",
		                   (long long)SAAS_FILE_MAX);
	return SAAS_OK;
}

struct mem_reader {
	const unsigned char *data;
	size_t left;
};

static long read_mem(void *ud, void *buf, size_t size)
{
	struct mem_reader *r = ud;
	size_t n = size < r->left ? size : r->left;

	if (n > LONG_MAX)
		n = LONG_MAX;
	if (n == 0)
		return 0;
	memcpy(buf, r->data, n);
	r->data += n;
	r->left -= n;
	return (long)n;
}

SAAS_EXTERN(int) saas_file_write(saas_client *c, const char *id, const char *path, const void *data, size_t len,
                                 const saas_file_write_options *options)
{
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	struct mem_reader r = { data, len };
	int rc;

	saas__error_clear();
	if ((rc = check_write(c, id, path, (int64_t)len, &o, options)) < 0)
		return rc;
	if (len && !data)
		return saas__inval("data is NULL");
	return c->ops->file_write(c, id, path, read_mem, &r, (int64_t)len, o.mode);
}

SAAS_EXTERN(int) saas_file_write_stream(saas_client *c, const char *id, const char *path, saas_read_fn reader,
                                        void *userdata, int64_t size, const saas_file_write_options *options)
{
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	int rc;

	saas__error_clear();
	if ((rc = check_write(c, id, path, size, &o, options)) < 0)
		return rc;
	if (!reader)
		return saas__inval("reader is NULL");
	if (size < -1)
		return saas__inval("size must be -1 (unknown) or a byte count");
	return c->ops->file_write(c, id, path, reader, userdata, size, o.mode);
}

struct mem_writer {
	saas__buf buf;
	int64_t max;
};

static int write_mem(void *ud, const void *data, size_t size)
{
	struct mem_writer *w = ud;

	if ((int64_t)(w->buf.len + size) > w->max)
		return 1;
	return saas__buf_put(&w->buf, data, size) < 0;
}

static int check_read(saas_client *c, const char *id, const char *path)
{
	int rc;

	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(path, true)) < 0)
		return rc;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_file_read(void **data, size_t *len, saas_client *c, const char *id, const char *path,
                                int64_t max)
{
	struct mem_writer w = { SAAS__BUF_INIT, 0 };
	int64_t size = 0;
	int rc;

	saas__error_clear();
	if (!data || !len)
		return saas__inval("data and len must not be NULL");
	*data = NULL;
	*len = 0;
	if ((rc = check_read(c, id, path)) < 0)
		return rc;
	if (max < 0 || max > SAAS_FILE_MAX)
		return saas__inval("max must be between 0 and %lld", (long long)SAAS_FILE_MAX);
	w.max = max ? max : SAAS_FILE_MAX;
	if ((rc = c->ops->file_read(c, id, path, w.max, write_mem, &w, &size)) < 0) {
		saas__buf_free(&w.buf);
		return rc;
	}
	if (!(*data = saas__buf_detach(&w.buf, len)))
		return saas__oom();
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_file_read_stream(int64_t *size, saas_client *c, const char *id, const char *path,
                                       saas_write_fn writer, void *userdata)
{
	int64_t ignored;
	int rc;

	saas__error_clear();
	if ((rc = check_read(c, id, path)) < 0)
		return rc;
	if (!writer)
		return saas__inval("writer is NULL");
	return c->ops->file_read(c, id, path, SAAS_FILE_MAX, writer, userdata, size ? size : &ignored);
}

SAAS_EXTERN(int) saas_file_list_get(saas_file_list **out, saas_client *c, const char *id, const char *path,
                                    unsigned int max_depth, unsigned int max_entries, unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(path, false)) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (max_depth > SAAS_LIST_DEPTH_MAX)
		return saas__inval("depth %u is over %d", max_depth, SAAS_LIST_DEPTH_MAX);
	if (max_entries > SAAS_LIST_ENTRIES_MAX)
		return saas__inval("max_entries %u is over %d", max_entries, SAAS_LIST_ENTRIES_MAX);
	return c->ops->file_list(c, id, path, max_depth ? max_depth : SAAS_LIST_DEPTH_DEFAULT,
	                         max_entries ? max_entries : SAAS_LIST_ENTRIES_DEFAULT, out);
}

/*
 * `path` made absolute as the core makes it (relative: under the
 * workspace), with runs of '/' collapsed and no trailing '/', into out
 * (SAAS_PATH_MAX + sizeof(SAAS_WORKSPACE) bytes, which saas__check_path's bound
 * leaves room for): what the guest will name, for the checks below.
 */
static void path_canon(char *out, const char *path)
{
	size_t n = 0;

	if (path[0] != '/')
		n = (size_t)snprintf(out, sizeof(SAAS_WORKSPACE) + 1, "%s/", SAAS_WORKSPACE);
	for (const char *p = path; *p; p++)
		if (*p != '/' || !n || out[n - 1] != '/')
			out[n++] = *p;
	while (n > 1 && out[n - 1] == '/')
		n--;
	out[n] = '\0';
}

static bool path_is_root(const char *path)
{
	return path[0] == '/' && !path[strspn(path, "/")];
}

SAAS_EXTERN(int) saas_file_mkdir(int *created, saas_client *c, const char *id, const char *path,
                                 unsigned int flags)
{
	int made = 0, rc;

	saas__error_clear();
	if (created)
		*created = 0;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(path, true)) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!c->ops->file_mkdir)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot make directories");
	if ((rc = c->ops->file_mkdir(c, id, path, &made)) == SAAS_OK && created)
		*created = made;
	return rc;
}

SAAS_EXTERN(int) saas_file_remove(saas_client *c, const char *id, const char *path, unsigned int flags)
{
	int rc;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(path, true)) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (path_is_root(path))
		return saas__inval("removing / is refused: name what to remove under it");
	if (!c->ops->file_remove)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot remove files");
	return c->ops->file_remove(c, id, path);
}

SAAS_EXTERN(int) saas_file_rename(saas_client *c, const char *id, const char *from, const char *to,
                                  unsigned int flags)
{
	char *a = NULL, *b = NULL;
	size_t alen;
	int rc;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0 || (rc = saas__check_path(from, true)) < 0 ||
	    (rc = saas__check_path(to, true)) < 0)
		return rc;
	if (flags & ~SAAS_FILE_RENAME_REPLACE)
		return saas__inval("unknown flags 0x%x", flags & ~SAAS_FILE_RENAME_REPLACE);
	if (path_is_root(from) || path_is_root(to))
		return saas__inval("/ cannot be renamed, nor be renamed over");
	if (!(a = malloc(2 * (SAAS_PATH_MAX + sizeof(SAAS_WORKSPACE)))))
		return saas__oom();
	b = a + SAAS_PATH_MAX + sizeof(SAAS_WORKSPACE);
	path_canon(a, from);
	path_canon(b, to);
	alen = strlen(a);
	/* The guest would refuse it too (EINVAL), but after making the destination's parents inside the source. */
	if (strncmp(a, b, alen) == 0 && b[alen] == '/') {
		rc = saas__inval("cannot move %s into itself (%s)", a, b);
		goto out;
	}
	if (!c->ops->file_rename) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot rename files");
		goto out;
	}
	rc = c->ops->file_rename(c, id, from, to, flags);
out:
	free(a);
	return rc;
}

SAAS_EXTERN(int) saas_port_expose(char **url, saas_client *c, const char *id, unsigned int port,
                                  unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!url)
		return saas__inval("url is NULL");
	*url = NULL;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (port == 0 || port > 65535)
		return saas__inval("port must be between 1 and 65535");
	if (port == 22)
		return saas__inval("port 22 is the sandbox's control channel and cannot be exposed");
	return c->ops->port_expose(c, id, port, url);
}

SAAS_EXTERN(int) saas_port_unexpose(saas_client *c, const char *id, unsigned int port)
{
	int rc;

	saas__error_clear();
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (port == 0 || port > 65535)
		return saas__inval("port must be between 1 and 65535");
	return c->ops->port_unexpose(c, id, port);
}

SAAS_EXTERN(int) saas_port_connect(int *fd, saas_client *c, const char *id, unsigned int port)
{
	int rc;

	saas__error_clear();
	if (!fd)
		return saas__inval("fd is NULL");
	*fd = -1;
	CHECK_CLIENT(c);
	if ((rc = check_id(id, "sandbox")) < 0)
		return rc;
	if (port == 0 || port > 65535)
		return saas__inval("port must be between 1 and 65535");
	if (!c->ops->port_connect)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot open tunnels");
	return c->ops->port_connect(c, id, port, fd);
}
