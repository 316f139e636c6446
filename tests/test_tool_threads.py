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

import pytest

from toolwire.errors import ToolThreadsExhaustedError, ToolTimeoutError
from toolwire.tool_threads import PluginRunner


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
