/*
 * Watching a directory through E2B's daemon protocol: filesystem.Filesystem's
 * WatchDir (a server stream of events) and the polling trio the Python SDK
 * uses (CreateWatcher, GetWatcherEvents, RemoveWatcher).
 *
 * Where the events come from: inotify in the guest, as the unprivileged
 * sandbox user, through a watcher the server runs there as an ordinary
 * command (saas_exec, in the background) and follows as it follows any
 * command (stream.c). No new library call, driver slot or guest program is
 * needed, so every driver and the remote provider have watches at once,
 * the engine's bounds on commands (running at once, output, timeout) bound
 * them, and the watcher runs with exactly the rights the tenant has. The
 * watcher is a short Python program (ctypes on libc's inotify): the default
 * image has python3; an image without it answers failed_precondition. A
 * small C watcher in images/guest would serve every image but changes the
 * images' hash (a rebuild of every image); docs/e2b.md says so.
 *
 * Everything the watcher prints is the tenant's to forge (python3 on PATH
 * is theirs), so its output is parsed as hostile: lines of bounded length
 * (AAS_E2B_WATCH_LINE_MAX), a type letter and a name in hex, names that
 * are not UTF-8 skipped, anything else the end of the watch; events bounded
 * per watch (AAS_E2B_WATCH_EVENTS_MAX), watches per sandbox and account.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

/* Watches (streams and polling watchers) at once, per sandbox, per account and in all; more are refused. */
#define WATCH_PER_SANDBOX 8
#define WATCH_PER_ACCOUNT 32
#define WATCH_MAX 1024
/* A polling watcher not polled for this long is removed (its watcher killed) at the next watch call. */
#define WATCH_IDLE_MS (10 * 60 * 1000)
/* Events one GetWatcherEvents returns at most (more wait for the next poll). */
#define WATCH_POLL_MAX 1000
/* How long CreateWatcher waits for the watcher to say it watches. */
#define WATCH_START_MS 30000
/* How long a kill waits for the watcher's end. */
#define WATCH_KILL_WAIT_MS 2000
/* The watcher's output the engine keeps: the most a command may have (docs/e2b.md). */
#define WATCH_OUTPUT SAAS_EXEC_OUTPUT_MAX
#define HOME "/workspace"

/*
 * The watcher: argv[1] the directory, argv[2] "1" for recursive. It says
 * "S" once its watches are set, "E WORD" when it cannot watch, then a line
 * per event: C create (a move into counts), W write, R remove, M rename (a
 * move away), A chmod, as envd's fsnotify maps them; the name is relative
 * to the directory, in hex (names may hold any byte but '/' and NUL). A
 * directory that appears under a recursive watch is watched at once, and
 * what was made in it before its watch was set is reported as created (a
 * `mkdir -p d && echo > d/f` would lose d/f otherwise).
 * Written without a single quote: it travels in one.
 */
static const char watcher[] =
	"import ctypes,os,struct,sys\n"
	"def say(b):\n"
	" sys.stdout.buffer.write(b+b\"\\n\");sys.stdout.buffer.flush()\n"
	"root=os.fsencode(sys.argv[1]);rec=sys.argv[2]==\"1\"\n"
	"if not os.path.exists(root):\n"
	" say(b\"E notfound\");sys.exit(1)\n"
	"if not os.path.isdir(root):\n"
	" say(b\"E notdir\");sys.exit(1)\n"
	"c=ctypes.CDLL(None,use_errno=True)\n"
	"fd=c.inotify_init1(0)\n"
	"M=0x2|0x4|0x40|0x80|0x100|0x200|0x400|0x800|0x2000000\n"
	"W={}\n"
	"def add(p):\n"
	" w=c.inotify_add_watch(fd,p,M)\n"
	" if w>=0:W[w]=p\n"
	" return w\n"
	"def walk(p,new):\n"
	" e=[]\n"
	" for d,ds,fs in os.walk(p):\n"
	"  for x in ds:add(os.path.join(d,x))\n"
	"  if new:e+=[b\"C \"+os.path.relpath(os.path.join(d,x),root).hex().encode() for x in ds+fs]\n"
	" return e\n"
	"if fd<0 or add(root)<0:\n"
	" say(b\"E inotify\");sys.exit(1)\n"
	"if rec:walk(root,0)\n"
	"say(b\"S\")\n"
	"T=((0x100,b\"C\"),(0x80,b\"C\"),(0x2,b\"W\"),(0x200,b\"R\"),(0x400,b\"R\"),(0x40,b\"M\"),(0x800,b\"M\"),(0x4,b\"A\"))\n"
	"while True:\n"
	" b=os.read(fd,65536);i=0;o=[]\n"
	" while i+16<=len(b):\n"
	"  w,m,k,n=struct.unpack_from(\"iIII\",b,i)\n"
	"  nm=b[i+16:i+16+n].rstrip(b\"\\0\");i+=16+n\n"
	"  if m&0x8000:W.pop(w,None);continue\n"
	"  p=W.get(w)\n"
	"  if p is None:continue\n"
	"  f=os.path.join(p,nm) if nm else p\n"
	"  r=os.path.relpath(f,root)\n"
	"  o+=[t+b\" \"+r.hex().encode() for bit,t in T if m&bit]\n"
	"  if rec and m&0x40000000 and m&0x180:\n"
	"   add(f);o+=walk(f,1)\n"
	" if o:say(b\"\\n\".join(o))\n";

/* ---- the watcher's output (pure: fuzz_e2b) ---- */

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as a JSON string must be. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i - 1 < k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/* One line (NUL-terminated, no '\n'): as aas_e2b_watch_feed. */
static int take_line(char *line, size_t len, aas_e2b_watch_cb cb, void *ud, char *why, size_t whysize)
{
	static const struct {
		char letter;
		const char *type;
	} types[] = { { 'C', "EVENT_TYPE_CREATE" }, { 'W', "EVENT_TYPE_WRITE" }, { 'R', "EVENT_TYPE_REMOVE" },
		      { 'M', "EVENT_TYPE_RENAME" }, { 'A', "EVENT_TYPE_CHMOD" } };
	const char *type = NULL;
	size_t n;

	if (len == 1 && line[0] == 'S')
		return cb(ud, AAS_E2B_WATCH_STARTED, NULL, NULL);
	if (len >= 3 && len <= 2 + 15 && line[0] == 'E' && line[1] == ' ' && strspn(line + 2, "abcdefghijklmnopqrstuvwxyz") ==
	                                                                         len - 2)
		return cb(ud, AAS_E2B_WATCH_FAILED, NULL, line + 2);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && len >= 2 && line[1] == ' '; i++)
		if (line[0] == types[i].letter)
			type = types[i].type;
	if (!type || (len - 2) % 2) {
		snprintf(why, whysize, "a line that is not a watcher's");
		return -1;
	}
	/* The name decoded in place: it is half as long as its hex. */
	n = (len - 2) / 2;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit(line[2 + 2 * i]), lo = hex_digit(line[3 + 2 * i]);
		if (hi < 0 || lo < 0) {
			snprintf(why, whysize, "a name that is not in hex");
			return -1;
		}
		line[i] = (char)(hi << 4 | lo);
	}
	line[n] = '\0';
	if (memchr(line, '\0', n) || !utf8_ok((const unsigned char *)line, n))
		return 0; /* a name E2B's strings cannot carry: skipped */
	return cb(ud, AAS_E2B_WATCH_EVENT, type, line);
}

int aas_e2b_watch_feed(struct aas_e2b_watch_parser *p, const void *data, size_t len, aas_e2b_watch_cb cb, void *ud,
                       char *why, size_t whysize)
{
	const char *d = data;

	for (size_t i = 0; i < len; i++) {
		int rc;
		if (d[i] != '\n') {
			if (p->len >= AAS_E2B_WATCH_LINE_MAX) {
				snprintf(why, whysize, "a line over %d bytes", AAS_E2B_WATCH_LINE_MAX);
				return -1;
			}
			p->line[p->len++] = d[i];
			continue;
		}
		p->line[p->len] = '\0';
		rc = take_line(p->line, p->len, cb, ud, why, whysize);
		p->len = 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the watchers running ---- */

struct watch {
	char exe[SAAS_ID_MAX + 1];          /* "" : a free entry */
	char sandbox[SAAS_ID_MAX + 1];
	char account[SAAS_ID_MAX + 1];
	bool polling;                       /* CreateWatcher's (else a WatchDir stream's) */
	char id[SAAS_ID_MAX + 1];           /* polling: the watcherId */
	saas_exec_cursor cur;               /* polling: the output read so far */
	struct aas_e2b_watch_parser *parser;
	json_t *pending;                    /* polling: events read at the start, for the first poll */
	unsigned long events;
	int64_t used_ms;                    /* polling: the last poll */
	bool busy;                          /* polling: a call is reading it */
};

static pthread_mutex_t watches_mu = PTHREAD_MUTEX_INITIALIZER;
static struct watch watches[WATCH_MAX];
static uint64_t watcher_counter;

/* Free an entry. watches_mu held. */
static void watch_clear(struct watch *w)
{
	free(w->parser);
	json_decref(w->pending);
	memset(w, 0, sizeof(*w));
}

/*
 * Kill a watcher, in its account's name, and wait a little for its end: a
 * process.Process/List right after a stop must not show it (it is off the
 * table already), as envd's watch is gone when its call returns.
 */
static void kill_watcher(saas_client *client, const char *account, const char *exe)
{
	saas_client *own = NULL;
	saas_execution *x = NULL;
	int64_t until = aas_now_ms() + WATCH_KILL_WAIT_MS;

	if (!client && saas_client_open_account(&own, aas_e2b_state.engine, account, 0) == SAAS_OK)
		client = own;
	if (client && saas_execution_signal(client, exe, "KILL", SAAS_SIGNAL_GROUP) == SAAS_OK) {
		while (saas_execution_get(&x, client, exe) == SAAS_OK && x->status == SAAS_EXEC_RUNNING &&
		       aas_now_ms() < until) {
			saas_execution_free(x);
			x = NULL;
			usleep(20000);
		}
	}
	saas_execution_free(x);
	saas_client_free(own);
}

/*
 * Polling watchers not polled for WATCH_IDLE_MS: taken off the table into
 * gone (their exe and account), to be killed outside the lock. watches_mu held.
 */
static size_t sweep_idle(int64_t now, struct watch *gone, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < WATCH_MAX && n < max; i++) {
		struct watch *w = &watches[i];
		if (*w->exe && w->polling && !w->busy && now - w->used_ms >= WATCH_IDLE_MS) {
			gone[n] = *w;
			gone[n].parser = NULL;
			gone[n++].pending = NULL;
			watch_clear(w);
		}
	}
	return n;
}

/*
 * Take an entry for a new watch of sandbox by account: its index, or -1
 * after a resource_exhausted reply (stream or unary as asked).
 */
static int watch_take(struct aas_reply *out, const struct aas_e2b_target *t, bool stream)
{
	struct watch gone[8];
	unsigned int in_sandbox = 0, in_account = 0;
	int free_at = -1;
	size_t ngone;

	pthread_mutex_lock(&watches_mu);
	ngone = sweep_idle(aas_now_ms(), gone, sizeof(gone) / sizeof(gone[0]));
	for (int i = 0; i < WATCH_MAX; i++) {
		if (!*watches[i].exe) {
			if (free_at < 0)
				free_at = i;
			continue;
		}
		in_sandbox += strcmp(watches[i].sandbox, t->id) == 0;
		in_account += strcmp(watches[i].account, t->account) == 0;
	}
	if (in_sandbox >= WATCH_PER_SANDBOX || in_account >= WATCH_PER_ACCOUNT)
		free_at = -1;
	if (free_at >= 0) {
		struct watch *w = &watches[free_at];
		/* Held until the watcher's id is known ("-": taken, not yet running). */
		snprintf(w->exe, sizeof(w->exe), "-");
		snprintf(w->sandbox, sizeof(w->sandbox), "%s", t->id);
		snprintf(w->account, sizeof(w->account), "%s", t->account);
	}
	pthread_mutex_unlock(&watches_mu);
	for (size_t i = 0; i < ngone; i++)
		kill_watcher(NULL, gone[i].account, gone[i].exe);
	if (free_at < 0) {
		const char *fmt = "at most %d directory watches per sandbox and %d per account run at once (%d on this "
		                  "server); stop one first";
		if (stream)
			aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, fmt, WATCH_PER_SANDBOX,
			                           WATCH_PER_ACCOUNT, WATCH_MAX);
		else
			aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, fmt, WATCH_PER_SANDBOX,
			                          WATCH_PER_ACCOUNT, WATCH_MAX);
	}
	return free_at;
}

static void watch_free_at(int i)
{
	pthread_mutex_lock(&watches_mu);
	watch_clear(&watches[i]);
	pthread_mutex_unlock(&watches_mu);
}

void aas_e2b_watch_release(saas_client *client, const char *exe)
{
	char account[SAAS_ID_MAX + 1] = "";

	pthread_mutex_lock(&watches_mu);
	for (size_t i = 0; i < WATCH_MAX; i++) {
		if (strcmp(watches[i].exe, exe) == 0 && !watches[i].polling) {
			snprintf(account, sizeof(account), "%s", watches[i].account);
			watch_clear(&watches[i]);
			break;
		}
	}
	pthread_mutex_unlock(&watches_mu);
	if (*account)
		kill_watcher(client, account, exe);
}

bool aas_e2b_watch_has(const char *exe)
{
	bool found = false;

	pthread_mutex_lock(&watches_mu);
	for (size_t i = 0; i < WATCH_MAX && !found; i++)
		found = strcmp(watches[i].exe, exe) == 0;
	pthread_mutex_unlock(&watches_mu);
	return found;
}

void aas_e2b_watch_shutdown(void)
{
	pthread_mutex_lock(&watches_mu);
	for (size_t i = 0; i < WATCH_MAX; i++) {
		/* The engine is going: its commands end with it; only the memory is ours to free. */
		watch_clear(&watches[i]);
	}
	pthread_mutex_unlock(&watches_mu);
}

/* ---- starting a watcher ---- */

/* 'text' as one shell word (a quote becomes '\''): malloc()ed, NULL when out of memory. */
static char *shell_word(const char *text)
{
	char *out = malloc(4 * strlen(text) + 3);
	size_t k = 0;

	if (!out)
		return NULL;
	out[k++] = '\'';
	for (const char *p = text; *p; p++) {
		if (*p == '\'') {
			memcpy(out + k, "'\\''", 4);
			k += 4;
		} else {
			out[k++] = *p;
		}
	}
	out[k++] = '\'';
	out[k] = '\0';
	return out;
}

/*
 * The request's directory (E2B's: "~" and relative are the home) and
 * flags: false with why. allow_network_mounts and include_entry are E2B's
 * options the watcher does not serve.
 */
static bool watch_args(json_t *msg, char *dir, size_t size, bool *recursive, char *why, size_t whysize)
{
	json_t *path = json_object_get(msg, "path");
	const char *p = json_string_value(path);

	if (!p || !*p || strlen(p) != json_string_length(path) || strlen(p) > 4096) {
		snprintf(why, whysize, "path must be a directory's path, 1 to 4096 bytes without NUL");
		return false;
	}
	if (json_is_true(json_object_get(msg, "includeEntry")) || json_is_true(json_object_get(msg, "include_entry"))) {
		snprintf(why, whysize, "includeEntry is not served by this server yet (docs/e2b.md)");
		return false;
	}
	*recursive = json_is_true(json_object_get(msg, "recursive"));
	if (p[0] == '~' && (p[1] == '\0' || p[1] == '/'))
		snprintf(dir, size, "%s%s", HOME, p + 1);
	else if (p[0] == '/')
		snprintf(dir, size, "%s", p);
	else
		snprintf(dir, size, "%s/%s", HOME, p);
	return true;
}

/* Start the watcher of msg's directory: its execution's id (malloc()ed), or NULL after filling code and why. */
static char *watcher_start(struct aas_e2b_target *t, json_t *msg, int64_t timeout_s, int *code, char *why,
                           size_t whysize)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;
	char dir[4096 + sizeof(HOME) + 2], *word = NULL, *command = NULL, *id = NULL;
	bool recursive;
	size_t len;
	int rc;

	*code = AAS_CONNECT_INVALID_ARGUMENT;
	if (!watch_args(msg, dir, sizeof(dir), &recursive, why, whysize))
		return NULL;
	if (!(word = shell_word(dir)) || !(command = malloc(len = sizeof(watcher) + strlen(word) + 64))) {
		*code = AAS_CONNECT_RESOURCE_EXHAUSTED;
		snprintf(why, whysize, "out of memory");
		free(word);
		return NULL;
	}
	snprintf(command, len, "exec python3 -c '%s' %s %d", watcher, word, recursive ? 1 : 0);
	o.timeout_s = timeout_s;
	o.max_output = WATCH_OUTPUT;
	if ((rc = saas_exec(&x, t->client, t->id, command, &o, SAAS_EXEC_BACKGROUND)) < 0) {
		*code = aas_connect_code_from_saas(rc);
		snprintf(why, whysize, "%s", aas_tenant_message(rc, "e2b: watch"));
	} else if (!(id = strdup(x->id))) {
		kill_watcher(t->client, t->account, x->id);
		*code = AAS_CONNECT_RESOURCE_EXHAUSTED;
		snprintf(why, whysize, "out of memory");
	}
	saas_execution_free(x);
	free(command);
	free(word);
	return id;
}

/* filesystem.Filesystem/WatchDir: the watcher followed by the answer (stream.c), killed when it ends. */
static void rpc_watch_dir(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	uint64_t timeout_ms = aas_e2b_header_uint(r, "Connect-Timeout-Ms", (uint64_t)30 * 86400 * 1000, 0);
	int64_t timeout_s = timeout_ms ? (int64_t)((timeout_ms + 999) / 1000) : SAAS_EXEC_TIMEOUT_MAX;
	char why[256], *exe = NULL;
	int i, code;

	if (!aas_e2b_slot_take(t->account, out))
		return;
	if ((i = watch_take(out, t, true)) < 0) {
		aas_e2b_slot_release(t->account);
		return;
	}
	/* The call's deadline is the watch's, as envd's; none is a command's longest. */
	if (!(exe = watcher_start(t, msg, timeout_s > SAAS_EXEC_TIMEOUT_MAX ? SAAS_EXEC_TIMEOUT_MAX : timeout_s, &code,
	                          why, sizeof(why)))) {
		watch_free_at(i);
		aas_e2b_slot_release(t->account);
		aas_e2b_reply_stream_error(out, code, "%s", why);
		return;
	}
	pthread_mutex_lock(&watches_mu);
	snprintf(watches[i].exe, sizeof(watches[i].exe), "%s", exe);
	pthread_mutex_unlock(&watches_mu);
	aas_e2b_reply_stream(r, out, t->client, t->account, &(struct aas_e2b_follow){ .exe = exe, .watch = true });
	t->client = NULL;
	free(exe);
}

/* ---- the polling trio ---- */

struct poll_state {
	json_t *events;        /* filesystem events for the answer */
	bool started;
	char failed[16];
	unsigned long *count;  /* the watch's events over its life */
	struct aas_e2b_watch_parser *parser;
	bool bad;
};

static int on_poll_line(void *ud, int kind, const char *type, const char *name)
{
	struct poll_state *ps = ud;

	if (kind == AAS_E2B_WATCH_STARTED && !ps->started)
		ps->started = true;
	else if (kind == AAS_E2B_WATCH_FAILED && !ps->started)
		snprintf(ps->failed, sizeof(ps->failed), "%s", name);
	else if (kind == AAS_E2B_WATCH_EVENT && ps->started && ++*ps->count <= AAS_E2B_WATCH_EVENTS_MAX)
		json_array_append_new(ps->events, json_pack("{s:s,s:s}", "name", name, "type", type));
	else
		return 1;
	return 0;
}

static int on_poll_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct poll_state *ps = ud;
	char why[128];

	(void)offset;
	if (stream == SAAS_EXEC_STDOUT && !ps->bad && !*ps->failed &&
	    aas_e2b_watch_feed(ps->parser, data, len, on_poll_line, ps, why, sizeof(why)) != 0)
		ps->bad = true;
	/* Enough for one answer: the rest waits in the engine for the next poll. */
	return json_array_size(ps->events) >= WATCH_POLL_MAX;
}

/*
 * Read a watcher's output from *cur: events into ps, waiting up to wait_ms
 * for the first output when asked. SAAS_OK or the engine's status.
 */
static int poll_watcher(saas_client *client, const char *exe, saas_exec_cursor *cur, struct poll_state *ps,
                        unsigned int wait_ms)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;

	cb.output = on_poll_output;
	cb.userdata = ps;
	return saas_execution_follow(NULL, client, exe, cur, &cb, wait_ms, wait_ms ? SAAS_FOLLOW_WAIT : 0);
}

/* The polling watcher id names in t's sandbox, marked busy: its index, or -1 after a not_found reply. */
static int watcher_find(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "watcherId"));
	int found = -1;

	if (!id)
		id = json_string_value(json_object_get(msg, "watcher_id"));
	pthread_mutex_lock(&watches_mu);
	for (int i = 0; id && i < WATCH_MAX && found < 0; i++)
		if (watches[i].polling && !watches[i].busy && strcmp(watches[i].id, id) == 0 &&
		    strcmp(watches[i].sandbox, t->id) == 0 && strcmp(watches[i].account, t->account) == 0)
			found = i;
	if (found >= 0)
		watches[found].busy = true;
	pthread_mutex_unlock(&watches_mu);
	if (found < 0)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "watcher %.64s not found", id ? id : "");
	return found;
}

static void rpc_create_watcher(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	struct poll_state ps = { 0 };
	struct watch *w;
	char why[256], *exe = NULL, id[SAAS_ID_MAX + 1];
	int64_t until = aas_now_ms() + WATCH_START_MS;
	int i, code, rc = SAAS_OK;

	if ((i = watch_take(out, t, false)) < 0)
		return;
	w = &watches[i];
	if (!(ps.events = json_array()) || !(ps.parser = calloc(1, sizeof(*ps.parser)))) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		goto fail;
	}
	/* A polling watcher lives until removed, idle for WATCH_IDLE_MS, or a command's longest. */
	if (!(exe = watcher_start(t, msg, SAAS_EXEC_TIMEOUT_MAX, &code, why, sizeof(why)))) {
		aas_e2b_reply_unary_error(out, code, "%s", why);
		goto fail;
	}
	ps.count = &(unsigned long){ 0 };
	/* Until it says it watches: changes after the answer are then all seen. */
	while (!ps.started && !*ps.failed && !ps.bad && rc == SAAS_OK && aas_now_ms() < until) {
		saas_execution *x = NULL;
		rc = poll_watcher(t->client, exe, &w->cur, &ps, 1000);
		if (!ps.started && !*ps.failed && rc == SAAS_OK && saas_execution_get(&x, t->client, exe) == SAAS_OK &&
		    x->status != SAAS_EXEC_RUNNING) {
			snprintf(ps.failed, sizeof(ps.failed), "%s", x->status == SAAS_EXEC_EXITED && x->exit_code == 127
			                                               ? "nopython"
			                                               : "ended");
		}
		saas_execution_free(x);
	}
	if (!ps.started) {
		kill_watcher(t->client, t->account, exe);
		if (strcmp(ps.failed, "notfound") == 0)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "the directory to watch does not exist");
		else if (strcmp(ps.failed, "notdir") == 0)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "the path to watch is not a directory");
		else if (strcmp(ps.failed, "nopython") == 0)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_FAILED_PRECONDITION, "watching needs python3 in the "
			                          "sandbox's image (docs/e2b.md)");
		else if (rc < 0)
			aas_e2b_reply_unary_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: watch"));
		else
			aas_e2b_reply_unary_error(out, AAS_CONNECT_FAILED_PRECONDITION, "the directory could not be watched");
		goto fail;
	}
	pthread_mutex_lock(&watches_mu);
	snprintf(id, sizeof(id), "w%llu", (unsigned long long)++watcher_counter);
	snprintf(w->exe, sizeof(w->exe), "%s", exe);
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->polling = true;
	w->used_ms = aas_now_ms();
	w->parser = ps.parser;
	w->events = *ps.count;
	/* Events that came with the start are after it: the first poll's. */
	w->pending = ps.events;
	pthread_mutex_unlock(&watches_mu);
	free(exe);
	aas_e2b_reply_unary(out, json_pack("{s:s}", "watcherId", id));
	return;
fail:
	json_decref(ps.events);
	free(ps.parser);
	free(exe);
	watch_free_at(i);
}

static void rpc_get_watcher_events(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	struct poll_state ps = { 0 };
	saas_exec_cursor cur;
	char exe[SAAS_ID_MAX + 1];
	int i, rc;

	if ((i = watcher_find(out, t, msg)) < 0)
		return;
	pthread_mutex_lock(&watches_mu);
	cur = watches[i].cur;
	snprintf(exe, sizeof(exe), "%s", watches[i].exe);
	ps.parser = watches[i].parser;
	ps.count = &watches[i].events;
	ps.started = true;
	ps.events = watches[i].pending;
	watches[i].pending = NULL;
	pthread_mutex_unlock(&watches_mu);
	if (!ps.events && !(ps.events = json_array())) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
	} else if ((rc = poll_watcher(t->client, exe, &cur, &ps, 0)) < 0) {
		aas_e2b_reply_unary_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, "e2b: watch"));
	} else if (ps.bad || watches[i].events > AAS_E2B_WATCH_EVENTS_MAX) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, ps.bad ? "the watcher's output is not a "
		                          "watcher's: remove the watcher" : "a watcher delivers at most %d events; remove "
		                          "it and watch again", AAS_E2B_WATCH_EVENTS_MAX);
	} else {
		aas_e2b_reply_unary(out, json_pack("{s:O}", "events", ps.events));
	}
	json_decref(ps.events);
	pthread_mutex_lock(&watches_mu);
	watches[i].cur = cur;
	watches[i].used_ms = aas_now_ms();
	watches[i].busy = false;
	pthread_mutex_unlock(&watches_mu);
}

static void rpc_remove_watcher(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	char exe[SAAS_ID_MAX + 1];
	int i;

	if ((i = watcher_find(out, t, msg)) < 0)
		return;
	pthread_mutex_lock(&watches_mu);
	snprintf(exe, sizeof(exe), "%s", watches[i].exe);
	watch_clear(&watches[i]);
	pthread_mutex_unlock(&watches_mu);
	kill_watcher(t->client, t->account, exe);
	aas_e2b_reply_unary(out, NULL);
}

void aas_e2b_watch(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method,
                   json_t *msg)
{
	if (strcmp(method, "WatchDir") == 0)
		rpc_watch_dir(r, out, t, msg);
	else if (strcmp(method, "CreateWatcher") == 0)
		rpc_create_watcher(out, t, msg);
	else if (strcmp(method, "GetWatcherEvents") == 0)
		rpc_get_watcher_events(out, t, msg);
	else
		rpc_remove_watcher(out, t, msg);
}
