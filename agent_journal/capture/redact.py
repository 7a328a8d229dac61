"""Secret redaction by precise, prefix- or context-anchored patterns.

Invariant: text is rewritten only where a rule's own shape matches (a vendor prefix, a PEM
armour line, a `scheme://user:password@` authority, an `Authorization` header, or a secret's
own name followed by a value of that secret's exact shape, as in `aws_secret_access_key =` and
40 base64 characters), and each match becomes `[REDACTED:<rule>]`. There are no entropy or
keyword heuristics, on purpose: a name alone never redacts, and ids, hashes and prose such as
`token: ORDER-4471-ZULU` must survive verbatim, because a redactor that guesses once destroyed
the very objective a journal exists to keep. Anything that does not match a rule is returned
unchanged, and an input with no match is returned as the same object; in JSON-like values
that holds for object keys as much as for the strings under them. A match whose secret is a
placeholder of the secret's shape (a run of x or X, as in `sk-xxxx...` or Slack's documented
`T00000000/B00000000/XXXX...`, or a word starting `your_`/`your-`, as in `Bearer
YOUR_ACCESS_TOKEN`) is kept too: no real key holds one (see _PLACEHOLDER).
"""

from __future__ import annotations

from agent_journal.capture.redact_rules import BUILTIN_RULES, RULE_NAMES, TRIGGERS

# Annotations only: typing costs milliseconds to import and this module is on the hook path.
# So does `re` (with enum and functools): it is imported where a pattern is first compiled,
# which a text holding no rule's trigger never needs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = [
    "BUILTIN_RULES",
    "RULE_NAMES",
    "Redactor",
    "default_redactor",
    "marker",
    "redact_text",
    "redact_value",
]


# A plain string, compiled by re's cache only when a Redactor is given extra patterns.
_NAME = r"[a-z0-9][a-z0-9._-]{0,63}"


def marker(rule: str) -> str:
    return f"[REDACTED:{rule}]"


class Redactor:
    """The built-in rules plus `extra_patterns` given as (name, regex) pairs, e.g. from config.

    An extra pattern redacts its whole match, or only its group named `secret` if it has one,
    and runs after the built-in rules, over their output. Bad names or regexes raise ValueError
    with a one-line message, so a config error is reported when the Redactor is built.
    """

    def __init__(self, extra_patterns: Iterable[tuple[str, str]] = ()) -> None:
        self._extra: list[tuple[str, re.Pattern[str]]] = []
        for name, pattern in extra_patterns:
            import re

            if not isinstance(name, str) or not re.fullmatch(_NAME, name):
                raise ValueError(
                    f"redaction rule name {name!r} must be 1-64 characters of a-z 0-9 . _ - "
                    "starting with a letter or digit"
                )
            try:
                compiled = re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ValueError(f"redaction rule {name!r}: invalid regex: {exc}") from None
            if compiled.fullmatch(""):
                raise ValueError(f"redaction rule {name!r}: pattern matches the empty string")
            self._extra.append((name, compiled))
        self._rules: list[_Rule] | None = None

    def _all_rules(self) -> list[_Rule]:
        if self._rules is None:
            self._rules = _builtin_rules() + [
                _Rule(name, compiled.pattern, None, compiled) for name, compiled in self._extra
            ]
        return self._rules

    def redact_text(self, text: str) -> str:
        """`text` with every secret replaced by its marker; the same object if none matched."""
        return _apply(self._all_rules(), text)

    def redact_value(self, value: Any) -> Any:
        """Redact every string inside dicts and lists, string keys included.

        A key is redacted where it stands, keeping its place among the others. Keys that come
        out the same (two secrets used as names) are all kept, the later ones numbered: see
        _renamed. Returns `value` itself when nothing inside it changed, so `result is value`
        means no secret was found; a changed container is a copy and the input is never
        mutated.
        """
        if isinstance(value, str):
            return self.redact_text(value)
        if not isinstance(value, dict | list):
            return value
        # One look at all of the value's text for the rules that can apply at all: most
        # payloads hold no trigger of any rule, and are then returned after one scan
        # instead of one pass of every rule over each of their strings.
        text = _all_text(value)
        if not self._extra and not _may_hold_trigger(text):
            return value
        rules = self._rules_for(text)
        if not rules:
            return value
        return _redact_container(lambda text: _apply(rules, text), value)

    def _rules_for(self, text: str) -> list[_Rule]:
        """The rules that may change some string whose text is in `text`, in order.

        A rule runs on a string only when its trigger is in what the rules before it left
        (see _apply); what they left is the string plus their markers (no trigger holds the
        brackets around a marker, so none can straddle one). So a rule is kept when its
        trigger is in `text` or in the marker of a rule kept before it. Rules without
        triggers (extra patterns) are always kept.
        """
        kept: list[_Rule] = []
        for rule in self._all_rules():
            triggers = rule.triggers
            if triggers is not None:
                for trigger in triggers:
                    if trigger in text:
                        break
                else:
                    continue
                text = text + "\n" + marker(rule.name)
            kept.append(rule)
        return kept


def _apply(rules: list[_Rule], text: str) -> str:
    out = text
    for rule in rules:
        # Each rule sees the output of the ones before it, so its trigger is looked
        # for in that output, not in the original text. A plain loop, not any() over a
        # generator: building one per rule was most of the cost of a short string
        # (measured with 39 rules: 16 us a string with any(), 3 us with the loop).
        triggers = rule.triggers
        if triggers is not None:
            for trigger in triggers:
                if trigger in out:
                    break
            else:
                continue
        compiled, replace = rule.compiled()
        out = compiled.sub(replace, out)
    return text if out == text else out


# After this many values, `_may_hold_trigger` compiles one pattern that finds every
# trigger in a single scan of the text, where a search per trigger scans it once for
# each. It costs about a millisecond to build, which a process that redacts one payload
# (the hook) would never get back; an import redacts thousands.
_COMPILE_AFTER = 64
_trigger_scan: re.Pattern[str] | None = None
_values_scanned = 0


def _may_hold_trigger(text: str) -> bool:
    """False only when `text` holds no trigger of any built-in rule."""
    global _trigger_scan, _values_scanned
    if _trigger_scan is None:
        _values_scanned += 1
        if _values_scanned <= _COMPILE_AFTER:
            return True  # the caller's search per trigger decides
        import re

        _trigger_scan = re.compile(_trigger_scan_pattern())
    return _trigger_scan.search(text) is not None


# Characters from the most to the least common in tool output and prose, roughly; any
# character not listed counts as rarer than all of them.
_BY_FREQUENCY = ' \netaoinsrlcdhu_mp.f/-g=y"b,k:wvx0123456789TSAEIRNOCDLPMBFGHKUVWYXJQZqjz'


def _trigger_scan_pattern() -> str:
    """One pattern that matches where any trigger occurs.

    Each trigger is found from its rarest character (by _BY_FREQUENCY), with what comes
    before that character checked behind it: the regex engine then tries only positions
    holding one of a few rare characters, instead of trying every trigger everywhere.
    """
    import re

    def rarity(ch: str) -> int:
        at = _BY_FREQUENCY.find(ch)
        return len(_BY_FREQUENCY) if at < 0 else at

    by_anchor: dict[str, list[str]] = {}
    for triggers in TRIGGERS:
        for trigger in triggers:
            at = max(range(len(trigger)), key=lambda i: rarity(trigger[i]))
            before, after = trigger[:at + 1], trigger[at + 1:]
            behind = f"(?<={re.escape(before)})" if len(before) > 1 else ""
            by_anchor.setdefault(trigger[at], []).append(behind + re.escape(after))
    return "|".join(f"{re.escape(anchor)}(?:{'|'.join(rests)})"
                    for anchor, rests in sorted(by_anchor.items()))


def _all_text(root: dict[Any, Any] | list[Any]) -> str:
    """Every string in `root`, object keys included, one per line.

    A trigger holds no line break, so one found here lies within one of the strings.
    """
    strings: list[str] = []
    stack: list[Any] = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str):
                    strings.append(key)
                if isinstance(child, str):
                    strings.append(child)
                elif isinstance(child, dict | list):
                    stack.append(child)
        else:
            for child in node:
                if isinstance(child, str):
                    strings.append(child)
                elif isinstance(child, dict | list):
                    stack.append(child)
    return "\n".join(strings)


class _Rule:
    """One rule, compiled on first use: rules whose trigger never shows up cost nothing."""

    __slots__ = ("name", "source", "triggers", "_compiled", "_replace")

    def __init__(self, name: str, source: str, triggers: tuple[str, ...] | None,
                 compiled: re.Pattern[str] | None = None) -> None:
        self.name = name
        self.source = source
        self.triggers = triggers
        self._compiled = compiled
        self._replace: Callable[[re.Match[str]], str] | None = None

    def compiled(self) -> tuple[re.Pattern[str], Callable[[re.Match[str]], str]]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.source)
        if self._replace is None:
            # A user's pattern redacts whatever it matches; a built-in one keeps placeholders.
            keeps = self.triggers is not None and self.name != "private-key"
            self._replace = _replacer(self.name, self._compiled, keeps)
        return self._compiled, self._replace


_builtin: list[_Rule] | None = None


def _builtin_rules() -> list[_Rule]:
    # Shared by every Redactor, so each pattern is compiled at most once per process.
    global _builtin
    if _builtin is None:
        _builtin = [
            _Rule(name, pattern, triggers)
            for (name, pattern), triggers in zip(BUILTIN_RULES, TRIGGERS, strict=True)
        ]
    return _builtin


# A placeholder in a secret's shape: a run of x or X (`sk-xxxx...`, `AKIAXXXXXXXXXXXXXXXX`,
# Slack's documented `T00000000/B00000000/XXXX...`) or a word that starts `your_`/`your-`
# (`Bearer YOUR_ACCESS_TOKEN`, `sk-proj-your-key-here`). Neither turns up in a random key: eight
# x in a row, or `your-` at a word's start, have odds under one in 10^12 in a real one. Not
# applied to private keys, whose match can run over the prose after a truncated block.
_PLACEHOLDER = r"[xX]{8}|(?<![A-Za-z0-9])(?:your|YOUR|Your)[_-]"


def _replacer(name: str, compiled: re.Pattern[str],
              keep_placeholders: bool = False) -> Callable[[re.Match[str]], str]:
    import re

    text = marker(name)
    placeholder = re.compile(_PLACEHOLDER).search if keep_placeholders else None
    if "secret" not in compiled.groupindex:

        def replace_whole(match: re.Match[str]) -> str:
            # An extra pattern may match the empty string somewhere (a bare lookaround);
            # marking nothing would litter the text with markers.
            if match.end() == match.start():
                return ""
            if placeholder is not None and placeholder(match.group()):
                return match.group()
            return text

        return replace_whole

    def replace_secret(match: re.Match[str]) -> str:
        start, end = match.span("secret")
        if start < 0:
            return text if match.end() > match.start() else ""
        whole, offset = match.group(), match.start()
        if placeholder is not None and placeholder(whole[start - offset : end - offset]):
            return whole
        return whole[: start - offset] + text + whole[end - offset :]

    return replace_secret


def _redact_container(redact: Callable[[str], str], root: dict[Any, Any] | list[Any]) -> Any:
    # Iterative, because strictjson accepts nesting as deep as the decoder allows, and a
    # recursive walk started deeper in the stack could overflow where parsing did not.
    # Containers are copied only on the path to a changed string.
    order: list[dict[Any, Any] | list[Any]] = []
    stack: list[dict[Any, Any] | list[Any]] = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append(child)
    # A parent is always listed before its children, so walking the list backwards settles
    # every child before its parent looks at it.
    changed: dict[int, Any] = {}
    # Each distinct key is redacted once per call (None: unchanged): payloads repeat the same
    # few field names in every object.
    keys: dict[str, str | None] = {}
    for node in reversed(order):
        if isinstance(node, dict):
            new_dict: dict[Any, Any] | None = None
            new_keys: dict[str, str] | None = None
            for key, child in node.items():
                new_child = _settled(redact, child, changed)
                if new_child is not child:
                    if new_dict is None:
                        new_dict = dict(node)
                    new_dict[key] = new_child
                if isinstance(key, str):
                    if key in keys:
                        new_key = keys[key]
                    else:
                        redacted = redact(key)
                        new_key = keys[key] = None if redacted is key else redacted
                    if new_key is not None:
                        if new_keys is None:
                            new_keys = {}
                        new_keys[key] = new_key
            if new_keys is not None:
                new_dict = _renamed(node if new_dict is None else new_dict, new_keys)
            if new_dict is not None:
                changed[id(node)] = new_dict
        else:
            new_list: list[Any] | None = None
            for index, child in enumerate(node):
                new_child = _settled(redact, child, changed)
                if new_child is not child:
                    if new_list is None:
                        new_list = list(node)
                    new_list[index] = new_child
            if new_list is not None:
                changed[id(node)] = new_list
    return changed.get(id(root), root)


def _renamed(node: dict[Any, Any], new_keys: dict[str, str]) -> dict[Any, Any]:
    # Merging keys that redact alike (two AWS keys used as names, or one next to a key already
    # spelled like its marker) would silently drop entries, so a renamed key that is taken
    # becomes "<key> (2)", "<key> (3)", ... past every key the object keeps as it is.
    kept = {key for key in node if key not in new_keys}
    out: dict[Any, Any] = {}
    for key, child in node.items():
        if key in new_keys:
            base = new_key = new_keys[key]
            number = 1
            while new_key in kept or new_key in out:
                number += 1
                new_key = f"{base} ({number})"
            key = new_key
        out[key] = child
    return out


def _settled(redact: Callable[[str], str], child: Any, changed: dict[int, Any]) -> Any:
    if isinstance(child, str):
        return redact(child)
    if isinstance(child, dict | list):
        return changed.get(id(child), child)
    return child


_default: Redactor | None = None


def default_redactor() -> Redactor:
    """The shared Redactor with only the built-in rules."""
    global _default
    if _default is None:
        _default = Redactor()
    return _default


def redact_text(text: str) -> str:
    """Redact `text` with the built-in rules only."""
    return default_redactor().redact_text(text)


def redact_value(value: Any) -> Any:
    """Redact every string in a JSON-like value, keys included, with the built-in rules only."""
    return default_redactor().redact_value(value)
