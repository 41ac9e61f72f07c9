"""Debug Adapter Protocol framing, shared by the broker, the CLI and the tests."""
