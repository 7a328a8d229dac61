"""The observation fold is associative: an observation's events folded in any number of
pieces and the pieces merged is the fold of all of them (what lets the digest cache keep
one span per observation and segment, and fold only the rows a segment gains)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.observation_fold import latest_wins, merge_spans, span_order

KEYS = ("status", "exit", "tool", "target", "check", "said")
facts = st.dictionaries(st.sampled_from(KEYS), st.integers(0, 3) | st.text(max_size=2),
                        max_size=4)


@st.composite
def observation(draw):
    """One observation's events as point spans, in (ts, event id) order."""
    n = draw(st.integers(1, 8))
    stamps = sorted(draw(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 9)),
                                  min_size=n, max_size=n, unique=True)))
    return [(f"t{t:02d}", f"e{i}", f"t{t:02d}", f"e{i}", "tool_call", f"s{t % 2}",
             draw(facts)) for t, i in stamps]


def fold_all(events):
    """The reference: the fold calls_of made of every event, one pass."""
    first, last = events[0], events[-1]
    return (first[0], first[1], last[2], last[3], first[4], first[5],
            latest_wins((e[6] for e in events), no_nulls=True))


def pieces(events, cuts):
    bounds = sorted({c % len(events) for c in cuts} | {0, len(events)})
    return [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if a < b]


@settings(deadline=None)  # a loaded machine must not fail a law
@given(observation(), st.lists(st.integers(0, 100), max_size=6))
def test_folding_in_pieces_then_merging_is_folding_it_all(events, cuts):
    folded = [merge_spans(piece) for piece in pieces(events, cuts)]
    assert merge_spans(folded) == fold_all(events)


@settings(deadline=None)  # a loaded machine must not fail a law
@given(observation(), st.lists(st.integers(0, 100), max_size=6),
       st.lists(st.integers(0, 100), max_size=6))
def test_the_merge_is_associative(events, outer, inner):
    """Any grouping of the pieces merges to the same span."""
    folded = [merge_spans(piece) for piece in pieces(events, outer)]
    grouped = [merge_spans(group) for group in pieces(folded, inner)]
    assert merge_spans(grouped) == merge_spans(folded) == fold_all(events)


@settings(deadline=None)  # a loaded machine must not fail a law
@given(observation(), st.integers(0, 100))
def test_an_event_held_twice_folds_as_once(events, which):
    """A copy of an event in another segment (a replica's) changes nothing, whichever
    segment's span comes first."""
    i = which % len(events)
    held = [merge_spans(events[i:]), merge_spans(events[:i + 1]), events[i]]
    assert merge_spans(sorted(held, key=span_order)) == fold_all(events)


@settings(deadline=None)  # a loaded machine must not fail a law
@given(observation(), st.integers(0, 100))
def test_spans_that_interleave_are_never_merged(events, which):
    if len(events) < 3:
        return
    i = 1 + which % (len(events) - 2)
    outer = merge_spans(events[:i] + events[i + 1:])  # spans around events[i]
    assert merge_spans([outer, events[i]]) is None
