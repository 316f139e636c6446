"""Settings that only failed at run time are refused when the app loads, at their line, and
``toolwire check`` reports them: a history budget the model's window cannot hold beside the
answer, and a model server's URL without its scheme or host."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from _build_samples import WriteFile
from toolwire import App, ConfigError
from toolwire.cli import app as cli
from toolwire.llm.builtin_profiles import EMBEDDED_PROFILE
from toolwire.llm.profiles import ModelProfile
from toolwire.orchestrator.turn_compression import history_budget_problem, largest_history_tokens
from toolwire.settings import LLMSettings

runner = CliRunner()

FIX = "e.g. http://localhost:8080/v1"


@pytest.fixture
def pharma_only(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only the bundled pharma plugin loads, and the embedded model would serve."""
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma")
    for name in ("TOOLWIRE_LLM_BASE_URL", "TOOLWIRE_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return isolated


def config(write_file: WriteFile, text: str) -> Path:
    return write_file("toolwire.yaml", f"default_domain: pharma\n{text}")


# -- sessions.history_tokens ---------------------------------------------------------------------


def test_the_largest_history_leaves_the_answer_its_rules_findings_and_reply() -> None:
    """The embedded model's 8,192 tokens less the fixed text (512), the answer's reply (384) and
    a compression's reply (512): the default of 2,048 fits with room to spare."""
    assert largest_history_tokens(EMBEDDED_PROFILE) == 6784


def test_a_history_budget_past_the_window_is_refused_at_its_line(
    pharma_only: Path, write_file: WriteFile
) -> None:
    path = config(write_file, "sessions:\n  store: memory\n  history_tokens: 16000\n")

    with pytest.raises(ConfigError) as raised:
        App.load(path)

    (problem,) = raised.value.problems
    assert (problem.path, problem.line) == (str(path), 4)
    assert problem.message == (
        "sessions.history_tokens (16000) must be at most 6784 with the model profile's "
        "context_window_tokens (8192): the answer reads the earlier turns beside its rules, the "
        "tools' findings and its reply; lower it, or use a model with a larger window "
        "(llm.profile)"
    )


def test_a_window_too_small_for_any_history_says_so_rather_than_ask_for_less() -> None:
    """"At most -384" would ask for a value the setting itself refuses (its least is 256)."""
    small = ModelProfile(context_window_tokens=1024)

    problem = history_budget_problem(2048, small)

    assert problem is not None and "must be at most" not in problem
    assert problem.startswith(
        "sessions.history_tokens (2048): the model profile's context_window_tokens (1024) leaves "
        "no room for a conversation's history (at least 256 tokens)"
    )


@pytest.mark.parametrize(
    ("text"),
    [
        "sessions:\n  store: memory\n  history_tokens: 6784\n",
        "llm:\n  profile: {context_window_tokens: 32768}\n"
        "sessions:\n  store: memory\n  history_tokens: 16000\n",
    ],
    ids=["at-the-bound", "larger-window"],
)
def test_a_history_budget_the_window_holds_loads(
    pharma_only: Path, write_file: WriteFile, text: str
) -> None:
    assert App.load(config(write_file, text)).config.sessions.history_tokens > 2048


def test_check_reports_a_history_budget_past_the_window(
    pharma_only: Path, write_file: WriteFile
) -> None:
    config(write_file, "sessions:\n  history_tokens: 16000\n")

    result = runner.invoke(cli, ["check", "--config", "toolwire.yaml"])

    assert result.exit_code == 1
    assert result.stderr.startswith(
        "toolwire.yaml:3: sessions.history_tokens (16000) must be at most 6784 with the model "
        "profile's context_window_tokens (8192)"
    )


# -- llm.base_url --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["http://localhost:8080/v1", "https://api.example.com/v1", "http://[::1]:8080/v1"],
)
def test_a_server_url_with_its_scheme_and_host_is_taken(url: str) -> None:
    assert LLMSettings(base_url=url).base_url == url


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:8080", "needs an http:// or https:// scheme and a host"),
        ("127.0.0.1:8080/v1", "needs an http:// or https:// scheme and a host"),
        ("ftp://models.example.com/v1", "needs an http:// or https:// scheme and a host"),
        ("http:///v1", "needs an http:// or https:// scheme and a host"),
        ("http://[::1/v1", "is not a URL (Invalid IPv6 URL)"),
    ],
)
def test_check_refuses_a_server_url_without_scheme_or_host_at_its_line(
    pharma_only: Path, write_file: WriteFile, url: str, says: str
) -> None:
    """``check`` passed them; the first question then failed, "cannot connect to the model
    server at localhost:8080/"."""
    config(write_file, f"llm:\n  base_url: '{url}'\n  model: m\n")

    result = runner.invoke(cli, ["check", "--config", "toolwire.yaml"])

    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"toolwire.yaml:3: llm.base_url: Value error, {says}"), line
    assert line.endswith(FIX)


def test_check_refuses_a_server_url_without_scheme_in_the_environment(
    pharma_only: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_LLM_BASE_URL", "localhost:8080")
    config(write_file, "llm:\n  model: m\n")

    result = runner.invoke(cli, ["check", "--config", "toolwire.yaml"])

    assert result.exit_code == 1
    assert result.stderr == (
        "TOOLWIRE_LLM_BASE_URL (llm.base_url): needs an http:// or https:// scheme and a host: "
        f"write the server's whole URL, {FIX}\n"
    )
    monkeypatch.setenv("TOOLWIRE_LLM_BASE_URL", "http://localhost:8080/v1")
    assert runner.invoke(cli, ["check", "--config", "toolwire.yaml"]).exit_code == 0


def test_a_server_url_the_embedded_provider_does_not_use_is_not_refused(
    pharma_only: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``llm.provider: embedded`` sends nothing to ``TOOLWIRE_LLM_BASE_URL``: a stale value
    left in the shell is no reason to refuse the app."""
    monkeypatch.setenv("TOOLWIRE_LLM_BASE_URL", "localhost:8080")
    config(write_file, "llm:\n  provider: embedded\n")

    result = runner.invoke(cli, ["check", "--config", "toolwire.yaml"])

    assert result.exit_code == 0, result.stderr
