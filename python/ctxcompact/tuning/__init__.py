"""Tuning compaction policy on stored runs: replay each run call by call under
a policy, with what every call would have been sent and what it would cost."""

from ctxcompact.tuning.prices import PRICES, Price, price_of
from ctxcompact.tuning.replay import CALL_SCHEMA, Replay, replay, replay_session

__all__ = ["CALL_SCHEMA", "PRICES", "Price", "Replay", "price_of", "replay", "replay_session"]
