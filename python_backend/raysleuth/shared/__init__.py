"""What every side uses: errors with hints, names, paths and private files, limits, the token
proof, swallowed exceptions and the supported versions. Imports neither the agent, the broker
nor the CLI."""
