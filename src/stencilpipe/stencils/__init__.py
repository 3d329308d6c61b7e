"""Stencil kernels: analysis, code generation and gufunc-style application."""

from .chain import Chain, chain
from .stencil import Stencil, stencil

__all__ = ["Chain", "Stencil", "chain", "stencil"]
