// RUN: kiln-opt %s -split-input-file -verify-diagnostics | kiln-opt -split-input-file | FileCheck %s

// kiln.device_loop marks a device-side loop's body (DeviceLoop.cpp): its
// first k arguments are the loop state (flag, counter, carried values),
// paired with its results before bufferization ...

// CHECK-LABEL: func.func private @body
// CHECK-SAME: kiln.device_loop = 3 : i64
func.func private @body(%flag: tensor<i1>, %i: tensor<i64>, %h: tensor<4xf32>,
                        %m: tensor<i64>) -> (tensor<i1>, tensor<i64>, tensor<4xf32>)
    attributes {kiln.device_loop = 3 : i64} {
  return %flag, %i, %h : tensor<i1>, tensor<i64>, tensor<4xf32>
}
// CHECK-LABEL: func.func @main
// CHECK: call @body
func.func @main(%f: tensor<i1>, %i: tensor<i64>, %h: tensor<4xf32>,
                %m: tensor<i64>) -> tensor<4xf32> {
  %r:3 = call @body(%f, %i, %h, %m) : (tensor<i1>, tensor<i64>, tensor<4xf32>, tensor<i64>) -> (tensor<i1>, tensor<i64>, tensor<4xf32>)
  return %r#2 : tensor<4xf32>
}

// -----

// ... and with its first k out-parameters (trailing arguments marked
// bufferize.result) after it.
// CHECK-LABEL: func.func private @buffers
// CHECK-SAME: kiln.device_loop = 2 : i64
func.func private @buffers(%flag: memref<i1>, %i: memref<i64>,
                           %x: memref<4xf32>,
                           %flag_out: memref<i1> {bufferize.result},
                           %i_out: memref<i64> {bufferize.result})
    attributes {kiln.device_loop = 2 : i64} {
  return
}

// -----

// Results after the state are the last iteration's outputs (an If's
// branch run as a loop of at most one iteration).
// CHECK-LABEL: func.func private @branch
// CHECK-SAME: kiln.device_loop = 2 : i64
func.func private @branch(%flag: tensor<i1>, %i: tensor<i64>, %x: tensor<4xf32>)
    -> (tensor<i1>, tensor<i64>, tensor<4xf32>)
    attributes {kiln.device_loop = 2 : i64} {
  return %flag, %i, %x : tensor<i1>, tensor<i64>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'kiln.device_loop' belongs on a func.func (a device-side loop's body)}}
%0 = arith.constant {kiln.device_loop = 2 : i64} 0 : i32

// -----

// expected-error @+1 {{'kiln.device_loop' must be an integer of at least 2 (the flag, the counter and the carried values)}}
func.func private @one(%flag: tensor<i1>) -> tensor<i1>
    attributes {kiln.device_loop = 1 : i64}

// -----

// expected-error @+1 {{'kiln.device_loop' = 3 needs as many loop-state arguments and at least as many results (or trailing out-parameters); the body has 2 arguments and 2 results}}
func.func private @short(%flag: tensor<i1>, %i: tensor<i64>) -> (tensor<i1>, tensor<i64>)
    attributes {kiln.device_loop = 3 : i64}

// -----

// expected-error @+1 {{device loop state 2 enters as 'tensor<4xf32>' but leaves as 'tensor<3xf32>'}}
func.func private @shape(%flag: tensor<i1>, %i: tensor<i64>, %h: tensor<4xf32>) -> (tensor<i1>, tensor<i64>, tensor<3xf32>)
    attributes {kiln.device_loop = 3 : i64}

// -----

// expected-error @+1 {{device loop state 0 (the flag) must be one i1}}
func.func private @flag(%flag: tensor<2xi1>, %i: tensor<i64>) -> (tensor<2xi1>, tensor<i64>)
    attributes {kiln.device_loop = 2 : i64}

// -----

// expected-error @+1 {{device loop state 1 (the counter) must be one i64}}
func.func private @counter(%flag: tensor<i1>, %i: tensor<i32>) -> (tensor<i1>, tensor<i32>)
    attributes {kiln.device_loop = 2 : i64}
