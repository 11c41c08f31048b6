/*
 * The remote provider's HTTP layer: one request over a pooled libcurl multi
 * handle, with the REST API's error bodies turned back into saas_status codes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remote/http.h"

int saas__error_from_name(const char *name)
{
	if (!name)
		return 0;
	for (int code = SAAS_ERROR, last = saas__error_code_last(); code >= last; code--)
		if (strcmp(saas_error_name(code), name) == 0)
			return code;
	/* The server's own codes (docs/rest.md). */
	if (strcmp(name, "invalid_json") == 0)
		return SAAS_EINVAL;
	if (strcmp(name, "method_not_allowed") == 0 || strcmp(name, "length_required") == 0)
		return SAAS_EPROTOCOL;
	return 0;
}

char *saas__url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *q = out;

	if (!out) {
		saas__oom();
		return NULL;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		    *p == '_' || *p == '.' || *p == '~') {
			*q++ = (char)*p;
		} else {
			*q++ = '%';
			*q++ = hex[*p >> 4];
			*q++ = hex[*p & 15];
		}
	}
	*q = '\0';
	return out;
}

static CURLM *multi_take(struct saas_remote *r)
{
	CURLM *m = NULL;

	pthread_mutex_lock(&r->mu);
	if (r->npool)
		m = r->pool[--r->npool];
	pthread_mutex_unlock(&r->mu);
	return m ? m : curl_multi_init();
}

static void multi_give(struct saas_remote *r, CURLM *m)
{
	pthread_mutex_lock(&r->mu);
	if (r->npool < SAAS_REMOTE_POOL) {
		r->pool[r->npool++] = m;
		m = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	if (m)
		curl_multi_cleanup(m);
}

/* One transfer of h on m, as curl_easy_perform() runs it (its own multi handle, polled a second at most). */
static CURLcode perform(CURLM *m, CURL *h)
{
	CURLcode cc = CURLE_GOT_NOTHING;
	CURLMcode mc;
	CURLMsg *msg;
	int running = 1, left;

	if ((mc = curl_multi_add_handle(m, h)) != CURLM_OK)
		return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
	do {
		mc = curl_multi_perform(m, &running);
		if (mc == CURLM_OK && running)
#if LIBCURL_VERSION_NUM >= 0x074200
			mc = curl_multi_poll(m, NULL, 0, 1000, NULL);
#else
			mc = curl_multi_wait(m, NULL, 0, 1000, NULL); /* before 7.66.0: returns at once with no socket yet */
#endif
	} while (mc == CURLM_OK && running);
	if (mc != CURLM_OK)
		cc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_RECV_ERROR;
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			cc = msg->data.result;
	curl_multi_remove_handle(m, h);
	return cc;
}

struct xfer {
	CURL *h;
	const struct saas_http_req *req;
	saas__buf in;             /* the JSON body to send */
	size_t in_off;
	saas__buf out;            /* the answer, unless streamed */
	bool streaming;          /* the writer takes this answer's body */
	bool decided;
	int64_t delivered;       /* bytes given to the writer */
	int64_t uploaded;        /* bytes taken from the reader */
	int fail;                /* why a callback stopped the transfer (a saas_status), or 0 */
	int64_t retry_after_s;   /* the answer's Retry-After in seconds, or 0 */
};

/* Whole seconds of a Retry-After the client believes: a day at most (an HTTP date is not read). */
#define RETRY_AFTER_MAX_S 86400

/* A header of the answer: its Retry-After (delta-seconds) kept, the rest passed over. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb, i = 12;
	int64_t secs = 0;

	/* A new head (a 100 Continue's, then the answer's) starts over. */
	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0)
		x->retry_after_s = 0;
	if (n < 12 || strncasecmp(data, "Retry-After:", 12) != 0)
		return n;
	while (i < n && (data[i] == ' ' || data[i] == '\t'))
		i++;
	if (i >= n || data[i] < '0' || data[i] > '9')
		return n;
	for (; i < n && data[i] >= '0' && data[i] <= '9'; i++)
		if ((secs = secs * 10 + (data[i] - '0')) > RETRY_AFTER_MAX_S)
			return n;
	x->retry_after_s = secs;
	return n;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;

	if (!x->decided) {
		long status = 0;
		curl_off_t cl = -1;
		x->decided = true;
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
		x->streaming = x->req->writer && status >= 200 && status < 300;
		if (x->streaming) {
			curl_easy_getinfo(x->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
			if (x->req->size)
				*x->req->size = cl;
			if (cl > x->req->max) {
				x->fail = saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0,
				                      "the file is %lld bytes, over the %lld asked for", (long long)cl,
				                      (long long)x->req->max);
				return 0;
			}
		}
	}
	if (x->streaming) {
		if (x->delivered + (int64_t)n > x->req->max) {
			x->fail = saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_ARGS, 0, "the file is over the %lld bytes asked for",
			                      (long long)x->req->max);
			return 0;
		}
		x->delivered += (int64_t)n;
		if (x->req->writer_says)
			saas__error_clear();
		if (n && x->req->writer(x->req->writer_ud, data, n)) {
			/* The library's own readers (event streams) say what was wrong with the stream. */
			if (x->req->writer_says && saas_error_last()->code < 0)
				x->fail = saas_error_last()->code;
			else
				x->fail = saas__error(SAAS_EIO, SAAS_ERRCLASS_ARGS, 0, "the writer stopped the read");
			return 0;
		}
		return n;
	}
	/* Error bodies and JSON answers are small; anything huge is not the API talking. */
	if (x->out.len + n > SAAS_REMOTE_ANSWER_MAX) {
		x->fail = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 0, "the server's answer is over %zu MiB",
		                      SAAS_REMOTE_ANSWER_MAX >> 20);
		return 0;
	}
	if (saas__buf_put(&x->out, data, n) < 0) {
		x->fail = SAAS_ENOMEM;
		return 0;
	}
	return n;
}

/* libcurl calls this about once a second even when no byte comes: a silent stream's chance to stop. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = ud;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (!x->streaming || !x->req->idle(x->req->writer_ud))
		return 0;
	x->fail = saas__error(SAAS_EIO, SAAS_ERRCLASS_ARGS, 0, "the writer stopped the read");
	return 1;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	long got;

	if (!x->req->reader) {
		if (n > x->in.len - x->in_off)
			n = x->in.len - x->in_off;
		memcpy(buf, x->in.data + x->in_off, n);
		x->in_off += n;
		return n;
	}
	got = x->req->reader(x->req->reader_ud, buf, n);
	if (got < 0 || (size_t)got > n) {
		x->fail = saas__error(SAAS_EIO, SAAS_ERRCLASS_ARGS, 0, "the reader failed; the write was abandoned");
		return CURL_READFUNC_ABORT;
	}
	x->uploaded += got;
	return (size_t)got;
}

int saas__http_error_from_body(long status, const saas__buf *body)
{
	return saas__http_error_from(status, body, 0);
}

int saas__http_error_from(long status, const saas__buf *body, int64_t retry_after_s)
{
	json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
	json_t *e = j ? json_object_get(j, "error") : NULL;
	const char *name = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	int code = saas__error_from_name(name);
	int rc;

	if (!code || code == SAAS_OK)
		code = saas__error_from_status(status);
	if (msg && *msg)
		rc = saas__error(code, SAAS_ERRCLASS_HTTP, status, "%s", msg);
	else
		rc = saas__error(code, SAAS_ERRCLASS_HTTP, status, "the server answered HTTP %ld%s", status,
		                 e ? "" : " without an error body");
	/*
	 * A limit names itself; a limit and a refusal for want of room (503
	 * busy) say when to retry: Retry-After, in seconds, which the body
	 * repeats (read when the header is missing, as a proxy between may drop it).
	 */
	{
		json_t *after = json_object_get(e, "retry_after");
		const char *limit = code == SAAS_ELIMIT ? json_string_value(json_object_get(e, "limit")) : NULL;
		json_int_t secs = retry_after_s;

		if (secs <= 0 || secs > RETRY_AFTER_MAX_S)
			secs = json_is_integer(after) ? json_integer_value(after) : 0;
		if (secs <= 0 || secs > RETRY_AFTER_MAX_S)
			secs = 0;
		if (limit || secs > 0)
			saas__error_set_limit(limit && strlen(limit) < 32 ? limit : "", (int64_t)secs * 1000);
	}
	json_decref(j);
	return rc;
}

/* Network-level failures where nothing reached the server's handler, or may be repeated safely. */
static bool retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
		return true;
	default:
		return false;
	}
}

static int configure(struct saas_remote *r, struct xfer *x, struct curl_slist **headers, char *errbuf)
{
	const struct saas_http_req *req = x->req;
	CURL *h = x->h;
	char *url = NULL;
	long timeout = req->timeout_ms ? req->timeout_ms : r->timeout_ms;
	bool upload = req->reader || req->body;

	if (asprintf(&url, "%s%s", r->base, req->path) < 0)
		return saas__oom();
	*headers = curl_slist_append(*headers, r->auth_header);
	if (req->accept) {
		char accept[128];
		snprintf(accept, sizeof(accept), "Accept: %s", req->accept);
		*headers = curl_slist_append(*headers, accept);
	} else {
		*headers = curl_slist_append(*headers, "Accept: application/json");
	}
	if (req->body)
		*headers = curl_slist_append(*headers, "Content-Type: application/json");
	else if (req->reader)
		*headers = curl_slist_append(*headers, "Content-Type: application/octet-stream");
	if (!*headers) {
		free(url);
		return saas__oom();
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	free(url); /* curl copies it */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, r->user_agent);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* never carry the key elsewhere */
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
	if (req->transfer) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, timeout / 1000 > 0 ? timeout / 1000 : 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
	}
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, r->verify_tls ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, r->verify_tls ? 2L : 0L);
	if (r->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (req->writer && req->idle) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	}
	if (upload) {
		curl_off_t size = req->reader ? req->upload_size : (curl_off_t)x->in.len;
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		if (size >= 0)
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, size);
	}
	/* UPLOAD means PUT; other verbs with a body (POST) and without one (GET, DELETE) are named. */
	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "PUT") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	return SAAS_OK;
}

int saas__http(struct saas_remote *r, const struct saas_http_req *req, json_t **json)
{
	struct xfer x;
	char *dumped = NULL;
	unsigned int attempt = 0;
	CURLM *m;
	int rc;

	if (json)
		*json = NULL;
	memset(&x, 0, sizeof(x));
	x.req = req;
	x.in = (saas__buf)SAAS__BUF_INIT;
	x.out = (saas__buf)SAAS__BUF_INIT;
	if (req->body) {
		if (!(dumped = json_dumps(req->body, JSON_COMPACT)))
			return saas__oom();
		x.in.data = dumped;
		x.in.len = strlen(dumped);
	}
	if (!(m = multi_take(r))) {
		free(dumped);
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_HTTP, 0, "cannot make a curl handle");
	}
	for (;;) {
		struct curl_slist *headers = NULL;
		char errbuf[CURL_ERROR_SIZE] = "";
		long status = 0;
		CURLcode cc;

		/* Each attempt a new easy handle: nothing of an earlier answer carries over. */
		curl_easy_cleanup(x.h);
		if (!(x.h = curl_easy_init())) {
			rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_HTTP, 0, "cannot make a curl handle");
			goto out;
		}
		x.in_off = 0;
		x.out.len = 0;
		x.decided = x.streaming = false;
		x.fail = 0;
		x.retry_after_s = 0;
		if ((rc = configure(r, &x, &headers, errbuf)) < 0) {
			curl_slist_free_all(headers);
			goto out;
		}
		cc = perform(m, x.h);
		curl_slist_free_all(headers);
		curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &status);
		if (x.fail) {
			rc = x.fail;
			goto out;
		}
		bool can_retry = req->idempotent && attempt < r->retries && x.delivered == 0 && x.uploaded == 0;
		if (cc != CURLE_OK) {
			if (can_retry && retryable(cc))
				goto again;
			rc = saas__error(cc == CURLE_OPERATION_TIMEDOUT ? SAAS_ETIMEOUT : SAAS_ENETWORK, SAAS_ERRCLASS_HTTP,
			                 status, "%s %s%s: %s", req->method, r->base, req->path,
			                 *errbuf ? errbuf : curl_easy_strerror(cc));
			goto out;
		}
		/* A 503 that says when to come back (Retry-After: no room now) is the caller's to wait out. */
		if (status == 503 && can_retry && !x.retry_after_s)
			goto again;
		if (status < 200 || status >= 300) {
			rc = saas__http_error_from(status, &x.out, x.retry_after_s);
			goto out;
		}
		if (req->writer) {
			/* An empty body never reached on_write. */
			if (!x.decided && req->size) {
				curl_off_t cl = -1;
				curl_easy_getinfo(x.h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
				*req->size = cl >= 0 ? cl : 0;
			}
			/* An answer without a Content-Length (chunked, as a proxy may send it): its size is what came. */
			if (req->size && *req->size < 0)
				*req->size = x.delivered;
			rc = SAAS_OK;
			goto out;
		}
		/* 204 No Content (a code context's restart and delete): nothing said, an empty object. */
		if (json && status == 204) {
			rc = (*json = json_object()) ? SAAS_OK : saas__oom();
			goto out;
		}
		if (json) {
			json_error_t jerr;
			if (!(*json = json_loadb(x.out.data ? x.out.data : "", x.out.len, JSON_ALLOW_NUL, &jerr)) || !json_is_object(*json)) {
				json_decref(*json);
				*json = NULL;
				rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, status,
				                 "%s %s: the server's answer is not a JSON object", req->method, req->path);
				goto out;
			}
		}
		rc = SAAS_OK;
		goto out;
	again:
		saas__sleep_ms(100LL << (attempt < 10 ? attempt : 10));
		attempt++;
	}
out:
	curl_easy_cleanup(x.h);
	multi_give(r, m);
	saas__buf_free(&x.out);
	free(dumped);
	return rc;
}
