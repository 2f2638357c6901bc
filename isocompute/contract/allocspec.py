"""The allocator spec grammar (docs/DESIGN.md "Allocators"): `name[:args]` -> AllocSpec.

A run names its rollout allocator by a spec string such as `knapsack:nmin=2,nmax=16` or
`schedule:double@0.25,0.5`. `parse` checks it once, fills the defaults (some depend on the base group size n)
and returns an AllocSpec; each engine maps the spec onto its own implementation (sandbox.allocators.encode:
a kernel code and parameter vector; llm_backend.allocators.make: an allocator object, refusing what that
backend lacks). The rules themselves, and the papers they follow, are documented in sandbox/allocators.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NAMES = ("fixed", "knapsack", "dynamic-sampling", "skip-zero-var", "schedule", "variance", "gvm", "ada",
         "pilot-commit", "dynamo")
"""Every allocator name (the head of a spec, before ':')."""
MAX_FRACTIONS = 5
"""Most compute fractions `schedule:double@F1,...` takes (the simulator's parameter vector holds them)."""


class AllocatorError(ValueError):
    """A spec string that names no allocator or gives it bad parameters (one line)."""


@dataclass(frozen=True)
class AllocSpec:
    """One parsed spec. `kind` is the allocator: a name of NAMES, or `schedule:double` / `schedule:zv` for
    the two schedules; `params` its numeric arguments with the defaults filled in (schedule:zv: threshold,
    window, nmax); `fractions` the sorted compute fractions of schedule:double."""

    kind: str
    params: dict[str, float] = field(default_factory=dict)
    fractions: tuple[float, ...] = ()


def split(spec: str) -> tuple[str, str]:
    """(name, args) of a spec: the parts before and after the first ':'."""
    name, _, args = str(spec).strip().partition(":")
    return name, args


def _kv(name: str, args: str, defaults: dict[str, float]) -> dict[str, float]:
    out = dict(defaults)
    if not args:
        return out
    for part in args.split(","):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or key not in defaults:
            raise AllocatorError(f"allocator {name}: bad argument {part!r}; give key=value with keys "
                                 f"{', '.join(defaults)}")
        try:
            out[key] = float(val)
        except ValueError:
            raise AllocatorError(f"allocator {name}: {key} must be a number, got {val!r}") from None
    return out


def _check_per_problem(name: str, kv: dict[str, float], n: int) -> None:
    integers = kv["nmin"] == int(kv["nmin"]) and kv["nmax"] == int(kv["nmax"])
    if not 1 <= kv["nmin"] <= n <= kv["nmax"] or not integers:
        raise AllocatorError(f"{name} needs integers 1 <= nmin <= n <= nmax, got nmin={kv['nmin']:g}, n={n}, "
                             f"nmax={kv['nmax']:g}")
    if not 0.0 <= kv["prior"] <= 1.0 or not 0.0 < kv["ema"] <= 1.0:
        raise AllocatorError(f"{name} needs prior in [0, 1] and ema in (0, 1]")


def parse(spec: str, n: int) -> AllocSpec:
    """The AllocSpec of a spec string at base group size n; AllocatorError (one line) if it is bad."""
    name, args = split(spec)
    if name not in NAMES:
        raise AllocatorError(f"unknown allocator {name!r}; choose one of {', '.join(NAMES)}")
    if name == "fixed":
        if args:
            raise AllocatorError(f"allocator fixed takes no arguments, got {args!r}")
        return AllocSpec(name)
    if name == "knapsack":
        kv = _kv(name, args, {"nmin": 2.0, "nmax": 4.0 * n, "prior": 0.5, "oracle": 0.0, "ema": 1.0})
        if not 1 <= kv["nmin"] <= n <= kv["nmax"]:
            raise AllocatorError(f"knapsack needs 1 <= nmin <= n <= nmax, got nmin={kv['nmin']:g}, n={n}, "
                                 f"nmax={kv['nmax']:g}")
        if not 0.0 <= kv["prior"] <= 1.0 or not 0.0 < kv["ema"] <= 1.0:
            raise AllocatorError("knapsack needs prior in [0, 1] and ema in (0, 1]")
        return AllocSpec(name, kv)
    if name == "dynamic-sampling":
        kv = _kv(name, args, {"rounds": 4.0})
        if not 1 <= kv["rounds"] <= 64:
            raise AllocatorError(f"dynamic-sampling needs 1 <= rounds <= 64, got {kv['rounds']:g}")
        return AllocSpec(name, kv)
    if name == "skip-zero-var":
        kv = _kv(name, args, {"p": 0.5, "streak": 1.0})
        if not 0.0 <= kv["p"] <= 1.0 or kv["streak"] < 1:
            raise AllocatorError("skip-zero-var needs p in [0, 1] and streak >= 1")
        return AllocSpec(name, kv)
    if name == "variance":
        kv = _kv(name, args, {"nmin": float(min(4, n)), "nmax": float(max(32, n)), "prior": 0.5,
                              "oracle": 0.0, "ema": 1.0})
        _check_per_problem(name, kv, n)
        return AllocSpec(name, kv)
    if name == "gvm":
        kv = _kv(name, args, {"nmin": 2.0, "nmax": 4.0 * n, "alpha": 1e-3, "beta": 2.0, "prior": 0.5,
                              "oracle": 0.0, "ema": 1.0})
        _check_per_problem(name, kv, n)
        if kv["alpha"] < 0 or kv["beta"] < 1:
            raise AllocatorError(f"gvm needs alpha >= 0 and beta >= 1, got {kv['alpha']:g}, {kv['beta']:g}")
        return AllocSpec(name, kv)
    if name == "ada":
        kv = _kv(name, args, {"rounds": 4.0, "chunk": float(n)})
        if not 1 <= kv["rounds"] <= 64 or not 2 <= kv["chunk"] <= n or kv["chunk"] != int(kv["chunk"]):
            raise AllocatorError(f"ada needs 1 <= rounds <= 64 and an integer 2 <= chunk <= n = {n}, got "
                                 f"rounds={kv['rounds']:g}, chunk={kv['chunk']:g}")
        return AllocSpec(name, kv)
    if name == "pilot-commit":
        return _parse_pilot_commit(args, n)
    if name == "dynamo":
        kv = _kv(name, args, {"nmin": float(max(1, n // 2)), "nmax": float(n + n // 2), "prior": 0.5,
                              "oracle": 0.0, "floor": 0.01, "master": 0.85})
        integers = kv["nmin"] == int(kv["nmin"]) and kv["nmax"] == int(kv["nmax"])
        if not 1 <= kv["nmin"] <= n <= kv["nmax"] or not integers:
            raise AllocatorError(f"dynamo needs integers 1 <= nmin <= n <= nmax, got nmin={kv['nmin']:g}, "
                                 f"n={n}, nmax={kv['nmax']:g}")
        if not 0.0 <= kv["prior"] <= 1.0 or not 0.0 < kv["floor"] <= 1.0 or not 0.0 < kv["master"] <= 1.0:
            raise AllocatorError("dynamo needs prior in [0, 1], floor in (0, 1] and master in (0, 1]")
        return AllocSpec(name, kv)
    if args.startswith("zv@"):
        return _parse_zv(args[3:], n)
    return _parse_double(args)


def _parse_pilot_commit(args: str, n: int) -> AllocSpec:
    """pilot-commit[:pilot=max(2, n/4),lower=0.125,upper=0.25,evict=1,rounds=30]: `pilot` rollouts per
    candidate, the committed ones get n - pilot more (the repository's scripts split n as 32 + 96 and
    16 + 48, a quarter for the pilot); at most `rounds` pilot rounds of bp candidates a step (its
    max_num_gen_batches 10 of 3 bp prompts each)."""
    kv = _kv("pilot-commit", args, {"pilot": float(min(max(2, n // 4), max(n - 1, 1))), "lower": 0.125,
                                    "upper": 0.25, "evict": 1.0, "rounds": 30.0})
    if not 2 <= kv["pilot"] < n or kv["pilot"] != int(kv["pilot"]):
        raise AllocatorError(f"pilot-commit needs an integer 2 <= pilot < n = {n} (the committed rollouts "
                             f"are n - pilot), got pilot={kv['pilot']:g}")
    if not 0.0 <= kv["lower"] <= 1.0 - kv["upper"] <= 1.0 or kv["evict"] <= 0.0:
        raise AllocatorError(f"pilot-commit needs 0 <= lower <= 1 - upper <= 1 and evict > 0 (> 1: never), "
                             f"got lower={kv['lower']:g}, upper={kv['upper']:g}, evict={kv['evict']:g}")
    if not 1 <= kv["rounds"] <= 256 or kv["rounds"] != int(kv["rounds"]):
        raise AllocatorError(f"pilot-commit needs an integer 1 <= rounds <= 256, got {kv['rounds']:g}")
    return AllocSpec("pilot-commit", kv)


def _parse_zv(args: str, n: int) -> AllocSpec:
    """schedule:zv@T[,window=8,nmax=32n]."""
    thr, _, rest = args.partition(",")
    try:
        t = float(thr)
    except ValueError:
        raise AllocatorError(f"schedule:zv@T needs a number T in (0, 1), got {thr!r}") from None
    kv = _kv("schedule:zv", rest, {"window": 8.0, "nmax": 32.0 * n})
    if not 0.0 < t < 1.0 or kv["window"] < 1 or kv["nmax"] < n:
        raise AllocatorError(f"schedule:zv needs T in (0, 1), window >= 1 and nmax >= n = {n}, got "
                             f"T={t:g}, window={kv['window']:g}, nmax={kv['nmax']:g}")
    return AllocSpec("schedule:zv", {"threshold": t, **kv})


def _parse_double(args: str, what: str = "double@F1,F2,... (compute fractions) or zv@T") -> AllocSpec:
    """schedule:double@F1,F2,... (`what`: the forms the error message offers)."""
    kind, at, fr = args.partition("@")
    if kind != "double" or not at:
        raise AllocatorError(f"schedule takes {what}, got {args!r}")
    try:
        fracs = sorted(float(f) for f in fr.split(","))
    except ValueError:
        raise AllocatorError(f"schedule fractions must be numbers, got {fr!r}") from None
    if not fracs or len(fracs) > MAX_FRACTIONS or not all(0.0 < f < 1.0 for f in fracs):
        raise AllocatorError(f"schedule needs 1..{MAX_FRACTIONS} fractions in (0, 1), got {fr!r}")
    return AllocSpec("schedule:double", fractions=tuple(fracs))


def parse_double(args: str) -> AllocSpec:
    """schedule:double@F1,... alone, for a backend without schedule:zv (its error offers only this form)."""
    return _parse_double(args, "double@F1,F2,... (compute fractions)")


def split_specs(text: str) -> list[str]:
    """A comma list of specs whose own arguments may hold commas (`schedule:double@0.25,0.5`,
    `variance:nmin=2,nmax=16`): a part that is a number or a key=value belongs to the spec before it."""
    out: list[str] = []
    for part in (p.strip() for p in str(text).split(",")):
        head = part.partition(":")[0]
        try:
            float(part)
            number = True
        except ValueError:
            number = False
        if out and (number or ("=" in head)):
            out[-1] += "," + part
        elif part:
            out.append(part)
    return out


def label(spec: str, n: int) -> str:
    """The table's `allocator` value (a curve label for `fit --by allocator`): `fixed-n8` for fixed runs, else
    the spec string itself."""
    spec = str(spec).strip()
    return f"fixed-n{n}" if spec == "fixed" else spec
