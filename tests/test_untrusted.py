"""ascendpatch.untrusted.load_json: any bytes end in a document at most MAX_DEPTH deep or in one
UntrustedDocumentError; never RecursionError or another exception."""

from __future__ import annotations

import json

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
