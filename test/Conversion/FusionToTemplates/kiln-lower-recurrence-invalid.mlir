// RUN: kiln-opt %s -split-input-file -kiln-lower-recurrence="chip=sm_80" -verify-diagnostics
// RUN: not kiln-opt %s -split-input-file -kiln-lower-recurrence="blocks=16" 2>&1 | FileCheck %s --check-prefix=BLOCKS

// The errors of kiln-lower-recurrence. A state too large for one block's
// shared memory even for one batch row (the importer only makes
// recurrences with H <= 4096; kiln-opt can write any): an RNN with H 16384
// needs two h buffers, the gate and its unit's state in fp32, 256 KB. A
// cluster of 16 blocks is more than the kernel takes.

// BLOCKS: error: 'kiln.recurrence' op cannot become a persistent kernel on sm_90: blocks must be a power of two from 1 to min(8, H)

func.func @too_large(%x: tensor<2x1x16384xf32>, %r: tensor<16384x16384xf32>,
                     %h: tensor<1x16384xf32>) -> tensor<2x1x16384xf32> {
  // expected-error @+1 {{'kiln.recurrence' op cannot become a persistent kernel on sm_80: the state needs 262144 bytes of shared memory per block, more than the 166912 available}}
  %y, %yh = kiln.recurrence <rnn> %x, %r, %h
      {activations = ["tanh"], activation_alpha = array<f32: 0.0>,
       activation_beta = array<f32: 0.0>}
      : (tensor<2x1x16384xf32>, tensor<16384x16384xf32>, tensor<1x16384xf32>)
      -> (tensor<2x1x16384xf32>, tensor<1x16384xf32>)
  return %y : tensor<2x1x16384xf32>
}
