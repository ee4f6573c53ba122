#!/usr/bin/env python3
"""Data-parallel scaling on paper: ring allreduce traffic vs compute per step.

usage: bench/mpi_paper.py [--lenet-step S] [--resnet-step S] [--latency US]
                          [--hidden F] [--markdown]

For P nodes training one global batch of 256 together, each step costs
  compute      T1 / P               (T1: the step on one node, measured)
  allreduce    2 (P - 1) / P * bytes / bandwidth + 2 (P - 1) * latency
(the ring's reduce-scatter and all-gather: every node sends and receives
2 (P - 1) / P of the gradients, in 2 (P - 1) messages). Prints, for LeNet
and ResNet-18 at 10 and 100 Gb/s, the bytes each node sends per step, both
times and the speed-up over one node without overlap (step = compute +
comm); then with a fraction F of the communication hidden behind the
backward pass by gradient buckets (--hidden F, as bench/overlap.sh
measures it: 1 - exposed_comm_ms / comm_ms):
  exposed      (1 - F) * comm
  step         compute + exposed
  speed-up     T1 / step,   efficiency = speed-up / P.
F = 0 (the default) is no overlap: the two speed-ups agree. F is measured
at one ratio of communication to compute; the buckets cannot hide more than
the backward pass lasts, so the model is optimistic where comm outgrows the
compute (more nodes, slower links).
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
                         "[3.6: bench/resnet_vs_peers.sh, 2 cores]")
    ap.add_argument("--latency", type=float, default=50.0,
                    help="microseconds per message [50: TCP between nodes]")
    ap.add_argument("--hidden", type=float, default=0.0,
                    help="fraction of the communication hidden behind the backward pass "
                         "(bench/overlap.sh's 1 - exposed/comm) [0: no overlap]")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    a = ap.parse_args()
    if not 0.0 <= a.hidden <= 1.0:
        ap.error("--hidden must be a fraction from 0 to 1, got %g" % a.hidden)
    steps = {"lenet_step": a.lenet_step, "resnet_step": a.resnet_step}
    head = ("model", "nodes", "Gb/s", "MB sent/node", "comm ms", "compute ms", "speed-up",
            "exposed ms", "step ms", "speed-up w/ overlap", "efficiency")
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        row = "| %s | %d | %d | %.2f | %.2f | %.2f | %.1fx | %.2f | %.2f | %.1fx | %.0f%% |"
    else:
        print("ring allreduce per step vs compute per step, global batch 256, "
              "latency %g us per message, %.0f%% of the communication hidden"
              % (a.latency, 100 * a.hidden))
        print("%-9s %5s %5s %12s %10s %11s %8s %11s %10s %9s %10s"
              % (head[:9] + ("overlapped", "efficiency")))
        row = "%-9s %5d %5d %12.2f %10.2f %11.2f %7.1fx %11.2f %10.2f %8.1fx %9.0f%%"
    for name, params, key in MODELS:
        nbytes = 4 * params
        t1 = steps[key]
        for gbps in (10, 100):
            for p in (2, 4, 8, 16, 32, 64):
                sent = 2 * (p - 1) / p * nbytes
                comm = sent * 8 / (gbps * 1e9) + 2 * (p - 1) * a.latency * 1e-6
                compute = t1 / p
                exposed = (1.0 - a.hidden) * comm
                step = compute + exposed
                print(row % (name, p, gbps, sent / 1e6, comm * 1e3, compute * 1e3,
                             t1 / (compute + comm), exposed * 1e3, step * 1e3, t1 / step,
                             100 * t1 / step / p))


if __name__ == "__main__":
    main()
