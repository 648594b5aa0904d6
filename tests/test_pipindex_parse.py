"""What env/pipindex reads of pip's output (issue 25 item 2): the versions ``pip index
versions`` prints (its --json document from pip 25, the "Available versions:" line before) and
why pip could not read an index (urllib3's retry warnings). Both forms are real pip's output
(tests/test_pip_config.py runs both pips); here any text: a sorted list or None, never a
traceback, never a password. 300 examples each, deadline 1 s.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from ascendpatch.env import pipindex
from tests.kit.properties import deadline

# As pip 26.3 and pip 24.0 print them (captured on this machine).
JSON_FORM = json.dumps({"name": "six", "versions": ["1.17.0", "1.16.0"], "latest": "1.17.0"})
TEXT_FORM = "six (1.17.0)\nAvailable versions: 1.17.0, 1.16.0\n"
REFUSED = ("WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, "
           "status=None)) after connection broken by 'NewConnectionError(\"HTTPConnection("
           "host='127.0.0.1', port=9): Failed to establish a new connection: [Errno 111] "
           "Connection refused\")': /simple/six/")


def test_both_forms_of_pip_index_versions_give_the_versions_oldest_first() -> None:
    expected = [Version("1.16.0"), Version("1.17.0")]
    assert pipindex._parse(JSON_FORM) == pipindex._parse(TEXT_FORM) == expected


def test_a_refused_connection_is_said_in_its_own_words() -> None:
    assert pipindex._broken(REFUSED) == "[Errno 111] Connection refused"
    assert pipindex._broken("ERROR: No matching distribution found for six") is None


@settings(max_examples=300, deadline=deadline(1000))
@given(st.one_of(st.text(), st.builds(lambda words: "Available versions: " + ", ".join(words),
                                      st.lists(st.text(max_size=12), max_size=20)),
                 st.builds(json.dumps, st.dictionaries(st.text(max_size=8), st.lists(
                     st.one_of(st.text(max_size=12), st.integers(), st.none())), max_size=4))))
def test_any_output_gives_a_sorted_list_of_versions(text: str) -> None:
    found = pipindex._parse(text)
    assert found == sorted(set(found)) and all(isinstance(v, Version) for v in found)


@settings(max_examples=300, deadline=deadline(1000))
@given(st.text(max_size=400), st.integers(0, 220),
       st.text(alphabet="abcdefXYZ019", min_size=6, max_size=20))
def test_why_an_index_broke_is_short_and_never_shows_a_password(noise: str, before: int,
                                                                password: str) -> None:
    line = " ".join(noise.split())  # the URL anywhere in the line, also where it is cut
    text = f"{noise}\nWARNING: after connection broken by 'ProxyError({'x' * before} " \
           f"http://u:{password}@p:1 {line})': /simple/x/\n{noise}"
    why = pipindex._broken(text)
    assert why is not None and len(why) <= 300
    assert f"u:{password[:3]}" not in why  # not even the start of it, where the line is cut
