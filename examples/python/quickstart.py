#!/usr/bin/env python3
"""quickstart.py: libsaas through ctypes (FFI), against an aas-server.

Environment: AAS_API_KEY, AAS_BASE_URL (default http://127.0.0.1:8080),
LIBSAAS (path of libsaas.so; default: found by the system loader).
Creates a sandbox, runs a command, writes and reads a file, destroys it.
"""
import ctypes
import ctypes.util
import os
import sys

class Sandbox(ctypes.Structure):
    # The leading fields of saas_sandbox. The library allocates it and only
    # ever appends fields, so a prefix is all a binding needs to read.
    _fields_ = [("id", ctypes.c_char_p), ("status", ctypes.c_int), ("end_reason", ctypes.c_int),
                ("size", ctypes.c_char_p), ("vcpus", ctypes.c_uint),
                ("memory_mb", ctypes.c_uint), ("disk_gb", ctypes.c_uint)]


class Execution(ctypes.Structure):
    _fields_ = [("id", ctypes.c_char_p), ("sandbox_id", ctypes.c_char_p), ("status", ctypes.c_int), ("exit_code", ctypes.c_int),
                ("stdout_data", ctypes.POINTER(ctypes.c_char)), ("stdout_len", ctypes.c_size_t),
                ("stderr_data", ctypes.POINTER(ctypes.c_char)), ("stderr_len", ctypes.c_size_t)]


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("klass", ctypes.c_int), ("backend_code", ctypes.c_long),
                ("message", ctypes.c_char_p), ("sqlstate", ctypes.c_char_p)]


def load():
    path = os.environ.get("LIBSAAS") or ctypes.util.find_library("saas")
    if not path:
        sys.exit("quickstart.py: libsaas not found; set LIBSAAS to the path of libsaas.so")
    lib = ctypes.CDLL(path)
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.saas_version.restype = cp
    lib.saas_error_last.restype = ctypes.POINTER(Error)
    lib.saas_client_open_remote.argtypes = [ctypes.POINTER(vp), cp, cp, vp, ctypes.c_uint]
    lib.saas_sandbox_create.argtypes = [ctypes.POINTER(ctypes.POINTER(Sandbox)), vp, vp, ctypes.c_uint]
    lib.saas_exec.argtypes = [ctypes.POINTER(ctypes.POINTER(Execution)), vp, cp, cp, vp, ctypes.c_uint]
    lib.saas_file_write.argtypes = [vp, cp, cp, ctypes.c_char_p, ctypes.c_size_t, vp]
    lib.saas_file_read.argtypes = [ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_size_t), vp, cp, cp,
                                   ctypes.c_int64]
    lib.saas_sandbox_destroy.argtypes = [vp, vp, cp, ctypes.c_uint]
    lib.saas_sandbox_free.argtypes = [ctypes.POINTER(Sandbox)]
    lib.saas_execution_free.argtypes = [ctypes.POINTER(Execution)]
    lib.saas_free.argtypes = [vp]
    lib.saas_client_free.argtypes = [vp]
    return lib


def check(lib, rc, what):
    if rc != 0:
        err = lib.saas_error_last().contents
        sys.exit(f"quickstart.py: {what}: {err.message.decode()} (code {rc})")


def main():
    key = os.environ.get("AAS_API_KEY")
    if not key:
        sys.exit("quickstart.py: set AAS_API_KEY (and AAS_BASE_URL if the server is not local)")
    url = os.environ.get("AAS_BASE_URL", "http://127.0.0.1:8080")
    lib = load()
    print("libsaas", lib.saas_version().decode())
    client = ctypes.c_void_p()
    check(lib, lib.saas_client_open_remote(ctypes.byref(client), url.encode(), key.encode(), None, 0), "connect")
    sb = ctypes.POINTER(Sandbox)()
    check(lib, lib.saas_sandbox_create(ctypes.byref(sb), client, None, 0), "create")
    sid = sb.contents.id
    print("sandbox", sid.decode(), "with", sb.contents.vcpus, "vCPUs")
    try:
        x = ctypes.POINTER(Execution)()
        check(lib, lib.saas_exec(ctypes.byref(x), client, sid, b"echo hi from $(id -un)", None, 0), "exec")
        out = ctypes.string_at(x.contents.stdout_data, x.contents.stdout_len)
        print("exit", x.contents.exit_code, "stdout", out)
        lib.saas_execution_free(x)
        payload = bytes(range(256)) * 4
        check(lib, lib.saas_file_write(client, sid, b"blob.bin", payload, len(payload), None), "write")
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib, lib.saas_file_read(ctypes.byref(data), ctypes.byref(size), client, sid, b"blob.bin", 0), "read")
        back = ctypes.string_at(data, size.value)
        lib.saas_free(data)
        print("file round trip:", "byte-equal" if back == payload else "DIFFERENT")
        if back != payload or out != b"hi from sandbox\n":
            return 1
    finally:
        check(lib, lib.saas_sandbox_destroy(None, client, sid, 0), "destroy")
        lib.saas_sandbox_free(sb)
        lib.saas_client_free(client)
    print("destroyed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
