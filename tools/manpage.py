#!/usr/bin/env python3
"""Write the man page cogfeed(1) from the commands' own --help.

    python tools/manpage.py [-o docs/cogfeed.1]     (cogfeed importable)

The page is `cogfeed --help` followed by `cogfeed COMMAND --help` for every
command, each in a section of its own, so it says exactly what the help
says; then ENVIRONMENT, EXIT STATUS and EXAMPLES from the tables below.  docs/cogfeed.1 is checked in (cmake --install and the wheel install
it as share/man/man1/cogfeed.1); tests/python/test_cli.py regenerates it
and fails when it no longer matches the help.
"""
import argparse
import os
import subprocess
import sys


def _help(args):
    env = dict(os.environ, COLUMNS="80", LC_ALL="C")
    r = subprocess.run([sys.executable, "-m", "cogfeed.cli"] + args,
                       capture_output=True, text=True, env=env, check=True)
    return r.stdout


def _roff(text):
    """Help text as a no-fill block: backslashes escaped, and a line
    starting with . or ' made literal."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return ".nf\n" + "\n".join(out) + "\n.fi\n"


# Every environment variable cogfeed reads (tests/python/test_cli.py finds
# the names the sources read and fails when one is missing here).
ENVIRONMENT = [
    ("AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN",
     "S3 credentials (requests are signed with SigV4)."),
    ("AWS_REGION, AWS_DEFAULT_REGION",
     "S3 region, the first one set (default us-east-1)."),
    ("AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL",
     "S3-compatible endpoint instead of AWS's (MinIO, moto), the first one "
     "set; credentials go to it."),
    ("AWS_NO_SIGN_REQUEST",
     "YES: unsigned S3 requests (public buckets)."),
    ("AZURE_STORAGE_CONNECTION_STRING",
     "Azure Blob account, key or SAS, and endpoint (BlobEndpoint: Azurite)."),
    ("AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_ACCESS_KEY, AZURE_STORAGE_SAS_TOKEN",
     "Azure Blob account and its shared key or a SAS token."),
    ("GOOGLE_OAUTH_ACCESS_TOKEN",
     "OAuth 2 bearer token for gs:// URLs."),
    ("STORAGE_EMULATOR_HOST",
     "GCS emulator endpoint instead of storage.googleapis.com."),
    ("http_proxy, https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY, no_proxy, "
     "NO_PROXY",
     "proxies, as libcurl reads them (an https request reaches a proxy "
     "only as CONNECT)."),
    ("PROJ_DATA",
     "read by PROJ: where its database lies."),
    ("COGFEED_PROJ_NETWORK",
     "ON (or YES, TRUE, 1): PROJ may download the grids a reprojection "
     "asks for from its CDN. Off by default, whatever PROJ_NETWORK says, "
     "because a file's CRS would choose what is fetched."),
    ("PYTHONPATH",
     "a build tree's BUILD/cogfeed (the same command, run from the build) "
     "puts the build's python folder in front of it."),
    ("GDAL_NUM_THREADS",
     "threads of the baseline loader's GDAL (--loader baseline); 1 when "
     "unset."),
    ("RANK, WORLD_SIZE",
     "the shard of cogfeed.torch's loaders when torch.distributed is not "
     "initialised (Python API)."),
    ("LOCAL_WORLD_SIZE",
     "the ranks on this machine (torchrun sets it): "
     "cogfeed.predict(distributed=True) divides the CPUs the process may use "
     "among them for its writer's threads unless threads= is given (Python "
     "API)."),
]

EXIT_STATUS = [
    ("0", "success."),
    ("1", "failure: a file or URL that cannot be opened or read (the "
     "message on stderr names it), an output that cannot be written, a "
     "missing Python package."),
    ("2", "bad usage: an unknown option, a missing or extra argument, a "
     "value out of range (the message names the argument)."),
    ("128+N", "killed by signal N (130: Ctrl-C; 143: SIGTERM, which the "
     "Python commands turn into a clean stop of the servers and workers "
     "they started)."),
]

EXAMPLES = """\
cogfeed info scene.tif
cogfeed info --json s3://bucket/scene.tif | jq .crs.epsg
cogfeed read scene.tif --window=0,0,512,512 --bands 3,2,1 -o rgb.npy
cogfeed read https://host/scene.tif --window 0,0,256,256 --level 2 -o ovr.npy
cogfeed synth data/raw --scenes 4 --size 1024
cogfeed convert data/raw data/lerc_zstd_512 --compress lerc_zstd --tile 512
cogfeed bench --images data/lerc_zstd_512 --sampler blocked --json
cogfeed tune data --trials 20 --out tune-out
python3 -m cogfeed demo --out demo-out
"""

C_TOOL = """\
.B info
and
.B read
run
.BR cogfeed\\-c ,
the C tool, which the package carries (cogfeed/bin/cogfeed\\-c); every
other command runs in Python, and cogfeed\\-c never runs Python.
.B cmake \\-\\-install
of the C library puts cogfeed\\-c in bin/ (and no
.BR cogfeed ,
which comes with the Python package):
.B cogfeed\\-c info
and
.B cogfeed\\-c read
take the options above.
"""


def _tagged(items):
    """(term, text) pairs as tagged paragraphs."""
    out = []
    for term, text in items:
        out.append(".TP\n.B \"%s\"\n%s\n" % (term.replace("-", "\\-"), text))
    return "".join(out)


def manpage():
    from cogfeed import cli
    version = _help(["--version"]).split()[-1]
    parts = [
        '.TH COGFEED 1 "" "cogfeed %s" "User Commands"\n' % version,
        ".SH NAME\ncogfeed \\- stream training patches out of "
        "Cloud-Optimized GeoTIFFs\n",
        ".SH SYNOPSIS\n.B cogfeed\n\\fICOMMAND\\fR [\\fIARGS\\fR...]\n",
        ".SH DESCRIPTION\n", _roff(_help(["--help"])),
        ".SH COMMANDS\n",
    ]
    for name in cli.commands():
        parts.append(".SS %s\n" % name)
        parts.append(_roff(_help([name, "--help"])))
    parts.append(".SH ENVIRONMENT\n")
    parts.append(_tagged(ENVIRONMENT))
    parts.append(".SH EXIT STATUS\n")
    parts.append(_tagged(EXIT_STATUS))
    parts.append(".SH EXAMPLES\n")
    parts.append(_roff(EXAMPLES))
    parts.append(".SH C TOOL\n")
    parts.append(C_TOOL)
    parts.append(".SH SEE ALSO\nThe cogfeed documentation: README.md and "
                 "docs/*.md of the source tree.\n")
    return "".join(parts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", default=None,
                   help="file to write (default: stdout)")
    a = p.parse_args()
    text = manpage()
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
