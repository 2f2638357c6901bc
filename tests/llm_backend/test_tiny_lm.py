"""The tiny LMs: tokenizer, module vs transformers, shipped weights, kv sampler, runs, CLI.

Fast by construction: a 0.2M-parameter model, budgets of a few hundred rollouts.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from llm_backend import packed, tasks  # noqa: E402
from llm_backend.batch import make_padded_batch, token_logprobs  # noqa: E402
from llm_backend.config import ConfigError, LLMConfig, config_for  # noqa: E402
from llm_backend.model import PACKAGED_MODELS, load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.tiny import tasks as tiny_tasks  # noqa: E402
from llm_backend.tiny.model import SHIPPED, SIZES, init_model, load_folder, save_folder  # noqa: E402
from llm_backend.tiny.sampler import KVEngine, sample_tokens  # noqa: E402
from llm_backend.tiny.tokenizer import CHARS, CharTokenizer  # noqa: E402

LOGP_ATOL = 1e-4
"""Sampler vs trainer log-probs: the same float32 weights and maths, but the sampler attends over a KV cache
one new token at a time (left-padded prompts, fused q/k/v matmuls) and the trainer over whole packed or
padded rows, so sums run in other orders: differences of ~1e-6 per logit, measured <= 2e-5 on log-probs
of a model with sharpened (x20) weights; 1e-4 is a few times that and far below the ~1e-2 effects TIS
corrects."""


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer()


@pytest.fixture(scope="module")
def sharp(tok):
    """A random tiny model with large weights (peaked, varied distributions: a strict log-prob test)."""
    m = init_model(SIZES["tiny"], 3)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                p.mul_(20)
    return m


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tok):
    folder = tmp_path_factory.mktemp("tiny") / "m"
    return save_folder(init_model(SIZES["tiny"], 0), tok, folder)


def test_tokenizer_round_trip_and_hf_agrees(tok, saved):
    text = CHARS + "".join(p.question + p.answer for p in tiny_tasks.suite(2, 0))
    ids = tok.encode(text)
    assert tok.decode(ids) == text and len(ids) == len(text)
    assert tok.decode([*ids, tok.eos_token_id, tok.pad_token_id]) == text  # specials skipped
    with pytest.raises(ValueError, match="vocabulary"):
        tok.encode("What is 2 + 2?")
    loaded = load_tokenizer(saved)
    assert loaded.vocab == tok.vocab and tasks.build_prompt(loaded, "12+3=") == "12+3="
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(saved)
    assert hf(text, add_special_tokens=False)["input_ids"] == ids
    assert hf.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    assert hf.eos_token_id == tok.eos_token_id and hf.pad_token_id == tok.pad_token_id


def test_module_matches_transformers_llama(saved, sharp, tok, tmp_path):
    from transformers import LlamaForCausalLM

    folder = save_folder(sharp, tok, tmp_path / "sharp")
    hf = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    own = load_folder(folder)
    assert sorted(own.state_dict()) == sorted(hf.state_dict())
    ids = torch.randint(3, len(tok), (3, 11), generator=torch.Generator().manual_seed(0))
    att = torch.ones_like(ids)
    att[1, 7:] = 0  # right padding, as the padded training layout
    with torch.no_grad():
        a, b = own(ids, attention_mask=att).logits, hf(input_ids=ids, attention_mask=att).logits
    # same maths in float32; different kernels (mask construction, SDPA path) may round differently
    assert torch.allclose(a[att.bool()], b[att.bool()], atol=1e-4, rtol=1e-5)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_named_sizes_have_the_documented_parameter_counts():
    counts = {k: init_model(c, 0).num_parameters() for k, c in SIZES.items()}
    assert 150_000 < counts["tiny"] < 300_000 and 800_000 < counts["small"] < 1_300_000


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_weights_match_their_hash(name):
    folder = resolve_model(name)
    assert folder == PACKAGED_MODELS / name
    blob = (folder / "model.safetensors").read_bytes()
    assert len(blob) <= 2 * 2**20
    assert hashlib.sha256(blob).hexdigest() == SHIPPED[name]
    assert load_model(folder).num_parameters() == init_model(SIZES[name], 0).num_parameters()


def test_sampler_logprobs_equal_the_trainers(sharp, tok):
    eng = KVEngine(sharp, tok)
    prompts = ["1+2=", "345*12=", "9-7=", "1234+5678="]  # unequal lengths: left padding in the sampler
    ro = eng.generate(prompts, 3, 10, 1.0, 1.0, seed=1)
    assert len(set(map(len, ro.token_ids))) > 1  # some stopped at EOS
    adv = np.zeros(len(ro.token_ids))
    pb = packed.make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, 3, 0)
    T = pb.engine_logp.shape[1]
    with torch.no_grad():
        for mb in pb.chunks():
            lp, _ = packed.micro_logprobs(sharp, mb, T, 1.0)
            diff = ((lp - pb.engine_logp[mb.seqs]) * pb.comp_mask[mb.seqs]).abs().max()
            assert float(diff) < LOGP_ATOL
        b = make_padded_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, 0)
        lp, _ = token_logprobs(sharp, b.input_ids, b.attention_mask, 1.0)
    assert float(((lp - b.engine_logp) * b.comp_mask).abs().max()) < LOGP_ATOL
    assert float(b.engine_logp.abs().max()) > 0.5  # not a vacuous comparison of near-zero log-probs


def test_sampler_is_seeded_and_draws_from_the_softmax(sharp, tok):
    eng = KVEngine(sharp, tok)
    a = eng.generate(["12+3="], 8, 6, 1.0, 1.0, seed=5)
    b = eng.generate(["12+3="], 8, 6, 1.0, 1.0, seed=5)
    c = eng.generate(["12+3="], 8, 6, 1.0, 1.0, seed=6)
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs and a.token_ids != c.token_ids
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(40_000, 1)
    gen = torch.Generator().manual_seed(0)
    draw, lp = sample_tokens(logits, 0.5, 1.0, gen)
    p = torch.softmax(logits[0] / 0.5, -1)
    freq = torch.bincount(draw, minlength=4).float() / len(draw)
    assert torch.allclose(freq, p, atol=0.01)  # 4 binomial SEs at 40k draws are < 0.01
    assert torch.allclose(lp, p.log()[draw])
    nucleus, lp = sample_tokens(logits, 1.0, 0.7, gen)  # top-p: the two largest hold 0.64 + 0.24 >= 0.7
    assert set(nucleus.tolist()) == {0, 1}
    kept = torch.softmax(logits[0, :2], -1)
    assert torch.allclose(lp, kept.log()[nucleus])


def test_tiny_defaults_and_engine_checks():
    c = config_for("tiny")
    assert (c.engine, c.temperature, c.engine_dtype) == ("kv", 1.0, "float32")
    assert config_for("tiny", lr=1e-3).lr == 1e-3
    with pytest.raises(ConfigError, match="tiny"):
        LLMConfig(engine="kv")
    with pytest.raises(ConfigError, match="kv"):
        LLMConfig(model="tiny", engine="hf")
    # vLLM loads the tiny folder (checked by hand: `isocompute run --backend llm --lm tiny --option
    # engine=vllm`); its context must not exceed the model's positions or vLLM refuses the config
    from llm_backend.tiny.model import SIZES

    v = config_for("tiny", engine="vllm")
    assert v.engine == "vllm" and v.max_model_len == SIZES["tiny"].max_position_embeddings


def test_the_model_family_is_decided_once_per_config(saved, tmp_path):
    """family_of: a shipped name, a folder saved by the tiny module (whatever its name) or anything else (an
    HF LM); LLMConfig.family is that answer, computed once and kept out of the config's fields."""
    from llm_backend.family import family_of, folder_family

    tiny, folder, hf = family_of("tiny"), family_of(str(saved)), family_of(None)
    assert (tiny.is_tiny, tiny.shipped, tiny.folder, tiny.splits_sub, tiny.own_splits) == (
        True, "tiny", None, "tiny", None)
    assert (folder.is_tiny, folder.shipped, folder.splits_sub, folder.own_splits) == (
        True, None, "tiny", saved / "splits")
    assert (hf.is_tiny, hf.engine, hf.splits_sub, hf.own_splits) == (False, "vllm", "", None)
    assert not family_of(tmp_path).is_tiny and family_of("smollm2") == hf
    assert folder_family(saved) == folder and folder_family(PACKAGED_MODELS / "tiny").is_tiny
    assert (tiny.engine_error("kv"), tiny.engine_error("vllm"), hf.engine_error("hf")) == (None, None, None)
    assert "tiny" in hf.engine_error("kv") and "kv" in tiny.engine_error("hf")
    c = config_for(str(saved))
    assert c.family == folder and c.family is c.family and c.engine == "kv"
    assert "family" not in c.to_dict() and c == config_for(str(saved))


@pytest.fixture(scope="module")
def small_run_cfg():
    return config_for("tiny", dataset="easy", n=4, bp=4, budget=64, d=16, d_val=8, n_evals=1,
                      checkpoint_every=0)


def test_a_run_is_deterministic_in_process_and_learns_shape(small_run_cfg):
    from llm_backend.loop import run

    a, b = run(small_run_cfg), run(small_run_cfg)
    assert a.status == "done" and len(a.steps) == 4
    for col in ("val_mean", "train_mean", "batch_reward", "grad_norm", "tokens"):
        np.testing.assert_array_equal(np.asarray(a.table[col], float), np.asarray(b.table[col], float))
    # the engine's log-probs are the trainer's: the logged mismatch is rounding only
    assert max(s["logp_mismatch"] for s in a.steps) < LOGP_ATOL
    assert a.table["model"][0] == "tiny"


def test_bad_lm_names_exit_2_with_one_line(tmp_path):
    from isocompute.cli import main

    res = CliRunner().invoke(main, ["run", "--backend", "llm", "--lm", "tinyy", "--n", "4", "--bp", "4",
                                    "--budget", "64",
                                    "--out", str(tmp_path / "t.csv")])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "tinyy" in res.output and "tiny" in res.output
    assert not (tmp_path / "t.csv").exists()
    from llm_backend.cli import llm

    res = CliRunner().invoke(llm, ["pretrain", "--lm", "huge", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_run_through_the_cli(tmp_path):
    from isocompute.cli import main

    out = tmp_path / "t.csv"
    res = CliRunner().invoke(main, ["run", "--backend", "llm", "--lm", "tiny", "--n", "4", "--bp", "4",
                                    "--budget", "64", "--d-val", "8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    import pandas as pd

    t = pd.read_csv(out)
    assert list(t["compute"])[-1] == 64 and (t["model"] == "tiny").all()


@pytest.mark.slow  # ~10 s on an idle 2-core machine (120 optimiser steps)
def test_pretrain_command_learns(tmp_path):
    """A much shorter pretraining than the shipped one (120 steps of 64, 8% of its examples): the command
    works and the model learns (held-out answer loss far below a fresh model's, greedy accuracy on 1-digit
    sums above it), not the same bits."""
    from llm_backend.cli import llm

    out = tmp_path / "m"
    res = CliRunner().invoke(llm, ["pretrain", "--lm", "tiny", "--steps", "120", "--batch", "64",
                                   "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.output.strip().splitlines()[-1])
    assert facts["steps"] == 120 and facts["final_loss_ema"] < 2.0  # ln 18 = 2.89 at random
    probs = tiny_tasks.generate(64, 0, "add", 1, 1)

    def greedy_acc(model):
        ro = KVEngine(model, CharTokenizer()).generate([p.question for p in probs], 1, 4, 0.0, seed=0)
        return np.mean([tasks.reward(t, p.answer) for t, p in zip(ro.texts, probs, strict=True)])

    from llm_backend.tiny.pretrain import batch_tensors

    ids, tgt = batch_tensors(np.random.default_rng(99), CharTokenizer(), 256, tiny_tasks.PRETRAIN_CELLS)

    def held_out_loss(model):
        with torch.no_grad():
            logits = model(ids).logits
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)))

    trained, fresh = load_model(out), init_model(SIZES["tiny"], 0)
    assert held_out_loss(trained) < held_out_loss(fresh) - 0.8  # fresh: ~ln 18 = 2.89
    assert greedy_acc(trained) >= greedy_acc(fresh) + 0.03


def test_task_family_answers_and_pools():
    probs = tiny_tasks.suite(50, 0, tiny_tasks.POOL_CELLS)
    assert len({p.question for p in probs}) == len(probs)  # distinct across cells
    for p in probs[:200]:
        a, op, b = next((p.question[:i], p.question[i], p.question[i + 1:-1])
                        for i in range(1, len(p.question)) if p.question[i] in "+-*")
        want = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert p.answer == str(want) and tasks.reward(p.answer, p.answer) == 1.0
        assert tiny_tasks.cell_of(p.pid) in {tiny_tasks.cell_name(*c) for c in tiny_tasks.POOL_CELLS}
    assert tiny_tasks.parse_cell("mul2x1") == ("mul", 2, 1)
    with pytest.raises(ValueError):
        tiny_tasks.parse_cell("div2x1")
    assert max(len(p.answer) for p in tiny_tasks.suite(20, 0)) + 1 <= tiny_tasks.MAX_NEW_TOKENS


def test_calibrate_command_writes_tiny_splits(tmp_path):
    from llm_backend.cli import llm

    res = CliRunner().invoke(llm, ["calibrate", "--lm", "tiny", "--count", "2", "--samples", "4",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in open(tmp_path / "progress.jsonl")]
    pool = tiny_tasks.suite(2, 0, tiny_tasks.POOL_CELLS, tiny_tasks.POOL_SHARES)
    assert len(rows) == len(pool) == 2 * len(tiny_tasks.POOL_CELLS) - 1  # the 2 x 2 products: a quarter, >= 1
    assert all(0 <= r["correct"] <= 4 for r in rows)
    cells = {tiny_tasks.cell_name(*c) for c in tiny_tasks.POOL_CELLS}
    assert {tiny_tasks.cell_of(r["pid"]) for r in rows} == cells
    for split in ("easy", "hard", "veasy", "xhard"):
        assert (tmp_path / f"{split}.train.jsonl").exists()


def test_train_sample_is_as_large_as_the_validation_set():
    from llm_backend.problems import load_problems, train_eval_sample

    every = config_for("tiny", dataset="easy", d_val=0)
    train, val = load_problems(every)
    assert len(val) == 317 and len(train) == 2219
    sample = train_eval_sample(train, every, len(val))
    assert len(sample) == len(val) and len({p.question for p in sample}) == len(val)
    assert train_eval_sample(train, every, len(val)) == sample  # fixed: the same for every run of the split
    assert len(train_eval_sample(train, config_for("tiny", dataset="easy", d_val=16), 16)) == 16
    assert train_eval_sample(train, config_for("tiny", dataset="easy", train_eval=False), len(val)) == []
