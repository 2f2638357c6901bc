"""A real TRL GRPOTrainer run on a tiny randomly initialised Llama (built here, nothing downloaded): the
source of the TRL tests and of the notebook's trainer_state.json files (`python tests/integrations/tiny_trl.py
OUT_DIR` rewrites docs/tutorial_data/trl_runs).

Task: prompts "a+b=" over digits; reward 1 when the completion starts with the last digit of a + b.
Character-level tokenizer (the `tokenizers` library), one decoder layer of width 16: a step takes ~0.1 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHARS = "0123456789+= "


def tiny_model_and_tokenizer(seed: int = 0):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(CHARS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    ptok = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return LlamaForCausalLM(cfg), ptok


def digit_reward(prompts, completions, **kwargs):
    out = []
    for p, c in zip(prompts, completions, strict=True):
        a, b = p.rstrip("=").split("+")
        out.append(float(c.strip()[:1] == str((int(a) + int(b)) % 10)))
    return out


def run(
    out_dir: Path,
    num_generations: int,
    prompts_per_step: int = 4,
    steps: int = 4,
    eval_steps: int = 2,
    seed: int = 0,
    lr: float = 3e-2,
    callback_path: Path | None = None,
    use_callback: bool = True,
):
    """Train; returns (trainer, callback or None). trainer_state.json is saved in out_dir."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from isocompute.integrations.trl import IsoComputeCallback

    model, tok = tiny_model_and_tokenizer(seed)
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    train = Dataset.from_dict({"prompt": prompts})
    val = Dataset.from_dict({"prompt": prompts[::25]})
    args = GRPOConfig(
        output_dir=str(out_dir),
        num_generations=num_generations,
        per_device_train_batch_size=prompts_per_step * num_generations,
        per_device_eval_batch_size=num_generations * 4,
        max_completion_length=2,
        max_steps=steps,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=eval_steps,
        save_strategy="no",
        report_to=[],
        learning_rate=lr,
        use_cpu=True,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        temperature=1.0,
    )
    cb = IsoComputeCallback(callback_path) if use_callback else None
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=digit_reward,
        args=args,
        train_dataset=train,
        eval_dataset=val,
        processing_class=tok,
        callbacks=[cb] if cb else None,
    )
    trainer.train()
    trainer.save_state()
    return trainer, cb


if __name__ == "__main__":  # the notebook's fixture: three n at bp = 4, 40 steps each
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/tutorial_data/trl_runs")
    for n in (2, 4, 8):
        run(root / f"n{n}", n, steps=40, eval_steps=4, callback_path=root / f"n{n}" / "isocompute.csv")
