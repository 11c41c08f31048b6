/*
 * aas files: show a directory tree of a sandbox.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas files ID [PATH] [--depth N] [--json]\n"
	"\n"
	"Show a directory tree in a sandbox (PATH defaults to /workspace; depth 3, at most 16).\n";

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
	const char *pos[2] = { NULL, NULL }, *v;
	int i, r, rc, code, n = 0;
	long depth = 0;
	char *end;

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("files", argc, argv, &i, "--depth", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			depth = strtol(v, &end, 10);
			if (*end || end == v || depth < 1 || depth > SAAS_LIST_DEPTH_MAX)
				return aas_usage_error("files", "bad depth '%s' (1-%d)", v, SAAS_LIST_DEPTH_MAX);
		} else if ((code = aas_arg(ctx, "files", argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "files", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_file_list_get(&l, client, pos[0], pos[1], (unsigned int)depth, 0, 0)) != SAAS_OK) {
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
