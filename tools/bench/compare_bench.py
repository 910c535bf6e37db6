#!/usr/bin/env python3
"""Side-by-side table of bench.json (our cuDNN engine) and bench_pytorch.json (PyTorch, same device call).
Usage: python3 tools/bench/compare_bench.py bench.json bench_pytorch.json [--markdown]"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2]))
    markdown = "--markdown" in sys.argv
    base = {(r["model"], r["batch"]): r for r in torch["results"]}
    header = ["model", "batch", "ours ms", "ours img/s", "PyTorch eager ms", "PyTorch graph ms", "PyTorch img/s", "speed-up vs graph"]
    rows = []
    for r in ours.get("engine", []):
        b = base.get((r["model"], r["batch"]))
        if not b:
            continue
        rows.append([r["model"], str(r["batch"]), f"{r['ms']:.3f}", f"{r['images_per_s']:.0f}", f"{b['eager_ms']:.3f}",
                     f"{b['graph_ms']:.3f}", f"{b['images_per_s']:.0f}", f"{b['graph_ms'] / r['ms']:.2f}x"])
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for row in rows:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    for r in ours.get("stem", []):
        print(f"stem {r['size']}x{r['size']} batch {r['batch']}: fused {r['fused_ms']:.4f} ms ({r['fused_tflops']:.1f} TFLOP/s), "
              f"cuDNN FP32 {r['strict_ms']:.4f} ms, cuDNN TF32 {r['tf32_ms']:.4f} ms")
    pp = ours.get("preprocess")
    if pp:
        print(f"\npreprocess {pp['frame']} -> {pp['output']}: kernel {pp['kernel_us']:.1f} us, "
              f"device frame {pp['device_frame_us']:.1f} us, host frame {pp['host_frame_us']:.1f} us")


if __name__ == "__main__":
    main()
