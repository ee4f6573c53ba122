"""dptrain's dtypes under PyTorch's names.

The library has three element types: float32, int32 and bfloat16. PyTorch's
int64 (`long`, the dtype of labels and of integer `tensor([...])` data) is
int32 here, and `bool` (what `==` gives in PyTorch) is int32 too: dptrain's
comparisons give 0/1 integers, and labels are int32 in every dataset."""

__all__ = ["dtype", "float32", "int32", "bfloat16", "as_dtype", "from_name"]


class dtype:
    """An element type: `dptrain.float32`, `dptrain.int32`, `dptrain.bfloat16`."""

    __slots__ = ("name", "is_floating_point", "itemsize")

    def __init__(self, name, is_floating_point, itemsize):
        self.name = name
        self.is_floating_point = is_floating_point
        self.itemsize = itemsize

    def __repr__(self):
        return "dptrain." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (from_name, (self.name,))


float32 = dtype("float32", True, 4)
int32 = dtype("int32", False, 4)
bfloat16 = dtype("bfloat16", True, 2)

_BY_NAME = {"float32": float32, "int32": int32, "bfloat16": bfloat16}
# Other spellings PyTorch and NumPy use for the same three types.
_ALIASES = {
    "float": float32, "float32": float32, "f4": float32, "<f4": float32,
    "float64": float32, "double": float32, "float16": float32,
    "int": int32, "int32": int32, "int64": int32, "long": int32, "<i4": int32,
    "int16": int32, "int8": int32, "uint8": int32, "bool": int32,
    "bfloat16": bfloat16, "bf16": bfloat16,
}


def from_name(name):
    """The dtype the extension calls `name` ("float32", "int32", "bfloat16")."""
    return _BY_NAME[name]


def as_dtype(value, func="dtype", arg="dtype"):
    """A dtype from a dtype, its name, Python's `float`/`int`/`bool` or a
    NumPy dtype; TypeError naming `func`'s argument `arg` otherwise."""
    if isinstance(value, dtype):
        return value
    if value is float:
        return float32
    if value is int or value is bool:
        return int32
    if isinstance(value, str):
        key = value[len("torch."):] if value.startswith("torch.") else value
        if key in _ALIASES:
            return _ALIASES[key]
    for attr in ("name", "__name__"):  # numpy.dtype('float32'), numpy.float32
        name = getattr(value, attr, None)
        if isinstance(name, str) and name in _ALIASES:
            return _ALIASES[name]
    text = str(value)
    for prefix in ("torch.", "dptrain."):
        if text.startswith(prefix) and text[len(prefix):] in _ALIASES:
            return _ALIASES[text[len(prefix):]]
    raise TypeError(f"{func}(): {arg} must be a dptrain dtype (dptrain.float32, dptrain.int32, "
                    f"dptrain.bfloat16), not {value!r}")
