#!/usr/bin/env bash
# Checks deploy/ offline: every manifest against the Kubernetes JSON schemas (strict: unknown fields are errors),
# the StatefulSet's SHARD_COUNT against its replicas, the Containerfile's COPY sources, and, given the app's binary
# (argument 1, default build/app/video-classifier), the ConfigMap's config as every replica would run it.
# kubernetes-validate bundles the schemas; it is installed once into build/deploy-venv (the only network use).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/deploy-venv
version=1.37.0
kube_versions=(1.28.0 1.37.0)  # 1.28: the oldest with the pod-index label statefulset.yaml reads; 1.37: the newest bundled
app=${1:-build/app/video-classifier}
if ! "$venv/bin/python" -c 'import kubernetes_validate' 2>/dev/null ||
   [ "$("$venv/bin/python" -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "kubernetes-validate==$version"; }; then
    echo "deploy/validate.sh: skipped: could not install kubernetes-validate $version from PyPI into $venv" >&2
    exit 77  # ctest reports the test skipped, not passed
  fi
fi

failed=0
manifests=(deploy/k8s/*.yaml deploy/k8s/example/*.yaml)
for k in "${kube_versions[@]}"; do
  for m in "${manifests[@]}"; do
    if out=$("$venv/bin/kubernetes-validate" --strict --kubernetes-version "$k" "$m" 2>&1); then
      echo "ok      k8s $k  $m"
    else
      echo "INVALID k8s $k  $m"; echo "$out" | sed 's/^/    /'; failed=1
    fi
  done
done

# The rest reads the manifests with the PyYAML that kubernetes-validate brought.
check_dir=build/deploy-check
mkdir -p "$check_dir"
"$venv/bin/python" - "$check_dir" "$app" "${manifests[@]}" <<'PY' || failed=1
import os, re, subprocess, sys, yaml
check_dir, app, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
docs = [d for p in paths for d in yaml.safe_load_all(open(p)) if d]
find = lambda kind, name: next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
ok = True
def report(good, what):
    global ok
    ok &= good
    print(("ok      " if good else "FAILED  ") + what)

sts = find("StatefulSet", "video-classifier")
pod = sts["spec"]["template"]["spec"]
container = pod["containers"][0]
env = {e["name"]: e.get("value") for e in container["env"]}
replicas = sts["spec"]["replicas"]
report(env["SHARD_COUNT"] == str(replicas), f"StatefulSet: SHARD_COUNT {env['SHARD_COUNT']} = replicas {replicas}")
cm_name = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
config = os.path.join(check_dir, "config.yaml")
with open(config, "w") as f:
    f.write(find("ConfigMap", cm_name)["data"]["config.yaml"])

for line in open("deploy/Containerfile"):
    words = line.split()
    if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
        for src in words[1:-1]:
            report(os.path.exists(src), f"Containerfile: COPY source {src} exists")

if not os.access(app, os.X_OK):
    print(f"skipped config check: no {app} (build the app, or give its path)")
else:
    # What each replica runs: the image's ENTRYPOINT with the pod's args, through `config` (validates, runs nothing);
    # together the shards must hold every stream exactly once.
    print(f"        ({config}: the ConfigMap's config.yaml; error positions refer to it)")
    def streams(effective):  # the stream names in `config`'s output (one stream: `input:`, several: `inputs:`)
        c = yaml.safe_load(effective) or {}
        return [s["name"] for s in c.get("inputs") or [c.get("input", {})] if "name" in s]
    seen = []
    for i in range(replicas):
        args = [re.sub(r"\$\((\w+)\)", lambda m: str(i) if m[1] == "SHARD_INDEX" else env[m[1]], a)
                for a in container["args"]]
        r = subprocess.run([app, "config", "--config", config, *args], capture_output=True, text=True)
        names = streams(r.stdout) if r.returncode == 0 else []
        seen += names
        report(r.returncode == 0, f"config: shard {i}/{replicas} accepted by {app}: {', '.join(names) or r.stderr.strip()}"
               + ("" if r.returncode == 0 else f" (exit {r.returncode})"))
    every = streams(subprocess.run([app, "config", "--config", config], capture_output=True, text=True).stdout)
    report(sorted(seen) == sorted(every), f"config: the {replicas} shards hold each of the {len(every)} streams once")
sys.exit(0 if ok else 1)
PY

[ "$failed" = 0 ] && echo "deploy/validate.sh: all passed" || { echo "deploy/validate.sh: FAILED" >&2; exit 1; }
