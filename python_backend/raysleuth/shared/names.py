"""Names shared by the broker and the agents: the Ray namespace and actor names they meet under."""

NAMESPACE = "raysleuth"
"""Ray namespace of Ray Sleuth's own actors (registry, node relays)."""

REGISTRY_ACTOR = "raysleuth-registry"
"""Named actor the broker starts; every agent reports to it."""

OWN_ACTOR_CLASSES = frozenset({"SleuthRegistry", "NodeRelay"})
"""Actor classes of Ray Sleuth itself: never shown as user workers, never get an agent."""

POINTS_KV_KEY = b"raysleuth/points"
"""GCS internal-KV key (namespace NAMESPACE) with the cluster's point set: a worker reads it when
Ray loads code into it, before its agent thread has heard from the registry."""
