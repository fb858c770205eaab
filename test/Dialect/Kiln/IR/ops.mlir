// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round trip of every kiln op through the custom and the generic syntax.
// Default-valued attributes (keepdims = true, data_format nchw, reduction
// none, nearest_mode round_prefer_floor, epsilon 1e-5, ...) are parsed when
// written and elided when printed.

// Unary float math: exp through cos, same type in and out.
// CHECK-LABEL: func.func @unary_float_math(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.exp %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.log %[[V0]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.sqrt %[[V1]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.rsqrt %[[V2]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.reciprocal %[[V3]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V5:.*]] = kiln.tanh %[[V4]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V6:.*]] = kiln.sigmoid %[[V5]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V7:.*]] = kiln.erf %[[V6]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V8:.*]] = kiln.sin %[[V7]] : tensor<2x3xf32>
// CHECK-NEXT:      %[[V9:.*]] = kiln.cos %[[V8]] : tensor<2x3xf32>
// CHECK-NEXT:      return %[[V9]] : tensor<2x3xf32>
func.func @unary_float_math(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.exp %x : tensor<2x3xf32>
  %1 = kiln.log %0 : tensor<2x3xf32>
  %2 = kiln.sqrt %1 : tensor<2x3xf32>
  %3 = kiln.rsqrt %2 : tensor<2x3xf32>
  %4 = kiln.reciprocal %3 : tensor<2x3xf32>
  %5 = kiln.tanh %4 : tensor<2x3xf32>
  %6 = kiln.sigmoid %5 : tensor<2x3xf32>
  %7 = kiln.erf %6 : tensor<2x3xf32>
  %8 = kiln.sin %7 : tensor<2x3xf32>
  %9 = kiln.cos %8 : tensor<2x3xf32>
  return %9 : tensor<2x3xf32>
}

// Inverse trigonometric and hyperbolic functions.
// CHECK-LABEL: func.func @unary_trig(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.asin %[[X]] : tensor<3xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.acos %[[V0]] : tensor<3xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.atan %[[V1]] : tensor<3xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.sinh %[[V2]] : tensor<3xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.cosh %[[V3]] : tensor<3xf32>
// CHECK-NEXT:      %[[V5:.*]] = kiln.asinh %[[V4]] : tensor<3xf32>
// CHECK-NEXT:      %[[V6:.*]] = kiln.acosh %[[V5]] : tensor<3xf32>
// CHECK-NEXT:      %[[V7:.*]] = kiln.atanh %[[V6]] : tensor<3xf32>
// CHECK-NEXT:      return %[[V7]] : tensor<3xf32>
func.func @unary_trig(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = kiln.asin %x : tensor<3xf32>
  %1 = kiln.acos %0 : tensor<3xf32>
  %2 = kiln.atan %1 : tensor<3xf32>
  %3 = kiln.sinh %2 : tensor<3xf32>
  %4 = kiln.cosh %3 : tensor<3xf32>
  %5 = kiln.asinh %4 : tensor<3xf32>
  %6 = kiln.acosh %5 : tensor<3xf32>
  %7 = kiln.atanh %6 : tensor<3xf32>
  return %7 : tensor<3xf32>
}

// Rounding ops on a bf16 tensor.
// CHECK-LABEL: func.func @unary_rounding(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xbf16>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.floor %[[X]] : tensor<4xbf16>
// CHECK-NEXT:      %[[V1:.*]] = kiln.ceil %[[V0]] : tensor<4xbf16>
// CHECK-NEXT:      %[[V2:.*]] = kiln.round %[[V1]] : tensor<4xbf16>
// CHECK-NEXT:      return %[[V2]] : tensor<4xbf16>
func.func @unary_rounding(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = kiln.floor %x : tensor<4xbf16>
  %1 = kiln.ceil %0 : tensor<4xbf16>
  %2 = kiln.round %1 : tensor<4xbf16>
  return %2 : tensor<4xbf16>
}

// Numeric unary ops accept integers as well as floats.
// CHECK-LABEL: func.func @unary_numeric(
// CHECK-SAME:      %[[I:[^:]*]]: tensor<5xi32>, %[[F:[^:]*]]: tensor<f16>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.neg %[[I]] : tensor<5xi32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.abs %[[V0]] : tensor<5xi32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.sign %[[V1]] : tensor<5xi32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.relu %[[V2]] : tensor<5xi32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.neg %[[F]] : tensor<f16>
// CHECK-NEXT:      %[[V5:.*]] = kiln.abs %[[V4]] : tensor<f16>
// CHECK-NEXT:      %[[V6:.*]] = kiln.sign %[[V5]] : tensor<f16>
// CHECK-NEXT:      %[[V7:.*]] = kiln.relu %[[V6]] : tensor<f16>
// CHECK-NEXT:      return %[[V3]], %[[V7]] : tensor<5xi32>, tensor<f16>
func.func @unary_numeric(%i: tensor<5xi32>, %f: tensor<f16>) -> (tensor<5xi32>, tensor<f16>) {
  %0 = kiln.neg %i : tensor<5xi32>
  %1 = kiln.abs %0 : tensor<5xi32>
  %2 = kiln.sign %1 : tensor<5xi32>
  %3 = kiln.relu %2 : tensor<5xi32>
  %4 = kiln.neg %f : tensor<f16>
  %5 = kiln.abs %4 : tensor<f16>
  %6 = kiln.sign %5 : tensor<f16>
  %7 = kiln.relu %6 : tensor<f16>
  return %3, %7 : tensor<5xi32>, tensor<f16>
}

// Logical not on a bool tensor.
// CHECK-LABEL: func.func @not(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3xi1>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.not %[[X]] : tensor<3xi1>
// CHECK-NEXT:      return %[[V0]] : tensor<3xi1>
func.func @not(%x: tensor<3xi1>) -> tensor<3xi1> {
  %0 = kiln.not %x : tensor<3xi1>
  return %0 : tensor<3xi1>
}

// Attribute-free activations: softplus and hard_swish.
// CHECK-LABEL: func.func @activations(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.softplus %[[X]] : tensor<8xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.hard_swish %[[V0]] : tensor<8xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<8xf32>
func.func @activations(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.softplus %x : tensor<8xf32>
  %1 = kiln.hard_swish %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// leaky_relu and elu: default alpha is elided, an explicit one is kept.
// CHECK-LABEL: func.func @leaky_relu_elu(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.leaky_relu %[[X]] : tensor<8xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.leaky_relu %[[V0]] {alpha = 2.000000e-01 : f32} : tensor<8xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.elu %[[V1]] : tensor<8xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.elu %[[V2]] {alpha = 5.000000e-01 : f32} : tensor<8xf32>
// CHECK-NEXT:      return %[[V3]] : tensor<8xf32>
func.func @leaky_relu_elu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.leaky_relu %x : tensor<8xf32>
  %1 = kiln.leaky_relu %0 {alpha = 2.000000e-01 : f32} : tensor<8xf32>
  %2 = kiln.elu %1 : tensor<8xf32>
  %3 = kiln.elu %2 {alpha = 5.000000e-01 : f32} : tensor<8xf32>
  return %3 : tensor<8xf32>
}

// gelu, exact and with the tanh approximation.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x768xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.gelu %[[X]] : tensor<2x768xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.gelu %[[V0]] {tanh} : tensor<2x768xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<2x768xf32>
func.func @gelu(%x: tensor<2x768xf32>) -> tensor<2x768xf32> {
  %0 = kiln.gelu %x : tensor<2x768xf32>
  %1 = kiln.gelu %0 {tanh} : tensor<2x768xf32>
  return %1 : tensor<2x768xf32>
}

// hard_sigmoid with default and explicit alpha/beta.
// CHECK-LABEL: func.func @hard_sigmoid(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.hard_sigmoid %[[X]] : tensor<8xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.hard_sigmoid %[[V0]] {alpha = 0.166666701 : f32, beta = 2.500000e-01 : f32} : tensor<8xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<8xf32>
func.func @hard_sigmoid(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.hard_sigmoid %x : tensor<8xf32>
  %1 = kiln.hard_sigmoid %0 {alpha = 1.666667e-01 : f32, beta = 2.500000e-01 : f32} : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// clip with both bounds, only a lower bound, only an upper bound, none.
// CHECK-LABEL: func.func @clip(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>, %[[I:[^:]*]]: tensor<4xi64>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.clip %[[X]] {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.clip %[[V0]] {min = -1.000000e+00 : f64} : tensor<4xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.clip %[[V1]] {max = 1.000000e+00 : f64} : tensor<4xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.clip %[[I]] : tensor<4xi64>
// CHECK-NEXT:      return %[[V2]], %[[V3]] : tensor<4xf32>, tensor<4xi64>
func.func @clip(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %0 = kiln.clip %x {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4xf32>
  %1 = kiln.clip %0 {min = -1.000000e+00 : f64} : tensor<4xf32>
  %2 = kiln.clip %1 {max = 1.000000e+00 : f64} : tensor<4xf32>
  %3 = kiln.clip %i : tensor<4xi64>
  return %2, %3 : tensor<4xf32>, tensor<4xi64>
}

// Arithmetic binary ops with numpy broadcasting of the operands.
// CHECK-LABEL: func.func @arithmetic(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<2x3xf32>, %[[B:[^:]*]]: tensor<3xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.sub %[[V0]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.mul %[[V1]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.div %[[V2]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.pow %[[V3]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V5:.*]] = kiln.max %[[V4]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[V6:.*]] = kiln.min %[[V5]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      return %[[V6]] : tensor<2x3xf32>
func.func @arithmetic(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = kiln.sub %0, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %2 = kiln.mul %1, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %3 = kiln.div %2, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %4 = kiln.pow %3, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %5 = kiln.max %4, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %6 = kiln.min %5, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return %6 : tensor<2x3xf32>
}

// Broadcasting stretches size-1 dimensions on both sides.
// CHECK-LABEL: func.func @broadcast_both_sides(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4x1xi32>, %[[B:[^:]*]]: tensor<1x5xi32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.add %[[A]], %[[B]] : tensor<4x1xi32>, tensor<1x5xi32> -> tensor<4x5xi32>
// CHECK-NEXT:      return %[[V0]] : tensor<4x5xi32>
func.func @broadcast_both_sides(%a: tensor<4x1xi32>, %b: tensor<1x5xi32>) -> tensor<4x5xi32> {
  %0 = kiln.add %a, %b : tensor<4x1xi32>, tensor<1x5xi32> -> tensor<4x5xi32>
  return %0 : tensor<4x5xi32>
}

// mod: Python-style on integers, fmod on floats.
// CHECK-LABEL: func.func @mod(
// CHECK-SAME:      %[[I:[^:]*]]: tensor<4xi32>, %[[F:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.mod %[[I]], %[[I]] : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.mod %[[F]], %[[F]] {fmod} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<4xi32>, tensor<4xf32>
func.func @mod(%i: tensor<4xi32>, %f: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %0 = kiln.mod %i, %i : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  %1 = kiln.mod %f, %f {fmod} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xi32>, tensor<4xf32>
}

// Logical binary ops on bool tensors.
// CHECK-LABEL: func.func @logical(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<2x2xi1>, %[[B:[^:]*]]: tensor<i1>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.and %[[A]], %[[B]] : tensor<2x2xi1>, tensor<i1> -> tensor<2x2xi1>
// CHECK-NEXT:      %[[V1:.*]] = kiln.or %[[V0]], %[[B]] : tensor<2x2xi1>, tensor<i1> -> tensor<2x2xi1>
// CHECK-NEXT:      %[[V2:.*]] = kiln.xor %[[V1]], %[[A]] : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
// CHECK-NEXT:      return %[[V2]] : tensor<2x2xi1>
func.func @logical(%a: tensor<2x2xi1>, %b: tensor<i1>) -> tensor<2x2xi1> {
  %0 = kiln.and %a, %b : tensor<2x2xi1>, tensor<i1> -> tensor<2x2xi1>
  %1 = kiln.or %0, %b : tensor<2x2xi1>, tensor<i1> -> tensor<2x2xi1>
  %2 = kiln.xor %1, %a : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
  return %2 : tensor<2x2xi1>
}

// Comparisons yield i1 whatever the operand element type.
// CHECK-LABEL: func.func @compare(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<3xf32>, %[[B:[^:]*]]: tensor<f32>, %[[I:[^:]*]]: tensor<2x3xi64>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.equal %[[A]], %[[B]] : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
// CHECK-NEXT:      %[[V1:.*]] = kiln.less %[[A]], %[[B]] : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
// CHECK-NEXT:      %[[V2:.*]] = kiln.less_equal %[[A]], %[[B]] : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
// CHECK-NEXT:      %[[V3:.*]] = kiln.greater %[[A]], %[[B]] : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
// CHECK-NEXT:      %[[V4:.*]] = kiln.greater_equal %[[I]], %[[I]] : tensor<2x3xi64>, tensor<2x3xi64> -> tensor<2x3xi1>
// CHECK-NEXT:      return %[[V3]], %[[V4]] : tensor<3xi1>, tensor<2x3xi1>
func.func @compare(%a: tensor<3xf32>, %b: tensor<f32>, %i: tensor<2x3xi64>) -> (tensor<3xi1>, tensor<2x3xi1>) {
  %0 = kiln.equal %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %1 = kiln.less %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %2 = kiln.less_equal %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %3 = kiln.greater %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %4 = kiln.greater_equal %i, %i : tensor<2x3xi64>, tensor<2x3xi64> -> tensor<2x3xi1>
  return %3, %4 : tensor<3xi1>, tensor<2x3xi1>
}

// select broadcasts the condition and both values.
// CHECK-LABEL: func.func @select(
// CHECK-SAME:      %[[C:[^:]*]]: tensor<2x3xi1>, %[[A:[^:]*]]: tensor<2x3xf32>, %[[B:[^:]*]]: tensor<f32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.select %[[C]], %[[A]], %[[B]] : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<2x3xf32>
func.func @select(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
  %0 = kiln.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// cast between float, integer and bool element types.
// CHECK-LABEL: func.func @cast(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.cast %[[X]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// CHECK-NEXT:      %[[V1:.*]] = kiln.cast %[[V0]] : tensor<2x3xbf16> -> tensor<2x3xi32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.cast %[[V1]] : tensor<2x3xi32> -> tensor<2x3xi1>
// CHECK-NEXT:      return %[[V2]] : tensor<2x3xi1>
func.func @cast(%x: tensor<2x3xf32>) -> tensor<2x3xi1> {
  %0 = kiln.cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
  %1 = kiln.cast %0 : tensor<2x3xbf16> -> tensor<2x3xi32>
  %2 = kiln.cast %1 : tensor<2x3xi32> -> tensor<2x3xi1>
  return %2 : tensor<2x3xi1>
}

// matmul with a broadcast batch dimension.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<8x128x64xf32>, %[[B:[^:]*]]: tensor<64x32xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.matmul %[[A]], %[[B]] : tensor<8x128x64xf32>, tensor<64x32xf32> -> tensor<8x128x32xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<8x128x32xf32>
func.func @matmul(%a: tensor<8x128x64xf32>, %b: tensor<64x32xf32>) -> tensor<8x128x32xf32> {
  %0 = kiln.matmul %a, %b : tensor<8x128x64xf32>, tensor<64x32xf32> -> tensor<8x128x32xf32>
  return %0 : tensor<8x128x32xf32>
}

// matmul with 1-D operands: the added dimensions are dropped.
// CHECK-LABEL: func.func @matmul_vectors(
// CHECK-SAME:      %[[V:[^:]*]]: tensor<4xf16>, %[[M:[^:]*]]: tensor<4x5xf16>, %[[W:[^:]*]]: tensor<5xf16>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.matmul %[[V]], %[[M]] : tensor<4xf16>, tensor<4x5xf16> -> tensor<5xf16>
// CHECK-NEXT:      %[[V1:.*]] = kiln.matmul %[[V0]], %[[W]] : tensor<5xf16>, tensor<5xf16> -> tensor<f16>
// CHECK-NEXT:      return %[[V1]] : tensor<f16>
func.func @matmul_vectors(%v: tensor<4xf16>, %m: tensor<4x5xf16>, %w: tensor<5xf16>) -> tensor<f16> {
  %0 = kiln.matmul %v, %m : tensor<4xf16>, tensor<4x5xf16> -> tensor<5xf16>
  %1 = kiln.matmul %0, %w : tensor<5xf16>, tensor<5xf16> -> tensor<f16>
  return %1 : tensor<f16>
}

// bf16 and f16 contractions may return f32 (f32 accumulation).
// CHECK-LABEL: func.func @contraction_f32_result(
// CHECK-NEXT:      kiln.matmul %{{.*}}, %{{.*}} : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT:      kiln.conv %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
func.func @contraction_f32_result(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>, %x: tensor<1x3x8x8xf16>, %w: tensor<4x3x3x3xf16>, %c: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<1x4x6x6xf32>) {
  %0 = kiln.matmul %a, %b : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xf32>
  %1 = kiln.conv %x, %w, %c {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<1x4x6x6xf32>
}

// conv, nchw, with a bias.
// CHECK-LABEL: func.func @conv_bias(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x3x224x224xf32>, %[[W:[^:]*]]: tensor<64x3x7x7xf32>, %[[B:[^:]*]]: tensor<64xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.conv %[[X]], %[[W]], %[[B]] {dilations = array<i64: 1, 1>, padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x64x112x112xf32>
func.func @conv_bias(%x: tensor<1x3x224x224xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>) -> tensor<1x64x112x112xf32> {
  %0 = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>
  return %0 : tensor<1x64x112x112xf32>
}

// conv, nhwc, grouped (depthwise), without a bias.
// CHECK-LABEL: func.func @conv_nhwc_grouped(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x16x16x32xf32>, %[[W:[^:]*]]: tensor<32x3x3x1xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.conv %[[X]], %[[W]] {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 32 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x16x16x32xf32>, tensor<32x3x3x1xf32>) -> tensor<1x16x16x32xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x16x16x32xf32>
func.func @conv_nhwc_grouped(%x: tensor<1x16x16x32xf32>, %w: tensor<32x3x3x1xf32>) -> tensor<1x16x16x32xf32> {
  %0 = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 32 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x16x16x32xf32>, tensor<32x3x3x1xf32>) -> tensor<1x16x16x32xf32>
  return %0 : tensor<1x16x16x32xf32>
}

// 1-D dilated conv with an explicit (default) nchw format, which prints elided.
// CHECK-LABEL: func.func @conv_1d(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4x10xf16>, %[[W:[^:]*]]: tensor<8x4x3xf16>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.conv %[[X]], %[[W]] {dilations = array<i64: 2>, padding = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<2x4x10xf16>, tensor<8x4x3xf16>) -> tensor<2x8x6xf16>
// CHECK-NEXT:      return %[[V0]] : tensor<2x8x6xf16>
func.func @conv_1d(%x: tensor<2x4x10xf16>, %w: tensor<8x4x3xf16>) -> tensor<2x8x6xf16> {
  %0 = kiln.conv %x, %w {data_format = #kiln.data_format<nchw>, dilations = array<i64: 2>, padding = array<i64: 0, 0>, strides = array<i64: 1>} : (tensor<2x4x10xf16>, tensor<8x4x3xf16>) -> tensor<2x8x6xf16>
  return %0 : tensor<2x8x6xf16>
}

// conv_transpose without a bias.
// CHECK-LABEL: func.func @conv_transpose(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x16x8x8xf32>, %[[W:[^:]*]]: tensor<16x8x3x3xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.conv_transpose %[[X]], %[[W]] {dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x8x16x16xf32>
func.func @conv_transpose(%x: tensor<1x16x8x8xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
  %0 = kiln.conv_transpose %x, %w {dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// conv_transpose, grouped, with a bias.
// CHECK-LABEL: func.func @conv_transpose_bias(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x4x5x5xf32>, %[[W:[^:]*]]: tensor<4x3x2x2xf32>, %[[B:[^:]*]]: tensor<6xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.conv_transpose %[[X]], %[[W]], %[[B]] {dilations = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x3x2x2xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x6x6x6xf32>
func.func @conv_transpose_bias(%x: tensor<1x4x5x5xf32>, %w: tensor<4x3x2x2xf32>, %b: tensor<6xf32>) -> tensor<1x6x6x6xf32> {
  %0 = kiln.conv_transpose %x, %w, %b {dilations = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x3x2x2xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  return %0 : tensor<1x6x6x6xf32>
}

// reduce, every kind, with and without keepdims.
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x56x56xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.reduce <sum> %[[X]] {axes = array<i64: 2, 3>} : tensor<1x64x56x56xf32> -> tensor<1x64x1x1xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.reduce <mean> %[[X]] {axes = array<i64: 2, 3>} : tensor<1x64x56x56xf32> -> tensor<1x64x1x1xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.reduce <max> %[[V1]] {axes = array<i64: 0, 2, 3>, keepdims = false} : tensor<1x64x1x1xf32> -> tensor<64xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.reduce <min> %[[V2]] {axes = array<i64>} : tensor<64xf32> -> tensor<64xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.reduce <prod> %[[V0]] {axes = array<i64: 0>} : tensor<1x64x1x1xf32> -> tensor<1x64x1x1xf32>
// CHECK-NEXT:      return %[[V4]], %[[V3]] : tensor<1x64x1x1xf32>, tensor<64xf32>
func.func @reduce(%x: tensor<1x64x56x56xf32>) -> (tensor<1x64x1x1xf32>, tensor<64xf32>) {
  %0 = kiln.reduce <sum> %x {axes = array<i64: 2, 3>} : tensor<1x64x56x56xf32> -> tensor<1x64x1x1xf32>
  %1 = kiln.reduce <mean> %x {axes = array<i64: 2, 3>, keepdims = true} : tensor<1x64x56x56xf32> -> tensor<1x64x1x1xf32>
  %2 = kiln.reduce <max> %1 {axes = array<i64: 0, 2, 3>, keepdims = false} : tensor<1x64x1x1xf32> -> tensor<64xf32>
  %3 = kiln.reduce <min> %2 {axes = array<i64>} : tensor<64xf32> -> tensor<64xf32>
  %4 = kiln.reduce <prod> %0 {axes = array<i64: 0>} : tensor<1x64x1x1xf32> -> tensor<1x64x1x1xf32>
  return %4, %3 : tensor<1x64x1x1xf32>, tensor<64xf32>
}

// argmax/argmin: negative axis, keepdims, select_last_index.
// CHECK-LABEL: func.func @arg_reduce(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x1000xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.argmax %[[X]] {axis = 1 : i64, keepdims = false} : tensor<4x1000xf32> -> tensor<4xi64>
// CHECK-NEXT:      %[[V1:.*]] = kiln.argmin %[[X]] {axis = -1 : i64, select_last_index} : tensor<4x1000xf32> -> tensor<4x1xi64>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<4xi64>, tensor<4x1xi64>
func.func @arg_reduce(%x: tensor<4x1000xf32>) -> (tensor<4xi64>, tensor<4x1xi64>) {
  %0 = kiln.argmax %x {axis = 1 : i64, keepdims = false} : tensor<4x1000xf32> -> tensor<4xi64>
  %1 = kiln.argmin %x {axis = -1 : i64, select_last_index} : tensor<4x1000xf32> -> tensor<4x1xi64>
  return %0, %1 : tensor<4xi64>, tensor<4x1xi64>
}

// softmax and log_softmax along an axis.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x12x128x128xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.softmax %[[X]] {axis = -1 : i64} : tensor<8x12x128x128xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.log_softmax %[[V0]] {axis = 1 : i64} : tensor<8x12x128x128xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<8x12x128x128xf32>
func.func @softmax(%x: tensor<8x12x128x128xf32>) -> tensor<8x12x128x128xf32> {
  %0 = kiln.softmax %x {axis = -1 : i64} : tensor<8x12x128x128xf32>
  %1 = kiln.log_softmax %0 {axis = 1 : i64} : tensor<8x12x128x128xf32>
  return %1 : tensor<8x12x128x128xf32>
}

// layer_norm with and without the optional bias.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x128x768xf32>, %[[G:[^:]*]]: tensor<768xf32>, %[[B:[^:]*]]: tensor<768xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.layer_norm %[[V0]], %[[G]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<1x128x768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<1x128x768xf32>
func.func @layer_norm(%x: tensor<1x128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<1x128x768xf32> {
  %0 = kiln.layer_norm %x, %g, %b {epsilon = 9.99999974E-6 : f32} : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
  %1 = kiln.layer_norm %0, %g {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<1x128x768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
  return %1 : tensor<1x128x768xf32>
}

// batch_norm in both data formats.
// CHECK-LABEL: func.func @batch_norm(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x56x56xf32>, %[[Y:[^:]*]]: tensor<1x56x56x64xf32>, %[[P:[^:]*]]: tensor<64xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.batch_norm %[[X]], %[[P]], %[[P]], %[[P]], %[[P]] : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.batch_norm %[[Y]], %[[P]], %[[P]], %[[P]], %[[P]] {data_format = #kiln.data_format<nhwc>, epsilon = 1.000000e-03 : f32} : (tensor<1x56x56x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x56x56x64xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<1x64x56x56xf32>, tensor<1x56x56x64xf32>
func.func @batch_norm(%x: tensor<1x64x56x56xf32>, %y: tensor<1x56x56x64xf32>, %p: tensor<64xf32>) -> (tensor<1x64x56x56xf32>, tensor<1x56x56x64xf32>) {
  %0 = kiln.batch_norm %x, %p, %p, %p, %p : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %1 = kiln.batch_norm %y, %p, %p, %p, %p {data_format = #kiln.data_format<nhwc>, epsilon = 1.000000e-03 : f32} : (tensor<1x56x56x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x56x56x64xf32>
  return %0, %1 : tensor<1x64x56x56xf32>, tensor<1x56x56x64xf32>
}

// instance_norm over the spatial dimensions.
// CHECK-LABEL: func.func @instance_norm(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x8x16x16xf32>, %[[S:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.instance_norm %[[X]], %[[S]], %[[B]] {epsilon = 1.000000e-03 : f32} : (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x16x16xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<2x8x16x16xf32>
func.func @instance_norm(%x: tensor<2x8x16x16xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8x16x16xf32> {
  %0 = kiln.instance_norm %x, %s, %b {epsilon = 1.000000e-03 : f32} : (tensor<2x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x16x16xf32>
  return %0 : tensor<2x8x16x16xf32>
}

// lrn with default and explicit coefficients.
// CHECK-LABEL: func.func @lrn(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x96x55x55xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.lrn %[[X]] {size = 5 : i64} : tensor<1x96x55x55xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.lrn %[[V0]] {alpha = 2.000000e-04 : f32, beta = 5.000000e-01 : f32, bias = 2.000000e+00 : f32, size = 3 : i64} : tensor<1x96x55x55xf32>
// CHECK-NEXT:      return %[[V1]] : tensor<1x96x55x55xf32>
func.func @lrn(%x: tensor<1x96x55x55xf32>) -> tensor<1x96x55x55xf32> {
  %0 = kiln.lrn %x {size = 5 : i64} : tensor<1x96x55x55xf32>
  %1 = kiln.lrn %0 {alpha = 2.000000e-04 : f32, beta = 5.000000e-01 : f32, bias = 2.000000e+00 : f32, size = 3 : i64} : tensor<1x96x55x55xf32>
  return %1 : tensor<1x96x55x55xf32>
}

// pool: max with padding, avg with count_include_pad and ceil_mode.
// CHECK-LABEL: func.func @pool(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x112x112xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.pool <max> %[[X]] {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.pool <avg> %[[X]] {ceil_mode, count_include_pad, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>
func.func @pool(%x: tensor<1x64x112x112xf32>) -> (tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>) {
  %0 = kiln.pool <max> %x {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
  %1 = kiln.pool <avg> %x {ceil_mode, count_include_pad, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
  return %0, %1 : tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>
}

// pool on an nhwc activation.
// CHECK-LABEL: func.func @pool_nhwc(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x8x8x16xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.pool <avg> %[[X]] {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x8x8x16xf32> -> tensor<1x4x4x16xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x4x4x16xf32>
func.func @pool_nhwc(%x: tensor<1x8x8x16xf32>) -> tensor<1x4x4x16xf32> {
  %0 = kiln.pool <avg> %x {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x8x8x16xf32> -> tensor<1x4x4x16xf32>
  return %0 : tensor<1x4x4x16xf32>
}

// global_pool in both formats and both kinds.
// CHECK-LABEL: func.func @global_pool(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x2048x7x7xf32>, %[[Y:[^:]*]]: tensor<1x7x7x2048xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.global_pool <avg> %[[X]] : tensor<1x2048x7x7xf32> -> tensor<1x2048x1x1xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.global_pool <max> %[[Y]] {data_format = #kiln.data_format<nhwc>} : tensor<1x7x7x2048xf32> -> tensor<1x1x1x2048xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<1x2048x1x1xf32>, tensor<1x1x1x2048xf32>
func.func @global_pool(%x: tensor<1x2048x7x7xf32>, %y: tensor<1x7x7x2048xf32>) -> (tensor<1x2048x1x1xf32>, tensor<1x1x1x2048xf32>) {
  %0 = kiln.global_pool <avg> %x : tensor<1x2048x7x7xf32> -> tensor<1x2048x1x1xf32>
  %1 = kiln.global_pool <max> %y {data_format = #kiln.data_format<nhwc>} : tensor<1x7x7x2048xf32> -> tensor<1x1x1x2048xf32>
  return %0, %1 : tensor<1x2048x1x1xf32>, tensor<1x1x1x2048xf32>
}

// constant: dense, splat and scalar values.
// CHECK-LABEL: func.func @constant(
// CHECK-NEXT:      %[[V0:.*]] = kiln.constant dense<[1, 2048]> : tensor<2xi64>
// CHECK-NEXT:      %[[V1:.*]] = kiln.constant dense<1.500000e+00> : tensor<2x2xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.constant dense<true> : tensor<i1>
// CHECK-NEXT:      return %[[V0]], %[[V1]], %[[V2]] : tensor<2xi64>, tensor<2x2xf32>, tensor<i1>
func.func @constant() -> (tensor<2xi64>, tensor<2x2xf32>, tensor<i1>) {
  %0 = kiln.constant dense<[1, 2048]> : tensor<2xi64>
  %1 = kiln.constant dense<1.500000e+00> : tensor<2x2xf32>
  %2 = kiln.constant dense<true> : tensor<i1>
  return %0, %1, %2 : tensor<2xi64>, tensor<2x2xf32>, tensor<i1>
}

// iota with integer and float results.
// CHECK-LABEL: func.func @iota(
// CHECK-NEXT:      %[[V0:.*]] = kiln.iota {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<128xi64>
// CHECK-NEXT:      %[[V1:.*]] = kiln.iota {start = 1.000000e+00 : f64, step = -5.000000e-01 : f64} : tensor<4xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<128xi64>, tensor<4xf32>
func.func @iota() -> (tensor<128xi64>, tensor<4xf32>) {
  %0 = kiln.iota {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<128xi64>
  %1 = kiln.iota {start = 1.000000e+00 : f64, step = -5.000000e-01 : f64} : tensor<4xf32>
  return %0, %1 : tensor<128xi64>, tensor<4xf32>
}

// reshape keeps the element count and type.
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x2048x1x1xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.reshape %[[X]] : tensor<1x2048x1x1xf32> -> tensor<1x2048xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x2048xf32>
func.func @reshape(%x: tensor<1x2048x1x1xf32>) -> tensor<1x2048xf32> {
  %0 = kiln.reshape %x : tensor<1x2048x1x1xf32> -> tensor<1x2048xf32>
  return %0 : tensor<1x2048xf32>
}

// transpose permutes the dimensions.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x56x56xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x64x56x56xf32> -> tensor<1x56x56x64xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x56x56x64xf32>
func.func @transpose(%x: tensor<1x64x56x56xf32>) -> tensor<1x56x56x64xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x64x56x56xf32> -> tensor<1x56x56x64xf32>
  return %0 : tensor<1x56x56x64xf32>
}

// broadcast to a larger rank.
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x1xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.broadcast %[[X]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<2x3x4xf32>
func.func @broadcast(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// concat of three inputs.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<1x64x28x28xf32>, %[[B:[^:]*]]: tensor<1x32x28x28xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.concat %[[A]], %[[B]], %[[A]] {axis = 1 : i64} : tensor<1x64x28x28xf32>, tensor<1x32x28x28xf32>, tensor<1x64x28x28xf32> -> tensor<1x160x28x28xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<1x160x28x28xf32>
func.func @concat(%a: tensor<1x64x28x28xf32>, %b: tensor<1x32x28x28xf32>) -> tensor<1x160x28x28xf32> {
  %0 = kiln.concat %a, %b, %a {axis = 1 : i64} : tensor<1x64x28x28xf32>, tensor<1x32x28x28xf32>, tensor<1x64x28x28xf32> -> tensor<1x160x28x28xf32>
  return %0 : tensor<1x160x28x28xf32>
}

// slice with positive and negative steps.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x10xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.slice %[[X]] {limits = array<i64: 4, 9>, starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : tensor<4x10xf32> -> tensor<4x4xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.slice %[[X]] {limits = array<i64: -1, 10>, starts = array<i64: 3, 0>, steps = array<i64: -2, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<4x4xf32>, tensor<2x10xf32>
func.func @slice(%x: tensor<4x10xf32>) -> (tensor<4x4xf32>, tensor<2x10xf32>) {
  %0 = kiln.slice %x {limits = array<i64: 4, 9>, starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : tensor<4x10xf32> -> tensor<4x4xf32>
  %1 = kiln.slice %x {limits = array<i64: -1, 10>, starts = array<i64: 3, 0>, steps = array<i64: -2, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<2x10xf32>
}

// gather with i64 and i32 indices.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:      %[[T:[^:]*]]: tensor<30522x768xf32>, %[[IDS:[^:]*]]: tensor<1x128xi64>, %[[J:[^:]*]]: tensor<i32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.gather %[[T]], %[[IDS]] {axis = 0 : i64} : tensor<30522x768xf32>, tensor<1x128xi64> -> tensor<1x128x768xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.gather %[[T]], %[[J]] {axis = 1 : i64} : tensor<30522x768xf32>, tensor<i32> -> tensor<30522xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]] : tensor<1x128x768xf32>, tensor<30522xf32>
func.func @gather(%t: tensor<30522x768xf32>, %ids: tensor<1x128xi64>, %j: tensor<i32>) -> (tensor<1x128x768xf32>, tensor<30522xf32>) {
  %0 = kiln.gather %t, %ids {axis = 0 : i64} : tensor<30522x768xf32>, tensor<1x128xi64> -> tensor<1x128x768xf32>
  %1 = kiln.gather %t, %j {axis = 1 : i64} : tensor<30522x768xf32>, tensor<i32> -> tensor<30522xf32>
  return %0, %1 : tensor<1x128x768xf32>, tensor<30522xf32>
}

// gather_elements takes the indices' shape.
// CHECK-LABEL: func.func @gather_elements(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x4xf32>, %[[I:[^:]*]]: tensor<3x2xi64>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.gather_elements %[[X]], %[[I]] {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<3x2xf32>
func.func @gather_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = kiln.gather_elements %x, %i {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// scatter_elements with every reduction.
// CHECK-LABEL: func.func @scatter_elements(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x4xf32>, %[[I:[^:]*]]: tensor<3x2xi64>, %[[U:[^:]*]]: tensor<3x2xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.scatter_elements %[[X]], %[[I]], %[[U]] {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.scatter_elements %[[V0]], %[[I]], %[[U]] {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.scatter_elements %[[V1]], %[[I]], %[[U]] {axis = 1 : i64, reduction = #kiln.scatter_reduction<add>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.scatter_elements %[[V2]], %[[I]], %[[U]] {axis = 0 : i64, reduction = #kiln.scatter_reduction<mul>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.scatter_elements %[[V3]], %[[I]], %[[U]] {axis = 1 : i64, reduction = #kiln.scatter_reduction<max>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %[[V5:.*]] = kiln.scatter_elements %[[V4]], %[[I]], %[[U]] {axis = 1 : i64, reduction = #kiln.scatter_reduction<min>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      return %[[V5]] : tensor<3x4xf32>
func.func @scatter_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %1 = kiln.scatter_elements %0, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<none>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %2 = kiln.scatter_elements %1, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<add>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %3 = kiln.scatter_elements %2, %i, %u {axis = 0 : i64, reduction = #kiln.scatter_reduction<mul>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %4 = kiln.scatter_elements %3, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<max>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %5 = kiln.scatter_elements %4, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<min>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  return %5 : tensor<3x4xf32>
}

// pad in every mode.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x3x8x8xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.pad <constant> %[[X]] {high = array<i64: 0, 0, 1, 1>, low = array<i64: 0, 0, 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.pad <constant> %[[X]] {high = array<i64: 0, 0, 2, 0>, low = array<i64: 0, 0, 2, 0>, value = -1.000000e+00 : f64} : tensor<1x3x8x8xf32> -> tensor<1x3x12x8xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.pad <reflect> %[[X]] {high = array<i64: 0, 0, 1, 0>, low = array<i64: 0, 0, 0, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x9x8xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.pad <edge> %[[X]] {high = array<i64: 0, 0, 0, 0>, low = array<i64: 0, 0, 1, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x9x8xf32>
// CHECK-NEXT:      return %[[V0]], %[[V1]], %[[V3]] : tensor<1x3x10x10xf32>, tensor<1x3x12x8xf32>, tensor<1x3x9x8xf32>
func.func @pad(%x: tensor<1x3x8x8xf32>) -> (tensor<1x3x10x10xf32>, tensor<1x3x12x8xf32>, tensor<1x3x9x8xf32>) {
  %0 = kiln.pad <constant> %x {high = array<i64: 0, 0, 1, 1>, low = array<i64: 0, 0, 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
  %1 = kiln.pad <constant> %x {high = array<i64: 0, 0, 2, 0>, low = array<i64: 0, 0, 2, 0>, value = -1.000000e+00 : f64} : tensor<1x3x8x8xf32> -> tensor<1x3x12x8xf32>
  %2 = kiln.pad <reflect> %x {high = array<i64: 0, 0, 1, 0>, low = array<i64: 0, 0, 0, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x9x8xf32>
  %3 = kiln.pad <edge> %x {high = array<i64: 0, 0, 0, 0>, low = array<i64: 0, 0, 1, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x9x8xf32>
  return %0, %1, %3 : tensor<1x3x10x10xf32>, tensor<1x3x12x8xf32>, tensor<1x3x9x8xf32>
}

// split into three results, and into a single piece.
// CHECK-LABEL: func.func @split(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x128x2304xf32>)
// CHECK-NEXT:      %[[V0:.*]]:3 = kiln.split %[[X]] {axis = 2 : i64, sizes = array<i64: 768, 768, 768>} : tensor<1x128x2304xf32> -> tensor<1x128x768xf32>, tensor<1x128x768xf32>, tensor<1x128x768xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.split %[[X]] {axis = 0 : i64, sizes = array<i64: 1>} : tensor<1x128x2304xf32> -> tensor<1x128x2304xf32>
// CHECK-NEXT:      return %[[V0]]#2, %[[V1]] : tensor<1x128x768xf32>, tensor<1x128x2304xf32>
func.func @split(%x: tensor<1x128x2304xf32>) -> (tensor<1x128x768xf32>, tensor<1x128x2304xf32>) {
  %0:3 = kiln.split %x {axis = 2 : i64, sizes = array<i64: 768, 768, 768>} : tensor<1x128x2304xf32> -> tensor<1x128x768xf32>, tensor<1x128x768xf32>, tensor<1x128x768xf32>
  %1 = kiln.split %x {axis = 0 : i64, sizes = array<i64: 1>} : tensor<1x128x2304xf32> -> tensor<1x128x2304xf32>
  return %0#2, %1 : tensor<1x128x768xf32>, tensor<1x128x2304xf32>
}

// tile repeats along each dimension.
// CHECK-LABEL: func.func @tile(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x4xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.tile %[[X]] {repeats = array<i64: 2, 1>} : tensor<3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:      return %[[V0]] : tensor<6x4xf32>
func.func @tile(%x: tensor<3x4xf32>) -> tensor<6x4xf32> {
  %0 = kiln.tile %x {repeats = array<i64: 2, 1>} : tensor<3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// resize: nearest with every nearest_mode, linear with every coordinate_mode.
// CHECK-LABEL: func.func @resize(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x16x16xf32>)
// CHECK-NEXT:      %[[V0:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<asymmetric>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      %[[V1:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      %[[V2:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<round_prefer_ceil>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      %[[V3:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<ceil>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      %[[V4:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<pytorch_half_pixel>, mode = #kiln.resize_mode<linear>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      %[[V5:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<align_corners>, mode = #kiln.resize_mode<linear>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
// CHECK-NEXT:      return %[[V5]] : tensor<1x64x32x32xf32>
func.func @resize(%x: tensor<1x64x16x16xf32>) -> tensor<1x64x32x32xf32> {
  %0 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<asymmetric>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  %1 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  %2 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<round_prefer_ceil>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  %3 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<ceil>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  %4 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<pytorch_half_pixel>, mode = #kiln.resize_mode<linear>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  %5 = kiln.resize %x {coordinate_mode = #kiln.coordinate_mode<align_corners>, mode = #kiln.resize_mode<linear>, nearest_mode = #kiln.nearest_mode<round_prefer_floor>, scales = array<f64>} : tensor<1x64x16x16xf32> -> tensor<1x64x32x32xf32>
  return %5 : tensor<1x64x32x32xf32>
}

// A fusion region with two results of one shape; yield of several values.
// CHECK-LABEL: func.func @fusion(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>
// CHECK-NEXT:      %[[F:.*]]:2 = kiln.fusion "elementwise" -> tensor<2x3xf32>, tensor<2x3xf32> {
// CHECK-NEXT:        %[[R:.*]] = kiln.relu %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:        %[[E:.*]] = kiln.exp %[[R]] : tensor<2x3xf32>
// CHECK-NEXT:        kiln.yield %[[R]], %[[E]] : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      return %[[F]]#1 : tensor<2x3xf32>
func.func @fusion(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0:2 = kiln.fusion "elementwise" -> tensor<2x3xf32>, tensor<2x3xf32> {
    %r = kiln.relu %x : tensor<2x3xf32>
    %e = kiln.exp %r : tensor<2x3xf32>
    kiln.yield %r, %e : tensor<2x3xf32>, tensor<2x3xf32>
  }
  return %0#1 : tensor<2x3xf32>
}

// resize: cubic with its coefficient and exclude_outside, and the
// half_pixel_symmetric coordinate mode.
// CHECK-LABEL: func.func @resize_cubic(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x1x4x4xf32>)
// CHECK-NEXT:      %[[C:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel>, cubic_coeff_a = -5.000000e-01 : f64, exclude_outside, mode = #kiln.resize_mode<cubic>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x8x8xf32>
// CHECK-NEXT:      %[[S:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel_symmetric>, mode = #kiln.resize_mode<linear>, scales = array<f64: 1.000000e+00, 1.000000e+00, 1.700000e+00, 1.700000e+00>} : tensor<1x1x4x4xf32> -> tensor<1x1x6x6xf32>
// CHECK-NEXT:      return %[[C]], %[[S]]
func.func @resize_cubic(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x8x8xf32>, tensor<1x1x6x6xf32>) {
  %0 = kiln.resize %x {mode = #kiln.resize_mode<cubic>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, cubic_coeff_a = -0.5 : f64, exclude_outside, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x8x8xf32>
  %1 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel_symmetric>, scales = array<f64: 1.0, 1.0, 1.7, 1.7>} : tensor<1x1x4x4xf32> -> tensor<1x1x6x6xf32>
  return %0, %1 : tensor<1x1x8x8xf32>, tensor<1x1x6x6xf32>
}

// resize: tf_crop_and_resize with its region and extrapolation value.
// CHECK-LABEL: func.func @resize_crop(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x1x4x4xf32>)
// CHECK-NEXT:      %[[R:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, extrapolation_value = 1.000000e+01 : f64, mode = #kiln.resize_mode<linear>, roi = array<f64: 0.000000e+00, 0.000000e+00, 4.000000e-01, 6.000000e-01, 1.000000e+00, 1.000000e+00, 1.200000e+00, 1.700000e+00>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
// CHECK-NEXT:      return %[[R]]
func.func @resize_crop(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, roi = array<f64: 0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 1.2, 1.7>, extrapolation_value = 10.0 : f64, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// resize: scales and a region given at run time, over value_axes.
// CHECK-LABEL: func.func @resize_runtime(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x1x4x6xf32>, %[[S:[^:]*]]: tensor<2xf32>, %[[R:[^:]*]]: tensor<4xf64>)
// CHECK-NEXT:      %[[A:.*]] = kiln.resize %[[X]] scales(%[[S]] : tensor<2xf32>) {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<linear>, scales = array<f64>, value_axes = array<i64: 2, 3>} : tensor<1x1x4x6xf32> -> tensor<1x1x2x3xf32>
// CHECK-NEXT:      %[[B:.*]] = kiln.resize %[[X]] roi(%[[R]] : tensor<4xf64>) {coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, mode = #kiln.resize_mode<linear>, roi = array<f64: 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00>, scales = array<f64>, value_axes = array<i64: 3, 2>} : tensor<1x1x4x6xf32> -> tensor<1x1x3x3xf32>
// CHECK-NEXT:      return %[[A]], %[[B]]
func.func @resize_runtime(%x: tensor<1x1x4x6xf32>, %s: tensor<2xf32>, %r: tensor<4xf64>) -> (tensor<1x1x2x3xf32>, tensor<1x1x3x3xf32>) {
  %0 = kiln.resize %x scales(%s : tensor<2xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 2, 3>} : tensor<1x1x4x6xf32> -> tensor<1x1x2x3xf32>
  %1 = kiln.resize %x roi(%r : tensor<4xf64>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<tf_crop_and_resize>, roi = array<f64: 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0>, scales = array<f64>, value_axes = array<i64: 3, 2>} : tensor<1x1x4x6xf32> -> tensor<1x1x3x3xf32>
  return %0, %1 : tensor<1x1x2x3xf32>, tensor<1x1x3x3xf32>
}

// call_kernel: a precompiled kernel on tensors (with its scalars) and, after
// bufferization, on memrefs (no results).
gpu.binary @tc_gemm [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
// CHECK-LABEL: func.func @call_kernel(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<64x32xbf16>, %[[B:[^:]*]]: tensor<32x16xbf16>, %[[M:[^:]*]]: memref<4xf32>, %[[N:[^:]*]]: memref<4xf32>)
// CHECK-NEXT:      %[[E:.*]] = tensor.empty() : tensor<64x16xf32>
// CHECK-NEXT:      %[[Y:.*]] = kiln.call_kernel @tc_gemm::@tc_gemm ins(%[[A]], %[[B]] : tensor<64x32xbf16>, tensor<32x16xbf16>) outs(%[[E]] : tensor<64x16xf32>) grid [1, 1, 1] block [128, 1, 1] scalars [64 : i32, 16] {dynamic_shared_bytes = 4096 : i32} -> tensor<64x16xf32>
// CHECK-NEXT:      kiln.call_kernel @tc_gemm::@tc_gemm ins(%[[M]] : memref<4xf32>) outs(%[[N]] : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1]{{$}}
// CHECK-NEXT:      return %[[Y]]
func.func @call_kernel(%a: tensor<64x32xbf16>, %b: tensor<32x16xbf16>, %m: memref<4xf32>, %n: memref<4xf32>) -> tensor<64x16xf32> {
  %e = tensor.empty() : tensor<64x16xf32>
  %y = kiln.call_kernel @tc_gemm::@tc_gemm ins(%a, %b : tensor<64x32xbf16>, tensor<32x16xbf16>) outs(%e : tensor<64x16xf32>) grid [1, 1, 1] block [128, 1, 1] scalars [64 : i32, 16 : i64] {dynamic_shared_bytes = 4096 : i32} -> tensor<64x16xf32>
  kiln.call_kernel @tc_gemm::@tc_gemm ins(%m : memref<4xf32>) outs(%n : memref<4xf32>) grid [1, 1, 1] block [4, 1, 1]
  return %y : tensor<64x16xf32>
}

// philox, dropout_mask, dropout: Philox random bits and training-mode
// dropout (stream defaults to 0 and is elided).
// CHECK-LABEL: func.func @random_ops(
// CHECK:         kiln.philox %{{.*}}, %{{.*}} {stream = 3 : i64} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xi32>
// CHECK:         kiln.philox %{{.*}}, %{{.*}} : tensor<2xi32>, tensor<4xi32> -> tensor<4xi32>
// CHECK:         kiln.dropout_mask %{{.*}}, %{{.*}} {ratio = 5.000000e-01 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xf32>
// CHECK:         kiln.dropout %{{.*}} {ratio = 1.000000e-01 : f32} : tensor<8x5xf32>
func.func @random_ops(%key: tensor<2xi32>, %counter: tensor<4xi32>, %x: tensor<8x5xf32>) -> (tensor<8x5xi32>, tensor<4xi32>, tensor<8x5xf32>, tensor<8x5xf32>) {
  %0 = kiln.philox %key, %counter {stream = 3} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xi32>
  %1 = kiln.philox %key, %counter : tensor<2xi32>, tensor<4xi32> -> tensor<4xi32>
  %2 = kiln.dropout_mask %key, %counter {ratio = 0.5 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xf32>
  %3 = kiln.dropout %x {ratio = 0.1 : f32} : tensor<8x5xf32>
  return %0, %1, %2, %3 : tensor<8x5xi32>, tensor<4xi32>, tensor<8x5xf32>, tensor<8x5xf32>
}

// gradient: ONNX Gradient before kiln-expand-gradients; the result types
// are the xs' (inferred).
// CHECK-LABEL: func.func @gradient(
// CHECK:         %{{.*}}:2 = kiln.gradient %{{.*}} wrt %{{.*}}, %{{.*}} : tensor<f32> wrt tensor<4x3xf32>, tensor<3xf32>
func.func @gradient(%y: tensor<f32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>) {
  %g:2 = kiln.gradient %y wrt %w, %b : tensor<f32> wrt tensor<4x3xf32>, tensor<3xf32>
  return %g#0, %g#1 : tensor<4x3xf32>, tensor<3xf32>
}

// bitwise_and/or/xor/not and the shifts: integers of any signedness, binary
// ones with numpy broadcasting.
// CHECK-LABEL: func.func @bitwise(
// CHECK:         kiln.bitwise_and %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi32>
// CHECK:         kiln.bitwise_or %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
// CHECK:         kiln.bitwise_xor %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
// CHECK:         kiln.bitwise_not %{{.*}} : tensor<2x3xi32>
// CHECK:         kiln.shift_left %{{.*}}, %{{.*}} : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
// CHECK:         kiln.shift_right %{{.*}}, %{{.*}} : tensor<4xui8>, tensor<ui8> -> tensor<4xui8>
func.func @bitwise(%a: tensor<2x3xi32>, %b: tensor<3xi32>, %u: tensor<4xui8>, %s: tensor<ui8>) -> (tensor<2x3xi32>, tensor<4xui8>) {
  %0 = kiln.bitwise_and %a, %b : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi32>
  %1 = kiln.bitwise_or %0, %a : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
  %2 = kiln.bitwise_xor %1, %a : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
  %3 = kiln.bitwise_not %2 : tensor<2x3xi32>
  %4 = kiln.shift_left %u, %u : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %5 = kiln.shift_right %4, %s : tensor<4xui8>, tensor<ui8> -> tensor<4xui8>
  return %3, %5 : tensor<2x3xi32>, tensor<4xui8>
}

// cumsum with its flags (absent flags are elided) and top_k's two results.
// CHECK-LABEL: func.func @scans(
// CHECK:         kiln.cumsum %{{.*}} {axis = 1 : i64} : tensor<2x5xf32>
// CHECK:         kiln.cumsum %{{.*}} {axis = 0 : i64, exclusive, reverse} : tensor<2x5xf32>
// CHECK:         %{{.*}}, %{{.*}} = kiln.top_k %{{.*}} {axis = 1 : i64, k = 3 : i64} : tensor<2x5xf32> -> tensor<2x3xf32>, tensor<2x3xi64>
// CHECK:         %{{.*}}, %{{.*}} = kiln.top_k %{{.*}} {axis = 0 : i64, k = 1 : i64, smallest} : tensor<2x5xf32> -> tensor<1x5xf32>, tensor<1x5xi64>
func.func @scans(%x: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x3xf32>, tensor<1x5xi64>) {
  %0 = kiln.cumsum %x {axis = 1 : i64} : tensor<2x5xf32>
  %1 = kiln.cumsum %0 {axis = 0 : i64, exclusive, reverse} : tensor<2x5xf32>
  %v, %i = kiln.top_k %1 {axis = 1 : i64, k = 3 : i64} : tensor<2x5xf32> -> tensor<2x3xf32>, tensor<2x3xi64>
  %w, %j = kiln.top_k %1 {axis = 0 : i64, k = 1 : i64, smallest} : tensor<2x5xf32> -> tensor<1x5xf32>, tensor<1x5xi64>
  return %1, %v, %j : tensor<2x5xf32>, tensor<2x3xf32>, tensor<1x5xi64>
}

// gather_nd (batch_dims 0 is elided) and scatter_nd.
// CHECK-LABEL: func.func @nd_indexing(
// CHECK:         kiln.gather_nd %{{.*}}, %{{.*}} : tensor<2x2x2xf32>, tensor<2x1x2xi64> -> tensor<2x1x2xf32>
// CHECK:         kiln.gather_nd %{{.*}}, %{{.*}} {batch_dims = 1 : i64} : tensor<2x2x2xf32>, tensor<2x1xi64> -> tensor<2x2xf32>
// CHECK:         kiln.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {reduction = #kiln.scatter_reduction<max>} : tensor<4x4x4xf32>, tensor<2x1xi64>, tensor<2x4x4xf32> -> tensor<4x4x4xf32>
func.func @nd_indexing(%x: tensor<2x2x2xf32>, %i: tensor<2x1x2xi64>, %j: tensor<2x1xi64>, %d: tensor<4x4x4xf32>, %u: tensor<2x4x4xf32>) -> (tensor<2x1x2xf32>, tensor<2x2xf32>, tensor<4x4x4xf32>) {
  %0 = kiln.gather_nd %x, %i {batch_dims = 0 : i64} : tensor<2x2x2xf32>, tensor<2x1x2xi64> -> tensor<2x1x2xf32>
  %1 = kiln.gather_nd %x, %j {batch_dims = 1 : i64} : tensor<2x2x2xf32>, tensor<2x1xi64> -> tensor<2x2xf32>
  %2 = kiln.scatter_nd %d, %j, %u {reduction = #kiln.scatter_reduction<max>} : tensor<4x4x4xf32>, tensor<2x1xi64>, tensor<2x4x4xf32> -> tensor<4x4x4xf32>
  return %0, %1, %2 : tensor<2x1x2xf32>, tensor<2x2xf32>, tensor<4x4x4xf32>
}

// recurrence: an lstm direction with every optional operand, and a plain
// gru with linear_before_reset and clip.
// CHECK-LABEL: func.func @recurrence(
// CHECK:         kiln.recurrence <lstm> %{{.*}}, %{{.*}}, %{{.*}} initial_c(%{{.*}}) peepholes(%{{.*}}) sequence_lens(%{{.*}}) {activation_alpha = array<f32: 0.000000e+00, 0.000000e+00, 0.000000e+00>, activation_beta = array<f32: 0.000000e+00, 0.000000e+00, 0.000000e+00>, activations = ["sigmoid", "tanh", "tanh"], input_forget, reverse} : (tensor<5x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<12xf32>, tensor<3xi32>) -> (tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK:         kiln.recurrence <gru> %{{.*}}, %{{.*}}, %{{.*}} reset_bias(%{{.*}}) {activation_alpha = array<f32: 0.000000e+00, 2.000000e+00>, activation_beta = array<f32: 0.000000e+00, 5.000000e-01>, activations = ["sigmoid", "scaledtanh"], clip = 3.000000e+00 : f32, linear_before_reset} : (tensor<5x3x12xbf16>, tensor<12x4xbf16>, tensor<3x4xbf16>, tensor<4xbf16>) -> (tensor<5x3x4xbf16>, tensor<3x4xbf16>)
func.func @recurrence(%x: tensor<5x3x16xf32>, %r: tensor<16x4xf32>,
                      %h: tensor<3x4xf32>, %c: tensor<3x4xf32>,
                      %p: tensor<12xf32>, %lens: tensor<3xi32>,
                      %xg: tensor<5x3x12xbf16>, %rg: tensor<12x4xbf16>,
                      %hg: tensor<3x4xbf16>, %rb: tensor<4xbf16>)
    -> (tensor<5x3x4xf32>, tensor<3x4xbf16>) {
  %y, %yh, %yc = kiln.recurrence <lstm> %x, %r, %h initial_c(%c) peepholes(%p)
      sequence_lens(%lens)
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>, reverse, input_forget}
      : (tensor<5x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>,
         tensor<3x4xf32>, tensor<12xf32>, tensor<3xi32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  %g, %gh = kiln.recurrence <gru> %xg, %rg, %hg reset_bias(%rb)
      {activations = ["sigmoid", "scaledtanh"],
       activation_alpha = array<f32: 0.0, 2.0>,
       activation_beta = array<f32: 0.0, 0.5>, clip = 3.0 : f32,
       linear_before_reset}
      : (tensor<5x3x12xbf16>, tensor<12x4xbf16>, tensor<3x4xbf16>,
         tensor<4xbf16>) -> (tensor<5x3x4xbf16>, tensor<3x4xbf16>)
  return %y, %gh : tensor<5x3x4xf32>, tensor<3x4xbf16>
}
