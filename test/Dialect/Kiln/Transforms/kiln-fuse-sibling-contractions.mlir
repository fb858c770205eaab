// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-fuse-sibling-contractions)" | FileCheck %s

// Running the pass twice changes nothing the second time.
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-fuse-sibling-contractions)" -o %t.once.mlir
// RUN: kiln-opt %t.once.mlir -split-input-file --pass-pipeline="builtin.module(kiln-fuse-sibling-contractions)" -o %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// Q, K and V projections with biases, read by attention-like matmuls:
// one matmul against [2][7] weights (wq | wk | wv, row by row), one bias
// add of [7], three slices; the origins stack and end in a concat; the old
// globals are gone.
ml_program.global private @wq(dense_resource<wq> : tensor<2x2xf32>) : tensor<2x2xf32> {kiln.origin = "initializer f32 2x2 q.w"}
ml_program.global private @wk(dense_resource<wk> : tensor<2x2xf32>) : tensor<2x2xf32> {kiln.origin = "initializer f32 2x2 k.w"}
ml_program.global private @wv(dense_resource<wv> : tensor<2x3xf32>) : tensor<2x3xf32> {kiln.origin = "initializer f32 6 v.w\nreshape 2,3"}
ml_program.global private @bq(dense_resource<bq> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 q.b"}
ml_program.global private @bk(dense_resource<bk> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 k.b"}
ml_program.global private @bv(dense_resource<bv> : tensor<3xf32>) : tensor<3xf32> {kiln.origin = "initializer f32 3 v.b"}
// CHECK-NOT: ml_program.global private @wq(
// CHECK-NOT: ml_program.global private @bk(
// CHECK-DAG: ml_program.global private @wq_siblings(dense_resource<wq_siblings> : tensor<2x7xf32>) : tensor<2x7xf32> {kiln.origin = "initializer f32 2x2 q.w\0Ainitializer f32 2x2 k.w\0Ainitializer f32 6 v.w\0Areshape 2,3\0Aconcat 1"}
// CHECK-DAG: ml_program.global private @bq_siblings(dense_resource<bq_siblings> : tensor<7xf32>) : tensor<7xf32> {kiln.origin = "initializer f32 2 q.b\0Ainitializer f32 2 k.b\0Ainitializer f32 3 v.b\0Aconcat 0"}
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[X:.*]]: tensor<4x2xf32>)
// CHECK: %[[W:.*]] = ml_program.global_load_const @wq_siblings : tensor<2x7xf32>
// CHECK: %[[M:.*]] = kiln.matmul %[[X]], %[[W]] : tensor<4x2xf32>, tensor<2x7xf32> -> tensor<4x7xf32>
// CHECK: %[[B:.*]] = ml_program.global_load_const @bq_siblings : tensor<7xf32>
// CHECK: %[[F:.*]] = kiln.add %[[M]], %[[B]] : tensor<4x7xf32>, tensor<7xf32> -> tensor<4x7xf32>
// CHECK: %[[Q:.*]] = kiln.slice %[[F]] {limits = array<i64: 4, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<4x7xf32> -> tensor<4x2xf32>
// CHECK: %[[K:.*]] = kiln.slice %[[F]] {limits = array<i64: 4, 4>, starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : tensor<4x7xf32> -> tensor<4x2xf32>
// CHECK: %[[V:.*]] = kiln.slice %[[F]] {limits = array<i64: 4, 7>, starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : tensor<4x7xf32> -> tensor<4x3xf32>
// CHECK: %[[KT:.*]] = kiln.transpose %[[K]]
// CHECK: %[[S:.*]] = kiln.matmul %[[Q]], %[[KT]]
// CHECK: kiln.matmul %[[S]], %[[V]]
// The bytes: each row of the result is a row of wq, then wk, then wv.
// CHECK: wq_siblings: "0x080000000000803F000000400000A0400000C04000001041000020410000304100004040000080400000E04000000041000040410000504100006041"
// CHECK: bq_siblings: "0x080000000000003F0000C03F0000204000006040000090400000B0400000D040"
func.func @qkv(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
  %wq = ml_program.global_load_const @wq : tensor<2x2xf32>
  %bq = ml_program.global_load_const @bq : tensor<2xf32>
  %wk = ml_program.global_load_const @wk : tensor<2x2xf32>
  %bk = ml_program.global_load_const @bk : tensor<2xf32>
  %wv = ml_program.global_load_const @wv : tensor<2x3xf32>
  %bv = ml_program.global_load_const @bv : tensor<3xf32>
  %q0 = kiln.matmul %x, %wq : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  %q = kiln.add %q0, %bq : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %k0 = kiln.matmul %x, %wk : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  %k = kiln.add %k0, %bk : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
  %v0 = kiln.matmul %x, %wv : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %v = kiln.add %v0, %bv : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %s = kiln.matmul %q, %kt : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %o = kiln.matmul %s, %v : tensor<4x4xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return %o : tensor<4x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      wq: "0x040000000000803F000000400000404000008040",
      wk: "0x040000000000A0400000C0400000E04000000041",
      wv: "0x04000000000010410000204100003041000040410000504100006041",
      bq: "0x040000000000003F0000C03F",
      bk: "0x040000000000204000006040",
      bv: "0x04000000000090400000B0400000D040"
    }
  }
#-}

// -----

// Without biases, on a batched input: one matmul, no add; a weight without
// an origin leaves the fused one without one; a weight used elsewhere too
// keeps its global.
ml_program.global private @wq(dense_resource<wq> : tensor<2x2xf32>) : tensor<2x2xf32> {kiln.origin = "initializer f32 2x2 q.w"}
ml_program.global private @wk(dense_resource<wk> : tensor<2x2xf32>) : tensor<2x2xf32>
// CHECK-LABEL: ml_program.global private @wq_siblings(dense_resource<wq_siblings> : tensor<2x4xf32>) : tensor<2x4xf32>{{$}}
// CHECK-LABEL: func.func @no_bias
// CHECK: %[[M:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<3x4x2xf32>, tensor<2x4xf32> -> tensor<3x4x4xf32>
// CHECK-NOT: kiln.add %[[M]]
// CHECK: %[[Q:.*]] = kiln.slice %[[M]] {limits = array<i64: 3, 4, 2>, starts = array<i64: 0, 0, 0>
// CHECK: %[[K:.*]] = kiln.slice %[[M]] {limits = array<i64: 3, 4, 4>, starts = array<i64: 0, 0, 2>
// CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>
// CHECK: wq_siblings: "0x080000000000803F000000400000A0400000C04000004040000080400000E04000000041"
func.func @no_bias(%x: tensor<3x4x2xf32>) -> (tensor<3x4x4xf32>, tensor<2x2xf32>) {
  %wq = ml_program.global_load_const @wq : tensor<2x2xf32>
  %wk = ml_program.global_load_const @wk : tensor<2x2xf32>
  %q = kiln.matmul %x, %wq : tensor<3x4x2xf32>, tensor<2x2xf32> -> tensor<3x4x2xf32>
  %k = kiln.matmul %x, %wk : tensor<3x4x2xf32>, tensor<2x2xf32> -> tensor<3x4x2xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 2, 1>} : tensor<3x4x2xf32> -> tensor<3x2x4xf32>
  %s = kiln.matmul %q, %kt : tensor<3x4x2xf32>, tensor<3x2x4xf32> -> tensor<3x4x4xf32>
  %other = kiln.add %wq, %wq : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s, %other : tensor<3x4x4xf32>, tensor<2x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      wq: "0x040000000000803F000000400000404000008040",
      wk: "0x040000000000A0400000C0400000E04000000041"
    }
  }
#-}

// -----

// Not siblings, or not worth it: different inputs; one with a bias and one
// without; an elementwise user (it would be the kernel's epilogue); a
// weight that is an activation (the second matmul depends on the first); a
// mutable global; a value returned as it is (the output would be a copy of
// a slice); a value read by a GEMM with a constant weight (the GEMM kernel
// would read a copy of the slice). The readers are otherwise attention-like
// matmuls, which read through slices.
ml_program.global private @wa(dense_resource<wq> : tensor<2x2xf32>) : tensor<2x2xf32>
ml_program.global private @wb(dense_resource<wk> : tensor<2x2xf32>) : tensor<2x2xf32>
ml_program.global private @b(dense_resource<bq> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private mutable @wm(dense_resource<wk> : tensor<2x2xf32>) : tensor<2x2xf32>
// CHECK-NOT: _siblings
// CHECK-LABEL: func.func @different_inputs
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @different_inputs(%x: tensor<2x2xf32>, %y: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wb = ml_program.global_load_const @wb : tensor<2x2xf32>
  %a = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %y, %wb : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @bias_and_none
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @bias_and_none(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wb = ml_program.global_load_const @wb : tensor<2x2xf32>
  %bias = ml_program.global_load_const @b : tensor<2xf32>
  %a0 = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %a = kiln.add %a0, %bias : tensor<2x2xf32>, tensor<2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wb : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @epilogue
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @epilogue(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wb = ml_program.global_load_const @wb : tensor<2x2xf32>
  %a0 = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %a = kiln.relu %a0 : tensor<2x2xf32>
  %b = kiln.matmul %x, %wb : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @dependent
// CHECK-COUNT-2: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @dependent(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %a = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %a : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %b : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @mutable
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @mutable(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wm = ml_program.global_load @wm : tensor<2x2xf32>
  %a = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wm : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @returned
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @returned(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wb = ml_program.global_load_const @wb : tensor<2x2xf32>
  %a = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wb : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s, %a : tensor<2x2xf32>, tensor<2x2xf32>
}
// CHECK-LABEL: func.func @gemm_reader
// CHECK-COUNT-4: kiln.matmul
// CHECK-NOT: kiln.slice
func.func @gemm_reader(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wa = ml_program.global_load_const @wa : tensor<2x2xf32>
  %wb = ml_program.global_load_const @wb : tensor<2x2xf32>
  %a = kiln.matmul %x, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wb : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %ar = kiln.reshape %a : tensor<2x2xf32> -> tensor<2x2xf32>
  %c = kiln.matmul %ar, %wa : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %c, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      wq: "0x040000000000803F000000400000404000008040",
      wk: "0x040000000000A0400000C0400000E04000000041",
      bq: "0x040000000000003F0000C03F"
    }
  }
#-}

// -----

// Two functions fuse the same weights: each gets a global of its own, the
// second renamed.
ml_program.global private @wq(dense_resource<wq> : tensor<2x2xf32>) : tensor<2x2xf32>
ml_program.global private @wk(dense_resource<wk> : tensor<2x2xf32>) : tensor<2x2xf32>
// CHECK-DAG: ml_program.global private @wq_siblings(
// CHECK-DAG: ml_program.global private @wq_siblings_{{[0-9]+}}(
// CHECK-LABEL: func.func @first
// CHECK: kiln.slice
// CHECK-LABEL: func.func @second
// CHECK: kiln.slice
func.func @first(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wq = ml_program.global_load_const @wq : tensor<2x2xf32>
  %wk = ml_program.global_load_const @wk : tensor<2x2xf32>
  %a = kiln.matmul %x, %wq : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wk : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
func.func @second(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %wq = ml_program.global_load_const @wq : tensor<2x2xf32>
  %wk = ml_program.global_load_const @wk : tensor<2x2xf32>
  %a = kiln.matmul %x, %wq : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %b = kiln.matmul %x, %wk : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %s = kiln.matmul %a, %b : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      wq: "0x040000000000803F000000400000404000008040",
      wk: "0x040000000000A0400000C0400000E04000000041"
    }
  }
#-}
