#!/usr/bin/env bash
# The GPU path in one run (docs/benchmarks.md "On a GPU"): the model sandbox's tests off the CPU
# (on CUDA there), reranking and STS continuations (our architecture in the worker and in the
# sandbox) on CUDA beside the CPU, and the STS behavioural-cloning training on each.
# Run where `python3` (or $PYTHON) has torch with CUDA; packages it lacks come as wheels in
# $WHEELS (default .whl/), installed to /tmp/site first. Prints figures; asserts nothing.
#
#   bash bench/gpu.sh            # about 8 minutes on an H100 machine
#   REPEATS=1 bash bench/gpu.sh  # one run of each throughput bench instead of the median of 3
#   QUICK=1 bash bench/gpu.sh    # a smoke run of every step (CPU is enough)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
DEV=$($PY -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
echo "cpu cores: $(nproc)"

if [[ -n "${QUICK:-}" ]]; then
  RR="--paths 4 --candidates 3 --listeners 2 --rollouts 2 --repeats 1"
  SG="--scenarios 4 --continuations 2 --length 8 --repeats 1"
  TR="episodes=4, held_out=2, epochs=1"
  PT="-k torchscript"  # the step's wiring: the suite runs the whole file on the CPU anyway
else
  RR="--paths 64 --candidates 11 --listeners 10 --rollouts 5 --repeats ${REPEATS:-3}"
  SG="--scenarios 64 --continuations 4 --length 32 --batch 128 --repeats ${REPEATS:-3}"
  TR="episodes=200, held_out=50, epochs=10"
fi

echo "== the model sandbox off the CPU, on cpu:0 and cuda where there is one"
$PY -m pytest --noconftest -p no:cacheprovider -q -rs ${PT:-} tests/integration/test_sandbox_off_the_cpu.py ||
  echo "!! the sandbox's tests failed (above); the benches go on"

echo "== reranking (bench/rerank.py $RR), cpu and $DEV"
$PY bench/rerank.py $RR --device cpu $([[ $DEV == cuda ]] && echo --device cuda)

for d in cpu $([[ $DEV == cuda ]] && echo cuda); do
  echo "== STS continuations, our policy in the worker and sandboxed, on $d (bench/sts_generate.py $SG)"
  $PY bench/sts_generate.py --policy ours --device "$d" $SG || echo "!! STS continuations on $d failed (above)"
done

for d in cpu $([[ $DEV == cuda ]] && echo cuda); do
  echo "== STS behavioural cloning on $d ($TR)"
  $PY - "$d" <<EOF
import sys, time, tempfile
from workers.sts.train import run_training
t = time.perf_counter()
q = run_training($TR, device=sys.argv[1], out=tempfile.mkdtemp(), name="bench")
print(f"{sys.argv[1]}: whole command {time.perf_counter() - t:.1f} s;",
      {k: v for k, v in q.items() if not isinstance(v, (dict, list))})
EOF
done
