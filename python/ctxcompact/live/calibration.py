"""Self-calibration of token estimates from the usage providers report.

Every model call reports the prompt tokens the provider counted. Set beside
the estimate of what was sent, that gives the ratio by which the estimate
is off for this model: its tokenizer (Claude's is not public), the framing
the provider adds (tool schemas, chat templates), and content the estimate
fits less well. ``UsageCalibrator`` keeps, per model, a robust running
estimate of that ratio (the median of the recent ratios, so one odd call
does not move it) and scales later estimates by it once enough calls are
seen::

    calibrator = UsageCalibrator()
    calibrator.observe("claude-sonnet-4", estimated=41_200, reported=47_950)
    ...
    budget_tokens = calibrator.calibrate("claude-sonnet-4", estimate)

``CompactionLoop(..., calibrator=...)`` does this around every call: it
records what it estimated before the call and the usage after it, and its
budgets use the calibrated figure.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from ctxcompact.errors import ConfigError

#: A ratio outside this range is not a tokenizer difference but a mismatch
#: (the estimate missed most of the prompt, or usage of another call): not learnt.
PLAUSIBLE = (0.25, 4.0)


class UsageCalibrator:
    """Per model, the ratio of reported prompt tokens to estimated ones.

    ``min_calls``: observations before ``calibrate`` scales anything (until
    then it returns the estimate unchanged). ``window``: how many recent
    ratios the median is taken over (older ones are forgotten, so a changed
    system prompt or model version is followed). Thread-safe.
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
        self._ratios: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def observe(self, model: str, *, estimated: int, reported: int) -> bool:
        """Learn from one call: ``estimated`` tokens of what was sent, and the
        ``reported`` prompt tokens (input, cache reads and writes). Returns
        whether the ratio was learnt (an empty call, or a ratio outside
        ``PLAUSIBLE``, is not)."""
        for name, value in (("estimated", estimated), ("reported", reported)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(
                    f"{name} tokens of model {model!r} must be a non-negative integer, "
                    f"got {value!r}",
                    column=name,
                )
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a non-empty string, got {model!r}", column="model")
        if estimated == 0 or reported == 0:
            return False
        ratio = reported / estimated
        if not PLAUSIBLE[0] <= ratio <= PLAUSIBLE[1]:
            return False
        with self._lock:
            self._ratios.setdefault(model, deque(maxlen=self.window)).append(ratio)
        return True

    def calls(self, model: str) -> int:
        """Ratios currently kept for ``model``."""
        with self._lock:
            return len(self._ratios.get(model, ()))

    def ratio(self, model: str) -> float | None:
        """The model's current ratio (median of the kept ones), or ``None``
        before ``min_calls`` observations."""
        with self._lock:
            ratios = self._ratios.get(model)
            if ratios is None or len(ratios) < self.min_calls:
                return None
            return statistics.median(ratios)

    def calibrate(self, model: str, estimate: int) -> int:
        """``estimate`` scaled by the model's ratio (rounded up), or unchanged
        before enough calls are seen."""
        ratio = self.ratio(model)
        return estimate if ratio is None else math.ceil(estimate * ratio)

    # --- persistence ----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot (settings and every model's kept ratios)."""
        with self._lock:
            return {
                "min_calls": self.min_calls,
                "window": self.window,
                "ratios": {m: list(r) for m, r in self._ratios.items()},
            }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> UsageCalibrator:
        """Rebuild from ``state()``; a ``ConfigError`` names what is wrong."""
        if not isinstance(state, Mapping):
            raise ConfigError(f"calibrator state must be a mapping, got {type(state).__name__}")
        unknown = set(state) - {"min_calls", "window", "ratios"}
        if unknown:
            raise ConfigError(f"unknown field(s) in calibrator state: {sorted(unknown)}")
        calibrator = cls(min_calls=state.get("min_calls", 3), window=state.get("window", 64))
        ratios = state.get("ratios", {})
        if not isinstance(ratios, Mapping):
            raise ConfigError("calibrator state: 'ratios' must map model names to lists",
                              column="ratios")  # fmt: skip
        for model, values in ratios.items():
            if not isinstance(values, list) or not all(
                isinstance(v, int | float) and not isinstance(v, bool)
                and PLAUSIBLE[0] <= v <= PLAUSIBLE[1]
                for v in values
            ):  # fmt: skip
                raise ConfigError(
                    f"calibrator state: ratios of model {model!r} must be a list of numbers "
                    f"in {PLAUSIBLE}",
                    column="ratios",
                )
            calibrator._ratios[model] = deque((float(v) for v in values), maxlen=calibrator.window)
        return calibrator


def prompt_tokens(usage: Any) -> int:
    """The prompt tokens a provider counted: input plus cache reads and writes."""
    from ctxcompact.scans.overflow import Usage

    u = Usage.coerce(usage)
    return u.input + u.cache_read + u.cache_write


__all__ = ["PLAUSIBLE", "UsageCalibrator", "prompt_tokens"]
