"""queueref as an oracle in other projects' tests."""
