"""cogfeed experiment's models: the small UNet (the default) and the
paper's UNet with a ResNet-18 encoder (--model unet-resnet18, from
segmentation-models-pytorch, randomly initialised).

segmentation-models-pytorch needs timm and torchvision, and PyPI's
torchvision does not import beside the torch of the project's own
environment, so the ResNet-18 tests run where it is installed: in the
peers' environment that bench/peers.py makes (it runs this file there,
and so does `bench/peers.py --workloads model`).  Elsewhere they skip and
the test that the option says how to get it runs instead.  The option's
checks (unknown model, patch size) run everywhere.

Nothing may be downloaded: the runs get an empty TORCH_HOME and HF_HOME,
HF_HUB_OFFLINE=1, and the tests check that both stay empty."""
import json
import os
import subprocess
import sys

import pytest

ENV = dict(os.environ, PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")


def have_smp():
    try:
        import segmentation_models_pytorch  # noqa: F401
    except ImportError:
        return False
    return True


def run_cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "cogfeed.cli"] +
                          [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, env=env or ENV)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def data(tmp):
    """2 scenes of 128 px with masks (1 to train, 1 held out).  `cogfeed
    synth` writes with GDAL's Python bindings, which the peers'
    environment lacks: there bench/peers.py makes them with the project's
    interpreter and passes the folder in CF_MODEL_TEST_DATA."""
    given = os.environ.get("CF_MODEL_TEST_DATA")
    if given:
        return given
    d = tmp / "raw"
    r = run_cli("synth", d, "--scenes", 2, "--size", 128, "--tile", 128,
                "--quiet")
    assert r.returncode == 0, r.stderr
    return str(d)


def experiment(data, out, *more, env=None):
    return run_cli("experiment", "--data", data, "--out", out,
                   "--loaders", "cogfeed", "--samplers", "none",
                   "--latency-ms", 20, "--batch-size", 2, "--snapshots", 1,
                   "--device", "cpu", *more, env=env)


def test_unknown_model_is_refused(data, tmp):
    r = experiment(data, tmp / "x", "--model", "vit-huge", "--budget", 1)
    assert r.returncode == 2
    assert "--model" in r.stderr and "unet-resnet18" in r.stderr


def test_patch_size_must_suit_the_model(data, tmp):
    # The ResNet-18 encoder pools 5 times: 48 px is not a multiple of 32.
    r = experiment(data, tmp / "y", "--model", "unet-resnet18",
                   "--patch-size", 48, "--budget", 1)
    assert r.returncode == 1
    assert "multiple of 32" in r.stderr and "48" in r.stderr


@pytest.mark.skipif(have_smp(), reason="segmentation-models-pytorch is "
                    "installed here")
def test_resnet18_without_smp_says_how_to_get_it(data, tmp):
    r = experiment(data, tmp / "z", "--model", "unet-resnet18",
                   "--patch-size", 64, "--budget", 1)
    assert r.returncode == 1
    assert "segmentation-models-pytorch" in r.stderr
    assert "bench/peers.py" in r.stderr


needs_smp = pytest.mark.skipif(not have_smp(), reason="needs "
                               "segmentation-models-pytorch (bench/peers.py"
                               " runs this file in its environment)")


@needs_smp
def test_resnet18_unet_is_the_papers_model():
    import torch
    from torchvision.models.resnet import ResNet
    from cogfeed.tools.unet import make_model
    torch.manual_seed(0)
    m = make_model("unet-resnet18", 4, 6)
    assert isinstance(m.encoder, ResNet)
    # ResNet-18's 4 stages of 2 basic blocks, first conv taking 4 bands.
    assert [len(getattr(m.encoder, "layer%d" % i)) for i in (1, 2, 3, 4)] \
        == [2, 2, 2, 2]
    assert m.encoder.conv1.in_channels == 4
    n = sum(p.numel() for p in m.parameters())
    assert 14_000_000 < n < 14_700_000, n      # smp's Unet(resnet18): 14.3 M
    x = torch.randn(2, 4, 64, 64)
    assert m(x).shape == (2, 6, 64, 64)
    # Trains: a few Adam steps on one batch lower the loss.
    y = torch.randint(0, 6, (2, 64, 64))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@needs_smp
def test_experiment_trains_resnet18_unet_without_downloading(data, tmp):
    home = tmp / "homes"
    env = dict(ENV, TORCH_HOME=str(home / "torch"),
               HF_HOME=str(home / "hf"))
    out = tmp / "exp"
    r = experiment(data, out, "--model", "unet-resnet18", "--patch-size", 64,
                   "--budget", 4, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "model unet-resnet18" in r.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["meta"]["model"] == "unet-resnet18"
    assert sorted(x["setup"] for x in run["runs"]) == \
        ["cogfeed-local", "cogfeed-remote"]
    for x in run["runs"]:
        assert x["steps"] > 0 and x["final_loss"] is not None
        assert 0 <= x["final_miou"] <= 1
    # Random initialisation: no weights were fetched or cached anywhere.
    written = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs]
    assert written == []
