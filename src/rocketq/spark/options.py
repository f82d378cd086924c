"""Source/sink options (Spark lower-cases option keys) and the canonical offset JSON.

Offsets are {"<topic>": {"<brokerName>": {"<queueId>": nextOffset}}}: the NEXT offset to read (exclusive end).
Spark compares offsets by their JSON text, so every offset is built through ``canonical`` (sorted topics,
brokers, numeric queue ids) — otherwise an idle stream would run an empty micro-batch per trigger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .brokerio import Queue

EARLIEST = -2
LATEST = -1


class OptionError(ValueError):
    pass


def canonical(offsets: Mapping[Queue, int]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for t, b, q in sorted(offsets):
        out.setdefault(t, {}).setdefault(b, {})[str(q)] = int(offsets[(t, b, q)])
    return out


def flatten(obj: Mapping[str, Any] | str | None) -> dict[Queue, int]:
    if obj is None:
        return {}
    if isinstance(obj, str):
        obj = json.loads(obj)
    out: dict[Queue, int] = {}
    for t, brokers in obj.items():
        if not isinstance(brokers, Mapping):
            raise OptionError(f"offsets JSON: expected {{brokerName: {{queueId: offset}}}} under {t!r}")
        for b, queues in brokers.items():
            if isinstance(queues, list):  # assign form: {"T": {"broker-a": [0, 1]}}
                for q in queues:
                    out[(t, b, int(q))] = EARLIEST
                continue
            for q, off in queues.items():
                out[(t, b, int(q))] = int(off)
    return out


def _bool(v: str | None, default: bool) -> bool:
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise OptionError(f"not a boolean: {v!r}")


def _int(opts: Mapping[str, str], key: str, default: int | None = None, lo: int = 0) -> int | None:
    v = opts.get(key)
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        raise OptionError(f"option {key}: not an integer: {v!r}") from None
    if n < lo:
        raise OptionError(f"option {key} must be >= {lo}, got {n}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|min|sec|seconds?|minutes?|hours?)?\s*$", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000, "m": 60_000, "min": 60_000}
_UNIT_MS |= {"minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000}


def duration_ms(v: str) -> int:
    m = _DURATION.match(v)
    if not m:
        raise OptionError(f"bad duration {v!r} (e.g. 15m, 30s, 500ms)")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _get(opts: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = opts.get(n.lower())
        if v is not None:
            return v
    return None


@dataclass
class SourceOptions:
    namesrv: str
    topics: list[str] = field(default_factory=list)  # topic / subscribe
    pattern: str | None = None  # subscribePattern
    assign: dict[Queue, int] | None = None
    sub_expression: str = "*"
    starting: str = "latest"  # earliest | latest | group | json
    starting_json: dict[Queue, int] | None = None
    starting_ts: int | None = None
    starting_by_ts: dict[Queue, int] | None = None
    ts_strategy: str = "error"
    ending: str = "latest"
    ending_json: dict[Queue, int] | None = None
    ending_ts: int | None = None
    fail_on_data_loss: bool = True
    max_per_trigger: int | None = None
    min_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_per_partition: int | None = None
    group: str | None = None
    pull_batch_size: int = 1024
    pull_timeout_ms: int = 10_000
    include_properties: bool = True

    @property
    def pull_group(self) -> str:
        # the broker wants a group on every pull; pulls never commit, so a shared tools group is harmless
        return self.group or "TOOLS_CONSUMER"

    @classmethod
    def parse(cls, opts: Mapping[str, str], streaming: bool) -> SourceOptions:
        opts = {k.lower(): v for k, v in opts.items()}
        ns = _get(opts, "nameserver", "namesrv", "namesrvAddr")
        if not ns:
            raise OptionError("option 'nameserver' is required (e.g. 127.0.0.1:9876)")
        o = cls(namesrv=ns)
        given = [k for k in ("topic", "subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(given) != 1:
            raise OptionError(
                "exactly one of topic / subscribe / subscribePattern / assign is required, "
                f"got {given or 'none'}"
            )
        kind = given[0]
        if kind in ("topic", "subscribe"):
            o.topics = sorted({t.strip() for t in opts[kind].split(",") if t.strip()})
            if not o.topics:
                raise OptionError(f"option {kind} is empty")
        elif kind == "subscribepattern":
            o.pattern = opts[kind]
            try:
                re.compile(o.pattern)
            except re.error as exc:
                raise OptionError(f"subscribePattern is not a valid regex: {exc}") from None
        else:
            try:
                o.assign = flatten(json.loads(opts["assign"]))
            except (ValueError, TypeError, AttributeError) as exc:
                raise OptionError(f'assign must be JSON like {{"T":{{"broker-a":[0,1]}}}}: {exc}') from None
            if not o.assign:
                raise OptionError("assign names no queue")
        o.sub_expression = (_get(opts, "subExpression", "tags") or "*").strip() or "*"
        o.starting = "latest" if streaming else "earliest"
        o.ending = "latest"
        s = opts.get("startingoffsets")
        if s is not None:
            o.starting, o.starting_json = _offset_spec(s, "startingOffsets", ("earliest", "latest", "group"))
        if opts.get("startingtimestamp") is not None:
            o.starting_ts = _int(opts, "startingtimestamp")
        if opts.get("startingoffsetsbytimestamp") is not None:
            try:
                o.starting_by_ts = flatten(json.loads(opts["startingoffsetsbytimestamp"]))
            except (ValueError, TypeError, AttributeError) as exc:
                raise OptionError(f"startingOffsetsByTimestamp must be JSON: {exc}") from None
        o.ts_strategy = (opts.get("startingoffsetsbytimestampstrategy") or "error").lower()
        if o.ts_strategy not in ("error", "latest"):
            raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")
        e = opts.get("endingoffsets")
        et = opts.get("endingtimestamp")
        if streaming and (e is not None or et is not None):
            raise OptionError("endingOffsets / endingTimestamp are for batch queries only")
        if e is not None:
            o.ending, o.ending_json = _offset_spec(e, "endingOffsets", ("latest",))
        if et is not None:
            o.ending_ts = _int(opts, "endingtimestamp")
        o.fail_on_data_loss = _bool(opts.get("failondataloss"), True)
        o.max_per_trigger = _int(opts, "maxmessagespertrigger", None, 1) or _int(
            opts, "maxoffsetspertrigger", None, 1
        )
        o.min_per_trigger = _int(opts, "minmessagespertrigger", None, 1) or _int(
            opts, "minoffsetspertrigger", None, 1
        )
        if opts.get("maxtriggerdelay"):
            o.max_trigger_delay_ms = duration_ms(opts["maxtriggerdelay"])
        o.min_partitions = _int(opts, "minpartitions", None, 1)
        o.max_per_partition = _int(opts, "maxmessagesperpartition", None, 1)
        o.group = opts.get("consumergroup") or None
        if o.starting == "group" and not o.group:
            raise OptionError("startingOffsets=group needs the consumerGroup option")
        o.pull_batch_size = _int(opts, "pullbatchsize", 1024, 1) or 1024
        o.pull_timeout_ms = _int(opts, "pulltimeoutms", 10_000, 1) or 10_000
        o.include_properties = _bool(opts.get("includeproperties"), True)
        return o


def _offset_spec(v: str, name: str, words: tuple[str, ...]) -> tuple[str, dict[Queue, int] | None]:
    s = v.strip()
    if s.lower() in words:
        return s.lower(), None
    try:
        return "json", flatten(json.loads(s))
    except (ValueError, TypeError, AttributeError, OptionError) as exc:
        raise OptionError(f"{name} must be one of {'/'.join(words)} or JSON offsets: {exc}") from None
