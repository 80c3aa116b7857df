"""WhiteNoise's compressed manifest storage, compressing only what changed since the last
collectstatic.

WhiteNoise writes a Brotli and a gzip copy of all ~330 compressible static files (Swagger UI and
ReDoc are most of the 39 MB) on every collectstatic, changed or not: 44 s of CPU on this project,
the same again when nothing changed (2026-12-05, 2-core shared machine). Its compressor stamps
each copy with its source's modification time, and collectstatic leaves an unchanged source (and
a hashed name, whose content its name fixes) untouched, so a copy whose time equals its source's
is that source compressed: it is kept, and only new or changed files are compressed again.
Source maps are not compressed at all (WHITENOISE_SKIP_COMPRESS_EXTENSIONS in the settings).
`scripts/prod.py up` runs collectstatic at every start, and the test suite's production-shape
stacks do too.
"""

import os

from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage


class IncrementalCompressor(Compressor):
    def compress(self, path):
        mtime = os.stat(path).st_mtime
        suffixes = [suffix for suffix, used in ((".br", self.use_brotli), (".gz", self.use_gzip)) if used]
        copies = [path + suffix for suffix in suffixes]
        if copies and all(_same_time(copy, mtime) for copy in copies):
            return copies
        return super().compress(path)


def _same_time(path: str, mtime: float) -> bool:
    try:
        return abs(os.stat(path).st_mtime - mtime) < 1e-3
    except FileNotFoundError:
        return False


class IncrementalCompressedManifestStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def create_compressor(self, **kwargs):
        return IncrementalCompressor(**kwargs)
