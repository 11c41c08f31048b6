/*
 * The egress channel's protocol (docs/vm-hosts.md, "Egress on a host"): the
 * one definition both ends compile, the engine's (the server end of a VM on
 * a remote host) and the guest's (its redirector and DNS stub, which
 * images/build compiles with -I lib: this header and egress_mux.c are
 * inputs of the guest image). Plain C11 and libc only, for the guest's
 * static build; no allocation, and no socket but the one a pending buffer
 * is written to (saas__mux_pending_flush). tests/unit/test_mux.c and
 * tests/fuzz/fuzz_mux.c drive it.
 *
 * One virtio-serial port (MUX_PORT_NAME) per VM carries many TCP
 * connections the guest opens, and its DNS queries, as frames. A frame is
 * an 8-byte header, then its payload:
 *
 *   byte 0     type
 *   bytes 1-3  payload length, big-endian (at most the type's bound below)
 *   bytes 4-7  id, big-endian: the connection (1 to 2^32-1, the guest's
 *              choice), a DNS query's tag (any), 0 for HELLO
 *
 *   HELLO       both, first frame each way, id 0: 2 bytes, the version (MUX_VERSION)
 *   OPEN_ADDR   guest: 1 byte family (4 or 6), 2 bytes port, the address (4 or 16 bytes)
 *   OPEN_NAME   guest: 2 bytes port, the name (1 to MUX_NAME_MAX of a-z 0-9 - _ and
 *               dots, no empty label: what TLS's SNI or HTTP's Host named)
 *   OPENED      server: 1 byte status (MUX_ST_*): the answer to an OPEN
 *   DATA        both: 1 to MUX_DATA_MAX bytes of the connection's stream
 *   WINDOW_UPDATE  both: 4 bytes, how many more bytes of DATA its sender takes
 *               (1 to MUX_WINDOW: what it consumed since its last one)
 *   SHUT        both: no payload; the sender's half is done (TCP's FIN)
 *   CLOSE       both: no payload; the connection is over
 *   DNS_QUERY   guest: a DNS message (MUX_DNS_MIN to MUX_DNS_MAX bytes), id its tag
 *   DNS_ANSWER  server: the answer to the query of that tag
 *
 * A connection's life, which saas__mux_track enforces on both ends:
 * the guest sends OPEN_* with an id not in use; the server answers exactly
 * one OPENED, or a CLOSE when the guest's CLOSE came first. An OPENED
 * other than MUX_ST_OK ends the id on both sides. Once open, each side may
 * have at most MUX_WINDOW bytes of DATA unanswered by a WINDOW_UPDATE (a window per
 * connection and direction); no DATA follows its sender's SHUT. A CLOSE is
 * answered by a CLOSE, unless its receiver had sent one already; a side
 * frees the id when it has both sent and received CLOSE, and ignores what
 * arrives for an id it closed meanwhile. At most MUX_CONNS_MAX connections
 * at once: the server answers more with MUX_ST_LIMIT.
 *
 * Every decision is the server's: the guest end is untrusted, and one that
 * speaks this protocol itself gets exactly what the VM's policy allows.
 * A frame that breaks these rules (an unknown type, an overlong payload, a
 * frame for an id never opened, DATA past the window) ends the whole
 * channel: every connection closed, the port reset.
 */
#ifndef SAAS_TRANSPORT_EGRESS_MUX_H
#define SAAS_TRANSPORT_EGRESS_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The virtio-serial port's name: the guest's service finds its device by it. */
#define MUX_PORT_NAME "org.libsaas.egress.0"
#define MUX_VERSION 1

#define MUX_HEADER 8
#define MUX_DATA_MAX (32 * 1024)          /* one DATA frame's payload */
#define MUX_WINDOW (256 * 1024)           /* DATA in flight per connection and direction */
#define MUX_CONNS_MAX 64                  /* connections of one VM at once */
#define MUX_NAME_MAX 253                  /* a name's characters (DNS's bound) */
#define MUX_DNS_MIN 12                    /* a DNS header */
#define MUX_DNS_MAX 4096                  /* a DNS message either way (the resolver's UDP bound) */
#define MUX_DNS_PENDING 32                /* queries of one VM in flight; the server answers more SERVFAIL */
#define MUX_FRAME_MAX (MUX_HEADER + MUX_DATA_MAX)

enum saas__mux_type {
	MUX_HELLO = 1,
	MUX_OPEN_ADDR = 2,
	MUX_OPEN_NAME = 3,
	MUX_OPENED = 4,
	MUX_DATA = 5,
	MUX_WINDOW_UPDATE = 6,
	MUX_SHUT = 7,
	MUX_CLOSE = 8,
	MUX_DNS_QUERY = 9,
	MUX_DNS_ANSWER = 10,
};

/* OPENED's status. */
enum saas__mux_status {
	MUX_ST_OK = 0,
	MUX_ST_REFUSED = 1,               /* the VM's policy (or the guard) refuses it */
	MUX_ST_UNREACHABLE = 2,           /* the connect failed (refused, no route, timed out) */
	MUX_ST_NONAME = 3,                /* the name has no address */
	MUX_ST_LIMIT = 4,                 /* MUX_CONNS_MAX already open */
	MUX_ST_MAX = MUX_ST_LIMIT,
};

/* Who sent a frame: each type has one sender, or both. */
enum saas__mux_role { MUX_GUEST = 1, MUX_SERVER = 2 };

/* A frame read: payload points into the caller's buffer. */
struct saas__mux_frame {
	uint8_t type;
	uint32_t id;
	uint32_t len;
	const uint8_t *payload;
};

/*
 * Read one frame sent by from at buf (n bytes). Returns the bytes it takes
 * (header and payload), 0 when buf holds less than a whole frame (a frame is
 * at most MUX_FRAME_MAX bytes, so a reader needs no more), or -1 when it
 * breaks the format: an unknown type or one from's side never sends, a
 * payload over its type's bound or of a wrong size, an id of 0 where one is
 * needed (or not 0 for HELLO). The payload's content is read by the
 * functions below.
 */
long saas__mux_frame_read(const uint8_t *buf, size_t n, enum saas__mux_role from, struct saas__mux_frame *f);

/*
 * Write a frame's header for a payload of len bytes at out (MUX_HEADER
 * bytes). The caller writes the payload after it.
 */
void saas__mux_header(uint8_t *out, uint8_t type, uint32_t id, uint32_t len);

/* An OPEN_*, read. */
struct saas__mux_open {
	int family;                       /* 4, 6, or 0 for a name */
	uint16_t port;
	uint8_t addr[16];                 /* family 4: its first 4 bytes */
	char name[MUX_NAME_MAX + 1];      /* family 0 */
};

/*
 * Read an OPEN_ADDR or OPEN_NAME frame's payload. 0, or -1 when it is
 * malformed: a family other than 4 or 6, port 0, a name that is not one
 * (what saas__mux_name_ok refuses).
 */
int saas__mux_open_read(const struct saas__mux_frame *f, struct saas__mux_open *o);

/*
 * Write o as a whole OPEN_ADDR or OPEN_NAME frame of id at out (cap bytes).
 * Returns its length, or 0 when o is not valid or it does not fit.
 */
size_t saas__mux_open_write(uint8_t *out, size_t cap, uint32_t id, const struct saas__mux_open *o);

/*
 * Is name (len bytes) one an OPEN_NAME may carry: 1 to MUX_NAME_MAX bytes of
 * lowercase letters, digits, '-', '_' and dots, labels of 1 to 63 bytes?
 */
bool saas__mux_name_ok(const char *name, size_t len);

/* A frame of a 1, 2 or 4-byte big-endian value (OPENED, HELLO, WINDOW_UPDATE), whole, at out. */
size_t saas__mux_u8_frame(uint8_t *out, uint8_t type, uint32_t id, uint8_t v);
size_t saas__mux_u16_frame(uint8_t *out, uint8_t type, uint32_t id, uint16_t v);
size_t saas__mux_u32_frame(uint8_t *out, uint8_t type, uint32_t id, uint32_t v);
/* The value of such a frame's payload (its size was checked by saas__mux_frame_read). */
uint32_t saas__mux_value(const struct saas__mux_frame *f);

/* ---- one end's connections: the rules above, as one side sees them -------------------------- */

enum saas__mux_state { MUX_C_FREE = 0, MUX_C_OPENING, MUX_C_OPEN, MUX_C_CLOSING };

struct saas__mux_conn {
	uint32_t id;
	uint8_t state;                    /* enum saas__mux_state */
	bool shut_in, shut_out;           /* the peer's half done, ours done */
	uint32_t credit_in;               /* DATA the peer may still send before our next WINDOW_UPDATE */
	uint32_t credit_out;              /* DATA we may still send */
};

struct saas__mux_track {
	enum saas__mux_role self;
	bool hello_in, hello_out;
	unsigned int n;                   /* slots in use */
	struct saas__mux_conn c[MUX_CONNS_MAX];
};

/* What a received frame means for its receiver. */
enum saas__mux_verdict {
	MUX_V_ERROR = -1,                 /* it breaks the rules: end the channel */
	MUX_V_OK = 0,                     /* act on it */
	MUX_V_IGNORE = 1,                 /* for an id this side closed: drop it */
	MUX_V_FULL = 2,                   /* an OPEN with MUX_CONNS_MAX open: answer MUX_ST_LIMIT, not tracked */
	MUX_V_CLOSE = 3,                  /* a CLOSE for an id still open here: answer CLOSE (then it is free) */
};

void saas__mux_track_init(struct saas__mux_track *t, enum saas__mux_role self);

/*
 * Account for a frame received (read by saas__mux_frame_read from the
 * peer): the state it moves the connection to, and what the receiver does.
 * A CLOSE answered with MUX_V_CLOSE frees the id at once: the caller's CLOSE
 * back must be sent without saas__mux_track_sent.
 */
enum saas__mux_verdict saas__mux_track_received(struct saas__mux_track *t, const struct saas__mux_frame *f);

/*
 * Account for a frame this side sends. -1 when the rules forbid it (this
 * side's bug: a DATA past the window, a frame on an id not open): nothing
 * is sent then.
 */
int saas__mux_track_sent(struct saas__mux_track *t, uint8_t type, uint32_t id, uint32_t len, uint32_t value);

/* The connection of id, or NULL when it is free. */
struct saas__mux_conn *saas__mux_conn_find(struct saas__mux_track *t, uint32_t id);

/* ---- DATA received, on its way to the connection's socket: both ends alike ------------------ */

/* The window is given back once this much was written, or when the pending bytes are all written. */
#define MUX_WINDOW_BATCH (16 * 1024)

struct saas__mux_pending {
	uint8_t *buf;                     /* MUX_WINDOW bytes, the caller's */
	size_t off, len;                  /* written up to off, received up to len */
	uint32_t taken;                   /* written, not yet given back as window */
};

/* Bytes received and not yet written. */
static inline bool saas__mux_pending_any(const struct saas__mux_pending *p)
{
	return p->len > p->off;
}

/* Keep a DATA frame's payload (the track checked it is within the window, which buf holds). */
void saas__mux_pending_add(struct saas__mux_pending *p, const uint8_t *data, uint32_t len);

/*
 * Write what is pending to the socket fd without blocking (stops at EAGAIN).
 * -1 when the socket failed (errno). Otherwise 0, and *credit is the window to
 * give back now in a WINDOW_UPDATE (0: none yet).
 */
int saas__mux_pending_flush(struct saas__mux_pending *p, int fd, uint32_t *credit);

#endif
