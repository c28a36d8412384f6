"""The S3-compatible server the tests read and write (OpenStack Swift with its s3api
middleware, or Ceph's RGW where a test needs a server that honours conditional PUTs; started and
stopped by scripts/s3-local.sh, as users start them) and a TCP proxy the
tests put between tarmac and it to cut connections, answer 503 SlowDown or count requests.
Shared by test_s3.py (remote inputs) and test_s3_read.py (verify, info, ls, cat and the reader
on s3:// datasets)."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import unittest

import fixtures as fx

SCRIPT = os.path.abspath(os.path.join(fx.HERE, "..", "..", "scripts", "s3-local.sh"))


class TcpProxy:
    """A TCP proxy on a free port of 127.0.0.1 to 127.0.0.1:`upstream_port`: each connection is
    handed to handle(client) on a thread of its own. Subclasses set their own state before
    calling this constructor (connections may come as soon as it returns)."""

    def __init__(self, upstream_port):
        self.upstream = ("127.0.0.1", upstream_port)
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.serve, daemon=True).start()

    def close(self):
        self.sock.close()

    def serve(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(client,), daemon=True).start()

    @staticmethod
    def read_head(client):
        """The bytes read until a request's header ends (and whatever came with it), or None
        (the connection closed first)."""
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return None
            head += chunk
        return head


class FaultProxy(TcpProxy):
    """A TCP proxy to `upstream` that records the Range headers it forwards and, per rule, cuts
    a connection once it has passed `cut_after` response bytes (the first `cuts` times), or
    answers the first `slowdowns` object GETs itself with 503 SlowDown. `gets` lists the path
    of every GET request it saw, in order."""

    def __init__(self, upstream_port, cut_after=0, cuts=0, slowdowns=0, stall_key=None):
        self.stall_key = stall_key  # a GET of this key gets its headers, then nothing
        self.cut_after, self.cuts_left, self.slowdowns_left = cut_after, cuts, slowdowns
        self.ranges, self.cut, self.slowed, self.gets = [], 0, 0, []
        super().__init__(upstream_port)

    def record(self, data):
        for m in re.finditer(rb"(?im)^range: bytes=(\d+)-", data):
            self.ranges.append(int(m.group(1)))
        for m in re.finditer(rb"(?m)^GET (\S+) HTTP/1", data):
            self.gets.append(m.group(1).decode())

    def handle(self, client):
        head = self.read_head(client)
        if head is None:
            return
        with self.lock:
            self.record(head)
            slow = head.startswith(b"GET ") and b".tar" in head.split(b"\r\n")[0] and self.slowdowns_left > 0
            if slow:
                self.slowdowns_left -= 1
                self.slowed += 1
            cut = 0
            if self.cuts_left > 0 and head.startswith(b"GET "):
                cut = self.cut_after
            stall = (self.stall_key is not None and head.startswith(b"GET ")
                     and self.stall_key.encode() in head.split(b"\r\n")[0])
        if slow:
            body = (b"<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SlowDown</Code>"
                    b"<Message>Please reduce your request rate.</Message></Error>")
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            client.close()
            return
        up = socket.create_connection(self.upstream)
        up.sendall(head)

        def upstream_to_client():
            passed = 0
            try:
                while True:
                    data = up.recv(65536)
                    if not data:
                        break
                    if stall:
                        client.sendall(data[:data.find(b"\r\n\r\n") + 4])
                        threading.Event().wait(600)
                    if cut and passed + len(data) >= cut:
                        with self.lock:
                            if self.cuts_left > 0:
                                self.cuts_left -= 1
                                self.cut += 1
                                client.sendall(data[:cut - passed])
                                break
                    client.sendall(data)
                    passed += len(data)
            except OSError:
                pass
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        threading.Thread(target=upstream_to_client, daemon=True).start()
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                with self.lock:
                    self.record(data)
                up.sendall(data)
        except OSError:
            pass


SERVER_PROGRAMS = {"swift": ("swift-proxy-server", "swift-object-server", "memcached"),
                   "radosgw": ("radosgw", "radosgw-admin", "ceph-mon", "ceph-osd")}


def missing_packages(server="swift"):
    missing = [b for b in SERVER_PROGRAMS[server] if shutil.which(b) is None]
    try:
        import boto3  # noqa: F401
    except ImportError:
        missing.append("python3-boto3")
    return missing


def has_user_xattrs(folder):
    probe = os.path.join(folder, ".xattr-probe")
    open(probe, "w").close()
    try:
        os.setxattr(probe, "user.tarmac.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        os.remove(probe)


def server_dir(tmp):
    """Where the server keeps its objects: in the test's temporary folder, unless that
    filesystem has no user extended attributes, which Swift needs (a tmpfs /tmp on kernels before
    6.6): then beside the build, on the checkout's disk."""
    if has_user_xattrs(tmp):
        return os.path.join(tmp, "s3")
    beside = tempfile.mkdtemp(prefix="tarmac-s3-", dir=os.path.dirname(os.path.abspath(fx.TARMAC)))
    if not has_user_xattrs(beside):
        raise AssertionError("neither %s nor %s has user extended attributes, which the S3 server "
                             "(Swift) needs: run the tests on ext4, xfs or btrfs" % (tmp, beside))
    return os.path.join(beside, "s3")


def start_server(cls, server=None):
    """Starts the server for test class `cls` (a fx.TmpCase, in its build()), stopped by a class
    cleanup: sets cls.env (the environment with the script's export lines), cls.port, cls.s3 (a
    boto3 client) and cls.server. `server`: "swift" or "radosgw" (S3_SERVER of
    scripts/s3-local.sh); by default the environment's S3_SERVER, else swift. Raises SkipTest
    naming what is not installed."""
    server = cls.server = server or os.environ.get("S3_SERVER", "swift")
    missing = missing_packages(server)
    if missing:
        raise unittest.SkipTest(", ".join(missing) + " not installed (scripts/setup-deps.sh %s)" %
                                ("ci" if server == "radosgw" else "test"))
    import boto3
    if server == "radosgw":  # its objects are in the OSD's memory: no extended attributes needed
        cls.server_dir = os.path.join(cls.tmp, "s3")
    else:
        cls.server_dir = server_dir(cls.tmp)
    if not cls.server_dir.startswith(cls.tmp + os.sep):  # removed after the server stops
        cls.addClassCleanup(shutil.rmtree, os.path.dirname(cls.server_dir), True)
    p = subprocess.run([SCRIPT, "start", cls.server_dir], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, S3_SERVER=server))
    if p.returncode != 0:
        raise AssertionError("scripts/s3-local.sh start failed:\n" + p.stderr)
    cls.addClassCleanup(subprocess.run, [SCRIPT, "stop", cls.server_dir], check=False)
    cls.env = dict(os.environ)
    for line in p.stdout.splitlines():
        name, value = line.removeprefix("export ").split("=", 1)
        cls.env[name] = value
    cls.port = int(cls.env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    cls.s3 = boto3.client("s3", endpoint_url=cls.env["AWS_ENDPOINT_URL"],
                          aws_access_key_id=cls.env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=cls.env["AWS_SECRET_ACCESS_KEY"],
                          region_name=cls.env["AWS_REGION"])
