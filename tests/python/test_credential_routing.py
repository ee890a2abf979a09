"""Where credentials go (issue 15, docs/remote.md "Where credentials go").

A URL list may come from someone hostile.  With credentials for every
store in the environment, a hostile server (tests/servers/hostile.py, which
records every request line and header it receives) must never see one: not
when a URL names it (an Azure look-alike host, plain http to a real
suffix, another account's endpoint), not as the proxy an https request
tunnels through, not as the target of a redirect from the endpoint the
credentials are for.  Each test also checks that the hostile server did
receive the request, so that "saw nothing" means "was sent nothing".

Host names that do not exist (victimacct.blob.core.attacker.example) reach
the hostile server as http_proxy / https_proxy; with mitm it also ends the
TLS tunnel with a certificate the client trusts (ca_file): an attacker who
owns the look-alike domain, or a real Azure account, and a valid
certificate for it.
"""
import base64
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import find_tool  # noqa: E402
import hostile  # noqa: E402

from cogfeed import Status  # noqa: E402

SAS = "sv=2021-08-06&sp=r&sig=SASSECRETSIG%3D"
KEY = base64.b64encode(b"K" * 64).decode()
AWS = {"AWS_ACCESS_KEY_ID": "AKIAHOSTILETESTKEY", "AWS_SECRET_ACCESS_KEY": "AWSSECRETKEY/xyz",
       "AWS_SESSION_TOKEN": "AWSSESSIONSECRET", "AWS_REGION": "us-east-1"}
GCS = {"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.GCSSECRETTOKEN"}
AZ_SAS = {"AZURE_STORAGE_ACCOUNT": "victimacct", "AZURE_STORAGE_SAS_TOKEN": SAS}
AZ_KEY = {"AZURE_STORAGE_ACCOUNT": "victimacct", "AZURE_STORAGE_ACCESS_KEY": KEY}

# Anything of these in what the hostile server saw is a leak.
MARKERS = ["sig=", "SASSECRET", "SharedKey", "Authorization", "AWS4-HMAC",
           "X-Amz-", "AKIAHOSTILE", "AWSSESSIONSECRET", "AWSSECRETKEY",
           "Bearer", "GCSSECRET", KEY[:16]]

CLEAR = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
         "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
         "AWS_NO_SIGN_REQUEST", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_SAS_TOKEN",
         "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_CONNECTION_STRING",
         "GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST", "http_proxy",
         "https_proxy", "HTTPS_PROXY", "HTTP_PROXY", "all_proxy", "ALL_PROXY",
         "no_proxy", "NO_PROXY"]


def env_with(*parts, proxy=None):
    env = {k: v for k, v in os.environ.items() if k not in CLEAR}
    for p in parts:
        env.update(p)
    if proxy:
        env["http_proxy"] = env["https_proxy"] = proxy
    return env


def fetch(url, env, ca_file=None):
    cmd = [find_tool("cf_fetch"), "--opt", "max_retries=0", "--opt",
           "request_timeout_s=10", "--opt", "connect_timeout_s=3"]
    if ca_file:
        cmd += ["--opt", "ca_file=" + ca_file]
    cmd += [url, "head:4096"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def assert_clean(text):
    low = text.lower()
    for m in MARKERS:
        assert m.lower() not in low, "credential %r reached the hostile server:\n%s" % (m, text)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return hostile.make_cert(str(tmp_path_factory.mktemp("hostile")))


# -- the URL names the hostile server ----------------------------------------

@pytest.mark.parametrize("url", [
    # the issue's look-alike, over http
    "http://victimacct.blob.core.attacker.example/c/x.tif",
    # a real Azure suffix, but plain http: anyone on the path reads it
    "http://victimacct.blob.core.windows.net/c/x.tif",
    "http://victimacct.blob.core.windows.net.attacker.example/c/x.tif",
])
@pytest.mark.parametrize("creds", [AZ_SAS, AZ_KEY], ids=["sas", "key"])
def test_plain_http_azure_hosts_get_nothing(url, creds):
    with hostile.Hostile() as h:
        fetch(url, env_with(creds, AWS, GCS, proxy=h.proxy))
        seen = h.seen()
        assert seen and seen[0]["via"] == "proxy" and "victimacct" in seen[0]["line"]
        assert_clean(h.text())


@pytest.mark.parametrize("url,creds", [
    # a look-alike domain the attacker owns, with a valid certificate
    ("https://victimacct.blob.core.attacker.example/c/x.tif", AZ_SAS),
    ("https://victimacct.blob.core.attacker.example/c/x.tif", AZ_KEY),
    # user info: the host curl connects to is attacker.example
    ("https://victimacct.blob.core.windows.net@attacker.example/c/x.tif", AZ_SAS),
    # a real Azure account of the attacker's: not the configured one
    ("https://evilacct.blob.core.windows.net/c/x.tif", AZ_SAS),
    ("https://evilacct.blob.core.windows.net/c/x.tif", AZ_KEY),
    # ... nor any, when no account is configured at all
    ("https://evilacct.blob.core.windows.net/c/x.tif",
     {"AZURE_STORAGE_SAS_TOKEN": SAS, "AZURE_STORAGE_ACCESS_KEY": KEY}),
    # S3 and GCS names in an https URL are plain URLs: never signed
    ("https://bucket.s3.us-east-1.amazonaws.com/k.tif", AZ_SAS),
    ("https://storage.googleapis.com/bucket/k.tif", AZ_SAS),
])
def test_https_look_alikes_get_nothing(cert, url, creds):
    with hostile.Hostile(mitm=True, cert=cert) as h:
        fetch(url, env_with(creds, AWS, GCS, proxy=h.proxy), ca_file=h.ca_file)
        tunnel = [r for r in h.seen() if r["via"] == "tunnel"]
        assert tunnel, h.text()  # the request did reach it
        text = h.text()
        if "@" in url:  # the URL's own user info, sent as curl does
            own = url.split("//", 1)[1].split("@", 1)[0]
            own += "" if ":" in own else ":"
            text = text.replace("Authorization: Basic "
                                + base64.b64encode(own.encode()).decode(), "")
        assert_clean(text)


def test_plain_url_to_the_hostile_server_directly():
    """A plain URL gets no credential from the environment, whatever it
    looks like; its own query (a presigned URL's signature) is its own."""
    with hostile.Hostile() as h:
        url = h.url("victimacct/c/x.tif?X-Amz-Signature=OWNSIG")
        fetch(url, env_with(AZ_SAS, AZ_KEY, AWS, GCS))
        text = h.text()
        assert "OWNSIG" in text
        assert_clean(text.replace("X-Amz-Signature=OWNSIG", ""))


def test_cli_does_not_send_a_sas_to_a_look_alike():
    """The issue's reproduction: cogfeed info on an http look-alike URL
    through http_proxy."""
    exe = os.environ.get("COGFEED_BIN")
    if not exe:
        pytest.skip("COGFEED_BIN is not set (run through ctest)")
    with hostile.Hostile() as h:
        for creds in (AZ_SAS, AZ_KEY):
            p = subprocess.run([exe, "info", "http://victimacct.blob.core.attacker.example/c/x.tif"],
                               capture_output=True, text=True, timeout=60,
                               env=env_with(creds, proxy=h.proxy))
            assert p.returncode != 0
            assert "SASSECRET" not in p.stderr
        assert len(h.seen()) >= 2
        assert_clean(h.text())


# -- the hostile server is the proxy of the real endpoints -------------------

@pytest.mark.parametrize("url,creds,host", [
    ("az://c/x.tif", AZ_SAS, "victimacct.blob.core.windows.net:443"),
    ("az://c/x.tif", AZ_KEY, "victimacct.blob.core.windows.net:443"),
    ("https://victimacct.blob.core.windows.net/c/x.tif", AZ_SAS,
     "victimacct.blob.core.windows.net:443"),
    ("https://victimacct.blob.core.usgovcloudapi.net/c/x.tif", AZ_KEY,
     "victimacct.blob.core.usgovcloudapi.net:443"),
    ("s3://bucket/k.tif", AWS, "bucket.s3.us-east-1.amazonaws.com:443"),
    ("s3://my.bucket/k.tif", AWS, "s3.us-east-1.amazonaws.com:443"),
    ("gs://bucket/k.tif", GCS, "storage.googleapis.com:443"),
])
def test_a_proxy_sees_only_the_tunnel(url, creds, host):
    """https through a proxy: the proxy gets CONNECT host:443 and nothing
    else (it cannot open the tunnel without a certificate the client
    trusts)."""
    with hostile.Hostile() as h:
        fetch(url, env_with(creds, proxy=h.proxy))
        seen = h.seen()
        assert seen and all(r["via"] == "connect" for r in seen), h.text()
        assert seen[0]["line"].startswith("CONNECT " + host)
        assert_clean(h.text())


# -- a redirect from the endpoint the credentials are for --------------------

@pytest.fixture
def trap(cert):
    """(redirector, hostile): the redirector (plain http, standing in for
    an explicitly configured endpoint: MinIO, Azurite, an emulator)
    answers 307 to the hostile https server (another host: port)."""
    with hostile.Hostile(tls=True, cert=cert) as h, \
            hostile.Redirector(h.base, cert=cert) as r:
        yield r, h


def _redirect_cases(r):
    ep = "http://127.0.0.1:%d" % r.port
    return [
        ("s3://bucket/k.tif", [AWS, {"AWS_ENDPOINT_URL": ep}], "AWS4-HMAC"),
        ("az://c/k.tif", [{"AZURE_STORAGE_CONNECTION_STRING":
                           "BlobEndpoint=%s/acct;AccountName=acct;AccountKey=%s" % (ep, KEY)}],
         "SharedKey"),
        ("az://c/k.tif", [{"AZURE_STORAGE_CONNECTION_STRING":
                           "BlobEndpoint=%s/acct;SharedAccessSignature=%s" % (ep, SAS)}],
         "SASSECRET"),
        ("gs://bucket/k.tif", [GCS, {"STORAGE_EMULATOR_HOST": ep}], "GCSSECRET"),
        (ep + "/k.tif?" + SAS, [], "SASSECRET"),
    ]


@pytest.mark.parametrize("case", range(5), ids=["s3", "az-key", "az-sas", "gs", "presigned"])
def test_redirect_to_another_host_gets_nothing(trap, case):
    r, h = trap
    url, parts, used = _redirect_cases(r)[case]
    out = fetch(url, env_with(*parts), ca_file=h.ca_file)
    # the configured endpoint did get the credential (the test is real) ...
    assert used in r.text(), r.text()
    # ... and sent the client on to the hostile server, which saw none
    assert h.seen(), out
    assert_clean(h.text())


def test_https_redirect_to_plain_http_is_refused(cert):
    """Credentials or not, an https request is never sent on over plain
    http to another host."""
    with hostile.Hostile() as h, \
            hostile.Redirector(h.base, tls=True, cert=cert) as r:
        out = fetch(r.url("k.tif?" + SAS), env_with(AWS, GCS), ca_file=cert[0])
        assert "refused" in out["ops"][0]["msg"]
        assert not h.seen()


def test_proxy_wanting_credentials_is_the_runs_failure():
    """A proxy that answers CONNECT with 407: CF_E_AUTH naming the 407 (a
    failure of the run, never a sample a loader may skip), one attempt."""
    with hostile.Hostile(connect_status=407) as h:
        r = fetch("https://victimacct.blob.core.windows.net/c/x.tif",
                  env_with(proxy=h.proxy))
        op = r["ops"][0]
        assert op["status"] == Status.AUTH and "407" in op["msg"], op
        assert "proxy wants credentials" in op["msg"], op
        assert [s["via"] for s in h.seen()] == ["connect"]


# -- writing: uploads (lib/io/upload.c) go by the same rules -----------------

WRITE = r"""
import sys, numpy as np, cogfeed
url, ca = sys.argv[1], sys.argv[2] or None
io = cogfeed.IO(max_retries=0, request_timeout_s=10, connect_timeout_s=3, ca_file=ca)
try:
    cogfeed.write(url, np.zeros((1, 64, 64), "uint8"), io=io)
except cogfeed.Error as e:
    print("ERROR %s %s" % (e.code, e))
else:
    print("WRITTEN")
"""


def write(url, env, ca_file=None):
    """cogfeed.write of a small image to url in a process with env;
    returns what it printed (ERROR code message, or WRITTEN)."""
    p = subprocess.run([sys.executable, "-c", WRITE, url, ca_file or ""],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.parametrize("url", [
    # Azure-looking hosts: uploads go there without the credentials
    "http://victimacct.blob.core.attacker.example/c/x.tif",
    "http://victimacct.blob.core.windows.net/c/x.tif",
    "http://victimacct.blob.core.windows.net.attacker.example/c/x.tif",
])
@pytest.mark.parametrize("creds", [AZ_SAS, AZ_KEY], ids=["sas", "key"])
def test_write_to_plain_http_azure_hosts_gets_nothing(url, creds):
    with hostile.Hostile() as h:
        out = write(url, env_with(creds, AWS, GCS, proxy=h.proxy))
        assert out.startswith("ERROR") and "SASSECRET" not in out, out
        seen = h.seen()
        assert seen and seen[0]["via"] == "proxy" and "victimacct" in seen[0]["line"]
        assert_clean(h.text())


@pytest.mark.parametrize("creds", [AZ_SAS, AZ_KEY], ids=["sas", "key"])
def test_write_to_a_plain_url_is_refused_before_any_request(creds):
    """A plain http(s) URL is not a store: not written to at all (no
    request, nothing to leak), and the error says why."""
    with hostile.Hostile() as h:
        out = write(h.url("victimacct/c/x.tif"), env_with(creds, AWS, GCS))
        assert out.startswith("ERROR %d" % Status.UNSUPPORTED), out
        assert "not written to" in out
        assert not h.seen(), h.text()


@pytest.mark.parametrize("creds", [AZ_SAS, AZ_KEY], ids=["sas", "key"])
def test_write_to_another_azure_account_gets_nothing(cert, creds):
    """The attacker's real Azure account (not the configured one): the
    upload goes there anonymously, through the tunnel, without the SAS or
    a Shared Key signature."""
    with hostile.Hostile(mitm=True, cert=cert) as h:
        out = write("https://evilacct.blob.core.windows.net/c/x.tif",
                    env_with(creds, AWS, GCS, proxy=h.proxy), ca_file=h.ca_file)
        assert out.startswith("ERROR"), out
        tunnel = [r for r in h.seen() if r["via"] == "tunnel"]
        assert tunnel and tunnel[0]["line"].startswith("PUT "), h.text()
        assert_clean(h.text())


@pytest.mark.parametrize("url,creds,host", [
    ("az://c/x.tif", AZ_SAS, "victimacct.blob.core.windows.net:443"),
    ("az://c/x.tif", AZ_KEY, "victimacct.blob.core.windows.net:443"),
    ("s3://bucket/k.tif", AWS, "bucket.s3.us-east-1.amazonaws.com:443"),
    ("gs://bucket/k.tif", GCS, "storage.googleapis.com:443"),
])
def test_write_through_a_proxy_shows_it_only_the_tunnel(url, creds, host):
    with hostile.Hostile() as h:
        out = write(url, env_with(creds, proxy=h.proxy))
        assert out.startswith("ERROR"), out
        seen = h.seen()
        assert seen and all(r["via"] == "connect" for r in seen), h.text()
        assert seen[0]["line"].startswith("CONNECT " + host)
        assert_clean(h.text())


@pytest.mark.parametrize("case", range(4), ids=["s3", "az-key", "az-sas", "gs"])
def test_write_redirected_to_another_host_is_not_followed(trap, case):
    """The configured endpoint answers the upload with 307 to the hostile
    server: a write is never redirected, so the hostile server gets no
    request at all, and the error names the 307."""
    r, h = trap
    url, parts, used = _redirect_cases(r)[case]
    out = write(url, env_with(*parts), ca_file=h.ca_file)
    assert used in r.text(), r.text()  # the endpoint got the credential
    assert out.startswith("ERROR") and "307" in out, out
    assert not h.seen(), h.text()


# -- signed URLs (cf_io_options.sign): the signature goes to its own host ----

SIGNED = r"""
import sys, cogfeed
url, ca, to = sys.argv[1], sys.argv[2] or None, sys.argv[3]
sas = "sv=2021-08-06&sp=r&sig=SIGNERSECRET%3D"
def sign(h):  # to: "same" (the URL's own host) or another URL to point at
    return (h if to == "same" else to) + "?" + sas
io = cogfeed.IO(max_retries=0, request_timeout_s=10, connect_timeout_s=3, ca_file=ca,
                sign=sign)
try:
    cogfeed.open(url, io=io).close()
except cogfeed.Error as e:
    print("ERROR %s %s" % (e.code, e))
else:
    print("OPENED")
"""


def open_signed(url, env, ca_file=None, to="same"):
    p = subprocess.run([sys.executable, "-c", SIGNED, url, ca_file or "", to],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_a_signature_is_not_sent_on_a_redirect(trap):
    """The signed URL's server redirects to another host: the signature
    (its query) stays behind; the hostile server gets the path only."""
    r, h = trap
    out = open_signed("http://127.0.0.1:%d/k.tif" % r.port, env_with(), ca_file=h.ca_file)
    assert "SIGNERSECRET" in r.text(), r.text()   # the signed host got it
    assert h.seen(), out
    assert "SIGNERSECRET" not in h.text() and "sig=" not in h.text(), h.text()
    assert "SIGNERSECRET" not in out


def test_a_signer_pointing_elsewhere_sends_nothing():
    """A signer that returns a URL on another host (a bug, or a hostile
    signing service) is refused before any request: neither host sees the
    signature."""
    with hostile.Hostile() as h, hostile.Hostile() as other:
        out = open_signed(h.url("k.tif"), env_with(), to=other.url("k.tif"))
        assert out.startswith("ERROR %d" % Status.AUTH) and "signing the URL" in out, out
        assert "SIGNERSECRET" not in out
        assert not h.seen() and not other.seen(), (h.text(), other.text())


def test_a_signed_url_through_a_proxy_shows_it_only_the_tunnel():
    with hostile.Hostile() as h:
        out = open_signed("https://victimacct.blob.core.windows.net/c/x.tif",
                          env_with(proxy=h.proxy))
        assert out.startswith("ERROR"), out
        seen = h.seen()
        assert seen and all(x["via"] == "connect" for x in seen), h.text()
        assert seen[0]["line"].startswith("CONNECT victimacct.blob.core.windows.net:443")
        assert "SIGNERSECRET" not in h.text()
