"""Structured text from outside (JSON in requests and records, YAML of harness files, regular
expressions a harness supplies) parsed within limits, with errors a caller can show as they are.

Every limit is here, once:

- nesting: at most :data:`MAX_NESTING` levels of lists and objects. Deeper input is refused before
  any code walks it recursively (pydantic, jsonschema, ``json.dumps``, the YAML composer all recurse,
  and Python's recursion limit would otherwise surface as an internal error far from the input);
- YAML aliases (``*name``, also ``<<: *name``): refused. An alias expands to a copy of its anchor's
  node, so a kilobyte of nested aliases ("billion laughs") becomes gigabytes in memory; a harness
  file is short enough to write out in full;
- regular expressions: compiled with RE2, whose matching time is linear in the text. Patterns RE2
  cannot run in linear time (backreferences, look-around) are refused when the harness is validated,
  rather than risking catastrophic backtracking on a viewer's comment.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import re2
import yaml

#: Deepest nesting of lists and objects accepted in JSON or YAML from outside. A harness bundle is
#: about 10 levels deep (tool argument schemas are the deepest part); 64 leaves room for any real one.
MAX_NESTING = 64


class UntrustedDataError(ValueError):
    """Structured input refused; the message says why in plain words (no internal class names)."""


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """Levels of nested lists/tuples/dicts in ``value`` (a scalar is 0). Walks with its own stack, not
    recursion, and stops as soon as the depth passes ``limit``."""
    containers = (dict, list, tuple)
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, containers) else []
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, containers))
    return deepest


def check_nesting(value: Any, what: str, limit: int = MAX_NESTING) -> Any:
    """``value`` when it is nested at most ``limit`` levels deep, else :class:`UntrustedDataError`."""
    if nesting_depth(value, limit) > limit:
        raise UntrustedDataError(f"{what} is nested more than {limit} levels deep")
    return value


def loads_json(text: str | bytes, what: str = "JSON", *, limit: int = MAX_NESTING) -> Any:
    """``json.loads`` for input from outside: malformed JSON, numbers Python refuses (over 4300 digits)
    and nesting deeper than ``limit`` all raise :class:`UntrustedDataError` naming ``what``."""
    try:
        value = json.loads(text)
    except RecursionError:  # the C decoder gives up near Python's recursion limit (~1000 levels)
        raise UntrustedDataError(f"{what} is nested more than {limit} levels deep") from None
    except json.JSONDecodeError as exc:
        raise UntrustedDataError(f"{what} is not valid JSON: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UntrustedDataError(f"{what} is not valid JSON: {exc}") from None
    return check_nesting(value, what, limit)


# -- YAML ------------------------------------------------------------------------------------------

class YamlRefused(yaml.YAMLError):
    """A YAML document uses a construct harness files may not (an alias, too deep nesting)."""


class HarnessYamlLoader(yaml.SafeLoader):
    """The safe loader, refusing aliases and nesting deeper than :data:`MAX_NESTING`.

    Refused in the composer, before any node is copied: an alias is an error at its first use, so a
    document of nested aliases costs no more than its own size."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlRefused(f"alias *{event.anchor} at line {event.start_mark.line + 1}: aliases and merge "
                              "keys are not allowed in harness files; write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                mark = self.peek_event().start_mark
                raise YamlRefused(f"nested more than {MAX_NESTING} levels deep (line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(text: str) -> Any:
    """One YAML document with :class:`HarnessYamlLoader` (raises ``yaml.YAMLError``)."""
    loader = HarnessYamlLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# -- regular expressions ---------------------------------------------------------------------------

def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # refusals are reported to the caller, not printed to stderr by RE2
    return options


class PatternError(ValueError):
    """A regular expression the linear-time engine cannot compile; the message says why."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """A harness-supplied regular expression compiled with RE2 (linear-time matching).

    Raises :class:`PatternError` for a pattern RE2 refuses: backreferences (``\\1``), look-ahead and
    look-behind, possessive quantifiers, or a repetition count over 1000. (Cached: hooks compile
    the same few patterns for every comment.)"""
    try:
        return re2.compile(pattern, _re2_options())
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): not text RE2 can take
        raise PatternError("the pattern is not valid Unicode text") from None
    except re2.error as exc:
        detail = exc.args[0] if exc.args else str(exc)
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(f"{detail} (patterns run on a linear-time engine, RE2: no backreferences "
                           "or look-around)") from None
