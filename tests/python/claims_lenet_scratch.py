"""Seed 003's from-scratch LeNet on 2 devices, 20 steps (claims 2 and 3).

Usage: CLAIMS_IMPORT=torch|dptrain python claims_lenet_scratch.py DATA_DIR
           [--steps N] [--gpus G] [--lr LR] [--save-weights DIR]
DATA_DIR holds claims_data.write_case("lenet_scratch", ...)'s arrays. Prints
`step i loss L` per step (the mean of the batch's losses over both
devices); --save-weights writes device 0's parameters after the last step
as W1.npy .. b4.npy (claim 2 compares them with the C program's bits).
Below the imports this is the seed's code (lenet, loss, get_params,
allreduce, split_batch, sgd, train_batch), the initial weights and the
batches read from files instead of torch.randn and Fashion-MNIST.
"""
import os

if os.environ.get("CLAIMS_IMPORT") == "torch":
    import torch
    from torch import nn
    from torch.nn import functional as F
    import claims_torch_cpu
    claims_torch_cpu.install(torch)
else:
    import dptrain as torch
    from dptrain import nn
    from dptrain.nn import functional as F

import argparse

import numpy as np

import claims_data

parser = argparse.ArgumentParser()
parser.add_argument("data")
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--gpus", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--save-weights")
args = parser.parse_args()

params = [torch.from_numpy(w) for _, w in claims_data.load_params("lenet_scratch", args.data)]


def lenet(X, params):
    h1_conv = F.conv2d(input=X, weight=params[0], bias=params[1])
    h1_activation = F.relu(h1_conv)
    h1 = F.avg_pool2d(input=h1_activation, kernel_size=(2, 2), stride=(2, 2))
    h2_conv = F.conv2d(input=h1, weight=params[2], bias=params[3])
    h2_activation = F.relu(h2_conv)
    h2 = F.avg_pool2d(input=h2_activation, kernel_size=(2, 2), stride=(2, 2))
    h2 = h2.reshape(h2.shape[0], -1)
    h3_linear = torch.mm(h2, params[4]) + params[5]
    h3 = F.relu(h3_linear)
    y_hat = torch.mm(h3, params[6]) + params[7]
    return y_hat


loss = nn.CrossEntropyLoss(reduction="none")


def get_params(params, device):
    new_params = [p.to(device) for p in params]
    for p in new_params:
        p.requires_grad_()
    return new_params


def try_gpu(i=0):
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def allreduce(data):
    for i in range(1, len(data)):
        data[0][:] += data[i].to(data[0].device)
    for i in range(1, len(data)):
        data[i][:] = data[0].to(data[i].device)


def split_batch(X, y, devices):
    assert X.shape[0] == y.shape[0]
    return (nn.parallel.scatter(X, devices), nn.parallel.scatter(y, devices))


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def train_batch(X, y, device_params, devices, lr):
    X_shards, y_shards = split_batch(X, y, devices)
    ls = [
        loss(lenet(X_shard, device_W), y_shard).sum()
        for X_shard, y_shard, device_W in zip(X_shards, y_shards, device_params)
    ]
    for l in ls:
        l.backward()
    with torch.no_grad():
        for i in range(len(device_params[0])):
            allreduce([device_params[c][i].grad for c in range(len(devices))])
    for param in device_params:
        sgd(param, lr, X.shape[0])
    return ls


devices = [try_gpu(i) for i in range(args.gpus)]
device_params = [get_params(params, d) for d in devices]
X_all, y_all = claims_data.load_batches(args.data)
for step in range(args.steps):
    X, y = torch.from_numpy(X_all[step]), torch.tensor(y_all[step])
    ls = train_batch(X, y, device_params, devices, lr=args.lr)
    print(f"step {step} loss {sum(float(l) for l in ls) / X.shape[0]!r}", flush=True)

if args.save_weights:
    for (name, _), p in zip(claims_data.CASES["lenet_scratch"][0], device_params[0]):
        np.save(os.path.join(args.save_weights, f"{name}.npy"), p.detach().numpy())
