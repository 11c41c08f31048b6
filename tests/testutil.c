#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

char *saas_test_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/saas-test-XXXXXX", base) < 0)
		return NULL;
	if (!mkdtemp(path)) {
		perror("mkdtemp");
		free(path);
		return NULL;
	}
	return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

void saas_test_rmdir(char *dir)
{
	if (!dir)
		return;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

char *saas_test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (data = malloc((size_t)n + 1))) {
		if (fread(data, 1, (size_t)n, f) != (size_t)n) {
			free(data);
			data = NULL;
		} else {
			data[n] = '\0';
			if (len)
				*len = (size_t)n;
		}
	}
	fclose(f);
	return data;
}

int saas_test_engine_options(saas_engine_options *o, const saas_driver *driver, char **dir, char **url)
{
	*url = NULL;
	if (!(*dir = saas_test_tmpdir()) || !(*url = saas_test_store_url(*dir))) {
		fprintf(stderr, "cannot make a state directory and store for the engine\n");
		saas_test_rmdir(*dir);
		*dir = NULL;
		return -1;
	}
	o->state_dir = *dir;
	o->store_url = *url;
	o->driver = driver;
	return 0;
}

char *saas_test_account_key(saas_engine *engine, const char *name, int64_t credit, char *id, size_t idsize)
{
	saas_account *acc = NULL;
	char *key = NULL;

	if (saas_account_create(&acc, engine, name, credit, 0) != SAAS_OK)
		return NULL;
	if (saas_key_create(&key, NULL, engine, acc->id, name, 0) != SAAS_OK)
		key = NULL;
	else if (id)
		snprintf(id, idsize, "%s", acc->id);
	saas_account_free(acc);
	return key;
}

int saas_test_store_is_postgres(void)
{
	const char *kind = getenv("SAAS_TEST_STORE");

	return kind && strcmp(kind, "postgres") == 0;
}

char *saas_test_store_url(const char *dir)
{
	char *url;

	if (saas_test_store_is_postgres()) {
		const char *pgdir = getenv("SAAS_TEST_PGDIR");
		if (!pgdir) {
			fprintf(stderr, "SAAS_TEST_STORE=postgres needs SAAS_TEST_PGDIR\n");
			return NULL;
		}
		return saas_test_pg_fresh_url(pgdir);
	}
	if (asprintf(&url, "sqlite:%s/test.db", dir) < 0)
		return NULL;
	return url;
}

static void *watchdog_main(void *arg)
{
	unsigned int left = (unsigned int)(uintptr_t)arg;
	char pid[32];
	pid_t child;

	while ((left = sleep(left)) > 0)
		;
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	fprintf(stderr, "\n*** watchdog: still running after %u s: every thread's stack follows, then abort ***\n",
	        (unsigned int)(uintptr_t)arg);
	fflush(NULL);
	if ((child = fork()) == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execlp("gdb", "gdb", "-p", pid, "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt",
		       (char *)NULL);
		fprintf(stderr, "watchdog: gdb is not installed: no stacks\n");
		_exit(127);
	}
	if (child > 0)
		waitpid(child, NULL, 0);
	abort();
	return NULL;
}

void saas_test_watchdog(unsigned int seconds)
{
	const char *env = getenv("SAAS_TEST_WATCHDOG");
	pthread_t t;

	if (env)
		seconds = (unsigned int)strtoul(env, NULL, 10);
	if (seconds == 0)
		return;
	/* Yama's ptrace_scope 1 lets only ancestors attach: let the watchdog's gdb, our child, in. */
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	if (pthread_create(&t, NULL, watchdog_main, (void *)(uintptr_t)seconds) == 0)
		pthread_detach(t);
}
