"""Secrets in configs: never in an API answer, never in a log line.

A key is secret if its last dotted part is ``password``, ``passphrase``,
``token``, ``secret``, ``api.key``, ``private.key``, ``secret.access.key`` or
``credentials`` (or ends with one of them after ``.``, ``_`` or ``-``, e.g.
``redis.auth_token``, ``aws.secret_access_key``, ``tls.private-key``), or if
the conf's own ``topology.secret.keys`` names it.  Nested dicts are walked,
so ``spark.connect.server.conf`` entries are covered too.  Inside any string
value, a ``token=``/``password=``/``secret=`` parameter and the password of a
URL's user-info (``postgres://user:PASSWORD@host``) are hidden as well, and
so is a pickled object carried as base64 text (code, not data).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "*****"
PICKLE_HIDDEN = "(pickled code: not served)"
# A pickle as options carry one (base64 of protocol 2-5: b'\x80\x0N...'): code, never
# shown to anyone, as unpickling it is running it.
_PICKLE = re.compile(r"^gA[IMSW][A-Za-z0-9+/]{21,}={0,2}$")
# A credential inside a value, as in spark.remote's "sc://host:15002/;token=...".
_IN_VALUE = re.compile(r"((?:token|password|secret)=)[^;&\s]+", re.IGNORECASE)
# The password of a URL's user-info: scheme://user:PASSWORD@host.
_USER_INFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+(@)", re.IGNORECASE)
_SECRET = re.compile(r"(^|[._-])(password|passwd|passphrase|token|secret|secret[._-]key|api[._-]key"
                     r"|private[._-]key|secret[._-]access[._-]key|credentials?)$", re.IGNORECASE)


def is_secret(key: str, extra: Iterable[str] = ()) -> bool:
    return bool(_SECRET.search(key)) or key in set(extra)


def redact(conf: Mapping[str, Any], extra: Iterable[str] = ()) -> dict[str, Any]:
    """A copy of ``conf`` with every secret value replaced by :data:`REDACTED`."""
    return redact_answer(conf, frozenset(extra))


def redact_answer(answer: Any, listed: frozenset[str] = frozenset()) -> Any:
    """An API answer with every secret hidden, wherever a config sits in it:
    a dict holding ``topology.secret.keys`` extends the listed keys for itself
    and what it contains."""
    if isinstance(answer, Mapping):
        own = answer.get("topology.secret.keys")
        if isinstance(own, list):
            listed = listed | {k for k in own if isinstance(k, str)}
        out: dict[Any, Any] = {}
        for key, value in answer.items():
            if isinstance(key, str) and is_secret(key, listed):
                out[key] = REDACTED if value is not None else None
            else:
                out[key] = redact_answer(value, listed)
        return out
    if isinstance(answer, list):
        return [redact_answer(v, listed) for v in answer]
    if isinstance(answer, str):
        return redact_text(answer)
    return answer


def redact_text(text: str) -> str:
    """``text`` with the credentials a string may carry hidden (parameters, URL user-info);
    a whole pickle (a Trident operation shipped by value) is not shown at all."""
    if text.startswith("gA") and _PICKLE.match(text):
        return PICKLE_HIDDEN
    if "=" in text:
        text = _IN_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    if "://" in text:
        text = _USER_INFO.sub(lambda m: m.group(1) + REDACTED + m.group(2), text)
    return text
