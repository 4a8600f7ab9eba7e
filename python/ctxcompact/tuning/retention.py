"""What the prompts still show of what a run stated, measured without a model.

Two scores share the facts below. ``RunRetention`` (the ``retention`` of a
replay): per call, the share of the facts the run stated so far that the
prompt still shows, kept incrementally; comparable between policies (no
compaction scores 1.0, a policy clearing more never scores higher).
``score_compaction`` (``compaction_retention``): per compaction, what it kept
of what it removed.

Facts are extracted deterministically from the messages a compaction took out
of the model input (the ones the next call no longer sees as they were) and
looked up in everything the next call does see: the summary, placeholders,
the messages that stayed. Six kinds:

- ``task``: the run's first user request; ``directive``: a later user request;
  ``plan``: the newest assistant text laying out steps. Prose is paraphrased by
  a summary, so these count as kept when at least ``PROSE_KEPT`` of their
  distinct content words (the first ``PROSE_WORDS`` of them) are still there.
- ``path``: a file path the user or the agent wrote (texts and call
  arguments; not the listings inside tool outputs); kept when it appears
  verbatim.
- ``identifier``: a code name the user or the agent wrote (snake_case,
  camelCase, a dotted call, a backquoted span: paired as written, fences
  and prose left out); kept when it appears verbatim.
- ``error``: an error a tool reported (an exception name, else the error
  line's opening words), noted as resolved when a later result of the same
  tool reported none; kept when its signature appears verbatim.

The score of a compaction is kept / removed facts (1.0 when it removed none);
a policy's ``compaction_retention`` is the same ratio over all its
compactions: pooled over each policy's own removals, it does not compare
policies that remove different amounts. A heuristic, and a stable one: it
does not grade a summary's prose.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxcompact.live.summary import content_text, is_request

Kind = Literal["task", "directive", "plan", "path", "identifier", "error"]
KINDS: tuple[Kind, ...] = ("task", "directive", "plan", "path", "identifier", "error")

#: A prose fact is kept when this share of its content words is still there.
PROSE_KEPT = 0.5
#: Content words of a prose fact that are checked (its opening ones).
PROSE_WORDS = 40
#: Error and plan texts are shown cut to this many characters.
SHOWN_CHARS = 160

_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]{3,}")
# Words too common to tell a task from another.
_STOP_WORDS = (
    "that this with from have will would should could there their them then than what "
    "when which where while into about after before been being also only just very more "
    "most some such each other your yours please thanks need make sure like does done "
    "using used file files code line lines here were they these those"
)
_STOP = frozenset(_STOP_WORDS.split())
_PATH = re.compile(
    r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w\.[A-Za-z0-9]{1,8}(?![\w/])"
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|java|go|rs|c|cc|cpp|h|hpp|rb|php|cs|kt|"
    r"swift|scala|md|rst|json|yaml|yml|toml|ini|cfg|txt|sh|sql|html|css|xml)(?![\w/])"
)
# A backquoted span: matched on the text as written, so each closing backtick
# pairs with its own opening one (taking a path out first would leave a lone
# pair of backticks, and the prose between two spans would read as one).
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"``+")
#: A backquoted span is a code name when it is this long (characters).
SPAN_CHARS = (3, 80)
# Prose in a span (an unpaired backtick): four or more plain words, or a sentence break.
_PROSE_WORD = re.compile(r"[A-Za-z]+[,;:.!?]?")
_SENTENCE = re.compile(r"[.!?;] +[A-Z]")
_IDENT = re.compile(
    r"\b([A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]+)\b"
    r"|\b([a-z][a-z0-9]*[A-Z][A-Za-z0-9]*)\b"
    r"|\b([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b"
    r"|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\("
)
_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception)|panicked|Segmentation fault)\b")
_ERROR_LINE = re.compile(r"^\s*(?:error|fatal|failed|failure|traceback)\b[:\s(]", re.I)
_PLAN = re.compile(
    r"^\s*(?:\d+[.)]|- \[[ x]\]|step \d+)\s+\S|\b(?:plan|next steps?)\b", re.I | re.M
)


@dataclass(frozen=True)
class Fact:
    """One piece of information: its kind, what is shown, what is looked for."""

    kind: Kind
    text: str
    #: Errors: a later result of the same tool reported no error.
    resolved: bool = False
    #: Prose: the content words checked (empty for verbatim facts).
    words: frozenset[str] = field(default=frozenset(), compare=False)

    def kept_in(self, haystack: str, haystack_words: frozenset[str]) -> bool:
        if self.words:
            share = len(self.words & haystack_words) / len(self.words)
            return share >= PROSE_KEPT
        return self.text in haystack

    def label(self) -> str:
        suffix = " (resolved later)" if self.resolved else ""
        return f"{self.kind}: {self.text}{suffix}"


def _share(kept: int, of: int) -> float:
    """A retention score: the share of ``of`` facts that is kept (1.0 of none)."""
    return 1.0 if not of else kept / of


@dataclass(frozen=True)
class Retention:
    """What one compaction removed and which of it is gone."""

    removed: tuple[Fact, ...]
    lost: tuple[Fact, ...]

    @property
    def kept(self) -> int:
        return len(self.removed) - len(self.lost)

    @property
    def score(self) -> float:
        return _share(self.kept, len(self.removed))


def _arguments(message: Mapping[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    return "\n".join(
        str((c.get("function") or {}).get("arguments") or "")
        for c in calls
        if isinstance(c, Mapping)
    )


def message_text(message: Mapping[str, Any]) -> str:
    """Everything of a chat message the model reads as text."""
    parts = [content_text(message), _arguments(message)]
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            parts.append(str((call.get("function") or {}).get("name") or ""))
    return "\n".join(p for p in parts if p)


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def _prose(kind: Kind, text: str) -> Fact | None:
    first: dict[str, None] = {}
    for match in _WORD.finditer(text.lower()):  # the opening words only
        if match.group() not in _STOP:
            first.setdefault(match.group())
            if len(first) == PROSE_WORDS:
                break
    words = frozenset(first)
    if not words:
        return None
    shown = " ".join(text.split())
    return Fact(kind, shown[:SHOWN_CHARS], words=words)


def _plain(args: str) -> str:
    """Call arguments as their string values (paths inside JSON escapes read plainly)."""
    try:
        value = json.loads(args)
    except ValueError:
        return args
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(out)


def _written(message: Mapping[str, Any]) -> str:
    """What the user or the agent wrote: texts and call arguments, not tool output."""
    if message.get("role") not in ("user", "assistant"):
        return ""
    args = [_plain(str((c.get("function") or {}).get("arguments") or ""))
            for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]  # fmt: skip
    return "\n".join([content_text(message), *args])


def _error_facts(
    messages: Sequence[Mapping[str, Any]], only: Sequence[Mapping[str, Any]] | None = None
) -> list[Fact]:
    """Errors in the tool results of ``only`` (default: all of ``messages``),
    resolved when a later result of the same tool in ``messages`` had none."""
    wanted = None if only is None else {id(m) for m in only}
    names: dict[str, str] = {}
    results: list[tuple[str, str, bool]] = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            if isinstance(call, Mapping):
                names[str(call.get("id"))] = str((call.get("function") or {}).get("name", "tool"))
        if m.get("role") == "tool":
            tool = names.get(str(m.get("tool_call_id")), "tool")
            results.append((tool, content_text(m), wanted is None or id(m) in wanted))
    facts: list[Fact] = []
    for i, (tool, text, asked) in enumerate(results):
        signatures = _error_signatures(text) if asked else []
        if not signatures:
            continue
        resolved = any(t == tool and not _error_signatures(x) for t, x, _ in results[i + 1 :])
        facts.extend(Fact("error", s, resolved=resolved) for s in signatures)
    return facts


def _error_signatures(text: str) -> list[str]:
    found = dict.fromkeys(m.group(1) for m in _ERROR_NAME.finditer(text))
    if not found:
        for line in text.splitlines():
            if _ERROR_LINE.match(line):
                found[" ".join(line.split())[:60]] = None
                break
    return list(found)


def extract_facts(
    messages: Sequence[Mapping[str, Any]],
    *,
    task_index: int | None = None,
    context: Sequence[Mapping[str, Any]] | None = None,
) -> list[Fact]:
    """The facts of ``messages`` (chat dicts), each once, in order of appearance.

    ``task_index``: the position of the run's first request among them, if it
    is there (it is a ``task``; other requests are ``directive``s). Default:
    the first request in ``messages``. ``context``: the whole history the
    messages are taken from (same objects), where an error's resolution is
    looked for.
    """
    facts: dict[tuple[Kind, str], Fact] = {}

    def add(fact: Fact | None) -> None:
        if fact is not None:
            facts.setdefault((fact.kind, fact.text), fact)

    requests = [i for i, m in enumerate(messages) if is_request(m)]
    first = task_index if task_index is not None else (requests[0] if requests else None)
    for i in requests:
        add(_prose("task" if i == first else "directive", content_text(messages[i])))
    plan = next(
        (t for m in reversed(messages) if m.get("role") == "assistant"
         for t in [content_text(m)] if t and _PLAN.search(t)),
        None,
    )  # fmt: skip
    if plan:
        add(_prose("plan", plan))
    for m in messages:
        written = _written(m)
        if not written:
            continue
        for path in _PATH.findall(written):
            add(Fact("path", path))
        spans, rest = _spans(written)
        for name in spans:
            add(Fact("identifier", name))
        # Names inside a path (``mod_1`` of ``src/mod_1.py``) are the path's.
        for match in _IDENT.finditer(_PATH.sub(" ", rest)):
            name = next(g for g in match.groups() if g)
            if not _PATH.fullmatch(name):
                add(Fact("identifier", name))
    errors = _error_facts(context, messages) if context is not None else _error_facts(messages)
    for fact in errors:
        add(fact)
    return list(facts.values())


def _spans(text: str) -> tuple[list[str], str]:
    """The backquoted code names of ``text`` (paths left out: they are paths),
    and the text without them (the names inside a span are the span's).

    Spans are paired on the text as written; a fence (two backticks or more)
    pairs with nothing. A span that reads as prose is the text between two
    spans, paired by a stray backtick: its closing backtick opens the next.
    """
    text = _FENCE.sub("\n", text)
    names: list[str] = []
    kept: list[str] = []
    pos = 0
    while (m := _SPAN.search(text, pos)) is not None:
        name = m.group(1)
        if _PATH.fullmatch(name) or (is_code := _code_span(name)):
            if not _PATH.fullmatch(name):
                names.append(name)
            kept.append(text[pos : m.start()] + " ")
            pos = m.end()
        elif is_code is None:  # prose: the closing backtick opens the next span
            kept.append(text[pos : m.end() - 1])
            pos = m.end() - 1
        else:  # too short or too long for a name: its bare names are read
            kept.append(text[pos : m.end()])
            pos = m.end()
    kept.append(text[pos:])
    return names, "".join(kept)


def _code_span(text: str) -> bool | None:
    """Whether a backquoted span reads as a code name: True; False when it is
    too short or too long for one; None when it reads as prose (the text
    between two spans: whitespace at an end, a sentence break, plain words)."""
    words = text.split()
    if (text != text.strip() or _SENTENCE.search(text)
            or (len(words) >= 4 and all(_PROSE_WORD.fullmatch(w) for w in words))):  # fmt: skip
        return None
    low, high = SPAN_CHARS
    return low <= len(text) <= high


def _key(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def removed_messages(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The messages of ``before`` that ``after`` no longer has as they were."""
    kept = {_key(m) for m in after}
    return [m for m in before if _key(m) not in kept]


def score_compaction(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    *,
    task: str | None = None,
) -> Retention:
    """What a compaction that turned the model input ``before`` into ``after``
    (chat message lists) kept of what it removed. ``task``: the run's first
    request, so it is told apart from later directives when it is removed."""
    gone = removed_messages(before, after)
    if not gone:
        return Retention((), ())
    task_index = next(
        (i for i, m in enumerate(gone) if task is not None and is_request(m)
         and content_text(m) == task),
        -1,
    )  # fmt: skip
    removed = extract_facts(gone, task_index=task_index, context=before)
    haystack = "\n".join(message_text(m) for m in after)
    plain = "\n".join([haystack, *(_written(m) for m in after)])
    words = _words(plain)
    lost = tuple(f for f in removed if not f.kept_in(plain, words))
    return Retention(tuple(removed), lost)


#: A fact's identity: its kind and text (an error's resolution is only shown).
FactKey = tuple[Kind, str]


#: The facts each message states, by its content: several policies replayed
#: in one process (``replay`` of several, a grid's points) read each once.
_STATED: dict[tuple[bytes, bool], tuple[Fact, ...]] = {}
#: Messages whose facts are kept (the cache is emptied past it).
STATED_CACHED = 50_000


def stated_facts(key: str, message: Mapping[str, Any], *, task: bool) -> tuple[Fact, ...]:
    """``extract_facts`` of ``message`` alone (``key``: its ``_key``; ``task``:
    it is the run's first request), remembered by its content."""
    digest = (hashlib.blake2b(key.encode(), digest_size=16).digest(), task)
    facts = _STATED.get(digest)
    if facts is None:
        facts = tuple(extract_facts([message], task_index=0 if task else -1))
        if len(_STATED) >= STATED_CACHED:
            _STATED.clear()
        _STATED[digest] = facts
    return facts


class RunRetention:
    """The comparable retention of one run, call by call, kept incrementally.

    A fact is *stated* when a message of the run states it (``extract_facts``
    of the message alone: the first request is the ``task``; a message
    appended again as it was states nothing new), as the run appended it:
    the stated facts so far are the same for every policy. A
    call *shows* a fact when a message of its prompt holds it: states it, or
    holds its text verbatim (paths, identifiers, errors) or half its content
    words (task, directives, plans), the test ``score_compaction`` applies,
    here message by message. So a placeholder shows what it still says (the
    ``describe`` one names the tool's target, OpenCode's constant nothing), a
    summary what its text holds. ``score``: shown / stated facts (1.0 while
    none are stated).

    Incremental: each message is read once as it enters the prompt; a fact
    keeps one known holder, is looked for again in the prompt only when that
    holder leaves, and a fact no message holds is looked for only in the
    messages entering the prompt. Feed it ``append`` (the run's messages as
    it wrote them, rendered alone) and ``resend`` (the prompt the previous
    call held plus those messages, against the prompt sent).
    """

    def __init__(self) -> None:
        self._facts: dict[FactKey, Fact] = {}
        #: Messages in the prompt: key -> [how many times, text, its words
        #: (read when a prose fact is first looked for in it)].
        self._prompt: dict[str, list[Any]] = {}
        #: Facts each original message states (its key as the run wrote it).
        self._states: dict[str, tuple[FactKey, ...]] = {}
        #: A fact's known holder in the prompt, and the facts each holder holds.
        self._holder: dict[FactKey, str] = {}
        self._holds: dict[str, set[FactKey]] = {}
        #: Stated facts no message of the prompt holds.
        self._lost: set[FactKey] = set()
        self._task_seen = False

    @property
    def stated(self) -> int:
        return len(self._facts)

    @property
    def shown(self) -> int:
        return len(self._facts) - len(self._lost)

    @property
    def score(self) -> float:
        return _share(self.shown, self.stated)

    def lost(self) -> list[Fact]:
        """The stated facts the prompt no longer shows, in order of statement."""
        return [f for k, f in self._facts.items() if k in self._lost]

    def append(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """The run's ``messages`` (chat dicts, as it wrote them), appended to
        the prompt: their facts are stated, and shown by them."""
        for m in messages:
            key = _key(m)
            if key not in self._states:
                first = not self._task_seen and is_request(m)
                self._task_seen = self._task_seen or first
                facts = stated_facts(key, m, task=first)
                for f in facts:
                    self._facts.setdefault((f.kind, f.text), f)
                self._states[key] = tuple((f.kind, f.text) for f in facts)
            self._enter(key, m)

    def resend(self, before: Sequence[Mapping[str, Any]],
               sent: Sequence[Mapping[str, Any]]) -> None:  # fmt: skip
        """The prompt held ``before`` (the previous prompt and the messages
        appended since) and ``sent`` is what the call sends: the messages
        gone leave, the new ones (placeholders, a summary) enter."""
        n = 0
        for x, y in zip(before, sent, strict=False):
            if x != y:
                break
            n += 1
        if n == len(before) == len(sent):
            return
        gone = Counter(_key(m) for m in before[n:])
        new: list[tuple[str, Mapping[str, Any]]] = []
        for m in sent[n:]:
            key = _key(m)
            if gone[key] > 0:
                gone[key] -= 1
            else:
                new.append((key, m))
        orphans: set[FactKey] = set()
        for key, times in gone.items():
            for _ in range(times):
                orphans |= self._leave(key)
        for key, m in new:
            self._enter(key, m)
        for fact in orphans:
            if fact not in self._holder:
                self._find(fact)

    def _enter(self, key: str, message: Mapping[str, Any]) -> None:
        slot = self._prompt.get(key)
        if slot is not None:
            slot[0] += 1
            return
        text = "\n".join([message_text(message), _written(message)])
        slot = self._prompt[key] = [1, text, None]
        holds = self._holds.setdefault(key, set())
        for fact in self._states.get(key, ()):
            if fact not in self._holder:
                self._holder[fact] = key
                holds.add(fact)
                self._lost.discard(fact)
        for fact in [f for f in self._lost if self._check(f, slot)]:
            self._holder[fact] = key
            holds.add(fact)
            self._lost.discard(fact)

    def _leave(self, key: str) -> set[FactKey]:
        """One copy of message ``key`` leaves; the facts it was the holder of
        when it was the last copy."""
        slot = self._prompt[key]
        slot[0] -= 1
        if slot[0]:
            return set()
        del self._prompt[key]
        orphans = self._holds.pop(key, set())
        for fact in orphans:
            del self._holder[fact]
        return orphans

    def _check(self, fact: FactKey, slot: list[Any]) -> bool:
        f = self._facts[fact]
        if not f.words:
            return f.text in slot[1]
        if slot[2] is None:
            slot[2] = _words(slot[1])
        return f.kept_in(slot[1], slot[2])

    def _find(self, fact: FactKey) -> None:
        for key, slot in self._prompt.items():
            if fact in self._states.get(key, ()) or self._check(fact, slot):
                self._holder[fact] = key
                self._holds.setdefault(key, set()).add(fact)
                return
        self._lost.add(fact)


def shown_score(value: float) -> str:
    """A retention as text: three decimals, more where three would round a
    loss away (0.99987 is "0.9999"; only a score of 1.0 reads "1.000")."""
    if value >= 1.0 or math.isnan(value):  # a NaN reads "nan", never a near-1 score
        return f"{value:.3f}"
    for places in range(3, 10):
        text = f"{value:.{places}f}"
        if float(text) < 1.0:
            return text
    return "0.999999999"


def ranked(counts: Mapping[str, int], n: int | None = 20) -> list[tuple[str, int]]:
    """(label, count) most often first, ties by label; the first ``n`` (all: None)."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def most_lost(retentions: Iterable[Retention], n: int = 20) -> list[tuple[str, int]]:
    """The facts lost most often over many compactions, as (label, count)."""
    return ranked(Counter(f.label() for r in retentions for f in r.lost), n)


__all__ = [
    "KINDS",
    "PROSE_KEPT",
    "PROSE_WORDS",
    "Fact",
    "Retention",
    "RunRetention",
    "content_text",
    "extract_facts",
    "message_text",
    "most_lost",
    "ranked",
    "removed_messages",
    "score_compaction",
    "shown_score",
]
