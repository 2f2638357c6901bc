"""The tiny LMs' task family: "a+b=", "a-b=", "a*b=" with 1-4 digit operands, answers parsed, never evaluated.

Why this family: its difficulty is a dial with many settings (operation x digits of each operand: a 1-digit
sum is learned in seconds, a 4 x 4 digit product not in minutes), so a model stopped early has a base
pass@1 spread over (0, 1) across problems, as a real base model has. Prompts are the question
itself and answers are short (at most 9 characters), so a rollout is at most 10 tokens.

The reference answers are our own integers; model output goes through tasks.reward (parsing only).
"""

from __future__ import annotations

import numpy as np

from llm_backend.tasks import Problem

OPS = {"add": "+", "sub": "-", "mul": "*"}
MAX_DIGITS = 4
CELLS = tuple((op, a, b) for op in OPS for a in range(1, MAX_DIGITS + 1) for b in range(1, MAX_DIGITS + 1))
"""Every (operation, digits of a, digits of b) setting: 3 x 4 x 4 = 48 cells."""
PRETRAIN_CELLS = tuple(
    (op, a, b) for op, a, b in CELLS if (op != "mul" and max(a, b) <= 2) or (op == "mul" and a + b <= 3)
)
"""The cells pretraining draws from: sums and differences up to 2 x 2 digits, products up to 2 x 1 (11
cells). A 0.2M model needs ~10k examples to learn even the 100 one-digit sums, so minutes of pretraining
only go this far; the calibration pool also holds 3-digit cells the model never saw (most become `hard`
and `xhard`: generalisation, or its absence, beyond the pretraining data)."""
POOL_CELLS = (*PRETRAIN_CELLS, ("mul", 2, 2))
"""The calibration pool's cells (`isocompute llm calibrate --lm tiny`): the pretraining cells and one the
model never saw (2 x 2 products), 12 cells."""
POOL_SHARES = {("mul", 2, 2): 0.25}
"""Per-cell share of `--count` in the pool (others: 1). The unseen 2 x 2 products are all pass@1 ~ 0 and are
there for xhard: a quarter of the count keeps thousands of xhard problems without tipping the pool's
pass@1 histogram toward 0 (docs/tiny_lm/base_pass1.md)."""
MAX_ANSWER = 2 * MAX_DIGITS + 1
"""Characters of the longest answer (a 4 x 4 digit product has 8; a difference may carry a sign)."""
MAX_NEW_TOKENS = MAX_ANSWER + 1
"""The answer and EOS."""


def cell_name(op: str, a: int, b: int) -> str:
    return f"{op}{a}x{b}"


def parse_cell(name: str) -> tuple[str, int, int]:
    """"add2x1" -> ("add", 2, 1); ValueError for anything else."""
    op, digits = name[:3], name[3:]
    a, _, b = digits.partition("x")
    if op not in OPS or not a.isdigit() or not b.isdigit() or not (1 <= int(a) <= 9 and 1 <= int(b) <= 9):
        raise ValueError(f"not a tiny task cell: {name!r} (e.g. add2x1, sub3x3, mul1x4)")
    return op, int(a), int(b)


def _draw(rng: np.random.Generator, digits: int, size: int) -> np.ndarray:
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.integers(lo, 10**digits, size=size)


def _value(op: str, a: int, b: int) -> int:
    return a + b if op == "add" else a - b if op == "sub" else a * b


def question(op: str, a: int, b: int) -> str:
    return f"{a}{OPS[op]}{b}="


def generate(count: int, seed: int, op: str, a_digits: int, b_digits: int) -> list[Problem]:
    """`count` problems of one cell (seeded, with repeats where the cell is small: 1x1 has 100)."""
    if op not in OPS or min(a_digits, b_digits) < 1 or count < 0:
        raise ValueError(f"need op in {', '.join(OPS)}, digits >= 1, count >= 0; got {op}, "
                         f"{a_digits}, {b_digits}, {count}")
    rng = np.random.default_rng([int(seed), a_digits, b_digits, list(OPS).index(op)])
    xs, ys = _draw(rng, a_digits, count), _draw(rng, b_digits, count)
    name = cell_name(op, a_digits, b_digits)
    return [
        Problem(question(op, int(x), int(y)), str(_value(op, int(x), int(y))), f"tiny-{name}-{seed}-{i}")
        for i, (x, y) in enumerate(zip(xs, ys, strict=True))
    ]


def suite(count: int, seed: int = 0, cells=CELLS, shares: dict | None = None) -> list[Problem]:
    """Up to `count` distinct problems per cell (times `shares[cell]` where given), deduplicated across cells,
    in a seeded random order (the calibration pool; a partial calibration then covers every cell evenly)."""
    out, seen = [], set()
    for op, a, b in cells:
        kept, cap = 0, max(1, round(count * (shares or {}).get((op, a, b), 1))) if count > 0 else 0
        for p in generate(4 * cap, seed, op, a, b):
            if p.question not in seen and kept < cap:
                seen.add(p.question)
                out.append(p)
                kept += 1
    return [out[i] for i in np.random.default_rng(seed).permutation(len(out))]


def cell_of(pid: str) -> str:
    """The cell name of a generated problem's pid ("tiny-add2x1-0-17" -> "add2x1")."""
    parts = pid.split("-")
    if len(parts) < 2 or parts[0] != "tiny":
        raise ValueError(f"not a tiny task pid: {pid!r}")
    return parts[1]
