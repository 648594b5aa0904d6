"""Bounded readers of untrusted documents: what a node, a server or a target sends us.

A JSON document from a fleet node or an HTTP answer can be nested a hundred thousand deep
(json.loads then raises RecursionError, and any recursive walk of a deep but loadable document
does too). ``load_json`` turns every such input into one ``UntrustedDocumentError`` (a
ValueError, so a caller that already treats "not JSON" as bad input needs nothing more), after
which the document is known to be at most ``max_depth`` deep.
"""

from __future__ import annotations

import json

MAX_DEPTH = 64  # far deeper than any document ascendpatch reads (snapshots: 5 levels)


class UntrustedDocumentError(ValueError):
    """The document is not one we can read safely; ``str()`` says why in one line."""


def depth_exceeds(doc: object, max_depth: int) -> bool:
    """Whether ``doc`` nests lists / dicts deeper than ``max_depth`` (walked with a stack)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: list[object] = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def load_json(data: bytes | str, what: str, max_depth: int = MAX_DEPTH) -> object:
    """``data`` parsed as JSON, or UntrustedDocumentError naming ``what`` and the reason."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise UntrustedDocumentError(f"{what} is nested deeper than {max_depth} levels") \
            from None
    except UnicodeDecodeError:
        raise UntrustedDocumentError(f"{what} is not UTF-8 text") from None
    except ValueError as exc:
        raise UntrustedDocumentError(f"{what} is not JSON ({exc})") from None
    if depth_exceeds(doc, max_depth):
        raise UntrustedDocumentError(f"{what} is nested deeper than {max_depth} levels")
    return doc
