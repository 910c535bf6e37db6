#!/usr/bin/env bash
# The Python environment of tools/ (PyTorch, torchvision, safetensors, pillow: tools/requirements.txt), made once and
# kept outside the source tree, where every clone and CI run finds it again: ${VC_TOOLS_VENV:-~/.cache/video-classifier/tools-venv}.
# Prints its python. PyPI's Linux PyTorch wheels carry CUDA's libraries (about 5.5 GB, ~25 min to download the first
# time); where download.pytorch.org is reachable, VC_TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's
# CPU-only wheels instead. Idempotent: an environment that imports what the tools need is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VC_TOOLS_VENV:-$HOME/.cache/video-classifier/tools-venv}
check='import torch, torchvision, safetensors, PIL, numpy'
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "tools-env: making $venv (PyTorch: a large download the first time)" >&2
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip)  # (not bin/pip: its first line names the folder the venv was made in)
  "${pip[@]}" install -q --upgrade pip >&2
  if [ -n "${VC_TORCH_INDEX:-}" ]; then
    "${pip[@]}" install -q torch torchvision --index-url "$VC_TORCH_INDEX" >&2
  fi
  "${pip[@]}" install -q -r tools/requirements.txt >&2
  "$venv/bin/python" -c "$check"
fi
echo "$venv/bin/python"
