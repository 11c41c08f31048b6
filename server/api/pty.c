/*
 * GET /v1/sandboxes/{id}/pty: a terminal over a WebSocket (docs/rest.md,
 * "Terminal"). The handshake is checked and the session opened before the
 * 101, so a refusal is an ordinary JSON error; then the connection's own
 * thread bridges the WebSocket and the session until either ends. Binary
 * frames carry the terminal's bytes both ways; text frames carry JSON:
 * {"type":"resize","cols":C,"rows":R} and {"type":"eof"} from the client,
 * {"type":"exit","status":N} from the server just before its close frame.
 * The shell's directory and variables come as query parameters (cwd=, and
 * env=NAME=VALUE once per variable), bounded as exec's by saas_pty_open and,
 * all together, by the request line the server reads.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "api/api.h"
#include "ws.h"

/* What a client may still send after our close frame, before we hang up anyway (linger_close). */
#define PTY_LINGER_MS 2000
#define PTY_LINGER_BYTES ((size_t)1 << 20)

/* One table of the sessions open, by sandbox and by account, for the bounds above. */
struct pty_count {
	char id[SAAS_ID_MAX + 1];
	unsigned int n;
};

/* The bounds (--pty-*), set once before the server serves. */
static const struct aas_config *config;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pty_count *counts;
static size_t ncounts;
/* The sessions being bridged, for aas_pty_shutdown; and whether it ran. */
static struct pty_session *bridges;
static bool stopping;

/* Add delta to id's count if it stays within max; false if it would not. count_mu held. */
static bool count_add(const char *id, int delta, unsigned int max)
{
	size_t i;

	for (i = 0; i < ncounts && strcmp(counts[i].id, id) != 0; i++)
		;
	if (i == ncounts) {
		struct pty_count *grown;
		if (delta < 0)
			return true;
		if (!(grown = realloc(counts, (ncounts + 1) * sizeof(*counts))))
			return false;
		counts = grown;
		memset(&counts[ncounts], 0, sizeof(*counts));
		snprintf(counts[ncounts].id, sizeof(counts[ncounts].id), "%s", id);
		ncounts++;
	}
	if (delta > 0 && counts[i].n + (unsigned int)delta > max)
		return false;
	counts[i].n = (unsigned int)((int)counts[i].n + delta);
	if (!counts[i].n)
		counts[i] = counts[--ncounts];
	return true;
}

struct pty_session {
	struct pty_session *next, **prevp; /* on the bridges list while bridged (count_mu) */
	MHD_socket sock;
	saas_pty *pty;
	saas_client *owned;       /* the client of a caller authenticated otherwise (aas_pty_serve), or NULL */
	char sandbox_id[SAAS_ID_MAX + 1];
	char account_id[SAAS_ID_MAX + 1];
	uint64_t binary;          /* a fragmented binary message is being received */
	char why[96];             /* a close reason with numbers in it */
	size_t in_len, in_cap;    /* in: a whole frame of the largest size and its head */
	unsigned char in[];
};

static void session_free(void *cls)
{
	struct pty_session *s = cls;

	if (!s)
		return;
	saas_pty_close(s->pty, NULL);
	saas_client_free(s->owned);
	pthread_mutex_lock(&count_mu);
	count_add(s->sandbox_id, -1, 0);
	count_add(s->account_id, -1, 0);
	pthread_mutex_unlock(&count_mu);
	free(s);
}

static int ws_send(MHD_socket sock, int opcode, const void *data, size_t len)
{
	unsigned char head[SAAS_WS_HEAD_MAX];
	size_t hl = saas__ws_head(head, opcode, len, NULL);

	return aas_send_all(sock, head, hl) < 0 || (len && aas_send_all(sock, data, len) < 0) ? -1 : 0;
}

/* A close frame with its status code (RFC 6455 7.4) and a reason. */
static void ws_close(MHD_socket sock, unsigned int code, const char *reason)
{
	unsigned char buf[125];
	size_t n = strlen(reason);

	if (n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[0] = (unsigned char)(code >> 8);
	buf[1] = (unsigned char)code;
	memcpy(buf + 2, reason, n);
	ws_send(sock, SAAS_WS_CLOSE, buf, n + 2);
}

/* A text message: resize or eof. 0, or -1 with *why set for the close frame. */
static int on_text(struct pty_session *s, const unsigned char *data, size_t len, const char **why)
{
	json_t *j = json_loadb((const char *)data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	json_t *cols = json_object_get(j, "cols"), *rows = json_object_get(j, "rows");
	int rc = 0;

	if (!type) {
		*why = "a text message is a JSON object with a \"type\"";
		rc = -1;
	} else if (strcmp(type, "resize") == 0) {
		if (!json_is_integer(cols) || !json_is_integer(rows) || json_integer_value(cols) < 1 ||
		    json_integer_value(cols) > SAAS_PTY_SIZE_MAX || json_integer_value(rows) < 1 ||
		    json_integer_value(rows) > SAAS_PTY_SIZE_MAX) {
			*why = "resize takes integer cols and rows from 1 to 4096";
			rc = -1;
		} else {
			/* A shell that just ended refuses; its exit message follows. */
			saas_pty_resize(s->pty, (unsigned int)json_integer_value(cols), (unsigned int)json_integer_value(rows));
		}
	} else if (strcmp(type, "eof") == 0) {
		saas_pty_send_eof(s->pty);
	} else {
		*why = "unknown message type (resize and eof are known)";
		rc = -1;
	}
	json_decref(j);
	return rc;
}

/*
 * Handle the whole frames in s->in. 0 for more; 1 once the client closed;
 * -1 after a protocol error, with *code and *why for the close frame.
 */
static int take_frames(struct pty_session *s, MHD_socket sock, unsigned int *code, const char **why)
{
	for (;;) {
		struct saas__ws_frame f;
		int r = saas__ws_frame_parse(s->in, s->in_len, &f);
		unsigned char *payload;

		if (r < 0 || (r == 1 && !f.masked)) {
			*code = 1002;
			*why = r < 0 ? "bad frame" : "a client's frames are masked";
			return -1;
		}
		if (r == 0)
			return 0;
		if (f.len > config->pty_frame_max) {
			*code = 1009;
			snprintf(s->why, sizeof(s->why), "frame over %u bytes", config->pty_frame_max);
			*why = s->why;
			return -1;
		}
		if (s->in_len - f.head < f.len)
			return 0;
		payload = s->in + f.head;
		saas__ws_unmask(payload, (size_t)f.len, f.mask, 0);
		switch (f.opcode) {
		case SAAS_WS_CONT:
			if (!s->binary) {
				*code = 1003;
				*why = "text messages come whole";
				return -1;
			}
			/* fall through */
		case SAAS_WS_BINARY:
			s->binary = !f.fin;
			if (f.len && saas_pty_write(s->pty, payload, (size_t)f.len) == SAAS_ETIMEOUT) {
				/* A shell that reads none of its input would hold this thread for ever. */
				*code = 1008;
				snprintf(s->why, sizeof(s->why), "the shell took no input for %u s", config->pty_write_timeout_s);
				*why = s->why;
				return -1;
			}
			/* Otherwise the shell ended: its exit comes from the other side. */
			break;
		case SAAS_WS_TEXT:
			if (!f.fin) {
				*code = 1003;
				*why = "text messages come whole";
				return -1;
			}
			if (on_text(s, payload, (size_t)f.len, why) < 0) {
				*code = 1003;
				return -1;
			}
			break;
		case SAAS_WS_PING: ws_send(sock, SAAS_WS_PONG, payload, (size_t)f.len); break;
		case SAAS_WS_CLOSE: return 1;
		default: break;
		}
		s->in_len -= f.head + (size_t)f.len;
		memmove(s->in, payload + f.len, s->in_len);
	}
}

/*
 * After our close frame: read what the client still sends until it closes
 * too, a little while at most. Closing with unread bytes would reset the
 * connection, and the client could lose the close frame, and the exit
 * message before it, to the reset.
 */
static void linger_close(MHD_socket sock)
{
	char scratch[4096];
	size_t drained = 0;

	shutdown(sock, SHUT_WR);
	while (drained < PTY_LINGER_BYTES) {
		struct pollfd pf = { sock, POLLIN, 0 };
		ssize_t k;
		if (poll(&pf, 1, PTY_LINGER_MS) <= 0)
			break;
		if ((k = recv(sock, scratch, sizeof(scratch), 0)) <= 0)
			break;
		drained += (size_t)k;
	}
}

static void bridge(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in, size_t extra_in_size,
                   MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct pty_session *s = cls;
	unsigned char out[32768];
	const char *why = "";
	unsigned int code = 1000;
	int done = 0, status = -1;

	(void)conn;
	(void)con_cls;
	aas_send_timeout(sock, config->pty_idle_timeout_s * 1000);
	saas_pty_set_write_timeout(s->pty, config->pty_write_timeout_s * 1000);
	pthread_mutex_lock(&count_mu);
	s->sock = sock;
	if ((s->next = bridges))
		bridges->prevp = &s->next;
	s->prevp = &bridges;
	bridges = s;
	if (stopping)
		shutdown(sock, SHUT_RD);
	pthread_mutex_unlock(&count_mu);
	if (extra_in_size <= s->in_cap) {
		memcpy(s->in, extra_in, extra_in_size);
		s->in_len = extra_in_size;
		done = take_frames(s, sock, &code, &why);
	} else {
		done = -1;
		code = 1009;
		snprintf(s->why, sizeof(s->why), "frame over %u bytes", config->pty_frame_max);
		why = s->why;
	}
	while (!done) {
		struct pollfd pf[2] = { { sock, POLLIN, 0 }, { saas_pty_fd(s->pty), POLLIN, 0 } };
		int n = poll(pf, 2, (int)config->pty_idle_timeout_s * 1000);
		size_t got = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			done = -1;
			code = 1001;
			why = n == 0 ? "idle past the timeout" : "poll failed";
			break;
		}
		if (pf[1].revents) {
			if (saas_pty_read(s->pty, out, sizeof(out), &got, 0) < 0)
				got = 0;
			if (!got) {
				/* The shell ended: say how, then close. */
				char msg[64];
				int len;
				saas_pty_close(s->pty, &status);
				s->pty = NULL;
				len = snprintf(msg, sizeof(msg), "{\"type\":\"exit\",\"status\":%d}", status);
				ws_send(sock, SAAS_WS_TEXT, msg, (size_t)len);
				why = "the shell ended";
				break;
			}
			if (ws_send(sock, SAAS_WS_BINARY, out, got) < 0)
				break;
		}
		if (pf[0].revents) {
			ssize_t k = recv(sock, s->in + s->in_len, s->in_cap - s->in_len, 0);
			if (k <= 0) {
				/* The client went (the session is hung up below), or the server stops. */
				pthread_mutex_lock(&count_mu);
				if (stopping) {
					code = 1001;
					why = "the server is shutting down";
				}
				pthread_mutex_unlock(&count_mu);
				break;
			}
			s->in_len += (size_t)k;
			done = take_frames(s, sock, &code, &why);
		}
	}
	pthread_mutex_lock(&count_mu);
	if ((*s->prevp = s->next))
		s->next->prevp = s->prevp;
	pthread_mutex_unlock(&count_mu);
	ws_close(sock, code, why);
	linger_close(sock);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	/* The session (the shell hung up on if it still runs) is freed with the request. */
}

/* The env= parameters, in the order sent: at most one past exec's bound, for saas_pty_open to name the excess. */
#define PTY_ENV_SEEN_MAX 257

struct env_params {
	const char *list[PTY_ENV_SEEN_MAX + 1]; /* NULL-terminated; borrowed from the connection */
	size_t n;
	bool nul;                               /* one held a NUL byte (%00) */
};

static enum MHD_Result env_param(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size)
{
	struct env_params *e = cls;

	(void)kind;
	if (key_size != 3 || memcmp(key, "env", 3) != 0)
		return MHD_YES;
	if (value && strlen(value) != value_size)
		e->nul = true;
	if (e->n < PTY_ENV_SEEN_MAX)
		e->list[e->n++] = value ? value : "";
	return MHD_YES;
}

void aas_h_pty(struct aas_req *r, struct aas_reply *out)
{
	aas_pty_serve(r, out, r->client, NULL);
}

void aas_pty_serve(struct aas_req *r, struct aas_reply *out, saas_client *client, saas_client *owned)
{
	const char *upgrade = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
	const char *version = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	saas_pty_options opts = SAAS_PTY_OPTIONS_INIT;
	struct env_params env = { .n = 0 };
	struct pty_session *s = NULL;
	bool tty = true, room;
	char accept[29];
	int rc;

	if (!aas_wants_upgrade(r) || !upgrade || strcasecmp(upgrade, "websocket") != 0) {
		aas_reply_error(out, 400, "invalid_argument",
		                "this route is a WebSocket: send \"Connection: Upgrade\" and \"Upgrade: websocket\"");
		goto refused;
	}
	if (!version || strcmp(version, "13") != 0) {
		aas_reply_error(out, 400, "invalid_argument", "Sec-WebSocket-Version must be 13");
		MHD_add_response_header(out->response, "Sec-WebSocket-Version", "13");
		goto refused;
	}
	/* 16 random bytes in base64 (RFC 6455 4.1). */
	if (!key || strlen(key) != 24 || strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != 24) {
		aas_reply_error(out, 400, "invalid_argument", "Sec-WebSocket-Key must be 16 bytes in base64");
		goto refused;
	}
	if (!aas_query_uint(r, "cols", 1, SAAS_PTY_SIZE_MAX, &opts.cols, out) ||
	    !aas_query_uint(r, "rows", 1, SAAS_PTY_SIZE_MAX, &opts.rows, out) || !aas_query(r, "term", &opts.term, out) ||
	    !aas_query_bool(r, "tty", &tty, out) || !aas_query(r, "cwd", &opts.cwd, out))
		goto refused;
	/* env= may repeat (one variable each); saas_pty_open checks each as exec's. */
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, env_param, &env);
	if (env.nul) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"env\" contains a NUL byte (%%00)");
		goto refused;
	}
	opts.env = env.n ? env.list : NULL;
	if (!(s = calloc(1, sizeof(*s) + SAAS_WS_HEAD_MAX + config->pty_frame_max))) {
		aas_reply_saas(out, SAAS_ENOMEM);
		goto refused;
	}
	/* From here the session holds the client, and frees it with itself. */
	s->owned = owned;
	owned = NULL;
	s->in_cap = SAAS_WS_HEAD_MAX + config->pty_frame_max;
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", r->route_id);
	snprintf(s->account_id, sizeof(s->account_id), "%s", r->account_id);
	pthread_mutex_lock(&count_mu);
	room = count_add(s->sandbox_id, 1, config->pty_per_sandbox);
	if (room && !(room = count_add(s->account_id, 1, config->pty_per_account)))
		count_add(s->sandbox_id, -1, 0);
	pthread_mutex_unlock(&count_mu);
	if (!room) {
		saas_client_free(s->owned);
		free(s);
		aas_reply_limit(out, "pty_sessions", 1000,
		                "at most %u terminals per sandbox and %u per account are open at once; close one first",
		                config->pty_per_sandbox, config->pty_per_account);
		return;
	}
	if ((rc = saas_pty_open(&s->pty, client, r->route_id, &opts, tty ? 0 : SAAS_PTY_NOTTY)) < 0) {
		aas_reply_saas(out, rc);
		session_free(s);
		return;
	}
	/* Freed with the request, whether or not the upgrade happened. */
	r->stream = s;
	r->stream_free = session_free;
	saas__ws_accept(key, accept);
	if (!(out->response = MHD_create_response_for_upgrade(bridge, s))) {
		aas_reply_saas(out, SAAS_ENOMEM);
		return;
	}
	MHD_add_response_header(out->response, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(out->response, "Sec-WebSocket-Accept", accept);
	out->status = MHD_HTTP_SWITCHING_PROTOCOLS;
	return;
refused:
	saas_client_free(owned);
}

void aas_pty_init(const struct aas_config *cfg)
{
	pthread_mutex_lock(&count_mu);
	config = cfg;
	stopping = false; /* an in-process server may be started again */
	pthread_mutex_unlock(&count_mu);
}

void aas_pty_shutdown(void)
{
	pthread_mutex_lock(&count_mu);
	stopping = true;
	/* Each bridge reads the end of its client's stream, says why in its close frame and hangs up. */
	for (struct pty_session *s = bridges; s; s = s->next)
		shutdown(s->sock, SHUT_RD);
	pthread_mutex_unlock(&count_mu);
}
