"""Manifests: YAML files that pin a version stack and list the fixes (artifacts)."""
