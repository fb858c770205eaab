// RUN: kiln-opt %s -kiln-align-kernel-args -split-input-file -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -kiln-align-kernel-args=alignment=64 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=A64
// RUN: not kiln-opt %s -kiln-align-kernel-args=alignment=24 -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// Buffers the runtime places (function arguments, allocations, globals) get
// llvm.align; scalars do not.
// CHECK-LABEL: gpu.func @whole
// CHECK-SAME: %arg0: memref<64xf32> {llvm.align = 16 : i64}
// CHECK-SAME: %arg1: memref<64xf32> {llvm.align = 16 : i64}
// CHECK-SAME: %arg2: memref<8xf32> {llvm.align = 16 : i64}
// CHECK-SAME: %arg3: f32)
// A64-LABEL: gpu.func @whole
// A64-SAME: %arg0: memref<64xf32> {llvm.align = 64 : i64}
// BAD: kiln-align-kernel-args: alignment 24 is not a positive power of two
module attributes {gpu.container_module} {
  memref.global "private" constant @w : memref<8xf32> = dense<1.0>
  func.func @main(%a: memref<64xf32>, %s: f32) {
    %c1 = arith.constant 1 : index
    %t = memref.alloc() : memref<64xf32>
    %w = memref.get_global @w : memref<8xf32>
    gpu.launch_func @k::@whole blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%a : memref<64xf32>, %t : memref<64xf32>, %w : memref<8xf32>, %s : f32)
    return
  }
  gpu.module @k {
    gpu.func @whole(%arg0: memref<64xf32>, %arg1: memref<64xf32>, %arg2: memref<8xf32>, %arg3: f32) kernel {
      gpu.return
    }
  }
}

// -----

// A parameter some launch passes a view of is left alone (its offset is
// not known to be aligned), even when another launch passes a whole buffer.
// CHECK-LABEL: gpu.func @viewed
// CHECK-SAME: %arg0: memref<4xf32, strided<[1], offset: ?>>)
// CHECK-NOT: llvm.align
module attributes {gpu.container_module} {
  func.func @main(%a: memref<64xf32>, %i: index) {
    %c1 = arith.constant 1 : index
    %v = memref.subview %a[%i] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
    gpu.launch_func @k::@viewed blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%v : memref<4xf32, strided<[1], offset: ?>>)
    return
  }
  gpu.module @k {
    gpu.func @viewed(%arg0: memref<4xf32, strided<[1], offset: ?>>) kernel {
      gpu.return
    }
  }
}

// -----

// A kernel no launch uses keeps its parameters as they are.
// CHECK-LABEL: gpu.func @unused
// CHECK-NOT: llvm.align
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @unused(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
}

// -----

// A buffer whose size is not a multiple of 16 bytes gets the largest power
// of two dividing its size (12 bytes: 4; 24 bytes: 8; 3 bytes: none), so
// that loads LLVM widens to their alignment stay inside it.
// CHECK-LABEL: gpu.func @odd_sizes
// CHECK-SAME: %arg0: memref<3xf32> {llvm.align = 4 : i64}
// CHECK-SAME: %arg1: memref<6xf32> {llvm.align = 8 : i64}
// CHECK-SAME: %arg2: memref<3xi8>)
module attributes {gpu.container_module} {
  func.func @main(%a: memref<3xf32>, %b: memref<6xf32>, %c: memref<3xi8>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k::@odd_sizes blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%a : memref<3xf32>, %b : memref<6xf32>, %c : memref<3xi8>)
    return
  }
  gpu.module @k {
    gpu.func @odd_sizes(%arg0: memref<3xf32>, %arg1: memref<6xf32>, %arg2: memref<3xi8>) kernel {
      gpu.return
    }
  }
}
