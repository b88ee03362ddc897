"""For scripts/package_check.sh, run by the development environment (moto is a test tool):
an S3-compatible server on loopback with one bucket; writes its endpoint to the file named
by the first argument, then serves until killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
endpoint = f"http://{host}:{port}"
boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
             region_name="us-east-1").create_bucket(Bucket="lake")  # fmt: skip
Path(sys.argv[1]).write_text(endpoint)
while True:
    time.sleep(3600)
