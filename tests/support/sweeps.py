"""How hard the property tests search.

``pytest`` (the README's test command) runs each ``@settings(max_examples=sweep(N))``
test on a tenth of its N examples (at least 20); ``pytest -m slow`` (.ci/run's
second test command) runs them at the full N, with the other slow suites:
conftest.py sets ``FULL`` from the marker expression before the tests are
collected, and marks the property tests ``slow`` in that run.
"""

from __future__ import annotations

#: True under ``pytest -m slow``: the full sweeps.
FULL = False


def sweep(examples: int) -> int:
    """The number of examples to try: ``examples`` in the full sweep, else a tenth."""
    return examples if FULL else min(examples, max(20, examples // 10))
