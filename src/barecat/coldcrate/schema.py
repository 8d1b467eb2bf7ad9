"""ColdCrate schemas: typed, nested row definitions, their JSON form and the row codec.

Rows are dicts; ``Struct`` values are nested dicts and arrays are lists. The binary form
is little-endian and positional: fields in schema order; a nullable field is preceded by
one byte (1 present, 0 absent, then nothing); ``bytes`` and ``utf8`` carry a u32 length
and ``VarArray`` a u32 element count; ``FixedArray`` has none; ``bool`` is one byte,
``uuid`` 16 bytes, ``timestamp`` an i64 of Unix microseconds. Validation is strict, as in
the ``coldcrate`` package: out-of-range integers, wrong types, missing non-nullable fields
and unknown keys raise ``SchemaError``. The JSON form is the one ``coldcrate`` embeds, so
chunks written by either read in the other.
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from barecat.coldcrate.errors import InvalidEntryError, SchemaError

MAX_DEPTH = 64
_U32 = struct.Struct("<I")
_NUMBERS = {
    "u8": struct.Struct("<B"),
    "u16": struct.Struct("<H"),
    "u32": struct.Struct("<I"),
    "u64": struct.Struct("<Q"),
    "i8": struct.Struct("<b"),
    "i16": struct.Struct("<h"),
    "i32": struct.Struct("<i"),
    "i64": struct.Struct("<q"),
    "f32": struct.Struct("<f"),
    "f64": struct.Struct("<d"),
    "timestamp": struct.Struct("<q"),
}
PRIMITIVES = (*_NUMBERS, "bool", "bytes", "utf8", "uuid")


@dataclass(frozen=True)
class Field:
    name: str
    type: TypeExpr
    nullable: bool = False
    description: str | None = None


@dataclass(frozen=True)
class Struct:
    fields: list[Field]


@dataclass(frozen=True)
class FixedArray:
    elem: TypeExpr
    count: int


@dataclass(frozen=True)
class VarArray:
    elem: TypeExpr


TypeExpr = Union[str, Struct, FixedArray, VarArray]  # noqa: UP007 - used at runtime


@dataclass(frozen=True)
class Schema:
    """A chunk's row definition; checked on construction."""

    fields: list[Field]
    description: str | None = None
    version: int = 1
    _read_row: Reader | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_fields(self.fields, 0)

    # -- JSON --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        if self.description is not None:
            out["description"] = self.description
        out["fields"] = [_field_json(f) for f in self.fields]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schema:
        if not isinstance(data, dict) or not isinstance(data.get("fields"), list):
            raise SchemaError("A schema needs a 'fields' list")
        return cls(
            [_field_from_json(f, 0) for f in data["fields"]],
            data.get("description"),
            _as_int(data.get("version", 1), "version"),
        )

    def to_json_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, raw: bytes) -> Schema:
        try:
            return cls.from_dict(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SchemaError(f"The schema block is not valid JSON: {e}") from e
        except RecursionError:
            raise SchemaError("The schema JSON nests too deeply") from None

    # -- rows --------------------------------------------------------------------------

    def encode_row(self, row: dict[str, Any]) -> bytes:
        out = bytearray()
        _encode_struct(self.fields, row, out, "row")
        return bytes(out)

    def decode_row(self, buf: bytes | bytearray | memoryview) -> dict[str, Any]:
        view = memoryview(buf)
        read_row = self._read_row
        if read_row is None:  # compiled on first use (the dataclass is frozen)
            read_row = _struct_reader(self.fields)
            object.__setattr__(self, "_read_row", read_row)
        try:
            row, pos = read_row(view, 0)
        except (struct.error, IndexError, ValueError) as e:
            raise InvalidEntryError(f"Row bytes do not fit the schema: {e}") from e
        if pos != len(view):
            raise InvalidEntryError(f"{len(view) - pos} byte(s) left over after the row")
        return dict(row)


# -- checks and JSON ---------------------------------------------------------------------


def _check_fields(fields: list[Field], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SchemaError(f"Schema nesting exceeds {MAX_DEPTH} levels")
    if not isinstance(fields, list) or not fields:
        raise SchemaError("A struct needs a non-empty list of fields")
    names = [f.name for f in fields]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise SchemaError(f"Field names must be unique non-empty strings: {names!r}")
    for f in fields:
        _check_type(f.type, depth)


def _check_type(t: TypeExpr, depth: int) -> None:
    if isinstance(t, str):
        if t not in PRIMITIVES:
            raise SchemaError(f"Unknown type {t!r}")
    elif isinstance(t, Struct):
        _check_fields(t.fields, depth + 1)
    elif isinstance(t, FixedArray):
        if not isinstance(t.count, int) or t.count < 1:
            raise SchemaError(f"A FixedArray needs a count of at least 1, not {t.count!r}")
        _check_type(t.elem, depth + 1)
    elif isinstance(t, VarArray):
        _check_type(t.elem, depth + 1)
    else:
        raise SchemaError(f"Not a type expression: {t!r}")


def _type_json(t: TypeExpr) -> Any:
    if isinstance(t, str):
        return t
    if isinstance(t, FixedArray):
        return {"fixed_array": [_type_json(t.elem), t.count]}
    if isinstance(t, VarArray):
        return {"var_array": _type_json(t.elem)}
    return {"struct": [_field_json(f) for f in t.fields]}


def _field_json(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _type_json(f.type)}
    if f.nullable:
        out["nullable"] = True
    if f.description is not None:
        out["description"] = f.description
    return out


def _type_from_json(data: Any, depth: int) -> TypeExpr:
    if depth > MAX_DEPTH:
        raise SchemaError(f"Schema nesting exceeds {MAX_DEPTH} levels")
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        if "fixed_array" in data:
            pair = data["fixed_array"]
            if not isinstance(pair, list) or len(pair) != 2:
                raise SchemaError(f"A fixed_array needs [type, count], not {pair!r}")
            elem, count = pair
            return FixedArray(_type_from_json(elem, depth + 1), _as_int(count, "count"))
        if "var_array" in data:
            return VarArray(_type_from_json(data["var_array"], depth + 1))
        if isinstance(data.get("struct"), list):
            return Struct([_field_from_json(f, depth + 1) for f in data["struct"]])
    raise SchemaError(f"Not a type expression: {data!r}")


def _as_int(value: Any, what: str) -> int:
    """A schema's integer, converted as ``coldcrate`` converts it (``int()``), or a
    ``SchemaError`` where it cannot be."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise SchemaError(f"The schema's {what} must be an integer, not {value!r}") from None


def _field_from_json(data: Any, depth: int) -> Field:
    if not isinstance(data, dict) or "name" not in data or "type" not in data:
        raise SchemaError(f"A field needs 'name' and 'type': {data!r}")
    return Field(
        data["name"],
        _type_from_json(data["type"], depth),
        bool(data.get("nullable", False)),
        data.get("description"),
    )


# -- encoding ----------------------------------------------------------------------------


def _encode_struct(fields: list[Field], row: Any, out: bytearray, where: str) -> None:
    if not isinstance(row, dict):
        raise SchemaError(f"{where}: expected a dict, got {type(row).__name__}")
    unknown = set(row) - {f.name for f in fields}
    if unknown:
        raise SchemaError(f"{where}: unknown field(s) {sorted(unknown)}")
    for f in fields:
        value = row.get(f.name)
        if f.nullable:
            out.append(0 if value is None else 1)
            if value is None:
                continue
        elif value is None:
            raise SchemaError(f"{where}.{f.name}: missing, and the field is not nullable")
        _encode(f.type, value, out, f"{where}.{f.name}")


def _encode(t: TypeExpr, value: Any, out: bytearray, where: str) -> None:
    if isinstance(t, Struct):
        _encode_struct(t.fields, value, out, where)
    elif isinstance(t, FixedArray | VarArray):
        if not isinstance(value, list | tuple):
            raise SchemaError(f"{where}: expected a list, got {type(value).__name__}")
        if isinstance(t, FixedArray) and len(value) != t.count:
            raise SchemaError(f"{where}: expected {t.count} elements, got {len(value)}")
        if isinstance(t, VarArray):
            out += _U32.pack(len(value))
        for i, item in enumerate(value):
            _encode(t.elem, item, out, f"{where}[{i}]")
    else:
        _encode_primitive(t, value, out, where)


def _encode_primitive(t: str, value: Any, out: bytearray, where: str) -> None:
    if t in ("f32", "f64"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaError(f"{where}: expected a float, got {type(value).__name__}")
        if t == "f32" and math.isfinite(value) and abs(value) > 3.4028234663852886e38:
            raise SchemaError(f"{where}: {value} does not fit in f32")
        out += _NUMBERS[t].pack(float(value))
    elif t in _NUMBERS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{where}: expected an int, got {type(value).__name__}")
        try:
            out += _NUMBERS[t].pack(value)
        except struct.error:
            raise SchemaError(f"{where}: {value} is out of range for {t}") from None
    elif t == "bool":
        if not isinstance(value, bool):
            raise SchemaError(f"{where}: expected a bool, got {type(value).__name__}")
        out.append(1 if value else 0)
    elif t == "bytes":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise SchemaError(f"{where}: expected bytes, got {type(value).__name__}")
        data = bytes(value)
        out += _U32.pack(len(data)) + data
    elif t == "utf8":
        if not isinstance(value, str):
            raise SchemaError(f"{where}: expected a str, got {type(value).__name__}")
        data = value.encode("utf-8")
        out += _U32.pack(len(data)) + data
    else:  # uuid
        if isinstance(value, uuid.UUID):
            out += value.bytes
        elif isinstance(value, bytes | bytearray) and len(value) == 16:
            out += bytes(value)
        else:
            raise SchemaError(f"{where}: expected a UUID or 16 bytes")


# -- decoding ----------------------------------------------------------------------------
# A schema is compiled once into nested readers, functions (view, pos) -> (value, pos),
# so decoding a row walks no type tests: that is most of a read's time for small rows.

Reader = Callable[[memoryview, int], tuple[Any, int]]


def _struct_reader(fields: list[Field]) -> Reader:
    parts = [(f.name, f.nullable, _reader(f.type)) for f in fields]

    def read(view: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        row: dict[str, Any] = {}
        for name, nullable, read_value in parts:
            if nullable:
                flag = view[pos]
                pos += 1
                if flag == 0:
                    row[name] = None
                    continue
                if flag != 1:
                    raise ValueError(f"bad presence byte {flag} for {name}")
            row[name], pos = read_value(view, pos)
        return row, pos

    return read


def _reader(t: TypeExpr) -> Reader:
    if isinstance(t, Struct):
        return _struct_reader(t.fields)
    if isinstance(t, FixedArray) and isinstance(t.elem, str) and t.elem in _NUMBERS:
        many = struct.Struct(f"<{t.count}{_NUMBERS[t.elem].format[1:]}")  # (not count copies)
        return lambda view, pos: (list(many.unpack_from(view, pos)), pos + many.size)
    if isinstance(t, FixedArray | VarArray):
        read_item, fixed = _reader(t.elem), t.count if isinstance(t, FixedArray) else None

        def read_array(view: memoryview, pos: int) -> tuple[list[Any], int]:
            count = fixed
            if count is None:
                (count,) = _U32.unpack_from(view, pos)
                pos += 4
            items = []
            for _ in range(count):
                item, pos = read_item(view, pos)
                items.append(item)
            return items, pos

        return read_array
    if t in _NUMBERS:
        number = _NUMBERS[t]
        return lambda view, pos: (number.unpack_from(view, pos)[0], pos + number.size)
    if t == "bool":
        return _read_bool
    if t == "uuid":
        return lambda view, pos: (uuid.UUID(bytes=bytes(_take(view, pos, 16))), pos + 16)
    return _read_bytes if t == "bytes" else _read_text


def _read_bool(view: memoryview, pos: int) -> tuple[bool, int]:
    if view[pos] > 1:
        raise ValueError(f"bad bool byte {view[pos]}")
    return view[pos] == 1, pos + 1


def _read_bytes(view: memoryview, pos: int) -> tuple[bytes, int]:
    (size,) = _U32.unpack_from(view, pos)
    return bytes(_take(view, pos + 4, size)), pos + 4 + size


def _read_text(view: memoryview, pos: int) -> tuple[str, int]:
    data, pos = _read_bytes(view, pos)
    return data.decode("utf-8"), pos


def _take(view: memoryview, pos: int, size: int) -> memoryview:
    if pos + size > len(view):
        raise ValueError("row bytes end early")
    return view[pos : pos + size]


__all__ = ["Field", "FixedArray", "Schema", "Struct", "TypeExpr", "VarArray"]
