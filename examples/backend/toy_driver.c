/*
 * toy: an example VM driver; see toy_driver.h and docs/backends.md.
 *
 * What a driver does and what it leaves to the engine: the engine has
 * already checked every argument, the caller's account and the sandbox's
 * state before a slot is called, and it records, caps and bills what comes
 * back. A slot returns SAAS_OK or a negative SAAS_E* code, and says why it
 * failed with saas_sys_error_set(). Slots are called from any thread, at
 * once: the driver locks what it shares.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <saas/sys/driver.h>
#include <saas/sys/error.h>

#include "toy_driver.h"

/* The only image this driver has. */
#define TOY_IMAGE "default"

struct toy_vm {
	struct toy_vm *next;
	char name[SAAS_ID_MAX + 1];
};

struct toy {
	pthread_mutex_t mu;
	struct toy_vm *vms;
	saas_log_fn log;
	void *log_userdata;
};

static int toy_open(void **ctx, const saas_driver_env *env)
{
	struct toy *t = calloc(1, sizeof(*t));

	if (!t)
		return saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 12, "toy: out of memory");
	pthread_mutex_init(&t->mu, NULL);
	t->log = env->log;
	t->log_userdata = env->log_userdata;
	*ctx = t;
	return SAAS_OK;
}

/* Real VMs outlive their engine; these go with it, which the next engine's reconcile sees as VMs gone. */
static void toy_close(void *ctx)
{
	struct toy *t = ctx;

	while (t->vms) {
		struct toy_vm *vm = t->vms;

		t->vms = vm->next;
		free(vm);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* The VM of this name; call with t->mu held. */
static struct toy_vm **toy_find(struct toy *t, const char *name)
{
	struct toy_vm **p = &t->vms;

	while (*p && strcmp((*p)->name, name) != 0)
		p = &(*p)->next;
	return p;
}

static int toy_vm_create(void *ctx, const saas_vm_spec *spec)
{
	struct toy *t = ctx;
	struct toy_vm *vm;

	/* SAAS_ENOTFOUND for an image the driver lacks: the engine answers the caller SAAS_EINVAL with this message. */
	if (strcmp(spec->image, TOY_IMAGE) != 0)
		return saas_sys_error_set(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0,
		                          "toy: no image \"%s\"; this driver has only \"" TOY_IMAGE "\"", spec->image);
	/* A driver that cannot give what the network policy asks says so; it never gives something weaker. */
	if (spec->network && spec->network->mode != SAAS_NET_ISOLATED)
		return saas_sys_error_set(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "toy: its VMs have no network");
	if (strlen(spec->name) > SAAS_ID_MAX)
		return saas_sys_error_set(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0, "toy: VM name too long");
	if (!(vm = calloc(1, sizeof(*vm))))
		return saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 12, "toy: out of memory");
	strcpy(vm->name, spec->name);
	pthread_mutex_lock(&t->mu);
	vm->next = t->vms;
	t->vms = vm;
	pthread_mutex_unlock(&t->mu);
	t->log(t->log_userdata, SAAS_LOG_INFO, "toy: VM made");
	return SAAS_OK;
}

static int toy_vm_destroy(void *ctx, const char *name)
{
	struct toy *t = ctx;
	struct toy_vm **p, *gone = NULL;

	pthread_mutex_lock(&t->mu);
	if (*(p = toy_find(t, name))) {
		gone = *p;
		*p = gone->next;
	}
	pthread_mutex_unlock(&t->mu);
	free(gone);
	return SAAS_OK; /* a VM already gone is success */
}

static int toy_vm_state(void *ctx, const char *name, int *state)
{
	struct toy *t = ctx;

	pthread_mutex_lock(&t->mu);
	*state = *toy_find(t, name) ? SAAS_VM_RUNNING : SAAS_VM_ABSENT;
	pthread_mutex_unlock(&t->mu);
	return SAAS_OK;
}

static int toy_vm_list(void *ctx, saas_name_fn fn, void *userdata)
{
	struct toy *t = ctx;
	char (*names)[SAAS_ID_MAX + 1] = NULL;
	size_t n = 0;

	/*
	 * The callback may destroy the VM it is given (the engine's orphan sweep
	 * does): call it on a snapshot of the names, with no lock held.
	 */
	pthread_mutex_lock(&t->mu);
	for (struct toy_vm *vm = t->vms; vm; vm = vm->next)
		n++;
	if (n && !(names = calloc(n, sizeof(*names)))) {
		pthread_mutex_unlock(&t->mu);
		return saas_sys_error_set(SAAS_ENOMEM, SAAS_ERRCLASS_OS, 12, "toy: out of memory");
	}
	n = 0;
	for (struct toy_vm *vm = t->vms; vm; vm = vm->next)
		strcpy(names[n++], vm->name);
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < n; i++)
		if (fn(userdata, names[i]) != 0)
			break;
	free(names);
	return SAAS_OK;
}

static int toy_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	static const char not_found[] = "toy: command not found (this guest knows only echo)\n";
	struct toy *t = ctx;
	int running;

	pthread_mutex_lock(&t->mu);
	running = *toy_find(t, name) != NULL;
	pthread_mutex_unlock(&t->mu);
	if (!running)
		return saas_sys_error_set(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "toy: VM %s is not running", name);
	/* The command runs now (a real guest says when): the engine's followers learn it here. */
	if (req->started)
		req->started(req->control_userdata);
	if (strncmp(req->command, "echo ", 5) == 0) {
		const char *words = req->command + 5;

		/* Output goes to the engine as it comes; it caps and stores it. */
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, words, strlen(words));
		req->output(req->output_userdata, SAAS_STREAM_STDOUT, "\n", 1);
		*exit_code = 0;
	} else {
		req->output(req->output_userdata, SAAS_STREAM_STDERR, not_found, sizeof(not_found) - 1);
		*exit_code = 127;
	}
	return SAAS_OK;
}

/* The files and ports slots are NULL: the engine answers SAAS_ENOTSUP for them. */
const saas_driver toy_driver = {
	.version = SAAS_DRIVER_VERSION,
	.name = "toy",
	.open = toy_open,
	.close = toy_close,
	.vm_create = toy_vm_create,
	.vm_destroy = toy_vm_destroy,
	.vm_state = toy_vm_state,
	.vm_list = toy_vm_list,
	.exec = toy_exec,
};
