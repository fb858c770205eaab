// RUN: kiln-opt %s -split-input-file -kiln-materialize-call-operands -verify-diagnostics | FileCheck %s

// A view passed to a device loop's body (an unfused Reshape's
// expand_shape or collapse_shape, a Split part's subview) is copied into a
// whole buffer first; whole buffers (arguments, allocations, globals)
// pass as they are.
func.func private @body(memref<i1>, memref<i64>, memref<2x2xf32>, memref<4xf32>,
                        memref<8xf32>, memref<3xf32>, memref<i1> {bufferize.result},
                        memref<i64> {bufferize.result},
                        memref<2x2xf32> {bufferize.result})
    attributes {kiln.device_loop = 3 : i64}
memref.global "private" constant @w : memref<3xf32> = dense<[1.0, 2.0, 3.0]>

// CHECK-LABEL: func.func @main(
// CHECK-SAME:      %[[FLAG:[^:]*]]: memref<i1>, %[[I:[^:]*]]: memref<i64>, %[[A:[^:]*]]: memref<8xf32>
// CHECK:         %[[A2:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         %[[SHAPED:.*]] = memref.expand_shape %[[A2]]
// CHECK:         %[[B:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK:         %[[FLAT:.*]] = memref.collapse_shape %[[B]]
// CHECK:         %[[W:.*]] = memref.get_global @w
// CHECK:         %[[F:.*]] = memref.alloc() : memref<i1>
// CHECK:         %[[N:.*]] = memref.alloc() : memref<i64>
// CHECK:         %[[O:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK-NEXT:    %[[C1:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK-NEXT:    memref.copy %[[SHAPED]], %[[C1]]
// CHECK-NEXT:    %[[C2:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[FLAT]], %[[C2]]
// CHECK-NEXT:    call @body(%[[FLAG]], %[[I]], %[[C1]], %[[C2]], %[[A]], %[[W]], %[[F]], %[[N]], %[[O]])
func.func @main(%flag: memref<i1>, %i: memref<i64>, %a: memref<8xf32>) {
  %a2 = memref.alloc() : memref<4xf32>
  %shaped = memref.expand_shape %a2 [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  %b = memref.alloc() : memref<2x2xf32>
  %flat = memref.collapse_shape %b [[0, 1]] : memref<2x2xf32> into memref<4xf32>
  %w = memref.get_global @w : memref<3xf32>
  %f = memref.alloc() : memref<i1>
  %n = memref.alloc() : memref<i64>
  %o = memref.alloc() : memref<2x2xf32>
  call @body(%flag, %i, %shaped, %flat, %a, %w, %f, %n, %o) : (memref<i1>, memref<i64>, memref<2x2xf32>, memref<4xf32>, memref<8xf32>, memref<3xf32>, memref<i1>, memref<i64>, memref<2x2xf32>) -> ()
  return
}

// -----

func.func private @dynamic(memref<?xf32>)

func.func @view_of_dynamic_shape(%a: memref<8xf32>) {
  %v = memref.cast %a : memref<8xf32> to memref<?xf32>
  // expected-error @+1 {{passes a buffer view of dynamic shape 'memref<?xf32>' to a device-side loop's body}}
  call @dynamic(%v) : (memref<?xf32>) -> ()
  return
}
