"""The reproduction kit: the harness handed to contributors as a pip-installable package.

`build.py` (the site's side) packages the harness modules of `registry/reruns/harness/` with
`cli.py`, `result.py` and the in-tree build backend `backend.py` into one source distribution,
`kernelindex-kit-<version>.tar.gz`, served at /kit/. `cli.py` and `backend.py` run only inside the
installed kit; `result.py` (the result file's format and its digest) is shared by the kit, which
writes the file, and the site, which checks it on arrival. docs/reproduce.md says how it is used.
"""
