"""Tasks with verifiable binary reward: generated arithmetic and JSONL files of {question, answer}.

Answers are extracted from model text and compared by parsing only (never eval/sympify on model output):
the input is capped in length, and the only regex is a linear-time pattern without nested
quantifiers, so a hostile completion costs O(len) at most.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

OPERATIONS = ("+", "-", "*")
MAX_TEXT = 4096
"""Characters of a completion we look at (its tail): bounds extraction time and memory."""
MAX_NUMBER_CHARS = 64
"""Longest numeric literal we parse; longer runs of digits are not answers."""

SYSTEM_PROMPT = "Answer with just the final number."
"""Measured on SmolLM2-135M-Instruct (T 0.7, 32 tokens): 1-digit sums spread avg@8 over [0, 0.875]."""

# One optional sign, digits with optional thousands commas, optional decimal part, optional /denominator.
# No nested quantifiers: linear time (no catastrophic backtracking).
_NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9]+)?")
_ANSWER_TAGS = ("answer:", "answer is", "\\boxed{", "=")


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str
    pid: str = ""


def generate_arithmetic(
    count: int,
    seed: int,
    digits: int | tuple[int, ...] = 2,
    terms: int = 2,
    operations: str | tuple[str, ...] = "+",
) -> list[Problem]:
    """`count` problems like "What is 23 + 58?" with `terms` operands of `digits` digits (seeded).

    Difficulty knobs: digits (one count for every operand, or a tuple of per-operand counts,
    which then sets `terms`: (2, 1) gives "57 + 3"), operations (subset of + - *), number of terms.
    Evaluation of the generated expression is done here on our own integers, * before + and -.
    """
    per = tuple(digits) if isinstance(digits, tuple | list) else (int(digits),) * terms
    terms = len(per)
    if count < 0 or min(per) < 1 or terms < 2:
        raise ValueError(f"need count >= 0, digits >= 1, terms >= 2; got {count}, {digits}, {terms}")
    ops = tuple(operations)
    bad = [o for o in ops if o not in OPERATIONS]
    if bad or not ops:
        raise ValueError(
            f"operations must be a non-empty subset of {''.join(OPERATIONS)}; got {operations!r}"
        )
    rng = np.random.default_rng(seed)
    lo = np.array([0 if d == 1 else 10 ** (d - 1) for d in per])
    hi = np.array([10**d for d in per])
    out = []
    for i in range(count):
        nums = [int(x) for x in rng.integers(lo, hi)]
        chosen = [ops[int(j)] for j in rng.integers(0, len(ops), size=terms - 1)]
        expr = str(nums[0])
        for o, x in zip(chosen, nums[1:], strict=True):
            expr += f" {o} {x}"
        out.append(Problem(f"What is {expr}?", str(_evaluate(nums, chosen)), f"arith-{seed}-{i}"))
    return out


COMPARISONS = {"max": "larger", "min": "smaller"}
"""Comparison tasks (problem_suite operation names): "Which number is larger, 37 or 52?" -> 52."""


def generate_comparison(count: int, seed: int, digits: int | tuple[int, ...] = 2, kind: str = "max"):
    """`count` problems "Which number is larger (smaller), a or b?" with a != b (seeded); answer max (min).

    Two choices: a guess is right half the time, so these land around the `easy` band for a weak model.
    """
    if kind not in COMPARISONS:
        raise ValueError(f"unknown comparison {kind!r}; choose one of {', '.join(COMPARISONS)}")
    per = tuple(digits) if isinstance(digits, tuple | list) else (int(digits),) * 2
    if len(per) != 2 or min(per) < 1 or count < 0:
        raise ValueError(f"comparisons take two operands of >= 1 digit, got digits {digits!r}")
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        a, b = (int(rng.integers(0 if d == 1 else 10 ** (d - 1), 10**d)) for d in per)
        if a == b:
            continue
        ans = max(a, b) if kind == "max" else min(a, b)
        q = f"Which number is {COMPARISONS[kind]}, {a} or {b}?"
        out.append(Problem(q, str(ans), f"{kind}-{seed}-{len(out)}"))
    return out


def _evaluate(nums: list[int], ops: list[str]) -> int:
    """Exact value of our own generated expression with * before + and - (no eval)."""
    total, term = 0, nums[0]
    sign = 1
    for o, x in zip(ops, nums[1:], strict=True):
        if o == "*":
            term *= x
        else:
            total += sign * term
            sign, term = (1 if o == "+" else -1), x
    return total + sign * term


def save_jsonl(problems: list[Problem], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        for p in problems:
            f.write(json.dumps({"question": p.question, "answer": p.answer, "pid": p.pid}) + "\n")
    tmp.replace(path)


def load_jsonl(path: str | Path) -> list[Problem]:
    """Read {question, answer[, pid]} lines; answers may be numbers or strings."""
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            if "question" not in row or "answer" not in row:
                raise ValueError(f"{path}:{i + 1}: each line needs 'question' and 'answer'")
            out.append(Problem(str(row["question"]), str(row["answer"]), str(row.get("pid", f"{i}"))))
    return out


def build_prompt(tokenizer, question: str) -> str:
    """The question through the model's chat template (generation prompt appended); a tokenizer with its
    own `build_prompt` (the tiny LMs' character tokenizer: the question as it is) decides itself."""
    if callable(getattr(tokenizer, "build_prompt", None)):
        return tokenizer.build_prompt(question)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{SYSTEM_PROMPT}\n{question}\n"


def parse_number(text: str) -> Fraction | None:
    """A numeric literal (int, decimal, a/b, thousands commas) as an exact Fraction; None if not one."""
    s = text.strip().replace(",", "")
    if not s or len(s) > MAX_NUMBER_CHARS:
        return None
    neg = s.startswith("-")
    if neg:
        s = s[1:]
    num, _, den = s.partition("/")
    ip, _, fp = num.partition(".")
    if not ip.isdigit() or (fp and not fp.isdigit()) or (den and not den.isdigit()) or ("/" in s and not den):
        return None
    if not ip.isascii() or not fp.isascii() or not den.isascii():
        return None  # str.isdigit accepts other scripts' digits; we want ASCII only
    value = Fraction(int(ip + fp), 10 ** len(fp))
    if den:
        d = int(den)
        if d == 0:
            return None
        value /= d
    return -value if neg else value


def extract_answer(text: str) -> Fraction | None:
    """The model's final answer: the first number after the last answer tag, else the last number.

    Looks only at the last MAX_TEXT characters, so time and memory are bounded whatever the model writes.
    """
    if not isinstance(text, str):
        return None
    tail = text[-MAX_TEXT:]
    low = tail.lower()
    best = -1
    for tag in _ANSWER_TAGS:
        pos = low.rfind(tag)
        if pos >= 0:
            best = max(best, pos + len(tag))
            break  # tags are in priority order: "answer:" wins over a later "="
    if best >= 0:
        m = _NUMBER.search(tail, best)
        if m:
            return parse_number(m.group(0))
    last = None
    for m in _NUMBER.finditer(tail):
        last = m
    return parse_number(last.group(0)) if last else None


def is_correct(completion: str, answer: str) -> bool:
    """Binary reward: the extracted number equals the reference exactly (as rationals)."""
    ref = parse_number(str(answer))
    got = extract_answer(completion)
    return ref is not None and got is not None and got == ref


@functools.lru_cache(maxsize=1 << 16)
def reward(completion: str, answer: str) -> float:
    """1.0 if is_correct else 0.0. Memoised: a pure function of two strings, and a tiny LM's completions
    repeat (an evaluation grades ~10^4 completions drawn from a few hundred distinct texts)."""
    return 1.0 if is_correct(completion, answer) else 0.0
