#!/usr/bin/env python3
"""PyTorch CUDA baseline for bench_mlp_gpu: MLP 64-256-256-16 (tanh, float32) train step
(zero_grad, forward, MSE, backward, Adam) at batch 32 to 65536 on cuda:0, 20 steps then a
synchronisation per sample, median microseconds per step. Prints one JSON object, or
{"skipped": reason} without torch or a GPU. Usage: bench_mlp_gpu_torch.py [--reps N]
"""
import json
import statistics
import sys
import time


def main():
    reps = 15
    if "--reps" in sys.argv:
        reps = int(sys.argv[sys.argv.index("--reps") + 1])
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"skipped": f"torch not importable: {e}"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return
    dev = torch.device("cuda:0")
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for batch in (32, 256, 1024, 4096, 16384, 65536):
        model = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
            torch.nn.Linear(256, 16)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.randn(batch, 64, device=dev)
        y = torch.randn(batch, 16, device=dev)
        loss_fn = torch.nn.MSELoss()

        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()

        for _ in range(20):
            step()
        torch.cuda.synchronize()
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(20):
                step()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) / 20 * 1e6)
        results.append({"batch": batch, "step_us": statistics.median(samples)})
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                      "results": results}))


if __name__ == "__main__":
    main()
