"""The argument layout shared by the simulator's kernels and sandbox/runner.py: codes of the options, indices
into the float (hp) and int (ip) hyperparameter vectors, the int state st and the accumulators acc, and the
status codes a kernel returns."""

from __future__ import annotations

from sandbox.allocators import N_PARAMS

SGD, ADAM, ADAMW = 0, 1, 2
SCALE_GROUP, SCALE_BATCH, SCALE_NONE = 0, 1, 2
PG, PPO, CISPO = 0, 1, 2

# float hyperparameters hp[...]
HP_LR, HP_B1, HP_B2, HP_EPS, HP_WD, HP_CLIP, HP_KL, HP_ENT, HP_ADV_EPS, HP_BUDGET = range(10)
HP_A0 = 10  # hp[HP_A0: HP_A0 + allocators.N_PARAMS]: the allocator's parameters (sandbox/allocators.py)
HP_TINY = HP_A0 + N_PARAMS  # hp[HP_TINY]: the flush threshold (optimizer.TINY; 0: the unflushed arithmetic)
# int hyperparameters ip[...]
(IP_N, IP_BP, IP_NEST, IP_OPT, IP_SCALE, IP_OBJ, IP_EPOCHS, IP_MB, IP_ZVF, IP_SAMPLE_STD, IP_SAMPLER,
 IP_LENS, IP_ALLOC) = range(13)
SAMPLER_AUTO, SAMPLER_CHAIN = 0, 1
SMALL_N = 16
"""Group sizes n <= SMALL_N draw rollouts as n categorical draws (`rollouts.categorical_counts`) under sampler
"auto"; larger n (or sampler "chain") as one multinomial, a chain of K-1 binomials (O(1) in n)."""
# int state st[...]
ST_POS, ST_T, ST_STEP = range(3)
# float accumulators acc[...] (since the last evaluation unless "total"; AC_BREW: the last step's value)
AC_TOKENS, AC_ZV, AC_GROUPS, AC_GNORM, AC_UPDATES, AC_TOK, AC_ROLL, AC_BREW = range(8)
N_ACC = 8

# status codes returned by the kernels
OK, BAD_LOGITS, BAD_GRAD = 0, 1, 2
REASONS = {BAD_LOGITS: "non-finite logits", BAD_GRAD: "non-finite gradient", 3: "non-finite metrics"}
