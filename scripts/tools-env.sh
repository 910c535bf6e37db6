#!/usr/bin/env bash
# The one Python environment of tools/ (export_model.py, train.py, …: PyTorch, torchvision, safetensors, pillow,
# numpy), made once and kept outside the source tree, where every clone and CI run finds it again:
# ${VC_TOOLS_VENV:-~/.cache/video-classifier/tools-venv}. Prints its python. Two ways to make it:
#   light (the default where no NVIDIA GPU is: CPU machines, CI): Debian's own PyTorch 1.13 and torchvision 0.14 for the
#         CPU (python3-torch, python3-torchvision: about 200 MB with their libraries, installed by
#         scripts/install-deps.sh), seen from a venv made with --system-site-packages, plus safetensors from PyPI.
#   cuda  (where nvidia-smi sees a GPU): PyPI's PyTorch wheels, which carry CUDA's libraries (about 5.5 GB, ~25 min to
#         download the first time; VC_TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's CPU wheels).
# VC_TOOLS_ROUTE=light|cuda chooses. Idempotent: an environment that imports what the tools need is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VC_TOOLS_VENV:-$HOME/.cache/video-classifier/tools-venv}
check='import torch, torchvision, safetensors, PIL, numpy'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
route=${VC_TOOLS_ROUTE:-}
if [ -z "$route" ]; then
  route=light
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && route=cuda
fi
rm -rf "$venv"
if [ "$route" = light ]; then
  # Debian's python (not a pyenv or conda one on PATH): its dist-packages hold Debian's PyTorch.
  system_python=/usr/bin/python3
  if ! "$system_python" -c 'import torch, torchvision' 2>/dev/null; then
    echo "tools-env: Debian's PyTorch is missing (python3-torch python3-torchvision): run scripts/install-deps.sh, or" \
         "VC_TOOLS_ROUTE=cuda for PyPI's wheels" >&2
    exit 69
  fi
  echo "tools-env: making $venv (Debian's PyTorch for the CPU, safetensors from PyPI)" >&2
  "$system_python" -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q "safetensors>=0.4" >&2
else
  echo "tools-env: making $venv (PyPI's PyTorch with CUDA: a large download the first time)" >&2
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip)  # (not bin/pip: its first line names the folder the venv was made in)
  "${pip[@]}" install -q --upgrade pip >&2
  if [ -n "${VC_TORCH_INDEX:-}" ]; then
    "${pip[@]}" install -q torch torchvision --index-url "$VC_TORCH_INDEX" >&2
  fi
  "${pip[@]}" install -q -r tools/requirements.txt >&2
fi
"$venv/bin/python" -c "$check"
echo "$venv/bin/python"
