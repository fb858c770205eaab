// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=flip,crop:2,normalize:0.5/0.25})" | FileCheck %s
// RUN: kiln-opt %S/Inputs/kiln-augment-nhwc.mlir --pass-pipeline="builtin.module(kiln-augment{spec=normalize:0.1,0.2,0.3/1,2,4,layout:nhwc input=img})" | FileCheck %s --check-prefix=NHWC
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=flip,rotate})" 2>&1 | FileCheck %s --check-prefix=BADTOKEN
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=crop:0})" 2>&1 | FileCheck %s --check-prefix=BADPAD
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=normalize:0.5,0.5/0.2})" 2>&1 | FileCheck %s --check-prefix=BADNORM
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=normalize:0.5,0.5/0.2,0.2})" 2>&1 | FileCheck %s --check-prefix=CHANNELS
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-augment{spec=flip input=labels})" 2>&1 | FileCheck %s --check-prefix=NOTIMAGE

// NCHW, crop + flip + normalize: @train_grad gets rng.key and rng.counter
// (no dropout added them); per-sample Philox draws (streams 2^31, 2^31+1,
// 2^31+2) pick the crop offsets (mod 5) and the flip (word < 0); the crop
// is a zero pad and two gather_elements, the flip a slice with step -1 and
// a select; @main only normalises.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x3x4x4xf32>
// CHECK-NOT:     kiln.philox
// CHECK:         %[[S:.*]] = kiln.sub %[[X]], %{{.*}} : tensor<2x3x4x4xf32>, tensor<1x1x1x1xf32> -> tensor<2x3x4x4xf32>
// CHECK:         %[[N:.*]] = kiln.div %[[S]], %{{.*}} : tensor<2x3x4x4xf32>, tensor<1x1x1x1xf32> -> tensor<2x3x4x4xf32>
// CHECK:         kiln.relu %[[N]]
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x3x4x4xf32> {kiln.name = "x"}, %{{[^:]*}}: tensor<2x3x4x4xf32> {kiln.name = "labels"}, %[[K:[^:]*]]: tensor<2xi32> {kiln.name = "rng.key"}, %[[C:[^:]*]]: tensor<4xi32> {kiln.name = "rng.counter"})
// CHECK:         %[[P:.*]] = kiln.pad <constant> %[[X]] {high = array<i64: 0, 0, 2, 2>, low = array<i64: 0, 0, 2, 2>} : tensor<2x3x4x4xf32> -> tensor<2x3x8x8xf32>
// CHECK:         %[[R:.*]] = kiln.philox %[[K]], %[[C]] {stream = 2147483648 : i64} : tensor<2xi32>, tensor<4xi32> -> tensor<2xi32>
// CHECK:         kiln.mod %[[R]], %{{.*}} : tensor<2xi32>, tensor<i32> -> tensor<2xi32>
// CHECK:         %[[G1:.*]] = kiln.gather_elements %[[P]], %{{.*}} {axis = 2 : i64} : tensor<2x3x8x8xf32>, tensor<2x3x4x8xi32> -> tensor<2x3x4x8xf32>
// CHECK:         kiln.philox %[[K]], %[[C]] {stream = 2147483649 : i64}
// CHECK:         %[[G2:.*]] = kiln.gather_elements %[[G1]], %{{.*}} {axis = 3 : i64} : tensor<2x3x4x8xf32>, tensor<2x3x4x4xi32> -> tensor<2x3x4x4xf32>
// CHECK:         kiln.philox %[[K]], %[[C]] {stream = 2147483650 : i64}
// CHECK:         %[[M:.*]] = kiln.slice %[[G2]] {limits = array<i64: 2, 3, 4, -1>, starts = array<i64: 0, 0, 0, 3>, steps = array<i64: 1, 1, 1, -1>}
// CHECK:         %[[F:.*]] = kiln.select %{{.*}}, %[[M]], %[[G2]] : tensor<2x1x1x1xi1>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>
// CHECK:         %[[S:.*]] = kiln.sub %[[F]]
// CHECK:         %[[N:.*]] = kiln.div %[[S]]
// CHECK:         kiln.relu %[[N]]
// NHWC-LABEL: func.func @main(
// NHWC:         kiln.sub %{{.*}}, %{{.*}} : tensor<2x4x4x3xf32>, tensor<1x1x1x3xf32> -> tensor<2x4x4x3xf32>
// NHWC-LABEL: func.func @train_grad(
// NHWC-NOT:     kiln.philox
// NHWC:         kiln.div %{{.*}}, %{{.*}} : tensor<2x4x4x3xf32>, tensor<1x1x1x3xf32> -> tensor<2x4x4x3xf32>
// BADTOKEN: kiln-augment: 'flip,rotate': 'rotate' is not flip, crop:PAD, normalize:MEAN/STD or layout:nchw|nhwc
// BADPAD: kiln-augment: 'crop:0': crop takes a positive padding, crop:PAD, got 'crop:0'
// BADNORM: kiln-augment: 'normalize:0.5,0.5/0.2': normalize takes MEAN/STD, one number or one per channel each
// CHANNELS: kiln-augment: input 'x' has 3 channels, normalize gives 2
// NOTIMAGE: kiln-augment: @main has no input 'labels'
// NHWC (Inputs/kiln-augment-nhwc.mlir): a named input, per-channel
// normalisation along the last dimension, no random ops without flip/crop.
module {
  func.func @main(%x: tensor<2x3x4x4xf32> {kiln.name = "x"}) -> (tensor<2x3x4x4xf32> {kiln.name = "y"}) {
    %y = kiln.relu %x : tensor<2x3x4x4xf32>
    return %y : tensor<2x3x4x4xf32>
  }
  func.func @train_grad(%x: tensor<2x3x4x4xf32> {kiln.name = "x"}, %t: tensor<2x3x4x4xf32> {kiln.name = "labels"}) -> (tensor<2x3x4x4xf32>) {
    %y = kiln.relu %x : tensor<2x3x4x4xf32>
    return %y : tensor<2x3x4x4xf32>
  }
}
