from raysleuth.agent.rank import RankInfo, from_env, resolve_rank


def train_says(rank):
    return lambda: RankInfo(rank, 0, 8, "ray.train")


def test_explicit_rank_wins_over_env_and_ray_train():
    r = resolve_rank(RankInfo(5, None, 8, "api"), {"RANK": "1", "WORLD_SIZE": "2"}, train_says(3))
    assert (r.rank, r.world_size, r.source) == (5, 8, "api")


def test_env_rank_wins_over_ray_train():
    r = resolve_rank(None, {"RANK": "1", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}, train_says(3))
    assert (r.rank, r.local_rank, r.world_size, r.source) == (1, 0, 2, "env")


def test_ray_train_context_used_when_nothing_else_says():
    r = resolve_rank(None, {}, train_says(3))
    assert (r.rank, r.source) == (3, "ray.train")


def test_unknown_rank_is_none_not_zero():
    r = resolve_rank(None, {}, lambda: None)
    assert r.rank is None and r.source is None


def test_local_rank_alone_stands_in_for_rank():
    assert from_env({"LOCAL_RANK": "2"}).rank == 2


def test_garbage_env_values_are_ignored():
    assert from_env({"RANK": "zero"}) is None
    r = resolve_rank(None, {"RANK": "x"}, train_says(4))
    assert r.rank == 4


def test_set_rank_outside_ray_never_raises():
    import raysleuth
    from raysleuth.agent import rank as rank_mod

    try:
        raysleuth.set_rank(7, world_size=9)
        raysleuth.event("x", a=1)
        raysleuth.inspect("t", [1, 2], step=3)
        assert resolve_rank(environ={"RANK": "1"}).rank == 7
    finally:
        rank_mod._explicit = None
