#!/usr/bin/env python3
"""Data-parallel scaling on paper: ring allreduce traffic vs compute per step.

usage: bench/mpi_paper.py [--lenet-step S] [--resnet-step S] [--latency US]
                          [--markdown]

For P nodes training one global batch of 256 together, each step costs
  compute      T1 / P               (T1: the step on one node, measured)
  allreduce    2 (P - 1) / P * bytes / bandwidth + 2 (P - 1) * latency
(the ring's reduce-scatter and all-gather: every node sends and receives
2 (P - 1) / P of the gradients, in 2 (P - 1) messages), without overlap of
the two. Prints, for LeNet and ResNet-18 at 10 and 100 Gb/s, the bytes each
node sends per step, both times and the speed-up over one node.
"""
import argparse

MODELS = [
    # name, parameters (= gradient floats per step), step seconds on 1 node
    ("LeNet", 129068, "lenet_step"),
    ("ResNet-18", 11175818, "resnet_step"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lenet-step", type=float, default=0.0547,
                    help="seconds per LeNet step (batch 256) on one node "
                         "[0.0547: 4682 samples/s, bench/scaling.sh, 1 core]")
    ap.add_argument("--resnet-step", type=float, default=3.6,
                    help="seconds per ResNet-18 step (batch 256) on one node "
                         "[3.6: bench/resnet_vs_pytorch.sh, 2 cores]")
    ap.add_argument("--latency", type=float, default=50.0,
                    help="microseconds per message [50: TCP between nodes]")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    a = ap.parse_args()
    steps = {"lenet_step": a.lenet_step, "resnet_step": a.resnet_step}
    head = ("model", "nodes", "Gb/s", "MB sent/node", "comm ms", "compute ms", "speed-up")
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        row = "| %s | %d | %d | %.2f | %.2f | %.2f | %.1fx |"
    else:
        print("ring allreduce per step vs compute per step, global batch 256, "
              "latency %g us per message" % a.latency)
        print("%-9s %5s %7s %12s %10s %12s %9s" % head)
        row = "%-9s %5d %7d %12.2f %10.2f %12.2f %8.1fx"
    for name, params, key in MODELS:
        nbytes = 4 * params
        t1 = steps[key]
        for gbps in (10, 100):
            for p in (2, 4, 8, 16, 32, 64):
                sent = 2 * (p - 1) / p * nbytes
                comm = sent * 8 / (gbps * 1e9) + 2 * (p - 1) * a.latency * 1e-6
                compute = t1 / p
                print(row % (name, p, gbps, sent / 1e6, comm * 1e3, compute * 1e3,
                             t1 / (compute + comm)))


if __name__ == "__main__":
    main()
