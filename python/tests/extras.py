"""The optional frameworks some suites test against (pyqlib, optuna, cairosvg): imported, or the suite skipped
with the reason; scripts/test_python.sh installs them and sets MLALPHA_REQUIRE_<NAME>=1, which turns a failed
import into a failure, so CI cannot go green by skipping them."""
import importlib
import os

import pytest


def import_or_skip(modules: str, name: str, install: str):
    """Imports the comma-separated `modules` and returns the first; skips the calling module when one fails,
    unless MLALPHA_REQUIRE_<name> is 1 (then the ImportError stands)."""
    try:
        found = [importlib.import_module(m.strip()) for m in modules.split(",")]
    except ImportError as e:
        if os.environ.get(f"MLALPHA_REQUIRE_{name}") == "1":
            raise
        pytest.skip(f"{modules} cannot be imported ({e}); {install} (scripts/test_python.sh installs it)",
                    allow_module_level=True)
    return found[0]
