"""A real S3-compatible server for the Python tests: SeaweedFS's ``weed server -s3``, started on
free loopback ports with its data under pytest's ``tmp_path`` and killed after the test — the
same server ``tests/common/weed.rs`` starts for the Rust suite.

The ``weed`` fixture yields the server with the bucket ``fleet`` made and the AWS variables
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, the keys) set for the test. The binary is
``$PATCHBOX_WEED``, else ``weed`` on ``PATH``; without one, or when it does not come up, the
test skips and says why (``.ci/run`` builds the binary and exports ``PATCHBOX_WEED``).
"""

from __future__ import annotations

import http.client
import os
import pathlib
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

import pytest

BUCKET = "fleet"


@dataclass
class Weed:
    """A running server: its S3 endpoint and the AWS variables a client of it needs."""

    endpoint: str
    env: Dict[str, str]


def weed_binary() -> Optional[str]:
    given = os.environ.get("PATCHBOX_WEED")
    if given:
        return given if os.path.isfile(given) else None
    return shutil.which("weed")


def _free_ports(n: int) -> List[int]:
    # Held together so no two are the same, then released for the server to take.
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _status(port: int, method: str, path: str) -> Optional[int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=b"")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def _until_ok(proc: "subprocess.Popen[bytes]", port: int, method: str, path: str) -> bool:
    """Sends the request until it is answered with 200 (bounded: two minutes, as in Rust)."""
    deadline = time.monotonic() + 120
    while _status(port, method, path) != 200:
        if time.monotonic() > deadline or proc.poll() is not None:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def weed(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Weed]:
    binary = weed_binary()
    if binary is None:
        pytest.skip("no weed binary (set PATCHBOX_WEED or put SeaweedFS's weed on PATH; .ci/run builds it)")
    data = tmp_path / "weed"
    data.mkdir()
    p = _free_ports(8)
    args = [
        binary, "server", "-s3", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-s3.port={p[0]}", f"-s3.port.grpc={p[1]}", f"-master.port={p[2]}", f"-master.port.grpc={p[3]}",
        f"-volume.port={p[4]}", f"-volume.port.grpc={p[5]}", f"-filer.port={p[6]}", f"-filer.port.grpc={p[7]}",
        "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64", "-volume.max=100",
    ]
    with open(data / "weed.log", "wb") as log:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        if not (_until_ok(proc, p[0], "PUT", f"/{BUCKET}") and _until_ok(proc, p[0], "PUT", f"/{BUCKET}/.probe")):
            pytest.skip(f"weed did not take writes; see {data / 'weed.log'}")
        env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{p[0]}",
            "AWS_ACCESS_KEY_ID": "patchbox-test",
            "AWS_SECRET_ACCESS_KEY": "patchbox-test-secret",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        yield Weed(endpoint=env["AWS_ENDPOINT_URL"], env=env)
    finally:
        proc.kill()
        proc.wait()
