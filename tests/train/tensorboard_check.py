"""dptrain's --tensorboard files read by TensorBoard's own reader.

TensorBoard's EventAccumulator (PyPI tensorboard) loads the directory of
each run and must find every scalar at every step, once, equal to what the
--metrics file says of the same run (train/loss and train/lr at every step;
the epoch's train loss, train accuracy, samples/s and test accuracy at its
last step):
  1. two devices, a warmup and cosine schedule;
  2. two ranks under mpirun, without --log-steps: one file (rank 0's),
     the steps' losses those of 1 within 1e-4;
  3. a run read while it trains, killed with SIGKILL in its second epoch:
     the file reads, every step up to the last one read is there; resumed
     from its checkpoint, each step is there once (the resumed file's
     SessionLog START drops the killed run's steps after the checkpoint);
  4. a run stopped by SIGTERM mid-epoch and resumed: each step once.
Prints one line per check and "N passed, N failed".

Usage: tensorboard_check.py path/to/dptrain   (run by tests/train/cli_tensorboard.sh)
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from compare import close, max_rel_diff  # noqa: E402  (tests/util/compare.py)

STEP_TAGS = ["train/loss", "train/lr"]
EPOCH_TAGS = ["train/epoch_loss", "train/epoch_accuracy", "train/samples_per_second",
              "test/accuracy", "test/loss", "test/top5_accuracy"]
BIN = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="cli_tensorboard.")
results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)
    return ok


def train_cmd(name, *flags, epochs=2, limit=1280, log_steps=True):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    return d, [BIN, "train", "--limit-train", str(limit), "--limit-test", "500",
               "--batch-size", "64", "--lr", "0.05", "--lr-schedule", "cosine",
               "--warmup-steps", "5", "--epochs", str(epochs), "--progress", "never",
               "--metrics", os.path.join(d, "m.jsonl"), "--tensorboard",
               os.path.join(d, "tb")] + (["--log-steps"] if log_steps else []) + list(flags)


def load(tb):
    acc = EventAccumulator(tb, size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def metrics(path):
    """The last line of each step and epoch (a resumed run's replace a killed one's)."""
    steps, epochs = {}, {}
    for line in open(path):
        m = json.loads(line)
        if "step" in m:
            steps[m["step"]] = m
        else:
            epochs[m["epoch"]] = m
    return steps, epochs


def compare(name, d, batches, steps_of=None, rtol=1e-6):
    """Every scalar at every step of d's metrics, each once, and no other;
    the steps those of steps_of's metrics (another run's) when given, the
    losses within rtol."""
    acc = load(os.path.join(d, "tb"))
    steps, epochs = metrics(os.path.join(d, "m.jsonl"))
    if steps_of:
        steps = metrics(os.path.join(steps_of, "m.jsonl"))[0]
    tags = sorted(acc.Tags()["scalars"])
    if not check(f"{name}: the scalars' tags", tags == sorted(STEP_TAGS + EPOCH_TAGS), str(tags)):
        return
    got = {t: {} for t in tags}
    dup = []
    for t in tags:
        for e in acc.Scalars(t):
            if e.step in got[t]:
                dup.append((t, e.step))
            got[t][e.step] = e.value
    # Each tag's steps are exactly the expected ones: every step of the
    # --metrics file for the per-step tags, every epoch's last step for the
    # per-epoch ones (a step missing from TensorBoard would otherwise read
    # as NaN, and NaN fails no bound).
    want_epoch_steps = {e * batches for e in epochs}
    wrong_steps = [(t, sorted(set(steps) ^ set(got[t]))[:3]) for t in STEP_TAGS
                   if set(got[t]) != set(steps)]
    wrong_steps += [(t, sorted(want_epoch_steps ^ set(got[t]))[:3]) for t in EPOCH_TAGS
                    if set(got[t]) != want_epoch_steps]
    bad = []
    for s, m in steps.items():
        if not close(got["train/loss"].get(s), m["loss"], rtol, 1e-6):
            bad.append(("train/loss", s, got["train/loss"].get(s), m["loss"]))
        if not close(got["train/lr"].get(s), m["lr"], 1e-7, 1e-12):
            bad.append(("train/lr", s, got["train/lr"].get(s), m["lr"]))
    for e, m in epochs.items():
        s = e * batches
        want = {"train/epoch_loss": (m["train_loss"], 1e-6), "test/accuracy": (m["test_acc"], 1e-4),
                "train/epoch_accuracy": (m["train_acc"], 1e-4),
                "test/loss": (m["test_loss"], 1e-6), "test/top5_accuracy": (m["test_top5"], 1e-4),
                "train/samples_per_second": (m["samples_per_second"], 0.1)}
        for t, (v, tol) in want.items():
            if not close(got[t].get(s), v, 1e-6, tol):
                bad.append((t, s, got[t].get(s), v))
    want_steps = list(range(1, len(epochs) * batches + 1))
    worst = max_rel_diff([got["train/loss"].get(s) for s in steps],
                                 [m["loss"] for m in steps.values()])
    ok = (not bad and not dup and not wrong_steps and sorted(steps) == want_steps
          and worst <= rtol + 1e-6)
    check(f"{name}: {len(steps)} steps x {len(STEP_TAGS)} tags and {len(epochs)} epochs x "
          f"{len(EPOCH_TAGS)} tags, each once and as in --metrics (loss within {worst:.1e})", ok,
          "" if ok else f"wrong {bad[:3]}, twice {dup[:3]}, steps not as expected "
          f"{wrong_steps[:3]}, --metrics steps {min(steps, default=0)}..{max(steps, default=0)} "
          f"of {len(steps)}")


def one_device_pair():
    d, cmd = train_cmd("devices2", "--devices", "2")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not check("2 devices train", r.returncode == 0, r.stderr.strip()[-300:]):
        return
    files = glob.glob(os.path.join(d, "tb", "events.out.tfevents.*"))
    check("one event file, named as SummaryWriter names it", len(files) == 1,
          os.path.basename(files[0]) if files else "none")
    compare("2 devices", d, 20)


def two_ranks():
    mpirun = shutil.which("mpirun")
    if not check("mpirun is installed", mpirun is not None, "scripts/install-deps.sh installs it"):
        return
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    # Without --log-steps: the ranks sum each step's loss for TensorBoard
    # alone. The steps are the 2 devices' run's (the same global batches),
    # the losses summed in another order.
    d, cmd = train_cmd("ranks2", "--threads", "1", log_steps=False)
    r = subprocess.run([mpirun, "-np", "2"] + cmd, capture_output=True, text=True, env=env)
    if not check("2 ranks train", r.returncode == 0, (r.stdout + r.stderr).strip()[-300:]):
        return
    files = glob.glob(os.path.join(d, "tb", "events.out.tfevents.*"))
    check("2 ranks: one event file (rank 0's)", len(files) == 1, str(files))
    compare("2 ranks, steps as 2 devices'", d, 20, steps_of=os.path.join(TMP, "devices2"),
            rtol=1e-4)


def last_step(tb):
    """The last step of train/loss that TensorBoard reads in tb so far."""
    if not glob.glob(os.path.join(tb, "events.out.tfevents.*")):
        return 0
    try:
        s = load(tb).Scalars("train/loss")
        return s[-1].step if s else 0
    except KeyError:
        return 0


def killed_and_resumed():
    # 50 steps an epoch, 3 epochs; killed once TensorBoard has read step 60.
    d, cmd = train_cmd("killed", "--checkpoint", os.path.join(TMP, "killed", "ck.safetensors"),
                       epochs=3, limit=3200)
    tb = os.path.join(d, "tb")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen, deadline = 0, time.time() + 120
    while seen < 60 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
        seen = last_step(tb)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    if not check("read while training: TensorBoard saw step 60 before the run ended",
                 seen >= 60 and p.returncode == -signal.SIGKILL,
                 f"saw step {seen}, exit {p.returncode}"):
        return
    acc = load(tb)
    loss = [e.step for e in acc.Scalars("train/loss")]
    lr = [e.step for e in acc.Scalars("train/lr")]
    epoch = [e.step for e in acc.Scalars("test/accuracy")]
    check("after SIGKILL the file reads: every step up to the last, epoch 1's figures",
          loss == lr == list(range(1, len(loss) + 1)) and len(loss) >= 60 and epoch == [50],
          f"steps 1..{len(loss)}, test/accuracy at {epoch}")
    r = subprocess.run(cmd + ["--resume", os.path.join(d, "ck.safetensors")],
                       capture_output=True, text=True)
    if check("the killed run resumes", r.returncode == 0, r.stderr.strip()[-300:]):
        compare("killed at step %d, resumed from step 50" % len(loss), d, 50)


def stopped_and_resumed():
    d, cmd = train_cmd("stopped", "--checkpoint", os.path.join(TMP, "stopped", "ck.safetensors"),
                       epochs=2, limit=3200)
    tb = os.path.join(d, "tb")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen, deadline = 0, time.time() + 120
    while seen < 20 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
        seen = last_step(tb)
    os.kill(p.pid, signal.SIGTERM)
    p.wait()
    if not check("SIGTERM stops the run mid-epoch", p.returncode == 128 + signal.SIGTERM,
                 f"exit {p.returncode} after step {seen}"):
        return
    time.sleep(1.1)  # so that the resumed run's file is named for a later second, sorting after
    r = subprocess.run(cmd + ["--resume", os.path.join(d, "ck.safetensors")],
                       capture_output=True, text=True)
    if check("the stopped run resumes", r.returncode == 0, r.stderr.strip()[-300:]):
        compare("stopped by SIGTERM and resumed", d, 50)


try:
    one_device_pair()
    two_ranks()
    killed_and_resumed()
    stopped_and_resumed()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
