"""Deployment self-checks: serve-log triage, endpoint smoke test, launch checks, safe stop."""
