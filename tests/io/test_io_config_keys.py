"""The config keys of issue 15: ``levels`` and ``storage_options`` (which is never shown)."""

from __future__ import annotations

import pytest
import yaml

from stencilpipe.errors import ConfigError
from stencilpipe.pipeline.config import load_config

SECRET = "wJalrXUtnFEMI-do-not-print"


def write_config(tmp_path, **keys):
    config = {
        "input": "s3://bucket/in/*.tif",
        "output": "s3://bucket/out.ome.zarr",
        "stages": [{"mean": {"size": 3}}],
        **keys,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_urls_levels_and_storage_options(tmp_path):
    options = {"key": "AKIA", "secret": SECRET, "endpoint_url": "http://127.0.0.1:9000"}
    config = load_config(write_config(tmp_path, levels=3, storage_options=options))
    assert (config.input, config.output) == ("s3://bucket/in/*.tif", "s3://bucket/out.ome.zarr")
    assert config.levels == 3 and config.storage_options == options
    shown = repr(config) + str(config) + config.model_dump_json() + str(config.model_dump())
    assert SECRET not in shown and "storage_options" not in shown


@pytest.mark.parametrize(
    ("keys", "message"),
    [({"levels": 0}, r"levels"), ({"storage_options": SECRET}, r"storage_options")],
)
def test_bad_values_are_refused_without_echoing_them(tmp_path, keys, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(write_config(tmp_path, **keys))
    assert SECRET not in str(caught.value)
