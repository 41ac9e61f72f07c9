"""The worker table: agent reports, Ray's State API, the registry actor, and commands to workers."""
