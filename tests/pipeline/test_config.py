"""Config files: valid ones build the right stencils; every kind of mistake names key and line."""

import textwrap

import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.errors import ConfigError
from stencilpipe.pipeline.config import load_config, parse_config
from stencilpipe.pipeline.stages import build_chain

GOOD = """\
input: data/*.tif
output: out/
stages:
  - gaussian: {sigma: 1.0}
  - mean: {size: 3, boundary: nearest}
  - laplace
  - stencil: user_kernels.py:double
boundary: wrap
"""

USER_KERNELS = """\
import stencilpipe as sp

@sp.stencil
def double(x):
    return 2 * x[0, 0]
"""


def write(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_valid_config_builds_the_chain_it_describes(tmp_path):
    write(tmp_path, USER_KERNELS, "user_kernels.py")
    config = load_config(write(tmp_path, GOOD))
    pipeline = build_chain(config)
    assert [s.name for s in pipeline.stages] == ["gaussian", "mean", "laplace", "double"]
    assert [s.boundary for s in pipeline.stages] == ["wrap", "nearest", "wrap", "wrap"]
    x = np.random.default_rng(0).standard_normal((20, 24))
    want = 2 * ndi.laplace(
        ndi.uniform_filter(ndi.gaussian_filter(x, 1.0, mode="wrap"), 3, mode="nearest"), mode="wrap"
    )
    np.testing.assert_allclose(pipeline(x), want, rtol=1e-9, atol=1e-9)


def test_defaults_and_overrides(tmp_path):
    write(tmp_path, USER_KERNELS, "user_kernels.py")
    config = load_config(
        write(tmp_path, GOOD),
        ["cluster.n_workers=3", "stages.0.gaussian.sigma=2.5", "resume=false"],
    )
    assert config.cluster.n_workers == 3 and config.cluster.address is None
    assert config.stage_specs()[0] == ("gaussian", {"sigma": 2.5, "truncate": 4.0, "ndim": 2})
    assert config.resume is False and config.chunks == "auto" and config.backend == "numpy"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "input: a\noutput: b\nstages: [mean]\nbogus: 1\n",
            "run.yaml:4: bogus: unknown key; expected one of: input, output, stages, boundary",
        ),
        (
            "input: a\noutput: b\nstages: [mean]\nboundry: wrap\n",
            "run.yaml:4: boundry: unknown key; did you mean 'boundary'?",
        ),
        (
            "input: a\noutput: b\nstages:\n  - gausian: {sigma: 1}\n",
            "run.yaml:4: stages.0: unknown stage 'gausian'; did you mean 'gaussian'?",
        ),
        (
            "input: a\noutput: b\nstages: [median, lapalce]\n",
            "run.yaml:3: stages.1: unknown stage 'lapalce'; did you mean 'laplace'?",
        ),
        (
            "input: a\noutput: b\nstages:\n  - median: {sise: 3}\n",
            "run.yaml:4: stages.0.median.sise: unknown key; did you mean 'size'?",
        ),
        (
            "input: a\noutput: b\nstages:\n  - stencil: {path: k.py:f, bondary: wrap}\n",
            "run.yaml:4: stages.0.stencil.bondary: unknown key; did you mean 'boundary'?",
        ),
        (
            "input: a\noutput: b\nstages: [mean]\ncluster:\n  n_wrkers: 3\n",
            "run.yaml:5: cluster.n_wrkers: unknown key; did you mean 'n_workers'?",
        ),
        (
            "input: a\noutput: b\nstages: [mean]\ncluster:\n  security:\n    tls_ca_fil: x\n"
            "    tls_client_cert: y\n",
            "run.yaml:6: cluster.security.tls_ca_fil: unknown key; did you mean 'tls_ca_file'?",
        ),
        (
            "input: a\noutput: b\nstages:\n  - gaussian: {sigma: abc}\n",
            "run.yaml:4: stages.0.gaussian.sigma: Input should be a valid number",
        ),
        (
            "input: a\noutput: b\nstages: [mean]\ncluster:\n  n_workers: 0\n",
            "run.yaml:5: cluster.n_workers: Input should be greater than 0",
        ),
        ("input: a\nstages: [mean]\n", "run.yaml:1: output: Field required"),
        ("input: a\noutput: b\nstages: []\n", "stages: List should have at least 1 item"),
        (
            "input: a\noutput: b\nstages: [mean]\nboundary: periodic\n",
            "run.yaml:4: boundary: Input should be 'reflect'",
        ),
        ("input: a\noutput: b\nstages: [mean\n", "run.yaml:4: not valid YAML"),
        ("- just\n- a list\n", "a pipeline config is a mapping"),
    ],
)
def test_config_mistakes_name_the_line_and_key(tmp_path, text, expected):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert expected in str(info.value)


#: Mistakes whose pydantic messages named internals (model and type names, regexes, union
#: branches); each must get one line naming the key and what is expected.
PLAIN = {
    "stages: [{mean: 3}]": "stages.0.mean: expected a mapping (key: value), got 3",
    "stages: [mean]\ncluster: 5": "cluster: expected a mapping (key: value), got 5",
    "stages: [mean]\ncluster: {security: 3}": "cluster.security: expected a mapping",
    "stages: [{stencil: 5}]": "stages.0.stencil: expected module:name, file.py:name or a mapping",
    "stages: [{stencil: nocolon}]": "stages.0.stencil: 'nocolon' is not a stencil reference",
    "stages: [{stencil: {path: nocolon}}]": "stages.0.stencil.path: 'nocolon' is not a stencil",
    "stages: [{mean: {}, sobel: {}}]": "stages.0: one stage per list item",
    "stages: [5]": "stages.0: expected a stage name or {name: {parameters}}",
    "stages: mean": "stages: expected a list (- item), got 'mean'",
    "stages: [mean]\nchunks: 0": "chunks: expected auto, frames per chunk",
    "stages: [mean]\nchunks: [0, 5]": "chunks: expected auto, frames per chunk",
    "stages: [mean]\ncluster: {security: {tls_ca_fil: x, tls_client_cert: y}}": (
        "cluster.security.tls_ca_fil: unknown key; did you mean 'tls_ca_file'?"
    ),
}

INTERNALS = (
    "Extra inputs",
    "model_type",
    "literal_error",
    "instance of",
    "Value error",
    "_params",
    "_stage",
    "StencilRef",
    "Config",
    "pattern",
    "Field required",  # a misspelt key is said once, as the unknown key
)


@pytest.mark.parametrize("text", list(PLAIN))
def test_messages_are_one_plain_line(tmp_path, text):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, f"input: a\noutput: b\n{text}\n"))
    message = str(info.value)
    assert len(message.splitlines()) == 1 and PLAIN[text] in message, message
    assert not [word for word in INTERNALS if word in message], message


def test_bad_parameter_values_and_stencil_references_name_the_stage(tmp_path):
    write(tmp_path, USER_KERNELS, "user_kernels.py")
    cases = {
        "- gaussian: {sigma: -1}": "stages.0.gaussian: sigma must be positive",
        "- stencil: user_kernels.py:nothing": "has no attribute 'nothing'",
        "- stencil: missing.py:f": "does not exist",
        "- stencil: not_a_module_anywhere:f": "cannot import 'not_a_module_anywhere'",
    }
    for stage, expected in cases.items():
        config = load_config(write(tmp_path, f"input: a\noutput: b\nstages:\n  {stage}\n"))
        with pytest.raises(ConfigError, match=expected):
            build_chain(config)


def test_missing_config_file_and_bad_override(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config("/nonexistent/run.yaml")
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(write(tmp_path, "input: a\noutput: b\nstages: [mean]\n"), ["oops"])


def test_importable_module_stencil(tmp_path, monkeypatch):
    (tmp_path / "mykernels_mod.py").write_text(USER_KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = parse_config(
        {"input": "a", "output": "b", "stages": [{"stencil": "mykernels_mod:double"}]},
        base_dir=tmp_path / "elsewhere",
    )
    (stage,) = build_chain(config).stages
    assert isinstance(stage, sp.Stencil) and stage.name == "double"
