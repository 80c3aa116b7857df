"""bench/sustained.py and bench/pages_ab.py measure the same pages after the same set-up
(`pages_ready`): every server warmed on every row and its anonymous pages primed, as wrk asks for
them and as a browser does (gzip accepted), with no server, database or wrk needed to check it."""

from unittest import mock

from bench import pages_ab, sustained

PATHS = {
    "floor": ["/bench/floor/"],
    "run page": ["/runs/1/", "/runs/2/"],
    "kernel page": ["/kernels/a/", "/kernels/b/"],
    "compare page": ["/compare/1/"],
    "changes page": ["/changes/"],
    "api runs?kernel=": ["/api/runs/?kernel=a"],
}
COOKIES = {"contributor": "sessionid=c", "moderator": "sessionid=m"}


def fake_get(base, path):
    return 200, b"x" * (100 if path == "/kernels/b/" else 10)


def test_every_server_is_warmed_on_every_row_and_primed_with_the_anonymous_pages():
    warmed, primed = [], []
    with (
        mock.patch.object(sustained.common, "task", return_value={k: list(v) for k, v in PATHS.items()}),
        mock.patch.object(sustained.common, "get", side_effect=fake_get),
        mock.patch.object(
            sustained.common, "wrk", side_effect=lambda s, p, **kw: warmed.append((s, kw["headers"]))
        ),
        mock.patch.object(
            sustained,
            "prime",
            side_effect=lambda server, paths, headers=None: primed.append((server, paths, headers)),
        ),
    ):
        paths, largest, chosen = sustained.pages_ready("db", "http://a", COOKIES, ["http://a", "http://b"])

    assert largest == {"path": "/kernels/b/", "bytes": 100}
    assert chosen["run page, moderator"] == (PATHS["run page"], {"Cookie": "sessionid=m"})
    assert [server for server, _ in warmed] == ["http://a"] * len(chosen) + ["http://b"] * len(chosen)
    gzip = sustained.BROWSER_ENCODING
    assert "gzip" in gzip["Accept-Encoding"]
    assert chosen["largest kernel page, anonymous, as a browser asks (gzip)"] == (["/kernels/b/"], gzip)
    assert chosen["largest kernel page, anonymous"] == (["/kernels/b/"], None)
    assert [(server, headers) for server, _, headers in primed] == [
        ("http://a", None),
        ("http://a", gzip),
        ("http://b", None),
        ("http://b", gzip),
    ]
    anonymous = [path for page in sustained.ANONYMOUS for path in paths[page]]
    assert all(primed_paths == anonymous for _, primed_paths, _ in primed) and "/kernels/b/" in anonymous


def test_the_goals_are_marked_held_or_not():
    samples = {
        "floor": [{"rps": 1000, "p50_ms": 1, "p99_ms": 2, "errors": 0}],
        "run page, moderator": [{"rps": 200, "p50_ms": 5, "p99_ms": 9, "errors": 0}],
        "home, anonymous": [{"rps": 600, "p50_ms": 2, "p99_ms": 3, "errors": 0}],
    }
    rows = {row["page"]: row for row in sustained.rows_with_goals(samples)}
    assert (rows["run page, moderator"]["goal %"], rows["run page, moderator"]["held"]) == (25.0, "no")
    assert (rows["home, anonymous"]["goal %"], rows["home, anonymous"]["held"]) == (50.0, "yes")
    assert (rows["floor"]["goal %"], rows["floor"]["held"]) == ("-", "-")


def test_the_side_by_side_bench_uses_the_same_set_up():
    assert pages_ab.pages_ready is sustained.pages_ready
    assert pages_ab.signed_in_registry is sustained.signed_in_registry
