"""CLI errors, evaluation schedule, calibration buckets: fast, no model needed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from isocompute.contract.schedule import eval_steps
from llm_backend.calibrate import assign_splits, split_train_val
from llm_backend.cli import llm
from llm_backend.model import ModelError, resolve_model
from llm_backend.problems import problem_order


def test_missing_model_names_the_prepare_command(tmp_path):
    with pytest.raises(ModelError, match="isocompute llm prepare"):
        resolve_model(None, tmp_path)
    res = CliRunner().invoke(llm, ["calibrate", "--cache-dir", str(tmp_path)])
    assert res.exit_code == 2
    assert "isocompute llm prepare" in res.output and len(res.output.strip().splitlines()) == 1


def test_model_path_must_be_an_hf_folder(tmp_path):
    with pytest.raises(ModelError, match="Hugging Face"):
        resolve_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert resolve_model(tmp_path) == tmp_path


def test_bad_calibrate_flags_exit_2(tmp_path):
    res = CliRunner().invoke(llm, ["calibrate", "--digits", "x", "--cache-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--digits" in res.output


def test_eval_steps_are_log_spaced_and_include_ends():
    assert eval_steps(3, 1) == [0, 3]
    assert eval_steps(8, 3) == [0, 1, 3, 8]
    assert eval_steps(100, 5) == [0, 1, 3, 10, 32, 100]
    assert eval_steps(0, 4) == [0]


def test_problem_order_is_a_permutation_per_epoch_and_seeded():
    class C:
        bp, seed = 3, 5

    d = 6
    first_epoch = problem_order(C, 1, d) + problem_order(C, 2, d)
    assert sorted(first_epoch) == list(range(d))
    assert problem_order(C, 3, d) + problem_order(C, 4, d) != first_epoch  # a fresh order next epoch
    assert problem_order(C, 2, d) == problem_order(C, 2, d)


def test_calibration_buckets_follow_the_paper_ranges():
    avg = np.array([0.0, 0.0625, 0.125, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0])
    s = assign_splits(avg)
    assert list(s["xhard"]) == [0]
    assert list(s["hard"]) == [0, 1]
    assert list(s["easy"]) == [3, 4, 5]
    assert list(s["veasy"]) == [5, 6, 7]
    tr, va = split_train_val(np.arange(10), 0.5, seed=0)
    assert len(tr) == 5 and len(va) == 5 and set(tr) | set(va) == set(range(10)) and not set(tr) & set(va)
    tr, va = split_train_val(np.arange(2), 0.1, seed=0)
    assert len(tr) == 1 and len(va) == 1


def test_llm_backend_never_imports_sandbox_or_studies():
    """docs/DESIGN.md: arrows point one way (studies -> llm_backend); checked on the source, import by
    import."""
    import ast
    from pathlib import Path

    import llm_backend

    for path in Path(llm_backend.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in ("sandbox", "studies", "paper_figs"), f"{path.name}: {name}"


def test_calibration_resumes_from_its_progress_file(tmp_path):
    """A killed calibration loses at most one chunk: a rerun measures only the problems not yet saved, and
    the splits come out the same as an uninterrupted run's."""
    from llm_backend import tasks
    from llm_backend.calibrate import calibrate, parse_digits, problem_suite
    from llm_backend.engines import Rollouts

    class FakeEngine:
        """Answers problem i correctly in (i % 17) of 16 samples; counts the prompts it saw."""

        def __init__(self, problems, fail_after=None):
            self.by_prompt = {f"<{p.question}>": (i, p.answer) for i, p in enumerate(problems)}
            self.calls, self.fail_after = 0, fail_after

        def generate(self, prompts, n, max_new_tokens, temperature, top_p, seed=0):
            if self.fail_after is not None and self.calls >= self.fail_after:
                raise KeyboardInterrupt  # "killed"
            self.calls += 1
            out = Rollouts([], [], [], [], n)
            for pr in prompts:
                i, ans = self.by_prompt[pr]
                out.texts += [ans if j < i % 17 else "no" for j in range(n)]
            return out

    class Tok:
        chat_template = None

    import llm_backend.calibrate as cal

    build = tasks.build_prompt
    cal.tasks.build_prompt = lambda tok, q: f"<{q}>"
    try:
        assert parse_digits("2x1") == (2, 1) and parse_digits("3") == 3
        probs = problem_suite(20, [1, (2, 1)], [2], ["+", "-"], seed=0)
        assert len({p.question for p in probs}) == len(probs) and any("x" in p.pid for p in probs)
        full = calibrate(probs, FakeEngine(probs), Tok(), tmp_path / "a", chunk=8)
        with pytest.raises(KeyboardInterrupt):
            calibrate(probs, FakeEngine(probs, fail_after=2), Tok(), tmp_path / "b", chunk=8)
        assert sum(1 for _ in open(tmp_path / "b" / "progress.jsonl")) == 16
        eng = FakeEngine(probs)
        resumed = calibrate(probs, eng, Tok(), tmp_path / "b", chunk=8)
        assert eng.calls == -(-(len(probs) - 16) // 8) and resumed == full
        for name in ("easy", "hard"):
            assert (tmp_path / "a" / f"{name}.train.jsonl").read_text() == (
                tmp_path / "b" / f"{name}.train.jsonl"
            ).read_text()
        # measure_only: only "-" problems are measured, each exactly as the full pass measured it
        assert {cal.operation_of(p.pid) for p in probs} == {"+", "-"}
        calibrate(probs, FakeEngine(probs), Tok(), tmp_path / "c", chunk=4, measure_only=["-"])
        rows = [json.loads(x) for x in open(tmp_path / "c" / "progress.jsonl")]
        full_rows = {r["question"]: r for r in map(json.loads, open(tmp_path / "a" / "progress.jsonl"))}
        assert rows and {cal.operation_of(r["pid"]) for r in rows} == {"-"}
        assert len(rows) == sum(cal.operation_of(p.pid) == "-" for p in probs)
        assert all(full_rows[r["question"]] == r for r in rows)
        # until: stops after the first chunk whose counts reach the target, and a rerun measures nothing
        eng = FakeEngine(probs)
        calibrate(probs, eng, Tok(), tmp_path / "d", chunk=4, until={"xhard": 1})
        n_rows = sum(1 for _ in open(tmp_path / "d" / "progress.jsonl"))
        zero = [i for i, p in enumerate(probs) if i % 17 == 0]  # FakeEngine: never correct
        assert n_rows == 4 * (zero[0] // 4 + 1) < len(probs) and eng.calls == zero[0] // 4 + 1
        eng = FakeEngine(probs)
        calibrate(probs, eng, Tok(), tmp_path / "d", chunk=4, until={"xhard": 1})
        assert eng.calls == 0
    finally:
        cal.tasks.build_prompt = build


def test_per_operand_digits():
    from llm_backend import tasks

    ps = tasks.generate_arithmetic(50, 0, (2, 1), operations="+-")
    for p in ps:
        a, op, b = p.question[len("What is ") : -1].split()
        assert 10 <= int(a) <= 99 and 0 <= int(b) <= 9
        assert int(p.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))


def test_comparison_tasks_have_parsed_answers():
    from llm_backend import tasks
    from llm_backend.calibrate import problem_suite

    for kind, pick in (("max", max), ("min", min)):
        for p in tasks.generate_comparison(30, 1, (2, 1), kind):
            a, b = (int(x) for x in p.question.rstrip("?").split(", ")[1].split(" or "))
            assert a != b and p.answer == str(pick(a, b)) and tasks.is_correct(f"It is {p.answer}.", p.answer)
    suite = problem_suite(10, [1, (2, 1)], [2], ["+", "max"], seed=0)
    assert any(p.pid.startswith("arith-d2x1-t2-max") for p in suite)
    with pytest.raises(ValueError, match="two operands"):
        tasks.generate_comparison(1, 0, (1, 1, 1))
