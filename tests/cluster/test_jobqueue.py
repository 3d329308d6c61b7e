"""dask-jobqueue clusters from the config: the job script they submit, and what they refuse.

A fake ``sbatch`` (and ``scancel``) on PATH records what would have been submitted, so the
tests see the very scripts each batch system gets; the jobs themselves run on a real SLURM
queue in ``tests/slurm``.
"""

import os
import re
import sys
import textwrap

import pytest
import yaml

from stencilpipe.cluster import connect
from stencilpipe.cluster.connect import job_script
from stencilpipe.errors import ClusterError, ConfigError
from stencilpipe.pipeline.config import ClusterConfig, parse_config

SLURM = """\
input: data/*.tif
output: out/
stages: [mean]
cluster:
  jobqueue: slurm
  jobs: 2
  job:
    cores: 8
    memory: 32GB
    queue: gpu
    walltime: "01:00:00"
    account: proj42
    job_extra_directives: ["--gres=gpu:1"]
    scheduler_options: {host: 127.0.0.1}
"""

PBS = """\
input: data/*.tif
output: out/
stages: [mean]
cluster:
  jobqueue: pbs
  job:
    cores: 4
    memory: 8GB
    queue: short
    walltime: "00:30:00"
    account: proj42
    resource_spec: select=1:ncpus=4:mem=8GB
    scheduler_options: {host: 127.0.0.1}
"""


def cluster_config(text: str) -> ClusterConfig:
    return parse_config(yaml.safe_load(text), source="run.yaml", text=text).cluster


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """``sbatch`` and ``scancel`` that record their calls under the returned folder."""
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    scripts = {
        "sbatch": f'cp "$1" "{record}/job-$$.sh"\necho "Submitted batch job $$"\n',
        "scancel": f'echo "$@" >> "{record}/scancel.log"\n',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


def test_the_slurm_job_script_carries_the_configured_resources_without_submitting(fake_slurm):
    script = job_script(cluster_config(SLURM))
    for line in [
        "#SBATCH -p gpu",
        "#SBATCH -A proj42",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=30G",  # 32 GB in the GiB SLURM means by "G"
        "#SBATCH -t 01:00:00",
        "#SBATCH --gres=gpu:1",
    ]:
        assert line in script.splitlines()
    worker = re.search(r"^.*-m distributed\.cli\.dask_worker (\S+) .*$", script, re.MULTILINE)
    assert worker is not None, script
    assert worker.group(1).startswith("tcp://127.0.0.1:")
    assert "--nthreads 2 --memory-limit 7.45GiB --nworkers 4" in worker.group(0)
    assert list(fake_slurm.iterdir()) == []  # the cluster was built, nothing submitted


def test_a_pbs_job_script(fake_slurm):
    script = job_script(cluster_config(PBS)).splitlines()
    for line in [
        "#PBS -q short",
        "#PBS -A proj42",
        "#PBS -l select=1:ncpus=4:mem=8GB",
        "#PBS -l walltime=00:30:00",
    ]:
        assert line in script
    assert any("distributed.cli.dask_worker tcp://127.0.0.1:" in line for line in script)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"qeue": "gpu"}, "cluster.job.qeue: not an option of SLURMCluster"),
        ({"security": True}, "cluster.job.security: use cluster.security"),
        ({"extra": ["--lifetime", "1h"]}, "cluster.job.extra: renamed worker_extra_args"),
        ({"resource_spec": "x"}, "cluster.job.resource_spec: not an option of SLURMCluster"),
    ],
)
def test_a_job_option_slurm_does_not_take_is_named_with_the_valid_ones(fake_slurm, job, expected):
    config = ClusterConfig(jobqueue="slurm", job={"cores": 1, "memory": "1GB", **job})
    with pytest.raises(ClusterError) as info:
        with connect(config):
            pass
    message = str(info.value)
    assert expected in message and "\n" not in message
    assert "accepts: account, cores, " in message and "walltime" in message
    assert list(fake_slurm.iterdir()) == []


def test_missing_resources_and_values_dask_jobqueue_refuses_are_cluster_errors(fake_slurm):
    with pytest.raises(ClusterError, match=r"cluster\.job\.memory is needed"):
        job_script(ClusterConfig(jobqueue="slurm", job={"cores": 2}))
    with pytest.raises(ClusterError, match="refused the job options.*'lots'"):
        job_script(ClusterConfig(jobqueue="slurm", job={"cores": 2, "memory": "lots"}))
    with pytest.raises(ClusterError, match="cluster.jobqueue is not set"):
        job_script(ClusterConfig())


def test_missing_dask_jobqueue_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # makes the import fail
    with pytest.raises(ClusterError, match=r"needs dask-jobqueue .*stencilpipe\[cluster\]"):
        job_script(ClusterConfig(jobqueue="pbs", job={"cores": 1, "memory": "1GB"}))


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ("{jobqueue: slurmm}", "run.yaml:4: cluster.jobqueue: Input should be 'slurm', 'pbs'"),
        (
            "{jobqueue: slurm, address: 'tcp://h:8786'}",
            "run.yaml:4: cluster.jobqueue: a jobqueue cluster starts its own scheduler",
        ),
        ("{jobqueue: slurm, gpu: true}", "cluster.jobqueue: cluster.gpu starts GPU workers"),
        (
            "{jobqueue: slurm, n_workers: 4}",
            "run.yaml:4: cluster: cluster.n_workers applies to the embedded cluster",
        ),
        ("{jobs: 4}", "run.yaml:4: cluster: cluster.jobs needs cluster.jobqueue (one of: slurm"),
        ("{jobqueue: pbs, jobs: 0}", "cluster.jobs: Input should be greater than 0"),
    ],
)
def test_config_mistakes_about_jobqueue_name_the_key(cluster, expected):
    text = textwrap.dedent(f"input: a\noutput: b\nstages: [mean]\ncluster: {cluster}\n")
    with pytest.raises(ConfigError) as info:
        parse_config(yaml.safe_load(text), source="run.yaml", text=text)
    assert expected in str(info.value)


def test_the_command_prints_the_job_script_and_submits_nothing(fake_slurm, tmp_path):
    import subprocess

    (tmp_path / "run.yaml").write_text(SLURM)
    result = subprocess.run(
        [sys.executable, "-m", "stencilpipe", "run", "run.yaml", "--job-script"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --cpus-per-task=8" in result.stdout.splitlines()
    assert "distributed.cli.dask_worker" in result.stdout
    assert list(fake_slurm.iterdir()) == []


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (
            {"adapt": {"maximum": 2}},
            "cluster.adapt needs cluster.jobqueue",
        ),
        (
            {"jobqueue": "slurm", "jobs": 2, "adapt": {"maximum": 2}, "job": {"cores": 1}},
            "cluster.jobs is a fixed number of jobs, cluster.adapt a range: give one",
        ),
        (
            {"jobqueue": "slurm", "adapt": {"minimum": 3, "maximum": 2}, "job": {"cores": 1}},
            "minimum (3) is above maximum (2)",
        ),
    ],
)
def test_adaptive_scaling_is_checked_with_the_config(cluster, expected):
    text = yaml.safe_dump(
        {"input": "in/", "output": "out/", "stages": ["mean"], "cluster": cluster}
    )
    with pytest.raises(ConfigError) as info:
        parse_config(yaml.safe_load(text), source="run.yaml", text=text)
    assert expected in str(info.value) and "\n" not in str(info.value)
