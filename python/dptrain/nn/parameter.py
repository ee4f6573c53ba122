"""nn.Parameter: a leaf tensor that requires a gradient and that a Module
registers when assigned to one of its attributes."""

from .._tensor import Tensor

__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """Parameter(data, requires_grad=True): `data`'s values as a leaf (a
    detached object over the same memory where `data` needs no gradient,
    else a copy), registered by a Module when assigned to an attribute."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from .._creation import zeros
            data = zeros(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, not {type(data).__name__}")
        t = data.detach()
        if t is data:  # the object itself: the Parameter must be another object
            t = data.clone()
        t.__class__ = cls
        if requires_grad:
            t.requires_grad_()
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (Parameter, (Tensor.detach(self), self.requires_grad))


class Buffer:
    """nn.Buffer(tensor, persistent=True): marks a tensor assigned to a
    Module attribute as a buffer (PyTorch 2.5's spelling of register_buffer)."""

    def __init__(self, data, persistent=True):
        self.data = data
        self.persistent = persistent
