"""A tuner that searches the policy space, not a grid.

``search(corpus, limits=..., model=..., min_retention=R, budget=K)`` splits the
sessions into a training and a held-out split (by a seeded hash of each
session's id, so a session's side never depends on the rest of the corpus),
searches the policy options of a ``space`` on the training split, and replays
the chosen policy and every preset on the held-out split, which the search
never saw: the figures there are what the policy is worth on other runs.

The objective is the cost under the first price sheet when a model is named,
else the prompt tokens; a candidate whose retention is under ``min_retention``
or that sent a prompt over the input window is infeasible (never chosen over
a feasible one). ``budget`` counts replays: one candidate replayed over one
subset of the training sessions is one, whatever the subset's size; a
candidate already replayed on a subset is not replayed again.

Methods (``method=``): ``"random"`` (the default: the presets and candidates
sampled from the space, each replayed on the whole training split),
``"halving"`` (successive halving: more candidates replayed on a few training
sessions, the better half kept on twice as many, down to one on the whole
split; about 10x less replay work for the same budget, and worse choices on
the shared SWE-agent runs: docs/tuning.md) and ``"tpe"`` (Optuna's TPE on the
whole training split; ``pip install 'ctxcompact[search]'``). The presets are
the first candidates of ``random`` and ``halving`` and the first trials of
``tpe``, so the search starts from what a user would otherwise pick.

A space maps a ``Policy`` option to a list of values (``"none"`` stands for
``None`` in TOML) or, for an integer option, a range ``{low, high}`` (``log =
true``: sampled evenly on a log scale). Options a space leaves out come from
the configuration's policy.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ctxcompact._atomic import replacing
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, DatasetError
from ctxcompact.models import Session
from ctxcompact.policy import PRESETS, Policy
from ctxcompact.scans.overflow import Limits, check_window
from ctxcompact.transcript import Transcript
from ctxcompact.tuning.as_sent import AsSent, SentBaseline, parse_as_sent
from ctxcompact.tuning.cache import model_names
from ctxcompact.tuning.grid import read_toml_table
from ctxcompact.tuning.replay import (
    _sessions,
    check_config,
    check_number,
    replay,
    sent_baseline,
    sheets_for,
)

Objective = Literal["cost", "tokens"]
OBJECTIVES: tuple[str, ...] = ("cost", "tokens")
METHODS: tuple[str, ...] = ("random", "halving", "tpe")

#: The policy options searched by default, with their ranges: what decides
#: which outputs are cleared and when (the turn unit, the protected window,
#: the thresholds that batch clearing into rarer, larger rounds, the outputs
#: kept) and how the model is sent them (placeholder, arguments, cuts).
#: ``exclude_tools``, ``enabled`` and ``keep_thinking`` come from the config.
DEFAULT_SPACE: dict[str, Any] = {
    "turn": ["user", "step"],
    "protect_turns": {"low": 0, "high": 8},
    "protect": {"low": 0, "high": 64_000, "log": True},
    "minimum": {"low": 0, "high": 40_000, "log": True},
    "clear_at_least": {"low": 0, "high": 40_000, "log": True},
    "trigger": {"low": 0, "high": 100_000, "log": True},
    "keep_recent": [None, 1, 2, 3, 5, 8, 12],
    "keep_recent_per_tool": [False, True],
    "supersede": [False, True],
    "continue_past_compacted": [False, True],
    "min_output_tokens": [0, 16, 64, 256],
    "clear_inputs": [False, True],
    "truncate_output": [None, 250, 500, 1_000, 2_000, 4_000],
    "placeholder": ["opencode", "describe"],
}


@dataclass(frozen=True)
class Dimension:
    """One searched option: a list of ``choices``, or an integer range."""

    name: str
    choices: tuple[Any, ...] | None = None
    low: int = 0
    high: int = 0
    log: bool = False

    def sample(self, rng: random.Random) -> Any:
        if self.choices is not None:
            return self.choices[rng.randrange(len(self.choices))]
        if self.log:  # evenly on log(1 + x): 0 stays reachable
            x = math.exp(rng.uniform(math.log1p(self.low), math.log1p(self.high))) - 1
            return min(self.high, max(self.low, round(x)))
        return rng.randint(self.low, self.high)


def _where(space: Any) -> str:
    return f"{space}: " if isinstance(space, (str, os.PathLike)) else ""


def load_space(space: Mapping[str, Any] | str | os.PathLike[str] | None = None,
               base: Policy | None = None) -> list[Dimension]:  # fmt: skip
    """The dimensions of a search space (``None``: ``DEFAULT_SPACE``), from a
    dict or a TOML file (keys at the top or under ``[space]``), each checked:
    an unknown option, an empty list, a value the option does not take or a
    range whose low is over its high is a ``ConfigError`` naming the option."""
    where = _where(space)
    data: Any
    if space is None:
        data = DEFAULT_SPACE
    elif isinstance(space, (str, os.PathLike)):
        data = read_toml_table(Path(space), "space", "search space")
    else:
        data = space
    if not isinstance(data, Mapping):
        raise ConfigError(f"search space: expected a table of policy options, got "
                          f"{type(data).__name__}", column="space")  # fmt: skip
    if not data:
        raise ConfigError(f"{where}the search space is empty: name at least one policy option "
                          "with its values or range", column="space")  # fmt: skip
    start = (base or Policy()).model_dump()
    dims: list[Dimension] = []
    for name, spec in data.items():
        name = str(name)
        at = f"{where}search space option {name}"
        if name == "preset" or name not in Policy.model_fields:
            raise ConfigError(f"{at}: not a policy option (one of "
                              f"{', '.join(Policy.model_fields)})", column=name)  # fmt: skip

        def check(value: Any, name: str = name, at: str = at) -> Any:
            try:
                return getattr(Policy.from_mapping({**start, name: value}, where=""), name)
            except ConfigError as e:
                raise ConfigError(f"{at}: {e}", column=name) from None

        if isinstance(spec, Mapping):
            if set(spec) - {"low", "high", "log"} or not {"low", "high"} <= set(spec):
                raise ConfigError(f"{at}: a range is {{low, high}} (optionally log = true), "
                                  f"got keys {sorted(spec)}", column=name)  # fmt: skip
            low, high, log = spec["low"], spec["high"], spec.get("log", False)
            if Policy.model_fields[name].annotation not in (int, int | None):
                raise ConfigError(f"{at}: a range is for an integer option; list its values",
                                  column=name)  # fmt: skip
            for v in (low, high):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ConfigError(f"{at}: low and high are integers, got {v!r}", column=name)
                check(v)
            if low > high:
                raise ConfigError(f"{at}: the range is empty (low {low} is over high {high})",
                                  column=name)  # fmt: skip
            if not isinstance(log, bool):
                raise ConfigError(f"{at}: log takes true or false, not {log!r}", column=name)
            dims.append(Dimension(name, low=low, high=high, log=log))
            continue
        values = list(spec) if isinstance(spec, (list, tuple)) else [spec]
        if not values:
            raise ConfigError(f"{at}: no values: list at least one", column=name)
        if Policy.model_fields[name].default is None:  # TOML has no null
            values = [None if v == "none" else v for v in values]
        checked = [check(v) for v in values]
        if len({repr(v) for v in checked}) < len(checked):
            raise ConfigError(f"{at}: a value is listed twice: list each once", column=name)
        dims.append(Dimension(name, choices=tuple(checked)))
    return dims


def split(ids: Iterable[str], holdout: float = 0.3,
          seed: int = 0) -> tuple[list[str], list[str]]:  # fmt: skip
    """The training and held-out session ids: a session is held out when the
    hash of ``seed`` and its id falls under ``holdout`` (so its side depends
    on nothing else in the corpus); each side gets at least one session (the
    one nearest the cut moves when a side would be empty)."""
    check_number(holdout, "holdout")
    if not 0 < holdout < 1:
        raise ConfigError(f"holdout must be between 0 and 1 (exclusive), got {holdout!r}",
                          column="holdout")  # fmt: skip
    check_number(seed, "seed", integer=True)
    ids = list(ids)
    if len(ids) < 2:
        raise DatasetError(f"a search needs at least 2 sessions (one to train on, one held "
                           f"out), got {len(ids)}", column="session_id")  # fmt: skip
    score = {sid: _unit(seed, sid) for sid in ids}
    held = [s for s in ids if score[s] < holdout]
    train = [s for s in ids if score[s] >= holdout]
    if not held:
        moved = min(train, key=score.__getitem__)
        train, held = [s for s in train if s != moved], [moved]
    elif not train:
        moved = max(held, key=score.__getitem__)
        held, train = [s for s in held if s != moved], [moved]
    return train, held


def _unit(seed: int, sid: str) -> float:
    digest = hashlib.sha256(f"{seed}\0{sid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


#: What a search reports of one replay.
FIGURES = ("sessions", "calls", "cost", "baseline_cost", "prompt_tokens",
           "baseline_prompt_tokens", "retention", "compaction_retention", "compactions",
           "over_window", "count")  # fmt: skip


@dataclass(frozen=True)
class Trial:
    """One replay of the search: a candidate on a subset of the training split."""

    policy: Policy
    sessions: int
    figures: dict[str, Any]
    feasible: bool
    value: float


@dataclass(frozen=True)
class SearchResult:
    """``policy``: the chosen one; ``train`` and ``held_out``: its figures on
    each split (``FIGURES``); ``presets``: every preset's figures on the
    held-out split; ``goal_met``: the policy is feasible on the held-out split
    (retention at least ``min_retention``, no prompt over the window) and no
    preset feasible there is cheaper (on ``objective``); ``trials``: every
    replay the search ran (``len(trials) <= budget``); ``baseline``: each
    run's as-sent baseline (``search(..., as_sent=...)``), chosen once for
    every replay (``None``: the stored history sent whole)."""

    policy: Policy
    objective: str
    min_retention: float
    method: str
    train: dict[str, Any]
    held_out: dict[str, Any]
    presets: dict[str, dict[str, Any]]
    goal_met: bool
    train_ids: list[str]
    held_out_ids: list[str]
    trials: list[Trial] = field(default_factory=list)
    baseline: SentBaseline | None = None

    @property
    def as_sent(self) -> list[dict[str, Any]] | None:
        """Per run, the policy its baseline was replayed under and why."""
        return list(self.baseline.choices) if self.baseline is not None else None

    @property
    def count(self) -> str:
        """Which count the figures use (``tuning.counts``)."""
        return str(self.held_out["count"])

    def feasible(self, figures: Mapping[str, Any]) -> bool:
        return _feasible(figures, self.min_retention)

    def key(self) -> str:
        return _key(self.objective)

    def cheaper_presets(self) -> list[str]:
        """The presets feasible on the held-out split that are cheaper than the policy."""
        mine = float(self.held_out[self.key()])
        return [n for n, f in self.presets.items()
                if self.feasible(f) and float(f[self.key()]) < mine]  # fmt: skip

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the chosen policy as a TOML file (``--policy FILE`` and
        ``Policy.load`` read it), atomically; its figures as comments."""
        path = Path(path)
        head = [f"# ctxcompact tune --search: {self.policy.describe()}",
                f"# objective {self.objective}, retention at least {self.min_retention:g}, "
                f"method {self.method}",
                f"# held-out ({len(self.held_out_ids)} sessions): "
                + ", ".join(f"{k} {self.held_out[k]}" for k in (self.key(), "retention")),
                f"# goal (no preset cheaper at that retention on the held-out split): "
                f"{'met' if self.goal_met else 'not met'}"]  # fmt: skip
        text = "\n".join(head) + "\n" + self.policy.to_toml()
        with replacing(path, keep_suffix=True) as tmp:
            tmp.write_text(text, encoding="utf-8")
        return path


def _key(objective: str) -> str:
    return "cost" if objective == "cost" else "prompt_tokens"


def _feasible(figures: Mapping[str, Any], min_retention: float) -> bool:
    return figures["retention"] >= min_retention and not figures["over_window"]


def check_search_options(objective: str | None, min_retention: Any, budget: Any,
                         method: str, models: list[str]) -> str:  # fmt: skip
    """The objective (default: ``cost`` when priced, else ``tokens``), each
    option checked: a ``ConfigError`` naming it."""
    if objective is None:
        objective = "cost" if models else "tokens"
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got "
                          f"{objective!r}", column="objective")  # fmt: skip
    if objective == "cost" and not models:
        raise ConfigError("objective cost needs a model to price the calls (model=, --model); "
                          "or use objective tokens", column="objective")  # fmt: skip
    check_number(min_retention, "min_retention")
    if not 0 <= min_retention <= 1:
        raise ConfigError(f"min_retention must be between 0 and 1, got {min_retention!r}",
                          column="min_retention")  # fmt: skip
    check_number(budget, "budget", least=1, integer=True)
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}",
                          column="method")  # fmt: skip
    if method == "tpe":
        _optuna()
    return objective


class _Evaluator:
    """Replays a candidate on a subset of sessions, once, within the budget."""

    def __init__(self, sessions: dict[str, Session], run: Callable[[list[Session], Policy],
                 dict[str, Any]], objective: str, min_retention: float,
                 budget: int) -> None:  # fmt: skip
        self.sessions, self.run, self.budget = sessions, run, budget
        self.key, self.min_retention = _key(objective), min_retention
        self.trials: list[Trial] = []
        self.seen: dict[tuple[str, tuple[str, ...]], Trial] = {}

    def left(self) -> int:
        return self.budget - len(self.trials)

    def __call__(self, policy: Policy, ids: Sequence[str]) -> Trial:
        memo = (policy.model_dump_json(), tuple(ids))
        if memo in self.seen:
            return self.seen[memo]
        figures = self.run([self.sessions[i] for i in ids], policy)
        ok = _feasible(figures, self.min_retention)
        trial = Trial(policy, len(ids), figures, ok, float(figures[self.key]))
        self.trials.append(trial)
        self.seen[memo] = trial
        return trial


def _rank(trial: Trial) -> tuple[bool, float, float]:
    """Feasible first, cheapest first; an infeasible one by how far it falls short."""
    if trial.feasible:
        return (False, trial.value, 0.0)
    return (True, -trial.figures["retention"] + trial.figures["over_window"], trial.value)


def _candidates(dims: list[Dimension], base: Policy, rng: random.Random,
                n: int) -> list[Policy]:  # fmt: skip
    """The presets, then policies sampled from the space, ``n`` in all
    (fewer when the space holds fewer distinct ones)."""
    out: list[Policy] = []
    seen: set[str] = set()

    def add(p: Policy) -> None:
        if len(out) < n and (j := p.model_dump_json()) not in seen:
            seen.add(j)
            out.append(p)

    for preset in PRESETS.values():
        add(preset)
    start = base.model_dump()
    misses = 0
    while len(out) < n and misses < 200:
        before = len(out)
        add(Policy.model_validate({**start, **{d.name: d.sample(rng) for d in dims}}))
        misses = misses + 1 if len(out) == before else 0
    return out


def _halving(evaluate: _Evaluator, candidates: list[Policy], train: list[str]) -> Trial:
    """Successive halving: the candidates on the fewest training sessions, the
    better half on twice as many, ... the last on the whole split."""
    rungs = max(1, math.ceil(math.log2(len(candidates))) + 1)
    alive = candidates
    best: Trial | None = None
    for r in range(rungs):
        size = max(1, math.ceil(len(train) / 2 ** (rungs - 1 - r)))
        ids = train[:size]
        trials = [evaluate(p, ids) for p in alive if evaluate.left() > 0 or
                  (p.model_dump_json(), tuple(ids)) in evaluate.seen]  # fmt: skip
        if not trials:
            break
        trials.sort(key=_rank)
        best = trials[0]
        alive = [t.policy for t in trials[: max(1, math.ceil(len(trials) / 2))]]
        if size == len(train) and len(alive) == 1:
            break
    assert best is not None
    return evaluate(best.policy, train) if evaluate.left() > 0 else best


def _halving_size(budget: int, train: int) -> int:
    """The most candidates successive halving can run within ``budget`` replays."""

    def cost(n: int) -> int:
        rungs = max(1, math.ceil(math.log2(n)) + 1)
        total, alive = 0, n
        for _ in range(rungs):
            total += alive
            alive = max(1, math.ceil(alive / 2))
        return total

    n = 1
    while cost(n + 1) <= budget:
        n += 1
    return n


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError("method tpe needs Optuna: pip install 'ctxcompact[search]' (or use "
                          "method random)", column="method") from None  # fmt: skip
    return optuna


def _tpe(evaluate: _Evaluator, dims: list[Dimension], base: Policy, train: list[str],
         seed: int) -> Trial:  # fmt: skip
    optuna = _optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = base.model_dump()
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    searched = {d.name for d in dims}
    for preset in PRESETS.values():  # the presets first, as far as the space can say them
        given = preset.model_dump()
        params = {}
        for d in dims:
            v = given[d.name]
            if d.choices is not None:
                if v not in d.choices:
                    break
                params[d.name] = d.choices.index(v)
            elif d.low <= v <= d.high:
                params[d.name] = v
            else:
                break
        else:
            if all(given[k] == start[k] for k in start if k not in searched):
                study.enqueue_trial(params)
    # A small space runs out of new candidates: a repeat costs no replay, so
    # the asks are bounded too.
    for _ in range(20 * evaluate.budget):
        if evaluate.left() <= 0:
            break
        trial = study.ask()
        options = {}
        for d in dims:
            if d.choices is not None:
                options[d.name] = d.choices[trial.suggest_int(d.name, 0, len(d.choices) - 1)]
            elif d.log:
                options[d.name] = trial.suggest_int(d.name + "+1", d.low + 1, d.high + 1,
                                                    log=True) - 1  # fmt: skip
            else:
                options[d.name] = trial.suggest_int(d.name, d.low, d.high)
        t = evaluate(Policy.model_validate({**start, **options}), train)
        big = 0.0 if t.feasible else 1e18 * (1 + evaluate.min_retention - t.figures["retention"])
        study.tell(trial, t.value + big)
    full = [t for t in evaluate.trials if t.sessions == len(train)]
    return min(full, key=_rank)


def search(
    corpus: Session | Transcript | Iterable[Session],
    *,
    limits: Limits | Mapping[str, int],
    space: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    objective: str | None = None,
    min_retention: float = 0.0,
    budget: int = 64,
    model: str | Sequence[str] | None = None,
    config: CompactionConfig | Mapping[str, Any] | None = None,
    prices: Mapping[str, Any] | None = None,
    cache: str = "5m",
    method: str = "random",
    holdout: float = 0.3,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    as_sent: str | Policy | Mapping[str, Any] | AsSent | SentBaseline | None = None,
) -> SearchResult:
    """Search ``space`` for the policy of least ``objective`` at retention at
    least ``min_retention`` on a training split, and report it and every
    preset on the held-out split (see the module doc). ``budget``: replays
    (a candidate on a subset of the training split is one). ``progress(done,
    budget)`` after each replay. ``as_sent``: each run's baseline replayed as
    it was sent (``replay``'s), chosen once per run over the whole corpus and
    shared by every replay (``SearchResult.baseline``). Every option is
    checked before any replay."""
    cfg = check_config(config, "search")
    sent_as = parse_as_sent(as_sent, "as_sent")
    models = model_names(model)
    objective = check_search_options(objective, min_retention, budget, method, models)
    dims = load_space(space, cfg.policy)
    window = check_window(Limits.coerce(limits), cfg)
    sheets_for(model, cfg, prices, cache)  # an unknown model fails before any replay
    sessions = {s.id: s for s in _sessions(corpus)}
    train, held = split(sessions, holdout, seed)
    baseline = None if sent_as is None else sent_baseline(
        list(sessions.values()), sent_as, limits=window, config=cfg, model=model)  # fmt: skip
    rng = random.Random(seed)
    order = sorted(train, key=lambda s: _unit(seed + 1, s))  # the rungs' subsets
    done = 0

    def run(chosen: list[Session], policy: Policy) -> dict[str, Any]:
        nonlocal done
        s = replay(chosen, policy, limits=window, config=cfg, model=model, prices=prices,
                   cache=cache, as_sent=baseline).summary  # fmt: skip
        done += 1
        if progress is not None:
            progress(done, budget)
        return {k: s.get(k) for k in FIGURES}

    evaluate = _Evaluator(sessions, run, objective, min_retention, budget)
    if method == "tpe":
        best = _tpe(evaluate, dims, cfg.policy, order, seed)
    elif method == "random":
        for p in _candidates(dims, cfg.policy, rng, budget):
            evaluate(p, order)
        best = min(evaluate.trials, key=_rank)
    else:
        n = _halving_size(budget, len(order))
        best = _halving(evaluate, _candidates(dims, cfg.policy, rng, n), order)
    trials = list(evaluate.trials)
    held_sessions = [sessions[i] for i in held]
    presets = {name: run(held_sessions, p) for name, p in PRESETS.items()}
    mine = next((f for n, f in presets.items() if PRESETS[n] == best.policy), None)
    held_out = mine if mine is not None else run(held_sessions, best.policy)
    key = _key(objective)
    goal = _feasible(held_out, min_retention) and not any(
        _feasible(f, min_retention) and f[key] < held_out[key] for f in presets.values()
    )
    return SearchResult(policy=best.policy, objective=objective, min_retention=min_retention,
                        method=method, train=best.figures, held_out=held_out, presets=presets,
                        goal_met=goal, train_ids=train, held_out_ids=held,
                        trials=trials, baseline=baseline)  # fmt: skip


__all__ = [
    "DEFAULT_SPACE",
    "FIGURES",
    "METHODS",
    "OBJECTIVES",
    "Dimension",
    "SearchResult",
    "Trial",
    "check_search_options",
    "load_space",
    "search",
    "split",
]
