"""Guard against stale Numba caches across sandbox modules.

Numba's `cache=True` keys a kernel's cache on its own source file only: after an edit to sandbox/policies.py
or sandbox/rng.py, the cached kernels of sandbox/kernels/ would keep running the old inlined code. At import
we hash every sandbox source file and the allocator rule book the kernels compile
(isocompute/contract/allocrules.py) and, when the hash changed, delete the package's cached kernels (*.nbi,
*.nbc) so that they recompile (isocompute.contract.cache.invalidate_stale_numba, shared with the tiny LM's
kernels).
"""

from __future__ import annotations

from pathlib import Path

from isocompute.contract import allocrules
from isocompute.contract.cache import invalidate_stale_numba


def invalidate_stale_kernels() -> None:
    """Delete this package's Numba cache files if any sandbox source or the allocator rule book changed
    since they were written (isocompute.contract.cache.invalidate_stale_numba)."""
    invalidate_stale_numba(Path(__file__).resolve().parent, "sandbox-sources.sha1",
                           (Path(allocrules.__file__),))


COMPILE_SECONDS = (15, 45)
"""About how long the kernels of a first run take to compile with an empty cache, by CPU kind: 13.4 s of CPU
(13.7 s wall) for the demo's two presets through run_many on the 2-core Intel Xeon (AVX-512), measured at
load ~3.5 with the compile cuts of docs/SIM_PROFILE.md (benchmarks/sim_profile.py --compile; 19.4 s without
them on that machine); the 2-core AMD EPYC took 63 s of CPU without them (docs/SIM_PROFILE.md), so ~45 s
assumes the same ~30% cut there (not measured). A rough range for the notice."""
NOTICE = f"compiling simulator kernels (first run only, ~{COMPILE_SECONDS[0]}-{COMPILE_SECONDS[1]} s)"
_checked: set = set()


def is_compiled(dispatcher, args: tuple) -> bool:
    """Whether dispatcher(*args) runs without compiling: compiled in this process or found in Numba's cache.

    Numba looks a call up by the argument types and, on disk, by an index key of (types, the CPU target, the
    bytecode's hash) in the function's index file; this asks the same question with the same key (through
    Numba's private cache API: if that changes, the answer is True, so at worst the notice is not shown)."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig in dispatcher.overloads:
            return True
        cache = dispatcher._cache
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - a diagnostic: never fail a run over it
        return True


def notice_if_cold(key, calls) -> bool:
    """Print `NOTICE` on stderr (above any tqdm bar) once per process if one of calls, (dispatcher, args)
    pairs, would compile; `key` names the kind of run checked, so each is checked once. True if printed."""
    if key in _checked:
        return False
    _checked.add(key)
    if all(is_compiled(fn, args) for fn, args in calls):
        return False
    import sys

    try:
        from tqdm import tqdm

        tqdm.write(NOTICE, file=sys.stderr)
    except ImportError:
        print(NOTICE, file=sys.stderr, flush=True)
    return True
