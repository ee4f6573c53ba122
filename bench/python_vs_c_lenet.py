"""One epoch of seed 003's from-scratch LeNet, the seed's train_batch loop
written in Python, on 2 devices: run with `--framework dptrain` (`import
dptrain as torch`) or `--framework torch` (PyTorch), the same code.

The seed's code (d2l "Multiple GPUs", from scratch): LeNet from F.conv2d,
F.relu, F.avg_pool2d and torch.mm; per batch, split_batch (the batch split
as torch.chunk splits it), one summed cross-entropy and one backward per
device, allreduce of every gradient (data[0][:] += data[i].to(...), then
data[i][:] = data[0].to(...)), the seed's sgd on every device, and
torch.cuda.synchronize() after each batch where the framework has devices to
wait for (dptrain always; PyTorch on a CPU computes before returning). Its
stray print() in allreduce is left out. Both frameworks time each
convolution shape's kernels (PyTorch's cudnn.benchmark, which its CPU path
does not use; dptrain's conv_algo("auto"), which `dptrain train` does by
default, reading the same cache file).

What differs between the frameworks is data only: Fashion-MNIST's IDX files
are read with numpy and held in memory as the framework's tensors before
timing (no torchvision in the bench venv, and PyTorch's DataLoader would
time Python's per-sample indexing); each batch is a slice of rows, in order
(the CLI shuffles in its C loader, on its own thread). PyTorch's
nn.parallel.scatter refuses CPU devices ("Expected a non cpu device"), so
under PyTorch on a CPU split_batch uses the same split written with
torch.chunk and .to(device); and since PyTorch's "cpu" is one device, its
two replicas are clones on it (the seed's p.to("cpu") would return the
same tensor twice).

Last line printed: `SEC_PER_EPOCH S`, the epoch's training time (from the
first batch to the last synchronize; evaluation not timed), as
bench/vs_pytorch.py reads it. Before it: the test accuracy after the timed
epoch, to show that both trained.

usage: python_vs_c_lenet.py --framework dptrain|torch [--devices 2] [--threads 2]
       [--batch-size 256] [--lr 0.2] [--data /usr/share/datasets/fashion-mnist]
"""
import argparse
import gzip
import importlib
import os
import time

import numpy as np


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", choices=["dptrain", "torch"], required=True)
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch's intra-op threads")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--profile", metavar="FILE", help="write cProfile's statistics of the epoch to FILE")
    return ap.parse_args()


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    n = int.from_bytes(buf[4:8], "big")
    if images:
        rows, cols = int.from_bytes(buf[8:12], "big"), int.from_bytes(buf[12:16], "big")
        return (np.frombuffer(buf, np.uint8, offset=16).reshape(n, 1, rows, cols) / np.float32(255)
                ).astype(np.float32)
    return np.frombuffer(buf, np.uint8, offset=8).astype(np.int64)


def main():
    args = parse_args()
    if args.framework == "dptrain":
        os.environ.setdefault("DPTRAIN_DEVICES", str(args.devices))
    torch = importlib.import_module(args.framework)
    nn = importlib.import_module(args.framework + ".nn")
    F = importlib.import_module(args.framework + ".nn.functional")
    if args.framework == "torch":
        torch.set_num_threads(args.threads)
        torch.backends.cudnn.benchmark = True  # each shape's fastest kernels (a GPU's)
    else:
        # each shape's fastest kernels, as `dptrain train` times them (its
        # default) and keeps them in the same cache file
        torch.backends.conv_algo("auto")
    torch.manual_seed(args.seed)

    def try_gpu(i=0):
        if torch.cuda.device_count() >= i + 1:
            return torch.device(f"cuda:{i}")
        return torch.device("cpu")

    devices = [try_gpu(i) for i in range(args.devices)]
    sync = torch.cuda.is_available()

    # ---- the seed's code --------------------------------------------------
    scale = 0.01
    W1 = torch.randn(size=(20, 1, 3, 3)) * scale
    b1 = torch.zeros(20)
    W2 = torch.randn(size=(50, 20, 5, 5)) * scale
    b2 = torch.zeros(50)
    W3 = torch.randn(size=(800, 128)) * scale
    b3 = torch.zeros(128)
    W4 = torch.randn(size=(128, 10)) * scale
    b4 = torch.zeros(10)
    params = [W1, b1, W2, b2, W3, b3, W4, b4]

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
        new_params = [p.detach().clone().to(device) for p in params]
        for p in new_params:
            p.requires_grad_()
        return new_params

    def allreduce(data):
        for i in range(1, len(data)):
            data[0][:] += data[i].to(data[0].device)
        for i in range(1, len(data)):
            data[i][:] = data[0].to(data[i].device)

    if args.framework == "torch" and not sync:
        def scatter(X, devices):  # what nn.parallel.scatter does, on CPU devices
            return [x.to(d) for x, d in zip(torch.chunk(X, len(devices)), devices)]
    else:
        scatter = nn.parallel.scatter

    def split_batch(X, y, devices):
        assert X.shape[0] == y.shape[0]
        return (scatter(X, devices), scatter(y, devices))

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def train_batch(X, y, device_params, devices, lr):
        X_shards, y_shards = split_batch(X, y, devices)
        ls = [loss(lenet(X_shard, device_W), y_shard).sum()
              for X_shard, y_shard, device_W in zip(X_shards, y_shards, device_params)]
        for l in ls:
            l.backward()
        with torch.no_grad():
            for i in range(len(device_params[0])):
                allreduce([device_params[c][i].grad for c in range(len(devices))])
        for param in device_params:
            sgd(param, lr, X.shape[0])

    # ---- data, in memory before timing ---------------------------------------
    label_dtype = np.int64 if args.framework == "torch" else np.int32
    X_all = torch.from_numpy(read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"), True))
    y_all = torch.from_numpy(read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"), False)
                             .astype(label_dtype))
    X_test = torch.from_numpy(read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz"), True))
    y_test = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz"), False)
    n, bs = X_all.shape[0], args.batch_size
    device_params = [get_params(params, d) for d in devices]
    if sync:
        torch.cuda.synchronize()

    # ---- the timed epoch -------------------------------------------------------
    profiler = None
    if args.profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    for i in range(0, n, bs):
        train_batch(X_all[i:i + bs], y_all[i:i + bs], device_params, devices, args.lr)
        if sync:
            torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)

    # ---- test accuracy on device 0 (not timed) ----------------------------------
    correct = 0
    with torch.no_grad():
        for i in range(0, X_test.shape[0], 1000):
            pred = lenet(X_test[i:i + 1000].to(devices[0]), device_params[0]).argmax(dim=1)
            correct += int((np.asarray(pred.to(torch.device("cpu")).numpy()) == y_test[i:i + 1000]).sum())
    print(f"{args.framework} on {[str(d) for d in devices]}: test acc {correct / X_test.shape[0]:.4f}")
    print(f"SEC_PER_EPOCH {seconds:.3f}")


if __name__ == "__main__":
    main()
