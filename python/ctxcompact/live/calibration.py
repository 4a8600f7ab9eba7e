"""Self-calibration of token estimates from the usage providers report.

Every model call reports the prompt tokens the provider counted. Set beside
the estimate of what was sent, that shows how the estimate is off for this
model: by a factor (its tokenizer, Claude's is not public, and content the
estimate fits less well) and by an amount (what the provider adds that the
estimate never sees: tool schemas, chat templates, a system prompt the
runtime did not pass). ``UsageCalibrator`` keeps, per model, the recent
(estimate, reported) pairs and fits ``reported = slope x estimate +
intercept`` robustly (Theil-Sen: the median of the pairwise slopes, then the
median intercept; one odd call does not move it), and scales later
estimates by it once enough calls are seen::

    calibrator = UsageCalibrator()
    calibrator.observe("claude-sonnet-4", estimated=41_200, reported=47_950)
    ...
    budget_tokens = calibrator.calibrate("claude-sonnet-4", estimate)

``Compactor(..., calibrator=...)`` does this around every call of a
``CompactionLoop``: the loop records what it estimated before the call and
the usage after it, and the budgets use the calibrated figure.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxcompact._core import calibration_fit
from ctxcompact.errors import ConfigError, InputTypeError, InternalError

#: The slope is kept in this range (a fit outside it is noise, not a tokenizer):
#: ``calibrate::SLOPES`` of the core.
SLOPES = (0.25, 4.0)


@dataclass(frozen=True)
class Calibration:
    """``reported ~ slope x estimate + intercept`` for one model, from ``calls``
    calls (``ctxcompact._core.calibration_fit``, the rule ``replay
    --calibrate`` uses too)."""

    slope: float
    intercept: float
    calls: int
    #: The median and 95th percentile of the calls' relative error after the fit.
    residual_p50: float = 0.0
    residual_p95: float = 0.0

    def apply(self, estimate: int) -> int:
        return max(0, math.ceil(self.slope * estimate + self.intercept))


class UsageCalibrator:
    """Per model, reported prompt tokens as a robust linear function of the estimate.

    ``min_calls``: observations before ``calibrate`` changes anything (until
    then it returns the estimate unchanged). ``window``: how many recent calls
    the fit uses (older ones are forgotten, so a changed system prompt or
    model version is followed). Thread-safe.
    """

    def __init__(self, *, min_calls: int = 3, window: int = 64) -> None:
        for name, value in (("min_calls", min_calls), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}",
                                  column=name)  # fmt: skip
        if min_calls > window:
            raise ConfigError(f"min_calls ({min_calls}) is larger than window ({window})",
                              column="min_calls")  # fmt: skip
        self.min_calls = min_calls
        self.window = window
        self._points: dict[str, deque[tuple[int, int]]] = {}
        self._fits: dict[str, Calibration] = {}
        self._lock = threading.Lock()

    def observe(self, model: str, *, estimated: int, reported: int) -> bool:
        """Learn from one call: ``estimated`` tokens of what was sent, and the
        ``reported`` prompt tokens (input, cache reads and writes). Returns
        whether it was learnt (a call with nothing estimated or reported is not).
        Counts of another kind than an integer (``numbers.Integral``, not a
        bool), or a model that is not a str, are an ``InputTypeError``, as in
        ``calibrate``; a negative count or an empty model a ``ConfigError``."""
        if not isinstance(model, str):
            raise InputTypeError(f"model must be a str, got {type(model).__name__}",
                                 column="model")  # fmt: skip
        counts: list[int] = []
        for name, value in (("estimated", estimated), ("reported", reported)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InputTypeError(
                    f"{name} tokens of model {model!r} must be an integer, "
                    f"got {type(value).__name__} {value!r}",
                    column=name,
                )
            if value < 0:
                raise ConfigError(
                    f"{name} tokens of model {model!r} must be a non-negative integer, "
                    f"got {value!r}",
                    column=name,
                )
            counts.append(int(value))  # a numpy integer kept as an int (state() is JSON)
        estimated, reported = counts
        if not model:
            raise ConfigError(f"model must be a non-empty string, got {model!r}", column="model")
        if estimated == 0 or reported == 0:
            return False
        with self._lock:
            self._points.setdefault(model, deque(maxlen=self.window)).append((estimated, reported))
            self._fits.pop(model, None)
        return True

    def calls(self, model: str) -> int:
        """Calls currently kept for ``model``."""
        with self._lock:
            return len(self._points.get(model, ()))

    def fit(self, model: str) -> Calibration | None:
        """The model's current fit, or ``None`` before ``min_calls`` observations."""
        with self._lock:
            points = list(self._points.get(model, ()))
            if len(points) < self.min_calls:
                return None
            cached = self._fits.get(model)
            if cached is None:
                cached = self._fits[model] = _theil_sen(points)
            return cached

    def fit_named(self, name: str) -> Calibration | None:
        """The fit of ``name`` as a request names its model: the key itself,
        else the one key whose model part (after the provider's ``/``, as
        ``openai/gpt-4o`` for ``gpt-4o``) it is; ``None`` when there is none
        or several providers' keys match (their fits may differ)."""
        if self.calls(name):
            return self.fit(name)
        with self._lock:
            keys = [k for k in self._points if k.rpartition("/")[2] == name]
        return self.fit(keys[0]) if len(keys) == 1 else None

    def calibrate(self, model: str, estimate: int) -> int:
        """``estimate`` as the model's provider would count it (rounded up), or
        unchanged before enough calls are seen."""
        if isinstance(estimate, bool) or not isinstance(estimate, numbers.Integral):
            # Before a fit it came back as given ("x" in, "x" out).
            raise InputTypeError(f"estimate of model {model!r} must be an integer (tokens), got "
                                 f"{type(estimate).__name__}")  # fmt: skip
        if not isinstance(model, str):
            raise InputTypeError(f"model must be a str, got {type(model).__name__}")
        fit = self.fit(model)
        return estimate if fit is None else fit.apply(estimate)

    # --- persistence ----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot: settings and every model's kept (estimate, reported) pairs."""
        with self._lock:
            return {
                "min_calls": self.min_calls,
                "window": self.window,
                "calls": {m: [list(p) for p in pts] for m, pts in self._points.items()},
            }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> UsageCalibrator:
        """Rebuild from ``state()``; a ``ConfigError`` names what is wrong."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"calibrator state must be a mapping, got {type(state).__name__}")
        unknown = set(state) - {"min_calls", "window", "calls"}
        if unknown:
            raise ConfigError(f"unknown field(s) in calibrator state: {sorted(unknown)}")
        calibrator = cls(min_calls=state.get("min_calls", 3), window=state.get("window", 64))
        calls = state.get("calls", {})
        if not isinstance(calls, Mapping):
            raise ConfigError("calibrator state: 'calls' must map model names to lists",
                              column="calls")  # fmt: skip
        for model, pairs in calls.items():
            if not isinstance(pairs, list) or not all(_is_pair(p) for p in pairs):
                raise ConfigError(
                    f"calibrator state: calls of model {model!r} must be a list of "
                    "[estimated, reported] pairs of positive integers",
                    column="calls",
                )
            calibrator._points[model] = deque(((e, r) for e, r in pairs), maxlen=calibrator.window)
        return calibrator


def _is_pair(p: Any) -> bool:
    return (
        isinstance(p, list | tuple)
        and len(p) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in p)
    )


def _theil_sen(points: list[tuple[int, int]]) -> Calibration:
    """The core's fit (``calibrate::fit``, one rule with the batch replay):
    the median pairwise slope (over pairs whose estimates differ by more than
    2%), kept in ``SLOPES``, then the median intercept; without such pairs
    slope 1 and the median difference (what is added to every call)."""
    got = calibration_fit([e for e, _ in points], [r for _, r in points])
    if got is None:  # never: the kept pairs are positive
        raise InternalError("no calibration of calls with nothing estimated or reported")
    slope, intercept, calls, _, _, p50, p95 = got
    return Calibration(slope, intercept, calls, p50, p95)


def prompt_tokens(usage: Any) -> int:
    """The prompt tokens a provider counted: input plus cache reads and writes."""
    from ctxcompact.scans.overflow import Usage

    u = Usage.coerce(usage)
    return u.input + u.cache_read + u.cache_write


__all__ = ["SLOPES", "Calibration", "UsageCalibrator", "prompt_tokens"]
