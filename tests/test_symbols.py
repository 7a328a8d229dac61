"""What a change defines: names copied from definition lines, new in the change."""

from __future__ import annotations

import pytest

from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.symbols import MAX_NAMES, defined_names


@pytest.mark.parametrize(("added", "names"), [
    ("def parse(x):\n    return x\n", ["parse"]),
    ("export function buildErrorPlanPrompt(a: A): string {", ["buildErrorPlanPrompt"]),
    ("export const REMEDIATION_BATCH_SIZE = 10;", ["REMEDIATION_BATCH_SIZE"]),
    ("func (r *Runner) Capture(w io.Writer) error {", ["Capture"]),
    ("pub fn tokenize(s: &str) -> Vec<Token> {", ["tokenize"]),
    ("export interface PlanSection {\n  title: string\n}", ["PlanSection"]),
    ("class TreeView(Base):\n    def render(self): ...", ["TreeView", "render"]),
    ("  const local = 1;\n  return local;", []),  # a local in a body is no definition
    ("x = compute()\nprint(x)\n", []),
    # environment variables a .env file, a shell script or a Dockerfile sets
    ("# IPFS\nIPFS_LOCAL_API_URL=http://h:5001\nexport JWT_SECRET=x\nENV NODE_ENV=production\n",
     ["IPFS_LOCAL_API_URL", "JWT_SECRET", "NODE_ENV"]),
    ("if X_Y == 1:\nPATH=/bin\n", []),  # a comparison; a name without an underscore
    # the members of a union of string literals, one a line
    ("export type Step =\n  | 'planning_error_fix'\n  | \"capturing_error_diff\";\n",
     ["Step", "planning_error_fix", "capturing_error_diff"]),
])
def test_definition_lines_name_what_they_define(added, names):
    assert defined_names(added) == names


def test_a_body_change_defines_nothing_and_the_list_is_bounded():
    body = "def parse(x):\n    return x + 1\n"
    assert defined_names(body, "def parse(x):\n    return x\n") == []
    many = "".join(f"def f{i}(): pass\n" for i in range(20))
    assert defined_names(many) == [f"f{i}" for i in range(MAX_NAMES)]


def test_an_edit_call_keeps_what_it_defines():
    facts = event_facts("tool_call", {
        "tool": "Edit", "status": "ok", "input": {
            "file_path": "/w/a.py", "old_string": "def old():\n    pass\n",
            "new_string": "def old():\n    pass\n\ndef added_helper():\n    pass\n"}})
    assert facts["defines"] == ["added_helper"]
