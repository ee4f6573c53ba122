"""Randomized calls of dptrain's Python API: random shapes, dtypes, devices
and call orders for N seconds (claim 6).

Usage: python fuzz_api.py SECONDS [--seed S] [--trace FILE] [--skip ACTION]...
Keeps a pool of live tensors, leaves that require a gradient, optimizers
and modules, and applies random actions to random members: creation (from
Python lists, NumPy, DLPack), ops with tensors of any shape, dtype and
device (most of them wrong in some way), in-place forms with and without
no_grad, backward, .grad, reading (item, numpy, tolist, print), moving,
DLPack both ways, optimizer steps, modules and DataParallel, freeing.
A wrong call must raise ValueError, TypeError, RuntimeError or IndexError
(BufferError where NumPy itself refuses a DLPack dtype) with a one-line
message; any other exception is a failure, printed at the end (each kind
once) with the seed, the call's number and the last actions, and the run
exits 1; so does a valid call refused twice in a row. A crash (what the ASan runner looks for)
kills the process: faulthandler prints the Python stack, and the same seed
replays the same calls (--trace FILE records each one before it runs).
Where a call succeeds on inputs whose value is known, some results are
checked against NumPy.
"""
import argparse
import collections
import faulthandler
import os
import sys
import time
import traceback

os.environ.setdefault("DPTRAIN_DEVICES", "2")

import numpy as np  # noqa: E402

import dptrain as torch  # noqa: E402
from dptrain import nn, optim  # noqa: E402
from dptrain.nn import functional as F  # noqa: E402

ALLOWED = (ValueError, TypeError, RuntimeError, IndexError, BufferError)
DTYPES = [torch.float32, torch.float32, torch.int32, torch.bfloat16]
DEVICES = ["cpu", "cuda:0", "cuda:1", "cpu:1"]
POOL = 16


class Fuzz:
    def __init__(self, seed, trace=None):
        self.rng = np.random.default_rng(seed)
        self.trace = trace  # a file each action is written to before it runs (a replay's record)
        self.tensors = []
        self.optimizers = []
        self.modules = []
        self.log = collections.deque(maxlen=12)
        self.checked = 0
        self.valid_refused = []  # valid calls (known_values) refused twice in a row

    # ---- random arguments
    def shape(self):
        return tuple(int(s) for s in self.rng.integers(1, 6, size=self.rng.integers(0, 5)))

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def tensor(self):
        if not self.tensors or self.rng.random() < 0.15:
            self.create()
        return self.pick(self.tensors)

    def keep(self, t):
        if isinstance(t, torch.Tensor):
            self.tensors.append(t)
            if len(self.tensors) > POOL:
                del self.tensors[int(self.rng.integers(len(self.tensors)))]
        return t

    def note(self, what):
        self.log.append(what)
        if self.trace:
            self.trace.write(what + "\n")
            self.trace.flush()

    # ---- actions
    def create(self):
        shape, dtype, device = self.shape(), self.pick(DTYPES), self.pick(DEVICES)
        kind = int(self.rng.integers(7))
        self.note(f"create kind {kind} {shape} {dtype} {device}")
        data = self.rng.standard_normal(shape).astype(np.float32)
        if kind == 0:
            t = torch.zeros(*shape, dtype=dtype, device=device)
        elif kind == 1:
            t = torch.ones(shape, dtype=dtype, device=device)
        elif kind == 2:
            t = torch.randn(size=shape, device=device)
        elif kind == 3:
            t = torch.tensor(data.tolist(), dtype=dtype, device=device)
        elif kind == 4:
            t = torch.from_numpy(data if self.rng.random() < 0.7 else data.astype(np.int32))
        elif kind == 5:
            t = torch.from_dlpack(data)
        else:
            t = torch.full(shape, float(self.rng.standard_normal()), device=device)
        self.keep(t)

    def unary(self):
        t = self.tensor()
        ops = {
            "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "neg": lambda x: -x,
            "softmax": lambda x: F.softmax(x, dim=1), "log_softmax": lambda x: F.log_softmax(x, 1),
            "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(dim=int(self.rng.integers(-1, 4))),
            "mean": lambda x: x.mean(), "argmax": lambda x: x.argmax(dim=int(self.rng.integers(4))),
            "reshape": lambda x: x.reshape(*self.shape()), "reshape_infer": lambda x: x.reshape(-1),
            "flatten": lambda x: torch.flatten(x, 1), "t": lambda x: x.t(),
            "clone": lambda x: x.clone(),
            "detach": lambda x: x.detach(), "float": lambda x: x.float(),
            "type": lambda x: x.type(self.pick(DTYPES)), "to": lambda x: x.to(self.pick(DEVICES)),
            "rows": lambda x: x[int(self.rng.integers(-2, 4)):int(self.rng.integers(-1, 6))],
            "requires_grad": lambda x: x.requires_grad_(), "numel": lambda x: x.numel(),
            "eq_scalar": lambda x: x == 0.0, "scale": lambda x: x * float(self.rng.integers(-3, 4)),
            "div_scalar": lambda x: x / float(self.rng.integers(-1, 3)),
        }
        name = self.pick(list(ops))
        self.note(f"{name} of {tuple(t.shape)} {t.dtype} {t.device}")
        self.keep(ops[name](t))

    def binary(self):
        a, b = self.tensor(), self.tensor()
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
               "@": lambda: a @ b, "==": lambda: a == b, "mm": lambda: torch.mm(a, b),
               "cat": lambda: torch.cat([a, b], int(self.rng.integers(0, 2)))}
        name = self.pick(list(ops))
        self.note(f"{tuple(a.shape)} {a.dtype} {a.device} {name} "
                  f"{tuple(b.shape)} {b.dtype} {b.device}")
        self.keep(ops[name]())

    def known_values(self):
        """a + b, a * b and sums of NumPy data against NumPy's float32."""
        shape, device = self.shape() or (3,), self.pick(DEVICES)
        x = self.rng.standard_normal(shape).astype(np.float32)
        y = self.rng.standard_normal(shape).astype(np.float32)
        self.note(f"known values {shape} {device}")
        for attempt in range(2):  # the first may meet an error an earlier call left on the device
            try:
                a, b = torch.tensor(x, device=device), torch.tensor(y, device=device)
                got = ((a + b).numpy(), (a * b).numpy(), a.sum().item())
                break
            except ALLOWED as e:
                if attempt == 1:
                    self.valid_refused.append(
                        f"{type(e).__name__}: {e} (after {list(self.log)[-4:]})")
                    return
        np.testing.assert_allclose(got[0], x + y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[1], x * y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[2], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)
        self.checked += 1

    def in_place(self):
        a, b = self.tensor(), self.tensor()
        kind = int(self.rng.integers(5))
        guarded = self.rng.random() < 0.5
        self.note(f"in-place {kind} no_grad={guarded} {tuple(a.shape)} {a.dtype} {tuple(b.shape)}")
        with torch.no_grad() if guarded else torch.enable_grad():
            if kind == 0:
                a += b
            elif kind == 1:
                a -= 0.5 * b
            elif kind == 2:
                a[:] = b
            elif kind == 3:
                a.zero_()
            else:
                a *= 2.0

    def functional(self):
        x = self.tensor()
        kind = int(self.rng.integers(9))
        self.note(f"functional {kind} of {tuple(x.shape)} {x.dtype} {x.device}")
        k = int(self.rng.integers(0, 4))
        if kind == 0:
            w = torch.randn(size=(int(self.rng.integers(1, 4)),) + tuple(x.shape[1:2]) + (k, k))
            self.keep(F.conv2d(x, w, padding=int(self.rng.integers(0, 3)),
                               stride=int(self.rng.integers(0, 3))))
        elif kind == 1:
            self.keep(F.linear(x, torch.randn(size=(3, x.shape[-1] if x.shape else 1))))
        elif kind == 2:
            self.keep(F.avg_pool2d(x, kernel_size=k, stride=int(self.rng.integers(0, 3))))
        elif kind == 3:
            self.keep(F.max_pool2d(x, kernel_size=k, padding=int(self.rng.integers(0, 2))))
        elif kind == 4:
            self.keep(F.adaptive_avg_pool2d(x, (k, k)))
        elif kind == 5:
            c = x.shape[1] if x.ndim > 1 else 1
            self.keep(nn.BatchNorm2d(c).to(x.device)(x))
        elif kind == 6:
            self.keep(F.dropout(x, p=float(self.rng.uniform(-0.5, 1.5))))
        elif kind == 8:  # conv2d -> relu -> avg_pool2d, which the front end runs as one op
            shape = (int(self.rng.integers(1, 4)),) + tuple(x.shape[1:2]) + (k, k)
            w = torch.randn(size=shape).to(x.device)
            b = torch.zeros(shape[0]).to(x.device) if self.rng.integers(2) else None
            h = F.conv2d(x, w, b)
            r = F.relu(h) if self.rng.integers(4) else h
            for kept in (h, r, w):  # read, written or freed later, or dying now
                if self.rng.integers(2):
                    self.keep(kept)
            self.keep(F.avg_pool2d(r, kernel_size=int(self.rng.integers(1, 4))))
        else:
            rows = x.shape[0] if x.shape else 1
            labels = torch.tensor(self.rng.integers(-1, 5, size=rows).tolist())
            self.keep(F.cross_entropy(x, labels, reduction=self.pick(["mean", "sum", "none"]),
                                      label_smoothing=float(self.rng.uniform(0, 0.3))))

    def autograd(self):
        t = self.tensor()
        kind = int(self.rng.integers(3))
        self.note(f"autograd {kind} of {tuple(t.shape)} {t.dtype} requires_grad={t.requires_grad}")
        if kind == 0:
            t.backward()
        elif kind == 1:
            t.sum().backward()
        else:
            self.keep(t.grad)

    def read(self):
        t = self.tensor()
        kind = int(self.rng.integers(8))
        self.note(f"read {kind} of {tuple(t.shape)} {t.dtype} {t.device}")
        if kind == 0:
            t.item()
        elif kind == 1:
            t.numpy()
        elif kind == 2:
            t.tolist()
        elif kind == 3:
            repr(t)
        elif kind == 4:
            t.wait_to_read()
        elif kind == 5:
            torch.waitall()
        elif kind == 6:
            torch.cuda.synchronize()
        else:
            float(t)

    def dlpack(self):
        t = self.tensor()
        kind = int(self.rng.integers(4))
        self.note(f"dlpack {kind} of {tuple(t.shape)} {t.dtype} {t.device}")
        if kind == 0:
            a = np.from_dlpack(t)
            if a.size:
                a.flat[0] = 1
        elif kind == 1:
            self.keep(torch.from_dlpack(t))
        elif kind == 2:
            capsule = t.__dlpack__()
            self.keep(torch.from_dlpack(capsule))
            self.keep(torch.from_dlpack(capsule))
        else:
            t.__dlpack_device__()

    def optimizer(self):
        if not self.optimizers or self.rng.random() < 0.3:
            params = [self.tensor() for _ in range(int(self.rng.integers(1, 3)))]
            kind = self.pick(["SGD", "Adam", "AdamW"])
            self.note(f"new {kind} over {[tuple(p.shape) for p in params]}")
            lr = float(self.rng.uniform(-0.1, 0.5))
            opt = getattr(optim, kind)(params, lr=lr)
            self.optimizers.append(opt)
            self.optimizers = self.optimizers[-4:]
            return
        opt = self.pick(self.optimizers)
        self.note(f"step {type(opt).__name__}")
        opt.step() if self.rng.random() < 0.7 else opt.zero_grad()

    def module(self):
        kind = int(self.rng.integers(3))
        x = self.tensor()
        self.note(f"module {kind} on {tuple(x.shape)} {x.dtype} {x.device}")
        if kind == 0:
            net = nn.Linear(int(self.rng.integers(1, 5)), 3)
        elif kind == 1:
            net = nn.Sequential(nn.Conv2d(int(self.rng.integers(1, 4)), 2, 3, padding=1), nn.ReLU())
        else:
            net = nn.DataParallel(nn.Linear(int(self.rng.integers(1, 5)), 2),
                                  device_ids=[self.pick(DEVICES) for _ in range(2)])
        self.modules = (self.modules + [net])[-3:]
        y = self.keep(net(x))
        if self.rng.random() < 0.5:
            y.sum().backward()

    def free(self):
        if self.tensors:
            self.note("free")
            del self.tensors[int(self.rng.integers(len(self.tensors)))]

    ACTIONS = ["create", "unary", "unary", "binary", "binary", "known_values", "in_place",
               "functional", "functional", "autograd", "read", "dlpack", "optimizer", "module",
               "free"]


def wrong_exception(e):
    """Why a Python exception is a failure of the API, or None when it is
    the refusal of a wrong call (an allowed type, a one-line message)."""
    if isinstance(e, UnicodeError):  # a ValueError, but a message of bytes that are not text
        return "a message that is not UTF-8"
    if not isinstance(e, ALLOWED):
        return f"{type(e).__name__}, not ValueError/TypeError/RuntimeError/IndexError"
    message = str(e)
    if not message.strip() or "\n" in message.strip():
        return f"a message that is not one line: {message!r}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("seconds", type=float)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--trace", help="write each action to this file before it runs")
    parser.add_argument("--skip", action="append", default=[], choices=sorted(set(Fuzz.ACTIONS)),
                        help="leave this action out (to look past a known failure)")
    args = parser.parse_args()
    faulthandler.enable()
    print(f"fuzz_api: seed {args.seed}, {args.seconds:g} s", flush=True)
    fuzz = Fuzz(args.seed, open(args.trace, "w") if args.trace else None)
    end = time.monotonic() + args.seconds
    calls, refused = 0, collections.Counter()
    # Each kind of failure (why, action) once with its call and traceback;
    # the run goes on, so that one run shows every kind (and, under ASan,
    # keeps looking for crashes).
    failures = {}
    actions = [a for a in Fuzz.ACTIONS if a not in args.skip]
    while time.monotonic() < end:
        action = fuzz.pick(actions)
        try:
            with np.errstate(all="ignore"):
                getattr(fuzz, action)()
            if calls % 200 == 199:  # an asynchronous error of the last calls is raised here
                torch.waitall()
        except Exception as e:
            why = wrong_exception(e)
            if why is None:
                refused[type(e).__name__] += 1
            elif (why, action) not in failures:
                failures[(why, action)] = (calls, list(fuzz.log), traceback.format_exc())
        calls += 1
    try:
        torch.waitall()
    except ALLOWED as e:  # an asynchronous error of the last calls
        refused[type(e).__name__] += 1
    import _dptrain
    deferred, fused, computed = _dptrain._fusion_stats()
    print(f"fuzz_api: {calls} calls, refused {dict(refused)}, {fuzz.checked} value checks, "
          f"{deferred} conv2d deferred ({fused} pools fused, {computed} computed later), "
          f"no crash", flush=True)
    for (why, action), (call, log, trace) in failures.items():
        print(f"fuzz_api: FAIL: seed {args.seed} call {call} ({action}): {why}; last actions:")
        for line in log:
            print(f"  {line}")
        print(trace)
    if fuzz.valid_refused:
        print(f"fuzz_api: FAIL: {len(fuzz.valid_refused)} valid calls refused twice in a row "
              f"(a device left failed by an earlier error?); the first: {fuzz.valid_refused[0]}")
    if failures or fuzz.valid_refused:
        return 1
    return 0 if calls > 0 and fuzz.checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
