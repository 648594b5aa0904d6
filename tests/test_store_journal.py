"""The journal's format on disk is a contract with every run that was killed before this
version was installed: an interrupted run of an older ascendpatch must still be rolled back."""

from __future__ import annotations

from pathlib import Path

from ascendpatch.hashing import sha256_bytes
from ascendpatch.store.ledger import LedgerStore

# Left on disk by ascendpatch 89ee836, killed (ASCENDPATCH_CRASH_AT=6) after its second run
# had changed pkg/mod.py, created pkg/new/deep/added.py and removed pkg/gone.py, and had
# written the new ledger, but before it deleted the journal (the commit point).
JOURNAL_89EE836 = (
    '{"format": 2, "ledger_before": "{\\n \\"artifacts\\": {\\n  \\"one\\": {\\n   \\"pkg/mod'
    '.py\\": {\\n    \\"backup\\": \\"25718360e05d3c2d0963d1381e9dd4dae5fca789244ee4b9f861'
    'adcc0cc96218\\",\\n    \\"sha256_after\\": \\"1094f4a608520e6cd87446d714acc1d2a9fab62'
    '5af2e03e561bfa50639443eae\\",\\n    \\"sha256_before\\": \\"25718360e05d3c2d0963d1381'
    'e9dd4dae5fca789244ee4b9f861adcc0cc96218\\",\\n    \\"time\\": \\"2026-01-01T00:00:00Z'
    '\\"\\n   }\\n  }\\n },\\n \\"format\\": 1\\n}", "files": [{"path": "pkg/mod.py", "before'
    '": "1094f4a608520e6cd87446d714acc1d2a9fab625af2e03e561bfa50639443eae", "after": '
    '"9252a75c942da16f7b52cab752797dea4fca18474db9d7eff102842a459b25b3", "prune_to": '
    'null, "made_dirs": []}, {"path": "pkg/new/deep/added.py", "before": null, "after'
    '": "3428719b7688c78a0cc8ba4b9e80b4e464c815fbccfd4b20695a15ffcefc22af", "prune_to'
    '": "pkg", "made_dirs": ["pkg/new/deep", "pkg/new"]}, {"path": "pkg/gone.py", "be'
    'fore": "4b9f2c32577beb1ebc8ab2a1e226faaa9176a81cd4eedbaa22f8a0db919972b5", "afte'
    'r": null, "prune_to": null, "made_dirs": []}]}'
)
LEDGER_AFTER = (
    '{\n "artifacts": {\n  "one": {\n   "pkg/mod.py": {\n    "backup": "25718360e05d3c2d0'
    '963d1381e9dd4dae5fca789244ee4b9f861adcc0cc96218",\n    "sha256_after": "1094f4a60'
    '8520e6cd87446d714acc1d2a9fab625af2e03e561bfa50639443eae",\n    "sha256_before": "'
    '25718360e05d3c2d0963d1381e9dd4dae5fca789244ee4b9f861adcc0cc96218",\n    "time": "'
    '2026-01-01T00:00:00Z"\n   }\n  },\n  "two": {\n   "pkg/gone.py": {\n    "backup": "4b'
    '9f2c32577beb1ebc8ab2a1e226faaa9176a81cd4eedbaa22f8a0db919972b5",\n    "sha256_aft'
    'er": null,\n    "sha256_before": "4b9f2c32577beb1ebc8ab2a1e226faaa9176a81cd4eedba'
    'a22f8a0db919972b5",\n    "time": "2026-01-01T00:00:00Z"\n   }\n  }\n },\n "format": 1'
    '\n}'
)
BACKUPS = (b"original\n", b"patched\n", b"gone\n")


def _interrupted_site(root: Path) -> LedgerStore:
    (root / "pkg/new/deep").mkdir(parents=True)
    (root / "pkg/mod.py").write_bytes(b"again\n")
    (root / "pkg/new/deep/added.py").write_bytes(b"added\n")
    state = root / ".ascendpatch"
    (state / "backups").mkdir(parents=True)
    for data in BACKUPS:
        (state / "backups" / sha256_bytes(data)).write_bytes(data)
    (state / "journal.json").write_text(JOURNAL_89EE836)
    (state / "ledger.json").write_text(LEDGER_AFTER)
    return LedgerStore(root)


def test_a_run_interrupted_by_89ee836_is_rolled_back(tmp_path: Path) -> None:
    store = _interrupted_site(tmp_path)
    assert store.needs_recovery()
    note = store.recover()
    assert note == ("recovered an interrupted run: rolled back 3 of 3 file(s) to their state "
                    "before it")
    assert (tmp_path / "pkg/mod.py").read_bytes() == b"patched\n"
    assert (tmp_path / "pkg/gone.py").read_bytes() == b"gone\n"
    assert not (tmp_path / "pkg/new").exists()
    assert not store.journal_path.exists() and not store.needs_recovery()
    assert set(store.load_ledger()) == {"one"}
    assert store.load_ledger()["one"]["pkg/mod.py"].backup == sha256_bytes(b"original\n")
