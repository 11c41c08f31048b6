/*
 * Internal: a migration stream's guest RAM taken out of it (migstream.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_MIGSTREAM_H
#define SAAS_DRIVER_LIBVIRT_MIGSTREAM_H

#include <stdbool.h>
#include <stdint.h>

/* What a split found, for the log. */
struct saas__lv_split_stats {
	uint64_t pages;                  /* of the block, with data, written into ram */
	uint64_t zero_pages;             /* of the block, marked zero (holes in ram) */
	uint64_t out_bytes;              /* what the stream without them holds */
};

/*
 * Split the migration stream read from `in` (QEMU 7.2's precopy format, as
 * saas__lv_state_save writes it with x-ignore-shared on: no compression,
 * XBZRLE, multifd or postcopy) in two: the pages of RAM block `block`,
 * written at their offsets into `ram`, and everything else, written to
 * `out` as a stream QEMU loads with x-ignore-shared on into a VM whose block
 * `block` maps `ram`'s content. `ram` holds `bytes` bytes of holes
 * on entry, the block's length, which the stream must give it.
 *
 * The stream is read as hostile bytes (a VM's QEMU wrote it): every length
 * and offset is bounded. SAAS_ENOTSUP when it holds anything this does not
 * know (another QEMU's format, a capability set): the caller keeps the whole
 * stream instead, and `out` and `ram` are to be thrown away;
 * SAAS_EIO for a read or a write that failed. Pure: touches nothing but the
 * three descriptors.
 */
int saas__lv_stream_split(int in, int out, int ram, const char *block, uint64_t bytes,
                          struct saas__lv_split_stats *st);

#endif
