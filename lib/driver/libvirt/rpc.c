/*
 * One libvirt call at a time on a VM host's connection: rpc.h says why (a
 * stack use-after-free in libvirt's RPC client when a connection shared by
 * waiting threads is closed by its keepalive). Each wrapper finds the
 * mutex of the connection its object belongs to (none for a connection
 * never registered) and holds it across libvirt's call.
 */
#define SAAS_LV_RPC_IMPL
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/rpc.h"
#include "util/error.h"
#include "util/util.h"

/*
 * The registered connections: a few per VM host (a new one each time the
 * keepalive closed the last), so a list. An entry is freed only when its
 * connection is closed, which the driver does once no thread uses it.
 */
struct rpc_conn {
	virConnectPtr conn;
	pthread_mutex_t mu;
	struct rpc_conn *next;
};

static pthread_mutex_t conns_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rpc_conn *conns;

int saas__lv_rpc_serialise(virConnectPtr conn)
{
	struct rpc_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return saas__oom();
	c->conn = conn;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_lock(&conns_mu);
	c->next = conns;
	conns = c;
	pthread_mutex_unlock(&conns_mu);
	return SAAS_OK;
}

static pthread_mutex_t *conn_mutex(virConnectPtr conn)
{
	pthread_mutex_t *mu = NULL;

	if (!conn)
		return NULL;
	pthread_mutex_lock(&conns_mu);
	for (struct rpc_conn *c = conns; c && !mu; c = c->next)
		if (c->conn == conn)
			mu = &c->mu;
	pthread_mutex_unlock(&conns_mu);
	return mu;
}

static pthread_mutex_t *enter(virConnectPtr conn)
{
	pthread_mutex_t *mu = conn_mutex(conn);

	if (mu)
		pthread_mutex_lock(mu);
	return mu;
}

static void leave(pthread_mutex_t *mu)
{
	if (mu)
		pthread_mutex_unlock(mu);
}

int saas__lv_rpc_close(virConnectPtr conn)
{
	struct rpc_conn **p, *gone = NULL;
	int rc;

	if (!conn)
		return 0;
	rc = virConnectClose(conn);
	/* The last reference gone, the pointer may come back for another connection: forget it now. */
	pthread_mutex_lock(&conns_mu);
	for (p = &conns; *p; p = &(*p)->next) {
		if ((*p)->conn == conn) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&conns_mu);
	if (gone) {
		/* A channel's pump or closer that took it before it was forgotten lets go first. */
		pthread_mutex_lock(&gone->mu);
		pthread_mutex_unlock(&gone->mu);
		pthread_mutex_destroy(&gone->mu);
		free(gone);
	}
	return rc;
}

/* ---- the calls, each under its connection's mutex ---------------------------------------------- */

#define DOM_CALL(type, dom, call)                                                                        \
	do {                                                                                                 \
		pthread_mutex_t *mu_ = enter(virDomainGetConnect(dom));                                          \
		type r_ = call;                                                                                  \
		leave(mu_);                                                                                      \
		return r_;                                                                                       \
	} while (0)
#define CONN_CALL(type, conn, call)                                                                      \
	do {                                                                                                 \
		pthread_mutex_t *mu_ = enter(conn);                                                              \
		type r_ = call;                                                                                  \
		leave(mu_);                                                                                      \
		return r_;                                                                                       \
	} while (0)

virDomainPtr saas__lv_rpc_domain_lookup_by_name(virConnectPtr conn, const char *name)
{
	CONN_CALL(virDomainPtr, conn, virDomainLookupByName(conn, name));
}

virDomainPtr saas__lv_rpc_domain_create_xml(virConnectPtr conn, const char *xml, unsigned int flags)
{
	CONN_CALL(virDomainPtr, conn, virDomainCreateXML(conn, xml, flags));
}

int saas__lv_rpc_domain_destroy(virDomainPtr dom)
{
	DOM_CALL(int, dom, virDomainDestroy(dom));
}

int saas__lv_rpc_domain_get_state(virDomainPtr dom, int *state, int *reason, unsigned int flags)
{
	DOM_CALL(int, dom, virDomainGetState(dom, state, reason, flags));
}

int saas__lv_rpc_domain_get_info(virDomainPtr dom, virDomainInfoPtr info)
{
	DOM_CALL(int, dom, virDomainGetInfo(dom, info));
}

char *saas__lv_rpc_domain_get_metadata(virDomainPtr dom, int type, const char *uri, unsigned int flags)
{
	DOM_CALL(char *, dom, virDomainGetMetadata(dom, type, uri, flags));
}

int saas__lv_rpc_domain_set_metadata(virDomainPtr dom, int type, const char *metadata, const char *key,
                                     const char *uri, unsigned int flags)
{
	DOM_CALL(int, dom, virDomainSetMetadata(dom, type, metadata, key, uri, flags));
}

int saas__lv_rpc_domain_resume(virDomainPtr dom)
{
	DOM_CALL(int, dom, virDomainResume(dom));
}

int saas__lv_rpc_domain_suspend(virDomainPtr dom)
{
	DOM_CALL(int, dom, virDomainSuspend(dom));
}

int saas__lv_rpc_domain_set_memory_parameters(virDomainPtr dom, virTypedParameterPtr params, int nparams,
                                              unsigned int flags)
{
	DOM_CALL(int, dom, virDomainSetMemoryParameters(dom, params, nparams, flags));
}

int saas__lv_rpc_domain_save_flags(virDomainPtr dom, const char *to, const char *dxml, unsigned int flags)
{
	DOM_CALL(int, dom, virDomainSaveFlags(dom, to, dxml, flags));
}

int saas__lv_rpc_domain_restore(virConnectPtr conn, const char *from)
{
	CONN_CALL(int, conn, virDomainRestore(conn, from));
}

char *saas__lv_rpc_domain_get_xml_desc(virDomainPtr dom, unsigned int flags)
{
	DOM_CALL(char *, dom, virDomainGetXMLDesc(dom, flags));
}

virDomainSnapshotPtr saas__lv_rpc_domain_snapshot_create_xml(virDomainPtr dom, const char *xml, unsigned int flags)
{
	DOM_CALL(virDomainSnapshotPtr, dom, virDomainSnapshotCreateXML(dom, xml, flags));
}

int saas__lv_rpc_domain_memory_stats(virDomainPtr dom, virDomainMemoryStatPtr stats, unsigned int nr,
                                     unsigned int flags)
{
	DOM_CALL(int, dom, virDomainMemoryStats(dom, stats, nr, flags));
}

int saas__lv_rpc_domain_get_block_info(virDomainPtr dom, const char *disk, virDomainBlockInfoPtr info,
                                       unsigned int flags)
{
	DOM_CALL(int, dom, virDomainGetBlockInfo(dom, disk, info, flags));
}

int saas__lv_rpc_qemu_monitor_command_with_files(virDomainPtr dom, const char *cmd, unsigned int ninfiles,
                                                 int *infiles, unsigned int *noutfiles, int **outfiles,
                                                 char **result, unsigned int flags)
{
	DOM_CALL(int, dom,
	         virDomainQemuMonitorCommandWithFiles(dom, cmd, ninfiles, infiles, noutfiles, outfiles, result, flags));
}

int saas__lv_rpc_list_all_domains(virConnectPtr conn, virDomainPtr **doms, unsigned int flags)
{
	CONN_CALL(int, conn, virConnectListAllDomains(conn, doms, flags));
}

char *saas__lv_rpc_get_domain_capabilities(virConnectPtr conn, const char *emulator, const char *arch,
                                           const char *machine, const char *virttype, unsigned int flags)
{
	CONN_CALL(char *, conn, virConnectGetDomainCapabilities(conn, emulator, arch, machine, virttype, flags));
}

char *saas__lv_rpc_get_capabilities(virConnectPtr conn)
{
	CONN_CALL(char *, conn, virConnectGetCapabilities(conn));
}

int saas__lv_rpc_node_get_info(virConnectPtr conn, virNodeInfoPtr info)
{
	CONN_CALL(int, conn, virNodeGetInfo(conn, info));
}

int saas__lv_rpc_node_get_memory_stats(virConnectPtr conn, int cell, virNodeMemoryStatsPtr params, int *nparams,
                                       unsigned int flags)
{
	CONN_CALL(int, conn, virNodeGetMemoryStats(conn, cell, params, nparams, flags));
}

virStoragePoolPtr saas__lv_rpc_pool_lookup_by_name(virConnectPtr conn, const char *name)
{
	CONN_CALL(virStoragePoolPtr, conn, virStoragePoolLookupByName(conn, name));
}

virStoragePoolPtr saas__lv_rpc_pool_define_xml(virConnectPtr conn, const char *xml, unsigned int flags)
{
	CONN_CALL(virStoragePoolPtr, conn, virStoragePoolDefineXML(conn, xml, flags));
}

int saas__lv_rpc_pool_list_all_volumes(virStoragePoolPtr pool, virStorageVolPtr **vols, unsigned int flags)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolListAllVolumes(pool, vols, flags));
}

int saas__lv_rpc_pool_is_active(virStoragePoolPtr pool)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolIsActive(pool));
}

int saas__lv_rpc_pool_set_autostart(virStoragePoolPtr pool, int autostart)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolSetAutostart(pool, autostart));
}

int saas__lv_rpc_pool_create(virStoragePoolPtr pool, unsigned int flags)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolCreate(pool, flags));
}

int saas__lv_rpc_pool_build(virStoragePoolPtr pool, unsigned int flags)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolBuild(pool, flags));
}

int saas__lv_rpc_pool_refresh(virStoragePoolPtr pool, unsigned int flags)
{
	CONN_CALL(int, virStoragePoolGetConnect(pool), virStoragePoolRefresh(pool, flags));
}

char *saas__lv_rpc_pool_get_xml_desc(virStoragePoolPtr pool, unsigned int flags)
{
	CONN_CALL(char *, virStoragePoolGetConnect(pool), virStoragePoolGetXMLDesc(pool, flags));
}

virStorageVolPtr saas__lv_rpc_vol_lookup_by_name(virStoragePoolPtr pool, const char *name)
{
	CONN_CALL(virStorageVolPtr, virStoragePoolGetConnect(pool), virStorageVolLookupByName(pool, name));
}

virStorageVolPtr saas__lv_rpc_vol_create_xml(virStoragePoolPtr pool, const char *xml, unsigned int flags)
{
	CONN_CALL(virStorageVolPtr, virStoragePoolGetConnect(pool), virStorageVolCreateXML(pool, xml, flags));
}

char *saas__lv_rpc_vol_get_path(virStorageVolPtr vol)
{
	CONN_CALL(char *, virStorageVolGetConnect(vol), virStorageVolGetPath(vol));
}

int saas__lv_rpc_vol_delete(virStorageVolPtr vol, unsigned int flags)
{
	CONN_CALL(int, virStorageVolGetConnect(vol), virStorageVolDelete(vol, flags));
}

char *saas__lv_rpc_vol_get_xml_desc(virStorageVolPtr vol, unsigned int flags)
{
	CONN_CALL(char *, virStorageVolGetConnect(vol), virStorageVolGetXMLDesc(vol, flags));
}

int saas__lv_rpc_vol_get_info(virStorageVolPtr vol, virStorageVolInfoPtr info)
{
	CONN_CALL(int, virStorageVolGetConnect(vol), virStorageVolGetInfo(vol, info));
}

/* ---- streams ------------------------------------------------------------------------------------- */

/*
 * libvirt offers no way from a stream to its connection, and the driver
 * makes, uses and frees each stream in one function of one thread: so the
 * pair is remembered per thread, from virStreamNew to virStreamFree.
 */
#define THREAD_STREAMS 4
static _Thread_local struct {
	virStreamPtr st;
	virConnectPtr conn;
} streams[THREAD_STREAMS];

static virConnectPtr stream_conn(virStreamPtr st)
{
	for (size_t i = 0; st && i < THREAD_STREAMS; i++)
		if (streams[i].st == st)
			return streams[i].conn;
	return NULL;
}

virStreamPtr saas__lv_rpc_stream_new(virConnectPtr conn, unsigned int flags)
{
	virStreamPtr st = virStreamNew(conn, flags);
	size_t i;

	if (!st || !conn_mutex(conn))
		return st;
	for (i = 0; i < THREAD_STREAMS && streams[i].st; i++)
		;
	if (i == THREAD_STREAMS) {
		/* Never in the driver (one stream at a time per thread): unserialised would be the bug again. */
		virStreamFree(st);
		saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "more than %d libvirt streams in one thread",
		            THREAD_STREAMS);
		return NULL;
	}
	streams[i].st = st;
	streams[i].conn = conn;
	return st;
}

int saas__lv_rpc_channel_open(virDomainPtr dom, const char *name, virStreamPtr *out)
{
	virConnectPtr conn = virDomainGetConnect(dom);
	pthread_mutex_t *mu = enter(conn);
	int rc = -1;

	if ((*out = virStreamNew(conn, VIR_STREAM_NONBLOCK)))
		rc = virDomainOpenChannel(dom, name, *out, 0);
	leave(mu);
	return rc;
}

bool saas__lv_rpc_try_enter(virConnectPtr conn, pthread_mutex_t **held)
{
	*held = conn_mutex(conn);
	return !*held || pthread_mutex_trylock(*held) == 0;
}

void saas__lv_rpc_leave(pthread_mutex_t *held)
{
	leave(held);
}

void saas__lv_rpc_channel_close(virConnectPtr conn, virStreamPtr st, bool finish)
{
	pthread_mutex_t *mu = enter(conn);

	if (finish ? virStreamFinish(st) < 0 : virStreamAbort(st) < 0)
		virResetLastError(); /* the host or the guest went first: nothing to tell anyone */
	leave(mu);
	virStreamFree(st);
}

int saas__lv_rpc_stream_free(virStreamPtr st)
{
	for (size_t i = 0; st && i < THREAD_STREAMS; i++)
		if (streams[i].st == st) {
			streams[i].st = NULL;
			streams[i].conn = NULL;
		}
	return virStreamFree(st);
}

int saas__lv_rpc_vol_upload(virStorageVolPtr vol, virStreamPtr st, unsigned long long offset,
                            unsigned long long length, unsigned int flags)
{
	CONN_CALL(int, virStorageVolGetConnect(vol), virStorageVolUpload(vol, st, offset, length, flags));
}

int saas__lv_rpc_vol_download(virStorageVolPtr vol, virStreamPtr st, unsigned long long offset,
                              unsigned long long length, unsigned int flags)
{
	CONN_CALL(int, virStorageVolGetConnect(vol), virStorageVolDownload(vol, st, offset, length, flags));
}

int saas__lv_rpc_stream_finish(virStreamPtr st)
{
	CONN_CALL(int, stream_conn(st), virStreamFinish(st));
}

int saas__lv_rpc_stream_abort(virStreamPtr st)
{
	CONN_CALL(int, stream_conn(st), virStreamAbort(st));
}

/*
 * libvirt's own loops (which report a handler's failure as the libvirt
 * error the caller reads: libvirt has no public call to set one), with the
 * connection's mutex held whenever they run and let go while the handler
 * runs: the handler takes it back before it returns, for the send, receive
 * or abort that follows.
 */
struct chunked {
	pthread_mutex_t *mu;
	union {
		virStreamSourceFunc source;
		virStreamSinkFunc sink;
	} fn;
	void *opaque;
};

/* The lock taken back after a handler ran unlocked; errno, what libvirt reports a handler's failure with, kept. */
static void reenter(pthread_mutex_t *mu)
{
	int err = errno;

	if (mu)
		pthread_mutex_lock(mu);
	errno = err;
}

static int chunk_source(virStreamPtr st, char *data, size_t n, void *ud)
{
	struct chunked *c = ud;
	int rc;

	leave(c->mu);
	rc = c->fn.source(st, data, n, c->opaque);
	reenter(c->mu);
	return rc;
}

static int chunk_sink(virStreamPtr st, const char *data, size_t n, void *ud)
{
	struct chunked *c = ud;
	int rc;

	leave(c->mu);
	rc = c->fn.sink(st, data, n, c->opaque);
	reenter(c->mu);
	return rc;
}

int saas__lv_stream_send_all(virStreamPtr st, virStreamSourceFunc handler, void *opaque)
{
	/* Held whenever libvirt runs: the handler lets it go while it reads. */
	struct chunked c = { enter(stream_conn(st)), { .source = handler }, opaque };
	int rc = virStreamSendAll(st, chunk_source, &c);

	leave(c.mu);
	return rc;
}

int saas__lv_stream_recv_all(virStreamPtr st, virStreamSinkFunc handler, void *opaque)
{
	struct chunked c = { enter(stream_conn(st)), { .sink = handler }, opaque };
	int rc = virStreamRecvAll(st, chunk_sink, &c);

	leave(c.mu);
	return rc;
}
