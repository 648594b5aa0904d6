"""Read-only views of an environment: the RECORD audit, snapshots, fleet drift, verify's checks."""
