"""Unified diffs: place and apply hunks (diffpatch), write new patches (diffwrite), text and
line endings (textfile), port a fix from one release to another (porting)."""
