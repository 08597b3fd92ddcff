// libFuzzer target: fuzz::onnx_loader (fuzz_entries.h). Built by scripts/fuzz.sh (clang, ASan).
#include "fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  korch::fuzz::onnx_loader(data, size);
  return 0;
}
