"""A character tokenizer for the tiny LMs: one token per digit, operator and '=', plus pad / bos / eos.

Why characters: the tiny task family (llm_backend/tiny/tasks.py) is written in 16 symbols, so a 16-token
vocabulary keeps the embedding and the head (the largest matmul of a small model) tiny, and every digit is
its own token (no BPE merges that hide carries). The same vocabulary is saved as a Hugging Face
`tokenizer.json` (a BPE model with no merges: every character is a token) so transformers, vLLM and TRL
open the folder; the runner uses this class directly (no per-call overhead of the fast tokenizer's
padding and tensor conversion).
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ("<pad>", "<bos>", "<eos>")
CHARS = "0123456789+-*= "
VOCAB = SPECIALS + tuple(CHARS)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
MARKER = "isocompute-char"
"""Value of `tokenizer_class_isocompute` in tokenizer_config.json: how load_tokenizer knows the folder."""


class CharTokenizer:
    """encode / decode over VOCAB; the attributes the runner and the engines read (pad / eos ids, vocab)."""

    def __init__(self, vocab: tuple[str, ...] = VOCAB):
        self.vocab = tuple(vocab)
        self.index = {s: i for i, s in enumerate(self.vocab)}
        self.pad_token_id, self.bos_token_id, self.eos_token_id = PAD_ID, BOS_ID, EOS_ID
        self.pad_token, self.eos_token = SPECIALS[PAD_ID], SPECIALS[EOS_ID]
        self.chat_template = None
        self.padding_side = "left"

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; a character outside the vocabulary is a ValueError (prompts are ours)."""
        try:
            ids = [self.index[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tiny vocabulary {CHARS!r}") from None
        return [BOS_ID, *ids] if add_special_tokens else ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text of `ids`; special tokens dropped (skip_special_tokens) or spelled out."""
        out = []
        for i in ids:
            i = int(i)
            if i < len(SPECIALS):
                if not skip_special_tokens:
                    out.append(self.vocab[i])
                continue
            out.append(self.vocab[i])
        return "".join(out)

    def build_prompt(self, question: str) -> str:
        """The prompt of a tiny-task question is the question itself ("23+58="): no template."""
        return question

    def save_pretrained(self, folder: str | Path) -> None:
        """tokenizer.json (BPE without merges: one token per character) + tokenizer_config.json."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = {s: i for i, s in enumerate(self.vocab)}
        tok = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
                for i, s in enumerate(SPECIALS)
            ],
            "normalizer": None,
            "pre_tokenizer": None,
            "post_processor": None,
            "decoder": {"type": "Fuse"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": []},
        }
        (folder / "tokenizer.json").write_text(json.dumps(tok, indent=1))
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "tokenizer_class_isocompute": MARKER,
            "pad_token": SPECIALS[PAD_ID],
            "bos_token": SPECIALS[BOS_ID],
            "eos_token": SPECIALS[EOS_ID],
            "add_bos_token": False,
            "model_max_length": 64,
            "padding_side": "left",
        }
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))
        (folder / "special_tokens_map.json").write_text(json.dumps(
            {"pad_token": SPECIALS[PAD_ID], "bos_token": SPECIALS[BOS_ID], "eos_token": SPECIALS[EOS_ID]},
            indent=1))


def is_char_folder(folder: str | Path) -> bool:
    """Whether `folder` holds a tokenizer saved by CharTokenizer.save_pretrained."""
    path = Path(folder) / "tokenizer_config.json"
    if not path.exists():
        return False
    try:
        return json.loads(path.read_text()).get("tokenizer_class_isocompute") == MARKER
    except (OSError, json.JSONDecodeError):
        return False


def load(folder: str | Path) -> CharTokenizer:
    """The CharTokenizer of a saved folder, its vocabulary read from tokenizer.json."""
    tok = json.loads((Path(folder) / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    return CharTokenizer(tuple(sorted(vocab, key=vocab.get)))
