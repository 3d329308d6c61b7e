"""Preloaded into the embedded cluster's worker processes (distributed's ``preload``).

Ctrl-C in a terminal sends SIGINT to the whole process group, worker processes included.
The client already handles it: it stops the cluster, which shuts its workers down cleanly.
A worker that took the signal itself would die first and print a KeyboardInterrupt
traceback over the one-line message, so the workers ignore it.
"""

from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    """Ignore SIGINT in this worker process (called by distributed at worker start)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
