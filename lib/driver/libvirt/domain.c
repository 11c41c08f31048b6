/*
 * Domains: the XML of a VM's transient domain, and the metadata the driver
 * reads back from running domains (which engine owns a domain, its SSH port
 * and pinned host key) to list and adopt them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/domain.h"
#include "driver/libvirt/libvirt_driver.h"
#include "transport/control.h"
#include "transport/egress_mux.h"

static void xml_escape_n(saas__buf *b, const char *s, size_t n)
{
	for (; n-- && *s; s++) {
		switch (*s) {
		case '&': saas__buf_puts(b, "&amp;"); break;
		case '<': saas__buf_puts(b, "&lt;"); break;
		case '>': saas__buf_puts(b, "&gt;"); break;
		case '\'': saas__buf_puts(b, "&apos;"); break;
		case '"': saas__buf_puts(b, "&quot;"); break;
		default: saas__buf_put(b, s, 1);
		}
	}
}

static void xml_escape(saas__buf *b, const char *s)
{
	xml_escape_n(b, s, strlen(s));
}

unsigned int saas__lv_domain_memory(const saas_vm_spec *spec, const struct image *im)
{
	return im->min_memory_mib && spec->memory_mb < im->min_memory_mib ? im->min_memory_mib : spec->memory_mb;
}

void saas__lv_domain_memory_args(saas__buf *b, int mode, const char *path, unsigned int mib)
{
	saas__buf_puts(b, "    <qemu:arg value='-object'/>\n    <qemu:arg value='");
	if (mode == LV_MEM_RAM) {
		saas__buf_printf(b, "memory-backend-ram,id=" MEM_ID ",size=%uM", mib);
	} else {
		saas__buf_printf(b, "memory-backend-file,id=" MEM_ID ",size=%uM,share=%s,mem-path=", mib,
		                 mode == LV_MEM_SHARED ? "on" : "off");
		/* QEMU's option syntax: a comma in a value is written twice. */
		for (const char *c = path; *c; c++) {
			if (*c == ',')
				saas__buf_puts(b, ",");
			xml_escape_n(b, c, 1);
		}
	}
	saas__buf_puts(b, "'/>\n    <qemu:arg value='-machine'/>\n    <qemu:arg value='memory-backend=" MEM_ID "'/>\n");
}

/*
 * The domain of a VM: a clone's (def->incoming) adds -incoming defer, its
 * state being fed in through QMP.
 */
char *saas__lv_domain_xml(const struct saas__lv_domain *def)
{
	const saas_vm_spec *spec = def->spec;
	const struct image *im = def->im;
	saas__buf b = SAAS__BUF_INIT;
	unsigned int mem = saas__lv_domain_memory(spec, im);

	saas__buf_printf(&b, "<domain type='%s' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n",
	                 def->kvm ? "kvm" : "qemu");
	saas__buf_puts(&b, "  <name>");
	xml_escape(&b, spec->name);
	saas__buf_puts(&b, "</name>\n  <metadata>\n    <" META_PREFIX ":vm xmlns:" META_PREFIX "='" META_NS "'>\n");
	saas__buf_printf(&b, "      <" META_PREFIX ":ssh-port>%u</" META_PREFIX ":ssh-port>\n", def->port);
	saas__buf_puts(&b, "      <" META_PREFIX ":image>");
	xml_escape(&b, im->name);
	saas__buf_puts(&b, "</" META_PREFIX ":image>\n      <" META_PREFIX ":host-key>");
	xml_escape(&b, im->host_key);
	saas__buf_puts(&b, "</" META_PREFIX ":host-key>\n      <" META_PREFIX ":owner>");
	xml_escape(&b, def->owner);
	saas__buf_printf(&b, "</" META_PREFIX ":owner>\n      <" META_PREFIX ":network>%s</" META_PREFIX ":network>\n",
	                 def->policy ? "policy" : def->internet ? "internet" : "isolated");
	/* A VM adopted after a restart keeps its uid: the allocator learns it from here. */
	if (def->uid)
		saas__buf_printf(&b, "      <" META_PREFIX ":uid>%u</" META_PREFIX ":uid>\n", def->uid);
	/* A snapshot of it restores into a domain with the same devices: it reads this back. */
	if (def->control)
		saas__buf_puts(&b, "      <" META_PREFIX ":control>" CONTROL_PORT_NAME "</" META_PREFIX ":control>\n");
	if (def->spare_until_ms > 0)
		saas__buf_printf(&b, "      <" META_PREFIX ":spare-until>%lld</" META_PREFIX ":spare-until>\n",
		                 (long long)def->spare_until_ms);
	saas__buf_puts(&b, "    </" META_PREFIX ":vm>\n  </metadata>\n");
	/* A VM generation id: guest kernels with vmgenid reseed their RNG when it changes (clones). */
	saas__buf_puts(&b, "  <genid/>\n");
	saas__buf_printf(&b, "  <memory unit='MiB'>%u</memory>\n  <vcpu>%u</vcpu>\n", mem, spec->vcpus);
	/*
	 * Host limits in the domain's cgroup (cgroup.c): the global quota holds
	 * QEMU's every thread, vCPUs and emulator together, to cpu_milli/1000
	 * host CPUs per vCPU; the I/O weight is its share of the disk under
	 * contention. The memory limit is set live after start.
	 */
	if (def->cpu_milli)
		saas__buf_printf(&b, "  <cputune>\n    <global_period>%u</global_period>\n"
		                     "    <global_quota>%llu</global_quota>\n  </cputune>\n",
		                 CPU_PERIOD_US,
		                 (unsigned long long)spec->vcpus * def->cpu_milli * CPU_PERIOD_US / 1000);
	if (def->io_weight)
		saas__buf_printf(&b, "  <blkiotune>\n    <weight>%u</weight>\n  </blkiotune>\n", def->io_weight);
	saas__buf_puts(&b, "  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n");
	/*
	 * A clone's kernel is already in the memory it restores: loading the
	 * image's kernel and initramfs again (tens of MiB) would be thrown away.
	 */
	if (!def->incoming) {
		saas__buf_puts(&b, "    <kernel>");
		xml_escape(&b, def->kernel ? def->kernel : im->kernel);
		saas__buf_puts(&b, "</kernel>\n    <initrd>");
		xml_escape(&b, def->initrd ? def->initrd : im->initrd);
		saas__buf_puts(&b, "</initrd>\n    <cmdline>");
		xml_escape(&b, im->boot_args);
		saas__buf_puts(&b, " aas.hostname=");
		xml_escape(&b, spec->name);
		saas__buf_puts(&b, " aas.authkey=");
		xml_escape(&b, def->authkey_b64);
		saas__buf_puts(&b, "</cmdline>\n");
	}
	/*
	 * Under TCG, QEMU's translated-code cache grows to 1 GiB by default: it
	 * is capped so that the memory limit can count it (TCG_CACHE_MIB).
	 */
	saas__buf_puts(&b, "  </os>\n  <features>\n    <acpi/>\n");
	if (!def->kvm)
		saas__buf_printf(&b, "    <tcg>\n      <tb-cache unit='MiB'>%u</tb-cache>\n    </tcg>\n", TCG_CACHE_MIB);
	saas__buf_puts(&b, "  </features>\n");
	/* Under TCG, 'maximum' gives the guest RDRAND (no entropy stalls); with KVM, the host's CPU. */
	saas__buf_puts(&b, def->kvm ? "  <cpu mode='host-passthrough'/>\n" : "  <cpu mode='maximum'/>\n");
	saas__buf_puts(&b, "  <clock offset='utc'/>\n  <on_poweroff>destroy</on_poweroff>\n"
	                   "  <on_reboot>destroy</on_reboot>\n  <on_crash>destroy</on_crash>\n  <devices>\n");
	if (def->emulator) {
		saas__buf_puts(&b, "    <emulator>");
		xml_escape(&b, def->emulator);
		saas__buf_puts(&b, "</emulator>\n");
	}
	if (def->overlay) {
		saas__buf_puts(&b, "    <disk type='file' device='disk'>\n      <driver name='qemu' type='qcow2' "
		                   "discard='unmap'/>\n      <source file='");
		xml_escape(&b, def->overlay);
		saas__buf_puts(&b, "'/>\n      <target dev='vda' bus='virtio'/>\n    </disk>\n");
	}
	/*
	 * The console: a file the engine reads; on a remote host, whose files the
	 * engine cannot read, a pty (QEMU drops what nobody reads; `virsh
	 * console` on the host attaches to it).
	 */
	if (def->vmdir) {
		saas__buf_puts(&b, "    <controller type='usb' model='none'/>\n    <serial type='file'>\n      <source path='");
		xml_escape(&b, def->vmdir);
		saas__buf_puts(&b, "/console.log' append='on'/>\n      <target port='0'/>\n    </serial>\n");
	} else {
		saas__buf_puts(&b, "    <controller type='usb' model='none'/>\n    <serial type='pty'>\n"
		                   "      <target port='0'/>\n    </serial>\n");
	}
	/*
	 * The control port: QEMU listens on a socket in the VM's directory, which
	 * only this VM's uid and the engine can reach; libvirt adds the
	 * virtio-serial controller, in the same slot in a template and its clones.
	 * A remote host's VM has no directory the engine can reach: libvirt
	 * names the socket in the domain's channel directory there, and the
	 * engine opens it through libvirt (channel.c).
	 */
	if (def->egress)
		saas__buf_puts(&b, "    <channel type='unix'>\n      <source mode='bind'/>\n      <target type='virtio' "
		                   "name='" MUX_PORT_NAME "'/>\n    </channel>\n");
	if (def->control) {
		saas__buf_puts(&b, "    <channel type='unix'>\n      <source mode='bind'");
		if (def->vmdir) {
			saas__buf_puts(&b, " path='");
			xml_escape(&b, def->vmdir);
			saas__buf_puts(&b, "/" CONTROL_SOCKET "'");
		}
		saas__buf_puts(&b, "/>\n      <target type='virtio' name='" CONTROL_PORT_NAME "'/>\n    </channel>\n");
	}
	saas__buf_puts(&b, "    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>\n"
	                   "    <memballoon model='none'/>\n  </devices>\n");
	/*
	 * QEMU's own uid (uid.c): libvirt starts it under this label with no
	 * capabilities and no_new_privs, and (relabel='no') chowns nothing: the
	 * driver gave the VM its files.
	 */
	if (def->uid)
		saas__buf_printf(&b, "  <seclabel type='static' model='dac' relabel='no'>\n"
		                     "    <label>+%u:+%u</label>\n  </seclabel>\n", def->uid, def->gid);
	/*
	 * User-mode networking with the one way in an SSH forward on host loopback
	 * (on a remote host: on its cluster address, def->listen).
	 * The NIC gets a fixed slot: libvirt hands out pcie.0 slots from 1 upwards.
	 * Isolated, restrict=on: the guest may open no connection at all, so it can
	 * never reach the host's own services (10.0.2.2 is the host's loopback
	 * under slirp), and no ruleset flush can change that. Internet or a
	 * policy: slirp opens what the guest asks for; the guard (lv_create
	 * checked it is installed) keeps it off the host, and the egress table
	 * (egress.c) decides the rest by QEMU's uid, changeably while it runs.
	 * On a VM host, restrict=on always: the guest's egress is the servers'
	 * (def->egress), never a connection the host's slirp opens.
	 */
	saas__buf_printf(&b,
	                 "  <qemu:commandline>\n"
	                 "    <qemu:arg value='-netdev'/>\n"
	                 "    <qemu:arg value='user,id=aasnet,%shostfwd=tcp:%s:%u-:22'/>\n"
	                 "    <qemu:arg value='-device'/>\n"
	                 "    <qemu:arg value='virtio-net-pci,netdev=aasnet,bus=pcie.0,addr=0x1e'/>\n"
	                 "%s",
	                 def->internet && !def->egress ? "" : "restrict=on,", def->listen ? def->listen : "127.0.0.1", def->port,
	                 def->incoming ? "    <qemu:arg value='-incoming'/>\n    <qemu:arg value='defer'/>\n" : "");
	saas__lv_domain_memory_args(&b, def->mem, def->mem_path, mem);
	saas__buf_puts(&b, "  </qemu:commandline>\n</domain>\n");
	return saas__buf_detach(&b, NULL);
}

/*
 * The text of an element, n bytes at s, unescaped (xml_escape's five
 * entities): libvirt hands the metadata back as XML, so a state directory
 * with '&' in its name reads "&amp;" and would not match its owner.
 */
static char *xml_text(const char *s, size_t n)
{
	static const struct {
		const char *entity;
		char c;
	} entities[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&apos;", '\'' }, { "&quot;", '"' } };
	char *out = strndup(s, n), *w = out;

	if (!out)
		return NULL;
	for (const char *r = out; *r;) {
		size_t i = 0;
		while (*r == '&' && i < SAAS_ARRAY_SIZE(entities) &&
		       strncmp(r, entities[i].entity, strlen(entities[i].entity)) != 0)
			i++;
		if (*r == '&' && i < SAAS_ARRAY_SIZE(entities)) {
			*w++ = entities[i].c;
			r += strlen(entities[i].entity);
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return out;
}

int saas__lv_meta_parse(const char *xml, unsigned int *port, char **host_key, char **owner)
{
	const char *p, *q;

	*port = 0;
	*host_key = *owner = NULL;
	if ((p = strstr(xml, "ssh-port>")))
		*port = (unsigned int)strtoul(p + 9, NULL, 10);
	if ((p = strstr(xml, "host-key>")) && (q = strchr(p + 9, '<')))
		*host_key = xml_text(p + 9, (size_t)(q - p - 9));
	if ((p = strstr(xml, "owner>")) && (q = strchr(p + 6, '<')))
		*owner = xml_text(p + 6, (size_t)(q - p - 6));
	if (*port && *host_key && *owner)
		return SAAS_OK;
	free(*host_key);
	free(*owner);
	*host_key = *owner = NULL;
	return SAAS_ENOTFOUND;
}

bool saas__lv_meta_control(const char *xml)
{
	return strstr(xml, "control>" CONTROL_PORT_NAME "<") != NULL;
}

unsigned int saas__lv_meta_uid(const char *xml)
{
	const char *p = strstr(xml, "uid>");
	char *end;
	unsigned long uid;

	if (!p)
		return 0;
	uid = strtoul(p + 4, &end, 10);
	return *end == '<' && uid <= UIDS_LAST_MAX ? (unsigned int)uid : 0;
}

int64_t saas__lv_meta_spare_until(const char *xml)
{
	const char *p = strstr(xml, "spare-until>");
	char *end;
	long long ms;

	if (!p || p[12] < '0' || p[12] > '9')
		return 0;
	errno = 0;
	ms = strtoll(p + 12, &end, 10);
	return *end == '<' && errno == 0 ? (int64_t)ms : 0;
}

char *saas__lv_meta_without_spare(const char *xml)
{
	const char *open = strstr(xml, "spare-until>"), *close, *from, *to;
	char *out;

	if (!open || !(close = strstr(open + 12, "spare-until>")))
		return saas__strdup(xml);
	/* From the '<' of the opening tag (and the indent before it) to the closing tag's '>' and its line's end. */
	for (from = open; from > xml && from[-1] != '<'; from--)
		;
	if (from > xml)
		from--;
	while (from > xml && (from[-1] == ' ' || from[-1] == '\t'))
		from--;
	to = close + 12;
	if (*to == '\n')
		to++;
	if (asprintf(&out, "%.*s%s", (int)(from - xml), xml, to) < 0)
		return NULL;
	return out;
}

/*
 * Read dom's metadata, make its next version with edit (NULL: nothing to do when *none is set, out of
 * memory otherwise), and set it live. SAAS_OK, or an error naming what (what_set: the write's failure).
 */
static int domain_meta_rewrite(virDomainPtr dom, char *(*edit)(const char *xml, int arg, bool *none), int arg,
                               const char *what_none, const char *what_set)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0), *next;
	bool none = false;
	int rc = SAAS_OK;

	if (!xml)
		return saas__lv_virt_error("cannot read the VM's metadata");
	if (!(next = edit(xml, arg, &none))) {
		if (none && what_none)
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "%s", what_none);
		else if (!none)
			rc = saas__oom();
	} else if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, next, META_PREFIX, META_NS,
	                                VIR_DOMAIN_AFFECT_LIVE) < 0) {
		rc = saas__lv_virt_error(what_set);
	}
	free(next);
	free(xml);
	return rc;
}

static char *edit_spare_clear(const char *xml, int arg, bool *none)
{
	(void)arg;
	if (!strstr(xml, "spare-until>")) {
		*none = true;
		return NULL;
	}
	return saas__lv_meta_without_spare(xml);
}

int saas__lv_domain_meta_spare_clear(virDomainPtr dom)
{
	return domain_meta_rewrite(dom, edit_spare_clear, 0, NULL,
	                           "cannot take the spare's mark out of the VM's metadata");
}

int saas__lv_meta_network(const char *xml)
{
	const char *p = strstr(xml, "network>");

	if (p && strncmp(p + 8, "internet<", 9) == 0)
		return SAAS_NET_INTERNET;
	if (p && strncmp(p + 8, "policy<", 7) == 0)
		return SAAS_NET_POLICY;
	return SAAS_NET_ISOLATED;
}

char *saas__lv_meta_with_network(const char *xml, int mode)
{
	const char *name = mode == SAAS_NET_POLICY ? "policy" : "internet";
	const char *p = strstr(xml, "network>"), *end;
	char *out;

	if (!p || !(end = strchr(p += 8, '<')))
		return NULL;
	if (asprintf(&out, "%.*s%s%s", (int)(p - xml), xml, name, end) < 0)
		return NULL;
	return out;
}

static char *edit_network(const char *xml, int mode, bool *none)
{
	const char *p = strstr(xml, "network>");

	/* No network element (a VM made by no engine of ours): nothing to rewrite, said as such. */
	*none = !p || !strchr(p, '<');
	return *none ? NULL : saas__lv_meta_with_network(xml, mode);
}

int saas__lv_domain_meta_network_set(virDomainPtr dom, int mode)
{
	return domain_meta_rewrite(dom, edit_network, mode, "the VM's metadata records no network",
	                           "cannot record the VM's network in its metadata");
}

unsigned int saas__lv_domain_uid(virDomainPtr dom)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	unsigned int uid = xml ? saas__lv_meta_uid(xml) : 0;

	free(xml);
	return uid;
}

/* Read our metadata back from a running domain: the SSH port, host key and owner. */
int saas__lv_domain_meta(virDomainPtr dom, unsigned int *port, char **host_key, char **owner)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	int rc;

	*host_key = *owner = NULL;
	if (!xml)
		return SAAS_ENOTFOUND;
	rc = saas__lv_meta_parse(xml, port, host_key, owner);
	free(xml);
	return rc;
}

int saas__lv_own_domains(struct drv *d, const char *prefix, saas__lv_domain_fn fn, void *ud)
{
	virConnectPtr conn = saas__lv_conn(d);
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(conn, &doms, 0), stop = 0;

	if (n < 0)
		return saas__lv_virt_error("listing VMs");
	for (int i = 0; i < n; i++) {
		const char *name = virDomainGetName(doms[i]);
		unsigned int port = 0;
		char *host_key = NULL, *owner = NULL;
		if (!stop && name && strncmp(name, prefix, strlen(prefix)) == 0 &&
		    saas__lv_domain_meta(doms[i], &port, &host_key, &owner) == SAAS_OK && strcmp(owner, d->owner) == 0)
			stop = fn(d, doms[i], name, ud);
		free(host_key);
		free(owner);
		virDomainFree(doms[i]);
	}
	free(doms);
	/*
	 * A host that stopped answering half-way fails each domain's metadata:
	 * a list missing those would have reconcile close sandboxes still running.
	 */
	if (d->host->may_vanish && virConnectIsAlive(conn) != 1)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM host %s stopped answering while its VMs "
		                   "were listed", d->uri);
	return SAAS_OK;
}
