"""The data Ray Sleuth's parts exchange, as typed objects: broker, agent and CLI share them.

JSON only at the edge (`to_json`/`from_json`, `to_spec`/`from_spec`); standard library only,
since the agent loads these in every worker.
"""
