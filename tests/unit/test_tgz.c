/*
 * The .tar.gz writer of /mcp.tgz (server/web/tgz.c) and the check of the
 * origin written into the package (server/web/mcp_package.c). An archive
 * must read back with tar -xzf, file for file, byte for byte, mode for mode;
 * Node's zlib reads it in tests/mcp/test_npx.mjs, and npm installs it there.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "web/internal.h"
#include "web/tgz.h"

static void test_crc32(void **state)
{
	(void)state;
	/* The check value of CRC-32/ISO-HDLC, and the same in two pieces. */
	assert_int_equal(aas_crc32(0, "123456789", 9), 0xcbf43926u);
	assert_int_equal(aas_crc32(aas_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
	assert_int_equal(aas_crc32(0, "", 0), 0);
}

/* The gzip member's frame: header, stored blocks each of at most 65535 bytes, and the trailer's size. */
static size_t check_frame(const unsigned char *gz, size_t len)
{
	size_t at = 10, total = 0;
	bool last = false;

	assert_true(len > 18);
	assert_memory_equal(gz, "\x1f\x8b\x08\x00", 4);
	while (!last) {
		unsigned int n, nn;
		assert_true(at + 5 <= len);
		assert_true(gz[at] == 0 || gz[at] == 1);
		last = gz[at] == 1;
		n = gz[at + 1] | (unsigned int)gz[at + 2] << 8;
		nn = gz[at + 3] | (unsigned int)gz[at + 4] << 8;
		assert_int_equal(n ^ 0xffffu, nn);
		assert_true(n == 65535 || last);
		at += 5 + n;
		total += n;
	}
	assert_int_equal(at + 8, len);
	assert_int_equal(gz[at + 4] | gz[at + 5] << 8 | gz[at + 6] << 16 | (uint32_t)gz[at + 7] << 24, (uint32_t)total);
	return total;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void test_round_trip(void **state)
{
	enum { BIG = 200000 }; /* four stored blocks */
	char dir[] = "/tmp/aas-test-tgz.XXXXXX", path[256], cmd[600];
	unsigned char *big = malloc(BIG), *gz = NULL;
	size_t gz_len, len;
	struct stat st;
	FILE *f;

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (unsigned char)(i * 7 + (i >> 9));
	const struct aas_tgz_file files[] = {
		{ .name = "package/package.json", .data = "{\"name\": \"x\"}\n", .len = 14, .mode = 0644 },
		{ .name = "package/bin/run.js", .data = "#!/usr/bin/env node\n", .len = 20, .mode = 0755 },
		{ .name = "package/empty", .data = "", .len = 0, .mode = 0600 },
		{ .name = "package/big.bin", .data = big, .len = BIG, .mode = 0644 },
		/* 99 bytes: the longest name the field holds with its NUL. */
		{ .name = "package/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  .data = "z", .len = 1, .mode = 0644 },
	};
	assert_int_equal(strlen(files[4].name), 99);
	assert_int_equal(aas_tgz_make(&gz, &gz_len, files, 5, 1 << 20), 0);
	assert_int_equal(check_frame(gz, gz_len) % 512, 0);

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a.tgz", dir);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(gz, 1, gz_len, f), gz_len);
	assert_int_equal(fclose(f), 0);
	/* gzip -t checks the CRC and the size; tar reads the headers and their checksums. */
	snprintf(cmd, sizeof(cmd), "cd %s && gzip -t a.tgz && tar -xzf a.tgz", dir);
	assert_int_equal(system(cmd), 0);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *got;
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		assert_int_equal(stat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		/* tar applies the umask; the bits it may not clear are the owner's. */
		assert_int_equal(st.st_mode & 0700, files[i].mode & 0700);
		assert_int_equal(st.st_mtime, AAS_TGZ_MTIME);
		assert_non_null(got = read_all(path, &len));
		assert_int_equal(len, files[i].len);
		if (len)
			assert_memory_equal(got, files[i].data, len);
		free(got);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	free(gz);

	/* The same files make the same bytes: npm and caches see one package. */
	{
		unsigned char *again = NULL;
		size_t again_len;
		assert_int_equal(aas_tgz_make(&gz, &gz_len, files, 5, 1 << 20), 0);
		assert_int_equal(aas_tgz_make(&again, &again_len, files, 5, 1 << 20), 0);
		assert_int_equal(gz_len, again_len);
		assert_memory_equal(gz, again, gz_len);
		free(again);
		free(gz);
	}
	free(big);
}

static void test_empty_and_bounds(void **state)
{
	unsigned char *gz = (unsigned char *)"not NULL";
	size_t len = 1;
	const struct aas_tgz_file long_name = { .name = "package/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	                                                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	                                        .data = "", .len = 0, .mode = 0644 };
	const struct aas_tgz_file empty_name = { .name = "", .data = "", .len = 0, .mode = 0644 };
	const struct aas_tgz_file bad_mode = { .name = "x", .data = "", .len = 0, .mode = 010000 };
	const struct aas_tgz_file one = { .name = "x", .data = "abc", .len = 3, .mode = 0644 };

	(void)state;
	/* No files: the two zero blocks that end an archive, in one stored block. */
	assert_int_equal(aas_tgz_make(&gz, &len, NULL, 0, 4096), 0);
	assert_int_equal(check_frame(gz, len), 1024);
	free(gz);

	assert_int_equal(strlen(long_name.name), 100);
	errno = 0;
	assert_int_equal(aas_tgz_make(&gz, &len, &long_name, 1, 1 << 20), -1);
	assert_int_equal(errno, EINVAL);
	assert_null(gz);
	assert_int_equal(len, 0);
	assert_int_equal(aas_tgz_make(&gz, &len, &empty_name, 1, 1 << 20), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(aas_tgz_make(&gz, &len, &bad_mode, 1, 1 << 20), -1);
	assert_int_equal(errno, EINVAL);

	/* One file: 512 + 512 + 1024 bytes of tar, framed in 10 + 5 + 8: 2071 fits 2071, not 2070. */
	assert_int_equal(aas_tgz_make(&gz, &len, &one, 1, 2071), 0);
	assert_int_equal(len, 2071);
	free(gz);
	assert_int_equal(aas_tgz_make(&gz, &len, &one, 1, 2070), -1);
	assert_int_equal(errno, EFBIG);
	assert_null(gz);
	/* A bound smaller than the file itself, or than a header, is refused without arithmetic going round. */
	assert_int_equal(aas_tgz_make(&gz, &len, &one, 1, 2), -1);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(aas_tgz_make(&gz, &len, &one, 1, 600), -1);
	assert_int_equal(errno, EFBIG);
}

static void test_origin(void **state)
{
	char out[300];

	(void)state;
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", "127.0.0.1:8080"));
	assert_string_equal(out, "http://127.0.0.1:8080");
	assert_true(aas_mcp_package_origin(out, sizeof(out), "https", "Sandbox.Example.COM"));
	assert_string_equal(out, "https://sandbox.example.com");
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", "[::1]:65535"));
	assert_string_equal(out, "http://[::1]:65535");
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", "[2001:db8::ffff:1.2.3.4]"));
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", "a-b.c1.d"));
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", "localhost"));

	/* Everything an attacker's Host could carry into the package's JSON or a URL. */
	static const char *const bad[] = {
		"", "a b", "a\"b", "a/b", "a\\b", "a?b", "a#b", "a@b", "user@host", "host:", "host:0", "host:65536",
		"host:123456", "host:80:80", "host:8a", "-a.b", "a-.b", "a..b", ".a", "a.", "a_b", "[::1", "[]", "[::1]x",
		"[::1]:", "[g::1]", "[::1%25eth0]", "ex\xc3\xa4mple.com", "a\tb", "a\nb", "http://a", "a%2fb",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(aas_mcp_package_origin(out, sizeof(out), "http", bad[i]));
	assert_false(aas_mcp_package_origin(out, sizeof(out), "http", NULL));

	/* A label of 63 bytes is a name, of 64 is not; a name of 254 bytes is not. */
	char name[300];
	memset(name, 'a', 63);
	name[63] = '\0';
	assert_true(aas_mcp_package_origin(out, sizeof(out), "http", name));
	memset(name, 'a', 64);
	name[64] = '\0';
	assert_false(aas_mcp_package_origin(out, sizeof(out), "http", name));
	for (size_t i = 0; i < 254; i++)
		name[i] = i % 2 ? '.' : 'a';
	name[253] = '\0';
	assert_true(aas_mcp_package_origin(out, sizeof(out), "https", name));
	name[253] = 'a';
	name[254] = '\0';
	assert_false(aas_mcp_package_origin(out, sizeof(out), "https", name));
	/* An out too small for the origin is refused, not cut. */
	assert_false(aas_mcp_package_origin(out, 10, "http", "example.com"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_empty_and_bounds),
		cmocka_unit_test(test_origin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
