"""Tuning compaction policy on stored runs: replay each run call by call under
a policy, with what every call would have been sent, what it would cost and
what each compaction kept; a grid of policies over a corpus, with its
cost-vs-retention front; a search of the policy space with a held-out split."""

from ctxcompact.tuning.grid import Tuning, load_grid, tune, tune_dataset
from ctxcompact.tuning.prices import PRICE_ROWS, PRICES, Price, PriceRow, price_of, price_row
from ctxcompact.tuning.replay import CALL_SCHEMA, Replay, replay, replay_session
from ctxcompact.tuning.retention import Retention, score_compaction
from ctxcompact.tuning.search import SearchResult, search

__all__ = [
    "CALL_SCHEMA",
    "PRICES",
    "PRICE_ROWS",
    "Price",
    "PriceRow",
    "Replay",
    "Retention",
    "SearchResult",
    "Tuning",
    "load_grid",
    "price_of",
    "price_row",
    "replay",
    "replay_session",
    "score_compaction",
    "search",
    "tune",
    "tune_dataset",
]
