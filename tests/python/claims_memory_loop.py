"""The from-scratch training loop for many steps, with the process's RSS (claim 7).

Usage: CLAIMS_IMPORT=torch|dptrain python claims_memory_loop.py STEPS
A two-layer perceptron in the seed's from-scratch style on 2 devices
(get_params, split_batch, one loss per device, backward, allreduce, sgd,
cuda.synchronize every step), batches of 16 samples of 20 features. Prints
`rss STEP BYTES` (/proc/self/statm's resident pages) after step 100 and
every 500 steps after it, then `loss first L0 last L` (the loop must learn,
so that it is doing the work it claims).
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

import sys

import numpy as np

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def try_gpu(i=0):
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def net(X, params):
    h = F.relu(torch.mm(X, params[0]) + params[1])
    return torch.mm(h, params[2]) + params[3]


loss = nn.CrossEntropyLoss(reduction="none")


def get_params(params, device):
    # .clone(): a copy on every device, the host's tensors left as they are
    # (as on GPUs; here "cpu" is device 0 itself, where .to gives the tensor)
    new_params = [p.to(device).clone() for p in params]
    for p in new_params:
        p.requires_grad_()
    return new_params


def allreduce(data):
    for i in range(1, len(data)):
        data[0][:] += data[i].to(data[0].device)
    for i in range(1, len(data)):
        data[i][:] = data[0].to(data[i].device)


def split_batch(X, y, devices):
    return (nn.parallel.scatter(X, devices), nn.parallel.scatter(y, devices))


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def train_batch(X, y, device_params, devices, lr):
    X_shards, y_shards = split_batch(X, y, devices)
    ls = [loss(net(X_shard, W), y_shard).sum()
          for X_shard, y_shard, W in zip(X_shards, y_shards, device_params)]
    for l in ls:
        l.backward()
    with torch.no_grad():
        for i in range(len(device_params[0])):
            allreduce([device_params[c][i].grad for c in range(len(devices))])
    for param in device_params:
        sgd(param, lr, X.shape[0])
    return ls


steps = int(sys.argv[1])
rng = np.random.default_rng(7)
params = [torch.from_numpy((0.3 * rng.standard_normal((20, 32))).astype(np.float32)),
          torch.zeros(32),
          torch.from_numpy((0.3 * rng.standard_normal((32, 4))).astype(np.float32)),
          torch.zeros(4)]
devices = [try_gpu(0), try_gpu(1)]
device_params = [get_params(params, d) for d in devices]
templates = rng.standard_normal((4, 20)).astype(np.float32)
# 64 batches, cycled: the data is not what grows
labels = rng.integers(0, 4, size=(64, 16))
inputs = (templates[labels] + 0.5 * rng.standard_normal((64, 16, 20))).astype(np.float32)
batches = [(torch.from_numpy(inputs[i]), torch.tensor(labels[i])) for i in range(64)]
first = last = None
for step in range(1, steps + 1):
    X, y = batches[step % 64]
    ls = train_batch(X, y, device_params, devices, lr=0.1)
    torch.cuda.synchronize()
    if step == 1 or step == steps:
        value = sum(float(l) for l in ls) / X.shape[0]
        first = value if step == 1 else first
        last = value
    if step == 100 or (step > 100 and step % 500 == 0) or step == steps:
        print(f"rss {step} {rss_bytes()}", flush=True)
print(f"loss first {first!r} last {last!r}", flush=True)
