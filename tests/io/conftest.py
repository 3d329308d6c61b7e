"""Fixtures for the I/O tests: a synchronous scheduler, a small PNG stack, an S3 server."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import dask
import numpy as np
import pytest
from io_samples import write_pngs


@pytest.fixture(autouse=True)
def synchronous_dask():
    """Deterministic tests: one thread runs every task, in order."""
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def pngs(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    """``in/img_{1,2,3,10,11}.png``: frames in natural order."""
    names = ["img_1", "img_2", "img_3", "img_10", "img_11"]
    return tmp_path / "in", write_pngs(tmp_path / "in", names)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3 endpoint: moto's server on 127.0.0.1 (a free port), for the session."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint):
    """``(storage_options, bucket)``: a new bucket on the moto server, and the options that
    reach it (any key and secret: moto checks that there are some)."""
    import s3fs

    options = {"key": "testing", "secret": "testing", "endpoint_url": s3_endpoint}
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    bucket = f"b{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    return options, bucket
