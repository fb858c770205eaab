//===- OnnxFuzzer.cpp - ONNX bytes -> importer -> artifact in memory ------===//
//
// libFuzzer target kiln-fuzz-onnx: the bytes are an ONNX model, compiled as
// kilnc compiles one (compileModel, include/kiln/Compiler/Compiler.h) to an
// artifact in memory. Nothing touches the disk or another process: no
// ptxas (KILN_PTXAS= semantics: PTX only), no kernel cache, no tuning, no
// NVRTC (the contraction-kernel templates are off: their PTX comes from
// NVRTC, seconds a kernel), and the model's name is a path in a directory
// that does not exist, so external data cannot be read.
//
// A compile must succeed or fail with a one-line error (FuzzSupport.h); a
// successful one must give an artifact that verifies and survives
// serializing and parsing back. Mutations come from OnnxMutator.cpp.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "kiln/Compiler/Compiler.h"
#include "kiln/Pipelines/Pipelines.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

/// Larger inputs are rejected before parsing: mutations that grow a model
/// past this spend their time copying weights, not in the compiler.
constexpr size_t kMaxModelBytes = 1 << 20;

/// The model's name in errors; its directory does not exist, so no
/// external-data location (not even one with '..') resolves to a file.
constexpr const char *kModelPath = "/nonexistent-kiln-fuzz/model.onnx";

[[noreturn]] void internalFailure(const std::string &what) {
  std::fprintf(stderr, "kiln-fuzz-onnx: %s\n", what.c_str());
  std::abort();
}

/// The artifact of a successful compile must verify, serialize and parse
/// back: kilnc would write these bytes and kiln-run read them.
void checkArtifact(const kiln::runtime::Artifact &artifact) {
  if (kiln::runtime::Error err = kiln::runtime::verifyArtifact(artifact))
    internalFailure("compiled artifact does not verify: " + err.message());
  auto bytes = kiln::runtime::serializeArtifact(artifact);
  if (!bytes)
    internalFailure("compiled artifact does not serialize: " +
                    bytes.error().message());
  kiln::runtime::ReadOptions read;
  auto parsed = kiln::runtime::parseArtifact(
      kiln::runtime::Blob::fromVector(std::move(*bytes)), "fuzz.kiln", read);
  if (!parsed)
    internalFailure("compiled artifact does not parse back: " +
                    parsed.error().message());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // No ptxas: the artifact carries PTX only. No kernel cache.
  setenv("KILN_PTXAS", "", 1);
  setenv("KILN_KERNEL_CACHE", "off", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxModelBytes)
    return -1; // Not added to the corpus.
  mlir::DialectRegistry registry;
  kiln::registerPipelineDialects(registry);
  // A context per input: nothing an input interns (types, attributes,
  // resource blobs) outlives it.
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);

  kiln::CompileOptions options;
  options.input = kModelPath;
  options.inputBytes =
      llvm::StringRef(reinterpret_cast<const char *>(data), size);
  options.kernelCache = "off";
  // A few hundred bytes of ONNX can fold into a constant of gigabytes (a
  // Dropout mask over a declared dim of 2^31): refused within the fuzzer's
  // memory (-rss_limit_mb=4096) instead of packed.
  options.maxConstantBytes = uint64_t(256) << 20;
  options.pipeline.contractionKernels = false;
  options.pipeline.tune = false;
  kiln::CompileHooks hooks;
  hooks.warning = [](const llvm::Twine &message) {
    kiln::fuzz::checkOneLineError(message.str());
  };
  llvm::Expected<kiln::CompileResult> result =
      kiln::compileModel(std::move(options), context, hooks);
  if (!result) {
    llvm::handleAllErrors(
        result.takeError(),
        [](const kiln::CompileError &err) {
          kiln::fuzz::checkOneLineError(err.getMessage());
          // Internal: packing failed on what Kiln generated (an artifact
          // that does not verify): Kiln's bug, whatever the input.
          if (err.getKind() == kiln::CompileError::Kind::Internal)
            internalFailure("internal error: " + err.getMessage());
        },
        [](const llvm::ErrorInfoBase &err) {
          internalFailure("compileModel failed without a CompileError: " +
                          err.message());
        });
    return 0;
  }
  if (!result->artifact)
    internalFailure("compileModel succeeded without an artifact");
  checkArtifact(*result->artifact);
  return 0;
}
