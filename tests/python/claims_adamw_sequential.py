"""AdamW on an nn.Sequential of Linear layers and activations (claim 3 (c)).

Usage: CLAIMS_IMPORT=torch|dptrain python claims_adamw_sequential.py DATA_DIR [--steps N]
Sequential(Linear(20, 64), ReLU, Linear(64, 32), Tanh, Linear(32, 5)) from
claims_data's "adamw_sequential" weights on one device, trained with
optim.AdamW(lr=0.01, weight_decay=0.05) and CrossEntropyLoss: prints
`step i loss L`.
"""
import os

if os.environ.get("CLAIMS_IMPORT") == "torch":
    import torch
    from torch import nn, optim
else:
    import dptrain as torch
    from dptrain import nn, optim

import argparse

import claims_data

parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()


def try_gpu(i=0):
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 5))
net.load_state_dict({name: torch.from_numpy(w)
                     for name, w in claims_data.load_params("adamw_sequential", args.data)})
device = try_gpu(0)
net.to(device)
loss = nn.CrossEntropyLoss()
optimizer = optim.AdamW(net.parameters(), lr=0.01, betas=(0.9, 0.999), weight_decay=0.05)

X_all, y_all = claims_data.load_batches(args.data)
for step in range(args.steps):
    X = torch.from_numpy(X_all[step]).to(device)
    y = torch.tensor(y_all[step]).to(device)
    optimizer.zero_grad()
    l = loss(net(X), y)
    l.backward()
    optimizer.step()
    print(f"step {step} loss {l.item()!r}", flush=True)
