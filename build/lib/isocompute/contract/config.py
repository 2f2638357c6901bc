"""What the engines' config dataclasses (sandbox.config.SimConfig, llm_backend.config.LLMConfig) share:
the error they raise, the budget and lr arithmetic, and the checks of the fields they share by name.

Each engine keeps its own fields and defaults (a CPU-sized LLM run is not a simulated one) and checks what
only it has; what means the same on both is checked here, with the same one-line messages."""

from __future__ import annotations

from dataclasses import asdict, fields

from isocompute.contract.budget import RunShape
from isocompute.contract.lr import effective_lr
from isocompute.contract.options import ADV_STDS, LR_RULES, OBJECTIVES, SCALE_REWARDS


class ConfigError(ValueError):
    """An impossible or inconsistent configuration; the message is one line meant for the user."""


def check_choice(name: str, value: str, allowed: tuple[str, ...],
                 error: type[Exception] = ConfigError) -> None:
    """Raise `error` naming the allowed values when `value` is not one of them."""
    if value not in allowed:
        raise error(f"unknown {name} {value!r}; choose one of {', '.join(allowed)}")


class EngineConfig(RunShape):
    """Mixed into an engine's frozen config dataclass: batch, rollouts_per_step, steps (RunShape), the
    effective lr, and the dict form the result files store."""

    def effective_lr(self) -> float:
        """Learning rate after the batch-scaling rule (isocompute.contract.lr.effective_lr)."""
        return effective_lr(self.lr, self.lr_rule, self.batch, self.lr_ref_batch)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def check_options(c) -> None:
    """The option values both engines share (lr_rule, scale_rewards, adv_std, objective)."""
    check_choice("lr_rule", c.lr_rule, LR_RULES)
    check_choice("scale_rewards", c.scale_rewards, SCALE_REWARDS)
    check_choice("adv_std", c.adv_std, ADV_STDS)
    check_choice("objective", c.objective, OBJECTIVES)


def check_updates(c) -> None:
    """ppo_epochs and minibatches: at least one of each, at most bp minibatches (a minibatch holds whole
    groups), and exactly one update per batch under plain pg."""
    if c.ppo_epochs < 1 or c.minibatches < 1 or c.minibatches > c.bp:
        raise ConfigError(
            f"need ppo_epochs >= 1 and 1 <= minibatches <= bp, got {c.ppo_epochs}, {c.minibatches}"
        )
    if c.objective == "pg" and (c.ppo_epochs != 1 or c.minibatches != 1):
        raise ConfigError(
            f"ppo_epochs = {c.ppo_epochs} and minibatches = {c.minibatches} need objective ppo or cispo "
            "(plain pg makes exactly one update per batch)"
        )
