#!/usr/bin/env python3
"""Writes the PyTorch parity fixtures of the nn tests (tests/nn/data/*.json).

For an MLP and a small convnet with fixed weights and inputs it records, in float32:
the parameters (PyTorch state_dict names, which herd's Sequential/Mlp reproduce), the
input, the target, the output, the loss, the gradients of the loss with respect to the
input and every parameter, and the parameters after one Adam step. Also log-probs and
entropies of the Categorical and diagonal Gaussian heads, and for the MLP three Huber-loss
training steps with gradient-norm clipping under SGD (momentum), Adam and RMSprop. The C++ test
(tests/nn/test_parity.cpp) compares against these to 1e-5 relative or 1e-6 absolute.

Needs PyTorch (Debian python3-torch under /usr/bin/python3, or pip); CI does not: the JSON
files are checked in. Usage: /usr/bin/python3 scripts/make_nn_fixtures.py [OUT_DIR]
"""
import json
import math
import pathlib
import sys

import torch


def tolist(t):
    return t.detach().double().reshape(-1).tolist()


def dump_tensor(t):
    return {"shape": list(t.shape), "data": tolist(t)}


def case(model, x, target, loss_fn, lr):
    model.zero_grad()
    x = x.clone().requires_grad_(True)
    out = model(x)
    loss = loss_fn(out, target)
    loss.backward()
    rec = {
        "params": {k: dump_tensor(v) for k, v in model.state_dict().items()},
        "input": dump_tensor(x),
        "target": dump_tensor(target) if target.is_floating_point() else
                  {"shape": list(target.shape), "data": target.tolist()},
        "output": dump_tensor(out),
        "loss": float(loss.item()),
        "grad_input": dump_tensor(x.grad),
        "grads": {k: dump_tensor(p.grad) for k, p in model.named_parameters()},
        "adam_lr": lr,
    }
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    opt.step()
    rec["params_after_adam"] = {k: dump_tensor(v) for k, v in model.state_dict().items()}
    return rec


def main():
    out_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                           pathlib.Path(__file__).resolve().parent.parent / "tests/nn/data")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1234)
    torch.set_default_dtype(torch.float32)

    # MLP 5-16-16-3, tanh, MSE, batch 7.
    mlp = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 3))
    x = torch.randn(7, 5)
    y = torch.randn(7, 3)
    rec = case(mlp, x, y, torch.nn.MSELoss(), 1e-2)

    # Heads on the MLP output.
    logits = torch.randn(7, 4)
    actions = torch.tensor([0, 3, 1, 2, 2, 0, 3])
    cat = torch.distributions.Categorical(logits=logits)
    mean = torch.randn(7, 3)
    log_std = torch.tensor([-0.5, 0.0, 0.3])
    act = torch.randn(7, 3)
    gauss = torch.distributions.Normal(mean, log_std.exp())
    rec["heads"] = {
        "logits": dump_tensor(logits),
        "actions": actions.tolist(),
        "cat_log_prob": tolist(cat.log_prob(actions)),
        "cat_entropy": tolist(cat.entropy()),
        "mean": dump_tensor(mean),
        "log_std": tolist(log_std),
        "gauss_actions": dump_tensor(act),
        "gauss_log_prob": tolist(gauss.log_prob(act).sum(-1)),
        "gauss_entropy": tolist(gauss.entropy().sum(-1)),
    }
    # Three training steps with gradient clipping for each optimizer, from the same weights.
    init = {k: v.clone() for k, v in mlp.state_dict().items()}
    rec["multi_step_init"] = {k: dump_tensor(v) for k, v in init.items()}
    rec["multi_step"] = {}
    huber = torch.nn.HuberLoss(delta=0.5)
    for name, make in (("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=0.01)),
                       ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.99, eps=1e-8))):
        mlp.load_state_dict(init)
        opt = make(mlp.parameters())
        norms = []
        for k in range(3):
            opt.zero_grad()
            loss = huber(mlp(x + 0.1 * k), y)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(mlp.parameters(), 0.5)))
            opt.step()
        rec["multi_step"][name] = {
            "params": {k: dump_tensor(v) for k, v in mlp.state_dict().items()},
            "norms": norms,
        }
    (out_dir / "parity_mlp.json").write_text(json.dumps(rec))

    # Small convnet, NCHW: conv(2->3, 3x3, s1, p1), ReLU, conv(3->4, 3x3, s2, p1), ELU,
    # Flatten, Linear(4*4*3 -> 5), LayerNorm(5), cross-entropy, batch 3.
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, stride=1, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.ELU(),
        torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 3, 5), torch.nn.LayerNorm(5))
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        net[6].weight.add_(0.2 * torch.randn(5))
        net[6].bias.add_(0.2 * torch.randn(5))
    x = torch.randn(3, 2, 8, 6)
    t = torch.tensor([4, 0, 2])
    rec = case(net, x, t, torch.nn.CrossEntropyLoss(), 1e-2)
    (out_dir / "parity_convnet.json").write_text(json.dumps(rec))
    print(f"wrote {out_dir}/parity_mlp.json and parity_convnet.json (torch {torch.__version__})")


if __name__ == "__main__":
    main()
