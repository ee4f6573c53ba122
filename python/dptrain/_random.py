"""PyTorch's CPU generator, bit for bit: `Generator`, the default one that
`manual_seed` seeds, and the draws the creation functions, nn.init and the
DataLoader make from it.

`dptrain.manual_seed(s)` followed by `randn`, `rand`, `normal`, `randperm`,
`nn.init.uniform_`/`normal_` (and the inits built on them) gives the numbers
that `torch.manual_seed(s)` and the same calls give in PyTorch on an x86 CPU
with AVX2 (PyTorch's own kernels differ below that), and a DataLoader with
`shuffle=True` visits the samples in the order PyTorch's does
(tests/python/test_torch_rng.py). The generator is the Mersenne Twister in
the extension (python/src/torch_rng.c).

One difference: PyTorch seeds its default generator from the operating
system at start-up; dptrain's starts from a fixed seed, 67280421310721 (the
default that PyTorch's generators are given in C++), so an unseeded script
draws the same numbers on every run."""

import os

import _dptrain

__all__ = ["Generator", "default_generator", "manual_seed", "initial_seed", "seed",
           "get_rng_state", "set_rng_state", "next_seed"]

_DEFAULT_SEED = 67280421310721
_MASK64 = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


class Generator:
    """torch.Generator(device="cpu"): a generator of its own, for the
    `generator=` arguments."""

    def __init__(self, device="cpu"):
        if str(device) not in ("cpu", "cpu:0"):
            raise ValueError(f"Generator(): only CPU generators exist (the draws are made on "
                             f"the host), not {device!r}")
        self.device = device
        self._rng = _dptrain.TorchRNG(_DEFAULT_SEED)

    def manual_seed(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"manual_seed(): seed must be an int, not {type(seed).__name__}")
        self._rng.manual_seed(seed)
        return self

    def initial_seed(self):
        return self._rng.initial_seed()

    def seed(self):
        """Seeds from the operating system, as torch.Generator.seed()."""
        s = int.from_bytes(os.urandom(8), "little")
        self._rng.manual_seed(s)
        return s

    def get_state(self):
        """The whole state, as bytes (PyTorch returns a uint8 tensor)."""
        return self._rng.get_state()

    def set_state(self, state):
        self._rng.set_state(bytes(state))
        return self


default_generator = Generator()
_loader_seeds = 0  # next_seed's count since the last manual_seed


def _gen(generator, func):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"{func}(): generator must be a dptrain.Generator, not "
                        f"{type(generator).__name__}")
    return generator


def manual_seed(seed):
    """Seeds the default generator (and dropout's masks), as torch.manual_seed."""
    global _loader_seeds
    default_generator.manual_seed(seed)
    _loader_seeds = 0
    _dptrain.dropout_seed(seed & _MASK64)
    return default_generator


def initial_seed():
    return default_generator.initial_seed()


def seed():
    """Seeds from the operating system, as torch.seed(); returns the seed."""
    s = int.from_bytes(os.urandom(8), "little")
    manual_seed(s)
    return s


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def next_seed():
    """A seed for the library's own counter-based draws (a loader's
    augmentations): a pure function of the default seed and how many came
    before. It leaves PyTorch's stream alone, as PyTorch's DataLoader
    draws nothing when it is made."""
    global _loader_seeds
    s = _splitmix64(initial_seed() ^ _splitmix64(_loader_seeds))
    _loader_seeds += 1
    return s
