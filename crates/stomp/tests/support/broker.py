"""Starts and stops a real `ferry serve` for the interop scripts (port 0, addresses read
from runtime.toml), and kills it with SIGKILL when a check asks."""

import os
import re
import signal
import subprocess
import time


class Broker:
    def __init__(self, ferry, data_dir, extra=()):
        self.ferry = ferry
        self.data_dir = data_dir
        self.extra = list(extra)
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [self.ferry, "serve", "--data-dir", self.data_dir,
             "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
             "--stomp-listen", "127.0.0.1:0", *self.extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env={**os.environ, "FERRY_LOG": "warn"})
        runtime = os.path.join(self.data_dir, "runtime.toml")
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                text = open(runtime).read()
                if f"pid = {self.proc.pid}\n" in text and "stomp" in text:
                    self.native = re.search(r'^listen = "([^"]+)"', text, re.M).group(1)
                    self.http = re.search(r'^http = "([^"]+)"', text, re.M).group(1)
                    host, port = re.search(r'^stomp = "([^"]+)"', text, re.M).group(1).rsplit(":", 1)
                    self.stomp = (host, int(port))
                    return
            except (FileNotFoundError, AttributeError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"ferry serve exited: {self.proc.returncode}")
            time.sleep(0.02)
        raise RuntimeError("ferry serve did not start in 30 s")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart_after_kill9(self):
        self.kill9()
        self.start()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def cli(self, *args, stdin=None):
        out = subprocess.run([self.ferry, *args, "--server", self.native], input=stdin,
                             capture_output=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"ferry {' '.join(args)}: {out.stderr.decode()}")
        return out.stdout.decode()
