/*
 * Internal: one libvirt call at a time on a VM host's connection (rpc.c).
 *
 * Why. libvirt's RPC client (9.0 to 10.2, Debian 12's included: CVE-2024-4418,
 * fixed upstream in 10.3) lets the threads that share a connection pass "the
 * buck": one thread polls the socket for all, the others sleep. Each poll
 * leaves a GSource on the connection's private GLib context whose callback
 * writes to the polling thread's stack; when another thread (a caller that
 * queues, or the keepalive's timer on the event loop) cuts the poll short,
 * the source stays attached. When the keepalive then closes the connection
 * (a host that stopped answering) while other threads wait behind the
 * poller, the buck passes to one of them and its poll runs the stale source:
 * a write into, and a pointer read from, a stack frame that has returned.
 * server.hosts.vm died of it (SIGSEGV in virNetClientIOEventFD) seconds after
 * a host was cut off and came back.
 *
 * What this does. A connection made by saas__lv_vmhost_connect is
 * registered here, and every call of the driver that sends an RPC on a
 * registered connection takes the connection's mutex first: no thread ever
 * waits inside libvirt behind another on it, so a keepalive close finds no
 * waiter and the poller's stale sources die with the connection. Calls on
 * other connections (the embedded driver, a local daemon, which the driver
 * opens without keepalive) are not serialised. Streams are serialised per
 * chunk (saas__lv_stream_send_all, saas__lv_stream_recv_all), so a long
 * upload or a template's state poured into a clone does not hold the host
 * for its whole length. The cost: calls on one host do not overlap, which
 * on a VM host's connection (each call a round trip, the long waits, boots
 * and guest commands, outside libvirt) is what they nearly always did.
 *
 * How. Every file of the driver includes this header through
 * libvirt_driver.h, and the names below stand for the serialised wrappers,
 * so that no call site can forget the lock (rpc.c alone, which defines
 * SAAS_LV_RPC_IMPL, sees libvirt's own names). A function the driver starts
 * to call that sends an RPC gets its line here and in rpc.c; meta.libvirt_rpc
 * (tests/meta/check_libvirt_rpc.py) fails on a libvirt call of the driver
 * that is neither here nor in its list of calls that send nothing.
 */
#ifndef SAAS_DRIVER_LIBVIRT_RPC_H
#define SAAS_DRIVER_LIBVIRT_RPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <libvirt/libvirt.h>

/* conn's calls go one at a time from now on: SAAS_OK, or SAAS_ENOMEM. */
int saas__lv_rpc_serialise(virConnectPtr conn);
/* Close conn (NULL-safe) and forget it; no thread may still be using it. libvirt's virConnectClose answer. */
int saas__lv_rpc_close(virConnectPtr conn);

virDomainPtr saas__lv_rpc_domain_lookup_by_name(virConnectPtr conn, const char *name);
virDomainPtr saas__lv_rpc_domain_create_xml(virConnectPtr conn, const char *xml, unsigned int flags);
int saas__lv_rpc_domain_destroy(virDomainPtr dom);
int saas__lv_rpc_domain_get_state(virDomainPtr dom, int *state, int *reason, unsigned int flags);
int saas__lv_rpc_domain_get_info(virDomainPtr dom, virDomainInfoPtr info);
char *saas__lv_rpc_domain_get_metadata(virDomainPtr dom, int type, const char *uri, unsigned int flags);
int saas__lv_rpc_domain_set_metadata(virDomainPtr dom, int type, const char *metadata, const char *key,
                                     const char *uri, unsigned int flags);
int saas__lv_rpc_domain_resume(virDomainPtr dom);
int saas__lv_rpc_domain_suspend(virDomainPtr dom);
int saas__lv_rpc_domain_set_memory_parameters(virDomainPtr dom, virTypedParameterPtr params, int nparams,
                                              unsigned int flags);
int saas__lv_rpc_domain_save_flags(virDomainPtr dom, const char *to, const char *dxml, unsigned int flags);
int saas__lv_rpc_domain_restore(virConnectPtr conn, const char *from);
char *saas__lv_rpc_domain_get_xml_desc(virDomainPtr dom, unsigned int flags);
virDomainSnapshotPtr saas__lv_rpc_domain_snapshot_create_xml(virDomainPtr dom, const char *xml, unsigned int flags);
int saas__lv_rpc_domain_memory_stats(virDomainPtr dom, virDomainMemoryStatPtr stats, unsigned int nr,
                                     unsigned int flags);
int saas__lv_rpc_domain_get_block_info(virDomainPtr dom, const char *disk, virDomainBlockInfoPtr info,
                                       unsigned int flags);
/* libvirt-qemu's QMP passthrough (qmp.c): a template's or a clone's migration on a VM host goes through it. */
int saas__lv_rpc_qemu_monitor_command_with_files(virDomainPtr dom, const char *cmd, unsigned int ninfiles,
                                                 int *infiles, unsigned int *noutfiles, int **outfiles,
                                                 char **result, unsigned int flags);
int saas__lv_rpc_list_all_domains(virConnectPtr conn, virDomainPtr **doms, unsigned int flags);
char *saas__lv_rpc_get_domain_capabilities(virConnectPtr conn, const char *emulator, const char *arch,
                                           const char *machine, const char *virttype, unsigned int flags);
char *saas__lv_rpc_get_capabilities(virConnectPtr conn);
int saas__lv_rpc_node_get_info(virConnectPtr conn, virNodeInfoPtr info);
int saas__lv_rpc_node_get_memory_stats(virConnectPtr conn, int cell, virNodeMemoryStatsPtr params, int *nparams,
                                       unsigned int flags);
virStoragePoolPtr saas__lv_rpc_pool_lookup_by_name(virConnectPtr conn, const char *name);
virStoragePoolPtr saas__lv_rpc_pool_define_xml(virConnectPtr conn, const char *xml, unsigned int flags);
int saas__lv_rpc_pool_list_all_volumes(virStoragePoolPtr pool, virStorageVolPtr **vols, unsigned int flags);
int saas__lv_rpc_pool_is_active(virStoragePoolPtr pool);
int saas__lv_rpc_pool_set_autostart(virStoragePoolPtr pool, int autostart);
int saas__lv_rpc_pool_create(virStoragePoolPtr pool, unsigned int flags);
int saas__lv_rpc_pool_build(virStoragePoolPtr pool, unsigned int flags);
int saas__lv_rpc_pool_refresh(virStoragePoolPtr pool, unsigned int flags);
char *saas__lv_rpc_pool_get_xml_desc(virStoragePoolPtr pool, unsigned int flags);
virStorageVolPtr saas__lv_rpc_vol_lookup_by_name(virStoragePoolPtr pool, const char *name);
virStorageVolPtr saas__lv_rpc_vol_create_xml(virStoragePoolPtr pool, const char *xml, unsigned int flags);
char *saas__lv_rpc_vol_get_path(virStorageVolPtr vol);
int saas__lv_rpc_vol_delete(virStorageVolPtr vol, unsigned int flags);
char *saas__lv_rpc_vol_get_xml_desc(virStorageVolPtr vol, unsigned int flags);
int saas__lv_rpc_vol_get_info(virStorageVolPtr vol, virStorageVolInfoPtr info);
/* The stream's connection is remembered (in this thread) for the stream calls below until virStreamFree. */
virStreamPtr saas__lv_rpc_stream_new(virConnectPtr conn, unsigned int flags);
int saas__lv_rpc_vol_upload(virStorageVolPtr vol, virStreamPtr st, unsigned long long offset,
                            unsigned long long length, unsigned int flags);
int saas__lv_rpc_vol_download(virStorageVolPtr vol, virStreamPtr st, unsigned long long offset,
                              unsigned long long length, unsigned int flags);
/*
 * A domain's channel as a non-blocking stream (channel.c): made and opened
 * under the lock, and not remembered per thread, since the event loop's
 * thread pumps and frees it (its sends and receives never wait on a reply).
 * 0 and *out, or -1 with libvirt's error set and *out to free if not NULL.
 */
int saas__lv_rpc_channel_open(virDomainPtr dom, const char *name, virStreamPtr *out);
/*
 * The channel pump's share (channel.c), which runs in the event loop's
 * thread and must never wait there behind a caller: conn's lock if it is
 * free now (true, and saas__lv_rpc_leave(*held) after the call), false
 * when a call holds it. A connection never serialised: true, *held NULL.
 */
bool saas__lv_rpc_try_enter(virConnectPtr conn, pthread_mutex_t **held);
void saas__lv_rpc_leave(pthread_mutex_t *held);
/*
 * A channel's stream ended (virStreamFinish when finish, else
 * virStreamAbort; both a round trip) and freed, under conn's lock, which
 * this waits for: never in the event loop's thread. libvirt's error reset.
 */
void saas__lv_rpc_channel_close(virConnectPtr conn, virStreamPtr st, bool finish);
/* libvirt's virStreamSendAll and virStreamRecvAll, one lock per chunk; the handler runs unlocked. */
int saas__lv_stream_send_all(virStreamPtr st, virStreamSourceFunc handler, void *opaque);
int saas__lv_stream_recv_all(virStreamPtr st, virStreamSinkFunc handler, void *opaque);
int saas__lv_rpc_stream_finish(virStreamPtr st);
int saas__lv_rpc_stream_abort(virStreamPtr st);
int saas__lv_rpc_stream_free(virStreamPtr st);

#ifndef SAAS_LV_RPC_IMPL
#define virConnectClose saas__lv_rpc_close
#define virDomainLookupByName saas__lv_rpc_domain_lookup_by_name
#define virDomainCreateXML saas__lv_rpc_domain_create_xml
#define virDomainDestroy saas__lv_rpc_domain_destroy
#define virDomainGetState saas__lv_rpc_domain_get_state
#define virDomainGetInfo saas__lv_rpc_domain_get_info
#define virDomainGetMetadata saas__lv_rpc_domain_get_metadata
#define virDomainSetMetadata saas__lv_rpc_domain_set_metadata
#define virDomainResume saas__lv_rpc_domain_resume
#define virDomainSuspend saas__lv_rpc_domain_suspend
#define virDomainSetMemoryParameters saas__lv_rpc_domain_set_memory_parameters
#define virDomainSaveFlags saas__lv_rpc_domain_save_flags
#define virDomainRestore saas__lv_rpc_domain_restore
#define virDomainGetXMLDesc saas__lv_rpc_domain_get_xml_desc
#define virDomainSnapshotCreateXML saas__lv_rpc_domain_snapshot_create_xml
#define virDomainMemoryStats saas__lv_rpc_domain_memory_stats
#define virDomainGetBlockInfo saas__lv_rpc_domain_get_block_info
#define virDomainQemuMonitorCommandWithFiles saas__lv_rpc_qemu_monitor_command_with_files
#define virConnectListAllDomains saas__lv_rpc_list_all_domains
#define virConnectGetDomainCapabilities saas__lv_rpc_get_domain_capabilities
#define virConnectGetCapabilities saas__lv_rpc_get_capabilities
#define virNodeGetInfo saas__lv_rpc_node_get_info
#define virNodeGetMemoryStats saas__lv_rpc_node_get_memory_stats
#define virStoragePoolLookupByName saas__lv_rpc_pool_lookup_by_name
#define virStoragePoolDefineXML saas__lv_rpc_pool_define_xml
#define virStoragePoolListAllVolumes saas__lv_rpc_pool_list_all_volumes
#define virStoragePoolIsActive saas__lv_rpc_pool_is_active
#define virStoragePoolSetAutostart saas__lv_rpc_pool_set_autostart
#define virStoragePoolCreate saas__lv_rpc_pool_create
#define virStoragePoolBuild saas__lv_rpc_pool_build
#define virStoragePoolRefresh saas__lv_rpc_pool_refresh
#define virStoragePoolGetXMLDesc saas__lv_rpc_pool_get_xml_desc
#define virStorageVolLookupByName saas__lv_rpc_vol_lookup_by_name
#define virStorageVolCreateXML saas__lv_rpc_vol_create_xml
#define virStorageVolGetPath saas__lv_rpc_vol_get_path
#define virStorageVolDelete saas__lv_rpc_vol_delete
#define virStorageVolGetXMLDesc saas__lv_rpc_vol_get_xml_desc
#define virStorageVolGetInfo saas__lv_rpc_vol_get_info
#define virStreamNew saas__lv_rpc_stream_new
#define virStorageVolUpload saas__lv_rpc_vol_upload
#define virStorageVolDownload saas__lv_rpc_vol_download
#define virStreamSendAll saas__lv_stream_send_all
#define virStreamRecvAll saas__lv_stream_recv_all
#define virStreamFinish saas__lv_rpc_stream_finish
#define virStreamAbort saas__lv_rpc_stream_abort
#define virStreamFree saas__lv_rpc_stream_free
#endif

#endif
