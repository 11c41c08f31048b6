#!/usr/bin/env python3
"""Meta-test: every libvirt call of the driver that sends an RPC is serialised.

libvirt's RPC client before 10.3 (CVE-2024-4418) crashes a process whose
threads wait on one connection when its keepalive closes it, so the driver
takes a VM host's connection's mutex around every call that sends an RPC
(lib/driver/libvirt/rpc.h says how: rpc.h #defines libvirt's names to
wrappers in rpc.c). This check reads every C file of the driver but rpc.c
and fails on a call of libvirt (a name vir[A-Z]... followed by "(") that
rpc.h does not #define and that is not below, among the calls known to send
nothing or made where no other thread can share the connection; and on a
file that calls a wrapped name without including rpc.h (through
libvirt_driver.h), which would reach libvirt unserialised. A new call gets
a wrapper in rpc.c and rpc.h, or a line below that says why it needs none.

usage: check_libvirt_rpc.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Calls that send no RPC on a remote connection: local objects, errors, the event loop.
LOCAL = {
    "virDomainFree": "drops a local reference",
    "virDomainSnapshotFree": "drops a local reference",
    "virStoragePoolFree": "drops a local reference",
    "virStorageVolFree": "drops a local reference",
    "virDomainGetConnect": "a field of the object",
    "virStoragePoolGetConnect": "a field of the object",
    "virStorageVolGetConnect": "a field of the object",
    "virDomainGetName": "a field of the object",
    "virStorageVolGetName": "a field of the object",
    "virConnectGetURI": "the URI the connection was opened with, kept by the client",
    "virConnectIsAlive": "the client's own state of its socket",
    "virGetLastError": "this thread's error",
    "virGetLastErrorMessage": "this thread's error",
    "virResetLastError": "this thread's error",
    "virSetErrorFunc": "the process's error handler",
    "virInitialize": "the library's set-up",
    "virEventRegisterDefaultImpl": "the event loop",
    "virEventRunDefaultImpl": "the event loop",
    "virEventAddHandle": "the event loop",
    "virEventUpdateHandle": "the event loop",
    "virEventRemoveHandle": "the event loop",
    "virEventAddTimeout": "the event loop",
    "virEventUpdateTimeout": "the event loop",
    "virEventRemoveTimeout": "the event loop",
    "virStreamEventAddCallback": "a stream's callback, kept by the client",
    "virStreamEventUpdateCallback": "a stream's callback, kept by the client",
    "virStreamEventRemoveCallback": "a stream's callback, kept by the client",
}
# Calls that send, made where no other thread waits on the connection.
UNSHARED = {
    "virConnectOpen": "makes the connection, before it is registered and shared (host_remote.c's opener thread)",
    "virConnectSetKeepAlive": "on the new connection, before it is registered and shared",
    "virStreamSend": "a channel's pump, under saas__lv_rpc_try_enter (channel.c)",
    "virStreamRecv": "a channel's pump, under saas__lv_rpc_try_enter (channel.c)",
}
# Where each of UNSHARED may be called, and nowhere else.
UNSHARED_FILES = {
    "virConnectOpen": {"host_remote.c", "host_local.c"},
    "virConnectSetKeepAlive": {"host_remote.c"},
    "virStreamSend": {"channel.c"},
    "virStreamRecv": {"channel.c"},
}

CALL = re.compile(r"\b(vir[A-Z][A-Za-z0-9]*)\s*\(")
DEFINE = re.compile(r"^#define\s+(vir[A-Z][A-Za-z0-9]*)\s+saas__lv_", re.M)
INCLUDES_RPC = re.compile(r'#\s*include\s*"driver/libvirt/(libvirt_driver|rpc)\.h"')
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(\\.|[^"\\\n])*"')

root = pathlib.Path(sys.argv[1]).resolve()
driver = root / "lib" / "driver" / "libvirt"
wrapped = set(DEFINE.findall((driver / "rpc.h").read_text()))
problems = []
if len(wrapped) < 10:
    problems.append("rpc.h: found only %d wrapped libvirt names; has its form changed?" % len(wrapped))
for path in sorted(driver.glob("*.[ch]")):
    if path.name in ("rpc.c", "rpc.h"):
        continue
    text = path.read_text()
    code = STRING.sub('""', COMMENT.sub(" ", text))
    calls = set(CALL.findall(code))
    for name in sorted(calls):
        if name in wrapped or name in LOCAL:
            continue
        if name in UNSHARED:
            if path.name not in UNSHARED_FILES[name]:
                problems.append("%s: %s is called here; it is serialised by no wrapper, and allowed only in %s (%s)"
                                % (path.name, name, ", ".join(sorted(UNSHARED_FILES[name])), UNSHARED[name]))
            continue
        problems.append("%s: %s is a libvirt call rpc.h does not serialise: wrap it in rpc.c and rpc.h, or add it "
                        "to this check's list of calls that send nothing, saying why" % (path.name, name))
    if calls & wrapped and not INCLUDES_RPC.search(text):
        problems.append("%s: calls %s without including rpc.h (libvirt_driver.h): unserialised"
                        % (path.name, ", ".join(sorted(calls & wrapped))))

for p in problems:
    print(p)
print("%d problem(s); %d names wrapped by rpc.h" % (len(problems), len(wrapped)))
sys.exit(1 if problems else 0)
