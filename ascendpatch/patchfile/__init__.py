"""Unified diffs: parse, place and apply hunks (diffpatch/), write new patches (diffwrite),
port a fix from one release to another (porting)."""
