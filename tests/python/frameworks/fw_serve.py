"""A Ray Serve deployment for the framework tests: its `__call__` answers `?x=N` with 2N."""

from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0})
class Doubler:
    def __call__(self, request) -> str:
        x = int(request.query_params["x"])
        doubled = x * 2  # @bp serve-call
        return f"doubled {doubled}"


app = Doubler.bind()
