"""Rank groups: named sets of workers to pause, continue and step together; and their routes."""
