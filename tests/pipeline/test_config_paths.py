"""Relative paths in a config file resolve against the file's folder, whatever the working
directory (as docker compose does), the same in ``validate``, ``run --dry-run`` and ``run``;
paths given on the command line resolve against the working directory."""

import json

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from stencilpipe.cluster.connect import security
from stencilpipe.errors import ClusterError
from stencilpipe.pipeline.config import load_config
from test_cli import cli

FRAMES = 3

KERNELS = """\
import stencilpipe as sp

@sp.stencil
def double(x):
    return 2 * x[0, 0]
"""

CONFIG = """\
input: data/*.tif
output: out/
report: report.html
stages:
  - mean: {size: 3}
  - stencil: kernels.py:double
cluster: {n_workers: 1, threads_per_worker: 2}
"""


def oracle(frame):
    return 2 * ndi.uniform_filter(frame, 3, mode="reflect")


@pytest.fixture
def project(tmp_path):
    """``project/conf/`` holds the config, its stencil file and its data; ``elsewhere/`` is
    a second working directory."""
    conf = tmp_path / "project" / "conf"
    (conf / "data").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    rng = np.random.default_rng(3)
    frames = {f"f{i}": rng.standard_normal((24, 30)).astype(np.float32) for i in range(FRAMES)}
    for name, frame in frames.items():
        tifffile.imwrite(conf / "data" / f"{name}.tif", frame)
    (conf / "kernels.py").write_text(KERNELS)
    (conf / "run.yaml").write_text(CONFIG)
    return tmp_path, conf, frames


def test_validate_dry_run_and_run_resolve_against_the_config_folder(project):
    root, conf, frames = project
    config = conf / "run.yaml"
    for cwd, given in ((root / "project", "conf/run.yaml"), (root / "elsewhere", config)):
        validated = cli("validate", given, "--json", cwd=cwd)
        assert validated.returncode == 0, validated.stderr
        paths = json.loads(validated.stdout)
        assert paths["input"] == f"{conf}/data/*.tif" and paths["output"] == f"{conf}/out/"

        planned = cli("run", given, "--dry-run", "--json", cwd=cwd)
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)
        assert plan["input"] == f"{conf}/data/*.tif" and plan["frames"] == FRAMES
        assert plan["output"] == f"{conf}/out/" and not (conf / "out").exists()

    first = cli("run", "conf/run.yaml", "--json", cwd=root / "project")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["written"] == FRAMES
    assert (conf / "report.html").stat().st_size > 0
    for name, frame in frames.items():
        np.testing.assert_allclose(
            tifffile.imread(conf / "out" / f"{name}.tif"), oracle(frame), rtol=1e-6, atol=1e-6
        )
    # From another working directory the same config finds the same inputs and outputs.
    second = cli("run", config, "--json", cwd=root / "elsewhere")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["kept"] == FRAMES
    assert sorted(p.name for p in (root / "elsewhere").iterdir()) == []


def test_paths_on_the_command_line_resolve_against_the_working_directory(project):
    root, conf, _ = project
    result = cli(
        "run",
        conf / "run.yaml",
        "--set",
        "output=mine/",
        "--report",
        "mine.html",
        "--json",
        cwd=root / "elsewhere",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output"] == f"{root / 'elsewhere'}/mine/"
    names = sorted(p.name for p in (root / "elsewhere" / "mine").glob("*.tif"))
    assert names == [f"f{i}.tif" for i in range(FRAMES)]
    assert (root / "elsewhere" / "mine.html").stat().st_size > 0
    assert not (conf / "out").exists() and not (conf / "report.html").exists()


def test_certificate_files_resolve_against_the_config_folder(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "run.yaml").write_text(
        "input: a\noutput: b\nstages: [mean]\n"
        "cluster:\n  security:\n    tls_ca_file: certs/ca.pem\n    tls_client_cert: ~/me.pem\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = load_config("conf/run.yaml")
    tls = config.cluster.security
    assert tls.tls_ca_file == f"{conf}/certs/ca.pem"
    assert tls.tls_client_cert == f"{tmp_path}/home/me.pem"
    with pytest.raises(ClusterError, match=f"tls_ca_file: no such file: {conf}/certs/ca.pem"):
        security(config.cluster)
