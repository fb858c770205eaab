// RUN: kiln-opt %s -split-input-file -kiln-materialize-weights -verify-diagnostics | FileCheck %s

// A load of an immutable global becomes a constant with the same blob; the
// global is erased; its origin moves to the module, keyed by the blob.
// CHECK-LABEL: module attributes {kiln.weight_origins = {w = "initializer f32 4 w\0Aconvert bf16"}}
// CHECK-NOT:     ml_program.global
// CHECK-LABEL:   func.func @weight
// CHECK:           %[[W:.*]] = arith.constant dense_resource<w> : tensor<4xbf16>
// CHECK:           return %[[W]]
ml_program.global private @w(dense_resource<w> : tensor<4xbf16>) : tensor<4xbf16> {kiln.origin = "initializer f32 4 w\0Aconvert bf16"}
func.func @weight() -> tensor<4xbf16> {
  %w = ml_program.global_load_const @w : tensor<4xbf16>
  return %w : tensor<4xbf16>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x02000000803F004040408040"
    }
  }
#-}

// -----

// Without an origin nothing is recorded.
// CHECK-LABEL: module {
// CHECK:         arith.constant dense<1.000000e+00> : tensor<2xf32>
ml_program.global private @c(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @plain() -> tensor<2xf32> {
  %c = ml_program.global_load_const @c : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

// An external global (no data here) cannot be materialized.
ml_program.global private @external(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>
func.func @uninitialized() -> tensor<2xf32> {
  // expected-error @below {{reads a global that is not an immutable, initialized weight}}
  %s = ml_program.global_load_const @external : tensor<2xf32>
  return %s : tensor<2xf32>
}
