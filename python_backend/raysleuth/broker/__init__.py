"""The broker: one per cluster; registry of workers, HTTP API, DAP front door."""
