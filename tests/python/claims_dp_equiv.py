"""A Python nn.Module without batch norm, on 1 device or under nn.DataParallel (claim 2).

Usage: CLAIMS_IMPORT=torch|dptrain python claims_dp_equiv.py DATA_DIR OUT_DIR --gpus G
SmallNet (Conv2d, ReLU, MaxPool2d, two Linear) from claims_data's "dp_equiv"
weights, trained 20 steps with optim.SGD(momentum=0.9) on the whole batch:
with --gpus 1 the module itself on try_gpu(0), with --gpus 2 or more
nn.DataParallel(model, device_ids=[try_gpu(0), ...]). Prints `step i loss L`
and writes the parameters after the last step as OUT_DIR/<name>.npy.
Without batch norm nothing depends on how the batch is split, so both must
end at the same weights up to float rounding.
"""
import os

if os.environ.get("CLAIMS_IMPORT") == "torch":
    import torch
    from torch import nn, optim
    import claims_torch_cpu
    claims_torch_cpu.install(torch)
else:
    import dptrain as torch
    from dptrain import nn, optim

import argparse

import numpy as np

import claims_data

parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.add_argument("out")
parser.add_argument("--gpus", type=int, default=1)
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()


class SmallNet(nn.Module):
    # x (N, 3, 12, 12) -> conv, relu, 2x2 max pool: (N, 6, 6, 6)
    #   -> fc1, relu: (N, 32) -> fc2: (N, 4)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(216, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.pool(torch.relu(self.conv(x)))
        h = torch.relu(self.fc1(h.reshape(h.shape[0], -1)))
        return self.fc2(h)


def try_gpu(i=0):
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


model = SmallNet()
initial = dict(claims_data.load_params("dp_equiv", args.data))
with torch.no_grad():
    for name, p in model.named_parameters():
        p[:] = torch.from_numpy(initial.pop(name))
assert not initial, f"parameters the model lacks: {sorted(initial)}"

devices = [try_gpu(i) for i in range(args.gpus)]
model.to(devices[0])
net = model if args.gpus == 1 else nn.DataParallel(model, device_ids=devices)
loss = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.02, momentum=0.9)

X_all, y_all = claims_data.load_batches(args.data)
for step in range(args.steps):
    X = torch.from_numpy(X_all[step]).to(devices[0])
    y = torch.tensor(y_all[step]).to(devices[0])
    optimizer.zero_grad()
    l = loss(net(X), y)
    l.backward()
    optimizer.step()
    print(f"step {step} loss {l.item()!r}", flush=True)

for name, p in model.named_parameters():
    np.save(os.path.join(args.out, f"{name}.npy"), p.detach().numpy())
