"""Stencil kernels: analysis, code generation and gufunc-style application."""

from .stencil import Stencil, stencil

__all__ = ["Stencil", "stencil"]
