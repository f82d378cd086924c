# Over 600 lines: a flat catalogue of small header declarations; a split by request area is planned.
"""Typed request/response headers (the extFields of a RemotingCommand), declared once per header.

Every header is a keyword-only slotted dataclass declared with ``@header``. Field types drive the codec:
``str``, ``bool``, ``I32`` (Java Integer/int), ``I64`` (Java Long/long), each optionally ``| None``. A field
without a default is REQUIRED (Java's @CFNotNull): ``from_ext`` raises ProtocolError naming the header and
the field when it is missing. The wire key is the camelCase attribute name unless ``wire("key")`` sets it.

    h = PullMessageRequestHeader.from_ext(cmd.ext_fields)     # lenient: "1"/"0"/"true"/"TRUE", " 42"
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())

``to_ext`` emits every non-None field as a string (booleans "true"/"false"). Unknown keys are ignored. The
per-class field table is computed once at class creation and compiled into straight-line decode/encode
functions (as dataclasses does for __init__); errors are re-diagnosed by a plain loop over the table.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Self, TypeVar, dataclass_transform, get_args, get_origin

from .codes import RequestCode
from .frame import ProtocolError, RemotingCommand, SendV2Request

T = TypeVar("T")

I32 = Annotated[int, "int32"]
I64 = Annotated[int, "int64"]

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_MAX_NUM_LEN = 24  # digits of an int64 plus sign and a little slack; bounds int() work on junk


def wire(key: str | None = None, *, default: Any = dataclasses.MISSING, v2: str | None = None) -> Any:
    """A header field with an explicit wire key and/or V2 short key (SEND_MESSAGE_V2's a..n)."""
    return dataclasses.field(default=default, metadata={"key": key, "v2": v2})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# -- parsers (str -> value) and formatters (value -> str) --------------------------------------------------
def _parse_int(v: Any, lo: int, hi: int) -> int:
    if type(v) is str:
        if len(v) > _MAX_NUM_LEN:
            raise ValueError("number too long")
        n = int(v)
    elif isinstance(v, bool):
        raise ValueError("boolean where a number was expected")
    elif isinstance(v, int):
        n = v
    elif isinstance(v, float) and v.is_integer():
        n = int(v)
    else:
        raise ValueError(f"not a number: {type(v).__name__}")
    if n < lo or n > hi:
        raise ValueError("out of range")
    return n


def _parse_i32(v: Any) -> int:
    return _parse_int(v, _I32_MIN, _I32_MAX)


def _parse_i64(v: Any) -> int:
    return _parse_int(v, _I64_MIN, _I64_MAX)


_TRUE = frozenset(("true", "1"))
_FALSE = frozenset(("false", "0"))


def _parse_bool(v: Any) -> bool:
    if v is True or v is False:
        return v
    if type(v) is str:
        low = v.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    elif type(v) is int and v in (0, 1):
        return bool(v)
    raise ValueError("not a boolean")


def _parse_str(v: Any) -> str:
    if type(v) is str:
        return v
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    raise ValueError(f"not a string: {type(v).__name__}")


def _fmt_bool(v: bool) -> str:
    return "true" if v else "false"


_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], str] | None]] = {
    "int32": (_parse_i32, str),
    "int64": (_parse_i64, str),
    "bool": (_parse_bool, _fmt_bool),
    "str": (_parse_str, None),  # None: already a string
}


def _kind_of(tp: Any) -> tuple[str, bool]:
    """(codec kind, optional) for a resolved annotation."""
    optional = False
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported header field type {tp!r}")
        tp, optional = args[0], True
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        if base is int and meta and meta[0] in ("int32", "int64"):
            return meta[0], optional
    if tp is bool:
        return "bool", optional
    if tp is str:
        return "str", optional
    if tp is int:
        return "int64", optional
    raise TypeError(f"unsupported header field type {tp!r}")


class _HField(typing.NamedTuple):
    attr: str
    key: str
    parse: Callable[[Any], Any]
    fmt: Callable[[Any], str] | None
    required: bool
    optional: bool  # typed "| None"
    default: Any
    descriptor: Any  # the slot's member descriptor: fast set without __init__


class Header:
    """Base of all headers: a generic, table-driven extFields codec."""

    __slots__ = ()
    _fields: ClassVar[tuple[_HField, ...]] = ()
    _fast_decode: ClassVar[Callable[[Mapping[str, Any]], Any]]
    _fast_encode: ClassVar[Callable[[Any], dict[str, str]]]

    @classmethod
    def from_ext(cls, ext: Mapping[str, Any]) -> Self:
        try:
            return cls._fast_decode(ext)
        except Exception:
            # The slow path re-decodes to name the offending field (or fails the same way, generically).
            return _decode(cls, cls._fields, ext)

    def to_ext(self) -> dict[str, str]:
        return self._fast_encode(self)


def _decode(cls: type[T], table: tuple[_HField, ...], ext: Mapping[str, Any]) -> T:
    """Reference decoder: a plain loop over the table, with precise error messages."""
    if not isinstance(ext, Mapping):
        raise ProtocolError(f"{cls.__name__}: extFields is not a mapping")
    obj = object.__new__(cls)
    for f in table:
        v = ext.get(f.key)
        if v is None:
            if f.required:
                raise ProtocolError(f"{cls.__name__}: missing required field {f.key!r}")
            f.descriptor.__set__(obj, f.default)
            continue
        try:
            f.descriptor.__set__(obj, f.parse(v))
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"{cls.__name__}: bad value for field {f.key!r}: {exc}") from None
    return obj


def _encode(obj: Any, table: tuple[_HField, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in table:
        v = f.descriptor.__get__(obj)
        if v is not None:
            out[f.key] = v if f.fmt is None else f.fmt(v)
    return out


# The small numbers most header fields carry (queue ids, flags, counts): a dict lookup is cheaper than int()
# and the range checks. Exact str keys only: anything else (True, 1, " 1", "01") misses and is parsed.
_SMALL_INTS: dict[str, int] = {str(i): i for i in range(-1, 256)}


def _compile(
    cls: type, table: tuple[_HField, ...], from_attrs: bool = False
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Generate straight-line decode/encode functions from the table (what dataclasses does for __init__).

    The generated decoder raises on any problem and ``Header.from_ext`` falls back to ``_decode`` for the
    message, so error handling lives in one place. ``from_attrs``: the decoder reads each wire key as an
    attribute (None: absent) of an object instead of from a mapping; the same parsing otherwise.
    """
    ns: dict[str, Any] = {
        "new": object.__new__,
        "cls": cls,
        "Missing": ProtocolError,
        "small": _SMALL_INTS.get,
    }
    dec = (
        ["def decode(ext):", " obj = new(cls)"]
        if from_attrs
        else ["def decode(ext):", " get = ext.get", " obj = new(cls)"]
    )
    enc = ["def encode(obj):", " out = {}"]
    for i, f in enumerate(table):
        ns[f"p{i}"] = f.parse
        ns[f"d{i}"] = f.default
        dec.append(f" v = ext.{f.key}" if from_attrs else f" v = get({f.key!r})")
        if f.required:
            dec.append(" if v is None: raise Missing")
        else:
            dec.append(f" if v is None: obj.{f.attr} = d{i}")
            dec.append(" else:")
        ind = "  " if not f.required else " "
        if f.parse is _parse_str:
            dec.append(f"{ind}obj.{f.attr} = v if type(v) is str else p{i}(v)")
        elif f.parse is _parse_i32 or f.parse is _parse_i64:
            # the common wire form inline (same int() as the parser; anything else, incl. out of range, goes
            # through it and raises there)
            lo, hi = (_I32_MIN, _I32_MAX) if f.parse is _parse_i32 else (_I64_MIN, _I64_MAX)
            dec.append(
                f"{ind}obj.{f.attr} = n if (n := small(v)) is not None or type(v) is str and len(v) <= "
                f"{_MAX_NUM_LEN} and {lo} <= (n := int(v)) <= {hi} else p{i}(v)"
            )
        elif f.parse is _parse_bool:
            dec.append(f"{ind}obj.{f.attr} = True if v == 'true' else False if v == 'false' else p{i}(v)")
        else:
            dec.append(f"{ind}obj.{f.attr} = p{i}(v)")
        enc.append(f" v = obj.{f.attr}")
        if f.fmt is None:
            enc.append(f" if v is not None: out[{f.key!r}] = v")
        elif f.fmt is _fmt_bool:
            enc.append(f" if v is not None: out[{f.key!r}] = 'true' if v else 'false'")
        else:
            enc.append(f" if v is not None: out[{f.key!r}] = str(v)")
    dec.append(" return obj")
    enc.append(" return out")
    exec("\n".join(dec) + "\n" + "\n".join(enc), ns)
    return ns["decode"], ns["encode"]


def _build_table(cls: type, v2: bool = False) -> tuple[_HField, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    table = []
    for fl in dataclasses.fields(cls):
        kind, optional = _kind_of(hints[fl.name])
        parse, fmt = _CODECS[kind]
        key = (fl.metadata.get("v2") if v2 else None) or fl.metadata.get("key") or _camel(fl.name)
        required = fl.default is dataclasses.MISSING and fl.default_factory is dataclasses.MISSING
        default = None if required else fl.default
        if optional and default is not None:
            # Absent on the wire must decode to the declared value, so "| None" fields default to None.
            raise TypeError(f"{cls.__name__}.{fl.name}: an optional (| None) field must default to None")
        table.append(_HField(fl.name, key, parse, fmt, required, optional, default, cls.__dict__[fl.name]))
    return tuple(table)


@dataclass_transform(kw_only_default=True, field_specifiers=(wire, dataclasses.field))
def header(cls: type[T]) -> type[T]:
    """Class decorator: keyword-only slotted dataclass + precomputed extFields table."""
    if not issubclass(cls, Header):
        raise TypeError(f"{cls.__name__} must subclass Header")
    new = dataclasses.dataclass(slots=True, kw_only=True)(cls)
    new._fields = _build_table(new)  # type: ignore[attr-defined]
    dec, enc = _compile(new, new._fields)  # type: ignore[attr-defined]
    new._fast_decode, new._fast_encode = staticmethod(dec), staticmethod(enc)  # type: ignore[attr-defined]
    return new


# ======================================================================================================
# Producer
# ======================================================================================================
@header
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10) with V1 names; SEND_MESSAGE_V2/SEND_BATCH/SEND_REPLY_V2 use the a..n short names."""

    producer_group: str = wire(v2="a")
    topic: str = wire(v2="b")
    default_topic: str = wire(default="TBW102", v2="c")
    default_topic_queue_nums: I32 = wire(default=4, v2="d")
    queue_id: I32 = wire(v2="e")  # < 0: the broker picks
    sys_flag: I32 = wire(default=0, v2="f")
    born_timestamp: I64 = wire(v2="g")
    flag: I32 = wire(default=0, v2="h")
    properties: str | None = wire(default=None, v2="i")
    reconsume_times: I32 | None = wire(default=None, v2="j")
    unit_mode: bool | None = wire(default=None, v2="k")
    max_reconsume_times: I32 | None = wire(default=None, v2="l")
    batch: bool | None = wire(default=None, v2="m")
    bname: str | None = wire(default=None, v2="n")  # 5.x broker name; informational

    _v2_fields: ClassVar[tuple[_HField, ...]] = ()
    _v2_decode: ClassVar[Callable[[Mapping[str, Any]], Any]]
    _v2_encode: ClassVar[Callable[[Any], dict[str, str]]]

    @classmethod
    def from_ext_v2(cls, ext: Mapping[str, Any]) -> Self:
        """Decode the V2 short-name form (a..n) straight into this V1 header."""
        try:
            return cls._v2_decode(ext)
        except Exception:
            return _decode(cls, cls._v2_fields, ext)

    def to_ext_v2(self) -> dict[str, str]:
        return self._v2_encode(self)

    @classmethod
    def from_request(cls, code: int, ext: Mapping[str, Any]) -> Self:
        """Pick the V1 or V2 form by request code (10, 324 → V1; 310, 320, 325 → V2)."""
        if code in _SEND_V2_CODES:  # from_ext_v2, one call less (once per sent message)
            try:
                return cls._v2_decode(ext)
            except Exception:
                return _decode(cls, cls._v2_fields, ext)
        return cls.from_ext(ext)

    @classmethod
    def of_request(cls, request: RemotingCommand) -> Self:
        """from_request(request.code, request.ext_fields), read from the struct of a SendV2Request (no
        extFields dict is built); the same header, or the same ProtocolError."""
        if request.__class__ is SendV2Request:
            try:
                return cls._v2_decode_attrs(request.v2)  # type: ignore[attr-defined]
            except Exception:
                pass  # from_request names the offending field
        return cls.from_request(request.code, request.ext_fields)

    def to_v2(self) -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2.from_v1(self)


SendMessageRequestHeader._v2_fields = _build_table(SendMessageRequestHeader, v2=True)
_dec, _enc = _compile(SendMessageRequestHeader, SendMessageRequestHeader._v2_fields)
SendMessageRequestHeader._v2_decode = staticmethod(_dec)  # type: ignore[assignment]
SendMessageRequestHeader._v2_encode = staticmethod(_enc)  # type: ignore[assignment]
SendMessageRequestHeader._v2_decode_attrs = staticmethod(  # type: ignore[attr-defined]
    _compile(SendMessageRequestHeader, SendMessageRequestHeader._v2_fields, from_attrs=True)[0]
)

_SEND_V2_CODES = frozenset(
    (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
)

# V2 short name -> V1 attribute, derived from the V1 declaration (single source of truth).
_V2_TO_V1 = {
    fl.metadata["v2"]: fl.name
    for fl in dataclasses.fields(SendMessageRequestHeader)  # type: ignore[arg-type]
}


@header
class SendMessageRequestHeaderV2(Header):
    """The short-name form as a value of its own (codes 310, 320, 325)."""

    a: str
    b: str
    c: str = "TBW102"
    d: I32 = 4
    e: I32
    f: I32 = 0
    g: I64
    h: I32 = 0
    i: str | None = None
    j: I32 | None = None
    k: bool | None = None
    l: I32 | None = None  # noqa: E741 - the wire name
    m: bool | None = None
    n: str | None = None

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(**{v1: getattr(self, v2) for v2, v1 in _V2_TO_V1.items()})

    @classmethod
    def from_v1(cls, h: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(**{v2: getattr(h, v1) for v2, v1 in _V2_TO_V1.items()})


@header
class SendMessageResponseHeader(Header):
    msg_id: str  # offsetMsgId (comma-joined for a batch)
    queue_id: I32
    queue_offset: I64  # first offset of a batch
    transaction_id: str | None = None
    msg_region: str = wire("MSG_REGION", default="DefaultRegion")
    trace_on: bool = wire("TRACE_ON", default=True)


@header
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → requester; body is the raw reply body."""

    producer_group: str
    topic: str
    default_topic: str = "TBW102"
    default_topic_queue_nums: I32 = 4
    queue_id: I32
    sys_flag: I32 = 0
    born_timestamp: I64
    flag: I32 = 0
    properties: str | None = None
    reconsume_times: I32 | None = None
    unit_mode: bool | None = None
    born_host: str  # "ip:port"
    store_host: str
    store_timestamp: I64


# ======================================================================================================
# Consumer: pull, offsets, send-back
# ======================================================================================================
class PullSysFlag(enum.IntFlag):
    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

    @classmethod
    def build(
        cls,
        *,
        commit_offset: bool = False,
        suspend: bool = False,
        subscription: bool = False,
        class_filter: bool = False,
        lite_pull: bool = False,
    ) -> int:
        return (
            (cls.COMMIT_OFFSET if commit_offset else 0)
            | (cls.SUSPEND if suspend else 0)
            | (cls.SUBSCRIPTION if subscription else 0)
            | (cls.CLASS_FILTER if class_filter else 0)
            | (cls.LITE_PULL if lite_pull else 0)
        )

    @classmethod
    def clear_commit_offset(cls, sys_flag: int) -> int:
        return sys_flag & ~cls.COMMIT_OFFSET


@header
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: I32
    queue_offset: I64
    max_msg_nums: I32 = 32
    sys_flag: I32
    commit_offset: I64
    suspend_timeout_millis: I64 = 15000
    subscription: str | None = None
    sub_version: I64 = 0
    expression_type: str | None = None  # TAG | SQL92; None means TAG

    @property
    def has_commit_offset(self) -> bool:
        return bool(self.sys_flag & PullSysFlag.COMMIT_OFFSET)

    @property
    def has_suspend(self) -> bool:
        return bool(self.sys_flag & PullSysFlag.SUSPEND)

    @property
    def has_subscription(self) -> bool:
        return bool(self.sys_flag & PullSysFlag.SUBSCRIPTION)


@header
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: I64 = 0
    next_begin_offset: I64
    min_offset: I64
    max_offset: I64


@header
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: I32


@header
class QueryConsumerOffsetResponseHeader(Header):
    offset: I64


@header
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: I32
    commit_offset: I64  # ali-ons sends -1 for "0"/"none": treat negative as no offset


@header
class GetMaxOffsetRequestHeader(Header):
    topic: str
    queue_id: I32


@header
class GetMaxOffsetResponseHeader(Header):
    offset: I64


@header
class GetMinOffsetRequestHeader(Header):
    topic: str
    queue_id: I32


@header
class GetMinOffsetResponseHeader(Header):
    offset: I64


@header
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: I32
    timestamp: I64


@header
class SearchOffsetResponseHeader(Header):
    offset: I64


@header
class GetEarliestMsgStoretimeRequestHeader(Header):
    topic: str
    queue_id: I32


@header
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: I64


@header
class ViewMessageRequestHeader(Header):
    offset: I64  # commit log offset


@header
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: I32
    begin_timestamp: I64
    end_timestamp: I64
    # Extra extField set by clients when querying by UNIQ_KEY.
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", default=None)


@header
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: I64
    index_last_update_phyoffset: I64


@header
class ConsumerSendMsgBackRequestHeader(Header):
    offset: I64  # the message's commit log offset
    group: str
    delay_level: I32  # 0: broker picks 3 + reconsumeTimes; < 0: straight to the DLQ
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: I32 | None = None


# ======================================================================================================
# Transactions
# ======================================================================================================
class TransactionType(enum.IntEnum):
    NOT_TYPE = 0
    COMMIT = 8
    ROLLBACK = 12


@header
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: I64
    commit_log_offset: I64
    commit_or_rollback: I32  # TransactionType
    from_transaction_check: bool = False
    msg_id: str  # UNIQ_KEY
    transaction_id: str | None = None


@header
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: I64
    commit_log_offset: I64
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# ======================================================================================================
# Client management
# ======================================================================================================
@header
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str


@header
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


@header
class UnregisterClientRequestHeader(Header):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@header
class GetConsumerConnectionListRequestHeader(Header):
    consumer_group: str


@header
class GetProducerConnectionListRequestHeader(Header):
    producer_group: str


@header
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
class ConsumeMessageDirectlyResultRequestHeader(Header):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@header
class GetConsumerStatusRequestHeader(Header):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) / INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str
    group: str
    client_addr: str | None = None


# ======================================================================================================
# Admin (broker)
# ======================================================================================================
@header
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str = "TBW102"
    read_queue_nums: I32
    write_queue_nums: I32
    perm: I32
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: I32 | None = None
    order: bool = False


@header
class DeleteTopicRequestHeader(Header):
    topic: str


@header
class GetTopicStatsInfoRequestHeader(Header):
    topic: str


@header
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str
    topic: str | None = None


@header
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220, broker → consumer)."""

    topic: str
    group: str
    timestamp: I64
    is_force: bool = False
    # 5.x admin tools may reset a single queue to an exact offset.
    queue_id: I32 | None = None
    offset: I64 | None = None


@header
class QueryTopicConsumeByWhoRequestHeader(Header):
    topic: str


@header
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str


@header
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


# ======================================================================================================
# NameServer
# ======================================================================================================
@header
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: I64  # 0 = master
    compressed: bool = False
    body_crc32: I32 = 0  # if != 0 must equal crc32(body) & 0x7FFFFFFF


@header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: I64


@header
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@header
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@header
class GetKVConfigRequestHeader(Header):
    namespace: str
    key: str


@header
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@header
class DeleteKVConfigRequestHeader(Header):
    namespace: str
    key: str


@header
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


@header
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@header
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: I64


@header
class QueryDataVersionResponseHeader(Header):
    changed: bool


@header
class WipeWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@header
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: I32


@header
class AddWritePermOfBrokerRequestHeader(Header):
    broker_name: str


@header
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: I32


# Aliases under RocketMQ's other class names.
DeleteTopicInNamesrvRequestHeader = DeleteTopicFromNamesrvRequestHeader
GetRouteInfoByTopicRequestHeader = GetRouteInfoRequestHeader

ALL_HEADERS: tuple[type[Header], ...] = tuple(
    dict.fromkeys(
        v
        for v in list(globals().values())
        if isinstance(v, type) and issubclass(v, Header) and v is not Header
    )
)
