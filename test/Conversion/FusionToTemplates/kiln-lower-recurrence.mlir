// RUN: kiln-opt %s -split-input-file -kiln-lower-recurrence | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-lower-recurrence="chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: kiln-opt %s -split-input-file -kiln-lower-recurrence="blocks=2 weights-in-shared=false" | FileCheck %s --check-prefix=FORCED
// RUN: not kiln-opt %s -split-input-file -kiln-lower-recurrence="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=CHIP

// Each kiln.recurrence becomes one call of the persistent kernel. The
// reverse direction of a bidirectional LSTM: R, h0 and c0 are slices of
// the [D, ...] values, read in place at element offsets (R's second
// direction starts at 16 x 4 = 64, the states' at 3 x 4 = 12). On sm_90
// H = 4 gives a cluster of 4 blocks (one unit each); sm_80 runs one
// block; the report line names the kernel.

// CHECK:       kiln.recurrence_report = ["kiln_rnn_0: persistent lstm, cluster of 4 x 64 threads (k split 4), R in shared memory; T 5, B 3, H 4, reverse: 1 launch per sequence, {{[0-9]+}} bytes of shared memory per block"]
// CHECK: gpu.binary @kiln_rnn_0
// CHECK-SAME: B = 3, BATCH = 3
// CHECK-SAME: BLOCKS = 4, THREADS = 64, KSPLIT = 4
// CHECK-SAME: REVERSE = true
// CHECK-SAME: PEEP = true, LENS = true
// CHECK-SAME: R_SHARED = true
// CHECK-SAME: X_OFF = 0, R_OFF = 64, H0_OFF = 12, C0_OFF = 12, P_OFF = 12, L_OFF = 0
// CHECK-SAME: __cluster_dims__(4, 1, 1)
// CHECK-SAME: kiln_rnn::recurrence(X, R, H0, C0, P, (const int *)L, nullptr, Y, YH, YC)
// CHECK-LABEL: func.func @lstm_reverse(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<5x3x16xf32>, %[[R:[^:]*]]: tensor<2x16x4xf32>, %[[H:[^:]*]]: tensor<2x3x4xf32>, %[[C:[^:]*]]: tensor<2x3x4xf32>, %[[P:[^:]*]]: tensor<2x12xf32>, %[[L:[^:]*]]: tensor<3xi32>)
// CHECK-NOT:     kiln.recurrence
// CHECK:         %[[Y:.*]]:3 = kiln.call_kernel @kiln_rnn_0::@kiln_rnn_0 ins(%[[X]], %[[R]], %[[H]], %[[C]], %[[P]], %[[L]] : tensor<5x3x16xf32>, tensor<2x16x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x12xf32>, tensor<3xi32>) outs({{.*}} : tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) grid [4, 1, 1] block [64, 1, 1] {dynamic_shared_bytes = {{[0-9]+}} : i32, kiln.flops = 1920 : i64}
// CHECK:         return %[[Y]]#0, %[[Y]]#1, %[[Y]]#2

// SM80: kiln.recurrence_report = ["kiln_rnn_0: persistent lstm, 1 block x 64 threads (k split 4), R in shared memory;
// SM80: gpu.binary @kiln_rnn_0
// SM80-SAME: BLOCKS = 1, THREADS = 64
// SM80-NOT: __cluster_dims__
// SM80: grid [1, 1, 1] block [64, 1, 1]

// FORCED: cluster of 2 x 64 threads (k split 4), R in global memory
// FORCED: gpu.binary @kiln_rnn_0
// FORCED-SAME: BLOCKS = 2
// FORCED-SAME: R_SHARED = false
// FORCED-SAME: __cluster_dims__(2, 1, 1)
// FORCED: grid [2, 1, 1]

// CHIP: error: kiln-lower-recurrence: unknown chip 'sm_75'

func.func @lstm_reverse(%x: tensor<5x3x16xf32>, %r: tensor<2x16x4xf32>,
                        %h: tensor<2x3x4xf32>, %c: tensor<2x3x4xf32>,
                        %p: tensor<2x12xf32>, %lens: tensor<3xi32>)
    -> (tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %r1 = kiln.slice %r {starts = array<i64: 1, 0, 0>, limits = array<i64: 2, 16, 4>, steps = array<i64: 1, 1, 1>} : tensor<2x16x4xf32> -> tensor<1x16x4xf32>
  %rd = kiln.reshape %r1 : tensor<1x16x4xf32> -> tensor<16x4xf32>
  %h1 = kiln.slice %h {starts = array<i64: 1, 0, 0>, limits = array<i64: 2, 3, 4>, steps = array<i64: 1, 1, 1>} : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
  %hd = kiln.reshape %h1 : tensor<1x3x4xf32> -> tensor<3x4xf32>
  %c1 = kiln.slice %c {starts = array<i64: 1, 0, 0>, limits = array<i64: 2, 3, 4>, steps = array<i64: 1, 1, 1>} : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
  %cd = kiln.reshape %c1 : tensor<1x3x4xf32> -> tensor<3x4xf32>
  %p1 = kiln.slice %p {starts = array<i64: 1, 0>, limits = array<i64: 2, 12>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<1x12xf32>
  %pd = kiln.reshape %p1 : tensor<1x12xf32> -> tensor<12xf32>
  %y, %yh, %yc = kiln.recurrence <lstm> %x, %rd, %hd initial_c(%cd)
      peepholes(%pd) sequence_lens(%lens)
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>, reverse}
      : (tensor<5x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>,
         tensor<3x4xf32>, tensor<12xf32>, tensor<3xi32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %y, %yh, %yc : tensor<5x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Two GRU layers of one shape share one kernel (the same source: the
// pointers are parameters); a slice that is not contiguous (every other
// unit) is not followed: the kernel reads the sliced value.

// CHECK: gpu.binary @kiln_rnn_0
// CHECK-SAME: LBR = true
// CHECK-SAME: RBIAS = true
// CHECK-SAME: R_OFF = 0
// CHECK-SAME: act1(float x) { return (0x1p+1f) * tanhf((0x1p-1f) * x); }
// CHECK-NOT: gpu.binary
// CHECK-LABEL: func.func @gru_twice(
// CHECK:         %[[S:.*]] = kiln.slice %{{.*}} {{.*}}steps = array<i64: 1, 2>}
// CHECK:         %[[A:.*]]:2 = kiln.call_kernel @kiln_rnn_0::@kiln_rnn_0 ins(%{{.*}}, %{{.*}}, %[[S]], %{{.*}} :
// CHECK:         kiln.call_kernel @kiln_rnn_0::@kiln_rnn_0 ins(

func.func @gru_twice(%x: tensor<5x3x12xf32>, %r: tensor<12x4xf32>,
                     %h: tensor<3x8xf32>, %rb: tensor<4xf32>)
    -> tensor<5x3x4xf32> {
  %hs = kiln.slice %h {starts = array<i64: 0, 0>, limits = array<i64: 3, 8>, steps = array<i64: 1, 2>} : tensor<3x8xf32> -> tensor<3x4xf32>
  %y, %yh = kiln.recurrence <gru> %x, %r, %hs reset_bias(%rb)
      {activations = ["sigmoid", "scaledtanh"],
       activation_alpha = array<f32: 0.0, 2.0>,
       activation_beta = array<f32: 0.0, 0.5>, linear_before_reset}
      : (tensor<5x3x12xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  %z, %zh = kiln.recurrence <gru> %x, %r, %hs reset_bias(%rb)
      {activations = ["sigmoid", "scaledtanh"],
       activation_alpha = array<f32: 0.0, 2.0>,
       activation_beta = array<f32: 0.0, 0.5>, linear_before_reset}
      : (tensor<5x3x12xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<4xf32>)
      -> (tensor<5x3x4xf32>, tensor<3x4xf32>)
  return %z : tensor<5x3x4xf32>
}

// -----

// A batch of 20: two clusters of 16 rows (the second holds 4), side by
// side in the grid (2 x 8 blocks).

// CHECK: kiln.recurrence_report = ["kiln_rnn_0: persistent gru, 2 clusters of 8 x 64 threads (k split 8), 16 batch rows a cluster, R in shared memory; T 3, B 20, H 8: 1 launch per sequence, {{[0-9]+}} bytes of shared memory per block"]
// CHECK: gpu.binary @kiln_rnn_0
// CHECK-SAME: B = 16, BATCH = 20
// CHECK-LABEL: func.func @gru_batch20(
// CHECK:         kiln.call_kernel @kiln_rnn_0::@kiln_rnn_0 {{.*}} grid [16, 1, 1] block [64, 1, 1]

func.func @gru_batch20(%x: tensor<3x20x24xf32>, %r: tensor<24x8xf32>,
                       %h: tensor<20x8xf32>) -> tensor<3x20x8xf32> {
  %y, %yh = kiln.recurrence <gru> %x, %r, %h
      {activations = ["sigmoid", "tanh"], activation_alpha = array<f32: 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0>}
      : (tensor<3x20x24xf32>, tensor<24x8xf32>, tensor<20x8xf32>)
      -> (tensor<3x20x8xf32>, tensor<20x8xf32>)
  return %y : tensor<3x20x8xf32>
}
