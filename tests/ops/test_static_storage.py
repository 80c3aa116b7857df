"""collectstatic compresses only what changed (kernelindex/storage.py): a copy stamped with its
source's time is kept, a changed source is compressed again."""

import gzip
import os

from kernelindex.storage import IncrementalCompressor


def _copies(source, compressor) -> list[str]:
    """The compressed copies WhiteNoise writes: Brotli where the module is installed (locust
    brings it to the test environment), gzip always."""
    return sorted([f"{source}.br"] * compressor.use_brotli + [f"{source}.gz"])


def _write(path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


class TestIncrementalCompressor:
    def test_an_unchanged_file_is_not_compressed_again_and_a_changed_one_is(self, tmp_path):
        source = tmp_path / "app.js"
        _write(source, "var a = 1;\n" * 500, 1_700_000_000)
        compressor = IncrementalCompressor(quiet=True)
        first = sorted(compressor.compress(str(source)))
        assert first == _copies(source, compressor)
        written = {name: os.stat(name).st_ctime_ns for name in first}

        assert sorted(compressor.compress(str(source))) == first
        assert {name: os.stat(name).st_ctime_ns for name in first} == written  # not rewritten

        _write(source, "var b = 2;\n" * 500, 1_700_000_100)
        assert sorted(compressor.compress(str(source))) == first
        if compressor.use_brotli:
            import brotli

            assert brotli.decompress((tmp_path / "app.js.br").read_bytes()) == source.read_bytes()
        assert gzip.decompress((tmp_path / "app.js.gz").read_bytes()) == source.read_bytes()

    def test_a_missing_copy_is_made_again(self, tmp_path):
        source = tmp_path / "style.css"
        _write(source, "body { margin: 0 }\n" * 300, 1_700_000_000)
        compressor = IncrementalCompressor(quiet=True)
        compressor.compress(str(source))
        (tmp_path / "style.css.gz").unlink()
        assert sorted(compressor.compress(str(source))) == _copies(source, compressor)
        assert gzip.decompress((tmp_path / "style.css.gz").read_bytes()) == source.read_bytes()

    def test_the_settings_leave_source_maps_uncompressed_and_scripts_compressed(self, settings):
        """As collectstatic builds its compressor (WHITENOISE_SKIP_COMPRESS_EXTENSIONS): a source
        map, fetched only by developer tools, is not compressed; the script beside it is."""
        compressor = IncrementalCompressor(
            extensions=settings.WHITENOISE_SKIP_COMPRESS_EXTENSIONS, quiet=True
        )
        assert not compressor.should_compress(
            "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js.map"
        )
        assert compressor.should_compress("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
        assert not compressor.should_compress("fonts/font.woff2")  # WhiteNoise's own list is kept
