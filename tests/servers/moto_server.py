"""moto's S3 server on 127.0.0.1, enforcing AWS Signature Version 4.

moto (https://docs.getmoto.org) only checks signatures once
INITIAL_NO_AUTH_ACTION_COUNT actions have run; before that every request is
allowed.  We start it with that variable set, use the free actions to create
an IAM user with an S3 policy, its access key, the bucket and the fixture
objects, then set the count to 0 through moto's /moto-api/reset-auth so that
every later request must carry a valid SigV4 signature: a signed GET gets
206, a wrong secret or an unsigned request 403.

moto and boto3 come with the project's virtual environment
(requirements-dev.txt), so the server and the setup script run under the
tests' own interpreter when it can import moto, else under whichever
python3 can; set CF_MOTO_PYTHON to choose one.

    with Moto() as m:
        key_id, secret = m.setup("bucket", {"a.tif": "/path/a.tif"})
        env = m.env(key_id, secret)   # AWS_* for cogfeed
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import die_with_parent, free_port, stop_process  # noqa: E402

# The setup actions above fit easily below this; reset-auth then enforces.
_FREE_ACTIONS = 1000

_SETUP = r"""
import json, sys
import boto3

cfg = json.loads(sys.stdin.read())
kw = dict(endpoint_url=cfg["endpoint"], region_name=cfg["region"],
          aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="cogfeed")
iam.put_user_policy(UserName="cogfeed", PolicyName="s3",
    PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
key = iam.create_access_key(UserName="cogfeed")["AccessKey"]
# Temporary credentials (AWS_SESSION_TOKEN): moto checks the token of an
# assumed role's key against the one it issued.
iam.create_role(RoleName="cogfeed-reader", AssumeRolePolicyDocument=json.dumps({
    "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
    "Principal": {"AWS": "arn:aws:iam::123456789012:root"}}]}))
iam.put_role_policy(RoleName="cogfeed-reader", PolicyName="s3",
    PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
sts = boto3.client("sts", **kw)
tmp = sts.assume_role(RoleArn="arn:aws:iam::123456789012:role/cogfeed-reader",
                      RoleSessionName="cogfeed-test", DurationSeconds=3600)["Credentials"]
s3 = boto3.client("s3", **kw)
s3.create_bucket(Bucket=cfg["bucket"])
for name, path in cfg["files"].items():
    s3.upload_file(path, cfg["bucket"], name)
print(json.dumps([key["AccessKeyId"], key["SecretAccessKey"],
                  tmp["AccessKeyId"], tmp["SecretAccessKey"], tmp["SessionToken"]]))
"""


def moto_python() -> str:
    """A python3 that can import moto: ours (the venv's), else another."""
    cands = [os.environ.get("CF_MOTO_PYTHON"), sys.executable]
    # PATH without the system directories first finds pyenv's shim.
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p not in ("/usr/bin", "/bin"))
    cands.append(shutil.which("python3", path=path))
    cands += [os.path.expanduser("~/.pyenv/shims/python3"), "/root/.pyenv/shims/python3",
              shutil.which("python3")]
    for c in cands:
        if not c or not os.path.exists(c):
            continue
        r = subprocess.run([c, "-c", "import moto.server, boto3"],
                           capture_output=True, timeout=60)
        if r.returncode == 0:
            return c
    raise RuntimeError("no python3 with moto and boto3 found (set CF_MOTO_PYTHON)")


class Moto:
    """moto's server mode as a context manager; see the module docstring."""

    def __init__(self, port: int = 0, region: str = "us-east-1"):
        self.port = port or free_port()
        self.region = region
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.python = moto_python()
        self.proc: subprocess.Popen | None = None
        self.enforcing = False
        self.session: list[str] = []

    def start(self) -> "Moto":
        if self.proc and self.proc.poll() is None:
            return self
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(_FREE_ACTIONS))
        self.proc = subprocess.Popen(
            [self.python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.endpoint + "/moto-api/data.json", timeout=2):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("moto server did not start within 60 s")

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def __enter__(self) -> "Moto":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def set_free_actions(self, n: int) -> None:
        """Allow n more unauthenticated actions (0: enforce SigV4 now)."""
        req = urllib.request.Request(self.endpoint + "/moto-api/reset-auth",
                                     data=str(n).encode(), method="POST",
                                     # Not a form: moto reads the raw body.
                                     headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        self.enforcing = n == 0

    def setup(self, bucket: str, files: dict[str, str]) -> tuple[str, str]:
        """Create an IAM user allowed s3:*, the bucket, and upload `files`
        (object key -> local path); then enforce SigV4.  Returns the user's
        (access key id, secret access key); self.session holds temporary
        (key id, secret, session token) of a role allowed s3:GetObject."""
        if self.enforcing:
            raise RuntimeError("setup must run before signatures are enforced")
        cfg = {"endpoint": self.endpoint, "region": self.region, "bucket": bucket,
               "files": {k: os.path.abspath(v) for k, v in files.items()}}
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        r = subprocess.run([self.python, "-c", _SETUP], input=json.dumps(cfg),
                           capture_output=True, text=True, env=env, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("moto setup failed:\n" + r.stderr[-3000:])
        key_id, secret, *self.session = json.loads(r.stdout.strip().splitlines()[-1])
        self.set_free_actions(0)
        return key_id, secret

    def env(self, key_id: str | None, secret: str | None, **extra: str) -> dict[str, str]:
        """AWS_* variables for cogfeed to reach this server (None: leave the
        credential out)."""
        e = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": self.region}
        if key_id is not None:
            e["AWS_ACCESS_KEY_ID"] = key_id
        if secret is not None:
            e["AWS_SECRET_ACCESS_KEY"] = secret
        e.update(extra)
        return e


if __name__ == "__main__":
    # Manual use: serve the files given on the command line until ^C.
    with Moto() as m:
        files = {os.path.basename(p): p for p in sys.argv[1:]}
        kid, sec = m.setup("cogfeed", files)
        print(f"AWS_ENDPOINT_URL={m.endpoint} AWS_ACCESS_KEY_ID={kid} "
              f"AWS_SECRET_ACCESS_KEY={sec}  s3://cogfeed/<name>", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
