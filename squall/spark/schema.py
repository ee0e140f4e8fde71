"""A Spark bolt's declared input schema, and batches turned into Arrow.

A schema may be given as a DDL string (``"user string, amount double"``),
a ``{name: type}`` mapping, a pyspark ``StructType`` or a ``pyarrow.Schema``.
It travels in the topology definition as JSON (Spark's own schema JSON), so
it survives the trip to nimbus and the workers, and is parsed here without a
Spark session: there is no schema inference anywhere on the way in.

Batches become a ``pyarrow.Table`` column by column: one list per field,
typed by the schema, then one Arrow array per column.  No per-row dicts, no
Row objects; Spark Connect ships the table as an Arrow ``LocalRelation``.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

from squall.errors import TopologyValidationError

# The column a Spark bolt adds to every batch: the row's index in the batch.
# A result that keeps it (or an array of them in ROWS_COLUMN) is anchored
# row by row; any other result is anchored to the whole batch.
ROW_COLUMN = "__squall_row"
ROWS_COLUMN = "__squall_rows"

_SIMPLE = {
    "boolean": "boolean", "bool": "boolean",
    "tinyint": "byte", "byte": "byte",
    "smallint": "short", "short": "short",
    "int": "integer", "integer": "integer",
    "bigint": "long", "long": "long",
    "float": "float", "real": "float",
    "double": "double",
    "string": "string", "varchar": "string", "char": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp", "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}

_TOKEN = re.compile(r"\s*(?:(`[^`]*`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|(.))")


class _Parser:
    """Recursive descent over Spark's DDL: ``name type, ...`` with array<>, map<>, struct<>, decimal(p,s)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        for m in _TOKEN.finditer(text):
            quoted, word, number, other = m.groups()
            if quoted is not None:
                self.tokens.append(quoted)
            elif word is not None:
                self.tokens.append(word)
            elif number is not None:
                self.tokens.append(number)
            elif other is not None and not other.isspace():
                self.tokens.append(other)
        self.pos = 0

    def fail(self, what: str) -> TopologyValidationError:
        msg = f"cannot parse schema {self.text!r}: {what}"
        return TopologyValidationError(msg)

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None:
            msg = "unexpected end"
            raise self.fail(msg)
        if expected is not None and token.lower() != expected:
            msg = f"expected {expected!r}, got {token!r}"
            raise self.fail(msg)
        self.pos += 1
        return token

    def name(self) -> str:
        token = self.take()
        if token.startswith("`"):
            return token[1:-1]
        if not (token[0].isalpha() or token[0] == "_"):
            msg = f"expected a field name, got {token!r}"
            raise self.fail(msg)
        return token

    def fields(self, end: str | None) -> list[dict[str, Any]]:
        out = []
        while True:
            name = self.name()
            if self.peek() == ":":
                self.take()
            dtype = self.dtype()
            nullable = True
            if self.peek() is not None and self.peek().lower() == "not":
                self.take()
                self.take("null")
                nullable = False
            out.append({"name": name, "type": dtype, "nullable": nullable, "metadata": {}})
            if self.peek() == ",":
                self.take()
                continue
            if self.peek() == end:
                return out
            msg = f"unexpected {self.peek()!r}"
            raise self.fail(msg)

    def dtype(self) -> Any:
        word = self.take().lower()
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take()
                precision = int(self.take())
                if self.peek() == ",":
                    self.take()
                    scale = int(self.take())
                self.take(")")
            return f"decimal({precision},{scale})"
        if word in ("char", "varchar") and self.peek() == "(":
            self.take()
            self.take()
            self.take(")")
            return "string"
        if word in _SIMPLE:
            return _SIMPLE[word]
        if word == "array":
            self.take("<")
            element = self.dtype()
            self.take(">")
            return {"type": "array", "elementType": element, "containsNull": True}
        if word == "map":
            self.take("<")
            key = self.dtype()
            self.take(",")
            value = self.dtype()
            self.take(">")
            return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
        if word == "struct":
            self.take("<")
            fields = self.fields(">")
            self.take(">")
            return {"type": "struct", "fields": fields}
        msg = f"unknown type {word!r}"
        raise self.fail(msg)


def parse_ddl(ddl: str) -> dict[str, Any]:
    """``"a string, b array<int>"`` -> Spark's schema JSON (``StructType.jsonValue()``)."""
    parser = _Parser(ddl)
    if parser.peek() is None:
        msg = f"schema {ddl!r} declares no fields"
        raise TopologyValidationError(msg)
    fields = parser.fields(None)
    return {"type": "struct", "fields": fields}


def schema_json(schema: Any) -> dict[str, Any]:
    """Any accepted schema form -> Spark's JSON form (plain data, JSON-able)."""
    if isinstance(schema, str):
        return parse_ddl(schema)
    if isinstance(schema, Mapping):
        if schema.get("type") == "struct" and isinstance(schema.get("fields"), list):
            return dict(schema)
        return parse_ddl(", ".join(f"`{name}` {dtype}" for name, dtype in schema.items()))
    json_value = getattr(schema, "jsonValue", None)
    if callable(json_value):  # a pyspark StructType
        return json_value()
    if type(schema).__module__.startswith("pyarrow"):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(schema, prefer_timestamp_ntz=False).jsonValue()
    msg = (f"a Spark bolt schema must be a DDL string, a {{name: type}} dict, a StructType or a "
           f"pyarrow.Schema, got {schema!r}")
    raise TopologyValidationError(msg)


def field_names(schema: Mapping[str, Any]) -> list[str]:
    return [f["name"] for f in schema["fields"]]


class BatchSchema:
    """The parsed schema, with the Arrow schema batches are built with."""

    def __init__(self, schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import LongType, StructField, StructType

        self.json = schema_json(schema)
        self.names = field_names(self.json)
        if ROW_COLUMN in self.names or ROWS_COLUMN in self.names:
            msg = f"{ROW_COLUMN!r} and {ROWS_COLUMN!r} are the Spark bolt's own columns"
            raise TopologyValidationError(msg)
        self.struct = StructType.fromJson(self.json)
        # Spark's schema plus our row index, and the same in Arrow.
        self.with_row = StructType([*self.struct.fields, StructField(ROW_COLUMN, LongType(), False)])
        self.arrow = to_arrow_schema(self.with_row, timezone="UTC")
        self.getters = [attrgetter(name) for name in self.names]

    def table(self, values: Sequence[Any]) -> Any:
        """Tuple values (records with the schema's fields) -> a ``pyarrow.Table``, column-wise."""
        import pyarrow as pa

        n = len(values)
        arrays = []
        for getter, field in zip(self.getters, self.arrow, strict=False):  # the row column comes last
            column = [getter(v) for v in values]
            arrays.append(pa.array(column, type=field.type, size=n))
        arrays.append(pa.array(range(n), type=pa.int64()))
        return pa.Table.from_arrays(arrays, schema=self.arrow)


def wire_columns(table: Any, names: Sequence[str]) -> list[list[Any]]:
    """The named result columns as Python lists of values that can be emitted.

    Timestamps become float epoch seconds, dates ISO strings, decimals floats:
    what msgpack can carry.  Cast in Spark for anything else.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for name in names:
        col = table.column(name)
        t = col.type
        if pa.types.is_timestamp(t):
            col = pc.divide(pc.cast(col.cast(pa.timestamp("us", tz=t.tz)), pa.int64()).cast(pa.float64()),
                            1_000_000.0)
        elif pa.types.is_date(t):
            col = col.cast(pa.string())
        elif pa.types.is_decimal(t):
            col = col.cast(pa.float64())
        values = col.to_pylist()
        if values and _needs_check(col.type):
            for v in values:
                _check_nested(v, name)
        columns.append(values)
    return columns


def _needs_check(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_nested(t)


def _check_nested(value: Any, name: str) -> None:
    if isinstance(value, (datetime.date, datetime.datetime, decimal.Decimal, datetime.time)):
        msg = (f"result column {name!r} holds {type(value).__name__} values inside a nested type; "
               f"cast it in Spark")
        raise TypeError(msg)
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_nested(v, name)
    elif isinstance(value, dict):
        for v in value.values():
            _check_nested(v, name)
