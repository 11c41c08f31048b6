/*
 * The control port's protocol: the one definition both ends compile, the
 * engine (control.c, control_files.c, control_exec.c here) and the guest's
 * helper (images/guest/aas-control.c, which images/build compiles with
 * -I lib: this header is an input of the guest image, and its recipe hash
 * covers it). Plain C11 and libc only, for the guest's static build.
 *
 * The port is a virtio-serial port; its host end a socket QEMU listens on
 * in the VM's directory. After a request line the bytes are the request's.
 *
 * Fix-ups, one line each way (at most CONTROL_LINE_MAX bytes with '\n'):
 *   engine: fixup NONCE HOSTNAME SECONDS[.NANOS] HEX_SEED
 *   guest:  ok NONCE            or: error NONCE|- WHAT
 * NONCE is CONTROL_NONCE_LEN hex digits the engine chose for this request,
 * HOSTNAME 1 to CONTROL_HOSTNAME_MAX of [a-z0-9-], HEX_SEED
 * CONTROL_SEED_MIN to CONTROL_SEED_MAX hex digits.
 *
 * Files (the bulk path: no SSH, no guest-side cipher), framed after the line:
 *   engine: files NONCE                       guest: ok NONCE       (the helper serves files)
 *   engine: put NONCE MODE PATHLEN\n PATH      guest: ready NONCE   or error NONCE ERRNO WHAT
 *           frames..., a 0 frame, the data's XXH64 (8 bytes, big-endian)
 *                                             guest: ok NONCE      or error NONCE ERRNO WHAT
 *   engine: get NONCE MAX PATHLEN\n PATH       guest: size NONCE N  or error NONCE ERRNO WHAT
 *           guest: frames of the file's N bytes, then a 0 frame and ok NONCE HEX_XXH64,
 *                  or an abort frame and error NONCE ERRNO WHAT; nothing when N > MAX > 0
 * A frame is a 4-byte big-endian length (1 to CONTROL_FILES_FRAME_MAX) and
 * that many bytes; 0 ends the data, CONTROL_FILES_FRAME_ABORT gives it up.
 * MODE is 1 to 4 octal digits (at most 07777), MAX 1 to 18 decimal digits
 * (0: no bound), PATHLEN 1 to CONTROL_FILES_PATH_MAX, PATH absolute with no
 * NUL. ERRNO is the guest's errno in decimal. XXH64 (lib/util/xxh64.h, seed
 * 0) checks the bytes: a put is renamed over its target only when the
 * guest's hash of what it received is the engine's, a get is taken only when
 * the engine's is the guest's. The guest does the work as the sandbox user,
 * exactly as its SFTP would: a put creates the missing directories (0755),
 * writes a temporary file beside the target and renames it over the target.
 *
 * Commands (a clone's first commands, before the engine's SSH session is up:
 * no login on a create's critical path):
 *   engine: exec NONCE 0                  guest: ok NONCE      (the helper serves commands)
 *   engine: exec NONCE LEN\n SCRIPT       guest: ready NONCE   or error NONCE ERRNO WHAT
 * (a helper that predates commands answers the probe "error - not a request",
 * and is never sent a script: it would read it as request lines).
 * SCRIPT (1 to CONTROL_EXEC_SCRIPT_MAX bytes, no NUL) runs as `SHELL -c
 * SCRIPT` by the sandbox user's login shell, in its home, in a session of
 * its own, with the environment sshd gives a command; "ready" once the shell
 * runs. Then frames both ways until the command's end, each a 4-byte
 * big-endian header, the frame's type in its top byte and its length (0 to
 * CONTROL_EXEC_FRAME_MAX) in the low 24 bits, then that many bytes:
 *   engine: IN (stdin bytes; never more outstanding than CONTROL_EXEC_WINDOW),
 *           EOF (end of stdin), SIGNAL (2 bytes: the number, 1 for the
 *           process group or 0 for the shell), KILL (the command and all it
 *           started), END (a 0 header: the engine is done with it, after
 *           EXIT or after a KILL)
 *   guest:  OUT, ERR (output), TOOK (4 bytes: stdin bytes the command took,
 *           given back to the window), EXIT (4 bytes: the shell's status,
 *           128+N for signal N, once it and its output are done), DONE
 *           (after END: the port takes requests again)
 * Only KILL (and SIGNAL) kill: a stream that ends otherwise leaves the
 * command running, detached (its stdin closed, its output dropped), as a
 * command whose SSH connection went away runs on: the engine lost its
 * connection (a pause or save of the VM, the engine restarted) and the next
 * one says so with an END while the command runs (the resynchronisation's
 * zeros, control_files.c, end an exec wherever it is) or with a request line
 * where a header should be (a header of an unknown type or an overlong
 * frame): the helper then reads that line and what follows as requests.
 *
 * Commands with no shell (a plain command: exec_plain.c says which):
 *   engine: run NONCE 0                   guest: ok NONCE      (the helper knows run)
 *   engine: run NONCE LEN\n REQUEST       guest: ready NONCE   or error NONCE ERRNO WHAT
 * REQUEST (LEN bytes, at most CONTROL_EXEC_SCRIPT_MAX) is NUL-terminated
 * fields: the exec's SCRIPT, the directory (empty: none), each NAME=VALUE
 * the script exports (at most CONTROL_RUN_ENV_MAX), an empty field, then
 * the command's words (1 to CONTROL_RUN_ARGS_MAX, none empty). The helper
 * runs the words itself where the shell would only have split and run them
 * (the user's shell is bash, its ~/.bashrc one the helper knows the effect
 * of), with the environment and status bash would give; anywhere else, and
 * wherever the shell would say something (a missing command, a directory
 * it cannot enter), the SCRIPT as exec does. Then the exec's frames.
 *
 * Port connections (a clone's first connections to a guest port, before the
 * engine's SSH session is up: its code server's, a preview's):
 *   engine: connect NONCE 0               guest: ok NONCE      (the helper opens connections)
 *   engine: connect NONCE PORT            guest: ready NONCE   or error NONCE ERRNO WHAT
 * (a helper that predates connections answers the probe "error - not a
 * request"). PORT is 1 to 65535; the helper connects to 127.0.0.1:PORT and
 * nowhere else (the request has no address), with a socket the sandbox user
 * owns, and says "ready" once the connection is open, ERRNO 111
 * (ECONNREFUSED) when nothing listens there. Then the exec's frames carry
 * the connection, the engine's IN its bytes to the port (within the same
 * window, given back by TOOK), EOF a half-close (the helper shuts its
 * socket's writing side), END its close; the guest's OUT the port's bytes,
 * EXIT (status 0) once the port's side ended them, DONE after END. ERR,
 * SIGNAL and KILL have no use there (a KILL closes the connection).
 */
#ifndef SAAS_TRANSPORT_CONTROL_PROTO_H
#define SAAS_TRANSPORT_CONTROL_PROTO_H

/* The virtio-serial port's name: the guest finds its device by it. The manifest's "control_port" must say it. */
#define CONTROL_PORT_NAME "org.libsaas.control.0"
#define CONTROL_LINE_MAX 256           /* a request line, '\n' included: the guest refuses a longer one whole */
#define CONTROL_NONCE_LEN 16           /* hex digits */
#define CONTROL_HOSTNAME_MAX 63
#define CONTROL_SEED_MIN 32            /* hex digits: 16 bytes at least, 64 at most */
#define CONTROL_SEED_MAX 128

#define CONTROL_FILES_PATH_MAX 4096
#define CONTROL_FILES_FRAME_MAX (1024 * 1024)
#define CONTROL_FILES_FRAME_ABORT 0xffffffffu

#define CONTROL_EXEC_SCRIPT_MAX (1024 * 1024)
#define CONTROL_EXEC_FRAME_MAX (64 * 1024)
#define CONTROL_EXEC_WINDOW (256 * 1024)
#define CONTROL_RUN_ENV_MAX 64       /* a run's variables, at most */
#define CONTROL_RUN_ARGS_MAX 256     /* and its words */
#define CONTROL_CONNECT_MS 10000     /* the guest's wait for a port to accept, at most */
/* A command's frame types, the top byte of a frame's header. */
enum control_exec_to_guest { CTL_X_END = 0, CTL_X_IN = 1, CTL_X_EOF = 2, CTL_X_SIGNAL = 3, CTL_X_KILL = 4 };
enum control_exec_to_engine { CTL_X_OUT = 1, CTL_X_ERR = 2, CTL_X_TOOK = 3, CTL_X_EXIT = 4, CTL_X_DONE = 5 };

/* A resynchronisation's zeros must end a script the guest is reading, whatever its length. */
_Static_assert(CONTROL_EXEC_SCRIPT_MAX <= CONTROL_FILES_FRAME_MAX, "a script longer than the resync's zeros");

#endif
