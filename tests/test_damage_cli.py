"""Every read says when what it shows is a floor, and still exits 0."""

import sqlite3


def test_show_reports_damage_and_warns(cli, root):
    cli("record", "--kind", "note", "--id", "n1", "--text", "t")
    cli("record", "--kind", "note", "--id", "n2", "--text", "t")
    segdir = root / "workspaces" / "ws" / "segments"
    (seg,) = list(segdir.glob("*.sqlite"))
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'n2'")
    (segdir / "broken.sqlite").write_bytes(b"\0" * 4096)
    result = cli("show", "--json")
    assert result.code == 0
    shown = result.json()
    assert [e["id"] for e in shown["entries"]] == ["n1"]
    assert shown["unreadable"][0]["path"] == "workspaces/ws/segments/broken.sqlite"
    assert shown["malformed"][0]["reason"] == "checksum mismatch"
    assert "floor, not a total" in result.err


def test_reads_that_keep_no_observation_still_verify_every_one(cli, root):
    # show (without --observations) and trace keep no observation, yet a damaged
    # observation row is still what makes their answer a floor.
    cli("record", "--kind", "note", "--id", "n1", "--text", "t")
    assert cli("observe", "--id", "o1", "--kind", "tool_call", "--tool", "Bash").code == 0
    (seg,) = list((root / "workspaces" / "ws" / "segments").glob("*.sqlite"))
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'o1'")
    for args in (["show", "--json"], ["trace", "n1", "--json"]):
        result = cli(*args)
        assert result.code == 0
        assert [m["reason"] for m in result.json()["malformed"]] == ["checksum mismatch"]
        assert "floor, not a total" in result.err
