"""``stencilpipe demo``: a sample stack from scikit-image's images, run by configs/demo.yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from .errors import ConfigError

__all__ = ["make_sample_stack", "run_demo"]

#: scikit-image's 512x512 grey images, shipped with the package (no download).
_IMAGES = ("camera", "moon", "brick", "grass", "gravel")


def make_sample_stack(directory: Path, frames: int) -> list[Path]:
    """Write ``frames`` 512x512 uint8 TIFFs made from scikit-image's sample images.

    Each frame is one of the images, shifted a little further each time, like
    a slowly panning camera. Existing files are kept.
    """
    import skimage.data
    import tifffile

    directory.mkdir(parents=True, exist_ok=True)
    images = [getattr(skimage.data, name)() for name in _IMAGES]
    paths = []
    for index in range(frames):
        path = directory / f"frame_{index:03d}.tif"
        if not path.exists():
            image = images[index % len(images)]
            tifffile.imwrite(path, np.roll(image, shift=(index * 3, index * 5), axis=(0, 1)))
        paths.append(path)
    return paths


def _preview(before: np.ndarray, after: np.ndarray, path: Path) -> None:
    """Save ``before | after`` side by side as one 8-bit PNG."""
    import imageio.v3 as iio

    def to_uint8(image: np.ndarray) -> np.ndarray:
        image = image.astype(np.float64)
        low, high = np.percentile(image, (1, 99))
        return (np.clip((image - low) / max(high - low, 1e-12), 0, 1) * 255).astype(np.uint8)

    iio.imwrite(path, np.hstack([to_uint8(before), to_uint8(after)]))


#: Where the demo makes its sample stack and writes the results, under its working directory.
SAMPLE, RESULTS = "data/sample/*.tif", "out/sample/"


def run_demo(workdir: str | Path, frames: int, config: str | Path = "configs/demo.yaml") -> None:
    """Make the sample stack under ``workdir``, run ``config``'s stages on it, save a preview.

    The stack and the results are :data:`SAMPLE` and :data:`RESULTS` under ``workdir``
    (those of ``config`` with the default ``workdir``, the repository root).
    """
    import os

    import tifffile
    import yaml

    from .pipeline.config import parse_config
    from .pipeline.run import run

    console = Console()
    config_path = Path(config).resolve()
    if not config_path.exists():
        raise ConfigError(
            f"{config}: the demo config is missing; run the demo from the repository root"
        )
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load(config_path.read_text())
    data.update(input=os.path.join(workdir, SAMPLE), output=os.path.join(workdir, RESULTS))
    settings = parse_config(data, source=str(config_path), base_dir=config_path.parent)
    inputs = make_sample_stack(Path(settings.input).parent, frames)
    console.print(f"sample stack: {len(inputs)} frames in {Path(settings.input).parent}/")
    run(settings, console=console)
    output = Path(settings.output)
    preview = output.parent / "preview.png"
    _preview(tifffile.imread(inputs[0]), tifffile.imread(output / inputs[0].name), preview)
    console.print(f"before | after preview: {preview}")
