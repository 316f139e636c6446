"""The chat page at ``/`` in a real browser: Playwright driving Debian's chromium against a
``toolwire serve`` process (the test plugin's ``trip`` domain and its scripted model).

Ask, answer the clarifying question inline, see the steps stream in, open the task tree; follow
up after an answer (the later turn's tree says what it took from the turns before) and start a new
conversation; a wrong API key; a server that is down; text from the server is shown as text,
never run as HTML."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
from playwright.sync_api import Browser, Page, Response, Route, expect, sync_playwright

from server_support.browser import launch_chromium
from server_support.processes import ServerProcess, write_config

pytestmark = pytest.mark.requires_extra("server")  # `toolwire serve` processes

TOKEN = "web-page-test-token-0123456789"


def start_server(workdir: Path) -> ServerProcess:
    config = write_config(workdir / "toolwire.yaml", sessions={"store": "memory"})
    env = {"TOOLWIRE_API_TOKEN": TOKEN}
    return ServerProcess(config, workdir / "server.log", env=env).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(tmp_path_factory.mktemp("web"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def sign_in(page: Page, url: str, token: str = TOKEN) -> None:
    page.goto(url)
    expect(page.locator("#token-form")).to_be_visible()  # the page needs the key first
    expect(page.locator("#token-why")).to_have_text(
        "This server needs an API key (a bearer token)."
    )
    page.fill("#token", token)
    page.click("#token-form button")


def ask(page: Page, message: str) -> None:
    page.fill("#message", message)
    page.click("#send")


def test_ask_clarify_inline_and_open_the_task_tree(server: ServerProcess, page: Page) -> None:
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_text("trip (default)")
    expect(page.locator("#token-form")).to_be_hidden()

    ask(page, "book a table")
    first = page.locator(".turn").nth(0)
    expect(first.locator(".question")).to_be_visible()
    expect(first.locator(".text")).to_contain_text("Which city?")
    expect(page.locator("#message")).to_have_attribute("placeholder", re.compile("reply"))
    reply = first.locator("form.reply input")
    reply.fill("city=Rome")
    first.locator("form.reply button").click()

    second = page.locator(".turn").nth(1)
    expect(second.locator(".bubble.user")).to_have_text("city=Rome")
    expect(second.locator(".text")).to_contain_text("Table booked in Rome")
    second.locator(".tree > summary").click()
    tree = second.locator(".tree")
    expect(tree.locator(".task > summary").first).to_contain_text("task 1")
    expect(tree.locator(".task > summary").first).to_contain_text("done")
    expect(tree.locator("li.tool")).to_contain_text("trip.booking")
    expect(tree.locator("li.tool")).to_contain_text("context")
    expect(tree.locator("li.model").first).to_contain_text("prompt tokens")
    # the steps of the round were shown as they came, and are kept folded
    expect(second.locator(".steps > summary")).to_contain_text(re.compile(r"\d+ steps"))
    expect(second.locator(".steps li")).to_contain_text(["running trip.booking"])


def asked(page: Page, message: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send ``message`` from the page: the request's body and the answer it streamed back."""
    with page.expect_response(lambda r: r.url.endswith("/v1/ask")) as response:
        ask(page, message)
    request = response.value.request.post_data_json
    datas = [line[6:] for line in response.value.text().splitlines() if line.startswith("data: ")]
    return request, json.loads(datas[-1])["answer"]


def test_a_message_after_an_answer_continues_the_conversation_and_says_what_it_took(
    server: ServerProcess, page: Page
) -> None:
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    sent, first = asked(page, "book a table city=Paris")
    assert sent["session_id"] is None and first["kind"] == "answer"
    turns = page.locator(".turn")
    expect(turns.nth(0).locator(".text")).to_contain_text("Table booked in Paris")
    expect(page.locator("#message")).to_have_attribute("placeholder", "Ask a follow-up…")

    sent, second = asked(page, "and another table there")

    assert sent["session_id"] == first["session_id"]  # the request continues the conversation
    assert sent["domain"] is None  # the conversation's domain, whatever the list says
    assert (second["turn"], second["session_id"]) == (2, first["session_id"])
    expect(turns).to_have_count(2)  # both turns on the page, in order
    expect(turns.nth(0).locator(".bubble.user")).to_have_text("book a table city=Paris")
    expect(turns.nth(1).locator(".bubble.user")).to_have_text("and another table there")
    expect(turns.nth(1).locator(".text")).to_contain_text("Table booked in Paris")  # from turn 1
    # the later turn's trace says what it took from the turn before; the first turn's, nothing
    turns.nth(1).locator(".tree > summary").click()
    expect(turns.nth(1).locator(".tree .turn-context")).to_have_text(
        'turn 2, reading turn 1; run as "and another table city=Paris"'
    )
    turns.nth(0).locator(".tree > summary").click()
    expect(turns.nth(0).locator(".tree .turn-context")).to_have_count(0)
    expect(turns.nth(0)).to_have_attribute("data-turn", "1")
    expect(turns.nth(1)).to_have_attribute("data-turn", "2")


def test_new_conversation_clears_the_page_and_the_next_request_has_no_session(
    server: ServerProcess, page: Page
) -> None:
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    _, first = asked(page, "book a table city=Rome")
    sent, _ = asked(page, "one more there")
    assert sent["session_id"] == first["session_id"]
    expect(page.locator(".turn")).to_have_count(2)

    page.click("#new-conversation")

    expect(page.locator(".turn")).to_have_count(0)  # the turns above are gone from the page
    expect(page.locator("#message")).to_have_attribute("placeholder", "Ask a question…")
    sent, fresh = asked(page, "book a table city=Oslo")
    assert sent["session_id"] is None  # a new conversation, not the old one's turn 3
    assert fresh["turn"] == 1 and fresh["session_id"] != first["session_id"]
    assert fresh["context"] is None
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator(".turn").nth(0).locator(".text")).to_contain_text("Table booked in Oslo")
    # "there" is now the new conversation's city: nothing of the old one (Rome) is read
    sent, after = asked(page, "and a table there")
    assert sent["session_id"] == fresh["session_id"] and after["turn"] == 2
    expect(page.locator(".turn").nth(1).locator(".text")).to_contain_text("Table booked in Oslo")


def test_a_conversation_the_server_no_longer_has_is_forgotten_and_a_new_one_starts(
    tmp_path: Path, page: Page
) -> None:
    """The page kept sending the expired conversation's id: every later message failed."""
    config = write_config(tmp_path / "toolwire.yaml", sessions={"store": "memory", "ttl_s": 1})
    process = ServerProcess(config, tmp_path / "server.log", env={"TOOLWIRE_API_TOKEN": TOKEN})
    process.start()
    try:
        sign_in(page, process.url)
        expect(page.locator("#domain option[value=trip]")).to_have_count(1)
        _, first = asked(page, "book a table city=Rome")
        page.wait_for_timeout(1500)  # past sessions.ttl_s: the conversation has expired

        with page.expect_response(lambda r: r.url.endswith("/v1/ask")) as expired:
            ask(page, "one more there")
        assert expired.value.request.post_data_json["session_id"] == first["session_id"]
        gone = page.locator(".turn").nth(1).locator(".bot")
        expect(gone.locator(".error")).to_contain_text("unknown_session")
        expect(gone).to_contain_text("Your next message starts a new conversation.")
        expect(page.locator("#message")).to_have_attribute("placeholder", "Ask a question…")

        sent, fresh = asked(page, "book a table city=Oslo")
    finally:
        process.stop()

    assert sent["session_id"] is None
    assert (fresh["kind"], fresh["turn"]) == ("answer", 1)


def test_steps_stream_in_before_the_answer(server: ServerProcess, page: Page) -> None:
    sign_in(page, server.url)
    ask(page, "book a table city=Paris sleep=3")
    turn = page.locator(".turn").nth(0)
    running = turn.locator(".steps li", has_text="running trip.booking")
    expect(running).to_be_visible(timeout=10000)
    assert turn.locator(".text").inner_text() == ""  # the tool still sleeps: no answer yet
    expect(turn.locator(".text")).to_contain_text("Table booked in Paris", timeout=10000)


def test_a_wrong_key_is_refused_and_asked_for_again(server: ServerProcess, page: Page) -> None:
    sign_in(page, server.url, token="not-the-right-token")
    expect(page.locator("#token-form")).to_be_visible()
    expect(page.locator("#token-why")).to_contain_text("refused")

    ask(page, "book a table")
    expect(page.locator(".bot.failed")).to_contain_text("refused")
    stored = page.evaluate("sessionStorage.getItem('toolwire.token')")
    assert stored == "not-the-right-token"  # kept in this tab only, until corrected

    page.fill("#token", TOKEN)
    page.click("#token-form button")
    ask(page, "book a table city=Rome")
    expect(page.locator(".turn").nth(1).locator(".text")).to_contain_text("Table booked in Rome")


def test_a_server_that_is_down_is_said_and_the_message_kept(tmp_path: Path, page: Page) -> None:
    process = start_server(tmp_path)
    sign_in(page, process.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    process.stop()

    ask(page, "book a table city=Rome")
    expect(page.locator(".bot.failed")).to_contain_text("cannot reach the server")
    expect(page.locator("#banner")).to_contain_text("is toolwire serve running?")
    expect(page.locator("#message")).to_have_value("book a table city=Rome")


def test_text_from_the_server_is_shown_as_text(server: ServerProcess, page: Page) -> None:
    sign_in(page, server.url)
    ask(page, "book a table city=<img src=x onerror=alert(1)>")
    turn = page.locator(".turn").nth(0)
    expect(turn.locator(".bubble.bot")).to_contain_text("Which city?")
    expect(turn.locator(".bubble.user")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator(".turn img").count() == 0


def test_the_page_loads_nothing_from_elsewhere(server: ServerProcess, page: Page) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    assert requested and all(url.startswith(server.url) for url in requested)
    policy = page.request.get(server.url).headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy


def test_a_tool_output_cut_for_the_trace_ends_with_an_ellipsis(
    server: ServerProcess, page: Page
) -> None:
    sign_in(page, server.url)
    ask(page, "book a table city=Paris wide=300")
    turn = page.locator(".turn").nth(0)
    expect(turn.locator(".text")).to_contain_text("Table booked in Paris")
    turn.locator(".tree > summary").click()
    detail = turn.locator("li.tool > div.muted")
    expect(detail).to_contain_text("Table booked in Paris")
    shown = detail.inner_text()
    assert shown.endswith("…") and len(shown) == 201  # the trace keeps 200 characters


def test_a_tool_output_the_trace_keeps_whole_has_no_ellipsis(
    server: ServerProcess, page: Page
) -> None:
    sign_in(page, server.url)
    ask(page, "book a table city=Paris")
    turn = page.locator(".turn").nth(0)
    expect(turn.locator(".text")).to_contain_text("Table booked in Paris")
    turn.locator(".tree > summary").click()
    assert not turn.locator("li.tool > div.muted").inner_text().endswith("…")


def test_a_failed_exchange_says_so_instead_of_working(server: ServerProcess, page: Page) -> None:
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    ask(page, "x" * 9000)  # over server.max_message_chars: refused before it starts
    failed = page.locator(".bot.failed")
    expect(failed).to_contain_text("422")
    summary = page.locator(".turn").nth(0).locator(".steps > summary")
    expect(summary).to_have_text(re.compile(r"^failed after 0 steps, \d+\.\d s$"))


def test_a_refused_message_stays_in_the_box_and_its_request_id_is_shown(
    server: ServerProcess, page: Page
) -> None:
    """A 422 (message_too_long) cleared the box: the user had to type the message again."""
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    with page.expect_response(lambda r: r.url.endswith("/v1/ask")) as refused:
        ask(page, "x" * 9000)
    assert refused.value.status == 422
    request_id = refused.value.json()["request_id"]
    expect(page.locator(".bot.failed .error")).to_have_text(
        re.compile(rf"\(422\); request id {request_id}$")
    )
    expect(page.locator("#message")).to_have_value("x" * 9000)


def test_an_error_event_shows_its_request_id(server: ServerProcess, page: Page) -> None:
    """The 500 message says the request id finds the traceback in the log: the page showed none."""
    error = {
        "type": "error", "status": 500, "error": "internal_error", "details": {},
        "message": "internal error; the request id finds the traceback in the server's log",
        "request_id": "req-from-the-event",
    }
    page.route("**/v1/ask", lambda route: route.fulfill(
        status=200, content_type="text/event-stream",
        body=f"event: error\ndata: {json.dumps(error)}\n\n",
    ))
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    ask(page, "book a table city=Rome")
    expect(page.locator(".bot.failed .error")).to_have_text(
        "internal error; the request id finds the traceback in the server's log "
        "(500 internal_error); request id req-from-the-event"
    )
    expect(page.locator("#message")).to_have_value("book a table city=Rome")  # not answered


def test_a_question_that_runs_out_of_time_mid_stream_says_it_failed(
    tmp_path: Path, page: Page
) -> None:
    config = write_config(
        tmp_path / "toolwire.yaml", sessions={"store": "memory"}, server={"request_timeout_s": 1}
    )
    process = ServerProcess(config, tmp_path / "server.log", env={"TOOLWIRE_API_TOKEN": TOKEN})
    process.start()
    try:
        sign_in(page, process.url)
        ask(page, "book a table city=Rome sleep=3")
        turn = page.locator(".turn").nth(0)
        expect(turn.locator(".bot.failed")).to_contain_text("timeout", timeout=10000)
        summary = turn.locator(".steps > summary")
        expect(summary).to_have_text(re.compile(r"^failed after [1-9]\d* steps, \d+\.\d s$"))
        expect(summary).not_to_contain_text("working")
    finally:
        process.stop()


def test_long_json_stays_inside_its_bubble_in_a_390_px_viewport(
    server: ServerProcess, browser: Browser
) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        sign_in(page, server.url)
        ask(page, "book a table city=Paris wide=600")
        turn = page.locator(".turn").nth(0)
        expect(turn.locator(".text")).to_contain_text('{"booking":{"seats":"4444')
        turn.locator(".tree > summary").click()
        turn.locator(".steps > summary").click()  # the steps, open as well
        expect(turn.locator("li.tool")).to_be_visible()
        overflowing = page.evaluate(
            """() => [...document.querySelectorAll('.bubble')]
                .filter((b) => b.scrollWidth > b.clientWidth)
                .map((b) => `${b.className}: ${b.scrollWidth} > ${b.clientWidth}`)"""
        )
        assert overflowing == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


def test_the_page_has_an_icon_and_no_request_of_it_fails(server: ServerProcess, page: Page) -> None:
    failed: list[str] = []

    def note(response: Response) -> None:
        if response.status >= 400 and "/v1/" not in response.url:  # the API's 401 is wanted
            failed.append(f"{response.status} {response.url}")

    page.on("response", note)
    sign_in(page, server.url)
    expect(page.locator("#domain option[value=trip]")).to_have_count(1)
    page.wait_for_load_state("networkidle")
    assert failed == []
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon is not None
    for path in (icon, "/favicon.ico"):  # the one the page names, the one probes ask for
        response = page.request.get(urljoin(server.url + "/", path))
        assert response.status == 200
        assert response.headers["content-type"].startswith("image/svg+xml")


def test_the_page_works_behind_a_proxy_that_serves_it_under_a_prefix(
    server: ServerProcess, page: Page
) -> None:
    """A proxy serving the server under ``/chat/`` (nginx's ``location /chat/ { proxy_pass
    http://upstream/; }``): root-absolute URLs (``/web/app.js``, ``/v1/ask``) left the page dead,
    without its script."""
    prefix = f"{server.url}/chat/"
    unrouted: list[str] = []

    def proxy(route: Route) -> None:
        url = route.request.url
        if not url.startswith(prefix):
            unrouted.append(url)
            route.fulfill(status=404, body="not routed")
            return
        upstream = route.fetch(url=f"{server.url}/{url[len(prefix):]}")
        route.fulfill(response=upstream)

    page.route("**/*", proxy)
    sign_in(page, prefix)  # the script ran: it asks for the key
    expect(page.locator("#domain option[value=trip]")).to_have_text("trip (default)")
    ask(page, "book a table city=Paris")
    expect(page.locator(".turn").nth(0).locator(".text")).to_contain_text("Table booked in Paris")
    assert unrouted == []


def test_every_file_of_the_page_says_nosniff(server: ServerProcess, page: Page) -> None:
    for path in ("/", "/web/app.js", "/web/style.css", "/web/favicon.svg", "/favicon.ico"):
        response = page.request.get(server.url + path)
        assert response.status == 200, path
        assert response.headers.get("x-content-type-options") == "nosniff", path
    cached = page.request.get(
        server.url + "/web/app.js",
        headers={"if-none-match": page.request.get(server.url + "/web/app.js").headers["etag"]},
    )
    assert cached.status == 304
    assert cached.headers.get("x-content-type-options") == "nosniff"
