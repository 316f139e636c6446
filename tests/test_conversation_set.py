"""The labelled multi-turn set (bench/conversations/<domain>.jsonl) agrees with the tools it is
labelled against, and its split is fixed: a wrong label fails here, before any evaluation starts
a model (bench/eval_conversations.py)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from toolwire import App

CONVERSATIONS_DIR = Path(__file__).resolve().parents[1] / "bench" / "conversations"
sys.path.insert(0, str(CONVERSATIONS_DIR))

from conversation_set import (  # noqa: E402
    DOMAINS,
    LabelledConversation,
    assign_splits,
    check_set,
    labelling_app,
    load_set,
    matches,
)


@pytest.fixture
def app(isolated: Path, block_model_requests: None) -> App:
    """The app the set is labelled against; no configuration file, no model."""
    return labelling_app()


def test_every_domain_has_a_file_and_every_file_parses() -> None:
    assert sorted(path.stem for path in CONVERSATIONS_DIR.glob("*.jsonl")) == sorted(DOMAINS)
    conversations = load_set()
    assert all(conversations[domain] for domain in DOMAINS)


def test_every_label_names_a_tool_of_its_domain_and_a_field_of_its_parameters(app: App) -> None:
    problems = check_set(load_set(), app)
    assert problems == [], "\n".join(problems)


def test_the_split_is_fixed_and_about_half_in_every_domain() -> None:
    conversations = load_set()
    assert all(c.split is not None for listed in conversations.values() for c in listed)
    assert assign_splits(conversations) == conversations  # the rule has nothing left to give
    for domain, listed in conversations.items():
        splits = Counter(c.split for c in listed)
        assert abs(splits["dev"] - splits["test"]) <= max(1, len(listed) // 10), domain
    dev, test = load_set(split="dev"), load_set(split="test")
    assert sum(map(len, dev.values())) + sum(map(len, test.values())) == sum(
        map(len, conversations.values())
    )


def test_the_set_is_as_large_and_as_varied_as_the_issue_asks() -> None:
    conversations = [c for listed in load_set().values() for c in listed]
    roles = Counter(turn.role for c in conversations for turn in c.turns)
    assert len(conversations) >= 60
    assert {len(c.turns) for c in conversations} == {2, 3, 4}
    assert roles["follow_up"] >= 60 and roles["subject_change"] >= 15
    messages = {turn.message for c in conversations for turn in c.turns}
    for phrase in ("What about children?", "No, I meant Excedrin PM."):
        assert phrase in messages


def _conversation(ident: str, **turn: object) -> LabelledConversation:
    first = {"role": "first", "message": "How far is it?", "tools": ["geometry.point_distance"]}
    follow = {"role": "follow_up", "message": "And then?", **turn}
    return LabelledConversation.model_validate(
        {"id": ident, "pattern": "p", "split": "dev", "turns": [first, follow]}
    )


def test_the_check_reports_what_the_tools_contradict(app: App) -> None:
    bad = {
        "geometry": [
            _conversation("x1", tools=["geometry.circle_areas"]),
            _conversation("x2", tools=["geometry.bmi"], params={"geometry.bmi": {"weight": [70]}}),
            _conversation(
                "x3", tools=["geometry.bmi"], params={"geometry.bmi": {"height_m": ["tall"]}}
            ),
            _conversation(
                "x4", tools=["geometry.bmi"], absent={"geometry.hypotenuse": {"leg_a": [3]}}
            ),
        ],
        "pharma": [
            LabelledConversation.model_validate(
                {
                    "id": "y",
                    "pattern": "p",
                    "turns": [
                        {"role": "first", "message": "a", "tools": ["pharma.substance_lookup"]},
                        {"role": "first", "message": "b", "tools": []},
                    ],
                }
            )
        ],
    }
    problems = check_set(bad, app)
    expected = [
        "'geometry.circle_areas' is not an answering tool",
        "geometry.bmi has no parameter 'weight'",
        "geometry.bmi.height_m cannot hold 'tall'",
        "absent name 'geometry.hypotenuse', which the turn's tools do not list",
        "y: no split",
        "'pharma.substance_lookup' is not an answering tool",
        "y turn 2: role 'first'",
    ]
    for text in expected:
        assert any(text in problem for problem in problems), (text, problems)
    assert len(problems) == len(expected)


def test_a_new_conversation_gets_a_split_and_an_old_one_keeps_its_own() -> None:
    def conversation(ident: str, split: str | None) -> LabelledConversation:
        turns = [{"role": "first", "message": "m", "tools": []}] * 2
        return LabelledConversation.model_validate(
            {"id": ident, "pattern": "p", "split": split, "turns": turns}
        )

    old = [conversation("a", "test"), conversation("b", "test")]
    new = [conversation(f"n{number}", None) for number in range(4)]
    assigned = assign_splits({"geometry": [*old, *new]})["geometry"]
    assert [c.split for c in assigned[:2]] == ["test", "test"]
    assert Counter(c.split for c in assigned) == {"dev": 3, "test": 3}
    assert assign_splits({"geometry": [*old, *new]}) == {"geometry": assigned}  # seeded


@pytest.mark.parametrize(
    ("label", "found", "expected"),
    [
        (4, 4.0, True),
        (4, 40.0, False),
        (26.2, "26.2 miles", True),
        ("sort", "How do I make json.dumps sort the keys?", True),
        ("sort", "resort", False),
        ("Excedrin PM", "Excedrin PM Headache", True),
        ("Extra Strength", "Excedrin PM", False),
        ("lru_cache", "functools.lru_cache", True),
        ("f", "°F", True),
        ("f", "feet", False),
        (["km", "kilomet"], "kilometres", True),
        ("anna", ["Anna", "Ben"], True),
        ("3", "15:00 tomorrow", False),
    ],
)
def test_how_a_label_matches_a_parameter(label: object, found: object, expected: bool) -> None:
    assert matches(label, found) is expected  # type: ignore[arg-type]
