#!/usr/bin/env python3
# A raw-protocol npud client for test-dbus.sh (docs/protocol.md), for what neither npuctl nor
# the examples can do on cue:
#   dbus-client.py hold SOCKET
#       hello, allocate 1 MiB on device 1, print "session N", then read until npud closes the
#       connection; print every notification event and finally "closed".
#   dbus-client.py reset SOCKET GOFILE
#       on device 0: touch a 64 MiB buffer once (so that its pages exist and a memset of it
#       takes a steady time), print "warm" and wait for GOFILE.1 (the test slows the device
#       down); then stream T runs a 64 MiB memset and records event E, stream S waits for E
#       and memsets. Print "submitted", wait for GOFILE.2, synchronize S and T and print each
#       reply as "S <json>" / "T <json>" (the test resets the device in between).
import json
import os
import socket
import struct
import sys
import time

MAGIC = 0x3155504E
REQUEST, REPLY, NOTIFY, SUBMIT = 1, 2, 3, 4
HDR = struct.Struct("<IHBBB3xIQ")       # magic version kind flags nfds body_len request_id
REC = struct.Struct("<HHIQI4x")         # type flags len seq stream
MEMSET, EVENT_RECORD, STREAM_WAIT = 2, 3, 4


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.next_id = 1
        self.seq = 0

    def send(self, kind, rid, body):
        self.s.sendall(HDR.pack(MAGIC, 1, kind, 0, 0, len(body), rid) + body)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv(self):
        h = self.recv_exact(HDR.size)
        if h is None:
            return None
        magic, version, kind, flags, nfds, blen, rid = HDR.unpack(h)
        body = self.recv_exact(blen)
        return kind, rid, json.loads(body) if body else None

    def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        self.send(REQUEST, rid, json.dumps({"method": method, "params": params or {}}).encode())
        while True:
            f = self.recv()
            if f is None:
                raise SystemExit("connection closed while waiting for " + method)
            if f[0] == REPLY and f[1] == rid:
                return f[2]

    def result(self, method, params=None):
        r = self.call(method, params)
        if "result" not in r:
            raise SystemExit("%s failed: %s" % (method, r))
        return r["result"]

    def record(self, rtype, stream, payload):
        self.seq += 1
        return REC.pack(rtype, 0, REC.size + len(payload), self.seq, stream) + payload


def wait_file(path):
    deadline = time.time() + 20
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.02)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    c = Conn(path)
    hello = c.result("hello", {"min_version": 1, "max_version": 1, "client": "test-dbus"})
    if mode == "hold":
        c.result("mem_alloc", {"device": 1, "size": 1 << 20})
        print("session", hello["session"], flush=True)
        while True:
            f = c.recv()
            if f is None:
                print("closed", flush=True)
                return
            if f[0] == NOTIFY:
                print("notify", f[2].get("event"), json.dumps(f[2].get("data")), flush=True)
    elif mode == "reset":
        size = 64 << 20
        buf = c.result("mem_alloc", {"device": 0, "size": size})["buffer"]
        t = c.result("stream_create", {"device": 0})["stream"]
        s = c.result("stream_create", {"device": 0})["stream"]
        e = c.result("event_create")["event"]
        c.send(SUBMIT, 0, c.record(MEMSET, t, struct.pack("<IB3xQQ", buf, 0, 0, size)))
        c.result("stream_synchronize", {"stream": t})
        print("warm", flush=True)
        wait_file(sys.argv[3] + ".1")
        body = c.record(MEMSET, t, struct.pack("<IB3xQQ", buf, 1, 0, size))
        body += c.record(EVENT_RECORD, t, struct.pack("<I4x", e))
        body += c.record(STREAM_WAIT, s, struct.pack("<I4x", e))
        body += c.record(MEMSET, s, struct.pack("<IB3xQQ", buf, 2, 0, 4096))
        c.send(SUBMIT, 0, body)
        c.result("ping")  # the submission has been taken in
        print("submitted", flush=True)
        wait_file(sys.argv[3] + ".2")
        print("S", json.dumps(c.call("stream_synchronize", {"stream": s})), flush=True)
        print("T", json.dumps(c.call("stream_synchronize", {"stream": t})), flush=True)
    else:
        raise SystemExit("usage: dbus-client.py hold|reset SOCKET [GOFILE]")


main()
