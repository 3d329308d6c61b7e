"""Pipelines: a validated config, planned into one Dask graph, run on a cluster."""

from .config import ClusterConfig, PipelineConfig, load_config, parse_config
from .run import Plan, RunSummary, plan, run
from .stages import build_chain

__all__ = [
    "ClusterConfig",
    "PipelineConfig",
    "Plan",
    "RunSummary",
    "build_chain",
    "load_config",
    "parse_config",
    "plan",
    "run",
]
