"""dptrain.utils.data: Dataset, TensorDataset, Subset and DataLoader with
PyTorch's arguments.

A DataLoader over one of the built-in datasets (dptrain.vision.datasets:
FashionMNIST, MNIST, CIFAR10, ImageFolder) is the library's C loader:
shuffling, decoding, augmentation and normalisation run on its own
threads, and each batch arrives as two tensors, X float32 (N, C, H, W)
and y int32 (N), without any sample passing through Python. Over a Python
dataset, samples are fetched with `dataset[i]` and collated by stacking
their NumPy values, as PyTorch's default_collate. `num_workers` is the
C loader's decoder threads (0: one per core the process may run on,
where PyTorch's 0 reads in the main process); over a Python dataset it is
accepted and not used."""

import collections.abc
import numbers

import numpy as np

import _dptrain

from .. import _creation, _random

__all__ = ["Dataset", "TensorDataset", "Subset", "DataLoader", "default_collate", "random_split"]


class Dataset:
    """A map-style dataset: subclasses give __getitem__ (and __len__)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")


class TensorDataset(Dataset):
    """Samples (t[i] for t in tensors): the tensors' rows, index by index."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset(): give at least one tensor")
        for t in tensors:
            if not isinstance(t, _dptrain.Tensor):
                raise TypeError(f"TensorDataset(): expected Tensors, got {type(t).__name__}")
        if any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (or fractions) in a random order: torch's
    randperm(n) from the generator, so the same subsets as PyTorch's."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        counts = [int(x * n) for x in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = np.frombuffer(_random._gen(generator, "random_split")._rng.randperm(n),
                          np.int64).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, order[start:start + k]))
        start += k
    return out


def _host_values(x):
    if isinstance(x, _dptrain.Tensor):
        return x._host_array()
    return np.asarray(x)


def default_collate(batch):
    """PyTorch's default_collate: tensors and arrays stacked into one
    tensor (cpu:0), numbers into a tensor, strings into a list, tuples,
    lists and dicts element by element."""
    elem = batch[0]
    if isinstance(elem, _dptrain.Tensor):
        stacked = np.stack([_host_values(b) for b in batch])
        return _creation.tensor(stacked, dtype=elem.dtype)
    if isinstance(elem, np.ndarray):
        return _creation.tensor(np.stack(batch))
    if isinstance(elem, bool):
        return _creation.tensor(np.array(batch, dtype=np.int32))
    if isinstance(elem, numbers.Integral):
        return _creation.tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, numbers.Real):
        return _creation.tensor(np.array(batch, dtype=np.float32))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(samples) for samples in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=False, ..., drop_last=False)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle must be a bool, not {type(shuffle).__name__}")
        if sampler is not None or batch_sampler is not None:
            raise ValueError("DataLoader: sampler and batch_sampler are not supported; "
                             "use shuffle=")
        if not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must support indexing (a map-style Dataset), "
                            f"not {type(dataset).__name__}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.collate_fn = collate_fn or default_collate
        self.generator = generator
        _random._gen(generator, "DataLoader")
        self._epoch = 0
        self._seed = _creation.next_seed()  # the C loader's augmentations
        self._c_loader = None
        c_dataset = getattr(dataset, "_c_dataset", None)
        if c_dataset is not None and collate_fn is None:
            self._c_loader = _dptrain.Loader(c_dataset, batch_size, shuffle, self._seed,
                                             workers=num_workers,
                                             **dataset._c_loader_options())

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        order = self._order()
        if self._c_loader is not None:
            return self._c_batches(epoch, order)
        return self._python_batches(order)

    def _order(self):
        """The epoch's sample order, drawn as PyTorch's DataLoader draws it:
        a seed for its workers from the generator, then, when shuffling,
        RandomSampler's seed and torch.randperm from a generator of that
        seed (or from `generator` itself when one was given). So the same
        generator state gives PyTorch's batches, and the draws after an
        epoch are PyTorch's too. None: file order."""
        gen = _random._gen(self.generator, "DataLoader")
        gen._rng.random_int64()  # _BaseDataLoaderIter's base_seed
        if not self.shuffle:
            return None
        n = len(self.dataset)
        if self.generator is None:
            rng = _dptrain.TorchRNG(gen._rng.random_int64())  # RandomSampler's own
        else:
            rng = gen._rng
        return rng.randperm(n)

    def _c_batches(self, epoch, order):
        loader = self._c_loader
        if order is None:
            loader.start_epoch(epoch)
        else:
            loader.start_epoch(epoch, order)
        while True:
            batch = loader.next()
            if batch is None:
                return
            if self.drop_last and len(batch[1]) < self.batch_size:
                continue
            yield batch

    def _python_batches(self, order):
        n = len(self.dataset)
        order = np.arange(n) if order is None else np.frombuffer(order, np.int64)
        tensors = getattr(self.dataset, "tensors", None)
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            # The rows of each batch gathered from the tensors' host values.
            host = [t._host_array() for t in tensors]
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                if self.drop_last and len(idx) < self.batch_size:
                    return
                yield [_creation.tensor(h[idx], dtype=t.dtype) for h, t in zip(host, tensors)]
            return
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            if self.drop_last and len(idx) < self.batch_size:
                return
            yield self.collate_fn([self.dataset[int(i)] for i in idx])
