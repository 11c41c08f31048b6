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
	bool kept_whole;                 /* with a tee: it holds the whole stream, to its end */
};

/* What to split, and where to: a fork's descriptors (saas__lv_stream_split). */
struct saas__lv_split {
	int in;                          /* the stream, read to its end */
	int tee;                         /* -1, or where each byte read from in goes too, as read */
	int out;                         /* the stream without the block's pages */
	int ram;                         /* the block's memory: `bytes` bytes of holes on entry */
	const char *block;               /* the RAM block taken out */
	uint64_t bytes;                  /* its length, which the stream must give it */
	int64_t stall_ms;                /* > 0: in is a pipe, and a wait this long for its next byte fails */
};

/*
 * Split the migration stream read from sp->in (QEMU 7.2's precopy format,
 * as saas__lv_state_save writes it with x-ignore-shared on: no compression,
 * XBZRLE, multifd or postcopy) in two: the pages of RAM block sp->block,
 * written at their offsets into sp->ram, and everything else, written to
 * sp->out as a stream QEMU loads with x-ignore-shared on into a VM whose
 * block maps sp->ram's content.
 *
 * With a tee, every byte read goes to sp->tee as it is read, so that the
 * whole stream is kept beside the split as QEMU writes it into a pipe. A
 * split that fails (a stream it does not know, a write to out or ram) then
 * still reads the rest of the stream into the tee, to its end: the writer
 * never waits on a reader that gave up, and the tee holds the whole.
 *
 * The stream is read as hostile bytes (a VM's QEMU wrote it): every length
 * and offset is bounded, and with a stall_ms every wait for it. SAAS_ENOTSUP
 * when it holds anything this does not know (another QEMU's format, a
 * capability set): the caller keeps the whole stream instead (the tee's, or
 * in's), and out and ram are to be thrown away; SAAS_EIO for a read or a
 * write that failed (the tee's too: then the stream kept is not whole);
 * SAAS_ETIMEOUT when the stream stalled. Pure: touches nothing but the
 * descriptors.
 */
int saas__lv_stream_split(const struct saas__lv_split *sp, struct saas__lv_split_stats *st);

#endif
