"""One process of test_ddp.py: 10 SGD steps of a small network, under
DistributedDataParallel when run by mpirun (each rank on its half of every
batch), or alone on the whole batch. Writes OUT/rank<r>.json: the per-step
losses (this process's mean over its rows), the final weights, the buckets.

    python3 ddp_worker.py OUT BUCKET_CAP_MB
    mpirun -np 2 python3 ddp_worker.py OUT BUCKET_CAP_MB

The batches and the initial weights are drawn from fixed seeds, the same in
every process; rank 1 scrambles its own weights before wrapping, so that
equal results also show the broadcast from rank 0."""
import json
import os
import sys

import numpy as np

import dptrain as torch
from dptrain import nn
from dptrain import distributed as dist
from dptrain.nn.parallel import DistributedDataParallel

STEPS, BATCH = 10, 32


class Net(nn.Module):
    """(N, 1, 8, 8) -> (N, 10): Conv2d(1, 4, 3, padding=1), ReLU, MaxPool2d(2),
    Linear(64, 32), ReLU, Linear(32, 10)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(4 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        h = nn.functional.max_pool2d(nn.functional.relu(self.conv(x)), kernel_size=2)
        return self.fc2(nn.functional.relu(self.fc1(torch.flatten(h, 1))))


def main():
    out, bucket_cap_mb = sys.argv[1], float(sys.argv[2])
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    net = Net()
    if rank > 0:
        with torch.no_grad():
            for p in net.parameters():
                p *= -3.0  # rank 0's weights must replace these
    model = DistributedDataParallel(net, bucket_cap_mb=bucket_cap_mb) if world > 1 else net
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    data = np.random.default_rng(3)
    losses = []
    for _ in range(STEPS):
        x = data.standard_normal((BATCH, 1, 8, 8)).astype(np.float32)
        y = data.integers(0, 10, BATCH).astype(np.int32)
        rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        inputs, labels = torch.tensor(x[rows]), torch.tensor(y[rows])
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    weights = {name: p.detach().numpy().reshape(-1).tolist() for name, p in net.named_parameters()}
    buckets = model.bucket_indices if world > 1 else []
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"world": world, "losses": losses, "weights": weights, "buckets": buckets}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
