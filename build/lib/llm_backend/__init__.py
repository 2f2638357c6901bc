"""llm_backend: GRPO on a real causal LM (torch + transformers; rollouts through vLLM or transformers)."""

from llm_backend.logs import quiet_logging

__all__ = ["quiet_logging"]
