/*
 * Internal: running helper programs (qemu-img, ssh-keygen) without a shell.
 */
#ifndef SAAS_UTIL_SPAWN_H
#define SAAS_UTIL_SPAWN_H

/*
 * Run argv[0] (looked up in PATH) with argv, stdin from /dev/null, and wait.
 * Its stdout and stderr together (at most 4 KiB of the end) go to *output if
 * output is not NULL (free with free()). Returns 0 when it exited 0, else a
 * SAAS_E* code with a message naming the program and its last output line.
 */
int saas__run(const char *const argv[], char **output);

#endif
