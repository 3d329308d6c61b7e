"""Output targets' guards against inputs: the paths they compare resolve as
``os.path.realpath`` resolves them, with each folder resolved once."""

import os

import pytest

from stencilpipe.io.targets import _real


@pytest.mark.parametrize(
    "path",
    [
        "link/sub/f.tif",  # a symlinked folder
        "link/sub/g.tif",  # a symlinked file
        "real/sub/../sub/f.tif",
        "link/../link/sub/x.tif",  # '..' after a symlink: the link's target's parent
        "f.tif",
        "./link/sub/missing.tif",
        "{root}/link/sub/g.tif",
    ],
)
def test_paths_resolve_as_realpath_resolves_them(tmp_path, monkeypatch, path):
    os.makedirs(tmp_path / "real" / "sub")
    os.symlink(tmp_path / "real", tmp_path / "link")
    (tmp_path / "real" / "sub" / "f.tif").touch()
    os.symlink(tmp_path / "real" / "sub" / "f.tif", tmp_path / "real" / "sub" / "g.tif")
    monkeypatch.chdir(tmp_path)
    path = path.format(root=tmp_path)
    folders: dict[str, str] = {}
    assert _real(path, folders) == os.path.realpath(path)
    assert _real(path, folders) == os.path.realpath(path)  # from the resolved folder
