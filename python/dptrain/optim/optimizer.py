"""optim.Optimizer: PyTorch's base class (param_groups, state_dict,
zero_grad) over the library's optimizers. Each parameter group's
parameters on one device are packed into one buffer (`_dptrain.Optimizer`,
dp_params), so a step is one kernel over one buffer per group and device,
the update the C training loop makes."""

from collections import defaultdict

import _dptrain

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# The options a C optimizer takes once; a group may change only lr (and
# momentum or betas[0], which schedules cycle) after construction.
_FIXED = ("weight_decay", "nesterov", "beta2", "eps")


class Optimizer:
    """Base class: subclasses give `_kind` ("sgd", "adam", "adamw") and
    `_c_options(group)`, the keyword arguments of `_dptrain.Optimizer`."""

    _kind = None

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, _dptrain.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)
        self._engines = []  # [(group, [params], _dptrain.Optimizer, options it was made with)]
        self._build()

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += "\nParameter Group {}".format(i)
            for key in sorted(group.keys()):
                if key != "params":
                    text += "\n    {}: {}".format(key, group[key])
        return text + "\n)"

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _dptrain.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, _dptrain.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.requires_grad:
                raise ValueError("optimizer: every parameter must require a gradient "
                                 "(requires_grad_())")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
        if hasattr(self, "_engines"):
            self._build_group(param_group)

    # ---- the library's optimizers, one per group and device -------------------
    def _build(self):
        for group in self.param_groups:
            self._build_group(group)

    def _build_group(self, group):
        by_device = {}
        for p in group["params"]:
            by_device.setdefault(_dptrain.Tensor.device.__get__(p), []).append(p)
        for params in by_device.values():
            options = self._c_options(group)
            engine = _dptrain.Optimizer(params, self._kind, options["lr"], options["momentum"],
                                        options["nesterov"], options["weight_decay"],
                                        options["beta1"], options["beta2"], options["eps"])
            self._engines.append((group, params, engine, options))

    def _sync_options(self, group, engine, made_with):
        """Passes the group's lr and momentum (as schedules set them) to the
        library's optimizer; other options are fixed once it is made."""
        now = self._c_options(group)
        for key in _FIXED:
            if key in now and now[key] != made_with[key]:
                raise ValueError(f"{type(self).__name__}: {key} cannot change after the "
                                 f"optimizer is made ({made_with[key]} -> {now[key]})")
        if now["lr"] != made_with["lr"]:
            engine.set_lr(now["lr"])
            made_with["lr"] = now["lr"]
        if now["momentum"] != made_with["momentum"]:
            engine.set_momentum(now["momentum"])
            made_with["momentum"] = now["momentum"]

    @staticmethod
    def _check_number(value, name, low=0.0, high=None, text=None):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
        if value < low or (high is not None and value >= high):
            raise ValueError(text or f"Invalid {name} value: {value}")

    def step(self, closure=None):
        """One update of every parameter from its gradient (enqueued)."""
        loss = None
        if closure is not None:
            from .._grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        for group, params, engine, made_with in self._engines:
            self._sync_options(group, engine, made_with)
            engine.step()
        return loss

    def zero_grad(self, set_to_none=True):
        """Zeroes every gradient (one fill per buffer); with set_to_none,
        `p.grad` reads None until the next backward, as PyTorch's."""
        for group, params, engine, made_with in self._engines:
            engine.zero_grad()
            if set_to_none:
                for p in params:
                    p.grad = None

    # ---- state dicts ----------------------------------------------------------
    def state_dict(self):
        """PyTorch's layout: {'state': {index: {name: tensor}}, 'param_groups':
        [{options..., 'params': [indices]}]}, parameters numbered in order."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for group, params, engine, made_with in self._engines:
            for i, entry in enumerate(engine.state()):
                state[index[id(params[i])]] = dict(entry)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        for mine, theirs in zip(self.param_groups, groups):
            for key, value in theirs.items():
                if key != "params":
                    mine[key] = value
        index = {}
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
        saved = state_dict.get("state", {})
        for group, params, engine, made_with in self._engines:
            for i, p in enumerate(params):
                for name, value in saved.get(index[id(p)], {}).items():
                    if name == "step":
                        engine.set_steps(int(value))
                    else:
                        engine.load_state(i, name, value)
