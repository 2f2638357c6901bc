"""Difficulty calibration: avg@16 per problem under the base model, then the paper's splits.

Splits (docs/DESIGN.md vocabulary, docs/PAPER.md "datasets"): easy avg in [0.3, 0.6], hard [0, 0.0625], veasy
[0.6, 0.9], xhard = no correct sample. The paper defines xhard by pass@128 = 0; we only draw `samples`
(default 16) per problem here, so ours is pass@16 = 0 (a superset of the paper's xhard), said in the CSV.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from llm_backend import tasks

SPLITS = {"easy": (0.3, 0.6), "hard": (0.0, 0.0625), "veasy": (0.6, 0.9), "xhard": (0.0, 0.0)}


def assign_splits(avg: np.ndarray) -> dict[str, np.ndarray]:
    """Indices of problems per split from their avg@samples (closed intervals; xhard = exactly 0)."""
    avg = np.asarray(avg)
    return {
        name: np.flatnonzero((avg >= lo - 1e-12) & (avg <= hi + 1e-12)) for name, (lo, hi) in SPLITS.items()
    }


def split_train_val(idx: np.ndarray, val_frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded held-out split of one bucket: at least one validation problem when the bucket has two."""
    idx = np.random.default_rng(seed).permutation(idx)
    n_val = int(round(len(idx) * val_frac))
    if len(idx) >= 2:
        n_val = min(max(n_val, 1), len(idx) - 1)
    return idx[n_val:], idx[:n_val]


def parse_digits(spec: str) -> int | tuple[int, ...]:
    """"2" -> 2 (every operand), "2x1" -> (2, 1) (per operand: "57 + 3"); ValueError otherwise."""
    parts = [int(x) for x in spec.split("x")]
    return parts[0] if len(parts) == 1 else tuple(parts)


def problem_suite(
    count: int,
    digits: list[int | tuple[int, ...]],
    terms: list[int],
    operations: list[str],
    seed: int = 0,
) -> list[tasks.Problem]:
    """Generated arithmetic over every (digits, terms, operation set) setting, `count` each, deduplicated,
    in a seeded random order. A per-operand digits tuple sets its own term count (terms then ignored).
    Operation names in tasks.COMPARISONS ("max", "min") give two-number comparisons instead (terms ignored).

    Answers are our own integers (tasks.generate_arithmetic); short, so a step stays cheap.
    """
    problems, seen = [], set()
    j = 0
    for ops in operations:
        for d in digits:
            for t in terms if isinstance(d, int) else [len(d)]:
                name = d if isinstance(d, int) else "x".join(map(str, d))
                if ops in tasks.COMPARISONS:
                    gen = tasks.generate_comparison(count, seed * 1000 + j, d, ops)
                else:
                    gen = tasks.generate_arithmetic(count, seed * 1000 + j, d, t, ops)
                for p in gen:
                    if p.question not in seen:  # 1-digit sums repeat; keep each question once
                        seen.add(p.question)
                        pid = f"arith-d{name}-t{t}-{ops}-{p.pid}"
                        problems.append(tasks.Problem(p.question, p.answer, pid))
                j += 1
                if not isinstance(d, int):
                    break
    # seeded shuffle: a partial (resumable) calibration samples every setting evenly
    return [problems[i] for i in np.random.default_rng(seed).permutation(len(problems))]


_OPERATION = re.compile(r"^arith-d[^-]+-t\d+-(.+?)-(?:arith|max|min)-")


def operation_of(pid: str) -> str:
    """The operation set of a suite problem, from its pid (problem_suite names it there)."""
    m = _OPERATION.match(pid)
    if m is None:
        raise ValueError(f"not a problem_suite pid: {pid!r}")
    return m.group(1)


def _reached(done: dict[str, int], problems, samples: int, until: dict[str, int]) -> bool:
    """Whether every split named in `until` holds at least its count of the suite's measured problems."""
    avg = np.array([done[p.question] / samples for p in problems if p.question in done])
    sizes = {k: len(v) for k, v in assign_splits(avg).items()}
    return all(sizes.get(k, 0) >= v for k, v in until.items())


def _read_progress(path: Path, samples: int) -> dict[str, int]:
    """question -> correct count of the rows already measured with `samples` samples (incremental file)."""
    done: dict[str, int] = {}
    if not path.exists():
        return done
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: measured again
                continue
            if row.get("samples") == samples:
                done[row["question"]] = int(row["correct"])
    return done


def calibrate(
    problems: list[tasks.Problem],
    engine,
    tokenizer,
    out_dir: str | Path,
    samples: int = 16,
    max_new_tokens: int = 32,
    temperature: float = 0.7,
    val_frac: float = 0.5,
    seed: int = 0,
    chunk: int = 32,
    progress: bool = False,
    measure: bool = True,
    measure_only: list[str] | None = None,
    until: dict[str, int] | None = None,
) -> dict[str, tuple[int, int]]:
    """Measure avg@samples per problem and write `<split>.{train,val}.jsonl` + calibration.csv into out_dir.

    Resumable: each chunk's counts are appended (and flushed) to `<out_dir>/progress.jsonl` as it finishes;
    a rerun skips problems already measured with the same `samples`, so a killed calibration loses at most
    one chunk. measure=False writes the splits of the problems measured so far (engine unused).
    measure_only: measure only the suite problems of these operation sets in this pass (the suite, its order
    and its splits stay the same; the others stay unmeasured). until: stop once every named split holds at
    least that many measured problems (train + val), checked after each chunk. Both only choose *which*
    problems get measured; a problem's measurement does not depend on them.
    Returns {split: (n_train, n_val)}.
    """
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "progress.jsonl"
    done = _read_progress(log, samples)
    if not measure:
        problems = [p for p in problems if p.question in done]
    todo = [i for i, p in enumerate(problems) if p.question not in done]
    if measure_only is not None:
        todo = [i for i in todo if operation_of(problems[i].pid) in measure_only]
    if until and _reached(done, problems, samples, until):
        todo = []
    it = range(0, len(todo), chunk)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc=f"calibrate ({len(done)} done)", unit="chunk")
    with open(log, "a") as f:
        for a in it:
            part = [problems[i] for i in todo[a : a + chunk]]
            prompts = [tasks.build_prompt(tokenizer, p.question) for p in part]
            ro = engine.generate(prompts, samples, max_new_tokens, temperature, 1.0, seed=seed + todo[a])
            r = np.array([tasks.reward(t, part[i // samples].answer) for i, t in enumerate(ro.texts)])
            for p, c in zip(part, r.reshape(len(part), samples).sum(1), strict=True):
                done[p.question] = int(c)
                row = {"question": p.question, "answer": p.answer, "pid": p.pid, "correct": int(c)}
                f.write(json.dumps({**row, "samples": samples}) + "\n")
            f.flush()
            os.fsync(f.fileno())
            if until and _reached(done, problems, samples, until):
                break
    problems = [p for p in problems if p.question in done]  # a partial pass: splits of what is measured
    avg = np.array([done[p.question] / samples for p in problems])
    pd.DataFrame(
        {
            "question": [p.question for p in problems],
            "answer": [p.answer for p in problems],
            "pid": [p.pid for p in problems],
            f"avg@{samples}": avg,
        }
    ).to_csv(out / "calibration.csv", index=False)
    counts = {}
    for name, idx in assign_splits(avg).items():
        tr, va = split_train_val(idx, val_frac, seed)
        tasks.save_jsonl([problems[i] for i in tr], out / f"{name}.train.jsonl")
        tasks.save_jsonl([problems[i] for i in va], out / f"{name}.val.jsonl")
        counts[name] = (len(tr), len(va))
    return counts
