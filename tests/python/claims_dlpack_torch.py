"""DLPack between dptrain and real PyTorch in one process (claim 4).

Run by test_claims_dlpack.py under a Python that has torch, with dptrain on
PYTHONPATH. Runs each check named on the command line (all without
arguments) and prints `ok NAME` or `FAIL NAME: what differs` for each; exits
1 if any failed.
"""
import sys
import traceback

import numpy as np
import torch

import dptrain


def torch_reads_and_writes_dptrain_memory():
    t = dptrain.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4)) * 1.0
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.float32 and tuple(tt.shape) == (3, 4), (tt.dtype, tt.shape)
    assert tt.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist(), tt
    tt[1, 2] = -5.0  # a write through torch ...
    assert t.tolist()[1][2] == -5.0, t.tolist()  # ... is read through dptrain
    t[:] = t * 0 + 2.5
    t.wait_to_read()  # a write through dptrain (asynchronous: wait) ...
    assert tt.tolist() == [[2.5] * 4] * 3, tt  # ... is read through torch


def dptrain_reads_and_writes_torch_memory():
    tt = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = dptrain.from_dlpack(tt)
    assert t.dtype == dptrain.float32 and tuple(t.shape) == (2, 3), (t.dtype, t.shape)
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], t.tolist()
    tt[0, 1] = 42.0
    assert t.tolist()[0][1] == 42.0, t.tolist()
    t[:] = t * 0 + 7.0
    t.wait_to_read()
    assert tt.tolist() == [[7.0] * 3] * 2, tt
    del t  # dptrain's reference goes; torch's tensor is still whole
    assert tt.sum().item() == 42.0


def dptrain_reads_torch_int32():
    tt = torch.tensor([3, -1, 7], dtype=torch.int32)
    t = dptrain.from_dlpack(tt)
    assert t.dtype == dptrain.int32 and t.tolist() == [3, -1, 7], (t.dtype, t.tolist())
    tt[2] = 9
    assert t.tolist() == [3, -1, 9], t.tolist()


BF16_VALUES = [1.5, -2.25, 3.0, 0.0078125, -65280.0]  # exact in bfloat16


def bf16_reaches_torch_as_bfloat16():
    t = dptrain.tensor(BF16_VALUES).type(dptrain.bfloat16)
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16, tt.dtype
    f32_bits = np.array(BF16_VALUES, dtype=np.float32).view(np.uint32)
    expected_bits = (f32_bits >> 16).astype(np.uint16)  # exact values: the top half
    got_bits = tt.view(torch.int16).numpy().view(np.uint16)
    assert got_bits.tolist() == expected_bits.tolist(), (got_bits, expected_bits)


def bf16_reaches_dptrain_from_torch():
    tt = torch.tensor(BF16_VALUES, dtype=torch.bfloat16)
    t = dptrain.from_dlpack(tt)
    assert t.dtype == dptrain.bfloat16, t.dtype
    assert t.float().tolist() == BF16_VALUES, t.float().tolist()
    tt[0] = 4.0
    assert t.float().tolist()[0] == 4.0, t.float().tolist()


CHECKS = [torch_reads_and_writes_dptrain_memory, dptrain_reads_and_writes_torch_memory,
          dptrain_reads_torch_int32, bf16_reaches_torch_as_bfloat16,
          bf16_reaches_dptrain_from_torch]


def main(names):
    failed = 0
    for check in CHECKS:
        if names and check.__name__ not in names:
            continue
        try:
            check()
            print(f"ok {check.__name__}", flush=True)
        except Exception as e:  # report each check's failure, then the next
            failed += 1
            detail = "".join(traceback.format_exception(e)).strip().replace("\n", " | ")
            print(f"FAIL {check.__name__}: {detail}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
