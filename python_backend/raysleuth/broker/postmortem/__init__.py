"""Post-mortem: crash records, filed and stored, and read-only replays of them."""
