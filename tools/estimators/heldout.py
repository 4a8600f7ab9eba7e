"""A held-out evaluation corpus of many content types, and the estimate's
error on it per type (docs/estimators.md, "Out of sample").

    python tools/estimators/heldout.py                      # o200k and cl100k, the shipped tables
    python tools/estimators/heldout.py --family qwen --json out.json
    python tools/estimators/heldout.py --fetch-only          # download and unpack, nothing else

The sources are Debian packages fetched with ``apt-get download`` into
``--cache`` (default /tmp/ctxcompact-heldout; never into the repository) and
unpacked there, this machine's Python standard library, and the agent runs of
../shared/data:

    package             content types derived from it
    openjdk-17-source   code-java, stack-trace (Java frames), diff
    golang-1.19-src     code-go, json (its testdata), stack-trace (Go panics), diff
    rust-src            code-rust
    linux-source-6.1    code-c (kernel/, mm/, fs/ext4, net/ipv4), prose
                        (Documentation/admin-guide, process), log (its printk formats)
    python3.11-doc      prose (the HTML manuals as text)
    /usr/lib/python3.11 code-python, json (records of its functions), stack-trace
                        (tracebacks), diff

Every type is cut into "messages" at line ends, log-uniform 200 B to 20 KB,
and consecutive messages of a type into "sessions" of 50 to 100 messages; the
agent runs (type ``transcript``) keep their own messages and runs. Logs,
stack traces, JSON records and diffs are generated from the real sources
(real identifiers, paths, format strings and code lines) with a fixed seed.

A message's error is (estimate - exact) / exact on messages of 20+ exact
tokens; a session's is the same on its totals. ``bias`` is sum(estimate) /
sum(exact) - 1 over a type's messages: a bias does not average out over a
session. ``IN_FIT`` says which types the shipped tables' corpus (corpus.py)
had a kind of: the files here are other files, but of that kind.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import html.parser
import json
import pickle
import random
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import vocab

CACHE = Path("/tmp/ctxcompact-heldout")
PACKAGES = (
    "openjdk-17-source",
    "golang-1.19-src",
    "rust-src",
    "linux-source-6.1",
    "python3.11-doc",
)
#: The slice of the kernel tree unpacked (the whole tree is 1.4 GB).
LINUX_SLICE = (
    "kernel",
    "mm",
    "fs/ext4",
    "net/ipv4",
    "Documentation/admin-guide",
    "Documentation/process",
)
PYTHON_STDLIB = Path("/usr/lib/python3.11")

TYPES = (
    "code-java",
    "code-go",
    "code-rust",
    "code-c",
    "code-python",
    "prose",
    "json",
    "log",
    "stack-trace",
    "diff",
    "transcript",
)
#: Types the shipped tables were fitted on (corpus.py: the training half of
#: these types' sessions here, and 75% of the agent runs).
IN_FIT = frozenset({*corpus.HELDOUT_FITTED, "transcript"})
#: Bytes per type at most (the machine is shared: tens of MB in all).
BUDGET = 6_000_000
MIN_TOKENS = 20
SESSION = (50, 100)
MESSAGE = (200, 20_000)


@dataclass(frozen=True)
class Message:
    text: str
    kind: str
    session: str


def train_half(session: str) -> bool:
    """Whether a session is in the half fitted on (fit.py through corpus.py,
    loto.py); the other half is what ``--eval-half`` reports on."""
    return hashlib.sha256(session.encode()).digest()[0] < 128


def fitted_on(m: Message) -> bool:
    """Whether the shipped tables' fit (corpus.py) read this message's session."""
    if m.kind == "transcript":
        return corpus._split("transcript", m.session) == "train"
    return m.kind in corpus.HELDOUT_FITTED and train_half(m.session)


# --- fetching ----------------------------------------------------------------


def fetch(cache: Path = CACHE) -> Path:
    """Download the packages (``apt-get download``) and unpack them under
    ``cache/root``; idempotent."""
    root = cache / "root"
    done = cache / "unpacked"
    if done.exists():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    root.mkdir(exist_ok=True)
    missing = [p for p in PACKAGES if not list(cache.glob(f"{p}_*.deb"))]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=cache, check=True)
    for deb in sorted(cache.glob("*.deb")):
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(root)], stdin=tar.stdout, check=True)
        if tar.wait() != 0:
            raise RuntimeError(f"dpkg-deb failed on {deb}")
    kernel = next((root / "usr/src").glob("linux-source-*.tar.xz"))
    top = kernel.name.removesuffix(".tar.xz")
    subprocess.run(
        ["tar", "-xJf", str(kernel), "-C", str(root), *(f"{top}/{d}" for d in LINUX_SLICE)],
        check=True,
    )
    kernel.unlink()  # 138 MB no longer needed
    done.write_text("ok\n")
    return root


# --- sources -------------------------------------------------------------------


def _files(root: Path, patterns: tuple[str, ...], rng: random.Random) -> list[Path]:
    found = sorted({p for pat in patterns for p in root.rglob(pat) if p.is_file()})
    rng.shuffle(found)
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _texts(paths: list[Path]) -> Iterator[tuple[str, str]]:
    for p in paths:
        text = _read(p)
        if text and len(text) >= 200:
            yield str(p), text


def _java(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    with zipfile.ZipFile(next(root.glob("usr/lib/jvm/openjdk-*/lib/src.zip"))) as z:
        names = sorted(n for n in z.namelist() if n.endswith(".java"))
        rng.shuffle(names)
        for n in names:
            try:
                text = z.read(n).decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(text) >= 200:
                yield n, text


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style", "nav"):
            self.skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "nav"):
            self.skip = max(0, self.skip - 1)
        elif tag in ("p", "div", "li", "pre", "h1", "h2", "h3", "dt", "dd", "tr"):
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def _html_text(text: str) -> str:
    parser = _Text()
    parser.feed(text)
    lines = [line.rstrip() for line in "".join(parser.out).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def _prose(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    rst = _files(next(root.glob("linux-source-*")) / "Documentation", ("*.rst", "*.txt"), rng)
    docs = _files(root / "usr/share/doc/python3.11/html", ("*.html",), rng)
    rst_texts, html_texts = _texts(rst), _texts(docs)
    for a, b in zip(rst_texts, html_texts):  # alternate the two sources
        yield a
        yield b[0], _html_text(b[1])


def _python_records(rng: random.Random) -> Iterator[tuple[str, str]]:
    """JSON as tools return it: records of the stdlib's functions, pretty or compact."""
    for i, (path, text) in enumerate(_texts(_files(PYTHON_STDLIB, ("*.py",), rng))):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        records = [
            {
                "name": node.name,
                "file": path,
                "line": node.lineno,
                "args": [a.arg for a in node.args.args],
                "async": isinstance(node, ast.AsyncFunctionDef),
                "doc": ast.get_docstring(node),
                "decorators": len(node.decorator_list),
            }
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        if records:
            if i % 2:
                yield path, json.dumps({"results": records}, indent=2)
            else:
                yield path, "\n".join(json.dumps(r, separators=(",", ":")) for r in records)


def _json(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    found = _texts(_files(root / "usr/share/go-1.19", ("*.json",), rng))
    records = _python_records(rng)
    for a, b in zip(records, records):
        yield a
        yield b
        nxt = next(found, None)
        if nxt is not None:
            yield nxt


def _fill(fmt: str, rng: random.Random) -> str:
    def one(m: re.Match) -> str:
        c = m.group(0)[-1]
        if c in "di":
            return str(rng.choice([0, 1, -22, rng.randrange(10**6)]))
        if c == "u":
            return str(rng.randrange(10**9))
        if c in "xX":
            return f"{rng.randrange(2**32):x}"
        if c == "p":
            return f"{rng.randrange(2**48):016x}"
        if c == "s":
            return rng.choice(["eth0", "sda1", "ext4", "kworker/0:1", "systemd", "nvme0n1"])
        if c == "c":
            return "x"
        return "0"

    return re.sub(r"%[-+ #0-9.]*(?:l{0,2}|z|h{0,2})[diuxXpsc]", one, fmt).replace("\\n", "")


def _log(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    """System logs built from the kernel's own printk formats."""
    formats: list[tuple[str, str]] = []
    for path, text in _texts(_files(next(root.glob("linux-source-*")), ("*.c",), rng)):
        sub = Path(path).parent.name
        for m in re.finditer(
            r'\b(pr_(?:info|warn|err|debug|notice)|printk)\(\s*"([^"]{8,})"', text
        ):
            formats.append((sub, m.group(2)))
        if len(formats) > 20_000:
            break
    levels = ["INFO", "WARN", "ERROR", "DEBUG", "NOTICE"]
    t = 1_780_000_000.0
    for n in range(2_000):
        lines = []
        style = n % 3
        for _ in range(rng.randrange(40, 400)):
            sub, fmt = rng.choice(formats)
            msg = _fill(fmt, rng)
            t += rng.expovariate(2.0)
            day, hour, minute = (
                int(t // 86400) % 28 + 1,
                int(t % 86400) // 3600,
                int(t % 3600) // 60,
            )
            ts = f"2026-05-{day:02d}T{hour:02d}:{minute:02d}:{t % 60:09.6f}"
            if style == 0:
                lines.append(f"{ts}+00:00 build-7 kernel: [{t % 100000:12.6f}] {sub}: {msg}")
            elif style == 1:
                lines.append(f"{ts}Z {rng.choice(levels):<6} [{sub}] {msg}")
            else:
                pid = rng.randrange(100, 60000)
                lines.append(
                    f"{ts[:19].replace('T', ' ')},{int(t * 1000) % 1000:03d} {sub}[{pid}]: {msg}"
                )
        yield f"log/{n}", "\n".join(lines) + "\n"


def _stack_traces(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    """Java, Python and Go traces whose frames are real functions of the sources."""
    java: list[tuple[str, str, str, int]] = []
    for _name, text in _java(root, rng):
        pkg = re.search(r"^package ([\w.]+);", text, re.M)
        cls = re.search(r"\b(?:class|interface|enum|record) (\w+)", text)
        if not pkg or not cls:
            continue
        for m in re.finditer(
            r"^\s+(?:public|private|protected|static|final| )+[\w<>\[\], ]+ (\w+)\(", text, re.M
        ):
            java.append(
                (pkg.group(1), cls.group(1), m.group(1), text.count("\n", 0, m.start()) + 1)
            )
        if len(java) > 30_000:
            break
    py: list[tuple[str, str, int, str]] = []
    for path, text in _texts(_files(PYTHON_STDLIB, ("*.py",), rng)[:600]):
        lines = text.splitlines()
        for m in re.finditer(r"^\s*def (\w+)", text, re.M):
            ln = text.count("\n", 0, m.start()) + 1
            body = ln + rng.randrange(1, 6)
            if body <= len(lines) and lines[body - 1].strip():
                py.append((path, m.group(1), body, lines[body - 1].strip()))
    go: list[tuple[str, str, str, int]] = []
    for path, text in _texts(_files(root / "usr/share/go-1.19/src", ("*.go",), rng)[:600]):
        pkg = re.search(r"^package (\w+)", text, re.M)
        for m in re.finditer(r"^func (?:\((\w+) \*?(\w+)\) )?(\w+)\(", text, re.M):
            recv = f"(*{m.group(2)})." if m.group(2) else ""
            go.append(
                (
                    path.replace(str(root), ""),
                    f"{pkg.group(1) if pkg else 'main'}.{recv}{m.group(3)}",
                    "",
                    text.count("\n", 0, m.start()) + 2,
                )
            )
    exceptions = ["java.lang.NullPointerException", "java.lang.IllegalStateException: closed",
                  "java.io.UncheckedIOException: java.io.IOException: Broken pipe",
                  "java.lang.IndexOutOfBoundsException: Index 7 out of bounds for length 7",
                  "org.junit.ComparisonFailure: expected:<[3]> but was:<[4]>"]  # fmt: skip
    pyerrors = ["KeyError: 'id'", "ValueError: invalid literal for int() with base 10: 'x'",
                "AttributeError: 'NoneType' object has no attribute 'read'",
                "TypeError: expected str, bytes or os.PathLike object, not NoneType"]  # fmt: skip
    for n in range(3_000):
        style = n % 3
        out = []
        for _ in range(rng.randrange(1, 4)):
            depth = rng.randrange(4, 60)
            if style == 0:
                out.append(f'Exception in thread "main" {rng.choice(exceptions)}')
                for pkg, cls, meth, ln in (rng.choice(java) for _ in range(depth)):
                    out.append(f"\tat {pkg}.{cls}.{meth}({cls}.java:{ln + rng.randrange(1, 40)})")
                out.append(f"\t... {rng.randrange(1, 80)} more")
            elif style == 1:
                out.append("Traceback (most recent call last):")
                for path, func, ln, code in (rng.choice(py) for _ in range(depth)):
                    out.append(f'  File "{path}", line {ln}, in {func}\n    {code}')
                out.append(rng.choice(pyerrors))
            else:
                out.append(
                    f"panic: runtime error: index out of range [{rng.randrange(9)}]"
                    f" with length {rng.randrange(9)}\n"
                )
                out.append(f"goroutine {rng.randrange(1, 300)} [running]:")
                for path, func, _, ln in (rng.choice(go) for _ in range(depth)):
                    out.append(f"{func}(0xc{rng.randrange(16**9):09x}, 0x{rng.randrange(256):x})")
                    out.append(f"\t{path}:{ln} +0x{rng.randrange(4096):x}")
                out.append("exit status 2")
            out.append("")
        yield f"trace/{n}", "\n".join(out)


def _diffs(root: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    """Unified diffs of real files against an edited copy (lines changed,
    deleted, moved in from elsewhere in the file, an identifier renamed)."""
    go = _texts(_files(root / "usr/share/go-1.19/src", ("*.go",), rng))
    py = _texts(_files(PYTHON_STDLIB, ("*.py",), rng))
    java = _java(root, rng)
    sources = [go, py, java]
    for n in range(10**6):
        if not sources:
            return
        source = sources[n % len(sources)]
        item = next(source, None)
        if item is None:
            sources.remove(source)
            continue
        path, text = item
        old = text.splitlines(keepends=True)[:3000]
        new = list(old)
        for _ in range(rng.randrange(1, 8)):
            i = rng.randrange(len(new))
            what = rng.random()
            if what < 0.3:
                del new[i : i + rng.randrange(1, 6)]
            elif what < 0.6:
                j = rng.randrange(len(old))
                new[i:i] = old[j : j + rng.randrange(1, 12)]
            else:
                words = re.findall(r"\b[A-Za-z_]\w{3,}\b", new[i])
                if words:
                    w = rng.choice(words)
                    new[i] = new[i].replace(w, w + rng.choice(["Count", "_v2", "Ctx", "s"]))
        body = "".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=3))
        if body:
            idx = hashlib.sha1(body.encode()).hexdigest()
            yield path, f"diff --git a/{path} b/{path}\nindex {idx[:7]}..{idx[7:14]} 100644\n{body}"


def _transcripts() -> Iterator[Message]:

    for unit in corpus._transcripts():
        yield Message(unit.text, "transcript", unit.group)


# --- messages and sessions -----------------------------------------------------


def _cut(text: str, rng: random.Random) -> Iterator[str]:
    """A text cut at line ends into message-sized pieces (log-uniform sizes)."""
    lines = text.splitlines(keepends=True)
    i = 0
    lo, hi = np.log10(MESSAGE[0]), np.log10(MESSAGE[1])
    while i < len(lines):
        want = int(10 ** rng.uniform(lo, hi))
        piece, size = [], 0
        while i < len(lines) and size < want:
            piece.append(lines[i][: MESSAGE[1]])
            size += len(piece[-1])
            i += 1
        if "".join(piece).strip():
            yield "".join(piece)


def _sessions(
    kind: str, texts: Iterator[tuple[str, str]], rng: random.Random, budget: int
) -> Iterator[Message]:
    used, session, left = 0, 0, rng.randrange(*SESSION)
    for _, text in texts:
        for piece in _cut(text, rng):
            yield Message(piece, kind, f"{kind}/{session}")
            used += len(piece.encode())
            left -= 1
            if left == 0:
                session, left = session + 1, rng.randrange(*SESSION)
            if used >= budget:
                return


def messages(
    root: Path, budget: int = BUDGET, seed: int = 0, kinds: tuple[str, ...] = TYPES
) -> list[Message]:
    """The held-out corpus: deterministic for a seed and the packages' versions
    (kept in the cache folder once built, as it takes minutes)."""
    saved = root.parent / f"messages-{budget}-{seed}-{'+'.join(kinds)}.pickle"
    if saved.exists():
        return [Message(*row) for row in pickle.loads(saved.read_bytes())]
    out = _build(root, budget, seed, kinds)
    saved.write_bytes(pickle.dumps([(m.text, m.kind, m.session) for m in out]))
    return out


def _build(root: Path, budget: int, seed: int, kinds: tuple[str, ...]) -> list[Message]:
    out: list[Message] = []
    linux = next(root.glob("linux-source-*"))
    sources = {
        "code-java": lambda r: _java(root, r),
        "code-go": lambda r: _texts(_files(root / "usr/share/go-1.19/src", ("*.go",), r)),
        "code-rust": lambda r: _texts(_files(root / "usr/src", ("*.rs",), r)),
        "code-c": lambda r: _texts(_files(linux, ("*.c", "*.h"), r)),
        "code-python": lambda r: _texts(_files(PYTHON_STDLIB, ("*.py",), r)),
        "prose": lambda r: _prose(root, r),
        "json": lambda r: _json(root, r),
        "log": lambda r: _log(root, r),
        "stack-trace": lambda r: _stack_traces(root, r),
        "diff": lambda r: _diffs(root, r),
    }
    for kind in kinds:
        rng = random.Random(f"{seed}/{kind}")
        if kind == "transcript":
            out.extend(_transcripts())
        else:
            out.extend(_sessions(kind, sources[kind](rng), rng, budget))
    return out


# --- evaluation ----------------------------------------------------------------


def _stats(est: np.ndarray, exact: np.ndarray) -> dict[str, float]:
    err = (est - exact) / exact
    a = np.abs(err)
    return {
        "n": len(a),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "p99": float(np.percentile(a, 99)),
        "under": float(np.mean(err < 0)),
        "bias": float(est.sum() / exact.sum() - 1),
    }


def evaluate(msgs: list[Message], est: np.ndarray, exact: np.ndarray) -> dict[str, dict]:
    """Per type: per-message statistics (20+ tokens) and the sessions' p95."""
    kinds = np.array([m.kind for m in msgs])
    sessions = np.array([m.session for m in msgs])
    report: dict[str, dict] = {}
    present = set(kinds)  # TYPES first, then other types (loto.py's other-lang)
    for kind in [k for k in TYPES if k in present] + sorted(present - set(TYPES)):
        sel = kinds == kind
        big = sel & (exact >= MIN_TOKENS)
        _, inv = np.unique(sessions[sel], return_inverse=True)
        e_s, x_s = np.bincount(inv, weights=est[sel]), np.bincount(inv, weights=exact[sel])
        keep = x_s >= 200
        entry = _stats(est[big], exact[big])
        entry["sessions"] = int(keep.sum())
        entry["session_p95"] = float(np.percentile(np.abs(e_s[keep] / x_s[keep] - 1), 95))
        entry["bytes"] = int(sum(len(m.text.encode()) for m, s in zip(msgs, sel) if s))
        report[kind] = entry
    return report


def exact_counts(msgs: list[Message], family: str) -> np.ndarray:
    import ctxcompact as cc
    import pyarrow as pa

    arr = pa.array([m.text for m in msgs])
    return np.asarray(cc.scans.count_tokens_array(arr, family).to_numpy(), dtype=np.float64)


def shipped_estimate(msgs: list[Message], method: str) -> np.ndarray:
    import ctxcompact as cc
    import pyarrow as pa

    arr = pa.array([m.text for m in msgs])
    return np.asarray(cc.scans.estimate_tokens_array(arr, method).to_numpy(), dtype=np.float64)


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def markdown(rows: list[tuple[str, str, dict[str, dict]]]) -> str:
    lines = [
        "| family | estimate | type | in today's fit | messages | p50 / p95 / p99 | bias | under "
        "| sessions | session p95 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for family, name, report in rows:
        for kind, s in report.items():
            lines.append(
                f"| {family} | {name} | {kind} | {'yes' if kind in IN_FIT else 'no'} | {s['n']:,} "
                f"| {_pct(s['p50'])} / {_pct(s['p95'])} / {_pct(s['p99'])}"
                f" | {100 * s['bias']:+.1f}% "
                f"| {_pct(s['under'])} | {s['sessions']} | {_pct(s['session_p95'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", choices=vocab.FAMILIES)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--budget", type=int, default=BUDGET, help="bytes per content type")
    parser.add_argument("--fetch-only", action="store_true")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument(
        "--eval-half",
        action="store_true",
        help="of the types the tables were fitted on, only the sessions held out of the fit",
    )
    args = parser.parse_args(argv)
    root = fetch(args.cache)
    if args.fetch_only:
        return 0
    msgs = messages(root, args.budget)
    if args.eval_half:
        msgs = [m for m in msgs if not fitted_on(m)]
    size = sum(len(m.text.encode()) for m in msgs)
    print(f"held-out corpus: {len(msgs):,} messages, {size / 1e6:.1f} MB", file=sys.stderr)
    rows = []
    for family in args.family or ["o200k", "cl100k"]:
        exact = exact_counts(msgs, family)
        for name, method in (("fitted", family), ("opencode", "opencode")):
            rows.append((family, name, evaluate(msgs, shipped_estimate(msgs, method), exact)))
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
