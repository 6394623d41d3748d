"""JSON payloads and identifiers: validation at the public boundary.

Everything raftflow stores is JSON text (never pickle). Values are checked before any
request is built, so a bad one raises :class:`InvalidArgumentError` and writes nothing.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pydantic_core

from raftflow.errors import InvalidArgumentError, PayloadTooLargeError

#: Default upper bound of one serialized payload (event, workflow input, step result).
MAX_PAYLOAD_BYTES = 1_048_576
#: Upper bound of a group id / execution id, in characters.
MAX_ID_LENGTH = 256


def to_json(value: Any, *, what: str, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """Serialize ``value`` to compact JSON text, or raise :class:`InvalidArgumentError`.

    Pydantic models, dataclasses, datetimes, UUIDs and the like become their JSON form.
    NaN and infinities are refused (JSON has none): this is the one check of them, so the
    codecs pass them through (:class:`~raftflow.engine.workflow.registry.Codec`). Strings that are
    not valid Unicode (lone surrogates) are refused too: they would not survive the trip
    through rqlite.
    """
    try:
        text = _JSON.encode(value)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError) as exc:
        if str(exc).startswith("Out of range float values"):  # json's allow_nan=False
            raise InvalidArgumentError(
                f"{what} holds NaN or an infinity, which JSON cannot represent"
            ) from None
        raise InvalidArgumentError(f"{what} is not JSON-serializable: {exc}") from None
    except RecursionError:
        raise InvalidArgumentError(f"{what} is nested too deeply to serialize") from None
    if size > limit:
        raise PayloadTooLargeError(
            f"{what} is {size} bytes as JSON, over the limit of {limit} bytes"
        )
    return text


#: ``json.dumps(value, default=..., ensure_ascii=False, allow_nan=False, separators=...)``,
#: made once: json.dumps makes an encoder per call when given options.
_JSON = json.JSONEncoder(
    default=pydantic_core.to_jsonable_python,
    ensure_ascii=False,
    allow_nan=False,
    separators=(",", ":"),
)


def from_json(text: str) -> Any:
    return json.loads(text)


def check_id(value: object, *, what: str, limit: int = MAX_ID_LENGTH) -> str:
    """A group or execution id: a non-empty string of valid Unicode without NUL."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgumentError(f"{what} must not be empty")
    if len(value) > limit:
        raise InvalidArgumentError(f"{what} is longer than {limit} characters")
    if "\x00" in value:
        raise InvalidArgumentError(f"{what} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


#: Upper bound of a signal topic or an event key, in characters.
MAX_TOPIC_LENGTH = 256


def check_topic(value: object, *, what: str = "topic") -> str:
    """A signal topic or event key: a short string of valid Unicode (None: the default
    topic, stored as ``""``)."""
    if value is None and what == "topic":
        return ""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a short str, not {type(value).__name__}")
    if len(value) > MAX_TOPIC_LENGTH or "\x00" in value:
        raise InvalidArgumentError(
            f"{what} must be at most {MAX_TOPIC_LENGTH} characters, without NUL"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


def check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"priority must be an int from 0 to 4, not {value!r}")
    if not 0 <= value <= 4:
        raise InvalidArgumentError(f"priority must be from 0 to 4, not {value}")
    return value


def check_seconds(value: object, *, what: str, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{what} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "zero or positive" if allow_zero else "positive"
        raise InvalidArgumentError(f"{what} must be a finite, {bound} number, not {value!r}")
    if seconds > 366 * 86400:
        raise InvalidArgumentError(f"{what} must be at most a year, not {value!r}")
    return seconds
