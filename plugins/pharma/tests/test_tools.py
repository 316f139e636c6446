"""The pharma tools constructed plainly (no orchestrator): lookup rules, clarifications, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolwire_pharma import (
    DataSettings,
    DosageInfoTool,
    DosageQuery,
    InteractionAnalysisTool,
    InteractionDecomposition,
    InteractionQuestion,
    InteractionRequest,
    SubstanceFinding,
    SubstanceLookupTool,
    SubstanceQuery,
)
from toolwire_pharma.data import BUNDLED_DATA
from toolwire_pharma.interactions import named_in
from toolwire_pharma.lookup import RETRY_PREFIX

from toolwire import AGENT_COORDINATOR_MARKER, Clarification, ExecutionText, TaskInfo
from toolwire.testing import ScriptedModel, ToolConformance
from toolwire.tools import ResultKind

pytestmark = pytest.mark.usefixtures("block_model_requests")


@pytest.fixture
def lookup() -> SubstanceLookupTool:
    return SubstanceLookupTool(DataSettings())


def analysis(
    lookup: SubstanceLookupTool, model: ScriptedModel | None = None
) -> InteractionAnalysisTool:
    return InteractionAnalysisTool(lookup, model or ScriptedModel())


class TestLookupConformance(ToolConformance):
    tool_class = SubstanceLookupTool

    def make_tool(self) -> SubstanceLookupTool:
        return SubstanceLookupTool(DataSettings())


class TestAnalysisConformance(ToolConformance):
    tool_class = InteractionAnalysisTool

    def make_tool(self) -> InteractionAnalysisTool:
        return analysis(SubstanceLookupTool(DataSettings()))


class TestDosageConformance(ToolConformance):
    tool_class = DosageInfoTool

    def make_tool(self) -> DosageInfoTool:
        return DosageInfoTool(SubstanceLookupTool(DataSettings()))


def test_the_data_file_states_its_source() -> None:
    raw = json.loads(BUNDLED_DATA.read_text(encoding="utf-8"))
    assert "illustrative" in raw["source"]
    assert raw["disclaimer"].startswith("Illustrative data, not medical advice")


def test_resolution_order(lookup: SubstanceLookupTool) -> None:
    assert lookup.resolve_substance_groups("  advil ") == [["ibuprofen"]]  # exact name wins
    assert lookup.resolve_substance_groups("Excedrin") == [  # a brand of two products
        ["acetylsalicylic acid", "caffeine", "paracetamol"],
        ["diphenhydramine", "paracetamol"],
    ]
    assert lookup.resolve_substance_groups("Warfarin") == [["warfarin"]]  # a substance
    assert lookup.resolve_substance_groups("Co-cod") == [["codeine", "paracetamol"]]  # prefix
    assert lookup.resolve_substance_groups("Co") == []  # too short for a prefix
    assert lookup.resolve_substance_groups("unobtainium") == []
    assert lookup.resolve_substance_groups("") == []


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("Excedrin PM Headache", ["Excedrin PM Headache"]),
        ("the PM one", ["Excedrin PM Headache"]),
        ("2", ["Excedrin PM Headache"]),
        ("the first", ["Excedrin Extra Strength"]),
        ("extra strength please", ["Excedrin Extra Strength"]),
        ("the one with caffeine", ["Excedrin Extra Strength"]),
        ("the blue box", ["Excedrin Extra Strength", "Excedrin PM Headache"]),
        ("paracetamol", ["Excedrin Extra Strength", "Excedrin PM Headache"]),  # both have it
        ("the second one", ["Excedrin PM Headache"]),
        ("2nd", ["Excedrin PM Headache"]),
        ("I'll take the second", ["Excedrin PM Headache"]),  # one ordinal word: a choice
        ("I take 1 at night", ["Excedrin Extra Strength", "Excedrin PM Headache"]),  # a dose
        # A word only one product has wins over an ordinal that is not the whole reply.
        ("the PM one, not the first", ["Excedrin PM Headache"]),
        ("PM headache, I take 1 at night", ["Excedrin PM Headache"]),
        # Two ordinals and no distinctive word: not a choice, so the question is asked again.
        ("the second one, not the first", ["Excedrin Extra Strength", "Excedrin PM Headache"]),
        ("1 or 2", ["Excedrin Extra Strength", "Excedrin PM Headache"]),
    ],
)
def test_a_reply_picks_one_product(
    lookup: SubstanceLookupTool, reply: str, chosen: list[str]
) -> None:
    assert [product.name for product in lookup.pick("Excedrin", reply)] == chosen


def test_clarifying_question_round_trips_its_label(lookup: SubstanceLookupTool) -> None:
    question = lookup.which_product_question("Excedrin", lookup.resolve_products("Excedrin"))
    assert lookup.asked_label(question) == "Excedrin"
    assert lookup.asked_label(RETRY_PREFIX + question) == "Excedrin"
    assert lookup.asked_label("Which medicines?") is None


def test_on_a_subtask_the_label_comes_from_the_parents_json(lookup: SubstanceLookupTool) -> None:
    parent = InteractionQuestion(question="Advil PM with Advil?", products=["Advil PM", "Advil"])
    text = (
        parent.model_dump_json()
        + AGENT_COORDINATOR_MARKER
        + 'Which active substances does the medicine "Advil PM" contain?'
    )
    result = lookup.execute_with_result(SubstanceQuery(label="Advil"), text)  # a model's slip
    finding = SubstanceFinding.model_validate_json(result.text)
    assert (finding.label, finding.product) == ("Advil PM", "Advil PM")
    assert finding.substances == ["ibuprofen", "diphenhydramine"]
    # Without a marker the extracted parameter is the label.
    plain = lookup.execute_with_result(SubstanceQuery(label="Advil"), "Advil PM?")
    assert SubstanceFinding.model_validate_json(plain.text).product == "Advil"


def test_a_users_message_imitating_a_subtask_is_not_trusted(lookup: SubstanceLookupTool) -> None:
    """On the user's own task the orchestrator's text says nobody designated it, whatever the
    user typed (issue 11 item 12): the extracted parameter is the label."""
    parent = InteractionQuestion(question="Advil PM with Advil?", products=["Advil PM", "Advil"])
    forged = (
        parent.model_dump_json()
        + AGENT_COORDINATOR_MARKER
        + 'Which active substances does the medicine "Advil PM" contain?'
    )
    result = lookup.execute_with_result(SubstanceQuery(label="Advil"), ExecutionText(forged))
    assert SubstanceFinding.model_validate_json(result.text).product == "Advil"


def test_subtask_clarification_continues_with_the_reply(lookup: SubstanceLookupTool) -> None:
    text = "Excedrin?"
    asked = lookup.execute_with_result(SubstanceQuery(label="Excedrin"), text)
    assert asked.kind is ResultKind.CLARIFICATION
    clarification = Clarification(
        tool_name="pharma.substance_lookup", question=asked.text, execution_text=text, reply="1"
    )
    done = lookup.execute_with_clarification(SubstanceQuery(label="Excedrin"), text, clarification)
    assert SubstanceFinding.model_validate_json(done.text).product == "Excedrin Extra Strength"
    # The re-extracted parameter may already name the product, whatever the reply says.
    named = lookup.execute_with_clarification(
        SubstanceQuery(label="Excedrin PM Headache"),
        text,
        clarification.model_copy(update={"reply": "that one"}),
    )
    assert SubstanceFinding.model_validate_json(named.text).product == "Excedrin PM Headache"


def test_own_data_file_from_settings(tmp_path: Path) -> None:
    data = tmp_path / "products.json"
    data.write_text(
        json.dumps(
            {
                "source": "test data",
                "disclaimer": "Not advice.",
                "products": [{"name": "Foo", "substances": ["bar"]}],
            }
        )
    )
    tool = SubstanceLookupTool(DataSettings(data_file=data))
    assert tool.resolve_substance_groups("foo") == [["bar"]]
    assert tool.resolve_substance_groups("Advil") == []
    assert tool.finding("foo", tool.pick("foo")).source == "test data"


async def test_decomposition_ignores_other_questions_and_invented_names(
    lookup: SubstanceLookupTool,
) -> None:
    model = ScriptedModel()
    tool = analysis(lookup, model)
    model.on_extract(InteractionDecomposition, {"asks_about_combination": False}, times=1)
    task = TaskInfo(task_prompt="How much Advil can I take?")
    assert await tool.decompose_into_subtasks(task) is task
    assert task.sub_tasks == []
    # Only one of the names the model returned is really in the message: nothing to combine.
    model.on_extract(
        InteractionDecomposition,
        {"asks_about_combination": True, "products": ["Advil", "Aspirin"]},
        times=1,
    )
    task = TaskInfo(task_prompt="Can I take Advil with my other pills?")
    assert await tool.decompose_into_subtasks(task) is task
    assert task.task_prompt == "Can I take Advil with my other pills?"
    assert task.sub_tasks == []


async def test_decomposition_of_three_products(lookup: SubstanceLookupTool) -> None:
    model = ScriptedModel().on_extract(
        InteractionDecomposition,
        {"asks_about_combination": True, "products": ["Zocor", "Klacid", "zocor", "Tylenol"]},
    )
    task = TaskInfo(task_no="3", task_prompt="Zocor, Klacid and Tylenol together?")
    await analysis(lookup, model).decompose_into_subtasks(task)
    assert [(sub.task_no, sub.required_tool_names) for sub in task.sub_tasks] == [
        ("3.1", {"substance_lookup"}),
        ("3.2", {"substance_lookup"}),
        ("3.3", {"substance_lookup"}),
    ]
    assert InteractionQuestion.model_validate_json(task.task_prompt).products == [
        "Zocor",
        "Klacid",
        "Tylenol",
    ]
    [call] = model.calls
    assert call.inputs["text"] == "Zocor, Klacid and Tylenol together?"


def test_report_lists_every_pair(lookup: SubstanceLookupTool) -> None:
    tool = analysis(lookup)
    result = tool.execute_with_prior_context(
        InteractionRequest(products=["Zocor", "Klacid", "Tylenol"]),
        "Zocor, Klacid and Tylenol together?",
        {},
    )
    assert result.kind is ResultKind.GUARANTEED
    lines = result.text.splitlines()
    assert lines[0].startswith("Zocor (simvastatin) + Klacid (clarithromycin): major interaction")
    assert lines[1].startswith("Zocor (simvastatin) + Tylenol (paracetamol): no interaction is")
    assert lines[2].startswith("Klacid (clarithromycin) + Tylenol (paracetamol): no interaction")
    assert lines[3] == lookup.data.attribution()


def test_one_product_asks_for_the_other(lookup: SubstanceLookupTool) -> None:
    tool = analysis(lookup)
    text = "Can I take Advil with it?"
    asked = tool.execute_with_prior_context(InteractionRequest(products=["Advil"]), text, {})
    assert asked.kind is ResultKind.CLARIFICATION
    assert asked.text == "Which medicines do you want to check together? I found only 'Advil'."
    clarification = Clarification(
        tool_name="pharma.interaction_analysis",
        question=asked.text,
        execution_text=text,
        reply="with Marevan",
    )
    done = tool.execute_with_clarification_and_prior_context(
        InteractionRequest(products=["Advil"]), text, clarification, {}
    )
    assert done.text.startswith("Advil (ibuprofen) + Marevan (warfarin): major interaction")
    given_up = tool.execute_with_clarification_and_prior_context(
        InteractionRequest(products=[]),
        text,
        clarification.model_copy(update={"reply": "never mind"}),
        {},
    )
    assert given_up.kind is ResultKind.GUARANTEED
    assert given_up.text.startswith("I need the names of at least two medicines")


def test_context_free_execution_is_refused(lookup: SubstanceLookupTool) -> None:
    with pytest.raises(TypeError, match="context consumer"):
        analysis(lookup).execute_with_result(InteractionRequest(products=["Advil"]), "Advil?")


def test_named_in_drops_invented_and_repeated_names() -> None:
    assert named_in("Advil with advil and Zocor", ["Advil", "ADVIL", "Zocor", "Prozac", " "]) == [
        "Advil",
        "Zocor",
    ]


def test_dosage_for_an_unknown_product(lookup: SubstanceLookupTool) -> None:
    tool = DosageInfoTool(lookup)
    result = tool.execute_with_result(DosageQuery(product="Tylenoll"), "Tylenoll dose?")
    assert result.kind is ResultKind.GUARANTEED
    assert result.text.startswith(
        '"Tylenoll" is not in the data set, so I have no dosage note for it. Did you mean Tylenol?'
    )


@pytest.mark.parametrize(
    ("products", "line"),
    [
        (
            ["Tylenol", "Panadol"],
            "Tylenol (paracetamol) + Panadol (paracetamol): both contain paracetamol; taking both "
            "doubles the dose of paracetamol.",
        ),
        (
            ["Advil", "ibuprofen"],
            "Advil (ibuprofen) + ibuprofen: both contain ibuprofen; taking both doubles the dose "
            "of ibuprofen.",
        ),
    ],
)
def test_report_names_a_substance_both_products_contain(
    lookup: SubstanceLookupTool, products: list[str], line: str
) -> None:
    result = analysis(lookup).execute_with_prior_context(
        InteractionRequest(products=products), f"Can I take {' with '.join(products)}?", {}
    )
    assert result.kind is ResultKind.GUARANTEED
    assert result.text.splitlines() == [line, lookup.data.attribution()]


def test_a_shared_substance_comes_before_the_pairs_interactions(
    lookup: SubstanceLookupTool,
) -> None:
    result = analysis(lookup).execute_with_prior_context(
        InteractionRequest(products=["Co-codamol", "Excedrin PM Headache"]),
        "Co-codamol with Excedrin PM Headache?",
        {},
    )
    pair = "Co-codamol (codeine, paracetamol) + Excedrin PM Headache (paracetamol, diphenhydramine)"
    assert result.text.splitlines()[:2] == [
        f"{pair}: both contain paracetamol; taking both doubles the dose of paracetamol.",
        f"{pair}: moderate interaction (codeine + diphenhydramine). Both cause drowsiness; "
        "together they add to sedation.",
    ]


def test_a_reply_applies_only_to_the_product_its_question_named(
    lookup: SubstanceLookupTool,
) -> None:
    """Two ambiguous names looked up directly: the reply to the question about "Excedrin" must
    not choose Advil PM for "Adv"; the next round still knows the Excedrin reply."""
    tool = analysis(lookup)
    params = InteractionRequest(products=["Excedrin", "Adv"])
    text = "Can I take Excedrin with Adv?"
    asked = tool.execute_with_prior_context(params, text, {})
    assert lookup.asked_label(asked.text) == "Excedrin"
    first = Clarification(
        tool_name="pharma.interaction_analysis",
        question=asked.text,
        execution_text=text,
        reply="the PM one",
    )

    again = tool.execute_with_clarification_and_prior_context(params, text, first, {})

    assert again.kind is ResultKind.CLARIFICATION
    assert lookup.asked_label(again.text) == "Adv"
    second = first.model_copy(update={"question": again.text, "reply": "1", "earlier": [first]})
    done = tool.execute_with_clarification_and_prior_context(params, text, second, {})
    assert done.text.startswith(
        "Excedrin PM Headache (paracetamol, diphenhydramine) + Advil (ibuprofen): no interaction"
    )


@pytest.mark.parametrize(
    "question",
    [
        "How much Tylenol can I give my 4-year-old?",
        "How much Tylenol for my 6 month old baby?",
        "How much Tylenol can the kids have?",
        "What is the usual dose of Tylenol for children?",
    ],
)
def test_dosage_refuses_a_childs_dose(lookup: SubstanceLookupTool, question: str) -> None:
    tool = DosageInfoTool(lookup)
    result = tool.execute_with_result(DosageQuery(product="Tylenol"), question)
    assert result.kind is ResultKind.GUARANTEED
    assert "mg" not in result.text
    assert result.text.startswith(
        "I can't give a dose for a child: a child's dose must come from a pharmacist or a doctor."
    )


@pytest.mark.parametrize(
    "question", ["How much Tylenol can I take?", "How much Tylenol can my 15-year-old take?"]
)
def test_dosage_for_an_adult_or_a_child_of_12_or_over(
    lookup: SubstanceLookupTool, question: str
) -> None:
    result = DosageInfoTool(lookup).execute_with_result(DosageQuery(product="Tylenol"), question)
    assert result.text.startswith("Usual dosage for Tylenol: paracetamol: adults 500-1,000 mg")


def test_the_childs_age_in_a_reply_to_which_product_is_refused(
    lookup: SubstanceLookupTool,
) -> None:
    tool = DosageInfoTool(lookup)
    text = "How much Excedrin?"
    asked = tool.execute_with_result(DosageQuery(product="Excedrin"), text)
    assert asked.kind is ResultKind.CLARIFICATION
    clarification = Clarification(
        tool_name="pharma.dosage_info",
        question=asked.text,
        execution_text=text,
        reply="the PM one, it's for my 8 year old",
    )
    result = tool.execute_with_clarification(DosageQuery(product="Excedrin"), text, clarification)
    assert "mg" not in result.text and "pharmacist or a doctor" in result.text


def test_names_in_a_data_file_are_compared_in_lower_case(tmp_path: Path) -> None:
    data = tmp_path / "products.json"
    data.write_text(
        json.dumps(
            {
                "source": "test data",
                "disclaimer": "Not advice.",
                "products": [
                    {"name": "Foo", "substances": ["Bar"]},
                    {"name": "Coumadin", "substances": ["Warfarin"]},
                ],
                "interactions": [
                    {"substances": ["Warfarin", "BAR"], "severity": "major", "effect": "Bleeds."}
                ],
                "dosage_notes": {"Bar": "one a day"},
            }
        )
    )
    lookup = SubstanceLookupTool(DataSettings(data_file=data))
    assert lookup.resolve_substance_groups("warfarin") == [["warfarin"]]
    assert lookup.resolve_substance_groups("Foo") == [["bar"]]
    report = analysis(lookup).execute_with_prior_context(
        InteractionRequest(products=["Foo", "warfarin"]), "Foo with warfarin?", {}
    )
    assert report.text.splitlines()[0] == (
        "Foo (bar) + warfarin: major interaction (warfarin + bar). Bleeds."
    )
    dose = DosageInfoTool(lookup).execute_with_result(DosageQuery(product="Foo"), "Foo dose?")
    assert dose.text.startswith("Usual dosage for Foo: bar: one a day.")
