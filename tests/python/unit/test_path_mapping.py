from raysleuth.broker.debug.pathmap import decide, local_sample
from raysleuth.dap.paths import PathMapper


def test_maps_both_ways_and_leaves_other_paths():
    m = PathMapper([{"localRoot": "/home/me/proj/", "remoteRoot": "/tmp/ray/pkg_1"}])
    assert m.to_remote("/home/me/proj/a/b.py") == "/tmp/ray/pkg_1/a/b.py"
    assert m.to_local("/tmp/ray/pkg_1/a/b.py") == "/home/me/proj/a/b.py"
    assert m.to_local("/usr/lib/python3.11/os.py") == "/usr/lib/python3.11/os.py"
    assert m.to_remote("/home/me/project2/x.py") == "/home/me/project2/x.py"  # a prefix, not a root


def test_longest_root_wins():
    m = PathMapper(
        [{"localRoot": "/l", "remoteRoot": "/r"}, {"localRoot": "/l/sub", "remoteRoot": "/elsewhere"}]
    )
    assert m.to_remote("/l/sub/x.py") == "/elsewhere/x.py" and m.to_remote("/l/x.py") == "/r/x.py"


def test_every_source_path_in_a_message_is_mapped():
    m = PathMapper([{"localRoot": "/l", "remoteRoot": "/r"}])
    msg = {
        "stackFrames": [{"source": {"path": "/r/a.py"}}, {"source": {"path": "/other.py"}}],
        "breakpoint": {"source": {"path": "/r/b.py", "name": "b.py"}},
    }
    m.map_message(msg, to_remote=False)
    assert [f["source"]["path"] for f in msg["stackFrames"]] == ["/l/a.py", "/other.py"]
    assert msg["breakpoint"]["source"]["path"] == "/l/b.py"


def test_bad_mappings_are_ignored():
    assert not PathMapper(
        [{"localRoot": "", "remoteRoot": "/r"}, {"x": 1}, {"localRoot": 3, "remoteRoot": "/r"}]
    )


def test_content_decides_automatic_mapping(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text("y = 2\n")
    local = local_sample(str(tmp_path))
    assert set(local) == {"a.py", "pkg/b.py"}
    assert decide(local, dict(local))
    assert decide(local, {"a.py": local["a.py"], "pkg/b.py": None})  # missing remotely is fine
    assert not decide(local, {"a.py": "0" * 64, "pkg/b.py": local["pkg/b.py"]})  # edited copy
    assert not decide(local, {"a.py": None, "pkg/b.py": None})  # nothing in common
