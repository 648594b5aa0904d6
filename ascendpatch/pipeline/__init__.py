"""The artifact pipeline: the planner (what each artifact would do), the engine (which
acts on plans through the store) and the file states they share."""
