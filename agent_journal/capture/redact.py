"""Secret redaction by precise, prefix- or context-anchored patterns.

Invariant: text is rewritten only where a rule's own shape matches (a vendor prefix, a PEM
armour line, a `scheme://user:password@` authority, an `Authorization` header, or a secret's
own name followed by a value of that secret's exact shape, as in `aws_secret_access_key =` and
40 base64 characters), and each match becomes `[REDACTED:<rule>]`. There are no entropy or
keyword heuristics, on purpose: a name alone never redacts, and ids, hashes and prose such as
`token: ORDER-4471-ZULU` must survive verbatim, because a redactor that guesses once destroyed
the very objective a journal exists to keep. Anything that does not match a rule is returned
unchanged, and an input with no match is returned as the same object; in JSON-like values
that holds for object keys as much as for the strings under them.
"""

from __future__ import annotations

import re

# Annotations only: typing costs milliseconds to import and this module is on the hook path.
TYPE_CHECKING = False
if TYPE_CHECKING:
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


def _lit(prefix: str, width: int) -> str:
    # For the prefixes an ordinary word or identifier can end in (`task-`, `network_`,
    # `surveyJ`): preceded by a token character, such a prefix is the middle of a longer
    # identifier, not the start of a key. A literal first keeps the regex engine on its fast
    # literal scan; the boundary check comes after it as a lookbehind, because a leading
    # lookbehind makes every position a candidate (measured: 30x slower on transcript text).
    # Every other vendor prefix is a key wherever it starts, glued to a word (`keyghp_...`)
    # or to an escape (`\\nghp_...`) as much as after a blank.
    return f"{prefix}(?<![A-Za-z0-9_-].{{{width}}})"


_TAIL = r"(?![A-Za-z0-9_-])"

# Between a key's name and its value: the name's closing quote (JSON, YAML, shell, Python, or
# JSON escaped once more inside a JSON string), then `=`, `:`, `=>` or `:=`, a `>` (an XML
# element, as in an STS answer) or only blanks (`aws configure set NAME VALUE`), then the
# value's opening quote.
_SEP = r"""(?:\\?["'])?(?:[ \t]*(?:=>?|:=?)[ \t]*|[ \t]+|>)(?:\\?["'])?"""


def _keyed(name: str, value: str) -> str:
    # For secrets with no prefix of their own: the key's name is the anchor and `value` the
    # exact shape of the secret, so a placeholder, a variable or a masked value under the
    # same name never matches. Only the value is redacted. `name` starts with a literal, for
    # the same fast scan as _lit's prefixes; what comes before it does not matter.
    return f"{name}{_SEP}(?P<secret>{value})"


_AWS_SECRET = r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
# Real session tokens run to hundreds of base64 characters: a minimum of 100 keeps uuids,
# hashes and short values under a `"Token"` key.
_AWS_SESSION = r"[A-Za-z0-9/+]{100,}={0,2}"
_TWILIO_KEY = r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"

# (name, pattern), applied in this order, each to the output of the one before. A name may
# appear more than once (one pattern per literal prefix). A pattern with a group named "secret"
# keeps the rest of its match (the header word, the URL's user and host) and redacts only that
# group; any other pattern is replaced whole. Rule names are written into stored text, so they
# are part of the format: do not rename them.
BUILTIN_RULES: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        # Through the END line. A block cut off before END (output truncated by `head` or by
        # the agent) runs to the next blank line, literal or JSON-escaped, or to the end of
        # the text, so no part of the key body survives. The search for END stops at the next
        # BEGIN: without that, every BEGIN would rescan to the end of the text, and a few
        # thousand BEGIN lines in one tool output would take minutes.
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:[^-]|-(?!----BEGIN))*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"|[\s\S]*?(?=\r?\n[ \t]*\r?\n|\\n\\n|\Z))",
    ),
    (
        "url-password",
        # Runs before the token rules so that a token used as the URL's user is still caught
        # by its own rule afterwards. The last @ before the path ends the userinfo, as in
        # browsers, so a password holding a raw @ is covered too. Quotes, brackets and
        # backslashes end it, so JSON such as "http://host:3000","a@b" is not a password.
        r"://(?<=[A-Za-z0-9+.-]://)[^\s:/?#@\"'`<>\\\[\]]*"
        r":(?P<secret>[^\s/?#\"'`<>\\\[\]]+)@",
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{8,})",
    ),
    # RFC 6750 b64token of at least 16 characters, so prose such as "bearer authentication"
    # is left alone; real bearer tokens are far longer. The scheme word is matched in the
    # spellings that occur (Bearer, bearer, BEARER), starting from a literal for speed.
    # Keyed rules run before the prefix rules: their values are base64, whose + and / do not
    # end a token for those rules, so one of them could take a piece out of the middle of a
    # value and leave the rest for no rule to match. One pattern per spelling of the name, so
    # that each starts with a literal.
    #
    # An AWS secret key is exactly 40 base64 characters. The name may carry any prefix (AWS_,
    # TF_VAR_aws_, rclone's bare `secret_access_key`): the value's exact shape makes it AWS's.
    ("aws-secret-key", _keyed("secret_access_key", _AWS_SECRET)),
    ("aws-secret-key", _keyed("SECRET_ACCESS_KEY", _AWS_SECRET)),
    ("aws-secret-key", _keyed("ecretAccessKey", _AWS_SECRET)),
    # The names AWS's tools give a session token: AWS_SECURITY_TOKEN is boto's older one, still
    # set by aws-vault; `"Token"` is the instance and container metadata endpoints' JSON.
    ("aws-session-token", _keyed("aws_se(?:ssion|curity)_token", _AWS_SESSION)),
    ("aws-session-token", _keyed("AWS_SE(?:SSION|CURITY)_TOKEN", _AWS_SESSION)),
    ("aws-session-token", _keyed("essionToken", _AWS_SESSION)),
    ("aws-session-token", _keyed('"Token', _AWS_SESSION)),
    # A Twilio API key sid (SK and 32 hex) is redacted only under an API key's name (Twilio's
    # TWILIO_API_KEY, its CLI config's apiKey, api_key_sid): bare, the same shape could be
    # anything's. The auth token is 32 hex, under the name Twilio's docs give it.
    ("twilio-api-key", _keyed("api_key(?:_sid)?", _TWILIO_KEY)),
    ("twilio-api-key", _keyed("API_KEY(?:_SID)?", _TWILIO_KEY)),
    ("twilio-api-key", _keyed("piKey(?:Sid)?", _TWILIO_KEY)),
    ("twilio-auth-token", _keyed("TWILIO_AUTH_TOKEN", r"[0-9a-fA-F]{32}(?![A-Za-z0-9])")),
    # A connection string's account key (Storage, Cosmos DB): 64 bytes, 88 base64 characters.
    ("azure-storage-key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
    (
        # A SAS signature: an HMAC-SHA256 in base64, URL-encoded or not, as a query parameter
        # (after ?, &, &amp; or Go's JSON \u0026) or first in `SharedAccessSignature=sig=`.
        # At least 40 characters, where a real one has 43, so `sig=` in prose is kept.
        "azure-sas-signature",
        r"sig=(?:(?<=[?&;=]sig=)|(?<=u0026sig=))"
        r"(?P<secret>(?:[A-Za-z0-9+/]|%2[BbFf]){40,}(?:=|%3[Dd]){0,2})",
    ),
    (
        "bearer-token",
        r"earer(?<=[Bb]earer)(?<![A-Za-z0-9_].{6})[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    ("bearer-token", r"BEARER(?<![A-Za-z0-9_].{6})[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
    (
        "basic-auth",
        r"uthorization(?<=[Aa]uthorization)(?<![A-Za-z0-9_].{13})"
        r"[\"']?[ \t]*[:=][ \t]*[\"']?[Bb]asic[ \t]+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
    ),
    ("anthropic-key", _lit("sk-ant-", 7) + r"[A-Za-z0-9_-]{20,250}"),
    # Glued to a word, an Anthropic key is known by its type and version (`api03-`).
    ("anthropic-key", r"sk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{20,250}"),
    (
        "openai-key",
        # Project, service-account and admin keys carry a type segment and may contain - and _;
        # legacy keys are one run of letters and digits, so hyphenated words never match.
        _lit("sk-", 3) + r"(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,250}|[A-Za-z0-9]{32,250})",
    ),
    # Glued to a word (`tokensk-...`), an OpenAI key is known by the mark OpenAI puts in it
    # (`T3BlbkFJ`, "OpenAI" in base64: 20 characters in, on a legacy key; after the type
    # segment, on a project or admin key), or by the service-account segment; a bare `sk-`
    # after a word is `task-`, `disk-`, `risk-`. The mark is looked for only so far in, so
    # a long run of `sk-` costs each start a bounded look.
    ("openai-key", r"sk-(?:[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20,250}"
                   r"|(?:proj|admin)-[A-Za-z0-9_-]{0,100}?T3BlbkFJ[A-Za-z0-9_-]{0,250}"
                   r"|svcacct-[A-Za-z0-9_-]{20,250})"),
    # A key id glued to a lowercase word is still one; after a capital or a digit it is part
    # of a longer run of them, which no key id is.
    ("aws-access-key", r"A[KS]IA(?<![A-Z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("github-token", r"gh[pousr]_[A-Za-z0-9]{36,251}"),
    ("github-token", r"github_pat_[A-Za-z0-9_]{22,244}"),
    ("gitlab-token", r"glpat-[A-Za-z0-9_.-]{20,250}"),
    (
        "slack-token",
        # Slack's published shapes: the type letter, then one to three numeric ids (team, bot
        # or user; a rotating or refresh token's is a version digit), then the secret part. The
        # ids being digits is what tells a token from a name such as `xoxo-valentines.png`.
        r"xox(?:[abeoprs]|e\.xox[bp])-(?:[0-9]+-)+[A-Za-z0-9]{16,250}",
    ),
    # An app-level token: version, app id, a numeric id, then the secret part.
    ("slack-token", r"xapp-[0-9]+-[A-Z0-9]{6,32}-[0-9]{6,}-[A-Za-z0-9]{32,250}"),
    ("stripe-key", _lit("sk_", 3) + r"(?:live|test)_[A-Za-z0-9]{16,247}"),
    ("stripe-key", _lit("rk_", 3) + r"(?:live|test)_[A-Za-z0-9]{16,247}"),
    ("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/=]{24,250}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}" + _TAIL),
    ("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{28}" + _TAIL),
    (
        "google-oauth-token",
        # A service account's token holds single dots and ends in a run of them; a dot not
        # followed by token characters ends a sentence, and is kept.
        _lit(r"ya29\.", 5) + r"(?=[A-Za-z0-9_.-]{30})[A-Za-z0-9_-]+(?:\.+[A-Za-z0-9_-]+)*",
    ),
    ("huggingface-token", r"hf_[A-Za-z0-9]{34,40}" + _TAIL),
    ("npm-token", r"npm_[A-Za-z0-9]{36}" + _TAIL),
    # Every PyPI token is a macaroon whose serialisation starts with these bytes.
    ("pypi-token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _TAIL),
    ("jwt", _lit("eyJ", 3) + r"[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
)

RULE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for name, _ in BUILTIN_RULES))

# For each built-in rule, in the same order: literals of which every match contains at least
# one. A rule runs (and is compiled) only on text holding one of them: compiling every rule
# costs the hook several milliseconds per process, and most text holds none. Each entry must
# be implied by its pattern (tests/test_redact.py checks every positive both ways).
_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("-----BEGIN",),
    ("://",),
    ("hooks.slack.com/",),
    ("secret_access_key",),
    ("SECRET_ACCESS_KEY",),
    ("ecretAccessKey",),
    ("aws_session_token", "aws_security_token"),
    ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"),
    ("essionToken",),
    ('"Token',),
    ("api_key",),
    ("API_KEY",),
    ("piKey",),
    ("TWILIO_AUTH_TOKEN",),
    ("AccountKey=",),
    ("sig=",),
    ("earer",),
    ("BEARER",),
    ("uthorization",),
    ("sk-ant-",),
    ("sk-ant-",),
    ("sk-",),
    ("sk-",),
    ("AKIA", "ASIA"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("glpat-",),
    ("xox",),
    ("xapp-",),
    ("sk_",),
    ("rk_",),
    ("whsec_",),
    ("AIza",),
    ("GOCSPX-",),
    ("ya29.",),
    ("hf_",),
    ("npm_",),
    ("pypi-AgEIcHlwaS5vcmc",),
    ("SG.",),
    ("eyJ",),
)

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
    def rarity(ch: str) -> int:
        at = _BY_FREQUENCY.find(ch)
        return len(_BY_FREQUENCY) if at < 0 else at

    by_anchor: dict[str, list[str]] = {}
    for triggers in _TRIGGERS:
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
            self._compiled = re.compile(self.source)
        if self._replace is None:
            self._replace = _replacer(self.name, self._compiled)
        return self._compiled, self._replace


_builtin: list[_Rule] | None = None


def _builtin_rules() -> list[_Rule]:
    # Shared by every Redactor, so each pattern is compiled at most once per process.
    global _builtin
    if _builtin is None:
        _builtin = [
            _Rule(name, pattern, triggers)
            for (name, pattern), triggers in zip(BUILTIN_RULES, _TRIGGERS, strict=True)
        ]
    return _builtin


def _replacer(name: str, compiled: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    text = marker(name)
    if "secret" not in compiled.groupindex:

        def replace_whole(match: re.Match[str]) -> str:
            # An extra pattern may match the empty string somewhere (a bare lookaround);
            # marking nothing would litter the text with markers.
            return text if match.end() > match.start() else ""

        return replace_whole

    def replace_secret(match: re.Match[str]) -> str:
        start, end = match.span("secret")
        if start < 0:
            return text if match.end() > match.start() else ""
        whole, offset = match.group(), match.start()
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
