/*
 * A fork's snapshot saves its VM's RAM the way a template's is kept: as a
 * file of the guest's memory that its children map copy-on-write (memfile.c),
 * not as pages in the migration stream that each child would load (and, on a
 * kernel that allocates what a read of fresh memory touches, hold whole).
 *
 * QEMU 7.2 cannot write RAM at fixed offsets of a file (that is 9.0's
 * mapped-ram), so the VM's ordinary stream is split here: the pages of the
 * guest RAM's block go into the memory file at their offsets, everything else
 * (the other RAM blocks: ROMs, video memory; the devices) stays a stream,
 * which a child loads with x-ignore-shared into a VM whose RAM maps the file.
 * The stream was saved with x-ignore-shared on too, though no block of the VM
 * was shared: its RAM setup then carries each block's address, and its
 * configuration the capability, which the child's QEMU checks.
 *
 * The format, as QEMU 7.2 writes it (migration/savevm.c, ram.c), only as far
 * as a stream needs to be followed to find the RAM in it:
 *   "QEVM", version 3
 *   0x07 configuration: u32 length, machine type, then subsections
 *        (0x05, u8 length, name, u32 version, fields)
 *   0x01 START / 0x02 PART / 0x03 END of the "ram" section: records, each a
 *        u64 of page offset | flags; MEM_SIZE lists the blocks (u8 length,
 *        name, u64 length, u64 address); PAGE carries 4096 bytes and ZERO one
 *        (its fill, 0), each naming its block (u8 length, name) unless
 *        CONTINUE says it is the last one named; EOS ends the section
 *   0x7e footer: u32 section id
 *   0x04 FULL: the devices, to the end, copied as they are.
 * Anything else (another iterable section, a capability that changes the
 * records) is SAAS_ENOTSUP: the caller keeps the whole stream, as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/libvirt/migstream.h"
#include "saas/sys/error.h"
#include "util/error.h"
#include "util/util.h"

#define QEVM_MAGIC 0x5145564du
#define QEVM_VERSION 3u
#define SEC_START 0x01
#define SEC_PART 0x02
#define SEC_END 0x03
#define SEC_FULL 0x04
#define SUBSECTION 0x05
#define CONFIGURATION 0x07
#define SEC_FOOTER 0x7e
#define F_ZERO 0x02u
#define F_MEM_SIZE 0x04u
#define F_PAGE 0x08u
#define F_EOS 0x10u
#define F_CONTINUE 0x20u
#define F_MASK 0xfffu                  /* the flags live in the page offset's low bits */
#define PAGE 4096u                     /* x86's target page */
#define BUF (1u << 20)
#define RUN_MAX (256u * PAGE)          /* pages written to the memory file at once: 1 MiB */
#define NAME_MAX_LEN 255u              /* a u8 length */
#define MACHINE_MAX 256u               /* the configuration's machine type */
#define CAPS_MAX 64u

struct io {
	int in, out, ram;
	unsigned char *rbuf, *wbuf;
	size_t rlen, rat, wlen;
	uint64_t out_bytes;
	/*
	 * The block's pages come in order of their offsets, a run of them at a
	 * time: gathered here and written with one call, not one a page (a
	 * system call per 4 KiB was most of a split's time).
	 */
	unsigned char *run;
	uint64_t run_at;                 /* the offset of run[0] */
	size_t run_len;
};

static int unknown(const char *what)
{
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "the VM's saved state holds %s, which the split of "
	                   "its RAM does not know", what);
}

static int io_fail(const char *what, int err)
{
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "%s the VM's saved state: %s", what, strerror(err));
}

/* The next bytes of the stream into the read buffer (none at its end). */
static int fill(struct io *io)
{
	ssize_t got;

	while ((got = read(io->in, io->rbuf, BUF)) < 0 && errno == EINTR)
		;
	if (got < 0)
		return io_fail("reading", errno);
	io->rlen = (size_t)got;
	io->rat = 0;
	return SAAS_OK;
}

/* n bytes of the stream; a stream that ends first is not one QEMU finished. */
static int get(struct io *io, void *p, size_t n)
{
	unsigned char *to = p;
	int rc;

	while (n) {
		size_t take;
		if (io->rat == io->rlen) {
			if ((rc = fill(io)) < 0)
				return rc;
			if (!io->rlen)
				return unknown("an end before its last section");
		}
		take = io->rlen - io->rat < n ? io->rlen - io->rat : n;
		memcpy(to, io->rbuf + io->rat, take);
		io->rat += take;
		to += take;
		n -= take;
	}
	return SAAS_OK;
}

static int write_all(int fd, const void *p, size_t n)
{
	const unsigned char *at = p;

	while (n) {
		ssize_t w = write(fd, at, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return io_fail("writing", w < 0 ? errno : EIO);
		at += w;
		n -= (size_t)w;
	}
	return SAAS_OK;
}

static int flush(struct io *io)
{
	int rc = write_all(io->out, io->wbuf, io->wlen);

	io->wlen = 0;
	return rc;
}

static int put(struct io *io, const void *p, size_t n)
{
	int rc;

	io->out_bytes += n;
	if (io->wlen + n > BUF && (rc = flush(io)) < 0)
		return rc;
	if (n > BUF)
		return write_all(io->out, p, n);
	memcpy(io->wbuf + io->wlen, p, n);
	io->wlen += n;
	return SAAS_OK;
}

/* Read n bytes and pass them on to the stream kept. */
static int pass(struct io *io, void *p, size_t n)
{
	int rc = get(io, p, n);

	return rc < 0 ? rc : put(io, p, n);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static int pass32(struct io *io, uint32_t *v)
{
	unsigned char b[4];
	int rc = pass(io, b, 4);

	*v = be32(b);
	return rc;
}

static int pass64(struct io *io, uint64_t *v)
{
	unsigned char b[8];
	int rc = pass(io, b, 8);

	*v = be64(b);
	return rc;
}

/* A u8-counted name into name (NUL-terminated, NAME_MAX_LEN + 1 bytes), passed on or not. */
static int name_of(struct io *io, char *name, bool keep)
{
	unsigned char len;
	int rc = keep ? pass(io, &len, 1) : get(io, &len, 1);

	if (rc < 0)
		return rc;
	if ((rc = keep ? pass(io, name, len) : get(io, name, len)) < 0)
		return rc;
	name[len] = '\0';
	return SAAS_OK;
}

/*
 * The configuration: the machine type, then the subsections QEMU 7.2 may
 * write (target page bits, capabilities, the uuid). *ignore_shared: the
 * capabilities name x-ignore-shared (then the RAM setup has addresses).
 */
static int configuration(struct io *io, bool *ignore_shared)
{
	unsigned char b[MACHINE_MAX], next;
	char name[NAME_MAX_LEN + 1];
	uint32_t len, version, n;
	int rc;

	*ignore_shared = false;
	if ((rc = pass32(io, &len)) < 0)
		return rc;
	if (len > MACHINE_MAX)
		return unknown("a machine type too long");
	if ((rc = pass(io, b, len)) < 0)
		return rc;
	for (;;) {
		/* A subsection, or the first section after the configuration. */
		if ((rc = get(io, &next, 1)) < 0)
			return rc;
		if (next != SUBSECTION) {
			io->rat--; /* get() took it from the buffer: it is there to read again */
			return SAAS_OK;
		}
		if ((rc = put(io, &next, 1)) < 0 || (rc = name_of(io, name, true)) < 0 || (rc = pass32(io, &version)) < 0)
			return rc;
		if (strcmp(name, "configuration/target-page-bits") == 0) {
			if ((rc = pass32(io, &n)) < 0)
				return rc;
			if (n != 12)
				return unknown("pages of another size");
		} else if (strcmp(name, "configuration/capabilities") == 0) {
			if ((rc = pass32(io, &n)) < 0)
				return rc;
			if (n > CAPS_MAX)
				return unknown("too many capabilities");
			for (uint32_t i = 0; i < n; i++) {
				if ((rc = name_of(io, name, true)) < 0)
					return rc;
				if (strcmp(name, "x-ignore-shared") == 0)
					*ignore_shared = true;
				else
					return unknown("a migration capability other than x-ignore-shared");
			}
		} else if (strcmp(name, "configuration/uuid") == 0) {
			if ((rc = pass(io, b, 16)) < 0)
				return rc;
		} else {
			return unknown("a configuration subsection");
		}
	}
}

struct ram {
	const char *block;               /* the block taken out */
	uint64_t bytes;                  /* its length */
	bool found;                      /* the setup listed it, of that length */
	bool ignore_shared;              /* the setup has each block's address */
	char last[NAME_MAX_LEN + 1];     /* the block last named (CONTINUE's) */
	bool named;
	unsigned char *written;          /* a bit per page of the block written */
	struct saas__lv_split_stats *st;
};

/* MEM_SIZE: the blocks and their lengths (and addresses), all passed on. */
static int mem_size(struct io *io, struct ram *r, uint64_t total)
{
	char name[NAME_MAX_LEN + 1];
	uint64_t len, addr;
	int rc;

	while (total) {
		if ((rc = name_of(io, name, true)) < 0 || (rc = pass64(io, &len)) < 0)
			return rc;
		if (r->ignore_shared && (rc = pass64(io, &addr)) < 0)
			return rc;
		if (len > total)
			return unknown("RAM blocks longer than their total");
		total -= len;
		if (strcmp(name, r->block) == 0) {
			if (len != r->bytes)
				return unknown("a guest RAM block of another size than the VM's");
			r->found = true;
		}
	}
	return SAAS_OK;
}

static int pwrite_all(int fd, const unsigned char *p, size_t n, uint64_t at)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return io_fail("writing a page of", w < 0 ? errno : EIO);
		p += w;
		at += (uint64_t)w;
		n -= (size_t)w;
	}
	return SAAS_OK;
}

/* The pages gathered, into the memory file at their offsets. */
static int run_flush(struct io *io)
{
	int rc = io->run_len ? pwrite_all(io->ram, io->run, io->run_len, io->run_at) : SAAS_OK;

	io->run_len = 0;
	return rc;
}

/* The bytes of one page of the block, or its zero: into the memory file, not the stream. */
static int block_page(struct io *io, struct ram *r, uint64_t offset, bool zero)
{
	unsigned char fill;
	uint64_t n = offset / PAGE;
	bool was = false;
	int rc;

	if (!r->found)
		return unknown("a page of a block its setup did not list");
	if (offset > r->bytes - PAGE)
		return unknown("a page past its block's end");
	was = r->written[n / 8] & (1u << (n % 8));
	if (zero) {
		if ((rc = get(io, &fill, 1)) < 0)
			return rc;
		if (fill != 0)
			return unknown("a page filled with a byte other than zero");
		r->st->zero_pages++;
		/* Holes read as zeros: only a page written before must become one again, after what is gathered. */
		if (!was)
			return SAAS_OK;
		r->written[n / 8] &= (unsigned char)~(1u << (n % 8));
		if ((rc = run_flush(io)) < 0)
			return rc;
		if (fallocate(io->ram, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, PAGE) < 0)
			return io_fail("clearing a page of", errno);
		return SAAS_OK;
	}
	/* A page that does not follow the run (or one past its size) writes the run first: the order is kept. */
	if (io->run_len && (offset != io->run_at + io->run_len || io->run_len == RUN_MAX) && (rc = run_flush(io)) < 0)
		return rc;
	if (!io->run_len)
		io->run_at = offset;
	if ((rc = get(io, io->run + io->run_len, PAGE)) < 0)
		return rc;
	io->run_len += PAGE;
	if (!was)
		r->st->pages++;
	r->written[n / 8] |= (unsigned char)(1u << (n % 8));
	return SAAS_OK;
}

/* One section's records of the "ram" section, to its EOS. */
static int ram_records(struct io *io, struct ram *r)
{
	unsigned char head[8], fill[PAGE];
	char name[NAME_MAX_LEN + 1];
	int rc;

	for (;;) {
		uint64_t v, offset, flags;
		if ((rc = get(io, head, 8)) < 0)
			return rc;
		v = be64(head);
		flags = v & F_MASK;
		offset = v & ~(uint64_t)F_MASK;
		if (flags == F_EOS)
			return (rc = run_flush(io)) < 0 ? rc : put(io, head, 8);
		if (flags == F_MEM_SIZE) {
			if ((rc = put(io, head, 8)) < 0 || (rc = mem_size(io, r, offset)) < 0)
				return rc;
			continue;
		}
		if ((flags & ~F_CONTINUE) != F_PAGE && (flags & ~F_CONTINUE) != F_ZERO)
			return unknown("a RAM record of other flags (compressed, XBZRLE, multifd)");
		if (!(flags & F_CONTINUE)) {
			if ((rc = name_of(io, name, false)) < 0)
				return rc;
			memcpy(r->last, name, sizeof(name));
			r->named = true;
		} else if (!r->named) {
			return unknown("a RAM record continuing no block");
		}
		if (strcmp(r->last, r->block) == 0) {
			if ((rc = block_page(io, r, offset, !(flags & F_PAGE))) < 0)
				return rc;
			continue;
		}
		/*
		 * Another block's: kept as it came. A CONTINUE of it follows a record
		 * of the same block, kept too, so the stream kept names it first.
		 */
		if ((rc = put(io, head, 8)) < 0)
			return rc;
		if (!(flags & F_CONTINUE)) {
			unsigned char len = (unsigned char)strlen(r->last);
			if ((rc = put(io, &len, 1)) < 0 || (rc = put(io, r->last, len)) < 0)
				return rc;
		}
		if ((rc = pass(io, fill, flags & F_PAGE ? PAGE : 1)) < 0)
			return rc;
	}
}

/* Everything left, the devices' sections and what follows them, as it is. */
static int copy_rest(struct io *io)
{
	int rc;

	do {
		if ((rc = put(io, io->rbuf + io->rat, io->rlen - io->rat)) < 0 || (rc = fill(io)) < 0)
			return rc;
	} while (io->rlen);
	return SAAS_OK;
}

static int split(struct io *io, struct ram *r)
{
	unsigned char b[8], type;
	char name[NAME_MAX_LEN + 1];
	uint32_t id, ram_id = 0, v;
	bool ram_open = false, ram_done = false;
	int rc;

	if ((rc = pass(io, b, 8)) < 0)
		return rc;
	if (be32(b) != QEVM_MAGIC || be32(b + 4) != QEVM_VERSION)
		return unknown("another format (not QEVM version 3)");
	for (;;) {
		if ((rc = get(io, &type, 1)) < 0)
			return rc;
		if (type == SEC_FULL) {
			/* The devices: the RAM is all behind. */
			if (!ram_done || !r->found)
				return unknown(r->found ? "devices before the RAM's last part" : "no guest RAM block");
			io->rat--;
			return copy_rest(io);
		}
		if ((rc = put(io, &type, 1)) < 0)
			return rc;
		/* The configuration has no section id, and comes first. */
		if (type == CONFIGURATION) {
			if (ram_open)
				return unknown("a configuration after the first section");
			if ((rc = configuration(io, &r->ignore_shared)) < 0)
				return rc;
			continue;
		}
		if ((rc = pass32(io, &id)) < 0)
			return rc;
		switch (type) {
		case SEC_START:
			if ((rc = name_of(io, name, true)) < 0 || (rc = pass32(io, &v)) < 0 || (rc = pass32(io, &v)) < 0)
				return rc;
			if (strcmp(name, "ram") != 0 || ram_open)
				return unknown("an iterable section other than the RAM's");
			ram_open = true;
			ram_id = id;
			if ((rc = ram_records(io, r)) < 0)
				return rc;
			break;
		case SEC_PART:
		case SEC_END:
			if (!ram_open || id != ram_id || ram_done)
				return unknown("a part of a section other than the RAM's");
			if ((rc = ram_records(io, r)) < 0)
				return rc;
			ram_done = type == SEC_END;
			break;
		case SEC_FOOTER:
			if (!ram_open || id != ram_id)
				return unknown("a footer of a section other than the RAM's");
			break;
		default:
			return unknown("a section of a type other than configuration, RAM and devices");
		}
	}
}

int saas__lv_stream_split(int in, int out, int ram, const char *block, uint64_t bytes,
                          struct saas__lv_split_stats *st)
{
	struct io io = { in, out, ram, malloc(BUF), malloc(BUF), 0, 0, 0, 0, malloc(RUN_MAX), 0, 0 };
	struct ram r;
	int rc;

	memset(st, 0, sizeof(*st));
	memset(&r, 0, sizeof(r));
	r.block = block;
	r.bytes = bytes;
	r.st = st;
	if (!bytes || bytes % PAGE || bytes > ((uint64_t)1 << 44))
		rc = saas__error(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0, "a RAM block of %llu bytes cannot be split out",
		                 (unsigned long long)bytes);
	else if (!io.rbuf || !io.wbuf || !io.run || !(r.written = calloc(bytes / PAGE / 8 + 1, 1)))
		rc = saas__oom();
	else if ((rc = split(&io, &r)) == SAAS_OK)
		rc = flush(&io);
	st->out_bytes = io.out_bytes;
	free(r.written);
	free(io.run);
	free(io.rbuf);
	free(io.wbuf);
	return rc;
}
