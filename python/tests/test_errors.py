"""Every npu.Error class that npud can produce, produced through a real npud (issue 13).

The daemon of this module runs with a config: tenant 'small' has a 1 MiB memory quota, at
most 4 streams and 4 queued tasks, and device 1 only; tenant 'others' holds an unprivileged
user (when the suite runs as root, as in CI) whom root may not join. Device 1 is slowed by a
fault so that work on it is still queued or running when the test looks at it.

Classes not produced here, and why:
- VersionError: npud answers it only to a hello whose version range misses its own; libnpu
  offers the versions it speaks in connect(), and a session that said hello cannot send
  another (ProtocolError 'hello: already done', tested below). No correct client reaches it.
- SystemCallError: npud sends it only when it runs out of host memory in op_resolve; the
  client raises it for failing system calls (socket, mmap, eventfd). Neither can be caused
  from a test without breaking the machine.
- ConnectionLostError, NoMemoryError, InvalidError, BadHandleError, ShapeError,
  UnsupportedError, DeviceError: test_npu.TestErrors.
"""
import json
import os
import pwd
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import npu
from npudtest import Npud

D = None
CONF = None
ATTACKER = "npud-attacker"  # the same user as tests/integration (harness_attacker)
QUOTA = 1 << 20


def attacker():
    """(uid, gid) of the unprivileged test user, created when running as root; None if none."""
    try:
        pw = pwd.getpwnam(ATTACKER)
    except KeyError:
        if os.geteuid() != 0:
            return None
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            pw = pwd.getpwnam(ATTACKER)
        except KeyError:
            return None
    return (pw.pw_uid, pw.pw_gid) if pw.pw_uid != 0 else None


def setUpModule():
    global D, CONF
    att = attacker()
    conf = {"tenants": [{"name": "main", "uids": [0]},
                        {"name": "small", "uids": [0], "memory_quota": {"total": QUOTA}, "max_streams": 4,
                         "max_queued_tasks": 4, "devices": [1]},
                        {"name": "others", "uids": [att[0] if att else 65534]}]}
    fd, CONF = tempfile.mkstemp(prefix="npu-py-errors-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        json.dump(conf, f)
    D = Npud("--config", CONF)
    # The unprivileged user must reach the socket (harness_share_socket).
    os.chmod(D.dir, 0o711)
    os.chmod(D.sock, 0o666)


def tearDownModule():
    D.stop()
    os.unlink(CONF)


class ErrorCase(unittest.TestCase):
    def setUp(self):
        self.ctx = npu.connect(D.sock)

    def tearDown(self):
        self.ctx.close()

    def check(self, cls, fn, *args, words=(), task=None):
        """fn(*args) raises exactly cls, with its status, a message holding words, and task."""
        with self.assertRaises(npu.Error) as cm:
            fn(*args)
        e = cm.exception
        self.assertIs(type(e), cls, "%s: %s" % (type(e).__name__, e.message))
        self.assertEqual(e.status, cls.status)
        self.assertIsInstance(e.message, str)
        for w in words:
            self.assertIn(w, e.message)
        if task is None:
            self.assertEqual(e.task, 0)  # a call's own failure, not a queued task's
        else:
            self.assertEqual(e.task, task)
            self.assertIn("task %d" % task, e.message)
        return e

    def slow_device_1(self):
        D.npuctl("fault", "inject", "1", "slow", "1000")
        self.addCleanup(D.npuctl, "fault", "clear", "1")


class TestPolicyErrors(ErrorCase):
    def test_quota(self):
        with npu.connect(D.sock, tenant="small") as c:
            self.assertEqual(c.tenant, "small")
            a = c.empty((QUOTA // 2,), np.uint8, device=1)
            self.check(npu.QuotaError, c.empty, (QUOTA,), np.uint8, 1,
                       words=("tenant 'small'", "memory quota", str(QUOTA)))
            a.free()
            c.empty((QUOTA,), np.uint8, device=1).free()  # freed memory counts no more

    def test_limit_streams(self):
        with npu.connect(D.sock, tenant="small") as c:
            keep = []

            def more():
                while True:
                    keep.append(c.stream(device=1))
            self.check(npu.LimitError, more, words=("stream_create", "stream limit", "tenant 'small'"))
            self.assertLessEqual(len(keep), 4)
            keep.pop()
            keep.append(c.stream(device=1))  # one freed, one more fits

    def test_permission_device_and_tenant(self):
        with npu.connect(D.sock, tenant="small") as c:
            self.check(npu.PermissionDeniedError, c.stream, 0,
                       words=("tenant 'small'", "may not use device 0"))
        self.check(npu.PermissionDeniedError, lambda: npu.connect(D.sock, tenant="others"),
                   words=("uid %d" % os.getuid(), "may not join tenant 'others'"))

    def test_permission_admin_as_unprivileged_user(self):
        att = attacker()
        if att is None or os.geteuid() != 0:
            self.skipTest("needs root to create and become the unprivileged user %s" % ATTACKER)
        uid, gid = att

        def drop():
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        # A separate interpreter as that user: the same check() run there, reported as JSON.
        code = ("import json, sys, npu\n"
                "c = npu.connect(sys.argv[1])\n"
                "try:\n"
                "    c.admin('fault_inject', '{\"device\": 0, \"kind\": \"fail-next\"}')\n"
                "    print(json.dumps(None))\n"
                "except npu.Error as e:\n"
                "    print(json.dumps([type(e).__name__, e.status, e.message, e.task, c.tenant]))\n")
        out = subprocess.run([sys.executable, "-c", code, D.sock], preexec_fn=drop, capture_output=True,
                             text=True, timeout=20, env=dict(os.environ), cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        name, status, message, task, tenant = json.loads(out.stdout)
        self.assertEqual((name, status, task, tenant), ("PermissionDeniedError", npu.PermissionDeniedError.status,
                                                        0, "others"))
        self.assertIn("fault_inject", message)
        self.assertIn("requires root or the admin group", message)
        # The refused fault never reached the device.
        m = self.ctx.array(np.ones((2, 2), np.float32))
        o = self.ctx.empty((2, 2), np.float32)
        self.ctx.launch("MatMul", [m, m], [o])
        self.ctx.synchronize()


class TestTaskErrors(ErrorCase):
    def test_out_of_range_copy(self):
        s = self.ctx.stream(device=0)
        a = self.ctx.empty((16,), np.float32)  # 64 bytes
        r = self.ctx.host_alloc(32)
        t = s.copy(a, r, size=64)
        self.check(npu.OutOfRangeError, s.synchronize, words=("copy source", "0+64", "32 bytes"), task=t)
        t = s.copy(r, a, size=4096)
        self.check(npu.OutOfRangeError, s.synchronize, words=("copy", "0+4096"), task=t)
        t = s.copy(a, self.ctx.empty((4,), np.float32), size=64)
        self.check(npu.OutOfRangeError, s.synchronize, words=("copy source", "16 bytes"), task=t)
        s.copy(a, r)  # within both: fine again
        s.synchronize()

    def test_exec_error(self):
        # Gather's indices are data: only the running kernel can see one past the end.
        s = self.ctx.stream(device=0)
        x = self.ctx.array(np.arange(8, dtype=np.float32))
        o = self.ctx.empty((2,), np.float32)
        t = self.ctx.launch("Gather", [x, self.ctx.array(np.array([1, 100], np.int64))], [o], stream=s)
        self.check(npu.ExecError, s.synchronize, words=("Gather", "index 100 out of range"), task=t)
        self.ctx.launch("Gather", [x, self.ctx.array(np.array([1, 7], np.int64))], [o], stream=s)
        s.synchronize()
        np.testing.assert_array_equal(o.numpy(), [1, 7])

    def test_protocol_error(self):
        self.check(npu.ProtocolError, self.ctx.admin, "no_such_method", words=("unknown method 'no_such_method'",))
        self.check(npu.ProtocolError, self.ctx.admin, "hello", '{"min_version": 1, "max_version": 3}',
                   words=("hello: already done",))
        self.ctx.ping()  # the session goes on

    @unittest.skip("VersionError: libnpu's connect() offers the versions npud speaks, and a session "
                   "cannot send a second hello (ProtocolError, test_protocol_error): no correct client "
                   "reaches it")
    def test_version_error(self):
        pass

    @unittest.skip("SystemCallError: only a failing system call (socket, mmap, eventfd) or npud out of "
                   "host memory produce it; neither can be caused without breaking the machine")
    def test_system_call_error(self):
        pass


class TestSlowDeviceErrors(ErrorCase):
    """Work on the slowed device 1 is still pending when the test looks."""

    def work(self, ctx, stream, n):
        m = ctx.array(np.ones((64, 64), np.float32), device=1)
        o = ctx.empty((64, 64), np.float32, device=1)
        return [ctx.launch("MatMul", [m, m], [o], stream=stream) for _ in range(n)]

    def test_busy_backpressure_error(self):
        with npu.connect(D.sock, tenant="small", backpressure="error") as c:
            s = c.stream(device=1)
            self.slow_device_1()
            tasks = self.work(c, s, 8)
            # Four queued is the tenant's limit: the fifth on is refused, reported at the
            # stream's synchronize by the first refused task.
            self.check(npu.BusyError, s.synchronize, words=("queued-task limit", "max_queued_tasks",
                                                            "tenant 'small' 4/4", "retry later"),
                       task=tasks[4])
            s.synchronize()
            D.npuctl("fault", "clear", "1")
            self.work(c, s, 3)  # under the limit: accepted
            s.synchronize()

    def test_not_ready_and_cancelled(self):
        s1, s2 = self.ctx.stream(device=1), self.ctx.stream(device=1)
        e0, e1 = self.ctx.event(), self.ctx.event()
        self.slow_device_1()
        e0.record(s1)
        self.work(self.ctx, s1, 12)  # about half a second of work on the slowed device
        e1.record(s1)
        # query answers False for unfinished work; elapsed_ms needs both events done.
        self.assertFalse(e1.query())
        self.check(npu.NotReadyError, e0.elapsed_ms, e1, words=("event_elapsed", "not completed"))
        # A task waiting behind e1 is still queued: its owner cancels it.
        s2.wait(e1)
        t = self.work(self.ctx, s2, 1)[0]
        answer = self.ctx.admin("task_cancel", json.dumps({"stream": s2.handle, "task": t}))
        self.assertIn("cancelled", answer)
        self.check(npu.CancelledError, s2.synchronize, words=("cancelled by its owner",), task=t)
        s1.synchronize()
        self.assertGreaterEqual(e0.elapsed_ms(e1), 0.0)
        s2.synchronize()


if __name__ == "__main__":
    unittest.main()
