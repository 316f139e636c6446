"""The HTTP service over real HTTP on 127.0.0.1: one server process (``server_support.launch``,
which runs what ``toolwire serve`` runs) with the test plugin and a deterministic model."""

from __future__ import annotations

import concurrent.futures
import hmac
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.security import HTTPAuthorizationCredentials

from server_support.processes import ServerProcess, write_config
from toolwire.redaction import session_ref
from toolwire.server import auth
from toolwire.server.problems import MAX_PROBLEMS_LISTED, ApiError

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMITS = {"max_body_bytes": 2048, "max_message_chars": 300, "request_timeout_s": 1.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("server")
    config = write_config(
        workdir / "toolwire.yaml",
        sessions={"store": "sqlite", "path": str(workdir / "sessions.sqlite3")},
        server=LIMITS,
    )
    process = ServerProcess(
        config,
        workdir / "server.log",
        env={"TOOLWIRE_API_TOKEN": TOKEN, "TOOLWIRE_TEST_SIGNAL_DIR": str(workdir)},
    ).start()
    yield process
    process.stop()


def ask(server: ServerProcess, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    headers = {**AUTH, **kwargs.pop("headers", {})}
    return httpx.post(f"{server.url}/v1/ask", json=body, headers=headers, timeout=10, **kwargs)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == code
    assert body["message"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body


# -- health and authentication ---------------------------------------------------------------


def test_health_endpoints_are_open(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok", "detail": ""}
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


def test_health_endpoints_answer_head(server: ServerProcess) -> None:
    """Many load balancers' health checks send HEAD: it was a 405, a replica never healthy."""
    for path in ("/healthz", "/readyz"):
        response = httpx.head(f"{server.url}{path}")
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "application/json", path
        assert response.content == b"", path
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert set(spec["paths"]["/healthz"]) == set(spec["paths"]["/readyz"]) == {"get"}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "needs an 'Authorization: Bearer <token>' header"),
        ({"Authorization": "Bearer wrong"}, "bearer token is not valid"),
        ({"Authorization": f"Basic {TOKEN}"}, "needs an 'Authorization: Bearer <token>' header"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/domains", "/v1/tools"])
def test_api_needs_the_bearer_token(
    server: ServerProcess, path: str, headers: dict[str, str], message: str
) -> None:
    response = httpx.get(f"{server.url}{path}", headers=headers)
    body = assert_error(response, 401, "unauthorized")
    assert message in body["message"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_ask_without_token_is_refused_before_anything_runs(server: ServerProcess) -> None:
    response = httpx.post(f"{server.url}/v1/ask", json={"message": "book city=Oslo"})
    assert_error(response, 401, "unauthorized")


# -- catalogue and OpenAPI -------------------------------------------------------------------


def test_domains_and_tools(server: ServerProcess) -> None:
    domains = httpx.get(f"{server.url}/v1/domains", headers=AUTH).json()
    assert domains == [
        {
            "name": "trip",
            "description": "Table booking (test plugin).",
            "plugin": "server_support.plugin",
            "prompt_types": [],
            "tools": ["trip.booking"],
            "default": True,
        }
    ]
    tools = httpx.get(f"{server.url}/v1/tools", headers=AUTH).json()
    assert [(t["name"], t["qualified_name"], t["plugin"], t["kinds"]) for t in tools] == [
        ("booking", "trip.booking", "server_support.plugin", ["activated"])
    ]
    assert tools[0]["instruction"] == "Does the user want to book a table?"


def test_openapi_documents_the_api(server: ServerProcess) -> None:
    spec = httpx.get(f"{server.url}/openapi.json").json()

    assert set(spec["paths"]) == {"/v1/ask", "/v1/domains", "/v1/tools", "/healthz", "/readyz"}
    ask_op = spec["paths"]["/v1/ask"]["post"]
    assert {"200", "401", "404", "409", "413", "415", "422", "504"} <= set(ask_op["responses"])
    assert ask_op["security"] == [{"HTTPBearer": []}]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert {"Answer", "AskRequest", "ErrorBody"} <= set(spec["components"]["schemas"])
    assert "security" not in spec["paths"]["/healthz"]["get"]
    assert httpx.get(f"{server.url}/docs").status_code == 404  # server.api_docs is off


# -- limits ----------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413(server: ServerProcess) -> None:
    response = ask(server, {"message": "x" * 3000})
    body = assert_error(response, 413, "body_too_large")
    assert body["details"]["limit_bytes"] == 2048
    assert "server.max_body_bytes" in body["message"]


def test_a_chunked_body_over_the_limit_is_413(server: ServerProcess) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(30):
            yield b"y" * 100
        yield b'"}'

    response = httpx.post(
        f"{server.url}/v1/ask",
        content=chunks(),
        headers={**AUTH, "content-type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "body_too_large")


def test_a_message_over_the_length_limit_is_422(server: ServerProcess) -> None:
    body = assert_error(ask(server, {"message": "é" * 301}), 422, "message_too_long")
    assert body["details"] == {"length": 301, "limit": 300}
    assert "server.max_message_chars" in body["message"]


@pytest.mark.parametrize(
    ("payload", "location"),
    [
        ({"message": ""}, "body.message"),
        ({"message": " \n\t "}, "body.message"),  # blank: refused before anything runs
        ({}, "body.message"),
        ({"message": "hi", "colour": "red"}, "body.colour"),
        ({"message": "\u200b"}, "body.message"),  # invisible: as empty as whitespace
        ({"message": " \u0000\u2060\ufeff "}, "body.message"),
        ({"message": "hi", "domain": ""}, "body.domain"),  # was the default domain, or a 400
        ({"message": "hi", "stream": "yes"}, "body.stream"),  # was a stream
        ({"message": "hi", "stream": 1}, "body.stream"),
    ],
)
def test_an_invalid_body_is_422_naming_the_field(
    server: ServerProcess, payload: dict[str, Any], location: str
) -> None:
    body = assert_error(ask(server, payload), 422, "invalid_request")
    assert location in [problem["location"] for problem in body["details"]["problems"]]
    assert location in body["message"]


def test_invisible_characters_beside_a_word_are_kept_in_the_message(
    server: ServerProcess,
) -> None:
    response = ask(server, {"message": "book\u200b city=Oslo\u0000"})

    assert response.status_code == 200, response.text
    assert response.json()["trace"]["user_message"] == "book\u200b city=Oslo\u0000"


@pytest.mark.parametrize(("stream", "streamed"), [(False, False), (True, True), (None, True)])
def test_the_body_says_whether_to_stream_and_the_accept_header_only_without_it(
    server: ServerProcess, stream: bool | None, streamed: bool
) -> None:
    body: dict[str, Any] = {"message": "book city=Oslo"}
    if stream is not None:
        body["stream"] = stream
    response = ask(server, body, headers={"Accept": "text/event-stream"})

    assert response.status_code == 200, response.text
    media_type = "text/event-stream" if streamed else "application/json"
    assert response.headers["content-type"].startswith(media_type)


def test_broken_json_is_422(server: ServerProcess) -> None:
    response = httpx.post(
        f"{server.url}/v1/ask",
        content=b'{"message": ',
        headers={**AUTH, "content-type": "application/json"},
    )
    assert_error(response, 422, "invalid_request")


@pytest.mark.parametrize(
    ("raw", "location", "says"),
    [
        # a lone surrogate in the session id was a 500 (hashing it for the log raised)
        (b'{"message": "hi", "session_id": "\\udc00"}', "body.session_id", "not a session id"),
        (b'{"message": "hi", "session_id": "a\\u0000b"}', "body.session_id", "not a session id"),
        (b'{"message": "hi", "session_id": "' + b"s" * 1000 + b'"}', "body.session_id", "256"),
        (b'{"message": "hi", "domain": "' + b"d" * 1000 + b'"}', "body.domain", "128"),
        # these were a 400 "There was an error parsing the body", saying nothing of what to fix
        (b'{"message": "\xff\xfe"}', "body", "is not UTF-8 text"),
        (b"[" * 2000, "body", "is nested too deeply"),
    ],
    ids=["surrogate", "nul", "long-session", "long-domain", "not-utf8", "nested"],
)
def test_a_hostile_body_is_422_naming_what_to_fix(
    server: ServerProcess, raw: bytes, location: str, says: str
) -> None:
    response = httpx.post(
        f"{server.url}/v1/ask", content=raw, headers={**AUTH, "content-type": "application/json"}
    )
    body = assert_error(response, 422, "invalid_request")
    assert location in [problem["location"] for problem in body["details"]["problems"]]
    assert says in body["message"]
    assert not [e for e in server.events() if e["event"] == "request_crashed"]


@pytest.mark.parametrize(
    ("raw", "key", "location", "path"),
    [
        (b'{"message": "book city=Oslo", "message": "book city=Rome"}', "message",
         "body.message", "$.message"),
        (b'{"message": "book city=Oslo", "m\\u0065ssage": "book city=Rome"}', "message",
         "body.message", "$.message"),  # the same key, escaped
        (b'{"message": "hi", "domain": {"a": [{"b": 1, "b": 2}]}}', "b", "body.domain.a.0.b",
         "$.domain.a[0].b"),
    ],
    ids=["top", "escaped", "nested"],
)  # fmt: skip
def test_a_body_naming_a_key_twice_is_422_naming_the_key(
    server: ServerProcess, raw: bytes, key: str, location: str, path: str
) -> None:
    """It was read with the last value winning (a table booked in Rome), where a proxy or a log
    that keeps the first value saw a question about Oslo."""
    response = httpx.post(
        f"{server.url}/v1/ask", content=raw, headers={**AUTH, "content-type": "application/json"}
    )

    body = assert_error(response, 422, "invalid_request")
    said = f'duplicate key "{key}" at {path}'
    assert body["details"]["problems"] == [{"location": location, "message": said}]
    assert body["message"].startswith(f"the request body has a {said}: send each key once")


def test_a_body_naming_each_key_once_is_answered(server: ServerProcess) -> None:
    response = httpx.post(
        f"{server.url}/v1/ask",
        content=b'{"message": "book city=Oslo", "domain": "trip", "stream": false}',
        headers={**AUTH, "content-type": "application/json"},
        timeout=10,
    )

    assert response.status_code == 200, response.text
    assert "Table booked in Oslo" in response.json()["text"]


@pytest.mark.parametrize(
    ("content_type", "declared"),
    [
        ("text/plain", "Content-Type is 'text/plain'"),
        ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),  # curl -d
        ("multipart/form-data; boundary=x", "'multipart/form-data; boundary=x'"),
        (None, "has no Content-Type"),  # a 422 "valid dictionary" too: FastAPI parses no JSON
    ],
    ids=["text", "form", "multipart", "none"],
)
def test_a_body_not_sent_as_json_is_415_saying_which_content_type_to_send(
    server: ServerProcess, content_type: str | None, declared: str
) -> None:
    """It was a 422 "Input should be a valid dictionary", which says nothing of the header."""
    headers = {**AUTH, **({"content-type": content_type} if content_type else {})}

    response = httpx.post(
        f"{server.url}/v1/ask", content=b'{"message": "hi"}', headers=headers, timeout=10
    )

    body = assert_error(response, 415, "unsupported_media_type")
    assert "must be JSON sent with 'Content-Type: application/json'" in body["message"]
    assert declared in body["message"]


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
def test_a_json_content_type_with_parameters_or_capitals_is_json(
    server: ServerProcess, content_type: str
) -> None:
    response = httpx.post(
        f"{server.url}/v1/ask",
        content=b'{"message": "book city=Oslo"}',
        headers={**AUTH, "content-type": content_type},
        timeout=10,
    )
    assert response.status_code == 200, response.text


def test_a_body_of_many_unknown_keys_lists_the_first_problems_and_counts_the_rest(
    server: ServerProcess,
) -> None:
    """Every problem was listed: a body of 250 unknown keys got a 22 kB answer (a 64 kB body,
    about a megabyte)."""
    raw = ("{" + ",".join(f'"{n:x}":0' for n in range(250)) + ',"message":"hi"}').encode()

    response = httpx.post(
        f"{server.url}/v1/ask", content=raw, headers={**AUTH, "content-type": "application/json"}
    )

    body = assert_error(response, 422, "invalid_request")
    assert len(body["details"]["problems"]) == MAX_PROBLEMS_LISTED
    assert body["details"]["problems_not_listed"] == 250 - MAX_PROBLEMS_LISTED
    assert body["message"].endswith(f"… and {250 - MAX_PROBLEMS_LISTED} more problem(s)")
    assert len(response.content) < 4000  # every problem listed: 22 kB


# -- conversations and errors ----------------------------------------------------------------


def test_a_clarification_round_trip(server: ServerProcess) -> None:
    first = ask(server, {"message": "book a table"}).json()
    assert first["kind"] == "clarification"
    assert first["text"] == "Which city?"
    assert first["domain"] == "trip"

    second = ask(server, {"message": "city=Szeged", "session_id": first["session_id"]}).json()
    assert second["kind"] == "answer"
    assert "Table booked in Szeged" in second["text"]
    assert (second["session_id"], second["turn"]) == (first["session_id"], 2)

    unknown = "u" * 32
    gone = ask(server, {"message": "city=Pécs", "session_id": unknown})
    assert assert_error(gone, 404, "unknown_session")["details"] == {"session_id": unknown}


def test_unknown_domain_is_400(server: ServerProcess) -> None:
    body = assert_error(ask(server, {"message": "hi", "domain": "space"}), 400, "unknown_domain")
    assert "'space'" in body["message"] and "trip" in body["message"]


def test_unknown_route_is_a_json_404(server: ServerProcess) -> None:
    assert_error(httpx.get(f"{server.url}/v2/ask", headers=AUTH), 404, "not_found")


def test_time_limit_is_504_naming_the_step_and_keeps_the_conversation(
    server: ServerProcess,
) -> None:
    waiting = ask(server, {"message": "book a table"}).json()

    slow = ask(server, {"message": "city=Rome sleep=5", "session_id": waiting["session_id"]})

    body = assert_error(slow, 504, "timeout")
    assert "within 1 s (server.request_timeout_s)" in body["message"]
    step = "last step it logged was tool_activated (tool=trip.booking, task_no=1, domain=trip)"
    assert step in body["message"]
    assert body["details"]["step"] == "tool_activated"
    assert body["details"]["tool"] == "trip.booking"
    assert 0 <= body["details"]["step_logged_after_s"] < 1
    resumed = ask(server, {"message": "city=Rome", "session_id": waiting["session_id"]}).json()
    assert resumed["kind"] == "answer" and "Rome" in resumed["text"]


def test_questions_run_concurrently(server: ServerProcess) -> None:
    """Five questions that each sleep 0.6 s take far less than 5 × 0.6 s: no global lock."""
    begin = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        responses = list(
            pool.map(lambda n: ask(server, {"message": f"city=C{n} sleep=0.6"}), range(5))
        )
    elapsed = time.monotonic() - begin
    assert [r.status_code for r in responses] == [200] * 5
    assert elapsed < 2.0, f"five concurrent questions took {elapsed:.2f} s"


# -- request ids and access logs -------------------------------------------------------------


def test_request_id_is_echoed_and_in_every_event_of_the_request(server: ServerProcess) -> None:
    response = ask(server, {"message": "city=Oslo"}, headers={"X-Request-ID": "trace-42"})
    assert response.headers["x-request-id"] == "trace-42"

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        events = [e for e in server.events() if e.get("request_id") == "trace-42"]
        if any(e["event"] == "http_request" for e in events):
            break
        time.sleep(0.05)
    names = [event["event"] for event in events]
    assert {"tool_activated", "question_answered", "http_request"} <= set(names)
    access = next(event for event in events if event["event"] == "http_request")
    assert (access["method"], access["path"], access["status"]) == ("POST", "/v1/ask", 200)
    assert access["duration_ms"] > 0


def events_of(server: ServerProcess, request_id: str) -> list[dict[str, Any]]:
    """The events logged for one request, once its access event is written."""
    deadline = time.monotonic() + 5
    while True:
        events = [e for e in server.events() if e.get("request_id") == request_id]
        if any(e["event"] == "http_request" for e in events) or time.monotonic() > deadline:
            return events
        time.sleep(0.05)


def test_session_ids_are_logged_as_a_short_hash(server: ServerProcess) -> None:
    first = ask(server, {"message": "book a table"}).json()
    session_id = first["session_id"]
    ask(server, {"message": "city=Lund", "session_id": session_id}, headers={"X-Request-ID": "s-1"})
    unknown = "u" * 32
    gone = ask(server, {"message": "again", "session_id": unknown}, headers={"X-Request-ID": "s-2"})
    assert gone.status_code == 404

    resumed, refused = events_of(server, "s-1"), events_of(server, "s-2")
    assert session_id not in server.log_text() and unknown not in server.log_text()
    assert {e["event"] for e in resumed} >= {"tool_activated", "question_answered"}
    assert {e.get("session") for e in resumed if e["event"] != "http_request"} == {
        session_ref(session_id)
    }
    error = next(e for e in refused if e["event"] == "request_error")
    assert f"<session {session_ref(unknown)}>" in error["message"]


def test_a_malformed_request_id_is_replaced(server: ServerProcess) -> None:
    response = httpx.get(f"{server.url}/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert response.headers["x-request-id"] != "bad id\twith spaces"
    assert len(response.headers["x-request-id"]) == 32


def test_an_empty_token_variable_stops_the_server(tmp_path: Path) -> None:
    config = write_config(tmp_path / "toolwire.yaml", sessions={"store": "memory"}, server=LIMITS)
    process = ServerProcess(config, tmp_path / "server.log", env={"TOOLWIRE_API_TOKEN": " "})
    with pytest.raises(RuntimeError, match=r"TOOLWIRE_API_TOKEN is set but empty"):
        process.start(timeout_s=20)
    process.stop()


def test_the_token_is_compared_with_every_key_in_constant_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", recording)
    keys = [auth.ApiKey("a", "right"), auth.ApiKey("b", "other")]

    def bearer(token: str) -> HTTPAuthorizationCredentials:
        return HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)

    with pytest.raises(ApiError) as refused:
        auth.authenticate(keys, bearer("wrong"))
    caller = auth.authenticate(keys, bearer("right"))

    assert refused.value.status == 401
    assert caller == "a"
    assert compared == [
        (b"wrong", b"right"),
        (b"wrong", b"other"),
        (b"right", b"right"),
        (b"right", b"other"),
    ]
