def test_record_then_show(cli):
    assert cli("record", "--kind", "finding", "--id", "f1", "--claim", "it works").out == \
        "recorded f1\n"
    shown = cli("show", "--json").json()
    assert [e["id"] for e in shown["entries"]] == ["f1"]
    assert shown["entries"][0]["live"] is True
