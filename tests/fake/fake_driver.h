/*
 * A fake VM driver for fast unit tests. Its "VMs" are records in memory that
 * outlive any one engine (as real VMs outlive their engine process), and its
 * guest understands a handful of commands:
 *   echo WORDS          prints WORDS and a newline
 *   exit N              exits with N
 *   sleep N             takes N seconds (of the timeout; it does not really sleep)
 *   cat                 copies stdin to stdout
 *   pwd                 prints the working directory
 *   env                 prints the extra environment, one per line
 *   spew N              prints N bytes of 'x' to stdout and N of 'y' to stderr
 *   block               waits until the engine cancels it
 * anything else exits 127 with "not found" on stderr. Files live in a map.
 * Never part of the library.
 */
#ifndef SAAS_FAKE_DRIVER_H
#define SAAS_FAKE_DRIVER_H

#include "saas/sys/driver.h"

extern const saas_driver saas_fake_driver;

/* Forget every VM and file (between tests). */
void saas_fake_reset(void);
/* How many VMs exist. */
unsigned int saas_fake_vm_count(void);
/* Does a VM of this name exist? */
int saas_fake_vm_exists(const char *name);
/* Make the next n vm_create calls fail. */
void saas_fake_fail_creates(unsigned int n);
/* Simulate a VM dying (it stays listed, state STOPPED) or vanishing (gone). */
void saas_fake_vm_stop(const char *name);
/* Add a VM nobody asked for (what a crashed engine might leave). */
void saas_fake_vm_add(const char *name);
/* Refuse (SAAS_ENOTSUP) every create that asks for the internet, as a host that cannot guard it does. */
void saas_fake_refuse_internet(int on);
/* How many times vm_create was called. */
unsigned int saas_fake_create_calls(void);
/*
 * Call fn after every vm_create that made its VM (which then exists and is
 * listed), on the creating thread and outside the driver's lock; NULL: none.
 * Reset clears it.
 */
typedef void (*saas_fake_create_fn)(void *userdata, const saas_vm_spec *spec);
void saas_fake_on_create(saas_fake_create_fn fn, void *userdata);

#endif
