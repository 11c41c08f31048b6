/*
 * A .tar.gz made in memory (tgz.h): the tar archive first (POSIX ustar, as
 * npm's own packer writes it), then the gzip member around it (RFC 1952) of
 * deflate blocks of type 00, stored (RFC 1951 3.2.4): each holds up to
 * 65535 bytes as they are, after a byte saying whether it is the last and
 * the length twice (the second time inverted). Sizes are known before
 * anything is written, so each buffer is allocated once, after the bound is
 * checked.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/tgz.h"

#define BLOCK 512
#define NAME_FIELD 100
#define STORED_MAX 65535u    /* the most one stored deflate block holds: its length is 16 bits */
#define GZIP_HEAD 10
#define GZIP_TAIL 8          /* CRC-32 and the input's size mod 2^32, both little-endian */
#define STORED_HEAD 5        /* BFINAL and BTYPE in a byte of their own, LEN, NLEN */

/* The nibble table of the reflected polynomial: small, and fast enough for an archive of some KiB made once. */
static const uint32_t crc_nibble[16] = {
	0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
	0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c, 0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
};

uint32_t aas_crc32(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		crc = (crc >> 4) ^ crc_nibble[crc & 15];
		crc = (crc >> 4) ^ crc_nibble[crc & 15];
	}
	return ~crc;
}

static size_t padded(size_t n)
{
	return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* An octal number in a field of `width` bytes: width - 1 digits, zero-padded, and a NUL. */
static void octal(char *field, size_t width, unsigned long long v)
{
	char tmp[24];

	snprintf(tmp, sizeof(tmp), "%0*llo", (int)(width - 1), v);
	memcpy(field, tmp, width - 1);
	field[width - 1] = '\0';
}

/* One file's header block (ustar): everything not set here is zero, as the format has it for a plain file. */
static void tar_header(unsigned char *h, const struct aas_tgz_file *f)
{
	char *c = (char *)h;
	unsigned int sum = 0;

	memset(h, 0, BLOCK);
	memcpy(c, f->name, strlen(f->name));
	octal(c + 100, 8, f->mode);
	octal(c + 108, 8, 0);                  /* uid */
	octal(c + 116, 8, 0);                  /* gid */
	octal(c + 124, 12, f->len);
	octal(c + 136, 12, AAS_TGZ_MTIME);
	memset(c + 148, ' ', 8);               /* the checksum counts its own field as spaces */
	c[156] = '0';                          /* a regular file */
	memcpy(c + 257, "ustar", 6);           /* magic, with its NUL */
	memcpy(c + 263, "00", 2);              /* version */
	for (size_t i = 0; i < BLOCK; i++)
		sum += h[i];
	/* Six digits, a NUL and the space left from above: what tar itself writes. */
	octal(c + 148, 7, sum);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

int aas_tgz_make(unsigned char **out, size_t *out_len, const struct aas_tgz_file *files, size_t n, size_t max)
{
	unsigned char *tar = NULL, *gz = NULL, *p;
	size_t tar_len = 2 * BLOCK, blocks, gz_len, at = 0;
	int err = 0;

	*out = NULL;
	*out_len = 0;
	/* The sizes, each step checked against max (max is far below SIZE_MAX, so no sum below overflows). */
	for (size_t i = 0; i < n; i++) {
		size_t name_len = strlen(files[i].name);
		if (name_len == 0 || name_len >= NAME_FIELD || files[i].mode > 07777) {
			err = EINVAL;
			goto out;
		}
		size_t need = files[i].len > max ? 0 : BLOCK + padded(files[i].len);
		if (need == 0 || need > max || tar_len > max - need) {
			err = EFBIG;
			goto out;
		}
		tar_len += need;
	}
	blocks = (tar_len + STORED_MAX - 1) / STORED_MAX;
	gz_len = GZIP_HEAD + blocks * STORED_HEAD + tar_len + GZIP_TAIL;
	if (tar_len > max || gz_len > max) {
		err = EFBIG;
		goto out;
	}

	if (!(tar = calloc(1, tar_len)) || !(gz = malloc(gz_len))) {
		err = ENOMEM;
		goto out;
	}
	p = tar;
	for (size_t i = 0; i < n; i++) {
		tar_header(p, &files[i]);
		if (files[i].len)
			memcpy(p + BLOCK, files[i].data, files[i].len);
		p += BLOCK + padded(files[i].len);
	}
	/* The two zero blocks that end an archive are calloc()'s. */

	/* gzip: magic, deflate, no flags, no time (the archive's entries carry theirs), no extra flags, Unix. */
	memcpy(gz, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", GZIP_HEAD);
	at = GZIP_HEAD;
	for (size_t done = 0; done < tar_len;) {
		size_t len = tar_len - done < STORED_MAX ? tar_len - done : STORED_MAX;
		bool last = done + len == tar_len;
		gz[at++] = last ? 1 : 0; /* BFINAL, then BTYPE 00; the rest of the byte is padding */
		gz[at++] = (unsigned char)len;
		gz[at++] = (unsigned char)(len >> 8);
		gz[at++] = (unsigned char)~len;
		gz[at++] = (unsigned char)(~len >> 8);
		memcpy(gz + at, tar + done, len);
		at += len;
		done += len;
	}
	put_le32(gz + at, aas_crc32(0, tar, tar_len));
	put_le32(gz + at + 4, (uint32_t)tar_len);
	at += GZIP_TAIL;
	*out = gz;
	*out_len = at;
	gz = NULL;
out:
	free(tar);
	free(gz);
	if (err)
		errno = err;
	return err ? -1 : 0;
}
