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


def invalidate_stale_numba(pkg: Path, stamp: str, also: tuple[Path, ...] = ()) -> None:
    """Delete the Numba cache files (*.nbi, *.nbc) under package folder `pkg` if any of its sources (every
    *.py below it) or the files `also` changed since they were written; `stamp` names the hash file kept in
    pkg/__pycache__.

    Why: Numba's `cache=True` keys a kernel's cache on its own source file only, so after an edit to a module
    whose jitted functions another module's kernels inline (sandbox/policies.py into sandbox/kernels/,
    llm_backend/tiny/kernel.py into tiny/train_kernel.py) the cached kernels would keep running the old code.
    Only the default cache location (pkg/__pycache__) is managed; with NUMBA_CACHE_DIR set, clear that
    directory yourself after editing the sources."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import hashlib

    digest = hashlib.sha1()
    for src in sorted(pkg.rglob("*.py")):
        digest.update(str(src.relative_to(pkg)).encode())
        digest.update(src.read_bytes())
    for extra in also:
        digest.update(Path(extra).read_bytes())
    key = digest.hexdigest()
    cache = pkg / "__pycache__"
    path = cache / stamp
    try:
        if path.is_file() and path.read_text().strip() == key:
            return
        cache.mkdir(exist_ok=True)
        for f in list(pkg.rglob("__pycache__/*.nbi")) + list(pkg.rglob("__pycache__/*.nbc")):
            f.unlink(missing_ok=True)
        path.write_text(key + "\n")
    except OSError:  # read-only install: Numba then caches elsewhere (or not at all); nothing to manage here
        return
