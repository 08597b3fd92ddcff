// korch fold MODEL.onnx -o OUT.onnx: the model after Korch's frontend (static shapes, constant
// folding of shape arithmetic, Identity/Dropout removal, dead code elimination) as ONNX, so any
// ONNX tool can run or inspect what Korch works on.
#include "commands.h"
#include "frontend/onnx_writer.h"

namespace korch::cli {

Command add_fold(CLI::App& app) {
  struct Opts { std::string model, out; LoadFlags load; };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  app.add_option("-o,--output", o->out, "Output .onnx file")->required();
  o->load.add_to(app);
  app.footer("Example:\n  korch fold model.onnx -o folded.onnx --shape batch=1   constants folded, shapes static");
  return [o]() {
    Graph g = load_model_arg(o->model, o->load.options());
    save_onnx(g, o->out);
    fmt::print("wrote {} ({} nodes, opset {})\n", o->out, g.nodes.size(), g.opset);
    return 0;
  };
}

}  // namespace korch::cli
