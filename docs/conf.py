"""Sphinx configuration of stencilpipe's documentation site (``make docs`` builds it).

Sphinx rather than MkDocs: the docstrings are numpydoc, which numpydoc renders as written,
the gallery is sphinx-gallery (as scikit-image's, dask-image's and napari's), and the command
line is documented from its click group by sphinx-click, so all three come from the code.
"""

from __future__ import annotations

import inspect

import stencilpipe
import stencilpipe.io
import stencilpipe.library
import stencilpipe.ndfilters
import stencilpipe.ndmorph

project = "stencilpipe"
author = "the stencilpipe developers"
copyright = "the stencilpipe developers"  # noqa: A001 (Sphinx's name)
version = release = stencilpipe.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_click",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "examples"]
html_theme = "furo"
html_title = f"stencilpipe {release}"
html_favicon = "_static/favicon.svg"  # browsers ask for /favicon.ico (a 404) without one

autosummary_generate = True
autosummary_ignore_module_all = False  # a module's page lists its __all__, imported or not
autodoc_typehints = "none"  # the signature shows them; numpydoc's Parameters say them in words
autodoc_default_options = {"member-order": "bysource"}
# What the module template lists beyond autosummary's own context (see
# _templates/autosummary/module.rst): a name that ``stencilpipe`` re-exports is described there
# once, and the pages of the modules it comes from (``stencilpipe.io``) link to it; the data
# of ``__all__`` (autosummary lists only data with a ``#:`` comment in the module's own file).
# stencilpipe loads its names on first use (PEP 562); autosummary lists a module's members
# from its namespace, so load them all first.
for _name in stencilpipe.__all__:
    getattr(stencilpipe, _name)
PUBLIC = [
    stencilpipe,
    stencilpipe.io,
    stencilpipe.library,
    stencilpipe.ndfilters,
    stencilpipe.ndmorph,
]
autosummary_context = {
    "documented_in_stencilpipe": {
        module.__name__: [
            name
            for name in module.__all__
            if getattr(stencilpipe, name, None) is getattr(module, name)
        ]
        for module in PUBLIC[1:]
    },
    "public_data": {
        module.__name__: [
            name
            for name in module.__all__
            if not callable(getattr(module, name)) and not inspect.ismodule(getattr(module, name))
        ]
        for module in PUBLIC
    },
}
numpydoc_show_class_members = False  # the class template lists members with autodoc instead
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# Checked on every documented object, warnings failing the build: each has a docstring, and
# no docstring documents a parameter the signature lacks. Not yet PR01/RT01 (every parameter
# and the return documented): many ndfilters/ndmorph docstrings refer to scipy's in prose.
numpydoc_validation_checks = {"GL08", "PR02"}

# The gallery runs each ``plot_*.py`` at build time; other files (the GPU example) are shown
# as written. A fresh kernel cache per build would compile every kernel again: the user's
# cache (or STENCILPIPE_CACHE_DIR) is kept.
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "min_reported_time": 1,
    # Its table page loads jQuery and DataTables from CDNs: not offline, not wanted.
    "write_computation_times": False,
}
