"""pytest plugin registered by entry point (fixtures for other projects' tests)."""
