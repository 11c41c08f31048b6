#!/usr/bin/env python3
"""A terminal and a directory watch through the E2B face (server/e2b) in a real sandbox, spoken
raw as E2B's SDKs speak it (docs/e2b-wire.md 3.2, 3.3): process.Process/Start with a pty (a cwd
and envs beside the sandbox's own FROM_SB=yes), its
output as pty data events while SendInput and Update are sent beside it, the end with the shell's
exit status; then filesystem.Filesystem/WatchDir, which needs python3 in the image (the tiny one
has none: a clear failed_precondition). Prints one line per fact for the calling test to check.

usage: e2b_pty.py BASE_URL AAS_SK_KEY SANDBOX_ID
"""
import base64
import json
import struct
import sys
import threading
import time
import urllib.request
from urllib.parse import urlparse
import http.client

base, key, sandbox = sys.argv[1], sys.argv[2], sys.argv[3]
e2b_key = 'e2b_' + key[len('aas_sk_'):].encode('latin1').hex()
e2b_id = sandbox[len('sbx-'):]
with urllib.request.urlopen(urllib.request.Request(f'{base}/e2b/sandboxes/{e2b_id}',
                                                   headers={'X-API-KEY': e2b_key})) as r:
    token = json.load(r)['envdAccessToken']
HEADERS = {'E2b-Sandbox-Id': e2b_id, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token,
           'Connect-Protocol-Version': '1'}


def unary(method, msg):
    req = urllib.request.Request(f'{base}/e2b-sandbox/{method}', data=json.dumps(msg).encode(), method='POST',
                                 headers={**HEADERS, 'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def stream(method, msg, timeout_ms):
    """The frames of a server stream, as (flags, message) in order, read on a thread."""
    u = urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    body = json.dumps(msg).encode()
    conn.request('POST', f'/e2b-sandbox/{method}', body=struct.pack('>BI', 0, len(body)) + body,
                 headers={**HEADERS, 'Content-Type': 'application/connect+json', 'Connect-Timeout-Ms': str(timeout_ms)})
    res = conn.getresponse()
    frames = []

    def read():
        while True:
            head = res.read(5)
            if len(head) < 5:
                break
            flags, n = struct.unpack('>BI', head)
            frames.append((flags, json.loads(res.read(n))))
            if flags & 2:
                break
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return frames, t


def output(frames):
    return b''.join(base64.b64decode(m['event']['data']['pty']) for f, m in frames
                    if not f & 2 and 'data' in m.get('event', {})).decode('utf-8', 'replace')


def wait_for(frames, text, seconds=60):
    end = time.time() + seconds
    while time.time() < end and text not in output(frames):
        time.sleep(0.1)
    return text in output(frames)


frames, reader = stream('process.Process/Start', {'process': {'cmd': '/bin/bash', 'args': ['-i', '-l'],
                                                              'envs': {'TERM': 'xterm-256color', 'LANG': 'C.UTF-8',
                                                                       'FOO': "it's here"},
                                                              'cwd': '/tmp'},
                                                  'pty': {'size': {'cols': 80, 'rows': 24}}}, 120000)
for _ in range(600):
    if frames:
        break
    time.sleep(0.1)
pid = frames[0][1]['event']['start']['pid'] if frames else 0
print('pty started', pid > 0)
keys = lambda s: {'process': {'pid': pid}, 'input': {'pty': base64.b64encode(s.encode()).decode()}}
unary('process.Process/SendInput', keys('echo S""IZE $(stty size) $TERM $(id -un)\r'))
print('size and user', wait_for(frames, 'SIZE 24 80 xterm-256color'), output(frames).count(' root') == 0)
# cwd and envs: the shell starts there, with the call's variables and the sandbox's own (FROM_SB, set at create).
unary('process.Process/SendInput', keys('echo W""HERE $(pwd) $FOO $FROM_SB\r'))
print('cwd and envs', wait_for(frames, "WHERE /tmp it's here yes"))
unary('process.Process/Update', {'process': {'pid': pid}, 'pty': {'size': {'cols': 100, 'rows': 30}}})
unary('process.Process/SendInput', keys('echo N""OW $(stty size)\r'))
print('resized', wait_for(frames, 'NOW 30 100'))
unary('process.Process/SendInput', keys('exit 5\r'))
reader.join(60)
ends = [m['event']['end'] for f, m in frames if not f & 2 and 'end' in m.get('event', {})]
print('exit status', ends[0].get('exitCode') if ends else None, 'end-stream', bool(frames and frames[-1][0] & 2))

frames, reader = stream('filesystem.Filesystem/WatchDir', {'path': '/workspace'}, 30000)
reader.join(60)
last = frames[-1][1] if frames else {}
print('watch', last.get('error', {}).get('code'), 'python3' in last.get('error', {}).get('message', ''))
