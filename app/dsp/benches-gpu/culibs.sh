# shellcheck shell=bash
# Sourced by the GPU-machine scripts of a device bundle (run.sh, gpu-run.sh,
# gpu-variants.sh). cudarc (built with the cuda-12060 names) tries
# libnvrtc.so, .so.12, .so.11, ... and the same for cuFFT; a CUDA 13 machine
# ships .so.13. Where ldconfig has no unversioned name, link one to whatever
# is installed (in /tmp/culibs) and put it first on LD_LIBRARY_PATH.
mkdir -p /tmp/culibs
for lib in nvrtc cufft; do
  if ! ldconfig -p | grep -q "lib$lib.so "; then
    f=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt -xdev -name "lib$lib.so.*" 2>/dev/null | grep -v builtins | sort | head -1)
    if [ -n "$f" ]; then
      ln -sf "$f" "/tmp/culibs/lib$lib.so"
      echo "linked lib$lib.so -> $f"
      export LD_LIBRARY_PATH=$(dirname "$f"):${LD_LIBRARY_PATH:-}
    fi
  fi
done
export LD_LIBRARY_PATH=/tmp/culibs:${LD_LIBRARY_PATH:-}
