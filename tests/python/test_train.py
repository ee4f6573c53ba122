"""dptrain.train(model=..., devices=..., **options): dp_train from Python.

- every option of `dptrain train` is a keyword (its flag's name, `_` for
  `-`), listed with its default in train's docstring; an unknown keyword is
  a TypeError naming the closest one, a bad value a ValueError with the
  library's one-line message;
- a built-in model trained from Python gives the numbers the CLI gives for
  the same options;
- a Python nn.Module is a model like any other: trained on 2 devices its
  loss falls and its accuracy is far above chance, it equals (1e-5) the
  same network given to the CLI as an nn.Sequential file from the same
  initial weights (--init), its Parameters hold the trained weights
  afterwards, and its forward runs on the thread that called train;
- Ctrl-C stops a run after its current step with KeyboardInterrupt.

The CLI is $DPTRAIN_CLI, else $DP_BUILD_DIR/dptrain (make test-python sets
it), else the `dptrain` beside the build's python/ folder that _dptrain was
imported from.
"""
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import _dptrain
import dptrain
from dptrain import nn
from dptrain.nn import functional as F

# Small runs: Fashion-MNIST's first 2048 training and 512 test images.
SMALL = dict(dataset="fashion-mnist", limit_train=2048, limit_test=512, batch_size=128,
             epochs=1, progress="never", conv_algo="direct")


def cli():
    build = os.environ.get("DP_BUILD_DIR") or os.path.dirname(
        os.path.dirname(os.path.abspath(_dptrain.__file__)))
    path = os.environ.get("DPTRAIN_CLI") or os.path.join(build, "dptrain")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no dptrain CLI at {path} (build it, or set DPTRAIN_CLI)")
    return path


def child_env():
    """This environment, importing the dptrain and _dptrain this test
    imported (absolute paths: the child runs in another folder)."""
    folders = [os.path.dirname(os.path.dirname(os.path.abspath(dptrain.__file__))),
               os.path.dirname(os.path.abspath(_dptrain.__file__))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(folders + [env.get("PYTHONPATH", "")])
    return env


def run_cli(*args):
    p = subprocess.run([cli(), "train", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def read_metrics(path):
    """(per-step losses, the last epoch's line) of a --metrics --log-steps file."""
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    return [r["loss"] for r in lines if "step" in r], [r for r in lines if "test_acc" in r][-1]


# ---- options --------------------------------------------------------------


def test_docstring_lists_every_option_with_its_default():
    doc = dptrain.train.__doc__
    rows = _dptrain.train_options()
    assert len(rows) >= 60
    for keyword, name, flag, metavar, default, help_text, title in rows:
        if keyword in ("model", "devices"):
            continue
        shown = "False" if metavar is None else default
        assert f"  {keyword}={shown}" in doc, keyword
    assert "  batch_size=256" in doc and "  lr=0.2" in doc and "  epochs=10" in doc
    assert "  metrics=none (or metrics_path)" in doc


@pytest.mark.parametrize("keyword, closest", [("batch_sise", "batch_size"),
                                              ("learning_rate", "lr"),
                                              ("epoch", "epochs"), ("metric", "metrics")])
def test_unknown_keyword_is_a_type_error_naming_the_closest(keyword, closest):
    with pytest.raises(TypeError) as e:
        dptrain.train("lenet", **{keyword: 1})
    assert str(e.value) == (f"train() got an unexpected keyword argument `{keyword}`; "
                            f"did you mean `{closest}`?")


@pytest.mark.parametrize("options, message", [
    (dict(batch_size=0), "`batch_size` 0: expected an integer from 1 to 1048576"),
    (dict(lr=-1.0), "`lr` -1.0: expected a number > 0 and <= 1e+06"),
    (dict(optimizer="sgdd"), "`optimizer` sgdd: expected sgd, adam or adamw"),
    (dict(no_shuffle="yes"), "`no_shuffle` yes: expected True or False (a switch)"),
    (dict(nesterov=True), "`nesterov` needs `optimizer` sgd and `momentum` above 0 "
                          "(as torch.optim.SGD)"),
])
def test_bad_value_is_a_value_error_with_the_librarys_line(options, message):
    with pytest.raises(ValueError) as e:
        dptrain.train("lenet", **options)
    assert str(e.value) == message
    assert "\n" not in str(e.value)


def test_bad_types_and_models_raise():
    with pytest.raises(TypeError, match=r"^train\(\): `epochs` takes a number"):
        dptrain.train("lenet", epochs={1})
    with pytest.raises(TypeError, match=r"^train\(\): model must be"):
        dptrain.train(3.5)
    with pytest.raises(Exception, match="nonexistent_model.txt") as e:
        dptrain.train("/nonexistent_model.txt", epochs=1)
    assert isinstance(e.value, (ValueError, FileNotFoundError, RuntimeError))


def test_builtin_model_equals_the_cli(tmp_path):
    ours = tmp_path / "py.jsonl"
    r = dptrain.train("lenet", devices=2, seed=5, lr=0.5, init_xavier=True, log_steps=True,
                      metrics=str(ours), **SMALL)
    assert isinstance(r, dict) and r.devices == "[cpu:0, cpu:1]" and r.epochs_done == 1
    theirs = tmp_path / "cli.jsonl"
    run_cli("--model", "lenet", "--devices", "2", "--seed", "5", "--lr", "0.5", "--init-xavier",
            "--log-steps", "--metrics", str(theirs), "--dataset", "fashion-mnist",
            "--limit-train", "2048", "--limit-test", "512", "--batch-size", "128", "--epochs",
            "1", "--progress", "never", "--conv-algo", "direct")
    (l1, e1), (l2, e2) = read_metrics(ours), read_metrics(theirs)
    assert len(l1) == 16 and l1 == l2
    assert e1["test_acc"] == e2["test_acc"] and e1["train_loss"] == e2["train_loss"]
    assert math.isclose(r.test_acc, e1["test_acc"], abs_tol=1e-4)


# ---- a Python Module as the model ---------------------------------------------


class SmallNet(nn.Module):
    """Conv2d(1, 4, 3, padding=1), ReLU, MaxPool2d(2), Linear(784, 10):
    (N, 1, 28, 28) -> (N, 10)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.fc = nn.Linear(4 * 14 * 14, 10)
        self.forward_threads = set()

    def forward(self, x):
        self.forward_threads.add(threading.get_ident())
        h = F.max_pool2d(F.relu(self.conv(x)), kernel_size=2)
        return self.fc(dptrain.flatten(h, 1))


SMALL_NET_SEQUENTIAL = """\
Conv2d(1, 4, kernel_size=3, padding=1)
ReLU()
MaxPool2d(2)
Flatten()
Linear(784, 10)
"""
# SmallNet's state_dict names as nn.Sequential's.
SEQUENTIAL_NAMES = {"conv.weight": "0.weight", "conv.bias": "0.bias", "fc.weight": "4.weight",
                    "fc.bias": "4.bias"}


def values(t):
    return [float(v) for v in t.detach().numpy().reshape(-1)]


def test_python_module_trains_as_the_same_sequential_file_does(tmp_path):
    dptrain.manual_seed(11)
    net = SmallNet()
    start = {name: values(p) for name, p in net.named_parameters()}
    dptrain.save({SEQUENTIAL_NAMES[n]: p for n, p in net.named_parameters()},
                 str(tmp_path / "init.safetensors"))
    ours = tmp_path / "py.jsonl"
    options = dict(SMALL, lr=0.1, seed=3, log_steps=True)
    r = dptrain.train(net, devices=2, metrics=str(ours), **options)

    # It trained: the loss fell, the accuracy is far above chance (0.1), and
    # the module's Parameters hold the trained weights.
    losses, epoch = read_metrics(ours)
    assert len(losses) == 16 and all(math.isfinite(v) for v in losses)
    assert sum(losses[-4:]) / 4 < 0.75 * sum(losses[:4]) / 4, losses
    assert r.test_acc > 0.5, r
    trained = {name: values(p) for name, p in net.named_parameters()}
    assert all(trained[n] != start[n] for n in start)
    # forward ran on this thread, the one that called train (dp_train's), and
    # the module is back in the mode it was in (evaluation ran last).
    assert net.forward_threads == {threading.get_ident()}
    assert net.training and net.conv.training

    # The same network as an nn.Sequential file, from the same weights.
    (tmp_path / "small.txt").write_text(SMALL_NET_SEQUENTIAL)
    theirs = tmp_path / "cli.jsonl"
    run_cli("--model", str(tmp_path / "small.txt"), "--init", str(tmp_path / "init.safetensors"),
            "--devices", "2", "--lr", "0.1", "--seed", "3", "--log-steps", "--metrics",
            str(theirs), "--checkpoint", str(tmp_path / "cli.safetensors"), "--dataset",
            "fashion-mnist", "--limit-train", "2048", "--limit-test", "512", "--batch-size",
            "128", "--epochs", "1", "--progress", "never", "--conv-algo", "direct")
    cli_losses, cli_epoch = read_metrics(theirs)
    assert len(cli_losses) == len(losses)
    for a, b in zip(losses, cli_losses):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b)), (losses, cli_losses)
    assert abs(epoch["test_acc"] - cli_epoch["test_acc"]) <= 1e-5
    cli_weights = dptrain.load(str(tmp_path / "cli.safetensors"))
    for name, ours_values in trained.items():
        theirs_values = values(cli_weights[SEQUENTIAL_NAMES[name]])
        worst = max(abs(a - b) for a, b in zip(ours_values, theirs_values))
        assert worst <= 1e-5, (name, worst)


class BatchNormNet(nn.Module):
    """Conv2d(1, 4, 3, padding=1), BatchNorm2d(4), ReLU, MaxPool2d(2),
    Linear(784, 10)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 14 * 14, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), kernel_size=2)
        return self.fc(dptrain.flatten(h, 1))


def test_batch_norm_statistics_come_back_to_the_module():
    dptrain.manual_seed(2)
    net = BatchNormNet()
    net.eval()
    r = dptrain.train(net, devices=2, lr=0.1, **SMALL)
    assert r.test_acc > 0.5, r
    # The replicas' running statistics (averaged over the devices after
    # each step), the 16 steps counted once each, and the mode as it was.
    mean, var = values(net.bn.running_mean), values(net.bn.running_var)
    assert all(math.isfinite(v) for v in mean + var)
    assert mean != [0.0] * 4 and var != [1.0] * 4
    assert int(net.bn.num_batches_tracked.item()) == 16
    assert not net.training and not net.bn.training


class RaisingNet(SmallNet):
    def forward(self, x):
        raise ZeroDivisionError("the module's own error")


class NotALogitNet(SmallNet):
    def forward(self, x):
        return [1, 2]


def test_errors_in_the_modules_forward_are_raised_by_train():
    dptrain.manual_seed(0)
    with pytest.raises(ZeroDivisionError, match="the module's own error"):
        dptrain.train(RaisingNet(), **SMALL)
    with pytest.raises(TypeError, match=r"forward returned list, not a Tensor"):
        dptrain.train(NotALogitNet(), **SMALL)

    class Empty(nn.Module):
        def forward(self, x):
            return x
    with pytest.raises(ValueError, match="has no parameters to train"):
        dptrain.train(Empty(), **SMALL)
    # The engine is usable after each.
    assert dptrain.train("lenet", **SMALL).epochs_done == 1


# ---- Ctrl-C ---------------------------------------------------------------------

INTERRUPTED = textwrap.dedent("""\
    import os, signal, sys, threading, time
    import dptrain
    def interrupt():
        time.sleep(3.0)  # well into the steps, past loading the data
        os.kill(os.getpid(), signal.SIGINT)
        sent.append(time.monotonic())
    sent = []
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        dptrain.train("lenet", devices=2, epochs=5, batch_size=64, limit_test=256,
                      progress="never", checkpoint=sys.argv[1])
        print("not stopped")
    except KeyboardInterrupt as e:
        print("stopped after %.3f s: %s" % (time.monotonic() - sent[0], e))
    """)


def test_ctrl_c_stops_the_run_after_its_step(tmp_path):
    ck = tmp_path / "ck.safetensors"
    p = subprocess.run([sys.executable, "-c", INTERRUPTED, str(ck)], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=child_env())
    assert p.returncode == 0, p.stderr[-2000:]
    line = p.stdout.strip()
    assert line.startswith("stopped after "), line
    assert float(line.split()[2]) < 0.5, line
    assert "stopped by SIGINT before epoch 1 batch " in line
    assert f'resume="{ck}" goes on from there' in line and ck.exists()


def test_a_run_after_ctrl_c_trains(tmp_path):
    script = INTERRUPTED + textwrap.dedent("""\
        r = dptrain.train("lenet", epochs=1, limit_train=512, limit_test=256, progress="never")
        print("next run:", r.epochs_done)
        """)
    p = subprocess.run([sys.executable, "-c", script, str(tmp_path / "ck.safetensors")],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, env=child_env())
    assert "next run: 1" in p.stdout, p.stdout + p.stderr[-1000:]


def test_the_gil_is_released_while_a_run_trains():
    # A Python thread counts while train() runs a built-in model (no Python
    # in its steps): with the GIL held throughout it could not count at all.
    counted, done = [0], threading.Event()

    def count():
        while not done.is_set():
            counted[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        while counted[0] == 0:
            pass
        before = counted[0]
        dptrain.train("lenet", devices=2, **dict(SMALL, limit_train=4096))
        during = counted[0] - before
    finally:
        done.set()
        counter.join()
    print("counted during the run:", during)
    assert during > 1_000_000, during
