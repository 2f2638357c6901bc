"""Tasks: generated arithmetic, JSONL, and answer parsing that never evaluates model text."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_backend import tasks


def test_generator_is_seeded_and_answers_are_right():
    a = tasks.generate_arithmetic(50, 7, digits=2, terms=2, operations="+-*")
    assert a == tasks.generate_arithmetic(50, 7, digits=2, terms=2, operations="+-*")
    assert a != tasks.generate_arithmetic(50, 8, digits=2, terms=2, operations="+-*")
    ops = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}
    for p in a:
        x, op, y = p.question.removeprefix("What is ").removesuffix("?").split()
        assert 10 <= int(x) < 100 and 10 <= int(y) < 100
        assert int(p.answer) == ops[op](int(x), int(y))


def test_precedence_of_generated_expressions():
    assert tasks._evaluate([2, 3, 4], ["+", "*"]) == 14
    assert tasks._evaluate([2, 3, 4, 5], ["*", "-", "*"]) == -14
    assert tasks._evaluate([9, 3, 4], ["-", "-"]) == 2
    three = tasks.generate_arithmetic(20, 0, digits=1, terms=4, operations="+")
    for p in three:
        nums = [int(t) for t in p.question.removeprefix("What is ").removesuffix("?").split(" + ")]
        assert int(p.answer) == sum(nums)


def test_bad_knobs_raise():
    with pytest.raises(ValueError, match="operations"):
        tasks.generate_arithmetic(3, 0, operations="/")
    with pytest.raises(ValueError, match="terms"):
        tasks.generate_arithmetic(3, 0, terms=1)


def test_jsonl_round_trip(tmp_path):
    probs = tasks.generate_arithmetic(5, 1)
    tasks.save_jsonl(probs, tmp_path / "x.jsonl")
    assert tasks.load_jsonl(tmp_path / "x.jsonl") == probs
    (tmp_path / "bad.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(ValueError, match="answer"):
        tasks.load_jsonl(tmp_path / "bad.jsonl")


@pytest.mark.parametrize(
    "text, want",
    [
        ("8 + 6 = 14.", 14),
        ("To add 5 and 2 we get 7.", 7),
        ("Answer: -12", -12),
        ("The answer is 1,234.", 1234),
        ("3 + 4 = 7 and 7 + 1 = 8", 8),
        ("Answer: 7. Double check: 3 + 4 = 7", 7),
        ("\\boxed{42}", 42),
        ("half is 1/2", Fraction(1, 2)),
        ("about 2.50", Fraction(5, 2)),
        ("no digits here", None),
        ("__import__('os').system('echo hi')", None),
    ],
)
def test_extract_answer_examples(text, want):
    assert tasks.extract_answer(text) == (None if want is None else Fraction(want))


def test_is_correct_compares_values_not_strings():
    assert tasks.is_correct("so 3 + 4 = 7.0", "7")
    assert tasks.is_correct("Answer: -4", "-4")
    assert not tasks.is_correct("Answer: 4", "-4")
    assert not tasks.is_correct("1/0", "0")
    assert not tasks.is_correct("", "3")


@given(st.text(max_size=3000))
@settings(max_examples=300, deadline=None)
def test_extraction_never_raises_on_arbitrary_text(text):
    got = tasks.extract_answer(text)
    assert got is None or isinstance(got, Fraction)
    assert isinstance(tasks.reward(text, "5"), float)


@given(st.integers(-(10**12), 10**12), st.text(alphabet="abc xyz.,:!?\n", max_size=200))
@settings(max_examples=300, deadline=None)
def test_answer_after_tag_is_found_whatever_precedes_it(value, junk):
    assert tasks.is_correct(f"{junk} Answer: {value}", str(value))


@given(
    st.sampled_from(
        [
            "9" * 50000,
            "1," * 40000,
            "-" * 60000 + "1",
            "1.1" * 20000,
            "=" * 50000,
            "Answer:" * 9000,
            "1/" * 30000,
            "\\boxed{" * 10000,
            "٣" * 50000,
        ]
    )
)
@settings(max_examples=9, deadline=None)
def test_adversarial_inputs_are_bounded_in_time(text):
    t0 = time.perf_counter()
    for _ in range(20):
        got = tasks.extract_answer(text)
    assert (time.perf_counter() - t0) / 20 < 0.05  # the tail cap keeps each call to milliseconds
    assert got is None or abs(got.numerator) < 10**tasks.MAX_NUMBER_CHARS


@given(st.fractions(min_value=-(10**6), max_value=10**6, max_denominator=1000))
@settings(max_examples=200, deadline=None)
def test_parse_number_round_trips_fractions(q):
    s = f"{q.numerator}/{q.denominator}" if q.denominator != 1 else str(q.numerator)
    assert tasks.parse_number(s) == q
