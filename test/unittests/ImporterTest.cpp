//===- ImporterTest.cpp - The ONNX importer on models built in C++
//----------===//
//
// Builds ONNX protobufs directly (so every TensorProto storage form can be
// exercised, which the Python helpers normalise away) and checks the values
// that reach kiln IR against the values written.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/ONNX/Importer.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <gtest/gtest.h>
#include <set>

using namespace mlir;
namespace onnxfe = kiln::onnx_frontend;

namespace {

/// Writes `model` to a fresh temporary file and returns its path.
std::string writeTemp(const onnx::ModelProto &model) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("kiln-unit", "onnx", path));
  std::ofstream out(path.c_str(), std::ios::binary);
  model.SerializeToOstream(&out);
  return std::string(path);
}

/// A model whose outputs are the given initializers, each through Identity.
onnx::ModelProto identityModel(const std::vector<onnx::TensorProto> &tensors) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("g");
  for (const onnx::TensorProto &t : tensors) {
    *graph->add_initializer() = t;
    onnx::NodeProto *node = graph->add_node();
    node->set_op_type("Identity");
    node->add_input(t.name());
    node->add_output(t.name() + "_out");
    graph->add_output()->set_name(t.name() + "_out");
  }
  return model;
}

/// The constant each function result comes from, as dense elements.
std::vector<DenseElementsAttr> importConstants(const onnx::ModelProto &model,
                                               MLIRContext &context) {
  std::string path = writeTemp(model);
  auto module = onnxfe::importModelFile(path, context, {});
  llvm::sys::fs::remove(path);
  EXPECT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  std::vector<DenseElementsAttr> values;
  if (!module)
    return values;
  auto func = *(*module)->getOps<func::FuncOp>().begin();
  for (Value v : func.front().getTerminator()->getOperands()) {
    auto constant = v.getDefiningOp<kiln::ConstantOp>();
    EXPECT_TRUE(constant);
    values.push_back(cast<DenseElementsAttr>(constant.getValue()));
  }
  return values;
}

TEST(Importer, DecodesEveryTensorStorageForm) {
  std::vector<onnx::TensorProto> tensors(5);
  // float_data
  tensors[0].set_name("f32_typed");
  tensors[0].set_data_type(onnx::TensorProto::FLOAT);
  tensors[0].add_dims(3);
  for (float v : {1.5f, -2.0f, 3.25f})
    tensors[0].add_float_data(v);
  // raw_data, little endian
  tensors[1].set_name("f32_raw");
  tensors[1].set_data_type(onnx::TensorProto::FLOAT);
  tensors[1].add_dims(3);
  float raw[3] = {1.5f, -2.0f, 3.25f};
  tensors[1].set_raw_data(
      std::string(reinterpret_cast<char *>(raw), sizeof(raw)));
  // float16 bit patterns in int32_data: 0x3C00 = 1.0, 0xC000 = -2.0.
  tensors[2].set_name("f16_bits");
  tensors[2].set_data_type(onnx::TensorProto::FLOAT16);
  tensors[2].add_dims(2);
  tensors[2].add_int32_data(0x3C00);
  tensors[2].add_int32_data(0xC000);
  // int8 in int32_data.
  tensors[3].set_name("i8");
  tensors[3].set_data_type(onnx::TensorProto::INT8);
  tensors[3].add_dims(2);
  tensors[3].add_int32_data(-3);
  tensors[3].add_int32_data(7);
  // int64_data, 2-D.
  tensors[4].set_name("i64");
  tensors[4].set_data_type(onnx::TensorProto::INT64);
  tensors[4].add_dims(2);
  tensors[4].add_dims(1);
  tensors[4].add_int64_data(int64_t(1) << 40);
  tensors[4].add_int64_data(-5);

  MLIRContext context;
  std::vector<DenseElementsAttr> values =
      importConstants(identityModel(tensors), context);
  ASSERT_EQ(values.size(), 5u);
  auto floats = [](DenseElementsAttr a) {
    std::vector<double> v;
    for (const APFloat &f : a.getValues<APFloat>())
      v.push_back(f.convertToDouble());
    return v;
  };
  auto ints = [](DenseElementsAttr a) {
    std::vector<int64_t> v;
    for (const APInt &i : a.getValues<APInt>())
      v.push_back(i.getSExtValue());
    return v;
  };
  EXPECT_EQ(floats(values[0]), (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_EQ(floats(values[1]), (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_TRUE(values[2].getElementType().isF16());
  EXPECT_EQ(floats(values[2]), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(ints(values[3]), (std::vector<int64_t>{-3, 7}));
  EXPECT_EQ(ints(values[4]), (std::vector<int64_t>{int64_t(1) << 40, -5}));
  EXPECT_EQ(values[4].getType().getShape(), (ArrayRef<int64_t>{2, 1}));
}

TEST(Importer, RejectsTensorsWithTheWrongByteCount) {
  onnx::TensorProto t;
  t.set_name("short");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(4);
  t.set_raw_data(std::string(12, '\0')); // 3 floats for a shape of 4
  MLIRContext context;
  std::string path = writeTemp(identityModel({t}));
  auto module = onnxfe::importModelFile(path, context, {});
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(static_cast<bool>(module));
  std::string message = llvm::toString(module.takeError());
  EXPECT_NE(message.find("tensor 'short' holds 12 bytes, expected 16"),
            std::string::npos)
      << message;
}

TEST(HandlerRegistry, CoversAtLeastOneHundredOpTypes) {
  std::set<std::string> types;
  for (const onnxfe::SupportedOp &op : onnxfe::listSupportedOps())
    types.insert(op.opType);
  EXPECT_GE(types.size(), 100u);
}

TEST(HandlerRegistry, VersionsAreUniqueAndInRange) {
  std::set<std::pair<std::string, int>> seen;
  for (const onnxfe::SupportedOp &op : onnxfe::listSupportedOps()) {
    EXPECT_TRUE(seen.insert({op.opType, op.sinceVersion}).second)
        << op.opType << " registered twice at " << op.sinceVersion;
    EXPECT_GE(op.sinceVersion, 1) << op.opType;
    EXPECT_LE(op.sinceVersion, onnxfe::maxSupportedOpset()) << op.opType;
    EXPECT_FALSE(op.family.empty()) << op.opType;
  }
}

} // namespace
