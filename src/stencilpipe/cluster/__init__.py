"""Where pipelines run: an embedded LocalCluster, or a scheduler that already runs."""

from .connect import connect, dashboard_link

__all__ = ["connect", "dashboard_link"]
