"""The object-storage tests' S3 server: caption/bench/loopback_s3.py's (moto's server mode on loopback, in a process
of its own, so a test can stop it or put a proxy in front of it), and that proxy (s3_faults.py)."""

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from caption.bench.loopback_s3 import KEY_ID, SECRET, S3Server, folder_files, free_port, s3_server

__all__ = ["KEY_ID", "SECRET", "S3Server", "fault_proxy", "folder_files", "free_port", "guarded_s3_server",
           "s3_server"]


def fault_proxy(port: int, target: int, pattern: str = "") -> subprocess.Popen:
    """tests/support/s3_faults.py listening on `port` in front of the store on `target`, once it is ready; its
    stdout says each fault it made (kill it, then read them with communicate())."""
    script = Path(__file__).with_name("s3_faults.py")
    process = subprocess.Popen([sys.executable, str(script), str(port), str(target), *([pattern] if pattern else [])],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


@contextmanager
def guarded_s3_server(folder: Path, files: dict[str, Path | bytes]) -> Iterator[tuple[S3Server, str, dict[str, str]]]:
    """(server, bucket, reader's environment): a store of its own that checks every request's signature and
    policy (moto's IAM, switched on through /moto-api/reset-auth once `files` are in the bucket), and a
    reader key allowed to list the bucket and read its objects, except those under secret/."""
    import boto3

    with s3_server(folder) as server:
        bucket = server.bucket(files)
        env = server.env()
        iam = boto3.client("iam", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                           aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_DEFAULT_REGION"])
        iam.create_user(UserName="reader")
        arn = f"arn:aws:s3:::{bucket}"
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"], "Resource": [arn, f"{arn}/*"]},
                {"Effect": "Deny", "Action": "s3:GetObject", "Resource": f"{arn}/secret/*"}]}))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        assert httpx.post(f"{server.endpoint}/moto-api/reset-auth", content=b"0").status_code == 200
        yield server, bucket, {**env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                               "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
