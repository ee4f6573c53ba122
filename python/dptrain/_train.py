"""dptrain.train(model=..., devices=..., **options): one run of the library's
training loop (dp_train), with every option the command line has under its
name with `_` for `-` (`batch_size=256`, `lr=0.2`, `metrics="x.jsonl"`).

The options, their defaults and their help come from the library's option
list (dp_train_option_list) at import time, so this module never repeats
them; `train.__doc__` lists them."""

import difflib

import _dptrain

__all__ = ["train", "TrainResult"]


def _option_list():
    """[(name, flag, default_text, help)] in the list's order."""
    return list(_dptrain.train_options())


class TrainResult(dict):
    """What a run returns: a dict (test_acc, sec_per_epoch, train_loss,
    train_acc, devices, epochs_done, ...) whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"TrainResult({inner})"


def _text(name, value):
    """A Python value as the option's text, as the command line gives it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_text(name, v) for v in value)
    if hasattr(value, "__fspath__"):
        import os
        return os.fspath(value)
    raise TypeError(f"train(): `{name}` takes a number, a string, a bool or a list, "
                    f"not {type(value).__name__}")


def train(model="lenet", devices=1, **options):
    """Trains `model` (placeholder; replaced by the full docstring below)."""
    names = [o[0] for o in _option_list()]
    texts = {}
    for key, value in (("model", model), ("devices", devices)):
        options[key] = value
    for key, value in options.items():
        if key not in names and key != "model":
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise TypeError(f"train() got an unexpected keyword argument `{key}`{hint}")
    module = None
    from dptrain.nn import Module  # imported late: dptrain.nn imports this module's package
    if isinstance(model, Module):
        module = model
        options.pop("model")
    for key, value in options.items():
        texts[key] = _text(key, value)
    return TrainResult(_dptrain.train(texts, module))
