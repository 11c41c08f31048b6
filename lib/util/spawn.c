#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"
#include "util/spawn.h"
#include "util/util.h"

extern char **environ;

#define KEEP_OUTPUT 4096

int saas__run(const char *const argv[], char **output)
{
	posix_spawn_file_actions_t fa;
	saas__buf out = SAAS__BUF_INIT;
	int pipefd[2] = { -1, -1 }, status = 0, rc = SAAS_OK;
	pid_t pid;
	char buf[4096];
	ssize_t n;

	if (output)
		*output = NULL;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, rc, "cannot run %s: %s", argv[0], strerror(rc));
	}
	while ((n = read(pipefd[0], buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		saas__buf_put(&out, buf, (size_t)n);
		/* Keep only the tail: that is where tools say what went wrong. */
		if (out.len > 2 * KEEP_OUTPUT) {
			memmove(out.data, out.data + out.len - KEEP_OUTPUT, KEEP_OUTPUT);
			out.len = KEEP_OUTPUT;
			out.data[out.len] = '\0';
		}
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		const char *tail = out.data ? out.data : "";
		size_t len = out.len;
		while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == ' '))
			len--;
		{
			size_t start = len;
			while (start > 0 && tail[start - 1] != '\n')
				start--;
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
			                 "%s failed (%s %d): %.*s", argv[0], WIFEXITED(status) ? "exit" : "signal",
			                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), (int)(len - start),
			                 tail + start);
		}
	}
	if (output && rc == SAAS_OK)
		*output = saas__buf_detach(&out, NULL);
	saas__buf_free(&out);
	return rc;
}
