/*
 * aas-nft: the one privileged step of an unprivileged engine, as narrow as
 * it can be. Installed with the file capability cap_net_admin (and nothing
 * else), executable only by the engine's group, it loads nftables input that
 * touches the engine's own tables and nothing else (nft_check.c), so that
 * the engine's unit needs no capability at all and nothing else it runs
 * (ssh-keygen, qemu-img) gets one.
 *
 *   aas-nft -f FILE        load FILE (as nft -f FILE)
 *   aas-nft WORD...        run one command (as nft WORD...), e.g. list counter inet T c_200001
 *   aas-nft --check        exit 0 when this process holds CAP_NET_ADMIN
 *
 * It talks to the kernel through nft's own library, libnftables (loaded at
 * run time: Debian's nft is built on it, and it has no -dev package
 * installed by default), and prints what nft would: listings on stdout,
 * errors on stderr; exit 0 on success, 1 on a failure, 2 on a refusal.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nft_check.h"

#define EXIT_REFUSED 2

/* libnftables' API (nftables/libnftables.h), stable since 0.9. */
struct nft_ctx;
struct nft_api {
	struct nft_ctx *(*ctx_new)(uint32_t flags);
	void (*ctx_free)(struct nft_ctx *ctx);
	int (*buffer_output)(struct nft_ctx *ctx);
	int (*buffer_error)(struct nft_ctx *ctx);
	const char *(*output)(struct nft_ctx *ctx);
	const char *(*error)(struct nft_ctx *ctx);
	int (*run)(struct nft_ctx *ctx, const char *buf);
};

static bool has_net_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	return (d[CAP_NET_ADMIN / 32].effective >> (CAP_NET_ADMIN % 32)) & 1;
}

static void *sym(void *lib, const char *name, bool *ok)
{
	void *p = dlsym(lib, name);

	if (!p)
		*ok = false;
	return p;
}

static int api_load(struct nft_api *a)
{
	void *lib = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
	bool ok = true;

	if (!lib) {
		fprintf(stderr, "aas-nft: cannot load libnftables.so.1 (install libnftables1): %s\n", dlerror());
		return -1;
	}
	/* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. */
	*(void **)&a->ctx_new = sym(lib, "nft_ctx_new", &ok);
	*(void **)&a->ctx_free = sym(lib, "nft_ctx_free", &ok);
	*(void **)&a->buffer_output = sym(lib, "nft_ctx_buffer_output", &ok);
	*(void **)&a->buffer_error = sym(lib, "nft_ctx_buffer_error", &ok);
	*(void **)&a->output = sym(lib, "nft_ctx_get_output_buffer", &ok);
	*(void **)&a->error = sym(lib, "nft_ctx_get_error_buffer", &ok);
	*(void **)&a->run = sym(lib, "nft_run_cmd_from_buffer", &ok);
	if (!ok) {
		fprintf(stderr, "aas-nft: libnftables.so.1 lacks a function it needs\n");
		return -1;
	}
	return 0;
}

/* The whole of fd, NUL-terminated, at most AAS_NFT_INPUT_MAX bytes; NULL with a message otherwise. */
static char *read_all(int fd, const char *name)
{
	size_t len = 0, cap = 64 * 1024;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		goto oom;
	for (;;) {
		if (len == cap) {
			char *bigger;
			if (cap >= AAS_NFT_INPUT_MAX) {
				fprintf(stderr, "aas-nft: %s: more than %d bytes\n", name, AAS_NFT_INPUT_MAX);
				free(buf);
				return NULL;
			}
			cap *= 2;
			if (!(bigger = realloc(buf, cap + 1)))
				goto oom;
			buf = bigger;
		}
		n = read(fd, buf + len, cap - len);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "aas-nft: reading %s: %s\n", name, strerror(errno));
			free(buf);
			return NULL;
		}
		len += (size_t)n;
	}
	if (memchr(buf, '\0', len)) {
		fprintf(stderr, "aas-nft: %s: a NUL byte in nftables input\n", name);
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
oom:
	free(buf);
	fprintf(stderr, "aas-nft: out of memory\n");
	return NULL;
}

/* The command words joined by spaces, as nft joins its arguments. */
static char *join(int argc, char **argv)
{
	size_t len = 1;
	char *s;

	for (int i = 0; i < argc; i++) {
		len += strlen(argv[i]) + 1;
		if (len > AAS_NFT_INPUT_MAX)
			return NULL;
	}
	if (!(s = calloc(1, len)))
		return NULL;
	for (int i = 0; i < argc; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, argv[i]);
	}
	return s;
}

int main(int argc, char **argv)
{
	struct nft_api api;
	struct nft_ctx *ctx = NULL;
	char *text = NULL, why[256];
	int rc = EXIT_FAILURE, fd;

	/* Nothing it runs may gain a privilege; it runs nothing, but says so. */
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (argc == 2 && strcmp(argv[1], "--check") == 0)
		return has_net_admin() ? EXIT_SUCCESS : EXIT_FAILURE;
	if (argc < 2) {
		fprintf(stderr, "usage: aas-nft -f FILE | aas-nft WORD... | aas-nft --check\n");
		return EXIT_REFUSED;
	}
	if (strcmp(argv[1], "-f") == 0) {
		if (argc != 3) {
			fprintf(stderr, "usage: aas-nft -f FILE\n");
			return EXIT_REFUSED;
		}
		/* Opened as the caller: the capability reads no file the engine could not. */
		if ((fd = open(argv[2], O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
			fprintf(stderr, "aas-nft: %s: %s\n", argv[2], strerror(errno));
			return EXIT_FAILURE;
		}
		text = read_all(fd, argv[2]);
		close(fd);
	} else if (argv[1][0] == '-') {
		fprintf(stderr, "aas-nft: option %s is not taken\n", argv[1]);
		return EXIT_REFUSED;
	} else if (!(text = join(argc - 1, argv + 1))) {
		fprintf(stderr, "aas-nft: the command is too long\n");
		return EXIT_REFUSED;
	}
	if (!text)
		return EXIT_FAILURE;
	if (!aas_nft_check(text, why, sizeof(why))) {
		fprintf(stderr, "aas-nft: refused: %s\n", why);
		rc = EXIT_REFUSED;
		goto out;
	}
	if (api_load(&api) < 0)
		goto out;
	if (!(ctx = api.ctx_new(0))) {
		fprintf(stderr, "aas-nft: cannot make an nftables context\n");
		goto out;
	}
	api.buffer_output(ctx);
	api.buffer_error(ctx);
	if (api.run(ctx, text) == 0)
		rc = EXIT_SUCCESS;
	fputs(api.output(ctx), stdout);
	fputs(api.error(ctx), stderr);
out:
	if (ctx)
		api.ctx_free(ctx);
	free(text);
	return rc;
}
