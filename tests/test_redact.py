"""Credentials never reach a crash log: URL passwords, secret-named options and env entries.

The crash log is meant to be pasted into a bug report, so it must not carry what the command
line carried: ``smoke --url http://user:PASSWORD@host`` or ``check-launch -- vllm serve ...
--api-key KEY`` with an ``HF_TOKEN=...`` entry. On 89ee836 the log wrote ``argv`` raw."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendpatch import redact
from tests.kit import run_cli

PASSWORD = "s3cr3t-pa55"
API_KEY = "sk-live-abcdef0123"
TOKEN = "hf_TopSecretToken42"


def _crash_log(err: str) -> str:
    assert "unexpected error" in err, err
    return Path(err.split("(details: ")[1].rstrip(")\n")).read_text(encoding="utf-8")


def test_smoke_url_password_is_masked_in_the_crash_log(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://operator:{PASSWORD}@127.0.0.1:9/"

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"simulated bug while talking to {url}")

    monkeypatch.setattr("ascendpatch.deploy.smoke.models", boom)
    result = run_cli("smoke", "--url", url)
    assert result.code == 3
    log = _crash_log(result.err)
    assert PASSWORD not in log
    assert "operator:***@127.0.0.1:9" in log  # still says which server it was
    assert "simulated bug" in log and "Traceback" in log


def test_check_launch_api_key_and_env_entry_are_masked(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug in a launch rule")

    monkeypatch.setattr("ascendpatch.deploy.launch.check_command", boom)
    result = run_cli("check-launch", "--", "env", f"HF_TOKEN={TOKEN}", "vllm", "serve",
                     str(tmp_path), "--api-key", API_KEY, f"--hf-token={TOKEN}",
                     "--max-model-len", "4096")
    assert result.code == 3
    log = _crash_log(result.err)
    assert API_KEY not in log and TOKEN not in log
    assert "'--api-key', '***'" in log and "'HF_TOKEN=***'" in log
    assert "'--max-model-len', '4096'" in log  # ordinary options stay readable


@pytest.mark.parametrize(("words", "expected"), [
    (["--api-key", "k"], ["--api-key", "***"]),
    (["--api-key=k"], ["--api-key=***"]),
    (["HF_TOKEN=x", "PATH=/bin"], ["HF_TOKEN=***", "PATH=/bin"]),
    (["--url", "https://u:p@h/x"], ["--url", "https://u:***@h/x"]),
    (["-H", "Authorization: Bearer abc"], ["-H", "Authorization: Bearer ***"]),
    (["--tensor-parallel-size", "2"], ["--tensor-parallel-size", "2"]),
    (["--api-key"], ["--api-key"]),  # no value follows: nothing to hide
])
def test_argv_masking(words: list[str], expected: list[str]) -> None:
    assert redact.argv(words) == expected


@settings(max_examples=300, deadline=None)
@given(secret=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126,
                                             exclude_characters="@/:'\"\\"),
                      min_size=6, max_size=40),
       name=st.sampled_from(["HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "client_secret"]))
def test_a_secret_value_never_survives(secret: str, name: str) -> None:
    """Whatever the value, once it follows a secret name or sits in a URL's password slot it is
    gone from the masked text (argv form, NAME=value form, URL form)."""
    words = [f"--{name.lower().replace('_', '-')}", secret, f"{name}={secret}",
             f"https://user:{secret}@example.invalid/"]
    masked = redact.argv(words)
    assert all(secret not in word for word in masked[1:]), masked
    assert secret not in redact.text(f"{name}={secret} and https://u:{secret}@h/")


@pytest.mark.parametrize("name", ["HF_TOKEN", "--hf-token", "HUGGING_FACE_HUB_TOKEN", "apiKey",
                                  "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "api_keys",
                                  "DBPASSWORD", "db.passwd", "client_secret", "MYTOKEN",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "--api-key", "HF_TOKEN2",
                                  "MY_SECRET1", "APIKEYS", "PASSWORDHASH", "hfTokenValue",
                                  "MONKEYPATCH_DIR"])
def test_names_that_hold_a_credential_are_secret(name: str) -> None:
    assert redact.is_secret(name)


@pytest.mark.parametrize("name", ["--max-num-batched-tokens", "max_tokens", "max_image_tokens",
                                  "--tokenizer", "--tokenizer-mode", "--skip-tokenizer-init",
                                  "--max-model-len", "MAX_TOKENS2"])
def test_counts_and_paths_that_only_contain_a_marker_are_not_secret(name: str) -> None:
    """On bf54dcc every name containing TOKEN was secret: serve's "started" line showed
    ``--max-num-batched-tokens ***`` and ``--tokenizer ***``. Only these words are exempt: a
    name that holds a marker anywhere else stays secret (a review found HF_TOKEN2 shown when
    the rule was "a word ends with a marker")."""
    assert not redact.is_secret(name)
    assert redact.argv([name, "256"]) == [name, "256"]


@pytest.mark.parametrize(("text", "shown", "key"), [
    # a password holding an @ (pip takes the last @ of the authority): none of it shown
    ("https://user:p@ss@host/simple", "https://user:***@host/simple", "https://host/simple"),
    # a ? or # ends the authority: evil.example is the host, not mirror.internal
    ("https://evil.example?@mirror.internal/s", "https://evil.example?@mirror.internal/s",
     "https://evil.example?@mirror.internal/s"),
    ("https://h#@mirror/s", "https://h#@mirror/s", "https://h#@mirror/s"),
    ("HTTPS://T0KEN@h/s git+https://u:t@g/x@v1.0", "HTTPS://T0KEN@h/s git+https://u:***@g/x@v1.0",
     "HTTPS://h/s git+https://g/x@v1.0"),
])
def test_a_urls_user_info_is_cut_where_url_parsers_cut_it(text: str, shown: str,
                                                           key: str) -> None:
    """On 2ec68a2 ``https://user:p@ss@host`` was shown as ``user:***@ss@host`` (the rest of
    the password in clear), and the cache-key form took ``evil?@mirror`` for mirror's."""
    assert redact.url(text) == shown
    assert redact.without_credentials(text) == key


@settings(max_examples=300, deadline=None)
@given(user=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126,
                                           exclude_characters="/?#@:"), max_size=12),
       password=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126,
                                               exclude_characters="/?#"), min_size=6,
                        max_size=30),
       host=st.from_regex(r"[a-z][a-z0-9.-]{0,20}(:[0-9]{1,5})?", fullmatch=True))
def test_no_part_of_a_password_survives_either_form(user: str, password: str,
                                                    host: str) -> None:
    url = f"https://{user}:{password}@{host}/simple"
    assert redact.without_credentials(url) == f"https://{host}/simple"
    assert redact.url(url) == f"https://{user}:{redact.MASK}@{host}/simple"


@pytest.mark.parametrize("hostile", ["a" * (1 << 20), "a." * (1 << 19), "x=" * (1 << 19),
                                     "https://u:" + "x" * (1 << 20), "a://" * (1 << 18)])
def test_a_megabyte_line_is_masked_in_one_pass(hostile: str) -> None:
    """The name of NAME=value and a URL's scheme are tried only where a word starts, and
    bounded: on 2ec68a2 64 KiB of letters took 15 s (a regex scan from every character), a
    MiB about 15 min; this test would then hang the suite rather than pass."""
    assert redact.text(hostile) == hostile
    assert redact.without_credentials(hostile) == hostile
    assert redact.argv([hostile]) == [hostile]
