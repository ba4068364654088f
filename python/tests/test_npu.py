"""Tests of the npu module through a private npud (run by make check: python-check)."""
import asyncio
import gc
import json
import os
import sys
import threading
import unittest

import numpy as np

import npu
import onnxbuild
from npudtest import Npud

D = None


def setUpModule():
    global D
    D = Npud()


def tearDownModule():
    D.stop()


def conv2d(x, w, b, pad):
    """Reference NCHW convolution, stride 1."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i:i + kh, j:j + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return (y + b.reshape(1, m, 1, 1)).astype(np.float32)


class Base(unittest.TestCase):
    def setUp(self):
        self.ctx = npu.connect(D.sock)

    def tearDown(self):
        self.ctx.close()


class TestBasics(Base):
    def test_devices_and_context(self):
        devs = self.ctx.devices()
        self.assertEqual(len(devs), 2)
        self.assertEqual(devs[1].id, 1)
        self.assertGreater(devs[0].memory_total, 0)
        self.assertEqual(devs[0].health, "ok")
        self.assertIsInstance(self.ctx.tenant, str)
        self.ctx.ping()
        with npu.connect(socket=D.sock, backpressure="error") as c2:
            c2.ping()
        self.assertTrue(c2.closed)
        with npu.connect(socket=D.sock, wait_spin_us=300) as c3:  # a context that spins
            c3.ping()
            np.testing.assert_array_equal(c3.array(np.arange(4, dtype=np.int32)).numpy(), np.arange(4))
        self.assertIsInstance(json.loads(self.ctx.admin("devices")), (dict, list))

    def test_device_arrays(self):
        x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
        a = self.ctx.array(x)
        self.assertEqual(a.shape, (2, 3, 4))
        self.assertEqual(a.dtype, np.dtype("int32"))
        np.testing.assert_array_equal(a.numpy(), x)
        e = self.ctx.empty((5,), np.float64, device=1)
        self.assertEqual((e.device, e.nbytes), (1, 40))
        a.free()
        with self.assertRaises(npu.BadHandleError):
            a.numpy()

    def test_host_region_buffer_protocol(self):
        r = self.ctx.host_alloc(64)
        v = np.frombuffer(r, np.float32)  # a view, not a copy
        v[:] = np.arange(16)
        s = self.ctx.stream(device=0)
        dev = self.ctx.empty((16,), np.float32, device=0)
        s.copy(dev, r)
        s.synchronize()
        np.testing.assert_array_equal(dev.numpy(), np.arange(16, dtype=np.float32))
        r2 = self.ctx.host_alloc(64)
        s.copy(r2, dev)
        s.synchronize()
        np.testing.assert_array_equal(r2.numpy(np.float32, (4, 4)), np.arange(16, dtype=np.float32).reshape(4, 4))
        # Viewed host memory keeps the context open (close would unmap it under NumPy).
        with self.assertRaises(npu.BusyError):
            self.ctx.close()
        del v
        gc.collect()

    def test_streams_events(self):
        s = self.ctx.stream(device=0)
        self.assertEqual(s.device, 0)
        e0, e1 = self.ctx.event(), self.ctx.event()
        a = self.ctx.array(np.ones((32, 32), np.float32))
        o = self.ctx.empty((32, 32), np.float32)
        e0.record(s)
        self.ctx.launch("MatMul", [a, a], [o], stream=s)
        e1.record(s)
        e1.synchronize()
        self.assertTrue(e1.query())
        self.assertGreaterEqual(e0.elapsed_ms(e1), 0.0)
        s2 = self.ctx.stream(device=0)
        s2.wait(e1)
        s2.synchronize()
        np.testing.assert_allclose(o.numpy(), np.full((32, 32), 32, np.float32))


class TestOps(Base):
    def test_matmul_launch(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((7, 13)).astype(np.float32)
        w = rng.standard_normal((13, 5)).astype(np.float32)
        out = self.ctx.empty((7, 5), np.float32)
        task = self.ctx.launch("MatMul", [self.ctx.array(x), self.ctx.array(w)], [out])
        self.assertGreater(task, 0)
        self.ctx.synchronize()
        np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-4, atol=1e-4)

    def test_conv_launch_and_model(self):
        rng = np.random.default_rng(2)
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        b = rng.standard_normal(4).astype(np.float32)
        # launch takes scalar attributes only: a convolution without padding.
        out = self.ctx.empty((1, 4, 6, 6), np.float32)
        self.ctx.launch("Conv", [self.ctx.array(x), self.ctx.array(w), self.ctx.array(b)], [out], group=1)
        self.ctx.synchronize()
        np.testing.assert_allclose(out.numpy(), conv2d(x, w, b, 0), rtol=1e-4, atol=1e-4)
        ref = conv2d(x, w, b, 1)
        # The same convolution as an ONNX model with its weights inside.
        m = onnxbuild.model([onnxbuild.node("Conv", ["X", "W", "B"], ["Y"], pads=[1, 1, 1, 1],
                                            kernel_shape=[3, 3])],
                            [("X", "float32", (1, 3, 8, 8))], [("Y", "float32", (1, 4, 8, 8))],
                            [("W", w), ("B", b)])
        g = self.ctx.load(m)
        np.testing.assert_allclose(g.run({"X": x})["Y"], ref, rtol=1e-4, atol=1e-4)

    def test_mlp_model(self):
        m, w, c = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m, device=1)
        self.assertEqual(g.inputs, [("X", np.dtype("float32"), (4, 16))])
        self.assertEqual(g.outputs, [("Y", np.dtype("float32"), (4, 8))])
        x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
        ref = np.maximum(x @ w + c, 0)
        np.testing.assert_allclose(g.run({"X": x})["Y"], ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g.run([x.tolist()])["Y"], ref, rtol=1e-5, atol=1e-5)  # a list converts
        # Device arrays bound in place, no copies.
        dx, dy = self.ctx.array(x, device=1), self.ctx.empty((4, 8), np.float32, device=1)
        g.run({"X": dx}, outputs={"Y": dy})
        self.ctx.synchronize()
        np.testing.assert_allclose(dy.numpy(), ref, rtol=1e-5, atol=1e-5)

    def test_accumulate_float64(self):
        # One output that cancels to almost nothing: the float32 sum of 4096 products keeps an
        # error of the terms' size, the float64 one only the rounding of the tiny result.
        rng = np.random.default_rng(7)
        k = 4096
        x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
        w = rng.uniform(-1, 1, (k, 8)).astype(np.float32)
        w[k - 1] = (-(x[0, :k - 1].astype(np.float64) @ w[:k - 1].astype(np.float64)) / x[0, k - 1]).astype(np.float32)
        exact = x.astype(np.float64) @ w.astype(np.float64)
        m = onnxbuild.model([onnxbuild.node("MatMul", ["X", "W"], ["Y"])],
                            [("X", "float32", (1, k))], [("Y", "float32", (1, 8))], [("W", w)])
        err32 = np.abs(self.ctx.load(m).run({"X": x})["Y"] - exact).max()
        err64 = np.abs(self.ctx.load(m, accumulate="float64").run({"X": x})["Y"] - exact).max()
        errmx = np.abs(self.ctx.load(m, accumulate="mixed").run({"X": x})["Y"] - exact).max()
        self.assertGreater(err32, 1e-6)
        self.assertLess(err64, 1e-9)
        # mixed: runs of 32 products in float32, four runs at a time, then float64: between the two
        self.assertLess(errmx, err32)
        self.assertGreater(errmx, err64)
        with self.assertRaises(ValueError):
            self.ctx.load(m, accumulate="float16")

    def test_model_from_path(self):
        import tempfile
        m, w, c = onnxbuild.mlp(2, 4, 3)
        with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
            f.write(m)
            f.flush()
            g = self.ctx.load(f.name)
        x = np.ones((2, 4), np.float32)
        np.testing.assert_allclose(g.run({"X": x})["Y"], np.maximum(x @ w + c, 0), rtol=1e-5)

    def test_run_async(self):
        m, w, c = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        xs = [np.full((4, 16), i, np.float32) for i in range(16)]

        async def main():
            one = await g.run_async({"X": xs[1]})
            many = await asyncio.gather(*(g.run_async({"X": x}) for x in xs))
            with self.assertRaises(npu.ShapeError):
                await g.run_async({"X": np.zeros((4, 15), np.float32)})
            return one, many
        one, many = asyncio.run(main())
        np.testing.assert_allclose(one["Y"], np.maximum(xs[1] @ w + c, 0), rtol=1e-5)
        for x, r in zip(xs, many):
            np.testing.assert_allclose(r["Y"], np.maximum(x @ w + c, 0), rtol=1e-5)
        with self.assertRaises(RuntimeError):  # no running loop
            g.run_async({"X": xs[0]})


class TestErrors(Base):
    def test_hierarchy(self):
        codes = {}
        for name in ["InvalidError", "BadHandleError", "NoMemoryError", "QuotaError", "LimitError",
                     "PermissionDeniedError", "UnsupportedError", "ShapeError", "OutOfRangeError", "ProtocolError",
                     "VersionError", "DeviceError", "ExecError", "BusyError", "NotReadyError", "CancelledError",
                     "ConnectionLostError", "SystemCallError"]:
            cls = getattr(npu, name)
            self.assertTrue(issubclass(cls, npu.Error))
            codes[cls.status] = name
        self.assertEqual(sorted(codes), list(range(1, 19)))

    def check(self, cls, fn, *args, **kw):
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertEqual(e.status, getattr(cls, "status", e.status))
        self.assertIs(type(e).status, e.status)  # the class matches the code
        self.assertIsInstance(e.message, str)
        self.assertIsInstance(e.task, int)
        return e

    def test_errors_through_npud(self):
        m, _, _ = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        e = self.check(npu.ShapeError, g.run, {"X": np.zeros((3, 16), np.float32)})
        self.assertIn("X", e.message)
        self.check(npu.ShapeError, g.run, {"X": np.zeros((4, 16), np.float64)})
        self.check(npu.InvalidError, g.run, {"X": np.zeros((4, 16), np.float32), "Q": 1})
        self.check(npu.InvalidError, g.run, [])
        self.check(npu.InvalidError, self.ctx.load, b"not a model")
        self.check(npu.InvalidError, self.ctx.load, m, device=7)
        self.check(npu.NoMemoryError, self.ctx.empty, (1 << 20, 1 << 20), np.float32)
        a = self.ctx.array(np.ones((2, 2), np.float32))
        o = self.ctx.empty((2, 2), np.float32)
        s = self.ctx.stream(device=0)
        self.check(npu.UnsupportedError, lambda: (self.ctx.launch("NoSuchOp", [a], [o], stream=s), s.synchronize()))
        # A queued task's failure names the task; the stream's synchronize reports and clears it.
        task = self.ctx.launch("MatMul", [a, a], [self.ctx.empty((3, 3), np.float32)], stream=s)
        e = self.check(npu.ShapeError, s.synchronize)
        self.assertEqual(e.task, task)
        self.assertIn("task %d" % e.task, e.message)
        s.synchronize()
        self.check(npu.InvalidError, npu.connect, D.sock, tenant="no-such-tenant")
        # A device fault fails the run, sync and async.
        D.npuctl("fault", "inject", "0", "fail-next")
        e = self.check(npu.DeviceError, g.run, {"X": np.zeros((4, 16), np.float32)})
        self.assertGreater(e.task, 0)
        g.run({"X": np.zeros((4, 16), np.float32)})

        async def faulty():
            D.npuctl("fault", "inject", "0", "fail-next")
            with self.assertRaises(npu.DeviceError) as cm:
                await g.run_async({"X": np.zeros((4, 16), np.float32)})
            self.assertGreater(cm.exception.task, 0)
            return await g.run_async({"X": np.ones((4, 16), np.float32)})  # the slot is clean again
        self.assertEqual(asyncio.run(faulty())["Y"].shape, (4, 8))
        D.npuctl("fault", "clear", "0")
        self.check(npu.ConnectionLostError, npu.connect, D.sock + ".none")
        g.unload()
        self.check(npu.BadHandleError, g.run, {"X": np.zeros((4, 16), np.float32)})
        self.ctx.close()
        self.check(npu.ConnectionLostError, self.ctx.ping)
        self.check(npu.ConnectionLostError, a.numpy)

    def test_bad_python_input_never_crashes(self):
        m, _, _ = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        for bad in [None, 3, "X", {"X": object()}, {"X": "abc"}, {"X": np.zeros((4, 16), np.complex64)},
                    {1: 2}, {"X": np.zeros((1,) * 9, np.float32)}]:
            with self.assertRaises((TypeError, ValueError, npu.Error)):
                g.run(bad)
        for bad in [(-1,), (1,) * 9, "x", [1.5]]:
            with self.assertRaises((TypeError, ValueError, npu.Error)):
                self.ctx.empty(bad)
        with self.assertRaises(TypeError):
            self.ctx.empty((2,), "complex64")
        with self.assertRaises(TypeError):
            self.ctx.launch("MatMul", [1], [2])
        with self.assertRaises(TypeError):
            self.ctx.launch("MatMul", [], [], alpha="x")
        with self.assertRaises(TypeError):
            self.ctx.load(12)
        with self.assertRaises(ValueError):
            npu.connect(D.sock, backpressure="maybe")
        with self.assertRaises(TypeError):
            npu.connect(D.sock, wait_spin_us="long")
        with self.assertRaises(TypeError):
            self.ctx.stream().copy(1, 2)


class TestThreads(Base):
    def test_four_threads_one_context(self):
        m, w, c = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        errors = []

        def worker(seed):
            try:
                rng = np.random.default_rng(seed)
                for _ in range(200):
                    x = rng.standard_normal((4, 16)).astype(np.float32)
                    np.testing.assert_allclose(g.run({"X": x})["Y"], np.maximum(x @ w + c, 0), rtol=1e-5,
                                               atol=1e-5)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])

    def test_close_under_running_threads(self):
        m, _, _ = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        x = np.ones((4, 16), np.float32)
        ended = []
        started = threading.Barrier(5)

        def worker():
            started.wait()
            try:
                while True:
                    g.run({"X": x})
            except npu.ConnectionLostError as e:
                ended.append(e)
        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        started.wait()
        self.ctx.close()  # waits for the calls in flight, then every later call fails cleanly
        for t in ts:
            t.join()
        self.assertEqual(len(ended), 4)


class TestRefcounts(Base):
    def test_no_leak_over_10000_runs(self):
        m, w, c = onnxbuild.mlp(4, 16, 8)
        g = self.ctx.load(m)
        x = np.ones((4, 16), np.float32)
        feed = {"X": x}
        for _ in range(100):  # warm: the run slots are made once
            g.run(feed)
        gc.collect()
        mem0 = [d.memory_used for d in self.ctx.devices()]
        npuctl0 = D.npuctl("mem")
        rx, rg, rf = sys.getrefcount(x), sys.getrefcount(g), sys.getrefcount(feed)
        nobj = len(gc.get_objects())
        for _ in range(10000):
            y = g.run(feed)
        del y
        gc.collect()
        self.assertEqual((sys.getrefcount(x), sys.getrefcount(g), sys.getrefcount(feed)), (rx, rg, rf))
        self.assertLess(len(gc.get_objects()) - nobj, 50)
        self.assertEqual([d.memory_used for d in self.ctx.devices()], mem0)
        self.assertEqual(D.npuctl("mem"), npuctl0)
        # Handles give their npud memory back when collected.
        for _ in range(200):
            self.ctx.array(np.ones(1024, np.float32))
        gc.collect()
        self.assertEqual([d.memory_used for d in self.ctx.devices()], mem0)


class TestExampleServer(unittest.TestCase):
    def test_server(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        import server
        m, w, c = onnxbuild.mlp(2, 4, 3)

        async def main():
            ready = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(server.serve(m, port=0, socket=D.sock, ready=ready))
            port = await ready
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            x = [[1, 2, 3, 4], [5, 6, 7, 8]]
            answers = []
            for req in [{"X": x}, {"X": [[1, 2, 3]]}, {"X": x}]:
                writer.write(json.dumps(req).encode() + b"\n")
                await writer.drain()
                answers.append(json.loads(await reader.readline()))
            writer.close()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            return x, answers
        x, answers = asyncio.run(main())
        ref = np.maximum(np.array(x, np.float32) @ w + c, 0)
        np.testing.assert_allclose(answers[0]["Y"], ref, rtol=1e-5)
        self.assertEqual(answers[1]["status"], npu.ShapeError.status)
        np.testing.assert_allclose(answers[2]["Y"], ref, rtol=1e-5)


if __name__ == "__main__":
    unittest.main()
