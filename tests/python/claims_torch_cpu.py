"""What PyTorch does on 2 GPUs, for real PyTorch on a machine without them.

Used only by the claim scripts' `import torch` branch. On a CPU-only
machine d2l's try_gpu(i) gives torch.device("cpu") for every i, and then:
  - nn.parallel.scatter refuses CPU devices ("Expected a non cpu device");
    on GPUs it is torch.chunk along dimension 0, each chunk copied to its
    device: on one CPU device, the chunks themselves;
  - nn.DataParallel runs the module once on the whole batch, while on 2 GPUs
    each replica runs on its own torch.chunk of the batch (its batch norm
    sees its chunk's statistics) and the outputs are concatenated on
    device_ids[0], the gradients of the replicas summed into the module;
  - tensor.to(device) is the tensor itself when it is already there, so
    that get_params(params, d) for d in [cpu, cpu] gives the same tensors
    twice (one set of parameters, updated twice a step), where on 2 GPUs it
    gives two copies: .to copies here, recorded for autograd as
    PyTorch's copy to another device is;
  - torch.cuda.synchronize (the seed calls it every step) refuses to run
    without CUDA; on the CPU there is nothing to wait for.
install(torch) puts those in place when torch has no CUDA device, so
that the scripts' code is the same under both imports and computes what
PyTorch computes on 2 GPUs. With CUDA devices it changes nothing.
"""


def install(torch):
    if torch.cuda.is_available():
        return
    nn = torch.nn

    def scatter(inputs, target_gpus, dim=0):
        return list(torch.chunk(inputs, len(target_gpus), dim))

    class ChunkedDataParallel(nn.Module):
        """The module applied per torch.chunk of the batch, outputs concatenated."""

        def __init__(self, module, device_ids=None, output_device=None, dim=0):
            super().__init__()
            self.module = module
            self.replicas = len(device_ids) if device_ids is not None else 1
            self.dim = dim

        def forward(self, inputs):
            chunks = torch.chunk(inputs, self.replicas, self.dim)
            outputs = [self.module(chunks[0])]
            # On GPUs only device_ids[0]'s replica shares the module's
            # buffers: the other replicas update copies, which are dropped
            # (swapped in and out as objects: autograd keeps the module's).
            owners = [(m, name, b) for m in self.module.modules()
                      for name, b in m._buffers.items() if b is not None]
            for chunk in chunks[1:]:
                for m, name, b in owners:
                    m._buffers[name] = b.clone()
                outputs.append(self.module(chunk))
            for m, name, b in owners:
                m._buffers[name] = b
            return torch.cat(outputs, self.dim)

    plain_to = torch.Tensor.to

    def to_another_device(self, *args, **kwargs):
        moved = plain_to(self, *args, **kwargs)
        return moved.clone() if moved is self else moved

    torch.Tensor.to = to_another_device
    nn.parallel.scatter = scatter
    nn.DataParallel = ChunkedDataParallel
    torch.cuda.synchronize = lambda device=None: None  # CPU work is done when a call returns
