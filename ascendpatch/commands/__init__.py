"""One module per CLI verb. Each exposes a typed ``run`` that returns a CommandResult."""
