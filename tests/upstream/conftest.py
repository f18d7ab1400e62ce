"""The tests of vLLM's own code run only under `make upstream`.

`tools/upstream.py` runs them once per installed release, with that release's
`vllm` first on the path and `QUEUEREF_UPSTREAM_RELEASE` naming it. An ordinary
pytest run (no vLLM installed, no release named) does not collect them: they
are excluded, not skipped. Every test module here carries the `upstream` marker.
"""

from __future__ import annotations

import os

if not os.environ.get("QUEUEREF_UPSTREAM_RELEASE"):
    collect_ignore_glob = ["test_*.py"]
