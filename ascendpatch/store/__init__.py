"""Everything ascendpatch writes to a target goes through this package."""
