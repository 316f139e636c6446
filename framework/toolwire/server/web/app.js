// toolwire's chat page: the same API as any client (POST /v1/ask with "stream": true, read as
// Server-Sent Events), the same bearer token (kept in this tab's session storage).
// Every text from the server goes into the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "toolwire.token";
const state = { sessionId: null, busy: false };

const $ = (selector) => document.querySelector(selector);

function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function badge(text, className) {
  return el("span", `badge ${className || ""}`, text);
}

// -- the API --------------------------------------------------------------------------------

function headers(extra) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const all = { ...extra };
  if (token) all.Authorization = `Bearer ${token}`;
  return all;
}

class Refused extends Error {}

// `path` is relative to the page ("v1/ask", never "/v1/ask"), as are the page's own files, so
// the page works behind a proxy that serves the server under a path prefix (/chat/ -> /).
async function api(path, options = {}) {
  let response;
  try {
    response = await fetch(path, { ...options, headers: headers(options.headers) });
  } catch (error) {
    throw new Error(`cannot reach the server (${error.message}); is toolwire serve running?`);
  }
  if (response.status === 401) {
    const body = await response.json().catch(() => ({}));
    throw new Refused(body.message || "the API key was refused");
  }
  return response;
}

async function* serverSentEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield { event, data: JSON.parse(data) };
    }
  }
}

// -- banner, token, domains -----------------------------------------------------------------

function showBanner(text) {
  const banner = $("#banner");
  banner.textContent = text;
  banner.hidden = !text;
}

function askForToken(why) {
  $("#token-why").textContent = why;
  $("#token-form").hidden = false;
  $("#token").focus();
}

async function loadDomains() {
  try {
    const response = await api("v1/domains");
    if (!response.ok) throw new Error((await response.json()).message);
    const select = $("#domain");
    select.replaceChildren(el("option", null, "let routing pick"));
    select.firstChild.value = "";
    for (const domain of await response.json()) {
      const option = el("option", null, domain.name + (domain.default ? " (default)" : ""));
      option.value = domain.name;
      option.title = domain.description;
      select.append(option);
    }
    showBanner("");
  } catch (error) {
    if (error instanceof Refused) {
      const why = sessionStorage.getItem(TOKEN_KEY)
        ? `The server refused the API key: ${error.message}.`
        : "This server needs an API key (a bearer token).";
      askForToken(why);
    }
    else showBanner(error.message);
  }
}

// -- one exchange: the user's message, the steps, the answer, its task tree -----------------

const STEP_TEXT = {
  routed: (e) => `routed to ${e.routing.domain || "the default domain"} (${e.routing.decided_by})`,
  task_started: (e) => `task ${e.task_no}: ${e.task_prompt}`,
  coordinator_finished: (e) =>
    `coordinator ${e.record.coordinator_name}: ${e.record.outcome}` +
    (e.new_subtasks.length ? ` (subtasks ${e.new_subtasks.join(", ")})` : ""),
  tools_chosen: (e) =>
    `task ${e.task_no}: chose ${e.tools.map((t) => t.tool_name).join(", ") || "no tool"}` +
    (e.selection ? ` of ${e.selection.candidates.length} candidate(s)` : ""),
  tool_started: (e) => `task ${e.task_no}: running ${e.tool_name} (${e.reason})`,
  tool_finished: (e) => `${e.record.tool_name}: ${e.record.outcome}`,
  clarification_asked: (e) => `${e.tool_name} asks: ${e.question}`,
  deep_search_round: (e) => `task ${e.task_no}: deep search round ${e.round}`,
  model_call_finished: (e) =>
    `model ${e.record.purpose}: ${Math.round(e.record.latency_ms)} ms, ` +
    `${e.record.prompt_tokens} prompt tokens (${e.record.cached_prompt_tokens} cached), ` +
    `${e.record.completion_tokens} completion`,
  model_progress: (e) =>
    e.stage === "assembling"
      ? `assembling the model: ${Math.round(e.bytes_done / 1e6)} of ${Math.round(e.bytes_total / 1e6)} MB`
      : `model ${e.stage}` + (e.seconds ? ` in ${e.seconds.toFixed(1)} s` : ""),
};

class Exchange {
  constructor(message) {
    this.events = [];
    this.node = el("section", "turn");
    this.node.append(el("div", "bubble user", message));
    this.bot = el("div", "bubble bot");
    this.text = el("div", "text");
    this.stepList = el("ol");
    this.steps = el("details", "steps", el("summary", null, "working…"), this.stepList);
    this.steps.open = true;
    this.bot.append(this.text, this.steps);
    this.node.append(this.bot);
    $("#conversation").append(this.node);
    this.started = performance.now();
  }

  step(event) {
    this.events.push(event);
    if (event.type === "answer_delta") {
      this.text.append(event.text);
      return;
    }
    const describe = STEP_TEXT[event.type];
    if (describe) {
      this.stepList.append(el("li", null, describe(event)));
      this.steps.firstChild.textContent = `working… ${this.stepList.childElementCount} steps`;
    }
    this.node.scrollIntoView({ block: "end" });
  }

  // The steps' summary once the exchange has ended: no longer "working…".
  ended(how) {
    const seconds = ((performance.now() - this.started) / 1000).toFixed(1);
    const steps = this.stepList.childElementCount;
    this.steps.firstChild.textContent = `${how}${steps} steps, ${seconds} s`;
    this.steps.open = false;
  }

  finish(answer) {
    this.ended("");
    this.text.replaceChildren();
    if (answer.kind === "clarification") {
      this.text.append(el("span", "question", "? "), answer.text);
      this.text.append(this.replyForm(answer));
    } else {
      this.text.append(answer.text);
      for (const exact of answer.guaranteed_contexts) {
        if (!answer.text.includes(exact)) this.text.append(el("div", "guaranteed-text", exact));
      }
    }
    for (const failure of answer.failures) this.bot.append(el("div", "error", `failed: ${failure}`));
    const tree = el("details", "tree", el("summary", null, "Task tree"));
    if (answer.context) tree.append(turnContextLine(answer.turn, answer.context));
    if (answer.routing) tree.append(routingLine(answer.routing));
    const calls = modelCallsByPlace(this.events);
    tree.append(el("ul", "round", ...modelCallItems(calls.get("round:before"))));
    tree.append(taskNode(answer.trace, calls, true));
    tree.append(el("ul", "round", ...modelCallItems(calls.get("round:after"))));
    const usage = answer.usage;
    tree.append(
      el("div", "muted",
        `${usage.llm_calls} model call(s), ${usage.prompt_tokens} prompt tokens ` +
        `(${usage.cached_prompt_tokens} cached), ${usage.completion_tokens} completion tokens`),
    );
    this.bot.append(tree);
    this.node.dataset.turn = answer.turn;
    state.sessionId = answer.session_id; // the next message continues the conversation
    $("#message").placeholder =
      answer.kind === "clarification" ? "Your reply to the question above…" : "Ask a follow-up…";
    this.node.scrollIntoView({ block: "end" });
  }

  replyForm(answer) {
    const form = el("form", "reply");
    const input = el("input");
    input.placeholder = "Your reply…";
    input.setAttribute("aria-label", "Reply");
    form.append(input, el("button", null, "Reply"));
    form.addEventListener("submit", (submitted) => {
      submitted.preventDefault();
      if (!input.value.trim() || state.busy) return;
      state.sessionId = answer.session_id;
      form.remove();
      send(input.value.trim());
    });
    queueMicrotask(() => input.focus());
    return form;
  }

  fail(text) {
    this.ended("failed after ");
    this.bot.classList.add("failed");
    this.bot.append(el("div", "error", text));
  }
}

// What a later turn took from the turns before it (Answer.context): the turns and summaries
// its model calls read, and the message rewritten to stand on its own that the turn ran.
function turnContextLine(turn, context) {
  const read = context.summaries_read.map((turns) => `summary of turns ${turns}`)
    .concat(context.turns_read.map((number) => `turn ${number}`));
  const ran = context.standalone === null ? "run as sent" : `run as "${context.standalone}"`;
  return el("div", "muted turn-context",
    [`turn ${turn}, reading ${read.join(", ") || "no earlier turn"}`, ran, ...context.notes].join("; "));
}

function routingLine(routing) {
  const scores = routing.scores.map((s) => `${s.domain} ${s.score.toFixed(2)}`).join(", ");
  return el("div", "muted",
    `routed to ${routing.domain || "the default domain"} by ${routing.decided_by}` +
    (scores ? ` (${scores})` : ""));
}

// Which task, tool or coordinator each model call was made in, from the events' parents; a
// call of the round itself (classification, routing, the answer) comes before or after task 1.
function modelCallsByPlace(events) {
  const places = new Map();
  const parents = new Map();
  const taskOne = events.find((e) => e.type === "task_started" && e.task_no === "1");
  for (const event of events) {
    if (event.step) parents.set(event.step, event.parent);
    if (event.type === "task_started") places.set(event.step, `task:${event.task_no}`);
    if (event.type === "tool_started") places.set(event.step, `tool:${event.task_no}:${event.tool_name}`);
    if (event.type === "coordinator_started") {
      places.set(event.step, `coordinator:${event.task_no}:${event.coordinator_name}`);
    }
  }
  const started = new Map(events.filter((e) => e.type === "model_call_started").map((e) => [e.step, e]));
  const calls = new Map();
  for (const event of events) {
    if (event.type !== "model_call_finished") continue;
    const start = started.get(event.step);
    let step = start?.parent;
    while (step && !places.has(step)) step = parents.get(step);
    const early = !taskOne || (start && start.at_ms < taskOne.at_ms);
    const place = step ? places.get(step) : early ? "round:before" : "round:after";
    if (!calls.has(place)) calls.set(place, []);
    calls.get(place).push(event.record);
  }
  return calls;
}

function modelCallItems(records) {
  return (records || []).map((call) =>
    el("li", "model",
      el("span", "kind", "model"),
      `${call.purpose}: ${Math.round(call.latency_ms)} ms, ${call.prompt_tokens} prompt tokens ` +
      `(${call.cached_prompt_tokens} cached), ${call.completion_tokens} completion`,
      call.ok ? null : el("span", "error", ` — failed: ${call.error || ""}`)));
}

function why(task, tool) {
  // SelectionRecord.why, as the trace carries it for every candidate
  return task.selection_reasons[tool] ?? null;
}

function taskNode(task, calls, open) {
  const node = el("details", "task");
  node.open = open;
  const status = task.status === "failed" ? "failed-status" : task.status;
  node.append(el("summary", null,
    el("strong", null, `task ${task.task_no}`), badge(task.status.replaceAll("_", " "), status),
    task.decision ? badge(`conditional: ${task.decision}`) : null,
    task.prompt_type ? badge(task.prompt_type, "muted") : null,
    " ", task.user_message || task.task_prompt));
  const items = el("ul");
  if (task.owner_coordinator_name) {
    items.append(el("li", "muted", `created by ${task.owner_coordinator_name}` +
      (task.required_tool_names.length ? `, requires ${task.required_tool_names.join(", ")}` : "")));
  }
  for (const run of task.coordinators) {
    const key = `coordinator:${task.task_no}:${run.coordinator_name}`;
    const item = el("li", "coordinator", el("span", "kind", "coordinator"), run.coordinator_name,
      badge(run.outcome, run.outcome === "error" ? "error-outcome" : ""), run.detail ? ` ${run.detail}` : "");
    if (calls.has(key)) item.append(el("ul", null, ...modelCallItems(calls.get(key))));
    items.append(item);
  }
  for (const sub of task.sub_tasks) items.append(el("li", null, taskNode(sub, calls, true)));
  if (task.selection) items.append(selectionItem(task));
  for (const run of task.tools) {
    const reason = run.reason === "suitability" ? why(task, run.tool_name) : run.reason;
    const outcome = run.outcome === "error" ? "error-outcome" : run.outcome;
    const item = el("li", "tool", el("span", "kind", "tool"), run.tool_name,
      el("span", "muted", ` (${reason})`), badge(run.outcome, outcome),
      run.detail ? el("div", "muted", run.detail) : null);
    const key = `tool:${task.task_no}:${run.tool_name}`;
    if (calls.has(key)) item.append(el("ul", null, ...modelCallItems(calls.get(key))));
    items.append(item);
  }
  items.append(...modelCallItems(calls.get(`task:${task.task_no}`)));
  for (const failure of task.failures) items.append(el("li", "error", `failed: ${failure}`));
  for (const note of task.notes) items.append(el("li", "muted", note));
  node.append(items);
  return node;
}

function selectionItem(task) {
  const selection = task.selection;
  const steps = selection.steps.map((step) => step.step + (step.note ? ` (${step.note})` : ""));
  const item = el("li", "selection", el("span", "kind", "selection"),
    `${steps.join(" → ")} → ` + (selection.activated.join(", ") || "no tool"));
  const candidates = el("ul");
  for (const candidate of selection.candidates) {
    const reason = why(task, candidate.tool_name);
    candidates.append(el("li", selection.activated.includes(candidate.tool_name) ? "chosen" : "muted",
      `${candidate.tool_name} `, el("span", "muted", `score ${candidate.score.toFixed(2)}`), `: ${reason}`));
  }
  if (selection.ignored.length) {
    candidates.append(el("li", "muted", `not candidates, ignored: ${selection.ignored.join(", ")}`));
  }
  if (selection.failure) candidates.append(el("li", "error", selection.failure));
  item.append(candidates);
  return item;
}

// -- sending --------------------------------------------------------------------------------

// The errors of a conversation the server can no longer continue (expired, unknown to this key,
// or its stored state unusable): sending its id again would fail the same way.
const CONVERSATION_GONE = new Set(["unknown_session", "session_error"]);

// The id the server logged the request under (its 500 message sends the reader to the log):
// the error body's, else the response header's.
function requestIdNote(body, response) {
  const id = body.request_id || response.headers.get("x-request-id");
  return id ? `; request id ${id}` : "";
}

function forgetConversation() {
  state.sessionId = null;
  $("#message").placeholder = "Ask a question…";
}

async function send(message) {
  state.busy = true;
  $("#send").disabled = true;
  const exchange = new Exchange(message);
  const replying = state.sessionId;
  const body = {
    message,
    domain: replying ? null : $("#domain").value || null,
    session_id: replying,
    stream: true,
  };
  let answered = false;
  try {
    const response = await api("v1/ask", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const error = await response.json().catch(() => ({ message: response.statusText }));
      exchange.fail(`${error.message} (${response.status})${requestIdNote(error, response)}`);
      return;
    }
    let ended = false;
    for await (const { event, data } of serverSentEvents(response)) {
      if (event === "answer") { exchange.finish(data.answer); ended = answered = true; }
      else if (event === "error") {
        exchange.fail(`${data.message} (${data.status} ${data.error})${requestIdNote(data, response)}`);
        if (replying && CONVERSATION_GONE.has(data.error)) {
          forgetConversation();
          exchange.bot.append(el("div", "muted", "Your next message starts a new conversation."));
        }
        ended = true;
      }
      else exchange.step(data);
    }
    if (!ended) exchange.fail("the server closed the stream before the answer; ask again");
    showBanner("");
  } catch (error) {
    if (error instanceof Refused) {
      exchange.fail(`The server refused the API key: ${error.message}.`);
      askForToken("The API key was refused: enter it again.");
    } else {
      exchange.fail(error.message);
      showBanner(error.message);
    }
  } finally {
    if (!answered) $("#message").value = $("#message").value || message; // for another try
    state.busy = false;
    $("#send").disabled = false;
  }
}

function start() {
  $("#new-conversation").addEventListener("click", () => {
    if (state.busy) return;
    forgetConversation();
    $("#conversation").replaceChildren();
    $("#message").focus();
  });
  $("#ask-form").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    const message = $("#message").value.trim();
    if (!message || state.busy) return;
    $("#message").value = "";
    send(message);
  });
  $("#message").addEventListener("keydown", (key) => {
    if (key.key === "Enter" && !key.shiftKey) {
      key.preventDefault();
      $("#ask-form").requestSubmit();
    }
  });
  $("#token-form").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    $("#token").value = "";
    $("#token-form").hidden = true;
    loadDomains();
  });
  $("#token-button").addEventListener("click", () => askForToken("Enter the server's API key."));
  loadDomains();
}

start();
