"""Starts a private npud for a test module (as tests/integration/harness.c does)."""
import os
import shutil
import subprocess
import tempfile
import time

NPUD = os.environ.get("NPUD_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/npud"))
NPUCTL = os.environ.get("NPUCTL_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/npuctl"))


class Npud:
    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="npu-py-")
        self.sock = os.path.join(self.dir, "npud.sock")
        self.proc = subprocess.Popen([NPUD, "--socket", self.sock, "--sim-devices", "2", "--log-level", "warn",
                                      *extra], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("npud did not start")
            time.sleep(0.02)

    def npuctl(self, *args):
        return subprocess.run([NPUCTL, "--socket", self.sock, *args], capture_output=True, text=True,
                              check=True).stdout

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
