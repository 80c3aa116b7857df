"""A measurement quoted in docs prose that no test can compute again (a benchmark's timing, a GPU
host's log) names the committed file that holds it: a `<!-- figures: PATH[, PATH] -->` line before
the paragraph or table, and every figure of that paragraph or table is a number that file holds.
`PATH@COMMIT` names the file as that commit holds it: a benchmark's results file that a later run
of the same benchmark replaced (git must hold the commit).
A figure changed in the prose, or a file measured again, fails here until the two agree
(STYLE.md, "README and docs")."""

import json
import re
import subprocess

import pytest

from tests.docs.commands import ROOT

CITATION = re.compile(r"^<!-- figures: (?P<paths>[^>]+?) -->\n(?P<scope>.*?)(?:\n\n|\Z)", re.M | re.S)

# What reads as a number but is no measured figure: code spans, dates and times, cards' and commits'
# ids, section and RFC numbers, registry sizes (100k, 1M), powers and ordinals, a machine's cores, and a goal ("goal: 5×, met").
NOT_FIGURES = re.compile(
    r"`[^`]*`"
    r"|\d{4}-\d{2}-\d{2}(?:T[\d:.]+Z?)?"
    r"|GPU-[0-9a-f]+"
    r"|\bcommit [0-9a-f]{7,}\b|\b[0-9a-f]{7,40}\^?(?=[ ,)])"
    r"|\bsections? \d+(?:\s*(?:and|,)\s*\d+)*"
    r"|\b(?:issue|item|run|runs) \d+\b"
    r"|\d+(?:st|nd|rd|th)\b"
    r"|\b\d+³"
    r"|\b\d+ cores\b|\bRFC \d+|\b\d+[kM]\b"
    r"|\b[Gg]oal\b[^;)]*"
)
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def number(text: str) -> float:
    return float(text.replace(",", ""))


def figures_of(text: str) -> list[str]:
    return FIGURE.findall(NOT_FIGURES.sub(" ", text))


def text_of(cited: str) -> str:
    """A cited file's text: the working tree's, or a commit's for `PATH@COMMIT`."""
    path, _, commit = cited.partition("@")
    if not commit:
        return (ROOT / path).read_text(encoding="utf-8")
    shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0 and _shallow():
        pytest.skip(f"this clone is shallow and holds no commit {commit}: a full clone checks {path}")
    assert shown.returncode == 0, f"git holds no {path} at {commit}: {shown.stderr.strip()}"
    return shown.stdout


def _shallow() -> bool:
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    return shallow.stdout.strip() == "true"


def numbers_in(texts: list[str]) -> set[float]:
    held = set()
    for text in texts:
        held |= {number(found) for found in FIGURE.findall(text)}
    return held


def citations() -> list[tuple[str, list[str], str]]:
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in CITATION.finditer(doc.read_text(encoding="utf-8")):
            paths = [path.strip() for path in match["paths"].split(",")]
            found.append((doc.name, paths, match["scope"]))
    return found


@pytest.mark.parametrize(
    "doc, paths, scope", citations(), ids=lambda value: value[:40] if isinstance(value, str) else None
)
def test_every_cited_figure_is_in_the_file_it_cites(doc, paths, scope):
    missing_files = [path for path in paths if "@" not in path and not (ROOT / path).is_file()]
    assert not missing_files, f"{doc} cites a file that is not there: {missing_files}"
    held = numbers_in([text_of(path) for path in paths])
    missing = [figure for figure in figures_of(scope) if number(figure) not in held]
    assert not missing, f"{doc}: {missing} are not in {paths}:\n{scope[:300]}"


def test_the_checker_finds_a_figure_the_file_does_not_hold():
    held = numbers_in(["measured 568 targets in 839 s\n"])
    quoted = "568 targets in 840 s on GPU-e0878895 (2026-12-04), section 4"
    assert [figure for figure in figures_of(quoted) if number(figure) not in held] == ["840"]


def test_a_file_is_read_as_the_commit_holds_it():
    """pages.md as commit af50ec9 wrote it (floor 702 requests/s), which a later run replaced."""
    assert "| floor | 702 |" in text_of("bench/results/pages.md@af50ec9")
    assert "| floor | 702 |" not in text_of("bench/results/pages.md")


def test_the_docs_cite_files():
    assert len(citations()) >= 5


# docs/performance.md, "Where the goals stand": each lettered column is one run's log.
GOAL_RUNS = {
    "A": "run-bundled-1M-before-vacuum.log",
    "B": "run-bundled-1M-pages-after-vacuum.log",
    "D": "run-bundled-1M-D-quiet-fresh-build.log",
    "E": "run-bundled-1M-E-redis-client.log",
}


def log_table(name: str, heading: str, column: str) -> dict[str, str]:
    """One column of a table of a bench log, by page ("run page, cache off" for "run page (cache off)")."""
    text = (ROOT / "bench" / "results" / name).read_text(encoding="utf-8")
    lines = text[text.index(heading) :].split("\n\n", 2)[1].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    at = header.index(column)
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0].replace(" (cache off)", ", cache off"): row[at] for row in cells}


def doc_table(marker: str) -> tuple[list[str], dict[str, list[str]]]:
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    lines = text[text.index(f"<!-- {marker}:") :].split("\n\n", 1)[0].splitlines()[1:]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")][1:]
    rows = {}
    for line in lines[2:]:
        page, *cells = (cell.strip().strip("*") for cell in line.strip("|").split("|"))
        rows[page] = cells
    return header, rows


def test_the_goals_pages_table_is_each_runs_log():
    header, rows = doc_table("goals-pages")
    for at, title in enumerate(header):
        name = GOAL_RUNS[title[0]]
        share = log_table(name, "### 1. Pages", "% of floor rps")
        floor = log_table(name, "### 1. Pages", "rps")["floor"]
        assert f"floor {floor}" in title, (title, floor)
        assert {page: cells[at] for page, cells in rows.items()} == {page: share[page] for page in rows}, (
            title
        )


def test_the_goals_scale_table_is_each_runs_log():
    header, rows = doc_table("goals-scale")
    for at, title in enumerate(header):
        ratio = log_table(GOAL_RUNS[title[0]], "### 2. Scale", "1M vs bundled")
        assert {page: cells[at] for page, cells in rows.items()} == {page: ratio[page] for page in rows}, (
            title
        )


# docs/performance.md, "Steady under sustained load": each run's column is its bench/sustained.py file.
SUSTAINED_PAGES = {
    "home": "home, anonymous",
    "search": "search, anonymous",
    "run page": "run page, anonymous",
    "kernel page": "kernel page, anonymous",
    "largest kernel page": "largest kernel page, anonymous",
    "compare page": "compare page, anonymous",
    "changes page": "changes page, anonymous",
    "API run list": "api runs?kernel=, anonymous",
    "run page, contributor": "run page, contributor",
    "run page, moderator": "run page, moderator",
}


def sustained_column(result: dict) -> dict[str, str]:
    """What the doc's table says of one run, row by row, as its results file gives it."""
    load, wrk = result["load"], result["load_wrk"]
    anonymous, moderator = wrk["anonymous pages (-c6)"], wrk["moderator run pages (-c2)"]
    before = {row["page"]: row for row in result["rows"]}
    after = {row["page"]: row for row in result["after"]}
    column = {
        "seconds counted / without a served request": (
            f"{load['seconds counted']} / **{load['seconds with no request served']}**"
        ),
        "fewest and median served in a second": (
            f"{load['fewest served in a second']}, {load['median served a second']}"
        ),
        "requests (anonymous, moderator), errors, worker boots": (
            f"{anonymous['requests']:,} + {moderator['requests']:,}, "
            f"{anonymous['errors'] + moderator['errors']}, {load['worker boots']}"
        ),
        "p99 under the load (anonymous, moderator)": (
            f"{anonymous['p99_ms']:.0f} ms, {moderator['p99_ms']:.0f} ms"
        ),
        "floor, requests a second (before, after)": (
            f"{before['floor']['rps']:,.0f}, {after['floor']['rps']:,.0f}"
        ),
    }
    for label, page in SUSTAINED_PAGES.items():
        column[label] = f"{before[page]['% of floor rps']:.1f}%, {after[page]['% of floor rps']:.1f}%"
    return column


def test_the_sustained_load_table_is_each_runs_results_file():
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    start = text.index("| | run 1 (")
    lines = text[start : text.index("\n\n", start)].splitlines()
    rows = {}
    for line in lines[2:]:
        label, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        rows[re.sub(r" \((?:goal \d+%|\d+ kB)\)$", "", label)] = cells
    files = [re.search(r"`bench/results/([\w-]+)\.\*`", cell)[1] for cell in rows.pop("files")]
    assert files
    for at, name in enumerate(files):
        result = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text())
        expected = sustained_column(result)
        assert {label: cells[at] for label, cells in rows.items()} == expected, name
        kilobytes = round(result["largest_kernel_page"]["bytes"] / 1000)
        assert f"| largest kernel page ({kilobytes} kB) |" in text


def three_figures(value: float) -> str:
    return f"{value:#.3g}".rstrip(".")


def test_the_kernel_page_ab_table_is_its_raw_lines():
    """docs/performance.md, "Fix: the kernel page reads a bounded amount": every kernel page in-process,
    before and after in two alternated rounds, from bench/results/kernel_page_ab.txt."""
    lines = (ROOT / "bench" / "results" / "kernel_page_ab.txt").read_text().splitlines()
    measured = {}
    for line in lines:
        database, round_, side, figures = line.split(" ", 3)
        size = "100k" if database.endswith("_100k") else "bundled"
        measured[size, side, int(round_)] = json.loads(figures)
    ms = {key: figures["median_ms"] for key, figures in measured.items()}

    def cell(size, side):
        return ", ".join(
            f"{three_figures(ms[size, side, n])} ({measured[size, side, n]['median_sql_ms']:.0f})"
            for n in (1, 2)
        )

    expected = [
        f"| {size} | {cell(size, 'before')} | {cell(size, 'after')} | "
        + ", ".join(f"{ms[size, 'after', n] / ms[size, 'before', n]:.2f}" for n in (1, 2))
        + " |"
        for size in ("bundled", "100k")
    ]
    growth = {
        side: ", ".join(f"{ms['100k', side, n] / ms['bundled', side, n]:.2f}" for n in (1, 2))
        for side in ("before", "after")
    }
    expected.append(f"| 100k / bundled | {growth['before']} | {growth['after']} | |")
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    table = text[text.index("<!-- kernel-page-ab:") :].split("\n\n", 1)[0].splitlines()[3:]
    assert table == expected


def test_the_kernel_page_sort_table_is_its_raw_lines():
    """docs/performance.md, "Fix: the kernel page sorts and groups on the run's own columns": the whole
    page in process, six alternated rounds, from bench/results/kernel_page_sort_ab.txt."""
    rounds: dict[int, dict] = {}
    for line in (ROOT / "bench" / "results" / "kernel_page_sort_ab.txt").read_text().splitlines():
        found = re.match(r"(\d) (ki_perf_kp\w*) (before|after) ([\d.]+), [\d.]+, [\d.]+ (\{.*\})$", line)
        if found:
            number_, database, side, load, figures = found.groups()
            size = {"ki_perf_kp": "bundled", "ki_perf_kp_20k": "20k", "ki_perf_kp_100k": "100k"}[database]
            entry = rounds.setdefault(int(number_), {"loads": [], "sizes": []})
            entry["loads"].append(float(load))
            entry[size, side] = json.loads(figures)
            if size not in entry["sizes"]:
                entry["sizes"].append(size)
    expected = []
    for number_, entry in sorted(rounds.items()):
        label = f"{number_}, vacuumed" if number_ >= 3 else str(number_)
        loads = f"{min(entry['loads']):.1f}–{max(entry['loads']):.1f}"
        sides = [
            " / ".join(
                f"{three_figures(entry[size, side]['median_ms'])} ({entry[size, side]['median_sql_ms']:.1f})"
                for size in entry["sizes"]
            )
            for side in ("before", "after")
        ]
        expected.append(f"| {label} | {' / '.join(entry['sizes'])} | {loads} | {sides[0]} | {sides[1]} |")
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    table = text[text.index("<!-- kernel-page-sort-ab:") :].split("\n\n", 1)[0].splitlines()[3:]
    assert table == expected
