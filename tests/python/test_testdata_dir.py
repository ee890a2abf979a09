"""The generated test data's fallback folder lives in the shared temp
folder, where other local users can create names first: a planted symlink,
a folder of another user's (with fixtures of their choosing) or one open
to all is refused, never read or written through.  Scratch files of the
fixture builders go into private folders, not names mktemp hands out."""
import os
import stat
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as C  # noqa: E402
import format_fixtures as F  # noqa: E402


@pytest.fixture
def tmpdir_only(tmp_path, monkeypatch):
    monkeypatch.delenv("CF_TEST_DATA", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_own_private_folder_is_made_and_used(tmpdir_only):
    root = C.testdata_root()
    assert os.path.dirname(root) == str(tmpdir_only)
    st = os.lstat(root)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0
    assert C.testdata_root() == root           # a second call reuses it
    assert F.default_dir().startswith(root)


def test_planted_folders_are_refused(tmpdir_only):
    name = tmpdir_only / ("cogfeed-testdata-%d" % os.getuid())
    # a symlink to a folder of the attacker's choosing
    target = tmpdir_only / "elsewhere"
    target.mkdir()
    name.symlink_to(target)
    with pytest.raises(RuntimeError, match="not a private folder"):
        C.testdata_root()
    name.unlink()
    # a folder anyone may write to
    name.mkdir()
    os.chmod(name, 0o777)
    with pytest.raises(RuntimeError, match="not a private folder"):
        C.testdata_root()
    os.chmod(name, 0o700)
    if os.getuid() == 0:
        # another user's folder (as root: give it to nobody)
        os.chown(name, 65534, 65534)
        with pytest.raises(RuntimeError, match="not a private folder"):
            C.testdata_root()
        os.chown(name, 0, 0)
    assert C.testdata_root() == str(name)


def test_scratch_files_are_private_and_removed(tmp_path):
    with F.scratch_tif(str(tmp_path)) as p:
        d = os.path.dirname(p)
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700
        open(p, "wb").write(b"x")
    assert not os.path.exists(d)
