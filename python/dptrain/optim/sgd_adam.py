"""SGD, Adam and AdamW with PyTorch's arguments, defaults and checks, over
the library's optimizers (f32 state, one kernel per packed buffer)."""

from .optimizer import Optimizer

__all__ = ["SGD", "Adam", "AdamW"]


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False): PyTorch's update, p -= lr (g + wd p) with momentum
    buf = momentum buf + g (Nesterov: g + momentum buf)."""

    _kind = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        self._check_number(lr, "lr", text=f"Invalid learning rate: {lr}")
        self._check_number(momentum, "momentum", text=f"Invalid momentum value: {momentum}")
        self._check_number(weight_decay, "weight_decay",
                           text=f"Invalid weight_decay value: {weight_decay}")
        if momentum >= 1:
            raise ValueError(f"Invalid momentum value: {momentum} (dptrain's SGD needs "
                             f"momentum < 1)")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if dampening != 0:
            raise ValueError(f"SGD: dampening={dampening} is not supported (only 0)")
        if maximize:
            raise ValueError("SGD: maximize=True is not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=False)
        super().__init__(params, defaults)

    def _c_options(self, group):
        if group.get("dampening", 0) != 0:
            raise ValueError("SGD: dampening is not supported (only 0)")
        return dict(lr=float(group["lr"]), momentum=float(group["momentum"]),
                    nesterov=bool(group["nesterov"]), weight_decay=float(group["weight_decay"]),
                    beta1=0.9, beta2=0.999, eps=1e-8)


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
    PyTorch's Adam, the weight decay added to the gradient (L2)."""

    _kind = "adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None):
        self._check_number(lr, "lr", text=f"Invalid learning rate: {lr}")
        self._check_number(eps, "eps", text=f"Invalid epsilon value: {eps}")
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"betas must be a pair of numbers, not {betas!r}")
        self._check_number(betas[0], "betas[0]", 0.0, 1.0,
                           f"Invalid beta parameter at index 0: {betas[0]}")
        self._check_number(betas[1], "betas[1]", 0.0, 1.0,
                           f"Invalid beta parameter at index 1: {betas[1]}")
        self._check_number(weight_decay, "weight_decay",
                           text=f"Invalid weight_decay value: {weight_decay}")
        if amsgrad:
            raise ValueError(f"{type(self).__name__}: amsgrad=True is not supported")
        if maximize:
            raise ValueError(f"{type(self).__name__}: maximize=True is not supported")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=False, maximize=False)
        super().__init__(params, defaults)

    def _c_options(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=float(group["lr"]), momentum=float(beta1), nesterov=False,
                    weight_decay=float(group["weight_decay"]), beta1=float(beta1),
                    beta2=float(beta2), eps=float(group["eps"]))


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2): decoupled weight decay, p -= lr wd p."""

    _kind = "adamw"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, **kwargs):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)
