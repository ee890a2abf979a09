"""Run one of the test servers until killed (benchmarks, the demo).

    /usr/bin/python3 tests/servers/serve.py nginx --root DIR --latency-ms 164 --port 8080 [--workers 2] [--tail 0.01:1]

Prints the base URL on stdout once the server accepts connections.
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import Nginx  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["nginx"])
    ap.add_argument("--root", required=True, help="directory to serve")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="first-byte latency added to every request")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--workers", type=int, default=2,
                    help="nginx worker processes")
    ap.add_argument("--tail", default=None, metavar="SHARE:SECONDS",
                    help="a slow tail: this share of the requests, at "
                         "random, waits SECONDS more (e.g. 0.01:1)")
    a = ap.parse_args()
    tail = None
    if a.tail:
        try:
            share, secs = (float(v) for v in a.tail.split(":"))
        except ValueError:
            ap.error("--tail wants SHARE:SECONDS, e.g. 0.01:1")
        tail = (share, secs)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with Nginx(a.root, latency_ms=a.latency_ms, port=a.port,
               workers=a.workers, tail=tail) as srv:
        print(srv.base, flush=True)
        while not stop and srv.proc.poll() is None:
            time.sleep(0.2)
        if srv.proc.poll() is not None:
            print(srv.error_log()[-2000:], file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
