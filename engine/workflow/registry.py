"""Workflow and step definitions: names, sync/async, and how their values become JSON.

A function's annotations decide its codec: the workflow's single parameter validates the
input of ``engine.start`` and rebuilds it on every run; a return annotation turns a stored
JSON result back into a value (a pydantic model, a dataclass, a ``list[int]``...). Without
an annotation a value is stored and returned as plain JSON.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from pydantic_core import PydanticSerializationError
from raftflow.engine.workflow.queues import DEFAULT_QUEUE, check_queue, lane
from raftflow.engine.workflow.ratelimit import RateLimit
from raftflow.engine.workflow.retry import Retry
from raftflow.engine.workflow.starts import StartSettings
from raftflow.engine.workflow.versions import check_version, source_version
from raftflow.transports.payload import check_id, check_seconds

from raftflow.errors import ConfigurationError, InputValidationError, UnknownWorkflowError

#: NaN and infinities pass through a codec as they are, for the one check of them to
#: refuse (:func:`~raftflow.transports.payload.to_json`): pydantic's JSON mode writes null.
_KEEP = pydantic.ConfigDict(ser_json_inf_nan="constants")


@dataclass(frozen=True)
class Codec:
    """Validates a Python value against an annotation and converts it to and from JSON."""

    annotation: Any
    adapter: pydantic.TypeAdapter[Any] = field(repr=False)

    @classmethod
    def of(cls, annotation: Any) -> Codec:
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(annotation, config=_KEEP)
        except pydantic.PydanticUserError:  # a model, dataclass or TypedDict: its own config
            adapter = pydantic.TypeAdapter(annotation)
        return cls(annotation, adapter)

    def to_json_value(self, value: Any) -> Any:
        """The JSON form of ``value`` (validated first, so a wrong type fails here)."""
        if self.annotation is not Any:
            value = self.adapter.validate_python(value)
        return self.adapter.dump_python(value, mode="json")

    def from_json_value(self, value: Any) -> Any:
        return self.adapter.validate_python(value)


ANY = Codec.of(Any)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise ConfigurationError(
            f"cannot resolve the annotations of {fn.__qualname__}: {exc}"
        ) from exc


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(inspect.unwrap(fn))


@dataclass(frozen=True)
class StepDef:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    output: Codec
    retry: Retry | None = None
    timeout: float | None = None  # of one attempt, in seconds
    rate_limit: RateLimit | None = None

    @classmethod
    def of(
        cls,
        fn: Callable[..., Any],
        name: str | None,
        *,
        retry: Retry | None = None,
        timeout: float | None = None,
        rate_limit: RateLimit | None = None,
    ) -> StepDef:
        hints = _hints(fn)
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigurationError(f"retry must be a Retry, not {type(retry).__name__}")
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise ConfigurationError(
                f"rate_limit must be a RateLimit, not {type(rate_limit).__name__}"
            )
        return cls(
            name=check_id(name or fn.__name__, what="step name"),
            fn=fn,
            is_async=_is_async(fn),
            output=Codec.of(hints["return"]) if "return" in hints else ANY,
            retry=retry,
            timeout=_timeout(timeout),
            rate_limit=rate_limit,
        )


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    input: Codec | None  # None: the workflow takes no argument
    output: Codec
    timeout: float | None = None  # cancelled if still running this long after its start
    #: At most this many executions (per concurrency key) admitted at once, cluster-wide.
    concurrency: int | None = None
    concurrency_key: Callable[[Any], str] | None = None
    queue: str = DEFAULT_QUEUE  # its executions' queue: workers serving it claim them

    @classmethod
    def of(
        cls,
        fn: Callable[..., Any],
        name: str | None,
        *,
        timeout: float | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[[Any], str] | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> WorkflowDef:
        params = list(inspect.signature(fn).parameters.values())
        if len(params) > 1 or any(
            p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params
        ):
            raise ConfigurationError(
                f"workflow {fn.__qualname__} must take one input argument (or none); "
                "group several values in a pydantic model or a dict"
            )
        hints = _hints(fn)
        input_codec = None
        if params:
            input_codec = Codec.of(hints.get(params[0].name, Any))
        return cls(
            name=check_id(name or fn.__name__, what="workflow name"),
            fn=fn,
            is_async=_is_async(fn),
            input=input_codec,
            output=Codec.of(hints["return"]) if "return" in hints else ANY,
            timeout=_timeout(timeout),
            concurrency=_concurrency(concurrency, concurrency_key),
            concurrency_key=concurrency_key,
            queue=check_queue(queue),
        )

    def concurrency_key_of(self, payload: Any) -> Callable[[], object] | None:
        """The call of ``concurrency_key`` on the JSON input ``payload`` (None: it has none)."""
        if self.concurrency_key is None:
            return None
        key = self.concurrency_key
        (value,) = self.call_args(payload) or (None,)
        return lambda: key(value)

    def encode_input(self, value: Any) -> Any:
        """Validate ``engine.start``'s input and return its JSON form."""
        if self.input is None:
            if value is not None:
                raise InputValidationError(f"workflow {self.name!r} takes no input")
            return None
        try:
            return self.input.to_json_value(value)
        except pydantic.ValidationError as exc:
            raise InputValidationError(
                f"input of workflow {self.name!r} is invalid: {exc}"
            ) from None
        except PydanticSerializationError as exc:
            raise InputValidationError(
                f"input of workflow {self.name!r} cannot be serialized: {exc}"
            ) from None

    def call_args(self, stored_input: Any) -> tuple[Any, ...]:
        if self.input is None:
            return ()
        return (self.input.from_json_value(stored_input),)


def _concurrency(value: int | None, key: Callable[[Any], str] | None) -> int | None:
    if value is None:
        if key is not None:
            raise ConfigurationError("concurrency_key needs concurrency=N (the slots per key)")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"concurrency must be an int >= 1, not {value!r}")
    if key is not None and not callable(key):
        raise ConfigurationError("concurrency_key must be a function of the workflow's input")
    return value


def _timeout(value: float | None) -> float | None:
    if value is None:
        return None
    return check_seconds(value, what="timeout", allow_zero=False)


class Registry:
    """The workflows and steps of one engine, by name."""

    def __init__(self, version: str | None = None) -> None:
        self.workflows: dict[str, WorkflowDef] = {}
        self.steps: dict[str, StepDef] = {}
        #: The version given to the engine (None: the hash of its workflows' source).
        self.explicit_version = None if version is None else check_version(version)
        self._hashed: tuple[int, str] | None = None  # (workflows hashed, their version)
        #: Named queues' concurrency limits: at most N of their executions admitted at once.
        self.queue_limits: dict[str, int] = {}
        #: Named queues' rate limits: at most N of their executions started per period.
        self.queue_rates: dict[str, RateLimit] = {}

    def add_workflow(self, definition: WorkflowDef) -> None:
        self._check_one_limit(definition.queue, definition)
        self.workflows[_unique("workflows", self.workflows, definition)] = definition

    def limit_queue(
        self, queue: str, concurrency: int | None, rate: RateLimit | None = None
    ) -> None:
        """At most ``concurrency`` executions of ``queue`` admitted at once, and at most
        ``rate.limit`` started per ``rate.per`` seconds, cluster-wide."""
        queue = check_queue(queue)
        if concurrency is None and rate is None:
            raise ConfigurationError("limit_queue needs concurrency=N, rate=RateLimit(...) or both")
        if rate is not None:
            if not isinstance(rate, RateLimit) or rate.key is not None:
                raise ConfigurationError("a queue's rate is a RateLimit(n, per=seconds), no key")
            self.queue_rates[queue] = rate
        if concurrency is not None:
            slots = _concurrency(concurrency, None)
            for definition in self.workflows.values():
                self._check_one_limit(queue, definition, limited=True)
            self.queue_limits[queue] = slots if slots is not None else 0

    def _check_one_limit(
        self, queue: str, definition: WorkflowDef, *, limited: bool = False
    ) -> None:
        limited = limited or queue in self.queue_limits
        if definition.queue == queue and definition.concurrency and limited:
            raise ConfigurationError(
                f"workflow {definition.name!r} has a concurrency limit of its own and its "
                f"queue {queue!r} one too: an execution holds one limit (give the workflow "
                "a queue of its own, or drop one of the two)"
            )

    def start_settings(self, definition: WorkflowDef) -> StartSettings:
        """What a start of ``definition`` applies (engine/workflow/starts.py): its timeout,
        its concurrency limit, else its queue's."""
        return StartSettings(
            timeout=definition.timeout,
            concurrency=definition.concurrency,
            keyed=definition.concurrency_key is not None,
            queue_slots=None
            if definition.concurrency is not None
            else self.queue_limits.get(definition.queue),
        )

    def limit(self, definition: WorkflowDef, payload: Any) -> tuple[str, int] | None:
        """The limit key and slots of an execution of ``definition`` with the JSON input
        ``payload`` (:meth:`StartSettings.limit`)."""
        settings = self.start_settings(definition)
        key = definition.concurrency_key_of(payload)
        return settings.limit(definition.name, definition.queue, key)

    @property
    def version(self) -> str:
        """The version executions started by this code are pinned to
        (engine/workflow/versions.py)."""
        if self.explicit_version is not None:
            return self.explicit_version
        if self._hashed is None or self._hashed[0] != len(self.workflows):
            found = source_version((name, w.fn) for name, w in self.workflows.items())
            self._hashed = (len(self.workflows), found)
        return self._hashed[1]

    def lane(self, definition: WorkflowDef) -> str:
        """The lane of an execution of ``definition`` started by this code."""
        return lane(definition.queue, definition.name, self.version)

    def add_step(self, definition: StepDef) -> None:
        self.steps[_unique("steps", self.steps, definition)] = definition

    def workflow(self, ref: Any) -> WorkflowDef:
        """The definition of a decorated workflow function, or of a workflow name."""
        name = ref if isinstance(ref, str) else getattr(ref, "__raftflow_workflow__", None)
        definition = self.workflows.get(name) if isinstance(name, str) else None
        if definition is None:
            shown = ref if isinstance(ref, str) else getattr(ref, "__qualname__", repr(ref))
            raise UnknownWorkflowError(
                f"{shown!r} is not a workflow registered with this engine (@engine.workflow)"
            )
        return definition


def _unique(kind: str, table: dict[str, Any], definition: StepDef | WorkflowDef) -> str:
    """The definition's name, unless another function already has it."""
    existing = table.get(definition.name)
    if existing is not None and existing.fn is not definition.fn:
        raise ConfigurationError(
            f"two {kind} are named {definition.name!r}; pass name=... to tell them apart"
        )
    return definition.name
