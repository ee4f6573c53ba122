"""Claim 3: Python on dptrain equals PyTorch, step by step.

Each case is one script (claims_<case>.py) whose import lines pick `import
torch` or `import dptrain as torch` (the environment variable CLAIMS_IMPORT);
the rest of the script is the same code. The test writes the initial weights
and the batches as .npy (claims_data.py), runs the script once each way in
a subprocess, and compares the 20 per-step losses within 1e-5 relative:

  (a) claims_lenet_scratch.py: seed 003's from-scratch LeNet (lenet, loss,
      get_params, split_batch, allreduce, sgd, train_batch) on 2 devices;
  (b) claims_resnet_dp.py: a Python nn.Module subclass with Conv2d,
      BatchNorm2d, ReLU, MaxPool2d and a residual sum under nn.DataParallel
      over 2 devices, optim.SGD(momentum=0.9) and lr_scheduler.StepLR;
  (c) claims_adamw_sequential.py: optim.AdamW on an nn.Sequential of Linear
      layers and activations.

Devices: the scripts take d2l's try_gpu(0), try_gpu(1). Under dptrain they
are "cuda:0" and "cuda:1", which are cpu:0 and cpu:1 on a machine without
GPUs (DPTRAIN_DEVICES=2). Real PyTorch on such a machine gets "cpu" twice,
and there nn.parallel.scatter refuses CPU devices and nn.DataParallel runs
the module once on the whole batch, while on 2 GPUs each replica's batch
norm sees only its own chunk. So under real PyTorch without CUDA the scripts
install claims_torch_cpu's shim: scatter is torch.chunk, and DataParallel
applies the module per torch.chunk of the batch and concatenates the
outputs, which is what PyTorch computes on 2 GPUs.

PyTorch comes from the first Python that has it (claims_run.torch_python);
without one the test is skipped with the reason, and DP_REQUIRE_TORCH=1
(make test-interop) makes that a failure.
"""
import pytest

import claims_data
import claims_run

RTOL = 1e-5


@pytest.mark.parametrize("case", ["lenet_scratch", "resnet_dp", "adamw_sequential"])
def test_losses_equal_pytorch_per_step(case, tmp_path):
    torch_python = claims_run.need_torch_python()
    steps = claims_data.write_case(case, str(tmp_path))
    script = f"claims_{case}.py"
    theirs_out = claims_run.run_script(script, "torch", tmp_path, python=torch_python)
    ours_out = claims_run.run_script(script, "dptrain", tmp_path)
    theirs, ours = claims_run.parse_losses(theirs_out), claims_run.parse_losses(ours_out)
    print(f"{case}: dptrain {ours}\n{case}: torch   {theirs}")
    claims_run.assert_losses_close(ours, theirs, RTOL, steps)
    if case == "resnet_dp":
        # then in eval mode, with the running statistics device_ids[0]'s
        # replica kept (each step's chunk 0, as on 2 GPUs)
        ours_eval, theirs_eval = (claims_run.parse_eval_loss(out) for out in (ours_out, theirs_out))
        print(f"{case}: eval loss dptrain {ours_eval!r} torch {theirs_eval!r}")
        claims_run.assert_losses_close([ours_eval], [theirs_eval], RTOL, 1, moving=False)
