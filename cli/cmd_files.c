/*
 * aas files: show a directory tree of a sandbox; or make a directory,
 * remove a path, or move one.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas files ID [PATH] [--depth N] [--json]\n"
	"       aas files ID PATH --mkdir | --remove | --move DEST [--replace]\n"
	"\n"
	"Show a directory tree in a sandbox (PATH defaults to /workspace; depth 3, at most 16).\n"
	"--mkdir makes directory PATH and its parents; --remove removes PATH, a directory with all in it;\n"
	"--move renames PATH to DEST (its parents made), which must not exist unless --replace and a file.\n";

/* --mkdir, --remove, --move: one call, a line saying what it did (or JSON). */
static int change(aas_ctx *ctx, saas_client *client, const char *id, const char *path, int op, const char *dest,
                  bool replace)
{
	int created = 0, rc;

	if (op == 'm')
		rc = saas_file_mkdir(&created, client, id, path, 0);
	else if (op == 'r')
		rc = saas_file_remove(client, id, path, 0);
	else
		rc = saas_file_rename(client, id, path, dest, replace ? SAAS_FILE_RENAME_REPLACE : 0);
	if (rc != SAAS_OK)
		return aas_fail_path(client, rc, id, path);
	if (ctx->json)
		return aas_json_print(op == 'm'   ? json_pack("{s:s,s:b}", "path", path, "created", created)
		                      : op == 'r' ? json_pack("{s:s}", "path", path)
		                                  : json_pack("{s:s,s:s}", "from", path, "path", dest));
	if (op == 'm')
		printf("%s %s\n", created ? "made" : "already there:", path);
	else if (op == 'r')
		printf("removed %s\n", path);
	else
		printf("moved %s to %s\n", path, dest);
	return AAS_EXIT_OK;
}

static int depth_of(const char *root, const char *path)
{
	size_t rl = strlen(root);
	int d = 0;

	if (strncmp(path, root, rl) == 0)
		path += rl;
	for (; *path; path++)
		if (*path == '/')
			d++;
	if (rl && root[rl - 1] != '/')
		d--;
	return d < 0 ? 0 : d;
}

int aas_cmd_files(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_file_list *l = NULL;
	const char *pos[2] = { NULL, NULL }, *v, *dest = NULL;
	int i, r, rc, code, n = 0, op = 0;
	bool replace = false;
	long depth = 0;
	char *end;

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("files", argc, argv, &i, "--depth", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			depth = strtol(v, &end, 10);
			if (*end || end == v || depth < 1 || depth > SAAS_LIST_DEPTH_MAX)
				return aas_usage_error("files", "bad depth '%s' (1-%d)", v, SAAS_LIST_DEPTH_MAX);
		} else if ((r = aas_opt("files", argc, argv, &i, "--move", NULL, &dest)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if (op && op != 'v')
				return aas_usage_error("files", "--mkdir, --remove and --move go alone");
			op = 'v';
		} else if (strcmp(argv[i], "--mkdir") == 0 || strcmp(argv[i], "--remove") == 0) {
			if (op)
				return aas_usage_error("files", "--mkdir, --remove and --move go alone");
			op = argv[i][2];
		} else if (strcmp(argv[i], "--replace") == 0) {
			replace = true;
		} else if ((code = aas_arg(ctx, "files", argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "files", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if (op && !pos[1])
		return aas_usage_error("files", "--mkdir, --remove and --move need a PATH");
	if (replace && op != 'v')
		return aas_usage_error("files", "--replace goes with --move");
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if (op) {
		code = change(ctx, client, pos[0], pos[1], op, dest, replace);
	} else if ((rc = saas_file_list_get(&l, client, pos[0], pos[1], (unsigned int)depth, 0, 0)) != SAAS_OK) {
		code = pos[1] ? aas_fail_path(client, rc, pos[0], pos[1]) : aas_fail(rc, pos[0]);
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_file_list(l));
	} else {
		int last[SAAS_LIST_DEPTH_MAX + 2];
		size_t k, j;

		memset(last, 0, sizeof(last));
		printf("%s\n", l->root);
		for (k = 0; k < l->count; k++) {
			const saas_file_entry *e = l->entries[k];
			int d = depth_of(l->root, e->path), x;

			if (d > SAAS_LIST_DEPTH_MAX)
				d = SAAS_LIST_DEPTH_MAX;
			if (strcmp(e->path, l->root) == 0)
				continue;
			/* Last among its siblings: no later entry at this depth before one shallower. */
			last[d] = 1;
			for (j = k + 1; j < l->count; j++) {
				int dj = depth_of(l->root, l->entries[j]->path);

				if (dj < d)
					break;
				if (dj == d) {
					last[d] = 0;
					break;
				}
			}
			for (x = 0; x < d; x++)
				fputs(last[x] ? "    " : "\xe2\x94\x82   ", stdout);
			fputs(last[d] ? "\xe2\x94\x94\xe2\x94\x80\xe2\x94\x80 " : "\xe2\x94\x9c\xe2\x94\x80\xe2\x94\x80 ", stdout);
			if (e->type == SAAS_FILE_DIRECTORY)
				printf("%s/\n", strrchr(e->path, '/') ? strrchr(e->path, '/') + 1 : e->path);
			else if (e->type == SAAS_FILE_SYMLINK)
				printf("%s@\n", strrchr(e->path, '/') ? strrchr(e->path, '/') + 1 : e->path);
			else
				printf("%s  (%lld bytes)\n", strrchr(e->path, '/') ? strrchr(e->path, '/') + 1 : e->path,
				       (long long)e->size);
		}
		if (l->truncated)
			fprintf(stderr, "aas: warning: listing cut short: list a subdirectory or lower --depth\n");
	}
	saas_file_list_free(l);
	saas_client_free(client);
	return code;
}
