"""Guard against stale Numba caches across sandbox modules.

Numba's `cache=True` keys a kernel's cache on its own source file only: after an edit to sandbox/policies.py
or sandbox/rng.py, the cached kernels of sandbox/grpo.py would keep running the old inlined code. At import we
hash every sandbox source file and, when the hash changed, delete the package's cached kernels (*.nbi, *.nbc)
so that they recompile. Only the default cache location (sandbox/__pycache__) is managed; with
NUMBA_CACHE_DIR set, clear that directory yourself after editing the sandbox.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_STAMP = "sandbox-sources.sha1"


def invalidate_stale_kernels() -> None:
    """Delete this package's Numba cache files if any sandbox source changed since they were written."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    pkg = Path(__file__).resolve().parent
    digest = hashlib.sha1()
    for src in sorted(pkg.glob("*.py")):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    key = digest.hexdigest()
    cache = pkg / "__pycache__"
    stamp = cache / _STAMP
    try:
        if stamp.is_file() and stamp.read_text().strip() == key:
            return
        cache.mkdir(exist_ok=True)
        for f in list(cache.glob("*.nbi")) + list(cache.glob("*.nbc")):
            f.unlink(missing_ok=True)
        stamp.write_text(key + "\n")
    except OSError:  # read-only install: Numba then caches elsewhere (or not at all); nothing to manage here
        return
