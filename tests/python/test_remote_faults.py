"""Every row of the network-fault table in reliability.md, each against a
real local nginx (tests/servers) that injects that fault.

Most tests drive the io layer through tests/tools/cf_fetch (one URL, a
list of header / range reads, JSON out); the last ones go through the
public Python API (cogfeed.open / cogfeed.IO) on a real COG to check the
request counts the reader promises.
"""
import hashlib
import json
import os
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx, find_tool, free_port  # noqa: E402

from cogfeed import Status  # noqa: E402  (the C status table's values)

OK, E_IO, E_HTTP, E_AUTH, E_NOTFOUND, E_CHANGED, E_RANGE, E_TIMEOUT = (
    Status.OK, Status.IO, Status.HTTP, Status.AUTH, Status.NOTFOUND, Status.CHANGED,
    Status.RANGE, Status.TIMEOUT)

# Fast retries so that the suite stays quick; the behaviour is the same.
FAST = ["retry_base_ms=20", "retry_max_ms=200", "low_speed_time_s=1",
        "request_timeout_s=20", "connect_timeout_s=2"]
BIG = 300_000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("remote")
    rnd = __import__("random").Random(7)
    (d / "a.bin").write_bytes(bytes(rnd.getrandbits(8) for _ in range(BIG)))
    (d / "small.bin").write_bytes(bytes(rnd.getrandbits(8) for _ in range(1000)))
    return d


@pytest.fixture(scope="module")
def srv(data):
    with Nginx(str(data)) as s:
        yield s


def fetch(url, *ops, opts=(), out=None, env=None, timeout=60):
    """Run cf_fetch; returns the JSON of each process (one, or two after
    a fork: child first)."""
    cmd = [find_tool("cf_fetch")]
    for o in list(FAST) + list(opts):
        cmd += ["--opt", o]
    if out:
        cmd += ["--out", str(out)]
    cmd += [url] + list(ops)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=env)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    return lines if len(lines) > 1 else lines[0]


def blob(data, off, n, name="a.bin"):
    return (data / name).read_bytes()[off:off + n]


def check_ok(r, op=-1):
    assert r["ops"][op]["status"] == OK, r["ops"][op]["msg"]


# -- baseline ------------------------------------------------------------

def test_plain_reads_are_exact_and_counted(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin"), "head:65536", "read:70000+100,70300+100,250000+5000",
              out=out)
    check_ok(r, 0)
    check_ok(r, 1)
    assert r["size"] == BIG and r["etag"]
    want = blob(data, 0, 65536) + blob(data, 70000, 100) + blob(data, 70300, 100) \
        + blob(data, 250000, 5000)
    assert out.read_bytes() == want
    # head = 1 request; the two nearby ranges merge (gap 200 < merge_gap),
    # the far one is its own request.
    assert r["requests"] == 3
    assert srv.requests("/a.bin") >= 3
    assert r["stats"]["retries"] == 0


def test_merge_gap_zero_keeps_requests_apart(srv):
    srv.reset()
    r = fetch(srv.url("a.bin"), "assume:%d" % BIG, "read:0+10,20+10,40+10",
              opts=["merge_gap=0"])
    check_ok(r)
    assert r["requests"] == 3 and srv.requests("/a.bin") == 3
    r = fetch(srv.url("a.bin"), "assume:%d" % BIG, "read:0+10,20+10,40+10")
    assert r["requests"] == 1


def test_small_object_head_learns_size(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("small.bin"), "head:65536", out=out)
    check_ok(r)
    assert r["ops"][0]["got"] == 1000 and r["size"] == 1000
    assert out.read_bytes() == (data / "small.bin").read_bytes()
    assert r["requests"] == 1


# -- hedged requests ------------------------------------------------------

def test_hedged_request_answers_a_slow_first_byte(srv, data, tmp_path):
    """The first request for the file gets no answer for 30 s (the slow
    tail of an object store); sent again after 100 ms, the second copy
    answers: the bytes are right, the io counts one hedge that won, the
    server saw both copies, and the read did not wait for the first."""
    srv.reset()
    out = tmp_path / "o"
    path = "/fault/wait-30-1/a.bin"
    r = fetch(srv.url("a.bin", "wait-30-1"), "head:4096", "read:70000+100",
              opts=["hedge_after_ms=100"], out=out, timeout=25)
    check_ok(r, 0)
    check_ok(r, 1)
    assert out.read_bytes() == blob(data, 0, 4096) + blob(data, 70000, 100)
    assert r["stats"]["hedges"] == 1 and r["stats"]["hedge_wins"] == 1
    assert r["stats"]["retries"] == 0
    assert r["requests"] == 3 and srv.requests(path) == 3
    # Off: no second copy (a 0.5 s wait, under the tests' 1 s low-speed
    # limit, waited for).
    srv.reset()
    r = fetch(srv.url("a.bin", "wait-0.5-1"), "head:4096",
              opts=["hedge_after_ms=-1"])
    check_ok(r)
    assert r["stats"]["hedges"] == 0 and r["requests"] == 1


def test_hedged_request_takes_the_first_answer(srv):
    """The second copy of a hedged request answers 404 while the first
    still waits: that is the server's answer, reported at once (no
    retry), naming the URL; a 503 instead would be retried."""
    srv.reset()
    r = fetch(srv.url("nope.bin", "wait-30-1"), "head:4096",
              opts=["hedge_after_ms=100"], timeout=15)
    op = r["ops"][0]
    assert op["status"] == E_NOTFOUND and "nope.bin" in op["msg"]
    # (waiting for the first would have met the tests' 1 s low-speed
    # limit, and a retry)
    assert r["stats"]["hedges"] == 1 and r["stats"]["retries"] == 0


# -- 429 / 503: backoff, Retry-After, shared budget ----------------------

def test_503_retried_with_backoff(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "status-503-2"), "head:4096", out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 4096)
    assert r["stats"]["retries"] == 2
    assert srv.requests("/fault/status-503-2/a.bin") == 3


def test_429_retry_after_honoured(srv):
    r = fetch(srv.url("a.bin", "retryafter-1-1"), "head:4096")
    check_ok(r)
    assert r["stats"]["retries"] == 1
    # backoff base is 20 ms: only Retry-After explains a 1 s wait
    assert r["ops"][0]["secs"] >= 0.95


def test_retry_after_beyond_the_deadline_says_so(srv):
    """Retry-After: 86400 cannot be waited for within request_timeout_s:
    the message says what the server asked for, at once (no wait)."""
    t0 = time.monotonic()
    r = fetch(srv.url("a.bin", "retryafter-86400-0"), "head:4096")
    op = r["ops"][0]
    assert op["status"] == E_HTTP and op["http_status"] == 429, op["msg"]
    assert "the server asked to wait 1 day (Retry-After)" in op["msg"]
    assert "request deadline of 20 s" in op["msg"]
    assert r["requests"] == 1 and time.monotonic() - t0 < 10


def test_retry_budget_is_shared_by_all_requests(srv):
    # 10 separate requests, each failing forever, with a budget of 4 retries
    # for the whole io: at most 10 + 4 requests reach the server.
    path = "/fault/status-503-0/a.bin"
    before = srv.requests(path)
    rng = ",".join("%d+10" % (i * 100_000 // 10 * 3) for i in range(10))
    r = fetch(srv.url("a.bin", "status-503-0"), "assume:%d" % BIG,
              "read:" + rng, opts=["retry_budget=4", "merge_gap=0",
                                   "max_retries=50"])
    op = r["ops"][1]
    assert op["status"] in (E_TIMEOUT, E_HTTP)
    assert "retry budget" in op["msg"]
    assert r["stats"]["retries"] == 4
    assert srv.requests(path) - before == 14


def test_retry_budget_refills_with_successes(srv):
    """The budget is a token bucket (AWS's retry quota), not a lifetime
    count: a 503 storm drains it, requests that then succeed refill it
    (a fifth of a retry each), and a later transient 503 is retried again
    instead of failing at once with "retry budget ... spent"."""
    srv.reset()
    path = "/fault/storm-14-6/a.bin"
    storm = ",".join("%d+10" % (i * 30_000) for i in range(10))
    calm = ",".join("%d+10" % (i * 30_000 + 5) for i in range(6))
    r = fetch(srv.url("a.bin", "storm-14-6"), "assume:%d" % BIG,
              "read:" + storm, "read:" + calm, "read:1000+10",
              opts=["retry_budget=4", "merge_gap=0", "max_retries=50"])
    storm_op, calm_op, later = r["ops"][1:]
    # 10 requests and the 4 retries the budget holds, then it is spent
    assert storm_op["status"] == E_TIMEOUT and "retry budget" in storm_op["msg"]
    check_ok(r, 2)
    # the transient 503 after the storm: retried, and read
    assert later["status"] == OK, later["msg"]
    assert r["stats"]["retries"] == 5
    assert srv.requests(path) == 14 + 6 + 2


# -- 500 / 502 / 504 / 408 ----------------------------------------------

@pytest.mark.parametrize("code", [500, 502, 504, 408])
def test_server_errors_retried(srv, code):
    r = fetch(srv.url("a.bin", "status-%d-1" % code), "head:1000")
    check_ok(r)
    assert r["stats"]["retries"] == 1


def test_server_errors_give_up_with_status(srv):
    r = fetch(srv.url("a.bin", "status-502-0"), "head:1000",
              opts=["max_retries=2"])
    op = r["ops"][0]
    assert op["status"] == E_HTTP and op["http_status"] == 502
    assert "HTTP 502" in op["msg"] and "gave up after 3 attempts" in op["msg"]


# -- connect refused / reset / timeout before headers --------------------

def test_connect_refused_counted_as_connect_failure():
    port = free_port()
    r = fetch("http://127.0.0.1:%d/a.bin" % port, "head:100",
              opts=["max_retries=2"])
    op = r["ops"][0]
    assert op["status"] == E_IO and "could not connect" in op["msg"]
    assert r["stats"]["connect_failures"] == 3
    assert r["stats"]["read_failures"] == 0


def test_connect_refused_then_server_comes_up(data, tmp_path):
    port = free_port()
    out = tmp_path / "o"
    res = {}

    def run():
        res["r"] = fetch("http://127.0.0.1:%d/a.bin" % port, "head:2048",
                         opts=["max_retries=12", "retry_base_ms=100",
                               "retry_max_ms=400"], out=out)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.4)
    with Nginx(str(data), port=port):
        t.join(30)
    r = res["r"]
    check_ok(r)
    assert r["stats"]["connect_failures"] >= 1
    assert out.read_bytes() == blob(data, 0, 2048)


def test_reset_before_headers_counted_as_read_failure(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "reset-2"), "head:8192", out=out)
    check_ok(r)
    assert r["stats"]["read_failures"] == 2
    assert r["stats"]["connect_failures"] == 0
    assert out.read_bytes() == blob(data, 0, 8192)


# -- truncated body: resumed with If-Match -------------------------------

def test_truncated_body_resumed_with_if_match(srv, data, tmp_path):
    out = tmp_path / "o"
    path = "/fault/truncate-1/a.bin"
    r = fetch(srv.url("a.bin", "truncate-1"), "head:65536", out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 65536)
    assert r["stats"]["read_failures"] == 1
    # Only the missing half was fetched again.
    assert r["stats"]["bytes_fetched"] == 65536
    assert srv.requests(path) == 2
    assert srv.last_header(path, "im") == r["etag"]


def test_link_that_cuts_every_response_short(srv, data, tmp_path):
    """Every response (each resume too) stops after half its body: each
    resume makes progress, so none of them uses up the request's retries
    (max_retries=2 here); the request deadline alone bounds them.  300 kB
    take about 19 resumes; the bytes are exact."""
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "halve"), "head:65536", "read:0+%d" % BIG,
              opts=["max_retries=2"], out=out)
    check_ok(r, 0)
    check_ok(r, 1)
    assert out.read_bytes() == blob(data, 0, 65536) + blob(data, 0, BIG)
    assert r["stats"]["read_failures"] >= 30
    # only what was missing was asked for again, each time
    assert r["stats"]["bytes_fetched"] == 65536 + BIG


def test_truncated_forever_never_hands_up_short_buffer(srv):
    # Each response stops after half (rounded down) its body: the last
    # byte never comes, and the attempts without progress are retries.
    r = fetch(srv.url("a.bin", "truncate-0"), "head:65536",
              opts=["max_retries=2"])
    op = r["ops"][0]
    assert op["status"] == E_IO and "truncated" in op["msg"]
    assert "gave up after" in op["msg"]
    assert op["got"] == 0


# -- 200 instead of 206 --------------------------------------------------

def test_full_200_rejected_as_not_range_capable(srv):
    path = "/fault/full200/a.bin"
    before = srv.requests(path)
    r = fetch(srv.url("a.bin", "full200"), "head:65536")
    op = r["ops"][0]
    assert op["status"] == E_RANGE and op["http_status"] == 200
    assert "not range-capable" in op["msg"]
    assert srv.requests(path) - before == 1  # no retry
    # Aborted: the 300 kB body was not downloaded.
    assert r["stats"]["bytes_fetched"] == 0


def test_full_200_accepted_for_whole_small_object(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("small.bin", "full200"), "head:65536", out=out)
    check_ok(r)
    assert r["size"] == 1000
    assert out.read_bytes() == (data / "small.bin").read_bytes()


# -- 206 with a wrong Content-Range --------------------------------------

def test_bad_content_range_retried_once(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "badrange-1"), "head:4096", out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 4096)
    assert r["stats"]["retries"] == 1


def test_bad_content_range_twice_is_an_error(srv):
    path = "/fault/badrange-0/a.bin"
    before = srv.requests(path)
    r = fetch(srv.url("a.bin", "badrange-0"), "head:4096")
    op = r["ops"][0]
    assert op["status"] == E_RANGE and "does not match" in op["msg"]
    assert srv.requests(path) - before == 2


# -- 416 -----------------------------------------------------------------

def test_416_not_retried(srv):
    before = srv.requests("/a.bin")
    r = fetch(srv.url("a.bin"), "read:400000+100")
    op = r["ops"][0]
    assert op["status"] == E_RANGE and op["http_status"] == 416
    assert "object shorter than its header says, or it changed" in op["msg"]
    assert srv.requests("/a.bin") - before == 1


def test_range_running_past_the_end_is_a_range_error(srv):
    r = fetch(srv.url("a.bin"), "read:299000+5000")
    op = r["ops"][0]
    assert op["status"] == E_RANGE and "object shorter" in op["msg"]
    assert r["requests"] == 1


# -- ETag pinning --------------------------------------------------------

def test_etag_pinned_and_412_reported_as_changed(srv):
    path = "/fault/etag-change/a.bin"
    r = fetch(srv.url("a.bin", "etag-change"), "head:4096", "read:100000+10")
    check_ok(r, 0)
    assert r["etag"] == '"v1"'
    op = r["ops"][1]
    assert op["status"] == E_CHANGED and op["http_status"] == 412
    assert "changed" in op["msg"]
    assert srv.last_header(path, "im") == '"v1"'
    assert r["requests"] == 2  # no retry


def test_etag_change_detected_when_server_ignores_if_match(srv):
    r = fetch(srv.url("a.bin", "etag-ignore"), "head:4096", "read:100000+10")
    op = r["ops"][1]
    assert op["status"] == E_CHANGED and '"v2"' in op["msg"]


def test_response_without_the_pinned_etag_is_not_accepted(srv):
    """The first response had ETag "v1", a later one has none (and If-Match
    went ignored): nothing says it is the same object any more."""
    r = fetch(srv.url("a.bin", "etag-drop"), "head:4096", "read:100000+10")
    check_ok(r, 0)
    op = r["ops"][1]
    assert op["status"] == E_CHANGED, op["msg"]
    assert 'had ETag "v1", this one has none' in op["msg"]
    assert r["requests"] == 2  # no retry


def test_no_etag_uses_last_modified(srv, data, tmp_path):
    """A server without ETags: the first response's Last-Modified is pinned
    and sent as If-Unmodified-Since; the reads are served."""
    srv.reset()
    out = tmp_path / "o"
    path = "/fault/noetag/a.bin"
    r = fetch(srv.url("a.bin", "noetag"), "head:4096", "read:100000+10",
              out=out)
    check_ok(r, 0)
    check_ok(r, 1)
    assert r["etag"] == ""
    assert out.read_bytes() == blob(data, 0, 4096) + blob(data, 100000, 10)
    assert srv.last_header(path, "ius") == "Mon, 01 Jan 2024 00:00:00 GMT"
    assert srv.last_header(path, "im") == ""


@pytest.mark.parametrize("fault,want", [
    ("noetag-lmchange", "no longer matches the Last-Modified"),
    ("noetag-lmchangeignore", "Last-Modified was Mon, 01 Jan 2024"),
    ("weaketag-lmchange", "no longer matches the Last-Modified"),
    ("noetag-grow", "size was 300000, now 300001"),
])
def test_change_detected_without_a_strong_etag(srv, fault, want):
    """No ETag, or a weak one that If-Match cannot use: a newer
    Last-Modified (412 to If-Unmodified-Since, or seen in the response
    when the condition is ignored) or another size in Content-Range is
    "object changed while reading", not a silent mix of two versions."""
    r = fetch(srv.url("a.bin", fault), "head:4096", "read:100000+10")
    check_ok(r, 0)
    op = r["ops"][1]
    assert op["status"] == E_CHANGED, op["msg"]
    assert want in op["msg"], op["msg"]
    assert r["requests"] == 2


# -- 403 / expired credentials: no retry, code, no secret ----------------

def test_403_reports_service_code_without_secret(srv):
    path = "/fault/status-403-0/a.bin"
    before = srv.requests(path)
    secret = "SUPERSECRETSIG"
    r = fetch(srv.url("a.bin", "status-403-0") + "?sv=2021&sig=" + secret,
              "head:4096")
    op = r["ops"][0]
    assert op["status"] == E_AUTH and op["http_status"] == 403
    assert "AccessDenied" in op["msg"] and "403" in op["msg"]
    assert secret not in op["msg"] and "sig=" not in op["msg"]
    assert secret not in json.dumps(r)
    assert srv.requests(path) - before == 1


def test_403_azure_error_code_header(srv):
    r = fetch(srv.url("a.bin", "az403"), "head:4096")
    op = r["ops"][0]
    assert op["status"] == E_AUTH and "AuthenticationFailed" in op["msg"]


def test_bearer_token_never_in_messages(srv):
    env = dict(os.environ, STORAGE_EMULATOR_HOST="127.0.0.1:%d" % srv.port,
               GOOGLE_OAUTH_ACCESS_TOKEN="ya29.TOPSECRETTOKEN")
    r = fetch("gs://fault/status-403-0/a.bin", "head:4096", env=env)
    op = r["ops"][0]
    assert op["status"] == E_AUTH
    assert "TOPSECRET" not in json.dumps(r)
    assert srv.last_header("/fault/status-403-0/a.bin", "auth") == \
        "Bearer ya29.TOPSECRETTOKEN"


# -- 404 -----------------------------------------------------------------

def test_at_sign_in_query_is_not_user_info(srv):
    """http://host?sig=A@SECRET (no path): the '@' in the query is no user
    info, so the message names http://host, not the secret after it."""
    r = fetch(srv.base + "?sig=A@S3CR3T_at_in_query", "head:100")
    op = r["ops"][0]
    assert op["status"] != OK
    assert r["name"] == srv.base
    assert "S3CR3T" not in json.dumps(r) and "sig=" not in op["msg"]


def test_404_names_url_without_query(srv):
    r = fetch(srv.url("nope.tif") + "?X-Amz-Signature=DEADBEEF&X-Amz-Credential=AKIA",
              "head:100")
    op = r["ops"][0]
    assert op["status"] == E_NOTFOUND and op["http_status"] == 404
    assert "/nope.tif" in op["msg"]
    assert "DEADBEEF" not in op["msg"] and "?" not in op["msg"]
    assert r["requests"] == 1


@pytest.mark.parametrize("code,want,words", [
    (407, E_AUTH, "proxy wants credentials"),
    (410, E_NOTFOUND, "gone"),
    (451, E_AUTH, "unavailable for legal reasons"),
])
def test_proxy_auth_gone_and_legal_block_are_the_runs_failures(srv, code, want, words):
    """407, 410 and 451 are failures of the run (CF_E_AUTH / CF_E_NOTFOUND,
    never skipped by a loader), not retried, the real status named."""
    r = fetch(srv.url("a.bin", "status-%d-0" % code), "head:100",
              opts=["max_retries=3"])
    op = r["ops"][0]
    assert op["status"] == want and op["http_status"] == code, op
    assert ("HTTP %d" % code) in op["msg"] and words in op["msg"], op["msg"]
    assert r["requests"] == 1


def test_host_that_does_not_resolve_fails_at_once():
    """A name under .invalid (RFC 6761: never resolves) is permanent: one
    attempt, no retry loop, the URL named without its query."""
    r = fetch("http://cogfeed-test.invalid/a.bin?sig=S3CR3T", "head:100",
              opts=["max_retries=3"])
    op = r["ops"][0]
    assert op["status"] == E_NOTFOUND, op
    assert "does not resolve" in op["msg"] and "not retried" in op["msg"]
    assert "cogfeed-test.invalid/a.bin" in op["msg"] and "S3CR3T" not in op["msg"]
    assert r["stats"]["connect_failures"] == 1


# -- hostile responses: endless headers -------------------------------------

@pytest.mark.parametrize("answer,want", [
    ("answer_endless_header_line", "header line too long for libcurl"),
    ("answer_endless_headers", "response headers larger than libcurl accepts"),
])
def test_endless_headers_say_what_happened(answer, want):
    """A header line that never ends, or headers without end: the message
    says so (not "body truncated after 0 of 4096 bytes (Out of memory)"),
    and the request is not sent again to a server that would do the same."""
    import hostile
    with hostile.Hostile(answer=getattr(hostile, answer)) as h:
        r = fetch(h.url("a.bin"), "head:4096")
        op = r["ops"][0]
        assert op["status"] == E_HTTP and op["http_status"] == 206, op["msg"]
        assert want in op["msg"] and "truncated" not in op["msg"], op["msg"]
        assert len(h.seen()) == 1 and r["stats"]["retries"] == 0


def test_endless_error_body_is_not_read_to_the_end():
    """A 404 whose body never ends: the status is the answer and the head
    of the body has the error code, so the transfer stops there instead
    of reading on until the request's deadline."""
    import hostile
    with hostile.Hostile(answer=hostile.answer_endless_error_body) as h:
        r = fetch(h.url("a.bin"), "head:4096", opts=["request_timeout_s=5"])
        op = r["ops"][0]
        assert op["status"] == E_NOTFOUND and "NoSuchKey" in op["msg"], op["msg"]
        for _ in range(200):  # the server notices the hang-up at its next send
            if h.sent:
                break
            time.sleep(0.05)
        # read to the deadline, the client would have taken ~500 KB
        assert h.sent and h.sent[0] < 64 << 10, h.sent


# -- stalled body --------------------------------------------------------

def test_stalled_body_aborted_and_resumed(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "slow-1"), "head:65536", out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 65536)
    assert r["stats"]["read_failures"] == 1
    assert r["ops"][0]["secs"] < 10


def test_stall_forever_hits_the_deadline(srv):
    t0 = time.monotonic()
    r = fetch(srv.url("a.bin", "slow-0"), "head:65536",
              opts=["request_timeout_s=4", "max_retries=50"])
    op = r["ops"][0]
    assert op["status"] == E_TIMEOUT
    assert time.monotonic() - t0 < 10


# -- retry storm ---------------------------------------------------------

def test_retry_storm_bounded_by_request_deadline(srv):
    t0 = time.monotonic()
    r = fetch(srv.url("a.bin", "status-503-0"), "head:100",
              opts=["max_retries=1000", "retry_base_ms=100", "retry_max_ms=300",
                    "request_timeout_s=2"])
    op = r["ops"][0]
    assert op["status"] == E_TIMEOUT and "deadline" in op["msg"]
    assert time.monotonic() - t0 < 6
    assert r["requests"] < 30


# -- redirects -----------------------------------------------------------

def test_redirect_same_host_followed(srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(srv.url("a.bin", "redirect-same"), "head:1000", out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 1000)


def test_plain_http_redirect_to_other_host_refused(srv):
    r = fetch(srv.url("a.bin", "redirect-other"), "head:1000")
    op = r["ops"][0]
    assert op["status"] == E_HTTP and "refused" in op["msg"]


# -- TLS -------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_srv(data):
    with Nginx(str(data), tls=True) as s:
        yield s


def test_tls_verified_by_default(tls_srv):
    r = fetch(tls_srv.url("a.bin"), "head:100")
    op = r["ops"][0]
    # CF_E_AUTH, not CF_E_IO: the run's fault (no CA), never a skipped sample
    assert op["status"] == E_AUTH and "certificate" in op["msg"]
    assert r["requests"] == 1  # not retried: it cannot get better


def test_tls_with_ca_file_and_http2(tls_srv, data, tmp_path):
    out = tmp_path / "o"
    r = fetch(tls_srv.url("a.bin"), "head:4096",
              "read:" + ",".join("%d+1000" % (i * 100_000) for i in range(3)),
              opts=["ca_file=" + tls_srv.ca_file, "merge_gap=0"], out=out)
    check_ok(r)
    assert out.read_bytes() == blob(data, 0, 4096) + b"".join(
        blob(data, i * 100_000, 1000) for i in range(3))


def test_tls_verification_off_only_when_asked(tls_srv):
    r = fetch(tls_srv.url("a.bin"), "head:100", opts=["verify_tls=0"])
    check_ok(r)


def test_https_redirect_to_other_host_drops_credentials(tls_srv, data):
    env = dict(os.environ, STORAGE_EMULATOR_HOST="https://127.0.0.1:%d" % tls_srv.port,
               GOOGLE_OAUTH_ACCESS_TOKEN="ya29.SECRET")
    r = fetch("gs://fault/redirect-other/a.bin", "head:1000",
              opts=["ca_file=" + tls_srv.ca_file], env=env)
    check_ok(r)
    assert tls_srv.last_header("/fault/redirect-other/a.bin", "auth") == \
        "Bearer ya29.SECRET"
    # followed to https://localhost (another host): no Authorization there
    assert tls_srv.last_header("/a.bin", "auth") == ""


# -- fork ------------------------------------------------------------------

def test_fork_child_builds_its_own_loop(srv, data, tmp_path):
    out = tmp_path / "o"
    child, parent = fetch(srv.url("a.bin"), "head:4096", "read:1000+10",
                          "fork", "read:200000+4000", out=out)
    assert child["role"] == "child" and parent["role"] == "parent"
    assert parent["child_exit"] == 0
    check_ok(child)
    check_ok(parent)
    assert (tmp_path / "o.child").read_bytes() == blob(data, 200000, 4000)
    assert out.read_bytes() == blob(data, 0, 4096) + blob(data, 1000, 10) + \
        blob(data, 200000, 4000)


# -- many requests in flight ---------------------------------------------

def test_many_requests_in_flight_hide_latency(data):
    # 64 separate ranges with 100 ms first-byte latency: in parallel they
    # take about one latency, serially they would take 6.4 s.
    with Nginx(str(data), latency_ms=100) as s:
        rng = ",".join("%d+100" % (i * 4000) for i in range(64))
        r = fetch(s.url("a.bin"), "assume:%d" % BIG, "read:" + rng,
                  opts=["merge_gap=0"])
        check_ok(r)
        assert r["requests"] == 64
        assert r["ops"][1]["secs"] < 2.0
        r = fetch(s.url("a.bin"), "assume:%d" % BIG, "inflight:1",
                  "read:" + ",".join("%d+100" % (i * 4000) for i in range(5)),
                  opts=["merge_gap=0"])
        check_ok(r)
        assert r["stats"]["max_inflight"] == 1
        assert r["ops"][2]["secs"] >= 0.45


# -- through the public Python API on a real COG -------------------------

@pytest.fixture(scope="module")
def cog(data):
    import numpy as np
    sys.path.insert(0, HERE)
    import conformance as C  # GDAL through rasterio
    rng = np.random.default_rng(3)
    arr = rng.integers(0, 4000, size=(1024, 1024), dtype=np.uint16)
    path = C.write_array(data / "cog.tif", arr[None], "COG", BLOCKSIZE=256,
                         COMPRESS="DEFLATE", OVERVIEWS="NONE")
    return path, arr


def _cogfeed():
    return pytest.importorskip("cogfeed")


def test_cog_open_is_one_request_and_window_one_per_tile(srv, cog):
    cf = _cogfeed()
    path, arr = cog
    io = cf.IO(merge_gap=0)
    srv.reset()
    c = cf.open(srv.url("cog.tif"), io=io)
    assert c.requests == 1 and srv.requests("/cog.tif") == 1
    # window touching 2 x 2 tiles
    w = c.read(window=(200, 200, 100, 100))
    assert (w[0] == arr[200:300, 200:300]).all()
    assert c.requests - 1 <= 4
    assert srv.requests("/cog.tif") == c.requests


def test_cog_read_through_faults(srv, cog):
    cf = _cogfeed()
    path, arr = cog
    io = cf.IO(retry_base_ms=20)
    c = cf.open(srv.url("cog.tif", "status-503-1"), io=io)
    w = c.read(window=(0, 0, 300, 300))
    assert (w[0] == arr[:300, :300]).all()
    assert io.stats()["retries"] >= 1
    with pytest.raises(Exception) as ei:
        cf.open(srv.url("cog.tif", "full200"), io=io)
    assert "not range-capable" in str(ei.value)


def test_cog_read_through_a_link_that_cuts_every_response(srv, cog):
    """Issue 15: every response stops after half its body and the
    connection drops, resumes too.  Each resume makes progress, so every
    window reads, with the pixels of the file."""
    cf = _cogfeed()
    path, arr = cog
    io = cf.IO(retry_base_ms=20, max_retries=2)
    c = cf.open(srv.url("cog.tif", "halve"), io=io)
    rnd = __import__("random").Random(15)
    for _ in range(12):
        x, y = rnd.randrange(0, 900), rnd.randrange(0, 900)
        w, h = rnd.randrange(1, 1024 - x), rnd.randrange(1, 1024 - y)
        got = c.read(window=(x, y, w, h))
        assert (got[0] == arr[y:y + h, x:x + w]).all()
    assert io.stats()["read_failures"] > 12


def test_cog_fork_in_python(srv, cog):
    cf = _cogfeed()
    path, arr = cog
    io = cf.IO()
    c = cf.open(srv.url("cog.tif"), io=io)
    c.read(window=(0, 0, 10, 10))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = 0
        try:
            x = c.read(window=(700, 700, 64, 64))
            ok = int((x[0] == arr[700:764, 700:764]).all())
        finally:
            os.write(w, b"%d" % ok)
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 10) == b"1"
    x = c.read(window=(500, 500, 64, 64))
    assert (x[0] == arr[500:564, 500:564]).all()


def test_cog_over_tls_with_ca_file(tls_srv, cog, tmp_path):
    """The CA of a private server reaches the Python IO and the CLI; a
    missing one is refused when the IO is made, naming the file."""
    cf = _cogfeed()
    path, arr = cog
    url = tls_srv.url("cog.tif")
    with pytest.raises(cf.Error) as ei:
        cf.open(url, io=cf.IO())
    assert "certificate" in str(ei.value) and "ca_file" in str(ei.value)
    c = cf.open(url, io=cf.IO(ca_file=tls_srv.ca_file))
    assert (c.read(window=(0, 0, 300, 300))[0] == arr[:300, :300]).all()
    missing = str(tmp_path / "no-ca.pem")
    with pytest.raises(cf.Error) as ei:
        cf.IO(ca_file=missing)
    assert "ca_file %s: No such file" % missing in str(ei.value)
    exe = os.environ.get("COGFEED_BIN")
    if not exe:
        pytest.skip("COGFEED_BIN is not set (run through ctest)")
    p = subprocess.run([exe, "info", url, "--ca-file", tls_srv.ca_file],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "1024 x 1024" in p.stdout
    p = subprocess.run([exe, "info", url], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "certificate" in p.stderr


def test_loader_io_options(tls_srv, cog, tmp_path):
    """Loader(io_options=...) reaches the loader's own io loops: a private
    CA, and a header cache that opens the files of the next loader with
    no request."""
    cf = _cogfeed()
    path, arr = cog
    url = tls_srv.url("cog.tif")
    with pytest.raises(cf.Error, match="certificate"):
        cf.Loader([url], patch_size=256)
    with pytest.raises(TypeError, match="bogus"):
        cf.Loader([url], patch_size=256, io_options={"bogus": 1})
    opts = {"ca_file": tls_srv.ca_file, "header_cache_dir": str(tmp_path)}
    for k in range(2):
        tls_srv.reset()
        ld = cf.Loader([url], patch_size=256, batch_size=4, sampler="grid",
                       io_options=opts)
        assert tls_srv.requests("/cog.tif") == (1 if k == 0 else 0)
        n = 0
        for b in ld:
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                assert (b["image"][i, 0] == arr[y:y + h, x:x + w]).all()
                n += 1
        assert n == 16
        ld.close()


def test_loader_close_does_not_wait_for_the_network(srv, cog):
    """close() cancels the readers' requests in flight instead of waiting
    for them (here they would hang until the low-speed limit and request
    timeout), and a next() blocked in another thread wakes with an error."""
    cf = _cogfeed()
    srv.reset()
    # The open's request is answered; every tile request hangs.
    ld = cf.Loader([srv.url("cog.tif", "hang-1")], patch_size=256,
                   batch_size=2)
    got = []

    def consume():
        try:
            next(iter(ld))
        except Exception as e:  # noqa: BLE001 - the test looks at it
            got.append(e)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(1.0)
    assert t.is_alive() and srv.requests("/fault/hang-1/cog.tif") > 1
    t0 = time.monotonic()
    ld.close()
    took = time.monotonic() - t0
    t.join(10)
    assert not t.is_alive() and took < 3, took
    assert isinstance(got[0], ValueError) and "closed" in str(got[0])
    with pytest.raises(ValueError, match="closed"):
        next(iter(ld))
