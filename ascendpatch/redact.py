"""What a credential looks like, and how text that may hold one is shown.

One rule for every place a value could reach a person or a file: verify's lines, diffs of
env files, conflict messages and crash logs. A *name* that looks secret (``HF_TOKEN``,
``--api-key``, ``DB_PASSWORD``) hides its value; a URL hides its password; nothing else is
touched, so a log stays useful for a bug report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL")
HIDDEN = "<set, value hidden>"
MASK = "***"

# A URL's scheme, at the start of a word (the look-behind: a long run of letters is not tried
# at every character, which made these patterns quadratic) and of a bounded length.
_SCHEME = r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)"
# user:password@ in any scheme://... (also inside a longer word or a traceback line), for a
# person to read: the password runs to the LAST @ before a / or a space (it may hold an @, as
# pip allows, or a ? a parser would not take for one): masking too much is the safe side.
_URL_CREDENTIALS = re.compile(_SCHEME + r"(?P<user>[^/@:\s]*):(?P<password>[^/\s]*)@")
# NAME=value where NAME looks secret (env entries, dotenv lines, option=value). The name is
# tried only where a word starts (or after a -) and bounded: unbounded, a long run of letters
# with no = after it was scanned again from every character (64 KiB of a log line: 15 s).
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127})="
                         r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\"]*)")
# one word of a command line: --name=value or NAME=value, the value being the rest of the word
_WORD_ASSIGNMENT = re.compile(r"(?P<name>-*[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>.+)", re.S)
# scheme://anything@: the whole user-info part of a URL (a token alone, or user:password), for
# a key: exactly as URL parsers split the authority (it ends at the first / ? # or space; the
# user-info at its last @), so ``https://evil?@mirror/`` stays evil's and ``u:p@ss@h`` is h.
_URL_USERINFO = re.compile(_SCHEME + r"[^/?#\s]*@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+\S+")


# words that contain a marker and hold no credential: vLLM's token counts (--max-num-batched-
# tokens, max_tokens, max_image_tokens) and its tokenizer options (--tokenizer PATH)
_NOT_SECRET = frozenset({"TOKENS", "TOKENIZER", "TOKENIZERS", "TOKENIZATION", "DETOKENIZE",
                         "DETOKENIZER"})
# where a name's words meet: -, _, ., a space, or a lower-case letter before a capital (apiKey)
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret(name: str) -> bool:
    """A name that looks like it holds a credential: its value is never shown, only presence.

    A word of the name holds a marker (``HF_TOKEN2``, ``apiKey``, ``PASSWORDHASH``), unless the
    word is one of vLLM's counts or tokenizer options: ``--max-num-batched-tokens 256`` and
    ``--tokenizer PATH`` stay readable in a shown command line, ``--hf-token`` does not."""
    for word in _WORD_BREAK.split(name):
        upper = word.upper()
        if upper.rstrip("0123456789") in _NOT_SECRET:
            continue
        if any(marker in upper for marker in SECRET_MARKERS):
            return True
    return False


def shown(name: str, value: str) -> str:
    """``value`` as messages and --json may show it: masked when ``name`` looks secret."""
    return HIDDEN if is_secret(name) else value


def url(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it masked."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


def without_credentials(text: str) -> str:
    """``text`` with the user-info part (``token@``, ``user:password@``) of every URL in it
    removed: the URL as a key, which must neither hold a secret nor change with one."""
    return _URL_USERINFO.sub(lambda m: m["scheme"], text)


def _assignment(match: re.Match[str]) -> str:
    name = match["name"].lstrip("-")
    return f"{match['name']}={MASK}" if is_secret(name) and match["value"] else match[0]


def text(line: str) -> str:
    """A free text (a traceback line, a message): URL passwords, ``SECRET_NAME=value`` and
    ``Bearer x`` tokens masked."""
    line = url(line)
    line = _ASSIGNMENT.sub(_assignment, line)
    return _BEARER.sub(lambda m: f"{m[1]} {MASK}", line)


# a URL path segment that may be a token (an entitlement or a deploy token in the path): long,
# letters and digits mixed
_TOKEN_LIKE = re.compile(r"(?=[^/]*[0-9])(?=[^/]*[A-Za-z])[A-Za-z0-9_-]{16,}")


def may_be_credential(name: str, value: str) -> bool:
    """Whether a setting read from a file might be a secret, which ascendpatch never copies
    to its cache (pip's kept settings, a kept manifest): a secret-looking name, anything like
    user-info, a query or an assignment, or a token-like segment in a URL's path."""
    if (is_secret(name) or "@" in value or "?" in value or text(value) != value
            or without_credentials(value) != value):
        return True
    return any(_TOKEN_LIKE.fullmatch(segment) for word in value.split() if "://" in word
               for segment in word.split("://", 1)[1].split("/")[1:])


def argv(words: Sequence[str]) -> list[str]:
    """A command line as a log may show it: ``--api-key X`` / ``--api-key=X`` / ``HF_TOKEN=X``
    / URL passwords / ``Authorization: Bearer X`` masked, every other word as given."""
    out: list[str] = []
    hide_next = False
    for word in words:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        if word.startswith("-") and "=" not in word and is_secret(word.lstrip("-")):
            out.append(word)
            hide_next = True  # the option's value is the next word
            continue
        whole = _WORD_ASSIGNMENT.fullmatch(word)
        if whole and is_secret(whole["name"].lstrip("-")):
            out.append(f"{whole['name']}={MASK}")
        else:
            out.append(text(word))
    return out

