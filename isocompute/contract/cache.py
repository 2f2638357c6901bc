"""The one cache folder of this project, for what a command keeps between runs without being asked where:
the converted models and calibrated splits of the LLM backend, and the pilot runs of `isocompute predict`.

$ISOCOMPUTE_CACHE when set, else ~/.cache/isocompute: never the current folder, so a command run anywhere
leaves nothing there that its user did not name."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Cache root: $ISOCOMPUTE_CACHE, else ~/.cache/isocompute."""
    env = os.environ.get("ISOCOMPUTE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "isocompute"
