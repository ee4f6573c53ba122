#!/usr/bin/env python3
"""LeNet epoch or ResNet-18 steps with Intel's Extension for PyTorch (IPEX):
a peer of bench/lenet_vs_peers.sh and bench/resnet_vs_peers.sh.

The networks of bench/lenet_pytorch.py (the seed's LeNet, weights
randn*0.01, biases 0) and bench/resnet_pytorch.py (d2l's ResNet-18 from
tests/util/pytorch_compat.py, conv and linear weights normal(0.01)) as
nn.Modules, torch.optim.SGD (lr 0.2 / 0.1; LeNet's summed loss with
p -= lr * grad / batch is SGD on the mean loss), then
`ipex.optimize(model, optimizer=opt, dtype=torch.bfloat16)` with the forward
and loss under torch.autocast("cpu", bfloat16) (--bf16), or
`ipex.optimize(model, optimizer=opt)` in fp32. --channels-last puts model
and inputs in torch.channels_last. Output: bench/peer_data.py's contract.

  bench/.venv-ipex/bin/python bench/peer_ipex.py --model resnet18 --bf16 --channels-last
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "util"))
import peer_data  # noqa: E402

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from torch import nn  # noqa: E402


def lenet():
    net = nn.Sequential(
        nn.Conv2d(1, 20, kernel_size=3), nn.ReLU(), nn.AvgPool2d(2, 2),    # (N,20,13,13)
        nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.AvgPool2d(2, 2),   # (N,50,4,4)
        nn.Flatten(), nn.Linear(800, 128), nn.ReLU(), nn.Linear(128, 10))
    with torch.no_grad():
        for m in net:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.normal_(0, 0.01)
                m.bias.zero_()
    return net


def resnet18():
    from pytorch_compat import resnet18 as d2l_resnet18

    net = d2l_resnet18(10, 1)
    for m in net.modules():
        if type(m) in (nn.Linear, nn.Conv2d):
            nn.init.normal_(m.weight, std=0.01)
    return net


def main():
    ap = peer_data.arguments(__doc__)
    ap.add_argument("--channels-last", action="store_true")
    args = peer_data.check(ap, ap.parse_args())
    try:
        import intel_extension_for_pytorch as ipex
    except Exception as e:  # noqa: BLE001 (an import that fails on this CPU)
        print(f"PEER_SKIP intel_extension_for_pytorch does not import: {e}")
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    net = (lenet() if args.model == "lenet" else resnet18()).to(memory_format=fmt)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    net, opt = ipex.optimize(net, optimizer=opt, dtype=dtype)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        x = torch.from_numpy(x).contiguous(memory_format=fmt)
        y = torch.from_numpy(y)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def accuracy(x, y):
        net.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            for i in range(0, x.shape[0], 1000):
                xb = torch.from_numpy(x[i:i + 1000]).contiguous(memory_format=fmt)
                correct += int((net(xb).argmax(1).numpy() == y[i:i + 1000]).sum())
        net.train()
        return correct / x.shape[0]

    header = (f"# IPEX {ipex.__version__}, torch {torch.__version__}, threads "
              f"{torch.get_num_threads()}, ipex.optimize dtype {str(dtype)[6:]}, "
              f"{'bf16 autocast' if args.bf16 else 'fp32'}, "
              f"{'channels_last' if args.channels_last else 'NCHW'}")
    if args.model == "lenet":
        peer_data.lenet_epochs(args, header, step, accuracy)
    else:
        peer_data.resnet_steps(args, header, step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
