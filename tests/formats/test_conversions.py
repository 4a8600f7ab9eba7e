"""Converting a real session from one format to another: nothing is lost on
the way, and a writer that cannot hold a foreign session says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.models import Session

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CLAUDE = DATA / "formats" / "claude-code" / "claude-code-log" / "representative_messages.jsonl"
ROCK = DATA / "transcripts" / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "rev"
ROCK = ROCK / "rock.traj"
needs = pytest.mark.skipif(not DATA.is_dir(), reason="no ../shared/data")


@needs
def test_a_claude_code_session_is_no_openhands_stream(tmp_path: Path) -> None:
    # Claude Code keeps its event envelope under source["event"] too; written as
    # OpenHands events it lost every message (text and tool calls).
    sessions = formats.read(CLAUDE)
    with pytest.raises(FormatError, match="did not come from an OpenHands stream"):
        formats.to_openhands(sessions[0])
    out = tmp_path / "rep.openhands.json"
    with pytest.raises(FormatError, match="did not come from an OpenHands stream"):
        formats.write(sessions[:1], out, "openhands")
    assert not out.exists()


def _texts(session: Session) -> list[tuple[str, str]]:
    return [(m.role, p.text or "") for m in session.messages for p in m.parts if p.type == "text"]


@needs
def test_a_swe_agent_system_prompt_survives_claude_code(tmp_path: Path) -> None:
    # its system message keeps SWE-agent's fields ("agent", "message_type") as
    # source, and the writer took a source without "text_key" for a Claude Code
    # event that holds its text itself: the prompt was dropped
    sessions = formats.read(ROCK)
    system = sessions[0].messages[0]
    assert system.role == "system" and system.parts[0].text
    out = tmp_path / "rock.claude.jsonl"
    formats.write(sessions, out, "claude-code")
    back = formats.read(out)
    assert back[0].messages[0].role == "system"
    assert back[0].messages[0].parts[0].text == system.parts[0].text
    assert _texts(back[0]) == _texts(sessions[0])  # every text, the prompt included
