"""The language server's chunked analysis (lsp/incremental.py) finds exactly what a whole-file
analysis finds, at the same positions, before and after edits (issue 15: the benchmark's speed
must not change an answer)."""

from __future__ import annotations

from helpers import FIXTURES, REPO

from raysleuth.lsp.checks import analyze
from raysleuth.lsp.incremental import IncrementalAnalyzer, split_chunks

SOURCES = sorted((FIXTURES / "lsp").glob("*.py")) + sorted(
    (REPO / "python_backend" / "raysleuth").rglob("*.py")
)

TRICKY = '''import ray
X = """
@ray.remote
def not_code():
    breakpoint()
"""


@ray.remote(
    num_cpus=1,
)
@other
def real(xs):
    breakpoint()
    return xs
try:
    pass
except ValueError:
    pass
'''


def same(text: str, analyzer: IncrementalAnalyzer) -> None:
    whole, chunked = analyze(text), analyzer.analyze(text)
    assert chunked is not None and whole is not None
    assert chunked.findings == whole.findings
    assert chunked.defs == whole.defs


def test_chunks_put_together_are_the_text_and_keep_decorators_with_their_def():
    chunks = split_chunks(TRICKY)
    assert "".join(c for _, c in chunks) == TRICKY
    [decorated] = [c for _, c in chunks if c.startswith("@ray.remote(")]
    assert "def real(xs):" in decorated and "@other" in decorated
    assert any(c.startswith("try:") and "except ValueError" in c for _, c in chunks)


def test_a_string_cut_by_the_chunker_falls_back_to_the_whole_file():
    analyzer = IncrementalAnalyzer()
    same(TRICKY, analyzer)
    [finding] = analyzer.analyze(TRICKY).findings  # the breakpoint() inside the string is no code
    assert finding.span.line == TRICKY.splitlines().index("    breakpoint()", 5)


def test_chunked_analysis_equals_the_whole_file_analysis_on_real_files():
    for path in SOURCES:
        same(path.read_text(), IncrementalAnalyzer())


def test_edits_above_shift_every_finding_and_fix_like_a_fresh_analysis():
    text = (FIXTURES / "lsp" / "antipatterns.py").read_text()
    analyzer = IncrementalAnalyzer()
    same(text, analyzer)
    for edited in (
        "# typing\n" + text,
        "import os\n\n\n" + text,
        text.replace("def fine(n):", "def fine(n, m=2):"),
    ):
        same(edited, analyzer)
    # A name made remote in another chunk changes the findings of this one.
    same(text + "\nsequential = ray.remote(sequential)\n", analyzer)
