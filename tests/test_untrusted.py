"""ascendpatch.untrusted.load_json: any bytes end in a document at most MAX_DEPTH deep or in one
UntrustedDocumentError; never RecursionError or another exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch.untrusted import MAX_DEPTH, UntrustedDocumentError, depth_exceeds, load_json

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200) | st.text(alphabet="[]{}\":,0a ", max_size=300).map(
    str.encode))
def test_any_bytes_end_in_a_document_or_one_error(data: bytes) -> None:
    try:
        doc = load_json(data, "the answer")
    except UntrustedDocumentError as exc:
        assert str(exc).startswith("the answer is ")
        return
    assert not depth_exceeds(doc, MAX_DEPTH)


@settings(max_examples=200, deadline=None)
@given(doc=_DOCS)
def test_a_shallow_document_reads_back_unchanged(doc: object) -> None:
    assert load_json(json.dumps(doc), "x") == doc


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 500_000])
def test_deep_nesting_is_one_error(depth: int) -> None:
    for opener, closer in (("[", "]"), ('{"a":', "}")):
        with pytest.raises(UntrustedDocumentError, match="nested deeper than 64 levels"):
            load_json(opener * depth + "1" + closer * depth, "the snapshot")


# --------------------------------------------------------------------------- Shape

SNAPSHOT_SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "ascendpatch/data/snapshot.schema.json").read_text())
_HEX = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
_ANY = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4) | _HEX,
                    lambda inner: st.lists(inner, max_size=2) |
                    st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=6)
_KEYS = st.sampled_from(["kind", "format", "distributions", "artifacts", "files", "sizes",
                         "all_files", "target", "created", "other"])


def _near_snapshot(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Documents close to a snapshot: its keys, each with a value of the right shape or not."""
    version = st.fixed_dictionaries({"version": values}, optional={"name": values,
                                                                   "installer": values})
    fields = {"kind": st.just("ascendpatch-snapshot") | values, "format": st.just(1) | values,
              "distributions": st.dictionaries(st.text(max_size=3), version | values,
                                               max_size=3) | values,
              "artifacts": st.dictionaries(st.text(max_size=3), values, max_size=2) | values,
              "files": st.dictionaries(st.text(max_size=3), _HEX | values, max_size=3) | values,
              "sizes": st.dictionaries(st.text(max_size=3), st.integers(-2, 9) | values,
                                       max_size=2) | values}
    return st.fixed_dictionaries({}, optional=fields) | values


@settings(max_examples=500, deadline=None)
@given(doc=_near_snapshot(_ANY))
def test_shape_agrees_with_jsonschema_on_the_snapshot_schema(doc: object) -> None:
    """Our validator says a document fits exactly when the jsonschema library does (floats
    are left out: 1.0 is an integer to JSON Schema and not to us)."""
    jsonschema = pytest.importorskip("jsonschema")  # (the dev extra's reference validator)

    from ascendpatch.untrusted import Shape

    jsonschema.Draft202012Validator.check_schema(SNAPSHOT_SCHEMA)
    theirs = jsonschema.Draft202012Validator(SNAPSHOT_SCHEMA).is_valid(doc)
    ours = Shape(SNAPSHOT_SCHEMA).problem(doc)
    assert (ours is None) == theirs, ours


def test_shape_names_the_first_place_that_does_not_fit() -> None:
    from ascendpatch.untrusted import Shape

    shape = Shape(SNAPSHOT_SCHEMA)
    doc = {"kind": "ascendpatch-snapshot", "format": 1, "distributions": {}, "artifacts": {},
           "files": {"a b.py": ["x"]}}
    assert shape.problem(doc) == 'files["a b.py"]: expected a string, got a list'
    doc["files"] = {"a.py": "A" * 500}
    problem = shape.problem(doc)
    assert problem is not None and len(problem) < 200 and "is not of the form" in problem
    with pytest.raises(ValueError, match="does not know"):
        Shape({"type": "object", "patternProperties": {}})
