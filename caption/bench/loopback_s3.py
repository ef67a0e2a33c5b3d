"""A real S3 API on loopback, for `caption-bench store` and the object-storage tests: moto's server mode
(`python -m moto.server`, the HTTP API s3fs's own tests run against; moto[s3], flask and flask-cors, in the
bench and test extras), in a process of its own. Clients reach it exactly as they reach AWS: AWS_ENDPOINT_URL
and a key pair in the environment (`S3Server.env`), nothing mocked in the client.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

KEY_ID = "AKIAVIDCAPTEST000001"
SECRET = "vidcap-test-secret-Zq8Hw3Lp0Xk"  # moto takes any key; the tests search every file a job writes for this


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, port: int, log: Path):
        self.port, self.log = port, log
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The variables a client reads (botocore's): this server, or `endpoint` (a proxy in front of it)."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_ACCESS_KEY_ID": KEY_ID,
                "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}

    def start(self) -> None:
        no_proxy = {k: "" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                             str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **no_proxy})
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.endpoint, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None, self.log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "moto's server did not answer in 60 s"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def client(self):
        """boto3's S3 client for this server (moto brings boto3): how the tests fill and change buckets."""
        import boto3

        env = self.env()
        return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=KEY_ID,
                            aws_secret_access_key=SECRET, region_name="us-east-1")

    def bucket(self, files: dict[str, Path | bytes] | None = None, versioned: bool = False) -> str:
        """A new bucket (a name of its own), holding `files` ({key: a local file or bytes})."""
        name = f"footage-{uuid.uuid4().hex[:12]}"
        client = self.client()
        client.create_bucket(Bucket=name)
        if versioned:
            client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        for key, data in (files or {}).items():
            self.put(name, key, data)
        return name

    def put(self, bucket: str, key: str, data: Path | bytes) -> None:
        body = data.read_bytes() if isinstance(data, Path) else data
        self.client().put_object(Bucket=bucket, Key=key, Body=body)


@contextmanager
def s3_server(folder: Path) -> Iterator[S3Server]:
    server = S3Server(free_port(), folder / "moto.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def folder_files(folder: Path, prefix: str = "") -> dict[str, Path]:
    """{key: file} for every file under `folder`, keyed by `prefix` + its path inside it."""
    return {prefix + p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
