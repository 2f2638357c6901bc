"""What a rollout engine returns (llm_backend/engines.py, llm_backend/tiny/sampler.py): a module of its own,
so the engines that produce it and the registry that builds them (engines.make_engine) import it without
importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Rollouts:
    """Outputs of one generate call; lists of length len(prompts) * n, prompt-major."""

    prompt_ids: list[list[int]]
    token_ids: list[list[int]]
    logprobs: list[list[float]]
    texts: list[str]
    n: int
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    sizes: list[int] | None = None
    """Rollouts per prompt when they differ (generate_groups); None: every prompt has n."""

    @property
    def num_tokens(self) -> int:
        return sum(len(t) for t in self.token_ids)

    @property
    def group_sizes(self) -> list[int]:
        """Rollouts of each prompt, in order (n each unless `sizes` says otherwise)."""
        if self.sizes is not None:
            return list(self.sizes)
        return [self.n] * (len(self.token_ids) // self.n if self.n else 0)
