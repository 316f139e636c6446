"""The tool threads and the plugin runner (issue 11 item 4): bounded, apart from the default
executor, a time limit per call, a stuck call abandoned without blocking anything else."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestration_kit import NoParams, plugin_of
from toolwire import App, OrchestratorActivatedTool, ToolExecutionResult
from toolwire.errors import ToolThreadsExhaustedError, ToolTimeoutError
from toolwire.registry import DomainSpec
from toolwire.testing import ScriptedModel
from toolwire.tool_threads import IDLE_EXIT_S, PluginRunner


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


async def test_plain_methods_run_in_at_most_the_configured_number_of_threads() -> None:
    runner = PluginRunner(threads=2, timeout_s=None)
    lock = threading.Lock()
    running, most, names = 0, 0, set()

    def work() -> str:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            names.add(threading.current_thread().name)
        time.sleep(0.05)
        with lock:
            running -= 1
        return "done"

    results = await asyncio.gather(*(runner.call(work) for _ in range(6)))

    assert results == ["done"] * 6
    assert most == 2 and len(names) == 2
    assert all(name.startswith("toolwire-tool-") for name in names)


async def test_a_call_over_its_time_limit_raises_and_a_queued_one_never_starts(
    release: threading.Event,
) -> None:
    runner = PluginRunner(threads=1, timeout_s=0.2)
    started: list[str] = []

    def stuck() -> None:
        started.append("stuck")
        release.wait(30)

    def queued() -> None:
        started.append("queued")

    outcomes = await asyncio.gather(runner.call(stuck), runner.call(queued), return_exceptions=True)
    release.set()
    await asyncio.sleep(0.1)  # the stuck call returns; a cancelled queued one must not run now

    assert [type(outcome) for outcome in outcomes] == [ToolTimeoutError, ToolTimeoutError]
    assert "did not finish within 0.2 s (orchestrator.tool_timeout_s)" in str(outcomes[0])
    assert started == ["stuck"]
    assert await runner.call(lambda: "free again") == "free again"


async def test_when_every_thread_is_held_by_an_abandoned_call_new_calls_fail_at_once(
    release: threading.Event,
) -> None:
    runner = PluginRunner(threads=1, timeout_s=0.2)
    with pytest.raises(ToolTimeoutError):
        await runner.call(release.wait, 30)

    begin = time.monotonic()
    with pytest.raises(ToolThreadsExhaustedError, match="all 1 tool threads are held"):
        await runner.call(lambda: "cannot run")
    assert time.monotonic() - begin < 0.1  # no waiting for a thread that may never come back

    release.set()
    deadline = time.monotonic() + 5
    while True:  # the held thread comes back once its call returns
        try:
            assert await runner.call(lambda: "runs") == "runs"
            break
        except ToolThreadsExhaustedError:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)


async def test_stuck_tools_leave_the_default_executor_free(release: threading.Event) -> None:
    """The SQLite session store runs in ``asyncio.to_thread``: it must not wait behind tools."""
    runner = PluginRunner(threads=4, timeout_s=None)
    stuck = [asyncio.ensure_future(runner.call(release.wait, 30)) for _ in range(40)]
    await asyncio.sleep(0.05)

    async with asyncio.timeout(2):
        assert await asyncio.to_thread(lambda: "store answered") == "store answered"

    release.set()
    assert await asyncio.gather(*stuck) == [True] * 40


async def test_the_method_s_own_timeout_error_is_not_mistaken_for_the_time_limit() -> None:
    runner = PluginRunner(threads=1, timeout_s=5)

    async def network_call() -> None:
        raise TimeoutError("upstream took too long")

    with pytest.raises(TimeoutError, match="upstream took too long") as caught:
        await runner.call(network_call)
    assert not isinstance(caught.value, ToolTimeoutError)


def test_a_tool_stuck_for_good_does_not_keep_the_process_from_exiting() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from toolwire.errors import ToolTimeoutError
        from toolwire.tool_threads import PluginRunner

        async def main():
            runner = PluginRunner(threads=1, timeout_s=0.1)
            try:
                await runner.call(threading.Event().wait)
            except ToolTimeoutError:
                print("timed out", flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "timed out"  # after the plugin_call_timed_out event


async def wait_for_no_thread_of(runner: PluginRunner, within_s: float) -> None:
    """Poll until the runner's threads have ended; well under ``IDLE_EXIT_S``, so only a
    release (not the idle timeout) can pass this."""
    assert within_s < IDLE_EXIT_S
    deadline = time.monotonic() + within_s
    while runner.threads.alive:
        assert time.monotonic() < deadline, f"{runner.threads.alive} thread(s) still alive"
        await asyncio.sleep(0.02)


async def test_released_threads_end_at_once_and_a_later_call_starts_them_again(
    release: threading.Event,
) -> None:
    runner = PluginRunner(threads=3, timeout_s=None)
    assert await asyncio.gather(*(runner.call(time.sleep, 0.05) for _ in range(3))) == [None] * 3
    stuck = asyncio.ensure_future(runner.call(release.wait, 30))
    await asyncio.sleep(0.05)
    assert runner.threads.alive == 3

    runner.release_threads()
    await asyncio.sleep(0.2)
    assert runner.threads.busy == 1 and runner.threads.alive == 1  # a running call keeps its own

    release.set()
    assert await stuck is True
    runner.release_threads()
    await wait_for_no_thread_of(runner, within_s=2)
    assert await runner.call(lambda: "runs again") == "runs again"


async def test_a_closed_app_leaves_no_tool_thread_behind(tmp_path: Path) -> None:
    """An app built and closed in a loop (tests, a reload) kept each app's idle tool threads
    for ``IDLE_EXIT_S``: 50 apps, 50 threads and more."""
    (tmp_path / "toolwire.yaml").write_text("sessions:\n  store: memory\n", encoding="utf-8")
    for _ in range(3):
        model = ScriptedModel().on_suitability(["echo"]).on_answer()
        app = App.load(
            tmp_path / "toolwire.yaml",
            plugins=[plugin_of(DomainSpec(name="demo"), PlainEcho)],
            load_entry_points=False,
            llm=model,
        )
        answer = await app.ask("q", domain="demo")
        assert answer.text.startswith("echoed from a tool thread")
        assert app.plugin_runner.threads.alive >= 1
        await app.aclose()
        await wait_for_no_thread_of(app.plugin_runner, within_s=2)


class PlainEcho(OrchestratorActivatedTool[NoParams]):
    """A plain (blocking) method: it runs in a tool thread."""

    name = "echo"

    def executable_instruction(self) -> str:
        return "echo: always"

    def execute_with_result(self, params: NoParams, text: str) -> ToolExecutionResult:
        assert threading.current_thread().name.startswith("toolwire-tool-")
        return ToolExecutionResult.context("echoed from a tool thread")
