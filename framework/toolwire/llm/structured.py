"""Structured output from pydantic models: how the schema is sent, and how the answer is read.

Three ways to make a server answer in a schema, each deterministic so the request stays
byte-identical between questions:

* ``json_schema``: the schema as ``response_format`` (OpenAI, vLLM, recent llama.cpp);
* ``tools``: a forced call of one function whose parameters are the schema (servers without
  ``json_schema`` support);
* ``json_object``: ``{"type": "json_object", "schema": …}``, llama-cpp-python's form: the schema
  becomes a grammar and is not rendered into the prompt (the embedded model's mode: shorter
  prompts, and more accurate yes/no answers from the 0.5B model than a forced function call).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, create_model

StructuredMode = Literal["json_schema", "tools", "json_object"]
M = TypeVar("M", bound=BaseModel)

_UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@lru_cache(maxsize=256)
def schema_name(schema: type[BaseModel]) -> str:
    """A function/schema name providers accept (letters, digits, ``_`` and ``-``; 64 max)."""
    return _UNSAFE_NAME.sub("_", schema.__name__)[:64] or "output"


@lru_cache(maxsize=256)
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema by alias (cached: same class, same bytes)."""
    return schema.model_json_schema(by_alias=True)


def request_options(schema: type[BaseModel], mode: StructuredMode) -> dict[str, Any]:
    """The keyword arguments that make the server answer in ``schema``."""
    name = schema_name(schema)
    if mode == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": json_schema(schema), "strict": False},
            }
        }
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": json_schema(schema)}}
    return {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": schema.__doc__.strip() if schema.__doc__ else name,
                    "parameters": json_schema(schema),
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": name}},
    }


def parse_output(schema: type[M], raw: str) -> M:
    """Validate a model's raw JSON output; raises ``ValueError`` with a message fit to send back."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the output is not valid JSON ({exc.msg} at position {exc.pos})") from exc
    except RecursionError:  # "[[[[…" thousands deep: no schema of ours nests like that
        raise ValueError("the output is JSON nested too deeply to read") from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ValueError(f"the output does not match the schema: {problems}") from exc


class YesNo(BaseModel):
    """The answer to one tool's yes/no question.

    ``"yes"``/``"no"`` rather than a boolean: measured on the embedded model, a boolean was
    answered ``true`` for nearly every tool.
    """

    answer: Literal["yes", "no"]


@lru_cache(maxsize=64)
def page_verdicts_model(count: int) -> type[BaseModel]:
    """The batched relevance verdict: one required boolean per page, ``page_1`` … in the order
    the prompt names the pages. The pages' labels stay out of the schema, so the request's
    parameters are the same bytes for every question with as many pages (the schema is a
    grammar on llama.cpp, and a provider may cache it)."""
    fields: dict[str, Any] = {
        f"page_{number}": (
            bool,
            Field(description=f"true if page {number} of those named helps answer the task"),
        )
        for number in range(1, count + 1)
    }
    model: type[BaseModel] = create_model("PageVerdicts", **fields)
    model.__doc__ = "Whether each retrieved page helps answer the task."
    return model


@lru_cache(maxsize=256)
def choice_model(names: tuple[str, ...], several: bool) -> type[BaseModel]:
    """The answer to a constrained choice: option names only (an enum), in the given order.

    ``several``: ``{"choice": [names...]}``, none, one or more, each at most once. Otherwise
    ``{"choice": name}`` where the name ``"none"`` means nothing fits (``"none"`` is then reserved
    and must not be an option). Cached: the same options give the same class and schema bytes.
    """
    if several:
        item: Any = Literal.__getitem__(names)
        field: Any = (list[item], Field(json_schema_extra={"uniqueItems": True}))
    else:
        if NO_CHOICE in names:
            raise ValueError(f"{NO_CHOICE!r} cannot be an option name of a single choice")
        field = (Literal.__getitem__((*names, NO_CHOICE)), ...)
    model: type[BaseModel] = create_model("Choice", choice=field)
    model.__doc__ = "The options that fit the task."
    return model


NO_CHOICE = "none"
"""What a single choice answers when no option fits."""


def chosen_names(answer: BaseModel) -> list[str]:
    """The option names a :func:`choice_model` answer holds, in order, without ``"none"``."""
    choice = answer.model_dump()["choice"]
    names = choice if isinstance(choice, list) else [choice]
    return [str(name) for name in dict.fromkeys(names) if name != NO_CHOICE]
