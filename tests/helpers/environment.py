"""The environment a test gives a child Python: the project's folder, not this checkout."""

from __future__ import annotations

import os
from pathlib import Path


def clean_environment(root: Path) -> dict[str, str]:
    """The project's own directory on the path, and nothing of queueref's checkout."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "HYPOTHESIS_", "QUEUEREF_")) and key != "PYTHONPATH"
    }
    env["PYTHONPATH"] = str(root)
    return env
