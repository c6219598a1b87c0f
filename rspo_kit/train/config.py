"""Typed run configuration: one dataclass per component, composed into ``RunConfig``.

Every field that a choice of the paper leaves open has a default argued in docs/training.md ("What
the paper settles / what it leaves open") and a comment naming the alternatives. A bad value raises
``ValueError`` naming the field, the value and what is allowed, at construction time and again when
``RunConfig.validate()`` runs before training (the type checks and parsing: ``rspo_kit.train.fields``).
The named configurations built from these (``preset``, ``PRESETS``, ``from_parameters``) are
``rspo_kit.train.presets``; they load from here too, on first use.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from rspo_kit._lazy import lazy_exports

# Mode lists live in the module that implements them; the config only points at them.
from rspo_kit.algos.offpolicy import OffPolicy, OffPolicyMode
from rspo_kit.rewards.signals import Signal
from rspo_kit.swap.replay import ReplayFilter
from rspo_kit.train.fields import check_types, parse_field, require

Algo = Literal["grpo", "ppo", "gigpo"]
SwapMode = Literal["off", "rspo", "control", "group_mixing"]


@dataclass
class EnvConfig:
    name: str = "alfworld"  # any registered env
    # the user's env module (a dotted name or a .py file) whose register_env calls define ``name``:
    # imported before anything builds the env (rspo_kit.envs.load_env_module), so that a resumed run
    # or a sweep cell finds the env from its config alone; None for the built-in envs
    module: str | None = None
    engine: Literal["native", "alfworld"] | None = (
        None  # ALFWorld: "native" (fast, default) or "alfworld" (real)
    )
    max_steps: int | None = None  # episode cap; None = the env's default (ALFWorld 50, WebShop 15)
    train_tasks: int = 400  # the pool of train tasks that iterations draw from
    tasks_per_iteration: int = 8  # B: tasks per update of A (the paper: 16; the loop keeps its ratios at 8)
    n_workers: int = 0  # BatchRunner workers; 0 = in-process (fast engines)

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "name", self.name != "", "a registered env")
        require(self, "module", self.module != "", "None or a module that registers the env")
        require(self, "train_tasks", self.train_tasks >= 1, ">= 1")
        require(
            self,
            "tasks_per_iteration",
            1 <= self.tasks_per_iteration <= self.train_tasks,
            "in [1, train_tasks]",
        )
        require(self, "max_steps", self.max_steps is None or self.max_steps >= 1, "None or >= 1")
        require(self, "n_workers", self.n_workers >= 0, ">= 0")

    @property
    def env_kwargs(self) -> dict:
        kwargs = {"engine": self.engine} if self.engine else {}
        return kwargs | ({"max_steps": self.max_steps} if self.max_steps else {})


@dataclass
class PolicyConfig:
    preset: str = "tiny"  # "tiny", "small", "smollm2-135m", a checkpoint folder, or a HF id/path
    mode: Literal["choice", "free", "preset"] = "preset"  # "preset": the preset's own action mode
    warmstart: bool = True  # SFT on search-expert demonstrations first (cached per settings)
    # a saved warm start (policy folder) instead of an SFT run here: installed into the cache under this
    # run's warm-start key first (rspo_kit.train.setup); relative paths from the repository root
    warmstart_from: str | None = None
    sft_demo_tasks: int = 1500
    sft_minutes: float = 10.0
    sft_updates: int | None = None  # SFT updates instead of minutes: the same schedule on any machine
    sft_lr: float = 2e-3
    sft_balance: float = 0.5  # verb-balanced SFT weights, freq(verb) ** -balance (0: unweighted)
    sft_dagger_rounds: int = 0  # DAgger rounds inside the SFT budget (see policy.sft.warm_start)
    # share of demonstration labels replaced by a random admissible action: a start that knows the task
    # but is unsure of it, its sampled success falling smoothly with the noise (policy.sft)
    sft_label_noise: float = 0.0
    # the env whose demonstrations the warm start learns from, under that env's own episode cap (None:
    # the run's env and cap): one warm start shared by levels that differ in what RL trains on
    sft_env: str | None = None
    # task kinds (Task.kind, e.g. ALFWorld's "look_at_obj_in_light") the warm start's demonstrations
    # leave out: a start that has never seen them, so its groups on them fail every time; RL and the
    # evaluations still use every kind (the demonstrations are sft_demo_tasks train tasks of the others)
    sft_exclude_kinds: tuple[str, ...] = ()
    lora: bool | None = None  # None: LoRA for pretrained models, full fine-tuning for tiny/small
    lora_rank: int = 16
    temperature: float = 1.0  # sampling temperature of training rollouts (log-probs use the same)
    max_new_tokens: int = 24
    # choice mode: a candidate's score, which the softmax over candidates samples from and the policy
    # gradient differentiates: "sum" of its token log-probs (its likelihood; GLAM) or their "mean"
    # (length-normalised: an untrained policy under "sum" all but always picks the shortest action)
    choice_score: Literal["sum", "mean"] = "sum"

    def __post_init__(self) -> None:
        if isinstance(self.sft_exclude_kinds, list):  # as config.json and JSON overrides hold it
            self.sft_exclude_kinds = tuple(self.sft_exclude_kinds)
        check_types(self)
        require(self, "preset", self.preset != "", "a preset, a policy folder or a HF id")
        require(self, "sft_demo_tasks", self.sft_demo_tasks >= 1, ">= 1")
        require(self, "sft_minutes", self.sft_minutes > 0, "> 0")
        require(self, "sft_lr", self.sft_lr > 0, "> 0")
        require(self, "sft_updates", self.sft_updates is None or self.sft_updates >= 1, ">= 1 or None")
        require(self, "sft_balance", self.sft_balance >= 0, ">= 0")
        require(self, "sft_dagger_rounds", self.sft_dagger_rounds >= 0, ">= 0")
        require(self, "sft_label_noise", 0 <= self.sft_label_noise < 1, "in [0, 1)")
        require(self, "sft_env", self.sft_env != "", "None or an env name")
        kinds = self.sft_exclude_kinds
        require(self, "sft_exclude_kinds", all(kinds) and len(set(kinds)) == len(kinds), "distinct kinds")
        require(self, "temperature", self.temperature > 0, "> 0")
        require(self, "lora_rank", self.lora_rank >= 1, ">= 1")
        require(self, "max_new_tokens", self.max_new_tokens >= 1, ">= 1")
        require(self, "warmstart_from", self.warmstart_from != "", "None or a policy folder")


@dataclass
class RewardConfig:
    # what the base algorithm X optimises: "outcome" (plain X), "process" (dense-only baseline), or
    # "mix" (outcome + mix_lambda * process). Under RSPO the actor always gets outcome rewards; this
    # field then only matters for baselines.
    train_on: Signal = "outcome"
    outcome_mode: Literal["success", "score"] = "success"
    invalid_penalty: float = 0.0  # per invalid step; verl-agent uses 0.1
    # a registered process reward of the env ("subgoal", "heuristic", "progress_model", ...); "auto": the
    # paper's learned dense reward ("progress_model") under swap.mode "rspo" where the env has committed
    # weights (data/progress_models/<env>/) and misalign_eps is 0, else "subgoal"; the run's config.json
    # records the choice (rspo_kit.rewards.progress_model.auto_process_reward)
    process: str = "auto"
    prm: str | None = None  # folder of a saved LearnedPRM: registered as process "learned" for the env
    # folder of a saved ProgressModel (python -m rspo_kit.rewards.progress_model train) for
    # process="progress_model"; None: the env's committed weights
    progress_model: str | None = None
    misalign_eps: float = 0.0  # > 0 mixes in the env's hackable term: (1 - eps) * process + eps * hack
    hack: str = "hack"  # the env's process reward that pays for behaviour never leading to success
    mix_lambda: float = 0.5
    # σ of Gaussian noise added to each trajectory's dense return where the explorer trains on it (the
    # paper's Appendix D: 0.1 and 0.3 cost RSPO-GRPO 3 and 6 points on WebShop); 0: none
    dense_noise: float = 0.0

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "invalid_penalty", self.invalid_penalty >= 0, ">= 0")
        require(self, "dense_noise", self.dense_noise >= 0, ">= 0")
        require(self, "misalign_eps", 0 <= self.misalign_eps <= 1, "in [0, 1]")
        require(self, "mix_lambda", self.mix_lambda >= 0, ">= 0")
        require(self, "process", self.process != "", "a registered process reward of the env")
        require(self, "hack", self.hack != "", "a registered process reward of the env")
        require(
            self,
            "prm",
            self.process != "learned" or self.prm is not None,
            "a LearnedPRM folder when process='learned'",
        )


@dataclass
class AlgoConfig:
    name: Algo = "gigpo"
    group_size: int = 8  # G trajectories per task
    lr: float = 1e-4
    epochs: int = 1  # passes over each batch
    minibatch_steps: int = 64  # recorded steps per gradient step
    # steps per forward/backward pass inside a minibatch (gradient accumulation, steps of similar
    # length together): the gradient is the minibatch's own up to float rounding; small passes run
    # faster on a CPU and need less memory (benchmarks/update_microbatch.py), a GPU may want more
    microbatch_steps: int = 16
    clip_low: float = 0.2
    clip_high: float = 0.2
    max_grad_norm: float = 1.0
    use_std: bool | None = None  # None: GRPO divides by the group std, GiGPO does not (verl-agent mean_norm)
    gamma: float = 0.95  # GiGPO step returns and PPO's GAE
    lam: float = 0.95  # PPO's GAE lambda
    omega: float = 1.0  # GiGPO step-advantage weight
    episode_stats: Literal["trajectories", "steps"] = "trajectories"  # GiGPO A^E normalisation (paper Eq. 3)
    value_coef: float = 0.5  # PPO critic loss weight
    value_clip: float | None = 0.2
    value_lr: float = 1e-3
    entropy_coef: float = 0.0
    kl_coef: float = 0.0  # k3 KL to the frozen reference; 0 skips the reference forward pass

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "group_size", self.group_size >= 1, ">= 1")
        require(self, "lr", self.lr > 0, "> 0")
        require(self, "epochs", self.epochs >= 1, ">= 1")
        require(self, "minibatch_steps", self.minibatch_steps >= 1, ">= 1")
        require(self, "microbatch_steps", self.microbatch_steps >= 1, ">= 1")
        require(self, "gamma", 0 < self.gamma <= 1, "in (0, 1]")
        require(self, "lam", 0 <= self.lam <= 1, "in [0, 1]")
        require(self, "clip_low", 0 < self.clip_low < 1, "in (0, 1)")
        require(self, "clip_high", self.clip_high > 0, "> 0")
        require(self, "max_grad_norm", self.max_grad_norm > 0, "> 0")
        require(self, "omega", self.omega >= 0, ">= 0")
        require(self, "value_coef", self.value_coef >= 0, ">= 0")
        require(self, "value_clip", self.value_clip is None or self.value_clip > 0, "None or > 0")
        require(self, "value_lr", self.value_lr > 0, "> 0")
        require(self, "entropy_coef", self.entropy_coef >= 0, ">= 0")
        require(self, "kl_coef", self.kl_coef >= 0, ">= 0")

    @property
    def divide_by_std(self) -> bool:
        return self.name == "grpo" if self.use_std is None else self.use_std


@dataclass
class SwapConfig:
    """RSPO. ``mode="rspo"`` is the paper's Algorithm 1 (arXiv 2607.04713), one loop a trainer iteration:

    1. explorer phase: B <- A, then ``loop_steps`` (k) X-updates of B, each on a fresh rollout of
       round((1 − α)·B) tasks × N scored by the dense reward (``explorer_reward``);
    2. collection: B rolls out ``collect_tasks`` tasks × N, relabelled with the outcome and stored in
       the buffer with its behaviour log-probs and off-policy advantage (``offpolicy_advantage``);
    3. actor phase: k X-updates of A, each on round((1 − α)·B) fresh tasks × N plus round(α·B·N)
       trajectories drawn from the buffer (``sampling``), J = (1 − α)·J_on + α·J_off with J_off's
       correction ``offpolicy_clip``;
    4. the buffer is reset (``buffer``).

    B = ``env.tasks_per_iteration``, N = ``algo.group_size``, α = ``offpolicy_share``. ``mode="control"``
    is the same loop with B = A (no explorer steps): extra samples only. ``mode="group_mixing"`` is the
    earlier rspo_kit design that the studies in results/ measured (B re-synced and updated once per
    iteration on A's batch, B playing A's tasks, replayed successes joined into A's own groups, truncated
    importance weights, a FIFO buffer): its fields are ``sync_every``, ``explorer_updates``,
    ``explorer_group_size``, ``replay_filter``, ``replay_ratio``; the variant ``group_mixing`` sets
    ``offpolicy_clip = "truncated_is"`` as it ran. Why each default: docs/training.md.
    """

    mode: SwapMode = "off"
    # -- the paper's loop (mode rspo, control)
    loop_steps: int = 3  # k: X-updates of B, then of A, per loop (paper: 3; Table 4: k >= 5 back to plain)
    offpolicy_share: float = 0.125  # α: the off-policy share of A's batch (paper: 1/8; Table 3)
    collect_tasks: int | None = (
        None  # B's collection batch in tasks; None: round(2·(1 − α)·B), the paper's 28 of 16
    )
    # how D_off is drawn: "reward" (highest outcome first; the paper's), "variance" (highest outcome
    # variance of the collection group first), "random"; per "trajectory" or whole collection "group"
    sampling: Literal["reward", "variance", "random"] = "reward"
    draw_unit: Literal["trajectory", "group"] = "trajectory"
    # among equal draw scores (a 0/1 outcome ties every success): larger stored advantage first (a success
    # of a group where B mostly failed carries the signal; one of an all-success group has A_off = 0), or random
    tie_order: Literal["advantage", "random"] = "advantage"
    draw_replacement: bool = False  # False: a trajectory enters at most one of A's k batches per loop
    offpolicy_clip: OffPolicyMode = "shifted"  # J_off's correction: GePPO's shifted clip (paper Eq. 4)
    # "explicit": J = (1 − α)·J_on + α·J_off, each a token mean (paper Eq. 1); "data_share": one token
    # mean over D_on ∪ D_off, α only the share of trajectories (Algorithm 1's batch)
    offpolicy_weighting: Literal["explicit", "data_share"] = "explicit"
    # A_off: "collection" = X's estimator within B's own collection group under the outcome, stored
    # with the trajectory (paper Figure 2); "recomputed" = X's estimator over the drawn trajectories at
    # update time. PPO computes GAE from A's critic at update time under either
    offpolicy_advantage: Literal["collection", "recomputed"] = "collection"
    buffer: Literal["loop", "fifo"] = (
        "loop"  # "loop": D <- ∅ every loop (paper); "fifo": kept, replay_capacity
    )
    explorer_reward: Literal["dense", "outcome"] = "dense"  # "outcome": B trained on the outcome (RSPO_O)
    # "actor_history": D holds A's own on-policy rollouts of the previous loop, no explorer (RSPO_H)
    replay_source: Literal["explorer", "actor_history"] = "explorer"
    explorer_optimizer: Literal["fresh", "carry"] = "fresh"  # B's Adam moments at B <- A: cleared or kept
    # -- both designs
    # B's sampling temperature; None: the actor's policy.temperature (RunConfig.explorer_temperature)
    explorer_temperature: float | None = None
    # share of B's choices taken uniformly among the candidates (choice mode): B tries actions the
    # actor's softmax all but rules out (a verb no demonstration showed sits near 1e-11), and its
    # behaviour log-probs are the mixture's, so the actor's importance weight π_A/π_B stays exact
    explorer_epsilon: float = 0.0
    # None: algo.lr in the paper's loop (Algorithm 1 updates B with the same method X); half of it in
    # group_mixing, as that design ran (RunConfig.explorer_lr)
    explorer_lr: float | None = None
    replay_capacity: int = 256  # trajectories kept: buffer "fifo" and group_mixing
    is_clip: float = 2.0  # truncated_is: the weight's cap
    # -- the earlier design (mode group_mixing)
    # B <- A every this many iterations; 0: only at the first, then B trains on its own rollouts alone
    sync_every: int = 1
    explorer_updates: int = 1  # X-updates of B on process rewards per iteration (0: its control)
    explorer_group_size: int = 4  # trajectories of B per task
    replay_filter: ReplayFilter = "success"
    replay_ratio: float = 0.25  # M = round(ratio * G) replayed trajectories join each actor group

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "loop_steps", self.loop_steps >= 1, ">= 1")
        require(self, "offpolicy_share", 0 <= self.offpolicy_share < 1, "in [0, 1)")
        require(self, "collect_tasks", self.collect_tasks is None or self.collect_tasks >= 1, "None or >= 1")
        require(self, "sync_every", self.sync_every >= 0, ">= 1 (every k-th iteration) or 0 (never again)")
        require(self, "explorer_updates", self.explorer_updates >= 0, ">= 0")
        require(
            self,
            "explorer_temperature",
            self.explorer_temperature is None or self.explorer_temperature > 0,
            "None (the actor's policy.temperature) or > 0",
        )
        require(self, "explorer_epsilon", 0 <= self.explorer_epsilon < 1, "in [0, 1)")
        require(self, "explorer_lr", self.explorer_lr is None or self.explorer_lr > 0, "None or > 0")
        require(self, "explorer_group_size", self.explorer_group_size >= 1, ">= 1")
        require(self, "replay_capacity", self.replay_capacity >= 1, ">= 1")
        require(self, "replay_ratio", self.replay_ratio >= 0, ">= 0")
        require(self, "is_clip", self.is_clip >= 1, ">= 1")

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def paper_loop(self) -> bool:
        """Whether the run follows Algorithm 1 (``rspo``, ``control``), not the earlier design."""
        return self.mode in ("rspo", "control")

    @property
    def offpolicy(self) -> OffPolicy:
        """The off-policy objective that each update of the run reads (``rspo_kit.train.update.update``).

        >>> SwapConfig(mode="rspo").offpolicy
        OffPolicy(clip='shifted', is_clip=2.0, share=0.125)
        >>> SwapConfig(mode="group_mixing", offpolicy_clip="truncated_is").offpolicy
        OffPolicy(clip='truncated_is', is_clip=2.0, share=None)
        """
        explicit = self.paper_loop and self.offpolicy_weighting == "explicit"
        return OffPolicy(self.offpolicy_clip, self.is_clip, self.offpolicy_share if explicit else None)


@dataclass
class TrainConfig:
    iterations: int = 10  # 0 = SFT warm start + evaluation only; under the paper's loop, loops
    # stop once this many updates of the actor A are done (the paper's accounting: 150); checked at the
    # end of an iteration, so a loop of k updates may pass it by up to k − 1
    updates: int | None = None
    max_env_steps: int | None = None  # stop once this many env steps (actor + explorer) are spent
    seed: int = 0
    eval_every: int = 5  # iterations; the last iteration is always evaluated
    eval_split: str = "eval"  # "valid" (held-out train tasks) when tuning: never tune on eval splits
    eval_n: int = 30
    # evaluate these splits once more after the last iteration, comma-separated ("" = none), e.g.
    # "eval,eval_unseen" when tuning on valid: reported as final/<split>/* (the held-out test splits)
    final_eval_split: str = ""
    final_eval_n: int = 0  # tasks per final split; 0: eval_n
    # also evaluate the final splits with sampled actions (one episode per task), as
    # final_sampled/<split>/*: RL optimises the sampled policy, and its greedy mode may move otherwise
    final_eval_sampled: bool = False
    # the final splits' greedy evaluation (final/<split>/*); False where only sampled actions matter
    final_eval_greedy: bool = True
    checkpoint_every: int = 1
    run_dir: str | None = None  # None: runs/<time>_<env>_<algo>_<swap>_s<seed>
    threads: int | None = None  # torch threads; None leaves torch's default
    progress_bar: bool = True
    tables: bool = True  # per-turn parquet trajectory table per iteration

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "iterations", self.iterations >= 0, ">= 0")
        require(self, "max_env_steps", self.max_env_steps is None or self.max_env_steps > 0, "None or > 0")
        require(self, "updates", self.updates is None or self.updates > 0, "None or > 0")
        require(self, "eval_every", self.eval_every >= 1, ">= 1")
        require(self, "eval_n", self.eval_n >= 0, ">= 0")
        require(self, "final_eval_n", self.final_eval_n >= 0, ">= 0")
        require(
            self,
            "final_eval_greedy",
            self.final_eval_greedy or self.final_eval_sampled or not self.final_eval_splits,
            "True, or final_eval_sampled True, where final_eval_split names splits to evaluate",
        )
        require(self, "checkpoint_every", self.checkpoint_every >= 1, ">= 1")
        require(self, "seed", self.seed >= 0, ">= 0")
        require(self, "threads", self.threads is None or self.threads >= 1, "None or >= 1")
        require(self, "eval_split", self.eval_split != "", "a split of the env")
        require(self, "run_dir", self.run_dir != "", "None or a folder")

    @property
    def final_eval_splits(self) -> tuple[str, ...]:
        """The splits of ``final_eval_split``, in order.

        >>> TrainConfig(final_eval_split="eval, eval_unseen").final_eval_splits
        ('eval', 'eval_unseen')
        """
        return tuple(s.strip() for s in self.final_eval_split.split(",") if s.strip())


@dataclass
class RunConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    swap: SwapConfig = field(default_factory=SwapConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self) -> RunConfig:
        """Re-run every component's checks (fields may have been assigned after construction)."""
        for f in dataclasses.fields(self):
            getattr(self, f.name).__post_init__()
        if self.swap.paper_loop:
            self._check_loop_batches()
        if self.policy.choice_score != "sum" and self.policy.warmstart:
            # the SFT warm start (rspo_kit.policy.sft.choice_loss) fits the softmax over summed scores
            raise ValueError(
                f"policy.choice_score = {self.policy.choice_score!r} with policy.warmstart = True: the warm "
                "start's SFT trains the softmax over summed token log-probs, and the run would sample from "
                "another distribution than it was taught; use 'sum' with a warm start, or "
                f"{self.policy.choice_score!r} from an untrained start (policy.warmstart = false)"
            )
        if self.swap.explorer_epsilon and self.policy.mode == "free":
            raise ValueError(
                f"swap.explorer_epsilon = {self.swap.explorer_epsilon} with policy.mode = {self.policy.mode!r}: "
                "the explorer's uniform choices are among the candidates of choice mode"
            )
        return self

    def _check_loop_batches(self) -> None:
        """The paper's loop needs an on-policy task and, with α > 0, a replayed trajectory in A's batch."""
        s, b = self.swap, self.env.tasks_per_iteration
        if self.on_policy_tasks < 1:
            raise ValueError(
                f"swap.offpolicy_share = {s.offpolicy_share} with env.tasks_per_iteration = {b}: "
                f"round((1 − α)·B) = {self.on_policy_tasks} on-policy tasks; A needs at least one"
            )
        if s.offpolicy_share > 0 and self.replayed_per_update < 1:
            raise ValueError(
                f"swap.offpolicy_share = {s.offpolicy_share} with env.tasks_per_iteration = {b} and "
                f"algo.group_size = {self.algo.group_size}: round(α·B·N) = 0 replayed trajectories; raise α "
                "or the batch (or set α = 0 for no replay)"
            )
        if self.on_policy_tasks > self.env.train_tasks or self.collect_tasks > self.env.train_tasks:
            raise ValueError(
                f"env.train_tasks = {self.env.train_tasks}: fewer than the loop's {self.on_policy_tasks} "
                f"on-policy or {self.collect_tasks} collection tasks"
            )

    @property
    def on_policy_tasks(self) -> int:
        """round((1 − α)·B): the tasks of each fresh rollout in the paper's loop (A's and B's steps).

        >>> RunConfig(env=EnvConfig(tasks_per_iteration=16)).on_policy_tasks
        14
        """
        return round((1 - self.swap.offpolicy_share) * self.env.tasks_per_iteration)

    @property
    def replayed_per_update(self) -> int:
        """round(α·B·N): the trajectories drawn from the buffer for each update of A.

        >>> RunConfig(env=EnvConfig(tasks_per_iteration=16)).replayed_per_update
        16
        """
        return round(self.swap.offpolicy_share * self.env.tasks_per_iteration * self.algo.group_size)

    @property
    def collect_tasks(self) -> int:
        """B's collection batch in tasks: ``swap.collect_tasks``, or round(2·(1 − α)·B) (the paper's 28 of 16).

        >>> RunConfig(env=EnvConfig(tasks_per_iteration=16)).collect_tasks
        28
        """
        if self.swap.collect_tasks is not None:
            return self.swap.collect_tasks
        return round(2 * (1 - self.swap.offpolicy_share) * self.env.tasks_per_iteration)

    @property
    def explorer_lr(self) -> float:
        """RSPO's explorer learning rate: ``swap.explorer_lr``, or if None the actor's ``algo.lr`` in the
        paper's loop (B takes X's own steps) and half of it in group_mixing (as that design ran).

        >>> RunConfig(algo=AlgoConfig(lr=3e-4), swap=SwapConfig(mode="rspo")).explorer_lr
        0.0003
        >>> RunConfig(algo=AlgoConfig(lr=3e-4), swap=SwapConfig(mode="group_mixing")).explorer_lr
        0.00015
        >>> RunConfig(algo=AlgoConfig(lr=3e-4), swap=SwapConfig(explorer_lr=1e-5)).explorer_lr
        1e-05
        """
        if self.swap.explorer_lr is not None:
            return self.swap.explorer_lr
        return self.algo.lr / 2 if self.swap.mode == "group_mixing" else self.algo.lr

    @property
    def explorer_temperature(self) -> float:
        """The explorer's sampling temperature: ``swap.explorer_temperature``, or the actor's if None.

        >>> RunConfig(policy=PolicyConfig(temperature=0.8)).explorer_temperature
        0.8
        >>> RunConfig(swap=SwapConfig(explorer_temperature=2.0)).explorer_temperature
        2.0
        """
        t = self.swap.explorer_temperature
        return self.policy.temperature if t is None else t

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        parts = {f.name: f.type for f in dataclasses.fields(cls)}
        types = {"env": EnvConfig, "policy": PolicyConfig, "reward": RewardConfig}
        types |= {"algo": AlgoConfig, "swap": SwapConfig, "train": TrainConfig}
        unknown = set(d) - set(parts)
        if unknown:
            raise ValueError(f"unknown RunConfig sections {sorted(unknown)}; known: {sorted(parts)}")
        d = {k: dict(v) for k, v in d.items()}
        _read_earlier_swap(d.get("swap", {}))
        return cls(**{k: types[k](**v) for k, v in d.items()})

    def override(self, dotted: str, value: Any) -> RunConfig:
        """Set ``"algo.lr"`` style fields; a string value is parsed as the field's declared type.

        >>> RunConfig().override("algo.lr", "3e-4").algo.lr
        0.0003
        >>> RunConfig().override("algo.lrr", "1")
        Traceback (most recent call last):
        ValueError: unknown config field 'algo.lrr'; did you mean 'algo.lr'?
        """
        part, name = self._field(dotted)
        setattr(part, name, parse_field(dotted, value, get_type_hints(type(part))[name]))
        return self

    def _field(self, dotted: str) -> tuple[Any, str]:
        """The component and field name of ``"section.field"``, or a ValueError naming the closest ones."""
        sections = [f.name for f in dataclasses.fields(self)]
        everywhere = [f"{s}.{f.name}" for s in sections for f in dataclasses.fields(getattr(self, s))]
        section, _, name = dotted.partition(".")
        if dotted in everywhere:
            return getattr(self, section), name
        # the same field name in another section first ("train.lr" -> "algo.lr"), then spelling
        close = [d for d in everywhere if d.partition(".")[2] == (name or section)]
        close += [d for d in difflib.get_close_matches(dotted, everywhere, n=3, cutoff=0.8) if d not in close]
        hint = f"; did you mean {' or '.join(map(repr, close[:3]))}?" if close else ""
        where = f"sections: {', '.join(sections)}"
        if not name:
            raise ValueError(f"config fields are section.field, not {dotted!r}{hint or ';'} {where}")
        if section not in sections:
            raise ValueError(f"unknown config section {section!r} in {dotted!r}{hint or ';'} {where}")
        if not hint:
            names = [f.name for f in dataclasses.fields(getattr(self, section))]
            hint = f"; {section} has {', '.join(names)}"
        raise ValueError(f"unknown config field {dotted!r}{hint}")


def _read_earlier_swap(swap: dict) -> None:
    """A config written before the paper's loop (no ``swap.loop_steps``) in today's names: its mode
    ``rspo`` or ``control`` was the earlier design, now ``group_mixing`` (its control: no explorer
    update), and its ``offpolicy_weight`` is ``offpolicy_clip``."""
    if "offpolicy_weight" in swap:
        swap["offpolicy_clip"] = swap.pop("offpolicy_weight")
    if swap and "loop_steps" not in swap and swap.get("mode") in ("rspo", "control"):
        if swap["mode"] == "control":
            swap["explorer_updates"] = 0
        swap["mode"] = "group_mixing"


# What ``preset(..., swap=...)`` means: the mode of the swap and the reward the base algorithm sees.
VARIANTS: dict[str, tuple[SwapMode, Signal]] = {
    "plain": ("off", "outcome"),
    "rspo": ("rspo", "outcome"),
    "control": ("control", "outcome"),
    "process": ("off", "process"),
    "mix": ("off", "mix"),
    "group_mixing": ("group_mixing", "outcome"),  # the earlier design, for the record of results/
}


def process_reward_use(cfg: RunConfig) -> str | None:
    """What in ``cfg``'s run trains on the process reward, or None: plain X and the control train on
    the outcome alone, so an env needs no process reward for them.

    >>> from rspo_kit.train.presets import preset
    >>> process_reward_use(preset("smoke", env="chain-4x2", swap="control")) is None
    True
    >>> process_reward_use(preset("smoke", env="chain-4x2", swap="rspo"))
    "the explorer's dense updates (swap.mode = 'rspo', swap.explorer_reward = 'dense')"
    """
    s = cfg.swap
    if cfg.reward.train_on != "outcome":
        return f"the actor's updates (reward.train_on = {cfg.reward.train_on!r})"
    if s.mode == "rspo" and s.explorer_reward == "dense" and s.replay_source == "explorer":
        return "the explorer's dense updates (swap.mode = 'rspo', swap.explorer_reward = 'dense')"
    if s.mode == "group_mixing" and s.explorer_updates > 0:
        return f"the explorer's dense updates (swap.mode = 'group_mixing', swap.explorer_updates = {s.explorer_updates})"
    return None


def variant_of(cfg: RunConfig) -> str:
    """The name of a config's variant ("rspo", "plain", "control", "process", "mix", "group_mixing")."""
    for name, (mode, signal) in VARIANTS.items():
        if (cfg.swap.mode, cfg.reward.train_on) == (mode, signal):
            return name
    return f"{cfg.swap.mode}+{cfg.reward.train_on}"


# the named configurations, built on this module: importers that read them from here load them on first use
__getattr__, __dir__ = lazy_exports(
    __name__, dict.fromkeys(("PRESETS", "from_parameters", "preset"), "rspo_kit.train.presets")
)
