"""A search against a real STAC API (issue 27): stac-fastapi with the
pgstac backend (PostgreSQL 15 + PostGIS from Debian; pypgstac and
stac-fastapi-pgstac from PyPI), loaded with the STAC fixture's items
(their files on the test nginx), started on 127.0.0.1 by the test and
stopped after it.  A pystac-client
search by bbox, datetime and eo:cloud_cover goes straight into a Loader;
the API's answer is the one Items.search gives on the same items, and the
pixels are the files'.

PostgreSQL does not run as root: as root, the test runs it as the
`postgres` user Debian's package makes, in a folder of its own."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stac_fixture as fx  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed import stac  # noqa: E402
from cogfeed.tools.servers import Nginx, free_port, stop_process, wait_port  # noqa: E402

PG_BIN = "/usr/lib/postgresql/15/bin"
pytest.importorskip("pystac_client")
pytest.importorskip("pypgstac")


def _as_postgres(cmd):
    """cmd run as the postgres user when this process is root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    if not os.path.exists(os.path.join(PG_BIN, "initdb")):
        pytest.fail("PostgreSQL 15 is missing (./run.sh installs postgresql-15 and "
                    "postgresql-15-postgis-3)")
    cat = fx.make(str(tmp_path_factory.mktemp("stacapi")))
    # The server's own folder, which the postgres user can enter.
    pgdir = tempfile.mkdtemp(prefix="cf-pgstac-")
    os.chmod(pgdir, 0o755)
    if os.geteuid() == 0:
        shutil.chown(pgdir, "postgres")
    procs = []
    web_files = Nginx(cat["root"])
    web_files.start()
    try:
        data = os.path.join(pgdir, "data")
        subprocess.run(_as_postgres([os.path.join(PG_BIN, "initdb"), "-D", data, "-A",
                                     "trust", "-U", "postgres", "--no-sync"]),
                       check=True, capture_output=True)
        port = free_port()
        pg = subprocess.Popen(_as_postgres([os.path.join(PG_BIN, "postgres"), "-D", data,
                                            "-k", pgdir, "-h", "127.0.0.1", "-p", str(port),
                                            "-c", "fsync=off"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(pg)
        assert wait_port(port, pg, timeout=30), "postgres did not start"
        dsn = "postgresql://postgres@127.0.0.1:%d/postgres" % port
        pypgstac = [sys.executable, "-m", "pypgstac.pypgstac"]
        # pgstac's schema; then the collection and the items, their hrefs
        # on the test nginx (a remote document naming local files is
        # refused: docs/remote.md).
        for _ in range(20):  # the server may accept before it answers
            p = subprocess.run(pypgstac + ["migrate", "--dsn", dsn], capture_output=True,
                               text=True)
            if p.returncode == 0:
                break
            time.sleep(0.5)
        assert p.returncode == 0, p.stderr[-2000:]
        col = json.load(open(cat["collection"]))
        col["links"] = []
        items = []
        for sid in fx.SCENES:
            d = json.load(open(cat["items"][sid[0]]))
            d["collection"] = col["id"]
            d["links"] = []
            base = os.path.dirname(cat["items"][sid[0]])
            for a in d["assets"].values():
                path = os.path.normpath(os.path.join(base, a["href"]))
                a["href"] = web_files.url(os.path.relpath(path, cat["root"]))
            items.append(d)
        for kind, docs in (("collections", [col]), ("items", items)):
            path = os.path.join(pgdir, kind + ".ndjson")
            with open(path, "w") as f:
                f.write("\n".join(json.dumps(x) for x in docs) + "\n")
            p = subprocess.run(pypgstac + ["load", kind, path, "--dsn", dsn, "--method",
                                           "insert"], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]
        env = dict(os.environ, PGUSER="postgres", PGPASSWORD="unused", PGHOST="127.0.0.1",
                   PGPORT=str(port), PGDATABASE="postgres")
        web = free_port()
        app = subprocess.Popen([sys.executable, "-m", "uvicorn",
                                "stac_fastapi.pgstac.app:create_app", "--factory", "--host",
                                "127.0.0.1", "--port", str(web), "--log-level", "warning"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(app)
        assert wait_port(web, app, timeout=60), "stac-fastapi did not start"
        yield {"url": "http://127.0.0.1:%d" % web, "items": items, "cat": cat}
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        web_files.stop()
        shutil.rmtree(pgdir, ignore_errors=True)


def test_search_by_bbox_datetime_and_cloud_cover_into_a_loader(api):
    from pystac_client import Client
    client = Client.open(api["url"])
    bbox = [14.9, 44.9, 15.2, 45.2]            # over the UTM 33N scenes
    when = "2024-05-01/2024-05-31"
    search = client.search(collections=["synth"], bbox=bbox, datetime=when,
                           query={"eo:cloud_cover": {"lt": 15}})
    got = stac.items(search)
    # The API's answer is Items.search's on the same items.
    local = stac.items(api["items"]).search(bbox=bbox, datetime=when, max_cloud_cover=14.999)
    assert sorted(i.id for i in got) == sorted(i.id for i in local)
    assert {i.id for i in got} == {"s33-a", "s33-noproj"}
    sel = got.select(["red", "nir"])
    with cogfeed.Loader(sel, patch_size=128, batch_size=4, sampler="grid") as ld:
        b = next(iter(ld))
    ids = [i.id for i in got]
    for k, (f, x, y, w, h) in enumerate(b["windows"]):
        arr = api["cat"]["arrays"][ids[f]]            # blue, green, red, nir
        np.testing.assert_array_equal(b["image"][k, 0], arr[2, y:y + h, x:x + w])
        np.testing.assert_array_equal(b["image"][k, 1], arr[3, y:y + h, x:x + w])


def test_search_by_time_and_near_the_antimeridian(api):
    """(A bbox that crosses 180 -- west > east -- finds nothing through
    pgstac 0.10 here; Items.search takes it: test_stac.py.)"""
    from pystac_client import Client
    client = Client.open(api["url"])
    got = stac.items(client.search(collections=["synth"], bbox=[175, 60, 180, 70]))
    assert [i.id for i in got] == ["s60-am"]
    got = stac.items(client.search(collections=["synth"], datetime="2024-06-01/.."))
    assert sorted(i.id for i in got) == ["s33-b", "s60-am"]
    assert sorted(i.id for i in got) == sorted(
        i.id for i in stac.items(api["items"]).search(datetime="2024-06-01/.."))
