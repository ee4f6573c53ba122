"""DistributedDataParallel and dptrain.distributed under Open MPI's mpirun.

ddp_worker.py runs 10 SGD steps of a small network: under `mpirun -np 2`
with DistributedDataParallel, each rank on its half of every batch, and
alone on the whole batch. The ranks' mean losses equal the single process's
per step, and the ranks' final weights equal its own, within 1e-6; both
ranks end with the same bits; and many buckets (bucket_cap_mb=0.001) give
the same bits as one bucket.

mpirun runs as tests/comm's MPI tests run it (tests/util/mpiutil.c): as root
allowed, ranks oversubscribed. Without mpirun or without MPI in the build
the tests fail, saying so: the build the tests run against has MPI when
Open MPI is installed (CMake's DP_MPI AUTO)."""
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

import _dptrain
import dptrain
from dptrain import distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "ddp_worker.py")


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    # The worker imports the dptrain and _dptrain this test imported.
    folders = [os.path.dirname(os.path.dirname(os.path.abspath(dptrain.__file__))),
               os.path.dirname(os.path.abspath(_dptrain.__file__))]
    env["PYTHONPATH"] = os.pathsep.join(folders + [env.get("PYTHONPATH", "")])
    return env


def mpirun(ranks, *cmd):
    """Runs cmd under `mpirun -np ranks` (ranks 1: alone), failing the test
    with the end of its output if it fails; returns its stdout."""
    if ranks > 1:
        path = shutil.which("mpirun")
        if not path:
            pytest.fail("no mpirun on PATH (Open MPI: apt-get install openmpi-bin)")
        if not _dptrain.dist_built():
            pytest.fail("this build of dptrain has no MPI (configure with Open MPI installed)")
        cmd = (path, "-np", str(ranks), "--oversubscribe") + cmd
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120,
                       env=mpi_env())
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p.stdout


def run(out, bucket_cap_mb, ranks):
    os.makedirs(out, exist_ok=True)
    mpirun(ranks, sys.executable, WORKER, out, bucket_cap_mb)
    results = []
    for r in range(ranks):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            results.append(json.load(f))
    assert all(res["world"] == ranks for res in results)
    return results


NO_DESTROY = """\
import sys
import dptrain.distributed as dist
dist.init_process_group("mpi")
with open(f"{sys.argv[1]}/rank{dist.get_rank()}", "w") as f:
    f.write(f"rank {dist.get_rank()} of {dist.get_world_size()}")
dist.barrier()
"""


def test_a_script_that_never_destroys_the_group_exits_cleanly(tmp_path):
    # As many of PyTorch's scripts: MPI is finalized at exit, or mpirun
    # reports the ranks as failed ("exited without calling finalize").
    script = tmp_path / "no_destroy.py"
    script.write_text(NO_DESTROY)
    # Each rank writes its own file: mpirun forwards the ranks' stdout in
    # pieces that may interleave mid-line ("rankrank 0 of 2 1 of 2").
    mpirun(2, sys.executable, script, tmp_path)
    said = [(tmp_path / f"rank{r}").read_text() for r in range(2)]
    assert said == ["rank 0 of 2", "rank 1 of 2"], said


TRAIN_UNDER_MPIRUN = """\
import sys
import dptrain
r = dptrain.train("lenet", devices=1, epochs=1, limit_train=2048, limit_test=512,
                  batch_size=128, lr=0.5, init_xavier=True, conv_algo="direct",
                  progress="never", metrics=sys.argv[1])
print(dptrain.distributed.get_rank(), r.devices, flush=True)
"""


def test_train_under_mpirun_is_the_clis_run_under_mpirun(tmp_path):
    # dptrain.train starts the process group itself and trains over the
    # ranks: the same epoch as `mpirun -np 2 dptrain train`.
    from test_train import cli, read_metrics
    script = tmp_path / "train.py"
    script.write_text(TRAIN_UNDER_MPIRUN)
    ours, theirs = tmp_path / "py.jsonl", tmp_path / "cli.jsonl"
    out = mpirun(2, sys.executable, script, ours)
    assert sorted(out.split("\n")[:2]) == ["0 [cpu:0] x 2 ranks", "1 [cpu:0] x 2 ranks"], out
    mpirun(2, cli(), "train", "--devices", "1", "--epochs", "1", "--limit-train", "2048",
           "--limit-test", "512", "--batch-size", "128", "--lr", "0.5", "--init-xavier",
           "--conv-algo", "direct", "--progress", "never", "--metrics", theirs)
    (_, a), (_, b) = read_metrics(ours), read_metrics(theirs)
    for key in ("train_loss", "train_acc", "test_acc", "test_loss"):
        assert a[key] == b[key], (key, a, b)


def worst(a, b):
    """The largest difference; NaN anywhere is infinitely bad."""
    assert len(a) == len(b)
    d = [abs(x - y) for x, y in zip(a, b)]
    return math.inf if any(math.isnan(v) for v in d + a + b) else max(d)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ddp")
    return {"alone": run(base / "alone", 25, 1)[0],
            "one_bucket": run(base / "one", 25, 2),
            "many_buckets": run(base / "many", 0.001, 2)}


def test_two_ranks_on_halves_equal_one_process_on_the_batch(runs):
    alone, ranks = runs["alone"], runs["one_bucket"]
    mean_losses = [(a + b) / 2 for a, b in zip(ranks[0]["losses"], ranks[1]["losses"])]
    assert len(mean_losses) == 10
    assert worst(mean_losses, alone["losses"]) <= 1e-6, (mean_losses, alone["losses"])
    assert alone["losses"][-1] < alone["losses"][0]  # it trained
    for name, values in alone["weights"].items():
        assert ranks[0]["weights"][name] == ranks[1]["weights"][name], name  # same bits
        assert worst(ranks[0]["weights"][name], values) <= 1e-6, name


def test_many_buckets_give_the_bits_of_one(runs):
    one, many = runs["one_bucket"], runs["many_buckets"]
    # 6 parameters of 16 B to 8 KiB: one bucket at 25 MiB; at 0.001 MiB (1048 B)
    # each its own, but for the conv layer's bias and weight (16 + 144 B).
    assert one[0]["buckets"] == [[5, 4, 3, 2, 1, 0]]
    assert many[0]["buckets"] == [[5], [4], [3], [2], [1, 0]]
    for r in range(2):
        assert many[r]["losses"] == one[r]["losses"]
        assert many[r]["weights"] == one[r]["weights"]


def test_process_group_calls_without_mpirun():
    # This process was not started by mpirun: one rank, rank 0 of 1.
    if dist.is_initialized():
        pytest.fail("the process group is initialized before the test")
    with pytest.raises(RuntimeError, match=r"^get_rank: the default process group is not "
                                           r"initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match=r"^init_process_group: backend 'nccl' is not "
                                         r"available"):
        dist.init_process_group("nccl")
    net = dptrain.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="DistributedDataParallel: the default process group"):
        dptrain.nn.parallel.DistributedDataParallel(net)
    dist.init_process_group("mpi")
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        dist.barrier()
        with pytest.raises(RuntimeError, match="already initialized"):
            dist.init_process_group("mpi")
        with pytest.raises(ValueError, match="bucket_cap_mb must be a number above 0"):
            dptrain.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0)
        with pytest.raises(TypeError, match="module must be a dptrain.nn.Module"):
            dptrain.nn.parallel.DistributedDataParallel([net])
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="MPI starts only once per process"):
        dist.init_process_group("mpi")


class _Sized:
    def __init__(self, numel):
        self._numel = numel

    def numel(self):
        return self._numel


def test_buckets_are_cut_as_pytorchs_reducer_cuts_them():
    from dptrain.nn.parallel.distributed import _buckets
    # Reverse order; the first bucket holds up to 1 MiB, the others up to
    # bucket_cap_mb; a parameter larger than a bucket is alone in one.
    sizes = [300_000, 10, 10, 200_000, 100_000]  # floats: 1.2 MB, 40 B, 40 B, 800 kB, 400 kB
    params = [_Sized(n) for n in sizes]
    assert _buckets(params, 25) == [[4], [3, 2, 1, 0]]
    assert _buckets(params, 1) == [[4], [3, 2, 1], [0]]
    assert _buckets(params, 0.5) == [[4], [3], [2, 1], [0]]
