"""Load benchmark of ``toolwire serve`` on loopback against a fake OpenAI-compatible model.

Three processes: a fake OpenAI-compatible model server with a fixed latency per call
(``toolwire.testing.fake_openai``), the toolwire HTTP server (what ``toolwire serve`` runs, with
a one-tool bench domain defined below, the real OpenAI gateway and the SQLite session store),
and this load generator: ``--sessions`` concurrent clients, each sending ``--questions`` requests
one after the other. Every second request starts a conversation whose tool asks a clarifying
question; the next request replies to it, so half the requests resume a stored session.

It prints throughput, p50/p99 latency, errors, the server's memory, and how close throughput
comes to the model-bound limit: with C clients and k model calls of latency L per request, no
server can do better than C / (k × L) requests per second (calls of one request run one after
another). Bounded: stops sending after ``--max-seconds`` and kills what it started.

    .venv/bin/python bench/bench_load.py                 # 50 sessions × 20 questions, 50 ms
    .venv/bin/python bench/bench_load.py --sessions 10 --questions 10 --latency-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

import toolwire
from toolwire import (
    Clarification,
    OrchestratorActivatedTool,
    ToolExecutionResult,
)
from toolwire.hookspecs import RegisterDomain, RegisterTool
from toolwire.registry import DomainSpec

# -- the bench domain (loaded by the server process) -----------------------------------------


class LookupParams(BaseModel):
    topic: str = ""


class LookupTool(OrchestratorActivatedTool[LookupParams]):
    """Answers at once, or asks which topic first when the message says ``clarify``."""

    name = "lookup"

    def executable_instruction(self) -> str:
        return "Does the user ask to look something up?"

    def execute_with_result(self, params: LookupParams, text: str) -> ToolExecutionResult:
        if text.startswith("clarify"):
            return ToolExecutionResult.clarifying_question("Which topic?")
        return ToolExecutionResult.context(f"Found facts about {text[:40]!r}.")

    def execute_with_clarification(
        self, params: LookupParams, text: str, clarification: Clarification
    ) -> ToolExecutionResult:
        return ToolExecutionResult.context(f"Found facts about {clarification.reply!r}.")


@toolwire.hookimpl
def register_domains(register: RegisterDomain) -> None:
    register(DomainSpec(name="bench", description="Load benchmark domain."))


@toolwire.hookimpl
def register_tools(register: RegisterTool) -> None:
    register(LookupTool, domain="bench")


# -- process roles ---------------------------------------------------------------------------


def run_fake_model(latency_s: float) -> None:
    """Role ``fake-model``: answer every structured call with all booleans true."""
    from toolwire.testing.fake_openai import (
        FakeOpenAIServer,
        FakeReply,
        FakeRequest,
        default_output,
    )

    def responder(request: FakeRequest) -> FakeReply:
        schema = request.output_schema
        if schema is None:
            return FakeReply(text="The answer, composed from the tools' context.")
        value = json.loads(default_output(schema))
        if isinstance(value, dict):
            value = {key: True if isinstance(v, bool) else v for key, v in value.items()}
        return FakeReply(text=json.dumps(value))

    async def main() -> None:
        async with FakeOpenAIServer(responder, latency_s=latency_s) as server:
            print(json.dumps({"port": server.port}), flush=True)
            while True:
                await asyncio.sleep(5)
                server.requests.clear()  # the bench sends many; the record is not needed

    asyncio.run(main())


def run_server(config: str) -> None:
    """Role ``server``: exactly what ``toolwire serve`` runs, plus the bench domain."""
    from toolwire import App
    from toolwire.server import configure_server_logging, serve

    configure_server_logging()
    app = App.load(config, plugins=[sys.modules[__name__]], load_entry_points=False)
    asyncio.run(serve(app))


# -- the load generator ----------------------------------------------------------------------


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    llm_calls: list[int] = field(default_factory=list)
    stopped_early: bool = False

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def client_session(
    client: httpx.AsyncClient, n: int, questions: int, deadline: float, results: Results
) -> None:
    session_id: str | None = None
    for q in range(questions):
        if time.monotonic() > deadline:
            results.stopped_early = True
            return
        if session_id is None:
            message = f"clarify my question {n}.{q}" if q % 2 == 0 else f"look up item {n}.{q}"
        else:
            message = f"topic {n}.{q}"
        begin = time.perf_counter()
        try:
            body = {"message": message, "session_id": session_id}
            response = await client.post("/v1/ask", json=body)
        except httpx.HTTPError as error:
            results.error(type(error).__name__)
            session_id = None
            continue
        results.latencies.append(time.perf_counter() - begin)
        if response.status_code != 200:
            results.error(f"http_{response.status_code}")
            session_id = None
            continue
        answer = response.json()
        results.llm_calls.append(answer["usage"]["llm_calls"])
        session_id = answer["session_id"] if answer["kind"] == "clarification" else None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_kib(pid: int) -> dict[str, int]:
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(value.split()[0])
    return figures


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def start(args: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [sys.executable, __file__, *args],
            stdout=subprocess.PIPE,
            stderr=log_file,
            env={**os.environ, **env},
        )


def wait_for_json_line(process: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any]:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(b"{"):
            return dict(json.loads(line))
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
    raise RuntimeError(f"{process.args} printed nothing in {timeout_s} s")


def server_port(log_path: Path, process: subprocess.Popen[bytes], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log_path.read_text().splitlines():
            if '"server_listening"' in line:
                port = json.loads(line)["port"]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                        return int(port)
                except httpx.HTTPError:
                    pass
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log_path.read_text()}")
        time.sleep(0.1)
    raise RuntimeError(f"server not ready in {timeout_s} s:\n{log_path.read_text()}")


async def load(
    url: str, sessions: int, questions: int, max_seconds: float
) -> tuple[Results, float]:
    results = Results()
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        await client.post("/v1/ask", json={"message": "look up warm-up"})
        begin = time.perf_counter()
        deadline = time.monotonic() + max_seconds
        await asyncio.gather(
            *(client_session(client, n, questions, deadline, results) for n in range(sessions))
        )
        return results, time.perf_counter() - begin


def sessions_config(
    store: str, workdir: Path, processes: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
    if store == "memory":
        return {"store": "memory"}
    if store == "sqlite":
        return {"store": "sqlite", "path": str(workdir / "sessions.sqlite3")}
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--store redis needs redis-server (apt-get install -y redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    processes.append(
        subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
             "no", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL,
        )
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return {"store": "redis", "redis_url": f"redis://127.0.0.1:{port}/0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--role", choices=["load", "fake-model", "server"], default="load")
    parser.add_argument("--store", choices=["sqlite", "redis", "memory"], default="sqlite",
                        help="session store (redis: starts a private redis-server)")  # fmt: skip
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "fake-model":
        run_fake_model(args.latency_ms / 1000)
        return
    if args.role == "server":
        run_server(args.config)
        return

    workdir = Path(tempfile.mkdtemp(prefix="toolwire-bench-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        fake = start(["--role", "fake-model", "--latency-ms", str(args.latency_ms)],
                     workdir / "fake.log", {})  # fmt: skip
        processes.append(fake)
        fake_port = wait_for_json_line(fake, 30)["port"]
        config = {
            "default_domain": "bench",
            "llm": {"base_url": f"http://127.0.0.1:{fake_port}/v1", "model": "fake",
                    "api_key_env": "TOOLWIRE_BENCH_KEY", "max_retries": 0},
            "sessions": sessions_config(args.store, workdir, processes),
            # every session's question is admitted: the bench measures throughput, not 503s
            "server": {"host": "127.0.0.1", "port": 0, "request_timeout_s": 60,
                       "max_concurrent_questions": args.sessions},
        }  # fmt: skip
        config_path = workdir / "toolwire.yaml"
        config_path.write_text(json.dumps(config))
        server_log = workdir / "server.log"
        server = start(["--role", "server", "--config", str(config_path)], server_log,
                       {"TOOLWIRE_BENCH_KEY": "unused", "TOOLWIRE_LOG_LEVEL": "info"})  # fmt: skip
        processes.append(server)
        port = server_port(server_log, server, 60)
        rss_before = rss_kib(server.pid)
        cpu_before = {
            "server": cpu_seconds(server.pid),
            "fake model": cpu_seconds(fake.pid),
            "load generator": own_cpu_seconds(),
        }
        results, elapsed = asyncio.run(
            load(f"http://127.0.0.1:{port}", args.sessions, args.questions, args.max_seconds)
        )
        rss_after = rss_kib(server.pid)
        cpu = {
            "server": cpu_seconds(server.pid) - cpu_before["server"],
            "fake model": cpu_seconds(fake.pid) - cpu_before["fake model"],
            "load generator": own_cpu_seconds() - cpu_before["load generator"],
        }
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if args.keep_logs:
            print(f"logs: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    report(args, results, elapsed, rss_before, rss_after, cpu)


def report(
    args: argparse.Namespace,
    results: Results,
    elapsed: float,
    rss_before: dict[str, int],
    rss_after: dict[str, int],
    cpu: dict[str, float],
) -> None:
    done = len(results.latencies) - sum(
        count for kind, count in results.errors.items() if kind.startswith("http_")
    )
    latency_s = args.latency_ms / 1000
    calls = statistics.mean(results.llm_calls) if results.llm_calls else float("nan")
    throughput = done / elapsed
    limit = args.sessions / (calls * latency_s)
    ms = [value * 1000 for value in results.latencies]
    print(f"toolwire serve load bench: {args.sessions} concurrent sessions x {args.questions} "
          f"requests, fake model latency {args.latency_ms:g} ms/call, "
          f"{args.store} session store")  # fmt: skip
    print(f"  requests ok          {done} of {args.sessions * args.questions}"
          f"{' (stopped at --max-seconds)' if results.stopped_early else ''}")  # fmt: skip
    print(f"  errors               {sum(results.errors.values())} {results.errors or ''}")
    print(f"  elapsed              {elapsed:.2f} s")
    print(f"  throughput           {throughput:.1f} requests/s")
    print(f"  latency p50 / p99    {percentile(ms, 0.50):.0f} ms / {percentile(ms, 0.99):.0f} ms"
          f"  (max {max(ms):.0f} ms)")  # fmt: skip
    model_ms = calls * latency_s * 1000
    print(f"  model calls/request  {calls:.2f} -> model time per request {model_ms:.0f} ms")
    print(f"  model-bound limit    {limit:.1f} requests/s "
          f"(= {args.sessions} / ({calls:.2f} x {latency_s:g} s))")  # fmt: skip
    print(f"  throughput / limit   {throughput / limit:.1%}")
    print(f"  p50 / model time     {percentile(ms, 0.5) / model_ms:.2f}x")
    shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
    print(f"  CPU used             {shown} (machine: {os.cpu_count()} cores)")
    server_ms = cpu["server"] * 1000 / max(done, 1)
    print(
        f"  server CPU/request   {server_ms:.1f} ms -> at most {1000 / server_ms:.0f} requests/s"
        " per core"
    )
    print(f"  server RSS           {rss_before.get('VmRSS', 0) / 1024:.1f} MiB before, "
          f"{rss_after.get('VmRSS', 0) / 1024:.1f} MiB after, "
          f"peak {rss_after.get('VmHWM', 0) / 1024:.1f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
