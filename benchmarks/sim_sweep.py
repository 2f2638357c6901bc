"""A Fig-6-sized simulator sweep end to end, and its speed against the one-run-at-a-time path.

The sweep: presets tabular and interference, n = 2..512, bp = 32, budget 2^26 rollouts, 8 seeds (144 runs,
d = d_val = 1024, 32 evaluations each), run as `isocompute sweep n-vs-m` runs it: RunConfigs from
studies.sweeps.n_vs_m through studies.executors.run_sweep (local executor: sandbox.run_many batches on
threads) into a fresh studies.store.ResultStore. Reported: wall time (kernel compilation excluded, timed
apart), the work count (GRPO steps), and on a subset (seed 0, n in {2, 8, 64}, a smaller budget) the wall
time of `sandbox.run` per config in a loop (one thread, the unbatched path) and, with --ref, of the
simulator at an older commit (its sandbox/ read from git into a temporary package) against
`sandbox.run_many` on the same configs, back to back in this process. Per-step cost at n = 2 on one thread
is set against a floor: the step's flops at this machine's measured BLAS rate plus its random draws at the
measured cost of one draw (both measured here; a model of the floor, not a bound).

--ref takes a comma list (e.g. bbdf947,5c37e9c: the simulator before the speed work on its step and the commit
before the evaluation / softmax / Adam-row work); each older simulator is compiled cold in its temporary
package (minutes), outside the timings. --out writes the JSON object to a file; --readme-line FILE prints
the README's speed line generated from such a file, and --update-readme README.md puts it between the
`<!-- sim_sweep -->` markers there. The line also gives one interference run at n = 256 on 1 and 2 threads
(benchmarks/sim_throughput.py --single, wall time; skip with --no-single). --ab-into JSON --ref REF measures
only run() against REF, interleaved in this process (median CPU time per config), into JSON's "ab" entry.

Usage: python benchmarks/sim_sweep.py [--budget 2^26] [--seeds 8] [--threads 2] [--ref bbdf947] [--quick]
       [--json] [--out docs/sim_sweep.json] [--readme-line docs/sim_sweep.json] [--update-readme README.md]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import sandbox  # noqa: E402
from studies.backends import SimAdapter  # noqa: E402
from studies.config import RunConfig  # noqa: E402
from studies.executors import run_sweep  # noqa: E402
from studies.files import write_marked_block  # noqa: E402
from studies.store import ResultStore  # noqa: E402
from studies.sweeps import n_vs_m  # noqa: E402

PRESETS = ("tabular", "interference")
ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 60.0


def _count(text: str) -> int:
    text = text.strip()
    if "^" in text:
        a, b = text.split("^")
        return int(a) ** int(b)
    return int(float(text))


def sweep_configs(budget: int, seeds: int, ns: list[int]) -> list[RunConfig]:
    bases = [RunConfig(backend="sim", model=p, bp=32, budget=budget) for p in PRESETS]
    return [c for base in bases for c in n_vs_m(base, ns, seeds)]


def old_sandbox(ref: str):
    """The simulator at commit `ref` as a package `sandbox_<ref>` in a temporary directory (None if git
    cannot produce it, e.g. a shallow clone)."""
    name = f"sandbox_{ref}"
    tmp = Path(tempfile.mkdtemp(prefix="simref"))
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "sandbox"], capture_output=True,
                             check=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=tar.stdout, check=True)
    (tmp / "sandbox").rename(tmp / name)
    for f in (tmp / name).glob("*.py"):
        f.write_text(f.read_text().replace("from sandbox.", f"from {name}.").replace(
            "from sandbox import", f"from {name} import"))
    sys.path.insert(0, str(tmp))
    return importlib.import_module(name)


def _old_config(mod, cfg: sandbox.SimConfig):
    fields = set(mod.SimConfig.field_names())
    return mod.SimConfig(**{k: v for k, v in cfg.to_dict().items() if k in fields})


def ab_runs(ref: str, budget: int, reps: int = 3) -> dict | None:
    """run() (one thread) against the simulator at `ref` on the same configs in this process, interleaved
    (new, old, old, new, ...), median CPU seconds per config; ratio = ref's time / ours (above 1: faster
    now). None if git cannot produce `ref`."""
    old = old_sandbox(ref)
    if old is None:
        return None
    cfgs = {f"{p} n={n}": sandbox.SimConfig(model=p, bp=32, n=n, budget=budget) for p in PRESETS
            for n in (2, 256)}
    for c in cfgs.values():
        small = sandbox.SimConfig(**{**c.to_dict(), "budget": c.batch * 4})
        sandbox.run(small, threads=1)
        old.run(_old_config(old, small))
    times: dict = {k: {"new": [], "old": []} for k in cfgs}
    load0 = os.getloadavg()
    for rep in range(reps):
        for k, c in cfgs.items():
            pair = (("new", lambda c=c: sandbox.run(c, threads=1)),
                    ("old", lambda c=c: old.run(_old_config(old, c))))
            for tag, f in pair if rep % 2 == 0 else pair[::-1]:
                t0 = time.process_time()
                f()
                times[k][tag].append(time.process_time() - t0)
    cases = {k: {"cpu_s": float(np.median(v["new"])), "ref_cpu_s": float(np.median(v["old"])),
                 "ratio": float(np.median(v["old"]) / np.median(v["new"]))} for k, v in times.items()}
    return {"ref": ref, "budget": budget, "reps": reps, "cases": cases, "load_before": list(load0),
            "load_after": list(os.getloadavg())}


def measured_floor(cfg: sandbox.SimConfig) -> dict:
    """Flops and random draws of one GRPO step of `cfg` and their cost at rates measured on this machine."""
    a = np.random.default_rng(0).standard_normal((256, 256))
    np.dot(a, a)
    t0 = time.perf_counter()
    for _ in range(20):
        np.dot(a, a)
    flop_rate = 20 * 2 * 256**3 / (time.perf_counter() - t0)
    sandbox.rng.binomial_samples(0, 1, 0.5, 10)
    t0 = time.perf_counter()
    sandbox.rng.binomial_samples(0, 1, 0.5, 10**6)
    t_draw = (time.perf_counter() - t0) / 1e6
    bp, K, n = cfg.bp, cfg.K, cfg.n
    if cfg.model == "tabular":
        flops = bp * K * 40  # softmax, logit gradient, Adam on the K logits of each problem
        params = bp * K
    else:  # interference: 16 -> 32 tanh -> K, forward + backward ~ 3 x forward, Adam on every parameter
        dim, H = 16, cfg.hidden
        params = dim * H + H + H * K + K
        flops = 3 * 2 * bp * (dim * H + H * K) + bp * H * 20 + 12 * params
    draws = bp * (n + 1)  # the rollouts' draws plus ~1 per problem for the epoch shuffle
    floor = flops / flop_rate + draws * t_draw
    return {"flops": flops, "draws": draws, "flop_rate": flop_rate, "ns_per_draw": t_draw * 1e9,
            "floor_us": floor * 1e6}


MARK = "<!-- sim_sweep -->"


SHOWN_WITHOUT = ("--machine", "--out")
"""Options of the recorded command the README leaves out: the machine has its own words there, and --out only
says where the JSON went."""


def shown_command(cmd: str) -> str:
    """The recorded command without SHOWN_WITHOUT's options, re-quoted for a shell."""
    words, shown = shlex.split(cmd), []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in SHOWN_WITHOUT:
            skip = True
        elif not w.startswith(tuple(f"{o}=" for o in SHOWN_WITHOUT)):
            shown.append(w)
    return shlex.join(shown)


def _log2(x: float) -> int:
    return int(np.log2(x))


def readme_line(out: dict) -> str:
    """The README's simulator-speed block, generated from the JSON object `main` writes: a heading line with
    the command and the machine, then one Markdown bullet per measurement."""
    s, b = out["sweep"], out["subset"]
    tab, inter = out["per_step"]["tabular"], out["per_step"]["interference"]
    verdict = "met" if s["meets_target"] else "not met"
    fig6 = "Fig-6-sized " if s["budget"] == 2**26 and s["seeds"] == 8 else ""
    cmd = shown_command(out.get("command") or "python benchmarks/sim_sweep.py")
    grid = (f"{', '.join(s['presets'])}; n = {s['n'][0]}..{s['n'][-1]}, bp = {s['bp']}, budget "
            f"2^{_log2(s['budget'])}, {s['seeds']} seeds; {s['grpo_steps']:.3g} GRPO steps")
    refs = "".join(f", the run() loop of the simulator at {ref} {r['loop_s']:.1f} s (x{r['ratio']:.2f} for "
                   "run_many)" for ref, r in (b.get("refs") or {}).items())
    lines = [
        f"Simulator speed measured on {out.get('date') or 'an unrecorded date'}, on "
        f"{out.get('machine') or 'an unrecorded machine'}, by `{cmd}`:",
        f"- the {fig6}sweep of {s['runs']} runs ({grid}) took {s['wall_s']:.0f} s wall on {s['threads']} "
        f"threads into a result store (target <= {s['target_s']:.0f} s: {verdict});",
        f"- on a {b['runs']}-run subset (n = 2, 8, 64, budget 2^{_log2(b['budget'])}) run_many took "
        f"{b['run_many_s']:.1f} s, a loop of run() {b['run_loop_s']:.1f} s "
        f"(x{b['ratio_vs_run_loop']:.2f}){refs};",
    ]
    ab = out.get("ab")
    if ab:
        cases = ", ".join(f"{k} x{v['ratio']:.2f}" for k, v in ab["cases"].items())
        lines.append(f"- run() alone against {ab['ref']} in the same process (median CPU time, budget "
                     f"2^{_log2(ab['budget'])}, its time over ours): {cases};")
    lines.append(f"- one step at n = 2 costs {tab['us_per_step_n2']:.1f} us (tabular) and "
                 f"{inter['us_per_step_n2']:.1f} us (interference) on one thread against modelled floors of "
                 f"{tab['floor_us']:.1f} and {inter['floor_us']:.1f} us;")
    one = out.get("single_run")
    if one:
        r1, r2 = one["runs"]["threads=1"], one["runs"]["threads=2"]
        same = "the same table" if r1["table_equals_threads_1"] and r2["table_equals_threads_1"] else \
            "TABLES DIFFER"
        met = "met" if one["meets_target"] else "not met"
        lines.append(f"- one interference run at n = {one['n']} (bp {one['bp']}, budget "
                     f"2^{_log2(one['budget'])}, {one['evals']} evaluations): {r1['rollouts_per_s']:.3g} "
                     f"rollouts/s of wall time on 1 thread, {r2['rollouts_per_s']:.3g} on 2 "
                     f"(x{one['ratio_2_over_1_threads']:.2f}, {same}; "
                     f"target {one['target_rollouts_per_s']:.0e} on 2: {met}; 1-min load "
                     f"{one['load_before'][0]:.1f}).")
    else:
        lines[-1] = lines[-1][:-1] + "."
    return "\n".join(lines)


def readme_from(path: Path) -> str:
    """`readme_line` of the JSON at `path`, dated: its "date", else the file's commit date
    (studies.provenance.measured_on)."""
    from studies.provenance import measured_on

    rec = json.loads(Path(path).read_text())
    return readme_line(rec | {"date": measured_on(rec, Path(path))})


def update_readme(path: Path, line: str) -> None:
    """Replace the text between the two MARK lines of `path` with `line` (markers appended if absent)."""
    write_marked_block(path, MARK, MARK, line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="2^26")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--subset-budget", default="2^21", help="budget of the subset timed both ways")
    ap.add_argument("--ref", default="bbdf947", help="older commits (comma list) for the subset")
    ap.add_argument("--quick", action="store_true", help="CI-sized: budget 2^16, 2 seeds, n <= 64")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--out", help="also write the JSON object to this file")
    ap.add_argument("--readme-line", metavar="JSON", help="print the README line generated from JSON; no run")
    ap.add_argument("--update-readme", metavar="README", help="with --readme-line: write it into README")
    ap.add_argument("--machine", default="", help="words describing the machine and its load, for the README")
    ap.add_argument("--single-budget", default="2^27", help="budget of the single interference run (n = 256)")
    ap.add_argument("--no-single", action="store_true", help="skip the single-run measurement")
    ap.add_argument("--ab-into", metavar="JSON", help="only the interleaved run() A/B against the first "
                    "--ref (budget --subset-budget), added to JSON as its 'ab' entry; no sweep")
    args = ap.parse_args()
    if args.readme_line:
        line = readme_from(Path(args.readme_line))
        if args.update_readme:
            update_readme(Path(args.update_readme), line)
        print(line)
        return
    if args.ab_into:
        ab = ab_runs(args.ref.split(",")[0], _count(args.subset_budget))
        out = json.loads(Path(args.ab_into).read_text())
        out["ab"] = ab
        out["ab_command"] = "python benchmarks/sim_sweep.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        Path(args.ab_into).write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(ab, indent=1))
        return
    budget, seeds, sub_budget = _count(args.budget), args.seeds, _count(args.subset_budget)
    ns = [2**k for k in range(1, 10)]
    if args.quick:
        budget, seeds, sub_budget, ns = 2**16, 2, 2**14, [2**k for k in range(1, 7)]
    threads = args.threads

    t0 = time.perf_counter()  # compilation / cache loading of every kernel the sweep uses
    warm = [sandbox.SimConfig(model=p, n=2, bp=4, d=8, d_val=8, budget=64, n_evals=2) for p in PRESETS]
    sandbox.run_many(warm, threads=threads)
    for c in warm:
        sandbox.run(c)
    compile_s = time.perf_counter() - t0

    cfgs = sweep_configs(budget, seeds, ns)
    adapter = SimAdapter()
    steps = sum(adapter.sim_config(c).steps for c in cfgs)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with ResultStore(Path(tmp) / "sweep", study="n-vs-m") as store:
            summary = run_sweep(cfgs, store, jobs=threads, progress=False)
        sweep_s = time.perf_counter() - t0

    sub = [adapter.sim_config(c) for c in sweep_configs(sub_budget, 1, [2, 8, 64])]
    sub_steps = sum(c.steps for c in sub)
    t0 = time.perf_counter()
    singles = [sandbox.run(c, threads=1) for c in sub]  # the one-run-at-a-time path on one thread
    loop_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    many = sandbox.run_many(sub, threads=threads)
    many_s = time.perf_counter() - t0
    assert all(np.array_equal(a.pass1["val"], b.pass1["val"]) for a, b in zip(singles, many, strict=True))
    refs = {}
    for ref in [r for r in args.ref.split(",") if r]:
        old = old_sandbox(ref)
        if old is None:
            continue
        olds = [_old_config(old, c) for c in sub]
        for p in PRESETS:
            old.run(old.SimConfig(model=p, n=2, bp=4, d=8, d_val=8, budget=4096, n_evals=2))
        t0 = time.perf_counter()
        for c in olds:
            old.run(c)
        refs[ref] = {"loop_s": time.perf_counter() - t0}
    t0 = time.perf_counter()  # run_many again, right after the older simulators: same-load ratios
    sandbox.run_many(sub, threads=threads)
    many2_s = time.perf_counter() - t0
    for r in refs.values():
        r["run_many_s"] = many2_s
        r["ratio"] = r["loop_s"] / min(many_s, many2_s)
    first = next(iter(refs.values()), None)
    ref_s = first["loop_s"] if first else None

    single = None
    if not args.no_single:  # one interference run at n = 256 on 1 and 2 threads (sim_throughput --single)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sim_throughput import single_run

        single = single_run(_count(args.single_budget), reps=3)

    per_step = {}
    for p in PRESETS:
        c2 = next(c for c in sub if c.model == p and c.n == 2)
        r = next(r for c, r in zip(sub, singles, strict=True) if c is c2)
        per_step[p] = {"us_per_step_n2": r.info["seconds"] / c2.steps * 1e6, **measured_floor(c2)}

    out = {
        "sweep": {"runs": len(cfgs), "presets": list(PRESETS), "n": ns, "seeds": seeds, "bp": 32,
                  "budget": budget,
                  "grpo_steps": steps, "wall_s": sweep_s, "us_per_step_wall": sweep_s / steps * 1e6,
                  "threads": threads, "done": summary.done, "failed": len(summary.failed),
                  "meets_target": sweep_s <= TARGET_S, "target_s": TARGET_S},
        "compile_s": compile_s,
        "subset": {"runs": len(sub), "budget": sub_budget, "grpo_steps": sub_steps, "run_loop_s": loop_s,
                   "run_many_s": many_s, "ratio_vs_run_loop": loop_s / many_s,
                   "ref": args.ref or None, "ref_loop_s": ref_s,
                   "ratio_vs_ref": first["ratio"] if first else None, "refs": refs},
        "per_step": per_step,
        "single_run": single,
        "command": "python benchmarks/sim_sweep.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "machine": args.machine or None,
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    if args.json:
        print(json.dumps(out))
        return
    s, b = out["sweep"], out["subset"]
    print(f"sweep: {s['runs']} runs, {s['grpo_steps']:.3g} GRPO steps, {s['wall_s']:.1f} s wall on {threads} "
          f"threads "
          f"({s['us_per_step_wall']:.2f} us/step; target <= {TARGET_S:.0f} s), compile {compile_s:.1f} s")
    ref = "".join(f", {k} loop {v['loop_s']:.1f} s (x{v['ratio']:.2f})" for k, v in b["refs"].items())
    print(f"subset ({b['runs']} runs, {b['grpo_steps']:.3g} steps): run() loop {b['run_loop_s']:.1f} s, "
          "run_many "
          f"{b['run_many_s']:.1f} s (x{b['ratio_vs_run_loop']:.2f}){ref}")
    for p, v in per_step.items():
        print(f"{p:<13} n=2: {v['us_per_step_n2']:.2f} us/step on one thread; floor {v['floor_us']:.2f} us "
              f"({v['flops']} flops at {v['flop_rate'] / 1e9:.1f} GFLOP/s + {v['draws']} draws at "
              f"{v['ns_per_draw']:.1f} ns)")


if __name__ == "__main__":
    main()
