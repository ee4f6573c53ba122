#!/usr/bin/python3
"""dptrain <-> PyTorch checkpoint compatibility: safetensors files both ways.

Check mode: load a dptrain checkpoint (safetensors, tensor names of the seed
models' PyTorch state_dict()) into the seed's PyTorch model, evaluate it and
print exactly one line, `test acc: A` (4 decimals):

  /usr/bin/python3 tests/util/pytorch_compat.py --model lenet --checkpoint FILE [--limit-test 1000]

Init mode: build the seed's model with the seed's initialisation, train it for
--steps SGD steps (lr 0.1, batch 64, training set in file order) and write its
state dict as safetensors, for `dptrain ... --init FILE` / `dptrain eval`:

  /usr/bin/python3 tests/util/pytorch_compat.py --model resnet18 --save-init FILE [--steps 5]
      [--fit-head N]

A few steps from the seed's init leave either model at chance (LeNet's 0.01
init sits on a plateau for hundreds of steps), where equal accuracies prove
little. --fit-head N makes the file's model classify without training: BatchNorm
running statistics become the exact averages over the first N training images
(ResNet), or each layer is rescaled to unit-RMS outputs (LeNet: same function
up to a positive factor, but weights and activations of order 1, so that
further SGD steps in dptrain stay stable), and the last linear layer (W4/b4,
fc.1) becomes the ridge regression of the one-hot labels on its inputs. That takes seconds and gives about 0.75 test accuracy
for LeNet (N=1000) and 0.5-0.57 for ResNet-18 (N=256-512), so a wrongly loaded
tensor shows as a different accuracy.

Models, built exactly as the seeds build them so that the names match:
  lenet     d2l's LeNet from scratch: tensors W1 (20,1,3,3) b1 W2 (50,20,5,5) b2
            W3 (800,128) b3 W4 (128,10) b4; weights randn*0.01
            (torch.manual_seed(0)), biases 0; summed cross-entropy and
            p -= lr * grad / batch.
  resnet18  d2l's resnet18(num_classes=10, in_channels=1) (multi-GPU concise
            chapter), 1x28x28 input; PyTorch's default init, then
            normal_(std=0.01) on every Linear and Conv2d weight; mean
            cross-entropy, torch.optim.SGD. Loaded with
            load_state_dict(strict=True), so "<bn>.num_batches_tracked" (I64,
            shape []) must be present.
  FILE      a dptrain model file (the body of an nn.Sequential, one module a
            line, e.g. examples/models/d2l_lenet.txt), --checkpoint only:
            nn.Sequential(*[eval("nn." + line) for line in lines]), loaded
            with strict=True; prints `params: N` (PyTorch's count) after the
            accuracy.

Tensors whose names start with "_state." (dptrain's training state) and the
"__metadata__" entry are ignored. The safetensors reader and writer are in
pytorch_compat_io.py (json + numpy); the `safetensors` package is not needed.

Exit status: 0 on success, 1 on a bad file (missing or unexpected tensor,
shape or dtype mismatch, malformed safetensors), with one error line on stderr.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

# pytorch_compat_io.py lies beside this file, which is also loaded by path
# (tests/train/cli_pytorch.sh) and imported from bench/, not only run.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_compat_io import CompatError, load, read_safetensors, write_safetensors  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
STATE_PREFIX = "_state."


# -------------------------------------------------------------------- models

LENET_SHAPES = {"W1": (20, 1, 3, 3), "b1": (20,), "W2": (50, 20, 5, 5), "b2": (50,),
                "W3": (800, 128), "b3": (128,), "W4": (128, 10), "b4": (10,)}


class LeNet:
    """The seed's list of tensors, addressed by name."""

    def __init__(self, params):
        self.params = params  # dict name -> tensor, in LENET_SHAPES order

    @classmethod
    def init(cls):
        torch.manual_seed(0)
        params = {}
        for name, shape in LENET_SHAPES.items():
            if name.startswith("W"):
                params[name] = torch.randn(size=shape) * 0.01
            else:
                params[name] = torch.zeros(shape)
        for p in params.values():
            p.requires_grad_(True)
        return cls(params)

    def __call__(self, X):
        p = self.params
        h = F.avg_pool2d(F.relu(F.conv2d(X, p["W1"], p["b1"])), kernel_size=2, stride=2)
        h = F.avg_pool2d(F.relu(F.conv2d(h, p["W2"], p["b2"])), kernel_size=2, stride=2)
        h = h.reshape(h.shape[0], -1)
        h = F.relu(torch.mm(h, p["W3"]) + p["b3"])
        return torch.mm(h, p["W4"]) + p["b4"]

    def eval(self):
        return self

    def train(self):
        return self

    def state_dict(self):
        return dict(self.params)

    def load_state_dict(self, state):
        missing = [k for k in LENET_SHAPES if k not in state]
        unexpected = [k for k in state if k not in LENET_SHAPES]
        if missing or unexpected:
            raise CompatError("Error(s) in loading state_dict for LeNet: "
                              + "; ".join(filter(None, [
                                  "Missing key(s): " + ", ".join(missing) if missing else "",
                                  "Unexpected key(s): " + ", ".join(unexpected) if unexpected else ""])))
        for k, shape in LENET_SHAPES.items():
            t = state[k]
            if tuple(t.shape) != shape:
                raise CompatError(f"size mismatch for {k}: copying a param with shape "
                                  f"{list(t.shape)} from checkpoint, the shape in "
                                  f"current model is {list(shape)}")
            if t.dtype != torch.float32:
                raise CompatError(f"{k}: dtype {t.dtype}, expected float32 (F32)")
        self.params = {k: state[k].clone() for k in LENET_SHAPES}


class Residual(nn.Module):
    """d2l's Residual block."""

    def __init__(self, input_channels, num_channels, use_1x1conv=False, strides=1):
        super().__init__()
        self.conv1 = nn.Conv2d(input_channels, num_channels, kernel_size=3, padding=1,
                               stride=strides)
        self.conv2 = nn.Conv2d(num_channels, num_channels, kernel_size=3, padding=1)
        if use_1x1conv:
            self.conv3 = nn.Conv2d(input_channels, num_channels, kernel_size=1,
                                   stride=strides)
        else:
            self.conv3 = None
        self.bn1 = nn.BatchNorm2d(num_channels)
        self.bn2 = nn.BatchNorm2d(num_channels)

    def forward(self, X):
        Y = F.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        Y += X
        return F.relu(Y)


def resnet18(num_classes=10, in_channels=1):
    """d2l's resnet18 of the multi-GPU concise chapter."""

    def resnet_block(in_channels, out_channels, num_residuals, first_block=False):
        blk = []
        for i in range(num_residuals):
            if i == 0 and not first_block:
                blk.append(Residual(in_channels, out_channels, use_1x1conv=True, strides=2))
            else:
                blk.append(Residual(out_channels, out_channels))
        return nn.Sequential(*blk)

    net = nn.Sequential(
        nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU())
    net.add_module("resnet_block1", resnet_block(64, 64, 2, first_block=True))
    net.add_module("resnet_block2", resnet_block(64, 128, 2))
    net.add_module("resnet_block3", resnet_block(128, 256, 2))
    net.add_module("resnet_block4", resnet_block(256, 512, 2))
    net.add_module("global_avg_pool", nn.AdaptiveAvgPool2d((1, 1)))
    net.add_module("fc", nn.Sequential(nn.Flatten(), nn.Linear(512, num_classes)))
    return net


def resnet18_init():
    torch.manual_seed(0)
    net = resnet18(10, 1)

    def init_weights(m):
        if type(m) in [nn.Linear, nn.Conv2d]:
            nn.init.normal_(m.weight, std=0.01)

    net.apply(init_weights)
    return net


def sequential_lines(path):
    """The module lines of a dptrain model file: comments, blanks, a
    trailing ',' and an `nn.` prefix stripped."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip().rstrip(",").strip()
            if line.startswith("nn."):
                line = line[len("nn."):]
            if line:
                lines.append(line)
    return lines


def sequential(path):
    """PyTorch's own nn.Sequential of the modules a dptrain model file names."""
    return nn.Sequential(*[eval("nn." + line) for line in sequential_lines(path)])


def load_into(model_name, state):
    """A model of `model_name` (or of the model file it names) holding
    `state` (dptrain's _state.* dropped)."""
    state = {k: v for k, v in state.items() if not k.startswith(STATE_PREFIX)}
    if model_name == "lenet":
        model = LeNet({})
        model.load_state_dict(state)
        return model
    model = resnet18(10, 1) if model_name == "resnet18" else sequential(model_name)
    expected = model.state_dict()
    for k, v in state.items():
        ref = expected.get(k)
        if ref is not None and ref.dtype != v.dtype:
            kind = "I64" if ref.dtype == torch.int64 else "F32"
            raise CompatError(f"{k}: dtype {v.dtype}, expected {ref.dtype} ({kind})")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CompatError(" ".join(str(e).split())) from None
    return model


# ------------------------------------------------------------------- actions

def evaluate(model, X, y, batch_size=256):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, X.shape[0], batch_size):
            out = model(X[i:i + batch_size])
            correct += (out.argmax(dim=1) == y[i:i + batch_size]).sum().item()
    return correct / X.shape[0]


def train_steps(model_name, model, X, y, steps, lr=0.1, batch_size=64):
    """`steps` SGD steps on consecutive batches in file order (wrapping)."""
    n = X.shape[0]
    losses = []
    if model_name == "resnet18":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()  # mean
    for s in range(steps):
        i = (s * batch_size) % n
        Xb, yb = X[i:i + batch_size], y[i:i + batch_size]
        if model_name == "lenet":
            out = model(Xb)
            l = F.cross_entropy(out, yb, reduction="none").sum()
            l.backward()
            with torch.no_grad():
                for p in model.params.values():
                    p -= lr * p.grad / Xb.shape[0]
                    p.grad.zero_()
            losses.append(l.item() / Xb.shape[0])
        else:
            opt.zero_grad()
            l = loss_fn(model(Xb), yb)
            l.backward()
            opt.step()
            losses.append(l.item())
    return losses


def features(model_name, model, X, batch_size=256):
    """Eval-mode inputs of the last linear layer, float64."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, X.shape[0], batch_size):
            Xb = X[i:i + batch_size]
            if model_name == "lenet":
                p = model.params
                h = F.avg_pool2d(F.relu(F.conv2d(Xb, p["W1"], p["b1"])), 2, 2)
                h = F.avg_pool2d(F.relu(F.conv2d(h, p["W2"], p["b2"])), 2, 2)
                h = F.relu(torch.mm(h.reshape(h.shape[0], -1), p["W3"]) + p["b3"])
            else:
                h = model[:-1](Xb).flatten(1)
            out.append(h.double())
    return torch.cat(out)


def fit_head(model_name, model, X, y, ridge=1.0, batch_size=64):
    """Makes the model classify without training it further: BatchNorm running
    statistics set to the exact averages over X (train-mode passes with
    momentum None; ResNet), or each layer rescaled to unit-RMS outputs
    (LeNet; see below), then the last linear layer replaced by the ridge
    regression of one-hot labels on its inputs (standardised). The rest of
    the network keeps its (random or trained) weights."""
    if model_name == "resnet18":
        bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average
        model.train()
        with torch.no_grad():
            for i in range(0, X.shape[0], batch_size):
                model(X[i:i + batch_size])
        for m in bns:
            m.momentum = 0.1
    if model_name == "lenet":
        # The 0.01 init leaves LeNet's activations tiny (~1e-4 at W3's
        # output), so fitted head weights would be huge and any later SGD
        # step would blow up. ReLU and average pooling are positively
        # homogeneous: scale each layer (weights by 1/s, bias by the running
        # product) so that its output has unit RMS over X. That multiplies
        # the features by one positive constant and changes nothing else.
        p = model.params
        with torch.no_grad():
            h, c = X, 1.0
            for w, b, op in (("W1", "b1", "conv"), ("W2", "b2", "conv"), ("W3", "b3", "mm")):
                p[b].mul_(c)
                if op == "conv":
                    out = F.conv2d(h, p[w], p[b])
                else:
                    out = torch.mm(h.reshape(h.shape[0], -1), p[w]) + p[b]
                s = out.pow(2).mean().sqrt().item()
                if s > 0:
                    p[w].div_(s)
                    p[b].div_(s)
                    out = out / s
                    c /= s
                h = F.relu(out)
                if op == "conv":
                    h = F.avg_pool2d(h, kernel_size=2, stride=2)
    phi = features(model_name, model, X)
    mu, sd = phi.mean(0), phi.std(0)
    sd[sd < 1e-12] = 1.0
    z = (phi - mu) / sd
    T = F.one_hot(y, 10).double() - 0.1
    n, d = z.shape
    A = z.T @ z + ridge * n * torch.eye(d, dtype=torch.float64)
    W = torch.linalg.solve(A, z.T @ T) / sd[:, None]  # (d, 10) on raw features
    b = 0.1 - mu @ W
    with torch.no_grad():
        if model_name == "lenet":
            model.params["W4"].copy_(W.float())
            model.params["b4"].copy_(b.float())
        else:
            model.fc[1].weight.copy_(W.T.float())
            model.fc[1].bias.copy_(b.float())


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Load a dptrain safetensors checkpoint into the seed's PyTorch model "
                    "and print its test accuracy, or (--save-init) write one from PyTorch.")
    ap.add_argument("--model", required=True, metavar="lenet|resnet18|FILE",
                    help="a seed's model, or a dptrain model file (an nn.Sequential body, "
                         "--checkpoint only): loaded into nn.Sequential(*modules)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--checkpoint", metavar="FILE",
                      help="evaluate this checkpoint; prints 'test acc: A'")
    mode.add_argument("--save-init", metavar="FILE",
                      help="write the seed-initialised model (after --steps steps) to FILE")
    ap.add_argument("--limit-test", type=int, default=0, metavar="N",
                    help="evaluate on the first N test images, 0 = all [0]")
    ap.add_argument("--steps", type=int, default=0,
                    help="--save-init: SGD steps (lr 0.1, batch 64, file order) before "
                         "writing [0]")
    ap.add_argument("--lr", type=float, default=0.1, help="--save-init: learning rate [0.1]")
    ap.add_argument("--batch-size", type=int, default=64,
                    help="--save-init: batch size [64]")
    ap.add_argument("--fit-head", type=int, default=0, metavar="N",
                    help="--save-init: after the steps, set BatchNorm running statistics "
                         "to the averages over the first N training images and fit the "
                         "last linear layer to them by ridge regression, so that the file "
                         "holds a model far from chance (a stronger compatibility check "
                         "than a near-chance one) [0 = off]")
    ap.add_argument("--ridge", type=float, default=None,
                    help="--fit-head: ridge penalty per sample (features standardised) "
                         "[lenet 0.01, resnet18 1.0, from a small sweep]")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads, 0 = PyTorch's default [0]")
    ap.add_argument("--data", default=DATA_DIR, metavar="DIR",
                    help=f"Fashion-MNIST IDX .gz files [{DATA_DIR}]")
    args = ap.parse_args(argv)
    if args.limit_test < 0 or args.steps < 0 or args.fit_head < 0 or args.batch_size < 1 or args.lr < 0:
        ap.error("--limit-test and --steps must be >= 0, --batch-size >= 1, --lr >= 0")
    is_file = args.model not in ("lenet", "resnet18")
    if is_file and (args.save_init or not os.path.isfile(args.model)):
        ap.error(f"--model {args.model}: not lenet or resnet18, nor a model file "
                 "(which works with --checkpoint only)")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    try:
        if args.checkpoint:
            state, _ = read_safetensors(args.checkpoint)
            model = load_into(args.model, state)
            X, y = load(args.data, "test", args.limit_test)
            print(f"test acc: {evaluate(model, X, y):.4f}")
            if is_file:
                print(f"params: {sum(p.numel() for p in model.parameters())}")
        else:
            model = LeNet.init() if args.model == "lenet" else resnet18_init()
            if args.steps > 0 or args.fit_head > 0:
                X, y = load(args.data, "train")
            if args.steps > 0:
                losses = train_steps(args.model, model, X, y, args.steps, args.lr,
                                     args.batch_size)
                print(f"# {args.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}",
                      file=sys.stderr)
            if args.fit_head > 0:
                ridge = args.ridge if args.ridge is not None else \
                    (0.01 if args.model == "lenet" else 1.0)
                fit_head(args.model, model, X[:args.fit_head], y[:args.fit_head], ridge)
            state = model.state_dict()
            write_safetensors(args.save_init, state, {
                "format": "pt", "producer": "tests/util/pytorch_compat.py",
                "model": args.model, "steps": args.steps, "fit_head": args.fit_head})
            print(f"wrote {args.save_init}: {args.model}, {len(state)} tensors, "
                  f"{args.steps} steps" + (f", head fitted on {args.fit_head} images"
                                           if args.fit_head else ""))
    except CompatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
