"""Recovery derivations: what a resuming agent needs, computed from stored observations.

Everything here is pure and deterministic (no I/O, no clock, no model, no guess at
intent): the same observations give the same answers in any read order.

The API has two steps, so a cache can keep the first:

1. `facts.event_facts(kind, data)`: one observation event's data reduced to the small,
   JSON-able dict the derivations read (what a call ran or wrote, its status, the parsed
   summary of a test or check run, the commits its output reports, its failure reason, the
   text a session said). `calls.fold` folds one observation's events (latest non-null
   value wins, as `Derived.observation_view` does) into a `calls.Call`.
2. Functions of a list of `Call`s, each returning plain dataclasses:
   `test_runs.test_runs`, `commits.commits`, `files_touched.files_touched`,
   `files_touched.files_read`, `failures.failures`, `conversation.conversation`,
   `instructions.standing_instructions` (over the conversation's prompts). Each is a
   step-and-state fold (`TestRunsFold`, `GitFold`, `FilesFold`, `ReadsFold`,
   `FailuresFold`, `InstructionsFold`) with the list function folding every call through
   it; `digest_fold.DigestFold` steps them all, one call at a time, with a state bounded
   by what the digest shows, which a cache can keep and fold on from.

`calls.call_from_view(view)` builds a Call from a `Derived.observation_view` dict, for
callers that hold whole observations (the `timeline` command).
"""
