"""``python -m stencilpipe`` is the ``stencilpipe`` command."""

from .cli import main

main()
