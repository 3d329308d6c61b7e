"""The public API is typed: mypy checks a user's script against it (tests/typing/).

Correct calls must pass, and every wrong call in the script must be an error mypy
reports: each carries a ``type: ignore[code]``, and ``warn_unused_ignores`` fails the
check when an ignore is not needed, that is, when the API's hints let a mistake through.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"


@pytest.mark.skipif(
    shutil.which("mypy", path=str(Path(sys.executable).parent)) is None,
    reason="mypy is not installed (the test extra has it)",
)
def test_a_users_script_type_checks_and_its_mistakes_are_caught():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(HERE / "mypy.ini"),
            str(HERE / "user_script.py"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(
    shutil.which("mypy", path=str(Path(sys.executable).parent)) is None,
    reason="mypy is not installed (the test extra has it)",
)
def test_the_package_type_checks():
    """mypy over src/stencilpipe with pyproject.toml's settings: clean, apart from the
    modules its overrides still list."""
    root = Path(__file__).parents[1]
    run = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stdout + run.stderr
