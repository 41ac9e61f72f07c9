"""Debug Adapter Protocol, shared by the broker, the CLI and the tests: framing, one message
channel over any transport (channel.py, transport.py), a small client, path mapping."""
