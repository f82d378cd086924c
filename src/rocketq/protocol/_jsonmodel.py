"""Declarative JSON bodies: one generic codec driven by dataclass type hints.

Use ``@json_model`` on a JsonModel subclass with annotated fields. Attributes are snake_case; the JSON
name is the camelCase form unless a field sets ``jfield(json="...")``. Decoding is lenient the way fastjson
is: unknown keys are ignored, missing keys take the field default, numbers may arrive as strings, map keys
may be unquoted numbers or objects. Encoding mirrors fastjson's defaults: fields in alphabetical order of
their JSON names, null fields omitted.

Per-class field tables are built once, lazily (so forward references within a module resolve).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform, get_args, get_origin, get_type_hints

import orjson

from .frame import ProtocolError
from .lenient_json import dumps as _fastjson_dumps
from .lenient_json import loads as _lenient_loads

T = TypeVar("T")

_MISSING = dataclasses.MISSING
_Conv = Callable[[Any], Any]


def jfield(
    *,
    json: str | None = None,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    aliases: tuple[str, ...] = (),
) -> Any:
    """A dataclass field with an explicit JSON name and/or alternative names accepted on input."""
    meta = {"json": json, "aliases": aliases}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# -- scalar converters (lenient in, strict out) ---------------------------------------------------
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


def _to_int(v: Any) -> int:
    # Every integer field is a Java int or long: anything outside int64 is junk (and unencodable).
    if type(v) is int:
        if _I64_MIN <= v <= _I64_MAX:
            return v
        raise ProtocolError(f"integer {v} outside the int64 range")
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        try:
            n = int(v.strip())
        except ValueError:
            raise ProtocolError(f"expected an integer, got {v[:40]!r}") from None
    elif isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        n = int(v)
    else:
        raise ProtocolError(f"expected an integer, got {type(v).__name__}")
    if not _I64_MIN <= n <= _I64_MAX:
        raise ProtocolError(f"integer {n} outside the int64 range")
    return n


def _to_float(v: Any) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise ProtocolError(f"expected a number, got {v[:40]!r}") from None
    raise ProtocolError(f"expected a number, got {type(v).__name__}")


def _to_bool(v: Any) -> bool:
    if v is True or v is False:
        return v
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0", ""):
            return False
    if type(v) is int and v in (0, 1):
        return bool(v)
    raise ProtocolError(f"expected a boolean, got {v!r:.40}")


def _to_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int | float):
        return str(v)
    raise ProtocolError(f"expected a string, got {type(v).__name__}")


def _any(v: Any) -> Any:
    return v


def _key_to_obj(v: Any) -> Any:
    """A map key that should be an object: a dict, a frozen key from the lenient parser, or a JSON string."""
    if isinstance(v, dict):
        return v
    to_dict = getattr(v, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    if isinstance(v, str):
        try:
            obj = orjson.loads(v)
        except orjson.JSONDecodeError:
            raise ProtocolError(f"map key {v[:60]!r} is not an object") from None
        if isinstance(obj, dict):
            return obj
    raise ProtocolError(f"map key of type {type(v).__name__} is not an object")


def _decoder(tp: Any) -> _Conv:
    if tp is int:
        return _to_int
    if tp is str:
        return _to_str
    if tp is bool:
        return _to_bool
    if tp is float:
        return _to_float
    if tp is Any or tp is object:
        return _any
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda v: _enum_in(tp, v)
    if isinstance(tp, type) and hasattr(tp, "__json_fields__"):
        return tp.from_obj
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        conv = _decoder(inner[0]) if len(inner) == 1 else _any
        return lambda v: None if v is None else conv(v)
    if origin in (list, set, frozenset, tuple):
        item = _decoder(args[0]) if args else _any
        build: Callable[[Any], Any] = origin if origin is not tuple else tuple

        def seq(v: Any) -> Any:
            if not isinstance(v, list | tuple):
                raise ProtocolError(f"expected a list, got {type(v).__name__}")
            return build(item(x) for x in v)

        return seq
    if origin is dict:
        ktp, vtp = args if args else (Any, Any)
        vconv = _decoder(vtp)
        if isinstance(ktp, type) and hasattr(ktp, "__json_fields__"):
            model_from = ktp.from_obj

            def kconv(k: Any) -> Any:
                return k if isinstance(k, ktp) else model_from(_key_to_obj(k))
        else:
            kconv = _decoder(ktp)

        def mapping(v: Any) -> Any:
            if not isinstance(v, dict):
                raise ProtocolError(f"expected an object, got {type(v).__name__}")
            return {kconv(k): vconv(x) for k, x in v.items()}

        return mapping
    raise TypeError(f"unsupported field type {tp!r}")


def _enum_in(tp: type[enum.Enum], v: Any) -> Any:
    try:
        return tp[v] if isinstance(v, str) else tp(v)
    except (KeyError, ValueError):
        raise ProtocolError(f"unknown {tp.__name__} {v!r:.40}") from None


def _encode_value(v: Any) -> Any:
    """Python value -> JSON-ready value (map keys that are models stay models; see lenient_json.dumps)."""
    if v is None or isinstance(v, str | bool | int | float):
        return v
    if isinstance(v, enum.Enum):
        return v.name
    to_obj = getattr(v, "to_obj", None)
    if to_obj is not None:
        return to_obj()
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if isinstance(k, bool):
                k = "true" if k else "false"
            elif isinstance(k, int | float):
                k = str(k)
            out[k] = _encode_value(x)
        return out
    if isinstance(v, set | frozenset):
        # Sets have no order on the wire; sort (MessageQueue orders like Java) for stable bodies.
        try:
            ordered = sorted(v)
        except TypeError:
            ordered = list(v)
        return [_encode_value(x) for x in ordered]
    if isinstance(v, list | tuple):
        return [_encode_value(x) for x in v]
    raise TypeError(f"cannot encode {type(v).__name__} as JSON")


class _Field(typing.NamedTuple):
    attr: str
    key: str
    names: tuple[str, ...]  # JSON key and accepted aliases
    conv: _Conv
    has_default: bool


def _fields_of(cls: type) -> tuple[_Field, ...]:
    table = cls.__dict__.get("_json_table")
    if table is not None:
        return table
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f.metadata.get("json") or camel(f.name)
        names = (key, *f.metadata.get("aliases", ()))
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        out.append(_Field(f.name, key, names, _decoder(hints[f.name]), has_default))
    out.sort(key=lambda fl: fl.key)
    table = tuple(out)
    cls._json_table = table  # type: ignore[attr-defined]
    return table


class JsonModel:
    """Base of @json_model classes."""

    __slots__ = ()
    __json_fields__: ClassVar[bool] = True
    # Bodies whose maps have object keys (MessageQueue) must be written in fastjson's form.
    __fastjson__: ClassVar[bool] = False

    @classmethod
    def from_obj(cls: type[T], obj: Any) -> T:
        if not isinstance(obj, dict):
            raise ProtocolError(f"{cls.__name__}: expected an object, got {type(obj).__name__}")
        kwargs = {}
        for fl in _fields_of(cls):
            for name in fl.names:
                if name in obj:
                    raw = obj[name]
                    break
            else:
                if fl.has_default:
                    continue
                raise ProtocolError(f"{cls.__name__}: missing required field {fl.key!r}")
            if raw is None:
                if fl.has_default:
                    continue
                kwargs[fl.attr] = None
                continue
            try:
                kwargs[fl.attr] = fl.conv(raw)
            except ProtocolError as exc:
                raise ProtocolError(f"{cls.__name__}.{fl.key}: {exc}") from None
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                raise ProtocolError(f"{cls.__name__}.{fl.key}: {exc}") from None
        return cls(**kwargs)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fl in _fields_of(type(self)):
            v = getattr(self, fl.attr)
            if v is not None:
                out[fl.key] = _encode_value(v)
        return out

    def encode(self) -> bytes:
        """The JSON body. Standard JSON unless the body has object map keys (then fastjson's form)."""
        if self.__fastjson__:
            return _fastjson_dumps(self.to_obj())
        return orjson.dumps(self.to_obj())

    @classmethod
    def decode(cls: type[T], data: bytes | bytearray | memoryview | str) -> T:
        """Parse a body leniently (standard JSON fast path, fastjson quirks accepted)."""
        return cls.from_obj(_lenient_loads(data))  # type: ignore[attr-defined]


@dataclass_transform(field_specifiers=(jfield, dataclasses.field))
def json_model(cls: type[T] | None = None, *, frozen: bool = False, order: bool = False) -> Any:
    """Class decorator for JsonModel subclasses: makes them slotted dataclasses."""

    def wrap(c: type[T]) -> type[T]:
        if not issubclass(c, JsonModel):
            raise TypeError(f"{c.__name__} must subclass JsonModel")
        return dataclasses.dataclass(slots=True, frozen=frozen, order=order)(c)

    return wrap if cls is None else wrap(cls)
