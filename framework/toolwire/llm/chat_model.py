"""The provider-independent language model: every purpose over any chat transport.

Each purpose builds its messages in :mod:`toolwire.llm.prompts`, sends them through a
:class:`~toolwire.llm.transport.ChatTransport` with its output schema, validates the reply with
pydantic and retries once with the validation error fed back. Every call leaves a ``llm_call``
log event and a :class:`~toolwire.llm.base.CallRecord` in the current question's collector.
A new purpose is one message builder, one output schema and one method here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import structlog
from pydantic import BaseModel

from toolwire.context_buffer import PromptAndContext
from toolwire.errors import FunctionCallingRefusedError, ModelError, exits_as_errors
from toolwire.events import AnswerDelta, ModelCallFinished, ModelCallStarted, emit, observed, opened
from toolwire.llm import prompts
from toolwire.llm.base import (
    CallRecord,
    FunctionChoice,
    GatekeeperVerdict,
    M,
    Option,
    PageToJudge,
    Purpose,
    RetrievalPlace,
    SuitabilityQuestion,
    current_domain_prompt,
    current_parameters_source,
    current_retrieval_place,
    record_call,
)
from toolwire.llm.budget import call_time
from toolwire.llm.compression import ContextCompressor
from toolwire.llm.context_limits import PartLimit, estimate_tokens
from toolwire.llm.function_calls import function_choices
from toolwire.llm.history import apart_from_history, current_history, with_history
from toolwire.llm.profiles import ModelProfile
from toolwire.llm.prompts import Prompt
from toolwire.llm.status_bar import with_status_bar
from toolwire.llm.structured import (
    YesNo,
    choice_model,
    chosen_names,
    page_verdicts_model,
    parse_output,
)
from toolwire.llm.transport import ChatReply, ChatRequest, ChatTransport, FunctionOffer, Message
from toolwire.settings import LLMSettings

log = structlog.get_logger(__name__)

NO_PARAMETERS: dict[str, object] = {"type": "object", "properties": {}}
"""The JSON schema of a function that takes no arguments."""

RELEVANCE_TOKENS_PER_PAGE = 8
"""What each page adds to the batched relevance reply (``"page_3": false,`` is about 7 tokens),
beyond the profile's ``completion_limits.relevance``."""

PROMPT_ALLOWANCE_TOKENS = 512
"""What a call's fixed text takes besides its data: the rules, the domain's text, the purpose's
instruction and the output format (about 300 tokens with a short domain text)."""


@dataclass
class _Sent:
    """A transport's reply and the record of the call that produced it."""

    reply: ChatReply
    record: CallRecord
    step: str | None
    """The call's step among the question's events (None: nobody observes)."""


class ChatModel:
    """:class:`toolwire.llm.LanguageModel` over a :class:`ChatTransport`.

    ``profile``: the model's traits (completion limits, window, worked examples, function
    calling; :mod:`toolwire.llm.profiles`), by default the ``general`` profile. ``concurrency``
    bounds the calls in flight at once (per-tool suitability checks run side by side); a server
    with one slot, like the embedded one, wants 1, so that a call waits here, where its timeout
    has not started, rather than queued inside the server.
    """

    def __init__(
        self,
        transport: ChatTransport,
        settings: LLMSettings | None = None,
        *,
        profile: ModelProfile | None = None,
        concurrency: int = 8,
    ) -> None:
        from toolwire.llm.builtin_profiles import GENERAL_PROFILE

        self.transport = transport
        self.settings = settings or LLMSettings()
        self.profile = profile or GENERAL_PROFILE
        self._slots = asyncio.Semaphore(concurrency)
        self._offers_functions: bool = self.profile.function_calling and getattr(
            transport, "supports_functions", False
        )
        """Whether the tool choice offers functions (:meth:`choose_functions`)."""
        self._last_prompt = ""
        self._prefilling: set[asyncio.Task[_Sent]] = set()
        """The warm-ups in flight (:meth:`prefill`), which a call cancels rather than wait for."""
        self._preempted: set[asyncio.Task[_Sent]] = set()
        """The warm-ups a call cancelled (their prefill returns False, not a cancellation)."""
        window = self.profile.context_window_tokens
        self.part_limit = PartLimit.of(window, self.settings.max_part_tokens)
        """How much of one retrieved part (a tool's result, a page) a prompt may carry."""
        limits = self.profile.completion_limits
        self.compressor = ContextCompressor(
            self,
            window_tokens=window,
            reserved_tokens=limits.compression + PROMPT_ALLOWANCE_TOKENS,
            least_context_tokens=limits.compression,  # what the history's bound leaves them
        )

    @property
    def offers_functions(self) -> bool:
        """Whether :meth:`choose_functions` offers functions: False when the profile's
        ``function_calling`` is off, the transport has none or the server refused them, and the
        call is a constrained choice of names that carries no arguments."""
        return self._offers_functions

    # -- the purposes ---------------------------------------------------------------------------

    async def suitability(
        self, task_prompt: str, questions: Sequence[SuitabilityQuestion]
    ) -> dict[str, bool]:
        async def ask(question: SuitabilityQuestion) -> YesNo | None:
            prompt = prompts.suitability_single_prompt(
                task_prompt,
                question.question,
                YesNo,
                examples=self.profile.worked_examples,
                source=question.source,
            )
            with exits_as_errors():  # a task of its own: the transport's SystemExit is an error
                return await self._structured_call(prompt, YesNo)

        if not questions:
            return {}
        answers = await asyncio.gather(*(ask(question) for question in questions))
        unanswered = [q.tool_name for q, a in zip(questions, answers, strict=True) if a is None]
        if len(unanswered) == len(questions):
            raise ModelError(Purpose.SUITABILITY, "no tool's question got a valid answer")
        if unanswered:
            log.warning("suitability_unanswered", tools=unanswered)
        return {
            question.tool_name: answer is not None and answer.answer == "yes"
            for question, answer in zip(questions, answers, strict=True)
        }

    async def choose(
        self,
        task_prompt: str,
        options: Sequence[Option],
        *,
        purpose: Purpose = Purpose.CHOICE,
        several: bool = True,
    ) -> list[str]:
        if not options:
            return []
        schema = choice_model(tuple(option.name for option in options), several)
        prompt = prompts.choice_prompt(
            purpose, task_prompt, options, several=several, schema=schema
        )
        per_option = self.profile.completion_limits.choice_per_option
        max_tokens = self._completion_limit(purpose) + per_option * len(options)
        answer = await self._required_structured_call(prompt, schema, max_tokens)
        return chosen_names(answer)

    async def choose_functions(
        self, task_prompt: str, options: Sequence[Option]
    ) -> list[FunctionChoice]:
        """The options offered as functions, the task as the user's message and nothing else:
        the format the model was trained to call functions in (docs/models.md, "Choosing the
        tools"). A call cut off at the completion limit still names its function (its arguments
        are then None). A transport without ``supports_functions``, or a server that refused
        the functions once, gets a constrained choice instead (the names, no arguments).

        An option with a ``source`` (an MCP server's tool) is offered with its description and
        its parameters' descriptions as external content of that source, and a system message
        before the task says such text is data; offers of plugin tools alone are unchanged."""
        if not options:
            return []
        if self._offers_functions:
            try:
                return await self._called(task_prompt, options)
            except FunctionCallingRefusedError as error:
                self._offers_functions = False
                log.warning(
                    "function_calling_refused", error=error.detail, instead="constrained choice"
                )
        return [FunctionChoice(name=name) for name in await self.choose(task_prompt, options)]

    async def _called(self, task_prompt: str, options: Sequence[Option]) -> list[FunctionChoice]:
        offers = [
            FunctionOffer(
                name=option.name,
                description=prompts.sourced_text(
                    option.source, option.description or option.question
                ),
                parameters=prompts.sourced_schema(option.source, option.parameters)
                or NO_PARAMETERS,
            )
            for option in options
        ]
        messages: list[Message] = [{"role": "user", "content": task_prompt}]
        if any(option.source is not None for option in options):  # else the task alone
            rule = f"{prompts.EXTERNAL_CONTENT_RULE}\n\n{prompts.EXTERNAL_TOOL_TEXT}"
            messages.insert(0, {"role": "system", "content": rule})
        limit = self.profile.completion_limits.choice_function_call
        sent = await self._send(Purpose.CHOICE, messages, None, limit, functions=offers)
        if sent.reply.truncated:
            log.warning("llm_output_truncated", purpose=str(Purpose.CHOICE), limit=limit)
        self._finish(sent.record, sent.step)
        return function_choices(sent.reply)

    async def extract(
        self,
        schema: type[M],
        text: str,
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> M | None:
        prompt, shown = _extraction(purpose, text, instruction, schema)
        return await self._structured_call(prompt, schema, shown=shown)

    @property
    def warms_prefixes(self) -> bool:
        """Whether :meth:`prefill` sends anything: the profile's ``prefix_warming``."""
        return self.profile.prefix_warming

    async def prefill(
        self,
        schema: type[BaseModel],
        *,
        instruction: str = "",
        purpose: Purpose = Purpose.DECOMPOSITION,
    ) -> bool:
        """:class:`~toolwire.llm.base.PrefixWarming`: :meth:`extract`'s prompt with an empty text,
        sent with the same schema (so the same request but for the text, which follows the
        instruction in a purpose laid out fixed-first) and a one-token limit, so that the
        server's prompt cache holds everything before the text when :meth:`extract` sends it.

        A purpose laid out with its text first (parameters, relevance) warms only what comes
        before the text: the system message and an open history.

        Sent only where the profile's ``prefix_warming`` is on, a slot is free and no other
        warm-up is in flight (warming must not queue before a question). A call made while it
        is in flight cancels it; the server stops it once the batch it is evaluating is done,
        and keeps those tokens, so the call waits for that batch at most. A warm-up is in no
        question's calls: it logs ``prefix_warmed`` or ``prefill_failed``, not ``llm_call``."""
        if not self.profile.prefix_warming or self._slots.locked() or self._prefilling:
            return False
        prompt, shown = _extraction(purpose, "", instruction, schema)
        messages = self._messages(prompt)
        sending = asyncio.ensure_future(self._send(purpose, messages, shown, 1, warming=True))
        self._prefilling.add(sending)
        try:
            sent = await sending
        except asyncio.CancelledError:
            if sending in self._preempted:
                return False
            raise  # the caller is cancelled, not the warm-up preempted
        except ModelError as error:
            log.info("prefill_failed", purpose=str(purpose), error=error.detail)
            return False
        finally:
            self._prefilling.discard(sending)
            self._preempted.discard(sending)
        record = sent.record
        log.info(
            "prefix_warmed",
            purpose=record.purpose,
            prompt_tokens=record.prompt_tokens,
            cached_prompt_tokens=record.cached_prompt_tokens,
            latency_ms=record.latency_ms,
        )
        return True

    async def judge_pages(self, question: str, pages: Sequence[PageToJudge]) -> list[bool | None]:
        """One call for all the pages, reading them where the tool's context will stand
        (:func:`~toolwire.llm.base.retrieval_place`), one boolean per page: the pages are
        evaluated once, and the gatekeeper and the answer reuse everything up to the first page
        dropped. An invalid reply (after its corrective retry) leaves every verdict None."""
        if not pages:
            return []
        # outside the orchestrator no answer will read the pages: they stand after the task
        place = current_retrieval_place() or RetrievalPlace(question, (), "search", "1")
        pages = [self._bounded_page(page, place.task_no) for page in pages]
        schema = page_verdicts_model(len(pages))
        place = replace(place, earlier=tuple(self.part_limit.bound(place.earlier)))
        prompt = prompts.relevance_batch_prompt(place, question, pages, schema)
        if self.compressor.needs_compression(place.question, prompt.contexts):
            alone = RetrievalPlace(place.question, (), place.tool_name, place.task_no)
            prompt = prompts.relevance_batch_prompt(alone, question, pages, schema)
        limits = self.profile.completion_limits
        max_tokens = limits.relevance + RELEVANCE_TOKENS_PER_PAGE * len(pages)
        verdicts = await self._structured_call(prompt, schema, max_tokens)
        if verdicts is None:
            return [None] * len(pages)
        return [bool(value) for value in verdicts.model_dump().values()]

    def _bounded_page(self, page: PageToJudge, task_no: str) -> PageToJudge:
        source = f"page {page.ref.doc_id}#{page.ref.page_no}"
        text = self.part_limit.cut(page.text, source=source, task_no=task_no, page=page.ref)
        return page if text is page.text else page.model_copy(update={"text": text})

    async def _fitted(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> list[PromptAndContext]:
        """The contexts a prompt carries: each part within :attr:`part_limit`, compressed when
        together they near the window, and cut to share one call when they still exceed it.

        A call that reads the earlier turns (the answer of a later turn) sends them too, so the
        window holds less of the contexts; the compression calls themselves read only the
        parts they compress, not the conversation."""
        earlier = sum(estimate_tokens(turn["content"]) for turn in current_history())
        with apart_from_history():
            fitted = await self.compressor.fit(question, self.part_limit.bound(contexts), earlier)
        return self.compressor.within_call(question, fitted, earlier)

    async def judge_context(
        self, question: str, contexts: Sequence[PromptAndContext]
    ) -> GatekeeperVerdict:
        contexts = await self._fitted(question, contexts)
        prompt = prompts.gatekeeper_prompt(question, contexts, GatekeeperVerdict)
        return await self._required_structured_call(prompt, GatekeeperVerdict)

    async def answer(self, question: str, contexts: Sequence[PromptAndContext]) -> str:
        contexts = await self._fitted(question, contexts)
        limits = self.profile.completion_limits
        limit = limits.answer if contexts else limits.answer_without_context
        prompt = prompts.answer_prompt(question, contexts)
        messages = self._messages(prompt)
        sent = await self._send(Purpose.ANSWER, messages, None, limit, on_text=_answer_delta)
        if sent.reply.truncated:
            log.warning(
                "llm_output_truncated", purpose=str(Purpose.ANSWER), chars=len(sent.reply.text)
            )
        text = sent.reply.text.strip()
        if not text:
            sent.record.ok = False
            sent.record.error = "empty answer"
        self._finish(sent.record, sent.step)
        if not text:
            raise ModelError(Purpose.ANSWER, "the model returned an empty answer")
        return text

    async def aclose(self) -> None:
        await self.transport.aclose()

    # -- structured output ----------------------------------------------------------------------

    async def _required_structured_call(
        self, prompt: Prompt, schema: type[M], max_tokens: int | None = None
    ) -> M:
        """:meth:`_structured_call` for purposes that have no "no answer": None is a ModelError."""
        result = await self._structured_call(prompt, schema, max_tokens)
        if result is None:
            raise ModelError(
                prompt.purpose,
                "the model's output did not match the schema after one corrective retry",
            )
        return result

    async def _structured_call(
        self,
        prompt: Prompt,
        schema: type[M],
        max_tokens: int | None = None,
        *,
        shown: type[BaseModel] | None = None,
    ) -> M | None:
        """One call, one corrective retry on invalid output, then None (figures recorded).
        ``shown``: the schema as the request asks for it, when not ``schema`` itself (an MCP
        tool's parameters, its descriptions as external content: ``prompts.sourced_model``)."""
        purpose = prompt.purpose
        limit = max_tokens or self._completion_limit(purpose)
        messages = self._messages(prompt)
        attempt_messages = messages
        for attempt in (1, 2):
            sent = await self._send(purpose, attempt_messages, shown or schema, limit)
            try:
                result = parse_output(schema, sent.reply.text)
            except ValueError as exc:
                error = _output_error(exc, sent.reply, limit)
                sent.record.ok = False
                sent.record.error = error
                self._finish(sent.record, sent.step)
                log.warning(
                    "llm_output_invalid", purpose=str(purpose), attempt=attempt, error=error
                )
                attempt_messages = prompts.corrective_messages(messages, sent.reply.text, error)
                continue
            self._finish(sent.record, sent.step)
            return result
        return None

    def _messages(self, prompt: Prompt) -> list[Message]:
        """The prompt's messages, then the open status bar where its purpose reads one."""
        messages = prompt.messages(current_domain_prompt())
        return with_status_bar(messages, prompt.purpose)

    def _completion_limit(self, purpose: Purpose) -> int:
        """The most tokens a purpose's answer may take (the profile's ``completion_limits``)."""
        limit: int = getattr(self.profile.completion_limits, purpose.value)
        return limit

    # -- one call and its figures ---------------------------------------------------------------

    async def _send(
        self,
        purpose: Purpose,
        messages: list[Message],
        schema: type[BaseModel] | None,
        max_tokens: int | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        functions: Sequence[FunctionOffer] = (),
        warming: bool = False,
    ) -> _Sent:
        """One request through the transport, within the question's time budget; a failure
        leaves a failed record and raises (a call the budget has no time for is not made).

        The call waits for one of the model's slots first (``concurrency``); its own timeout
        starts once it has one. Warm-ups in flight (:meth:`prefill`; ``warming``: this is one)
        are cancelled first. ``on_text`` asks for the reply's text as it is produced, when
        someone observes the question (the answer's tokens, streamed)."""
        if not warming and self._prefilling:
            for warm_up in self._prefilling:
                warm_up.cancel()
                self._preempted.add(warm_up)
            log.info("prefill_preempted", purpose=str(purpose))
        async with self._slots:
            return await self._send_in_slot(
                purpose, messages, schema, max_tokens, on_text, functions, warming
            )

    async def _send_in_slot(
        self,
        purpose: Purpose,
        messages: list[Message],
        schema: type[BaseModel] | None,
        max_tokens: int | None,
        on_text: Callable[[str], None] | None,
        functions: Sequence[FunctionOffer],
        warming: bool = False,
    ) -> _Sent:
        timeout = call_time(purpose, self.settings.timeout_s, is_answer=purpose is Purpose.ANSWER)
        messages = prompts.sendable(with_history(messages))  # earlier turns after the system
        serialised = prompts.canonical(messages)
        shared = prompts.shared_prefix_length(self._last_prompt, serialised)
        self._last_prompt = serialised
        streamed = _Streamed(on_text) if on_text is not None and observed() else None
        request = ChatRequest(
            purpose=str(purpose),
            messages=messages,
            schema=schema,
            max_tokens=max_tokens or self._completion_limit(purpose),
            timeout_s=timeout,
            temperature=self.settings.temperature,
            functions=tuple(functions),
            on_text=streamed.add if streamed is not None else None,
        )
        started = time.perf_counter()
        try:
            with opened(_call_started(request, self.requested_model())) as step:
                reply = await self.transport.send(request)
                if streamed is not None and not streamed.pieces and reply.text:
                    streamed.add(reply.text)  # a transport that does not stream: all at once
        except ModelError as error:
            if warming:  # no question's call: prefill logs it
                raise
            self._finish(
                CallRecord(
                    purpose=str(purpose),
                    model="",  # no reply: no model answered
                    requested_model=self.requested_model(),
                    latency_ms=_elapsed_ms(started),
                    shared_prefix_chars=shared,
                    ok=False,
                    error=error.detail,
                ),
                step,
            )
            raise
        record = CallRecord(
            purpose=str(purpose),
            model=reply.model,
            requested_model=self.requested_model(),
            latency_ms=_elapsed_ms(started),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cached_prompt_tokens=reply.cached_prompt_tokens,
            shared_prefix_chars=shared,
            truncated=reply.truncated,
            finish_reason=reply.finish_reason,
        )
        return _Sent(reply, record, step)

    def requested_model(self) -> str:
        """The model the requests name: the transport's ``model`` when it has one, else
        ``llm.model`` ("" when neither is known yet)."""
        model = getattr(self.transport, "model", None)
        if isinstance(model, str) and model:
            return model
        return self.settings.model or ""

    def _finish(self, record: CallRecord, step: str | None) -> None:
        record_call(record)
        emit(ModelCallFinished(step=step, record=record.model_copy()))
        log.info("llm_call", **record.model_dump())


def _extraction(
    purpose: Purpose, text: str, instruction: str, schema: type[BaseModel]
) -> tuple[Prompt, type[BaseModel]]:
    """An extraction's prompt and the schema its request shows (an MCP tool's parameters carry
    their descriptions as external content): :meth:`ChatModel.extract`'s, and its warm-up's."""
    source = current_parameters_source() if purpose is Purpose.PARAMETERS else None
    prompt = prompts.extract_prompt(purpose, text, instruction, schema, source=source)
    return prompt, prompts.sourced_model(schema, source)


def _answer_delta(text: str) -> None:
    emit(AnswerDelta(text=text))


def _call_started(request: ChatRequest, model: str) -> ModelCallStarted:
    """The event that opens a call's step, with what the request asks for."""
    return ModelCallStarted(
        purpose=request.purpose,
        model=model,
        output_type="json" if request.schema is not None else "text",
        stream=request.on_text is not None,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
    )


@dataclass
class _Streamed:
    """Passes a streamed reply's pieces on, counting them."""

    on_text: Callable[[str], None]
    pieces: int = 0

    def add(self, text: str) -> None:
        if text:
            self.pieces += 1
            self.on_text(text)


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _output_error(exc: ValueError, reply: ChatReply, max_tokens: int) -> str:
    """Why structured output was rejected, naming the completion limit when it cut the output."""
    if reply.truncated:
        return (
            f"the output was cut off at the limit of {max_tokens} tokens ({exc}); answer with "
            "shorter values"
        )
    return str(exc)
