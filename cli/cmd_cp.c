/*
 * aas cp: copy a file into or out of a sandbox, streaming and binary-safe.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas cp SRC DST [--json]\n"
	"\n"
	"Copy one file into or out of a sandbox; exactly one side is ID:/path, like scp.\n"
	"A local side of - is stdin or stdout. A DST ending in / (or an existing local\n"
	"directory) takes the source's file name. Relative sandbox paths are under /workspace.\n"
	"  aas cp ./build.tar.gz sbx-abc:/workspace/\n"
	"  aas cp sbx-abc:/workspace/out.bin ./out.bin\n";

/* "ID:PATH" -> 1 with *id (malloc'd) and *path; 0 for a local path. */
static int split_remote(const char *s, char **id, const char **path)
{
	const char *colon = strchr(s, ':');

	if (!colon || colon == s || memchr(s, '/', (size_t)(colon - s)))
		return 0;
	*id = strndup(s, (size_t)(colon - s));
	*path = colon + 1;
	return 1;
}

static long fd_reader(void *userdata, void *buf, size_t size)
{
	int fd = *(int *)userdata;
	ssize_t n;

	do
		n = read(fd, buf, size);
	while (n < 0 && errno == EINTR);
	return (long)n;
}

static int fd_writer(void *userdata, const void *data, size_t size)
{
	int fd = *(int *)userdata;
	const char *p = data;

	while (size) {
		ssize_t n = write(fd, p, size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static int upload(aas_ctx *ctx, saas_client *client, const char *src, const char *id, const char *path)
{
	saas_file_write_options wo = SAAS_FILE_WRITE_OPTIONS_INIT;
	char *full = NULL;
	int fd = STDIN_FILENO, rc, code = AAS_EXIT_OK;
	int64_t size = -1;
	struct stat st;

	if (strcmp(src, "-") != 0) {
		if ((fd = open(src, O_RDONLY | O_CLOEXEC)) < 0)
			return aas_error(errno == ENOENT ? AAS_EXIT_NOTFOUND : AAS_EXIT_ERROR, "cannot open %s: %s", src,
			                 strerror(errno));
		if (fstat(fd, &st) == 0) {
			if (S_ISDIR(st.st_mode)) {
				close(fd);
				return aas_error(AAS_EXIT_USAGE, "%s is a directory: aas cp copies one file (tar it first)", src);
			}
			if (S_ISREG(st.st_mode))
				size = st.st_size;
			wo.mode = st.st_mode & 0777;
		}
	}
	if (!*path || path[strlen(path) - 1] == '/') {
		const char *b = strcmp(src, "-") == 0 ? NULL : base_name(src);
		size_t n;

		if (!b || !*b) {
			code = aas_usage_error("cp", "name the destination file, not a directory");
			goto out;
		}
		n = strlen(path) + strlen(b) + 1;
		if (!(full = malloc(n))) {
			code = aas_error(AAS_EXIT_ERROR, "out of memory");
			goto out;
		}
		snprintf(full, n, "%s%s", path, b);
		path = full;
	}
	if ((rc = saas_file_write_stream(client, id, path, fd_reader, &fd, size, &wo)) != SAAS_OK) {
		code = aas_fail_path(client, rc, id, path);
		goto out;
	}
	if (ctx->json)
		code = aas_json_print(json_pack("{s:s,s:s,s:s}", "sandbox_id", id, "path", path, "direction", "upload"));
out:
	if (fd != STDIN_FILENO)
		close(fd);
	free(full);
	return code;
}

static int download(aas_ctx *ctx, saas_client *client, const char *id, const char *path, const char *dst)
{
	char *target = NULL, *tmp = NULL;
	int fd = STDOUT_FILENO, rc, code = AAS_EXIT_OK;
	int64_t size = -1;
	struct stat st;
	size_t n;

	if (strcmp(dst, "-") == 0) {
		if (ctx->json)
			return aas_usage_error("cp", "--json cannot be used with - as the destination");
		if ((rc = saas_file_read_stream(&size, client, id, path, fd_writer, &fd)) != SAAS_OK)
			return aas_fail_path(client, rc, id, path);
		return AAS_EXIT_OK;
	}
	if ((stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) || dst[strlen(dst) - 1] == '/') {
		n = strlen(dst) + strlen(base_name(path)) + 2;
		if (!(target = malloc(n)))
			return aas_error(AAS_EXIT_ERROR, "out of memory");
		snprintf(target, n, "%s/%s", dst, base_name(path));
	} else if (!(target = strdup(dst))) {
		return aas_error(AAS_EXIT_ERROR, "out of memory");
	}
	/* Write beside the target and rename, so a failed copy leaves nothing half-written. */
	n = strlen(target) + sizeof(".aas-XXXXXX");
	if (!(tmp = malloc(n))) {
		code = aas_error(AAS_EXIT_ERROR, "out of memory");
		goto out;
	}
	snprintf(tmp, n, "%s.aas-XXXXXX", target);
	if ((fd = mkstemp(tmp)) < 0) {
		code = aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", target, strerror(errno));
		goto out;
	}
	{
		mode_t um = umask(0);

		umask(um);
		fchmod(fd, 0666 & ~um);
	}
	rc = saas_file_read_stream(&size, client, id, path, fd_writer, &fd);
	if (rc != SAAS_OK) {
		code = aas_fail_path(client, rc, id, path);
		unlink(tmp);
		goto out;
	}
	if (close(fd) < 0 || rename(tmp, target) < 0) {
		fd = -1;
		code = aas_error(AAS_EXIT_ERROR, "cannot write %s: %s", target, strerror(errno));
		unlink(tmp);
		goto out;
	}
	fd = -1;
	if (ctx->json)
		code = aas_json_print(json_pack("{s:s,s:s,s:s,s:I}", "sandbox_id", id, "path", path, "direction", "download",
		                                "bytes", (json_int_t)size));
out:
	if (fd >= 0 && fd != STDOUT_FILENO)
		close(fd);
	free(target);
	free(tmp);
	return code;
}

int aas_cmd_cp(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	const char *pos[2] = { NULL, NULL }, *spath = NULL, *dpath = NULL;
	char *sid = NULL, *did = NULL;
	int i, code, n = 0, srem, drem;

	for (i = 1; i < argc; i++) {
		/* "-" alone is stdin or stdout, an operand. */
		if (strcmp(argv[i], "-") == 0 && n < 2)
			pos[n++] = argv[i];
		else if ((code = aas_arg(ctx, "cp", argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK)
			return code;
	}
	if ((code = aas_args_done(ctx, "cp", help, n, 2, "SRC", "DST")) != AAS_GO)
		return code;
	srem = split_remote(pos[0], &sid, &spath);
	drem = split_remote(pos[1], &did, &dpath);
	if (srem == drem) {
		code = aas_usage_error("cp", "exactly one of SRC and DST must be ID:/path");
		goto out;
	}
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		goto out;
	if (drem)
		code = upload(ctx, client, pos[0], did, dpath);
	else
		code = download(ctx, client, sid, spath, pos[1]);
out:
	saas_client_free(client);
	free(sid);
	free(did);
	return code;
}
