"""TLS for every connection: ``cluster.security`` as distributed's ``Security``."""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any

from ..errors import ClusterError

if TYPE_CHECKING:
    from distributed import Security

    from ..pipeline.config import ClusterConfig, SecurityConfig

__all__ = ["security", "ssl_error", "tls_options"]


def _certificate_files(tls: SecurityConfig) -> dict[str, str]:
    """The configured certificate and key paths, absolute (jobs on other nodes read them).

    Raises
    ------
    ClusterError
        Naming the key and the path of the first file that does not exist.
    """
    files = {}
    for key, value in tls.model_dump(exclude_none=True).items():
        if not key.startswith("tls_"):
            continue
        path = os.path.abspath(os.path.expanduser(value))
        if not os.path.isfile(path):
            raise ClusterError(f"cluster.security.{key}: no such file: {path}")
        files[key] = path
    return files


def security(config: ClusterConfig) -> Security | None:
    """distributed's ``Security`` for ``config.security``; None when TLS is not configured.

    The scheduler and workers that stencilpipe starts use the client's certificate
    (and key) unless the config names their own.

    Raises
    ------
    ClusterError
        When a configured certificate or key file does not exist.
    """
    if config.security is None:
        return None
    from distributed import Security

    files = _certificate_files(config.security)
    for role in ("scheduler", "worker"):
        if f"tls_{role}_cert" not in files:
            files[f"tls_{role}_cert"] = files["tls_client_cert"]
            if "tls_client_key" in files:
                files[f"tls_{role}_key"] = files["tls_client_key"]
    return Security(require_encryption=config.security.require_encryption, **files)


def ssl_error(exc: BaseException | None) -> BaseException | None:
    """The TLS error behind ``exc`` (a certificate that does not load or is refused), if any.

    distributed reports a peer's refusal (unknown CA) as a ``FatalCommClosedError``.
    """
    from distributed.comm.core import FatalCommClosedError

    while exc is not None and not isinstance(exc, ssl.SSLError | FatalCommClosedError):
        exc = exc.__cause__ or exc.__context__
    return exc


def tls_options(tls: Security | None) -> dict[str, Any]:
    """Keyword arguments that make a distributed cluster speak TLS (none without TLS)."""
    return {} if tls is None else {"security": tls, "protocol": "tls://"}
