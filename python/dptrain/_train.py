"""dptrain.train(model=..., devices=..., **options): one run of the library's
training loop (dp_train), with every option the command line has, under its
flag's name with `_` for `-` (`batch_size=256`, `lr=0.2`, `epochs=10`,
`metrics="x.jsonl"`, `no_shuffle=True`), or under the option's own name
where it has no flag.

The options, their defaults and their help come from the library's option
list (dp_train_option_list) when this module is imported: nothing here
repeats them, and `help(dptrain.train)` lists them all."""

import difflib
import os
import threading
import textwrap

import _dptrain

__all__ = ["train", "TrainResult"]

# (keyword, name, flag, metavar, default, help, group title), the list's order.
_OPTIONS = _dptrain.train_options()
# Every keyword train() takes: the flags' names, and the options' own names
# (metrics_path, shuffle) as the library's messages call them.
_KEYWORDS = sorted({row[0] for row in _OPTIONS} | {row[1] for row in _OPTIONS})


class TrainResult(dict):
    """What a run returns: a dict whose keys are also attributes.

    test_acc       test accuracy after the last epoch
    sec_per_epoch  mean training time per epoch, evaluation excluded
    train_loss, train_acc   the last epoch's
    devices        "[cpu:0, cpu:1]"
    epochs_done, best_test_acc, best_epoch, early_stopped"""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"TrainResult has no {name!r}") from None

    def __repr__(self):
        return "TrainResult(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"


def _text(keyword, value):
    """A Python value as the option's text, as the command line gives it:
    True/False as on/off, numbers in Python's shortest form, a list or tuple
    as its items joined by commas (devices=["cpu:0", "cpu:1"],
    lr_milestones=(30, 60), betas=(0.9, 0.999)), a path as its text."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)) and value:
        return ",".join(_text(keyword, v) for v in value)
    raise TypeError(f"train(): `{keyword}` takes a number, a str, a bool, a path or a list of "
                    f"them, not {type(value).__name__}")


# Other libraries' names of some options, which spelling alone would not find.
_OTHER_NAMES = {"learning_rate": "lr", "num_epochs": "epochs", "device": "devices",
                "device_ids": "devices", "max_epochs": "epochs"}


def _check_keyword(keyword):
    if keyword in _KEYWORDS:
        return
    close = ([_OTHER_NAMES[keyword]] if keyword in _OTHER_NAMES
             else difflib.get_close_matches(keyword, _KEYWORDS, n=1, cutoff=0.5))
    hint = f"; did you mean `{close[0]}`?" if close else ""
    raise TypeError(f"train() got an unexpected keyword argument `{keyword}`{hint}")


def train(model="lenet", devices=1, **options):
    # The docstring is made from the option list below.
    from .nn import Module  # dptrain.nn imports the package that imports this module
    texts = {}
    module = None
    if isinstance(model, Module):
        module = model
    elif isinstance(model, (str, os.PathLike)):
        texts["model"] = _text("model", model)
    else:
        raise TypeError("train(): model must be a built-in name (\"lenet\", \"resnet18\"), the "
                        "path of an nn.Sequential file or an ONNX model, or a dptrain.nn.Module, "
                        f"not {type(model).__name__}")
    texts["devices"] = _text("devices", devices)
    for keyword, value in options.items():
        _check_keyword(keyword)
        if keyword == "model":
            raise TypeError("train(): `model` is the first argument")
        if value is None:
            continue  # the option's default, as leaving it out
        texts[keyword] = _text(keyword, value)
    # Under mpirun the run spans the ranks, as `mpirun dptrain train` does.
    from . import distributed
    if _dptrain.dist_launched() and not distributed.is_initialized():
        distributed.init_process_group("mpi")
    handle_sigint = threading.current_thread() is threading.main_thread()
    return TrainResult(_dptrain.train(texts, module, handle_sigint))


def _doc():
    lines = [
        "train(model=\"lenet\", devices=1, **options) -> TrainResult",
        "",
        "Trains `model` with the library's training loop (`dptrain train`'s), the",
        "GIL released while it runs; Ctrl-C stops it after the current step with",
        "KeyboardInterrupt (a checkpoint is written that `resume=` goes on from).",
        "",
        "model: a built-in name (\"lenet\", \"resnet18\"), the path of a file of",
        "  nn.Sequential modules or of an ONNX model, or a dptrain.nn.Module, whose",
        "  parameters start the run and hold the trained values after it.",
        "devices: a number (the first N GPUs, else N CPU devices), a list",
        "  [\"cpu:0\", \"cpu:1\"] or \"auto\"; under mpirun, each rank's own (the",
        "  process group is started if it was not).",
        "",
        "Every option of `dptrain train`, its flag's name with `_` for `-`",
        "(a switch takes True); each option's own name is taken too:",
    ]
    group = None
    for keyword, name, flag, metavar, default, help_text, title in _OPTIONS:
        if keyword in ("model", "devices"):
            continue
        if title != group:
            group = title
            lines += ["", f"{title}:"]
        value = "False" if metavar is None else default
        alias = f" (or {name})" if name != keyword else ""
        lines.append(f"  {keyword}={value}{alias}")
        lines += textwrap.wrap(help_text, 72, initial_indent="      ", subsequent_indent="      ")
    lines += ["", "Returns a TrainResult: test_acc, sec_per_epoch, train_loss, train_acc,",
              "devices, epochs_done, best_test_acc, best_epoch, early_stopped.",
              "Unknown keywords raise TypeError naming the closest one; bad values",
              "ValueError with the library's one-line message."]
    return "\n".join(lines)


train.__doc__ = _doc()
