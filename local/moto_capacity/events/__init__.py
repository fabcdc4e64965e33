"""EventBridge: a rule target without an input transformer gets the whole event."""
