"""`get` of one observation keeps only that observation: the whole read verifies
every row (damage is still reported) and the asked-for events come by index."""

from __future__ import annotations

from typing import Any

from agent_journal.ops import context


def test_get_keeps_only_the_observation_asked_for(root, inproc, monkeypatch) -> None:
    for n in range(3):
        assert inproc("observe", "--kind", "tool_call", "--id", f"o{n}", "--tool", "Bash",
                      "--input", '{"command": "ls"}', "--status", "started").code == 0
    assert inproc("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash",
                  "--status", "ok", "--exit-code", "0").code == 0
    kept: list[Any] = []
    real = context.read_workspace

    def spy(*a: Any, **kw: Any) -> Any:
        result, d = real(*a, **kw)
        kept.append(sorted(d.observation_events))
        return result, d

    monkeypatch.setattr(context, "read_workspace", spy)
    assert inproc("get", "o1").code == 0
    assert kept == [[]]
    record = inproc("show", "--id", "o1", "--json").json()["entries"]
    [view] = record
    assert view["status"] == "ok" and len(view["eventIds"]) == 2
    event = inproc("get", view["eventIds"][1], "--json")
    assert event.code == 0, event.err
    assert event.json()["data"]["status"] == "ok"
    assert "no recorded output (status ok)" in inproc("get", "o1").err
    assert inproc("tombstone", "o1", "--reason", "x").code == 0
    assert inproc("get", view["eventIds"][1]).code == 1
    assert inproc("get", "o1").code == 1
