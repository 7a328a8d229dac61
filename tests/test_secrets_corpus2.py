"""Second secrets corpus (issue 32): each class README.md promises, in the forms users paste.

tests/data/secrets-corpus-2.json holds positives (a line or snippet, the exact secret in it that
must not survive, the rule whose marker must appear) and near misses that must come out byte for
byte: placeholders, variables, masked values, hashes, ids, public keys, prose.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from agent_journal.capture import redact as module
from agent_journal.capture import redact_rules as rules
from agent_journal.capture.redact import RULE_NAMES, marker, redact_text, redact_value

CORPUS = json.loads(
    (Path(__file__).parent / "data" / "secrets-corpus-2.json").read_text(encoding="utf-8")
)
POSITIVES: list[dict[str, str]] = CORPUS["positives"]
NEGATIVES: list[dict[str, str]] = CORPUS["negatives"]

# The classes README.md's redaction section promises, as the corpus names them.
PROMISED = {
    "aws", "azure", "github", "slack", "stripe", "google", "openai", "anthropic", "twilio",
    "private-key", "jwt", "bearer", "basic", "url-password",
}


def _id(sample: dict[str, str]) -> str:
    return f"{sample.get('class', 'neg')}-{sample['form']}"


def test_corpus_size_and_coverage() -> None:
    assert len(POSITIVES) >= 40 and len(NEGATIVES) >= 40
    assert {p["class"] for p in POSITIVES} == PROMISED
    assert {p["rule"] for p in POSITIVES} <= set(RULE_NAMES)
    for p in POSITIVES:
        assert p["secret"] and p["secret"] in p["text"], _id(p)
    # Each class in at least two forms (an env line or export, JSON, YAML, URL, header, code).
    for cls in PROMISED:
        assert len({p["form"] for p in POSITIVES if p["class"] == cls}) >= 2, cls


@pytest.mark.parametrize("sample", POSITIVES, ids=[_id(p) for p in POSITIVES])
def test_positive_secret_is_gone_and_marked(sample: dict[str, str]) -> None:
    out = redact_text(sample["text"])
    assert sample["secret"] not in out
    assert marker(sample["rule"]) in out
    assert redact_text(out) == out
    # The same through the JSON-value path, whose pre-filter looks at the whole value.
    assert redact_value({"k": [sample["text"]]}) == {"k": [out]}


@pytest.mark.parametrize("sample", NEGATIVES, ids=[_id(n) for n in NEGATIVES])
def test_negative_is_unchanged(sample: dict[str, str]) -> None:
    assert redact_text(sample["text"]) is sample["text"]
    value = {"k": [sample["text"]]}
    assert redact_value(value) is value


def test_positive_rate_is_100_percent() -> None:
    caught = sum(
        p["secret"] not in (out := redact_text(p["text"])) and marker(p["rule"]) in out
        for p in POSITIVES
    )
    rate = caught / len(POSITIVES)
    print(f"secrets corpus 2: {caught}/{len(POSITIVES)} positives redacted ({rate:.1%}), "
          f"{len(NEGATIVES)} negatives unchanged")
    assert rate >= 0.98
    assert rate == 1.0


def test_every_match_holds_a_trigger_and_the_prefilter_changes_nothing() -> None:
    # The literal triggers decide which rules run: on this corpus too, every match of a rule
    # holds one of its triggers, and running every rule regardless gives the same text.
    texts = [p["text"] for p in POSITIVES] + [n["text"] for n in NEGATIVES]
    for (name, pattern), triggers in zip(rules.BUILTIN_RULES, rules.TRIGGERS, strict=True):
        for text in texts:
            for match in re.finditer(pattern, text):
                assert any(t in match.group() for t in triggers), (name, match.group())
    for text in texts:
        out = text
        for rule in module._builtin_rules():
            compiled, replace = rule.compiled()
            out = compiled.sub(replace, out)
        assert redact_text(text) == out


# The worst shapes of the rules this corpus added, ~300 KB each: milliseconds, not minutes.
ADVERSARIAL = {
    "query-password-braces": ("&password=${" + "a" * 20) * 9_000,
    "query-password-template": ("&password={{" + "a" * 20) * 9_000,
    "userinfo-variable": ("x://u:${" + "a" * 20) * 10_000,
    "twilio-sid-json": ('"SK' + "0" * 32 + '"' + "a" * 300) * 900,
    "twilio-sid-pairs": ("SK" + "0" * 32 + ":" + "a" * 31 + " ") * 4_000,
    "azure-key-names": ('"keyName": "key1",' + "a" * 290) * 1_000,
    "azure-table-rows": ("key1 FULL " + "A" * 85 + " ") * 3_000,
    "putty-private-lines": ("Private-Lines: 1\n" + "A" * 1000 + "-") * 300,
    "amz-security-token": ("X-Amz-Security-Token=" + "%2B" * 99 + " ") * 900,
    "google-refresh-prefix-run": "1//0" * 75_000,
    "escaped-openai-prefix": ("\\nsk-" + "a" * 20) * 12_000,
}


@pytest.mark.parametrize("label", sorted(ADVERSARIAL))
def test_new_rules_run_in_linear_time(label: str) -> None:
    started = time.perf_counter()
    redact_text(ADVERSARIAL[label])
    assert time.perf_counter() - started < 2.0
