"""The commands of README.md and docs/ work as written.

- Every `manage.py ...` line in README.md and docs/ is accepted by that command's own argument
  parser (placeholders filled in as a reader would).
- Every fenced block of docs/ says where it runs or that it is no command (the convention:
  tests/docs/commands.py), and the repository files its commands name exist.
- The README walked on a fresh copy of the repository, in order: `python3 scripts/dev.py run`
  serves the site; the next steps' blocks run as written and exit 0; signing up prints the
  confirmation link in the run command's output, as the README says. Then, on the same copy and
  site, every `{host=dev}` block of docs/*.md runs as written, each file's blocks in order, and
  exits 0, and so does every `gpu` and `prod` block that says no `not-run` (a CPU path). Last,
  SIGTERM to the run command stops its children, so the port is free again.
- Every `{host=postgres}` block runs as written, in file order, in a fresh copy, on a database of
  the test's own that `DATABASE_URL` names, and exits 0; every `{host=pypi}` block likewise, with
  pip's cache in a temporary folder. A block no test runs says why in its fence (`not-run="..."`),
  and a block a test runs holds no placeholder for the reader to replace.
- The PostgreSQL section's `createdb` line creates a database that the `export` lines then reach.
- The test command runs pytest with the arguments given.
"""

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.management import get_commands, load_command_class

from tests.docs.commands import (
    HOSTS,
    NOT_A_COMMAND,
    ROOT,
    Block,
    arguments,
    block_lines,
    blocks,
    doc_files,
    docs_files,
    manage_invocations,
    sections,
    shell_lines,
)

README = (ROOT / "README.md").read_text()
PORT = 8241
VENV = (ROOT / ".venv").resolve()
PG = "postgres://postgres@127.0.0.1:5432"
README_DATABASE = "ki_people_readme"


def every_invocation():
    for path in doc_files():
        for name, args, line in manage_invocations(path.read_text()):
            yield pytest.param(name, args, id=f"{path.relative_to(ROOT)}: {line[:70]}")


def test_the_readme_is_read_in_five_minutes():
    assert len(README.splitlines()) <= 200
    assert "![" in README and "docs/screenshots/" in README
    assert "python3 scripts/dev.py run" in README and "python3 scripts/dev.py test" in README
    for line in README.splitlines():
        assert not re.search(r"(?<![./\w])python manage\.py", line), line


def test_every_doc_the_readme_and_index_name_exists():
    for text in (README, (ROOT / "docs" / "index.md").read_text()):
        for name in re.findall(r"`((?:docs/)?[\w./-]+\.md)`", text):
            path = ROOT / name if name.startswith("docs/") or "/" not in name else ROOT / "docs" / name
            if not path.exists():
                path = ROOT / "docs" / name
            assert path.exists(), name


@pytest.mark.parametrize(("name", "args"), list(every_invocation()))
def test_every_manage_py_line_is_accepted_by_its_commands_parser(name, args):
    commands = get_commands()
    assert name in commands, f"no management command {name!r}"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    parser.parse_args(args)  # a CommandError names the bad argument


def test_a_wrong_argument_is_caught_by_that_check():
    name, args, _ = manage_invocations(
        "```sh\n.venv/bin/python manage.py moderator_add admin --no-such-flag\n```"
    )[0]
    parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
    with pytest.raises(Exception, match="no-such-flag"):
        parser.parse_args(args)


def every_block() -> list[Block]:
    return [block for path in docs_files() for block in blocks(path)]


# Which test runs a block of each host that does not say `not-run`: the README walk's copy (a CPU
# machine after the README's two commands), the PostgreSQL test below, or the PyPI test below.
RUNS_ON = {"dev": "walk", "gpu": "walk", "prod": "walk", "postgres": "postgres", "pypi": "pypi"}
# What a reader would have to replace or choose before pasting: <something>, [--optional ...].
PLACEHOLDER = re.compile(r"<[\w .-]+>|\[--[\w-]+[^\]]*\]")


def blocks_run_by(runner: str) -> list[Block]:
    return [
        block for block in every_block() if block.host and not block.not_run and RUNS_ON[block.host] == runner
    ]


def walked_blocks_by_file() -> list:
    by_file = {}
    for block in blocks_run_by("walk"):
        by_file.setdefault(block.path, []).append(block)
    return [pytest.param(found, id=str(path.relative_to(ROOT))) for path, found in by_file.items()]


REPOSITORY_FILE = re.compile(r"(?<![\w./-])((?:bench|scripts)/[\w/.-]+\.py|manage\.py)\b")


def test_every_block_of_the_docs_says_where_it_runs():
    unclassified = [f"{block.where}: ```{block.language}" for block in every_block() if not block.classified]
    assert unclassified == [], (
        "a fenced block of docs/ needs ```text (no command) or ```sh {host=NAME}, NAME one of "
        f"{sorted(HOSTS)} (tests/docs/commands.py): {unclassified}"
    )


def test_every_host_has_a_test_that_runs_its_blocks():
    assert set(RUNS_ON) == set(HOSTS)


def test_a_block_no_test_runs_says_why_and_a_block_a_test_runs_holds_no_placeholder():
    for block in every_block():
        if block.host is None:
            continue
        if block.not_run is not None:
            assert block.host != "dev" and len(block.not_run.split()) >= 2, (
                f"{block.where}: {block.not_run!r}"
            )
            continue
        for line in block_lines(block):
            assert not PLACEHOLDER.search(line), f"{block.where}: {line}"


SCRIPT_LINE = re.compile(r"(?:^|\s)\S*python3?\s+((?:bench|scripts)/[\w/.-]+\.py)(.*)")
# Runs a script up to its argument parser and stops there: 0 where the arguments parse.
PARSE_ONLY = """
import argparse, runpy, sys
parse = argparse.ArgumentParser.parse_args
def parse_and_stop(self, *args, **kwargs):
    parse(self, *args, **kwargs)
    raise SystemExit(0)
argparse.ArgumentParser.parse_args = parse_and_stop
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
raise SystemExit(3)  # finished without parsing its arguments
"""


def script_lines_of_blocks_no_test_runs() -> list:
    found = []
    for block in every_block():
        for line in block_lines(block) if block.not_run else []:
            match = SCRIPT_LINE.search(line)
            if match and "argparse" in (ROOT / match.group(1)).read_text():
                found.append(
                    pytest.param(match.group(1), arguments(match.group(2)), id=f"{block.where}: {line[:60]}")
                )
    return found


@pytest.mark.parametrize(("script", "args"), script_lines_of_blocks_no_test_runs())
def test_the_scripts_in_blocks_no_test_runs_accept_their_arguments(script, args):
    """A benchmark too long to run here still has its arguments checked by its own parser."""
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, script, *args],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script} {args}: {done.stderr[-2000:]}"


PYTEST_LINE = re.compile(r"(?:^|\s)\S*python3?\s+-m\s+pytest\b(.*)")


def pytest_lines_of_blocks_no_test_runs() -> dict[str, list[str]]:
    """Each `python -m pytest ...` line of a block no test runs, by where it is: its arguments."""
    found = {}
    for block in every_block():
        for line in block_lines(block) if block.not_run else []:
            match = PYTEST_LINE.search(line)
            if match:
                found[f"{block.where}: {line[-60:]}"] = arguments(match.group(1))
    return found


def test_the_pytest_lines_in_blocks_no_test_runs_collect_their_tests():
    """A suite too long to run here (the fault and security tests) is still collected as written:
    its paths exist, its options parse and its modules import. One collection for all the lines
    (each costs Django's set-up); pytest exits non-zero on a missing path or an unknown option."""
    lines = pytest_lines_of_blocks_no_test_runs()
    assert lines
    args = [arg for line_args in lines.values() for arg in line_args]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{list(lines)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def test_a_wrong_script_argument_is_caught_by_that_check():
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, "bench/run.py", "--no-such-flag"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "no-such-flag" in done.stderr


def test_a_block_marked_text_holds_no_command():
    for block in every_block():
        if block.language == NOT_A_COMMAND:
            for line in block.text.splitlines():
                assert not re.match(r"\s*(\.venv/bin/)?python3? ", line), f"{block.where}: {line}"


def test_the_files_the_commands_of_the_docs_name_exist():
    for block in every_block():
        if block.host is None:
            continue
        for line in block_lines(block):
            if "/srv/" in line:  # a production host's own checkout
                continue
            for name in REPOSITORY_FILE.findall(line):
                assert (ROOT / name).is_file(), f"{block.where}: {name}"


def test_an_unmarked_block_is_unclassified(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```sh\n.venv/bin/python manage.py check\n```\n\n```sh {host=moon}\nls\n```\n")
    assert [block.classified for block in blocks(page)] == [False, False]
    page.write_text("```sh {host=dev}\nls\n```\n\n```text\noutput\n```\n")
    assert [(b.host, b.classified) for b in blocks(page)] == [("dev", True), (None, True)]
    page.write_text('```sh {host=gpu not-run="a CUDA card"}\nnvidia-smi\n```\n')
    assert [(b.host, b.classified, b.not_run) for b in blocks(page)] == [("gpu", True, "a CUDA card")]


def test_a_placeholder_is_caught_by_that_check():
    for line in ("backup.py restore var/backups/<file>.dump", "prod.py up [--gpu cpu]"):
        assert PLACEHOLDER.search(line), line
    assert not PLACEHOLDER.search('restore "$(ls -t var/backups/*.dump | head -n 1)" --create')


def fresh_copy(destination: Path) -> Path:
    """The tracked files of this checkout (a fresh clone's state), with this machine's .venv."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    (destination / ".venv").symlink_to(VENV)
    return destination


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    for name in (
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CACHE_URL",
        "KERNELINDEX_VAR_DIR",
        "DEBUG",
        "SECRET_KEY",
    ):
        env.pop(name, None)
    return env


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for(url: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "scripts/dev.py run exited"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(2)
    raise AssertionError(f"{url} did not answer in {seconds} s")


def processes_in(folder: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")).resolve() == folder.resolve():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def sign_up(base: str) -> None:
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/accounts/signup/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = {
        "csrfmiddlewaretoken": token,
        "username": "newcomer",
        "email": "newcomer@example.com",
        "password1": "a-long-password-42!",
        "password2": "a-long-password-42!",
    }
    request = urllib.request.Request(
        f"{base}/accounts/signup/",
        data=urlencode(form).encode(),
        headers={"Referer": f"{base}/accounts/signup/"},
    )
    opener.open(request).read()


class Walk:
    """The README walked on a fresh copy: `scripts/dev.py run` serving it, and its log."""

    def __init__(self, folder: Path):
        self.copy = fresh_copy(folder / "kernelindex")
        self.log_path = folder / "run.log"
        self.log = self.log_path.open("w")
        self.base = f"http://127.0.0.1:{PORT}"
        (run_line,) = shell_lines(sections(README)["Run it"])
        self.next_steps: list[tuple[str, subprocess.CompletedProcess]] = []
        self.runner = subprocess.Popen(
            [*shlex.split(run_line), "--port", str(PORT)],
            cwd=self.copy,
            env=clean_env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def run(self, script: str) -> subprocess.CompletedProcess:
        """A line or block, as a reader pastes it into a second shell in the copy."""
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=self.copy,
            env=clean_env(),
            capture_output=True,
            text=True,
        )

    def stop(self) -> None:
        if self.runner.poll() is None:
            self.runner.send_signal(signal.SIGTERM)
            self.runner.wait(timeout=60)
        self.log.close()


@pytest.fixture(scope="module")
def walk(tmp_path_factory, request):
    if any(item.name == "test_the_pypi_blocks_build_their_wheelhouses" for item in request.session.items):
        request.getfixturevalue("wheelhouses")  # started now, its downloads overlap the walk's set-up
    if not port_free(PORT):
        pytest.skip(f"port {PORT} is busy")
    walk = Walk(tmp_path_factory.mktemp("readme"))
    try:
        wait_for(f"{walk.base}/", walk.runner, seconds=420)
        # The README's next steps, in order, in a second shell; the test below reads the outcomes.
        walk.next_steps = [(line, walk.run(line)) for line in shell_lines(sections(README)["Next steps"])]
        yield walk
    finally:
        walk.stop()


def test_the_readme_walked_on_a_fresh_copy(walk):
    assert (walk.copy / ".env").read_text().startswith("#")  # the development .env it writes
    assert walk.next_steps
    for line, done in walk.next_steps:
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    sign_up(walk.base)
    deadline = time.monotonic() + 30
    while "/accounts/confirm-email/" not in walk.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(1)
    assert "/accounts/confirm-email/" in walk.log_path.read_text()


@pytest.mark.parametrize("found", walked_blocks_by_file())
def test_the_dev_blocks_of_the_docs_run_on_the_walked_copy(walk, found):
    """After the README's next steps (its administrator exists), on the same copy and site, so
    a block that writes writes into that copy and its development database only. The `gpu` and
    `prod` blocks that need no CUDA card, root or systemd run here too (their CPU path)."""
    for block in found:
        done = walk.run(block.text)
        assert done.returncode == 0, (
            f"{block.where}\n{block.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


def test_sigterm_to_the_run_command_frees_its_port(walk):
    walk.stop()
    assert walk.runner.returncode is not None
    assert port_free(PORT), "a child of scripts/dev.py run still holds the port"
    time.sleep(1)
    assert processes_in(walk.copy) == []


def psql(database: str, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-qAt", "-c", sql],
        capture_output=True,
        text=True,
    )


@pytest.mark.skipif(shutil.which("createdb") is None, reason="no PostgreSQL client here")
def test_the_postgresql_section_creates_the_database_it_then_uses():
    """Run under this helper's own database name, never the README's shared one."""
    lines = shell_lines(sections(README)["With PostgreSQL and Redis"])
    (createdb,) = [line for line in lines if line.startswith("createdb ")]
    exports = [line for line in lines if line.startswith("export ")]
    assert createdb.split()[-1] == "kernelindex" and any("/kernelindex" in line for line in exports)
    if psql("postgres", "select 1").returncode != 0:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    psql("postgres", f"drop database if exists {README_DATABASE}")
    try:
        created = subprocess.run(
            shlex.split(createdb)[:-1] + [README_DATABASE], capture_output=True, text=True
        )
        assert created.returncode == 0, created.stderr
        script = "\n".join(
            [*(line.replace("/kernelindex", f"/{README_DATABASE}") for line in exports), "export DEBUG=1"]
            + [".venv/bin/python manage.py check --database default"]
        )
        checked = subprocess.run(
            ["bash", "-c", script], cwd=ROOT, env=clean_env(), capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr
    finally:
        psql("postgres", f"drop database if exists {README_DATABASE}")


def test_the_test_command_runs_pytest_with_the_arguments_given(tmp_path):
    copy = fresh_copy(tmp_path / "kernelindex")
    (test_line,) = shell_lines(sections(README)["Test it"])
    env = clean_env()
    done = subprocess.run(
        [
            *shlex.split(test_line),
            "tests/docs/test_commands.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "parser",
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ passed", done.stdout)
    assert (copy / "node_modules" / "axe-core" / "axe.min.js").exists() or shutil.which("npm") is None


def run_blocks(found: list[Block], copy: Path, env: dict, timeout: int) -> None:
    """Each block as a reader pastes it into one shell in the copy, in order; each exits 0."""
    for block in found:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.text],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"{block.where}\n{block.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


DOCS_DATABASE = f"ki_docs_blocks_{os.getpid()}"
PROD_PORT = 8000  # docs/deploy.md's `prod.py up --port 8000`


@pytest.mark.skipif(shutil.which("createdb") is None, reason="no PostgreSQL client here")
def test_the_postgres_blocks_run_on_a_database_of_their_own(tmp_path):
    """In file order: backup.md's dump and restore (into the database's name with `_restored`),
    deploy.md's `prod.py up`, `status` and `down`, then `moderator_add alice` with the settings
    `up` wrote. Before them the test creates the database, migrates it and signs `alice` up; the
    broker keys get a prefix of their own, so the started worker takes no other test's messages."""
    found = blocks_run_by("postgres")
    assert [block.path.name for block in found] == ["backup.md", "backup.md", "deploy.md", "deploy.md"]
    if psql("postgres", "select 1").returncode != 0:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    if not port_free(PROD_PORT):
        pytest.skip(f"port {PROD_PORT} is busy")
    copy = fresh_copy(tmp_path / "kernelindex")
    env = {
        **clean_env(),
        "DATABASE_URL": f"{PG}/{DOCS_DATABASE}",
        "CELERY_BROKER_KEY_PREFIX": f"{DOCS_DATABASE}:",
    }
    databases = (DOCS_DATABASE, f"{DOCS_DATABASE}_restored")
    for name in databases:
        psql("postgres", f"drop database if exists {name} with (force)")
    try:
        set_up = "\n".join(
            [
                f"createdb -h 127.0.0.1 -U postgres {DOCS_DATABASE}",
                "export DEBUG=1",
                ".venv/bin/python manage.py migrate --noinput -v 0",
                '.venv/bin/python manage.py shell -c "from django.contrib.auth.models import User; '
                "User.objects.create_user('alice', 'alice@example.org', 'a-long-password-42!')\"",
            ]
        )
        done = subprocess.run(["bash", "-e", "-c", set_up], cwd=copy, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        run_blocks(found, copy, env, timeout=300)
        assert psql(f"{DOCS_DATABASE}_restored", "select count(*) from auth_user").stdout.strip() == "1"
        moderators = "select count(*) from auth_user_groups g join auth_user u on u.id = g.user_id where u.username = 'alice'"
        assert psql(DOCS_DATABASE, moderators).stdout.strip() == "1"
    finally:
        subprocess.run(
            [".venv/bin/python", "scripts/prod.py", "down"],
            cwd=copy,
            env=env,
            capture_output=True,
            timeout=120,
        )
        for name in databases:
            psql("postgres", f"drop database if exists {name} with (force)")


def pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10) as response:
            return response.status == 200
    except OSError:
        return False


class Wheelhouses:
    """The pypi blocks, run in file order in a fresh copy of their own, with pip's cache in a
    temporary folder (nothing on this machine outside it changes), in a thread started by the README
    walk's fixture where the PyPI test is to run too: the downloads (a minute or two, mostly waiting
    on PyPI) overlap the walk's set-up rather than adding to it."""

    def __init__(self, folder: Path):
        self.folder, self.copy, self.skipped, self.error = folder, folder / "kernelindex", "", None
        self.thread = threading.Thread(target=self._build, daemon=True)
        self.thread.start()

    def _build(self) -> None:
        try:
            if not pypi_reachable():
                self.skipped = "PyPI does not answer"
                return
            fresh_copy(self.copy)
            env = {**clean_env(), "PIP_CACHE_DIR": str(self.folder / "pip-cache")}
            run_blocks(blocks_run_by("pypi"), self.copy, env, timeout=600)
        except BaseException as exc:  # raised again in the test that reads it
            self.error = exc

    def wait(self) -> None:
        self.thread.join(timeout=1200)
        assert not self.thread.is_alive(), "the pypi blocks did not finish in 20 minutes"
        if self.skipped:
            pytest.skip(self.skipped)
        if self.error is not None:
            raise self.error


@pytest.fixture(scope="module")
def wheelhouses(tmp_path_factory):
    return Wheelhouses(tmp_path_factory.mktemp("pypi"))


def test_the_pypi_blocks_build_their_wheelhouses(wheelhouses):
    found = blocks_run_by("pypi")
    assert [block.path.name for block in found] == ["gpu-hosts.md", "reruns.md"]
    wheelhouses.wait()
    for folder in (wheelhouses.copy / ".whl", wheelhouses.copy / "var" / "wheelhouse"):
        assert (folder / "liger_kernel-0.8.5.tar.gz").is_file(), folder
        assert any(folder.glob("Django-*.whl")) or any(folder.glob("django-*.whl")), folder
