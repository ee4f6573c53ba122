"""Printing a tensor as PyTorch prints it (torch/_tensor_str.py's rules:
precision 4, line width 80, tensors over 1000 elements summarised with 3
edge items, integral floats as `1.`, scientific notation where the range
asks for it), from the values a wait has read into NumPy."""

import math

import numpy as np

__all__ = ["tensor_repr"]

PRECISION = 4
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3


class _Formatter:
    """One width and one notation for every element, as PyTorch's _Formatter."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if finite.size == 0:
            return
        absolute = np.abs(finite)
        lo, hi = float(absolute.min()), float(absolute.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                widths = (len(f"{v:.{PRECISION}e}") for v in finite.tolist())
            else:
                widths = (len(f"{v:.0f}") + 1 for v in finite.tolist())
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                widths = (len(f"{v:.{PRECISION}e}") for v in finite.tolist())
            else:
                widths = (len(f"{v:.{PRECISION}f}") for v in finite.tolist())
        self.max_width = max(self.max_width, max(widths))

    def format(self, value):
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{PRECISION}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _summarised(values):
    """The edge items PyTorch shows of a large array (what the formatter sees)."""
    if values.ndim == 0:
        return values
    n = values.shape[0]
    if values.ndim == 1:
        if n <= 2 * EDGEITEMS:
            return values
        return np.concatenate((values[:EDGEITEMS], values[-EDGEITEMS:]))
    rows = list(range(EDGEITEMS)) + list(range(n - EDGEITEMS, n)) if n > 2 * EDGEITEMS else range(n)
    return np.stack([_summarised(values[i]) for i in rows])


def _vector(values, indent, summarize, fmt):
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        data = ([fmt.format(v) for v in values[:EDGEITEMS].tolist()] + [" ..."]
                + [fmt.format(v) for v in values[-EDGEITEMS:].tolist()])
    else:
        data = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, indent, summarize, fmt):
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    n = values.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = ([_nested(values[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + ["..."]
                + [_nested(values[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)])
    else:
        rows = [_nested(values[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def values_str(values, floating, indent):
    """The bracketed values of an array, as PyTorch lays them out."""
    if values.size == 0:
        return "[]"
    summarize = values.size > THRESHOLD
    shown = _summarised(values) if summarize else values
    fmt = _Formatter(shown, floating)
    return _nested(values, indent, summarize, fmt)


def tensor_repr(values, floating, suffixes, prefix="tensor("):
    """`tensor([[1., 2.]], device='cpu:1')`: values a NumPy array (the
    tensor's, read after a wait), suffixes the keyword parts PyTorch adds."""
    indent = len(prefix)
    suffixes = list(suffixes)
    if values.size == 0 and values.ndim != 1:
        suffixes.insert(0, "size=" + str(tuple(values.shape)))
    body = values_str(values, floating, indent)
    return _add_suffixes(prefix + body, suffixes, indent)
