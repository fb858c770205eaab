// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

// Every kiln folder and canonicalization pattern, and the cases where a fold
// must not happen.

// add of two integer constants folds.
// CHECK-LABEL: func.func @add_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[4, 6]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2xi64>
func.func @add_constants() -> tensor<2xi64> {
  %a = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %b = kiln.constant dense<[3, 4]> : tensor<2xi64>
  %0 = kiln.add %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// add folds with numpy broadcasting of both constant operands.
// CHECK-LABEL: func.func @add_constants_broadcast(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}11, 21], [12, 22]]> : tensor<2x2xi32>
// CHECK-NEXT:      return %[[C0]] : tensor<2x2xi32>
func.func @add_constants_broadcast() -> tensor<2x2xi32> {
  %a = kiln.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %b = kiln.constant dense<[10, 20]> : tensor<2xi32>
  %0 = kiln.add %a, %b : tensor<2x1xi32>, tensor<2xi32> -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}

// -----

// sub of constants, including a scalar that broadcasts.
// CHECK-LABEL: func.func @sub_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[3, 4, 5]> : tensor<3xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<3xi64>
func.func @sub_constants() -> tensor<3xi64> {
  %a = kiln.constant dense<[5, 6, 7]> : tensor<3xi64>
  %b = kiln.constant dense<2> : tensor<i64>
  %0 = kiln.sub %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// mul of float constants.
// CHECK-LABEL: func.func @mul_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[3.000000e+00, -8.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:      return %[[C0]] : tensor<2xf32>
func.func @mul_constants() -> tensor<2xf32> {
  %a = kiln.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %b = kiln.constant dense<[2.0, 4.0]> : tensor<2xf32>
  %0 = kiln.mul %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Integer div truncates toward zero.
// CHECK-LABEL: func.func @div_constants_int(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[3, -3]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2xi64>
func.func @div_constants_int() -> tensor<2xi64> {
  %a = kiln.constant dense<[7, -7]> : tensor<2xi64>
  %b = kiln.constant dense<2> : tensor<2xi64>
  %0 = kiln.div %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Unsigned integer div treats the bits as unsigned.
// CHECK-LABEL: func.func @div_constants_unsigned(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<100> : tensor<1xui8>
// CHECK-NEXT:      return %[[C0]] : tensor<1xui8>
func.func @div_constants_unsigned() -> tensor<1xui8> {
  %a = kiln.constant dense<[200]> : tensor<1xui8>
  %b = kiln.constant dense<[2]> : tensor<1xui8>
  %0 = kiln.div %a, %b : tensor<1xui8>, tensor<1xui8> -> tensor<1xui8>
  return %0 : tensor<1xui8>
}

// -----

// Float div of constants.
// CHECK-LABEL: func.func @div_constants_float(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[2.500000e-01, 1.500000e+00]> : tensor<2xf32>
// CHECK-NEXT:      return %[[C0]] : tensor<2xf32>
func.func @div_constants_float() -> tensor<2xf32> {
  %a = kiln.constant dense<[1.0, 3.0]> : tensor<2xf32>
  %b = kiln.constant dense<[4.0, 2.0]> : tensor<2xf32>
  %0 = kiln.div %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Integer division by a zero constant must not fold.
// CHECK-LABEL: func.func @div_by_zero_not_folded(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[7, 8]> : tensor<2xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-NEXT:      %[[DIV:.*]] = kiln.div %[[C0]], %[[C1]] : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
// CHECK-NEXT:      return %[[DIV]] : tensor<2xi64>
func.func @div_by_zero_not_folded() -> tensor<2xi64> {
  %a = kiln.constant dense<[7, 8]> : tensor<2xi64>
  %b = kiln.constant dense<[1, 0]> : tensor<2xi64>
  %0 = kiln.div %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// max and min of signed integer constants.
// CHECK-LABEL: func.func @max_min_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[2, 5]> : tensor<2xi32>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[-3, -1]> : tensor<2xi32>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xi32>, tensor<2xi32>
func.func @max_min_constants() -> (tensor<2xi32>, tensor<2xi32>) {
  %a = kiln.constant dense<[-3, 5]> : tensor<2xi32>
  %b = kiln.constant dense<[2, -1]> : tensor<2xi32>
  %0 = kiln.max %a, %b : tensor<2xi32>, tensor<2xi32> -> tensor<2xi32>
  %1 = kiln.min %a, %b : tensor<2xi32>, tensor<2xi32> -> tensor<2xi32>
  return %0, %1 : tensor<2xi32>, tensor<2xi32>
}

// -----

// max and min of float constants.
// CHECK-LABEL: func.func @max_min_constants_float(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[2.000000e+00, 5.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[-3.000000e+00, -1.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xf32>, tensor<2xf32>
func.func @max_min_constants_float() -> (tensor<2xf32>, tensor<2xf32>) {
  %a = kiln.constant dense<[-3.0, 5.0]> : tensor<2xf32>
  %b = kiln.constant dense<[2.0, -1.0]> : tensor<2xf32>
  %0 = kiln.max %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %1 = kiln.min %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// max and min of bools order false before true.
// CHECK-LABEL: func.func @max_min_constants_bool(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<false> : tensor<2xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xi1>, tensor<2xi1>
func.func @max_min_constants_bool() -> (tensor<2xi1>, tensor<2xi1>) {
  %a = kiln.constant dense<[true, false]> : tensor<2xi1>
  %b = kiln.constant dense<[false, false]> : tensor<2xi1>
  %0 = kiln.max %a, %b : tensor<2xi1>, tensor<2xi1> -> tensor<2xi1>
  %1 = kiln.min %a, %b : tensor<2xi1>, tensor<2xi1> -> tensor<2xi1>
  return %0, %1 : tensor<2xi1>, tensor<2xi1>
}

// -----

// neg of integer and float constants.
// CHECK-LABEL: func.func @neg_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[-3, 4]> : tensor<2xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<-2.500000e+00> : tensor<f32>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xi64>, tensor<f32>
func.func @neg_constants() -> (tensor<2xi64>, tensor<f32>) {
  %a = kiln.constant dense<[3, -4]> : tensor<2xi64>
  %b = kiln.constant dense<2.5> : tensor<f32>
  %0 = kiln.neg %a : tensor<2xi64>
  %1 = kiln.neg %b : tensor<f32>
  return %0, %1 : tensor<2xi64>, tensor<f32>
}

// -----

// Integer comparisons of constants.
// CHECK-LABEL: func.func @compare_constants_int(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C2:.*]] = kiln.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C3:.*]] = kiln.constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-NEXT:      %[[C4:.*]] = kiln.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]], %[[C2]], %[[C3]], %[[C4]] : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
func.func @compare_constants_int() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = kiln.constant dense<2> : tensor<i64>
  %0 = kiln.equal %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %1 = kiln.less %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %2 = kiln.less_equal %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %3 = kiln.greater %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %4 = kiln.greater_equal %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  return %0, %1, %2, %3, %4 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Signed and unsigned comparisons read the same bits differently.
// CHECK-LABEL: func.func @compare_constants_signedness(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<true> : tensor<1xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<false> : tensor<1xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<1xi1>, tensor<1xi1>
func.func @compare_constants_signedness() -> (tensor<1xi1>, tensor<1xi1>) {
  %a = kiln.constant dense<[-1]> : tensor<1xi8>
  %b = kiln.constant dense<[1]> : tensor<1xi8>
  %c = kiln.constant dense<[255]> : tensor<1xui8>
  %d = kiln.constant dense<[1]> : tensor<1xui8>
  %0 = kiln.less %a, %b : tensor<1xi8>, tensor<1xi8> -> tensor<1xi1>
  %1 = kiln.less %c, %d : tensor<1xui8>, tensor<1xui8> -> tensor<1xi1>
  return %0, %1 : tensor<1xi1>, tensor<1xi1>
}

// -----

// Float comparisons of constants; NaN compares unequal and unordered.
// CHECK-LABEL: func.func @compare_constants_float(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C2:.*]] = kiln.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-NEXT:      %[[C3:.*]] = kiln.constant dense<false> : tensor<3xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]], %[[C2]], %[[C3]], %[[C0]] : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
func.func @compare_constants_float() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = kiln.constant dense<[1.0, 2.0, 0x7FC00000]> : tensor<3xf32>
  %b = kiln.constant dense<2.0> : tensor<f32>
  %0 = kiln.equal %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %1 = kiln.less %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %2 = kiln.less_equal %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %3 = kiln.greater %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %4 = kiln.greater_equal %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  return %0, %1, %2, %3, %4 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Bool comparisons order false before true.
// CHECK-LABEL: func.func @compare_constants_bool(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xi1>, tensor<2xi1>
func.func @compare_constants_bool() -> (tensor<2xi1>, tensor<2xi1>) {
  %t = kiln.constant dense<[true, false]> : tensor<2xi1>
  %f = kiln.constant dense<[false, true]> : tensor<2xi1>
  %0 = kiln.less %t, %f : tensor<2xi1>, tensor<2xi1> -> tensor<2xi1>
  %1 = kiln.greater_equal %t, %f : tensor<2xi1>, tensor<2xi1> -> tensor<2xi1>
  return %0, %1 : tensor<2xi1>, tensor<2xi1>
}

// -----

// and, or and xor of bool constants.
// CHECK-LABEL: func.func @logical_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[true, false, false, false]> : tensor<4xi1>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-NEXT:      %[[C2:.*]] = kiln.constant dense<[false, true, true, false]> : tensor<4xi1>
// CHECK-NEXT:      return %[[C0]], %[[C1]], %[[C2]] : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
func.func @logical_constants() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = kiln.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = kiln.constant dense<[true, false, true, false]> : tensor<4xi1>
  %0 = kiln.and %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %1 = kiln.or %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %2 = kiln.xor %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return %0, %1, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// select of constants with a non-splat, broadcast condition.
// CHECK-LABEL: func.func @select_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 0], [3, 0]]> : tensor<2x2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2x2xi64>
func.func @select_constants() -> tensor<2x2xi64> {
  %c = kiln.constant dense<[true, false]> : tensor<2xi1>
  %a = kiln.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %b = kiln.constant dense<0> : tensor<i64>
  %0 = kiln.select %c, %a, %b : tensor<2xi1>, tensor<2x2xi64>, tensor<i64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// select with a splat constant condition picks a value.
// CHECK-LABEL: func.func @select_splat_condition(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[A]], %[[B]] : tensor<4xf32>, tensor<4xf32>
func.func @select_splat_condition(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %t = kiln.constant dense<true> : tensor<4xi1>
  %f = kiln.constant dense<false> : tensor<i1>
  %0 = kiln.select %t, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = kiln.select %f, %a, %b : tensor<i1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// select between one value twice is that value.
// CHECK-LABEL: func.func @select_same_value(
// CHECK-SAME:      %[[C:[^:]*]]: tensor<4xi1>, %[[A:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[A]] : tensor<4xf32>
func.func @select_same_value(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.select %c, %a, %a : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select must not fold to a value that the condition would broadcast.
// CHECK-LABEL: func.func @select_broadcast_not_folded(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<2x4xf32>)
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<true> : tensor<i1>
// CHECK-NEXT:      %[[SELECT:.*]] = kiln.select %[[C0]], %[[A]], %[[B]] : tensor<i1>, tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[SELECT]] : tensor<2x4xf32>
func.func @select_broadcast_not_folded(%a: tensor<4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %t = kiln.constant dense<true> : tensor<i1>
  %0 = kiln.select %t, %a, %b : tensor<i1>, tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// cast of integer constants to float.
// CHECK-LABEL: func.func @cast_int_to_float(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[-2.000000e+00, 0.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<2.550000e+02> : tensor<1xf32>
// CHECK-NEXT:      %[[C2:.*]] = kiln.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:      return %[[C0]], %[[C1]], %[[C2]] : tensor<3xf32>, tensor<1xf32>, tensor<2xf32>
func.func @cast_int_to_float() -> (tensor<3xf32>, tensor<1xf32>, tensor<2xf32>) {
  %a = kiln.constant dense<[-2, 0, 3]> : tensor<3xi64>
  %b = kiln.constant dense<[255]> : tensor<1xui8>
  %c = kiln.constant dense<[true, false]> : tensor<2xi1>
  %0 = kiln.cast %a : tensor<3xi64> -> tensor<3xf32>
  %1 = kiln.cast %b : tensor<1xui8> -> tensor<1xf32>
  %2 = kiln.cast %c : tensor<2xi1> -> tensor<2xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<1xf32>, tensor<2xf32>
}

// -----

// cast of float constants to integer truncates toward zero.
// CHECK-LABEL: func.func @cast_float_to_int(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, -1, 0, 0]> : tensor<4xi32>
// CHECK-NEXT:      return %[[C0]] : tensor<4xi32>
func.func @cast_float_to_int() -> tensor<4xi32> {
  %a = kiln.constant dense<[1.7, -1.7, 0.5, -0.5]> : tensor<4xf32>
  %0 = kiln.cast %a : tensor<4xf32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// cast between integer widths sign-extends, truncates, and maps to i1 as != 0.
// CHECK-LABEL: func.func @cast_int_to_int(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[-1, 7]> : tensor<2xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[1, -1]> : tensor<2xi8>
// CHECK-NEXT:      %[[C2:.*]] = kiln.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-NEXT:      %[[C3:.*]] = kiln.constant dense<[1, 0]> : tensor<2xi32>
// CHECK-NEXT:      return %[[C0]], %[[C1]], %[[C2]], %[[C3]] : tensor<2xi64>, tensor<2xi8>, tensor<3xi1>, tensor<2xi32>
func.func @cast_int_to_int() -> (tensor<2xi64>, tensor<2xi8>, tensor<3xi1>, tensor<2xi32>) {
  %a = kiln.constant dense<[-1, 7]> : tensor<2xi32>
  %b = kiln.constant dense<[257, -1]> : tensor<2xi32>
  %c = kiln.constant dense<[0, 2, -3]> : tensor<3xi32>
  %d = kiln.constant dense<[true, false]> : tensor<2xi1>
  %0 = kiln.cast %a : tensor<2xi32> -> tensor<2xi64>
  %1 = kiln.cast %b : tensor<2xi32> -> tensor<2xi8>
  %2 = kiln.cast %c : tensor<3xi32> -> tensor<3xi1>
  %3 = kiln.cast %d : tensor<2xi1> -> tensor<2xi32>
  return %0, %1, %2, %3 : tensor<2xi64>, tensor<2xi8>, tensor<3xi1>, tensor<2xi32>
}

// -----

// cast between float types rounds; a splat stays a splat.
// CHECK-LABEL: func.func @cast_float_to_float(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1.000000e+00, 0x7C00]> : tensor<2xf16>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<5.000000e-01> : tensor<8xbf16>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2xf16>, tensor<8xbf16>
func.func @cast_float_to_float() -> (tensor<2xf16>, tensor<8xbf16>) {
  %a = kiln.constant dense<[1.0, 65536.0]> : tensor<2xf32>
  %b = kiln.constant dense<0.5> : tensor<8xf32>
  %0 = kiln.cast %a : tensor<2xf32> -> tensor<2xf16>
  %1 = kiln.cast %b : tensor<8xf32> -> tensor<8xbf16>
  return %0, %1 : tensor<2xf16>, tensor<8xbf16>
}

// -----

// concat of constants along an inner axis.
// CHECK-LABEL: func.func @concat_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 3, 4], [2, 5, 6]]> : tensor<2x3xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2x3xi64>
func.func @concat_constants() -> tensor<2x3xi64> {
  %a = kiln.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %b = kiln.constant dense<[[3, 4], [5, 6]]> : tensor<2x2xi64>
  %0 = kiln.concat %a, %b {axis = 1 : i64} : tensor<2x1xi64>, tensor<2x2xi64> -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// concat of shape constants, one of them a splat.
// CHECK-LABEL: func.func @concat_shape_constants(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, 2, -1, -1]> : tensor<4xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<4xi64>
func.func @concat_shape_constants() -> tensor<4xi64> {
  %a = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %b = kiln.constant dense<-1> : tensor<2xi64>
  %0 = kiln.concat %a, %b {axis = 0 : i64} : tensor<2xi64>, tensor<2xi64> -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// slice of a constant with a positive step.
// CHECK-LABEL: func.func @slice_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[11, 13]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2xi64>
func.func @slice_constant() -> tensor<2xi64> {
  %a = kiln.constant dense<[10, 11, 12, 13, 14]> : tensor<5xi64>
  %0 = kiln.slice %a {starts = array<i64: 1>, limits = array<i64: 5>, steps = array<i64: 2>} : tensor<5xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// slice of a constant with a negative step reverses it.
// CHECK-LABEL: func.func @slice_constant_reverse(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}6, 5, 4], [3, 2, 1]]> : tensor<2x3xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2x3xi64>
func.func @slice_constant_reverse() -> tensor<2x3xi64> {
  %a = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = kiln.slice %a {starts = array<i64: 1, 2>, limits = array<i64: -1, -1>, steps = array<i64: -1, -1>} : tensor<2x3xi64> -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// gather of a constant, with a negative index counting from the end.
// CHECK-LABEL: func.func @gather_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 3], [4, 6]]> : tensor<2x2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2x2xi64>
func.func @gather_constant() -> tensor<2x2xi64> {
  %a = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %i = kiln.constant dense<[0, -1]> : tensor<2xi64>
  %0 = kiln.gather %a, %i {axis = 1 : i64} : tensor<2x3xi64>, tensor<2xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// gather of a shape constant with a scalar index (Shape -> Gather).
// CHECK-LABEL: func.func @gather_constant_scalar_index(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<768> : tensor<i64>
// CHECK-NEXT:      return %[[C0]] : tensor<i64>
func.func @gather_constant_scalar_index() -> tensor<i64> {
  %a = kiln.constant dense<[1, 128, 768]> : tensor<3xi64>
  %i = kiln.constant dense<2> : tensor<i32>
  %0 = kiln.gather %a, %i {axis = 0 : i64} : tensor<3xi64>, tensor<i32> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// gather with an out-of-range index must not fold.
// CHECK-LABEL: func.func @gather_out_of_range_not_folded(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<3> : tensor<1xi64>
// CHECK-NEXT:      %[[GATHER:.*]] = kiln.gather %[[C0]], %[[C1]] {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
// CHECK-NEXT:      return %[[GATHER]] : tensor<1xi64>
func.func @gather_out_of_range_not_folded() -> tensor<1xi64> {
  %a = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
  %i = kiln.constant dense<[3]> : tensor<1xi64>
  %0 = kiln.gather %a, %i {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// -----

// reshape of a constant.
// CHECK-LABEL: func.func @reshape_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2x2xi64>
func.func @reshape_constant() -> tensor<2x2xi64> {
  %a = kiln.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = kiln.reshape %a : tensor<4xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// Folding never makes a constant of dynamic shape.
// CHECK-LABEL: func.func @dynamic_result_not_folded(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:      %[[RESHAPE:.*]] = kiln.reshape %[[C0]] : tensor<4xf32> -> tensor<?xf32>
// CHECK-NEXT:      %[[BROADCAST:.*]] = kiln.broadcast %[[C1]] : tensor<4xf32> -> tensor<2x?xf32>
// CHECK-NEXT:      return %[[RESHAPE]], %[[BROADCAST]] : tensor<?xf32>, tensor<2x?xf32>
func.func @dynamic_result_not_folded() -> (tensor<?xf32>, tensor<2x?xf32>) {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = kiln.constant dense<1.0> : tensor<4xf32>
  %0 = kiln.reshape %a : tensor<4xf32> -> tensor<?xf32>
  %1 = kiln.broadcast %b : tensor<4xf32> -> tensor<2x?xf32>
  return %0, %1 : tensor<?xf32>, tensor<2x?xf32>
}

// -----

// transpose of a constant.
// CHECK-LABEL: func.func @transpose_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<3x2xi64>
func.func @transpose_constant() -> tensor<3x2xi64> {
  %a = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = kiln.transpose %a {permutation = array<i64: 1, 0>} : tensor<2x3xi64> -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>
}

// -----

// broadcast of a constant, and of a splat (which stays a splat).
// CHECK-LABEL: func.func @broadcast_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<{{\[\[}}1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<2.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<2x3xi64>, tensor<4x4xf32>
func.func @broadcast_constant() -> (tensor<2x3xi64>, tensor<4x4xf32>) {
  %a = kiln.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %b = kiln.constant dense<2.0> : tensor<f32>
  %0 = kiln.broadcast %a : tensor<2x1xi64> -> tensor<2x3xi64>
  %1 = kiln.broadcast %b : tensor<f32> -> tensor<4x4xf32>
  return %0, %1 : tensor<2x3xi64>, tensor<4x4xf32>
}

// -----

// iota folds to a constant, integer and float.
// CHECK-LABEL: func.func @iota_constant(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[2, 5, 8, 11]> : tensor<4xi64>
// CHECK-NEXT:      %[[C1:.*]] = kiln.constant dense<[1.000000e+00, 5.000000e-01, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:      return %[[C0]], %[[C1]] : tensor<4xi64>, tensor<3xf32>
func.func @iota_constant() -> (tensor<4xi64>, tensor<3xf32>) {
  %0 = kiln.iota {start = 2.0 : f64, step = 3.0 : f64} : tensor<4xi64>
  %1 = kiln.iota {start = 1.0 : f64, step = -0.5 : f64} : tensor<3xf32>
  return %0, %1 : tensor<4xi64>, tensor<3xf32>
}

// -----

// Folding stops at kMaxFoldElements (65536) non-splat elements.
// CHECK-LABEL: func.func @iota_too_large_not_folded(
// CHECK-NEXT:      %[[IOTA:.*]] = kiln.iota {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<65537xi32>
// CHECK-NEXT:      return %[[IOTA]] : tensor<65537xi32>
func.func @iota_too_large_not_folded() -> tensor<65537xi32> {
  %0 = kiln.iota {start = 0.0 : f64, step = 1.0 : f64} : tensor<65537xi32>
  return %0 : tensor<65537xi32>
}

// -----

// Equal constants are merged.
// CHECK-LABEL: func.func @constants_deduplicated(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]], %[[C0]] : tensor<2xi64>, tensor<2xi64>
func.func @constants_deduplicated() -> (tensor<2xi64>, tensor<2xi64>) {
  %a = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %b = kiln.constant dense<[1, 2]> : tensor<2xi64>
  return %a, %b : tensor<2xi64>, tensor<2xi64>
}

// -----

// A chain of shape arithmetic folds to one constant.
// CHECK-LABEL: func.func @shape_arithmetic_chain(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[2, 12]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2xi64>
func.func @shape_arithmetic_chain() -> tensor<2xi64> {
  %shape = kiln.constant dense<[2, 3, 4]> : tensor<3xi64>
  %i0 = kiln.constant dense<[0]> : tensor<1xi64>
  %i1 = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %batch = kiln.gather %shape, %i0 {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  %rest = kiln.gather %shape, %i1 {axis = 0 : i64} : tensor<3xi64>, tensor<2xi64> -> tensor<2xi64>
  %prod = kiln.slice %rest {starts = array<i64: 0>, limits = array<i64: 1>, steps = array<i64: 1>} : tensor<2xi64> -> tensor<1xi64>
  %last = kiln.slice %rest {starts = array<i64: 1>, limits = array<i64: 2>, steps = array<i64: 1>} : tensor<2xi64> -> tensor<1xi64>
  %flat = kiln.mul %prod, %last : tensor<1xi64>, tensor<1xi64> -> tensor<1xi64>
  %0 = kiln.concat %batch, %flat {axis = 0 : i64} : tensor<1xi64>, tensor<1xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// x + 0 and 0 + x fold to x.
// CHECK-LABEL: func.func @add_zero(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>, %[[I:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT:      return %[[X]], %[[I]] : tensor<4xf32>, tensor<4xi32>
func.func @add_zero(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %z = kiln.constant dense<0.0> : tensor<f32>
  %zi = kiln.constant dense<0> : tensor<4xi32>
  %0 = kiln.add %x, %z : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %1 = kiln.add %zi, %i : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0, %1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// x + 0 must not fold when broadcasting changes the type.
// CHECK-LABEL: func.func @add_zero_broadcast_not_folded(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT:      %[[ADD:.*]] = kiln.add %[[X]], %[[C0]] : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:      return %[[ADD]] : tensor<2x4xf32>
func.func @add_zero_broadcast_not_folded(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  %z = kiln.constant dense<0.0> : tensor<2x4xf32>
  %0 = kiln.add %x, %z : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// x - 0 folds to x; 0 - x does not.
// CHECK-LABEL: func.func @sub_zero(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi64>)
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<0> : tensor<i64>
// CHECK-NEXT:      %[[SUB:.*]] = kiln.sub %[[C0]], %[[X]] : tensor<i64>, tensor<4xi64> -> tensor<4xi64>
// CHECK-NEXT:      return %[[X]], %[[SUB]] : tensor<4xi64>, tensor<4xi64>
func.func @sub_zero(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %z = kiln.constant dense<0> : tensor<i64>
  %0 = kiln.sub %x, %z : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  %1 = kiln.sub %z, %x : tensor<i64>, tensor<4xi64> -> tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// -----

// x * 1 and 1 * x fold to x.
// CHECK-LABEL: func.func @mul_one(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[X]], %[[X]] : tensor<4xf32>, tensor<4xf32>
func.func @mul_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = kiln.constant dense<1.0> : tensor<f32>
  %0 = kiln.mul %x, %one : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %1 = kiln.mul %one, %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// x * 1 must not fold when broadcasting changes the type.
// CHECK-LABEL: func.func @mul_one_broadcast_not_folded(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<1.000000e+00> : tensor<3x1xf32>
// CHECK-NEXT:      %[[MUL:.*]] = kiln.mul %[[X]], %[[C0]] : tensor<4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      return %[[MUL]] : tensor<3x4xf32>
func.func @mul_one_broadcast_not_folded(%x: tensor<4xf32>) -> tensor<3x4xf32> {
  %one = kiln.constant dense<1.0> : tensor<3x1xf32>
  %0 = kiln.mul %x, %one : tensor<4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// x / 1 folds to x.
// CHECK-LABEL: func.func @div_one(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT:      return %[[X]] : tensor<4xi32>
func.func @div_one(%x: tensor<4xi32>) -> tensor<4xi32> {
  %one = kiln.constant dense<1> : tensor<4xi32>
  %0 = kiln.div %x, %one : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// x ^ 1 folds to x; x ^ 2 stays.
// CHECK-LABEL: func.func @pow_one(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:      %[[POW:.*]] = kiln.pow %[[X]], %[[C0]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:      return %[[X]], %[[POW]] : tensor<4xf32>, tensor<4xf32>
func.func @pow_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = kiln.constant dense<1.0> : tensor<f32>
  %two = kiln.constant dense<2.0> : tensor<f32>
  %0 = kiln.pow %x, %one : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %1 = kiln.pow %x, %two : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// max(x, x) and min(x, x) fold to x.
// CHECK-LABEL: func.func @max_min_same_operand(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[X]], %[[X]] : tensor<4xf32>, tensor<4xf32>
func.func @max_min_same_operand(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.max %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = kiln.min %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// neg(neg(x)) folds to x.
// CHECK-LABEL: func.func @neg_neg(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<4xf32>
func.func @neg_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.neg %x : tensor<4xf32>
  %1 = kiln.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// mod of constants folds (issue 24; the cases are below, mod_constants_*).
// CHECK-LABEL: func.func @mod_folded(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<2xi64>
func.func @mod_folded() -> tensor<2xi64> {
  %a = kiln.constant dense<[7, -7]> : tensor<2xi64>
  %b = kiln.constant dense<3> : tensor<2xi64>
  %0 = kiln.mod %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// reshape to the same type folds to its input.
// CHECK-LABEL: func.func @reshape_same_type(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @reshape_same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// reshape(reshape(x)) becomes one reshape of x.
// CHECK-LABEL: func.func @reshape_reshape(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:      %[[RESHAPE:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT:      return %[[RESHAPE]] : tensor<4x6xf32>
func.func @reshape_reshape(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = kiln.reshape %0 : tensor<6x4xf32> -> tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}

// -----

// reshape(reshape(x)) back to x's type folds away.
// CHECK-LABEL: func.func @reshape_reshape_roundtrip(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @reshape_reshape_roundtrip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = kiln.reshape %0 : tensor<6xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// transpose with the identity permutation folds to its input.
// CHECK-LABEL: func.func @transpose_identity(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3x4xf32>
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// transpose(transpose(x, p), q) becomes transpose(x, p o q).
// CHECK-LABEL: func.func @transpose_transpose_compose(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:      %[[TRANSPOSE:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:      return %[[TRANSPOSE]] : tensor<4x2x3xf32>
func.func @transpose_transpose_compose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = kiln.transpose %0 {permutation = array<i64: 1, 2, 0>} : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----

// Inverse transposes (nchw -> nhwc -> nchw) cancel.
// CHECK-LABEL: func.func @transpose_transpose_cancel(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x64x8x8xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<1x64x8x8xf32>
func.func @transpose_transpose_cancel(%x: tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x64x8x8xf32> -> tensor<1x8x8x64xf32>
  %1 = kiln.transpose %0 {permutation = array<i64: 0, 3, 1, 2>} : tensor<1x8x8x64xf32> -> tensor<1x64x8x8xf32>
  return %1 : tensor<1x64x8x8xf32>
}

// -----

// A non-identity transpose of a non-constant stays.
// CHECK-LABEL: func.func @transpose_not_folded(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      %[[TRANSPOSE:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT:      return %[[TRANSPOSE]] : tensor<3x2xf32>
func.func @transpose_not_folded(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// broadcast to the same type folds to its input.
// CHECK-LABEL: func.func @broadcast_same_type(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @broadcast_same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.broadcast %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// pad by zero everywhere folds to its input.
// CHECK-LABEL: func.func @pad_zero(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @pad_zero(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.pad <constant> %x {low = array<i64: 0, 0>, high = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// tile with all repeats 1 folds to its input.
// CHECK-LABEL: func.func @tile_ones(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @tile_ones(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.tile %x {repeats = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A slice covering the whole tensor folds to its input.
// CHECK-LABEL: func.func @slice_full(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @slice_full(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A reversing slice keeps the type but must not fold.
// CHECK-LABEL: func.func @slice_reverse_not_folded(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3xf32>)
// CHECK-NEXT:      %[[SLICE:.*]] = kiln.slice %[[X]] {limits = array<i64: -1>, starts = array<i64: 2>, steps = array<i64: -1>} : tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT:      return %[[SLICE]] : tensor<3xf32>
func.func @slice_reverse_not_folded(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = kiln.slice %x {starts = array<i64: 2>, limits = array<i64: -1>, steps = array<i64: -1>} : tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// concat of a single input folds to it.
// CHECK-LABEL: func.func @concat_single(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @concat_single(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.concat %x {axis = 1 : i64} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// reduce over no axes is the identity.
// CHECK-LABEL: func.func @reduce_no_axes(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<2x3xf32>
func.func @reduce_no_axes(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.reduce <sum> %x {axes = array<i64>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// cast to the same type folds to its input.
// CHECK-LABEL: func.func @cast_same_type(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      return %[[X]] : tensor<4xf32>
func.func @cast_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// cast(cast(x)) through a wider float merges into one cast.
// CHECK-LABEL: func.func @cast_cast_float_widening(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf16>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xf16> -> tensor<4xbf16>
// CHECK-NEXT:      return %[[CAST]] : tensor<4xbf16>
func.func @cast_cast_float_widening(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %0 = kiln.cast %x : tensor<4xf16> -> tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// f16 -> f32 -> f16 is lossless and cancels.
// CHECK-LABEL: func.func @cast_cast_roundtrip(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf16>)
// CHECK-NEXT:      return %[[X]] : tensor<4xf16>
func.func @cast_cast_roundtrip(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = kiln.cast %x : tensor<4xf16> -> tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> -> tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// cast(cast(x)) through a wider integer of the same signedness merges.
// CHECK-LABEL: func.func @cast_cast_int_widening(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi8>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xi8> -> tensor<4xi64>
// CHECK-NEXT:      return %[[CAST]] : tensor<4xi64>
func.func @cast_cast_int_widening(%x: tensor<4xi8>) -> tensor<4xi64> {
  %0 = kiln.cast %x : tensor<4xi8> -> tensor<4xi32>
  %1 = kiln.cast %0 : tensor<4xi32> -> tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// f32 -> f16 -> f32 loses precision and must not merge.
// CHECK-LABEL: func.func @cast_cast_lossy_float_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xf32> -> tensor<4xf16>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xf16> -> tensor<4xf32>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xf32>
func.func @cast_cast_lossy_float_not_merged(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf32> -> tensor<4xf16>
  %1 = kiln.cast %0 : tensor<4xf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 -> bf16 -> f32: neither float type holds the other, so no merge.
// CHECK-LABEL: func.func @cast_cast_incomparable_floats_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf16>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xf16> -> tensor<4xbf16>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xf32>
func.func @cast_cast_incomparable_floats_not_merged(%x: tensor<4xf16>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf16> -> tensor<4xbf16>
  %1 = kiln.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Integer narrowing in the middle must not merge.
// CHECK-LABEL: func.func @cast_cast_int_narrowing_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xi32> -> tensor<4xi8>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xi8> -> tensor<4xi32>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xi32>
func.func @cast_cast_int_narrowing_not_merged(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = kiln.cast %x : tensor<4xi32> -> tensor<4xi8>
  %1 = kiln.cast %0 : tensor<4xi8> -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

// A change of signedness in the middle must not merge.
// CHECK-LABEL: func.func @cast_cast_signedness_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi8>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xi8> -> tensor<4xui16>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xui16> -> tensor<4xi64>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xi64>
func.func @cast_cast_signedness_not_merged(%x: tensor<4xi8>) -> tensor<4xi64> {
  %0 = kiln.cast %x : tensor<4xi8> -> tensor<4xui16>
  %1 = kiln.cast %0 : tensor<4xui16> -> tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// int -> float -> int through a float too narrow for the integer must not merge.
// CHECK-LABEL: func.func @cast_cast_int_float_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xi64>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xi64> -> tensor<4xf32>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xf32> -> tensor<4xi64>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xi64>
func.func @cast_cast_int_float_not_merged(%x: tensor<4xi64>) -> tensor<4xi64> {
  %0 = kiln.cast %x : tensor<4xi64> -> tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> -> tensor<4xi64>
  return %1 : tensor<4xi64>
}

// -----

// float -> int -> float truncates and must not merge.
// CHECK-LABEL: func.func @cast_cast_float_int_not_merged(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:      %[[CAST:.*]] = kiln.cast %[[X]] : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT:      %[[CAST1:.*]] = kiln.cast %[[CAST]] : tensor<4xi32> -> tensor<4xf32>
// CHECK-NEXT:      return %[[CAST1]] : tensor<4xf32>
func.func @cast_cast_float_int_not_merged(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf32> -> tensor<4xi32>
  %1 = kiln.cast %0 : tensor<4xi32> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// x - 0 and x + 0 between constants whose broadcast changes the type still
// fold to constants (the identity fold does not apply, evaluation does), as
// in shape arithmetic: rank - [0].
// CHECK-LABEL: func.func @zero_broadcast_constants_fold(
// CHECK-NEXT:      %[[C:.*]] = kiln.constant dense<2> : tensor<1xi64>
// CHECK-NEXT:      return %[[C]], %[[C]] : tensor<1xi64>, tensor<1xi64>
func.func @zero_broadcast_constants_fold() -> (tensor<1xi64>, tensor<1xi64>) {
  %r = kiln.constant dense<2> : tensor<i64>
  %z = kiln.constant dense<0> : tensor<1xi64>
  %0 = kiln.sub %r, %z : tensor<i64>, tensor<1xi64> -> tensor<1xi64>
  %1 = kiln.add %r, %z : tensor<i64>, tensor<1xi64> -> tensor<1xi64>
  return %0, %1 : tensor<1xi64>, tensor<1xi64>
}

// -----

// Integer mod of constants takes the divisor's sign (Python's %, ONNX Mod
// fmod=0): Swin's window padding (w - H % w) % w.
// CHECK-LABEL: func.func @mod_constants_int(
// CHECK-NEXT:      %[[C0:.*]] = kiln.constant dense<[1, 2, -2, -1, 0]> : tensor<5xi64>
// CHECK-NEXT:      return %[[C0]] : tensor<5xi64>
func.func @mod_constants_int() -> tensor<5xi64> {
  %a = kiln.constant dense<[7, -7, 7, -7, 14]> : tensor<5xi64>
  %b = kiln.constant dense<[3, 3, -3, -3, 7]> : tensor<5xi64>
  %0 = kiln.mod %a, %b : tensor<5xi64>, tensor<5xi64> -> tensor<5xi64>
  return %0 : tensor<5xi64>
}

// -----

// With fmod the sign is the dividend's (C's fmod), integers and floats.
// CHECK-LABEL: func.func @mod_constants_fmod(
// CHECK-DAG:       %[[I:.*]] = kiln.constant dense<[1, -1, 1, -1]> : tensor<4xi32>
// CHECK-DAG:       %[[F:.*]] = kiln.constant dense<[1.500000e+00, -1.500000e+00]> : tensor<2xf32>
// CHECK:           return %[[I]], %[[F]]
func.func @mod_constants_fmod() -> (tensor<4xi32>, tensor<2xf32>) {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[3, 3, -3, -3]> : tensor<4xi32>
  %0 = kiln.mod %a, %b {fmod} : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  %c = kiln.constant dense<[5.5, -5.5]> : tensor<2xf32>
  %d = kiln.constant dense<2.0> : tensor<2xf32>
  %1 = kiln.mod %c, %d {fmod} : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0, %1 : tensor<4xi32>, tensor<2xf32>
}

// -----

// Integer mod by a zero constant must not fold.
// CHECK-LABEL: func.func @mod_by_zero_not_folded(
// CHECK:           kiln.mod
func.func @mod_by_zero_not_folded() -> tensor<2xi64> {
  %a = kiln.constant dense<[7, 8]> : tensor<2xi64>
  %b = kiln.constant dense<[1, 0]> : tensor<2xi64>
  %0 = kiln.mod %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Unary folds of shape arithmetic: not, abs, sign, floor, ceil.
// CHECK-LABEL: func.func @unary_constants(
// CHECK-DAG:       kiln.constant dense<[false, true]> : tensor<2xi1>
// CHECK-DAG:       kiln.constant dense<[3, 0, 5]> : tensor<3xi64>
// CHECK-DAG:       kiln.constant dense<[-1, 0, 1]> : tensor<3xi64>
// CHECK-DAG:       kiln.constant dense<[-3.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG:       kiln.constant dense<[-2.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-NOT:       kiln.not
// CHECK-NOT:       kiln.abs
// CHECK-NOT:       kiln.sign
// CHECK-NOT:       kiln.floor
// CHECK-NOT:       kiln.ceil
// CHECK:           return
func.func @unary_constants() -> (tensor<2xi1>, tensor<3xi64>, tensor<3xi64>, tensor<2xf32>, tensor<2xf32>) {
  %t = kiln.constant dense<[true, false]> : tensor<2xi1>
  %0 = kiln.not %t : tensor<2xi1>
  %i = kiln.constant dense<[-3, 0, 5]> : tensor<3xi64>
  %1 = kiln.abs %i : tensor<3xi64>
  %2 = kiln.sign %i : tensor<3xi64>
  %f = kiln.constant dense<[-2.5, 2.5]> : tensor<2xf32>
  %3 = kiln.floor %f : tensor<2xf32>
  %4 = kiln.ceil %f : tensor<2xf32>
  return %0, %1, %2, %3, %4 : tensor<2xi1>, tensor<3xi64>, tensor<3xi64>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Integer reductions of constants fold (ReduceProd of a Shape slice, the
// flattened size); keepdims, several axes, max and min.
// CHECK-LABEL: func.func @reduce_constants_int(
// CHECK-DAG:       kiln.constant dense<150528> : tensor<i64>
// CHECK-DAG:       kiln.constant dense<{{\[}}[5, 7, 9]]> : tensor<1x3xi64>
// CHECK-DAG:       kiln.constant dense<[3, 6]> : tensor<2xi64>
// CHECK-DAG:       kiln.constant dense<[1, 4]> : tensor<2xi64>
// CHECK-NOT:       kiln.reduce
// CHECK:           return
func.func @reduce_constants_int() -> (tensor<i64>, tensor<1x3xi64>, tensor<2xi64>, tensor<2xi64>) {
  %s = kiln.constant dense<[3, 224, 224]> : tensor<3xi64>
  %0 = kiln.reduce <prod> %s {axes = array<i64: 0>, keepdims = false} : tensor<3xi64> -> tensor<i64>
  %m = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %1 = kiln.reduce <sum> %m {axes = array<i64: 0>, keepdims = true} : tensor<2x3xi64> -> tensor<1x3xi64>
  %2 = kiln.reduce <max> %m {axes = array<i64: 1>, keepdims = false} : tensor<2x3xi64> -> tensor<2xi64>
  %3 = kiln.reduce <min> %m {axes = array<i64: 1>, keepdims = false} : tensor<2x3xi64> -> tensor<2xi64>
  return %0, %1, %2, %3 : tensor<i64>, tensor<1x3xi64>, tensor<2xi64>, tensor<2xi64>
}

// -----

// Float reductions are left to the kernels (summation order).
// CHECK-LABEL: func.func @reduce_constants_float_not_folded(
// CHECK:           kiln.reduce <sum>
func.func @reduce_constants_float_not_folded() -> tensor<f32> {
  %s = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = kiln.reduce <sum> %s {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
