/*
 * aas-server with the fake VM driver, for fast HTTP tests without VMs: the
 * same server objects, but "VMs" are records in memory (tests/fake) and a
 * sandbox's port N is the host's 127.0.0.1:N, so the preview proxy can be
 * tested against servers the test starts on the host.
 *
 * AAS_FAKE_CREATE_DELAY_MS=N makes every VM take N ms to create, as a real
 * boot does, for tests of what happens while a create runs (MCP progress and
 * cancellation).
 *
 * AAS_FAKE_CONNECT_DELAY_MS=N makes every tunnel take N ms to open, as a guest
 * that does not take the connection, for the preview proxy's connect timeout.
 *
 * AAS_FAKE_SHARED=DIR keeps the VMs as files in DIR (saas_fake_shared), so
 * that several servers on one store share them, as they share VM hosts.
 * AAS_FAKE_BOOT_MS=N makes every create take N ms after its VM exists (a boot
 * under way: a server killed then leaves a VM with a creating row), and
 * AAS_FAKE_DESTROY_DELAY_MS=N every destroy N ms before the VM goes (a reaper
 * pass over many sandboxes then takes long enough to be killed midway).
 * AAS_FAKE_BUSY_CREATES=N makes the first N creates fail busy in the driver,
 * with the host's facts in the message as a real driver's (free memory, the
 * QEMU uid range), which a tenant must not read.
 * AAS_FAKE_BUSY_RESTORES=N makes the first N restores (a resume, a fork's
 * child) refuse for room the same way (the host's memory).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake/fake_driver.h"
#include "app.h"

static int loopback_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	struct sockaddr_in sa;
	int s;

	(void)ctx;
	(void)name;
	if ((s = saas_fake_port_mapped(port, fd)) != 0)
		return s < 0 ? s : SAAS_OK;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return SAAS_EIO;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(s);
		return SAAS_EBACKEND;
	}
	*fd = s;
	return SAAS_OK;
}

static long create_delay_ms, connect_delay_ms;

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int slow_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	sleep_ms(connect_delay_ms);
	return loopback_connect(ctx, name, port, fd);
}

static int slow_vm_create(void *ctx, const saas_vm_spec *spec)
{
	sleep_ms(create_delay_ms);
	return saas_fake_driver.vm_create(ctx, spec);
}

static long boot_ms, destroy_delay_ms;

static int booting_vm_create(void *ctx, const saas_vm_spec *spec)
{
	int rc = saas_fake_driver.vm_create(ctx, spec);

	if (rc == SAAS_OK)
		sleep_ms(boot_ms);
	return rc;
}

static int slow_vm_destroy(void *ctx, const char *name)
{
	sleep_ms(destroy_delay_ms);
	return saas_fake_driver.vm_destroy(ctx, name);
}

int main(int argc, char **argv)
{
	static saas_driver driver;
	const char *delay = getenv("AAS_FAKE_CREATE_DELAY_MS"), *fail = getenv("AAS_FAKE_FAIL_CREATES");
	const char *cdelay = getenv("AAS_FAKE_CONNECT_DELAY_MS"), *shared = getenv("AAS_FAKE_SHARED");
	const char *v;

	driver = saas_fake_driver;
	driver.port_connect = loopback_connect;
	if (delay && (create_delay_ms = strtol(delay, NULL, 10)) > 0)
		driver.vm_create = slow_vm_create;
	/* The first N creates fail in the driver, whose message stands for what a real one says of the host. */
	if (fail)
		saas_fake_fail_creates((unsigned int)strtoul(fail, NULL, 10));
	if (cdelay && (connect_delay_ms = strtol(cdelay, NULL, 10)) > 0)
		driver.port_connect = slow_connect;
	if (shared && *shared)
		saas_fake_shared(shared);
	if ((v = getenv("AAS_FAKE_BOOT_MS")) && (boot_ms = strtol(v, NULL, 10)) > 0)
		driver.vm_create = booting_vm_create;
	if ((v = getenv("AAS_FAKE_DESTROY_DELAY_MS")) && (destroy_delay_ms = strtol(v, NULL, 10)) > 0)
		driver.vm_destroy = slow_vm_destroy;
	if ((v = getenv("AAS_FAKE_BUSY_RESTORES")))
		saas_fake_busy_restores((unsigned int)strtoul(v, NULL, 10));
	if ((v = getenv("AAS_FAKE_BUSY_CREATES")))
		saas_fake_busy_creates((unsigned int)strtoul(v, NULL, 10));
	return aas_main(argc, argv, &driver);
}
