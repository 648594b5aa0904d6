"""Read-only checks of a target for `ascendpatch verify`. Each returns CheckResults."""
