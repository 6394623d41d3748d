"""User code's outcomes as the JSON that is stored: whatever they are, they can be.

A step's or a workflow's outcome is user code's, so it is always recorded -- never taken
for a failure of the engine, which would hand the execution back and run the step again
and again. A result that cannot become JSON (nested too deep, NaN, text that is not valid
Unicode, a serializer that raises) is the code's failure, recorded as its error. An
exception is rendered so that it can always be stored: a lone surrogate in its message (a
file name decoded with ``surrogateescape``) is kept as its escape (``\\udce9``), and an
exception whose ``__str__`` raises is stored as such.
"""

from __future__ import annotations

import traceback

import pydantic
from pydantic_core import PydanticSerializationError
from raftflow.engine.workflow.registry import Codec
from raftflow.stores.records import ErrorInfo
from raftflow.transports.payload import to_json

from raftflow.errors import InvalidArgumentError

#: Longest traceback kept with an error (the tail is kept: it names the failing line).
MAX_TRACEBACK_CHARS = 16_000
#: Longest error message kept (a huge one must not make the record itself too large).
MAX_MESSAGE_CHARS = 16_000


def readable(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate becomes its backslash escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def message_of(exc: BaseException) -> str:
    """``str(exc)`` as valid Unicode, or a note that it failed (its ``__str__`` raised)."""
    try:
        text = str(exc)
    except Exception as failed:  # user code: anything
        return f"<str() of the exception failed: {type(failed).__qualname__}>"
    return readable(text)


def error_info(exc: BaseException) -> ErrorInfo:
    """What is stored of an exception: its type, message and traceback, all storable."""
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception as failed:  # a broken exception (e.g. its __notes__)
        text = f"<the traceback could not be formatted: {type(failed).__qualname__}>"
    return ErrorInfo(
        type=readable(type(exc).__qualname__),
        message=message_of(exc)[:MAX_MESSAGE_CHARS],
        traceback=readable(text)[-MAX_TRACEBACK_CHARS:],
    )


def error_json(exc: BaseException, *, what: str) -> str:
    """The stored error of ``exc`` (see :func:`error_info`) as JSON text."""
    return to_json(error_info(exc).to_json(), what=what)


def encode_result(
    codec: Codec, value: object, *, what: str, limit: int
) -> tuple[str | None, Exception | None]:
    """A result as JSON text, or the error that makes it unusable (which becomes the
    outcome: a result that does not match its annotation or cannot be stored is the
    code's bug)."""
    try:
        return to_json(codec.to_json_value(value), what=f"result of {what}", limit=limit), None
    except (pydantic.ValidationError, PydanticSerializationError) as bad:
        return None, InvalidArgumentError(
            f"result of {what} does not match its annotation {codec.annotation!r}: "
            f"{message_of(bad)}"
        )
    except InvalidArgumentError as bad:
        return None, bad
    except Exception as bad:  # the serializer refused it: too deep, a model's own code...
        return None, InvalidArgumentError(
            f"result of {what} cannot be stored as JSON: {type(bad).__name__}: {message_of(bad)}"
        )
