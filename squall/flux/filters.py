"""Flux's property substitution: ``${key}`` from a ``.properties`` file
(``--filter``) and ``${ENV-NAME}`` from the environment (``--env-filter``).

As in Storm, substitution is textual and happens before the YAML is parsed,
so a value may stand anywhere (a number, a list, part of a string).  It is
done line by line and a value is never split across lines, so every error
still names the line the user wrote.  A reference with no value is left as
it is (Storm logs a warning and does the same); :func:`substitute` reports
those.  Unlike Storm, every reference of a line is replaced, not just the
first.  Pure: no file or environment access here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from squall.errors import ConfigError

_REFERENCE = re.compile(r"\$\{(?P<var>[^}\s]+)\}")
ENV_PREFIX = "ENV-"


@dataclass
class Substitution:
    text: str
    # (line number, reference) of every ${...} left unreplaced
    missing: list[tuple[int, str]] = field(default_factory=list)


def substitute(text: str, properties: Mapping[str, str] | None,
               env: Mapping[str, str] | None) -> Substitution:
    """``text`` with ``${key}`` from ``properties`` and, if ``env`` is given,
    ``${ENV-NAME}`` from it.  Nothing is substituted without either."""
    if properties is None and env is None:
        return Substitution(text)
    missing: list[tuple[int, str]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if "${" not in line:
            continue

        def replace(match: re.Match[str], number: int = number) -> str:
            var = match.group("var")
            value: str | None = None
            if var.startswith(ENV_PREFIX) and env is not None:
                value = env.get(var[len(ENV_PREFIX):])
            elif properties is not None:
                value = properties.get(var)
            if value is None:
                missing.append((number, var))
                return match.group(0)
            # One line stays one line: a line break inside a value would shift
            # the line numbers every later error names.
            return value.replace("\r", " ").replace("\n", " ")

        lines[number - 1] = _REFERENCE.sub(replace, line)
    return Substitution("\n".join(lines), missing)


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """A Java ``.properties`` file, the common subset: ``key=value``,
    ``key: value`` or ``key value`` per line, ``#``/``!`` comments, a trailing
    backslash continuing a line.  Unicode escapes are not decoded."""
    props: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = pending + raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        match = re.match(r"(?P<key>(?:[^\s:=\\]|\\.)+)\s*[:=]?\s*(?P<value>.*)$", line)
        if match is None:
            msg = f"{source}:{number}: cannot read {raw!r} as key=value"
            raise ConfigError(msg)
        key = re.sub(r"\\(.)", r"\1", match.group("key"))
        props[key] = match.group("value").rstrip()
    if pending:
        props_line = re.match(r"(?P<key>\S+?)\s*[:=]?\s*(?P<value>.*)$", pending)
        if props_line is not None:
            props[props_line.group("key")] = props_line.group("value")
    return props
