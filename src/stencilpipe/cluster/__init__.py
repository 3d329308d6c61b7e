"""Where pipelines run: an embedded LocalCluster, or a scheduler that already runs."""

from .connect import connect

__all__ = ["connect"]
