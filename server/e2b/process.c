/*
 * Commands through E2B's daemon protocol: process.Process's Start,
 * Connect, List, SendSignal, SendInput, CloseStdin and Update, as libsaas
 * executions, or (a Start with `pty`) as terminals (pty.c).
 *
 * A command is a background execution followed by the response's reader
 * (as /v1's event streams are): the start event at once, output as data
 * events, envd's end event and the end-stream frame. A client that goes
 * away detaches from it, as envd's do, and it runs on until it ends or its
 * timeout. E2B numbers processes; the pid table maps its pids to
 * executions, in memory, bounded (the oldest are forgotten first).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

/* E2B processes remembered at once (pids to executions); past it the oldest is forgotten. */
#define PIDS_MAX 4096
/* The working directory E2B's home stands for (docs/e2b.md). */
#define HOME "/workspace"
/* An ended PTY can still be connected to this long (envd keeps an ended process's end 30 s). */
#define PTY_KEEP_MS 30000

/* ---- pids ---- */

struct proc {
	uint32_t pid;                     /* 0: a free slot */
	char sandbox[SAAS_ID_MAX + 1];
	char exe[SAAS_ID_MAX + 1];
	json_t *config;                   /* ProcessConfig as started, for List */
	struct aas_e2b_pty *pty;          /* a terminal's (exe is then ""), a reference */
};

static pthread_mutex_t pids_mu = PTHREAD_MUTEX_INITIALIZER;
static struct proc pids[PIDS_MAX];
static size_t pids_next;
static size_t pids_ptys; /* slots holding a terminal: with none, a new pid looks for none to drop */
static uint32_t pid_counter = 1000;

/* Forget slot p. pids_mu held. */
static void pid_forget(struct proc *p)
{
	json_decref(p->config);
	p->config = NULL;
	if (p->pty) {
		/* A terminal nobody can reach any more must not run on to its deadline. */
		aas_e2b_pty_kill(p->pty);
		aas_e2b_pty_unref(p->pty);
		p->pty = NULL;
		pids_ptys--;
	}
	p->pid = 0;
}

/* A command's (exe) or a terminal's (pty, referenced by the table) new pid. */
static uint32_t pid_add(const char *sandbox, const char *exe, json_t *config, struct aas_e2b_pty *pty)
{
	int64_t now = aas_now_ms();
	struct proc *p;
	uint32_t pid;

	pthread_mutex_lock(&pids_mu);
	/* Terminals past their keeping go now, not when their slot comes round: each holds its output's log. */
	for (size_t i = 0; i < PIDS_MAX && pids_ptys; i++)
		if (pids[i].pty && aas_e2b_pty_gone(pids[i].pty, now, PTY_KEEP_MS))
			pid_forget(&pids[i]);
	p = &pids[pids_next];
	pids_next = (pids_next + 1) % PIDS_MAX;
	pid_forget(p);
	if (pty) {
		aas_e2b_pty_ref(pty);
		pids_ptys++;
	}
	p->pty = pty;
	/* Never 0 (proto3's "unset"), and not reused while the counter does not wrap. */
	if (++pid_counter == 0)
		pid_counter = 1000;
	pid = p->pid = pid_counter;
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
	snprintf(p->exe, sizeof(p->exe), "%s", exe);
	p->config = config ? json_deep_copy(config) : NULL;
	pthread_mutex_unlock(&pids_mu);
	return pid;
}

/*
 * The process pid of sandbox: true with exe filled (a command's) or *pty
 * (a terminal's, a reference for the caller; exe is then ""), and a copy of
 * its config if asked. A terminal ended more than PTY_KEEP_MS ago is gone.
 */
static bool pid_find(const char *sandbox, uint32_t pid, char exe[SAAS_ID_MAX + 1], json_t **config,
                     struct aas_e2b_pty **pty)
{
	int64_t now = aas_now_ms();
	bool found = false;

	*pty = NULL;
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX && !found; i++) {
		if (pids[i].pid == pid && pid && strcmp(pids[i].sandbox, sandbox) == 0) {
			if (pids[i].pty && aas_e2b_pty_gone(pids[i].pty, now, PTY_KEEP_MS)) {
				pid_forget(&pids[i]);
				break;
			}
			snprintf(exe, SAAS_ID_MAX + 1, "%s", pids[i].exe);
			if (config)
				*config = pids[i].config ? json_deep_copy(pids[i].config) : NULL;
			if ((*pty = pids[i].pty))
				aas_e2b_pty_ref(*pty);
			found = true;
		}
	}
	pthread_mutex_unlock(&pids_mu);
	return found;
}

/* The running terminals of sandbox: their pids and configs appended to procs (List's). */
static void pid_ptys(const char *sandbox, json_t *procs)
{
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX; i++) {
		if (pids[i].pid && pids[i].pty && strcmp(pids[i].sandbox, sandbox) == 0 &&
		    aas_e2b_pty_running(pids[i].pty))
			json_array_append_new(procs, json_pack("{s:O,s:I}", "config", pids[i].config, "pid",
			                                       (json_int_t)pids[i].pid));
	}
	pthread_mutex_unlock(&pids_mu);
}

/* The pid of an execution, or 0; its config copied if asked. */
static uint32_t pid_of(const char *sandbox, const char *exe, json_t **config)
{
	uint32_t pid = 0;

	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX && !pid; i++) {
		if (pids[i].pid && strcmp(pids[i].exe, exe) == 0 && strcmp(pids[i].sandbox, sandbox) == 0) {
			pid = pids[i].pid;
			if (config)
				*config = pids[i].config ? json_deep_copy(pids[i].config) : NULL;
		}
	}
	pthread_mutex_unlock(&pids_mu);
	return pid;
}

void aas_e2b_process_shutdown(void)
{
	/* Streams are over by now (the server stopped serving): hang up on the terminals, then forget all. */
	aas_e2b_pty_shutdown();
	pthread_mutex_lock(&pids_mu);
	for (size_t i = 0; i < PIDS_MAX; i++) {
		pid_forget(&pids[i]);
		memset(&pids[i], 0, sizeof(pids[i]));
	}
	pthread_mutex_unlock(&pids_mu);
}

/* process.pid of a message ({"process":{"pid":N}}): 0 when absent or not a positive uint32. */
static uint32_t selector_pid(json_t *msg)
{
	json_t *p = json_object_get(json_object_get(msg, "process"), "pid");
	json_int_t v = json_is_integer(p) ? json_integer_value(p) : 0;

	/* The JSON codec may send a uint32 as a string too. */
	if (json_is_string(p)) {
		char *end;
		unsigned long long n = strtoull(json_string_value(p), &end, 10);
		v = *end || n > UINT32_MAX ? 0 : (json_int_t)n;
	}
	return v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
}

/* 'text' as one shell word. NULL when out of memory. */
static char *quote(char *acc, const char *text)
{
	size_t have = acc ? strlen(acc) : 0, n = strlen(text), extra = 3;
	char *p, *q;

	for (size_t i = 0; i < n; i++)
		extra += text[i] == '\'' ? 3 : 0;
	if (!(p = realloc(acc, have + n + extra + 2)))
		return NULL;
	q = p + have;
	if (have)
		*q++ = ' ';
	*q++ = '\'';
	for (size_t i = 0; i < n; i++) {
		if (text[i] == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else {
			*q++ = text[i];
		}
	}
	*q++ = '\'';
	*q = '\0';
	return p;
}

/*
 * The command line of a ProcessConfig: `bash -l -c X` (what commands.run
 * always sends) is X, since libsaas runs a command by the user's login shell
 * already; anything else is its words quoted. NULL after setting why.
 */
static char *command_of(json_t *config, char *why, size_t whysize)
{
	json_t *cmd = json_object_get(config, "cmd"), *args = json_object_get(config, "args"), *a;
	char *line = NULL;
	size_t i;

	if (!json_is_string(cmd) || !*json_string_value(cmd)) {
		snprintf(why, whysize, "process.cmd must be a non-empty string");
		return NULL;
	}
	if (args && !json_is_null(args) && !json_is_array(args)) {
		snprintf(why, whysize, "process.args must be an array of strings");
		return NULL;
	}
	json_array_foreach(args, i, a) {
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
			snprintf(why, whysize, "process.args must be strings without NUL");
			return NULL;
		}
	}
	if (strcmp(json_string_value(cmd), "/bin/bash") == 0 && json_array_size(args) == 3 &&
	    strcmp(json_string_value(json_array_get(args, 0)), "-l") == 0 &&
	    strcmp(json_string_value(json_array_get(args, 1)), "-c") == 0) {
		if (!(line = strdup(json_string_value(json_array_get(args, 2)))))
			snprintf(why, whysize, "out of memory");
		return line;
	}
	if (!(line = quote(NULL, json_string_value(cmd)))) {
		snprintf(why, whysize, "out of memory");
		return NULL;
	}
	json_array_foreach(args, i, a) {
		if (!(line = quote(line, json_string_value(a)))) {
			snprintf(why, whysize, "out of memory");
			return NULL;
		}
	}
	return line;
}

/*
 * "K=V" strings of the request's envs, NULL-terminated (NULL: out of memory
 * or a bad one, with why). The sandbox's own (its create's envVars) are the
 * engine's to add: every execution starts with them, less the names given
 * here (saas_create_options.envs).
 */
static char **env_of(json_t *config, char *why, size_t whysize)
{
	json_t *envs = json_object_get(config, "envs"), *v;
	const char *k;
	char **list = NULL;
	size_t n = 0;

	if (envs && !json_is_null(envs) && !json_is_object(envs)) {
		snprintf(why, whysize, "process.envs must be an object of strings");
		return NULL;
	}
	if (json_object_size(envs) > SAAS_ENVS_MAX) {
		snprintf(why, whysize, "at most %d environment variables", SAAS_ENVS_MAX);
		return NULL;
	}
	if (!(list = calloc(json_object_size(envs) + 1, sizeof(*list)))) {
		snprintf(why, whysize, "out of memory");
		return NULL;
	}
	json_object_foreach(envs, k, v) {
		size_t len;
		if (!json_is_string(v) || !*k || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(why, whysize, "process.envs: names must be non-empty without '=', values strings without NUL");
			goto fail;
		}
		len = strlen(k) + json_string_length(v) + 2;
		if (!(list[n] = malloc(len))) {
			snprintf(why, whysize, "out of memory");
			goto fail;
		}
		snprintf(list[n++], len, "%s=%s", k, json_string_value(v));
	}
	return list;
fail:
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
	return NULL;
}

static void env_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

/* The working directory: E2B's home (and "~") is /workspace; a relative path is under it. */
static char *cwd_of(json_t *config)
{
	json_t *c = json_object_get(config, "cwd");
	const char *s = json_is_string(c) ? json_string_value(c) : "";
	size_t len;
	char *out;

	if (!*s)
		return NULL;
	if (*s == '/')
		return strdup(s);
	if (s[0] == '~' && (s[1] == '\0' || s[1] == '/'))
		s += s[1] ? 2 : 1;
	len = strlen(HOME) + strlen(s) + 2;
	if ((out = malloc(len)))
		snprintf(out, len, "%s%s%s", HOME, *s ? "/" : "", s);
	return out;
}

/* ---- the calls ---- */

/* A PTY's size ({"size":{"cols":C,"rows":R}}): false with why when it is not one of 1 to SAAS_PTY_SIZE_MAX each way. */
static bool pty_size(json_t *pty, unsigned int *cols, unsigned int *rows, char *why, size_t whysize)
{
	json_t *size = json_object_get(pty, "size");
	json_t *c = json_object_get(size, "cols"), *r = json_object_get(size, "rows");

	if (!json_is_object(pty) || !json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > SAAS_PTY_SIZE_MAX || json_integer_value(r) < 1 ||
	    json_integer_value(r) > SAAS_PTY_SIZE_MAX) {
		snprintf(why, whysize, "pty.size must have cols and rows from 1 to %d", SAAS_PTY_SIZE_MAX);
		return false;
	}
	*cols = (unsigned int)json_integer_value(c);
	*rows = (unsigned int)json_integer_value(r);
	return true;
}

/*
 * What a terminal may be asked: libsaas's terminal is the sandbox user's
 * login shell, so only the command pty.create sends (`/bin/bash -i -l`) is
 * taken. Its cwd and envs are a command's (cwd_of, env_of), but for TERM,
 * which is the terminal's type (*term, borrowed from config). *cwd and *env
 * are the caller's (free, env_free). false with why.
 */
static bool pty_config(json_t *config, const char **term, char **cwd, char ***env, char *why, size_t whysize)
{
	json_t *args = json_object_get(config, "args");
	const char *cmd = json_string_value(json_object_get(config, "cmd"));
	size_t n = 0;

	*term = NULL;
	*cwd = NULL;
	*env = NULL;
	if (!cmd || strcmp(cmd, "/bin/bash") != 0 || json_array_size(args) != 2 ||
	    !json_is_string(json_array_get(args, 0)) || !json_is_string(json_array_get(args, 1)) ||
	    strcmp(json_string_value(json_array_get(args, 0)), "-i") != 0 ||
	    strcmp(json_string_value(json_array_get(args, 1)), "-l") != 0) {
		snprintf(why, whysize, "a PTY runs the sandbox user's login shell: process must be /bin/bash -i -l, as "
		         "pty.create sends");
		return false;
	}
	if (!(*env = env_of(config, why, whysize)))
		return false;
	/* TERM goes as the terminal's type (checked as such), not as a variable beside it. */
	for (size_t i = 0; (*env)[i]; i++) {
		if (strncmp((*env)[i], "TERM=", 5) == 0) {
			*term = json_string_value(json_object_get(json_object_get(config, "envs"), "TERM"));
			free((*env)[i]);
		} else {
			(*env)[n++] = (*env)[i];
		}
	}
	(*env)[n] = NULL;
	if (json_is_string(json_object_get(config, "cwd")) && !(*cwd = cwd_of(config)) &&
	    *json_string_value(json_object_get(config, "cwd"))) {
		snprintf(why, whysize, "out of memory");
		env_free(*env);
		*env = NULL;
		return false;
	}
	return true;
}

/* process.Process/Start with `pty`: a terminal, followed by the answer as a command is. */
static void start_pty(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *config,
                      json_t *pty_msg)
{
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_exec_cursor cur = { 0, 0 };
	struct aas_e2b_pty *pty = NULL;
	uint64_t timeout_ms = aas_e2b_header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	char why[512], *cwd = NULL, **env = NULL;
	uint32_t pid;
	int rc;

	if (!pty_size(pty_msg, &o.cols, &o.rows, why, sizeof(why)) ||
	    !pty_config(config, &o.term, &cwd, &env, why, sizeof(why))) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		goto out;
	}
	o.cwd = cwd;
	o.env = (const char *const *)env;
	if (!aas_e2b_slot_take(t->account, out))
		goto out;
	/* The call's deadline ends the terminal (envd's does); none is a command's longest, not for ever. */
	if (!timeout_ms || timeout_ms > (uint64_t)SAAS_EXEC_TIMEOUT_MAX * 1000)
		timeout_ms = (uint64_t)SAAS_EXEC_TIMEOUT_MAX * 1000;
	if ((rc = aas_e2b_pty_open(&pty, t->client, t->id, t->account, &o, aas_now_ms() + (int64_t)timeout_ms, why,
	                           sizeof(why))) < 0) {
		aas_e2b_slot_release(t->account);
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", why);
		goto out;
	}
	pid = pid_add(t->id, "", config, pty);
	aas_e2b_reply_stream(r, out, t->client, t->account,
	                     &(struct aas_e2b_follow){ .pty = pty, .pid = pid, .cur = cur });
	t->client = NULL;
out:
	free(cwd);
	env_free(env);
}

/* process.Process/Start: a command, as a background execution followed by the answer. */
static void rpc_start(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_cursor cur = { 0, 0 };
	saas_execution *x = NULL;
	json_t *config = json_object_get(msg, "process"), *pty = json_object_get(msg, "pty");
	char why[512], *command = NULL, *cwd = NULL, **env = NULL;
	uint64_t timeout_ms = aas_e2b_header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	unsigned int flags = SAAS_EXEC_BACKGROUND;
	bool taken = false;
	uint32_t pid;
	int rc;

	if (!json_is_object(config)) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process (a ProcessConfig) is required");
		goto out;
	}
	if (pty && !json_is_null(pty)) {
		start_pty(r, out, t, config, pty);
		goto out;
	}
	if (!(command = command_of(config, why, sizeof(why))) || !(env = env_of(config, why, sizeof(why)))) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		goto out;
	}
	if (!aas_e2b_slot_take(t->account, out))
		goto out;
	taken = true;
	if (json_is_true(json_object_get(msg, "stdin")))
		flags |= SAAS_EXEC_STDIN_OPEN;
	cwd = cwd_of(config);
	o.cwd = cwd;
	o.env = (const char *const *)env;
	/* The call's deadline is the command's (envd kills it then); none is libsaas's longest. */
	o.timeout_s = timeout_ms ? (int64_t)((timeout_ms + 999) / 1000) : SAAS_EXEC_TIMEOUT_MAX;
	if (o.timeout_s > SAAS_EXEC_TIMEOUT_MAX)
		o.timeout_s = SAAS_EXEC_TIMEOUT_MAX;
	if ((rc = saas_exec(&x, t->client, t->id, command, &o, flags)) < 0) {
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: start"));
		goto out;
	}
	pid = pid_add(t->id, x->id, config, NULL);
	aas_e2b_reply_stream(r, out, t->client, t->account,
	                     &(struct aas_e2b_follow){ .exe = x->id, .pid = pid, .cur = cur });
	t->client = NULL;
	taken = false;
out:
	if (taken)
		aas_e2b_slot_release(t->account);
	saas_execution_free(x);
	env_free(env);
	free(command);
	free(cwd);
}

/* process.Process/Connect: follow a command from now on (an ended one: its end at once). */
static void rpc_connect(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	uint32_t pid = selector_pid(msg);
	char exe[SAAS_ID_MAX + 1];
	saas_execution *x = NULL;
	saas_exec_cursor cur = { 0, 0 };
	struct aas_e2b_pty *pty = NULL;
	int rc;

	if (!pid || !pid_find(t->id, pid, exe, NULL, &pty)) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found", pid);
		return;
	}
	if (pty) {
		/* A subscriber sees what comes after it subscribed; an ended terminal's end comes at once. */
		cur.stdout_offset = aas_e2b_pty_offset(pty);
		if (!aas_e2b_slot_take(t->account, out)) {
			aas_e2b_pty_unref(pty);
			return;
		}
		aas_e2b_reply_stream(r, out, t->client, t->account,
		                     &(struct aas_e2b_follow){ .pty = pty, .pid = pid, .cur = cur });
		t->client = NULL;
		return;
	}
	if ((rc = saas_execution_get(&x, t->client, exe)) < 0) {
		aas_e2b_reply_stream_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: connect"));
		return;
	}
	/* A subscriber sees what comes after it subscribed (envd's fan-out). */
	cur.stdout_offset = x->stdout_total;
	cur.stderr_offset = x->stderr_total;
	saas_execution_free(x);
	if (!aas_e2b_slot_take(t->account, out))
		return;
	aas_e2b_reply_stream(r, out, t->client, t->account,
	                     &(struct aas_e2b_follow){ .exe = exe, .pid = pid, .cur = cur });
	t->client = NULL;
}

/* process.Process/List: the sandbox's running commands. */
static void rpc_list(struct aas_reply *out, struct aas_e2b_target *t)
{
	saas_execution_list *l = NULL;
	json_t *procs = json_array();
	int rc;

	if ((rc = saas_execution_list_running(&l, t->client, t->id, 0)) < 0 || !procs) {
		json_decref(procs);
		aas_e2b_reply_unary_error(out, rc < 0 ? aas_connect_code_from_saas(rc) : AAS_CONNECT_RESOURCE_EXHAUSTED, "%s",
		                  rc < 0 ? aas_tenant_message(rc, "e2b: list") : "out of memory");
		return;
	}
	for (size_t i = 0; i < l->count; i++) {
		const saas_execution *x = l->items[i];
		json_t *config = NULL;
		uint32_t pid;

		/* A directory watcher runs as a command, but is none of the tenant's: envd lists no watches. */
		if (aas_e2b_watch_has(x->id))
			continue;
		pid = pid_of(t->id, x->id, &config);
		/* Started through /v1: E2B's shape of it, and a pid from now on. */
		if (!config)
			config = json_pack("{s:s,s:[s,s,s],s:{}}", "cmd", "/bin/bash", "args", "-l", "-c",
			                   x->command ? x->command : "", "envs");
		if (!pid)
			pid = pid_add(t->id, x->id, config, NULL);
		json_array_append_new(procs, json_pack("{s:o,s:I}", "config", config ? config : json_object(), "pid",
		                                       (json_int_t)pid));
	}
	saas_execution_list_free(l);
	pid_ptys(t->id, procs);
	aas_e2b_reply_unary(out, json_pack("{s:o}", "processes", procs));
}

/*
 * The process a unary call's selector names: an execution (exe) or a
 * terminal (*pty, the caller's reference). false after a not_found reply.
 */
static bool selected(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg, char exe[SAAS_ID_MAX + 1],
                     struct aas_e2b_pty **pty)
{
	uint32_t pid = selector_pid(msg);

	if (!pid || !pid_find(t->id, pid, exe, NULL, pty)) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found", pid);
		return false;
	}
	return true;
}

/* An ended or unknown execution is E2B's "not found" (the SDK's kill() then says false). */
static void reply_exec_error(struct aas_reply *out, int rc, uint32_t pid, const char *where)
{
	if (rc == SAAS_ENOTFOUND || rc == SAAS_ESTATE)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "process with pid %" PRIu32 " not found (it ended)", pid);
	else
		aas_e2b_reply_unary_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, where));
}

static void rpc_signal(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	json_t *sig = json_object_get(msg, "signal");
	const char *name = NULL;
	char exe[SAAS_ID_MAX + 1];
	struct aas_e2b_pty *pty = NULL;
	int rc;

	if (json_is_string(sig))
		name = strcmp(json_string_value(sig), "SIGNAL_SIGKILL") == 0   ? "KILL"
		       : strcmp(json_string_value(sig), "SIGNAL_SIGTERM") == 0 ? "TERM"
		                                                               : NULL;
	else if (json_is_integer(sig))
		name = json_integer_value(sig) == 9 ? "KILL" : json_integer_value(sig) == 15 ? "TERM" : NULL;
	if (!name) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		return;
	if (pty) {
		/* A terminal is hung up on, for either signal: its shell and what it started get SIGHUP. */
		if (aas_e2b_pty_kill(pty) < 0)
			reply_exec_error(out, SAAS_ESTATE, selector_pid(msg), "e2b: signal");
		else
			aas_e2b_reply_unary(out, NULL);
		aas_e2b_pty_unref(pty);
		return;
	}
	/* The whole group, as envd kills the process it started with what it started. */
	if ((rc = saas_execution_signal(t->client, exe, name, SAAS_SIGNAL_GROUP)) < 0) {
		reply_exec_error(out, rc, selector_pid(msg), "e2b: signal");
		return;
	}
	aas_e2b_reply_unary(out, NULL);
}

/* SendInput (stdin of a command, or keystrokes of a terminal) and CloseStdin (commands only, as envd's). */
static void rpc_input(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg, bool close)
{
	json_t *input = json_object_get(msg, "input"), *data = json_object_get(input, "stdin");
	json_t *keys = json_object_get(input, "pty");
	char exe[SAAS_ID_MAX + 1];
	struct aas_e2b_pty *pty = NULL;
	void *bytes = NULL;
	size_t len = 0;
	int rc;

	if (keys)
		data = keys;
	if (!close && (!json_is_string(data) ||
	               saas_base64_decode(&bytes, &len, json_string_value(data), json_string_length(data)) < 0)) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "input.stdin or input.pty must be base64 bytes");
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		goto out;
	if (pty && close) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "a PTY has no stdin to close: send Ctrl+D "
		                          "(0x04) instead");
	} else if (pty && !keys) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is a PTY: send input.pty, "
		                          "not input.stdin", selector_pid(msg));
	} else if (!pty && keys) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is not a PTY: send "
		                          "input.stdin, not input.pty", selector_pid(msg));
	} else if (pty) {
		if ((rc = aas_e2b_pty_input(pty, bytes, len)) == SAAS_ETIMEOUT)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_UNAVAILABLE, "the terminal's shell took no input for a while; "
			                          "part of it may have been taken");
		else if (rc < 0)
			reply_exec_error(out, rc, selector_pid(msg), "e2b: pty input");
		else
			aas_e2b_reply_unary(out, NULL);
	} else if ((rc = saas_execution_stdin(t->client, exe, bytes, len, close ? SAAS_STDIN_CLOSE : 0)) < 0) {
		reply_exec_error(out, rc, selector_pid(msg), "e2b: stdin");
	} else {
		aas_e2b_reply_unary(out, NULL);
	}
out:
	aas_e2b_pty_unref(pty);
	saas_free(bytes);
}

/* process.Process/Update: a terminal's new size (the shell gets SIGWINCH). */
static void rpc_update(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	json_t *pty_msg = json_object_get(msg, "pty");
	struct aas_e2b_pty *pty = NULL;
	char exe[SAAS_ID_MAX + 1], why[128];
	unsigned int cols, rows;
	int rc;

	if (!pty_msg || json_is_null(pty_msg)) {
		aas_e2b_reply_unary(out, NULL); /* nothing to change */
		return;
	}
	if (!pty_size(pty_msg, &cols, &rows, why, sizeof(why))) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		return;
	}
	if (!selected(out, t, msg, exe, &pty))
		return;
	if (!pty)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "process %" PRIu32 " is not a PTY: it has no "
		                          "size", selector_pid(msg));
	else if ((rc = aas_e2b_pty_resize(pty, cols, rows)) < 0)
		reply_exec_error(out, rc, selector_pid(msg), "e2b: pty resize");
	else
		aas_e2b_reply_unary(out, NULL);
	aas_e2b_pty_unref(pty);
}

void aas_e2b_process(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method,
                     json_t *msg)
{
	if (strcmp(method, "Start") == 0)
		rpc_start(r, out, t, msg);
	else if (strcmp(method, "Connect") == 0)
		rpc_connect(r, out, t, msg);
	else if (strcmp(method, "List") == 0)
		rpc_list(out, t);
	else if (strcmp(method, "SendSignal") == 0)
		rpc_signal(out, t, msg);
	else if (strcmp(method, "SendInput") == 0)
		rpc_input(out, t, msg, false);
	else if (strcmp(method, "CloseStdin") == 0)
		rpc_input(out, t, msg, true);
	else if (strcmp(method, "Update") == 0)
		rpc_update(out, t, msg);
	else if (t->streaming)
		aas_e2b_reply_stream_error(out, AAS_CONNECT_UNIMPLEMENTED, "process.Process/%s is not served by this "
		                           "server yet (docs/e2b.md)", method);
	else
		aas_e2b_reply_unary_error(out, AAS_CONNECT_UNIMPLEMENTED, "process.Process/%s is not served by this "
		                          "server yet (docs/e2b.md)", method);
}
