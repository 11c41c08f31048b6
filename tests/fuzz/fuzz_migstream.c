/*
 * A fork's migration stream split (lib/driver/libvirt/migstream.c), read from
 * hostile bytes: what a VM's QEMU wrote, which a tenant who escaped into it
 * could have written. The guest RAM's block is 16 pages here.
 *
 * Oracle: nothing is read or written outside the buffers (the sanitizers);
 * the memory file never grows past the block, whatever offsets the stream
 * names; the stream kept is never longer than the one read (the
 * split only takes out), and says how long it is; the pages counted are at
 * most the block's.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/migstream.h"
#include "saas/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BLOCK (16u * 4096u)

static off_t size_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? st.st_size : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int in = memfd_create("in", MFD_CLOEXEC), out = memfd_create("out", MFD_CLOEXEC),
	    ram = memfd_create("ram", MFD_CLOEXEC), rc;
	struct saas__lv_split_stats st;

	if (in < 0 || out < 0 || ram < 0 || (size && write(in, data, size) != (ssize_t)size) ||
	    lseek(in, 0, SEEK_SET) != 0 || ftruncate(ram, BLOCK) < 0)
		abort();
	rc = saas__lv_stream_split(in, out, ram, "aas-mem", BLOCK, &st);
	if (size_of(ram) != BLOCK)
		abort();
	if (rc == SAAS_OK && (st.out_bytes > size || size_of(out) != (off_t)st.out_bytes || st.pages > BLOCK / 4096 ||
	                      st.zero_pages > size))
		abort();
	if (rc != SAAS_OK && rc != SAAS_ENOTSUP && rc != SAAS_EIO)
		abort();
	close(in);
	close(out);
	close(ram);
	return 0;
}
