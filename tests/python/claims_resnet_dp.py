"""A Python nn.Module with a residual sum under nn.DataParallel (claim 3 (b)).

Usage: CLAIMS_IMPORT=torch|dptrain python claims_resnet_dp.py DATA_DIR [--steps N]
ResidualNet (Conv2d, BatchNorm2d, ReLU, a residual sum, MaxPool2d, Linear)
from claims_data's "resnet_dp" weights, wrapped in nn.DataParallel over 2
devices, trained with optim.SGD(momentum=0.9) and lr_scheduler.StepLR
stepped every step (the rate halves every 5 steps): prints `step i loss L`.
Each replica's batch norm normalises its own chunk of the batch, as on 2
GPUs (claims_torch_cpu gives real PyTorch that behaviour without GPUs).
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

import claims_data

parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()


class ResidualNet(nn.Module):
    # x (N, 3, 16, 16) -> conv1, bn1, relu: h (N, 8, 16, 16)
    #   -> conv2, bn2, + h, relu, 2x2 max pool: (N, 8, 8, 8) -> fc: (N, 10)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        h = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(h)) + h)
        y = self.pool(y)
        return self.fc(y.reshape(y.shape[0], -1))


def try_gpu(i=0):
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


model = ResidualNet()
initial = dict(claims_data.load_params("resnet_dp", args.data))
with torch.no_grad():
    for name, p in model.named_parameters():
        p[:] = torch.from_numpy(initial.pop(name))
assert not initial, f"parameters the model lacks: {sorted(initial)}"

devices = [try_gpu(0), try_gpu(1)]
model.to(devices[0])
net = nn.DataParallel(model, device_ids=devices)
loss = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.005, momentum=0.9)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)

X_all, y_all = claims_data.load_batches(args.data)
net.train()
for step in range(args.steps):
    X = torch.from_numpy(X_all[step]).to(devices[0])
    y = torch.tensor(y_all[step]).to(devices[0])
    optimizer.zero_grad()
    l = loss(net(X), y)
    l.backward()
    optimizer.step()
    scheduler.step()
    print(f"step {step} loss {l.item()!r}", flush=True)

# Evaluation mode: every replica normalises with the running statistics,
# which device_ids[0]'s replica kept up to date from its own chunk.
net.eval()
with torch.no_grad():
    X = torch.from_numpy(X_all[0]).to(devices[0])
    y = torch.tensor(y_all[0]).to(devices[0])
    print(f"eval loss {loss(net(X), y).item()!r}", flush=True)
