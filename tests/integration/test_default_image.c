/*
 * The `default` image, booted for real: what the product promises is there and
 * works as the unprivileged user. Slow (the image takes minutes to build the
 * first time), so it has a label of its own.
 *
 * What the seeds promise is checked by version (Python >= 3.13, Node.js 22,
 * npm), and installing as the sandbox user works from packages made in the
 * test itself (a wheel, an npm tarball: no network needed). A clone's code
 * server (images/guest/aas-code) is warm and answers E2B's /execute. The docs'
 * background server, `python3 -m http.server 8000 &`, is started first and
 * asked a minute later, after the other tests have run in that minute.
 *
 * Last, on the same sandbox (it was vm.cgroups.disk's own cold boot of this
 * image until 2026-12), the disk bound: the guest's filesystem grows to its
 * size's disk, the overlay on the host is a disk of that size, its
 * unprivileged user writing without end gets ENOSPC, and the overlay holds no
 * more than the disk plus qcow2's metadata. The guest takes all but the last
 * 128 MiB with fallocate (no data: seconds) and writes the rest: under
 * TCG a guest writes about 12 MB/s, and writing the whole disk would take
 * minutes of CI time to show what qcow2 guarantees anyway (an image never
 * holds more than its virtual size and its tables). What is ours, the virtual
 * size the engine gives the overlay, is read off its header.
 *
 * Environment: SAAS_TEST_IMAGES, SAAS_TEST_STATE.
 */
#include <ftw.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "vmtest.h"

static saas_engine *engine;
static saas_client *client;
static saas_sandbox *sb;
static char *key;
static char state_dir[4096];

static int setup(void **state)
{
	saas_engine_options o;
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	const char *images, *dir;
	char config[4200];

	(void)state;
	if (vmtest_env(&images, &dir) < 0)
		return -1;
	snprintf(state_dir, sizeof(state_dir), "%s", dir);
	snprintf(config, sizeof(config), "images=%s boot_timeout=600", images);
	o = vmtest_engine_options(dir, config);
	check(saas_engine_open(&engine, &o), "engine");
	vmtest_tenant(engine, "default-image", &key, &client);
	co.image = "default";
	check(saas_sandbox_create(&sb, client, &co, 0), "create from the default image");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (sb)
		saas_sandbox_destroy(NULL, client, sb->id, 0);
	saas_sandbox_free(sb);
	saas_client_free(client);
	saas_engine_free(engine);
	saas_free(key);
	return 0;
}

static void expect_in(const char *id, const char *cmd, const char *want_stdout)
{
	saas_execution *x = NULL;
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;

	o.timeout_s = 300;
	check(saas_exec(&x, client, id, cmd, &o, 0), cmd);
	if (x->exit_code != 0)
		fail_msg("'%s' exited %d: %s", cmd, x->exit_code, x->stderr_data);
	if (want_stdout && !strstr(x->stdout_data, want_stdout))
		fail_msg("'%s' printed '%s', wanted '%s'", cmd, x->stdout_data, want_stdout);
	saas_execution_free(x);
}

static void expect(const char *cmd, const char *want_stdout)
{
	expect_in(sb->id, cmd, want_stdout);
}

/* When the background server was started (CLOCK_MONOTONIC), 0 if it was not. */
static time_t server_started;

/* The docs' background server (docs/rest.md), started as they say and left running. */
static void test_server_start(void **state)
{
	struct timespec now;

	(void)state;
	expect("mkdir -p /tmp/www && cd /tmp/www && echo hello from python > index.html; "
	       "python3 -m http.server 8000 & echo $! > /tmp/http.pid; echo serving",
	       "serving");
	clock_gettime(CLOCK_MONOTONIC, &now);
	server_started = now.tv_sec;
}

static void test_versions(void **state)
{
	(void)state;
	expect("python3 -c 'import sys; print(sys.version_info >= (3, 13), sys.version.split()[0])'", "True 3.");
	expect("node --version", "v22.");
	/* One node and one Python each (seconds apiece under TCG): the stack's versions and its first use. */
	expect("node -e 'console.log(process.versions.node.split(\".\")[0], 6 * 7)'", "22 42");
	expect("npm --version && npx --version", ".");
	expect("python3 -c 'import numpy, pandas, requests; print(numpy.__version__, pandas.__version__, "
	       "requests.__version__); print(\"stack\", numpy.arange(4).sum(), len(pandas.DataFrame({\"a\": [1, 2]})))'",
	       "\nstack 6 2\n");
}

/*
 * pip as the sandbox user, no index: a wheel written here (a zip with the
 * module, its dist-info and a RECORD of sha256 digests, so no build backend
 * is needed), installed into ~/.local; its console script lands in
 * ~/.local/bin, which exec finds on PATH.
 */
static void test_pip_install_user(void **state)
{
	(void)state;
	expect("mkdir -p /workspace/wheel && cd /workspace/wheel && python3 - <<'EOF'\n"
	       "import base64, hashlib, zipfile\n"
	       "files = {\n"
	       "    'aas_hello.py': 'def hi():\\n    return \"hello from a wheel\"\\n"
	       "def main():\\n    print(hi())\\n',\n"
	       "    'aas_hello-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: aas-hello\\nVersion: 1.0\\n',\n"
	       "    'aas_hello-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\n"
	       "Root-Is-Purelib: true\\nTag: py3-none-any\\n',\n"
	       "    'aas_hello-1.0.dist-info/entry_points.txt': '[console_scripts]\\naas-hello = aas_hello:main\\n',\n"
	       "}\n"
	       "record = ''\n"
	       "with zipfile.ZipFile('aas_hello-1.0-py3-none-any.whl', 'w') as z:\n"
	       "    for name, text in files.items():\n"
	       "        z.writestr(name, text)\n"
	       "        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()\n"
	       "        record += '%s,sha256=%s,%d\\n' % (name, digest, len(text))\n"
	       "    z.writestr('aas_hello-1.0.dist-info/RECORD', record + 'aas_hello-1.0.dist-info/RECORD,,\\n')\n"
	       "EOF\n"
	       "echo wheel-made",
	       "wheel-made");
	expect("cd /workspace/wheel && python3 -m pip install --user --break-system-packages --no-index "
	       "--disable-pip-version-check aas_hello-1.0-py3-none-any.whl",
	       "Successfully installed aas-hello-1.0");
	expect("python3 -c 'import aas_hello, sys; print(aas_hello.hi(), aas_hello.__file__.startswith(sys.argv[1]))' "
	       "\"$HOME/.local/\"",
	       "hello from a wheel True");
	expect("command -v aas-hello && aas-hello", "/home/sandbox/.local/bin/aas-hello\nhello from a wheel");
}

/*
 * npm as the sandbox user, offline: a package packed here with `npm pack`,
 * installed into a project (./node_modules: test_user_installs's) and globally, which lands in
 * ~/.local (the image's npmrc prefix), its bin on PATH.
 */
static void test_npm_install(void **state)
{
	(void)state;
	expect("mkdir -p /workspace/npmpkg && cd /workspace/npmpkg && "
	       "printf '%s\\n' '{\"name\": \"aas-hello\", \"version\": \"1.0.0\", \"main\": \"index.js\", "
	       "\"bin\": {\"aas-hello-js\": \"cli.js\"}}' > package.json && "
	       "echo 'exports.hi = () => \"hello from npm\";' > index.js && "
	       "printf '%s\\n' '#!/usr/bin/env node' 'console.log(require(\"./index.js\").hi());' > cli.js && "
	       "npm pack --offline 2>/dev/null",
	       "aas-hello-1.0.0.tgz");
	/* Into the project test_user_installs made with `npm init` (an npm start-up fewer). */
	expect("cd proj && npm install --offline --no-audit --no-fund /workspace/npmpkg/aas-hello-1.0.0.tgz >/dev/null && "
	       "node -e 'console.log(require(\"aas-hello\").hi())'",
	       "hello from npm");
	expect("cd /workspace/npmpkg && npm install -g --offline --no-audit --no-fund ./aas-hello-1.0.0.tgz >/dev/null && "
	       "command -v aas-hello-js && aas-hello-js",
	       "/home/sandbox/.local/bin/aas-hello-js\nhello from npm");
}

/* One HTTP/1.0 GET through the engine's tunnel to a sandbox port: the whole answer, malloc()ed. */
static char *http_get(unsigned int port, const char *path)
{
	char *buf = calloc(1, 65536);
	int fd = -1;

	assert_non_null(buf);
	check(saas_port_connect(&fd, client, sb->id, port), "port connect");
	vmtest_http_get(fd, path, buf, 65536);
	return buf;
}

/*
 * A minute after it was started (the other tests ran meanwhile; the rest of
 * the minute is waited here): the server still runs and answers every
 * request, each of which it logs to the stderr of a call long returned.
 */
static void test_server_minute_later(void **state)
{
	struct timespec now;
	char *url = NULL, *page;

	(void)state;
	assert_true(server_started != 0);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - server_started < 60)
		sleep((unsigned int)(60 - (now.tv_sec - server_started)));
	expect("kill -0 $(cat /tmp/http.pid) && echo alive", "alive");
	check(saas_port_expose(&url, client, sb->id, 8000, 0), "expose 8000");
	assert_true(url && url[0]);
	saas_free(url);
	for (int i = 0; i < 10; i++) {
		page = http_get(8000, "/");
		if (!strstr(page, " 200 ") || !strstr(page, "hello from python"))
			fail_msg("request %d to the background python3 server: %.200s", i, page);
		free(page);
	}
	expect("kill -0 $(cat /tmp/http.pid) && kill $(cat /tmp/http.pid) && echo stopped", "stopped");
}

static void test_tools(void **state)
{
	(void)state;
	expect("for t in git curl wget jq unzip gpg gcc make; do command -v $t >/dev/null || echo missing $t; done; echo ok",
	       "ok");
	expect("printf 'int main(void){return 0;}' > t.c && cc t.c -o t && ./t && echo built", "built");
}

static void test_user_installs(void **state)
{
	(void)state;
	/* Unprivileged, no sudo; user installs land in the home directory. */
	expect("id -u; ls -ld /workspace | cut -d' ' -f3", "1000\nsandbox");
	expect("sudo true 2>/dev/null || echo no-sudo", "no-sudo");
	expect("python3 -m pip --version && python3 -m site --user-site", ".local/lib/python3");
	expect("mkdir -p proj && cd proj && npm init -y >/dev/null && test -w . && echo npm-ok", "npm-ok");
}

/*
 * POST /execute to the code server of sandbox id (port 49999 in the guest,
 * through the engine's port channel) with the JSON body; its NDJSON stream
 * (the server ends the connection after it) into a malloc'd string.
 */
static char *code_execute(const char *id, const char *body)
{
	size_t size = 4 << 20, got = 0;
	char *buf = malloc(size), head[256];
	int fd = -1;

	assert_non_null(buf);
	check(saas_port_connect(&fd, client, id, 49999), "port connect to the code server");
	snprintf(head, sizeof(head), "POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
	         "Content-Length: %zu\r\n\r\n", strlen(body));
	assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	assert_int_equal(send(fd, body, strlen(body), MSG_NOSIGNAL), (ssize_t)strlen(body));
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;
		if (poll(&p, 1, 120000) <= 0)
			break;
		n = recv(fd, buf + got, size - 1 - got, 0);
		if (n <= 0 || (got += (size_t)n) >= size - 1)
			break;
	}
	close(fd);
	buf[got] = '\0';
	return buf;
}

/* The value of base64 digit c (-1: not one). */
static int b64(char c)
{
	static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(digits, c) : NULL;

	return p ? (int)(p - digits) : -1;
}

/*
 * A chart drawn in a clone arrives as a PNG: the "png" of its result
 * decodes to the PNG signature and an IHDR chunk of a sane size.
 */
static void expect_png(const char *stream)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const char *p = strstr(stream, "\"png\": \"");
	unsigned char bin[33];
	unsigned int w, h;

	if (!p)
		fail_msg("no png in the chart's run: %.300s", stream);
	p += strlen("\"png\": \"");
	for (size_t i = 0; i < 44; i += 4) {   /* 44 base64 digits: the first 33 bytes */
		int v[4];
		for (int k = 0; k < 4; k++)
			if ((v[k] = b64(p[i + k])) < 0)
				fail_msg("the png is not base64: %.60s", p);
		bin[i / 4 * 3] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		bin[i / 4 * 3 + 1] = (unsigned char)(v[1] << 4 | v[2] >> 2);
		bin[i / 4 * 3 + 2] = (unsigned char)(v[2] << 6 | v[3]);
	}
	assert_memory_equal(bin, sig, sizeof(sig));
	assert_memory_equal(bin + 12, "IHDR", 4);
	w = (unsigned int)bin[16] << 24 | (unsigned int)bin[17] << 16 | (unsigned int)bin[18] << 8 | bin[19];
	h = (unsigned int)bin[20] << 24 | (unsigned int)bin[21] << 16 | (unsigned int)bin[22] << 8 | bin[23];
	if (w < 100 || w > 10000 || h < 100 || h > 10000)
		fail_msg("the chart is %ux%u pixels", w, h);
}

/* 1+1 in sandbox id's code server is "2", the run's main result, and the run ends. */
static void expect_one_plus_one(const char *id, const char *where)
{
	char *out = code_execute(id, "{\"code\": \"1+1\"}");

	if (!strstr(out, "{\"type\": \"result\", \"text\": \"2\", \"is_main_result\": true}") ||
	    !strstr(out, "{\"type\": \"end_of_execution\"}"))
		fail_msg("1+1 %s: %.500s", where, out);
	free(out);
}

/*
 * A clone's code server is warm: its template was saved only once the
 * server's default Python context had numpy, pandas and matplotlib imported
 * (the log says so), so the clone's first run finds them loaded already,
 * without importing anything; 1+1 is "2" and a chart comes back as a PNG.
 * The clone id was a spare whose code server ran `1+1` before the create
 * took it (POST /warm): its first run is still the context's first
 * (execution count 1), with nothing of that one in IPython's output cache
 * (_, __, ___, Out, _N) or its names.
 */
static void expect_code_warm(const char *id)
{
	char *out, *url = NULL;

	assert_true(logged("^template ", "the code server on port 49999 is warm"));
	check(saas_port_expose(&url, client, id, 49999, 0), "expose the code server's port");
	saas_free(url);
	out = code_execute(id, "{\"code\": \"import sys\\n(all(m in sys.modules for m in ('numpy', 'pandas', "
	                       "'matplotlib.pyplot')), _, __, ___, dict(Out), sorted(k for k in dir() if k[:1] == '_' and "
	                       "k[1:].isdigit() or 'aas' in k))\"}");
	if (!strstr(out, "{\"type\": \"number_of_executions\", \"execution_count\": 1}") ||
	    !strstr(out, "{\"type\": \"result\", \"text\": \"(True, '', '', '', {}, [])\", \"is_main_result\": true}"))
		fail_msg("the clone's kernel is not warm, or not as fresh: %.500s", out);
	free(out);
	expect_one_plus_one(id, "in the clone's code server");
	out = code_execute(id, "{\"code\": \"import matplotlib.pyplot as plt\\nplt.plot([1, 3, 2])\\nplt.show()\"}");
	expect_png(out);
	free(out);
}

/*
 * A clone's first port connections go over its control port while it has no
 * SSH session (the guest's helper opens them itself: no login, no shell
 * before a clone's first run). A port nothing listens on is an error at
 * once; a connection the engine closes before the run's end interrupts the
 * run (the helper closes its socket to the code server with it), whose
 * context then runs the next: the variable set after the sleep is not set.
 * The run would sleep 300 s were it not interrupted. That run is the clone's
 * first connection, so it went over the port (the log says so); the runs
 * after it come back whole whichever way they go (expect_session_quiet: the
 * session comes up once the port has stayed unused a while).
 */
static void expect_code_relayed(const char *id)
{
	static const char cut[] = "{\"code\": \"import time\\nx_cut = 0\\nprint('asleep', flush=True)\\n"
	                          "time.sleep(300)\\nx_cut = 1\"}";
	char line[256], head[256], buf[4096], *out, *url = NULL;
	size_t got = 0;
	int fd = -1, rc;

	check(saas_port_expose(&url, client, id, 49999, 0), "expose the code server's port");
	saas_free(url);
	check(saas_port_expose(&url, client, id, 49998, 0), "expose a port nothing listens on");
	saas_free(url);
	rc = saas_port_connect(&fd, client, id, 49998);
	if (rc != SAAS_EBACKEND || !strstr(saas_error_last()->message, "nothing listens on port 49998 in the sandbox"))
		fail_msg("a port nothing listens on: %s (%s)", saas_strerror(rc), saas_error_last()->message);
	/* A run cut off: closed once it printed, so it runs in the kernel. */
	check(saas_port_connect(&fd, client, id, 49999), "port connect to the code server");
	snprintf(line, sizeof(line), "VM %s: its port connections go over the control port", id);
	assert_true(logged(line, "until its SSH session is up"));
	snprintf(head, sizeof(head), "POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
	         "Content-Length: %zu\r\n\r\n%s", strlen(cut), cut);
	assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	while (got < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;
		if (poll(&p, 1, 120000) <= 0 || (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
		if (strstr(buf, "asleep"))
			break;
	}
	buf[got] = '\0';
	if (!strstr(buf, "asleep"))
		fail_msg("the run to cut off did not start: %.500s", buf);
	close(fd);
	out = code_execute(id, "{\"code\": \"x_cut\"}");
	if (!strstr(out, "{\"type\": \"result\", \"text\": \"0\", \"is_main_result\": true}"))
		fail_msg("after a run cut off over the control port: %.500s", out);
	free(out);
	expect_one_plus_one(id, "after a run cut off");
}

/*
 * A clone whose runs and commands came one right after the other, relayed in
 * turn: its SSH session comes up in the background only once the port has
 * stayed unused a while (30 s: the login would share the guest with the
 * next run), unless a connection found the port held so long that it made it.
 */
static void expect_session_quiet(const char *id)
{
	char line[256], head[256];

	snprintf(line, sizeof(line), "VM %s: its SSH session comes up in the background", id);
	snprintf(head, sizeof(head), "VM %s: a port connection goes over SSH", id);
	for (int i = 0; i < 1200 && !logged(line, "its control port unused for") && !logged(head, NULL); i++)
		usleep(100 * 1000);
	assert_true(logged(line, "its control port unused for") || logged(head, NULL));
}


/* ---- commands with no shell (issue #36) --------------------------------------------------------- */

/* cmd on id (cwd, env: the exec's options); the record. */
static saas_execution *run_on(const char *id, const char *cmd, const char *cwd, const char *const *env)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;

	o.timeout_s = 300;
	o.cwd = cwd;
	o.env = env;
	check(saas_exec(&x, client, id, cmd, &o, 0), cmd);
	return x;
}

/*
 * Did a plain command run with no shell? Its parent is the guest's helper
 * then, /usr/lib/aas/control (bash otherwise, gone by the next command).
 */
static bool runs_without_shell(const char *id)
{
	saas_execution *x = run_on(id, "cat /proc/self/stat", NULL, NULL), *y;
	char cmd[64];
	const char *p = strrchr(x->stdout_data, ')');
	long ppid = 0;
	bool helper;

	assert_non_null(p);
	assert_int_equal(sscanf(p + 1, " %*c %ld", &ppid), 1);
	saas_execution_free(x);
	snprintf(cmd, sizeof(cmd), "cat /proc/%ld/cmdline", ppid);
	y = run_on(id, cmd, NULL, NULL);
	helper = y->exit_code == 0 && strcmp(y->stdout_data, "/usr/lib/aas/control") == 0;
	saas_execution_free(y);
	return helper;
}

/*
 * A plain command and the same through the shell (its first word quoted,
 * which makes it no plain command): the same stdout, stderr, status and
 * exit code.
 */
static void same_both_ways(const char *id, const char *plain, const char *quoted, const char *cwd,
                           const char *const *env)
{
	saas_execution *a = run_on(id, plain, cwd, env), *b = run_on(id, quoted, cwd, env);

	if (a->status != b->status || a->exit_code != b->exit_code || a->stdout_len != b->stdout_len ||
	    memcmp(a->stdout_data, b->stdout_data, a->stdout_len) != 0 || a->stderr_len != b->stderr_len ||
	    memcmp(a->stderr_data, b->stderr_data, a->stderr_len) != 0)
		fail_msg("'%s' and '%s' differ:\n%s exit %d\n[%s]\n[%s]\nagainst %s exit %d\n[%s]\n[%s]", plain, quoted,
		         saas_exec_status_name(a->status), a->exit_code, a->stdout_data, a->stderr_data,
		         saas_exec_status_name(b->status), b->exit_code, b->stdout_data, b->stderr_data);
	saas_execution_free(a);
	saas_execution_free(b);
}

/*
 * cmd in the background, sig (to its shell, or its group) once it runs: its
 * end, status and code. A plain command (no quote) runs once the execution
 * says it started (the program itself then: its helper's exec of it was
 * done). A shell is given 1.5 s more to set its traps: a command in the
 * guest to look would take the control port the running one holds, and go
 * over an SSH login, which changes where the shell's commands go after.
 */
static void signalled(const char *id, const char *cmd, const char *sig, unsigned int flags, int *status, int *code)
{
	saas_execution *x = NULL, *y = NULL;

	check(saas_exec(&x, client, id, cmd, NULL, SAAS_EXEC_BACKGROUND), cmd);
	for (int i = 0; i < 600 && !x->started && x->status == SAAS_EXEC_RUNNING; i++) {
		usleep(50 * 1000);
		saas_execution_free(y);
		y = NULL;
		check(saas_execution_get(&y, client, x->id), "the execution");
		x->started = y->started;
		x->status = y->status;
	}
	if (!x->started || x->status != SAAS_EXEC_RUNNING)
		fail_msg("'%s' not running in the guest after 30 s: %s", cmd, saas_exec_status_name(x->status));
	if (strchr(cmd, '\''))
		usleep(1500 * 1000);
	check(saas_execution_signal(client, x->id, sig, flags), sig);
	for (int i = 0; i < 600; i++) {
		saas_execution_free(y);
		y = NULL;
		check(saas_execution_get(&y, client, x->id), "the execution");
		if (y->status != SAAS_EXEC_RUNNING)
			break;
		usleep(100 * 1000);
	}
	*status = y->status;
	*code = y->exit_code;
	saas_execution_free(x);
	saas_execution_free(y);
}

/*
 * A clone's plain commands, over the control port, run with no shell and
 * say exactly what bash would have: the environment, the directory, a
 * missing command, a file that cannot run, a directory that is not there,
 * the variables given, signals. A ~/.bashrc of the user's own sends them
 * through bash again (what it exports is seen).
 */
static void expect_plain_as_bash(const char *id)
{
	static const char *const env[] = { "FOO=a b $c", "HOME=/tmp", "PATH=/usr/bin:/bin", "SHLVL=4", NULL };
	int s1, c1, s2, c2;

	assert_true(runs_without_shell(id));
	same_both_ways(id, "env", "'env'", NULL, NULL);
	same_both_ways(id, "env", "'env'", "/tmp", env);
	same_both_ways(id, "/bin/pwd", "'/bin/pwd'", "/usr/share", NULL);
	same_both_ways(id, "true", "'true'", NULL, NULL);
	same_both_ways(id, "false", "'false'", NULL, NULL);
	same_both_ways(id, "true", "'true'", "/no/such/dir", NULL);
	same_both_ways(id, "ls /no/such/file", "'ls' /no/such/file", NULL, NULL);
	same_both_ways(id, "no-such-command-x", "'no-such-command-x'", NULL, NULL);
	expect_in(id, "printf 'echo from a script\\n' > /workspace/noexec && cp /workspace/noexec /workspace/script && "
	              "chmod +x /workspace/script",
	          NULL);
	same_both_ways(id, "./noexec", "'./noexec'", NULL, NULL);
	same_both_ways(id, "./script", "'./script'", NULL, NULL); /* ENOEXEC: bash reads it itself */
	same_both_ways(id, "/workspace", "'/workspace'", NULL, NULL);
	same_both_ways(id, "/bin/kill -s TERM 0", "'/bin/kill' -s TERM 0", NULL, NULL);
	same_both_ways(id, "python3 -c pass", "'python3' -c pass", NULL, NULL);
	/* Signals from the engine: to the group, and to the shell alone (the shell's trap, once the command ends). */
	signalled(id, "sleep 5", "TERM", SAAS_SIGNAL_GROUP, &s1, &c1);
	signalled(id, "'sleep' 5", "TERM", SAAS_SIGNAL_GROUP, &s2, &c2);
	assert_int_equal(s1, s2);
	assert_int_equal(c1, c2);
	signalled(id, "sleep 3", "TERM", 0, &s1, &c1);
	signalled(id, "'sleep' 3", "TERM", 0, &s2, &c2);
	assert_int_equal(s1, s2);
	assert_int_equal(c1, c2);
	signalled(id, "sleep 5", "KILL", 0, &s1, &c1);
	signalled(id, "'sleep' 5", "KILL", 0, &s2, &c2);
	assert_int_equal(s1, s2);
	assert_int_equal(c1, c2);
	/* Ctrl-C's signal reaches the command both ways (the helper, started with `&`, has it ignored). */
	signalled(id, "sleep 5", "INT", SAAS_SIGNAL_GROUP, &s1, &c1);
	signalled(id, "'sleep' 5", "INT", SAAS_SIGNAL_GROUP, &s2, &c2);
	assert_int_equal(s1, SAAS_EXEC_EXITED);
	assert_int_equal(c1, 130);
	assert_int_equal(s2, s1);
	assert_int_equal(c2, c1);
	{
		saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
		saas_execution *a = NULL, *b = NULL;
		o.timeout_s = 2;
		check(saas_exec(&a, client, id, "sleep 30", &o, 0), "past its timeout");
		check(saas_exec(&b, client, id, "'sleep' 30", &o, 0), "past its timeout");
		assert_int_equal(a->status, SAAS_EXEC_TIMEDOUT);
		assert_int_equal(a->status, b->status);
		assert_int_equal(a->exit_code, b->exit_code);
		saas_execution_free(a);
		saas_execution_free(b);
	}
	/* The user's own ~/.bashrc: bash again, and what it exports is there (first: the skeleton returns at once). */
	expect_in(id, "cp ~/.bashrc /tmp/bashrc && { echo 'export AAS_RC=mine'; cat /tmp/bashrc; } > ~/.bashrc", NULL);
	assert_false(runs_without_shell(id));
	expect_in(id, "env", "AAS_RC=mine");
	same_both_ways(id, "env", "'env'", NULL, NULL);
	expect_in(id, "cp /tmp/bashrc ~/.bashrc", NULL);
	assert_true(runs_without_shell(id));
}

/*
 * Clones of the default image (a disk image): the template's frozen disk is
 * each clone's base, so what one clone writes must never show in another,
 * and the installed stack must work in a restored guest.
 */
static void test_clones(void **state)
{
	saas_create_options co = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *c[2] = { NULL, NULL };
	char line[256];
	bool ready = false;

	(void)state;
	co.image = "default";
	for (int i = 0; i < 1200 && !ready; i++) {
		ready = logged("^template ", " ready in ");
		assert_false(logged("^template ", " failed"));
		if (!ready)
			usleep(500 * 1000);
	}
	assert_true(ready);
	/* c[0] takes the spare its template gets, whose code server ran once before (expect_code_warm). */
	for (int i = 0; i < 1200 && !logged(" started ahead for template ", "its code server warmed in "); i++)
		usleep(500 * 1000);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_create(&c[i], client, &co, 0), "create a clone of the default image");
		snprintf(line, sizeof(line), "VM %s up in", c[i]->id);
		assert_true(logged(line, i ? "(clone," : "(clone, fix-ups over the control port, started ahead, its code "
		                                         "server warmed ahead,"));
		expect_in(c[i]->id, "hostname", c[i]->id);
	}
	/* Before anything makes c[1]'s SSH session: its commands go over the control port. */
	expect_plain_as_bash(c[1]->id);
	/*
	 * A clone's first commands go over the control port, with no SSH login;
	 * bash reads ~/.bashrc there as under sshd (~/.local/bin on PATH), and
	 * the same commands say the same once a listing made the session.
	 */
	expect_in(c[0]->id, "echo \"[$SSH_CONNECTION] $0 $# $PATH\"",
	          "[] bash 0 /home/sandbox/.local/bin:/usr/local/bin:/usr/bin:/bin:/usr/games\n");
	{
		saas_file_list *list = NULL;
		check(saas_file_list_get(&list, client, c[0]->id, "/workspace", 1, 10, 0), "a listing");
		saas_file_list_free(list);
	}
	expect_in(c[0]->id, "[ -n \"$SSH_CONNECTION\" ] && echo \"over SSH: $0 $# $PATH\"",
	          "over SSH: bash 0 /home/sandbox/.local/bin:/usr/local/bin:/usr/bin:/bin:/usr/games\n");
	/* Written at the template's boot, before its snapshot: on the frozen disk every clone starts from. */
	expect_in(c[0]->id, "cat /etc/resolv.conf", "nameserver 10.0.2.3");
	expect_in(c[1]->id, "cat /etc/resolv.conf", "nameserver 10.0.2.3");
	expect_in(c[0]->id, "echo first > /workspace/mine && sync && cat /workspace/mine", "first");
	expect_in(c[1]->id, "test -e /workspace/mine && echo shared || echo own", "own");
	expect_in(c[1]->id, "echo second > /workspace/mine && cat /workspace/mine", "second");
	expect_in(c[0]->id, "cat /workspace/mine", "first");
	expect_in(c[1]->id, "python3 -c 'import numpy, pandas; print(\"stack-ok\")'", "stack-ok");
	expect_code_relayed(c[1]->id);
	expect_code_warm(c[0]->id);
	expect_in(c[1]->id, "df -BG --output=size / | tail -1 | tr -d ' G'", NULL);
	expect_session_quiet(c[1]->id);
	for (int i = 0; i < 2; i++) {
		check(saas_sandbox_destroy(NULL, client, c[i]->id, 0), "destroy a clone");
		saas_sandbox_free(c[i]);
	}
}

/* ---- the disk --------------------------------------------------------------------------------- */

/* The image's own disk (recipes/default: DISK_SIZE), which the size's must exceed to show it grew. */
#define IMAGE_DISK_GB 4
/* What the guest leaves to write for real after fallocate: enough to see the overlay grow by it. */
#define DISK_WRITE_MB 128
#define STR_(x) #x
#define STR(x) STR_(x)

static unsigned long long free_bytes(const char *path)
{
	struct statvfs st;

	assert_int_equal(statvfs(path, &st), 0);
	return (unsigned long long)st.f_bavail * st.f_frsize;
}

/* What a VM's directory holds on the host: every file's allocated bytes (not their sizes). */
static unsigned long long dir_allocated;

static int add_allocated(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (type == FTW_F)
		dir_allocated += (unsigned long long)st->st_blocks * 512;
	return 0;
}

static unsigned long long allocated_under(const char *dir)
{
	dir_allocated = 0;
	assert_int_equal(nftw(dir, add_allocated, 16, FTW_PHYS), 0);
	return dir_allocated;
}

/* The virtual size in a qcow2 image's header (big-endian, at byte 24), or 0 when it is no qcow2. */
static unsigned long long qcow2_virtual_size(const char *path)
{
	unsigned char h[32];
	unsigned long long size = 0;
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	if (fread(h, 1, sizeof(h), f) == sizeof(h) && memcmp(h, "QFI\xfb", 4) == 0)
		for (int i = 24; i < 32; i++)
			size = size << 8 | h[i];
	fclose(f);
	return size;
}

static saas_execution *run(const char *cmd)
{
	saas_exec_options xo = SAAS_EXEC_OPTIONS_INIT;
	saas_execution *x = NULL;

	xo.timeout_s = 600;
	check(saas_exec(&x, client, sb->id, cmd, &xo, 0), cmd);
	assert_int_equal(x->status, SAAS_EXEC_EXITED);
	return x;
}

/*
 * The sandbox's disk fills up, last: nothing after this needs its space. Its
 * size is the engine's default one, whose disk is bigger than the image's.
 */
static void test_disk_full(void **state)
{
	saas_execution *x;
	unsigned long long disk, size = 0, before, after, allocated, vm_total, slack;
	char overlay[8192 + 16], vmdir[8192];
	struct stat st;

	(void)state;
	assert_true(sb->disk_gb > IMAGE_DISK_GB);
	disk = (unsigned long long)sb->disk_gb << 30;
	/* qcow2's tables: 8 bytes of L2 and 2 of refcount per 64 KiB cluster (0.015 %), a few header clusters. */
	slack = (disk >> 12) + (2ull << 20);
	before = free_bytes(state_dir);
	snprintf(vmdir, sizeof(vmdir), "%s/libvirt/vms/%s", state_dir, sb->id);
	snprintf(overlay, sizeof(overlay), "%s/disk.qcow2", vmdir);

	/* The guest's filesystem is the whole disk (the image's is 4 GiB: it grew at boot). */
	x = run("df -B1 --output=size / | tail -1");
	size = strtoull(x->stdout_data, NULL, 10);
	print_message("  the guest's / has %llu bytes\n", size);
	assert_true(size > disk * 95 / 100);
	assert_true(size <= disk);
	saas_execution_free(x);
	/* The engine made the overlay a disk of the size's bytes, not the image's 4 GiB. */
	assert_int_equal(qcow2_virtual_size(overlay), disk);

	/* Its user takes all but DISK_WRITE_MB, then writes until the disk says no. */
	x = run("avail=$(df -B1 --output=avail / | tail -1); "
	        "fallocate -l $((avail - " STR(DISK_WRITE_MB) " * 1048576)) $HOME/pad && echo pad-ok; "
	        "dd if=/dev/zero of=$HOME/fill bs=1M 2>&1; echo dd-exit=$?; sync; df -B1 --output=avail / | tail -1");
	print_message("  %s", x->stdout_data);
	assert_non_null(strstr(x->stdout_data, "pad-ok"));
	assert_non_null(strstr(x->stdout_data, "No space left on device"));
	assert_non_null(strstr(x->stdout_data, "dd-exit=1"));
	saas_execution_free(x);

	/*
	 * The host: the overlay holds at most the disk and its tables, and the
	 * VM's whole directory (state, logs, sockets) not much more. The fall of
	 * the filesystem's free space is printed, not asserted: other tests and
	 * builds write to the same filesystem meanwhile.
	 */
	assert_int_equal(stat(overlay, &st), 0);
	allocated = (unsigned long long)st.st_blocks * 512;
	vm_total = allocated_under(vmdir);
	after = free_bytes(state_dir);
	print_message("  overlay: %llu bytes allocated (virtual %llu), the VM's directory %llu; host free space fell "
	              "by %lld bytes\n", allocated, disk, vm_total, (long long)(before - after));
	assert_true(allocated <= disk + slack);
	/* Besides the overlay: the console log (bounded at 1 MiB), keys, sockets, the domain's XML. */
	assert_true(vm_total <= allocated + (4ull << 20));
	/* It did fill: what the guest wrote went through to the overlay. */
	assert_true(allocated > ((unsigned long long)DISK_WRITE_MB << 20) * 3 / 4);
}

int main(void)
{
	/*
	 * The server first and asked last: the minute it must live is spent on the other tests.
	 * Then the disk fills up.
	 */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_start),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_tools),
		cmocka_unit_test(test_user_installs),
		cmocka_unit_test(test_pip_install_user),
		cmocka_unit_test(test_npm_install),
		cmocka_unit_test(test_clones),
		cmocka_unit_test(test_server_minute_later),
		cmocka_unit_test(test_disk_full),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
