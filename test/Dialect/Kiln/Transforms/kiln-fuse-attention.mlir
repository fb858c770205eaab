// kiln-fuse's rule 5 (option attention): matmul -> elementwise -> softmax
// -> elementwise -> matmul becomes one "attention" region.
// RUN: kiln-opt %s -split-input-file -kiln-fuse="attention=true" | FileCheck %s
// Without the option the same graphs keep rules 1-4 (no attention region).
// RUN: kiln-opt %s -split-input-file -kiln-fuse | FileCheck %s --check-prefix=OFF
// Running the pass again changes nothing.
// RUN: kiln-opt %s -split-input-file -kiln-fuse="attention=true" | kiln-opt -split-input-file -kiln-fuse="attention=true" | FileCheck %s

// The encoder's pattern: the head split (reshape + transpose) of Q, K and
// V, the scale, the softmax and P V in one region; the projections stay
// outside it.
// CHECK-LABEL: func.func @encoder_heads(
// CHECK:         %[[A:.*]] = kiln.fusion "attention" -> tensor<1x4x16x8xf32> {
// CHECK:           kiln.transpose %arg0 {permutation = array<i64: 0, 2, 1, 3>}
// CHECK:           kiln.transpose %arg1 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:           %[[S:.*]] = kiln.matmul
// CHECK-NEXT:      %[[D:.*]] = kiln.div %[[S]], %arg3
// CHECK-NEXT:      %[[P:.*]] = kiln.softmax %[[D]] {axis = 3 : i64}
// CHECK-NEXT:      %[[O:.*]] = kiln.matmul %[[P]],
// CHECK-NEXT:      kiln.yield %[[O]]
// CHECK:         return %[[A]]
// OFF-LABEL: func.func @encoder_heads(
// OFF-NOT:     "attention"
// OFF:         kiln.fusion "matmul+softmax"
// OFF:         kiln.fusion "matmul"
func.func @encoder_heads(%q: tensor<1x16x4x8xf32>, %k: tensor<1x16x4x8xf32>, %v: tensor<1x16x4x8xf32>, %scale: tensor<f32>) -> tensor<1x4x16x8xf32> {
  %qt = kiln.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x16x4x8xf32> -> tensor<1x4x8x16xf32>
  %vt = kiln.transpose %v {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x16x4x8xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %qt, %kt : tensor<1x4x16x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x16x16xf32>
  %d = kiln.div %s, %scale : tensor<1x4x16x16xf32>, tensor<f32> -> tensor<1x4x16x16xf32>
  %p = kiln.softmax %d {axis = 3 : i64} : tensor<1x4x16x16xf32>
  %o = kiln.matmul %p, %vt : tensor<1x4x16x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x16x8xf32>
  return %o : tensor<1x4x16x8xf32>
}

// -----

// bf16: the cast of P to bf16 and of the output back are part of it, and
// so is a causal select and a padding mask add (a region input).
// CHECK-LABEL: func.func @bf16_masks(
// CHECK:         kiln.fusion "attention" -> tensor<2x8x16xbf16> {
// CHECK:           kiln.matmul
// CHECK-NEXT:      kiln.mul
// CHECK-NEXT:      kiln.add {{.*}}, %arg3
// CHECK-NEXT:      kiln.select %arg4
// CHECK-NEXT:      kiln.softmax
// CHECK-NEXT:      kiln.cast
// CHECK-NEXT:      kiln.matmul
// CHECK-NEXT:      kiln.cast
// CHECK-NEXT:      kiln.yield
func.func @bf16_masks(%q: tensor<2x8x16xbf16>, %kt: tensor<2x16x8xbf16>, %v: tensor<2x8x16xbf16>, %mask: tensor<2x1x8xf32>, %causal: tensor<8x8xi1>) -> tensor<2x8x16xbf16> {
  %c = kiln.constant dense<0.25> : tensor<f32>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %s = kiln.matmul %q, %kt : tensor<2x8x16xbf16>, tensor<2x16x8xbf16> -> tensor<2x8x8xf32>
  %m = kiln.mul %s, %c : tensor<2x8x8xf32>, tensor<f32> -> tensor<2x8x8xf32>
  %a = kiln.add %m, %mask : tensor<2x8x8xf32>, tensor<2x1x8xf32> -> tensor<2x8x8xf32>
  %w = kiln.select %causal, %a, %ninf : tensor<8x8xi1>, tensor<2x8x8xf32>, tensor<f32> -> tensor<2x8x8xf32>
  %p = kiln.softmax %w {axis = -1 : i64} : tensor<2x8x8xf32>
  %pb = kiln.cast %p : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %o = kiln.matmul %pb, %v : tensor<2x8x8xbf16>, tensor<2x8x16xbf16> -> tensor<2x8x16xf32>
  %ob = kiln.cast %o : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
  return %ob : tensor<2x8x16xbf16>
}

// -----

// GQA: K and V broadcast from 2 to 4 heads (Expand + Reshape) are pulled
// in as indexing.
// CHECK-LABEL: func.func @grouped_heads(
// CHECK:         kiln.fusion "attention" -> tensor<1x4x8x16xf32> {
// CHECK:           kiln.broadcast %arg1
// CHECK:           kiln.broadcast %arg2
// CHECK:           kiln.softmax
// CHECK:           kiln.yield
// CHECK-NOT:     kiln.broadcast
func.func @grouped_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x1x8x16xf32>, %v: tensor<1x2x1x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %kb = kiln.broadcast %k : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %kb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = kiln.transpose %kr {permutation = array<i64: 0, 1, 3, 2>} : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %vb = kiln.broadcast %v : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = kiln.reshape %vb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s {axis = 3 : i64} : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %vr : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// The probabilities are also a function result: not fused as attention
// (the kernel never stores them).
// CHECK-LABEL: func.func @probabilities_escape(
// CHECK-NOT:     "attention"
// CHECK:         kiln.fusion "softmax"
// CHECK:         kiln.fusion "matmul"
func.func @probabilities_escape(%q: tensor<8x128xf32>, %kt: tensor<128x8xf32>, %v: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>) {
  %s = kiln.matmul %q, %kt : tensor<8x128xf32>, tensor<128x8xf32> -> tensor<8x8xf32>
  %p = kiln.softmax %s {axis = 1 : i64} : tensor<8x8xf32>
  %o = kiln.matmul %p, %v : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %o, %p : tensor<8x16xf32>, tensor<8x8xf32>
}

// -----

// A softmax over another axis than the last is not attention.
// CHECK-LABEL: func.func @softmax_not_last_axis(
// CHECK-NOT:     "attention"
func.func @softmax_not_last_axis(%q: tensor<8x128xf32>, %kt: tensor<128x8xf32>, %v: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = kiln.matmul %q, %kt : tensor<8x128xf32>, tensor<128x8xf32> -> tensor<8x8xf32>
  %p = kiln.softmax %s {axis = 0 : i64} : tensor<8x8xf32>
  %o = kiln.matmul %p, %v : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %o : tensor<8x16xf32>
}
