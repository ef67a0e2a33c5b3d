"""The object-storage tests' S3 server: bench/loopback_s3.py's (moto's server mode on loopback, in a process
of its own, so a test can stop it or put a proxy in front of it)."""

from bench.loopback_s3 import KEY_ID, SECRET, S3Server, folder_files, free_port, s3_server

__all__ = ["KEY_ID", "SECRET", "S3Server", "folder_files", "free_port", "s3_server"]
