"""Round-two attacks on the product: acknowledged data lost, erasure undone or incomplete,
secrets reaching a file. Each test is one finding, written to fail before its fix."""

from __future__ import annotations

from conftest import all_bytes_under

AWS = "AKIAQWERTYUIOPASDFGH"


def test_an_id_holding_a_secret_is_refused_not_stored(cli, root):
    # Ids are stored as given and a tombstone names its target's id for ever, so a secret
    # in an id could never be erased: it is refused before anything is written.
    for args in (["record", "--kind", "note", "--id", f"n-{AWS}", "--text", "t"],
                 ["observe", "--kind", "tool_call", "--id", f"o-{AWS}", "--tool", "Bash"]):
        result = cli(*args)
        assert result.code == 2 and "secret" in result.err and AWS not in result.err, result
        assert result.err.count("\n") == 1
    assert not root.exists() or AWS.encode() not in all_bytes_under(root)
    assert cli("record", "--kind", "note", "--id", "n-plain", "--text", "t").code == 0
