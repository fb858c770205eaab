// RUN: kiln-opt %s --pass-pipeline="builtin.module(gpu.module(kiln-contract-float-ops))" | FileCheck %s
// A second run changes nothing.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(gpu.module(kiln-contract-float-ops))" \
// RUN:   | kiln-opt --pass-pipeline="builtin.module(gpu.module(kiln-contract-float-ops))" | FileCheck %s
// The pass has no failure modes: every float multiply, add and subtract in a
// GPU module may be contracted, whatever its type.

// CHECK-LABEL: gpu.func @mac
// CHECK:         %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK:         arith.addf %{{.*}}, %[[P]] fastmath<contract> : f32
// CHECK:         arith.subf %{{.*}}, %{{.*}} fastmath<contract> : f16
// Flags an op has are kept.
// CHECK:         arith.mulf %{{.*}}, %{{.*}} fastmath<nnan,contract> : vector<2xf32>
// Division and integer arithmetic are not contractions.
// CHECK:         arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.muli %{{.*}}, %{{.*}} : i32
// Host code is left alone.
// CHECK-LABEL: func.func @host
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
gpu.module @kernels {
  gpu.func @mac(%a: f32, %b: f32, %acc: f32, %h: f16, %v: vector<2xf32>, %i: i32) -> f32 {
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    %d = arith.subf %h, %h : f16
    %m = arith.mulf %v, %v fastmath<nnan> : vector<2xf32>
    %q = arith.divf %s, %a : f32
    %n = arith.muli %i, %i : i32
    gpu.return %q : f32
  }
}
func.func @host(%a: f32) -> f32 {
  %p = arith.mulf %a, %a : f32
  return %p : f32
}
