#!/bin/sh
# A program that only runs artifacts (examples/run_artifact.cc) links neither the solvers nor the
# compiler stages: no CBC/Clp/GLPK, protobuf or SQLite library, and no fission, orchestration or
# code generation symbol.
set -e
bin="$1"
[ -x "$bin" ] || { echo "usage: $0 PROGRAM" >&2; exit 2; }
if ldd "$bin" | grep -iE 'libCbc|libClp|libOsi|libglpk|libprotobuf|libonnx|libsqlite'; then
  echo "$bin links a solver or a compile-time library" >&2
  exit 1
fi
if nm -C "$bin" | grep -E ' T korch::(fission|enumerate_candidates|solve_blp|orchestrate|build_loop_kernel|make_backend)\('; then
  echo "$bin contains compiler stages" >&2
  exit 1
fi
echo "$bin links only the runtime"
