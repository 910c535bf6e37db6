#!/usr/bin/env python3
"""PyTorch baseline for bench: torchvision ResNets (random weights), FP16, channels_last, cudnn.benchmark,
eager and CUDA-graph, timed with CUDA events (median of --loops loops). Prints a table, writes JSON.

Usage: python3 tools/bench/bench_pytorch.py [--models resnet18,...] [--batches 1,8,...] [--json out.json]
"""
import argparse
import json
import statistics

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/requires.py
from requires import require  # noqa: E402

torch, torchvision = require("torch", "torchvision")


def time_ms(fn, loops, target_ms=50.0):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    reps = max(1, min(2000, int(target_ms / max(start.elapsed_time(stop), 1e-3))))
    per_call = []
    for _ in range(loops):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / reps)
    return statistics.median(per_call)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet18,resnet34,resnet50,resnet101,resnet152")
    parser.add_argument("--batches", default="1,8,32,128,256")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--loops", type=int, default=7)
    parser.add_argument("--json", default="bench_pytorch.json")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    results = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "gpu": torch.cuda.get_device_name(0), "results": []}
    print(f"{'model':<10} {'batch':>5} {'eager ms':>10} {'graph ms':>10} {'graph img/s':>12}")
    for name in args.models.split(","):
        model = getattr(torchvision.models, name)(weights=None).cuda().half().eval()
        model = model.to(memory_format=torch.channels_last)
        for batch in [int(b) for b in args.batches.split(",")]:
            x = torch.randn(batch, 3, args.size, args.size, device="cuda").half().to(memory_format=torch.channels_last)
            with torch.inference_mode():
                eager = time_ms(lambda: model(x), args.loops)
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        model(x)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    model(x)
                graphed = time_ms(graph.replay, args.loops, 200.0 if batch >= 128 else 50.0)
            print(f"{name:<10} {batch:>5} {eager:>10.3f} {graphed:>10.3f} {batch * 1000 / graphed:>12.0f}", flush=True)
            results["results"].append({"model": name, "batch": batch, "size": args.size, "eager_ms": eager,
                                       "graph_ms": graphed, "images_per_s": batch * 1000 / graphed})
            del graph
            torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
