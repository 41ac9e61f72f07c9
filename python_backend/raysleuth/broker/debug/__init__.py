"""Debug links to workers and the DAP front door: one debugpy connection per worker,
leased to editor sessions."""
