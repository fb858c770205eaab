// RUN: kiln-opt %s -kiln-distinct-results | FileCheck %s

// A value returned three times gets a copy for its second and third results;
// a value returned once is left alone.
// CHECK-LABEL: func.func @thrice(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4xf32>, %[[Y:[^:]*]]: tensor<4xf32>
// CHECK:         %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK:         %[[C1:.*]] = linalg.copy ins(%[[X]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>)
// CHECK:         %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK:         %[[C2:.*]] = linalg.copy ins(%[[X]] : tensor<4xf32>) outs(%[[E2]] : tensor<4xf32>)
// CHECK:         return %[[X]], %[[C1]], %[[Y]], %[[C2]]
func.func @thrice(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  return %x, %x, %y, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
