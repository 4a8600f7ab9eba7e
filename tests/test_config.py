"""CompactionConfig: defaults, environment, files, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError
from ctxcompact.scans import is_overflow
from ctxcompact.scans.overflow import OverflowOptions


def test_defaults_are_opencode() -> None:
    c = CompactionConfig()
    assert (c.auto, c.prune, c.prune_protect, c.prune_minimum) == (True, True, 40_000, 20_000)
    assert c.prune_protected_tools == ["skill"]
    assert (c.proactive_threshold, c.critical_threshold) == (0.80, 0.95)
    assert (c.keep_policy, c.keep_ratio, c.keep_messages) == ("tokens", 0.40, 10)
    assert c.continue_text == "Continue if you have next steps"


@pytest.mark.parametrize(("env", "field"), [
    ("CTXCOMPACT_DISABLE_AUTOCOMPACT", "auto"),
    ("CTXCOMPACT_DISABLE_PRUNE", "prune"),
])  # fmt: skip
def test_kill_switches(monkeypatch: pytest.MonkeyPatch, env: str, field: str) -> None:
    monkeypatch.setenv(env, "1")
    assert getattr(CompactionConfig(), field) is False
    # ... and they beat an explicit value, as OpenCode's flags do.
    assert getattr(CompactionConfig.load(**{field: True}), field) is False
    monkeypatch.setenv(env, "0")
    assert getattr(CompactionConfig(), field) is True


def test_every_field_has_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECT", "1234")
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECTED_TOOLS", '["skill", "todo"]')
    monkeypatch.setenv("CTXCOMPACT_SUMMARY_MODEL", "small-model")
    c = CompactionConfig()
    assert (c.prune_protect, c.prune_protected_tools, c.summary_model) == (
        1234, ["skill", "todo"], "small-model"
    )  # fmt: skip


def test_toml_and_json_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text('[compaction]\nprune_minimum = 5\nsummary_template = "structured"\n')
    c = CompactionConfig.from_file(toml)
    assert (c.prune_minimum, c.summary_template) == (5, "structured")
    js = tmp_path / "c.json"
    js.write_text('{"keep_policy": "messages", "keep_messages": 4}')
    assert CompactionConfig.from_file(js).keep_messages == 4
    # environment beats the file, keyword overrides beat both
    monkeypatch.setenv("CTXCOMPACT_PRUNE_MINIMUM", "7")
    assert CompactionConfig.from_file(toml).prune_minimum == 7
    assert CompactionConfig.from_file(toml, prune_minimum=9).prune_minimum == 9


@pytest.mark.parametrize(("values", "field"), [
    ({"prune_protect": -1}, "prune_protect"),
    ({"proactive_threshold": 0.99}, "configuration"),
    ({"keep_ratio": 1.5}, "keep_ratio"),
    ({"estimate_method": "words"}, "estimate_method"),
    ({"fallback": "pray"}, "fallback"),
    ({"no_such_option": 1}, "no_such_option"),
])  # fmt: skip
def test_invalid_values_name_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        CompactionConfig.load(**values)
    assert e.value.column == field
    assert field in str(e.value) or field == "configuration"


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        CompactionConfig.from_file(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("prune = [")
    with pytest.raises(ConfigError, match=r"broken\.toml: not valid toml"):
        CompactionConfig.from_file(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"prune_minimum": "lots"}')
    with pytest.raises(ConfigError, match=r"wrong\.json: invalid prune_minimum"):
        CompactionConfig.from_file(wrong)
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a table"):
        CompactionConfig.from_file(listing)


def test_config_drives_the_scans_and_overflow() -> None:
    c = CompactionConfig(reserved="default", inclusive=True)
    assert OverflowOptions.from_config(c) == OverflowOptions(reserved="default", inclusive=True)
    usage = {"input": 68_000, "output": 0}
    limits = {"context": 100_000, "output": 32_000}
    assert not is_overflow(usage, limits)  # 68k > 68k is false
    assert is_overflow(usage, limits, c)  # >= with the option
    assert not is_overflow({"input": 10**6, "output": 0}, limits, CompactionConfig(auto=False))


# --- issue 10: errors name their source; every field documented -----------------------


@pytest.mark.parametrize(("env", "value"), [
    ("CTXCOMPACT_PRUNE_PROTECT", "abc"),
    ("CTXCOMPACT_KEEP_RATIO", "2"),
    ("CTXCOMPACT_PRUNE_PROTECTED_TOOLS", "skill"),  # not JSON: pydantic-settings fails early
    ("ctxcompact_estimate_method", "words"),  # matched case-insensitively
])  # fmt: skip
def test_a_bad_environment_value_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as e:
        CompactionConfig()  # the plain constructor too, not only load()
    assert env.upper() in str(e.value) and repr(value) in str(e.value)
    assert e.value.column == env.upper().removeprefix("CTXCOMPACT_").lower()


def test_a_json_field_from_the_environment_shows_its_own_example(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"my-model": {"input": 1, "output": 2')
    with pytest.raises(ConfigError) as e:
        CompactionConfig()
    assert '{"my-model": {"input": 3.0, "output": 15.0}}' in str(e.value)
    assert "skill" not in str(e.value)  # the tool list's example, not a prices object
    monkeypatch.delenv("CTXCOMPACT_PRICES")
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECTED_TOOLS", "skill")
    with pytest.raises(ConfigError, match=r"""e\.g\. '\["skill", "todo"\]'"""):
        CompactionConfig()


def test_a_bad_argument_and_a_bad_file_value_say_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid prune_minimum=-3") as e:
        CompactionConfig(prune_minimum=-3)
    assert "CTXCOMPACT_" not in str(e.value)
    path = tmp_path / "c.toml"
    path.write_text("keep_ratio = 7\n")
    with pytest.raises(ConfigError, match=r"c\.toml: invalid keep_ratio"):
        CompactionConfig.from_file(path)


def test_sources_say_where_each_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[compaction]\nprune_minimum = 5\nkeep_messages = 3\n")
    monkeypatch.setenv("CTXCOMPACT_KEEP_MESSAGES", "4")
    monkeypatch.setenv("CTXCOMPACT_DISABLE_PRUNE", "1")
    cfg = CompactionConfig.from_file(path, prune_protect=9)
    sources = cfg.sources()
    assert set(sources) == set(CompactionConfig.model_fields)
    assert sources["prune_protect"] == "argument"
    assert (cfg.prune_minimum, sources["prune_minimum"]) == (5, f"file {path}")
    assert (cfg.keep_messages, sources["keep_messages"]) == (
        4,
        "environment CTXCOMPACT_KEEP_MESSAGES",
    )
    assert (cfg.prune, sources["prune"]) == (False, "environment CTXCOMPACT_DISABLE_PRUNE")
    assert sources["fallback"] == "default"


def test_docs_config_md_documents_every_field() -> None:
    from ctxcompact.config import fields, reference_markdown

    docs = (Path(__file__).parent.parent / "docs" / "config.md").read_text(encoding="utf-8")
    # regenerate with: ctxcompact config --markdown
    assert reference_markdown() in docs
    for row in fields():
        assert row["meaning"], f"{row['field']} has no description"
        assert f"| `{row['field']}` |" in docs and f"`{row['environment']}`" in docs
    assert {r["field"] for r in fields()} == set(CompactionConfig.model_fields)


def test_a_misspelt_environment_variable_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pydantic-settings ignores unknown names: CTXCOMPACT_PRUNE_PROTCT=5 left
    prune_protect at its default without a word."""
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTCT", "5")
    with pytest.raises(ConfigError, match="CTXCOMPACT_PRUNE_PROTCT is not a ctxcompact setting; "
                       "did you mean CTXCOMPACT_PRUNE_PROTECT") as e:  # fmt: skip
        CompactionConfig()
    assert e.value.column == "CTXCOMPACT_PRUNE_PROTCT"
    monkeypatch.delenv("CTXCOMPACT_PRUNE_PROTCT")
    monkeypatch.setenv("ctxcompact_zzz_unrelated", "1")  # names match case-insensitively
    with pytest.raises(ConfigError, match="CTXCOMPACT_ZZZ_UNRELATED is not a ctxcompact "
                       r"setting \(") as e:  # fmt: skip
        CompactionConfig()


def test_the_variables_read_outside_the_fields_are_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxcompact.config import OTHER_ENV_VARS

    assert {"CTXCOMPACT_DISABLE_AUTOCOMPACT", "CTXCOMPACT_DISABLE_PRUNE",
                              "CTXCOMPACT_PG_BINDIR", "CTXCOMPACT_BENCH_SESSIONS",
                              "CTXCOMPACT_ARTIFACTS"} == OTHER_ENV_VARS  # fmt: skip
    for name in OTHER_ENV_VARS:
        monkeypatch.setenv(name, "0")
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"m": {"input": 1, "output": 2}}')
    monkeypatch.setenv("CTXCOMPACT_POLICY", "swe-agent")
    config = CompactionConfig()
    assert config.prices["m"]["output"] == 2


def test_a_policy_file_named_in_a_config_file_is_found_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was read from the current folder (a missing file, or another one)
    conf = tmp_path / "conf"
    (conf / "pol").mkdir(parents=True)
    (conf / "pol" / "p.toml").write_text("protect = 123\n")
    (conf / "p.json").write_text('{"minimum": 7}')
    (conf / "a.toml").write_text('[compaction]\npolicy = "pol/p.toml"\n')
    (conf / "b.json").write_text('{"policy": "p.json"}')
    (conf / "c.toml").write_text('policy = "swe-agent"\n')  # a preset stays a preset
    monkeypatch.chdir(tmp_path)
    assert CompactionConfig.from_file(conf / "a.toml").prune_policy().protect == 123
    assert CompactionConfig.from_file(conf / "b.json").prune_policy().minimum == 7
    assert CompactionConfig.from_file(conf / "c.toml").policy.name() == "swe-agent"
    (conf / "d.toml").write_text('policy = "missing.toml"\n')
    with pytest.raises(ConfigError, match=r"conf/missing\.toml"):
        CompactionConfig.from_file(conf / "d.toml")


def test_a_too_large_policy_integer_names_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # was "policy option "protect": int too big to convert", raised by the first scan
    huge = tmp_path / "huge.toml"
    huge.write_text("protect = 99999999999999999999\n")
    with pytest.raises(ConfigError, match=rf"{huge}: invalid policy option protect"):
        CompactionConfig(policy=str(huge))
    with pytest.raises(ConfigError, match=r"keep_recent: .*less than or equal to 4294967295"):
        CompactionConfig(policy={"keep_recent": 2**32})
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECT", str(2**64))
    with pytest.raises(ConfigError, match="environment CTXCOMPACT_PRUNE_PROTECT") as caught:
        CompactionConfig().prune_policy()
    assert caught.value.column == "prune_protect"
