//===- Vjp.h - Vector-Jacobian product rules of kiln ops --------*- C++ -*-===//
//
// kiln-autodiff walks the forward graph backwards and asks each op for its
// vector-Jacobian product: given the gradient of the loss with respect to
// each result, the gradient with respect to each operand. The rules are
// grouped by op family (VjpElementwise.cpp, VjpContraction.cpp,
// VjpDataMovement.cpp, VjpReduction.cpp); each emits ordinary kiln ops, so
// the backward graph goes through the same passes and kernels as inference.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DIALECT_KILN_TRANSFORMS_AUTODIFF_VJP_H
#define KILN_LIB_DIALECT_KILN_TRANSFORMS_AUTODIFF_VJP_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

#include <string>

namespace kiln::autodiff {

/// Builds the ops of the backward graph; the helpers every rule shares.
class GradBuilder {
public:
  explicit GradBuilder(mlir::ImplicitLocOpBuilder &b) : b(b) {}

  mlir::ImplicitLocOpBuilder &b;

  /// A rank-0 constant `value` of `elementType`.
  mlir::Value scalar(mlir::Type elementType, double value);
  /// A splat constant of `type` (a tensor type).
  mlir::Value splat(mlir::Type type, double value);

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value neg(mlir::Value value);
  /// `value * factor`, a scalar factor of the value's element type.
  mlir::Value scale(mlir::Value value, double factor);

  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value value, llvm::ArrayRef<int64_t> permutation);
  /// Sums over `axes` (sorted), keeping them as size 1.
  mlir::Value sumKeep(mlir::Value value, llvm::ArrayRef<int64_t> axes);
  /// Broadcasts `value` to `type` (numpy rules).
  mlir::Value broadcastTo(mlir::Value value, mlir::RankedTensorType type);

  /// Zero-fills `low[d]` / `high[d]` elements around every dimension.
  mlir::Value pad(mlir::Value value, llvm::ArrayRef<int64_t> low,
                  llvm::ArrayRef<int64_t> high, double fill = 0.0);
  mlir::Value slice(mlir::Value value, llvm::ArrayRef<int64_t> starts,
                    llvm::ArrayRef<int64_t> limits,
                    llvm::ArrayRef<int64_t> steps);
  /// The adjoint of `kiln.slice` (any steps, negative included): `grad`
  /// (the slice's result shape) scattered into zeros of `inputType`.
  mlir::Value sliceAdjoint(mlir::Value grad, mlir::RankedTensorType inputType,
                           llvm::ArrayRef<int64_t> starts,
                           llvm::ArrayRef<int64_t> steps);

  /// The gradient of a broadcast operand of type `target` from the gradient
  /// `grad` of the broadcast result: summed over the dimensions broadcasting
  /// added or stretched, then reshaped to the operand's shape.
  mlir::Value unbroadcast(mlir::Value grad, mlir::RankedTensorType target);
};

/// What a family's rule function did with an op.
enum class RuleStatus {
  /// The op is not of this family.
  NoRule,
  /// The operand gradients are filled in (null: no gradient flows there).
  Applied,
  /// The family has a rule, but not for this form of the op; `why` says
  /// what is missing.
  Unsupported,
};

/// The signature of each family's rule function: `resultGrads` has one
/// gradient per result (zeros where the loss does not depend on it);
/// `operandGrads` has one null entry per operand on entry.
using RuleFn = RuleStatus (*)(GradBuilder &g, mlir::Operation *op,
                              llvm::ArrayRef<mlir::Value> resultGrads,
                              llvm::MutableArrayRef<mlir::Value> operandGrads,
                              std::string &why);

RuleStatus elementwiseVjp(GradBuilder &g, mlir::Operation *op,
                          llvm::ArrayRef<mlir::Value> resultGrads,
                          llvm::MutableArrayRef<mlir::Value> operandGrads,
                          std::string &why);
RuleStatus contractionVjp(GradBuilder &g, mlir::Operation *op,
                          llvm::ArrayRef<mlir::Value> resultGrads,
                          llvm::MutableArrayRef<mlir::Value> operandGrads,
                          std::string &why);
RuleStatus dataMovementVjp(GradBuilder &g, mlir::Operation *op,
                           llvm::ArrayRef<mlir::Value> resultGrads,
                           llvm::MutableArrayRef<mlir::Value> operandGrads,
                           std::string &why);
RuleStatus reductionVjp(GradBuilder &g, mlir::Operation *op,
                        llvm::ArrayRef<mlir::Value> resultGrads,
                        llvm::MutableArrayRef<mlir::Value> operandGrads,
                        std::string &why);

RuleStatus poolingVjp(GradBuilder &g, mlir::Operation *op,
                      llvm::ArrayRef<mlir::Value> resultGrads,
                      llvm::MutableArrayRef<mlir::Value> operandGrads,
                      std::string &why);

/// Tries every family in turn.
RuleStatus applyVjpRule(GradBuilder &g, mlir::Operation *op,
                        llvm::ArrayRef<mlir::Value> resultGrads,
                        llvm::MutableArrayRef<mlir::Value> operandGrads,
                        std::string &why);

/// "'kiln.lrn' (node 'lrn_1')" for error messages: kilnc prints a
/// diagnostic's text without its location.
std::string describeOp(mlir::Operation *op);

/// Adds to `varied` the float results of every op of `ops` (program order)
/// that `isSource` accepts or that reads a varied value.
void propagateActivity(llvm::ArrayRef<mlir::Operation *> ops,
                       llvm::function_ref<bool(mlir::Operation *)> isSource,
                       llvm::DenseSet<mlir::Value> &varied);

/// Who is sweeping, for the errors: "<pass>: no gradient rule for 'op',
/// which is on the path from <path>".
struct SweepMessages {
  llvm::StringRef pass;
  llvm::StringRef path;
};

/// The reverse sweep: visits `ops` (program order) backwards and, for each
/// op with a gradient on a result and a varied operand, adds its operands'
/// gradients (its family's rule, Vjp.h) to `grads`, summing over uses.
/// `grads` holds the seeds on entry. An op without a rule is an error.
mlir::LogicalResult backpropagate(GradBuilder &g,
                                  llvm::ArrayRef<mlir::Operation *> ops,
                                  const llvm::DenseSet<mlir::Value> &varied,
                                  llvm::DenseMap<mlir::Value, mlir::Value> &grads,
                                  const SweepMessages &messages);

/// A state a training step writes besides the weights: the new value of a
/// global (a batch norm's running mean or variance).
/// Gives @train_grad the arguments `rng.key` and `rng.counter` and turns
/// each kiln.dropout into `x * kiln.dropout_mask` (Dropout.cpp); nothing
/// when it has no dropout.
void expandDropouts(mlir::func::FuncOp grad);
/// Dropout in @main (eval, inference) is the identity.
void removeDropouts(mlir::func::FuncOp main);

struct StateUpdate {
  mlir::Value value;
  mlir::StringAttr global;
};

/// Rewrites layer_norm, instance_norm and batch_norm in `func` into the
/// ops they are made of; batch_norm in training mode (batch statistics),
/// appending the running-statistics updates to `updates`
/// (Normalization.cpp).
mlir::LogicalResult
decomposeNormalizations(mlir::func::FuncOp func,
                        llvm::SmallVectorImpl<StateUpdate> &updates,
                        std::string &error);

/// What rematerialisation did (Rematerialize.cpp).
struct RematStats {
  int64_t kept = 0, keptBytes = 0;
  int64_t recomputed = 0, recomputedBytes = 0;
};

/// Recomputes cheap activations of `func` (the ops of `forward` whose
/// results backward ops read) before their first backward use, when their
/// operands stay available for the backward pass anyway. With `recompute`
/// false it only counts the activations (all kept).
void rematerialize(mlir::func::FuncOp func,
                   llvm::ArrayRef<mlir::Operation *> forward,
                   RematStats &stats, bool recompute);

/// The scalar loss the training pipeline appends to a model's output.
enum class LossKind { CrossEntropy, Nll, Mse, L1 };

/// Builds the mean loss of `kind` over `output` against `labels` as a
/// rank-0 f32 value. Class losses (cross_entropy, nll) take the classes on
/// dimension 1 (ONNX's convention) and integer labels of the output's shape
/// without that dimension, or float labels (probabilities) of the output's
/// shape; mse and l1 take float labels of the output's shape. Fails with
/// `error` set when the labels do not fit.
mlir::FailureOr<mlir::Value> buildLoss(GradBuilder &g, LossKind kind,
                                       mlir::Value output, mlir::Value labels,
                                       std::string &error);

} // namespace kiln::autodiff

#endif // KILN_LIB_DIALECT_KILN_TRANSFORMS_AUTODIFF_VJP_H
