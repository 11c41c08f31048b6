/*
 * A .tar.gz made in memory (tgz.c), for the npm package of /mcp.tgz: ustar
 * entries in one gzip member of stored deflate blocks. Stored blocks need no
 * compressor, only a CRC-32, and npm, tar and zlib read them as any other;
 * the package is some tens of KiB, so not compressing it costs nothing that
 * matters.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_WEB_TGZ_H
#define AAS_WEB_TGZ_H

#include <stddef.h>
#include <stdint.h>

/* One regular file of the archive. */
struct aas_tgz_file {
	const char *name;        /* its path in the archive, under 100 bytes ("package/bin/aas-mcp.js") */
	const void *data;
	size_t len;
	unsigned int mode;       /* 0644, 0755: permission bits only */
};

/* The modification time of every entry: npm's own for packed files, 1985-10-26 08:15:00 UTC, so a package is the same bytes whenever it is made. */
#define AAS_TGZ_MTIME 499162500

/*
 * Make the .tar.gz of n files into *out (malloc(); free() it), *out_len bytes,
 * if that is at most max bytes. 0, or -1 with errno: EINVAL (a name empty, of
 * 100 bytes or more, or a mode beyond 07777), EFBIG (the archive would pass
 * max), ENOMEM. *out is NULL on failure.
 */
int aas_tgz_make(unsigned char **out, size_t *out_len, const struct aas_tgz_file *files, size_t n, size_t max);

/* The CRC-32 of gzip and zip (ISO 3309, reflected 0xEDB88320), continued from crc (0 to start). */
uint32_t aas_crc32(uint32_t crc, const void *data, size_t len);

#endif
