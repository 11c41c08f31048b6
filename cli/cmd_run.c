/*
 * aas run: run code in a sandbox's code context (docs/code.md), as a
 * notebook cell: its output streamed, its results printed or written out.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas run ID [--language python|javascript|bash] [--context CTX] [-e NAME=VALUE]...\n"
	"              [--timeout DURATION] [--out-dir DIR | --json] [FILE|-]\n"
	"\n"
	"Run code in a sandbox's code context, as a notebook cell: the code comes from FILE,\n"
	"or from stdin when FILE is - or not given (at most 1 MiB). Its stdout and stderr go\n"
	"to yours as it prints them; each result's text/plain is printed, the last\n"
	"expression's value last. A result with an image/png, image/jpeg, application/pdf\n"
	"or image/svg+xml format is written to DIR (default: the current directory) as\n"
	"result-N.EXT, N the first free number from 1 (an existing file is never\n"
	"overwritten), and its path printed instead of its text.\n"
	"--language runs in that language's default context (python when neither is given);\n"
	"--context in one made through the API; not both. -e sets a variable for this run only.\n"
	"--timeout defaults to 60s, at most 1h; the context lives on after it.\n"
	"--json prints nothing as the run goes and writes no file: at its end, the execution\n"
	"as one JSON object (the REST API's: stdout, stderr, results with every format, binary\n"
	"ones in base64, error, status).\n"
	"Ctrl-C interrupts the run (its interpreter is interrupted within a second, silent\n"
	"or not; its context and variables live on) and aas exits with 130; a second\n"
	"Ctrl-C leaves at once.\n"
	"Exit status: 0 when the code ran to its end; 1 when it raised (its name, value and\n"
	"traceback go to stderr); 124 when it timed out; 130 when interrupted; 2, 3, 4, 5 or 6\n"
	"when it could not run (see `aas --help`).\n";

/* Binary formats written to files, and the extension each gets. */
static const struct {
	const char *mime, *ext;
} binary_formats[] = {
	{ "image/png", "png" }, { "image/jpeg", "jpg" }, { "application/pdf", "pdf" }, { "image/svg+xml", "svg" },
};

/* Files written past this many free numbers tried are refused: a bound on a directory full of result-N files. */
#define RUN_NAMES_MAX 10000

/*
 * Ctrl-C while the code runs. SIGINT is blocked in every thread and taken by
 * one of ours with sigwait() (as `aas exec` takes it), so the library is
 * never called from a handler. The first asks the run to stop: the event
 * callback answers its next event (a silent run's tick each second
 * included) with "cancel", on which the library closes
 * the run's connection, which interrupts the interpreter and keeps its
 * context. The second leaves at once.
 */
struct interrupts {
	pthread_t tid;
	sigset_t set, old;          /* {SIGINT}; the mask to restore */
	atomic_uint count;          /* Ctrl-Cs so far */
	atomic_bool done;           /* the run returned: the thread leaves */
};

static void *interrupt_main(void *arg)
{
	struct interrupts *in = arg;

	for (;;) {
		int sig;

		if (sigwait(&in->set, &sig) != 0)
			continue;
		if (atomic_load(&in->done))
			break;
		if (atomic_fetch_add(&in->count, 1) == 0) {
			fputs("aas: interrupting the run (Ctrl-C again to leave without waiting)\n", stderr);
			continue;
		}
		/* Die of SIGINT, as a shell expects of a program its user interrupted (it reports 130). */
		fputs("aas: left without waiting; the run may go on until it next prints or times out\n", stderr);
		signal(SIGINT, SIG_DFL);
		pthread_sigmask(SIG_UNBLOCK, &in->set, NULL);
		raise(SIGINT);
		_exit(130); /* not reached */
	}
	return NULL;
}

/*
 * Take Ctrl-C from here on (before any thread of the library starts, so that
 * they all block it). Not when SIGINT is ignored (a `&` job of a shell
 * without job control, nohup): then it stays ignored. false when not taken.
 */
static bool interrupts_take(struct interrupts *in)
{
	struct sigaction sa;

	memset(in, 0, sizeof(*in));
	atomic_init(&in->count, 0);
	atomic_init(&in->done, false);
	if (sigaction(SIGINT, NULL, &sa) < 0 || sa.sa_handler == SIG_IGN)
		return false;
	sigemptyset(&in->set);
	sigaddset(&in->set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &in->set, &in->old);
	if (pthread_create(&in->tid, NULL, interrupt_main, in) != 0) {
		pthread_sigmask(SIG_SETMASK, &in->old, NULL);
		return false;
	}
	return true;
}

/* Stop taking Ctrl-C; how many there were. */
static unsigned int interrupts_release(struct interrupts *in)
{
	atomic_store(&in->done, true);
	pthread_kill(in->tid, SIGINT);
	pthread_join(in->tid, NULL);
	pthread_sigmask(SIG_SETMASK, &in->old, NULL);
	return atomic_load(&in->count);
}

struct run_state {
	const char *out_dir;
	unsigned int next;   /* the next result-N number to try */
	int failed;          /* a result could not be written */
	bool json;           /* --json: nothing printed or written as the run goes */
	struct interrupts *intr;  /* or NULL when Ctrl-C is not taken */
};

/* Write one format to out_dir/result-N.EXT (N free, never overwriting) and print the path. 0, or -1 reported. */
static int write_format(struct run_state *st, const saas_code_format *f, const char *ext)
{
	char path[PATH_MAX];
	size_t off = 0;
	int fd = -1, n;

	for (; st->next <= RUN_NAMES_MAX; st->next++) {
		n = snprintf(path, sizeof(path), "%s/result-%u.%s", st->out_dir, st->next, ext);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			aas_error(AAS_EXIT_ERROR, "--out-dir is too long: %s", st->out_dir);
			return -1;
		}
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		aas_error(AAS_EXIT_ERROR, "cannot write a result to %s: %s", st->out_dir,
		          st->next > RUN_NAMES_MAX ? "result-1 to result-10000 all exist" : strerror(errno));
		return -1;
	}
	st->next++;
	while (off < f->len) {
		ssize_t w = write(fd, f->data + off, f->len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", path, strerror(errno));
			close(fd);
			unlink(path); /* not half a file under a name that says it is the result */
			return -1;
		}
		off += (size_t)w;
	}
	if (close(fd) < 0) {
		aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", path, strerror(errno));
		unlink(path);
		return -1;
	}
	printf("%s\n", path);
	return 0;
}

/* A result as a notebook shows it: its binary formats as files, else its text/plain. */
static void print_result(struct run_state *st, const saas_code_result *res)
{
	const saas_code_format *text = NULL;
	bool wrote = false;
	size_t i, k;

	for (i = 0; i < res->count; i++) {
		const saas_code_format *f = res->formats[i];

		if (strcmp(f->mime, "text/plain") == 0)
			text = f;
		for (k = 0; k < sizeof(binary_formats) / sizeof(binary_formats[0]); k++) {
			if (strcmp(f->mime, binary_formats[k].mime) != 0)
				continue;
			if (write_format(st, f, binary_formats[k].ext) < 0)
				st->failed = 1;
			else
				wrote = true;
		}
	}
	if (!wrote && text) {
		fwrite(text->data, 1, text->len, stdout);
		if (text->len == 0 || text->data[text->len - 1] != '\n')
			putchar('\n');
	}
	fflush(stdout);
}

/* As the run goes: output to ours, flushed per chunk; results but the main one (printed last, at the end). */
static int on_event(void *userdata, const saas_code_event *ev)
{
	struct run_state *st = userdata;

	if (st->intr && atomic_load(&st->intr->count))
		return 1; /* Ctrl-C: cancel; what comes after it is not shown */
	if (st->json)
		return 0;
	switch (ev->type) {
	case SAAS_CODE_EVENT_STDOUT:
	case SAAS_CODE_EVENT_STDERR: {
		FILE *f = ev->type == SAAS_CODE_EVENT_STDERR ? stderr : stdout;

		/* A reader that went away (EPIPE) does not stop the code: it runs to its end. */
		if (fwrite(ev->text, 1, ev->len, f) == ev->len)
			fflush(f);
		break;
	}
	case SAAS_CODE_EVENT_RESULT:
		if (!ev->result->is_main)
			print_result(st, ev->result);
		break;
	default:
		break;
	}
	return 0;
}

/* The code from `file` ("-" or NULL: stdin), NUL-terminated; over SAAS_CODE_SOURCE_MAX is read one byte past. */
static char *read_code(const char *file, size_t *len)
{
	size_t cap = 65536;
	char *buf = NULL, *p;
	int fd = STDIN_FILENO, saved;
	ssize_t n;

	*len = 0;
	if (file && strcmp(file, "-") != 0 && (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	if (!(buf = malloc(cap)))
		goto fail;
	while (*len <= SAAS_CODE_SOURCE_MAX) {
		if (*len + 1 >= cap) {
			if (!(p = realloc(buf, cap * 2)))
				goto fail;
			buf = p;
			cap *= 2;
		}
		n = read(fd, buf + *len, cap - 1 - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	buf[*len] = '\0';
	if (fd != STDIN_FILENO)
		close(fd);
	return buf;
fail:
	saved = errno;
	free(buf);
	if (fd != STDIN_FILENO)
		close(fd);
	errno = saved;
	return NULL;
}

int aas_cmd_run(aas_ctx *ctx, int argc, char **argv)
{
	saas_code_run_options opts = SAAS_CODE_RUN_OPTIONS_INIT;
	struct run_state st = { ".", 1, 0, false, NULL };
	struct interrupts intr;
	bool taking = false, out_dir = false;
	unsigned int interrupted = 0;
	saas_client *client = NULL;
	saas_code_execution *ex = NULL;
	const char *pos[2] = { NULL, NULL }, *v, **env = NULL;
	char *code_text = NULL;
	size_t nenv = 0, len = 0, k;
	int64_t secs = 0;
	int i, r, rc, code = AAS_EXIT_OK, n = 0;

	if (!(env = calloc((size_t)argc + 1, sizeof(*env))))
		return aas_error(AAS_EXIT_ERROR, "out of memory");
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-") == 0) {
			/* stdin, as an operand (aas_arg takes anything starting with '-' for an option) */
			if (n >= 2) {
				code = aas_usage_error("run", "unexpected argument '-'");
				goto out;
			}
			pos[n++] = argv[i];
		} else if ((r = aas_pair_opt("run", argc, argv, &i, "--env", "-e", "NAME=VALUE", env, &nenv,
		                             (size_t)argc)) != 0) {
			if (r < 0)
				goto usage;
		} else if ((r = aas_opt("run", argc, argv, &i, "--language", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			opts.language = v;
		} else if ((r = aas_opt("run", argc, argv, &i, "--context", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			opts.context_id = v;
		} else if ((r = aas_opt("run", argc, argv, &i, "--out-dir", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			st.out_dir = v;
			out_dir = true;
		} else if ((r = aas_opt("run", argc, argv, &i, "--timeout", NULL, &v)) != 0) {
			if (r < 0)
				goto usage;
			if ((code = aas_duration("run", v, &secs)) != AAS_EXIT_OK)
				goto out;
		} else if ((code = aas_arg(ctx, "run", argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK) {
			goto out;
		}
	}
	if ((code = aas_args_done(ctx, "run", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		goto out;
	code = AAS_EXIT_OK;
	if (ctx->json && out_dir) {
		code = aas_usage_error("run", "--out-dir and --json cannot be given together (--json prints the images, in base64)");
		goto out;
	}
	st.json = ctx->json;
	if (opts.language && opts.context_id) {
		code = aas_usage_error("run", "--language and --context cannot be given together (a context has its language)");
		goto out;
	}
	if (secs > SAAS_CODE_TIMEOUT_MAX_MS / 1000) {
		code = aas_usage_error("run", "--timeout is at most 1h");
		goto out;
	}
	if (!*st.out_dir) {
		code = aas_usage_error("run", "--out-dir is empty");
		goto out;
	}
	opts.timeout_ms = secs * 1000;
	if (nenv)
		opts.env = env;
	if (!(code_text = read_code(pos[1], &len))) {
		code = aas_error(AAS_EXIT_USAGE, "run: cannot read %s: %s", pos[1] && strcmp(pos[1], "-") != 0 ? pos[1] : "stdin",
		                 strerror(errno));
		goto out;
	}
	if (len > SAAS_CODE_SOURCE_MAX) {
		code = aas_error(AAS_EXIT_USAGE, "run: the code is over 1 MiB: copy it in with `aas cp` and run it from there");
		goto out;
	}
	for (k = 0; k < len && strchr(" \t\r\n", code_text[k]); k++)
		;
	if (k == len) {
		code = aas_error(AAS_EXIT_USAGE, "run: no code to run (%s is empty)",
		                 pos[1] && strcmp(pos[1], "-") != 0 ? pos[1] : "stdin");
		goto out;
	}
	if (memchr(code_text, '\0', len)) {
		code = aas_error(AAS_EXIT_USAGE, "run: the code holds a NUL byte: it must be text");
		goto out;
	}
	taking = interrupts_take(&intr);
	if (taking)
		st.intr = &intr;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		goto out;
	opts.on_event = on_event;
	opts.userdata = &st;
	rc = saas_code_run(&ex, client, pos[0], code_text, &opts, 0);
	if (taking) {
		interrupted = interrupts_release(&intr);
		taking = false;
	}
	/* Interrupted, and the run did not end on its own before the cancel took: 128 + SIGINT. */
	if (interrupted && (rc != SAAS_OK || ex->status == SAAS_CODE_CANCELLED)) {
		if (rc == SAAS_OK && ctx->json)
			aas_json_print(saas__wire_code_execution(ex, false));
		else if (rc == SAAS_OK)
			fprintf(stderr, "aas: interrupted; the context and its variables live on\n");
		code = 128 + SIGINT;
		goto out;
	}
	if (rc != SAAS_OK) {
		code = aas_fail(rc, pos[0]);
		/* The code could not run at all (docs/cli.md): 5, which its own failure's 1 cannot be taken for. */
		if (code == AAS_EXIT_ERROR)
			code = AAS_EXIT_SERVER;
		goto out;
	}
	if (ctx->json) {
		if ((code = aas_json_print(saas__wire_code_execution(ex, false))) != AAS_EXIT_OK)
			goto out;
	} else {
		/* The main result last, as a notebook shows it (the others were printed as they came). */
		for (k = 0; k < ex->result_count; k++)
			if (ex->results[k]->is_main)
				print_result(&st, ex->results[k]);
		if (ex->stdout_truncated || ex->stderr_truncated || ex->results_truncated)
			fprintf(stderr, "aas: some of the run's output or results were over their bounds and not shown\n");
	}
	if (ex->status == SAAS_CODE_TIMEDOUT) {
		code = aas_error(124, "the code timed out: raise --timeout (at most 1h); its context lives on");
	} else if (ex->error) {
		if (!ctx->json && ex->error->traceback && *ex->error->traceback) {
			fputs(ex->error->traceback, stderr);
			if (ex->error->traceback[strlen(ex->error->traceback) - 1] != '\n')
				fputc('\n', stderr);
		}
		code = aas_error(AAS_EXIT_ERROR, "the code raised %s: %s", ex->error->name ? ex->error->name : "an error",
		                 ex->error->value ? ex->error->value : "");
	} else if (ex->status != SAAS_CODE_DONE) {
		code = aas_error(AAS_EXIT_ERROR, "the run ended %s", saas_code_status_name(ex->status));
	} else if (st.failed) {
		code = AAS_EXIT_ERROR;
	}
	goto out;
usage:
	code = AAS_EXIT_USAGE;
out:
	if (taking)
		interrupts_release(&intr);
	saas_code_execution_free(ex);
	saas_client_free(client);
	free(code_text);
	free(env);
	return code;
}
