"""Azurite's Blob service on 127.0.0.1, with the fixtures uploaded.

Azurite (npm, installed with `npm install --prefix tests/servers`) speaks
the Azure Blob REST protocol and checks Shared Key and SAS signatures of its
development account devstoreaccount1, whose key is public and well known.
Uploads here are Shared Key signed PUTs written with hashlib/hmac only, so
the helper shares no code with cogfeed's signer; SAS tokens are service SAS
(version 2021-08-06) signed with the same key.

    with Azurite() as az:
        az.create_container("cogs")
        az.put_blob("cogs", "a.tif", open(path, "rb").read())
        sas = az.sas("cogs", "a.tif")            # read-only, 1 hour
        env = {"AZURE_STORAGE_CONNECTION_STRING": az.connection_string()}
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import http.client
import os
import shutil
import subprocess
import tempfile
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import die_with_parent, free_port, stop_process, wait_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ACCOUNT = "devstoreaccount1"
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
       "KBHBeksoGMGw==")
VERSION = "2021-08-06"


def azurite_bin() -> str:
    p = os.path.join(HERE, "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(p):
        raise RuntimeError(f"{p} missing: run npm install --prefix {HERE}")
    return p


def _sign(key_b64: str, text: str) -> str:
    mac = hmac.new(base64.b64decode(key_b64), text.encode("utf-8"), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def _httpdate() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")


class Azurite:
    """azurite-blob as a context manager; see the module docstring."""

    def __init__(self, port: int = 0, location: str | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        self._tmp = None if location else tempfile.mkdtemp(prefix="azurite-")
        self.location = location or self._tmp
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Azurite":
        if self.proc and self.proc.poll() is None:
            return self
        node = shutil.which("node") or "node"
        self.proc = subprocess.Popen(
            [node, azurite_bin(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", self.location, "--silent", "--skipApiVersionCheck", "--loose"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        if wait_port(self.port, self.proc, 60):
            return self
        rc = self.proc.poll()
        self.stop()
        if rc is not None:
            raise RuntimeError(f"azurite exited with {rc}")
        raise RuntimeError("azurite did not start within 60 s")

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> "Azurite":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- Shared Key requests (independent of cogfeed's signer) ----------

    def _request(self, method: str, path: str, query: dict[str, str] | None = None,
                 body: bytes = b"", headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """One Shared Key signed request; path is /container[/blob], not
        yet encoded."""
        query = query or {}
        url_path = f"/{ACCOUNT}" + urllib.parse.quote(path, safe="/~")
        h = {"x-ms-date": _httpdate(), "x-ms-version": VERSION}
        h.update(headers or {})
        ms = sorted((k.lower(), v) for k, v in h.items() if k.lower().startswith("x-ms-"))
        std = {k.lower(): v for k, v in h.items()}
        length = str(len(body)) if body else ""
        sts = "\n".join([
            method, std.get("content-encoding", ""), std.get("content-language", ""),
            length, std.get("content-md5", ""), std.get("content-type", ""), "",
            std.get("if-modified-since", ""), std.get("if-match", ""),
            std.get("if-none-match", ""), std.get("if-unmodified-since", ""),
            std.get("range", "")]) + "\n"
        sts += "".join(f"{k}:{v}\n" for k, v in ms)
        # Path-style (emulator) resource: the account appears twice.
        sts += f"/{ACCOUNT}{url_path}"
        for k in sorted(query):
            sts += f"\n{k.lower()}:{query[k]}"
        h["Authorization"] = f"SharedKey {ACCOUNT}:{_sign(KEY, sts)}"
        h["Content-Length"] = str(len(body))
        target = url_path + ("?" + urllib.parse.urlencode(query) if query else "")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, target, body=body, headers=h)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def create_container(self, name: str) -> None:
        st, body = self._request("PUT", f"/{name}", {"restype": "container"})
        if st not in (201, 409):
            raise RuntimeError(f"create container {name}: HTTP {st}: {body[:300]!r}")

    def put_blob(self, container: str, name: str, data: bytes) -> None:
        st, body = self._request("PUT", f"/{container}/{name}", body=data,
                                 headers={"x-ms-blob-type": "BlockBlob",
                                          "Content-Type": "application/octet-stream"})
        if st != 201:
            raise RuntimeError(f"put {container}/{name}: HTTP {st}: {body[:300]!r}")

    def put_file(self, container: str, name: str, path: str) -> None:
        with open(path, "rb") as f:
            self.put_blob(container, name, f.read())

    # ---- credentials for cogfeed -----------------------------------------

    def sas(self, container: str, blob: str | None = None, permissions: str = "r",
            expiry: _dt.datetime | None = None, key: str = KEY) -> str:
        """A service SAS (without leading '?') for a blob (sr=b) or the whole
        container (sr=c).  `expiry` defaults to one hour from now."""
        if expiry is None:
            expiry = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(hours=1)
        se = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
        sr = "b" if blob else "c"
        canon = f"/blob/{ACCOUNT}/{container}" + (f"/{blob}" if blob else "")
        # Field order of the 2020-12-06+ service SAS string-to-sign:
        # sp, st, se, resource, si, sip, spr, sv, sr, snapshot, ses,
        # rscc, rscd, rsce, rscl, rsct.
        sts = "\n".join([permissions, "", se, canon, "", "", "", VERSION, sr,
                         "", "", "", "", "", "", ""])
        q = {"sv": VERSION, "sr": sr, "sp": permissions, "se": se, "sig": _sign(key, sts)}
        return urllib.parse.urlencode(q)

    def connection_string(self, key: str = KEY) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
                f"BlobEndpoint={self.endpoint};")
