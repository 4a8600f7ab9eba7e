"""Does a call release the GIL? Count another thread's ticks while it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def ticks_during(fn: Callable[[], Any], seconds: float = 0.1) -> int:
    """Ticks another thread made while ``fn`` ran (read right before and after).

    ``fn`` is called again until ``seconds`` have passed, so that a fast call on
    a busy machine still gives the ticker a chance to be scheduled; that stays
    well inside the switch interval, so a call holding the GIL still gets 0.
    """
    count = 0
    running = threading.Event()
    stop = False

    def ticker() -> None:
        nonlocal count
        running.set()
        while not stop:
            count += 1

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    running.wait()
    before = count
    deadline = time.perf_counter() + seconds
    fn()
    while time.perf_counter() < deadline:
        fn()
    after = count
    stop = True
    thread.join()
    return after - before
