"""Size rules that keep the two training loops readable: the LLM run loop reads top to bottom in
at most 100 lines, the simulator's one train kernel in at most 150, each over named helpers."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest


def body_lines(func) -> int:
    """Lines of a function's definition, docstring included, decorators excluded."""
    node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    return node.end_lineno - node.lineno + 1


def test_the_llm_run_loop_fits_in_100_lines():
    pytest.importorskip("torch")
    from llm_backend import loop

    assert body_lines(loop.run) <= 100


def test_the_body_counter_counts_what_it_says():
    def f(x):
        """Doc."""
        y = x + 1
        return y

    assert body_lines(f) == 4


def test_the_simulator_has_one_train_kernel_of_at_most_150_lines():
    from sandbox import grpo
    from sandbox.kernels import train

    assert body_lines(train.train_kernel.py_func) <= 150
    kernels = [name for name in dir(grpo) if "train_kernel" in name]
    assert kernels == ["train_kernel"] and grpo.train_kernel is train.train_kernel




def test_file_utilities_come_from_studies_files():
    """Atomic writes, JSON conversion and output checks live in studies.files; nothing imports them from
    studies.store (which uses them, but is not their home)."""
    from pathlib import Path

    import studies.files

    utilities = {name for name in vars(studies.files) if not name.startswith("_")}
    root = Path(__file__).resolve().parents[1]
    found = set()
    for f in sorted(root.glob("**/*.py")):
        if {".cache", ".venv"} & set(f.parts):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "studies.store" and \
                    {a.name for a in node.names} & utilities - {"StudiesError"}:
                found.add(str(f.relative_to(root)))
    assert found == set()
