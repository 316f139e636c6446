"""The seed 6.8 story end to end: App.load with the plugin, a scripted model, app.ask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import toolwire_pharma.plugin
from pharma_testkit import AppFactory, story_model
from toolwire_pharma import (
    DosageInfoTool,
    DosageQuery,
    InteractionDecomposition,
    InteractionQuestion,
    MedicineData,
    SubstanceLookupTool,
    SubstanceQuery,
)
from toolwire_pharma.lookup import RETRY_PREFIX

from toolwire import App, ModelError
from toolwire.llm import Purpose
from toolwire.sessions import MemorySessionStore
from toolwire.testing import ScriptedModel

pytestmark = pytest.mark.usefixtures("block_model_requests")

DATA = MedicineData.read()
ATTRIBUTION = DATA.attribution()
ADVIL_COUMADIN = (
    "Advil (ibuprofen) + Coumadin (warfarin): major interaction (warfarin + ibuprofen). "
    "NSAIDs add to warfarin's anticoagulant effect and irritate the stomach: higher bleeding "
    f"risk.\n{ATTRIBUTION}"
)


def spy_on_pick(app: App) -> list[str]:
    """Record every label the lookup singleton resolves (subtask runs and direct calls)."""
    lookup = app.tool("pharma.substance_lookup")
    assert isinstance(lookup, SubstanceLookupTool)
    labels: list[str] = []
    original = lookup.pick

    def pick(label: str, reply: str | None = None) -> Any:
        labels.append(label)
        return original(label, reply)

    lookup.pick = pick  # type: ignore[method-assign]
    return labels


async def test_decomposition_subtasks_and_the_guaranteed_answer(pharma_app: AppFactory) -> None:
    model = story_model("Advil", "Coumadin")
    app = pharma_app(model)
    picked = spy_on_pick(app)

    answer = await app.ask("Can I take Advil together with Coumadin?")

    assert answer.kind == "answer"
    assert answer.guaranteed_contexts == [ADVIL_COUMADIN]
    assert "Illustrative data, not medical advice" in answer.guaranteed_contexts[0]
    assert ADVIL_COUMADIN in answer.text  # the scripted composer joins the contexts
    assert answer.failures == []
    root = answer.trace
    assert [(run.coordinator_name, run.outcome) for run in root.coordinators] == [
        ("pharma.interaction_analysis", "decomposed")
    ]
    assert InteractionQuestion.model_validate_json(root.task_prompt) == InteractionQuestion(
        question="Can I take Advil together with Coumadin?", products=["Advil", "Coumadin"]
    )
    assert [
        (sub.task_no, sub.task_prompt, sub.required_tool_names, sub.owner_coordinator_name)
        for sub in root.sub_tasks
    ] == [
        (
            "1.1",
            'Which active substances does the medicine "Advil" contain?',
            ["pharma.substance_lookup"],
            "pharma.interaction_analysis",
        ),
        (
            "1.2",
            'Which active substances does the medicine "Coumadin" contain?',
            ["pharma.substance_lookup"],
            "pharma.interaction_analysis",
        ),
    ]
    for sub in root.sub_tasks:
        assert [(r.tool_name, r.reason, r.outcome) for r in sub.tools] == [
            ("pharma.substance_lookup", "required", "context")
        ]
        assert sub.applied_coordinator_names == ["pharma.interaction_analysis"]
    assert [(r.tool_name, r.reason, r.outcome) for r in root.tools] == [
        ("pharma.interaction_analysis", "required", "guaranteed")
    ]
    # No suitability test at all: the coordinator required the lookups on the subtasks and
    # itself on the parent, whose task prompt it had turned into JSON.
    assert model.calls_for(Purpose.SUITABILITY) == []
    assert root.required_tool_names == ["pharma.interaction_analysis"]
    # The decomposition named the products, so it is the one model call: the lookups and the
    # analysis run with the parameters the coordinator gave them (TaskInfo.tool_params).
    assert [call.purpose for call in answer.model_calls] == ["decomposition"]
    assert model.calls_for(Purpose.PARAMETERS) == []
    # The parent used the subtasks' findings: no direct lookup of either product.
    assert picked == ["Advil", "Coumadin"]
    # The guaranteed answer is the answer: no composition over the subtasks' findings that
    # could contradict it.
    assert model.calls_for(Purpose.ANSWER) == []


async def test_ambiguous_product_asks_and_the_reply_resumes(pharma_app: AppFactory) -> None:
    model = story_model("Coumadin", "Excedrin")
    app = pharma_app(model)
    picked = spy_on_pick(app)

    first = await app.ask("Can I take Coumadin with Excedrin?")

    assert first.kind == "clarification"
    assert first.session_id is not None
    assert first.text == (
        '"Excedrin" names 2 products in the data set: 1) Excedrin Extra Strength (paracetamol, '
        "acetylsalicylic acid, caffeine); 2) Excedrin PM Headache (paracetamol, "
        "diphenhydramine). Which one do you mean?"
    )
    assert [sub.status.value for sub in first.trace.sub_tasks] == ["done", "waiting_for_user"]
    assert first.guaranteed_contexts == []

    second = await app.ask("the PM one", session_id=first.session_id)

    assert second.kind == "answer"
    assert second.session_id == first.session_id and second.turn == 2
    assert second.guaranteed_contexts == [
        "Coumadin (warfarin) + Excedrin PM Headache (paracetamol, diphenhydramine): moderate "
        "interaction (warfarin + paracetamol). Regular high doses of paracetamol can raise the "
        f"INR.\n{ATTRIBUTION}"
    ]
    closed, resumed = second.trace.sub_tasks
    assert len(closed.tools) == 1  # 1.1 was not run again
    assert [r.outcome for r in resumed.tools] == ["context"]
    assert "asked" in resumed.tools[0].detail and "the PM one" in resumed.tools[0].detail
    # Across both rounds: one decomposition, lookups 1.1, 1.2, then 1.2 again with the reply.
    assert len(model.calls_for(Purpose.DECOMPOSITION)) == 1
    assert picked == ["Coumadin", "Excedrin", "Excedrin"]


async def test_a_reply_that_names_no_product_is_asked_again(pharma_app: AppFactory) -> None:
    app = pharma_app(story_model("Coumadin", "Excedrin"))
    first = await app.ask("Can I take Coumadin with Excedrin?")

    again = await app.ask("the blue box", session_id=first.session_id)

    assert again.kind == "clarification"
    assert again.text.startswith(RETRY_PREFIX)
    done = await app.ask("1", session_id=again.session_id)
    assert done.kind == "answer"
    [text] = done.guaranteed_contexts
    assert text.splitlines()[:2] == [
        "Coumadin (warfarin) + Excedrin Extra Strength (paracetamol, acetylsalicylic acid, "
        "caffeine): major interaction (warfarin + acetylsalicylic acid). Antiplatelet plus "
        "anticoagulant effect: higher bleeding risk.",
        "Coumadin (warfarin) + Excedrin Extra Strength (paracetamol, acetylsalicylic acid, "
        "caffeine): moderate interaction (warfarin + paracetamol). Regular high doses of "
        "paracetamol can raise the INR.",
    ]


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (
            "Unobtainium",
            '"Unobtainium" is not in the data set, so its interactions cannot be checked here.',
        ),
        (
            "Coumadim",
            '"Coumadim" is not in the data set (did you mean Coumadin?), so its interactions '
            "cannot be checked here.",
        ),
    ],
)
async def test_unknown_product_is_named_in_the_answer(
    pharma_app: AppFactory, other: str, expected: str
) -> None:
    app = pharma_app(story_model("Advil", other))

    answer = await app.ask(f"Can I take Advil with {other}?")

    assert answer.kind == "answer"
    assert answer.guaranteed_contexts == [f"{expected}\n{ATTRIBUTION}"]
    assert answer.failures == []


async def test_injection_gives_every_tool_the_same_lookup_singleton(
    pharma_app: AppFactory,
) -> None:
    app = pharma_app(ScriptedModel())
    lookup = app.tool("substance_lookup", "pharma")
    assert app.tool("pharma.interaction_analysis")._lookup is lookup  # type: ignore[attr-defined]
    assert app.tool("pharma.dosage_info")._lookup is lookup  # type: ignore[attr-defined]
    assert app.container.graph() == {
        "pharma.substance_lookup": [],
        "pharma.interaction_analysis": ["pharma.substance_lookup"],
        "pharma.dosage_info": ["pharma.substance_lookup"],
    }
    # The lookup takes no part in activation: only the other two are suitability candidates.
    model = (
        ScriptedModel()
        .on_classify("other")
        .on_extract(InteractionDecomposition, {"asks_about_combination": False})
    )
    model.on_suitability([]).on_answer("I can only help with medicines.")
    app = pharma_app(model)
    await app.ask("What's the weather?")
    [call] = model.calls_for(Purpose.CHOICE)
    assert call.inputs["options"] == ["interaction_analysis", "dosage_info"]


async def test_failed_subtask_is_covered_by_a_direct_call_and_its_own_clarification(
    pharma_app: AppFactory,
) -> None:
    """Subtask 1.2's lookup fails, so the parent looks Excedrin up itself (seed 6.8), asks
    which one, and its clarification round reuses 1.1's finding."""
    model = story_model("Coumadin", "Excedrin")
    app = pharma_app(model)
    picked = spy_on_pick(app)
    lookup = app.tool("pharma.substance_lookup")
    assert isinstance(lookup, SubstanceLookupTool)
    run_lookup = lookup.execute_with_result

    def failing_for_excedrin(params: SubstanceQuery, text: str) -> Any:
        if params.label == "Excedrin":
            raise RuntimeError("lookup service down")
        return run_lookup(params, text)

    lookup.execute_with_result = failing_for_excedrin  # type: ignore[method-assign]

    first = await app.ask("Can I take Coumadin with Excedrin?")

    assert first.kind == "clarification"
    assert first.text.startswith('"Excedrin" names 2 products')
    assert [r.outcome for r in first.trace.sub_tasks[1].tools] == ["error"]
    assert first.trace.tools[0].outcome == "clarification"

    second = await app.ask("Excedrin PM Headache", session_id=first.session_id)

    assert second.kind == "answer"
    assert second.guaranteed_contexts[0].startswith(
        "Coumadin (warfarin) + Excedrin PM Headache (paracetamol, diphenhydramine): moderate"
    )
    assert any("task 1.2: tool pharma.substance_lookup raised" in f for f in second.failures)
    # Coumadin was looked up once (subtask 1.1); Excedrin only directly by the parent.
    assert picked == ["Coumadin", "Excedrin", "Excedrin"]


async def test_failing_decomposition_still_answers_by_direct_calls(
    pharma_app: AppFactory,
) -> None:
    model = story_model(
        "Advil", "Coumadin", decomposition=ModelError("decomposition", "server down")
    )
    app = pharma_app(model)
    picked = spy_on_pick(app)

    answer = await app.ask("Can I take Advil together with Coumadin?")

    assert answer.guaranteed_contexts == [ADVIL_COUMADIN]
    assert answer.trace.sub_tasks == []
    assert answer.trace.coordinators[0].outcome == "error"
    assert picked == ["Advil", "Coumadin"]  # both by direct call from the analysis


async def test_dosage_question_with_an_ambiguous_brand(pharma_app: AppFactory) -> None:
    model = (
        ScriptedModel()
        .on_classify("dosage")
        .on_extract(InteractionDecomposition, {"asks_about_combination": False})
        .on_suitability(["dosage_info"])
        .on_extract(DosageQuery, {"product": "Excedrin"})
        .on_answer()
    )
    app = pharma_app(model)

    first = await app.ask("How much Excedrin can I take?")
    assert first.kind == "clarification"
    second = await app.ask("the extra strength one", session_id=first.session_id)

    assert second.guaranteed_contexts == [
        "Usual dosage for Excedrin Extra Strength: paracetamol: adults 500-1,000 mg every 4-6 "
        "hours, at most 4,000 mg a day; acetylsalicylic acid: adults (pain) 300-1,000 mg every "
        "4-6 hours, at most 4,000 mg a day; caffeine: as contained in the combination product; "
        "follow the product's label. Follow the product's label or your prescriber. "
        f"{ATTRIBUTION}"
    ]
    assert answer_tools(second) == [("pharma.dosage_info", "suitability", "guaranteed")]


def answer_tools(answer: Any) -> list[tuple[str, str, str]]:
    return [(r.tool_name, r.reason, r.outcome) for r in answer.trace.tools]


async def test_the_installed_distribution_loads_through_its_entry_point(
    isolated: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_PLUGINS", "pharma")
    app = App.load(llm=story_model("Advil", "Coumadin"), session_store=MemorySessionStore())
    try:
        assert [(info.name, info.domains, info.error) for info in app.plugins] == [
            ("pharma", ("pharma",), None)
        ]
        answer = await app.ask("Can I take Advil together with Coumadin?", domain="pharma")
        assert answer.guaranteed_contexts == [ADVIL_COUMADIN]
    finally:
        await app.aclose()


async def test_a_data_file_set_on_the_lookup_alone_serves_every_tool(isolated: Path) -> None:
    """The config example: ``data_file`` on ``substance_lookup`` only. The analysis and the
    dosage tool answer from that file too, and credit its source."""
    data = isolated / "products.json"
    data.write_text(
        json.dumps(
            {
                "source": "the test formulary",
                "disclaimer": "Not advice.",
                "products": [
                    {"name": "Foo", "substances": ["bar"]},
                    {"name": "Coumadin", "substances": ["warfarin"]},
                ],
                "interactions": [
                    {"substances": ["bar", "warfarin"], "severity": "major", "effect": "Bleeds."}
                ],
                "dosage_notes": {"bar": "one a day"},
            }
        )
    )
    config = isolated / "toolwire.yaml"
    config.write_text(
        "tools:\n"
        "  - name: substance_lookup\n"
        "    domain: pharma\n"
        f"    settings: {{data_file: {json.dumps(str(data))}}}\n"
    )
    app = App.load(
        config,
        plugins=[toolwire_pharma.plugin],
        load_entry_points=False,
        llm=story_model("Foo", "Coumadin"),
        session_store=MemorySessionStore(),
    )
    try:
        answer = await app.ask("Can I take Foo with Coumadin?")
        dosage = app.tool("pharma.dosage_info")
        assert isinstance(dosage, DosageInfoTool)
        dose = dosage.execute_with_result(DosageQuery(product="Foo"), "Foo dose?")
    finally:
        await app.aclose()

    assert answer.guaranteed_contexts == [
        "Foo (bar) + Coumadin (warfarin): major interaction (bar + warfarin). Bleeds.\n"
        "Source: the test formulary. Not advice."
    ]
    assert dose.text == (
        "Usual dosage for Foo: bar: one a day. Follow the product's label or your prescriber. "
        "Source: the test formulary. Not advice."
    )
