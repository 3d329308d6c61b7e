"""TLS: ``cluster.security`` certificates reach distributed's ``Security``; without them, a
TLS scheduler is refused with one line.

A throwaway CA and certificates are made with the ``openssl`` command line tool.
"""

import json
import shutil
import subprocess
import time

import dask.array as da
import numpy as np
import pytest
import tifffile
import yaml
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.cluster import connect
from stencilpipe.cluster.connect import job_script
from stencilpipe.errors import ClusterError, ConfigError
from stencilpipe.pipeline.config import ClusterConfig, SecurityConfig, parse_config
from test_cli import cli

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def openssl(command, cwd):
    """Run ``openssl`` with the arguments in ``command`` (split at spaces)."""
    subprocess.run(["openssl", *command.split()], cwd=cwd, check=True, capture_output=True)


def make_ca(folder, name):
    """``name.pem`` and ``name.key``: a self-signed CA."""
    openssl(
        f"req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN={name} "
        f"-keyout {name}.key -out {name}.pem",
        cwd=folder,
    )


def make_cert(folder, name, ca, serial):
    """``name.pem`` and ``name.key``, for 127.0.0.1, signed by ``ca``."""
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl(
        f"req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout {name}.key -out {name}.csr",
        cwd=folder,
    )
    openssl(
        f"x509 -req -in {name}.csr -CA {ca}.pem -CAkey {ca}.key -set_serial {serial} "
        f"-days 1 -extfile san.cnf -out {name}.pem",
        cwd=folder,
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA with a node and a client certificate, and a client certificate of another CA."""
    folder = tmp_path_factory.mktemp("certs")
    make_ca(folder, "ca")
    make_cert(folder, "node", "ca", 1)
    make_cert(folder, "client", "ca", 2)
    make_ca(folder, "rogue-ca")
    make_cert(folder, "rogue", "rogue-ca", 3)
    return folder


def client_security(certs, name="client"):
    return SecurityConfig(
        tls_ca_file=str(certs / "ca.pem"),
        tls_client_cert=str(certs / f"{name}.pem"),
        tls_client_key=str(certs / f"{name}.key"),
    )


@pytest.fixture(scope="module")
def tls_scheduler(certs):
    """A LocalCluster on 127.0.0.1 that speaks only TLS, with one in-process worker."""
    from distributed import LocalCluster, Security

    node = {"cert": str(certs / "node.pem"), "key": str(certs / "node.key")}
    security = Security(
        tls_ca_file=str(certs / "ca.pem"),
        **{
            f"tls_{role}_{part}": path
            for role in ("scheduler", "worker", "client")
            for part, path in node.items()
        },
        require_encryption=True,
    )
    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        host="127.0.0.1",
        protocol="tls://",
        security=security,
        dashboard_address="127.0.0.1:0",
    ) as cluster:
        yield cluster.scheduler_address


def mean_on(client):
    frames = np.random.default_rng(3).standard_normal((4, 30, 34))
    lazy = sp.library.mean(3, boundary="nearest")(da.from_array(frames, chunks=(1, 15, -1)))
    got = client.compute(lazy).result()
    want = np.stack([ndi.uniform_filter(frame, 3, mode="nearest") for frame in frames])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_client_with_certificates_runs_stencils_on_a_tls_scheduler(certs, tls_scheduler):
    assert tls_scheduler.startswith("tls://127.0.0.1:")
    config = ClusterConfig(address=tls_scheduler, timeout=20, security=client_security(certs))
    with connect(config) as client:
        assert client.scheduler.address == tls_scheduler
        assert client.security.require_encryption
        assert client.security.tls_client_cert == str(certs / "client.pem")
        workers = client.scheduler_info()["workers"]
        assert workers and all(address.startswith("tls://") for address in workers)
        mean_on(client)


def test_the_embedded_cluster_speaks_tls_with_the_client_certificate(certs):
    config = ClusterConfig(n_workers=1, security=client_security(certs))
    with connect(config) as client:
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 1 and all(w.startswith("tls://127.0.0.1:") for w in workers)
        mean_on(client)


def refused(config):
    """The ClusterError that ``connect`` raised, and how long it took."""
    start = time.perf_counter()
    with pytest.raises(ClusterError) as info:
        with connect(config):
            pass
    message = str(info.value)
    assert "\n" not in message
    return message, time.perf_counter() - start


def test_without_certificates_a_tls_scheduler_is_refused_within_the_timeout(certs, tls_scheduler):
    message, seconds = refused(ClusterConfig(address=tls_scheduler, timeout=3))
    assert message.startswith(f"cannot reach the Dask scheduler at {tls_scheduler} within 3 s")
    assert "(no TLS certificates to connect with); a tls:// scheduler needs certificates" in message
    assert seconds < 15

    plain = tls_scheduler.replace("tls://", "tcp://")
    message, seconds = refused(ClusterConfig(address=plain, timeout=3))
    assert message.startswith(f"cannot reach the Dask scheduler at {plain} within 3 s")
    assert seconds < 15

    secured = ClusterConfig(address=plain, timeout=3, security=client_security(certs))
    message, seconds = refused(secured)
    assert "encryption required" in message and "give the scheduler's tls:// address" in message
    assert seconds < 15


def test_a_certificate_of_another_ca_is_refused(certs, tls_scheduler):
    rogue = client_security(certs, "rogue")
    message, seconds = refused(ClusterConfig(address=tls_scheduler, timeout=3, security=rogue))
    assert message.startswith(f"cannot reach the Dask scheduler at {tls_scheduler}")
    assert message.endswith("; check the certificates and keys in cluster.security")
    assert seconds < 15


def test_a_key_that_does_not_match_its_certificate_is_refused_in_one_line(certs, tls_scheduler):
    wrong = client_security(certs).model_copy(update={"tls_client_key": str(certs / "ca.key")})
    message, _ = refused(ClusterConfig(address=tls_scheduler, timeout=3, security=wrong))
    assert (
        "(SSLError: " in message
        and "check the certificates and keys in cluster.security" in message
    )
    message, _ = refused(ClusterConfig(n_workers=1, processes=False, security=wrong))
    assert message.startswith("cannot start the cluster with the certificates in cluster.security")


@pytest.mark.parametrize("key", ["tls_ca_file", "tls_client_cert", "tls_client_key"])
def test_a_missing_certificate_file_names_the_key_and_the_path(certs, tmp_path, key):
    missing = tmp_path / "nowhere" / f"{key}.pem"
    security = client_security(certs).model_copy(update={key: str(missing)})
    for config in [
        ClusterConfig(address="tls://127.0.0.1:9", timeout=2, security=security),
        ClusterConfig(security=security),  # embedded: refused before anything starts
    ]:
        message, seconds = refused(config)
        assert message == f"cluster.security.{key}: no such file: {missing}"
        assert seconds < 5


def test_security_config_mistakes_name_the_key(certs):
    base = "input: a\noutput: b\nstages: [mean]\ncluster:\n  security:\n"
    cases = {
        "    tls_ca_file: ca.pem\n": "run.yaml:5: cluster.security.tls_client_cert: Field required",
        "    tls_ca_file: ca.pem\n    tls_client_cert: c.pem\n    tls_cert: x.pem\n": (
            "run.yaml:8: cluster.security.tls_cert: unknown key"
        ),
        "    tls_ca_file: ca.pem\n    tls_client_cert: c.pem\n    tls_worker_key: w.key\n": (
            "cluster.security: tls_worker_key needs tls_worker_cert"
        ),
    }
    for lines, expected in cases.items():
        text = base + lines
        with pytest.raises(ConfigError) as info:
            parse_config(yaml.safe_load(text), source="run.yaml", text=text)
        assert expected in str(info.value)


def test_jobqueue_workers_get_the_worker_certificates_in_their_job_script(certs, monkeypatch):
    monkeypatch.chdir(certs)  # relative paths: made absolute for the batch jobs
    text = """\
input: a
output: b
stages: [mean]
cluster:
  jobqueue: slurm
  job: {cores: 2, memory: 4GB, scheduler_options: {host: 127.0.0.1}}
  security:
    tls_ca_file: ca.pem
    tls_client_cert: client.pem
    tls_client_key: client.key
    tls_worker_cert: node.pem
    tls_worker_key: node.key
"""
    config = parse_config(yaml.safe_load(text), source="run.yaml", text=text).cluster
    (worker,) = [line for line in job_script(config).splitlines() if "dask_worker" in line]
    assert " tls://127.0.0.1:" in worker
    for option, name in [
        ("--tls-ca-file", "ca.pem"),
        ("--tls-cert", "node.pem"),
        ("--tls-key", "node.key"),
    ]:
        assert f"{option} {certs / name}" in worker


def test_a_config_file_finds_its_certificates_from_any_working_directory(certs, tmp_path):
    """Relative certificate paths resolve against the config's folder, also for workers that
    are threads of the run (``processes: false`` over tls://), and the result is scipy's."""
    conf = tmp_path / "conf"
    (conf / "in").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    frames = np.random.default_rng(8).standard_normal((3, 26, 30)).astype(np.float32)
    for index, frame in enumerate(frames):
        tifffile.imwrite(conf / "in" / f"f{index}.tif", frame)
    shutil.copytree(certs, conf / "certs")
    config = {
        "input": "in/",
        "output": "out/",
        "stages": [{"mean": {"size": 3}}],
        "boundary": "nearest",
        "cluster": {
            "processes": False,
            "n_workers": 1,
            "security": {
                "tls_ca_file": "certs/ca.pem",
                "tls_client_cert": "certs/client.pem",
                "tls_client_key": "certs/client.key",
            },
        },
    }
    (conf / "run.yaml").write_text(yaml.safe_dump(config))
    result = cli("run", conf / "run.yaml", "--json", cwd=tmp_path / "elsewhere")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["written"] == 3
    for index, frame in enumerate(frames):
        want = ndi.uniform_filter(frame.astype(np.float64), 3, mode="nearest")
        got = tifffile.imread(conf / "out" / f"f{index}.tif")
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
