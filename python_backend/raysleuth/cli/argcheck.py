"""Arguments checked before a command runs, so that a bad one is a one-line error and a hint,
never `error: internal error` (#37): text that is not UTF-8, a broker URL urllib cannot parse."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

from raysleuth.shared.errors import BadRequest
from raysleuth.shared.textsafe import one_line


def check_args(values: dict, local_paths: Iterable[str] = ()) -> None:
    """BadRequest for an argument with bytes that are not UTF-8 (Python holds them as lone
    surrogates, which no URL, query or JSON body of ours can carry). `local_paths`: the options
    that only name a file here, where any bytes the file system takes are fine."""
    for name, value in values.items():
        texts = value if isinstance(value, list) else [value]
        for text in texts:
            if name in local_paths or not isinstance(text, str) or text.isascii():
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                raise BadRequest(
                    f"The argument '{one_line(shown)}' ({name}) is not UTF-8 text.",
                    "Ids, names, ranks and expressions are UTF-8: check the terminal's encoding (locale).",
                ) from None


def check_url_syntax(url: str, source: str) -> None:
    """BadRequest for a URL urllib cannot even split (`http://[::1`); the client's own check
    (scheme, host) and the broker's proof come after."""
    try:
        urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise BadRequest(
            f"{one_line(url)} (from {source}) is not a broker URL: {exc}.",
            "Give one like http://127.0.0.1:8765 (IPv6: http://[::1]:8765).",
        ) from None
