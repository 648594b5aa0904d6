"""The target environment: find and introspect its interpreter (in-target scripts run through
inscript), read its distributions and requirements, resolve installs with pip, list releases."""
