// RUN: kiln-opt %s -split-input-file -kiln-lower-recurrence="chip=sm_80" -verify-diagnostics
// RUN: not kiln-opt %s -split-input-file -kiln-lower-recurrence="blocks=16" 2>&1 | FileCheck %s --check-prefix=BLOCKS

// The errors of kiln-lower-recurrence. A state too large for one block's
// shared memory (the importer only makes recurrences whose state fits
// sm_80's; kiln-opt can write any): B 64 x H 1024 needs 2 h buffers, the
// gates and c in fp32, 1.8 MB. A cluster of 16 blocks is more than the
// kernel takes.

// BLOCKS: error: 'kiln.recurrence' op cannot become a persistent kernel on sm_90: blocks must be a power of two from 1 to min(8, H)

func.func @too_large(%x: tensor<2x64x4096xf32>, %r: tensor<4096x1024xf32>,
                     %h: tensor<64x1024xf32>, %c: tensor<64x1024xf32>)
    -> tensor<2x64x1024xf32> {
  // expected-error @+1 {{'kiln.recurrence' op cannot become a persistent kernel on sm_80: the state needs 1835008 bytes of shared memory per block, more than the 166912 available}}
  %y, %yh, %yc = kiln.recurrence <lstm> %x, %r, %h initial_c(%c)
      {activations = ["sigmoid", "tanh", "tanh"],
       activation_alpha = array<f32: 0.0, 0.0, 0.0>,
       activation_beta = array<f32: 0.0, 0.0, 0.0>}
      : (tensor<2x64x4096xf32>, tensor<4096x1024xf32>, tensor<64x1024xf32>,
         tensor<64x1024xf32>)
      -> (tensor<2x64x1024xf32>, tensor<64x1024xf32>, tensor<64x1024xf32>)
  return %y : tensor<2x64x1024xf32>
}
